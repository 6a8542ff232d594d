"""Common Keras layers, each in a tiny model, compiled by pytfrt against TensorFlow.

A sweep for coverage of the op mapping (convolutions of every kind, pooling, padding and
cropping, activations, normalisations, reshapes, recurrent layers (TensorLists in while loops),
attention); each model runs at batches 1 and 3 from one compiled model (dynamic batch) and must
match TF at 1e-4 relative.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt

LAYERS: dict[str, tuple[tuple[int, ...], Any]] = {
    "conv2d_transpose_same": (
        (8, 8, 3),
        lambda L: [L.Conv2DTranspose(4, 3, strides=2, padding="same")],
    ),
    "conv2d_transpose_valid": (
        (8, 8, 3),
        lambda L: [L.Conv2DTranspose(4, 3, strides=2, padding="valid")],
    ),
    "separable_conv2d": ((8, 8, 3), lambda L: [L.SeparableConv2D(4, 3, padding="same")]),
    "depthwise_conv2d": (
        (9, 9, 3),
        lambda L: [L.DepthwiseConv2D(3, depth_multiplier=2, strides=2)],
    ),
    "dilated_conv2d": ((11, 11, 3), lambda L: [L.Conv2D(4, 3, dilation_rate=2, padding="same")]),
    "conv1d_causal": ((10, 4), lambda L: [L.Conv1D(3, 3, padding="causal")]),
    "average_pooling2d": ((8, 8, 3), lambda L: [L.AveragePooling2D(3, strides=2, padding="same")]),
    "global_pooling": ((8, 8, 3), lambda L: [L.Conv2D(4, 1), L.GlobalMaxPooling2D()]),
    "max_pooling1d": ((10, 4), lambda L: [L.MaxPooling1D(2), L.GlobalAveragePooling1D()]),
    "up_sampling2d": ((4, 4, 3), lambda L: [L.UpSampling2D(2)]),
    "padding_cropping": (
        (6, 6, 3),
        lambda L: [L.ZeroPadding2D(((1, 2), (0, 1))), L.Cropping2D(((2, 1), (1, 0)))],
    ),
    "activations": (
        (10,),
        lambda L: [
            L.Dense(8, activation="elu"),
            L.Dense(8, activation="selu"),
            L.Dense(8, activation="softplus"),
            L.Dense(8, activation="swish"),
            L.Dense(8, activation="hard_sigmoid"),
            L.LeakyReLU(0.1),
            L.PReLU(),
            L.Dense(5),
            L.Softmax(),
        ],
    ),
    "permute_reshape_repeat": (
        (4, 6),
        lambda L: [L.Permute((2, 1)), L.Reshape((3, 8)), L.Flatten(), L.RepeatVector(2)],
    ),
    "normalizations": (
        (4, 4, 6),
        lambda L: [
            L.LayerNormalization(),
            L.GroupNormalization(3),
            L.BatchNormalization(),
            L.UnitNormalization(),
        ],
    ),
    "lstm": ((6, 4), lambda L: [L.LSTM(5, return_sequences=True), L.LSTM(3)]),
    "gru": ((6, 4), lambda L: [L.GRU(5, return_sequences=True)]),
    "simple_rnn_bidirectional": ((6, 4), lambda L: [L.Bidirectional(L.SimpleRNN(3))]),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_keras_layer(tf: Any, assert_matches: Any, name: str) -> None:
    keras = tf.keras
    keras.utils.set_random_seed(sorted(LAYERS).index(name))
    shape, make = LAYERS[name]
    model = keras.Sequential([keras.Input(shape), *make(keras.layers)])
    compiled = pytfrt.compile(model)
    assert compiled.signature.inputs[0].shape == (None, *shape)
    for batch in (1, 3):
        x = np.random.default_rng(batch).normal(size=(batch, *shape)).astype(np.float32)
        assert_matches(compiled(x), model(x, training=False))


def test_attention_layer(tf: Any, assert_matches: Any) -> None:
    keras = tf.keras
    q = keras.Input((5, 4))
    v = keras.Input((7, 4))
    model = keras.Model([q, v], keras.layers.Attention(use_scale=True)([q, v]))
    rng = np.random.default_rng(1)
    a, b = (
        rng.normal(size=(3, 5, 4)).astype(np.float32),
        rng.normal(size=(3, 7, 4)).astype(np.float32),
    )
    assert_matches(pytfrt.compile(model)(a, b), model([a, b], training=False))
