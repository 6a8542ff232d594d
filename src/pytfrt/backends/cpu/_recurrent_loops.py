"""The compiled loops of the ``tg.recurrent`` kernel (:mod:`.recurrent`): Numba, no NumPy calls.

One function per cell runs the recurrence of one direction over every time step, batch row
and gate: the gates are the precomputed input projection (``xw``, biases folded) plus the
recurrent product accumulated in float64 from ``rt`` (``R`` transposed, ``[H, G*H]``
contiguous), then the activations (switching on :data:`.recurrent.ACT_CODES`) update the
state in place and write ``y[t]``.  Imported lazily by :mod:`.recurrent` (importing it imports
Numba); compiled on first use and cached on disk (``cache=True``).  The functions write only
``h``, ``c`` and ``y``: thread-safe for distinct arrays.
"""

from __future__ import annotations

import math

import numba
import numpy as np

_jit = numba.njit(cache=True, nogil=True)


@_jit
def act(code: int, v: float, alpha: float, beta: float) -> float:
    if code == 0:
        return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))
    if code == 1:
        return math.tanh(v)
    if code == 2:
        return v if v > 0 else 0.0
    if code == 3:
        return alpha * v + beta
    if code == 4:
        return v if v >= 0 else alpha * v
    if code == 5:
        return v if v > alpha else 0.0
    if code == 6:
        return alpha * math.tanh(beta * v)
    if code == 7:
        return min(max(alpha * v + beta, 0.0), 1.0)
    if code == 8:
        return v if v >= 0 else alpha * (math.exp(v) - 1.0)
    if code == 9:
        return v / (1.0 + abs(v))
    return max(v, 0.0) + math.log1p(math.exp(-abs(v)))


@_jit
def clipped(v: float, clip: float) -> float:
    if clip > 0:
        return min(max(v, -clip), clip)
    return v


@_jit
def project(acc, xw, t, b, h, rt):  # type: ignore[no-untyped-def]
    """``acc = xw[t, b] + h[b] @ rt`` (the gates' pre-activations of batch row ``b``)."""
    width = acc.shape[0]
    for j in range(width):
        acc[j] = xw[t, b, j]
    for k in range(h.shape[1]):
        hk = h[b, k]
        for j in range(width):
            acc[j] += hk * rt[k, j]


@_jit
def lstm(xw, rt, h, c, p, codes, alphas, betas, clip, input_forget, reverse, y):  # type: ignore[no-untyped-def]
    steps, batch, g4 = xw.shape
    hid = g4 // 4
    gates = np.empty(g4, np.float64)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            project(gates, xw, t, b, h, rt)
            for j in range(hid):
                cp = c[b, j]
                gi = gates[j]
                go = gates[hid + j]
                gf = gates[2 * hid + j]
                gc = gates[3 * hid + j]
                if p.shape[0] > 0:
                    gi += p[j] * cp
                    gf += p[2 * hid + j] * cp
                i = act(codes[0], clipped(gi, clip), alphas[0], betas[0])
                if input_forget:
                    f = 1.0 - i
                else:
                    f = act(codes[0], clipped(gf, clip), alphas[0], betas[0])
                cn = f * cp + i * act(codes[1], clipped(gc, clip), alphas[1], betas[1])
                if p.shape[0] > 0:
                    go += p[hid + j] * cn
                o = act(codes[0], clipped(go, clip), alphas[0], betas[0])
                c[b, j] = cn
                hn = o * act(codes[2], cn, alphas[2], betas[2])
                gates[3 * hid + j] = hn  # gate c of column j is read: the slot is free
            for j in range(hid):
                h[b, j] = gates[3 * hid + j]
                y[t, b, j] = h[b, j]


@_jit
def gru(xw, rt, rbh, h, codes, alphas, betas, clip, lbr, reverse, y):  # type: ignore[no-untyped-def]
    steps, batch, g3 = xw.shape
    hid = g3 // 3
    acc = np.empty(g3, np.float64)
    zr = np.empty(2 * hid, np.float64)
    rh = np.empty(hid, np.float64)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            for j in range(g3):
                acc[j] = 0.0
            if lbr:
                for k in range(hid):
                    hk = h[b, k]
                    for j in range(g3):
                        acc[j] += hk * rt[k, j]
            else:
                for k in range(hid):
                    hk = h[b, k]
                    for j in range(2 * hid):
                        acc[j] += hk * rt[k, j]
            for j in range(2 * hid):
                zr[j] = act(codes[0], clipped(xw[t, b, j] + acc[j], clip), alphas[0],
                            betas[0])
            if lbr:
                for j in range(hid):
                    rh[j] = zr[hid + j] * (acc[2 * hid + j] + rbh[j])
            else:
                for j in range(hid):
                    rh[j] = 0.0
                for k in range(hid):
                    rk = zr[hid + k] * h[b, k]
                    for j in range(hid):
                        rh[j] += rk * rt[k, 2 * hid + j]
            for j in range(hid):
                hh = act(codes[1], clipped(xw[t, b, 2 * hid + j] + rh[j], clip), alphas[1],
                         betas[1])
                z = zr[j]
                rh[j] = (1.0 - z) * hh + z * h[b, j]
            for j in range(hid):
                h[b, j] = rh[j]
                y[t, b, j] = rh[j]


@_jit
def rnn(xw, rt, h, codes, alphas, betas, clip, reverse, y):  # type: ignore[no-untyped-def]
    steps, batch, hid = xw.shape
    acc = np.empty(hid, np.float64)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            project(acc, xw, t, b, h, rt)
            for j in range(hid):
                v = act(codes[0], clipped(acc[j], clip), alphas[0], betas[0])
                h[b, j] = v
                y[t, b, j] = v
