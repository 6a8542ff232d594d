"""Benchmark of ``-tg-layout-nhwc``: ONNX models compiled with and without the layout pass.

For each zoo model (``benchmarks/zoo.py``, full size) it compiles the ONNX file twice -- the
default pipeline (``nhwc``) and the default pipeline without ``-tg-layout-nhwc`` (``nchw``, the
compiler before the pass) -- checks both against ONNX Runtime, and times the two beside ONNX
Runtime, interleaved call by call (the machine is shared: only ratios within one run mean
anything).  It also takes a census of the convolutions of the ``nhwc`` graph at batch 1: per
kind (dense, depthwise, grouped) how many run oneDNN's primitive (and its implementation name)
and how many the built-in kernels; and times the model's depthwise convolutions alone, one
layer at a time, in three forms: NCHW built-in, NHWC built-in (``algorithm="depthwise"``) and
NHWC ``auto`` (oneDNN where it has a primitive).

Prints tables, writes ``layout_nhwc.json`` and ``layout_nhwc.png`` under ``--out``.
Run: ``.venv/bin/python benchmarks/layout_nhwc.py [--models ...] [--batches 1 8]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import models  # noqa: E402  (benchmarks/models.py: timing, ONNX Runtime peer, threads)
import zoo  # noqa: E402

from pytfrt.tools.bench import format_table, machine_info, progress, write_json  # noqa: E402

MODELS = ("resnet50", "mobilenet_v3_small", "efficientnet_b0", "keras_resnet50")
PEERS = ("nchw", "nhwc", "onnxruntime")


def _graphs(path: Path) -> dict[str, Any]:
    """The two optimised graph modules of an ONNX file."""
    from pytfrt.compiler.frontends.onnx import import_onnx
    from pytfrt.compiler.passes import DEFAULT_PIPELINE, run_passes

    without = tuple(p for p in DEFAULT_PIPELINE if p != "tg-layout-nhwc")
    return {
        "nchw": run_passes(import_onnx(path), without),
        "nhwc": run_passes(import_onnx(path), DEFAULT_PIPELINE),
    }


def _op_counts(gm: Any) -> dict[str, int]:
    return dict(Counter(op.name[3:] for op in gm.function("main").body.block.ops
                        if op.name.startswith("tg.") and op.name != "tg.constant"))


def _convs(gm: Any) -> list[dict[str, Any]]:
    """Every conv2d of ``@main`` with its filter, bias and attributes (batch-1 input shape)."""
    from pytfrt.compiler.passes.common import attrs_of, const_value, ttype

    out = []
    for op in gm.function("main").body.block.ops:
        if op.name != "tg.conv2d":
            continue
        a = attrs_of(op)
        w = const_value(gm, op.operands[1])
        if w is None:
            continue
        bias = const_value(gm, op.operands[2]) if a["epilogue_operands"][0] else None
        xs = ttype(op.operands[0]).shape
        assert xs is not None
        out.append({"w": w, "bias": bias, "attrs": a, "x_shape": (1, *xs[1:]),
                    "residual": bool(a["epilogue_operands"][1])})
    return out


def _plan(c: dict[str, Any], layout: str, algorithm: str = "auto") -> Any:
    from pytfrt.backends.cpu.conv import plan_conv2d

    a = c["attrs"]
    return plan_conv2d(c["w"], layout=layout, strides=a["strides"], dilations=a["dilations"],
                       pads=a["pads"], groups=a["groups"], bias=c["bias"],
                       activation=a["activation"], alpha=a["alpha"], algorithm=algorithm)


def _kind(c: dict[str, Any]) -> str:
    a = c["attrs"]
    cin = c["x_shape"][3]
    if a["groups"] == 1:
        return "dense"
    return "depthwise" if a["groups"] == cin else "grouped"


def _census(gm: Any) -> list[dict[str, Any]]:
    """Per conv kind and algorithm (oneDNN implementation name): how many convs."""
    counts: Counter[tuple[str, str]] = Counter()
    for c in _convs(gm):
        plan = _plan(c, "NHWC")
        out_shape = plan.output_shape(c["x_shape"])
        algo = plan.algorithm_for(out_shape)
        if algo == "dnnl":
            assert plan.dnnl is not None
            impl = plan.dnnl.impl(c["x_shape"], c["residual"])
            algo = f"dnnl {impl}" if impl else plan.builtin_algorithm_for(out_shape)
        counts[(_kind(c), algo)] += 1
    return [{"kind": k, "algorithm": a, "count": n} for (k, a), n in sorted(counts.items())]


def _depthwise_layers(gm: Any, repeats: int) -> dict[str, float] | None:
    """Summed median milliseconds of the model's depthwise convs (batch 1), per form."""
    from pytfrt.backends.cpu.conv import conv2d

    convs = [c for c in _convs(gm) if _kind(c) == "depthwise"]
    if not convs:
        return None
    total = {"nchw builtin": 0.0, "nhwc builtin": 0.0, "nhwc auto": 0.0}
    rng = np.random.default_rng(0)
    for c in convs:
        x = rng.standard_normal(c["x_shape"]).astype(np.float32)
        oihw = np.ascontiguousarray(c["w"].transpose(3, 2, 0, 1))
        forms = {
            "nchw builtin": (_plan(dict(c, w=oihw), "NCHW"), np.ascontiguousarray(
                x.transpose(0, 3, 1, 2))),
            "nhwc builtin": (_plan(c, "NHWC", "depthwise"), x),
            "nhwc auto": (_plan(c, "NHWC"), x),
        }
        ref = None
        for name, (plan, xin) in forms.items():
            res = None
            if c["residual"]:
                res = np.zeros(plan.output_shape(xin.shape), np.float32)
            y = conv2d(plan, xin, res)
            y_nhwc = y.transpose(0, 2, 3, 1) if name.startswith("nchw") else y
            if ref is None:
                ref = y_nhwc
            elif not np.allclose(y_nhwc, ref, rtol=1e-4, atol=1e-4):
                raise AssertionError(f"depthwise {name} disagrees with nchw builtin")
        ts: dict[str, list[float]] = {n: [] for n in forms}
        for r in range(repeats):
            for name in list(forms)[r % 3:] + list(forms)[:r % 3]:
                plan, xin = forms[name]
                res = None if not c["residual"] else np.zeros(plan.output_shape(xin.shape),
                                                               np.float32)
                t0 = time.perf_counter()
                conv2d(plan, xin, res)
                ts[name].append(time.perf_counter() - t0)
        for n, t in ts.items():
            total[n] += float(np.median(t)) * 1e3
    return {**total, "layers": float(len(convs))}


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; 1 if a compiled model disagrees with ONNX Runtime."""
    import pytfrt.compiler.api as api

    models._exec_with_threads(args.threads)
    rows: list[dict[str, Any]] = []
    census: dict[str, Any] = {}
    failed = False
    for name in args.models:
        progress(f"export {name}", args.quiet)
        try:
            zm = zoo.export(name, args.zoo_dir, small=args.small, with_torch=False)
        except RuntimeError as exc:
            progress(f"{name}: skipped ({exc})", args.quiet)
            continue
        graphs = _graphs(zm.path)
        census[name] = {
            "ops": {k: _op_counts(g) for k, g in graphs.items()},
            "convs": _census(graphs["nhwc"]),
            "depthwise_ms_b1": _depthwise_layers(graphs["nhwc"], args.layer_repeats),
        }
        runners: dict[str, Any] = {}
        for peer, gm in graphs.items():
            m = api.compile_module(gm, optimize=False)
            runners[peer] = models.by_name(m)
        runners["onnxruntime"] = models._ort_runner(zm, args.threads)
        for batch in args.batches:
            feeds = zm.make_inputs(batch=batch)
            want = runners["onnxruntime"](feeds)
            errors = {p: max(zoo.relative_error(g, w) for g, w in
                             zip(fn(feeds), want, strict=True)) for p, fn in runners.items()}
            if any(not e <= models.TOLERANCE for e in errors.values()):
                progress(f"{name} b{batch}: disagree with ONNX Runtime: {errors}")
                failed = True
            progress(f"{name} b{batch}: timing", args.quiet)
            times = models._time_interleaved(runners, feeds, args.repeats, args.warmup)
            rows.append({"model": name, "batch": batch, "peers": {
                p: {**models._stats(ts), "rel_error": errors[p]} for p, ts in times.items()}})
    record = {
        "benchmark": "layout_nhwc",
        "command": " ".join(sys.argv),
        "machine": machine_info(),
        "threads": args.threads,
        "repeats": args.repeats,
        "rows": rows,
        "census": census,
    }
    _print(record)
    out = Path(args.out)
    write_json(out / f"{args.name}.json", record)
    _plot(record, out / f"{args.name}.png")
    progress(f"wrote {out / (args.name + '.json')} and .png", args.quiet)
    return 1 if failed else 0


def _print(record: dict[str, Any]) -> None:
    table = []
    for r in record["rows"]:
        p = r["peers"]
        nchw, nhwc, ort = (p[k]["median_ms"] for k in PEERS)
        table.append([r["model"], r["batch"], f"{nchw:.1f}", f"{nhwc:.1f}", f"{ort:.1f}",
                      f"{nchw / nhwc:.2f}", f"{nhwc / ort:.2f}", f"{nchw / ort:.2f}"])
    print(format_table(["model", "batch", "nchw ms", "nhwc ms", "ORT ms", "nchw/nhwc",
                        "nhwc/ORT", "nchw/ORT"], table))
    print()
    for name, c in record["census"].items():
        print(f"{name}: transposes nchw {c['ops']['nchw'].get('transpose', 0)}, "
              f"nhwc {c['ops']['nhwc'].get('transpose', 0)}")
        print(format_table(["kind", "algorithm (NHWC, b1)", "convs"],
                           [[x["kind"], x["algorithm"], x["count"]] for x in c["convs"]]))
        d = c["depthwise_ms_b1"]
        if d:
            print(f"  depthwise layers ({int(d['layers'])}), summed medians b1: "
                  + ", ".join(f"{k} {v:.2f} ms" for k, v in d.items() if k != "layers"))
        print()


def _plot(record: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = record["rows"]
    labels = [f"{r['model']}\nb{r['batch']}" for r in rows]
    xs = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(rows)), 4))
    for i, peer in enumerate(PEERS):
        ax.bar(xs + (i - 1) * 0.27, [r["peers"][peer]["median_ms"] for r in rows], 0.27,
               label=peer)
    ax.set_xticks(xs, labels, fontsize=7)
    ax.set_ylabel("median ms per call")
    ax.set_yscale("log")
    ax.set_title("-tg-layout-nhwc: ONNX models with (nhwc) and without (nchw) the pass")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--layer-repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--small", action="store_true", help="the zoo's small configurations")
    parser.add_argument("--zoo-dir", default=os.environ.get("PYTFRT_ZOO_DIR", "/tmp/pytfrt-zoo"))
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--name", default="layout_nhwc")
    parser.add_argument("--quiet", action="store_true")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
