"""Depthwise convolution (``groups == cin``) with the fused epilogue, compiled with Numba.

Private helper of :mod:`pytfrt.backends.cpu.conv`.  Direct loops over the window, vectorised
along the channels: NHWC arrays keep channels contiguous, which is what MobileNet-style
networks run on; NCHW operands arrive as NHWC *views* (slower, strided loads).  Each output
pixel's channel vector is accumulated in a small buffer, then written once with bias,
residual and activation applied.  Thread-safety: writes only ``y``.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._epilogue import _act
from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu._parallel import chunks, parallel_for


@numba.njit(nogil=True, cache=True)
def depthwise_nhwc(x, w, sh, sw, dh, dw, pt, pl, bias, res, act, alpha, y, r0, r1):  # type: ignore[no-untyped-def]
    """``y[n, a, b, c*m + q] = act(sum_ij x[n, a*sh + i*dh - pt, b*sw + j*dw - pl, c] *
    w[i, j, c*m + q] + bias + res)``; ``x`` (N, H, W, C), ``w`` (kh, kw, C*m), ``y`` (N, OH,
    OW, C*m); ``bias`` (C*m,) or empty; ``res`` like ``y`` or empty.  Only the flattened
    output rows ``r0 <= n * OH + a < r1`` are computed, one output row at a time in a
    ``(OW, C*m)`` accumulator so the channel loops are contiguous (vectorised)."""
    n_, h, wd, c = x.shape
    kh, kw, k = w.shape
    _, oh, ow, _ = y.shape
    mult = k // c
    has_bias = bias.shape[0] > 0
    has_res = res.shape[0] > 0
    acc = np.empty((ow, k), dtype=y.dtype)
    for row in range(r0, r1):
        n = row // oh
        a = row % oh
        for b in range(ow):
            for q in range(k):
                acc[b, q] = bias[q] if has_bias else 0.0
        for i in range(kh):
            r = a * sh + i * dh - pt
            if r < 0 or r >= h:
                continue
            for j in range(kw):
                wv = w[i, j]
                # Output columns whose tap (i, j) falls inside the input row.
                b_lo = 0
                while b_lo < ow and b_lo * sw + j * dw - pl < 0:
                    b_lo += 1
                b_hi = ow
                while b_hi > b_lo and (b_hi - 1) * sw + j * dw - pl >= wd:
                    b_hi -= 1
                for b in range(b_lo, b_hi):
                    col = b * sw + j * dw - pl
                    xr = x[n, r, col]
                    ar = acc[b]
                    if mult == 1:
                        for ch in range(k):
                            ar[ch] += xr[ch] * wv[ch]
                    else:
                        for ch in range(c):
                            for q in range(mult):
                                ar[ch * mult + q] += xr[ch] * wv[ch * mult + q]
        # The epilogue is inline on purpose (as in _winograd): a shared njit helper measured
        # up to 13x slower with relu (LLVM no longer vectorises the loop).
        for b in range(ow):
            for q in range(k):
                v = acc[b, q]
                if has_res:
                    v += res[n, a, b, q]
                if act == 1:
                    v = max(v, 0.0)
                elif act != 0:
                    v = _act(v, act, alpha)
                y[n, a, b, q] = v


def depthwise(
    x: np.ndarray,
    w: np.ndarray,
    geo: tuple[int, ...],
    bias: np.ndarray | None,
    res: np.ndarray | None,
    code: int,
    alpha: float,
    y: np.ndarray,
) -> None:
    """Run :func:`depthwise_nhwc` with ``geo = (kh, kw, sh, sw, dh, dw, pt, pb, pl, pr)``."""
    _, _, sh, sw, dh, dw, pt, _, pl, _ = geo
    b = bias if bias is not None else np.empty(0, dtype=y.dtype)
    r = res if res is not None else np.empty((0, 0, 0, 0), dtype=y.dtype)
    rows = y.shape[0] * y.shape[1]
    shards = chunks(rows, max(1, 256 // y.shape[2]))

    def shard(i: int) -> None:
        depthwise_nhwc(x, w, sh, sw, dh, dw, pt, pl, b, r, code, float(alpha), y, *shards[i])

    parallel_for(shard, len(shards))
