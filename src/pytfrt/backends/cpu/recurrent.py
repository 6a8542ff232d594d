"""The ``tg.recurrent`` kernel: an LSTM, GRU or simple RNN over a whole sequence in one call.

Semantics are the catalogue's (:mod:`pytfrt.compiler.ops.recurrent`, ONNX's ``LSTM``/``GRU``/
``RNN``).  Per direction the input projection of every time step is one GEMM
(``[T*B, I] x [I, G*H]``; above :data:`SMALL_PROJECTION` multiply-adds through
:func:`._blas.sgemm`, oneDNN on the calling thread for float32; input biases and the
recurrent biases that sit outside the reset gate folded in), then the recurrence runs in a
loop over time: one ``[B, H] x [H, G*H]`` product and the gate arithmetic per step, in place.
The loop is compiled with Numba (:mod:`._recurrent_loops`: one call runs every step of a
direction, no executor, no Python per step); with ``sequence_lens`` (ragged batches) it is a
NumPy loop on the calling thread with preallocated buffers.  ``PYTFRT_RECURRENT_NUMBA=0``
forces the NumPy loop (both are tested against each other).  Measured in
``docs/kernels.md`` ("Recurrent nets").

Pure functions of their operands (inputs are never written): thread-safe.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt import config
from pytfrt.backends.cpu._blas import sgemm
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError, negative

GRAPH_OPS = OpTable()
"""Op name -> compute function."""

GATES = {"lstm": 4, "gru": 3, "rnn": 1}
"""Cell kind -> number of gate blocks in ``w``/``r``."""
CELL_FUNCTIONS = {"lstm": 3, "gru": 2, "rnn": 1}
"""Cell kind -> number of activation functions per direction."""
DEFAULT_ACTIVATIONS = {"lstm": ("sigmoid", "tanh", "tanh"), "gru": ("sigmoid", "tanh"),
                       "rnn": ("tanh",)}
"""Cell kind -> ONNX's default activations (one direction)."""
ACTIVATIONS = ("sigmoid", "tanh", "relu", "affine", "leakyrelu", "thresholdedrelu",
               "scaledtanh", "hardsigmoid", "elu", "softsign", "softplus")
"""The activation names the op takes (ONNX's, lower case)."""
ALPHA_DEFAULTS = {"affine": 1.0, "leakyrelu": 0.01, "thresholdedrelu": 1.0, "scaledtanh": 1.0,
                  "hardsigmoid": 0.2, "elu": 1.0}
"""Activations that take ``alpha`` -> ONNX's default."""
BETA_DEFAULTS = {"affine": 0.0, "scaledtanh": 1.0, "hardsigmoid": 0.5}
"""Activations that take ``beta`` -> ONNX's default."""

Act = Callable[[np.ndarray], object]
"""An activation applied in place."""


def activation_names(cell: str, activations: str | list[str], directions: int) -> list[str]:
    """The activation of each cell function of each direction, lower case (defaults filled
    in; one direction's list serves both of a bidirectional op).

    Raises:
        ValueError: for an unknown name or a wrong count.
    """
    listed = activations.split(",") if isinstance(activations, str) else list(activations)
    names = [a.strip().lower() for a in listed if a.strip()]
    n = CELL_FUNCTIONS[cell]
    if not names:
        names = list(DEFAULT_ACTIVATIONS[cell])
    if len(names) == n and directions == 2:
        names = names * 2
    if len(names) != n * directions:
        raise ValueError(f"{cell} takes {n * directions} activations, got {len(names)}")
    for a in names:
        if a not in ACTIVATIONS:
            raise ValueError(f"unknown activation {a!r} (known: {', '.join(ACTIVATIONS)})")
    return names


def _sigmoid(v: np.ndarray) -> None:
    # 1 / (1 + exp(-v)), in place and without overflow warnings for large |v|
    negative(v, out=v)  # v may be a strided gate column
    np.exp(v, out=v)
    v += 1.0
    np.reciprocal(v, out=v)


def _activation(name: str, alpha: float, beta: float) -> Act:
    """The in-place activation ``name`` with ONNX's ``alpha``/``beta``."""
    if name == "sigmoid":
        return _sigmoid
    if name == "tanh":
        return lambda v: np.tanh(v, out=v)
    if name == "relu":
        return lambda v: np.maximum(v, 0, out=v)
    if name == "affine":
        def affine(v: np.ndarray) -> None:
            v *= alpha
            v += beta
        return affine
    if name == "leakyrelu":
        return lambda v: np.multiply(v, np.where(v < 0, v.dtype.type(alpha), 1), out=v)
    if name == "thresholdedrelu":
        return lambda v: np.multiply(v, v > alpha, out=v)
    if name == "scaledtanh":
        def scaled_tanh(v: np.ndarray) -> None:
            v *= beta
            np.tanh(v, out=v)
            v *= alpha
        return scaled_tanh
    if name == "hardsigmoid":
        def hard_sigmoid(v: np.ndarray) -> None:
            v *= alpha
            v += beta
            np.clip(v, 0, 1, out=v)
        return hard_sigmoid
    if name == "elu":
        return lambda v: np.copyto(v, np.where(v < 0, alpha * np.expm1(np.minimum(v, 0)), v))
    if name == "softsign":
        return lambda v: np.divide(v, 1 + np.abs(v), out=v)
    if name == "softplus":
        return lambda v: np.logaddexp(v, 0, out=v)
    raise OpError(f"recurrent: unknown activation {name!r}")


@functools.lru_cache(maxsize=256)
def _activations(cell: str, names: str, alphas: tuple[float, ...], betas: tuple[float, ...],
                 directions: int) -> list[tuple[list[Act], Any]]:
    """Per direction: the cell's NumPy activations, and the compiled loops' (codes, alphas,
    betas) arrays (cached: the attributes of an op never change)."""
    try:
        listed = activation_names(cell, names, directions)
    except ValueError as exc:
        raise OpError(f"recurrent: {exc}") from None
    al = [alphas[k] if k < len(alphas) else ALPHA_DEFAULTS.get(n, 0.0)
          for k, n in enumerate(listed)]
    be = [betas[k] if k < len(betas) else BETA_DEFAULTS.get(n, 0.0) for k, n in enumerate(listed)]
    nf = CELL_FUNCTIONS[cell]
    out = []
    for d in range(directions):
        part = slice(d * nf, (d + 1) * nf)
        acts = [_activation(*f) for f in zip(listed[part], al[part], be[part], strict=True)]
        arrays = (np.asarray([ACT_CODES[n] for n in listed[part]], np.int64),
                  np.asarray(al[part], np.float64), np.asarray(be[part], np.float64))
        out.append((acts, arrays))
    return out


@GRAPH_OPS.op("recurrent")
def recurrent(x: np.ndarray, w: np.ndarray, r: np.ndarray, *extra: np.ndarray, cell: str,
              direction: str, hidden_size: int, layout: int, activations: str,
              activation_alpha: tuple[float, ...], activation_beta: tuple[float, ...],
              clip: float, linear_before_reset: bool, input_forget: bool, has_bias: bool,
              has_sequence_lens: bool, has_initial_h: bool, has_initial_c: bool,
              has_peepholes: bool) -> tuple[np.ndarray, ...]:
    """(y, y_h[, y_c]) of an LSTM/GRU/RNN over ``x`` (see the module docstring).

    Raises:
        OpError: for operands whose shapes do not fit, or a sequence length out of range.
    """
    it = iter(extra)
    b = next(it) if has_bias else None
    lens = next(it) if has_sequence_lens else None
    h0 = next(it) if has_initial_h else None
    c0 = next(it) if has_initial_c else None
    p = next(it) if has_peepholes else None
    if x.ndim != 3:
        raise OpError(f"recurrent: x must have rank 3, got shape {list(x.shape)}")
    xt = x if layout == 0 else x.transpose(1, 0, 2)   # [T, B, I]
    if layout != 0:
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    steps, batch, _ = xt.shape
    hid, g = hidden_size, GATES[cell]
    dirs = 2 if direction == "bidirectional" else 1
    if w.shape[0] != dirs or w.shape[1] != g * hid or w.shape[2] != xt.shape[2]:
        raise OpError(f"recurrent: w has shape {list(w.shape)}, expected "
                      f"[{dirs}, {g * hid}, {xt.shape[2]}]")
    dt = x.dtype
    if lens is not None:
        lens = np.asarray(lens, np.int64).reshape(-1)
        if lens.shape[0] != batch or (lens.size and (lens.min() < 0 or lens.max() > steps)):
            raise OpError(f"recurrent: sequence_lens {lens.tolist()} do not fit {steps} steps "
                          f"and batch {batch}")
        if lens.size and lens.min() == steps:
            lens = None   # every sequence is full
    per_dir = _activations(cell, activations, tuple(activation_alpha), tuple(activation_beta),
                           dirs)
    y = np.zeros((steps, dirs, batch, hid), dt)
    y_h = np.empty((dirs, batch, hid), dt)
    y_c = np.empty((dirs, batch, hid), dt) if cell == "lstm" else None
    flat = np.ascontiguousarray(xt).reshape(steps * batch, -1)
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        xw2 = np.empty((steps * batch, g * hid), dt)
        rb = None
        if b is not None:
            # the recurrent biases add to the pre-activations as the input biases do, but for
            # GRU's Rbh when the reset gate applies after the product (it stays inside)
            bias = b[d, :g * hid] + b[d, g * hid:]
            if cell == "gru" and linear_before_reset:
                rb = b[d, 5 * hid:]
                bias[2 * hid:] = b[d, 2 * hid:3 * hid]
            xw2[...] = bias
        if flat.shape[0] * flat.shape[1] * g * hid <= SMALL_PROJECTION:
            if b is None:
                np.matmul(flat, w[d].T, out=xw2)
            else:
                xw2 += flat @ w[d].T
        else:
            sgemm(flat, w[d].T, xw2, 0.0 if b is None else 1.0)
        xw = xw2.reshape(steps, batch, g * hid)
        h = np.zeros((batch, hid), dt) if h0 is None else np.array(h0[d], dt)
        c = None
        if cell == "lstm":
            c = np.zeros((batch, hid), dt) if c0 is None else np.array(c0[d], dt)
        loops = _numba_loops() if NUMBA and lens is None else None
        if loops is not None:
            args = (*per_dir[d][1], float(clip))
            bits = np.empty(g * hid if dt == np.float32 else 0, np.int32)
            rt = np.ascontiguousarray(r[d].T)
            if cell == "lstm":
                pd = np.zeros(0, dt) if p is None else np.ascontiguousarray(p[d])
                loops["lstm"](xw, rt, h, c, pd, *args, bool(input_forget), reverse, y[:, d], bits)
            elif cell == "gru":
                rbh = np.zeros(hid, dt) if rb is None else np.ascontiguousarray(rb)
                loops["gru"](xw, rt, rbh, h, *args, bool(linear_before_reset), reverse, y[:, d],
                             bits)
            else:
                loops["rnn"](xw, rt, h, *args, reverse, y[:, d], bits)
        else:
            order, valid = _schedule(steps, batch, lens, reverse)
            step_fn = {"lstm": _lstm_steps, "gru": _gru_steps, "rnn": _rnn_steps}[cell]
            step_fn(xw, r[d], rb, h, c, None if p is None else p[d], per_dir[d][0], clip,
                    linear_before_reset, input_forget, order, valid, y[:, d])
        y_h[d] = h
        if y_c is not None:
            y_c[d] = c
    if lens is not None:  # an empty sequence has no last state: zeros (as ONNX Runtime)
        y_h[:, lens == 0] = 0
        if y_c is not None:
            y_c[:, lens == 0] = 0
    if layout != 0:
        outs = [y.transpose(2, 0, 1, 3), y_h.transpose(1, 0, 2)]
        if y_c is not None:
            outs.append(y_c.transpose(1, 0, 2))
        return tuple(np.ascontiguousarray(o) for o in outs)
    return (y, y_h) if y_c is None else (y, y_h, y_c)


def _schedule(steps: int, batch: int, lens: np.ndarray | None,
              reverse: bool) -> tuple[list[np.ndarray | int], list[np.ndarray | None]]:
    """Per step: the time index (one int, or per batch row) and the rows still running."""
    if lens is None:
        ts = range(steps - 1, -1, -1) if reverse else range(steps)
        return list(ts), [None] * steps
    order: list[np.ndarray | int] = []
    valid: list[np.ndarray | None] = []
    for s in range(steps):
        live = s < lens
        t = np.where(live, lens - 1 - s, 0) if reverse else np.full(batch, s)
        order.append(t)
        valid.append(live)
    return order, valid


def _gather(xw: np.ndarray, t: np.ndarray | int) -> np.ndarray:
    if isinstance(t, int):
        return xw[t]
    return xw[t, np.arange(xw.shape[1])]


def _store(y: np.ndarray, t: np.ndarray | int, h: np.ndarray, live: np.ndarray | None) -> None:
    if live is None:
        y[t] = h
    else:
        rows = np.nonzero(live)[0]
        y[np.asarray(t)[rows], rows] = h[rows]


def _clip(v: np.ndarray, clip: float) -> None:
    if clip > 0:
        np.clip(v, -clip, clip, out=v)


def _lstm_steps(xw: np.ndarray, r: np.ndarray, rb: np.ndarray | None, h: np.ndarray,
                c: np.ndarray | None, p: np.ndarray | None, acts: list[Act], clip: float,
                lbr: bool, input_forget: bool, order: list[np.ndarray | int],
                valid: list[np.ndarray | None], y: np.ndarray) -> None:
    assert c is not None
    f_act, g_act, h_act = acts
    hid = h.shape[1]
    rt = r.T
    gates = np.empty((h.shape[0], 4 * hid), h.dtype)
    tmp = np.empty_like(h)
    pi, po, pf = (None, None, None) if p is None else (p[:hid], p[hid:2 * hid], p[2 * hid:])
    for t, live in zip(order, valid, strict=True):
        np.matmul(h, rt, out=gates)
        gates += _gather(xw, t)
        gi, go, gf, gc = (gates[:, k * hid:(k + 1) * hid] for k in range(4))
        if pi is not None:
            gi += pi * c
            gf += pf * c
            for gate in (gi, gf, gc):  # o is clipped once its peephole term is in
                _clip(gate, clip)
        else:
            _clip(gates, clip)
        f_act(gi)
        if input_forget:
            np.subtract(1, gi, out=gf)
        else:
            f_act(gf)
        g_act(gc)
        # c_new = f * c + i * g, kept in tmp until the rows still running take it
        np.multiply(gf, c, out=tmp)
        gc *= gi
        tmp += gc
        if po is not None:
            go += po * tmp
            _clip(go, clip)
        f_act(go)
        if live is None:
            c[...] = tmp
            h_act(tmp)
            np.multiply(go, tmp, out=h)
        else:
            c[live] = tmp[live]
            h_act(tmp)
            h[live] = (go * tmp)[live]
        _store(y, t, h, live)


def _gru_steps(xw: np.ndarray, r: np.ndarray, rb: np.ndarray | None, h: np.ndarray,
               c: np.ndarray | None, p: np.ndarray | None, acts: list[Act], clip: float,
               lbr: bool, input_forget: bool, order: list[np.ndarray | int],
               valid: list[np.ndarray | None], y: np.ndarray) -> None:
    f_act, g_act = acts
    hid = h.shape[1]
    rzr_t = r[:2 * hid].T
    rh_t = r[2 * hid:].T
    zr = np.empty((h.shape[0], 2 * hid), h.dtype)
    hh = np.empty_like(h)
    for t, live in zip(order, valid, strict=True):
        x_t = _gather(xw, t)
        np.matmul(h, rzr_t, out=zr)
        zr += x_t[:, :2 * hid]
        _clip(zr, clip)
        f_act(zr)
        z, rg = zr[:, :hid], zr[:, hid:]
        if lbr:
            np.matmul(h, rh_t, out=hh)
            if rb is not None:
                hh += rb
            hh *= rg
        else:
            np.matmul(rg * h, rh_t, out=hh)
        hh += x_t[:, 2 * hid:]
        _clip(hh, clip)
        g_act(hh)
        # h = (1 - z) * hh + z * h = hh + z * (h - hh)
        new = h - hh
        new *= z
        new += hh
        if live is None:
            h[...] = new
        else:
            h[live] = new[live]
        _store(y, t, h, live)


def _rnn_steps(xw: np.ndarray, r: np.ndarray, rb: np.ndarray | None, h: np.ndarray,
               c: np.ndarray | None, p: np.ndarray | None, acts: list[Act], clip: float,
               lbr: bool, input_forget: bool, order: list[np.ndarray | int],
               valid: list[np.ndarray | None], y: np.ndarray) -> None:
    (f_act,) = acts
    rt = r.T
    new = np.empty_like(h)
    for t, live in zip(order, valid, strict=True):
        np.matmul(h, rt, out=new)
        new += _gather(xw, t)
        _clip(new, clip)
        f_act(new)
        if live is None:
            h[...] = new
        else:
            h[live] = new[live]
        _store(y, t, h, live)


# -- the Numba loops (no sequence_lens): one compiled loop over time, batch rows and gates ---------
ACT_CODES = {name: i for i, name in enumerate(ACTIVATIONS)}
"""Activation name -> the code the compiled loops switch on (the order of :data:`ACTIVATIONS`)."""

SMALL_PROJECTION = 1 << 18
"""Input projections of up to this many multiply-adds use NumPy's ``matmul`` (single-threaded
at these sizes): ``_blas.sgemm``'s ctypes call costs ~10 us of Python whatever the size."""

_NUMBA_LOCK = threading.Lock()
_NUMBA: dict[str, Any] | None = None
NUMBA = config.flag("PYTFRT_RECURRENT_NUMBA")
"""Whether :func:`recurrent` uses the compiled loops (``PYTFRT_RECURRENT_NUMBA=0``: NumPy)."""


def _numba_loops() -> dict[str, Any] | None:
    """The compiled loops (``None`` if Numba is unavailable), made once."""
    global _NUMBA
    with _NUMBA_LOCK:
        if _NUMBA is None:
            try:
                from pytfrt.backends.cpu import _recurrent_loops as loops
            except ImportError:  # no Numba: the NumPy loop serves
                _NUMBA = {}
            else:
                _NUMBA = {"lstm": loops.lstm, "gru": loops.gru, "rnn": loops.rnn}
        return _NUMBA or None
