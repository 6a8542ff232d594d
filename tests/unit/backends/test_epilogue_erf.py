"""The vectorised ``erf`` of the fused epilogue (GELU) against ``math.erf``."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pytfrt.backends.cpu._epilogue import _erf, epilogue_2d
from pytfrt.backends.cpu.activations import apply_activation

_ERF = np.vectorize(math.erf)


def test_rational_erf_is_within_1e_8_of_math_erf_and_exact_in_the_tails() -> None:
    x = np.linspace(-3.9199, 3.9199, 200_001)
    got = np.array([_erf(float(v)) for v in x])
    np.testing.assert_allclose(got, _ERF(x), rtol=0, atol=1e-8)
    tails = np.array([3.92, 4.5, 6.0, 50.0, np.inf])
    assert all(_erf(float(v)) == 1.0 and _erf(float(-v)) == -1.0 for v in tails)
    np.testing.assert_allclose(_ERF(tails), 1.0, rtol=0, atol=3e-8)
    assert _erf(0.0) == 0.0 and np.all(np.abs(got) <= 1.0)


def _gelu_ref(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return 0.5 * x64 * (1.0 + _ERF(x64 / math.sqrt(2.0)))


@settings(max_examples=30, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 5), st.integers(1, 70)),
              elements=st.floats(-12, 12, width=32)),
       st.booleans())
def test_gelu_epilogue_float32(x: np.ndarray, with_bias: bool) -> None:
    bias = np.linspace(-1, 1, x.shape[1]).astype(np.float32) if with_bias else None
    y = x.copy()
    epilogue_2d(y, bias, None, 7, 0.0)
    pre = x.astype(np.float64) + (0 if bias is None else bias.astype(np.float32))
    ref = _gelu_ref(pre.astype(np.float32))
    # the approximation (<= 1e-8) plus float32 rounding of the input sum and the result
    np.testing.assert_allclose(y, ref, rtol=3e-7, atol=1e-7)


def test_gelu_float64_stays_exact() -> None:
    x = np.linspace(-8, 8, 4001).reshape(1, -1)
    y = x.copy()
    apply_activation(y, "gelu")
    np.testing.assert_allclose(y, _gelu_ref(x), rtol=1e-15, atol=1e-15)
    assert np.array_equal(y[0, 2000:2001], [0.0])


def test_rational_tanh_is_within_4e_8_of_math_tanh_and_exact_in_the_tails() -> None:
    from pytfrt.backends.cpu._epilogue import _tanh

    x = np.linspace(-8.999, 8.999, 200_001)
    got = np.array([_tanh(float(v)) for v in x])
    np.testing.assert_allclose(got, np.tanh(x), rtol=0, atol=4e-8)
    tails = np.array([9.0, 12.0, 50.0, np.inf])
    assert all(_tanh(float(v)) == 1.0 and _tanh(float(-v)) == -1.0 for v in tails)
    assert _tanh(0.0) == 0.0 and np.all(np.abs(got) <= 1.0)


@settings(max_examples=30, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 5), st.integers(1, 70)),
              elements=st.floats(-12, 12, width=32)),
       st.booleans())
def test_gelu_tanh_epilogue_float32_and_float64(x: np.ndarray, with_bias: bool) -> None:
    """Code 8 (GELU, tanh form): float32 through the rational tanh, float64 exact."""
    bias = np.linspace(-1, 1, x.shape[1]).astype(np.float32) if with_bias else None
    pre = x.astype(np.float64) + (0 if bias is None else bias.astype(np.float64))
    c = math.sqrt(2.0 / math.pi)
    ref = 0.5 * pre * (1.0 + np.tanh(c * (pre + 0.044715 * pre**3)))
    y = x.copy()
    epilogue_2d(y, bias, None, 8, 0.0)
    np.testing.assert_allclose(y, ref, rtol=3e-7, atol=1e-6)
    y64 = x.astype(np.float64)
    epilogue_2d(y64, None if bias is None else bias.astype(np.float64), None, 8, 0.0)
    np.testing.assert_allclose(y64, ref, rtol=1e-14, atol=1e-14)


@settings(max_examples=20, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(2, 90)),
              elements=st.floats(-12, 12, width=32)),
       st.sampled_from([7, 8]), st.booleans(), st.integers(0, 40), st.integers(0, 40))
def test_gelu_epilogue_with_residual_on_a_column_tile(x: np.ndarray, code: int, with_bias: bool,
                                                      lo: int, width: int) -> None:
    """The float32 GELU rows (bias, residual, a column tile of whole rows) against float64
    NumPy; columns outside the tile are left as they were."""
    n = x.shape[1]
    j0 = min(lo, n - 1)
    j1 = min(n, j0 + 1 + width)
    bias = np.linspace(-1, 1, n).astype(np.float32) if with_bias else None
    res = np.linspace(-2, 2, x.size).astype(np.float32).reshape(x.shape)
    y = x.copy()
    epilogue_2d(y, bias, res, code, 0.0, cols=(j0, j1))
    pre = x.astype(np.float64) + res + (0 if bias is None else bias)
    pre = pre.astype(np.float32).astype(np.float64)  # the sum is rounded to float32 first
    if code == 7:
        ref = _gelu_ref(pre)
    else:
        ref = 0.5 * pre * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (pre + 0.044715 * pre**3)))
    np.testing.assert_allclose(y[:, j0:j1], ref[:, j0:j1], rtol=3e-7, atol=1e-6)
    assert np.array_equal(y[:, :j0], x[:, :j0]) and np.array_equal(y[:, j1:], x[:, j1:])
