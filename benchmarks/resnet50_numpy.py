"""ResNet-50 assembled directly from pytfrt's CPU kernels vs TensorFlow and ONNX Runtime.

The kernel-level ceiling of a compiled ResNet-50, independent of the graph compiler: the network
is written here as a list of :func:`pytfrt.backends.cpu.conv.plan_conv2d` plans (batch norm
folded into the conv weights and biases, ReLU and the residual add fused into the conv epilogue,
every activation buffer allocated once per batch size), run on a float32 batch.

Peers, in the same process and run (random weights everywhere; only time is compared):

* ``tf.function`` -- ``keras.applications.ResNet50(weights=None)`` (NHWC, the same v1
  architecture: stride 2 on the first 1x1 conv of a stage) called through ``tf.function``.
* ``onnxruntime`` -- the same folded network as an ONNX graph (NCHW ``Conv``/``Relu``/``Add``,
  built with ``onnx.helper``), all graph optimisations on; its output is also compared with
  ours (max abs difference printed) as a correctness check.
* ``pytfrt NHWC`` / ``pytfrt NCHW`` -- the network from our kernels in either layout;
  ``pytfrt NHWC builtin`` -- the same without oneDNN's convolution primitive (listed when the
  oneDNN library is installed).

Prints a table (median and best ms per batch, ratio to ``tf.function``), writes
``benchmarks/results/resnet50_numpy.json`` and ``.png``.

Usage: ``python benchmarks/resnet50_numpy.py [--batches 1 8] [--repeats 30] [--skip-tf]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pytfrt.backends.cpu import conv, gemm, norm, pooling
from pytfrt.tools.bench import pyplot, save_results

sys.path.insert(0, str(Path(__file__).resolve().parent))
from xor import cpu_model

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"

# (blocks, bottleneck width, stride of the stage) -- ResNet-50 v1 as Keras builds it.
STAGES = ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2))


class ConvSpec:
    """One conv with batch norm folded: HWIO weights, bias, stride, pads, activation."""

    def __init__(
        self,
        rng: np.random.Generator,
        k: int,
        cin: int,
        cout: int,
        stride: int,
        pads: tuple[int, int, int, int],
        relu: bool,
    ) -> None:
        w = rng.standard_normal((k, k, cin, cout)).astype(np.float32) * np.sqrt(2.0 / (k * k * cin))
        gamma = rng.uniform(0.5, 1.0, cout)
        beta = rng.uniform(-0.1, 0.1, cout)
        mean = rng.uniform(-0.1, 0.1, cout)
        var = rng.uniform(0.5, 1.5, cout)
        a = gamma / np.sqrt(var + 1e-3)
        self.w = (w * a).astype(np.float32)
        self.b = (beta - mean * a).astype(np.float32)
        self.k, self.cin, self.cout, self.stride, self.pads, self.relu = (
            k,
            cin,
            cout,
            stride,
            pads,
            relu,
        )


def resnet50_specs(seed: int = 0) -> tuple[list[tuple[str, object]], np.ndarray, np.ndarray]:
    """The network as a list of ("conv", spec) / ("block", (specs...)) / ("pool", None) steps."""
    rng = np.random.default_rng(seed)
    steps: list[tuple[str, object]] = [
        ("conv", ConvSpec(rng, 7, 3, 64, 2, (3, 3, 3, 3), True)),
        ("pool", None),
    ]
    cin = 64
    for blocks, width, stride in STAGES:
        for i in range(blocks):
            s = stride if i == 0 else 1
            c1 = ConvSpec(rng, 1, cin, width, s, (0, 0, 0, 0), True)
            c2 = ConvSpec(rng, 3, width, width, 1, (1, 1, 1, 1), True)
            c3 = ConvSpec(rng, 1, width, 4 * width, 1, (0, 0, 0, 0), True)  # relu after the add
            short = ConvSpec(rng, 1, cin, 4 * width, s, (0, 0, 0, 0), False) if i == 0 else None
            steps.append(("block", (c1, c2, c3, short)))
            cin = 4 * width
    fc_w = (rng.standard_normal((2048, 1000)) / np.sqrt(2048)).astype(np.float32)
    fc_b = rng.uniform(-0.1, 0.1, 1000).astype(np.float32)
    return steps, fc_w, fc_b


class KernelResNet:
    """ResNet-50 from pytfrt's kernels in one layout; buffers allocated once per batch size."""

    def __init__(self, layout: str, seed: int = 0, builtin: bool = False) -> None:
        self.layout = layout
        self.builtin = builtin
        """Without oneDNN's convolution primitive (the built-in conv algorithms only)."""
        steps, fc_w, fc_b = resnet50_specs(seed)
        self.fc_w, self.fc_b = fc_w, fc_b
        self.steps: list[tuple[str, object]] = []
        for kind, spec in steps:
            if kind == "conv":
                self.steps.append((kind, self._plan(spec, "relu")))  # type: ignore[arg-type]
            elif kind == "block":
                c1, c2, c3, short = spec  # type: ignore[misc]
                plans = (
                    self._plan(c1, "relu"),
                    self._plan(c2, "relu"),
                    self._plan(c3, "relu"),
                    None if short is None else self._plan(short, "none"),
                )
                self.steps.append((kind, plans))
            else:
                self.steps.append((kind, None))
        self._buffers: dict[tuple[int, ...], list[np.ndarray]] = {}

    def _plan(self, spec: ConvSpec, act: str) -> conv.ConvPlan:
        w = spec.w if self.layout == "NHWC" else np.ascontiguousarray(spec.w.transpose(3, 2, 0, 1))
        plan = conv.plan_conv2d(
            w,
            layout=self.layout,
            strides=(spec.stride, spec.stride),
            pads=spec.pads,
            bias=spec.b,
            activation=act,
        )
        return dataclasses.replace(plan, dnnl=None) if self.builtin else plan

    def _alloc(self, shape: tuple[int, ...]) -> list[np.ndarray]:
        bufs: list[np.ndarray] = []
        x = np.empty(shape, np.float32)
        for kind, p in self.steps:
            if kind == "conv":
                x = np.empty(p.output_shape(x.shape), np.float32)  # type: ignore[union-attr]
                bufs.append(x)
            elif kind == "pool":
                n, a, b, c = x.shape
                ha = (1, 2) if self.layout == "NHWC" else (2, 3)
                shp = list(x.shape)
                shp[ha[0]] = (shp[ha[0]] + 2 - 3) // 2 + 1
                shp[ha[1]] = (shp[ha[1]] + 2 - 3) // 2 + 1
                x = np.empty(shp, np.float32)
                bufs.append(x)
            else:
                p1, p2, p3, ps = p  # type: ignore[misc]
                y1 = np.empty(p1.output_shape(x.shape), np.float32)
                y2 = np.empty(p2.output_shape(y1.shape), np.float32)
                y3 = np.empty(p3.output_shape(y2.shape), np.float32)
                bufs += [y1, y2, y3]
                if ps is not None:
                    bufs.append(np.empty(ps.output_shape(x.shape), np.float32))
                x = y3
        return bufs

    def __call__(self, x: np.ndarray) -> np.ndarray:
        bufs = self._buffers.get(x.shape)
        if bufs is None:
            bufs = self._buffers[x.shape] = self._alloc(x.shape)
        it = iter(bufs)
        for kind, p in self.steps:
            if kind == "conv":
                x = conv.conv2d(p, x, out=next(it))  # type: ignore[arg-type]
            elif kind == "pool":
                x = pooling.max_pool2d(
                    x,
                    layout=self.layout,
                    ksize=(3, 3),
                    strides=(2, 2),
                    pads=(1, 1, 1, 1),
                    out=next(it),
                )
            else:
                p1, p2, p3, ps = p  # type: ignore[misc]
                y1 = conv.conv2d(p1, x, out=next(it))
                y2 = conv.conv2d(p2, y1, out=next(it))
                y3 = next(it)
                short = x if ps is None else conv.conv2d(ps, x, out=next(it))
                x = conv.conv2d(p3, y2, residual=short, out=y3)
        pooled = pooling.global_avg_pool(x, layout=self.layout).reshape(x.shape[0], -1)
        logits = gemm.matmul(pooled, self.fc_w, bias=self.fc_b)
        return norm.softmax(logits, -1, out=logits)


def onnx_model(seed: int = 0) -> bytes:
    """The same folded network as an NCHW ONNX graph (serialized)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    steps, fc_w, fc_b = resnet50_specs(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    counter = iter(range(10_000))

    def conv_node(x: str, spec: ConvSpec, relu: bool, residual: str | None = None) -> str:
        i = next(counter)
        w = np.ascontiguousarray(spec.w.transpose(3, 2, 0, 1))
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        inits.append(numpy_helper.from_array(spec.b, f"b{i}"))
        pt, pb, pl, pr = spec.pads
        y = f"c{i}"
        nodes.append(
            helper.make_node(
                "Conv",
                [x, f"w{i}", f"b{i}"],
                [y],
                kernel_shape=[spec.k, spec.k],
                strides=[spec.stride] * 2,
                pads=[pt, pl, pb, pr],
            )
        )
        if residual is not None:
            nodes.append(helper.make_node("Add", [y, residual], [f"a{i}"]))
            y = f"a{i}"
        if relu:
            nodes.append(helper.make_node("Relu", [y], [f"r{i}"]))
            y = f"r{i}"
        return y

    x = "x"
    for kind, spec in steps:
        if kind == "conv":
            x = conv_node(x, spec, True)  # type: ignore[arg-type]
        elif kind == "pool":
            nodes.append(
                helper.make_node(
                    "MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
                )
            )
            x = "pool"
        else:
            c1, c2, c3, short = spec  # type: ignore[misc]
            sc = x if short is None else conv_node(x, short, False)
            y = conv_node(conv_node(x, c1, True), c2, True)
            x = conv_node(y, c3, True, residual=sc)
    inits.append(numpy_helper.from_array(fc_w, "fc_w"))
    inits.append(numpy_helper.from_array(fc_b, "fc_b"))
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "resnet50",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1000])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def time_it(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()
    fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per variant")
    ap.add_argument("--skip-tf", action="store_true")
    ap.add_argument("--tag", default="", help="suffix of the result files")
    args = ap.parse_args(argv)

    variants: dict[str, Callable[[np.ndarray], object]] = {}
    nhwc = KernelResNet("NHWC")
    nchw = KernelResNet("NCHW")
    variants["pytfrt NHWC"] = nhwc
    if conv.plan_conv2d(np.ones((1, 1, 1, 1), np.float32), layout="NHWC").dnnl is not None:
        variants["pytfrt NHWC builtin"] = KernelResNet("NHWC", builtin=True)
    variants["pytfrt NCHW"] = lambda x: nchw(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    sess = ort.InferenceSession(onnx_model(), so, providers=["CPUExecutionProvider"])

    def run_ort(x: np.ndarray) -> object:
        return sess.run(None, {"x": np.ascontiguousarray(x.transpose(0, 3, 1, 2))})[0]

    variants["onnxruntime"] = run_ort
    if not args.skip_tf:
        import tensorflow as tf

        keras_model = tf.keras.applications.ResNet50(weights=None)
        tf_fn = tf.function(keras_model, input_signature=[tf.TensorSpec([None, 224, 224, 3])])
        variants["tf.function"] = lambda x: tf_fn(tf.constant(x)).numpy()

    rng = np.random.default_rng(1)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for batch in args.batches:
        x = rng.standard_normal((batch, 224, 224, 3)).astype(np.float32)
        ref = run_ort(x)
        for name in [v for v in variants if v.startswith("pytfrt")]:
            diff = float(np.abs(np.asarray(variants[name](x)) - ref).max())
            print(f"b{batch} {name}: max |softmax - onnxruntime| = {diff:.2e}")
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.rounds):
            for name, fn in variants.items():
                times[name] += time_it(lambda fn=fn, x=x: fn(x), args.repeats // args.rounds or 1)
        results[f"b{batch}"] = {
            k: {"median_ms": statistics.median(v), "best_ms": min(v)} for k, v in times.items()
        }
    base = "tf.function" if not args.skip_tf else "onnxruntime"
    print(f"\n{'variant':<20}" + "".join(f"{b:>28}" for b in results))
    for name in variants:
        row = f"{name:<20}"
        for b in results:
            r = results[b][name]
            ratio = r["median_ms"] / results[b][base]["median_ms"]
            row += f"{r['median_ms']:>9.1f} ms (best {r['best_ms']:6.1f}) {ratio:4.2f}x"
        print(row)
    print(f"(ratio = median / {base} median)")
    meta = {
        "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {cpu_model()}",
        "env": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
        "baseline": base,
    }
    save_results(f"resnet50_numpy{args.tag}", {"meta": meta, "results": results},
                 lambda path: plot(results, path), newline=False, results_dir=RESULTS)
    return 0


def plot(results: dict[str, dict[str, dict[str, float]]], path: Path) -> None:
    """Grouped bars: median ms per variant, one group per batch size."""
    plt = pyplot()
    if plt is None:
        return
    batches = list(results)
    names = list(next(iter(results.values())))
    fig, axes = plt.subplots(1, len(batches), figsize=(5 * len(batches), 4))
    axes = np.atleast_1d(axes)
    for ax, b in zip(axes, batches, strict=True):
        vals = [results[b][n]["median_ms"] for n in names]
        ax.bar(range(len(names)), vals, color="tab:blue")
        ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
        ax.set_ylabel("ms per batch (median)")
        ax.set_title(f"ResNet-50 float32, batch {b[1:]}")
        for i, v in enumerate(vals):
            ax.text(i, v, f"{v:.1f}", ha="center", va="bottom")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
