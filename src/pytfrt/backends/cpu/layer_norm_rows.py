"""The gradient of a layer norm along the last axis of float32 rows, as one pass over them.

:func:`layer_norm_grad_last` is the ``layer_norm_grad`` kernel's path for float32 operands
normalised along their last axis (what ``-tg-fuse-layer-norm-grad`` makes of Keras'
``LayerNormalization`` gradient, and what differentiating ``tg.layer_norm`` emits): one
compiled loop (:mod:`pytfrt.backends.cpu._layer_norm_grad`, loaded on first use) computing
each row's statistics, ``dx`` and the column sums of ``dgamma``/``dbeta``, in float64 as the
NumPy kernel does.  Returns ``None`` when the operands do not fit (the caller then runs
NumPy).  Writes only its results; thread-safe.
"""

from __future__ import annotations

import numpy as np


def layer_norm_grad_last(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, axis: int,
                         epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(dx, dgamma, dbeta)`` if ``axis`` is the last of float32 ``x`` and ``dy`` of one
    shape and ``gamma`` holds the row's width of float32 values (any shape), else ``None``."""
    if (not all(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in (dy, x, gamma))
            or x.ndim == 0 or x.size == 0 or dy.shape != x.shape
            or axis % x.ndim != x.ndim - 1 or gamma.size != x.shape[-1]):
        return None
    from pytfrt.backends.cpu._layer_norm_grad import layer_norm_grad_rows

    n = x.shape[-1]
    rows = x.size // n
    dx = np.empty(x.shape, np.float32)
    dgamma = np.empty(gamma.shape, np.float32)
    dbeta = np.empty(gamma.shape, np.float32)
    layer_norm_grad_rows(np.ascontiguousarray(dy).reshape(rows, n),
                         np.ascontiguousarray(x).reshape(rows, n),
                         np.ascontiguousarray(gamma).reshape(n), float(epsilon),
                         dx.reshape(rows, n), dgamma.reshape(n), dbeta.reshape(n))
    return dx, dgamma, dbeta
