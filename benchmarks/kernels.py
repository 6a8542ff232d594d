"""CPU kernel benchmark: pytfrt's conv kernels vs plain NumPy vs ONNX Runtime, per layer shape.

For each layer shape (every distinct convolution of ResNet-50 at batch 1 and 8, the
MobileNetV2 depthwise convolutions, ResNet's max pool) three implementations compute
``relu(conv(x, w) + bias)`` on the same float32 data:

* ``pytfrt`` -- :func:`pytfrt.backends.cpu.conv.conv2d` with a plan made once (fused bias and
  ReLU, ``out=`` buffer), NHWC for ResNet (as Keras runs it) and MobileNet;
* ``builtin`` -- the same with the algorithm ``auto`` picks when oneDNN's convolution primitive
  is not used (im2col/Winograd + GEMM, or depthwise loops; ``docs/kernels.md``);
* ``numpy`` -- the plain NumPy formulation: pad, im2col with ``sliding_window_view``, one
  ``tensordot`` (OpenBLAS), then ``np.maximum(y + b, 0)`` (depthwise: per-tap multiply-adds);
* ``onnxruntime`` -- a one-node ONNX model (``Conv`` with bias, then ``Relu``; NCHW, its
  native layout) built with ``onnx.helper``, all graph optimisations on.

Outputs are cross-checked (max relative difference printed per row).  Prints a table of median
milliseconds and ratios, writes ``benchmarks/results/kernels.json`` and ``kernels.png``.

Usage: ``python benchmarks/kernels.py [--repeats 7] [--batches 1 8] [--only resnet|mobilenet]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pytfrt.backends.cpu import _blas, conv, pooling
from pytfrt.tools.bench import save_results

sys.path.insert(0, str(Path(__file__).resolve().parent))
from xor import cpu_model

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"

# (name, h=w, cin, cout, k, stride, pads, groups) -- ResNet-50 v1 (Keras) distinct convs.
RESNET = [
    ("stem 7x7/2", 224, 3, 64, 7, 2, (3, 3, 3, 3), 1),
    ("s1 1x1 64>64", 56, 64, 64, 1, 1, (0, 0, 0, 0), 1),
    ("s1 3x3 64", 56, 64, 64, 3, 1, (1, 1, 1, 1), 1),
    ("s1 1x1 64>256", 56, 64, 256, 1, 1, (0, 0, 0, 0), 1),
    ("s1 1x1 256>64", 56, 256, 64, 1, 1, (0, 0, 0, 0), 1),
    ("s2 1x1/2 256>128", 56, 256, 128, 1, 2, (0, 0, 0, 0), 1),
    ("s2 1x1/2 256>512", 56, 256, 512, 1, 2, (0, 0, 0, 0), 1),
    ("s2 3x3 128", 28, 128, 128, 3, 1, (1, 1, 1, 1), 1),
    ("s2 1x1 128>512", 28, 128, 512, 1, 1, (0, 0, 0, 0), 1),
    ("s2 1x1 512>128", 28, 512, 128, 1, 1, (0, 0, 0, 0), 1),
    ("s3 1x1/2 512>1024", 28, 512, 1024, 1, 2, (0, 0, 0, 0), 1),
    ("s3 3x3 256", 14, 256, 256, 3, 1, (1, 1, 1, 1), 1),
    ("s3 1x1 256>1024", 14, 256, 1024, 1, 1, (0, 0, 0, 0), 1),
    ("s3 1x1 1024>256", 14, 1024, 256, 1, 1, (0, 0, 0, 0), 1),
    ("s4 1x1/2 1024>2048", 14, 1024, 2048, 1, 2, (0, 0, 0, 0), 1),
    ("s4 3x3 512", 7, 512, 512, 3, 1, (1, 1, 1, 1), 1),
    ("s4 1x1 512>2048", 7, 512, 2048, 1, 1, (0, 0, 0, 0), 1),
    ("s4 1x1 2048>512", 7, 2048, 512, 1, 1, (0, 0, 0, 0), 1),
]
# MobileNetV2 depthwise 3x3 convolutions (input size, channels, stride).
MOBILENET = [
    ("dw 112 32/1", 112, 32, 32, 3, 1, (1, 1, 1, 1), 32),
    ("dw 112 96/2", 112, 96, 96, 3, 2, (0, 1, 0, 1), 96),
    ("dw 56 144/1", 56, 144, 144, 3, 1, (1, 1, 1, 1), 144),
    ("dw 56 144/2", 56, 144, 144, 3, 2, (0, 1, 0, 1), 144),
    ("dw 28 192/1", 28, 192, 192, 3, 1, (1, 1, 1, 1), 192),
    ("dw 14 576/1", 14, 576, 576, 3, 1, (1, 1, 1, 1), 576),
    ("dw 14 576/2", 14, 576, 576, 3, 2, (0, 1, 0, 1), 576),
    ("dw 7 960/1", 7, 960, 960, 3, 1, (1, 1, 1, 1), 960),
]


def numpy_conv(x, w, b, stride, pads, groups):  # type: ignore[no-untyped-def]
    """Plain NumPy NHWC conv + bias + ReLU (the baseline)."""
    pt, pb, pl, pr = pads
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    k = w.shape[0]
    win = sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::stride, ::stride]  # N,OH,OW,C,k,k
    if groups == 1:
        y = np.tensordot(win, w, axes=((3, 4, 5), (2, 0, 1)))
    else:  # depthwise, multiplier 1
        y = np.einsum("nhwcij,ijc->nhwc", win, w[:, :, 0, :])
    return np.maximum(y + b, 0)


def onnx_session(h, cin, cout, k, stride, pads, groups, w_oihw, b):  # type: ignore[no-untyped-def]
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    pt, pb, pl, pr = pads
    graph = helper.make_graph(
        [
            helper.make_node(
                "Conv",
                ["x", "w", "b"],
                ["c"],
                kernel_shape=[k, k],
                strides=[stride, stride],
                pads=[pt, pl, pb, pr],
                group=groups,
            ),
            helper.make_node("Relu", ["c"], ["y"]),
        ],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", cin, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w_oihw, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    return ort.InferenceSession(onnx.ModelProto.SerializeToString(model), so)


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def bench_layer(spec, batch, repeats, rng):  # type: ignore[no-untyped-def]
    name, h, cin, cout, k, stride, pads, groups = spec
    x = rng.standard_normal((batch, h, h, cin)).astype(np.float32)
    w = (rng.standard_normal((k, k, cin // groups, cout)) / np.sqrt(k * k * cin / groups)).astype(
        np.float32
    )
    b = rng.uniform(-0.1, 0.1, cout).astype(np.float32)

    def make_plan(algorithm: str) -> conv.ConvPlan:
        return conv.plan_conv2d(
            w,
            layout="NHWC",
            strides=(stride, stride),
            pads=pads,
            groups=groups,
            bias=b,
            activation="relu",
            algorithm=algorithm,
        )

    plan = make_plan("auto")
    out = np.empty(plan.output_shape(x.shape), np.float32)
    builtin_algo = plan.builtin_algorithm_for(out.shape)
    builtin = make_plan(builtin_algo)
    x_nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    sess = onnx_session(
        h, cin, cout, k, stride, pads, groups, np.ascontiguousarray(w.transpose(3, 2, 0, 1)), b
    )
    ours = conv.conv2d(plan, x, out=out).copy()
    ref = numpy_conv(x, w, b, stride, pads, groups)
    ort_y = sess.run(None, {"x": x_nchw})[0].transpose(0, 2, 3, 1)
    scale = float(np.abs(ref).max()) or 1.0
    theirs = conv.conv2d(builtin, x)
    err = max(float(np.abs(y - ref).max()) for y in (ours, ort_y, theirs)) / scale
    flops = 2.0 * out.size * k * k * cin / groups
    row = {
        "layer": name,
        "batch": batch,
        "algorithm": plan.algorithm_for(out.shape),
        "gflop": flops / 1e9,
        "pytfrt_ms": median_ms(lambda: conv.conv2d(plan, x, out=out), repeats),
        "builtin_algorithm": builtin_algo,
        "builtin_ms": median_ms(lambda: conv.conv2d(builtin, x, out=out), repeats),
        "numpy_ms": median_ms(lambda: numpy_conv(x, w, b, stride, pads, groups), repeats),
        "onnxruntime_ms": median_ms(lambda: sess.run(None, {"x": x_nchw}), repeats),
        "max_rel_diff": err,
    }
    return row


def bench_maxpool(batch, repeats, rng):  # type: ignore[no-untyped-def]
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = rng.standard_normal((batch, 112, 112, 64)).astype(np.float32)
    out = np.empty((batch, 56, 56, 64), np.float32)
    graph = helper.make_graph(
        [
            helper.make_node(
                "MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
            )
        ],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64, 112, 112])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = ort.InferenceSession(onnx.ModelProto.SerializeToString(model))
    x_nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))

    def ours() -> object:
        return pooling.max_pool2d(
            x, layout="NHWC", ksize=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), out=out
        )

    def plain() -> object:
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
        return sliding_window_view(xp, (3, 3), axis=(1, 2))[:, :-1:2, :-1:2].max(axis=(4, 5))

    diff = float(np.abs(ours() - plain()).max())
    return {
        "layer": "maxpool 3x3/2 112x64",
        "batch": batch,
        "algorithm": "strided views",
        "gflop": 0.0,
        "pytfrt_ms": median_ms(ours, repeats),
        "builtin_algorithm": "strided views",
        "builtin_ms": float("nan"),
        "numpy_ms": median_ms(plain, repeats),
        "onnxruntime_ms": median_ms(lambda: sess.run(None, {"x": x_nchw}), repeats),
        "max_rel_diff": diff,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--only", choices=("resnet", "mobilenet"), default=None)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for batch in args.batches:
        specs = (RESNET if args.only != "mobilenet" else []) + (
            MOBILENET if args.only != "resnet" else []
        )
        for spec in specs:
            rows.append(bench_layer(spec, batch, args.repeats, rng))
            print_row(rows[-1])
        rows.append(bench_maxpool(batch, args.repeats, rng))
        print_row(rows[-1])
    totals: dict[str, dict[str, float]] = {}
    for batch in args.batches:
        sel = [r for r in rows if r["batch"] == batch and not r["layer"].startswith(("dw", "max"))]
        if sel:
            totals[f"resnet distinct convs b{batch}"] = {
                k: sum(r[k] for r in sel)
                for k in ("pytfrt_ms", "builtin_ms", "numpy_ms", "onnxruntime_ms")
            }
    for name, t in totals.items():
        print(
            f"{name}: pytfrt {t['pytfrt_ms']:.1f} ms, builtin {t['builtin_ms']:.1f} ms, "
            f"numpy {t['numpy_ms']:.1f} ms, "
            f"onnxruntime {t['onnxruntime_ms']:.1f} ms "
            f"(pytfrt/ort {t['pytfrt_ms'] / t['onnxruntime_ms']:.2f}x)"
        )
    meta = {
        "command": " ".join(
            ["benchmarks/kernels.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {cpu_model()}",
        "gemm_backend": _blas.backend(),
        "env": {k: v for k, v in os.environ.items() if k.startswith(("OPENBLAS", "PYTFRT"))},
        "load_average": os.getloadavg(),
    }
    save_results("kernels", {"meta": meta, "rows": rows, "totals": totals},
                 lambda path: plot(rows, path), newline=False, results_dir=RESULTS)
    return 0


def print_row(r: dict) -> None:  # type: ignore[type-arg]
    best = min(r["numpy_ms"], r["onnxruntime_ms"])
    print(
        f"b{r['batch']} {r['layer']:<22} {r['algorithm']:<9} pytfrt {r['pytfrt_ms']:8.3f} ms  "
        f"builtin({r['builtin_algorithm'][:9]}) {r['builtin_ms']:8.3f}  "
        f"numpy {r['numpy_ms']:8.3f}  ort {r['onnxruntime_ms']:8.3f}  "
        f"pytfrt/ort {r['pytfrt_ms'] / r['onnxruntime_ms']:5.2f}x  "
        f"pytfrt/best {r['pytfrt_ms'] / best:5.2f}x  diff {r['max_rel_diff']:.1e}",
        flush=True,
    )


def plot(rows: list[dict], path: Path) -> None:  # type: ignore[type-arg]
    """Per-layer bars of pytfrt / onnxruntime and numpy / onnxruntime time ratios."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"b{r['batch']} {r['layer']}" for r in rows]
    ours = [r["pytfrt_ms"] / r["onnxruntime_ms"] for r in rows]
    npy = [r["numpy_ms"] / r["onnxruntime_ms"] for r in rows]
    fig, ax = plt.subplots(figsize=(12, max(4, 0.28 * len(rows))))
    pos = np.arange(len(rows))
    ax.barh(pos - 0.2, ours, height=0.4, label="pytfrt / onnxruntime")
    ax.barh(pos + 0.2, npy, height=0.4, label="numpy / onnxruntime")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(pos, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time relative to ONNX Runtime (lower is faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
