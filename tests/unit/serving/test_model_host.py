"""The explicit ``host=`` of ``pytfrt.compile`` / ``pytfrt.load`` (what ``pytfrt serve`` uses
instead of the ``PYTFRT_MODEL_QUEUE`` environment variable), checked against NumPy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytfrt
from pytfrt.host import SingleThreadedWorkQueue
from pytfrt.model import create_host, default_host, resolve_host
from pytfrt.serving.server import make_host


@pytest.fixture(scope="module")
def affine(tf: Any) -> Any:
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def f(x: Any) -> Any:
        return tf.nn.relu(tf.matmul(x, w) - 1.0)

    return f, w


def _oracle(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ w - 1.0, 0.0)


def test_compile_and_load_run_on_the_given_host(affine: Any, tmp_path: Path) -> None:
    f, w = affine
    host = create_host("mstd:1")
    try:
        model = pytfrt.compile(f, host=host)
        assert model.host is host
        x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
        value = model.call_async(x)
        host.await_values([value])
        np.testing.assert_allclose(value.get(), _oracle(w, x), rtol=1e-6, atol=1e-6)
        model.save(tmp_path / "m")
        loaded = pytfrt.load(tmp_path / "m", host=host)
        assert loaded.host is host
        np.testing.assert_allclose(loaded(x), _oracle(w, x), rtol=1e-6, atol=1e-6)
    finally:
        host.shutdown()


def test_a_work_queue_type_string_makes_a_host_of_that_type(affine: Any) -> None:
    f, w = affine
    model = pytfrt.compile(f, host="s")
    assert isinstance(model.host.work_queue, SingleThreadedWorkQueue)
    assert model.host is not default_host()
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(model(x), _oracle(w, x), rtol=1e-6, atol=1e-6)


def test_bad_work_queue_type_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="work queue type"):
        resolve_host("mstd:zero")
    with pytest.raises(ValueError, match="work queue type"):
        make_host("pytfrt", "fifo")


def test_no_host_means_the_default_host() -> None:
    assert resolve_host(None) is default_host()


def test_serve_host_has_the_builtin_kernels_and_leaves_the_environment_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTFRT_MODEL_QUEUE", raising=False)
    host = make_host("pytfrt", "s")
    try:
        assert isinstance(host.work_queue, SingleThreadedWorkQueue)
        assert "tfrt.add.i32" in host.registry
        assert "PYTFRT_MODEL_QUEUE" not in os.environ
    finally:
        host.shutdown()
