"""How far a train step's results depart from TensorFlow's, beside how far TensorFlow departs
from itself under another (equally correct) order of float32 arithmetic.

One model, one batch sequence, ``--steps`` SGD-with-momentum steps from the same weights, run
by: TensorFlow (``tf.function``: the reference), TensorFlow with XLA (``jit_compile=True``:
the same graph, other kernels and summation orders), pytfrt (``pytfrt.compile`` of the
reference ``tf.function``) and, with ``--float64``, TensorFlow in float64 (the same model built
with the ``float64`` dtype policy, weights cast: the exact answer's stand-in).  For each run
against the reference: the largest relative loss difference over the steps and the largest
weight difference after the last step (relative to the model's largest weight, as the train
tests measure).

Models (``benchmarks/tf_models.py``): ``resnet50`` (``keras.applications.ResNet50``, random
weights; ``--size`` 32 by default: stage 5 normalises each channel over 8 values), ``bottleneck``
(ResNet-50's layer types at 16x16), ``residual_cnn``.  Prints a table; writes
``train_agreement.json`` into ``benchmarks/results`` (or ``--out``).  Run:
``.venv/bin/python benchmarks/train_agreement.py --model resnet50 --size 32``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from pytfrt.tools.bench import format_table, machine_info, progress, save_results  # noqa: E402


def _model(name: str, size: int, dtype: str = "float32") -> Any:
    import tf_models

    keras = tf_models._keras()
    keras.config.set_dtype_policy(dtype)
    try:
        if name == "resnet50":
            return tf_models.resnet50(size=size)
        if name == "bottleneck":
            return tf_models.bottleneck_cnn(size=size)
        return tf_models.residual_cnn()
    finally:
        keras.config.set_dtype_policy("float32")


def _step(model: Any, jit: bool) -> Callable[[Any, Any], Any]:
    """A fresh SGD-momentum train step (its own optimizer: momentum starts at 0)."""
    import tensorflow as tf
    import tf_models

    keras = tf.keras
    return tf_models.train_step(  # type: ignore[no-any-return]
        model, keras.optimizers.SGD(0.01, momentum=0.9),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.TensorSpec((None,), tf.int32), jit_compile=jit)


def _batches(name: str, size: int, steps: int, batch: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(15)
    side = 32 if name == "residual_cnn" else size
    classes = 1000 if name == "resnet50" else 10
    return [(rng.normal(size=(batch, side, side, 3)).astype(np.float32),
             rng.integers(0, classes, batch).astype(np.int32)) for _ in range(steps)]


def _compare(losses: list[float], weights: list[np.ndarray], ref_losses: list[float],
             ref: dict[str, np.ndarray]) -> dict[str, Any]:
    """Differences from the reference run; ``weights`` in the order of ``ref`` (the model's
    trainable variables)."""
    scale = max(float(np.max(np.abs(v))) for v in ref.values())
    per_var = {k: float(np.max(np.abs(w.astype(np.float64) - v)) / scale)
               for (k, v), w in zip(ref.items(), weights, strict=True)}
    worst = max(per_var, key=per_var.__getitem__)
    return {
        "loss_rel_err": max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses, strict=True)),
        "weight_rel_err": per_var[worst],
        "worst_variable": worst,
        "losses": losses,
    }


def run(name: str, size: int, steps: int, batch: int, float64: bool, quiet: bool
        ) -> dict[str, Any]:
    import pytfrt

    model = _model(name, size)
    initial = [v.numpy().copy() for v in model.variables]
    batches = _batches(name, size, steps, batch)

    def restore() -> None:
        for v, value in zip(model.variables, initial, strict=True):
            v.assign(value)

    def trained() -> list[np.ndarray]:
        return [v.numpy() for v in model.trainable_variables]

    runs: dict[str, tuple[list[float], list[np.ndarray]]] = {}
    for label, jit in (("tf.function", False), ("tf.function jit_compile", True)):
        progress(f"{name}: {label}", quiet)
        restore()
        step = _step(model, jit)
        runs[label] = ([float(step(x, y)) for x, y in batches], trained())
    progress(f"{name}: pytfrt (compiling)", quiet)
    restore()
    t0 = time.perf_counter()
    compiled = pytfrt.compile(_step(model, False))
    compile_s = time.perf_counter() - t0
    ours = [float(compiled(x, y)) for x, y in batches]
    variables = compiled.variables
    runs["pytfrt"] = (ours, [variables[v.path] for v in model.trainable_variables])
    if float64:
        progress(f"{name}: TF float64", quiet)
        wide = _model(name, size, "float64")
        for v, value in zip(wide.variables, initial, strict=True):
            v.assign(value.astype(np.float64))
        step = _step(wide, False)
        runs["tf.function float64"] = (
            [float(step(x.astype(np.float64), y)) for x, y in batches],
            [v.numpy() for v in wide.trainable_variables])
    ref_losses, ref_list = runs["tf.function"]
    ref = {v.path: w for v, w in zip(model.trainable_variables, ref_list, strict=True)}
    return {
        "model": name,
        "size": size,
        "batch": batch,
        "steps": steps,
        "compile_s": round(compile_s, 1),
        "against_tf_function": {label: _compare(losses, w, ref_losses, ref)
                                for label, (losses, w) in runs.items() if label != "tf.function"},
        "tf_losses": ref_losses,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50",
                        choices=("resnet50", "bottleneck", "residual_cnn"))
    parser.add_argument("--size", type=int, default=32, help="image size (not residual_cnn)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--float64", action="store_true", help="also TF in float64")
    parser.add_argument("--name", default="train_agreement", help="result file stem")
    parser.add_argument("--out", type=Path, default=None, help="results directory")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    result = run(args.model, args.size, args.steps, args.batch, args.float64, args.quiet)
    rows = [[label, f"{r['loss_rel_err']:.2e}", f"{r['weight_rel_err']:.2e}", r["worst_variable"]]
            for label, r in result["against_tf_function"].items()]
    print(f"{args.model} {args.size}x{args.size} batch {args.batch}, {args.steps} steps, "
          "against tf.function:")
    print(format_table(["run", "loss rel. err (max over steps)", "weight rel. err", "worst"],
                       rows))
    record = {
        "machine": machine_info(),
        "command": " ".join(["benchmarks/train_agreement.py", *(argv or sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "result": result,
    }
    stem: Any = args.name if args.out is None else args.out / args.name
    save_results(stem, record, None, quiet=args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
