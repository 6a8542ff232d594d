"""Compiler benchmarks (``python benchmarks/compiler.py [--quick]``).

1. Per-call cost of a compiled 784-512-512-10 MLP (ReLU, float32) at batch 1 against the same
   forward pass in plain NumPy (the peer), measured interleaved in the same run: the goal is
   at most 1.2x NumPy.  Also a 4-4-4-4 MLP, where the arithmetic is negligible, to show the
   fixed per-call and per-kernel overhead.
2. Compile time of a ResNet-50-sized graph (ResNet-50 v1, NHWC, random weights: 53 conv2d,
   53 batch_norm, 49 relu, 16 add, pooling and the classifier): GraphBuilder construction, the
   default pass pipeline, lowering, and model construction (the conv plans); the goal is at
   most 30 s in all.  The optimised model is checked against the unoptimised one.

Prints tables and saves ``benchmarks/results/compiler.json`` and ``compiler.png``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt.compiler import GraphBuilder, GraphModule
from pytfrt.compiler.api import compile_module
from pytfrt.compiler.lowering import lower
from pytfrt.compiler.passes import default_pipeline
from pytfrt.model import CompiledModel
from pytfrt.tools.bench import pyplot, save_results

RESULTS = Path(__file__).resolve().parent / "results"


# -- MLP per-call cost ---------------------------------------------------------------------
def mlp_graph(sizes: list[int], ws: list[np.ndarray], bs: list[np.ndarray]) -> GraphModule:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, sizes[0]), "f32")])
    (h,) = fn.arguments
    for i in range(len(ws)):
        h = fn.op("add", [fn.op("matmul", [h, fn.constant(ws[i], name=f"w{i}")]),
                          fn.constant(bs[i], name=f"b{i}")])
        if i < len(ws) - 1:
            h = fn.op("relu", [h])
    fn.returns([h])
    return gb.finish()


def _interleaved(fns: dict[str, Any], x: Any, reps: int, inner: int,
                 clock: Any = time.perf_counter) -> dict[str, list[float]]:
    """Microseconds per call of each of ``fns`` on ``x``: ``reps`` samples of ``inner`` calls,
    the functions interleaved so machine noise hits them alike (``clock``: wall time, or
    ``time.thread_time`` for the calling thread's CPU time)."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            t = clock()
            for _ in range(inner):
                f(x)
            samples[k].append((clock() - t) / inner * 1e6)
    return samples


def bench_mlp(sizes: list[int], reps: int, inner: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((a, b)) * 0.05).astype(np.float32)
          for a, b in zip(sizes, sizes[1:], strict=False)]
    bs = [rng.standard_normal(b).astype(np.float32) for b in sizes[1:]]

    def numpy_forward(x: np.ndarray) -> np.ndarray:
        h = x
        for i in range(len(ws)):
            h = h @ ws[i] + bs[i]
            if i < len(ws) - 1:
                h = np.maximum(h, 0)
        return h

    plain = compile_module(mlp_graph(sizes, ws, bs), optimize=False)
    opt = compile_module(mlp_graph(sizes, ws, bs))
    x = rng.standard_normal((1, sizes[0])).astype(np.float32)
    np.testing.assert_allclose(opt(x), numpy_forward(x), rtol=1e-4, atol=1e-4)
    fns: dict[str, Any] = {"numpy": numpy_forward, "pytfrt (no passes)": plain,
                           "pytfrt (optimised)": opt}
    for f in fns.values():
        for _ in range(inner):
            f(x)
    samples = _interleaved(fns, x, reps, inner)
    med = {k: statistics.median(v) for k, v in samples.items()}
    # the calling thread's CPU time (time.thread_time): what a loaded machine disturbs least
    cpu = _interleaved(fns, x, reps, inner, time.thread_time)
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    return {"sizes": sizes, "us_median": med, "us_min": {k: min(v) for k, v in samples.items()},
            "ratio_optimised": med["pytfrt (optimised)"] / med["numpy"],
            "ratio_plain": med["pytfrt (no passes)"] / med["numpy"],
            "cpu_us_median": cpu_med,
            "cpu_ratio_optimised": cpu_med["pytfrt (optimised)"] / cpu_med["numpy"]}


def bench_call_overhead(reps: int, inner: int) -> dict[str, Any]:
    """A one-kernel model (``neg`` of a 1-element array) against ``np.negative``: the
    difference is the call path (input check, sync function, kernel binding, output packing)."""
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (1,), "f32")])
    fn.returns([fn.op("neg", [fn.arguments[0]])])
    model = compile_module(gb.finish())
    x = np.ones(1, np.float32)
    fns: dict[str, Any] = {"np.negative": np.negative, "CompiledModel": model}
    samples = _interleaved(fns, x, reps, inner)
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {"us_median": med, "overhead_us": med["CompiledModel"] - med["np.negative"]}


# -- ResNet-50-sized compile ------------------------------------------------------------------
def resnet50_graph(rng: np.random.Generator) -> tuple[GraphModule, dict[str, int]]:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("image", (None, 224, 224, 3), "f32")])
    counts: dict[str, int] = {}
    n = [0]

    def op(name: str, args: list[Any], **attrs: Any) -> Any:
        counts[name] = counts.get(name, 0) + 1
        return fn.op(name, args, **attrs)

    def conv_bn(x: Any, cin: int, cout: int, k: int, s: int, relu: bool) -> Any:
        n[0] += 1
        w = (rng.standard_normal((k, k, cin, cout)) * np.sqrt(2 / (k * k * cin))).astype(
            np.float32)
        p = (k - 1) // 2
        pads = [p, p, p, p]
        y = op("conv2d", [x, fn.constant(w, name=f"conv{n[0]}/w")], layout="NHWC",
               strides=[s, s], pads=pads)
        bn = [fn.constant(rng.uniform(0.5, 1.5, cout).astype(np.float32), name=f"bn{n[0]}/{k_}")
              for k_ in ("scale", "offset", "mean", "var")]
        y = op("batch_norm", [y, *bn], epsilon=1e-3, axis=3)
        return op("relu", [y]) if relu else y

    (x,) = fn.arguments
    h = conv_bn(x, 3, 64, 7, 2, True)
    h = op("max_pool2d", [h], layout="NHWC", ksize=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (width, blocks) in enumerate(zip([64, 128, 256, 512], [3, 4, 6, 3],
                                                strict=True)):
        for b in range(blocks):
            s = 2 if (b == 0 and stage > 0) else 1
            y = conv_bn(h, cin, width, 1, 1, True)
            y = conv_bn(y, width, width, 3, s, True)
            y = conv_bn(y, width, width * 4, 1, 1, False)
            short = conv_bn(h, cin, width * 4, 1, s, False) if b == 0 else h
            h = op("relu", [op("add", [y, short])])
            cin = width * 4
    h = op("reshape", [op("global_avg_pool", [h], layout="NHWC")], shape=[-1, 2048])
    wd = (rng.standard_normal((2048, 1000)) * 0.02).astype(np.float32)
    h = op("add", [op("matmul", [h, fn.constant(wd, name="fc/w")]),
                   fn.constant(np.zeros(1000, np.float32), name="fc/b")])
    fn.returns([op("softmax", [h], axis=-1)])
    return gb.finish(), counts


def bench_compile(check: bool) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    gm, counts = resnet50_graph(rng)
    t1 = time.perf_counter()
    gm = default_pipeline(gm)
    t2 = time.perf_counter()
    low = lower(gm)
    t3 = time.perf_counter()
    model = CompiledModel(low.program, [low.weights[n] for n in low.init_inputs], low.signature,
                          low.num_resources, low.init_inputs)
    t4 = time.perf_counter()
    kernels = len(low.program.get("main").kernels)
    out: dict[str, Any] = {
        "graph_ops": counts, "nodes": sum(counts.values()), "main_kernels": kernels,
        "build_s": t1 - t0, "passes_s": t2 - t1, "lower_s": t3 - t2, "load_s": t4 - t3,
        "total_s": t4 - t0,
    }
    if check:
        plain = compile_module(resnet50_graph(np.random.default_rng(0))[0], optimize=False)
        x = np.random.default_rng(1).standard_normal((1, 224, 224, 3)).astype(np.float32)
        a, b = plain(x), model(x)
        out["max_abs_diff_vs_unoptimised"] = float(np.abs(a - b).max())
        times = {}
        for name, m in (("unoptimised", plain), ("optimised", model)):
            m(x)
            ts = []
            for _ in range(3):
                t = time.perf_counter()
                m(x)
                ts.append(time.perf_counter() - t)
            times[name] = min(ts) * 1e3
        out["forward_ms_batch1"] = times
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, no forward check")
    args = ap.parse_args()
    reps, inner = (5, 200) if args.quick else (15, 500)
    meta = {"command": "python benchmarks/compiler.py" + (" --quick" if args.quick else ""),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.processor()}",
            "python": platform.python_version(), "load_average": os.getloadavg()}
    mlp = bench_mlp([784, 512, 512, 10], reps, inner)
    tiny = bench_mlp([4, 4, 4, 4], reps, inner * 4)
    call = bench_call_overhead(reps, inner * 4)
    comp = bench_compile(check=not args.quick)
    print("MLP per call at batch 1 (median us; ratio to NumPy)")
    print(f"{'model':<16} {'numpy':>8} {'no passes':>10} {'optimised':>10} {'ratio':>6}")
    for name, r in (("784-512-512-10", mlp), ("4-4-4-4", tiny)):
        m = r["us_median"]
        print(f"{name:<16} {m['numpy']:8.1f} {m['pytfrt (no passes)']:10.1f} "
              f"{m['pytfrt (optimised)']:10.1f} {r['ratio_optimised']:6.2f}")
        c = r["cpu_us_median"]
        print(f"{'  (thread CPU)':<16} {c['numpy']:8.1f} {c['pytfrt (no passes)']:10.1f} "
              f"{c['pytfrt (optimised)']:10.1f} {r['cpu_ratio_optimised']:6.2f}")
    print(f"\none-kernel model: {call['us_median']['CompiledModel']:.2f} us per call vs "
          f"np.negative {call['us_median']['np.negative']:.2f} us: call path "
          f"{call['overhead_us']:.2f} us")
    print(f"\nResNet-50-sized graph: {comp['nodes']} graph ops {comp['graph_ops']}, "
          f"{comp['main_kernels']} kernels after the pipeline")
    print(f"{'stage':<10} {'seconds':>8}")
    for k in ("build_s", "passes_s", "lower_s", "load_s", "total_s"):
        print(f"{k[:-2]:<10} {comp[k]:8.2f}")
    if "forward_ms_batch1" in comp:
        print(f"forward at batch 1 (ms): {comp['forward_ms_batch1']}; max |diff| vs "
              f"unoptimised {comp['max_abs_diff_vs_unoptimised']:.2e}")
    def draw(path: Path) -> None:
        plt = pyplot()
        if plt is None:
            return
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        names = list(mlp["us_median"])
        a1.bar(names, [mlp["us_median"][n] for n in names], color=["grey", "tab:blue", "tab:green"])
        a1.set_ylabel("us per call (median)")
        a1.set_title("784-512-512-10 MLP, batch 1")
        a1.tick_params(axis="x", labelsize=8)
        stages = ["build_s", "passes_s", "lower_s", "load_s"]
        a2.bar([s[:-2] for s in stages], [comp[s] for s in stages], color="tab:orange")
        a2.axhline(30, color="red", linestyle="--", label="goal (30 s total)")
        a2.set_ylabel("seconds")
        a2.set_title(f"compile a ResNet-50-sized graph ({comp['nodes']} ops)")
        a2.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=100)

    save_results("compiler", {"meta": meta, "mlp": mlp, "mlp_tiny": tiny, "call_overhead": call,
                              "resnet50_compile": comp}, draw, newline=False, results_dir=RESULTS)


if __name__ == "__main__":
    main()
