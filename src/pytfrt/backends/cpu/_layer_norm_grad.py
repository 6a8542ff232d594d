"""The compiled loop of ``layer_norm_grad`` along the last axis of float32 rows (see
:mod:`pytfrt.backends.cpu.layer_norm_rows`).  Writes only its output arrays; no GIL held.

The row sums may be reassociated (``fastmath`` ``reassoc``/``contract``, no other flag: NaN
and infinities still propagate), so they vectorise: 63 -> 21 us for 256 rows of 32.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._jit import numba


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def layer_norm_grad_rows(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, epsilon: float,
                         dx: np.ndarray, dgamma: np.ndarray,
                         dbeta: np.ndarray) -> None:  # pragma: no cover
    """Per row of ``[rows, n]`` (all in float64): ``xhat = (x - mean) / sqrt(var + epsilon)``,
    ``g = dy * gamma``, ``dx = (g - mean(g) - xhat * mean(g * xhat)) / sqrt(var + epsilon)``;
    ``dgamma``/``dbeta`` (length ``n``) the column sums of ``dy * xhat`` and ``dy``."""
    rows, n = x.shape
    sg = np.zeros(n, np.float64)
    sb = np.zeros(n, np.float64)
    xh = np.empty(n, np.float64)
    for r in range(rows):
        mu = 0.0
        for j in range(n):
            mu += x[r, j]
        mu /= n
        var = 0.0
        for j in range(n):
            d = x[r, j] - mu
            var += d * d
        inv = 1.0 / np.sqrt(var / n + epsilon)
        s1 = 0.0
        s2 = 0.0
        for j in range(n):
            xh[j] = (x[r, j] - mu) * inv
            g = np.float64(dy[r, j]) * gamma[j]
            s1 += g
            s2 += g * xh[j]
            sg[j] += dy[r, j] * xh[j]
            sb[j] += dy[r, j]
        s1 /= n
        s2 /= n
        for j in range(n):
            dx[r, j] = inv * (np.float64(dy[r, j]) * gamma[j] - s1 - xh[j] * s2)
    for j in range(n):
        dgamma[j] = sg[j]
        dbeta[j] = sb[j]
