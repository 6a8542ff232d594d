"""The int8 accuracy check: a small Keras CNN trained here on scikit-learn's bundled digits
(8x8 images, fixed seeds), compiled by pytfrt, then quantized by ``pytfrt.quantize`` with static
calibration on training images.  Its test-set accuracy may fall by at most one point against
the float32 pytfrt model (whose predictions are checked against Keras first)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt

try:
    from pytfrt.compiler.ops import get_opdef

    get_opdef("quantize_linear")
    HAVE_QOPS = True
except Exception:  # noqa: BLE001  (the quantization ops are not in this tree yet)
    HAVE_QOPS = False

pytestmark = pytest.mark.skipif(not HAVE_QOPS, reason="the tg quantization ops are not here")


@pytest.fixture(scope="module")
def digits_cnn(tf: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(trained Keras model, train images, train labels, test images, test labels)."""
    datasets = pytest.importorskip("sklearn.datasets")
    import keras

    d = datasets.load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], d.target[order]
    xtr, ytr, xte, yte = x[:1400], y[:1400], x[1400:], y[1400:]
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(xtr, ytr, epochs=8, batch_size=32, verbose=0)
    return model, xtr, ytr, xte, yte


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == labels)) * 100.0


@pytest.mark.parametrize("calibration", ["minmax", "entropy"])
def test_int8_digits_cnn_loses_at_most_one_point(digits_cnn: Any, calibration: str) -> None:
    model, xtr, _, xte, yte = digits_cnn
    fm = pytfrt.compile(model)
    float_logits = fm(xte)
    np.testing.assert_allclose(float_logits, model(xte).numpy(), rtol=1e-4, atol=1e-4)
    float_acc = accuracy(float_logits, yte)
    assert float_acc > 90.0  # the network learned the task: the check means something
    qm = pytfrt.quantize(fm, [xtr[i:i + 200] for i in range(0, len(xtr), 200)],
                         calibration=calibration)
    q_logits = qm(xte)
    assert not np.array_equal(q_logits, float_logits)  # it is a different (int8) model
    int8_acc = accuracy(q_logits, yte)
    assert int8_acc >= float_acc - 1.0, (float_acc, int8_acc)
