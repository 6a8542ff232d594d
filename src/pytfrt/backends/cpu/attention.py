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
or absent by :func:`pytfrt.backends.cpu._parallel.parallel_for`'s threads; per pair one C
function (:mod:`pytfrt.backends.cpu._attention_native`, GIL released, no Numba) runs
``dnnl_sgemm`` on the strided head views -- no transposed copy, the scale folded into the
GEMM's ``alpha`` --, the mask, a row-wise softmax with a vectorised ``exp`` (AVX-512, AVX2
or portable C: :mod:`pytfrt.backends.cpu._softmax_native`, within about 2e-6 relative of a
float64 softmax), and the second ``dnnl_sgemm`` writing straight into the result's head
columns.  Without oneDNN or a C compiler the same computation runs in NumPy.

Operands: float32 (or float64, NumPy path) ``q``, ``k``, ``v`` with unit-stride last axes;
``mask`` of the same dtype (boolean with ``select``).  Thread-safety: a pure function (writes
only ``out``).  Errors:
:class:`pytfrt.backends.cpu.ops.OpError` naming what does not fit.
"""

from __future__ import annotations

import struct

import numpy as np

from pytfrt.backends.cpu import _attention_native, _dnnl_conv, _spin_pool
from pytfrt.backends.cpu._blas import gemm_address, gemm_cfunc, pin_thread
from pytfrt.backends.cpu._geometry import check_out
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
    elif (q.dtype == np.float32 and gemm_cfunc() is not None and _unit_rows(q, k, v)
          and (part := _attention_native.part_address())):
        _run_fast(q, k, v, mask, float(scale), y, sel, part)
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
              scale: float, y: np.ndarray, sel: tuple[float] | None, part: int) -> None:
    """The pairs in shards of :data:`PAIR_MACS`, run by the C function at ``part``
    (:mod:`pytfrt.backends.cpu._attention_native`) on the spin pool or, when it is busy or
    absent, on :func:`parallel_for`'s threads.

    Raises:
        RuntimeError: ``dnnl_sgemm`` returned an error status (or a part had no scratch).
    """
    b, sq, h, d = q.shape
    sk, dv = k.shape[1], v.shape[3]
    pairs = b * h
    shards = chunks(pairs, max(1, PAIR_MACS // max(1, sq * sk * (d + dv))))
    if len(shards) < num_threads() <= pairs:
        shards = chunks(pairs, -(-pairs // num_threads()))
    nat = _attention_native
    it = q.itemsize
    words = [b, sq, h, d, sk, dv]  # the context, word by word (_attention_native.C_*)
    for a in (q, k, v, y):
        words += (a.strides[0] // it, a.strides[1] // it, a.strides[2] // it)
    words += (q.ctypes.data, k.ctypes.data, v.ctypes.data, y.ctypes.data)
    if mask is None:
        words += (0, 0, 0, 0, 0, 0, nat.MODE_NONE)
    else:
        mc = np.ascontiguousarray(mask).reshape((1,) * (4 - mask.ndim) + mask.shape)
        words += (mc.ctypes.data, mc.size)
        words += (st // mc.itemsize if n > 1 else 0 for st, n in zip(mc.strides, mc.shape,
                                                                      strict=True))
        words.append(nat.MODE_SELECT if sel is not None else nat.MODE_ADD)
    words += (_bits(scale), _bits(sel[0] if sel else 0.0), gemm_address())
    for lo, hi in shards:
        words += (lo, hi)
    ctx = np.array(words, np.int64)
    # ctx, the mask's copy (mc), q, k, v and y stay referenced until the parts return
    if (2 <= len(shards) <= _spin_pool.MAX_PARTS and num_threads() >= 2
            and _dnnl_conv.run_calls(part, ctx.ctypes.data, len(shards))):
        return
    run, address = nat.part_function(part), ctx.ctypes.data
    errors: list[int] = []

    def shard(i: int) -> None:
        pin_thread()
        status = run(address, i)
        if status:  # pragma: no cover - oneDNN only fails on bad arguments, checked above
            errors.append(status)

    parallel_for(shard, len(shards))
    if errors:  # pragma: no cover
        raise RuntimeError(f"attention: dnnl_sgemm failed with status {errors[0]}")


_F64 = struct.Struct("<d")
_I64 = struct.Struct("<q")


def _bits(x: float) -> int:
    """The bits of a float64, as the int64 a context word holds."""
    return int(_I64.unpack(_F64.pack(x))[0])


