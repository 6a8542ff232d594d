"""Compute functions of the graph dialect's elementwise, shape and reduction ops (NumPy).

Each function takes the op's operands as positional ndarrays and its attributes as
keyword-only arguments named as in the catalogue (``docs/graph_dialect.md``), and returns a new
ndarray (or a tuple for several results).  :data:`GRAPH_OPS` maps op names to them; the graph
kernels (:mod:`pytfrt.backends.cpu.graph_kernels`) and the compiler's constant folding both call
these.  The elementwise ops' compute functions are their :mod:`~pytfrt.backends.cpu.op_math`
records' (where each elementwise op's meaning lives once).  Element types are preserved
(NumPy's promotion of Python scalars is weak), comparisons return ``bool``.  Pure functions:
thread-safe.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.backends.cpu.op_math import MATH
from pytfrt.backends.cpu.op_math import arr as _arr
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function (see the module docstring)."""

_F32 = np.dtype(np.float32)


# -- elementwise: every op of :data:`pytfrt.backends.cpu.op_math.MATH` (its compute) ------------
for _name, _math in MATH.items():
    GRAPH_OPS[_name] = _math.compute


@GRAPH_OPS.op("cast")
def cast(x: np.ndarray, *, to: str) -> np.ndarray:
    """``x`` converted to element type ``to`` (float -> int truncates toward zero)."""
    from pytfrt.tensor.dtype import dtype_from_name

    target = np.dtype(dtype_from_name(to).np_dtype)
    if x.dtype.kind == "f" and target.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(target)
    return x.astype(target)


# -- reductions ---------------------------------------------------------------------------------
def _axes(axes: tuple[int, ...]) -> tuple[int, ...] | None:
    return tuple(axes) if axes else None


_ROW_BLOCK = 1024
"""Elements per row of the blocked view :func:`_leading_sum` reduces down its columns."""


def _leading_sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray | None:
    """The sum of a C-contiguous float32/float64 ``x`` over its leading axes ``0..k-1`` (the
    batch-norm statistics of an NHWC tensor: axes 0, 1, 2) or over ``1..k`` (a global
    average pool: axes 1, 2, the batch kept) with fewer than :data:`_ROW_BLOCK` kept trailing
    elements ``K``, or ``None`` for other reductions.  NumPy sums such an ``(M, K)`` view down
    its short rows at a quarter of its speed on long ones; so the rows are regrouped ``B`` at
    a time into rows of ``B * K`` elements, summed down (each lane accumulating ``M / B``
    values: no less accurate than the plain sum), and the ``B`` partial rows and the
    ``M mod B`` left over are added last (per batch item when the batch axis is kept)."""
    if (x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous or not axes
            or x.size < 4 * _ROW_BLOCK):
        return None
    k = len(axes)
    first = sorted(a % x.ndim for a in axes)[0]
    if sorted(a % x.ndim for a in axes) != list(range(first, first + k)) or first > 1 or (
            first + k >= x.ndim):
        return None
    kept = x.shape[first + k:]
    width = math.prod(kept)
    if width >= _ROW_BLOCK or width == 0:
        return None
    batch = x.shape[0] if first else 1
    rows = x.size // width // max(batch, 1)
    b = _ROW_BLOCK // width
    whole = rows // b * b
    flat = x.reshape(batch, rows, width)
    total = np.add.reduce(flat[:, :whole].reshape(batch, -1, b * width), axis=1)
    out = (np.add.reduce(total.reshape(batch, b, width), axis=1)
           + np.add.reduce(flat[:, whole:], axis=1))
    lead = x.shape[:first] + (1,) * k if keepdims else x.shape[:first]
    return out.reshape(lead + kept)


@GRAPH_OPS.op("reduce_sum")
def reduce_sum(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Sum over ``axes`` (all if empty), in the operand's element type: float16/bfloat16
    accumulate in float32 (as TF), integers wrap around in their type.  The one reduce_sum
    (eager's ``tfrt_test.reduce_sum`` runs it too)."""
    fast = _leading_sum(x, axes, keepdims)
    if fast is not None:
        return fast
    acc = _F32 if x.dtype.itemsize < 4 and x.dtype.kind in "fV" else x.dtype
    return _arr(np.sum(x, axis=_axes(axes), keepdims=keepdims, dtype=acc), x.dtype)


@GRAPH_OPS.op("reduce_prod")
def reduce_prod(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Product over ``axes``."""
    return _arr(np.prod(x, axis=_axes(axes), keepdims=keepdims, dtype=x.dtype), x.dtype)


@GRAPH_OPS.op("reduce_mean")
def reduce_mean(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Mean over ``axes``, accumulated in float32 (float64 for float64 and integers; integer
    results truncated toward zero).  The one reduce_mean (eager's runs it too)."""
    fast = _leading_sum(x, axes, keepdims)
    if fast is not None:
        return _arr(fast / x.dtype.type(x.size // max(fast.size, 1)), x.dtype)
    acc = np.float64 if x.dtype.kind in "iu" or x.dtype == np.float64 else np.float32
    m = np.mean(x, axis=_axes(axes), keepdims=keepdims, dtype=acc)
    if x.dtype.kind in "iu":
        m = np.trunc(m)
    return _arr(m, x.dtype)


def _minmax(fn: Any, name: str) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        ax = _axes(axes)
        if x.size == 0:
            raise OpError(f"{name}: cannot reduce an empty tensor")
        return _arr(fn(x, axis=ax, keepdims=keepdims), x.dtype)

    compute.__name__ = name
    return compute


GRAPH_OPS["reduce_max"] = _minmax(np.max, "reduce_max")
GRAPH_OPS["reduce_min"] = _minmax(np.min, "reduce_min")


@GRAPH_OPS.op("reduce_any")
def reduce_any(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Logical or over ``axes``."""
    return _arr(np.any(x, axis=_axes(axes), keepdims=keepdims), np.bool_)


@GRAPH_OPS.op("reduce_all")
def reduce_all(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Logical and over ``axes``."""
    return _arr(np.all(x, axis=_axes(axes), keepdims=keepdims), np.bool_)


def _arg(fn: Any, name: str) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray, *, axis: int, keepdims: bool, output_type: str) -> np.ndarray:
        if x.shape[axis] == 0:
            raise OpError(f"{name}: the reduced dimension is empty")
        out = fn(x, axis=axis, keepdims=keepdims)
        return _arr(out, np.int32 if output_type == "i32" else np.int64)

    compute.__name__ = name
    return compute


GRAPH_OPS["argmax"] = _arg(np.argmax, "argmax")
GRAPH_OPS["argmin"] = _arg(np.argmin, "argmin")


@GRAPH_OPS.op("cumsum")
def cumsum(x: np.ndarray, *, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """Cumulative sum along ``axis`` (TF's ``exclusive``/``reverse``)."""
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        c = np.roll(c, 1, axis=axis)
        idx = [slice(None)] * x.ndim
        idx[axis % max(x.ndim, 1)] = slice(0, 1)
        c[tuple(idx)] = 0
    if reverse:
        c = np.flip(c, axis)
    return np.ascontiguousarray(c)
