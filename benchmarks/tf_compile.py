"""TF front-end benchmark: ResNet50 compile time, and MLP batch-1 latency against its peers.

Run: ``.venv/bin/python benchmarks/tf_compile.py [--repeat N] [--size 224]`` (prints two
tables, writes ``benchmarks/results/tf_compile.json`` and ``tf_compile.png``).

* Compile time of ``keras.applications.ResNet50`` (``weights=None``, 224x224): TF graph
  extraction + import into the graph dialect (``import_tf``), then the rest of
  ``pytfrt.compile`` (passes, lowering, load). Goal: <= 30 s in total.
* Batch-1 latency of the 784-512-512-10 ReLU MLP: the compiled pytfrt model, a hand-written
  NumPy forward pass of the same weights (the peer: goal <= 1.2x), ``tf.function`` and TF
  eager (``model(x)``). Median of many calls after warm-up, all measured in the same run.
* One training step of the same MLP (Adam, sparse softmax cross-entropy, batch 64): the
  compiled ``tf.function`` vs the ``tf.function`` itself.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt.tools.bench import pyplot, save_results

RESULTS = Path(__file__).parent / "results"


def _tf_models() -> Any:
    name = "pytfrt_bench_tf_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / "tf_models.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def compile_resnet(size: int) -> dict[str, float]:
    import pytfrt
    from pytfrt.compiler.api import compile_module
    from pytfrt.compiler.frontends.tf import import_tf

    model = _tf_models().resnet50(size=size)
    t0 = time.perf_counter()
    gm = import_tf(model)
    t1 = time.perf_counter()
    compiled = compile_module(gm)
    t2 = time.perf_counter()
    x = np.random.default_rng(0).normal(size=(1, size, size, 3)).astype(np.float32)
    err = float(np.max(np.abs(compiled(x) - model(x, training=False).numpy())))
    assert isinstance(compiled, pytfrt.CompiledModel)
    return {"import_s": t1 - t0, "lower_s": t2 - t1, "total_s": t2 - t0, "max_abs_err": err}


def _median_us(fn: Any, n: int, clock: Any = time.perf_counter) -> float:
    """Median microseconds of ``fn()`` over ``n`` calls after warm-up (``clock``: wall time by
    default; ``time.thread_time`` counts only this thread's CPU time, which a loaded machine
    disturbs much less -- but not the work of helper threads)."""
    for _ in range(max(10, n // 10)):
        fn()
    times = []
    for _ in range(n):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times) * 1e6


def _cpu_us(fn: Any, n: int, rounds: int = 9) -> float:
    """Median over ``rounds`` of the calling thread's CPU time per call (``n`` calls each)."""
    for _ in range(max(10, n // 10)):
        fn()
    per_round = []
    for _ in range(rounds):
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        per_round.append((time.thread_time() - t0) / n)
    return statistics.median(per_round) * 1e6


def mlp_latency(repeat: int) -> dict[str, float]:
    import tensorflow as tf

    import pytfrt

    model = _tf_models().mlp()
    compiled = pytfrt.compile(model)
    x = np.random.default_rng(1).normal(size=(1, 784)).astype(np.float32)
    weights = [v.numpy() for v in model.weights]
    w1, b1, w2, b2, w3, b3 = weights

    def numpy_forward() -> np.ndarray:
        h = np.maximum(x @ w1 + b1, 0)
        h = np.maximum(h @ w2 + b2, 0)
        return h @ w3 + b3

    fn = tf.function(
        lambda t: model(t, training=False), input_signature=[tf.TensorSpec((None, 784))]
    )
    xt = tf.constant(x)
    ref = numpy_forward()
    assert np.allclose(compiled(x), ref, rtol=1e-4, atol=1e-5)
    return {
        "pytfrt_us": _median_us(lambda: compiled(x), repeat),
        "numpy_us": _median_us(numpy_forward, repeat),
        "tf_function_us": _median_us(lambda: fn(xt), repeat),
        "tf_eager_us": _median_us(lambda: model(xt, training=False), max(repeat // 4, 50)),
        "pytfrt_cpu_us": _cpu_us(lambda: compiled(x), max(repeat // 10, 50)),
        "numpy_cpu_us": _cpu_us(numpy_forward, max(repeat // 10, 50)),
    }


def train_step_time(repeat: int) -> dict[str, float]:
    import keras
    import tensorflow as tf

    import pytfrt

    models = _tf_models()
    model = models.mlp()
    step = models.train_step(
        model,
        keras.optimizers.Adam(1e-4),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.TensorSpec((None,), tf.int32),
    )
    compiled = pytfrt.compile(step)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(64, 784)).astype(np.float32)
    y = rng.integers(0, 10, 64).astype(np.int32)
    xt, yt = tf.constant(x), tf.constant(y)
    return {
        "pytfrt_us": _median_us(lambda: compiled(x, y), repeat),
        "tf_function_us": _median_us(lambda: step(xt, yt), repeat),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2000, help="timed calls per MLP runner")
    ap.add_argument("--size", type=int, default=224, help="ResNet50 input size")
    args = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    resnet = compile_resnet(args.size)
    mlp = mlp_latency(args.repeat)
    train = train_step_time(max(args.repeat // 10, 50))
    print(f"ResNet50 {args.size}x{args.size} compile")
    print(f"  {'import_tf (TF graph -> tg)':32s} {resnet['import_s']:8.2f} s")
    print(f"  {'passes + lowering + load':32s} {resnet['lower_s']:8.2f} s")
    print(f"  {'total':32s} {resnet['total_s']:8.2f} s   (goal <= 30 s)")
    print(f"  max |pytfrt - TF| at batch 1: {resnet['max_abs_err']:.2e}")
    print("\nMLP 784-512-512-10, batch 1")
    print(f"  {'runner':16s} {'median us':>10s} {'x numpy':>8s}")
    for key, label in (
        ("pytfrt_us", "pytfrt"),
        ("numpy_us", "numpy (hand)"),
        ("tf_function_us", "tf.function"),
        ("tf_eager_us", "TF eager"),
    ):
        print(f"  {label:16s} {mlp[key]:10.1f} {mlp[key] / mlp['numpy_us']:8.2f}")
    print(f"  calling thread's CPU time: pytfrt {mlp['pytfrt_cpu_us']:.1f} us, numpy "
          f"{mlp['numpy_cpu_us']:.1f} us, ratio {mlp['pytfrt_cpu_us'] / mlp['numpy_cpu_us']:.2f}")

    print("\nMLP 784-512-512-10 train step (Adam, batch 64)")
    print(f"  {'pytfrt':16s} {train['pytfrt_us']:10.1f} us")
    print(f"  {'tf.function':16s} {train['tf_function_us']:10.1f} us")
    print(f"  pytfrt / tf.function: {train['pytfrt_us'] / train['tf_function_us']:.2f}")

    record = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load": os.getloadavg(),
        },
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "resnet50": {"size": args.size, **resnet},
        "mlp_batch1": mlp,
        "mlp_train_step_batch64": train,
    }
    def draw(path: Path) -> None:
        plt = pyplot()
        if plt is None:  # pragma: no cover
            return
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        a1.bar(
            ["import_tf", "passes+lowering"],
            [resnet["import_s"], resnet["lower_s"]],
            color=["C0", "C1"],
        )
        a1.axhline(30, color="red", linestyle="--", label="goal 30 s")
        a1.set_ylabel("seconds")
        a1.set_title(f"ResNet50 {args.size}x{args.size} compile")
        a1.legend()
        labels = ["pytfrt", "numpy", "tf.function", "TF eager"]
        vals = [mlp["pytfrt_us"], mlp["numpy_us"], mlp["tf_function_us"], mlp["tf_eager_us"]]
        a2.bar(labels, vals, color=["C0", "C2", "C1", "C3"])
        a2.set_yscale("log")
        a2.set_ylabel("median latency (us, log)")
        a2.set_title("MLP 784-512-512-10, batch 1")
        fig.tight_layout()
        fig.savefig(path)

    save_results("tf_compile", record, draw, newline=False, results_dir=RESULTS)


if __name__ == "__main__":
    main()
