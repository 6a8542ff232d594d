"""A compiled Keras model takes inputs as Keras does: float64 arrays, Python lists and scalars
are converted to the input's dtype; the oracle is the Keras model called on the same values."""

from __future__ import annotations

from typing import Any

import numpy as np

import pytfrt


def test_keras_model_converts_float64_and_lists_as_keras_does(tf: Any) -> None:
    keras = tf.keras
    keras.utils.set_random_seed(0)
    inp = keras.Input((4,), name="features")
    model = keras.Model(inp, keras.layers.Dense(3, activation="tanh")(inp))
    compiled = pytfrt.compile(model)
    assert compiled.signature.casting == "cast"
    x64 = np.random.default_rng(0).standard_normal((2, 4))
    want = model(x64).numpy()
    out = compiled(x64)
    assert out.dtype == want.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled(x64.tolist()), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled({"features": x64}), want, rtol=1e-5, atol=1e-6)
