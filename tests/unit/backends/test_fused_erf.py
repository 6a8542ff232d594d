"""Fused elementwise programs with ``erf`` / exact ``gelu``: the float32 kernels use the
epilogue's vectorisable rational ``erf``, float64 kernels ``math.erf``; both against a
``math.erf`` reference evaluated in float64."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pytfrt.backends.cpu import fused

_ERF = np.vectorize(math.erf)
GELU = json.dumps({"n": 1, "ops": [["gelu", [0], {}]]})
ERF_PLUS = json.dumps({"n": 2, "ops": [["erf", [0], {}], ["add", [2, 1], {}]]})
SCALED_GELU = json.dumps({"n": 2, "ops": [["mul", [0, 1], {}], ["gelu", [2], {}]]})


def _gelu_ref(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return 0.5 * x64 * (1.0 + _ERF(x64 / math.sqrt(2.0)))


@settings(max_examples=40, deadline=None)
@given(arrays(np.float32, st.integers(1, 3000), elements=st.floats(-12, 12, width=32)))
def test_float32_gelu_and_erf_match_math_erf(x: np.ndarray) -> None:
    np.testing.assert_allclose(fused.run(GELU, x), _gelu_ref(x), rtol=3e-7, atol=1e-7)
    one = np.ones_like(x)
    got = fused.run(ERF_PLUS, x, one)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _ERF(x.astype(np.float64)) + 1.0, rtol=0, atol=2e-7)


def test_float32_broadcasting_ufunc_path() -> None:
    """Inputs of different shapes take the broadcasting ufunc (not the flat loop)."""
    x = np.linspace(-6, 6, 4 * 257, dtype=np.float32).reshape(4, 257)
    s = np.array([[0.5], [1.0], [2.0], [-1.0]], np.float32)
    got = fused.run(SCALED_GELU, x, s)
    np.testing.assert_allclose(got, _gelu_ref(x * s), rtol=3e-7, atol=1e-7)


def test_large_float32_sharded_loop() -> None:
    x = np.linspace(-10, 10, fused.PARALLEL_MIN * 3 + 7, dtype=np.float32)
    np.testing.assert_allclose(fused.run(GELU, x), _gelu_ref(x), rtol=3e-7, atol=1e-7)


def test_float64_programs_keep_math_erf() -> None:
    x = np.linspace(-8, 8, 4001)
    np.testing.assert_allclose(fused.run(GELU, x), _gelu_ref(x), rtol=1e-14, atol=1e-15)
    got = fused.run(ERF_PLUS, x, np.zeros_like(x))
    np.testing.assert_allclose(got, _ERF(x), rtol=0, atol=1e-15)


def test_generated_float32_source_has_no_libm_erf() -> None:
    """The float32 kernel's source calls the rational erf; the float64 one ``math.erf``."""
    program = json.loads(ERF_PLUS)
    assert "math.erf" not in fused.source_of(program, fast_erf=True)
    assert "_erf(" in fused.source_of(program, fast_erf=True)
    assert "math.erf" in fused.source_of(program)
