"""Fixtures of the front-end tests: TensorFlow imported once, the Keras models, the oracle check.

* ``tf``: TensorFlow (session-scoped; ``TF_CPP_MIN_LOG_LEVEL=2``; skipped if not installed);
* ``tf_models``: ``benchmarks/tf_models.py`` loaded by file path (the model builders shared
  with the benchmarks);
* ``assert_matches(out, ref, tol=1e-4)``: pytfrt's output against TensorFlow's, with the same
  structure (array, tuple/list, dict) and a max relative error (``max|a - b| / max|b|``) of at
  most ``tol`` per output.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="session")
def tf() -> Any:
    """TensorFlow (and Keras), imported once per session."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    return tf


@pytest.fixture(scope="session")
def tf_models(tf: Any) -> ModuleType:
    """``benchmarks/tf_models.py`` as a module (name ``pytfrt_bench_tf_models``)."""
    name = "pytfrt_bench_tf_models"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / "tf_models.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


def rel_err(out: Any, ref: Any) -> float:
    """``max|out - ref| / max|ref|`` in float64 (0 for two empty arrays)."""
    a = np.asarray(out, dtype=np.float64)
    b = np.asarray(ref, dtype=np.float64)
    assert a.shape == b.shape, f"shape {a.shape} != reference shape {b.shape}"
    if b.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def _check(out: Any, ref: Any, tol: float, path: str) -> None:
    if hasattr(ref, "numpy"):
        ref = ref.numpy()
    if isinstance(ref, dict):
        assert isinstance(out, dict), f"{path}: expected a dict, got {type(out).__name__}"
        assert sorted(out) == sorted(ref), f"{path}: keys {sorted(out)} != {sorted(ref)}"
        for k in ref:
            _check(out[k], ref[k], tol, f"{path}[{k!r}]")
    elif isinstance(ref, list | tuple):
        assert isinstance(out, type(ref)), (
            f"{path}: expected {type(ref).__name__}, got {type(out).__name__}"
        )
        assert len(out) == len(ref)
        for i, (o, r) in enumerate(zip(out, ref, strict=True)):
            _check(o, r, tol, f"{path}[{i}]")
    else:
        assert isinstance(out, np.ndarray), f"{path}: expected an ndarray, got {type(out).__name__}"
        assert out.dtype == np.asarray(ref).dtype, (
            f"{path}: dtype {out.dtype} != {np.asarray(ref).dtype}"
        )
        err = rel_err(out, ref)
        assert err <= tol, f"{path}: relative error {err:.3g} > {tol:g}"


@pytest.fixture(scope="session")
def assert_matches() -> Callable[..., None]:
    """``assert_matches(out, ref, tol=1e-4)``: same structure, relative error <= tol."""

    def check(out: Any, ref: Any, tol: float = 1e-4) -> None:
        _check(out, ref, tol, "output")

    return check
