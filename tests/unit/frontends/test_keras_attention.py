"""Keras' ``MultiHeadAttention`` through pytfrt: its ``einsum`` projections (``[1, k, n]``
weights, the bias added after the split into heads) become one packed query/key/value GEMM
with the bias in its epilogue and ``tg.attention`` (``-tg-merge-matmuls``, ``-tg-fuse-attention``),
checked against TensorFlow at several batch and sequence sizes on one compiled model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

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


BANDS = ((-1, 0), (0, -1), (-1, -1), (0, 0), (1, 2), (2, 0), (0, 3))


def test_band_part_matches_tf(tf: Any) -> None:
    """``tf.linalg.band_part`` with bounds -1, 0 and k (up to the whole matrix), batch dims,
    float and int operands, and its gradient under ``GradientTape``."""
    spec = tf.TensorSpec((None, None, None), tf.float32)

    @tf.function(input_signature=[spec, tf.TensorSpec((None, None), tf.int32)])
    def bands(x: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            parts = [tf.linalg.band_part(x, lo, up) for lo, up in BANDS]
            loss = tf.add_n([tf.reduce_sum(p * (i + 1.0) * x) for i, p in enumerate(parts)])
        ints = [tf.linalg.band_part(n, lo, up) for lo, up in BANDS[:3]]
        return (*parts, *ints, tape.gradient(loss, x))

    compiled = pytfrt.compile(bands)
    rng = np.random.default_rng(1)
    for shape in ((2, 4, 5), (1, 6, 3), (3, 3, 4)):
        x = rng.normal(size=shape).astype(np.float32)
        n = rng.integers(-9, 9, size=shape[1:]).astype(np.int32)
        ours = compiled(x, n)
        theirs = [t.numpy() for t in bands(x, n)]
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def _masked_mha(tf: Any, causal: bool) -> tuple[Any, list[Any]]:
    """Self-attention with ``use_causal_mask`` (``causal``) or an explicit boolean
    ``attention_mask`` input ``[batch, seq, seq]``; a dense head for a train step's loss."""
    keras = tf.keras
    keras.utils.set_random_seed(7)
    x = keras.Input((None, 12))
    layer = keras.layers.MultiHeadAttention(2, 4)
    if causal:
        inputs = [x]
        y = layer(x, x, use_causal_mask=True)
    else:
        mask = keras.Input((None, None), dtype="bool")
        inputs = [x, mask]
        y = layer(x, x, attention_mask=mask)
    model = keras.Model(inputs if len(inputs) > 1 else x, keras.layers.Dense(3)(y))
    rng = np.random.default_rng(7)
    for w in model.trainable_variables:
        w.assign(rng.normal(scale=0.3, size=w.shape).astype(np.float32))
    return model, inputs


def _padding_mask(rng: np.random.Generator, batch: int, seq: int) -> np.ndarray:
    """Keys past each sequence's length are masked; one query row of the first sequence is
    masked entirely (Keras' softmax then spreads it evenly over every key)."""
    lengths = rng.integers(1, seq + 1, size=batch)
    mask = np.arange(seq)[None, None, :] < lengths[:, None, None]
    mask = np.broadcast_to(mask, (batch, seq, seq)).copy()
    mask[0, seq // 2, :] = False
    return mask


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "padding"])
def test_keras_mha_masked_infer_and_train(tf: Any, causal: bool) -> None:
    """Masked attention matches TF for inference and for SGD train steps (loss and updated
    weights), with batch and sequence changing between calls of one compiled model."""
    model, inputs = _masked_mha(tf, causal)
    specs = [tf.TensorSpec(i.shape, i.dtype) for i in inputs]
    optimizer = tf.keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)

    @tf.function(input_signature=[*specs, tf.TensorSpec((None, None, 3), tf.float32)])
    def step(*args: Any) -> Any:
        *feed, target = args
        feed = feed if len(feed) > 1 else feed[0]
        infer = model(feed, training=False)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(feed, training=True) - target))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return infer, loss

    initial = [v.numpy().copy() for v in model.variables]
    compiled = pytfrt.compile(step)
    rng = np.random.default_rng(3)
    batches = []
    for batch, seq in ((2, 5), (3, 8), (1, 1), (2, 6)):
        x = rng.normal(size=(batch, seq, 12)).astype(np.float32)
        feed = [x] if causal else [x, _padding_mask(rng, batch, seq)]
        batches.append((*feed, rng.normal(size=(batch, seq, 3)).astype(np.float32)))
    ours = [compiled(*b) for b in batches]
    for v, value in zip(model.variables, initial, strict=True):
        v.assign(value)
    for (infer, loss), b in zip(ours, batches, strict=True):
        ref_infer, ref_loss = step(*b)
        np.testing.assert_allclose(infer, ref_infer.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(float(loss), float(ref_loss), rtol=1e-5)
    trained = compiled.variables
    for v in model.trainable_variables:
        np.testing.assert_allclose(trained[v.path], v.numpy(), rtol=1e-5, atol=1e-5)
    _check_fused_masked(model, batches)


def _check_fused_masked(model: Any, batches: list[tuple[np.ndarray, ...]]) -> None:
    """The model alone (inference) runs the mask in ``tg.attention``'s select mode (no
    softmax left) and still matches TF, fully masked rows included."""
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.passes import default_pipeline

    ops = list(default_pipeline(to_graph(model)).function("main").body.block.ops)
    fused = [op for op in ops if op.name == "tg.attention"]
    assert len(fused) == 1 and fused[0].attributes["select"].value.data  # type: ignore[attr-defined]
    assert not any(op.name in ("tg.softmax", "tg.select") for op in ops)
    compiled = pytfrt.compile(model)
    for *feed, _ in batches:
        ref = model(feed if len(feed) > 1 else feed[0]).numpy()
        np.testing.assert_allclose(compiled(*feed), ref, rtol=1e-5, atol=1e-5)
