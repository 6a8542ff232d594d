"""The zoo's CNNs through pytfrt, ONNX Runtime and OpenVINO: wall and process-CPU medians.

On the shared 2-core machine the wall time of a call counts every wait for a core, so this
harness also records the process CPU time of each call (all threads, ``time.process_time``),
the figure that survives a loaded machine.  The three peers run in one process, interleaved
call by call, and the order rotates every round: OpenVINO's and ONNX Runtime's idle threads
keep spinning for a while after a call, and a peer that always followed one of them would
always share the cores with it.  Each peer gets 2 intra-op threads (ONNX Runtime with
spinning off, OpenVINO with the latency hint and float32 precision, pytfrt with its default
of the CPU count); every output is checked against ONNX Runtime first (``rel err`` = max
|diff| / max |reference|).

A spec ``keras:NAME:BATCH`` measures ``keras.applications.NAME(weights=None)`` (224x224,
seed 0) through pytfrt's TensorFlow front end against the same model under ``tf.function``
instead (outputs checked against ``tf.function``).

Usage: ``python benchmarks/cnn_cpu.py FILE.onnx:BATCH|keras:NAME:BATCH ... [--rounds 15]
[--out JSON]`` (ONNX files as exported by ``benchmarks/zoo.py``, e.g.
``/tmp/pytfrt-zoo/resnet50-*.onnx``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def _peers(path: str, x: np.ndarray) -> dict[str, Callable[[], np.ndarray]]:
    import onnxruntime as ort
    import openvino as ov

    import pytfrt

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    core = ov.Core()
    om = core.read_model(path)
    om.reshape({om.inputs[0]: ov.PartialShape(list(x.shape))})
    req = core.compile_model(om, "CPU", {"PERFORMANCE_HINT": "LATENCY",
                                         "INFERENCE_NUM_THREADS": 2,
                                         "INFERENCE_PRECISION_HINT": "f32"}
                             ).create_infer_request()
    model = pytfrt.compile(path)
    return {
        "pytfrt": lambda: np.asarray(model(x)),
        "onnxruntime": lambda: sess.run(None, {name: x})[0],
        "openvino": lambda: np.array(req.infer([x]).to_tuple()[0], copy=True),
    }


def _keras_peers(name: str, x: np.ndarray) -> dict[str, Callable[[], np.ndarray]]:
    import keras
    import tensorflow as tf

    import pytfrt

    keras.utils.set_random_seed(0)
    km = getattr(keras.applications, name)(weights=None, input_shape=(224, 224, 3))
    model = pytfrt.compile(km)
    fn = tf.function(lambda t: km(t, training=False))
    return {"tf.function": lambda: fn(x).numpy(), "pytfrt": lambda: np.asarray(model(x))}


def measure(path: str, batch: int, rounds: int) -> dict[str, Any]:
    """One model and batch: per peer the wall, CPU and fastest medians (ms) and rel err."""
    keras_name = path[len("keras:"):] if path.startswith("keras:") else None
    shape = (batch, 224, 224, 3) if keras_name else (batch, 3, 224, 224)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    peers = _keras_peers(keras_name, x) if keras_name else _peers(path, x)
    ref = next(iter(peers.values()))() if keras_name else peers["onnxruntime"]()
    err = {k: float(np.abs(f() - ref).max() / np.abs(ref).max()) for k, f in peers.items()}
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in peers}
    for f in list(peers.values()) * 2:  # warm-up
        f()
    load0 = os.getloadavg()[0]
    names = list(peers)
    for i in range(rounds):
        for k in names[i % len(names):] + names[:i % len(names)]:
            c0, t0 = time.process_time(), time.perf_counter()
            peers[k]()
            times[k][0].append(time.perf_counter() - t0)
            times[k][1].append(time.process_time() - c0)
    row: dict[str, Any] = {"model": keras_name or Path(path).name.split("-")[0], "batch": batch,
                           "load": [load0, os.getloadavg()[0]]}
    for k, (wall, cpu) in times.items():
        row[k] = {"wall_ms": float(np.median(wall)) * 1e3, "cpu_ms": float(np.median(cpu)) * 1e3,
                  "min_ms": float(np.min(wall)) * 1e3, "rel_err": err[k]}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+", help="FILE.onnx:BATCH")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "cnn_cpu.json"))
    args = ap.parse_args()
    rows = []
    for spec in args.specs:
        path, batch = spec.rsplit(":", 1)
        row = measure(path, int(batch), args.rounds)
        rows.append(row)
        if "tf.function" in row:
            p, t = row["pytfrt"], row["tf.function"]
            print(f"{row['model']:20s} b{row['batch']}  pytfrt {p['wall_ms']:.2f} ms "
                  f"({p['cpu_ms']:.2f} CPU)  tf.function {t['wall_ms']:.2f} ({t['cpu_ms']:.2f})"
                  f"  x tf.function wall {p['wall_ms'] / t['wall_ms']:.2f} CPU "
                  f"{p['cpu_ms'] / t['cpu_ms']:.2f}  rel err {p['rel_err']:.1e}  load "
                  f"{row['load'][0]:.1f}-{row['load'][1]:.1f}", flush=True)
            continue
        p, r, v = row["pytfrt"], row["onnxruntime"], row["openvino"]
        print(f"{row['model']:20s} b{row['batch']}  pytfrt {p['wall_ms']:.2f} ms "
              f"({p['cpu_ms']:.2f} CPU)  onnxruntime {r['wall_ms']:.2f} ({r['cpu_ms']:.2f})  "
              f"openvino {v['wall_ms']:.2f} ({v['cpu_ms']:.2f})  x ORT wall "
              f"{p['wall_ms'] / r['wall_ms']:.2f} CPU {p['cpu_ms'] / r['cpu_ms']:.2f}  x OV wall "
              f"{p['wall_ms'] / v['wall_ms']:.2f} CPU {p['cpu_ms'] / v['cpu_ms']:.2f}  rel err "
              f"{max(p['rel_err'], v['rel_err']):.1e}  load {row['load'][0]:.1f}-"
              f"{row['load'][1]:.1f}", flush=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
