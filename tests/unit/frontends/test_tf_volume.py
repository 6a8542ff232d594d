"""3-D convolution and pooling (the ``volume`` family) and their gradients against TensorFlow.

One ``tf.function`` per padding/stride form computes ``Conv3D``, ``MaxPool3D``, ``AvgPool3D``
of a batch and, under a ``GradientTape``, the gradients of a loss over all three w.r.t. the
input and the filter (TF emits ``Conv3DBackpropInputV2``/``FilterV2``, ``MaxPool3DGrad``,
``AvgPool3DGrad``); the compiled function must match TF on a batch size it was not traced
with. Keras' 3-D layers are covered by ``test_keras_layers.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt


@pytest.mark.parametrize(
    ("padding", "strides", "dilations"),
    [("SAME", (1, 2, 2, 1, 1), (1, 1, 1, 1, 1)), ("VALID", (1, 1, 2, 1, 1), (1, 2, 1, 1, 1))],
)
def test_conv_and_pools_with_gradients_match_tf(
    tf: Any, padding: str, strides: tuple[int, ...], dilations: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(3)
    w = tf.constant(rng.uniform(-1, 1, (2, 3, 2, 3, 4)).astype(np.float32))
    window = dict(ksize=(1, 2, 3, 2, 1), strides=(1, 2, 1, 2, 1), padding=padding)

    @tf.function(input_signature=[tf.TensorSpec((None, 5, 6, 5, 3), tf.float32)])
    def f(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y = tf.nn.conv3d(x, w, strides, padding, dilations=dilations)
            mx = tf.nn.max_pool3d(x, **window)
            av = tf.nn.avg_pool3d(x, **window)
            loss = (tf.reduce_sum(tf.sin(y)) + tf.reduce_sum(tf.square(mx))
                    + tf.reduce_sum(tf.cos(av)))
        dx, dw = tape.gradient(loss, [x, w])
        return y, mx, av, dx, dw

    compiled = pytfrt.compile(f)
    x = rng.uniform(-1, 1, (3, 5, 6, 5, 3)).astype(np.float32)  # ties: none (continuous)
    for ours, theirs in zip(compiled(x), f(x), strict=True):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-4, atol=1e-5)


def test_grouped_conv3d_is_unsupported(tf: Any) -> None:
    w = tf.constant(np.ones((1, 1, 1, 1, 2), np.float32))

    @tf.function(input_signature=[tf.TensorSpec((None, 2, 2, 2, 2), tf.float32)])
    def f(x: Any) -> Any:
        return tf.nn.conv3d(x, w, (1, 1, 1, 1, 1), "VALID")

    with pytest.raises(pytfrt.compiler.UnsupportedOpError, match="grouped 3-D"):
        pytfrt.compile(f)
