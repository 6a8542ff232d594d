"""Per-call cost of a small model: an MLP 784-512-512-10 at batch 1 through pytfrt, against the
same three GEMMs (bias, ReLU) in NumPy and against ONNX Runtime, all in one process.

The MLP is an ONNX file (three ``Gemm``, two ``Relu``; random weights, seed 0) written to a
temporary directory.  Every peer's output is checked against NumPy in float64 first; then the
peers are interleaved, ``--calls`` calls per sample, ``--samples`` samples each, and the medians
of wall time and of process CPU time per call are printed with the ratios to NumPy (the goal:
pytfrt <= 1.2x NumPy).  Usage: ``python benchmarks/mlp_call.py [--calls 300] [--samples 7]``.

``--fresh 1 32`` instead measures what a process pays once: per batch size a fresh interpreter
compiles the MLP (``pytfrt.compile``) and calls it once, and reports the compile and first-call
times, its peak resident memory (``ru_maxrss``) and whether Numba was imported.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

DIMS = (784, 512, 512, 10)


def _weights() -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
          for a, b in zip(DIMS, DIMS[1:], strict=False)]
    bs = [(rng.standard_normal(b) * 0.1).astype(np.float32) for b in DIMS[1:]]
    return ws, bs


def _onnx_file(ws: list[np.ndarray], bs: list[np.ndarray], path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, x = [], [], "x"
    for i, (w, b) in enumerate(zip(ws, bs, strict=True)):
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        last = i == len(ws) - 1
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], ["y" if last else f"g{i}"]))
        if not last:
            nodes.append(helper.make_node("Relu", [f"g{i}"], [f"h{i}"]))
            x = f"h{i}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", DIMS[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", DIMS[-1]])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _child(batch: int) -> int:
    """In a fresh interpreter: compile the MLP, call it once at ``batch``, print a JSON line."""
    import json
    import resource
    import sys

    t0 = time.perf_counter()
    import pytfrt

    ws, bs = _weights()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.onnx"
        _onnx_file(ws, bs, path)
        model = pytfrt.compile(str(path))
    x = np.random.default_rng(1).standard_normal((batch, DIMS[0])).astype(np.float32)
    t1 = time.perf_counter()
    model(x)
    t2 = time.perf_counter()
    print(json.dumps({"batch": batch, "import_compile_s": t1 - t0, "first_call_s": t2 - t1,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "numba": "numba" in sys.modules}))
    return 0


def _fresh(batches: list[int]) -> int:
    """:func:`_child` per batch size in a new process; prints a table."""
    import json
    import subprocess
    import sys

    print(f"{'batch':>5s} {'import+compile s':>16s} {'first call s':>12s} {'peak MB':>8s} Numba")
    for batch in batches:
        out = subprocess.run([sys.executable, __file__, "--child", str(batch)], check=True,
                             capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{batch:5d} {r['import_compile_s']:16.2f} {r['first_call_s']:12.3f} "
              f"{r['peak_mb']:8.0f} {'yes' if r['numba'] else 'no'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per sample")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--fresh", nargs="+", type=int, metavar="BATCH",
                        help="first call and peak memory of a fresh process per batch size")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return _child(args.child)
    if args.fresh:
        return _fresh(args.fresh)

    import onnxruntime as ort

    import pytfrt

    ws, bs = _weights()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.onnx"
        _onnx_file(ws, bs, path)
        model = pytfrt.compile(str(path))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((1, DIMS[0])).astype(np.float32)

    def numpy_mlp(v: np.ndarray) -> np.ndarray:
        h = np.maximum(v @ ws[0] + bs[0], 0)
        h = np.maximum(h @ ws[1] + bs[1], 0)
        return h @ ws[2] + bs[2]

    peers: dict[str, Callable[[], np.ndarray]] = {
        "pytfrt": lambda: model(x),
        "numpy": lambda: numpy_mlp(x),
        "onnxruntime": lambda: sess.run(None, {"x": x})[0],
    }
    x64 = x.astype(np.float64)
    ref = np.maximum(np.maximum(x64 @ ws[0] + bs[0], 0) @ ws[1] + bs[1], 0) @ ws[2] + bs[2]
    for name, fn in peers.items():
        err = float(np.abs(fn() - ref).max() / np.abs(ref).max())
        if err > 1e-4:
            raise SystemExit(f"{name}: output differs from NumPy float64 by {err:.2e} relative")
    wall: dict[str, list[float]] = {n: [] for n in peers}
    cpu: dict[str, list[float]] = {n: [] for n in peers}
    for _ in range(args.samples):
        for name, fn in peers.items():
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(args.calls):
                fn()
            wall[name].append((time.perf_counter() - t0) / args.calls * 1e6)
            cpu[name].append((time.process_time() - c0) / args.calls * 1e6)
    base_w, base_c = np.median(wall["numpy"]), np.median(cpu["numpy"])
    print(f"{'peer':12s} {'wall us':>9s} {'CPU us':>8s} {'wall/NumPy':>11s} {'CPU/NumPy':>10s}")
    for name in peers:
        w, c = np.median(wall[name]), np.median(cpu[name])
        print(f"{name:12s} {w:9.1f} {c:8.1f} {w / base_w:10.2f}x {c / base_c:9.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
