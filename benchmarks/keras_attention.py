"""A Keras self-attention layer at BERT-base's size through pytfrt against ``tf.function``.

The model: ``x [1, S, 768]`` -> ``MultiHeadAttention(12 heads, key_dim 64)(x, x)`` -> residual
add -> ``LayerNormalization`` (random weights, seed 0).  Three peers in one process, their
calls interleaved: pytfrt compiled with ``-tg-merge-matmuls``'s rewrite of Keras' ``einsum``
projections (``after``), pytfrt compiled with it switched off
(``pytfrt.compiler.passes.merge_matmul.CANONICAL_DENSE = False``, ``before``), and
``tf.function``.  Outputs are checked against Keras' first; the medians and minimums of wall
time per call are printed.

Usage: ``python benchmarks/keras_attention.py [--seq 128] [--rounds 15]``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=15, help="rounds of 3 calls per peer")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    import pytfrt
    from pytfrt.compiler.passes import merge_matmul

    keras.utils.set_random_seed(0)
    x_in = keras.Input((None, 768))
    y = keras.layers.MultiHeadAttention(12, 64)(x_in, x_in)
    model = keras.Model(x_in, keras.layers.LayerNormalization()(x_in + y))
    x = np.random.default_rng(0).standard_normal((1, args.seq, 768)).astype(np.float32)
    ref = model(x).numpy()
    merge_matmul.CANONICAL_DENSE = False
    before = pytfrt.compile(model)
    merge_matmul.CANONICAL_DENSE = True
    after = pytfrt.compile(model)
    fn = tf.function(lambda t: model(t, training=False))
    peers: dict[str, Callable[[np.ndarray], Any]] = {
        "pytfrt before": before, "pytfrt after": after, "tf.function": lambda t: fn(t).numpy()}
    times: dict[str, list[float]] = {name: [] for name in peers}
    for name, f in peers.items():
        err = float(np.abs(np.asarray(f(x)) - ref).max() / np.abs(ref).max())
        print(f"{name}: relative error {err:.1e}")
    for _ in range(args.rounds):
        for name, f in peers.items():
            for _ in range(3):
                t0 = time.perf_counter()
                f(x)
                times[name].append(time.perf_counter() - t0)
    base = float(np.median(times["tf.function"]))
    for name, ts in times.items():
        med = float(np.median(ts))
        print(f"{name:14s} median {1e3 * med:7.3f} ms  min {1e3 * min(ts):7.3f} ms  "
              f"{med / base:.2f}x tf.function")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
