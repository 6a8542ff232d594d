"""SavedModel directories and ``.keras`` files compiled by pytfrt against TensorFlow.

A Keras model is exported (``model.export``) and a ``tf.Module`` saved with two signatures;
pytfrt compiles the directory (``serving_default`` or ``signature=``), returns TF's output
dict, and survives ``save`` + ``pytfrt.load``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytfrt


@pytest.fixture(scope="module")
def exported_mlp(
    tf: Any, tf_models: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, Path]:
    model = tf_models.mlp(inputs=12, hidden=(16,), classes=4, seed=7)
    path = tmp_path_factory.mktemp("sm") / "mlp"
    model.export(str(path), verbose=False)
    return model, path


def test_savedmodel_round_trip(
    exported_mlp: Any, tf: Any, assert_matches: Any, tmp_path: Path
) -> None:
    model, path = exported_mlp
    loaded_tf = tf.saved_model.load(str(path))
    serving = loaded_tf.signatures["serving_default"]
    compiled = pytfrt.compile(path)
    assert compiled.signature.inputs[0].shape == (None, 12)
    x = np.random.default_rng(1).normal(size=(3, 12)).astype(np.float32)
    (name,) = serving.structured_input_signature[1]
    ref = {k: v.numpy() for k, v in serving(**{name: tf.constant(x)}).items()}
    out = compiled(x)
    assert_matches(out, ref)
    assert_matches(out[next(iter(ref))], model(x, training=False))
    compiled.save(tmp_path / "m")
    assert_matches(pytfrt.load(tmp_path / "m")(x), ref)


def test_savedmodel_named_signature(tf: Any, assert_matches: Any, tmp_path: Path) -> None:
    class Scaler(tf.Module):
        def __init__(self) -> None:
            self.w = tf.Variable(np.arange(3, dtype=np.float32) + 1.0)

        @tf.function(input_signature=[tf.TensorSpec((None, 3), tf.float32)])
        def scale(self, x: Any) -> Any:
            return {"scaled": x * self.w, "total": tf.reduce_sum(x * self.w, axis=1)}

        @tf.function(input_signature=[tf.TensorSpec((None, 3), tf.float32)])
        def shift(self, x: Any) -> Any:
            return {"shifted": x + self.w}

    module = Scaler()
    path = tmp_path / "scaler"
    tf.saved_model.save(
        module, str(path), signatures={"serving_default": module.scale, "shift": module.shift}
    )
    x = np.random.default_rng(2).normal(size=(2, 3)).astype(np.float32)
    assert_matches(pytfrt.compile(path)(x), {k: v.numpy() for k, v in module.scale(x).items()})
    assert_matches(
        pytfrt.compile(path, signature="shift")(x), {"shifted": module.shift(x)["shifted"].numpy()}
    )
    with pytest.raises(ValueError, match="no signature 'nope'"):
        pytfrt.compile(path, signature="nope")


def test_keras_file(tf: Any, tf_models: Any, assert_matches: Any, tmp_path: Path) -> None:
    model = tf_models.two_io(seed=5)
    path = tmp_path / "two_io.keras"
    model.save(path)
    compiled = pytfrt.compile(path)
    a = np.random.default_rng(3).normal(size=(2, 8)).astype(np.float32)
    b = np.random.default_rng(4).normal(size=(2, 4)).astype(np.float32)
    assert_matches(compiled(a, b), model([a, b], training=False))


def test_not_a_savedmodel(tmp_path: Path, tf: Any) -> None:
    with pytest.raises(ValueError, match="not a SavedModel directory"):
        pytfrt.compile(tmp_path)
