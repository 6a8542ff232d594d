"""pytfrt.backends.cpu.norm against torch.nn.functional (float64 references)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytfrt.backends.cpu import norm
from pytfrt.backends.cpu.ops import OpError


@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=1, max_dims=4, max_side=6),
        elements=st.floats(-50, 50, width=32),
    ),
    st.integers(-4, 3),
)
def test_softmax_and_log_softmax_match_torch(x, axis):
    if not -x.ndim <= axis < x.ndim:
        with pytest.raises(OpError, match="axis"):
            norm.softmax(x, axis)
        return
    t = torch.from_numpy(x.astype(np.float64))
    np.testing.assert_allclose(
        norm.softmax(x, axis), F.softmax(t, axis).numpy(), rtol=2e-6, atol=1e-7
    )
    np.testing.assert_allclose(
        norm.log_softmax(x, axis), F.log_softmax(t, axis).numpy(), rtol=2e-6, atol=2e-5
    )


def test_softmax_in_place_and_large_values():
    x = np.array([[1000.0, 1000.0], [-1000.0, 0.0]], np.float32)
    assert norm.softmax(x, 1, out=x) is x
    np.testing.assert_allclose(x, [[0.5, 0.5], [0.0, 1.0]])


@pytest.mark.parametrize("axis", [-1, -2, 1])
@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, False)])
def test_layer_norm_matches_torch(axis, affine):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 4, 5)) * 3 + 1).astype(np.float32)
    tail = x.shape[axis:]
    gamma = rng.standard_normal(tail).astype(np.float32) if affine[0] else None
    beta = rng.standard_normal(tail).astype(np.float32) if affine[1] else None
    ref = F.layer_norm(
        torch.from_numpy(x.astype(np.float64)),
        tail,
        None if gamma is None else torch.from_numpy(gamma.astype(np.float64)),
        None if beta is None else torch.from_numpy(beta.astype(np.float64)),
        eps=1e-5,
    ).numpy()
    got = norm.layer_norm(x, gamma, beta, axis=axis, epsilon=1e-5)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("shape", "axis"), [((2, 4, 4, 3), -1), ((2, 3, 4, 4), 1), ((5, 3), 1)])
def test_batch_norm_matches_torch(shape, axis):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    c = shape[axis]
    scale, offset, mean = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.1, 2.0, c).astype(np.float32)
    xt = torch.from_numpy(np.moveaxis(x, axis, 1).astype(np.float64))
    ref = F.batch_norm(
        xt,
        *(torch.from_numpy(a.astype(np.float64)) for a in (mean, var, scale, offset)),
        training=False,
        eps=1e-3,
    ).numpy()
    ref = np.moveaxis(ref, 1, axis)
    out = np.empty_like(x)
    assert norm.batch_norm(x, scale, offset, mean, var, epsilon=1e-3, axis=axis, out=out) is out
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    half = norm.batch_norm(x.astype(np.float16), scale, offset, mean, var, epsilon=1e-3, axis=axis)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, ref, rtol=2e-2, atol=2e-2)


def test_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(OpError, match="float"):
        norm.softmax(np.ones(3, np.int32))
    with pytest.raises(OpError, match="gamma"):
        norm.layer_norm(x, np.ones(2, np.float32), None, axis=-1)
    with pytest.raises(OpError, match="variance"):
        one = np.ones(3, np.float32)
        norm.batch_norm(x, one, one, one, np.ones(2, np.float32), axis=1)
    with pytest.raises(OpError, match="out"):
        norm.softmax(x, out=np.empty((3, 2), np.float32))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 100), st.booleans(), st.booleans(), st.booleans(),
       st.booleans(), st.integers(0, 2**31 - 1))
def test_layer_norm_rows_kernel_matches_float64(rows, d, with_gamma, with_beta, in_place,
                                                native, seed):
    """The float32 last-axis kernel against float64 NumPy, including ``out=x``: the C loops
    (``_layer_norm_native``; rows shorter and longer than their 32 lanes, with partial
    vectors) and the Numba loops."""
    from unittest import mock

    from pytfrt.backends.cpu import _layer_norm_native

    if native and _layer_norm_native.module() is None:
        return  # no C compiler: the Numba case covers the kernel
    with mock.patch.object(_layer_norm_native, "ENABLED", native):
        _layer_norm_rows_case(rows, d, with_gamma, with_beta, in_place, seed)


def _layer_norm_rows_case(rows, d, with_gamma, with_beta, in_place, seed):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, d)) * 5 + 3).astype(np.float32)
    gamma = rng.standard_normal(d).astype(np.float32) if with_gamma else None
    beta = rng.standard_normal(d).astype(np.float32) if with_beta else None
    x64 = x.astype(np.float64)
    c = x64 - x64.mean(-1, keepdims=True)
    ref = c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5)
    ref = ref * (1 if gamma is None else gamma) + (0 if beta is None else beta)
    src = x.copy()
    got = norm.layer_norm(src, gamma, beta, axis=-1, epsilon=1e-5, out=src if in_place else None)
    assert got.dtype == np.float32 and (got is src) == in_place
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-5)


def test_layer_norm_native_rejects_bad_arrays():
    """The C loops check what they are given (the callers pass checked operands; a wrong
    array raises instead of reading out of bounds)."""
    from pytfrt.backends.cpu import _layer_norm_native

    native = _layer_norm_native.module()
    if native is None:
        pytest.skip("no C compiler")
    x = np.ones((3, 8), np.float32)
    g = np.ones(8, np.float32)
    none = np.empty(0, np.float32)
    with pytest.raises(TypeError, match="float32"):
        native.rows(x.astype(np.float64), g, g, 1e-5, x)
    with pytest.raises(TypeError, match="C-contiguous"):
        native.rows(x, g, g, 1e-5, np.ones((8, 3), np.float32).T)
    with pytest.raises(ValueError, match="shape"):
        native.rows(x, g, g, 1e-5, np.ones((3, 7), np.float32))
    with pytest.raises(ValueError, match="gamma"):
        native.rows(x, np.ones(7, np.float32), none, 1e-5, x)
    with pytest.raises(ValueError, match="shape"):
        native.add_rows(x, np.ones((2, 8), np.float32), g, g, 1e-5, x, x)
    y = np.empty_like(x)
    native.rows(np.arange(24, dtype=np.float32).reshape(3, 8), none, none, 0.0, y)
    want = (np.arange(8) - 3.5) / np.sqrt(np.var(np.arange(8)))
    np.testing.assert_allclose(y, np.broadcast_to(want, (3, 8)), rtol=1e-6)
