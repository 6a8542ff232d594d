"""Per-conv profile of a compiled model: each convolution timed inside the model vs alone.

Compiles a model (the Keras ResNet50 of ``benchmarks/tf_models.py`` through the TensorFlow
front end, or a zoo ONNX file) with its conv kernels (:func:`pytfrt.backends.cpu.conv.runner`)
wrapped by timers and runs the model; then runs every plan it saw again on its own (same input
shape, residual and ``out=`` buffer) and prints, grouped by conv kind, the medians of wall and
process CPU time in the model and alone, the achieved GFLOP/s and oneDNN's implementation and
part count.  The
difference between "in model" and "alone" is what the model adds around a conv (cold weights,
the call path, thread wake-ups); CPU time is the figure that survives a loaded machine.

With ``--onnxruntime`` (zoo ONNX models) an ONNX Runtime session on the same file (two
threads, no spinning, as ``models.py`` runs it) is called after every timed pytfrt call, with
its own profiler on, and a second table puts each group of convolutions (kind, input height,
channels) beside the sum of ONNX Runtime's kernel times for the same layers: the per-layer
comparison in one process, on one machine state (ONNX Runtime's kernel times leave out its
time between nodes; pytfrt's include the Python of each conv call, ~3-10 us).

The channel-blocked convolutions of ``-tg-dnnl-blocked`` (``BlockedConv.runner``: ResNet-50's
14x14 and 7x7 stages) are timed too, keyed by their image height as the NHWC ones.  A strided
entry (``BLOCKED_STRIDED_ENTRY``) runs as a 1x1 convolution of stride 1 on the subsampled
image, so it appears as ``1x1/1`` at the smaller height (ResNet-50's stage-3 shortcut: ``1x1/1
14 512 1024`` here, ``1x1/2 28 512 1024`` in ONNX Runtime's column) and the reorders
(``reorder_layout``) are not counted.

Usage: ``python benchmarks/conv_profile.py [--model keras_resnet50|<zoo name>] [--batch 1]
[--calls 15] [--onnxruntime]``; writes ``benchmarks/results/conv_profile_<model>_b<batch>.json``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import zoo  # noqa: E402

from pytfrt.backends.cpu._dnnl_blocked import BlockedConv  # noqa: E402
from pytfrt.tools.bench import format_table, machine_info, write_json  # noqa: E402


def _compile(name: str, batch: int) -> tuple[Any, dict[str, np.ndarray], str | None]:
    """The compiled model, its feeds and the ONNX file it came from (``None``: Keras)."""
    import pytfrt

    if name == "keras_resnet50":
        model = pytfrt.compile(zoo.keras_resnet50(224))
        x = np.random.default_rng(0).standard_normal((batch, 224, 224, 3)).astype(np.float32)
        return model, {model.signature.inputs[0].name: x}, None
    zm = zoo.export(name, "/tmp/pytfrt-zoo", small=False, with_torch=False)
    return pytfrt.compile(str(zm.path)), zm.make_inputs(batch=batch), str(zm.path)


def _ort_session(path: str, out_dir: str, threads: int = 2) -> Any:
    """ONNX Runtime on ``path`` with two threads (or ``threads``), no spinning, its profiler
    on."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.enable_profiling = True
    opts.profile_file_prefix = str(Path(out_dir) / "ort_conv_profile")
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _ort_convs(profile: str, skip: int) -> tuple[dict[tuple[Any, ...], list[float]], float]:
    """ONNX Runtime's per-layer kernel times from its profile file: per conv group
    (:func:`_layer_key`) ``[layers, sum of per-layer median ms]``, and the summed medians of
    the other nodes (the first ``skip`` calls of each node are left out: warm-up)."""
    import json
    import os

    with open(profile) as f:
        events = json.load(f)
    os.remove(profile)
    per: dict[str, list[float]] = defaultdict(list)
    args: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per[e["name"]].append(e["dur"] / 1e3)
            args[e["name"]] = e.get("args", {})
    groups: dict[tuple[Any, ...], list[float]] = {}
    other = 0.0
    for name, durs in per.items():
        a = args[name]
        med = float(np.median(durs[skip:] or durs))
        if a.get("op_name") != "Conv":
            other += med
            continue
        x_shape, w_shape = (next(iter(v.values())) for v in a["input_type_shape"][:2])
        y_shape = next(iter(a["output_type_shape"][0].values()))
        key = _layer_key(w_shape[2], w_shape[3], x_shape[2] // y_shape[2], x_shape[2],
                         x_shape[1], w_shape[0])
        g = groups.setdefault(key, [0, 0.0])
        g[0] += 1
        g[1] += med
    return groups, other


def _layer_key(kh: int, kw: int, stride: int, h: int, cin: int, cout: int) -> tuple[Any, ...]:
    """What a pytfrt conv group and an ONNX Runtime node are matched on."""
    return (f"{kh}x{kw}/{stride}", h, cin, cout)


class _Blocked:
    """A channel-blocked convolution (``BlockedConv``) seen through the attributes of a
    ``ConvPlan`` the report reads (its input shape is ``[N, C/16, H, W, 16]``)."""

    def __init__(self, conv: Any) -> None:
        a = conv.dnnl._attrs
        self.conv, self.dnnl = conv, conv.dnnl
        self.kh, self.kw, self.cin, self.cout = a["kh"], a["kw"], a["cin"], a["cout"]
        self.strides, self.groups = a["strides"], 1

    def output_shape(self, xs: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(self.conv.output_shape(xs))

    def algorithm_for(self, ys: tuple[int, ...]) -> str:
        return "blocked"


def _median_ms(v: list[float]) -> float:
    return float(np.median(v)) * 1e3


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pytfrt.backends.cpu import conv as convmod

    wall: dict[int, list[float]] = defaultdict(list)
    cpu: dict[int, list[float]] = defaultdict(list)
    seen: dict[int, tuple[Any, tuple[int, ...], bool]] = {}
    timing = [False]
    orig, orig_runner = convmod.conv2d, convmod.runner
    orig_blocked_runner = BlockedConv.runner

    def timed(fn: Any, plan: Any) -> Any:
        """``fn`` (a conv kernel bound to ``plan``) timed on the calls of the timed loop."""

        def run(x: np.ndarray, residual: np.ndarray | None = None,
                out: np.ndarray | None = None) -> np.ndarray:
            if not timing[0]:
                return fn(x, residual, out)
            c0, t0 = time.process_time(), time.perf_counter()
            y = fn(x, residual, out)
            wall[id(plan)].append(time.perf_counter() - t0)
            cpu[id(plan)].append(time.process_time() - c0)
            seen[id(plan)] = (plan, tuple(x.shape), residual is not None)
            return y

        return run

    def timed_runner(plan: Any) -> Any:
        """The model's conv kernels are bound to their plans when it is compiled
        (``conv.runner``): time the bound functions."""
        return timed(orig_runner(plan), plan)

    def timed_blocked_runner(conv: Any) -> Any:
        """The same for the channel-blocked convolutions (``BlockedConv.runner``)."""
        fn = orig_blocked_runner(conv)
        return fn if conv.dnnl is None else timed(fn, _Blocked(conv))

    convmod.runner = timed_runner  # type: ignore[assignment]
    BlockedConv.runner = timed_blocked_runner  # type: ignore[method-assign]
    try:
        model, feeds, path = _compile(args.model, args.batch)
    finally:
        convmod.runner = orig_runner  # type: ignore[assignment]
        BlockedConv.runner = orig_blocked_runner  # type: ignore[method-assign]
    sess = None
    if args.onnxruntime:
        if path is None:
            raise SystemExit("--onnxruntime needs a zoo ONNX model (--model resnet50, ...)")
        sess = _ort_session(path, args.out, args.ort_threads)
        ort_feeds = {i.name: v for i, v in zip(sess.get_inputs(), feeds.values(), strict=True)}
    warm = 3
    for _ in range(warm):
        model(**feeds)
        if sess is not None:
            sess.run(None, ort_feeds)
    model_wall: list[float] = []
    model_cpu: list[float] = []
    ort_wall: list[float] = []
    for _ in range(args.calls):
        timing[0] = True
        c0, t0 = time.process_time(), time.perf_counter()
        model(**feeds)
        model_wall.append(time.perf_counter() - t0)
        model_cpu.append(time.process_time() - c0)
        timing[0] = False
        if sess is not None:
            t0 = time.perf_counter()
            sess.run(None, ort_feeds)
            ort_wall.append(time.perf_counter() - t0)
    groups: dict[tuple[Any, ...], dict[str, float]] = {}
    rng = np.random.default_rng(1)
    for k, (plan, xs, res) in seen.items():
        x = rng.standard_normal(xs).astype(np.float32)
        ys = plan.output_shape(xs)
        r = rng.standard_normal(ys).astype(np.float32) if res else None
        out = np.empty(ys, np.float32)
        call = plan.conv if isinstance(plan, _Blocked) else functools.partial(orig, plan)
        for _ in range(3):
            call(x, r, out)
        aw, ac = [], []
        for _ in range(args.calls):
            c0, t0 = time.process_time(), time.perf_counter()
            call(x, r, out)
            aw.append(time.perf_counter() - t0)
            ac.append(time.process_time() - c0)
        flops = 2.0 * np.prod(ys) * plan.kh * plan.kw * plan.cin // plan.groups
        impl = plan.dnnl.impl(xs, int(res)) if plan.dnnl is not None else None
        parts = plan.dnnl.parts(xs, int(res)) if plan.dnnl is not None else 0
        kind = "dw" if plan.groups == plan.cin and plan.groups > 1 else (
            f"g{plan.groups}" if plan.groups > 1 else "")
        h = xs[2] if isinstance(plan, _Blocked) else xs[1]
        key = (f"{plan.kh}x{plan.kw}/{plan.strides[0]}{kind}", h, plan.cin, plan.cout, res,
               impl or plan.algorithm_for(ys), parts)
        g = groups.setdefault(key, dict(n=0, model_ms=0, model_cpu_ms=0, alone_ms=0,
                                        alone_cpu_ms=0, gflop=0))
        g["n"] += 1
        g["model_ms"] += _median_ms(wall[k])
        g["model_cpu_ms"] += _median_ms(cpu[k])
        g["alone_ms"] += _median_ms(aw)
        g["alone_cpu_ms"] += _median_ms(ac)
        g["gflop"] += flops / 1e9
    rows = sorted(groups.items(), key=lambda kv: -kv[1]["model_cpu_ms"])
    versus: list[dict[str, Any]] = []
    if sess is not None:
        ort_groups, ort_other = _ort_convs(sess.end_profiling(), warm)
        mine: dict[tuple[Any, ...], list[float]] = {}
        for key, v in groups.items():
            kind, h, cin, cout = key[:4]
            m = mine.setdefault((kind, h, cin, cout), [0, 0.0])
            m[0] += v["n"]
            m[1] += v["model_ms"]
        for key in set(mine) | set(ort_groups):
            n, ms = mine.get(key, [0, 0.0])
            on, oms = ort_groups.get(key, [0, 0.0])
            versus.append(dict(kind=key[0], h=key[1], cin=key[2], cout=key[3], n=n,
                               model_ms=ms, ort_n=on, ort_ms=oms))
        versus.sort(key=lambda r: r["ort_ms"] - r["model_ms"])
    return {
        "command": " ".join(sys.argv),
        "machine": machine_info(),
        "model": args.model,
        "batch": args.batch,
        "model_wall_ms": _median_ms(model_wall),
        "model_cpu_ms": _median_ms(model_cpu),
        "convs": [dict(zip(("kind", "h", "cin", "cout", "residual", "impl", "parts"), k,
                           strict=True), **v) for k, v in rows],
        **({} if sess is None else {
            "onnxruntime_wall_ms": _median_ms(ort_wall),
            "onnxruntime_other_ms": ort_other,
            "versus_onnxruntime": versus,
        }),
    }


def _print(rec: dict[str, Any]) -> None:
    convs = rec["convs"]
    tot = {f: sum(c[f] for c in convs) for f in ("model_ms", "model_cpu_ms", "alone_ms",
                                                 "alone_cpu_ms", "gflop")}
    print(f"{rec['model']} b{rec['batch']}: model {rec['model_wall_ms']:.2f} ms wall, "
          f"{rec['model_cpu_ms']:.2f} ms CPU per call; convs in the model {tot['model_ms']:.2f} "
          f"ms wall / {tot['model_cpu_ms']:.2f} ms CPU, alone {tot['alone_ms']:.2f} / "
          f"{tot['alone_cpu_ms']:.2f} ms ({tot['gflop']:.2f} GFLOP)")
    rows = [[c["kind"], c["h"], c["cin"], c["cout"], "y" if c["residual"] else "", c["n"],
             f"{c['model_ms']:.2f}", f"{c['model_cpu_ms']:.2f}", f"{c['alone_ms']:.2f}",
             f"{c['alone_cpu_ms']:.2f}", f"{c['gflop'] / max(c['model_cpu_ms'], 1e-9) * 1e3:.0f}",
             c["impl"], c["parts"]] for c in convs]
    print(format_table(["conv", "H", "cin", "cout", "res", "n", "model ms", "model CPU",
                        "alone ms", "alone CPU", "GFLOP/s CPU", "impl", "parts"], rows))
    versus = rec.get("versus_onnxruntime")
    if versus:
        mine = sum(r["model_ms"] for r in versus)
        ort = sum(r["ort_ms"] for r in versus)
        print(f"\nagainst ONNX Runtime (calls interleaved): whole call {rec['model_wall_ms']:.2f} "
              f"vs {rec['onnxruntime_wall_ms']:.2f} ms (ORT profiling on); convs {mine:.2f} vs "
              f"{ort:.2f} ms; ORT's other nodes {rec['onnxruntime_other_ms']:.2f} ms")
        print(format_table(
            ["conv", "H", "cin", "cout", "n", "pytfrt ms", "ORT ms", "diff ms", "x ORT"],
            [[r["kind"], r["h"], r["cin"], r["cout"], f"{r['n']}/{r['ort_n']}",
              f"{r['model_ms']:.2f}", f"{r['ort_ms']:.2f}", f"{r['model_ms'] - r['ort_ms']:+.2f}",
              f"{r['model_ms'] / r['ort_ms']:.2f}" if r["ort_ms"] else "-"] for r in versus]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="keras_resnet50")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=15)
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--onnxruntime", action="store_true",
                   help="also run ONNX Runtime on the same file, interleaved, and compare "
                        "per layer group with its profiler's kernel times")
    p.add_argument("--ort-threads", type=int, default=2,
                   help="ONNX Runtime's threads (with PYTFRT_NUM_THREADS=1: one thread each)")
    args = p.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)  # (ONNX Runtime's profile goes there too)
    rec = run(args)
    _print(rec)
    write_json(Path(args.out) / f"conv_profile_{args.model}_b{args.batch}.json", rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
