"""Where the time of one ``:predict`` request goes, per part, in ``pytfrt serve``.

Runs the same server as ``benchmarks/serve_ab.py`` (one per variant, the models of
``benchmarks/serve.py``), but started through this script, which wraps the server's steps with
clocks before handing over to ``pytfrt serve`` -- the request path itself is unchanged.  Per
request it records, on the server's own clock:

=============  ===================================================================================
part           from -> to
=============  ===================================================================================
receive        the ASGI call starts (headers parsed) -> the whole body is in one ``bytes``
               (includes waiting for the client to send it; ``chunks`` = ASGI body messages)
hand-off       body read -> the request's task starts on a work-queue thread
decode         ``decode_predict_request`` (JSON -> validated input arrays; for a big float
               tensor body, the scan of its last piece and the join of the pieces scanned
               while it arrived); ``decode_cpu`` its thread CPU time
model          ``servable.run`` (the model call, including the backend's own conversions)
encode         ``encode_predict_response`` (arrays -> response JSON)
hand-back      the task's result published -> the handler resumes on the event loop
send           handler resumed -> the response handed to the transport
outside        the client's latency minus the server's span (request write and header parsing,
               the response's transfer and parsing on the client)
=============  ===================================================================================

and, per run, the client's and the server's CPU time per request.  Variants are
``NAME=FLAGS`` as in ``benchmarks/serve_ab.py``, run one after the other.  It prints the
medians per variant (ms) and writes ``TAG.json`` into ``--out``.  The wrappers cost a few
microseconds per request.  Usage::

    .venv/bin/python benchmarks/serve_breakdown.py --model resnet50 --seconds 8 --tag h \\
        pytfrt= onepass=PYTFRT_JSON_SPLIT_BYTES=999999999 tensorflow=--backend=tensorflow
"""

from __future__ import annotations

import argparse
import atexit
import contextvars
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

PARTS = ("receive", "hand-off", "decode", "model", "encode", "hand-back", "send", "outside")


# -- the server side (``--child TRACE -- FLAGS``) ------------------------------------------------


def _install_hooks(trace_path: Path) -> None:
    """Wrap the app's steps with clocks; write every request's record to ``trace_path`` at exit."""
    import importlib

    from pytfrt.serving import app as app_module
    from pytfrt.serving import pytfrt_backend

    tf_backend: Any = importlib.import_module("pytfrt.serving.tf_backend")

    records: list[dict[str, Any]] = []
    current: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("record")
    by_body: dict[int, dict[str, Any]] = {}
    local = threading.local()
    now = time.perf_counter

    original_call = app_module.ServingApp.__call__
    original_read = app_module.ServingApp._read_body
    original_decode = app_module.decode_predict_request
    original_encode = app_module.encode_predict_response
    original_wrap = app_module.wrap_future

    async def call(self: Any, scope: Any, receive: Any, send: Any) -> None:
        record: dict[str, Any] = {"start": now()}
        current.set(record)
        await original_call(self, scope, receive, send)
        record["sent"] = now()
        if "decoded" in record:
            records.append(record)

    async def read_body(self: Any, scope: Any, receive: Any, signature: Any = None) -> Any:
        record = current.get()
        chunks = [0]

        async def counting() -> Any:
            message = await receive()
            chunks[0] += 1
            return message

        body, scanned = await original_read(self, scope, counting, signature)
        record["body_read"] = now()
        record["chunks"] = chunks[0]
        by_body[id(body)] = record
        return body, scanned

    def decode(body: Any, signature: Any, scanned: Any = None) -> Any:
        record = by_body.pop(id(body), {})
        local.record = record
        record["task_start"] = now()
        cpu = time.thread_time()
        try:
            return original_decode(body, signature, scanned)
        finally:
            record["decode_cpu"] = time.thread_time() - cpu
            record["decoded"] = now()

    def encode(fmt: str, outputs: Any) -> bytes:
        record = getattr(local, "record", {})
        record["encode_start"] = now()
        try:
            return original_encode(fmt, outputs)
        finally:
            record["encoded"] = now()

    def wrap(value: Any, loop: Any) -> Any:
        record = current.get()
        future = original_wrap(value, loop)
        future.add_done_callback(lambda _: record.__setitem__("resumed", now()))
        return future

    def timed_run(original: Any) -> Any:
        def run(self: Any, inputs: Any) -> Any:
            record = getattr(local, "record", {})
            record["run_start"] = now()
            try:
                return original(self, inputs)
            finally:
                record["run_end"] = now()
        return run

    app_module.ServingApp.__call__ = call  # type: ignore[method-assign]
    app_module.ServingApp._read_body = read_body  # type: ignore[method-assign]
    app_module.decode_predict_request = decode
    app_module.encode_predict_response = encode
    app_module.wrap_future = wrap
    pytfrt_backend.PytfrtServable.run = timed_run(  # type: ignore[method-assign]
        pytfrt_backend.PytfrtServable.run)
    tf_backend.TensorFlowServable.run = timed_run(  # type: ignore[method-assign]
        tf_backend.TensorFlowServable.run)

    def dump() -> None:
        trace_path.write_text(json.dumps(records))

    atexit.register(dump)


def child(trace: str, flags: list[str]) -> int:
    _install_hooks(Path(trace))
    from pytfrt.tools.pytfrt_cli import main as cli_main

    return cli_main(["serve", *flags])


# -- the driver ----------------------------------------------------------------------------------


def parts_of(record: dict[str, Any], client_ms: float | None) -> dict[str, float]:
    """The per-part times (ms) of one request record (``client_ms``: the client's latency)."""
    ms = 1e3
    out = {
        "receive": (record["body_read"] - record["start"]) * ms,
        "hand-off": (record["task_start"] - record["body_read"]) * ms,
        "decode": (record["decoded"] - record["task_start"]) * ms,
        "decode_cpu": record["decode_cpu"] * ms,
        "model": (record["run_end"] - record["run_start"]) * ms,
        "encode": (record["encoded"] - record["encode_start"]) * ms,
        "hand-back": (record["resumed"] - record["encoded"]) * ms,
        "send": (record["sent"] - record["resumed"]) * ms,
        "server": (record["sent"] - record["start"]) * ms,
        "chunks": float(record["chunks"]),
    }
    if client_ms is not None:
        out["outside"] = client_ms - out["server"]
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--child":
        return child(argv[1], argv[3:] if argv[2:3] == ["--"] else argv[2:])
    import serve  # benchmarks/serve.py
    from serve_ab import add_run_arguments, start_run, variant_server

    from pytfrt.tools.bench import format_table, machine_info, progress, write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", choices=list(serve.MODELS))
    parser.add_argument("variants", nargs="*",
                        default=["pytfrt=", "tensorflow=--backend=tensorflow"],
                        help="NAME=FLAGS, as in benchmarks/serve_ab.py (default: pytfrt= "
                             "tensorflow=--backend=tensorflow)")
    parser.add_argument("--seconds", type=float, default=8.0)
    add_run_arguments(parser, "serve_breakdown")
    args, variants, work, paths = start_run(parser, argv)
    results: dict[str, Any] = {}
    rows = []
    for name, words in variants.items():
        trace = work / f"{args.tag}-{name}.trace.json"
        trace.unlink(missing_ok=True)
        server = variant_server(
            name, words, paths, work, args.tag,
            command=[sys.executable, str(Path(__file__).resolve()), "--child", str(trace), "--"])
        try:
            server.start()
            serve._load(server, args.model, 1, 1.0)  # warm-up
            client_cpu = time.process_time()
            res, spent = serve._timed_load(server, args.model, 1, args.seconds)
            client_cpu = time.process_time() - client_cpu
        finally:
            server.stop()
        records = json.loads(trace.read_text())[-res.ok:] if res.ok else []
        # One client: the server's last res.ok records are the run's, in the client's order.
        per = [parts_of(r, lat * 1e3) for r, lat in zip(records, res.latencies, strict=False)]
        med = {k: float(np.median([p[k] for p in per])) for k in per[0]} if per else {}
        med["client_p50"] = res.percentile(50) * 1e3
        med["server_cpu"] = spent / max(res.ok, 1) * 1e3
        med["client_cpu"] = client_cpu / max(res.ok, 1) * 1e3
        results[name] = {"flags": words, "medians_ms": {k: round(v, 3) for k, v in med.items()},
                            "requests": res.ok, "errors": res.error_count}
        rows.append([name, *(f"{med.get(k, float('nan')):.2f}" for k in PARTS),
                     f"{med.get('decode_cpu', float('nan')):.2f}",
                     f"{med.get('chunks', float('nan')):.0f}", f"{med['client_p50']:.2f}",
                     f"{med['server_cpu']:.2f}", f"{med['client_cpu']:.2f}", res.error_count])
        progress(f"{name}: {res.ok} requests, p50 {med['client_p50']:.2f} ms", args.quiet)
    print(format_table(["variant", *PARTS, "decode CPU", "chunks", "client p50",
                        "server CPU/req", "client CPU/req", "errors"], rows))
    output = {"benchmark": "serve_breakdown",
              "command": " ".join(["benchmarks/serve_breakdown.py", *argv]),
              "machine": machine_info(), "model": args.model, "seconds": args.seconds,
              "results": results, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.tag}.json", output)
    return 1 if any(r["errors"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
