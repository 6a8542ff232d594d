"""The compiled loop of ``softmax_grad`` along the last axis of float32 rows (see
:mod:`pytfrt.backends.cpu.softmax_rows`).  Writes only ``out``; no GIL held."""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._jit import numba


@numba.njit(nogil=True, cache=True, error_model="numpy")
def softmax_grad_rows(y: np.ndarray, dy: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    """``out = (dy - sum(dy * y)) * y`` per row (the dot in float64)."""
    rows, n = y.shape
    for r in range(rows):
        dot = 0.0
        for j in range(n):
            dot += np.float64(dy[r, j]) * np.float64(y[r, j])
        d = np.float32(dot)
        for j in range(n):
            out[r, j] = (dy[r, j] - d) * y[r, j]
