"""What a compiled model's call costs beyond its kernels: per kernel, and for a small CNN against
ONNX Runtime (docs/benchmarks.md, "The cost between kernels").

Three measurements, all in one process, peers interleaved, medians of ``--samples`` samples of
process CPU time (``time.process_time``: it survives a loaded machine better than the wall
clock; ``--clock wall`` for the wall clock):

* ``compute`` -- a ``CompiledModel`` whose ``@main`` is a chain of ``--n`` dependent ``add``
  kernels on a ``1x4`` float32 tensor and a constant, with planned buffers (the default
  pipeline would fuse the chain into one kernel, so only shape inference and buffer planning
  run).  Its peer is a plain Python loop calling NumPy's ``add`` (with ``out=``) as many times:
  the kernels' own cost.  The difference per kernel is what the call path adds between kernels
  (argument and result binding, buffer checks, releases).
* ``registry`` -- the same chain, each ``add`` reading a variable (``tg.read_variable``): the
  kernels that are not compute functions and go through their registry entry.  Per kernel:
  (this call - the ``compute`` call) / ``n``, against the same read done directly.
* ``cnn`` -- a small ONNX CNN at batch 1 (``Conv 1->8 3x3, Relu, MaxPool 2x2, Conv 8->16 3x3,
  Relu, GlobalAveragePool, Flatten, Gemm 16->10``, 28x28, random weights, seed 0) against ONNX
  Runtime on one thread (the goal: no more than ONNX Runtime's per-call cost).  Outputs are
  checked against ONNX Runtime first.

Plus the breakdown of the call path per kernel: the ``compute`` chain written as straight-line
code four times, each adding one piece of what ``CompiledModel``'s generated call does around
a kernel (``np.add(out=)`` alone; through the ``add`` compute function; with the result check
and the release; with the planned buffer's reuse test of ``Arena.run`` inlined), min of the
samples.

Usage: ``python benchmarks/call_overhead.py [--n 200] [--calls 200] [--samples 9]
[--clock cpu|wall] [--skip-cnn] [--name STEM]``.  Prints one table and saves it as
``benchmarks/results/<STEM>.json`` and ``.png``; timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt.tools.bench import machine_info, pyplot, save_results


def _chain(n: int, variables: bool) -> Any:
    """A CompiledModel: ``x + c`` (or ``x + read_variable(v)``) ``n`` times, buffers planned."""
    from pytfrt.compiler import GraphBuilder
    from pytfrt.compiler.api import compile_module
    from pytfrt.compiler.passes import run_passes

    gb = GraphBuilder()
    if variables:
        gb.variable("v", np.ones((1, 4), np.float32))
    fn = gb.function("main", inputs=[("x", (1, 4), "f32")])
    (x,) = fn.arguments
    c = fn.constant(np.ones((1, 4), np.float32), name="c")
    for _ in range(n):
        x = fn.op("add", [x, fn.op("read_variable", [], name="v") if variables else c])
    fn.returns([x], names=["y"])
    return compile_module(run_passes(gb.finish(), ["tg-infer-shapes", "tg-plan-buffers"]),
                          optimize=False)


def _breakdown(n: int, samples: int, clock: Callable[[], float]) -> list[tuple[str, float]]:
    """ns per kernel of the chain as straight-line code with each piece of the call path
    added (see the module docstring)."""
    from pytfrt.backends.cpu.arena import Arena
    from pytfrt.backends.cpu.op_math import binary_compute
    from pytfrt.support.codegen import exec_generated

    def kernel(step: int, i: int) -> list[str]:
        a, r = f"r{i}", f"r{i + 1}"
        if step == 0:
            return [f"{r} = _add({a}, _c, out=_o)"]
        if step == 1:
            return [f"{r} = _f({a}, _c, out=_o)"]
        if step == 2:
            return [f"{r} = _f({a}, _c, out=_o)", f"if {r}.__class__ is not _nd:",
                    f"    {r} = _arr({r})", f"{a} = None"]
        slot = i % 2
        return [f"k = ({a}.shape, )", f"m = M.get({i})", f"b = S.get({slot})",
                "if m is not None and b is not None and m[0] == k and b.shape == m[1]:",
                f"    {r} = _f({a}, _c, out=b)", "else:",
                f"    {r} = A.keep({slot}, {i}, k, _f({a}, _c))", f"{a} = None"]

    ns: dict[str, Any] = {"_add": np.add, "_c": np.ones((1, 4), np.float32),
                          "_o": np.empty((1, 4), np.float32), "_nd": np.ndarray,
                          "_arr": np.asarray, "_f": binary_compute(np.add, "add"),
                          "_A": Arena()}
    labels = ["np.add(out=) alone", "+ the add compute function",
              "+ result check and release", "+ buffer reuse test (the model's code)"]
    x = np.zeros((1, 4), np.float32)
    rows = []
    for step, label in enumerate(labels):
        lines = ["A = _A", "S = A.slots", "M = A.memo"] if step == 3 else []
        for i in range(n):
            lines += kernel(step, i)
        source = "def chain(r0):\n" + "".join(f"    {t}\n" for t in [*lines, f"return r{n}"])
        exec_generated(source, f"call_overhead breakdown {step}", ns)
        fn = ns["chain"]
        best = float("inf")
        for _ in range(samples):
            t0 = clock()
            for _ in range(50):
                fn(x)
            best = min(best, (clock() - t0) / 50 / n * 1e9)
        rows.append((label, best))
    return rows


def _cnn_file(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name: str, *shape: int) -> Any:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32),
                                       name)

    inits = [init("c1w", 8, 1, 3, 3), init("c1b", 8), init("c2w", 16, 8, 3, 3), init("c2b", 16),
             init("fw", 16, 10), init("fb", 10)]
    node = helper.make_node
    nodes = [node("Conv", ["x", "c1w", "c1b"], ["a"], pads=[1, 1, 1, 1]),
             node("Relu", ["a"], ["b"]),
             node("MaxPool", ["b"], ["c"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Conv", ["c", "c2w", "c2b"], ["d"], pads=[1, 1, 1, 1]),
             node("Relu", ["d"], ["e"]),
             node("GlobalAveragePool", ["e"], ["f"]),
             node("Flatten", ["f"], ["g"]),
             node("Gemm", ["g", "fw", "fb"], ["y"])]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _measure(peers: dict[str, Callable[[], Any]], calls: int, samples: int,
             clock: Callable[[], float]) -> dict[str, float]:
    """Median microseconds per call of each peer, peers interleaved sample by sample."""
    got: dict[str, list[float]] = {name: [] for name in peers}
    for _ in range(samples):
        for name, fn in peers.items():
            t0 = clock()
            for _ in range(calls):
                fn()
            got[name].append((clock() - t0) / calls * 1e6)
    return {name: float(np.median(v)) for name, v in got.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="kernels in each chain")
    parser.add_argument("--calls", type=int, default=200, help="calls per sample")
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--skip-cnn", action="store_true", help="no ONNX CNN (no onnxruntime)")
    parser.add_argument("--name", default="call_overhead",
                        help="stem of the JSON and PNG files in benchmarks/results")
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    n = args.n

    compute, registry = _chain(n, False), _chain(n, True)
    x = np.zeros((1, 4), np.float32)
    for model in (compute, registry):
        if not np.array_equal(model(x), np.full((1, 4), n, np.float32)):
            raise SystemExit("a chain computed the wrong sum")
    c = np.ones((1, 4), np.float32)
    out = np.empty_like(x)
    var = registry._resource_context.get_resource("tg.variable/v")

    def numpy_adds() -> None:
        y = x
        for _ in range(n):
            y = np.add(y, c, out=out)

    def direct_reads() -> None:
        for _ in range(n):
            var.array  # noqa: B018 - the read itself, as the kernel does it

    peers: dict[str, Callable[[], Any]] = {
        "compute chain": lambda: compute(x),
        "NumPy adds": numpy_adds,
        "registry chain": lambda: registry(x),
        "direct reads": direct_reads,
    }
    rows: list[tuple[str, float, str]] = []
    t = _measure(peers, args.calls, args.samples, clock)
    rows.append(("compute chain: per kernel", t["compute chain"] / n * 1e3, "ns"))
    rows.append(("NumPy add(out=): per call", t["NumPy adds"] / n * 1e3, "ns"))
    rows.append(("  call path per kernel", (t["compute chain"] - t["NumPy adds"]) / n * 1e3,
                 "ns"))
    reg = (t["registry chain"] - t["compute chain"] - t["direct reads"]) / n * 1e3
    rows.append(("registry kernel (read_variable): path cost", reg, "ns"))
    rows += [(f"  breakdown: {label}", v, "ns")
             for label, v in _breakdown(n, args.samples, clock)]

    if not args.skip_cnn:
        import onnxruntime as ort

        import pytfrt

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "cnn.onnx"
            _cnn_file(path)
            cnn = pytfrt.compile(str(path))
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        img = np.random.default_rng(1).standard_normal((1, 1, 28, 28)).astype(np.float32)
        ref = sess.run(None, {"x": img})[0]
        err = float(np.abs(cnn(img) - ref).max() / np.abs(ref).max())
        if err > 1e-4:
            raise SystemExit(f"the CNN differs from ONNX Runtime by {err:.1e} relative")
        t = _measure({"pytfrt": lambda: cnn(img),
                      "onnxruntime": lambda: sess.run(None, {"x": img})},
                     args.calls, args.samples, clock)
        rows.append(("small CNN: pytfrt", t["pytfrt"], "us"))
        rows.append(("small CNN: ONNX Runtime (1 thread)", t["onnxruntime"], "us"))
        rows.append(("  pytfrt / ONNX Runtime", t["pytfrt"] / t["onnxruntime"], "x"))

    print(f"{args.clock} time, median of {args.samples} samples of {args.calls} calls, "
          f"chains of {n} kernels")
    for label, value, unit in rows:
        print(f"{label:54s} {value:9.2f} {unit}")
    record = {"benchmark": "call_overhead", "command": "benchmarks/call_overhead.py "
              + " ".join(sys.argv[1:] if argv is None else argv),
              "machine": machine_info(), "clock": args.clock, "samples": args.samples,
              "calls": args.calls, "n": n,
              "rows": [{"label": label.strip(), "value": value, "unit": unit}
                       for label, value, unit in rows]}
    save_results(args.name, record, lambda path: _plot(rows, path))
    return 0


def _plot(rows: list[tuple[str, float, str]], path: Path) -> None:
    """Bars of the nanosecond rows (the call path and its breakdown) beside the small CNN's
    microseconds against ONNX Runtime's."""
    plt = pyplot()
    if plt is None:
        return
    ns = [(label.strip(), v) for label, v, unit in rows if unit == "ns"]
    us = [(label.strip(), v) for label, v, unit in rows if unit == "us"]
    fig, axes = plt.subplots(1, 2 if us else 1, figsize=(12 if us else 8, 4.5), squeeze=False)
    ax = axes[0][0]
    ax.barh([label for label, _ in ns], [v for _, v in ns])
    ax.invert_yaxis()
    ax.set_xlabel("ns per kernel")
    ax.set_title("call path per kernel")
    if us:
        ax2 = axes[0][1]
        ax2.bar([label.replace("small CNN: ", "") for label, _ in us], [v for _, v in us])
        ax2.set_ylabel("us per call")
        ax2.set_title("small ONNX CNN at batch 1, one thread")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
