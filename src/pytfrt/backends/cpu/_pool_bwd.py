"""Max-pooling backward as one compiled pass: the fast path of
:func:`pytfrt.backends.cpu.pooling.max_pool2d_grad` for NHWC float32/float64 tensors.

Each output gradient goes to the first window tap (rows outer, columns inner, as the NumPy
path's tap loop) whose input equals the pooled value; a tap in the padding counts as the
lowest value (``-inf``) and takes the gradient away (dropped) only if the pooled value is
``-inf`` too -- the same routing as the NumPy path, which pads with ``-inf``.  One pass over the
output per batch row, channels vectorised (a per-row "taken" mask instead of a branch per
channel); batch rows are split over the CPU kernels' helper threads
(:func:`pytfrt.backends.cpu._parallel.parallel_for`).  Thread-safety: a pure function (writes a
new array).
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu._parallel import chunks, parallel_for


@numba.njit(nogil=True, cache=True)
def _rows(x, y, dy, dx, geom, n0, n1):  # type: ignore[no-untyped-def]  # pragma: no cover
    kh, kw, sh, sw, dh, dw, pt, pl = (geom[0], geom[1], geom[2], geom[3], geom[4], geom[5],
                                      geom[6], geom[7])
    h_in, w_in, c_n = x.shape[1], x.shape[2], x.shape[3]
    taken = np.empty(c_n, np.bool_)
    zero = dx.dtype.type(0)
    for n in range(n0, n1):
        dx[n] = 0  # this shard's rows (the page faults of a new array taken on this thread)
        for oh in range(y.shape[1]):
            for ow in range(y.shape[2]):
                taken[:] = False
                for i in range(kh):
                    h = oh * sh - pt + i * dh
                    for j in range(kw):
                        w = ow * sw - pl + j * dw
                        if h < 0 or h >= h_in or w < 0 or w >= w_in:
                            for c in range(c_n):  # padding: -inf, drops a -inf maximum's share
                                if y[n, oh, ow, c] == -np.inf:
                                    taken[c] = True
                            continue
                        # branch-free (bitwise, selects): LLVM vectorises the channel loop
                        for c in range(c_n):
                            hit = (x[n, h, w, c] == y[n, oh, ow, c]) & ~taken[c]
                            dx[n, h, w, c] += dy[n, oh, ow, c] if hit else zero
                            taken[c] = taken[c] | hit


def max_pool2d_grad_nhwc(x: np.ndarray, y: np.ndarray, dy: np.ndarray,
                         geom: tuple[int, int, int, int, int, int, int, int]) -> np.ndarray | None:
    """``dx`` of a max pool over NHWC ``x`` with output ``y`` (``geom`` = ``kh, kw, sh, sw, dh,
    dw, pad_top, pad_left``), or ``None`` for operands this path does not take (the caller
    runs NumPy): dtypes other than float32/float64 or mixed."""
    if x.dtype not in (np.float32, np.float64) or y.dtype != x.dtype or dy.dtype != x.dtype:
        return None
    xc, yc, dyc = (np.ascontiguousarray(a) for a in (x, y, dy))
    dx = np.empty_like(xc)  # zeroed by each shard
    g = np.asarray(geom, np.int64)
    parts = chunks(x.shape[0], 1)
    parallel_for(lambda i: _rows(xc, yc, dyc, dx, g, parts[i][0], parts[i][1]), len(parts))
    return dx
