"""``pytfrt.function``'s guarded per-call path: arguments that fit the last entry skip the
generic flatten/cache-key/unflatten; everything else must still take the general path.

Oracle: NumPy evaluation of the same function, and the general path's results.
"""

from __future__ import annotations

import numpy as np
import pytest

import pytfrt
from pytfrt import eager


@pytfrt.function
def step(params: tuple, x: np.ndarray) -> tuple:
    w, b = params
    y = x @ w + b
    return eager.reduce_sum(y), (w * 2.0, [b - 1.0, None])


def _want(params: tuple, x: np.ndarray) -> tuple:
    w, b = params
    return (x @ w + b).sum(), (w * 2, [b - 1, None])


def _check(got: tuple, want: tuple) -> None:
    assert type(got) is tuple and type(got[1]) is tuple and type(got[1][1]) is list
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-6)
    np.testing.assert_allclose(got[1][1][0], want[1][1][0], rtol=1e-6)
    assert got[1][1][1] is None


def test_the_guarded_call_returns_the_general_paths_structure_and_values() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    _check(step((w, b), x), _want((w, b), x))        # traces; sets the guarded call
    assert step._fast is not None
    _check(step((w, b), x), _want((w, b), x))        # the guarded call
    _check(step((w + 1, b), x), _want((w + 1, b), x))  # new values, same signature


@pytest.mark.parametrize("change", ["shape", "dtype", "list", "kwargs", "tensor", "fortran"])
def test_arguments_that_do_not_fit_take_the_general_path(change: str) -> None:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    step((w, b), x)
    if change == "shape":
        x = rng.standard_normal((5, 3)).astype(np.float32)
        _check(step((w, b), x), _want((w, b), x))
    elif change == "dtype":
        x64, w64, b64 = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
        got = step((w64, b64), x64)
        assert got[1][0].dtype == np.float64
        _check(got, _want((w64, b64), x64))
    elif change == "list":
        _check(step([w, b], x), _want((w, b), x))
    elif change == "kwargs":
        _check(step((w, b), x=x), _want((w, b), x))
    elif change == "tensor":
        _check(step((eager.constant(w), b), x), _want((w, b), x))
    else:
        xf = np.asfortranarray(x)
        _check(step((w, b), xf), _want((w, b), x))
    _check(step((w, b), x), _want((w, b), x))  # and back


def test_a_bad_input_still_raises_the_models_error() -> None:
    w = np.ones((3, 2), np.float32)
    b = np.ones(2, np.float32)
    step((w, b), np.ones((4, 3), np.float32))
    with pytest.raises(ValueError, match="matmul|shape"):
        step((w, b), np.ones((4, 4), np.float32))
