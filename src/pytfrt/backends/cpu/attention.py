"""Scaled dot-product attention in one kernel: the compute function of ``tg.attention``.

``y[b, i, h, :] = sum_j softmax_j(scale * q[b, i, h, :] . k[b, j, h, :] + mask[b, h, i, j])
* v[b, j, h, :]``: queries ``q [B, Sq, H, D]``, keys ``k [B, Sk, H, D]``, values
``v [B, Sk, H, Dv]`` and the result ``[B, Sq, H, Dv]`` all in the "sequence, then heads" layout
a Transformer's projections produce (``[B, S, H * D]`` viewed as ``[B, S, H, D]``), and an
optional additive ``mask`` that broadcasts to ``[B, H, Sq, Sk]`` (a causal or padding mask of
zeros and very negative numbers), or with ``select`` a boolean mask: the scores where it is
true, ``fill`` elsewhere (Keras' masked softmax; a fully masked row then averages ``v``).
An exported BERT or GPT-2 writes this as two transposes of
``q``/``k``/``v`` into ``[B, H, S, D]``, a batched ``q @ k^T``, a scale, a mask add, a softmax,
a batched product with ``v`` and a transpose back: each a kernel dispatch, the transposes and
the scores materialised between them.  ``-tg-fuse-attention``
(:mod:`pytfrt.compiler.passes.attention`) makes this op from that pattern.

How: the (batch, head) pairs are split into shards run by the spin pool's native helpers
(:mod:`pytfrt.backends.cpu._spin_pool`'s call parts: the threads of the dense layers before
and after, still polling, so no wake-up and no GIL between shards), or when the pool is busy
or absent by :func:`pytfrt.backends.cpu._parallel.parallel_for`'s threads; per pair one
compiled function (GIL released) runs ``dnnl_sgemm`` on the strided head
views -- no transposed copy, the scale folded into the GEMM's ``alpha`` --, the mask, a
row-wise softmax with a vectorised ``exp`` (:func:`_exp_parts`, within about 2e-7
relative; on an AVX-512 CPU with an additive mask of unit column stride, or none, the
same computation as :mod:`pytfrt.backends.cpu._softmax_native`'s C function), and the
second ``dnnl_sgemm`` writing straight into the result's head columns.
Without oneDNN the same computation runs in NumPy.

Operands: float32 (or float64, NumPy path) ``q``, ``k``, ``v`` with unit-stride last axes;
``mask`` of the same dtype (boolean with ``select``).  Thread-safety: a pure function (writes
only ``out``).  Errors:
:class:`pytfrt.backends.cpu.ops.OpError` naming what does not fit.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _dnnl_conv, _softmax_native, _spin_pool
from pytfrt.backends.cpu._blas import gemm_cfunc, pin_thread
from pytfrt.backends.cpu._geometry import check_out
from pytfrt.backends.cpu._jit import numba, real_numba
from pytfrt.backends.cpu._parallel import chunks, num_threads, parallel_for
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()

PAIR_MACS = 1 << 18
"""Multiply-adds (``Sq * Sk * (D + Dv)``) of (batch, head) pairs per shard: pairs smaller than
this share a shard (two heads at ``Sq = Sk = 32``, ``D = Dv = 64``); GPT-2's heads at
sequence 64 (2^19) and BERT's at 128 (2^21) go one to a shard.  At those sizes shards of
2^20-2^22 measured the same (``chrt -f 10``, loaded machine)."""


def _check(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
           select: bool = False) -> tuple[int, int, int, int, int, int]:
    op = "attention"
    for name, a in (("q", q), ("k", k), ("v", v)):
        if not isinstance(a, np.ndarray) or a.ndim != 4:
            raise OpError(f"{op}: {name} must be a rank-4 array [batch, seq, heads, depth], got "
                          f"{list(getattr(a, 'shape', []))}")
    if q.dtype not in (np.float32, np.float64) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise OpError(f"{op}: q, k and v must share one float dtype, got {q.dtype}, {k.dtype}, "
                      f"{v.dtype}")
    b, sq, h, d = q.shape
    sk = k.shape[1]
    dv = v.shape[3]
    if k.shape != (b, sk, h, d) or v.shape != (b, sk, h, dv):
        raise OpError(f"{op}: q {list(q.shape)}, k {list(k.shape)} and v {list(v.shape)} do not "
                      "agree: expected k [B, Sk, H, D] and v [B, Sk, H, Dv] for q [B, Sq, H, D]")
    if mask is not None:
        want = np.dtype(np.bool_) if select else q.dtype
        if not isinstance(mask, np.ndarray) or mask.dtype != want:
            raise OpError(f"{op}: mask must be an array of dtype {want} (select = {select})")
        try:
            np.broadcast_shapes(mask.shape, (b, h, sq, sk))
        except ValueError:
            raise OpError(f"{op}: mask of shape {list(mask.shape)} does not broadcast to "
                          f"[B, H, Sq, Sk] = {[b, h, sq, sk]}") from None
    return b, sq, h, d, sk, dv


@GRAPH_OPS.op("attention")
def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, *,
              scale: float = 1.0, has_mask: bool = False, select: bool = False,
              fill: float = 0.0, out: np.ndarray | None = None) -> np.ndarray:
    """``softmax(scale * q k^T + mask) v`` per (batch, head), or with ``select``
    ``softmax(where(mask, scale * q k^T, fill)) v`` (see the module docstring).

    Raises:
        OpError: operands of the wrong rank, dtype or shapes, a mask that does not broadcast,
            a mask given without ``has_mask`` (or missing with it), a bad ``out``.
    """
    if has_mask != (mask is not None):
        raise OpError(f"attention: has_mask = {has_mask} but {'a' if mask is not None else 'no'}"
                      " mask operand was given")
    b, sq, h, d, sk, dv = _check(q, k, v, mask, select)
    sel = (float(fill),) if select and mask is not None else None
    check_out("attention", out, (b, sq, h, dv), q.dtype)
    y = out if out is not None and out.flags.c_contiguous else np.empty((b, sq, h, dv), q.dtype)
    if y.size == 0:
        return y if out is None else out
    if sk == 0:
        y.fill(0)  # an empty softmax sums nothing: the products are empty sums
    elif q.dtype == np.float32 and gemm_cfunc() is not None and _unit_rows(q, k, v):
        _run_fast(q, k, v, mask, float(scale), y, sel)
    else:
        _run_numpy(q, k, v, mask, float(scale), y, sel)
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


@GRAPH_OPS.op("columns")
def columns(x: np.ndarray, *, start: int, size: int) -> np.ndarray:
    """``x[..., start:start + size]``: a strided view of ``x`` (never a copy, never written).

    The packed query/key/value product's columns for one projection (``-tg-merge-matmuls``);
    the buffer planner keeps ``x`` alive while the view is (the op takes no ``out``).

    Raises:
        OpError: a rank-0 operand or columns outside its last axis.
    """
    if not isinstance(x, np.ndarray) or x.ndim == 0:
        raise OpError(f"columns: needs an array of rank >= 1, got {list(getattr(x, 'shape', []))}")
    if start < 0 or size < 0 or start + size > x.shape[-1]:
        raise OpError(f"columns: [{start}, {start + size}) outside the last axis of "
                      f"{list(x.shape)}")
    return x[..., start:start + size]


def _unit_rows(*arrays: np.ndarray) -> bool:
    """Whether every array's last axis is unit-stride and its other strides whole elements."""
    return all(a.strides[3] == a.itemsize or a.shape[3] == 1 for a in arrays) and all(
        s % a.itemsize == 0 and s >= 0 for a in arrays for s in a.strides)


def _run_numpy(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
               scale: float, y: np.ndarray, sel: tuple[float] | None = None) -> None:
    s = np.matmul(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1))
    s *= s.dtype.type(scale)
    if sel is not None and mask is not None:
        s = np.where(mask, s, s.dtype.type(sel[0]))
    elif mask is not None:
        s += mask
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    np.matmul(s, v.transpose(0, 2, 1, 3), out=y.transpose(0, 2, 1, 3))


def _run_fast(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
              scale: float, y: np.ndarray, sel: tuple[float] | None = None) -> None:
    b, sq, h, d = q.shape
    sk, dv = k.shape[1], v.shape[3]
    it = q.itemsize
    if mask is None:
        flat, ms = np.zeros(1, np.float32), np.zeros(4, np.int64)
    else:
        mc = np.ascontiguousarray(mask).reshape((1,) * (4 - mask.ndim) + mask.shape)
        flat = mc.reshape(-1)
        ms = np.array([st // mc.itemsize if n > 1 else 0
                       for st, n in zip(mc.strides, mc.shape, strict=True)], np.int64)
    geometry = np.array([b, sq, h, d, sk, dv,
                         q.strides[0] // it, q.strides[1] // it, q.strides[2] // it,
                         k.strides[0] // it, k.strides[1] // it, k.strides[2] // it,
                         v.strides[0] // it, v.strides[1] // it, v.strides[2] // it,
                         y.strides[0] // it, y.strides[1] // it, y.strides[2] // it], np.int64)
    addresses = np.array([q.ctypes.data, k.ctypes.data, v.ctypes.data, y.ctypes.data], np.int64)
    pairs = b * h
    shards = chunks(pairs, max(1, PAIR_MACS // max(1, sq * sk * (d + dv))))
    if len(shards) < num_threads() <= pairs:
        shards = chunks(pairs, -(-pairs // num_threads()))
    if sel is None and _run_on_pool(geometry, addresses, flat, ms, mask is not None, scale,
                                    shards):
        return
    run = _kernel()
    errors: list[int] = []

    def shard(i: int) -> None:
        lo, hi = shards[i]
        pin_thread()
        status = run(geometry, addresses, flat, ms, mask is not None, np.float32(scale), lo, hi,
                     sel is not None, np.float32(sel[0] if sel is not None else 0.0))
        if status:  # pragma: no cover - oneDNN only fails on bad arguments, checked above
            errors.append(status)

    parallel_for(shard, len(shards))  # q, k, v, y, flat stay referenced until it returns
    if errors:  # pragma: no cover
        raise RuntimeError(f"dnnl_sgemm failed with status {errors[0]}")


_CTX_SHARDS = 30
"""Layout of a :func:`_part` context (``int64``): the geometry (18 words), the addresses of
``q``, ``k``, ``v`` and ``y``, the mask's address and length, its four strides, whether there
is a mask, the scale (a float64's bits), then ``[lo, hi)`` of each shard's (batch, head)
pairs from this word on."""


def _run_on_pool(geometry: np.ndarray, addresses: np.ndarray, flat: np.ndarray,
                 ms: np.ndarray, has_mask: bool, scale: float,
                 shards: list[tuple[int, int]]) -> bool:
    """Run the shards as call parts on the spin pool's native helpers
    (:mod:`pytfrt.backends.cpu._spin_pool`, the dense layers' and convolutions' threads,
    already polling after the projection that produced ``q``, ``k`` and ``v``): no Python
    helper to wake, no GIL to hand over between shards.  ``False`` (nothing run) without
    oneDNN's library or the pool, or while another thread uses the pool: the caller then
    uses :func:`parallel_for`.

    Raises:
        RuntimeError: ``dnnl_sgemm`` returned an error status.
    """
    if not 2 <= len(shards) <= _spin_pool.MAX_PARTS or num_threads() < 2:
        return False
    part = _part_address()
    if part is None:
        return False
    ctx = np.empty(_CTX_SHARDS + 2 * len(shards), np.int64)
    ctx[:18] = geometry
    ctx[18:22] = addresses
    ctx[22], ctx[23] = flat.ctypes.data, flat.size
    ctx[24:28] = ms
    ctx[28] = has_mask
    ctx[29:30].view(np.float64)[0] = scale
    ctx[_CTX_SHARDS:] = np.asarray(shards, np.int64).reshape(-1)
    # ctx, flat, q, k, v and y stay referenced until it returns
    return _dnnl_conv.run_calls(part, ctx.ctypes.data, len(shards))


@numba.njit(nogil=True, fastmath=True)
def _row_max(row: Any) -> Any:  # pragma: no cover - compiled
    """The largest element of a float32 row: eight running maxima (a single one is a chain of
    dependent ``max`` instructions, which LLVM does not vectorise)."""
    n = row.shape[0]
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = row[0]
    n8 = n - n % 8
    for j in range(0, n8, 8):
        a0, a1, a2, a3 = max(a0, row[j]), max(a1, row[j + 1]), max(a2, row[j + 2]), max(
            a3, row[j + 3])
        a4, a5, a6, a7 = max(a4, row[j + 4]), max(a5, row[j + 5]), max(a6, row[j + 6]), max(
            a7, row[j + 7])
    mx = max(max(max(a0, a1), max(a2, a3)), max(max(a4, a5), max(a6, a7)))
    for j in range(n8, n):
        mx = max(mx, row[j])
    return mx


@numba.njit(nogil=True, fastmath=True)
def _exp_parts(row: Any, mx: Any, mant: Any, bits: Any) -> None:  # pragma: no cover - compiled
    """``exp(row[j] - mx) = mant[j] * 2^n[j]`` for ``row[j] <= mx``: range reduction
    (``n = round(x / ln 2)``) and a degree-6 polynomial for ``mant``, and ``2^n`` as the
    float32 bit pattern ``(127 + n) << 23`` in ``bits`` -- straight-line integer and float
    arithmetic the loop vectoriser takes (a libm call or a table lookup it cannot).  Relative
    error within about 2e-7.  ``x`` is clamped at -80 (``n >= -116``: never a subnormal);
    :func:`_scale_sum` zeroes what lies below."""
    for j in range(row.shape[0]):
        x = max(row[j] - mx, np.float32(-80.0))
        ni = np.int32(np.float32(0.5) - x * np.float32(1.4426950408889634))  # -round(x/ln 2)
        n = -np.float32(ni)
        r = x - n * np.float32(0.693145751953125)
        r = r - n * np.float32(1.428606765330187e-06)
        p = np.float32(1.0 / 720.0)
        p = p * r + np.float32(1.0 / 120.0)
        p = p * r + np.float32(1.0 / 24.0)
        p = p * r + np.float32(1.0 / 6.0)
        p = p * r + np.float32(0.5)
        p = p * r + np.float32(1.0)
        p = p * r + np.float32(1.0)
        bits[j] = (np.int32(127) - ni) << np.int32(23)
        mant[j] = p


@numba.njit(nogil=True, fastmath=True)
def _scale_sum(row: Any, mx: Any, mant: Any, pow2: Any) -> Any:  # pragma: no cover - compiled
    """``row[j] = mant[j] * pow2[j]`` (0 where ``row[j] - mx < -80``: never a subnormal,
    which costs a microcode assist in this loop and in every GEMM that reads it -- a causal
    mask's entries are ``-3.4e38``); returns the row's sum."""
    total = np.float32(0.0)
    for j in range(row.shape[0]):
        e = mant[j] * pow2[j] if row[j] - mx >= np.float32(-80.0) else np.float32(0.0)
        row[j] = e
        total += e
    return total


@numba.njit(nogil=True, fastmath=True)
def _softmax_rows(s: Any, sq: int, sk: int, mask: Any, moff: int, ms2: int, ms3: int,
                  has_mask: bool, mant: Any, bits: Any, select: bool,
                  fill: Any) -> None:  # pragma: no cover - compiled
    """Row-wise softmax of the scores ``s`` (``sq`` rows of ``sk``) after adding the mask
    (element ``(i, j)`` at ``mask[moff + i * ms2 + j * ms3]``), or with ``select`` after
    putting ``fill`` where the (boolean) mask is false; ``mant`` and ``bits`` are
    ``sk``-long float32 / int32 scratch rows."""
    pow2 = bits.view(np.float32)
    for i in range(sq):
        row = s[i * sk:(i + 1) * sk]
        if select:
            base = moff + i * ms2
            for j in range(sk):
                if not mask[base + j * ms3]:
                    row[j] = fill
        elif has_mask:
            base = moff + i * ms2
            if ms3 == 1:
                m = mask[base:base + sk]
                for j in range(sk):
                    row[j] += m[j]
            else:
                for j in range(sk):
                    row[j] += mask[base + j * ms3]
        mx = _row_max(row)
        _exp_parts(row, mx, mant, bits)
        inv = np.float32(1.0) / _scale_sum(row, mx, mant, pow2)
        for j in range(sk):
            row[j] *= inv


_compiled: dict[int, Any] = {}
"""The compiled loops, by the address of the native softmax they call (0: the Numba loops)."""


def _kernel() -> Any:
    """The compiled loop over (batch, head) pairs for the current
    :data:`pytfrt.backends.cpu._softmax_native.ENABLED`, built on first use (about 1 s)."""
    native = _softmax_native.address()
    compiled = _compiled.get(native)
    if compiled is not None:
        return compiled
    f = gemm_cfunc()
    softmax_rows = _softmax_rows
    no, tr = np.uint8(ord("N")), np.uint8(ord("T"))
    if native:
        i64 = ctypes.c_int64
        native_rows = ctypes.CFUNCTYPE(ctypes.c_int, i64, i64, i64, i64, i64)(native)

        @numba.njit(nogil=True)
        def softmax(s, sq, sk, mask, moff, ms2, ms3, has_mask, mant, bits, select,
                    fill):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
            if select or (has_mask and ms3 != 1):
                softmax_rows(s, sq, sk, mask, moff, ms2, ms3, has_mask, mant, bits, select,
                             fill)
                return 0
            return native_rows(s.ctypes.data, sq, sk,
                               mask.ctypes.data + 4 * moff if has_mask else 0, ms2)
    else:
        @numba.njit(nogil=True)
        def softmax(s, sq, sk, mask, moff, ms2, ms3, has_mask, mant, bits, select,
                    fill):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
            softmax_rows(s, sq, sk, mask, moff, ms2, ms3, has_mask, mant, bits, select, fill)
            return 0

    @numba.njit(nogil=True)
    def run(g, addr, mask, ms, has_mask, scale, lo, hi, select, fill):  # type: ignore[no-untyped-def]
        sq, h, d, sk, dv = g[1], g[2], g[3], g[4], g[5]
        s = np.empty(sq * sk, np.float32)
        mant, bits = np.empty(sk, np.float32), np.empty(sk, np.int32)
        ps = s.ctypes.data
        status = 0
        zero, one = np.float32(0.0), np.float32(1.0)
        for pair in range(lo, hi):
            bi = pair // h
            hh = pair - bi * h
            pq = addr[0] + 4 * (bi * g[6] + hh * g[8])
            pk = addr[1] + 4 * (bi * g[9] + hh * g[11])
            pv = addr[2] + 4 * (bi * g[12] + hh * g[14])
            py = addr[3] + 4 * (bi * g[15] + hh * g[17])
            # scores [Sq, Sk] = scale * q_bh [Sq, D] @ k_bh^T (rows of q and k are strided)
            status |= f(no, tr, sq, sk, d, scale, pq, g[7], pk, g[10], zero, ps, sk)
            status |= softmax(s, sq, sk, mask, bi * ms[0] + hh * ms[1], ms[2], ms[3],
                              has_mask, mant, bits, select, fill)
            # y_bh [Sq, Dv] = p [Sq, Sk] @ v_bh [Sk, Dv], written into the result's head columns
            status |= f(no, no, sq, dv, sk, one, ps, sk, pv, g[13], zero, py, g[16])
        return status

    _compiled[native] = run
    return run


_part_fn: dict[int, Any] = {}
"""The call-part functions, keyed as :data:`_compiled`."""


def _part_address() -> int | None:
    """The address of ``int32 part(int64 *context, int64 i)``: shard ``i`` of the pairs
    described by a context (:data:`_CTX_SHARDS`), a C callable for the spin pool's call parts;
    ``None`` without oneDNN's ``dnnl_sgemm``.  Built on first use (about 1 s)."""
    native = _softmax_native.address()
    if native not in _part_fn:
        if gemm_cfunc() is None:
            return None
        run = _kernel()
        nb = real_numba()
        from numba import types

        from pytfrt.backends.cpu._native import f32_pointer

        first = _CTX_SHARDS

        @nb.cfunc(types.int32(types.CPointer(types.int64), types.int64), nopython=True)
        def part(context, i):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
            ctx = nb.carray(context, first + 2 * i + 2)
            mask = nb.carray(f32_pointer(ctx[22]), ctx[23])
            scale = ctx[29:30].view(np.float64)[0]
            return run(ctx[0:18], ctx[18:22], mask, ctx[24:28], ctx[28] != 0,
                       np.float32(scale), ctx[first + 2 * i], ctx[first + 2 * i + 1], False,
                       np.float32(0.0))

        _part_fn[native] = part
    return int(_part_fn[native].address)
