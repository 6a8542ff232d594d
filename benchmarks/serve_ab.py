"""A/B of ``pytfrt serve`` configurations: several servers side by side, one model, interleaved.

Each variant is ``NAME=FLAGS`` (``pytfrt serve`` flags, space-separated; ``--backend=...``
picks the backend, default pytfrt; a ``VAR=VALUE`` word sets an environment variable of that
server, e.g. ``onepass=PYTFRT_JSON_SPLIT_BYTES=999999999``), e.g.::

    .venv/bin/python benchmarks/serve_ab.py --model mlp --clients 1 32 \\
        "h11=--http_parser=h11 --event_loop=asyncio" \\
        "fast=--http_parser=httptools --event_loop=uvloop"

All servers start first (the models of ``benchmarks/serve.py``: exported once into
``--work-dir``, the same compile cache); then every round runs every client count against every
variant in turn, so a change of machine load hits all variants alike.  Per variant and client
count it prints the medians over rounds of requests/s, p50 latency and the server's CPU time per
request, and writes ``TAG.json`` into ``--out``.  Only ratios within one run mean anything on a
shared machine.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import serve  # noqa: E402 - benchmarks/serve.py

from pytfrt.serving.loadgen import ServerProcess  # noqa: E402
from pytfrt.tools.bench import format_table, machine_info, progress, write_json  # noqa: E402


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``NAME=FLAGS`` -> (name, flags); raises ``ValueError`` without a name."""
    name, sep, flags = text.partition("=")
    if not sep or not name or name.startswith("-"):
        raise ValueError(f"a variant is NAME=FLAGS, got {text!r}")
    return name, shlex.split(flags)


def split_env(flags: list[str]) -> tuple[list[str], dict[str, str]]:
    """Separate ``VAR=VALUE`` environment settings from the ``--flags`` of a variant."""
    env = dict(f.split("=", 1) for f in flags if not f.startswith("-") and "=" in f)
    return [f for f in flags if f.startswith("-") or "=" not in f], env


def variant_server(name: str, words: list[str], paths: dict[str, dict[str, Path]], work: Path,
                   tag: str, command: list[str] | None = None) -> ServerProcess:
    """The (not yet started) server of variant ``name`` (``words``: its flags and ``VAR=VALUE``
    settings), serving the models at ``paths`` with the shared compile cache in ``work``."""
    flags, env = split_env(words)
    backend = next((f.split("=", 1)[1] for f in flags if f.startswith("--backend=")), "pytfrt")
    config = serve._config(paths, backend, work / f"{tag}-{name}.config")
    return ServerProcess(
        f"--model_config_file={config}", "--file_system_poll_wait_seconds=0",
        f"--compile_cache_dir={work / 'compiled'}", *flags,
        log_path=work / f"{tag}-{name}.log", env=env, command=command)


def add_run_arguments(parser: argparse.ArgumentParser, tag: str) -> None:
    """``--work-dir``, ``--out``, ``--tag`` (default ``tag``) and ``--quiet``."""
    parser.add_argument("--work-dir", type=Path,
                        default=Path(os.path.expanduser("~/.cache/pytfrt/bench_serve")))
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--tag", default=tag)
    parser.add_argument("--quiet", action="store_true")


def start_run(parser: argparse.ArgumentParser, argv: list[str] | None
              ) -> tuple[argparse.Namespace, dict[str, list[str]], Path, dict[str, Any]]:
    """Parse the arguments (``variants`` and ``--model`` among them) and export the model:
    (args, {variant name: words}, work directory, model paths)."""
    args = parser.parse_args(argv)
    try:
        variants = dict(parse_variant(v) for v in args.variants)
    except ValueError as exc:
        parser.error(str(exc))
    work: Path = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    paths = {args.model: serve.prepare(args.model, work, args.quiet)}
    serve._exit_on_sigterm()
    return args, variants, work, paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="NAME=FLAGS (see the module docstring)")
    parser.add_argument("--model", default="mlp", choices=list(serve.MODELS))
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--seconds", type=float, default=4.0, help="per run (default 4)")
    parser.add_argument("--rounds", type=int, default=3)
    add_run_arguments(parser, "serve_ab")
    args, variants, work, paths = start_run(parser, argv)
    servers: dict[str, ServerProcess] = {}
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    try:
        for name, words in variants.items():
            servers[name] = variant_server(name, words, paths, work, args.tag).start()
            serve._load(servers[name], args.model, 1, 1.0)  # warm-up
        for rnd in range(args.rounds):
            for clients in args.clients:
                for name, server in servers.items():
                    res, spent = serve._timed_load(server, args.model, clients, args.seconds)
                    record = {"throughput_rps": res.throughput,
                              "p50_ms": res.percentile(50) * 1e3,
                              "server_cpu_ms": spent / max(res.ok, 1) * 1e3,
                              "errors": res.error_count, "load": os.getloadavg()[0]}
                    runs.setdefault((name, clients), []).append(record)
                    progress(f"round {rnd + 1}/{args.rounds} {name:<12} {clients:3d} clients "
                             f"{record['throughput_rps']:8.1f} req/s  p50 {record['p50_ms']:8.2f} "
                             f"ms  server CPU/request {record['server_cpu_ms']:7.3f} ms  errors "
                             f"{res.error_count}  load {record['load']:.1f}", args.quiet)
        exits = {name: server.stop() for name, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    rows, summary = [], []
    for (name, clients), recs in runs.items():
        med = {k: float(np.median([r[k] for r in recs]))
               for k in ("throughput_rps", "p50_ms", "server_cpu_ms")}
        errors = sum(int(r["errors"]) for r in recs)
        summary.append({"variant": name, "flags": variants[name], "clients": clients,
                        "errors": errors, **{f"median_{k}": round(v, 3) for k, v in med.items()},
                        "rounds": recs})
        rows.append([name, clients, f"{med['throughput_rps']:.1f}", f"{med['p50_ms']:.2f}",
                     f"{med['server_cpu_ms']:.3f}", errors])
    print(format_table(["variant", "clients", "req/s (median)", "p50 ms (median)",
                        "server CPU ms/req", "errors"], rows))
    print(f"server exit statuses after SIGTERM: {exits}")
    output: dict[str, Any] = {
        "benchmark": "serve_ab", "command": " ".join(["benchmarks/serve_ab.py", *sys.argv[1:]]),
        "machine": machine_info(), "model": args.model, "seconds": args.seconds,
        "rounds": args.rounds, "results": summary,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.tag}.json", output)
    failed = any(s["errors"] for s in summary) or any(code != 0 for code in exits.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
