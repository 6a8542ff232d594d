"""Batched and 2-D float32 ``matmul`` through oneDNN's single-threaded GEMM, against NumPy.

The oracle is NumPy's ``matmul`` in float64 on the same operands (batch broadcasting,
transposed views, the fused epilogue applied afterwards).  Shapes are drawn by Hypothesis
around :data:`pytfrt.backends.cpu.gemm.BATCHED_MIN` (lowered to 2^13 for this module), so both
the oneDNN batch loop and the NumPy path for tiny products are exercised.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _blas, gemm
from pytfrt.backends.cpu.gemm import matmul

needs_onednn = pytest.mark.skipif(not _blas.parallel_gemm(), reason="oneDNN not installed")


@pytest.fixture(autouse=True, scope="module")
def _small_batched_products_in_onednn():  # type: ignore[no-untyped-def]
    """The drawn shapes are small: lower the threshold so that they exercise the oneDNN batch
    loop (the default sends products of at most 2^18 multiply-adds to NumPy)."""
    saved = gemm.BATCHED_MIN
    gemm.BATCHED_MIN = 1 << 13
    yield
    gemm.BATCHED_MIN = saved


def _reference(a: np.ndarray, b: np.ndarray, ta: bool, tb: bool, bias: np.ndarray | None,
               residual: np.ndarray | None, relu: bool) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if ta:
        a64 = a64.swapaxes(-1, -2)
    if tb:
        b64 = b64.swapaxes(-1, -2)
    y = a64 @ b64
    if bias is not None:
        y = y + bias
    if residual is not None:
        y = y + residual
    return np.maximum(y, 0) if relu else y


def _check(y: np.ndarray, ref: np.ndarray, k: int) -> None:
    assert y.dtype == np.float32 and y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5 * max(k, 1) ** 0.5 * 4)


@settings(max_examples=60, deadline=None)
@given(
    batch_a=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    ones=st.lists(st.booleans(), min_size=3, max_size=3),
    drop=st.integers(0, 3),
    m=st.integers(1, 40), k=st.integers(1, 40), n=st.integers(1, 40),
    ta=st.booleans(), tb=st.booleans(), with_bias=st.booleans(), relu=st.booleans(),
    with_residual=st.booleans(), seed=st.integers(0, 2**16),
)
def test_batched_matmul_matches_numpy(batch_a: list[int], ones: list[bool], drop: int, m: int,
                                      k: int, n: int, ta: bool, tb: bool, with_bias: bool,
                                      relu: bool, with_residual: bool, seed: int) -> None:
    # b's batch: a's with some dimensions set to 1 and some leading ones dropped (broadcast).
    batch_b = [1 if one else d for d, one in zip(batch_a, ones, strict=False)][drop:]
    if drop and ones[0]:  # and sometimes the other way round: a broadcast against b
        batch_a, batch_b = batch_b, batch_a
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((*batch_a, *((k, m) if ta else (m, k)))).astype(np.float32)
    b = rng.standard_normal((*batch_b, *((n, k) if tb else (k, n)))).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    ref_plain = _reference(a, b, ta, tb, None, None, False)
    residual = (rng.standard_normal(ref_plain.shape[-1:]).astype(np.float32)
                if with_residual else None)
    y = matmul(a, b, transpose_a=ta, transpose_b=tb, bias=bias, residual=residual,
               activation="relu" if relu else "none")
    _check(y, _reference(a, b, ta, tb, bias, residual, relu), k)


@needs_onednn
def test_attention_products_take_the_onednn_batch_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Transformer's attention shapes must not reach NumPy's (threaded) matmul."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 12, 128, 64)).astype(np.float32)
    kt = rng.standard_normal((2, 12, 128, 64)).astype(np.float32)

    def no_numpy(*args: object, **kwargs: object) -> None:
        raise AssertionError("np.matmul called")

    monkeypatch.setattr(gemm.np, "matmul", no_numpy)
    scores = matmul(q, kt, transpose_b=True)
    out = np.empty((2, 12, 128, 64), np.float32)
    ctx = matmul(scores, kt, out=out)
    monkeypatch.undo()
    q64, k64 = q.astype(np.float64), kt.astype(np.float64)
    s64 = q64 @ k64.swapaxes(-1, -2)
    _check(scores, s64, 64)
    assert ctx is out
    np.testing.assert_allclose(ctx, s64 @ k64, rtol=1e-4, atol=1e-2)


@needs_onednn
def test_broadcast_and_strided_views() -> None:
    """Stride-0 batch dimensions (broadcast weights), a non-contiguous batch slice and a
    non-contiguous ``out`` give NumPy's answer."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 1, 2, 33, 40)).astype(np.float32)
    w = np.broadcast_to(rng.standard_normal((40, 50)).astype(np.float32), (4, 1, 40, 50))
    _check(matmul(a, w), a.astype(np.float64) @ w.astype(np.float64), 40)
    big = rng.standard_normal((6, 40, 70)).astype(np.float32)
    view = big[::2, :, 5:65]  # batch stride 2, rows padded: leading dimension 70
    rhs = rng.standard_normal((3, 60, 30)).astype(np.float32)
    out_buf = np.zeros((3, 40, 60), np.float32)
    out = out_buf[:, :, ::2]  # not C-contiguous
    _check(matmul(view, rhs), view.astype(np.float64) @ rhs.astype(np.float64), 60)
    sq = rng.standard_normal((3, 40, 30)).astype(np.float32)
    res = matmul(view[:, :, :40], sq, out=out[:, :, :30])
    assert not out[:, :, :30].flags.c_contiguous
    _check(res, view[:, :, :40].astype(np.float64) @ sq.astype(np.float64), 40)
    np.testing.assert_array_equal(out_buf[:, :, ::2][:, :, :30], res)


@needs_onednn
def test_reversed_strides_fall_back_to_numpy() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 40, 40)).astype(np.float32)[:, ::-1]
    b = rng.standard_normal((4, 40, 40)).astype(np.float32)
    _check(matmul(a, b), a.astype(np.float64) @ b.astype(np.float64), 40)


def test_empty_batches_and_zero_inner_dimension() -> None:
    a = np.ones((0, 30, 40), np.float32)
    b = np.ones((1, 40, 50), np.float32)
    assert matmul(a, b).shape == (0, 30, 50)
    y = matmul(np.ones((2, 30, 0), np.float32), np.ones((2, 0, 300), np.float32),
               bias=np.full(300, 2.0, np.float32))
    assert y.shape == (2, 30, 300) and np.all(y == 2.0)


@needs_onednn
def test_large_batch_uses_helper_threads_and_gelu_epilogue() -> None:
    """A batch split into shards (several threads) with the GELU epilogue per shard."""
    import math

    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 64, 96)).astype(np.float32)
    b = rng.standard_normal((16, 96, 80)).astype(np.float32)
    bias = rng.standard_normal(80).astype(np.float32)
    y = matmul(a, b, bias=bias, activation="gelu")
    pre = a.astype(np.float64) @ b.astype(np.float64) + bias
    ref = 0.5 * pre * (1.0 + np.vectorize(math.erf)(pre / math.sqrt(2.0)))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)


@settings(max_examples=40, deadline=None)
@given(
    vector_first=st.booleans(), batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    m=st.integers(1, 60), k=st.integers(1, 300), transpose=st.booleans(),
    with_bias=st.booleans(), with_residual=st.booleans(), contiguous_out=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_matrix_vector_products_match_numpy(vector_first: bool, batch: list[int], m: int,
                                            k: int, transpose: bool, with_bias: bool,
                                            with_residual: bool, contiguous_out: bool,
                                            seed: int) -> None:
    rng = np.random.default_rng(seed)
    vec = rng.standard_normal(k).astype(np.float32)
    mat_shape = (m, k) if vector_first == transpose else (k, m)
    mat = rng.standard_normal((*batch, *mat_shape)).astype(np.float32)
    a, b = (vec, mat) if vector_first else (mat, vec)
    ta, tb = (False, transpose) if vector_first else (transpose, False)
    ref = _reference(a, b, ta, tb, None, None, False)
    bias = rng.standard_normal((ref.shape[-1],)).astype(np.float32) if with_bias else None
    residual = rng.standard_normal(ref.shape).astype(np.float32) if with_residual else None
    buf = np.zeros((*ref.shape, 2), np.float32)
    out = np.zeros(ref.shape, np.float32) if contiguous_out else buf[..., 0]
    got = matmul(a, b, transpose_a=ta, transpose_b=tb, bias=bias, residual=residual,
                 activation="relu", out=out)
    assert got is out
    _check(got, _reference(a, b, ta, tb, bias, residual, True), k)


@needs_onednn
def test_matrix_vector_product_avoids_numpy_matmul(monkeypatch: pytest.MonkeyPatch) -> None:
    """A classifier-style GEMV must not reach NumPy's (threaded) matmul either."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(2048).astype(np.float32)
    w = rng.standard_normal((2048, 1000)).astype(np.float32)

    def no_numpy(*args: object, **kwargs: object) -> None:
        raise AssertionError("np.matmul called")

    monkeypatch.setattr(gemm.np, "matmul", no_numpy)
    y = matmul(x, w)
    yt = matmul(w, x, transpose_a=True)
    monkeypatch.undo()
    _check(y, x.astype(np.float64) @ w.astype(np.float64), 2048)
    _check(yt, w.T.astype(np.float64) @ x.astype(np.float64), 2048)


def test_small_attention_products_use_numpy_below_the_default_threshold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """GPT-2's attention at sequence 64 (``64 x 64 x 64`` per head) goes to NumPy's matmul with
    the default threshold, one of 2^20 multiply-adds to oneDNN; both agree with float64."""
    monkeypatch.setattr(gemm, "BATCHED_MIN", (1 << 18) + 1)
    calls: list[tuple[int, ...]] = []
    real = np.matmul

    def counting(a: np.ndarray, b: np.ndarray, **kw: object) -> np.ndarray:
        calls.append(a.shape)
        return real(a, b, **kw)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(gemm.np, "matmul", counting)
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 12, 64, 64)).astype(np.float32)
    k = rng.standard_normal((1, 12, 64, 64)).astype(np.float32)
    small = matmul(q, k, transpose_b=True)
    assert calls == [(1, 12, 64, 64)]
    _check(small, q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2), 64)
    big_q = rng.standard_normal((1, 2, 128, 64)).astype(np.float32)
    big = matmul(big_q, big_q, transpose_b=True)
    assert len(calls) == 1 or not _blas.parallel_gemm()
    _check(big, big_q.astype(np.float64) @ big_q.astype(np.float64).swapaxes(-1, -2), 64)
