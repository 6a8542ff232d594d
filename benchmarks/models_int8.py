"""Int8 model benchmark (``pytfrt bench models --int8``): pytfrt's int8 model against pytfrt
float32 and ONNX Runtime's own int8 model of the same network, in the same run.

For each zoo model (``benchmarks/zoo.py``; default ResNet-50 and BERT-base) and batch size:

================  ==============================================================================
peer              what runs
================  ==============================================================================
pytfrt            ``pytfrt.compile(model.onnx)``, float32
pytfrt-int8       ``pytfrt.quantize(model.onnx, batches)``: static for image models (min/max by
                  default, ``--calibration``), ``method="dynamic"`` for token models (BERT...)
onnxruntime       ONNX Runtime on the float32 file
onnxruntime-int8  ONNX Runtime on its own int8 model: ``quantize_static`` (QDQ, per-channel s8
                  weights, u8 activations, min/max, the same calibration batches) for image
                  models, ``quantize_dynamic`` (s8 weights, per-channel) for token models
================  ==============================================================================

The calibration batches are ``--calibration-batches`` inputs made by the zoo's input maker with
seeds 100, 101, ... (random: no data set can be downloaded); the timed input uses seed 0.  Each
int8 model's output is compared with pytfrt float32's by cosine similarity (flattened logits)
and relative error.  Calls are timed interleaved, repetition by repetition, in wall and process
CPU time; the goals are evaluated on both.  Prints a table with the goals, writes
``<name>_int8.json`` and ``<name>_int8.png``.
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

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import zoo  # noqa: E402  (benchmarks/zoo.py)

from pytfrt.tools.bench import (  # noqa: E402
    format_table,
    machine_info,
    progress,
    progress_bar,
    save_results,
)

PEERS = ("pytfrt", "pytfrt-int8", "onnxruntime", "onnxruntime-int8")
DEFAULT_MODELS = ("resnet50", "bert")
GOALS = (
    # (label, model, batch, numerator peer, denominator peer, target ratio)
    ("ResNet-50 b1 int8 / pytfrt float32", "resnet50", 1, "pytfrt-int8", "pytfrt", 0.6),
    ("ResNet-50 b1 int8 / onnxruntime int8", "resnet50", 1, "pytfrt-int8", "onnxruntime-int8",
     1.0),
    ("BERT-base b1 dynamic int8 / pytfrt float32", "bert", 1, "pytfrt-int8", "pytfrt", 0.7),
)
COSINE_GOAL = 0.99


def cosine(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    """Cosine similarity of two outputs, flattened and concatenated (float64)."""
    x = np.concatenate([np.ravel(v).astype(np.float64) for v in a])
    y = np.concatenate([np.ravel(v).astype(np.float64) for v in b])
    den = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y / den) if den else float("nan")


def _ort_session(path: Path, threads: int) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return lambda feeds: list(sess.run(None, {n: feeds[n] for n in names}))


def ort_int8(path: Path, batches: list[dict[str, np.ndarray]], dynamic: bool, out_dir: Path
             ) -> Path:
    """ONNX Runtime's own int8 model of ``path``: ``quantize_dynamic`` or ``quantize_static``
    (QDQ, per-channel, u8 activations / s8 weights, min/max over ``batches``)."""
    from onnxruntime import quantization as q

    out = out_dir / (path.stem + ("-dynamic" if dynamic else "-qdq") + ".onnx")
    if dynamic:
        q.quantize_dynamic(str(path), str(out), weight_type=q.QuantType.QInt8, per_channel=True)
        return out

    class Reader(q.CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.it = iter(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    q.quantize_static(str(path), str(out), Reader(), quant_format=q.QuantFormat.QDQ,
                      per_channel=True, activation_type=q.QuantType.QUInt8,
                      weight_type=q.QuantType.QInt8,
                      calibrate_method=q.CalibrationMethod.MinMax)
    return out


def time_interleaved(runners: dict[str, Callable[[dict[str, np.ndarray]], Any]],
                     feeds: dict[str, np.ndarray], repeats: int, warmup: int
                     ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and process CPU seconds of each call, peers interleaved (the order rotating each
    repetition), garbage collection off.  CPU time counts every thread of the process (the
    peers' own threads included): on a loaded machine it is the steadier measure of work."""
    import gc

    names = list(runners)
    for _ in range(warmup):
        for n in names:
            runners[n](feeds)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    gc_on = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for r in progress_bar(range(repeats), "timing", unit="round"):
            for n in names[r % len(names):] + names[:r % len(names)]:
                c0, t0 = time.process_time(), time.perf_counter()
                runners[n](feeds)
                wall[n].append(time.perf_counter() - t0)
                cpu[n].append(time.process_time() - c0)
    finally:
        if gc_on:
            gc.enable()
    return wall, cpu


def run(args: argparse.Namespace) -> int:
    """Run the int8 benchmark (``models.run`` hands over when ``--int8`` is given)."""
    import models  # benchmarks/models.py: the timing loop and statistics

    import pytfrt

    names = list(args.models)
    if names == list(models.DEFAULT_MODELS):
        names = list(DEFAULT_MODELS)
    rows: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="pytfrt-int8-"))
    for name in names:
        if name.startswith("tf:"):
            progress(f"{name}: skipped (the int8 benchmark runs zoo models)", args.quiet)
            continue
        progress(f"export {name}{' (small)' if args.small else ''}", args.quiet)
        zm = zoo.export(name, args.zoo_dir, small=args.small, with_torch=False)
        dynamic = name in zoo.TOKEN_MODELS
        batches = [zm.make_inputs(batch=1, seed=100 + i) for i in range(args.calibration_batches)]
        runners: dict[str, Callable[[dict[str, np.ndarray]], list[np.ndarray]]] = {}
        prepare_s: dict[str, float] = {}

        t0 = time.perf_counter()
        fmodel = pytfrt.compile(zm.path)
        prepare_s["pytfrt"] = time.perf_counter() - t0
        runners["pytfrt"] = models.by_name(fmodel)
        t0 = time.perf_counter()
        qmodel = (pytfrt.quantize(zm.path, None, method="dynamic") if dynamic else
                  pytfrt.quantize(zm.path, batches, calibration=args.calibration))
        prepare_s["pytfrt-int8"] = time.perf_counter() - t0
        runners["pytfrt-int8"] = models.by_name(qmodel)
        runners["onnxruntime"] = _ort_session(zm.path, args.threads)
        t0 = time.perf_counter()
        qpath = ort_int8(zm.path, batches, dynamic, tmp)
        prepare_s["onnxruntime-int8"] = time.perf_counter() - t0
        runners["onnxruntime-int8"] = _ort_session(qpath, args.threads)
        sizes = args.transformer_batches if dynamic else args.batches
        for batch in sizes:
            feeds = zm.make_inputs(batch=batch, seed=0)
            seq = zm.config.get("seq")
            label = f"{name} b{batch}" + (f" s{seq}" if seq else "")
            progress(f"{label}: {', '.join(runners)}", args.quiet)
            ref = runners["pytfrt"](feeds)
            quality = {}
            for p, fn in runners.items():
                got = fn(feeds)
                quality[p] = {
                    "cosine": cosine(got, ref),
                    "rel_error": max(zoo.relative_error(g, w)
                                     for g, w in zip(got, ref, strict=True)),
                }
            times, cpu = time_interleaved(runners, feeds, args.repeats, args.warmup)
            rows.append({
                "model": name, "batch": batch, "seq": seq,
                "method": "dynamic" if dynamic else f"static/{args.calibration}",
                "peers": {p: {**models._stats(ts), "cpu_ms": float(np.median(cpu[p])) * 1e3,
                              **quality[p]} for p, ts in times.items()},
                "prepare_s": prepare_s,
            })
    record: dict[str, Any] = {
        "benchmark": "models --int8",
        "command": " ".join(sys.argv),
        "machine": machine_info(),
        "threads": args.threads,
        "repeats": args.repeats,
        "small": args.small,
        "calibration_batches": args.calibration_batches,
        "rows": rows,
        "goals": goals(rows),
    }
    _print(record)
    save_results(Path(args.out) / f"{args.name}_int8", record,
                 lambda path: _plot(record, path), quiet=args.quiet)
    return 0


def _median(rows: list[dict[str, Any]], model: str, batch: int, peer: str,
            key: str = "median_ms") -> float | None:
    for r in rows:
        if r["model"] == model and r["batch"] == batch and peer in r["peers"]:
            return float(r["peers"][peer][key])
    return None


def goals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's targets on this run's medians, and the cosine goal of each int8 row."""
    out = []
    for label, model, batch, num, den, target in GOALS:
        for key, what in (("median_ms", "wall"), ("cpu_ms", "CPU")):
            a, b = _median(rows, model, batch, num, key), _median(rows, model, batch, den, key)
            r = None if a is None or b is None else a / b
            out.append({"goal": f"{label} ({what})", "ratio": r, "target": target,
                        "met": None if r is None else r <= target})
    for row in rows:
        c = row["peers"].get("pytfrt-int8", {}).get("cosine")
        if c is not None:
            out.append({"goal": f"{row['model']} b{row['batch']} int8 cosine to float32",
                        "ratio": c, "target": COSINE_GOAL, "met": c >= COSINE_GOAL})
    return out


def _print(record: dict[str, Any]) -> None:
    headers = ["model", "batch", "peer", "median ms", "p90 ms", "CPU ms", "x pytfrt f32",
               "x ort int8", "cosine", "rel err"]
    table = []
    for r in record["rows"]:
        f32 = r["peers"].get("pytfrt", {}).get("median_ms")
        oq = r["peers"].get("onnxruntime-int8", {}).get("median_ms")
        for p, s in r["peers"].items():
            table.append([r["model"], r["batch"], p, f"{s['median_ms']:.2f}", f"{s['p90_ms']:.2f}",
                          f"{s['cpu_ms']:.2f}",
                          f"{s['median_ms'] / f32:.2f}" if f32 else "-",
                          f"{s['median_ms'] / oq:.2f}" if oq else "-",
                          f"{s['cosine']:.4f}", f"{s['rel_error']:.2g}"])
    print(format_table(headers, table))
    print()
    print(format_table(["goal", "value", "target", "met"],
                       [[g["goal"], "-" if g["ratio"] is None else f"{g['ratio']:.3f}",
                         g["target"], g["met"]] for g in record["goals"]]))


def _plot(record: dict[str, Any], path: Path) -> None:
    from pytfrt.tools.bench import pyplot

    plt = pyplot()
    rows = record["rows"]
    if plt is None or not rows:
        return
    labels = [f"{r['model']}\nb{r['batch']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 2.0 * len(rows)), 4.5))
    width = 0.8 / len(PEERS)
    for i, p in enumerate(PEERS):
        vals = [r["peers"].get(p, {}).get("median_ms", np.nan) for r in rows]
        ax.bar(np.arange(len(rows)) + (i - len(PEERS) / 2 + 0.5) * width, vals, width, label=p)
    ax.set_xticks(np.arange(len(rows)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("median latency (ms)")
    ax.set_title(f"pytfrt bench models --int8 ({record['machine']['nproc']} cores, "
                 f"{record['threads']} threads)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
