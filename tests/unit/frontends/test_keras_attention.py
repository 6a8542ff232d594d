"""Keras' ``MultiHeadAttention`` through pytfrt: its ``einsum`` projections (``[1, k, n]``
weights, the bias added after the split into heads) become one packed query/key/value GEMM
with the bias in its epilogue and ``tg.attention`` (``-tg-merge-matmuls``, ``-tg-fuse-attention``),
checked against TensorFlow at several batch and sequence sizes on one compiled model."""

from __future__ import annotations

from typing import Any

import numpy as np

import pytfrt


def _mha(tf: Any, heads: int, key_dim: int, width: int) -> Any:
    keras = tf.keras
    keras.utils.set_random_seed(5)
    x = keras.Input((None, width))
    layer = keras.layers.MultiHeadAttention(heads, key_dim)
    y = layer(x, x)
    model = keras.Model(x, y)
    rng = np.random.default_rng(5)  # non-zero biases: Keras initialises them to zeros
    layer.set_weights([rng.normal(scale=0.3, size=w.shape).astype(np.float32)
                       for w in layer.get_weights()])
    return model


def test_keras_mha_packed_and_matches_tf(tf: Any, assert_matches: Any) -> None:
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.passes import default_pipeline

    model = _mha(tf, heads=3, key_dim=8, width=20)
    ops = [op for op in default_pipeline(to_graph(model)).function("main").body.block.ops]
    names = [op.name for op in ops]
    assert names.count("tg.attention") == 1
    assert names.count("tg.columns") == 3  # q, k, v views of one product
    assert names.count("tg.matmul") == 2  # the packed projections and the output's
    assert "tg.add" not in names  # every bias in a GEMM's epilogue
    for op in ops:
        if op.name == "tg.matmul":
            assert len(op.operands[1].type.shape) == 2  # no [1, k, n] weight left
    compiled = pytfrt.compile(model)
    rng = np.random.default_rng(0)
    for batch, seq in ((1, 7), (3, 16), (2, 1)):
        x = rng.normal(size=(batch, seq, 20)).astype(np.float32)
        assert_matches(compiled(x), model(x).numpy(), tol=1e-5)
