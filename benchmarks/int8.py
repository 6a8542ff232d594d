"""int8 benchmark: ResNet-50 quantized by ONNX Runtime's ``quantize_static`` (QDQ, per-channel
s8 weights, u8 activations, a fixed-seed calibration reader) run by pytfrt, against ONNX
Runtime's run of the same int8 file and pytfrt's float32 run of the float file, in one process,
calls interleaved.

Reported per runner: median / p90 wall milliseconds per call and the median *process CPU time*
per call (every thread's work; on a loaded shared machine the figure that moves least), the
ratios int8 / float32 and pytfrt int8 / ONNX Runtime int8, and the cosine similarity of
pytfrt's int8 logits to its float32 logits (and ONNX Runtime's int8 logits to the same).

    python benchmarks/int8.py [--batch 1] [--calls 30] [--zoo /tmp/pytfrt-zoo] [--small]

Writes ``benchmarks/results/int8.json`` and ``int8.png`` (``--out STEM`` to change).  The
model is exported by ``benchmarks/zoo.py`` (random weights, fixed seeds; nothing downloaded)
and the quantized file is cached next to it.  ONNX Runtime runs with as many intra-op threads
as pytfrt (``PYTFRT_NUM_THREADS``, default the CPU count), once with its default
spinning thread pool and once with ``session.intra_op.allow_spinning = 0``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import models_int8  # noqa: E402  (benchmarks/models_int8.py: the timing loop, cosine)
import zoo  # noqa: E402  (benchmarks/zoo.py; the name 'benchmarks' is taken by xDSL)

from pytfrt.tools.bench import (  # noqa: E402
    format_table,
    machine_info,
    pyplot,
    save_results,
)

CALIBRATION_BATCHES = 8
"""Calibration images (``make_inputs(seed=i)`` for i below this), min/max calibration."""


def quantized(zm: Any, out: Path) -> Path:
    """ORT's QDQ per-channel quantization of a zoo model (cached in ``out``)."""
    if out.exists():
        return out
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.it = iter(zm.make_inputs(batch=1, seed=i) for i in range(CALIBRATION_BATCHES))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    tmp = out.with_suffix(".tmp.onnx")
    quantize_static(str(zm.path), str(tmp), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, weight_type=QuantType.QInt8,
                    activation_type=QuantType.QUInt8)
    tmp.replace(out)
    return out


def _time(runners: dict[str, Callable[[], Any]], calls: int, warmup: int = 3
          ) -> dict[str, dict[str, float]]:
    """Median and p90 wall ms and median CPU ms per call of each runner, interleaved
    (``models_int8.time_interleaved``)."""
    wall, cpu = models_int8.time_interleaved(
        {n: (lambda _feeds, r=r: r()) for n, r in runners.items()}, {}, calls, warmup)
    return {n: {"median_ms": float(np.median(wall[n]) * 1e3),
                "p90_ms": float(np.percentile(wall[n], 90) * 1e3),
                "cpu_ms": float(np.median(cpu[n]) * 1e3)} for n in runners}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import onnx
    import onnxruntime as ort

    import pytfrt
    from pytfrt.backends.cpu._parallel import num_threads

    zm = zoo.export("resnet50", args.zoo, small=args.small)
    qpath = quantized(zm, Path(zm.path).with_name(Path(zm.path).stem + "-qdq.onnx"))
    feeds = zm.make_inputs(batch=args.batch, seed=1234)
    (name, x), = feeds.items()
    f32 = pytfrt.compile(onnx.load(str(zm.path)))
    i8 = pytfrt.compile(onnx.load(str(qpath)))
    so = ort.SessionOptions()
    so.intra_op_num_threads = num_threads()
    so.inter_op_num_threads = 1
    ort_i8 = ort.InferenceSession(str(qpath), so, providers=["CPUExecutionProvider"])
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    ort_i8_nospin = ort.InferenceSession(str(qpath), so, providers=["CPUExecutionProvider"])
    y_f32, y_i8 = np.asarray(f32(x)), np.asarray(i8(x))
    (y_ort,) = ort_i8.run(None, feeds)
    quality = {"cosine_int8_vs_f32": models_int8.cosine([y_i8], [y_f32]),
               "cosine_ort_int8_vs_f32": models_int8.cosine([y_ort], [y_f32]),
               "max_abs_diff_vs_ort_int8": float(np.abs(y_i8 - y_ort).max())}
    times = _time({"pytfrt float32": lambda: f32(x), "pytfrt int8": lambda: i8(x),
                   "onnxruntime int8": lambda: ort_i8.run(None, feeds),
                   "onnxruntime int8 (no spin)": lambda: ort_i8_nospin.run(None, feeds)},
                  args.calls)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"meta": {**machine_info(), "model": "resnet50", "small": args.small,
                     "batch": args.batch, "calls": args.calls, "threads": num_threads(),
                     "uptime": uptime, "onnxruntime": ort.__version__},
            "times": times, "quality": quality}


def report(rec: dict[str, Any]) -> str:
    t = rec["times"]
    rows = [[n, f"{v['median_ms']:.1f}", f"{v['p90_ms']:.1f}", f"{v['cpu_ms']:.1f}"]
            for n, v in t.items()]
    out = [format_table(["runner", "median ms", "p90 ms", "CPU ms/call"], rows)]
    f, i = t["pytfrt float32"], t["pytfrt int8"]
    out.append(f"pytfrt int8 / pytfrt float32: wall {i['median_ms'] / f['median_ms']:.2f}x, "
               f"CPU {i['cpu_ms'] / f['cpu_ms']:.2f}x (target <= 0.6x)")
    for key in ("onnxruntime int8", "onnxruntime int8 (no spin)"):
        o = t[key]
        out.append(f"pytfrt int8 / {key}: wall {i['median_ms'] / o['median_ms']:.2f}x, "
                   f"CPU {i['cpu_ms'] / o['cpu_ms']:.2f}x (target <= 1.0x)")
    q = rec["quality"]
    out.append(f"cosine(int8, float32) = {q['cosine_int8_vs_f32']:.5f} (target >= 0.99); "
               f"ONNX Runtime int8: {q['cosine_ort_int8_vs_f32']:.5f}; max |pytfrt - ORT| int8 "
               f"logits {q['max_abs_diff_vs_ort_int8']:.4f}")
    out.append(f"load: {rec['meta']['uptime']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--zoo", default=os.environ.get("PYTFRT_ZOO", "/tmp/pytfrt-zoo"))
    p.add_argument("--small", action="store_true", help="the zoo's small ResNet-50 (smoke run)")
    p.add_argument("--out", default="int8", help="results file stem (benchmarks/results/)")
    args = p.parse_args(argv)
    rec = run(args)
    print(report(rec))

    def draw(path: Path) -> None:
        plt = pyplot()
        if plt is None:
            return
        names = list(rec["times"])
        fig, ax = plt.subplots(figsize=(7, 4))
        pos = np.arange(len(names))
        ax.bar(pos - 0.2, [rec["times"][n]["median_ms"] for n in names], 0.4, label="wall ms")
        ax.bar(pos + 0.2, [rec["times"][n]["cpu_ms"] for n in names], 0.4, label="CPU ms")
        ax.set_xticks(pos, names)
        ax.set_ylabel("ms per call (median)")
        ax.set_title(f"ResNet-50 b{args.batch}: int8 (ORT quantize_static QDQ) vs float32")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=100)

    save_results(args.out, rec, draw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
