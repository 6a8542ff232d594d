"""Softmax and its gradient along the last axis of float32 rows, as compiled loops.

NumPy's softmax is five passes with temporaries, and its reductions along a short last axis
are slow: an attention's scores ``[batch, heads, 16, 16]`` spend ~130 us in ``np.max`` and
~50 us in ``np.sum`` of 16-wide rows, against ~10 us for one compiled pass per row.  Here:

* :func:`softmax_last` -- ``exp(x - max) / sum(exp(x - max))`` per row (the shift and the
  normalisation compiled, the sum in float64; the ``exp`` is NumPy's vectorised one over the
  whole array); the ``tg.softmax`` kernel's path for C-contiguous float32 along the last axis;
* :func:`softmax_grad_last` -- ``(dy - sum(dy * y)) * y`` per row (the dot in float64), the
  gradient of a softmax through its output ``y``: the ``softmax_grad`` kernel's path.

Both return ``None`` when the operands do not fit (the caller then runs NumPy).  They write
only their result (or ``out``); thread-safe (no GIL held in the loops).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _shift_rows(x: np.ndarray, y: np.ndarray) -> None:  # pragma: no cover - compiled
    """``y = x - max(x)`` per row."""
    rows, n = x.shape
    for r in range(rows):
        mx = x[r, 0]
        for j in range(1, n):
            if x[r, j] > mx:
                mx = x[r, j]
        for j in range(n):
            y[r, j] = x[r, j] - mx


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _normalize_rows(y: np.ndarray) -> None:  # pragma: no cover - compiled
    """``y /= sum(y)`` per row (the sum in float64)."""
    rows, n = y.shape
    for r in range(rows):
        total = 0.0
        for j in range(n):
            total += y[r, j]
        inv = np.float32(1.0 / total)
        for j in range(n):
            y[r, j] *= inv


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _softmax_grad_rows(y: np.ndarray, dy: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    rows, n = y.shape
    for r in range(rows):
        dot = 0.0
        for j in range(n):
            dot += np.float64(dy[r, j]) * np.float64(y[r, j])
        d = np.float32(dot)
        for j in range(n):
            out[r, j] = (dy[r, j] - d) * y[r, j]


def _rows(x: np.ndarray, axis: int) -> np.ndarray | None:
    """``x`` as ``[rows, last]`` when it is C-contiguous float32 and ``axis`` is its last."""
    if (not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim == 0 or x.size == 0
            or axis % x.ndim != x.ndim - 1 or not x.flags.c_contiguous):
        return None
    return x.reshape(-1, x.shape[-1])


def softmax_last(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray | None:
    """Softmax of ``x`` along ``axis`` if it is the last of a C-contiguous float32 ``x`` (into
    ``out`` if given: C-contiguous float32 of ``x``'s shape), else ``None``."""
    rows = _rows(x, axis)
    if rows is None or (out is not None and (out.dtype != np.float32 or out.shape != x.shape
                                             or not out.flags.c_contiguous)):
        return None
    y = np.empty_like(x) if out is None else out
    y2 = y.reshape(rows.shape)
    _shift_rows(rows, y2)
    np.exp(y2, out=y2)  # NumPy's vectorised exp (a compiled loop calls the scalar one)
    _normalize_rows(y2)
    return y


def softmax_grad_last(y: np.ndarray, dy: np.ndarray, axis: int) -> np.ndarray | None:
    """``(dy - sum(dy * y, axis)) * y`` if ``axis`` is the last of C-contiguous float32 ``y``
    and ``dy`` of one shape, else ``None``."""
    rows = _rows(y, axis)
    if rows is None or _rows(dy, axis) is None or dy.shape != y.shape:
        return None
    out = np.empty_like(y)
    _softmax_grad_rows(rows, dy.reshape(rows.shape), out.reshape(rows.shape))
    return out
