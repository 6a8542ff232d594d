"""Compute functions of the quantisation ops (catalogue family ``quant``,
:mod:`pytfrt.compiler.ops.quant`): ONNX's ``QuantizeLinear``, ``DequantizeLinear`` and
``DynamicQuantizeLinear`` semantics, in NumPy.

* ``quantize_linear(x, scale, zero_point?)``: ``saturate(round(x / scale) + zero_point)``,
  rounding half to even, saturating to the result type's range;
* ``dequantize_linear(q, scale, zero_point?)``: ``(q - zero_point) * scale``;
* ``dynamic_quantize_linear(x)``: u8 quantisation with the scale and zero point computed from
  ``x``'s range (which always includes 0), the three results of ONNX's op.

A scale (and its zero point) is per tensor (a scalar or one element), per axis (1-D, one per
index along ``axis``) or blocked (``block_size > 0``: the rank of ``x``, each element covering
``block_size`` consecutive indices along ``axis``).  Floating inputs are computed in float32
(float64 for float64 and integer inputs), as ONNX's reference does.

Operands positional, attributes keyword-only, new arrays returned (operands are never
written), :class:`~pytfrt.backends.cpu.ops.OpError` for bad data.  Pure functions: thread-safe.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function."""


def broadcast_param(p: np.ndarray, x_shape: tuple[int, ...], axis: int,
                    block_size: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast against ``x_shape`` (see the module
    docstring for the three forms).

    Raises:
        OpError: if ``p``'s shape fits none of them.
    """
    p = np.asarray(p)
    if p.size == 1 and p.ndim <= 1:
        return p.reshape(())
    rank = len(x_shape)
    if rank == 0:
        raise OpError(f"a scale of shape {list(p.shape)} for a scalar input")
    ax = axis % rank if -rank <= axis < rank else None
    if ax is None:
        raise OpError(f"axis {axis} is out of range for rank {rank}")
    dim = x_shape[ax]
    if block_size > 0:
        want = list(x_shape)
        want[ax] = -(-dim // block_size)
        if list(p.shape) != want:
            raise OpError(f"blocked scale of shape {list(p.shape)} for input {list(x_shape)}"
                          f" and block size {block_size} (expected {want})")
        return np.take(np.repeat(p, block_size, axis=ax), np.arange(dim), axis=ax)
    if p.ndim != 1 or p.shape[0] != dim:
        raise OpError(f"per-axis scale of shape {list(p.shape)} for axis {ax} of input "
                      f"{list(x_shape)} (expected [{dim}])")
    shape = [1] * rank
    shape[ax] = dim
    return p.reshape(shape)


def _work_type(x: np.ndarray) -> type[np.floating]:
    return np.float64 if x.dtype == np.float64 or x.dtype.kind in "iu" else np.float32


def saturate(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``v`` (already rounded) clamped to ``dtype``'s range and converted."""
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


@GRAPH_OPS.op("quantize_linear")
def quantize_linear(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None, *,
                    axis: int, block_size: int, dtype: str) -> np.ndarray:
    """``saturate(round_half_even(x / scale) + zero_point)`` as ``dtype`` (see the module)."""
    from pytfrt.compiler.types import np_dtype

    out = np_dtype(dtype)
    work = _work_type(x)
    s = broadcast_param(scale, x.shape, axis, block_size).astype(work)
    q = np.rint(np.asarray(x).astype(work) / s)
    if zero_point is not None:
        q = q + broadcast_param(zero_point, x.shape, axis, block_size).astype(work)
    return saturate(q, out)


@GRAPH_OPS.op("dequantize_linear")
def dequantize_linear(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None,
                      *, axis: int, block_size: int) -> np.ndarray:
    """``(q - zero_point) * scale`` in the scale's type (see the module)."""
    s = broadcast_param(scale, q.shape, axis, block_size)
    work = np.float64 if s.dtype == np.float64 else np.float32
    v = np.asarray(q).astype(work)
    if zero_point is not None:
        v = v - broadcast_param(zero_point, q.shape, axis, block_size).astype(work)
    return np.asarray(v * s.astype(work)).astype(s.dtype)


def dynamic_params(x: np.ndarray) -> tuple[np.float32, np.uint8]:
    """ONNX ``DynamicQuantizeLinear``'s u8 scale and zero point for ``x``: the range
    ``[min(0, min x), max(0, max x)]`` over 255 steps (an empty or all-zero input gives scale
    1, zero point 0, as ONNX Runtime).

    Raises:
        OpError: for NaN or infinite elements (no finite scale exists).
    """
    if x.size == 0:
        return np.float32(1.0), np.uint8(0)
    mn, mx = float(np.min(x)), float(np.max(x))
    if not (np.isfinite(mn) and np.isfinite(mx)):
        raise OpError("dynamic_quantize_linear: the input holds NaN or infinity")
    lo, hi = min(0.0, mn), max(0.0, mx)
    scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255.0))
    if scale == 0:
        return np.float32(1.0), np.uint8(0)
    zp = np.clip(np.rint(np.float32(0.0) - np.float32(lo) / scale), 0, 255)
    return scale, np.uint8(zp)


@GRAPH_OPS.op("dynamic_quantize_linear")
def dynamic_quantize_linear(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y u8, y_scale f32 scalar, y_zero_point u8 scalar)``, as ONNX's op."""
    scale, zp = dynamic_params(x)
    y = saturate(np.rint(x.astype(np.float32) / scale) + np.float32(zp), np.dtype(np.uint8))
    return y, np.asarray(scale, np.float32), np.asarray(zp, np.uint8)
