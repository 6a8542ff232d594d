"""pytfrt.backends.cpu.gemm.matmul against NumPy (float64) with a NumPy epilogue."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cpu_refs import activation_refs
from hypothesis import given
from hypothesis import strategies as st

from pytfrt.backends.cpu import gemm
from pytfrt.backends.cpu.ops import OpError

ACTS = activation_refs(0.1)


@st.composite
def matmul_cases(draw):
    m, k, n = (draw(st.integers(1, 7)) for _ in range(3))
    batch_a = draw(st.sampled_from([(), (3,), (1,), (2, 3), (2, 1)]))
    batch_b = draw(st.sampled_from([(), (3,), (1,), (1, 3), (2, 3)]))
    vec_a = draw(st.booleans()) and draw(st.booleans())
    vec_b = draw(st.booleans()) and draw(st.booleans())
    ta = not vec_a and draw(st.booleans())
    tb = not vec_b and draw(st.booleans())
    return dict(
        a=(k,) if vec_a else (*batch_a, *((k, m) if ta else (m, k))),
        b=(k,) if vec_b else (*batch_b, *((n, k) if tb else (k, n))),
        ta=ta,
        tb=tb,
        act=draw(st.sampled_from(sorted(ACTS))),
        bias=draw(st.booleans()),
        res=draw(st.booleans()),
        dtype=draw(st.sampled_from([np.float32, np.float64])),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


@given(matmul_cases())
def test_matmul_matches_numpy(case):
    rng = np.random.default_rng(case["seed"])
    dt = case["dtype"]
    a = rng.standard_normal(case["a"]).astype(dt)
    b = rng.standard_normal(case["b"]).astype(dt)
    a_op = a.swapaxes(-1, -2) if case["ta"] else a
    b_op = b.swapaxes(-1, -2) if case["tb"] else b
    ref = np.matmul(a_op.astype(np.float64), b_op.astype(np.float64))
    last = ref.shape[-1] if ref.ndim else 1
    bias = rng.standard_normal(last).astype(dt) if case["bias"] and ref.ndim else None
    res = rng.standard_normal(ref.shape).astype(dt) if case["res"] else None
    expected = ref + (0 if bias is None else bias) + (0 if res is None else res)
    expected = ACTS[case["act"]](torch.from_numpy(np.asarray(expected))).numpy()
    kw = {
        "transpose_a": case["ta"],
        "transpose_b": case["tb"],
        "bias": bias,
        "residual": res,
        "activation": case["act"],
        "alpha": 0.1,
    }
    got = gemm.matmul(a, b, **kw)
    assert got.shape == expected.shape and got.dtype == dt
    tol = 1e-4 if dt == np.float32 else 1e-10
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    if got.ndim:
        out = np.empty(got.shape, dt)
        again = gemm.matmul(a, b, **kw, out=out)
        assert again is out
        np.testing.assert_array_equal(out, got)


def test_broadcast_residual_and_noncontiguous_out():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    res = rng.standard_normal((1, 6)).astype(np.float32)
    big = np.zeros((4, 12), np.float32)
    out = big[:, ::2]
    gemm.matmul(a, b, residual=res, activation="relu", out=out)
    np.testing.assert_allclose(out, np.maximum(a @ b + res, 0), rtol=1e-5, atol=1e-5)
    assert not big[:, 1::2].any()


def test_integer_matmul_without_activation():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(gemm.matmul(a, b, bias=np.ones(4, np.int32)), a @ b + 1)
    with pytest.raises(OpError, match="float"):
        gemm.matmul(a, b, activation="relu")


def test_errors():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(OpError, match="inner dimensions"):
        gemm.matmul(a, a)
    with pytest.raises(OpError, match="dtypes differ"):
        gemm.matmul(a, np.ones((3, 2)))
    with pytest.raises(OpError, match="batch dimensions"):
        gemm.matmul(np.ones((2, 2, 3), np.float32), np.ones((3, 3, 4), np.float32))
    with pytest.raises(OpError, match="transpose_a"):
        gemm.matmul(np.ones(3, np.float32), a.T, transpose_a=True)
    with pytest.raises(OpError, match="bias"):
        gemm.matmul(a, a.T, bias=np.ones(3, np.float32))
    with pytest.raises(OpError, match="residual"):
        gemm.matmul(a, a.T, residual=np.ones((3, 2), np.float32))
    with pytest.raises(OpError, match="out"):
        gemm.matmul(a, a.T, out=np.ones((2, 3), np.float32))
    with pytest.raises(OpError, match="rank >= 1"):
        gemm.matmul(np.ones((), np.float32), a)


@pytest.mark.parametrize("backend", ["onednn-if-installed", "numpy"])
def test_large_float32_matmul_with_epilogue(monkeypatch, backend):
    """Row-sharded GEMM + epilogue (oneDNN path) and the NumPy fallback give the same result."""
    from pytfrt.backends.cpu import _blas

    if backend == "numpy":
        monkeypatch.setattr(_blas, "_load", lambda: None)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((700, 96)).astype(np.float32)
    b = rng.standard_normal((40, 96)).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    res = rng.standard_normal((700, 40)).astype(np.float32)
    got = gemm.matmul(a, b, transpose_b=True, bias=bias, residual=res, activation="relu6")
    ref = np.clip(a.astype(np.float64) @ b.T.astype(np.float64) + bias + res, 0, 6)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@given(st.integers(1, 300), st.integers(1, 40), st.integers(1, 300), st.integers(0, 12))
def test_tiles_2d_cover_the_product_once(m, k, n, tile_log):
    """Every output element lies in exactly one tile; a tile splits one dimension only."""
    import unittest.mock as mock

    with mock.patch.object(gemm, "SHARD_MACS", 1), \
            mock.patch.object(gemm, "_TILE_BYTES", 4 << tile_log):
        parts = gemm.tiles_2d(m, k, n)
    hits = np.zeros((m, n), np.int32)
    for r0, r1, c0, c1 in parts:
        assert (r0, r1) == (0, m) or (c0, c1) == (0, n)
        hits[r0:r1, c0:c1] += 1
    assert (hits == 1).all()


@given(st.integers(1, 40), st.integers(1, 50), st.integers(20, 400),
       st.sampled_from(["none", "relu", "gelu"]), st.booleans(), st.integers(0, 2**31 - 1))
def test_column_tiled_matmul_matches_numpy(m, k, n, act, res, seed):
    """Products split by columns of the weight (``m < n``), with bias, residual and activation
    applied per tile, agree with float64 NumPy."""
    import unittest.mock as mock

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32) if res else None
    with mock.patch.object(gemm, "SHARD_MACS", 64), mock.patch.object(gemm, "_TILE_BYTES", 256):
        got = gemm.matmul(a, w, bias=bias, residual=r, activation=act)
    want = a.astype(np.float64) @ w.astype(np.float64) + bias + (0 if r is None else r)
    want = ACTS[act](torch.from_numpy(want)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@given(st.integers(1, gemm.GEMV_ROWS), st.integers(1, 23), st.integers(1, 40), st.booleans(),
       st.booleans(), st.booleans(), st.integers(0, 2**31 - 1))
def test_dense_rows_matches_numpy(m, k, n, with_bias, relu, with_out, seed):
    """The small-batch dense kernel (4 weight rows per step, a remainder loop) against
    float64 NumPy; ``out`` is written in place."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    out = np.full((m, n), np.nan, np.float32) if with_out else None
    y = gemm.dense_rows(x, w, bias, relu, out)
    want = x.astype(np.float64) @ w + (0 if bias is None else bias)
    if relu:
        want = np.maximum(want, 0)
    assert y is not None and (out is None or y is out)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_dense_rows_declines_what_it_does_not_cover():
    w = np.ones((3, 2), np.float32)
    x = np.ones((1, 3), np.float32)
    assert gemm.dense_rows(np.ones((gemm.GEMV_ROWS + 1, 3), np.float32), w, None, False) is None
    assert gemm.dense_rows(x.astype(np.float64), w, None, False) is None
    assert gemm.dense_rows(x, np.asfortranarray(w), None, False) is None  # not C-contiguous
    assert gemm.dense_rows(np.ones((1, 4), np.float32), w, None, False) is None
    assert gemm.dense_rows(x, w, np.ones(2), False) is None  # a float64 bias
    assert gemm.dense_rows(x, w, None, False, out=np.empty((1, 4), np.float32)[:, ::2]) is None
