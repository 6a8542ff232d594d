"""Matrix multiplication with a fused epilogue: ``act(op(a) @ op(b) + bias + residual)``.

The compute function of the graph dialect's ``matmul`` and of its fused form
(``docs/graph_dialect.md``).  Batching follows NumPy's ``matmul``: rank >= 2 operands
broadcast their leading (batch) dimensions; a rank-1 ``a`` is a row vector and a rank-1 ``b``
a column vector, and that dimension is dropped from the result.  ``transpose_a`` /
``transpose_b`` swap the last two axes of a rank >= 2 operand (a view: no copy).

The product runs in BLAS (GIL released).  Float32 with oneDNN installed
(:mod:`pytfrt.backends.cpu._blas`): a 2-D product is split into tiles of rows or of columns
(:func:`tiles_2d`: a large weight is streamed once per call), a batched one
(``[..., M, K] x [..., K, N]``, the attention products of a Transformer) into shards of whole
products, both run on the CPU kernels' helper threads with oneDNN single-threaded per call --
never a threaded BLAS, whose spinning threads cost a loaded machine several times the work.
A rank-1 operand becomes a 1-row / 1-column matrix of these paths.
Otherwise (other dtypes, two vectors, tiny batched products, layouts oneDNN cannot take
such as reversed strides) NumPy's ``matmul``;
``bias`` (1-D, the result's last
dimension), ``residual`` (broadcastable to the result) and the activation are applied in one
compiled pass over the result while it is still in cache
(:mod:`pytfrt.backends.cpu._epilogue`).  ``out=`` is written in place (no allocation when it
is C-contiguous).  Thread-safety: pure function; it writes only ``out``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.backends.cpu import _gemm_native
from pytfrt.backends.cpu._blas import layout, parallel_gemm, pin_thread, sgemm
from pytfrt.backends.cpu._epilogue import epilogue_2d
from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu._parallel import chunks, num_threads, parallel_for
from pytfrt.backends.cpu.activations import check_activation
from pytfrt.backends.cpu.ops import MatmulShapeError as MatmulShapeError
from pytfrt.backends.cpu.ops import OpError, matmul_result_shape


def _swap_last(x: np.ndarray, name: str) -> np.ndarray:
    if x.ndim < 2:
        raise OpError(f"matmul: transpose_{name} needs a rank >= 2 operand, got shape {x.shape}")
    return x.swapaxes(-1, -2)


def matmul_output_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy ``matmul``'s result shape for (already transposed) static operand shapes
    (:func:`matmul_result_shape`).

    Raises:
        OpError: a rank-0 operand, inner dimensions that differ or batch dimensions that do
            not broadcast.
    """
    return matmul_result_shape(a_shape, b_shape)  # type: ignore[return-value]


def matmul(
    a: np.ndarray,
    b: np.ndarray,
    *,
    transpose_a: bool = False,
    transpose_b: bool = False,
    bias: np.ndarray | None = None,
    residual: np.ndarray | None = None,
    activation: str = "none",
    alpha: float = 0.0,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``activation(op(a) @ op(b) + bias + residual)``.

    Args:
        a, b: arrays of one dtype (float or integer; the epilogue's activation needs float).
        transpose_a, transpose_b: use the operand with its last two axes swapped.
        bias: 1-D, length = the result's last dimension (or a scalar for a rank-0 result).
        residual: broadcastable to the result's shape.
        activation, alpha: see :mod:`pytfrt.backends.cpu.activations`.
        out: result buffer of the exact shape and dtype (written and returned).

    Returns:
        The result (``out`` if given).

    Raises:
        OpError: wrong ranks, mismatched dimensions or dtypes, bad bias/residual/out, unknown
            activation.
    """
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        raise OpError("matmul: operands must be ndarrays")
    if a.dtype != b.dtype:
        raise OpError(f"matmul: operand dtypes differ: {a.dtype} and {b.dtype}")
    code = check_activation("matmul", activation, a.dtype)
    if transpose_a:
        a = _swap_last(a, "a")
    if transpose_b:
        b = _swap_last(b, "b")
    shape = matmul_output_shape(a.shape, b.shape)
    last = shape[-1] if shape else 1
    if bias is not None:
        bias = np.asarray(bias)
        if bias.dtype != a.dtype or bias.size != last or bias.ndim > 1:
            raise OpError(
                f"matmul: bias must be 1-D of length {last} and dtype {a.dtype}, got "
                f"{list(bias.shape)} {bias.dtype}"
            )
        bias = bias.reshape(last)
    if residual is not None:
        if not isinstance(residual, np.ndarray) or residual.dtype != a.dtype:
            raise OpError(f"matmul: residual must be an ndarray of dtype {a.dtype}")
        try:
            if np.broadcast_shapes(residual.shape, shape) != shape:
                raise ValueError
        except ValueError:
            raise OpError(
                f"matmul: residual of shape {list(residual.shape)} does not broadcast to the "
                f"result shape {list(shape)}"
            ) from None
    if out is not None and (
        not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != a.dtype
    ):
        raise OpError(
            f"matmul: out must have shape {list(shape)} and dtype {a.dtype}, got "
            f"{list(getattr(out, 'shape', ()))} {getattr(out, 'dtype', None)}"
        )
    target = out if out is not None and out.flags.c_contiguous else None
    if (a.ndim == 1) != (b.ndim == 1) and a.dtype == np.float32 and parallel_gemm():
        # A matrix-vector product (which OpenBLAS threads): the vector as a 1-row / 1-column
        # matrix through the paths below, then the epilogue on the result's own shape.
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b
        full = matmul_output_shape(a2.shape, b2.shape)
        y = matmul(a2, b2, out=None if target is None else target.reshape(full)).reshape(shape)
        apply_epilogue(y, bias, residual, code, alpha)
        if out is None:
            return y
        if target is None:  # a non-contiguous out (a contiguous one holds y already)
            out[...] = y
        return out
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous and a.dtype == np.float32:
        # A dense layer on [..., K] rows: one [rows, K] x [K, N] GEMM, not a batch of GEMVs.
        rows = a.reshape(-1, a.shape[-1])
        res2 = None if residual is None else np.broadcast_to(residual, shape).reshape(-1, last)
        y2 = matmul(
            rows,
            b,
            bias=bias,
            residual=res2,
            activation=activation,
            alpha=alpha,
            out=None if target is None else target.reshape(-1, last),
        )
        if out is None:
            return y2.reshape(shape)
        if target is None:  # a non-contiguous out
            out[...] = y2.reshape(shape)
        return out
    if a.ndim == b.ndim == 2 and a.dtype == np.float32 and parallel_gemm():
        y = target if target is not None else np.empty(shape, dtype=a.dtype)
        _sharded_2d(a, b, y, bias, residual, code, alpha)
        if out is not None and y is not out:
            out[...] = y
            return out
        return y
    if (a.ndim >= 2 and b.ndim >= 2 and a.dtype == np.float32
            and a.shape[-2] * a.shape[-1] * b.shape[-1] >= BATCHED_MIN and parallel_gemm()):
        y = target if target is not None else np.empty(shape, dtype=a.dtype)
        if _batched(a, b, y, bias if residual is None else None,
                    code if residual is None else 0, alpha):
            if residual is not None:
                apply_epilogue(y, bias, residual, code, alpha)
            if out is not None and y is not out:
                out[...] = y
                return out
            return y
    y = np.matmul(a, b, out=target)
    if target is None and not isinstance(y, np.ndarray):  # rank-0 result of two vectors
        y = np.asarray(y, dtype=a.dtype)
    apply_epilogue(y, bias, residual, code, alpha)
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


def _sharded_2d(
    a: np.ndarray,
    b: np.ndarray,
    y: np.ndarray,
    bias: np.ndarray | None,
    residual: np.ndarray | None,
    code: int,
    alpha: float,
) -> None:
    """``y = act(a @ b + bias + residual)`` for float32 matrices: tiles (:func:`tiles_2d`),
    each a oneDNN GEMM followed by the epilogue on its part of ``y`` while it is in cache."""
    res = None if residual is None else np.broadcast_to(residual, y.shape)
    m, k = a.shape
    parts = tiles_2d(m, k, b.shape[1])

    def shard(i: int) -> None:
        r0, r1, c0, c1 = parts[i]
        sgemm(a[r0:r1], b[:, c0:c1], y[r0:r1, c0:c1])
        # on whole rows of y with a column range: a column slice's strided loop is ~5x slower
        epilogue_2d(y[r0:r1], bias, None if res is None else res[r0:r1], code, alpha,
                    cols=(c0, c1))

    parallel_for(shard, len(parts))


SHARD_MACS = 1 << 19
"""Multiply-adds below which a 2-D product is not split further (a shard of about 10 us)."""
_TILE_BYTES = 1 << 20
"""Bytes of output per tile of a 2-D product (the epilogue runs on it while it is in cache)."""


def tiles_2d(m: int, k: int, n: int) -> list[tuple[int, int, int, int]]:
    """``(row0, row1, col0, col1)`` tiles of an ``(m, k) x (k, n)`` product for the helper
    threads.

    Every tile reads its rows of ``a`` and its columns of ``b`` in full, so the split is along
    the dimension whose operand is re-read for less: by columns of ``b`` when ``a`` is the
    smaller operand (``m < n``: a Transformer's projections, a language model's head), so each
    column of a large weight is streamed from memory once per call, not once per row shard;
    otherwise by rows.  About ``2 * num_threads()`` tiles (spare tiles absorb imbalance), fewer
    for a small product (:data:`SHARD_MACS` each at least), more to keep each tile's output
    within :data:`_TILE_BYTES`.
    """
    want = max(1, min(2 * num_threads(), (m * k * n) // SHARD_MACS))
    if m < n:
        width = -(-n // want)
        width = min(width, max(64, _TILE_BYTES // max(1, 4 * m)))
        width = max(16, -(-width // 16) * 16)  # whole 64-byte lines of each output row
        return [(0, m, c, min(n, c + width)) for c in range(0, n, width)]
    rows = chunks(m, max(1, -(-m // want)), max(1, _TILE_BYTES // max(1, 4 * n)))
    return [(r0, r1, 0, n) for r0, r1 in rows]


BATCHED_MIN = (1 << 18) + 1
"""``m * k * n`` from which each product of a batched float32 matmul runs in oneDNN.  Below it
NumPy's loop of small GEMMs: OpenBLAS keeps a product of at most 2^18 multiply-adds on the
calling thread (its ``GEMM_MULTITHREAD_THRESHOLD`` rule), and ``dnnl_sgemm`` costs 8-10 us per
call whatever the size -- GPT-2's attention at sequence 64 (12 heads of ``64 x 64 x 64``):
0.151 against 0.041 ms of CPU per batched product; ``32 x 64 x 32``: 0.115 against 0.011.
From 2^20 (BERT's ``128 x 64 x 128``) NumPy threads, and under load that measured 30-60x
slower than the oneDNN loop."""
_SHARD_MACS = 1 << 18
"""Multiply-adds per shard of a batched matmul split across the helper threads."""

_batch_kernel: Any = None


def _kernel() -> Any:
    """The batch loop over ``dnnl_sgemm`` (no Python call per product, GIL released): the C
    one of :mod:`pytfrt.backends.cpu._gemm_native`, or without a C compiler a Numba one that
    calls the C function directly (built on first use, about 0.3 s)."""
    global _batch_kernel
    if _batch_kernel is None:
        native = _gemm_native.batch_loop()
        if native is not None:
            _batch_kernel = native
            return native
        import numba

        from pytfrt.backends.cpu._blas import gemm_cfunc

        f = gemm_cfunc()

        @numba.njit(nogil=True)
        def run(ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, lo, hi):  # type: ignore[no-untyped-def]
            status = 0
            one, zero = np.float32(1.0), np.float32(0.0)
            for i in range(lo, hi):
                status |= f(ta, tb, m, n, k, one, pa[i], lda, pb[i], ldb, zero, pc[i], ldc)
            return status

        _batch_kernel = run
    return _batch_kernel


def _addresses(x: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """The address of each matrix of ``x`` broadcast over ``batch`` (flat, C order)."""
    xb = np.broadcast_to(x, (*batch, *x.shape[-2:]))
    addr = np.full(batch, xb.ctypes.data, dtype=np.int64)
    for axis, (d, st) in enumerate(zip(batch, xb.strides[:-2], strict=True)):
        if d > 1 and st:
            shape = [1] * len(batch)
            shape[axis] = d
            addr += (np.arange(d, dtype=np.int64) * st).reshape(shape)
    return addr.reshape(-1)


def _batched(
    a: np.ndarray,
    b: np.ndarray,
    y: np.ndarray,
    bias: np.ndarray | None,
    code: int,
    alpha: float,
) -> bool:
    """``y = act(a @ b + bias)`` for float32 operands of rank >= 2 (batch dimensions
    broadcast) and a C-contiguous ``y``: one single-threaded oneDNN GEMM per product, the
    batch split into shards across the helper threads when the work is large, each shard's
    epilogue applied while its rows are in cache.  ``False`` (nothing written) when a
    layout cannot be passed to oneDNN (negative or zero strides inside a matrix)."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = y.shape[:-2]
    count = int(np.prod(batch))
    if count == 0 or m == 0 or n == 0:
        return True
    if k == 0:
        y.fill(0)
        apply_epilogue(y, bias, None, code, alpha)
        return True
    ta, lda = layout(a[(0,) * (a.ndim - 2)])
    tb, ldb = layout(b[(0,) * (b.ndim - 2)])
    if lda is None or ldb is None:
        return False
    pa, pb = _addresses(a, batch), _addresses(b, batch)
    pc = y.ctypes.data + np.arange(count, dtype=np.int64) * (m * n * 4)
    run = _kernel()
    y3 = y.reshape(count, m * n)
    shards = chunks(count, max(1, -(-_SHARD_MACS // (m * n * k))))
    errors: list[int] = []

    def shard(i: int) -> None:
        lo, hi = shards[i]
        pin_thread()
        status = run(ord(ta), ord(tb), m, n, k, pa, lda, pb, ldb, pc, n, lo, hi)
        if status:  # pragma: no cover - oneDNN only fails on bad arguments, checked above
            errors.append(status)
        epilogue_2d(y3[lo:hi].reshape(-1, n), bias, None, code, alpha)

    parallel_for(shard, len(shards))
    if errors:  # pragma: no cover
        raise RuntimeError(f"dnnl_sgemm failed with status {errors[0]}")
    return True


def apply_epilogue(
    y: np.ndarray,
    bias: np.ndarray | None,
    residual: np.ndarray | None,
    code: int,
    alpha: float,
) -> None:
    """``y = act(y + bias + residual)`` in place, bias along the last axis (checked shapes)."""
    if code == 0 and bias is None and residual is None:
        return
    if y.ndim == 0 or not y.flags.c_contiguous:
        if bias is not None:
            y += bias.reshape(()) if y.ndim == 0 else bias
        if residual is not None:
            y += residual
        if code:
            tmp = np.ascontiguousarray(y).reshape(1, -1)
            epilogue_2d(tmp, None, None, code, alpha)
            y[...] = tmp.reshape(y.shape)
        return
    y2 = y.reshape(-1, y.shape[-1])
    r2 = None
    if residual is not None:
        if residual.shape == y.shape:
            r2 = residual.reshape(y2.shape)
        else:
            y += residual
    epilogue_2d(y2, bias, r2, code, alpha)


GEMV_ROWS = 4
"""Rows up to which :func:`dense_rows` computes a float32 dense layer itself (a batch-1
classifier or MLP layer): ``dnnl_sgemm`` packs the whole weight on every call, which for a
single row doubles the memory traffic (measured 63 against 32 us of CPU for ``1 x 784 x 512``),
and NumPy's OpenBLAS threads a matrix-vector product, waiting for a descheduled thread on a
loaded machine."""


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _dense_rows(x, w, bias, relu, y):  # type: ignore[no-untyped-def]
    """``y = relu?(x @ w + bias)`` for float32 ``x (m, k)``, C-contiguous ``w (k, n)``,
    ``bias (n,)`` or ``(0,)`` and C-contiguous ``y (m, n)``: per row, four rows of ``w`` at a
    time are added into the output row (LLVM vectorises the inner loop over ``n``).  The
    fallback of :func:`dense_rows` without a C compiler (the C kernel of
    :mod:`pytfrt.backends.cpu._gemm_native` adds in the same order, blocked over the rows)."""
    m, k = x.shape
    n = w.shape[1]
    k4 = k - k % 4
    zero = np.float32(0.0)
    for r in range(m):
        acc = y[r]
        if bias.shape[0] > 0:
            for j in range(n):
                acc[j] = bias[j]
        else:
            for j in range(n):
                acc[j] = zero
        for i in range(0, k4, 4):
            x0, x1, x2, x3 = x[r, i], x[r, i + 1], x[r, i + 2], x[r, i + 3]
            w0, w1, w2, w3 = w[i], w[i + 1], w[i + 2], w[i + 3]
            for j in range(n):
                acc[j] += x0 * w0[j] + x1 * w1[j] + x2 * w2[j] + x3 * w3[j]
        for i in range(k4, k):
            xi = x[r, i]
            wi = w[i]
            for j in range(n):
                acc[j] += xi * wi[j]
        if relu:
            for j in range(n):
                v = acc[j]
                acc[j] = v if v > zero else zero


_NO_BIAS = np.empty(0, np.float32)


def dense_rows(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, relu: bool,
               out: np.ndarray | None = None) -> np.ndarray | None:
    """``relu?(x @ w + bias)`` for a float32 ``x`` of at most :data:`GEMV_ROWS` rows and a
    C-contiguous float32 ``w`` on the calling thread (``bias``: C-contiguous float32 ``(n,)``;
    ``out``: a C-contiguous float32 ``(m, n)`` buffer to write, else a new array), or ``None``
    (nothing computed) when the operands do not fit that case: the caller takes its general
    path.  Runs the C kernel of :mod:`pytfrt.backends.cpu._gemm_native` (no Numba import), or
    without a C compiler the Numba one.  Thread-safe: writes only the result."""
    if (x.ndim != 2 or x.shape[0] > GEMV_ROWS or x.dtype != np.float32 or w.dtype != np.float32
            or not w.flags.c_contiguous or x.shape[1] != w.shape[0]):
        return None
    shape = (x.shape[0], w.shape[1])
    if bias is not None and (bias.dtype != np.float32 or bias.shape != shape[1:]
                             or not bias.flags.c_contiguous):
        return None
    if out is None:
        out = np.empty(shape, np.float32)
    elif out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        return None
    mod = _gemm_native.native()
    if mod is None or not mod.dense_rows(x, w, bias, relu, out):
        _dense_rows(x, w, _NO_BIAS if bias is None else bias, relu, out)
    return out
