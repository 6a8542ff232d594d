"""A Keras self-attention layer at BERT-base's size through pytfrt against ``tf.function``.

The model: ``x [1, S, 768]`` -> ``MultiHeadAttention(12 heads, key_dim 64)(x, x)`` -> residual
add -> ``LayerNormalization`` (random weights, seed 0).  Three peers in one process, their
calls interleaved: pytfrt compiled with ``-tg-merge-matmuls``'s rewrite of Keras' ``einsum``
projections (``after``), pytfrt compiled with it switched off
(``pytfrt.compiler.passes.merge_matmul.CANONICAL_DENSE = False``, ``before``), and
``tf.function``.  With ``--mask causal`` (``use_causal_mask=True``) or ``--mask padding`` (an
``attention_mask`` input hiding the last quarter of the keys, and one query row entirely),
``before`` is instead the masked attention left unfused
(``pytfrt.compiler.passes.attention.SELECT_MASKS = False``).  Outputs are checked against
Keras' first; the medians and minimums of wall time per call are printed.

Usage: ``python benchmarks/keras_attention.py [--seq 128] [--rounds 15]
[--mask none|causal|padding]``.
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
    parser.add_argument("--mask", choices=("none", "causal", "padding"), default="none")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    import pytfrt
    from pytfrt.compiler.passes import attention, merge_matmul

    keras.utils.set_random_seed(0)
    x_in = keras.Input((None, 768))
    layer = keras.layers.MultiHeadAttention(12, 64)
    x = np.random.default_rng(0).standard_normal((1, args.seq, 768)).astype(np.float32)
    feed: tuple[np.ndarray, ...] = (x,)
    if args.mask == "padding":
        m_in = keras.Input((None, None), dtype="bool")
        y = layer(x_in, x_in, attention_mask=m_in)
        inputs: Any = [x_in, m_in]
        mask = np.ones((1, args.seq, args.seq), bool)
        mask[..., args.seq - args.seq // 4:] = False
        mask[0, args.seq // 2, :] = False
        feed = (x, mask)
    else:
        y = layer(x_in, x_in, use_causal_mask=args.mask == "causal")
        inputs = x_in
    model = keras.Model(inputs, keras.layers.LayerNormalization()(x_in + y))
    ref = model(list(feed) if len(feed) > 1 else x).numpy()
    flag = (attention, "SELECT_MASKS") if args.mask != "none" else (merge_matmul,
                                                                   "CANONICAL_DENSE")
    setattr(*flag, False)
    before = pytfrt.compile(model)
    setattr(*flag, True)
    after = pytfrt.compile(model)
    fn = tf.function(lambda *t: model(list(t) if len(t) > 1 else t[0], training=False))
    peers: dict[str, Callable[..., Any]] = {
        "pytfrt before": before, "pytfrt after": after,
        "tf.function": lambda *t: fn(*t).numpy()}
    times: dict[str, list[float]] = {name: [] for name in peers}
    for name, f in peers.items():
        err = float(np.abs(np.asarray(f(*feed)) - ref).max() / np.abs(ref).max())
        print(f"{name}: relative error {err:.1e}")
    for _ in range(args.rounds):
        for name, f in peers.items():
            for _ in range(3):
                t0 = time.perf_counter()
                f(*feed)
                times[name].append(time.perf_counter() - t0)
    base = float(np.median(times["tf.function"]))
    for name, ts in times.items():
        med = float(np.median(ts))
        print(f"{name:14s} median {1e3 * med:7.3f} ms  min {1e3 * min(ts):7.3f} ms  "
              f"{med / base:.2f}x tf.function")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
