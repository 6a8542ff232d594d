"""TF's ``ImageProjectiveTransformV3`` (``projective_transform``), ``MatrixInverse`` and
``MatrixSolve`` against TensorFlow, for every interpolation and fill mode, with transforms that
send sample points far outside the image (several reflections/wraps) and a perspective row.
Keras' warp layers (``RandomRotation``...) are covered by ``test_keras_layers.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt


@pytest.mark.parametrize("interpolation", ["NEAREST", "BILINEAR"])
def test_projective_transform_matches_tf(tf: Any, interpolation: str) -> None:
    modes = ["CONSTANT", "REFLECT", "WRAP", "NEAREST"]
    rng = np.random.default_rng(5)
    images = rng.uniform(-1, 1, (2, 5, 7, 3)).astype(np.float32)
    transforms = np.array(
        [[1.3, 0.4, -9.5, -0.3, 1.1, 6.25, 0.0, 0.0],
         [0.7, -0.2, 13.0, 0.5, 2.9, -17.5, 0.01, -0.02]], np.float32
    )

    @tf.function(input_signature=[tf.TensorSpec((None, 5, 7, 3), tf.float32),
                                  tf.TensorSpec((2, 8), tf.float32)])
    def f(x: Any, t: Any) -> Any:
        outs = [
            tf.raw_ops.ImageProjectiveTransformV3(
                images=x, transforms=t, output_shape=[6, 4], fill_value=0.5,
                interpolation=interpolation, fill_mode=mode)
            for mode in modes
        ]
        m = tf.reshape(tf.concat([t, tf.ones((2, 1))], 1), (2, 3, 3))
        rhs = tf.reshape(t[:, :6], (2, 3, 2))
        return (*outs, tf.linalg.inv(m), tf.linalg.solve(m, rhs))

    ours = pytfrt.compile(f)(images, transforms)
    for mode, a, b in zip([*modes, "inverse", "solve"], ours, f(images, transforms), strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-5, err_msg=mode)
