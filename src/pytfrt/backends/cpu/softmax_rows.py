"""Softmax and its gradient along a short last axis of float32 rows.

NumPy's reductions along a short last axis are slow: an attention's scores ``[batch, heads,
16, 16]`` spend ~130 us in ``np.max`` and ~50 us in ``np.sum`` of 16-wide rows, where the
same reductions over the leading axis of the transposed ``[16, rows]`` copy are vectorised
(~14 us for the max).  Here:

* :func:`softmax_last` -- ``exp(x - max) / sum(exp(x - max))`` for rows of at most
  :data:`SHORT_ROW` elements, computed on the transposed copy (max, shift, ``exp``, sum and
  scale all vectorised over the rows); NumPy only, so a saved model that does not train never
  loads Numba for it.  The ``tg.softmax`` kernel's path for C-contiguous float32 along the
  last axis (longer rows keep :func:`pytfrt.backends.cpu.norm.softmax`);
* :func:`softmax_grad_last` -- ``(dy - sum(dy * y)) * y`` per row (the dot in float64), the
  gradient of a softmax through its output ``y``, one compiled pass per row
  (:mod:`pytfrt.backends.cpu._softmax_grad`, loaded on first use): the ``softmax_grad``
  kernel's path.

Both return ``None`` when the operands do not fit (the caller then runs NumPy).  They write
only their result (or ``out``); thread-safe.
"""

from __future__ import annotations

import numpy as np

SHORT_ROW = 64
"""Rows up to this long take :func:`softmax_last`'s transposed path (a longer row's own
reductions are vectorised, and the leading-axis sum adds sequentially)."""


def _rows(x: np.ndarray, axis: int) -> np.ndarray | None:
    """``x`` as ``[rows, last]`` when it is C-contiguous float32 and ``axis`` is its last."""
    if (not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim == 0 or x.size == 0
            or axis % x.ndim != x.ndim - 1 or not x.flags.c_contiguous):
        return None
    return x.reshape(-1, x.shape[-1])


def softmax_last(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray | None:
    """Softmax of ``x`` along ``axis`` if it is the last, at most :data:`SHORT_ROW` long, of a
    C-contiguous float32 ``x`` (into ``out`` if given: a C-contiguous float32 array of
    ``x``'s shape, ``x`` itself allowed), else ``None``."""
    rows = _rows(x, axis)
    if (rows is None or rows.shape[1] > SHORT_ROW
            or (out is not None and (out.dtype != np.float32 or out.shape != x.shape
                                     or not out.flags.c_contiguous))):
        return None
    t = np.array(rows.T, order="C")  # a copy [n, rows] (never x): reductions run along rows
    t -= t.max(axis=0)
    np.exp(t, out=t)
    t /= t.sum(axis=0)
    if out is None:
        return np.ascontiguousarray(t.T).reshape(x.shape)
    out.reshape(rows.shape)[...] = t.T
    return out


def softmax_grad_last(y: np.ndarray, dy: np.ndarray, axis: int) -> np.ndarray | None:
    """``(dy - sum(dy * y, axis)) * y`` if ``axis`` is the last of C-contiguous float32 ``y``
    and ``dy`` of one shape, else ``None``."""
    rows = _rows(y, axis)
    if rows is None or _rows(dy, axis) is None or dy.shape != y.shape:
        return None
    from pytfrt.backends.cpu._softmax_grad import softmax_grad_rows

    out = np.empty_like(y)
    softmax_grad_rows(rows, dy.reshape(rows.shape), out.reshape(rows.shape))
    return out
