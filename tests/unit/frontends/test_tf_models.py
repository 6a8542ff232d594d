"""Keras models compiled by pytfrt against TensorFlow itself (float32, seeded weights and inputs).

Each model is compiled once (module-scoped) and checked at a max relative error of 1e-4.
ResNet50 (64x64) and MobileNetV2 (96x96) are the ``slow`` ones; the full-size models run in
``benchmarks/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytfrt


@pytest.fixture(scope="module")
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def test_mlp_dynamic_batch(tf: Any, tf_models: Any, assert_matches: Any, rng: Any) -> None:
    model = tf_models.mlp(hidden=(64, 32))
    compiled = pytfrt.compile(model)
    spec = compiled.signature.inputs[0]
    assert spec.shape == (None, 784) and spec.dtype == np.float32
    for batch in (1, 64):
        x = rng.normal(size=(batch, 784)).astype(np.float32)
        assert_matches(compiled(x), model(x, training=False))


def test_cnn(tf: Any, tf_models: Any, assert_matches: Any, rng: Any) -> None:
    model = tf_models.cnn()
    compiled = pytfrt.compile(model)
    for batch in (1, 5):
        x = rng.normal(size=(batch, 28, 28, 1)).astype(np.float32)
        assert_matches(compiled(x), model(x, training=False))


def test_transformer_block(tf: Any, tf_models: Any, assert_matches: Any, rng: Any) -> None:
    model = tf_models.transformer_block()
    compiled = pytfrt.compile(model)
    ids = rng.integers(0, 100, size=(3, 16)).astype(np.int32)
    assert_matches(compiled(ids), model(ids, training=False))


def test_transformer_block_dynamic_sequence(
    tf: Any, tf_models: Any, assert_matches: Any, rng: Any
) -> None:
    model = tf_models.transformer_block(seq=None, seed=4)
    compiled = pytfrt.compile(model)
    assert compiled.signature.inputs[0].shape == (None, None)
    for batch, seq in ((1, 5), (4, 11)):
        ids = rng.integers(0, 100, size=(batch, seq)).astype(np.int32)
        assert_matches(compiled(ids), model(ids, training=False))


def test_two_inputs_two_outputs(tf: Any, tf_models: Any, assert_matches: Any, rng: Any) -> None:
    model = tf_models.two_io()
    compiled = pytfrt.compile(model)
    assert [s.name for s in compiled.signature.inputs] == ["a", "b"]
    a = rng.normal(size=(4, 8)).astype(np.float32)
    b = rng.normal(size=(4, 4)).astype(np.float32)
    ref = model([a, b], training=False)
    assert_matches(compiled(a, b), ref)
    assert_matches(compiled(a=a, b=b), ref)


def test_tf_function_dict_output(tf: Any, assert_matches: Any, rng: Any) -> None:
    w = rng.normal(size=(5, 3)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec((None, 5), tf.float32)])
    def f(x: Any) -> Any:
        y = tf.matmul(x, w)
        return {"probs": tf.nn.softmax(y), "top": tf.argmax(y, axis=1), "norm": tf.norm(x, axis=1)}

    compiled = pytfrt.compile(f)
    x = rng.normal(size=(6, 5)).astype(np.float32)
    out = compiled(x)
    ref = {k: v.numpy() for k, v in f(x).items()}
    assert_matches(out, ref)


def test_save_then_load(
    tf: Any, tf_models: Any, assert_matches: Any, rng: Any, tmp_path: Path
) -> None:
    model = tf_models.cnn(seed=3)
    compiled = pytfrt.compile(model)
    compiled.save(tmp_path / "cnn")
    loaded = pytfrt.load(tmp_path / "cnn")
    x = rng.normal(size=(2, 28, 28, 1)).astype(np.float32)
    assert_matches(loaded(x), model(x, training=False))
    np.testing.assert_array_equal(loaded(x), compiled(x))


@pytest.mark.slow
def test_resnet50(tf: Any, tf_models: Any, assert_matches: Any, rng: Any) -> None:
    model = tf_models.resnet50(size=64)
    compiled = pytfrt.compile(model)
    x = rng.normal(size=(2, 64, 64, 3)).astype(np.float32)
    assert_matches(compiled(x), model(x, training=False))


def test_mobilenet_v3_block_fuses_hard_swish_and_squeeze_excite(
        tf: Any, assert_matches: Any, rng: Any) -> None:
    """Keras' MobileNetV3 writes hard-swish as ``x * relu6(x + 3) / 6`` and its SE gate as
    ``relu6(g + 3) * (1 / 6)``: both fuse (the conv's activation, one squeeze_excite op) and
    the block matches TensorFlow."""
    from keras import layers

    keras = tf.keras

    def hard_sigmoid(v: Any) -> Any:
        return layers.ReLU(6.0)(v + 3.0) * (1.0 / 6.0)

    inp = keras.Input((12, 12, 8))
    h = layers.Conv2D(16, 1, bias_initializer="random_normal")(inp)
    h = layers.Multiply()([h, layers.ReLU(6.0)(h + 3.0) / 6.0])  # hard-swish
    h = layers.DepthwiseConv2D(3, padding="same")(h)
    s = layers.GlobalAveragePooling2D(keepdims=True)(h)
    s = layers.Conv2D(4, 1, activation="relu")(s)
    s = layers.Conv2D(16, 1, bias_initializer="random_normal")(s)
    out = layers.Multiply()([h, hard_sigmoid(s)])
    model = keras.Model(inp, out)
    compiled = pytfrt.compile(model)
    x = rng.normal(size=(2, 12, 12, 8)).astype(np.float32)
    assert_matches(compiled(x), model(x, training=False))
    names = " ".join(compiled.program.kernel_names())
    assert "squeeze_excite" in names  # the SE block is one op
    assert "elementwise" not in names and "relu6" not in names  # hard-swish in the conv


@pytest.mark.slow
def test_mobilenet_v2(tf: Any, tf_models: Any, assert_matches: Any, rng: Any) -> None:
    model = tf_models.mobilenet_v2(size=96)
    compiled = pytfrt.compile(model)
    x = rng.normal(size=(2, 96, 96, 3)).astype(np.float32)
    assert_matches(compiled(x), model(x, training=False))


def test_dict_inputs_and_nested_outputs(tf: Any, assert_matches: Any) -> None:
    keras = tf.keras
    layers = keras.layers
    a, b = keras.Input((3,), name="a"), keras.Input((2,), name="b")
    out = {"sum": layers.Dense(2)(layers.Concatenate()([a, b])), "prod": layers.Dense(1)(a)}
    model = keras.Model({"a": a, "b": b}, out)
    compiled = pytfrt.compile(model)
    x = {"a": np.ones((2, 3), np.float32), "b": np.full((2, 2), 0.5, np.float32)}
    assert_matches(compiled(**x), model(x, training=False))

    @tf.function(input_signature=[tf.TensorSpec((2,), tf.float32)])
    def nested(x: Any) -> Any:
        return x, {"y": x * 2.0, "z": (x + 1.0, x - 1.0)}

    flat = pytfrt.compile(nested)
    assert [s.name for s in flat.signature.outputs] == ["0", "1/y", "1/z/0", "1/z/1"]
    ref = tuple(t.numpy() for t in tf.nest.flatten(nested(np.ones(2, np.float32))))
    assert_matches(flat(np.ones(2, np.float32)), ref)
