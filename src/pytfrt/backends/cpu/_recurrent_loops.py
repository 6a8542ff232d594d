"""The compiled loops of the ``tg.recurrent`` kernel (:mod:`.recurrent`): Numba, no NumPy calls.

One function per cell runs the recurrence of one direction over every time step, batch row
and gate: the gates are the precomputed input projection (``xw``, biases folded) plus the
recurrent product accumulated in the input's type from ``rt`` (``R`` transposed, ``[H, G*H]``
contiguous), then the activations (switching on :data:`.recurrent.ACT_CODES`) update the
state in place and write ``y[t]``.  ``bits`` is an int32 scratch of ``G*H`` for float32 (the
vectorisable ``exp`` of :func:`exp_block`), empty for float64 (``math.exp``).  Imported lazily
by :mod:`.recurrent` (importing it imports Numba); compiled on first use and cached on disk
(``cache=True``).  The functions write only ``h``, ``c``, ``y`` and ``bits``: thread-safe
for distinct arrays.
"""

from __future__ import annotations

import math

import numpy as np

from pytfrt.backends.cpu._jit import numba

_jit = numba.njit(cache=True, nogil=True,
                  fastmath={"nsz", "arcp", "contract", "afn", "reassoc"})
# no "nnan"/"ninf": a saturated gate (exp overflowing to inf) must still give 0 or 1


@_jit
def exp_block(v, lo, hi, scale, bits):  # type: ignore[no-untyped-def]
    """``v[lo:hi] = exp(scale * v[lo:hi])`` for float32 without a libm call per element, so
    that the loops vectorise (Numba here has no SVML): ``2**n * e**r`` with ``|r| <= ln2/2``,
    ``e**r`` by its Taylor polynomial of degree 7 (relative error < 1e-8 before rounding),
    ``2**n`` built in the exponent bits of ``bits`` (an int32 scratch of ``hi - lo``);
    arguments are clamped to [-87.3, 88.7] (normal float32 results)."""
    scaled = bits.view(np.float32)
    for j in range(lo, hi):
        x = min(max(scale * v[j], -87.3), 88.7)
        n = math.floor(x * 1.4426950408889634 + 0.5)
        r = x - n * 0.693145751953125 - n * 1.4286068203094172e-06
        e = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (
            1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))))
        v[j] = e
        bits[j - lo] = (np.int32(n) + np.int32(127)) << np.int32(23)
    for j in range(lo, hi):
        v[j] *= scaled[j - lo]


@_jit
def apply(v, lo, hi, code, alpha, beta, clip, bits):  # type: ignore[no-untyped-def]
    """``v[lo:hi] = activation(clip(v[lo:hi]))`` in place; one loop per activation so that
    the simple ones vectorise; float32 sigmoid and tanh take :func:`exp_block` (``bits``: its
    scratch; empty for float64, which keeps ``math.exp``)."""
    if clip > 0:
        for j in range(lo, hi):
            v[j] = min(max(v[j], -clip), clip)
    fast = bits.shape[0] >= hi - lo
    if code == 0 and fast:  # sigmoid = 1 / (1 + exp(-x))
        exp_block(v, lo, hi, -1.0, bits)
        for j in range(lo, hi):
            v[j] = 1.0 / (1.0 + v[j])
    elif code == 1 and fast:  # tanh = 1 - 2 / (exp(2x) + 1)
        exp_block(v, lo, hi, 2.0, bits)
        for j in range(lo, hi):
            v[j] = 1.0 - 2.0 / (v[j] + 1.0)
    elif code == 0:
        for j in range(lo, hi):
            v[j] = 1.0 / (1.0 + math.exp(-v[j]))
    elif code == 1:
        for j in range(lo, hi):
            v[j] = math.tanh(v[j])
    elif code == 2:
        for j in range(lo, hi):
            v[j] = max(v[j], 0.0)
    elif code == 3:
        for j in range(lo, hi):
            v[j] = alpha * v[j] + beta
    elif code == 4:
        for j in range(lo, hi):
            v[j] = v[j] if v[j] >= 0 else alpha * v[j]
    elif code == 5:
        for j in range(lo, hi):
            v[j] = v[j] if v[j] > alpha else 0.0
    elif code == 6:
        for j in range(lo, hi):
            v[j] = alpha * math.tanh(beta * v[j])
    elif code == 7:
        for j in range(lo, hi):
            v[j] = min(max(alpha * v[j] + beta, 0.0), 1.0)
    elif code == 8:
        for j in range(lo, hi):
            v[j] = v[j] if v[j] >= 0 else alpha * (math.exp(v[j]) - 1.0)
    elif code == 9:
        for j in range(lo, hi):
            v[j] = v[j] / (1.0 + abs(v[j]))
    else:
        for j in range(lo, hi):
            v[j] = max(v[j], 0.0) + math.log1p(math.exp(-abs(v[j])))


@_jit
def matvec(acc, h, b, rt, col0):  # type: ignore[no-untyped-def]
    """``acc = h[b] @ rt[:, col0:col0 + len(acc)]`` (rows of ``rt`` streamed, contiguous)."""
    width = acc.shape[0]
    for j in range(width):
        acc[j] = 0.0
    for k in range(h.shape[1]):
        hk = h[b, k]
        for j in range(width):
            acc[j] += hk * rt[k, col0 + j]


@_jit
def lstm(xw, rt, h, c, p, codes, alphas, betas, clip, input_forget, reverse, y, bits):  # type: ignore[no-untyped-def]
    steps, batch, g4 = xw.shape
    hid = g4 // 4
    gates = np.empty(g4, xw.dtype)
    cbuf = np.empty(hid, xw.dtype)
    peep = p.shape[0] > 0
    f0, a0, b0 = codes[0], alphas[0], betas[0]
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            matvec(gates, h, b, rt, 0)
            for j in range(g4):
                gates[j] += xw[t, b, j]
            if peep:  # i and f see c[t-1]; o sees c[t], below
                for j in range(hid):
                    gates[j] += p[j] * c[b, j]
                    gates[2 * hid + j] += p[2 * hid + j] * c[b, j]
                apply(gates, 0, hid, f0, a0, b0, clip, bits)
                apply(gates, 2 * hid, 3 * hid, f0, a0, b0, clip, bits)
            else:
                apply(gates, 0, 3 * hid, f0, a0, b0, clip, bits)
            apply(gates, 3 * hid, g4, codes[1], alphas[1], betas[1], clip, bits)
            if input_forget:
                for j in range(hid):
                    gates[2 * hid + j] = 1.0 - gates[j]
            for j in range(hid):
                cn = gates[2 * hid + j] * c[b, j] + gates[j] * gates[3 * hid + j]
                c[b, j] = cn
                cbuf[j] = cn
            if peep:
                for j in range(hid):
                    gates[hid + j] += p[hid + j] * cbuf[j]
                apply(gates, hid, 2 * hid, f0, a0, b0, clip, bits)
            apply(cbuf, 0, hid, codes[2], alphas[2], betas[2], 0.0, bits)
            for j in range(hid):
                hn = gates[hid + j] * cbuf[j]
                h[b, j] = hn
                y[t, b, j] = hn


@_jit
def gru(xw, rt, rbh, h, codes, alphas, betas, clip, lbr, reverse, y, bits):  # type: ignore[no-untyped-def]
    steps, batch, g3 = xw.shape
    hid = g3 // 3
    acc = np.empty(g3 if lbr else 2 * hid, xw.dtype)
    rh = np.empty(hid, xw.dtype)
    reset = np.empty((1, hid), xw.dtype)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            matvec(acc, h, b, rt, 0)
            for j in range(2 * hid):
                acc[j] += xw[t, b, j]
            apply(acc, 0, 2 * hid, codes[0], alphas[0], betas[0], clip, bits)  # z, r
            if lbr:
                for j in range(hid):
                    rh[j] = acc[hid + j] * (acc[2 * hid + j] + rbh[j])
            else:
                for k in range(hid):
                    reset[0, k] = acc[hid + k] * h[b, k]
                matvec(rh, reset, 0, rt, 2 * hid)
            for j in range(hid):
                rh[j] += xw[t, b, 2 * hid + j]
            apply(rh, 0, hid, codes[1], alphas[1], betas[1], clip, bits)
            for j in range(hid):
                z = acc[j]
                hn = (1.0 - z) * rh[j] + z * h[b, j]
                h[b, j] = hn
                y[t, b, j] = hn


@_jit
def rnn(xw, rt, h, codes, alphas, betas, clip, reverse, y, bits):  # type: ignore[no-untyped-def]
    steps, batch, hid = xw.shape
    acc = np.empty(hid, xw.dtype)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            matvec(acc, h, b, rt, 0)
            for j in range(hid):
                acc[j] += xw[t, b, j]
            apply(acc, 0, hid, codes[0], alphas[0], betas[0], clip, bits)
            for j in range(hid):
                h[b, j] = acc[j]
                y[t, b, j] = acc[j]
