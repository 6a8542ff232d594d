"""Model benchmark: the zoo through pytfrt vs ONNX Runtime, OpenVINO, tf.function, TF eager and
PyTorch eager.

For each model of the zoo (``benchmarks/zoo.py``: ResNet-50, MobileNetV3-small,
EfficientNet-B0, a 2-layer BERT-base-width Transformer encoder at sequence 128, BERT-base at
sequence 128 and GPT-2 small at sequence 64 from ``transformers`` configurations, and Keras'
ResNet50 converted by tf2onnx) and each batch size, it measures the latency of one call in
every framework that can run the model, interleaved repetition by repetition (the machine is
shared: peers are compared within one run, never across runs):

============  ================================================================================
peer          what runs
============  ================================================================================
pytfrt        ``pytfrt.compile(model.onnx)`` (the ONNX front end, default pipeline)
onnxruntime   ``onnxruntime.InferenceSession`` on the same file (CPU provider)
openvino      OpenVINO's CPU plugin on the same file (``openvino`` package; float32 inference
              precision, latency hint, the file reshaped to each input shape and compiled once)
torch         the ``torch.nn.Module`` the file was exported from, ``torch.inference_mode``
tf.function   the Keras model under ``tf.function`` (Keras models only)
tf-eager      the Keras model called eagerly (Keras models only)
============  ================================================================================

Every peer's output is checked against ONNX Runtime (relative error, max over outputs) before
timing.  Models of ``benchmarks/tf_models.py`` (the TF front end's test models) are added when
that module exists, compiled by ``pytfrt.compile`` from the Keras model.  Options add a
steady-state memory check (RSS over N calls, in a subprocess that imports only pytfrt) and a
per-op-type profile of pytfrt's time.  Prints a table, writes ``models.json`` and ``models.png``
into the output directory.

Run: ``pytfrt bench models`` or ``.venv/bin/python benchmarks/models.py`` (``--help``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import zoo  # noqa: E402  (benchmarks/zoo.py; the name 'benchmarks' is taken by xDSL)

from pytfrt.tools.bench import (  # noqa: E402
    format_table,
    machine_info,
    progress,
    progress_bar,
    write_json,
)

PEERS = ("pytfrt", "pytfrt-tf", "onnxruntime", "openvino", "torch", "tf.function", "tf-eager")
DEFAULT_MODELS = (
    "resnet50",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "transformer",
    "bert",
    "gpt2",
    "keras_resnet50",
    "tf:mlp",
)
TF_PEERS = {"pytfrt-tf", "tf.function", "tf-eager"}
TOLERANCE = 1e-4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options (shared by ``pytfrt bench models`` and the script)."""
    parser.add_argument(
        "--models",
        nargs="+",
        default=list(DEFAULT_MODELS),
        help=f"zoo models (default: all of {', '.join(DEFAULT_MODELS)}), "
        "plus tf:<name> for benchmarks/tf_models.py models",
    )
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    parser.add_argument(
        "--transformer-batches",
        nargs="+",
        type=int,
        default=[1],
        help="batch sizes of the token-id models (transformer, bert, gpt2)",
    )
    parser.add_argument("--peers", nargs="+", default=list(PEERS), choices=PEERS)
    parser.add_argument("--repeats", type=int, default=15, help="timed calls per peer")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="intra-op threads for every peer (pytfrt: OMP_NUM_THREADS for its GEMM); "
        "default: the CPU count",
    )
    parser.add_argument(
        "--small", action="store_true", help="the zoo's small configurations (a smoke run)"
    )
    parser.add_argument("--zoo-dir", default=os.environ.get("PYTFRT_ZOO_DIR", "/tmp/pytfrt-zoo"))
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--name", default="models", help="result file stem")
    parser.add_argument(
        "--memory",
        type=int,
        default=0,
        metavar="CALLS",
        help="also measure pytfrt's RSS over CALLS calls (ResNet-50, batch 1)",
    )
    parser.add_argument("--memory-model", default="resnet50")
    parser.add_argument(
        "--profile",
        nargs="*",
        metavar="MODEL",
        help="also profile pytfrt's time per op type at batch 1 (the given models, default: all)",
    )
    parser.add_argument("--profile-calls", type=int, default=10)
    parser.add_argument(
        "--no-tf-models", action="store_true", help="skip benchmarks/tf_models.py even if present"
    )
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--int8",
        action="store_true",
        help="pytfrt.quantize's int8 model vs pytfrt float32 and ONNX Runtime's int8 model "
        "(benchmarks/models_int8.py; default models resnet50 and bert)",
    )
    parser.add_argument("--calibration-batches", type=int, default=8, help="with --int8")
    parser.add_argument(
        "--calibration", default="minmax", choices=("minmax", "percentile", "entropy"),
        help="with --int8: pytfrt.quantize's calibration",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MODULE.NAME=VALUE",
        help="set a module switch before anything runs, e.g. "
        "pytfrt.backends.cpu._dnnl_conv.SPIN_POOL=False (a Python literal; repeatable)",
    )
    parser.add_argument("--profile-child", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument(
        "--memory-child",
        nargs=5,
        metavar=("PATH", "WARM_PATH", "INPUT", "SHAPE", "CALLS"),
        help=argparse.SUPPRESS,
    )


# -- peers ---------------------------------------------------------------------------------


def _pytfrt_runner(zm: Any) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """pytfrt on the ONNX file (the ONNX front end)."""
    import pytfrt

    return by_name(pytfrt.compile(zm.path))


def _pytfrt_tf_runner(zm: Any) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """pytfrt on the Keras model (the TensorFlow front end)."""
    import pytfrt

    model = pytfrt.compile(zm.keras)
    return lambda feeds: as_list(model(*feeds.values()))


def as_list(out: Any) -> list[np.ndarray]:
    """A model's outputs (one array, a tuple/list or a dict of them) as a list of arrays."""
    if isinstance(out, dict):
        return [np.asarray(v) for v in out.values()]
    if isinstance(out, tuple | list):
        return [np.asarray(v) for v in out]
    return [np.asarray(out)]


def by_name(model: Any) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """A runner calling ``model`` with its inputs by name, outputs as a list of arrays."""
    return lambda feeds: as_list(model(**feeds))


def _ort_runner(zm: Any, threads: int) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    # Idle ORT threads spin by default, stealing the cores from the peer timed next.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(str(zm.path), opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]

    def call(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return list(sess.run(None, {n: feeds[n] for n in names}))

    return call


def _openvino_runner(
    zm: Any, threads: int
) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """OpenVINO's CPU plugin on the ONNX file: float32 precision (its default on CPUs with AMX
    or AVX-512 bf16 is bf16, which would not meet the 1e-4 agreement), the latency hint and
    ``threads`` inference threads; the model is reshaped to each feed's shapes and compiled once
    per shape (static shapes, as a deployment would)."""
    import openvino as ov

    core = ov.Core()
    config = {
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": "f32",
    }
    compiled: dict[tuple[Any, ...], Any] = {}

    def call(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        key = tuple((n, v.shape) for n, v in feeds.items())
        req = compiled.get(key)
        if req is None:
            model = core.read_model(str(zm.path))
            model.reshape({n: ov.PartialShape(list(v.shape)) for n, v in feeds.items()})
            req = compiled[key] = core.compile_model(model, "CPU", config).create_infer_request()
        req.infer(feeds)
        return [np.array(t.data, copy=True) for t in req.output_tensors]

    return call


def _torch_runner(zm: Any) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    import torch

    module = zm.torch_module

    def call(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        with torch.inference_mode():
            out = module(*[torch.from_numpy(v) for v in feeds.values()])
        return [out.numpy()]

    return call


def _tf_runners(zm: Any) -> dict[str, Callable[[dict[str, np.ndarray]], list[np.ndarray]]]:
    import tensorflow as tf

    keras_model = zm.keras
    spec = [tf.TensorSpec((None, *v[0][1:]), getattr(tf, v[1])) for v in zm.inputs.values()]

    @tf.function(input_signature=spec)  # type: ignore[misc]
    def graph_fn(*xs: Any) -> Any:
        return keras_model(*xs, training=False)

    def as_np(out: Any) -> list[np.ndarray]:
        if isinstance(out, dict):
            return [np.asarray(v) for v in out.values()]
        if isinstance(out, tuple | list):
            return [np.asarray(v) for v in out]
        return [out.numpy()]

    return {
        "tf.function": lambda feeds: as_np(graph_fn(*feeds.values())),
        "tf-eager": lambda feeds: as_np(keras_model(*feeds.values(), training=False)),
    }


# -- models --------------------------------------------------------------------------------


TF_MODELS = {"mlp": ((784,), "mlp"),
             **{name: ((224, 224, 3), name) for name in (
                 "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "resnet50")}}
"""``tf:<name>`` models of ``benchmarks/tf_models.py``: input shape (no batch), builder."""


def _tf_model(name: str, small: bool) -> Any:
    """A ``benchmarks/tf_models.py`` model as a zoo-like record (source ``"tf"``)."""
    import tf_models  # the TensorFlow front end's benchmark models (benchmarks/tf_models.py)

    shape, builder = TF_MODELS[name]
    if name == "mlp":
        model = tf_models.mlp()
    else:
        size = 32 if small else shape[0]
        shape = (size, size, 3)
        model = getattr(tf_models, builder)(size=size)
    rec = zoo.ZooModel(
        f"tf:{name}",
        Path("-"),
        {"x": ((None, *shape), "float32")},
        {},
        _keras_inputs((None, *shape)),
        None,
        "tf",
    )
    rec.keras = model
    return rec


def _keras_inputs(shape: tuple[Any, ...]) -> Callable[..., dict[str, np.ndarray]]:
    def make(batch: int = 1, seq: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        return {"x": rng.standard_normal((batch, *shape[1:]), dtype=np.float32)}

    return make


# -- timing --------------------------------------------------------------------------------


def _time_interleaved(
    runners: dict[str, Callable[[dict[str, np.ndarray]], Any]],
    feeds: dict[str, np.ndarray],
    repeats: int,
    warmup: int,
    desc: str = "timing",
    quiet: bool = False,
) -> dict[str, list[float]]:
    names = list(runners)
    for _ in range(warmup):
        for n in names:
            runners[n](feeds)
    times: dict[str, list[float]] = {n: [] for n in names}
    gc_on = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for r in progress_bar(range(repeats), desc, quiet, unit="round"):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                t0 = time.perf_counter()
                runners[n](feeds)
                times[n].append(time.perf_counter() - t0)
    finally:
        if gc_on:
            gc.enable()
    return times


def _stats(ts: list[float]) -> dict[str, float]:
    a = np.asarray(ts) * 1e3
    return {
        "median_ms": float(np.median(a)),
        "p90_ms": float(np.percentile(a, 90)),
        "min_ms": float(a.min()),
    }


THREAD_VARS = (
    "PYTFRT_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)
"""Environment variables that fix a library's thread count when it loads."""


def _exec_with_threads(threads: int) -> None:
    """Re-run this command with :data:`THREAD_VARS` set to ``threads``, unless they are.

    NumPy's BLAS and pytfrt's thread pool read them when they load, which happened before the
    options were parsed; children (the memory and profile runs) inherit them.
    """
    want = str(threads)
    if all(os.environ.get(v) == want for v in THREAD_VARS):
        return
    env = {**os.environ, **dict.fromkeys(THREAD_VARS, want)}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def _set_threads(threads: int, peers: list[str]) -> None:
    """The same intra-op thread count for every peer (pytfrt and NumPy: the environment, see
    :func:`_exec_with_threads`; torch and TensorFlow: their APIs)."""
    if "torch" in peers:
        import torch

        torch.set_num_threads(threads)
    if TF_PEERS & set(peers):
        try:
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except (ImportError, RuntimeError):
            pass


# -- memory (subprocess: only pytfrt is imported) ------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_child(
    path: str, warm_path: str, input_name: str, shape: str, calls: int
) -> dict[str, Any]:
    """In a fresh process: RSS before compile, after compile, over ``calls`` calls.

    ``warm_path`` (the same architecture, small) is compiled and run first, so the baseline
    includes the compiler's imports and the JIT-compiled kernels: what remains is the model.
    """
    import pytfrt

    dims = tuple(int(d) for d in shape.split("x"))
    warm = pytfrt.compile(warm_path)
    warm_dims = (1, *(int(d or 1) for d in warm.signature.inputs[0].shape[1:]))
    dtype = np.dtype(warm.signature.inputs[0].dtype)  # token ids for the language models
    warm(**{input_name: np.zeros(warm_dims, dtype)})
    del warm
    gc.collect()
    base = _rss_bytes()
    model = pytfrt.compile(path)
    compiled = _rss_bytes()
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 100, dims).astype(dtype) if dtype.kind in "iu"
         else rng.standard_normal(dims).astype(dtype))
    samples = []
    peak = compiled
    for i in range(calls):
        model(**{input_name: x})
        rss = _rss_bytes()
        peak = max(peak, rss)
        if i in (0, 9, 99) or (i + 1) % max(1, calls // 10) == 0:
            samples.append((i + 1, rss))
    return {
        "rss_before_compile": base,
        "rss_after_compile": compiled,
        "rss_samples": samples,
        "rss_peak_calls": peak,
    }


def _memory(zm: Any, zoo_dir: str, calls: int, quiet: bool) -> dict[str, Any]:
    import onnx
    from onnx import numpy_helper, shape_inference

    name, (shape, _dtype) = next(iter(zm.inputs.items()))
    dims = [1 if d is None else d for d in shape]
    progress(f"memory: {zm.name} batch 1, {calls} calls (subprocess)", quiet)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--memory-child",
        str(zm.path),
        str(zoo.export(zm.name, zoo_dir, small=True, with_torch=False).path),
        name,
        "x".join(map(str, dims)),
        str(calls),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return {"error": res.stderr[-2000:]}
    rec = json.loads(res.stdout.strip().splitlines()[-1])
    proto = onnx.load(str(zm.path))
    weights = sum(numpy_helper.to_array(t).nbytes for t in proto.graph.initializer)
    # Largest activation set: max over nodes of the bytes of their non-constant inputs + outputs.
    for d, v in zip(proto.graph.input[0].type.tensor_type.shape.dim, dims, strict=True):
        d.Clear()
        d.dim_value = v
    inferred = shape_inference.infer_shapes(proto)
    sizes: dict[str, int] = {}
    for vi in (
        list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)
    ):
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(x.HasField("dim_value") for x in tt.shape.dim):
            n = int(np.prod([x.dim_value for x in tt.shape.dim], dtype=np.int64))
            sizes[vi.name] = n * 4
    inits = {t.name for t in proto.graph.initializer}
    largest = max(
        (
            sum(sizes.get(n, 0) for n in list(nd.input) + list(nd.output) if n and n not in inits)
            for nd in inferred.graph.node
        ),
        default=0,
    )
    samples = rec["rss_samples"]
    after_warm = next((r for i, r in samples if i >= 100), samples[0][1])
    final = samples[-1][1]
    rec.update(
        {
            "weights_bytes": weights,
            "largest_activation_set_bytes": largest,
            "growth_after_100_calls_bytes": final - after_warm,
            "peak_over_baseline_bytes": rec["rss_peak_calls"] - rec["rss_before_compile"],
            "bound_bytes": 2 * weights + largest,
        }
    )
    rec["peak_within_bound"] = rec["peak_over_baseline_bytes"] < rec["bound_bytes"]
    return rec


# -- profile -------------------------------------------------------------------------------


def profile_child(path: str, input_name: str, shape: str, dtype: str, calls: int) -> dict[str, Any]:
    """In a fresh process: pytfrt's time per op type over ``calls`` calls.

    The runtime table's compute functions are wrapped with timers before the first compile
    (the ``tg.*`` kernels are made from the table when their library loads).
    """
    import pytfrt
    from pytfrt.tools.bench import KernelTimers

    timers = KernelTimers()
    timers.install()
    model = pytfrt.compile(path)
    dims = tuple(int(d) for d in shape.split("x"))
    rng = np.random.default_rng(0)
    x = (
        rng.standard_normal(dims).astype(dtype)
        if dtype.startswith("float")
        else rng.integers(0, 100, dims).astype(dtype)
    )
    model(**{input_name: x})
    timers.clear()
    c0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(calls):
        model(**{input_name: x})
    wall = (time.perf_counter() - t0) / calls
    cpu_all = (time.process_time() - c0) / calls
    report = timers.report(calls)
    return {
        "wall_ms": wall * 1e3,
        "cpu_ms": cpu_all * 1e3,
        "in_ops_ms": report["in_ops_ms"],
        "in_ops_cpu_ms": report["in_ops_cpu_ms"],
        "outside_ops_ms": wall * 1e3 - report["in_ops_ms"],
        "per_op": report["per_op"],
    }


def _profile(zm: Any, batch: int, calls: int, quiet: bool) -> dict[str, Any]:
    name, (shape, dtype) = next(iter(zm.inputs.items()))
    dims = [batch if d is None else d for d in shape]
    progress(f"profile: {zm.name} batch {batch}, {calls} calls (subprocess)", quiet)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--profile-child",
        str(zm.path),
        name,
        "x".join(map(str, dims)),
        dtype,
        str(calls),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return {"model": zm.name, "error": res.stderr[-2000:]}
    return {"model": zm.name, "batch": batch, **json.loads(res.stdout.strip().splitlines()[-1])}


# -- main ----------------------------------------------------------------------------------


def _load_models(args: argparse.Namespace) -> list[Any]:
    out = []
    tf_wanted = bool(TF_PEERS & set(args.peers))
    for name in progress_bar(args.models, "export", args.quiet, unit="model"):
        if name.startswith("tf:"):
            if tf_wanted and not args.no_tf_models:
                if name[3:] not in TF_MODELS or not (HERE / "tf_models.py").exists():
                    progress(f"{name}: skipped (not in benchmarks/tf_models.py)", args.quiet)
                    continue
                progress(f"build {name}", args.quiet)
                out.append(_tf_model(name[3:], args.small))
            continue
        progress(f"export {name}{' (small)' if args.small else ''}", args.quiet)
        try:
            zm = zoo.export(name, args.zoo_dir, small=args.small, with_torch="torch" in args.peers)
        except RuntimeError as exc:
            progress(f"{name}: skipped ({exc})", args.quiet)
            continue
        if zm.source == "keras" and tf_wanted:
            zm.keras = zoo.keras_resnet50(zm.config["image"])
        out.append(zm)
    return out


def _apply_switches(settings: list[str]) -> None:
    """``--set module.NAME=value``: assign a module attribute (an A/B switch) in this process."""
    import ast
    import importlib

    for item in settings:
        target, _, value = item.partition("=")
        module, _, name = target.rpartition(".")
        if not module or not name or not value:
            raise SystemExit(f"--set {item!r}: expected MODULE.NAME=VALUE")
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            raise SystemExit(f"--set {item!r}: {module} has no attribute {name}")
        setattr(mod, name, ast.literal_eval(value))


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; returns the exit status (1 if a peer disagrees with the oracle)."""
    if args.profile_child:
        path, name, shape, dtype, calls = args.profile_child
        print(json.dumps(profile_child(path, name, shape, dtype, int(calls))))
        return 0
    if args.memory_child:
        path, warm, name, shape, calls = args.memory_child
        print(json.dumps(memory_child(path, warm, name, shape, int(calls))))
        return 0
    _exec_with_threads(args.threads)
    _apply_switches(args.set)
    if args.int8:
        import models_int8  # benchmarks/models_int8.py

        return int(models_int8.run(args))
    peers = list(args.peers)
    _set_threads(args.threads, peers)
    models = _load_models(args)
    rows: list[dict[str, Any]] = []
    failed = False
    for zm in progress_bar(models, "models", args.quiet, unit="model"):
        sizes = (
            [{"batch": b} for b in args.transformer_batches]
            if zm.name in zoo.TOKEN_MODELS
            else [{"batch": b} for b in args.batches]
        )
        runners: dict[str, Callable[[dict[str, np.ndarray]], Any]] = {}
        compile_s: dict[str, float] = {}
        makers: list[tuple[str, Callable[[Any], Any]]] = []
        if zm.source != "tf":
            makers.append(("pytfrt", _pytfrt_runner))
        if zm.keras is not None:
            makers.append(("pytfrt-tf", _pytfrt_tf_runner))
        for peer, make in makers:
            if peer not in peers:
                continue
            t0 = time.perf_counter()
            try:
                runners[peer] = make(zm)
            except Exception as exc:  # noqa: BLE001 - report and go on with the other peers
                progress(f"{zm.name}: {peer} failed to compile: {type(exc).__name__}: {exc}")
                failed = True
            compile_s[peer] = time.perf_counter() - t0
        if "onnxruntime" in peers and zm.source != "tf":
            runners["onnxruntime"] = _ort_runner(zm, args.threads)
        if "openvino" in peers and zm.source != "tf":
            try:
                runners["openvino"] = _openvino_runner(zm, args.threads)
            except ImportError as exc:
                progress(f"{zm.name}: openvino skipped ({exc})", args.quiet)
        if "torch" in peers and zm.torch_module is not None:
            runners["torch"] = _torch_runner(zm)
        if zm.keras is not None:
            for k, fn in _tf_runners(zm).items():
                if k in peers:
                    runners[k] = fn
        oracle = (
            "onnxruntime"
            if "onnxruntime" in runners
            else next((p for p in ("tf.function", "tf-eager") if p in runners), None)
        )
        for kw in sizes:
            feeds = zm.make_inputs(**kw)
            seq = zm.config.get("seq")
            label = f"{zm.name} b{kw['batch']}" + (f" s{seq}" if seq else "")
            progress(f"{label}: {', '.join(runners)}", args.quiet)
            errors: dict[str, float] = {}
            if oracle is not None:
                want = runners[oracle](feeds)
                for p, fn in list(runners.items()):
                    try:
                        got = fn(feeds)
                        errors[p] = max(
                            zoo.relative_error(g, w) for g, w in zip(got, want, strict=True)
                        )
                    except Exception as exc:  # noqa: BLE001 - a peer's failure is reported
                        progress(f"{label}: {p} failed: {type(exc).__name__}: {exc}")
                        errors[p] = float("nan")
            ok = {p: fn for p, fn in runners.items() if errors.get(p, 0.0) == errors.get(p, 0.0)}
            bad = [p for p, e in errors.items() if not e <= TOLERANCE]
            if bad:
                progress(
                    f"{label}: disagree with {oracle}: "
                    + ", ".join(f"{p} {errors[p]:.2g}" for p in bad)
                )
                failed = failed or "pytfrt" in bad
            times = _time_interleaved(ok, feeds, args.repeats, args.warmup, label, args.quiet)
            row = {
                "model": zm.name,
                **kw,
                "seq": seq,
                "oracle": oracle,
                "peers": {p: {**_stats(ts), "rel_error": errors.get(p)} for p, ts in times.items()},
            }
            row["compile_s"] = compile_s
            rows.append(row)
    record: dict[str, Any] = {
        "benchmark": "models",
        "command": " ".join(sys.argv),
        "machine": machine_info(),
        "threads": args.threads,
        "thread_env": {v: os.environ.get(v) for v in THREAD_VARS},
        "repeats": args.repeats,
        "small": args.small,
        "rows": rows,
        "goals": _goals(rows),
    }
    if args.profile is not None:
        record["profile"] = [
            _profile(zm, 1, args.profile_calls, args.quiet)
            for zm in models
            if zm.source != "tf" and (not args.profile or zm.name in args.profile)
        ]
    if args.memory:
        zm = next((m for m in models if m.name == args.memory_model), None)
        if zm is None:
            zm = zoo.export(args.memory_model, args.zoo_dir, small=args.small, with_torch=False)
        record["memory"] = _memory(zm, args.zoo_dir, args.memory, args.quiet)
        record["memory_model"] = zm.name
    _print(record)
    out = Path(args.out)
    write_json(out / f"{args.name}.json", record)
    _plot(record, out / f"{args.name}.png")
    progress(f"wrote {out / (args.name + '.json')} and .png", args.quiet)
    return 1 if failed else 0


def _ratio(
    rows: list[dict[str, Any]], model: str, batch: int, peer: str, ref_model: str | None = None
) -> float | None:
    def get(m: str, p: str) -> float | None:
        for r in rows:
            if r["model"] == m and r["batch"] == batch and p in r["peers"]:
                return float(r["peers"][p]["median_ms"])
        return None

    a, b = get(model, "pytfrt"), get(ref_model or model, peer)
    return None if a is None or b is None else a / b


def _goals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latency goals (docs/benchmarks.md), evaluated on this run's medians."""
    spec = [
        (
            "ResNet-50 b1 pytfrt / tf.function (Keras ResNet50)",
            "resnet50",
            1,
            "tf.function",
            "keras_resnet50",
            0.72,
        ),
        ("ResNet-50 b1 pytfrt / onnxruntime (stretch)", "resnet50", 1, "onnxruntime", None, 1.0),
        (
            "ResNet-50 b8 pytfrt / tf.function (Keras ResNet50)",
            "resnet50",
            8,
            "tf.function",
            "keras_resnet50",
            0.8,
        ),
        ("Transformer b1 s128 pytfrt / torch eager", "transformer", 1, "torch", None, 1.0),
        ("BERT-base b1 s128 pytfrt / onnxruntime", "bert", 1, "onnxruntime", None, 1.0),
        ("GPT-2 small b1 s64 pytfrt / onnxruntime", "gpt2", 1, "onnxruntime", None, 1.0),
        ("MobileNetV3-small b1 pytfrt / onnxruntime", "mobilenet_v3_small", 1, "onnxruntime",
         None, 1.0),
        ("EfficientNet-B0 b1 pytfrt / onnxruntime", "efficientnet_b0", 1, "onnxruntime", None,
         1.0),
        ("ResNet-50 b8 pytfrt / onnxruntime", "resnet50", 8, "onnxruntime", None, 1.0),
        ("Keras ResNet50 b1 pytfrt / tf.function", "keras_resnet50", 1, "tf.function", None, 0.72),
    ]
    out = []
    for label, m, b, peer, ref, goal in spec:
        r = _ratio(rows, m, b, peer, ref)
        out.append(
            {"goal": label, "ratio": r, "target": goal, "met": None if r is None else r <= goal}
        )
    return out


def _print(record: dict[str, Any]) -> None:
    headers = ["model", "batch", "peer", "median ms", "p90 ms", "x onnxruntime", "x openvino",
               "rel err"]
    table = []
    for r in record["rows"]:
        ort_ms = r["peers"].get("onnxruntime", {}).get("median_ms")
        ov_ms = r["peers"].get("openvino", {}).get("median_ms")
        size = str(r["batch"]) + (f" s{r['seq']}" if r.get("seq") else "")
        for p in PEERS:
            if p not in r["peers"]:
                continue
            s = r["peers"][p]
            ratio = f"{s['median_ms'] / ort_ms:.2f}x" if ort_ms else "-"
            ov_ratio = f"{s['median_ms'] / ov_ms:.2f}x" if ov_ms else "-"
            err = s.get("rel_error")
            table.append(
                [
                    r["model"],
                    size,
                    p,
                    f"{s['median_ms']:.2f}",
                    f"{s['p90_ms']:.2f}",
                    ratio,
                    ov_ratio,
                    "-" if err is None else f"{err:.1e}",
                ]
            )
    print(format_table(headers, table))
    print()
    for g in record["goals"]:
        if g["ratio"] is not None:
            verdict = "met" if g["met"] else "NOT met"
            print(f"{g['goal']}: {g['ratio']:.2f}x (goal <= {g['target']}x): {verdict}")
    for prof in record.get("profile", []):
        if "per_op" not in prof:
            print(f"\nprofile of {prof['model']} failed: {prof.get('error', '')[-500:]}")
            continue
        cpu_ms = prof.get("cpu_ms", 0.0)
        print(
            f"\npytfrt profile, {prof['model']} b{prof['batch']}: {prof['wall_ms']:.1f} ms per "
            f"call, {prof['in_ops_ms']:.1f} ms in op compute functions, "
            f"{prof['outside_ops_ms']:.1f} ms outside; process CPU {cpu_ms:.1f} ms per call, "
            f"{prof.get('in_ops_cpu_ms', 0.0):.1f} ms in ops (CPU time counts every thread's "
            "work and not time spent descheduled: the figure that survives a loaded machine)"
        )
        rows = [
            [
                k,
                f"{v['ms_per_call']:.2f}",
                f"{v.get('cpu_ms_per_call', 0.0):.2f}",
                f"{v['calls_per_call']:.0f}",
                f"{100 * v.get('cpu_ms_per_call', 0.0) / cpu_ms:.1f}%" if cpu_ms else "-",
            ]
            for k, v in list(prof["per_op"].items())[:12]
        ]
        print(format_table(["op", "wall ms/call", "CPU ms/call", "calls", "CPU share"], rows))
    mem = record.get("memory")
    if mem and "error" not in mem:
        mb = 1 / 2**20
        print(
            f"\nmemory ({record.get('memory_model', 'resnet50')} b1): weights "
            f"{mem['weights_bytes'] * mb:.1f} MB, largest activation set "
            f"{mem['largest_activation_set_bytes'] * mb:.2f} MB; RSS growth from call 100 to "
            f"the last: {mem['growth_after_100_calls_bytes'] * mb:.2f} MB; peak RSS over the "
            f"pre-compile baseline while calling {mem['peak_over_baseline_bytes'] * mb:.1f} MB "
            f"(bound 2 x weights + activations = {mem['bound_bytes'] * mb:.1f} MB)"
        )
    elif mem:
        print("\nmemory: child failed:", mem["error"][-500:])


def _plot(record: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = record["rows"]
    if not rows:
        return
    labels = [
        f"{r['model']}\nb{r['batch']}" + (f" s{r['seq']}" if r.get("seq") else "") for r in rows
    ]
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(rows)), 4.5))
    width = 0.8 / len(PEERS)
    for i, p in enumerate(PEERS):
        vals = [r["peers"].get(p, {}).get("median_ms", np.nan) for r in rows]
        if all(np.isnan(v) for v in vals):
            continue
        ax.bar(np.arange(len(rows)) + (i - len(PEERS) / 2 + 0.5) * width, vals, width, label=p)
    ax.set_xticks(np.arange(len(rows)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("median latency (ms, log)")
    ax.set_title(
        f"pytfrt bench models ({record['machine']['nproc']} cores, {record['threads']} threads)"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
