"""Recurrent-net benchmark: Keras LSTM/GRU and torch-exported ONNX LSTM/GRU through pytfrt, with
tf.function, ONNX Runtime and torch as peers in the same run.

Models (random weights, fixed seeds, built in the run):

* ``keras_lstm`` / ``keras_gru``: ``keras.Sequential([Input((20, 16)), LSTM(32)])`` (GRU
  likewise); peers: ``pytfrt.compile(model)`` (the TF front end, whose loop becomes one
  ``tg.recurrent``) and the model under ``tf.function``;
* ``onnx_lstm`` / ``onnx_gru``: ``torch.nn.LSTM(16, 32)`` (GRU likewise) over 20 steps, exported
  with ``torch.onnx.export``; peers: ``pytfrt.compile(file)``, ONNX Runtime (CPU provider) on
  the same file, and the torch module itself (``torch.inference_mode``).

Each peer's output is checked against the reference (TensorFlow, ONNX Runtime) before timing;
calls are interleaved peer by peer for ``--rounds`` rounds of ``--repeats`` calls, each call
timed on its own; the table gives each peer's median wall time and median process CPU time
(every thread of the process) per call, and pytfrt's ratio to each.  On a loaded machine the
wall time counts the waits for a core (a call longer than a scheduler slice is preempted
several times); the CPU time does not.  The machine is shared:
quote ratios from one run, with its load (printed).

Run: ``.venv/bin/python benchmarks/rnn.py [--batches 1 8] [--repeats 50]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt.tools.bench import format_table, machine_info, progress, write_json

HERE = Path(__file__).resolve().parent
STEPS, FEATURES, UNITS = 20, 16, 32
Call = Callable[[], Any]


def _keras_peers(kind: str, batch: int) -> tuple[dict[str, Call], Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    import pytfrt

    keras.utils.set_random_seed(0)
    layer = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[kind](UNITS)
    model = keras.Sequential([keras.Input((STEPS, FEATURES)), layer])
    x = np.random.default_rng(batch).normal(size=(batch, STEPS, FEATURES)).astype(np.float32)
    compiled = pytfrt.compile(model)
    fn = tf.function(lambda v: model(v, training=False))
    ref = fn(x).numpy()
    _check(compiled(x), ref, f"keras_{kind}")
    return {"pytfrt": lambda: compiled(x), "tf.function": lambda: fn(x).numpy()}, ref


def _onnx_peers(kind: str, batch: int, tmp: str) -> tuple[dict[str, Call], Any]:
    import onnxruntime as ort
    import torch

    import pytfrt

    torch.manual_seed(0)
    net = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[kind](FEATURES, UNITS).eval()
    torch.set_num_threads(1)
    x = np.random.default_rng(batch).normal(size=(STEPS, batch, FEATURES)).astype(np.float32)
    path = os.path.join(tmp, f"{kind}_{batch}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.from_numpy(x),), path, input_names=["x"], dynamo=False,
                          opset_version=17)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})[0]
    compiled = pytfrt.compile(path)
    _check(compiled(x)[0], ref, f"onnx_{kind}")
    tx = torch.from_numpy(x)

    def torch_call() -> Any:
        with torch.inference_mode():
            return net(tx)[0].numpy()

    _check(torch_call(), ref, f"torch_{kind}")
    return {"pytfrt": lambda: compiled(x), "onnxruntime": lambda: sess.run(None, {"x": x}),
            "torch": torch_call}, ref


def _check(got: Any, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
    if err > 1e-4:
        raise SystemExit(f"{what}: relative error {err:.2e} against the reference")


def _time(peers: dict[str, Call], rounds: int,
          repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per peer: the median wall time of one call and the median process CPU time of one call
    (all threads; unlike the wall time it does not count the time the process waited for a
    core, so it is the fairer figure on a loaded machine), both in ms."""
    from pytfrt.backends.cpu import small_graph

    for fn in peers.values():  # warm up (Numba compiles, sessions allocate)
        for _ in range(3):
            fn()
    small_graph.wait_for_compiles()  # a whole-region kernel compiles in the background
    wall: dict[str, list[float]] = {k: [] for k in peers}
    cpu: dict[str, list[float]] = {k: [] for k in peers}
    for _ in range(rounds):
        for name, fn in peers.items():
            for _ in range(repeats):
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    return ({k: float(np.median(v)) * 1e3 for k, v in wall.items()},
            {k: float(np.median(v)) * 1e3 for k, v in cpu.items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--models", nargs="+", default=["keras_lstm", "keras_gru", "onnx_lstm",
                                                         "onnx_gru"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--name", default="rnn")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    rows, records = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            family, kind = model.split("_")
            for batch in args.batches:
                progress(f"{model} batch {batch}")
                peers, _ = (_keras_peers(kind, batch) if family == "keras"
                            else _onnx_peers(kind, batch, tmp))
                ms, cpu = _time(peers, args.rounds, args.repeats)
                for name, t in ms.items():
                    ratio = "" if name == "pytfrt" else f"{ms['pytfrt'] / t:.2f}x"
                    cpu_ratio = "" if name == "pytfrt" else f"{cpu['pytfrt'] / cpu[name]:.2f}x"
                    rows.append([model, batch, name, f"{t:.3f}", ratio, f"{cpu[name]:.3f}",
                                 cpu_ratio])
                records.append({"model": model, "batch": batch, "wall_ms": ms, "cpu_ms": cpu})
    print(format_table(["model", "batch", "peer", "wall ms", "pytfrt / peer", "CPU ms",
                        "CPU pytfrt / peer"], rows))
    end_load = os.getloadavg()
    print(f"load {load[0]:.1f} -> {end_load[0]:.1f}; {machine_info()}")
    write_json(Path(args.out) / f"{args.name}.json",
               {"machine": machine_info(), "load": [load[0], end_load[0]], "results": records,
                "command": " ".join(["benchmarks/rnn.py", *(argv or sys.argv[1:])])})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
