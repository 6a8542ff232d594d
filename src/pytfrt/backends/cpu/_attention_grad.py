"""The compiled loops of a train step's attention (:mod:`pytfrt.backends.cpu.grad_ops`):
``attention_probs`` (the forward, keeping the softmax for the backward) and ``attention_grad``
(scaled dot-product attention's backward), one head at a time, reading and writing the heads
where the projections keep them (``[batch, seq, heads, depth]``: no transposes).  Each writes
only its result arrays; no GIL held.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.backends.cpu._jit import numba


@numba.njit(nogil=True, fastmath=True)
def _row_max(row: Any) -> Any:  # pragma: no cover - compiled
    """The largest element of a float32 row: eight running maxima (a single one is a chain of
    dependent ``max`` instructions, which LLVM does not vectorise)."""
    n = row.shape[0]
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = row[0]
    n8 = n - n % 8
    for j in range(0, n8, 8):
        a0, a1, a2, a3 = max(a0, row[j]), max(a1, row[j + 1]), max(a2, row[j + 2]), max(
            a3, row[j + 3])
        a4, a5, a6, a7 = max(a4, row[j + 4]), max(a5, row[j + 5]), max(a6, row[j + 6]), max(
            a7, row[j + 7])
    mx = max(max(max(a0, a1), max(a2, a3)), max(max(a4, a5), max(a6, a7)))
    for j in range(n8, n):
        mx = max(mx, row[j])
    return mx


@numba.njit(nogil=True, fastmath=True)
def _exp_parts(row: Any, mx: Any, mant: Any, bits: Any) -> None:  # pragma: no cover - compiled
    """``exp(row[j] - mx) = mant[j] * 2^n[j]`` for ``row[j] <= mx``: range reduction
    (``n = round(x / ln 2)``) and a degree-6 polynomial for ``mant``, and ``2^n`` as the
    float32 bit pattern ``(127 + n) << 23`` in ``bits`` -- straight-line integer and float
    arithmetic the loop vectoriser takes (a libm call or a table lookup it cannot).  Relative
    error within about 2e-7.  ``x`` is clamped at -80 (``n >= -116``: never a subnormal);
    :func:`_scale_sum` zeroes what lies below."""
    for j in range(row.shape[0]):
        x = max(row[j] - mx, np.float32(-80.0))
        ni = np.int32(np.float32(0.5) - x * np.float32(1.4426950408889634))  # -round(x/ln 2)
        n = -np.float32(ni)
        r = x - n * np.float32(0.693145751953125)
        r = r - n * np.float32(1.428606765330187e-06)
        p = np.float32(1.0 / 720.0)
        p = p * r + np.float32(1.0 / 120.0)
        p = p * r + np.float32(1.0 / 24.0)
        p = p * r + np.float32(1.0 / 6.0)
        p = p * r + np.float32(0.5)
        p = p * r + np.float32(1.0)
        p = p * r + np.float32(1.0)
        bits[j] = (np.int32(127) - ni) << np.int32(23)
        mant[j] = p


@numba.njit(nogil=True, fastmath=True)
def _scale_sum(row: Any, mx: Any, mant: Any, pow2: Any) -> Any:  # pragma: no cover - compiled
    """``row[j] = mant[j] * pow2[j]`` (0 where ``row[j] - mx < -80``: never a subnormal,
    which costs a microcode assist in this loop and in every GEMM that reads it -- a causal
    mask's entries are ``-3.4e38``); returns the row's sum."""
    total = np.float32(0.0)
    for j in range(row.shape[0]):
        e = mant[j] * pow2[j] if row[j] - mx >= np.float32(-80.0) else np.float32(0.0)
        row[j] = e
        total += e
    return total


@numba.njit(nogil=True, fastmath=True)
def _softmax_rows(s: Any, sq: int, sk: int, mant: Any,
                  bits: Any) -> None:  # pragma: no cover - compiled
    """Row-wise softmax of the scores ``s`` (``sq`` rows of ``sk``) in place; ``mant`` and
    ``bits`` are ``sk``-long float32 / int32 scratch rows."""
    pow2 = bits.view(np.float32)
    for i in range(sq):
        row = s[i * sk:(i + 1) * sk]
        mx = _row_max(row)
        _exp_parts(row, mx, mant, bits)
        inv = np.float32(1.0) / _scale_sum(row, mx, mant, pow2)
        for j in range(sk):
            row[j] *= inv


@numba.njit(nogil=True, cache=True)
def _head(x: np.ndarray, b: int, h: int, out: np.ndarray,  # pragma: no cover
          transposed: bool) -> None:
    """Head ``h`` of batch item ``b`` of ``x [B, S, H, D]`` into the contiguous ``out``:
    ``[S, D]``, or ``[D, S]`` if ``transposed``."""
    for j in range(x.shape[1]):
        for d in range(x.shape[3]):
            if transposed:
                out[d, j] = x[b, j, h, d]
            else:
                out[j, d] = x[b, j, h, d]


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
        _head(k, b, h, kk, False)
        _head(k, b, h, kt, True)
        _head(v, b, h, vt, True)
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


@numba.njit(nogil=True, cache=True, error_model="numpy")
def attention_probs_heads(q: np.ndarray, k: np.ndarray, v: np.ndarray,  # pragma: no cover
                          scale: float, y: np.ndarray, p: np.ndarray, lo: int, hi: int) -> None:
    """Heads ``lo..hi-1`` of ``p = softmax(scale * Q K^T)`` (``[B, H, Sq, Sk]``) and ``y = p V``
    (``[B, Sq, H, Dv]``) for ``q`` ``[B, Sq, H, D]``, ``k`` ``[B, Sk, H, D]``, ``v``
    ``[B, Sk, H, Dv]``; the softmax rows by :func:`_softmax_rows` (the algorithm of
    ``tg.attention``'s C row softmax, :mod:`pytfrt.backends.cpu._softmax_native`)."""
    sq, heads, depth = q.shape[1], q.shape[2], q.shape[3]
    sk, dv = k.shape[1], v.shape[3]
    s32 = np.float32(scale)
    kt = np.empty((depth, sk), np.float32)
    vv = np.empty((sk, dv), np.float32)
    s = np.empty(sq * sk, np.float32)
    mant, bits = np.empty(sk, np.float32), np.empty(sk, np.int32)
    acc = np.empty(dv, np.float32)
    for bh in range(lo, hi):
        b = bh // heads
        h = bh - b * heads
        _head(k, b, h, kt, True)
        _head(v, b, h, vv, False)
        for i in range(sq):
            row = s[i * sk:(i + 1) * sk]
            row[:] = 0.0
            for d in range(depth):
                qd = q[b, i, h, d]
                for j in range(sk):
                    row[j] += qd * kt[d, j]
            for j in range(sk):
                row[j] *= s32
        _softmax_rows(s, sq, sk, mant, bits)
        for i in range(sq):
            acc[:] = 0.0
            for j in range(sk):
                pj = s[i * sk + j]
                p[b, h, i, j] = pj
                for d in range(dv):
                    acc[d] += pj * vv[j, d]
            for d in range(dv):
                y[b, i, h, d] = acc[d]
