"""Serving benchmark: ``pytfrt serve`` with each backend under closed-loop HTTP load.

Three servers run side by side on loopback, one per backend, each serving the same two models
behind the identical HTTP layer:

============  ======================================================================
backend       what runs the model
============  ======================================================================
pytfrt        the SavedModel compiled by pytfrt (``CompiledModel.call_async``)
tensorflow    the same SavedModel in TensorFlow (its ``serving_default`` signature)
onnxruntime   the model converted to ONNX by tf2onnx, in ONNX Runtime
============  ======================================================================

Models (``benchmarks/tf_models.py``, random weights, fixed seeds): ``mlp`` (784-512-512-10) and
``resnet50`` (``keras.applications.ResNet50``, 224x224x3), both requested at batch 1 in the row
format.  Load comes from :func:`pytfrt.serving.loadgen.run_load` (keep-alive HTTP/1.1 clients in
a closed loop, bounded in time, 127.0.0.1 only).

Scenarios, interleaved backend by backend in ``--rounds`` rounds (the machine is shared, so
peers are compared within a round and over the same rounds, never across runs):

* ``latency``: 1 client -- the per-request latency (p50/p90/p99);
* ``throughput``: ``--clients`` clients (MLP) / ``--resnet-clients`` (ResNet-50) -- requests/s.

Then the soak: ``--soak-clients`` clients on the pytfrt MLP for ``--soak-seconds`` with the
server's resident memory sampled every second (errors must be zero, memory flat).  Each
backend's first response is checked against the TensorFlow backend's.  Prints a table, writes
``serve.json`` and ``serve.png`` into ``--out`` (``--tag`` renames them).  ``--batching`` and
``--intra-op N`` and ``--work-queue Q`` start every server with ``--enable_batching``,
``--tensorflow_intra_op_parallelism=N`` and ``--work_queue_type=Q``.

Run: ``pytfrt bench serve`` or ``.venv/bin/python benchmarks/serve.py`` (``--help``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from pytfrt.serving.loadgen import LoadResult, ServerProcess, run_load  # noqa: E402
from pytfrt.tools.bench import format_table, machine_info, progress, write_json  # noqa: E402

BACKENDS = ("pytfrt", "tensorflow", "onnxruntime")
MODELS = {
    "mlp": {"shape": (1, 784)},
    "resnet50": {"shape": (1, 224, 224, 3)},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options (shared by ``pytfrt bench serve`` and the script)."""
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="seconds per MLP scenario per round (default 5)")
    parser.add_argument("--resnet-seconds", type=float, default=15.0,
                        help="seconds per ResNet-50 scenario per round (default 15)")
    parser.add_argument("--clients", type=int, default=32,
                        help="clients of the MLP throughput scenario (default 32)")
    parser.add_argument("--resnet-clients", type=int, default=4,
                        help="clients of the ResNet-50 throughput scenario (default 4)")
    parser.add_argument("--soak-seconds", type=float, default=60.0,
                        help="soak duration (0 skips the soak; default 60)")
    parser.add_argument("--soak-clients", type=int, default=64)
    parser.add_argument("--batching", action="store_true",
                        help="start the servers with --enable_batching")
    parser.add_argument("--intra-op", type=int, default=0,
                        help="--tensorflow_intra_op_parallelism for every server (0: default)")
    parser.add_argument("--work-queue", default=None,
                        help="--work_queue_type for every server (default: the server's)")
    parser.add_argument("--tag", default="serve",
                        help="output file names: TAG.json, TAG.png (default serve)")
    parser.add_argument("--work-dir", type=Path,
                        default=Path(os.path.expanduser("~/.cache/pytfrt/bench_serve")),
                        help="where the exported models and the compile cache live")
    parser.add_argument("--out", type=Path, default=HERE / "results",
                        help="where serve.json and serve.png go (default benchmarks/results)")
    parser.add_argument("--quiet", action="store_true")


# -- models -------------------------------------------------------------------------------------


def _build(name: str) -> Any:
    import tf_models  # benchmarks/tf_models.py

    return tf_models.mlp() if name == "mlp" else tf_models.resnet50()


def prepare(name: str, work: Path, quiet: bool) -> dict[str, Path]:
    """Export model ``name`` as a SavedModel and as ONNX (reused when already there).

    Returns the base path per format: ``{"savedmodel": .../name_tf, "onnx": .../name_onnx}``.
    """
    saved = work / f"{name}_tf"
    onnx_base = work / f"{name}_onnx"
    if (saved / "1" / "saved_model.pb").exists() and (onnx_base / "1" / "model.onnx").exists():
        return {"savedmodel": saved, "onnx": onnx_base}
    progress(f"exporting {name} (SavedModel and ONNX) into {work}", quiet)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tf2onnx

    model = _build(name)
    model.export(str(saved / "1"), verbose=False)
    shape = (None, *MODELS[name]["shape"][1:])
    spec = (tf.TensorSpec(shape, tf.float32, name="x"),)

    @tf.function(input_signature=spec)  # type: ignore[misc]
    def forward(x: Any) -> Any:
        return model(x, training=False)

    proto, _ = tf2onnx.convert.from_function(forward, input_signature=spec, opset=17)
    (onnx_base / "1").mkdir(parents=True, exist_ok=True)
    tmp = onnx_base / "1" / "model.onnx.tmp"
    tmp.write_bytes(proto.SerializeToString())
    os.replace(tmp, onnx_base / "1" / "model.onnx")
    return {"savedmodel": saved, "onnx": onnx_base}


def _config(paths: dict[str, dict[str, Path]], backend: str, path: Path) -> Path:
    fmt = "onnx" if backend == "onnxruntime" else "savedmodel"
    entries = "\n".join(f'  config {{ name: "{name}" base_path: "{p[fmt]}" }}'
                        for name, p in paths.items())
    path.write_text(f"model_config_list {{\n{entries}\n}}\n")
    return path


# -- running ------------------------------------------------------------------------------------


def _body(name: str) -> bytes:
    x = np.random.default_rng(0).standard_normal(MODELS[name]["shape"]).astype(np.float32)
    return json.dumps({"instances": x.tolist()}).encode()


def _load(server: ServerProcess, name: str, clients: int, seconds: float) -> LoadResult:
    return run_load(f"{server.url}/v1/models/{name}:predict", _body(name), clients=clients,
                    duration=seconds, request_timeout=120.0)


def _merge(results: list[LoadResult]) -> LoadResult:
    merged = LoadResult(results[0].clients, sum(r.elapsed for r in results))
    for r in results:
        merged.latencies.extend(r.latencies)
        for kind, n in r.errors.items():
            merged.errors[kind] = merged.errors.get(kind, 0) + n
        merged.first_body = merged.first_body or r.first_body
    return merged


def _outputs(body: bytes) -> np.ndarray:
    return np.asarray(json.loads(body)["predictions"], dtype=np.float64)


class RssSampler:
    """Samples a process's resident memory every ``interval`` seconds on a thread."""

    def __init__(self, server: ServerProcess, interval: float = 1.0) -> None:
        self.server = server
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start = time.perf_counter()
        while not self._stop.is_set():
            rss = self.server.rss()
            if rss is not None:
                self.samples.append((time.perf_counter() - start, rss))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def soak(server: ServerProcess, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` clients on the MLP for ``seconds``, memory sampled; a summary record."""
    with RssSampler(server) as sampler:
        result = _load(server, "mlp", clients, seconds)
    rss = [s for _, s in sampler.samples]
    window = max(len(rss) // 6, 1)
    first, last = float(np.mean(rss[:window])), float(np.mean(rss[-window:]))
    return {
        **result.summary(),
        "rss_mb_first": round(first / 2**20, 1),
        "rss_mb_last": round(last / 2**20, 1),
        "rss_mb_max": round(max(rss) / 2**20, 1),
        "rss_growth_pct": round(100 * (last - first) / first, 2),
        "rss_samples_mb": [round(s / 2**20, 1) for s in rss],
    }


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; 0 on success, 1 if a server failed or requests failed."""
    work: Path = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    paths = {name: prepare(name, work, args.quiet) for name in args.models}
    servers: dict[str, ServerProcess] = {}
    flags = ["--file_system_poll_wait_seconds=0", f"--compile_cache_dir={work / 'compiled'}"]
    if args.batching:
        flags.append("--enable_batching")
    if args.intra_op:
        flags.append(f"--tensorflow_intra_op_parallelism={args.intra_op}")
    if args.work_queue:
        flags.append(f"--work_queue_type={args.work_queue}")
    try:
        for backend in args.backends:
            progress(f"starting the {backend} server", args.quiet)
            config = _config(paths, backend, work / f"{backend}.config")
            started = time.perf_counter()
            servers[backend] = ServerProcess(
                f"--backend={backend}", f"--model_config_file={config}", *flags,
                log_path=work / f"{args.tag}-{backend}.log").start()
            progress(f"  {backend} ready in {time.perf_counter() - started:.1f} s", args.quiet)
        scenarios = [(name, kind) for name in args.models for kind in ("latency", "throughput")]
        raw: dict[tuple[str, str, str], list[LoadResult]] = {}
        for name in args.models:  # warm-up: first calls (allocation, lazy init) are not timed
            for server in servers.values():
                _load(server, name, 1, 1.0)
        for rnd in range(args.rounds):
            for name, kind in scenarios:
                clients = 1 if kind == "latency" else (
                    args.clients if name == "mlp" else args.resnet_clients)
                seconds = args.seconds if name == "mlp" else args.resnet_seconds
                for backend, server in servers.items():
                    res = _load(server, name, clients, seconds)
                    raw.setdefault((backend, name, kind), []).append(res)
                    progress(f"round {rnd + 1}/{args.rounds} {backend:<11} {name:<8} {kind:<10} "
                             f"{res.throughput:8.1f} req/s  p50 {res.percentile(50) * 1e3:8.2f} ms"
                             f"  errors {res.error_count}", args.quiet)
        results = {key: _merge(value) for key, value in raw.items()}
        soak_record = None
        if args.soak_seconds > 0 and "pytfrt" in servers and "mlp" in args.models:
            progress(f"soak: {args.soak_clients} clients on the pytfrt MLP for "
                     f"{args.soak_seconds:.0f} s", args.quiet)
            soak_record = soak(servers["pytfrt"], args.soak_clients, args.soak_seconds)
        exits = {backend: server.stop() for backend, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    return report(args, results, soak_record, exits)


def report(args: argparse.Namespace, results: dict[tuple[str, str, str], LoadResult],
           soak_record: dict[str, Any] | None, exits: dict[str, int | None]) -> int:
    """Print the table, write serve.json and serve.png; the exit status."""
    rows = []
    records = []
    for (backend, name, kind), res in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][2],
                                                                               kv[0][0])):
        summary = res.summary()
        reference = results.get(("tensorflow", name, kind))
        ratio = None
        if reference is not None and reference.latencies and res.latencies:
            ratio = res.percentile(50) / reference.percentile(50)
        diff = None
        if reference is not None and reference.first_body and res.first_body:
            diff = float(np.max(np.abs(_outputs(res.first_body) - _outputs(reference.first_body))))
        records.append({"backend": backend, "model": name, "scenario": kind, **summary,
                        "p50_vs_tensorflow": None if ratio is None else round(ratio, 3),
                        "max_abs_diff_vs_tensorflow": diff})
        rows.append([name, kind, backend, summary["clients"], summary["requests"],
                     summary["errors"], f"{summary['throughput_rps']:.1f}",
                     f"{summary['p50_ms']:.2f}", f"{summary['p90_ms']:.2f}",
                     f"{summary['p99_ms']:.2f}", "-" if ratio is None else f"{ratio:.2f}x"])
    print(format_table(["model", "scenario", "backend", "clients", "requests", "errors", "req/s",
                        "p50 ms", "p90 ms", "p99 ms", "p50 vs tf"], rows))
    if soak_record is not None:
        print(f"\nsoak (pytfrt, mlp): {soak_record['clients']} clients, "
              f"{soak_record['seconds']:.0f} s, {soak_record['requests']} requests, "
              f"{soak_record['errors']} errors, {soak_record['throughput_rps']:.0f} req/s, "
              f"RSS {soak_record['rss_mb_first']} -> {soak_record['rss_mb_last']} MB "
              f"({soak_record['rss_growth_pct']:+.1f}%), max {soak_record['rss_mb_max']} MB")
    print(f"server exit statuses after SIGTERM: {exits}")
    record = {
        "benchmark": "serve",
        "command": "pytfrt bench serve " + " ".join(sys.argv[3:] if sys.argv[1:2] == ["bench"]
                                                    else sys.argv[1:]),
        "machine": machine_info(),
        "options": {k: str(v) for k, v in vars(args).items() if k != "func"},
        "results": records,
        "soak": soak_record,
        "exit_statuses": exits,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.tag}.json", record)
    _plot(records, soak_record, args.out / f"{args.tag}.png")
    failed = any(r["errors"] for r in records) or (soak_record and soak_record["errors"]) or \
        any(code != 0 for code in exits.values())
    return 1 if failed else 0


def _plot(records: list[dict[str, Any]], soak_record: dict[str, Any] | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r["model"] for r in records})
    backends = [b for b in BACKENDS if any(r["backend"] == b for r in records)]
    panels = [(m, k) for m in models for k in ("latency", "throughput")]
    ncols = len(panels) + (1 if soak_record else 0)
    fig, axes = plt.subplots(1, ncols, figsize=(4 * ncols, 3.8))
    axes = np.atleast_1d(axes)
    for ax, (model, kind) in zip(axes, panels, strict=False):
        recs = {r["backend"]: r for r in records if r["model"] == model and r["scenario"] == kind}
        values = [recs[b]["p50_ms"] if kind == "latency" else recs[b]["throughput_rps"]
                  for b in backends]
        ax.bar(backends, values, color=["tab:blue", "tab:orange", "tab:green"][:len(backends)])
        clients = next(iter(recs.values()))["clients"]
        ax.set_title(f"{model}: {'p50 latency' if kind == 'latency' else 'throughput'} "
                     f"({clients} client{'s' if clients > 1 else ''})", fontsize=9)
        ax.set_ylabel("ms" if kind == "latency" else "requests/s")
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    if soak_record:
        ax = axes[-1]
        ax.plot(soak_record["rss_samples_mb"])
        ax.set_title(f"soak: pytfrt mlp, {soak_record['clients']} clients, RSS", fontsize=9)
        ax.set_xlabel("s")
        ax.set_ylabel("MB")
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
