"""The compiled loop of ``attention_grad`` (:mod:`pytfrt.backends.cpu.grad_ops`): scaled
dot-product attention's backward, one head at a time, reading and writing the heads where the
projections keep them (``[batch, seq, heads, depth]``: no transposes).  Writes only ``dq``,
``dk``, ``dv``; no GIL held.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._jit import numba


@numba.njit(nogil=True, cache=True, error_model="numpy")
def attention_grad_heads(q: np.ndarray, k: np.ndarray, v: np.ndarray, p: np.ndarray,
                         dy: np.ndarray, scale: float, dq: np.ndarray, dk: np.ndarray,
                         dv: np.ndarray, lo: int, hi: int) -> None:  # pragma: no cover
    """Heads ``lo..hi-1`` (flat ``batch * heads + head``) of the gradient of
    ``o = softmax(scale * Q K^T) V`` (``p`` the softmax) for ``q``/``dy`` ``[B, Sq, H, D]``,
    ``k``/``v`` ``[B, Sk, H, D]``, ``p`` ``[B, H, Sq, Sk]``:
    ``dv = p^T dy``, ``ds = scale * (dp - rowsum(dp * p)) * p`` with ``dp = dy V^T`` (the row
    sums in float64), ``dq = ds K``, ``dk = ds^T Q``."""
    sq, heads, depth = q.shape[1], q.shape[2], q.shape[3]
    sk = k.shape[1]
    s32 = np.float32(scale)
    # per head: K and V transposed ([depth, sk]) and K's rows, contiguous; dK^T and dV^T
    # accumulated as [depth, sk] so every inner loop runs along a contiguous row of sk
    kt = np.empty((depth, sk), np.float32)
    vt = np.empty((depth, sk), np.float32)
    kk = np.empty((sk, depth), np.float32)
    ds = np.empty(sk, np.float32)
    acc_q = np.empty(depth, np.float32)
    acc_kt = np.empty((depth, sk), np.float32)
    acc_vt = np.empty((depth, sk), np.float32)
    for bh in range(lo, hi):
        b = bh // heads
        h = bh - b * heads
        for j in range(sk):
            for d in range(depth):
                kk[j, d] = k[b, j, h, d]
                kt[d, j] = kk[j, d]
                vt[d, j] = v[b, j, h, d]
        acc_kt[:, :] = 0.0
        acc_vt[:, :] = 0.0
        for i in range(sq):
            prow = p[b, h, i]
            ds[:] = 0.0
            for d in range(depth):
                g = dy[b, i, h, d]
                for j in range(sk):
                    ds[j] += g * vt[d, j]
                for j in range(sk):
                    acc_vt[d, j] += g * prow[j]
            dot = 0.0
            for j in range(sk):
                dot += np.float64(ds[j]) * np.float64(prow[j])
            d32 = np.float32(dot)
            for j in range(sk):
                ds[j] = (ds[j] - d32) * prow[j] * s32
            for d in range(depth):
                qd = q[b, i, h, d]
                for j in range(sk):
                    acc_kt[d, j] += qd * ds[j]
            acc_q[:] = 0.0
            for j in range(sk):
                sj = ds[j]
                for d in range(depth):
                    acc_q[d] += sj * kk[j, d]
            for d in range(depth):
                dq[b, i, h, d] = acc_q[d]
        for j in range(sk):
            for d in range(depth):
                dk[b, j, h, d] = acc_kt[d, j]
                dv[b, j, h, d] = acc_vt[d, j]
