"""pytfrt and ONNX Runtime on one ONNX model in one process, called in turn, each with its own
profiler: where each spends a call, by class of operation.

Why one process: on a shared machine a zoo run's medians move by 20-40% between runs a few
minutes apart, so per-op figures from two separate runs (``models.py --profile`` and ONNX
Runtime's profiler) cannot be compared.  Here both runtimes alternate call by call under the
same load.  pytfrt's side is :class:`pytfrt.tools.bench.KernelTimers` (per op type) plus the
dense layers on pre-packed weights (:mod:`pytfrt.backends.cpu._dnnl_matmul`) timed per call
and split into ``lm_head`` (a weight wider than 10,000 columns) and ``dense``; ONNX Runtime's
side is its own profiler (``enable_profiling``), node times summed per class (``Gemm`` and a
``MatMul`` whose result has rank < 4 -> ``dense``, a node whose name holds ``lm_head`` ->
``lm_head``, ``LayerNormalization``, ``FastGelu``, ``Add``, the attention's ``MatMul``/
``FusedMatMul``/``Softmax``/``Transpose``/``Split``/``Where``, the rest ``other``).
pytfrt's ``dense`` has bias, residual and activation fused; ONNX Runtime's bias adds after a
``MatMul`` count under ``add``, the attention mask's too.  Threads: ``PYTFRT_NUM_THREADS``
(default 2) for both; with 1 the CPU time of each op is the figure that survives the load best.

Usage: ``PYTFRT_NUM_THREADS=1 python benchmarks/profile_pair.py MODEL.onnx --input ids
--shape 1x64 [--calls 16]`` (token ids: int64 in ``[0, 100)``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import time
from typing import Any

import numpy as np

ATTENTION = frozenset({"MatMul", "FusedMatMul", "Softmax", "Split", "Where", "Transpose"})
CLASSES = {"Gemm": "dense", "LayerNormalization": "layer_norm", "FastGelu": "gelu", "Add": "add"}


def _ort_class(name: str, op: str, out_rank: int) -> str:
    """The class of an ONNX Runtime node: a ``MatMul`` with a result of rank < 4 is a dense
    layer (BERT's ``MatMul`` + ``Add`` on 3-D activations), one of rank 4 the attention's."""
    if "lm_head" in name:
        return "lm_head"
    if op in ("MatMul", "FusedMatMul") and out_rank < 4:
        return "dense"
    return CLASSES.get(op, "attention" if op in ATTENTION else "other")


def _out_rank(event: dict[str, Any]) -> int:
    shapes = event["args"].get("output_type_shape") or [{}]
    return max((len(dims) for dims in shapes[0].values()), default=0)


def run(path: str, input_name: str, shape: tuple[int, ...], calls: int,
        warmup: int = 3) -> dict[str, Any]:
    """Both runtimes' per-class milliseconds per call and their wall times."""
    import onnxruntime as ort

    import pytfrt
    from pytfrt.backends.cpu import _dnnl_matmul
    from pytfrt.tools.bench import KernelTimers

    threads = int(os.environ.get("PYTFRT_NUM_THREADS", "2"))
    dense: dict[str, float] = collections.defaultdict(float)
    run_packed = _dnnl_matmul.PackedMatMul.run

    def timed(self: Any, x: np.ndarray, y: np.ndarray, residual: Any = None) -> None:
        t = time.perf_counter()
        run_packed(self, x, y, residual)
        dense["lm_head" if self.n > 10_000 else "dense"] += time.perf_counter() - t

    _dnnl_matmul.PackedMatMul.run = timed  # type: ignore[method-assign]
    timers = KernelTimers()
    timers.install()
    model = pytfrt.compile(path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="profile_pair_"), "ort")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {input_name: np.random.default_rng(0).integers(0, 100, shape).astype(np.int64)}
    ours = np.asarray(model(**feeds))
    theirs = sess.run(None, feeds)[0]
    err = float(np.max(np.abs(ours - theirs)) / max(float(np.max(np.abs(theirs))), 1e-30))
    for _ in range(warmup - 1):
        model(**feeds)
        sess.run(None, feeds)
    timers.clear()
    dense.clear()
    wall: dict[str, list[float]] = {"pytfrt": [], "onnxruntime": []}
    for i in range(calls):
        for peer in ("pytfrt", "onnxruntime") if i % 2 == 0 else ("onnxruntime", "pytfrt"):
            t = time.perf_counter()
            if peer == "pytfrt":
                model(**feeds)
            else:
                sess.run(None, feeds)
            wall[peer].append(time.perf_counter() - t)
    with open(sess.end_profiling()) as f:
        events = [e for e in json.load(f)
                  if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    per_run = len(events) // (calls + warmup)
    theirs_ms: dict[str, float] = collections.defaultdict(float)
    for e in events[warmup * per_run:]:
        theirs_ms[_ort_class(e["name"], e["args"]["op_name"], _out_rank(e))] += (
            e["dur"] / 1e3 / calls)
    report = timers.report(calls)
    ours_ms = {k: 1e3 * v / calls for k, v in dense.items()}
    ours_ms.update({op: v["ms_per_call"] for op, v in report["per_op"].items()
                    if op != "matmul"})
    ours_ms["matmul (other)"] = report["per_op"].get("matmul", {}).get(
        "ms_per_call", 0.0) - sum(1e3 * v / calls for v in dense.values())
    mean = {p: 1e3 * float(np.mean(w)) for p, w in wall.items()}
    ours_ms["outside ops"] = mean["pytfrt"] - report["in_ops_ms"]
    theirs_ms["outside kernels"] = mean["onnxruntime"] - sum(theirs_ms.values())
    return {"threads": threads, "rel_err": err, "mean_ms": mean,
            "median_ms": {p: 1e3 * float(np.median(w)) for p, w in wall.items()},
            "pytfrt": ours_ms, "onnxruntime": dict(theirs_ms)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--input", default="ids")
    parser.add_argument("--shape", default="1x64")
    parser.add_argument("--calls", type=int, default=16)
    args = parser.parse_args(argv)
    r = run(args.model, args.input, tuple(int(d) for d in args.shape.split("x")), args.calls)
    med = r["median_ms"]
    print(f"threads {r['threads']}: median ms pytfrt {med['pytfrt']:.2f}, ONNX Runtime "
          f"{med['onnxruntime']:.2f} ({med['pytfrt'] / med['onnxruntime']:.3f}x); outputs "
          f"within {r['rel_err']:.1e} relative")
    for peer in ("pytfrt", "onnxruntime"):
        parts = sorted(r[peer].items(), key=lambda kv: -kv[1])
        print(f"{peer:>12} (ms/call): " + ", ".join(f"{k} {v:.2f}" for k, v in parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
