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

``--protocol`` runs every scenario through each protocol named, against the same servers:
``rest`` (TF Serving's REST JSON, ``:predict``), ``grpc`` (TF Serving's gRPC ``Predict`` with
``tensor_content``, a pre-serialized request sent by :func:`~pytfrt.serving.loadgen.run_grpc_load`)
and ``v2`` (the Open Inference Protocol over REST with binary tensor data, as Triton's HTTP
client sends it).  The ratio column compares each backend with the TensorFlow backend through
the same protocol.

Then the soak, once per protocol: ``--soak-clients`` clients on the pytfrt MLP for
``--soak-seconds`` with the server's resident memory sampled every second (errors must be
zero, memory flat).  Each
backend's first response is checked against the TensorFlow backend's, and each scenario
records the server process's CPU time per request beside the wall-clock figures.

Before the servers start, the load generator's own ceiling is measured: the same MLP request
sent to a trivial HTTP endpoint (a fixed response, no parsing) in a subprocess, at 1 and
``--clients`` clients, with the generator's CPU time per request -- it must be far above the
rates it is used to measure.

Prints a table, writes ``serve.json`` and ``serve.png`` into ``--out`` (``--tag`` renames
them).  ``--batching`` and ``--intra-op N`` and ``--work-queue Q`` start every server with
``--enable_batching``, ``--tensorflow_intra_op_parallelism=N`` and ``--work_queue_type=Q``;
``--server-flag F`` (repeatable) passes any other flag.

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

from pytfrt.serving.loadgen import (  # noqa: E402
    LoadResult,
    ServerProcess,
    run_grpc_load,
    run_load,
)
from pytfrt.tools.bench import format_table, machine_info, progress, write_json  # noqa: E402

BACKENDS = ("pytfrt", "tensorflow", "onnxruntime")
PROTOCOLS = ("rest", "grpc", "v2")
MODELS: dict[str, dict[str, tuple[int, ...]]] = {
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
    parser.add_argument("--server-flag", action="append", default=[],
                        help="another flag for every server, e.g. --server-flag=--http_parser=h11 "
                             "(repeatable)")
    parser.add_argument("--ceiling-seconds", type=float, default=3.0,
                        help="seconds per load-generator ceiling run (0 skips it; default 3)")
    parser.add_argument("--tag", default="serve",
                        help="output file names: TAG.json, TAG.png (default serve)")
    parser.add_argument("--work-dir", type=Path,
                        default=Path(os.path.expanduser("~/.cache/pytfrt/bench_serve")),
                        help="where the exported models and the compile cache live")
    parser.add_argument("--out", type=Path, default=HERE / "results",
                        help="where serve.json and serve.png go (default benchmarks/results)")
    parser.add_argument("--protocol", nargs="+", default=["rest"], choices=PROTOCOLS,
                        help="the APIs the load goes through (default rest)")
    parser.add_argument("--quiet", action="store_true")


# -- models -------------------------------------------------------------------------------------


def _build(name: str) -> Any:
    import tf_models  # benchmarks/tf_models.py

    return tf_models.mlp() if name == "mlp" else tf_models.resnet50()


def prepare(name: str, work: Path, quiet: bool, onnx: bool = True) -> dict[str, Path]:
    """Export model ``name`` as a SavedModel and (``onnx``) as ONNX (reused when already there).

    Returns the base path per format: ``{"savedmodel": .../name_tf, "onnx": .../name_onnx}``.
    """
    saved = work / f"{name}_tf"
    onnx_base = work / f"{name}_onnx"
    have_saved = (saved / "1" / "saved_model.pb").exists()
    if have_saved and (not onnx or (onnx_base / "1" / "model.onnx").exists()):
        return {"savedmodel": saved, "onnx": onnx_base}
    progress(f"exporting {name} (SavedModel{' and ONNX' if onnx else ''}) into {work}", quiet)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    model = _build(name)
    if not have_saved:
        model.export(str(saved / "1"), verbose=False)
    if not onnx:
        return {"savedmodel": saved, "onnx": onnx_base}
    import tf2onnx

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


def _input(name: str) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(MODELS[name]["shape"]).astype(np.float32)


def _body(name: str) -> bytes:
    return json.dumps({"instances": _input(name).tolist()}).encode()


_input_names: dict[tuple[str, str], str] = {}


def _input_name(server: ServerProcess, name: str) -> str:
    """The model's one input name, from the server's metadata API (gRPC and v2 name it)."""
    key = (server.url, name)
    if key not in _input_names:
        import urllib.request

        with urllib.request.urlopen(f"{server.url}/v1/models/{name}/metadata",
                                    timeout=60) as response:
            meta = json.load(response)
        (_input_names[key],) = meta["metadata"]["signature_def"]["signature_def"][
            "serving_default"]["inputs"]
    return _input_names[key]


def _grpc_request(name: str, input_name: str) -> bytes:
    from pytfrt.serving import protos, tensor_proto

    request = protos.message_class("tensorflow.serving.PredictRequest")()
    request.model_spec.name = name
    tensor_proto.from_array(_input(name), request.inputs[input_name])
    return bytes(request.SerializeToString())


def _v2_request(name: str, input_name: str) -> tuple[bytes, dict[str, str]]:
    x = _input(name)
    header = json.dumps({
        "inputs": [{"name": input_name, "shape": list(x.shape), "datatype": "FP32",
                    "parameters": {"binary_data_size": x.nbytes}}],
        "parameters": {"binary_data_output": True},
    }).encode()
    return header + x.tobytes(), {"Inference-Header-Content-Length": str(len(header)),
                                  "Content-Type": "application/octet-stream"}


def _load(server: ServerProcess, name: str, clients: int, seconds: float,
          protocol: str = "rest") -> LoadResult:
    if protocol == "grpc":
        return run_grpc_load(server.grpc_target, "/tensorflow.serving.PredictionService/Predict",
                             _grpc_request(name, _input_name(server, name)), clients=clients,
                             duration=seconds,
                             request_timeout=120.0)
    if protocol == "v2":
        body, headers = _v2_request(name, _input_name(server, name))
        return run_load(f"{server.url}/v2/models/{name}/infer", body, clients=clients,
                        duration=seconds, request_timeout=120.0, headers=headers)
    return run_load(f"{server.url}/v1/models/{name}:predict", _body(name), clients=clients,
                    duration=seconds, request_timeout=120.0)


def _timed_load(server: ServerProcess, name: str, clients: int, seconds: float,
                protocol: str = "rest") -> tuple[LoadResult, float]:
    """A load run and the server's CPU seconds spent during it (NaN where unknown)."""
    before = server.cpu()
    result = _load(server, name, clients, seconds, protocol)
    after = server.cpu()
    spent = float("nan") if before is None or after is None else after - before
    return result, spent


# -- the load generator's ceiling ---------------------------------------------------------------

_TRIVIAL_RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"content-length: 20\r\n\r\n" + b'{"predictions":[1]}\n')


def trivial_server(port_file: str) -> None:
    """Answer every ``POST /`` on a connection with one fixed response (no HTTP parsing): the
    cheapest server the load generator can talk to.  Writes its port into ``port_file``."""
    import asyncio

    class Protocol(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            self.tail = b""

        def data_received(self, data: bytes) -> None:
            buf = self.tail + data
            n = buf.count(b"POST /")
            self.tail = buf[-5:]  # a marker split over two reads is counted once, next time
            if n:
                self.transport.write(_TRIVIAL_RESPONSE * n)

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Protocol, "127.0.0.1", 0)
        tmp = port_file + ".tmp"
        Path(tmp).write_text(str(server.sockets[0].getsockname()[1]))
        os.replace(tmp, port_file)
        await server.serve_forever()

    asyncio.run(serve())


def loadgen_ceiling(clients: list[int], seconds: float, work: Path) -> list[dict[str, Any]]:
    """The load generator's rate and CPU per request against :func:`trivial_server`."""
    import resource
    import subprocess

    port_file = work / "trivial.port"
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, __file__, "--trivial-server", str(port_file)])
    records = []
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the trivial endpoint did not start")
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}/v1/models/mlp:predict"
        for n in clients:
            before = resource.getrusage(resource.RUSAGE_SELF)
            res = run_load(url, _body("mlp"), clients=n, duration=seconds)
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            records.append({"clients": n, "requests": res.ok, "errors": res.error_count,
                            "throughput_rps": round(res.throughput, 1),
                            "client_cpu_us_per_request": round(cpu / max(res.ok, 1) * 1e6, 1)})
    finally:
        proc.terminate()
        proc.wait()
    return records


def _merge(results: list[LoadResult]) -> LoadResult:
    merged = LoadResult(results[0].clients, sum(r.elapsed for r in results))
    for r in results:
        merged.latencies.extend(r.latencies)
        for kind, n in r.errors.items():
            merged.errors[kind] = merged.errors.get(kind, 0) + n
        merged.first_body = merged.first_body or r.first_body
    return merged


def _outputs(body: bytes, protocol: str = "rest") -> np.ndarray:
    """The first output of a response body of ``protocol``."""
    if protocol == "grpc":
        from pytfrt.serving import protos, tensor_proto

        response = protos.message_class("tensorflow.serving.PredictResponse").FromString(body)
        (tensor,) = response.outputs.values()
        return tensor_proto.to_array(tensor, "output").astype(np.float64)
    if protocol == "v2":
        header, end = json.JSONDecoder().raw_decode(body.decode("latin-1"))
        (output,) = header["outputs"]
        return np.frombuffer(body[end:], np.float32).reshape(output["shape"]).astype(np.float64)
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


def soak(server: ServerProcess, clients: int, seconds: float, protocol: str = "rest"
         ) -> dict[str, Any]:
    """``clients`` clients on the MLP for ``seconds``, memory sampled; a summary record."""
    with RssSampler(server) as sampler:
        result = _load(server, "mlp", clients, seconds, protocol)
    rss = [s for _, s in sampler.samples]
    window = max(len(rss) // 6, 1)
    first, last = float(np.mean(rss[:window])), float(np.mean(rss[-window:]))
    return {
        **result.summary(),
        "protocol": protocol,
        "rss_mb_first": round(first / 2**20, 1),
        "rss_mb_last": round(last / 2**20, 1),
        "rss_mb_max": round(max(rss) / 2**20, 1),
        "rss_growth_pct": round(100 * (last - first) / first, 2),
        "rss_samples_mb": [round(s / 2**20, 1) for s in rss],
    }


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; 0 on success, 1 if a server failed or requests failed."""
    _exit_on_sigterm()
    work: Path = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    paths = {name: prepare(name, work, args.quiet, onnx="onnxruntime" in args.backends)
             for name in args.models}
    servers: dict[str, ServerProcess] = {}
    flags = ["--file_system_poll_wait_seconds=0", f"--compile_cache_dir={work / 'compiled'}"]
    if args.batching:
        flags.append("--enable_batching")
    if args.intra_op:
        flags.append(f"--tensorflow_intra_op_parallelism={args.intra_op}")
    if args.work_queue:
        flags.append(f"--work_queue_type={args.work_queue}")
    flags += args.server_flag
    ceiling = []
    if args.ceiling_seconds > 0:
        ceiling = loadgen_ceiling(sorted({1, args.clients, args.soak_clients}),
                                  args.ceiling_seconds, work)
        for c in ceiling:
            progress(f"load generator ceiling (trivial endpoint), {c['clients']:3d} clients: "
                     f"{c['throughput_rps']:8.0f} req/s, {c['client_cpu_us_per_request']} us "
                     "client CPU per request", args.quiet)
    try:
        for backend in args.backends:
            progress(f"starting the {backend} server", args.quiet)
            config = _config(paths, backend, work / f"{backend}.config")
            started = time.perf_counter()
            servers[backend] = ServerProcess(
                f"--backend={backend}", f"--model_config_file={config}", *flags,
                log_path=work / f"{args.tag}-{backend}.log").start()
            progress(f"  {backend} ready in {time.perf_counter() - started:.1f} s", args.quiet)
        scenarios = [(name, kind, protocol) for name in args.models
                     for kind in ("latency", "throughput") for protocol in args.protocol]
        raw: dict[tuple[str, str, str, str], list[LoadResult]] = {}
        cpu: dict[tuple[str, str, str, str], float] = {}
        for name in args.models:  # warm-up: first calls (allocation, lazy init) are not timed
            for server in servers.values():
                for protocol in args.protocol:
                    _load(server, name, 1, 1.0, protocol)
        for rnd in range(args.rounds):
            for name, kind, protocol in scenarios:
                clients = 1 if kind == "latency" else (
                    args.clients if name == "mlp" else args.resnet_clients)
                seconds = args.seconds if name == "mlp" else args.resnet_seconds
                for backend, server in servers.items():
                    key = (backend, name, kind, protocol)
                    res, spent = _timed_load(server, name, clients, seconds, protocol)
                    raw.setdefault(key, []).append(res)
                    cpu[key] = cpu.get(key, 0.0) + spent
                    progress(f"round {rnd + 1}/{args.rounds} {backend:<11} {name:<8} {kind:<10} "
                             f"{protocol:<4} "
                             f"{res.throughput:8.1f} req/s  p50 {res.percentile(50) * 1e3:8.2f} ms"
                             f"  server CPU/request {spent / max(res.ok, 1) * 1e3:7.2f} ms"
                             f"  errors {res.error_count}  load {os.getloadavg()[0]:.1f}",
                             args.quiet)
        results = {key: _merge(value) for key, value in raw.items()}
        soak_records = []
        if args.soak_seconds > 0 and "pytfrt" in servers and "mlp" in args.models:
            for protocol in args.protocol:
                progress(f"soak: {args.soak_clients} clients on the pytfrt MLP over {protocol} "
                         f"for {args.soak_seconds:.0f} s", args.quiet)
                soak_records.append(soak(servers["pytfrt"], args.soak_clients,
                                         args.soak_seconds, protocol))
        exits = {backend: server.stop() for backend, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    return report(args, results, soak_records, exits, cpu, ceiling)


def report(args: argparse.Namespace, results: dict[tuple[str, str, str, str], LoadResult],
           soak_records: list[dict[str, Any]], exits: dict[str, int | None],
           cpu: dict[tuple[str, str, str, str], float], ceiling: list[dict[str, Any]]) -> int:
    """Print the table, write serve.json and serve.png; the exit status."""
    rows = []
    records = []
    for (backend, name, kind, protocol), res in sorted(
            results.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][3], kv[0][0])):
        summary = res.summary()
        reference = results.get(("tensorflow", name, kind, protocol))
        ratio = None
        if reference is not None and reference.latencies and res.latencies:
            ratio = res.percentile(50) / reference.percentile(50)
        diff = None
        if reference is not None and reference.first_body and res.first_body:
            diff = float(np.max(np.abs(_outputs(res.first_body, protocol)
                                       - _outputs(reference.first_body, protocol))))
        cpu_ms = cpu.get((backend, name, kind, protocol), float("nan")) / max(res.ok, 1) * 1e3
        records.append({"backend": backend, "model": name, "scenario": kind,
                        "protocol": protocol, **summary,
                        "server_cpu_ms_per_request": round(cpu_ms, 3),
                        "p50_vs_tensorflow": None if ratio is None else round(ratio, 3),
                        "max_abs_diff_vs_tensorflow": diff})
        rows.append([name, kind, protocol, backend, summary["clients"], summary["requests"],
                     summary["errors"], f"{summary['throughput_rps']:.1f}",
                     f"{summary['p50_ms']:.2f}", f"{summary['p90_ms']:.2f}",
                     f"{summary['p99_ms']:.2f}", f"{cpu_ms:.2f}",
                     "-" if ratio is None else f"{ratio:.2f}x"])
    for c in ceiling:
        print(f"load generator ceiling (trivial endpoint): {c['clients']} clients "
              f"{c['throughput_rps']:.0f} req/s, {c['client_cpu_us_per_request']} us client CPU "
              "per request")
    print(format_table(["model", "scenario", "protocol", "backend", "clients", "requests",
                        "errors", "req/s",
                        "p50 ms", "p90 ms", "p99 ms", "server CPU ms/req", "p50 vs tf"], rows))
    for soak_record in soak_records:
        print(f"\nsoak (pytfrt, mlp, {soak_record['protocol']}): {soak_record['clients']} clients, "
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
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "loadgen_ceiling": ceiling,
        "results": records,
        "soak": soak_records,
        "exit_statuses": exits,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.tag}.json", record)
    _plot(records, soak_records, args.out / f"{args.tag}.png")
    failed = any(r["errors"] for r in records) or any(s["errors"] for s in soak_records) or \
        any(code != 0 for code in exits.values())
    return 1 if failed else 0


def _plot(records: list[dict[str, Any]], soak_records: list[dict[str, Any]], path: Path
          ) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r["model"] for r in records})
    panels = [(m, k) for m in models for k in ("latency", "throughput")]
    ncols = len(panels) + (1 if soak_records else 0)
    fig, axes = plt.subplots(1, ncols, figsize=(4.5 * ncols, 4.2))
    axes = np.atleast_1d(axes)
    for ax, (model, kind) in zip(axes, panels, strict=False):
        recs = [r for r in records if r["model"] == model and r["scenario"] == kind]
        recs.sort(key=lambda r: (PROTOCOLS.index(r["protocol"]), BACKENDS.index(r["backend"])))
        labels = [f"{r['backend']}\n{r['protocol']}" for r in recs]
        values = [r["p50_ms"] if kind == "latency" else r["throughput_rps"] for r in recs]
        colors = {"pytfrt": "tab:blue", "tensorflow": "tab:orange", "onnxruntime": "tab:green"}
        ax.bar(range(len(recs)), values, color=[colors[r["backend"]] for r in recs])
        ax.set_xticks(range(len(recs)), labels, fontsize=6)
        clients = recs[0]["clients"] if recs else 0
        ax.set_title(f"{model}: {'p50 latency' if kind == 'latency' else 'throughput'} "
                     f"({clients} client{'s' if clients > 1 else ''})", fontsize=9)
        ax.set_ylabel("ms" if kind == "latency" else "requests/s")
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:.1f}", ha="center", va="bottom", fontsize=6)
    if soak_records:
        ax = axes[-1]
        for record in soak_records:
            ax.plot(record["rss_samples_mb"], label=record["protocol"])
        ax.set_title(f"soak: pytfrt mlp, {soak_records[0]['clients']} clients, RSS", fontsize=9)
        ax.set_xlabel("s")
        ax.set_ylabel("MB")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--trivial-server"]:  # the subprocess of loadgen_ceiling
        trivial_server(argv[1])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def _exit_on_sigterm() -> None:
    """SIGTERM ends the run through ``run``'s clean-up (the servers are stopped, not orphaned)."""
    import signal

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


if __name__ == "__main__":
    sys.exit(main())
