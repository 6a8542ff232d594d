"""Matrix multiplication with a fused epilogue: ``act(op(a) @ op(b) + bias + residual)``.

The compute function of the graph dialect's ``matmul`` and of its fused form
(``docs/graph_dialect.md``).  Batching follows NumPy's ``matmul``: rank >= 2 operands
broadcast their leading (batch) dimensions; a rank-1 ``a`` is a row vector and a rank-1 ``b``
a column vector, and that dimension is dropped from the result.  ``transpose_a`` /
``transpose_b`` swap the last two axes of a rank >= 2 operand (a view: no copy).

The product runs in BLAS (float32 matrices: oneDNN when installed, split into row shards across
threads, see :mod:`pytfrt.backends.cpu._blas`; otherwise NumPy's ``matmul``; GIL released);
``bias`` (1-D, the result's last
dimension), ``residual`` (broadcastable to the result) and the activation are applied in one
compiled pass over the result while it is still in cache
(:mod:`pytfrt.backends.cpu._epilogue`).  ``out=`` is written in place (no allocation when it
is C-contiguous).  Thread-safety: pure function; it writes only ``out``.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._blas import parallel_gemm, sgemm
from pytfrt.backends.cpu._epilogue import epilogue_2d
from pytfrt.backends.cpu._parallel import chunks, parallel_for
from pytfrt.backends.cpu.activations import check_activation
from pytfrt.backends.cpu.ops import OpError


def _swap_last(x: np.ndarray, name: str) -> np.ndarray:
    if x.ndim < 2:
        raise OpError(f"matmul: transpose_{name} needs a rank >= 2 operand, got shape {x.shape}")
    return x.swapaxes(-1, -2)


def matmul_output_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy ``matmul``'s result shape for (already transposed) operand shapes.

    Raises:
        OpError: a rank-0 operand, inner dimensions that differ or batch dimensions that do
            not broadcast.
    """
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise OpError(f"matmul: operands must have rank >= 1, got {a_shape} and {b_shape}")
    a2 = (1, *a_shape) if len(a_shape) == 1 else a_shape
    b2 = (*b_shape, 1) if len(b_shape) == 1 else b_shape
    if a2[-1] != b2[-2]:
        raise OpError(
            f"matmul: inner dimensions differ: {list(a_shape)} x {list(b_shape)} "
            f"({a2[-1]} != {b2[-2]})"
        )
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise OpError(
            f"matmul: batch dimensions do not broadcast: {list(a_shape)} x {list(b_shape)}"
        ) from None
    shape = (*batch, a2[-2], b2[-1])
    if len(a_shape) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b_shape) == 1:
        shape = shape[:-1]
    return tuple(int(d) for d in shape)


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
    """``y = act(a @ b + bias + residual)`` for float32 matrices: row shards, each a oneDNN GEMM
    followed by the epilogue on its rows while they are in cache."""
    m = a.shape[0]
    res = None if residual is None else np.broadcast_to(residual, y.shape)
    shards = chunks(m, 64, max(1, (1 << 20) // max(1, 4 * y.shape[1])))

    def shard(i: int) -> None:
        r0, r1 = shards[i]
        yb = y[r0:r1]
        sgemm(a[r0:r1], b, yb)
        epilogue_2d(yb, bias, None if res is None else res[r0:r1], code, alpha)

    parallel_for(shard, len(shards))


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
