"""``tg.attention`` against a float64 NumPy oracle, and ``-tg-fuse-attention`` on a compiled
graph against the same graph compiled without the passes (the unfused transposes, products and
softmax)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu.attention import attention
from pytfrt.backends.cpu.ops import OpError
from pytfrt.compiler.api import compile_module, parse_graph

NEG = np.float32(-3.4028235e38)  # the mask value torch's export uses


def _oracle(q, k, v, mask, scale):  # type: ignore[no-untyped-def]
    s = np.einsum("bihd,bjhd->bhij", q.astype(np.float64), k.astype(np.float64)) * scale
    if mask is not None:
        s = s + mask.astype(np.float64)
    s -= s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return np.einsum("bhij,bjhd->bihd", e / e.sum(axis=-1, keepdims=True), v.astype(np.float64))


def _mask(kind: str, rng: np.random.Generator, b: int, h: int, sq: int, sk: int,
          dtype: type) -> np.ndarray | None:
    if kind == "none":
        return None
    if kind == "causal":  # [1, 1, Sq, Sk]
        return np.where(np.tril(np.ones((sq, sk), bool)), 0, NEG).astype(dtype)[None, None]
    if kind == "padding":  # [B, 1, 1, Sk]: the last keys of each row masked
        m = np.zeros((b, 1, 1, sk), dtype)
        m[..., sk // 2 + 1:] = NEG
        return m
    if kind == "scalar":
        return np.asarray(rng.standard_normal(), dtype)
    return rng.standard_normal((h, sq, sk)).astype(dtype)  # rank 3, broadcast over the batch


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 3), sq=st.integers(1, 9), sk=st.integers(1, 9), h=st.integers(1, 4),
       d=st.integers(1, 9), dv=st.integers(1, 9),
       kind=st.sampled_from(["none", "causal", "padding", "scalar", "full"]),
       packed=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**16))
def test_attention_matches_numpy(b, sq, sk, h, d, dv, kind, packed, dtype, seed
                                 ):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    if packed and sq == sk and d == dv:
        # q, k, v as views of one [B, S, 3 * H * D] projection (strided rows, no copies)
        qkv = (rng.standard_normal((b, sq, 3 * h * d)) * 2).astype(dtype)
        q, k, v = (qkv[..., i * h * d:(i + 1) * h * d].reshape(b, sq, h, d) for i in range(3))
    else:
        q = (rng.standard_normal((b, sq, h, d)) * 2).astype(dtype)
        k = (rng.standard_normal((b, sk, h, d)) * 2).astype(dtype)
        v = rng.standard_normal((b, sk, h, dv)).astype(dtype)
    mask = _mask(kind, rng, b, h, sq, sk, dtype)
    if kind == "causal" and sq > sk:
        mask = None  # a fully masked row has no defined softmax in the oracle's terms
    y = attention(q, k, v, mask, scale=0.3, has_mask=mask is not None)
    want = _oracle(q, k, v, mask, 0.3)
    assert y.shape == (b, sq, h, v.shape[3]) and y.dtype == dtype
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 3), sq=st.integers(1, 9), sk=st.integers(1, 9), h=st.integers(1, 4),
       d=st.integers(1, 9), rank=st.integers(2, 4), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**16))
def test_attention_select_mask_matches_numpy(b, sq, sk, h, d, rank, dtype, seed
                                             ):  # type: ignore[no-untyped-def]
    """``select``: the scores where a boolean mask holds, ``fill`` elsewhere (Keras' masked
    softmax), fully masked rows included (they average ``v``), against the oracle on
    ``where(mask, scores, fill)``."""
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((b, sq, h, d)) * 2).astype(dtype)
    k = (rng.standard_normal((b, sk, h, d)) * 2).astype(dtype)
    v = rng.standard_normal((b, sk, h, d)).astype(dtype)
    full = rng.random((b, h, sq, sk)) > 0.4
    full[0, 0, 0, :] = False  # a fully masked row
    mask = full[(0,) * (4 - rank)] if rank < 4 else full
    if rank == 4:
        mask = mask[:, :1]  # broadcast over the heads
    fill = -2.3e38 if dtype == np.float32 else -1e300
    y = attention(q, k, v, mask, scale=0.3, has_mask=True, select=True, fill=fill)
    s = np.einsum("bihd,bjhd->bhij", q.astype(np.float64), k.astype(np.float64)) * 0.3
    s = np.where(mask, s, fill)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    want = np.einsum("bhij,bjhd->bihd", e / e.sum(axis=-1, keepdims=True), v.astype(np.float64))
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)
    with pytest.raises(OpError, match="dtype bool"):
        attention(q, k, v, mask.astype(dtype), has_mask=True, select=True, fill=fill)


def test_attention_transformer_sizes_and_out() -> None:
    """GPT-2's and BERT's head sizes (the oneDNN path, heads split over the threads), a causal
    mask whose masked scores would underflow, and ``out=``."""
    rng = np.random.default_rng(0)
    for s, mask_kind in ((64, "causal"), (128, "padding")):
        q, k, v = (rng.standard_normal((2, s, 12, 64)).astype(np.float32) * 3 for _ in range(3))
        mask = _mask(mask_kind, rng, 2, 12, s, s, np.float32)
        out = np.empty((2, s, 12, 64), np.float32)
        y = attention(q, k, v, mask, scale=0.125, has_mask=True, out=out)
        assert y is out
        want = _oracle(q, k, v, mask, 0.125)  # logits up to ~50: float32 scores, 1e-5 relative
        assert np.abs(y - want).max() <= 2e-5 * np.abs(want).max()


@pytest.mark.parametrize("busy", [False, True])
def test_attention_shards_on_the_spin_pool(busy: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """With two threads the (batch, head) shards run as call parts on the spin pool's native
    helpers; with the pool held by another caller they take ``parallel_for``.  Odd sizes,
    a rank-3 mask broadcast over the batch, strided q/k/v views, both against the oracle."""
    from pytfrt.backends.cpu import _dnnl_conv, _spin_pool
    from pytfrt.backends.cpu import attention as module

    if module.num_threads() < 2 or _dnnl_conv.library() is None:
        pytest.skip("needs two threads and oneDNN")
    pool = _spin_pool.pool(_dnnl_conv.library().addresses, module.num_threads() - 1,
                           _dnnl_conv.library().new_stream_handle)
    if pool is None:
        pytest.skip("no spin pool on this machine")
    ran: list[bool] = []
    real = module._run_on_pool

    def recorded(*args: object) -> bool:
        ran.append(real(*args))  # type: ignore[arg-type]
        return ran[-1]

    monkeypatch.setattr(module, "_run_on_pool", recorded)
    rng = np.random.default_rng(7)
    b, sq, sk, h, d, dv = 3, 37, 45, 5, 17, 23
    q = rng.standard_normal((b, sq, 2 * h * d)).astype(np.float32)[..., 3:3 + h * d].reshape(
        b, sq, h, d)  # strided rows, as a packed projection's columns
    k = rng.standard_normal((b, sk, h, d)).astype(np.float32)
    v = rng.standard_normal((b, sk, h, dv)).astype(np.float32)
    mask = _mask("full", rng, b, h, sq, sk, np.float32)
    if busy:
        assert pool.lock.acquire(blocking=False)
    try:
        y = attention(q, k, v, mask, scale=0.3, has_mask=True)
        y2 = attention(q.copy(), k, v, None, scale=0.3)
    finally:
        if busy:
            pool.lock.release()
    assert ran == [not busy, not busy]
    np.testing.assert_allclose(y, _oracle(q, k, v, mask, 0.3), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(y2, _oracle(q, k, v, None, 0.3), rtol=2e-5, atol=2e-5)


def test_attention_rejects_bad_operands() -> None:
    q = np.zeros((1, 3, 2, 4), np.float32)
    with pytest.raises(OpError, match="do not agree"):
        attention(q, np.zeros((1, 3, 3, 4), np.float32), q)
    with pytest.raises(OpError, match="rank-4"):
        attention(q[0], q, q)
    with pytest.raises(OpError, match="one float dtype"):
        attention(q, q.astype(np.float64), q)
    with pytest.raises(OpError, match="does not broadcast"):
        attention(q, q, q, np.zeros((5, 3), np.float32), has_mask=True)
    with pytest.raises(OpError, match="has_mask"):
        attention(q, q, q, np.zeros((3, 3), np.float32))
    with pytest.raises(OpError, match="out must be"):
        attention(q, q, q, out=np.zeros((1, 3, 2, 5), np.float32))


_GRAPH = """
func.func @main(%q: tensor<?x?x3x8xf32>, %k: tensor<?x?x3x8xf32>, %v: tensor<?x?x3x8xf32>,
                %m: tensor<?x1x1x?xf32>) -> tensor<?x?x3x8xf32> {
  %qt = "tg.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<?x?x3x8xf32>) -> tensor<?x3x?x8xf32>
  %kt = "tg.transpose"(%k) {perm = [0, 2, 3, 1]} : (tensor<?x?x3x8xf32>) -> tensor<?x3x8x?xf32>
  %vt = "tg.transpose"(%v) {perm = [0, 2, 1, 3]} : (tensor<?x?x3x8xf32>) -> tensor<?x3x?x8xf32>
  %s = "tg.matmul"(%qt, %kt) : (tensor<?x3x?x8xf32>, tensor<?x3x8x?xf32>) -> tensor<?x3x?x?xf32>
  %c = "tg.constant"() {value = dense<0.35355339> : tensor<f32>} : () -> tensor<f32>
  %t = "tg.mul"(%c, %s) : (tensor<f32>, tensor<?x3x?x?xf32>) -> tensor<?x3x?x?xf32>
  %x = "tg.add"(%m, %t) : (tensor<?x1x1x?xf32>, tensor<?x3x?x?xf32>) -> tensor<?x3x?x?xf32>
  %p = "tg.softmax"(%x) {axis = -1 : i64} : (tensor<?x3x?x?xf32>) -> tensor<?x3x?x?xf32>
  %o = "tg.matmul"(%p, %vt) : (tensor<?x3x?x?xf32>, tensor<?x3x?x8xf32>) -> tensor<?x3x?x8xf32>
  %y = "tg.transpose"(%o) {perm = [0, 2, 1, 3]} : (tensor<?x3x?x8xf32>) -> tensor<?x?x3x8xf32>
  func.return %y : tensor<?x?x3x8xf32>
}
"""


@pytest.mark.parametrize(("batch", "seq"), [(1, 5), (2, 11)])
def test_pass_keeps_results(batch: int, seq: int) -> None:
    """Fused (the default pipeline) and unfused (no passes) compiled programs agree, with the
    batch and sequence dynamic."""
    from pytfrt.compiler.passes import default_pipeline

    gm = default_pipeline(parse_graph(_GRAPH))
    names = [op.name for op in gm.function("main").body.block.ops]
    assert names.count("tg.attention") == 1
    assert "tg.softmax" not in names and "tg.transpose" not in names
    rng = np.random.default_rng(batch)
    q, k, v = (rng.standard_normal((batch, seq, 3, 8)).astype(np.float32) for _ in range(3))
    m = np.zeros((batch, 1, 1, seq), np.float32)
    m[0, ..., seq - 2:] = NEG
    fast = np.asarray(compile_module(gm, optimize=False)(q, k, v, m))
    plain = np.asarray(compile_module(parse_graph(_GRAPH), optimize=False)(q, k, v, m))
    np.testing.assert_allclose(fast, plain, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(fast, _oracle(q, k, v, m, 0.35355339), rtol=2e-5, atol=2e-5)


def test_attention_softmax_wide_logits_and_infinite_mask() -> None:
    """Logits spread over hundreds (the vectorised exp's clamp below -80 and its range
    reduction over every exponent), an ``-inf`` mask entry, and rows whose length is not a
    multiple of the eight running maxima: against the float64 oracle."""
    rng = np.random.default_rng(3)
    for s in (13, 128):
        q, k, v = (rng.standard_normal((1, s, 2, 16)).astype(np.float32) for _ in range(3))
        q *= 6.0  # logits up to a few hundred
        mask = np.zeros((1, 1, 1, s), np.float32)
        mask[..., 1] = -np.inf
        y = attention(q, k, v, mask, scale=1.0, has_mask=True)
        want = _oracle(q, k, v, mask, 1.0)
        assert np.isfinite(y).all()
        assert np.abs(y - want).max() <= 2e-5 * np.abs(want).max()


def _native_rows():  # type: ignore[no-untyped-def]
    import ctypes

    from pytfrt.backends.cpu import _softmax_native

    address = _softmax_native.address()
    if not address:
        pytest.skip("no C compiler or no AVX-512")
    i64 = ctypes.c_int64
    return ctypes.CFUNCTYPE(ctypes.c_int, i64, i64, i64, i64, i64)(address)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 70),
       kind=st.sampled_from(["none", "row", "full"]), seed=st.integers(0, 2**16))
def test_native_softmax_rows_match_numpy(rows, cols, kind, seed):  # type: ignore[no-untyped-def]
    """The AVX-512 row softmax (``_softmax_native``) alone: rows of any length (whole and
    partial 16-lane vectors), no mask, one mask row broadcast (row stride 0) or a mask per row
    with torch's very negative entries, logits spread over hundreds, against float64 NumPy;
    masked entries exactly 0, nothing subnormal, the input's other rows untouched."""
    rows_fn = _native_rows()
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows + 1, cols)) * 60).astype(np.float32)
    mask = None
    if kind != "none":
        mask = (rng.standard_normal((rows if kind == "full" else 1, cols)) * 3).astype(np.float32)
        mask[:, 1::3] = NEG
        mask[:, 0] = 0.0
    s = x.copy()
    stride = cols if kind == "full" else 0
    assert rows_fn(s.ctypes.data, rows, cols, 0 if mask is None else mask.ctypes.data,
                   stride) == 0
    z = x[:rows].astype(np.float64) + (0.0 if mask is None else mask.astype(np.float64))
    e = np.exp(z - z.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(s[:rows], want, rtol=5e-6, atol=1e-30 + 3e-7 * want.max())
    if mask is not None:
        assert (s[:rows][np.broadcast_to(mask == NEG, (rows, cols))] == 0).all()
    tiny = s[:rows][s[:rows] != 0]
    assert (np.abs(tiny) >= np.finfo(np.float32).tiny).all()
    np.testing.assert_array_equal(s[rows], x[rows])


@pytest.mark.parametrize("native", [False, True])
def test_attention_softmax_paths(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attention's compiled loop with the native row softmax and with its Numba loops
    (``_softmax_native.ENABLED``, read per call; a mask whose last axis broadcasts always
    takes the Numba loops): BERT's 128-wide rows, an odd width, a per-row and a broadcast
    mask, against the oracle."""
    from pytfrt.backends.cpu import _softmax_native

    if native:
        _native_rows()
    monkeypatch.setattr(_softmax_native, "ENABLED", native)
    rng = np.random.default_rng(11)
    for s, h, mask in ((128, 4, _mask("padding", rng, 2, 4, 128, 128, np.float32)),
                       (37, 3, _mask("full", rng, 2, 3, 37, 37, np.float32)),
                       (21, 2, rng.standard_normal((2, 1, 21, 1)).astype(np.float32))):
        q, k, v = (rng.standard_normal((2, s, h, 16)).astype(np.float32) * 3 for _ in range(3))
        y = attention(q, k, v, mask, scale=0.25, has_mask=True)
        want = _oracle(q, k, v, mask, 0.25)
        assert np.abs(y - want).max() <= 2e-5 * np.abs(want).max()
