"""``tg.attention`` against a float64 NumPy oracle -- each version of its C function (AVX-512,
AVX2, portable C) and its NumPy path, on the spin pool and on ``parallel_for`` --, its row
softmax alone, and ``-tg-fuse-attention`` on a compiled graph against the same graph compiled
without the passes (the unfused transposes, products and softmax)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _attention_native
from pytfrt.backends.cpu.attention import attention
from pytfrt.backends.cpu.ops import OpError
from pytfrt.compiler.api import compile_module, parse_graph

NEG = np.float32(-3.4028235e38)  # the mask value torch's export uses
PATHS = ("avx512", "avx2", "generic", "numpy")
"""The versions of the C function, and the NumPy path (``_attention_native.ENABLED`` false)."""


@contextlib.contextmanager
def _path(name: str) -> Iterator[None]:
    """Run ``tg.attention`` on ``name`` of :data:`PATHS` (a version this CPU cannot run, or no
    C compiler: skipped)."""
    if name != "numpy" and _attention_native.softmax_rows_address(name) == 0:
        pytest.skip(f"no {name} version here (CPU or C compiler)")
    saved = _attention_native.ISA, _attention_native.ENABLED
    _attention_native.ISA, _attention_native.ENABLED = (
        (None, False) if name == "numpy" else (name, True))
    try:
        if name != "numpy":
            assert _attention_native.version() == name
        yield
    finally:
        _attention_native.ISA, _attention_native.ENABLED = saved


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


def _operand(rng: np.random.Generator, shape: tuple[int, int, int, int], dtype: type,
             layout: int, scale: float = 1.0) -> np.ndarray:
    """A ``[B, S, H, D]`` operand: contiguous (``layout`` 0), the first columns of wider rows
    (1), every other batch item of a tensor with an extra head (2), or a ``[B, H, S, D]``
    tensor viewed transposed (3): the last axis always unit-stride."""
    b, s, h, d = shape
    if layout == 1:
        return (rng.standard_normal((b, s, h, d + 3)) * scale).astype(dtype)[..., 1:1 + d]
    if layout == 2:
        return (rng.standard_normal((2 * b, s, h + 1, d)) * scale).astype(dtype)[::2, :, 1:]
    if layout == 3:
        return (rng.standard_normal((b, h, s, d)) * scale).astype(dtype).transpose(0, 2, 1, 3)
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _broadcast_shape(full: tuple[int, ...], keep: list[bool], rank: int) -> tuple[int, ...]:
    """The last ``rank`` axes of ``full``, each kept or made 1 (broadcast)."""
    return tuple(n if k else 1 for n, k in zip(full, keep, strict=True))[4 - rank:]


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=25, deadline=None)
@given(b=st.integers(1, 3), sq=st.integers(1, 9), sk=st.integers(1, 40), h=st.integers(1, 4),
       d=st.integers(1, 9), dv=st.integers(1, 9),
       kind=st.sampled_from(["none", "causal", "padding", "random"]),
       keep=st.lists(st.booleans(), min_size=4, max_size=4), rank=st.integers(0, 4),
       layouts=st.lists(st.integers(0, 3), min_size=3, max_size=3), packed=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_attention_matches_numpy(path, b, sq, sk, h, d, dv, kind, keep, rank, layouts, packed,
                                 dtype, seed):  # type: ignore[no-untyped-def]
    """Every path against the float64 oracle: strided q/k/v views (a packed projection's
    columns, wider rows, every other batch item, a transposed layout), rows of any length
    (partial vectors), additive masks of every broadcast pattern and rank with very negative
    entries (never a whole row), float64 operands (the NumPy path on every setting)."""
    rng = np.random.default_rng(seed)
    if packed and sq == sk and d == dv:
        # q, k, v as views of one [B, S, 3 * H * D] projection (strided rows, no copies)
        qkv = (rng.standard_normal((b, sq, 3 * h * d)) * 2).astype(dtype)
        q, k, v = (qkv[..., i * h * d:(i + 1) * h * d].reshape(b, sq, h, d) for i in range(3))
    else:
        q = _operand(rng, (b, sq, h, d), dtype, layouts[0], 2.0)
        k = _operand(rng, (b, sk, h, d), dtype, layouts[1], 2.0)
        v = _operand(rng, (b, sk, h, dv), dtype, layouts[2])
    if kind == "random":
        mask = np.asarray(rng.standard_normal(_broadcast_shape((b, h, sq, sk), keep, rank)) * 2,
                          dtype)
        if mask.ndim and mask.shape[-1] > 1:  # very negative entries, never a whole row
            mask[..., 1:][rng.random(mask[..., 1:].shape) < 0.4] = NEG
    else:
        mask = _mask(kind, rng, b, h, sq, sk, dtype)
    if kind == "causal" and sq > sk:
        mask = None  # a fully masked row has no defined softmax in the oracle's terms
    with _path(path):
        y = attention(q, k, v, mask, scale=0.3, has_mask=mask is not None)
    want = _oracle(q, k, v, mask, 0.3)
    assert y.shape == (b, sq, h, v.shape[3]) and y.dtype == dtype
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=20, deadline=None)
@given(b=st.integers(1, 3), sq=st.integers(1, 9), sk=st.integers(1, 40), h=st.integers(1, 4),
       d=st.integers(1, 9), keep=st.lists(st.booleans(), min_size=4, max_size=4),
       rank=st.integers(0, 4), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**16))
def test_attention_select_mask_matches_numpy(path, b, sq, sk, h, d, keep, rank, dtype, seed
                                             ):  # type: ignore[no-untyped-def]
    """``select``: the scores where a boolean mask holds, ``fill`` elsewhere (Keras' masked
    softmax), with masks of every broadcast pattern and rank, fully masked rows included (they
    average ``v``), against the oracle on ``where(mask, scores, fill)``."""
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((b, sq, h, d)) * 2).astype(dtype)
    k = (rng.standard_normal((b, sk, h, d)) * 2).astype(dtype)
    v = rng.standard_normal((b, sk, h, d)).astype(dtype)
    mask = np.asarray(rng.random(_broadcast_shape((b, h, sq, sk), keep, rank)) > 0.4)
    if mask.ndim:
        mask[(0,) * (mask.ndim - 1)] = False  # a fully masked row
    fill = -2.3e38 if dtype == np.float32 else -1e300
    with _path(path):
        y = attention(q, k, v, mask, scale=0.3, has_mask=True, select=True, fill=fill)
    s = np.einsum("bihd,bjhd->bhij", q.astype(np.float64), k.astype(np.float64)) * 0.3
    s = np.where(mask, s, fill)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    want = np.einsum("bhij,bjhd->bihd", e / e.sum(axis=-1, keepdims=True), v.astype(np.float64))
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)
    with pytest.raises(OpError, match="dtype bool"):
        attention(q, k, v, mask.astype(dtype), has_mask=True, select=True, fill=fill)


@pytest.mark.parametrize("path", PATHS)
def test_attention_transformer_sizes_and_out(path: str) -> None:
    """GPT-2's and BERT's head sizes (the oneDNN path, heads split over the threads), a causal
    mask whose masked scores would underflow, and ``out=``."""
    with _path(path):
        _transformer_sizes()


def _transformer_sizes() -> None:
    rng = np.random.default_rng(0)
    for s, mask_kind in ((64, "causal"), (128, "padding")):
        q, k, v = (rng.standard_normal((2, s, 12, 64)).astype(np.float32) * 3 for _ in range(3))
        mask = _mask(mask_kind, rng, 2, 12, s, s, np.float32)
        out = np.empty((2, s, 12, 64), np.float32)
        y = attention(q, k, v, mask, scale=0.125, has_mask=True, out=out)
        assert y is out
        want = _oracle(q, k, v, mask, 0.125)  # logits up to ~50: float32 scores, 1e-5 relative
        assert np.abs(y - want).max() <= 2e-5 * np.abs(want).max()


@pytest.mark.parametrize("path", PATHS[:3])
@pytest.mark.parametrize("busy", [False, True])
def test_attention_shards_on_the_spin_pool(busy: bool, path: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With two threads the (batch, head) shards run as call parts on the spin pool's native
    helpers; with the pool held by another caller they take ``parallel_for`` (the C function
    through ctypes).  Odd sizes, a rank-3 mask broadcast over the batch, a boolean ``select``
    mask, strided q/k/v views, all against the oracle."""
    from pytfrt.backends.cpu import _dnnl_conv, _spin_pool
    from pytfrt.backends.cpu import attention as module

    if module.num_threads() < 2 or _dnnl_conv.library() is None:
        pytest.skip("needs two threads and oneDNN")
    pool = _spin_pool.pool(_dnnl_conv.library().addresses, module.num_threads() - 1,
                           _dnnl_conv.library().new_stream_handle)
    if pool is None:
        pytest.skip("no spin pool on this machine")
    ran: list[bool] = []
    real = _dnnl_conv.run_calls

    def recorded(*args: int) -> bool:
        ran.append(real(*args))
        return ran[-1]

    monkeypatch.setattr(_dnnl_conv, "run_calls", recorded)
    rng = np.random.default_rng(7)
    b, sq, sk, h, d, dv = 3, 37, 45, 5, 17, 23
    q = rng.standard_normal((b, sq, 2 * h * d)).astype(np.float32)[..., 3:3 + h * d].reshape(
        b, sq, h, d)  # strided rows, as a packed projection's columns
    k = rng.standard_normal((b, sk, h, d)).astype(np.float32)
    v = rng.standard_normal((b, sk, h, dv)).astype(np.float32)
    mask = _mask("full", rng, b, h, sq, sk, np.float32)
    keys = rng.random((b, 1, 1, sk)) > 0.3
    keys[0, ..., :] = False  # batch item 0: every row fully masked
    with _path(path):
        if busy:
            assert pool.lock.acquire(blocking=False)
        try:
            y = attention(q, k, v, mask, scale=0.3, has_mask=True)
            y2 = attention(q.copy(), k, v, None, scale=0.3)
            y3 = attention(q, k, v, keys, scale=0.3, has_mask=True, select=True, fill=-1e9)
        finally:
            if busy:
                pool.lock.release()
    assert ran == [not busy] * 3
    np.testing.assert_allclose(y, _oracle(q, k, v, mask, 0.3), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(y2, _oracle(q, k, v, None, 0.3), rtol=2e-5, atol=2e-5)
    # fill -1e9 where a key is masked: as adding -1e9 (in float64) wherever a key remains
    want3 = _oracle(q, k, v, np.where(keys, 0, -1e9), 0.3)
    np.testing.assert_allclose(y3[1:], want3[1:], rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(y3[0], np.broadcast_to(v[0].mean(axis=0), y3[0].shape),
                               rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("path", PATHS[:3])
def test_attention_query_blocks(path: str) -> None:
    """Scores of more than ``ROW_BLOCK_FLOATS`` per head: the queries in several blocks (300 x
    300 scores: blocks of 218 rows and a last partial one), and keys so many that a block is
    one row, against the oracle."""
    rng = np.random.default_rng(5)
    assert 300 * 300 > _attention_native.ROW_BLOCK_FLOATS
    for b, sq, sk, h in ((1, 300, 300, 2), (1, 3, _attention_native.ROW_BLOCK_FLOATS + 7, 1)):
        q = rng.standard_normal((b, sq, h, 8)).astype(np.float32)
        k = rng.standard_normal((b, sk, h, 8)).astype(np.float32)
        v = rng.standard_normal((b, sk, h, 5)).astype(np.float32)
        mask = np.where(rng.random((1, 1, sq, sk)) < 0.2, NEG, 0).astype(np.float32)
        mask[..., 0] = 0
        with _path(path):
            y = attention(q, k, v, mask, scale=0.5, has_mask=True)
        want = _oracle(q, k, v, mask, 0.5)
        np.testing.assert_allclose(y, want, rtol=2e-5, atol=2e-6)


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


@pytest.mark.parametrize("path", PATHS[:3])
def test_attention_softmax_wide_logits_and_infinite_mask(path: str) -> None:
    """Logits spread over hundreds (the vectorised exp's clamp below -80 and its range
    reduction over every exponent), an ``-inf`` mask entry, and rows whose length is not a
    multiple of a vector: against the float64 oracle."""
    with _path(path):
        _wide_logits()


def _wide_logits() -> None:
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


def _native_rows(path: str):  # type: ignore[no-untyped-def]
    import ctypes

    address = _attention_native.softmax_rows_address(path)
    if not address:
        pytest.skip(f"no {path} version here (CPU or C compiler)")
    i64 = ctypes.c_int64
    return ctypes.CFUNCTYPE(ctypes.c_int, i64, i64, i64, i64, i64)(address)


@pytest.mark.parametrize("path", PATHS[:3])
@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 70),
       kind=st.sampled_from(["none", "row", "full"]), seed=st.integers(0, 2**16))
@example(rows=7, cols=34, kind="full", seed=688)  # the mask add's float32 rounding shows
def test_native_softmax_rows_match_numpy(path, rows, cols, kind, seed
                                         ):  # type: ignore[no-untyped-def]
    """The row softmax alone (``_softmax_native.SOFTMAX_ROWS``, each version): rows of any
    length (whole and partial 16- and 8-lane vectors), no mask, one mask row broadcast (row
    stride 0) or a mask per row with torch's very negative entries, logits spread over
    hundreds, against float64 NumPy; masked entries exactly 0, nothing subnormal, the input's
    other rows untouched."""
    rows_fn = _native_rows(path)
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
    # the scores plus the mask as the kernel forms them, in float32: with logits in the
    # hundreds that sum's rounding alone moves a probability by up to ~1.5e-5 relative
    z = (x[:rows] if mask is None else x[:rows] + mask).astype(np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(s[:rows], want, rtol=5e-6, atol=1e-30 + 3e-7 * want.max())
    if mask is not None:
        assert (s[:rows][np.broadcast_to(mask == NEG, (rows, cols))] == 0).all()
    tiny = s[:rows][s[:rows] != 0]
    assert (np.abs(tiny) >= np.finfo(np.float32).tiny).all()
    np.testing.assert_array_equal(s[rows], x[rows])


@pytest.mark.parametrize("path", PATHS[:3])
def test_native_softmax_close_logits(path: str) -> None:
    """Logits within a few units of each other over BERT's 128-wide rows (every ``exp``
    argument in the polynomial's range, no clamp): within 2e-6 relative of float64."""
    rows_fn = _native_rows(path)
    rng = np.random.default_rng(1)
    x = rng.uniform(-4, 4, (64, 128)).astype(np.float32)
    s = x.copy()
    assert rows_fn(s.ctypes.data, 64, 128, 0, 0) == 0
    e = np.exp(x - x.max(axis=1, keepdims=True).astype(np.float64))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(s, want, rtol=2e-6, atol=0)


def test_versions_on_this_cpu() -> None:
    """``version()`` picks the widest version the CPU runs, honours ``ISA`` and ``ENABLED``,
    and the portable one is always there with a C compiler."""
    found = [n for n in PATHS[:3] if _attention_native.softmax_rows_address(n)]
    if not found:
        pytest.skip("no C compiler")
    assert "generic" in found
    assert _attention_native.version() == found[0]
    with _path("generic"):
        assert _attention_native.part_address() == _attention_native._addresses()["generic"][0]
    with _path("numpy"):
        assert _attention_native.version() is None and _attention_native.part_address() == 0



_CHILD = """
import json, sys
import numpy as np
from pytfrt.compiler.api import compile_module, parse_graph
from pytfrt.compiler.passes import default_pipeline
graph, data = sys.argv[1:]
gm = default_pipeline(parse_graph(open(graph).read()))
fused = [op.name for op in gm.function("main").body.block.ops].count("tg.attention")
model = compile_module(gm, optimize=False)
feeds = dict(np.load(data))
y = [np.asarray(model(feeds["q"], feeds["k"], feeds["v"], feeds["m"])) for _ in range(2)][-1]
np.save(data + ".y.npy", y)
print(json.dumps({"fused": fused, "numba": "numba" in sys.modules,
                  "llvmlite": "llvmlite" in sys.modules}))
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_attention_call_imports_no_numba(threads: int, tmp_path: Path) -> None:
    """A graph whose attention ``-tg-fuse-attention`` makes one ``tg.attention``, compiled and
    called in a fresh interpreter -- on two threads (the spin pool's call parts) and on one
    (``parallel_for``'s ctypes call) -- imports neither Numba nor llvmlite
    (docs/kernels.md, "What a model imports"), and agrees with the oracle."""
    if not _attention_native.softmax_rows_address("generic"):
        pytest.skip("no C compiler: the attention takes its NumPy path")
    rng = np.random.default_rng(threads)
    q, k, v = (rng.standard_normal((2, 11, 3, 8)).astype(np.float32) for _ in range(3))
    m = np.zeros((2, 1, 1, 11), np.float32)
    m[0, ..., 7:] = NEG
    (tmp_path / "g.mlir").write_text(_GRAPH)
    np.savez(tmp_path / "x.npz", q=q, k=k, v=v, m=m)
    env = {**os.environ, "PYTFRT_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "g.mlir"),
                           str(tmp_path / "x.npz")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {
        "fused": 1, "numba": False, "llvmlite": False}
    y = np.load(tmp_path / "x.npz.y.npy")
    np.testing.assert_allclose(y, _oracle(q, k, v, m, 0.35355339), rtol=2e-5, atol=2e-5)
