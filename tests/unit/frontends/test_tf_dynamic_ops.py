"""TF ops whose shapes are known only at run time (Keras' ``RandomElasticTransform``), against TF.

A depthwise convolution whose filter size is computed at run time (a Gaussian blur of a
run-time width, SAME padding); ``ScatterNd`` with repeated indices (TF sums them); the
gradient of a constant-bound strided slice with an ellipsis cutting a dynamic (batch) axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import pytfrt


def test_depthwise_conv_with_a_run_time_filter_size(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((None, 9, 8, 2), tf.float32),
                                  tf.TensorSpec((), tf.int32)])
    def blur(x: Any, half: Any) -> Any:
        t = tf.cast(tf.range(-half, half + 1), tf.float32)
        k = tf.exp(-(t**2) / 4.0)
        k2 = tf.tensordot(k, k, axes=0) / tf.reduce_sum(k) ** 2
        w = tf.tile(k2[:, :, None, None], [1, 1, 2, 1])
        return tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME")

    model = pytfrt.compile(blur)
    x = np.random.default_rng(0).standard_normal((2, 9, 8, 2)).astype(np.float32)
    for half in (0, 1, 3):
        np.testing.assert_allclose(model(x, np.int32(half)), blur(x, half).numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_scatter_nd_sums_repeated_indices(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((None, 2), tf.int32),
                                  tf.TensorSpec((None, 3), tf.float32)])
    def f(idx: Any, upd: Any) -> Any:
        return tf.scatter_nd(idx, upd, [4, 5, 3])

    idx = np.array([[0, 1], [3, 4], [0, 1], [2, 0]], np.int32)
    upd = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(pytfrt.compile(f)(idx, upd), f(idx, upd).numpy(), rtol=1e-6)


def test_slice_gradient_across_a_dynamic_axis(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((None, 4, 5, 3), tf.float32)])
    def f(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x[1, ..., 2] * 3.0 + x[-1, ..., 0] ** 2 + tf.reduce_sum(x[0, 1:3, ..., :2])
            loss = tf.reduce_sum(y * tf.range(5, dtype=tf.float32))
        return tape.gradient(loss, x)

    x = np.random.default_rng(2).standard_normal((3, 4, 5, 3)).astype(np.float32)
    np.testing.assert_allclose(pytfrt.compile(f)(x), f(x).numpy(), rtol=1e-6)
