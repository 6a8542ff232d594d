"""``PytfrtServable.run`` (the one-task request path) against ``predict_async`` and NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt
from pytfrt.model import create_host
from pytfrt.serving.errors import ServingError
from pytfrt.serving.pytfrt_backend import PytfrtServable


def test_run_matches_predict_async_and_numpy(tf: Any) -> None:
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def f(x: Any) -> Any:
        return {"y": tf.nn.relu(tf.matmul(x, w))}

    host = create_host("mstd:2")
    try:
        servable = PytfrtServable(pytfrt.compile(f, host=host), "test")
        assert servable.runs_inline  # a sync @main
        x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
        inline = servable.run({"x": x})
        value = servable.predict_async({"x": x})
        host.await_values([value])
        np.testing.assert_array_equal(inline["y"], value.get()["y"])
        np.testing.assert_allclose(inline["y"], np.maximum(x @ w, 0), rtol=1e-6, atol=1e-6)
        with pytest.raises((ServingError, ValueError)):
            servable.run({"x": np.zeros((4, 5), np.float32)})
    finally:
        host.shutdown()
