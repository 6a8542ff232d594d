"""``pytfrt.keras.fit`` against Keras' own ``model.fit`` (same seed, no shuffling).

Two identical Keras models (same seed, same optimizer settings) are trained on the same data:
one by ``model.fit(shuffle=False)``, one by ``pytfrt.keras.fit``. The per-epoch losses and
metrics must agree within 1e-4 relative, and the weights written back to the Keras model must
match the ones Keras trained.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

import pytfrt.keras

EPOCHS = 3


def _model(tf: Any) -> Any:
    keras = tf.keras
    keras.utils.set_random_seed(21)
    model = keras.Sequential(
        [
            keras.Input((12,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.2, seed=4),
            keras.layers.Dense(3),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["sparse_categorical_accuracy"],
    )
    return model


def test_fit_matches_keras_fit(tf: Any) -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(100, 12))  # float64, cast as Keras does; 100 rows: a short last batch
    y = (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0.5).astype(np.int32)
    ours_model = _model(tf)
    bar = io.StringIO()
    ours = pytfrt.keras.fit(ours_model, x, y, epochs=EPOCHS, batch_size=16, stream=bar)
    theirs_model = _model(tf)
    theirs = theirs_model.fit(x, y, epochs=EPOCHS, batch_size=16, shuffle=False, verbose=0).history
    assert sorted(ours) == sorted(theirs)
    for name, values in theirs.items():
        np.testing.assert_allclose(ours[name], values, rtol=1e-4, err_msg=name)
    assert ours["loss"][-1] < ours["loss"][0]
    for a, b in zip(ours_model.weights, theirs_model.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5, err_msg=a.path)
    text = bar.getvalue()
    assert f"epoch {EPOCHS}/{EPOCHS}" in text and "7/7" in text and "steps/s" in text


def test_fit_needs_a_compiled_model(tf: Any) -> None:
    keras = tf.keras
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="model.compile"):
        pytfrt.keras.fit(model, np.zeros((4, 2)), np.zeros((4, 1)))
