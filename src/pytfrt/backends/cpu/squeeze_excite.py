"""Squeeze-and-excitation as one kernel: the compute function of ``tg.squeeze_excite``.

``y = x * gate(fc2(act(fc1(mean_hw(x)))))``: the channel means of ``x`` (float64 sums), a
``C -> R`` fully connected layer with bias and an epilogue activation, an ``R -> C`` layer with
bias, a gate (``sigmoid``, or ``hard_sigmoid`` = ``clip(gate_alpha * v + gate_beta, 0, 1)``),
and every pixel of ``x`` scaled by its channel's gate.  MobileNetV3 and EfficientNet have one
such block after most depthwise convolutions; as separate ops (global pool, two 1x1
convolutions on a 1x1 image, the gate, a broadcast multiply) each block cost five kernel
dispatches and as many passes over small arrays at batch 1.  ``-tg-fuse-squeeze-excite``
(``pytfrt.compiler.passes.squeeze_excite``) makes the op from that pattern.

Operands: ``x`` rank 4 (``NHWC`` or ``NCHW``: ``layout``), ``w1`` ``[C, R]``, ``b1`` ``[R]``,
``w2`` ``[R, C]``, ``b2`` ``[C]``, all float32 or all float64.  Batch rows are split over
:func:`pytfrt.backends.cpu._parallel.parallel_for`'s threads.  Thread-safety: a pure function
(writes only ``out``).  Errors: :class:`pytfrt.backends.cpu.ops.OpError` naming what does not
fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.backends.cpu import _dnnl_se, _se_native, arena
from pytfrt.backends.cpu._epilogue import ACTIVATION_CODES, _act, _sigmoid, activation_code
from pytfrt.backends.cpu._geometry import check_layout, check_out, check_rank4
from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu._parallel import chunks, parallel_for
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError
from pytfrt.backends.cpu.pooling import channel_sums

GRAPH_OPS = OpTable()
GATES = {"sigmoid": 0, "hard_sigmoid": 1}
"""Gate name -> the code the compiled kernel switches on."""


@GRAPH_OPS.op("squeeze_excite")
def squeeze_excite(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray,
                   b2: np.ndarray, *, layout: str = "NHWC", activation: str = "relu",
                   alpha: float = 0.0, gate: str = "sigmoid", gate_alpha: float = 1.0 / 6.0,
                   gate_beta: float = 0.5, out: np.ndarray | None = None) -> np.ndarray:
    """``x * gate(act(mean_hw(x) @ w1 + b1) @ w2 + b2)`` (see the module docstring).

    Raises:
        OpError: a rank, layout, dtype, activation or gate that is not accepted, or weight
            shapes that do not chain ``C -> R -> C``.
    """
    op = "squeeze_excite"
    check_layout(op, layout)
    check_rank4(op, x)
    act = activation_code(op, activation)
    g = GATES.get(gate)
    if g is None:
        raise OpError(f"{op}: unknown gate {gate!r}; expected one of {', '.join(GATES)}")
    dt = x.dtype
    if dt not in (np.float32, np.float64) or any(a.dtype != dt for a in (w1, b1, w2, b2)):
        raise OpError(f"{op}: x and the weights must all be float32 or all float64, got "
                      f"{', '.join(str(a.dtype) for a in (x, w1, b1, w2, b2))}")
    c = x.shape[3] if layout == "NHWC" else x.shape[1]
    r = w1.shape[1] if w1.ndim == 2 else -1
    if w1.shape != (c, r) or b1.shape != (r,) or w2.shape != (r, c) or b2.shape != (c,):
        raise OpError(
            f"{op}: weights must be w1 [C, R], b1 [R], w2 [R, C], b2 [C] with C = {c} (the "
            f"input's channels), got {list(w1.shape)}, {list(b1.shape)}, {list(w2.shape)}, "
            f"{list(b2.shape)}")
    check_out(op, out, x.shape, dt)
    if out is not None and np.may_share_memory(out, x) and not (
            out.ctypes.data == x.ctypes.data and out.strides == x.strides):
        raise OpError(f"{op}: out must be x itself or not overlap it")
    xc = np.ascontiguousarray(x)
    direct = out is not None and out.flags.c_contiguous
    y = out if direct else arena.empty(x.shape, dt)
    assert y is not None
    n = x.shape[0]
    pixels = x.shape[1] * x.shape[2] if layout == "NHWC" else x.shape[2] * x.shape[3]
    shape3 = (n, pixels, c) if layout == "NHWC" else (n, c, pixels)
    x3, y3 = xc.reshape(shape3), y.reshape(shape3)
    ws = (np.ascontiguousarray(w1), np.ascontiguousarray(b1), np.ascontiguousarray(w2),
          np.ascontiguousarray(b2))
    se_fn, excite_fn = _compiled(dt)
    if layout == "NHWC" and dt == np.float32:  # a large input: bands on both threads
        hidden = np.empty(r, dt)

        def excite(means: np.ndarray, gate_out: np.ndarray) -> None:
            excite_fn(means, *ws, act, alpha, g, gate_alpha, gate_beta, hidden, gate_out)

        if _dnnl_se.run(xc, y, excite):
            if out is not None and not direct:
                out[...] = y
                return out
            return y
    parts = chunks(n, 1)  # batch rows over the threads (one part at batch 1)

    def run(i: int) -> None:
        b0, b1_ = parts[i]
        se_fn(x3[b0:b1_], *ws, act, alpha, g, float(gate_alpha), float(gate_beta),
              layout == "NHWC", y3[b0:b1_])

    parallel_for(run, len(parts))
    if out is not None and not direct:
        out[...] = y
        return out
    return y


def _specialize(constants: dict[int, object], *, layout: str = "NHWC",
                activation: str = "relu", alpha: float = 0.0, gate: str = "sigmoid",
                gate_alpha: float = 1.0 / 6.0, gate_beta: float = 0.5) -> Any:
    """:func:`squeeze_excite` bound to its attributes and constant weights (the compiled
    model's kernel): the checks of the weights, the activation and the gate are done once
    here, and a call with a C-contiguous input of one image (and ``out`` absent, ``x``
    itself, or C-contiguous and apart from ``x``) goes straight to the compiled kernel or the
    split one (:mod:`pytfrt.backends.cpu._dnnl_se`) -- measured ~20 us of Python per block on
    the calling thread before, a MobileNetV3-small call has 9 blocks.  Every other call (and
    any error) takes :func:`squeeze_excite`.  ``None`` when a weight is not a constant or
    the weights do not chain (the general path then reports it on every call)."""
    ws = [constants.get(i) for i in (1, 2, 3, 4)]
    act, g = ACTIVATION_CODES.get(activation), GATES.get(gate)
    if act is None or g is None or layout not in ("NHWC", "NCHW") or not all(
            isinstance(w, np.ndarray) for w in ws):
        return None
    w1, b1, w2, b2 = (np.ascontiguousarray(w) for w in ws)  # type: ignore[call-overload]
    dt = w1.dtype
    if dt not in (np.float32, np.float64) or any(a.dtype != dt for a in (b1, w2, b2)):
        return None
    if w1.ndim != 2 or b1.shape != (w1.shape[1],) or w2.shape != w1.shape[::-1] or (
            b2.shape != (w1.shape[0],)):
        return None
    c = w1.shape[0]
    nhwc = layout == "NHWC"
    axis = 3 if nhwc else 1
    split = nhwc and dt == np.float32
    nd, overlap = np.ndarray, np.may_share_memory
    attrs = dict(layout=layout, activation=activation, alpha=alpha, gate=gate,
                 gate_alpha=gate_alpha, gate_beta=gate_beta)
    alpha, ga, gb = float(alpha), float(gate_alpha), float(gate_beta)
    hidden_size = w1.shape[1]
    se_fn, excite_fn = _compiled(dt)

    def excite(means: np.ndarray, gate_out: np.ndarray) -> None:
        excite_fn(means, w1, b1, w2, b2, act, alpha, g, ga, gb, np.empty(hidden_size, dt),
                gate_out)

    def se(x: np.ndarray, *weights: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if (x.__class__ is nd and x.ndim == 4 and x.shape[0] == 1 and x.dtype == dt
                and x.shape[axis] == c and x.flags.c_contiguous and (
                    out is None or out is x or (
                        out.__class__ is nd and out.shape == x.shape and out.dtype == dt
                        and out.flags.c_contiguous and not overlap(out, x)))):
            y = arena.empty(x.shape, dt) if out is None else out
            if split and _dnnl_se.ONE_IMAGE and _dnnl_se.run(x, y, excite):
                return y
            _, d1, d2, d3 = x.shape
            shape3 = (1, d1 * d2, d3) if nhwc else (1, d1, d2 * d3)
            se_fn(x.reshape(shape3), w1, b1, w2, b2, act, alpha, g, ga, gb, nhwc,
                  y.reshape(shape3))
            return y
        return squeeze_excite(x, *weights, **attrs, out=out)  # type: ignore[arg-type]

    se.num_arrays = 1  # type: ignore[attr-defined]
    return se


squeeze_excite.specialize = _specialize  # type: ignore[attr-defined]


def _compiled(dt: np.dtype[Any]) -> tuple[Any, Any]:
    """The ``(se, excite)`` kernels for ``dt``: float32 in C (:mod:`_se_native`, no Numba)
    when it can be built, else the Numba functions below."""
    native = _se_native.module() if dt == np.float32 else None
    if native is not None:
        return native.se, native.excite
    return _se, _excite


@numba.njit(nogil=True, cache=True, fastmath=True, inline="always")
def _affine(v, w, b, out):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``out = v @ w + b`` for a row-major ``w`` (the inner loop runs along its rows)."""
    out[:] = b
    for i in range(w.shape[0]):
        vi = v[i]
        for j in range(w.shape[1]):
            out[j] += vi * w[i, j]


@numba.njit(nogil=True, cache=True, fastmath=True, error_model="numpy")
def _excite(s, w1, b1, w2, b2, act, alpha, gate, ga, gb, h, gv):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The gate ``gv`` of the channel means ``s``: C -> R (activation, into ``h``) -> C
    (gate), row-major weights, inner loops contiguous."""
    _affine(s, w1, b1, h)
    for r in range(h.shape[0]):
        h[r] = _act(h[r], act, alpha)
    _affine(h, w2, b2, gv)
    for c in range(gv.shape[0]):
        v = gv[c]
        if gate == 0:
            gv[c] = _sigmoid(v)
        else:
            gv[c] = min(max(ga * v + gb, 0.0), 1.0)


@numba.njit(nogil=True, cache=True, fastmath=True, error_model="numpy")
def _se(x, w1, b1, w2, b2, act, alpha, gate, ga, gb, nhwc, y):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    nb = x.shape[0]
    c_n, r_n = w1.shape
    npix = x.shape[1] if nhwc else x.shape[2]
    acc = np.empty(c_n, np.float64)
    s = np.empty(c_n, x.dtype)
    h = np.empty(r_n, x.dtype)
    gv = np.empty(c_n, x.dtype)
    for b in range(nb):
        channel_sums(x, b, nhwc, acc)  # squeeze
        for c in range(c_n):
            s[c] = acc[c] / npix
        _excite(s, w1, b1, w2, b2, act, alpha, gate, ga, gb, h, gv)
        # scale
        if nhwc:
            for p in range(npix):
                for c in range(c_n):
                    y[b, p, c] = x[b, p, c] * gv[c]
        else:
            for c in range(c_n):
                gc = gv[c]
                for p in range(npix):
                    y[b, c, p] = x[b, c, p] * gc
