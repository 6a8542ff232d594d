"""The fused epilogue: ``y = act(y + bias + residual)`` in one pass.

Private helper of :mod:`pytfrt.backends.cpu.activations`, :mod:`~pytfrt.backends.cpu.conv` and
:mod:`~pytfrt.backends.cpu.gemm`.  The kernel works on a 2-D view ``(M, K)`` of the output,
``bias`` along ``K`` and ``residual`` of the same ``(M, K)`` shape.  :func:`epilogue_2d` runs
the C version of :mod:`pytfrt.backends.cpu._epilogue_native` (compiled once per machine; no
Numba import); the Numba kernels here, with the same numerics, are the fallback when there is
no C compiler (or ``_epilogue_native.ENABLED`` is false): compiled with ``nogil=True,
cache=True`` (the first call per dtype compiles, later processes load the cache), an absent
operand passed as an empty array.  Thread-safe: it writes only ``y``.
"""

from __future__ import annotations

import math

import numpy as np

from pytfrt.backends.cpu import _epilogue_native
from pytfrt.backends.cpu._epilogue_native import (
    ERF_CLAMP,
    ERF_P,
    ERF_Q,
    GELU_EXACT,
    GELU_TANH_C,
    GELU_TANH_EXACT,
    SQRT_HALF,
    TANH_CLAMP,
    TANH_P,
    TANH_Q,
)
from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu.op_math import ACTIVATIONS
from pytfrt.backends.cpu.ops import OpError

ACTIVATION_CODES: dict[str, int] = {name: a.code for name, a in ACTIVATIONS.items()}
"""Activation name -> the code the compiled kernel switches on (:func:`_act`; the codes are
given with the activations, :data:`pytfrt.backends.cpu.op_math.ACTIVATIONS`)."""


def activation_code(op: str, activation: str) -> int:
    """The kernel code of ``activation``; :class:`OpError` naming the choices if unknown."""
    code = ACTIVATION_CODES.get(activation)
    if code is None:
        raise OpError(
            f"{op}: unknown activation {activation!r}; expected one of "
            f"{', '.join(ACTIVATION_CODES)}"
        )
    return code


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _sigmoid(v: float) -> float:
    if v >= 0:
        return 1.0 / (1.0 + math.exp(-v))
    t = math.exp(v)
    return t / (1.0 + t)


_P0, _P1, _P2, _P3, _P4, _P5, _P6, _P7 = ERF_P
_Q0, _Q1, _Q2, _Q3, _Q4 = ERF_Q
_T0, _T1, _T2, _T3, _T4, _T5, _T6 = TANH_P
_U0, _U1, _U2, _U3 = TANH_Q


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _erf(x: float) -> float:
    """``erf(x)`` from mul/add/div and selects only (vectorisable, see
    ``_epilogue_native.ERF_P``): within 7.7e-9 of ``math.erf`` for ``|x| < 3.92``, exactly +-1
    beyond (within 3e-8)."""
    t = min(max(x, -ERF_CLAMP), ERF_CLAMP)
    u = t * t
    p = _P0 + u * (_P1 + u * (_P2 + u * (_P3 + u * (_P4 + u * (_P5 + u * (_P6 + u * _P7))))))
    q = _Q0 + u * (_Q1 + u * (_Q2 + u * (_Q3 + u * _Q4)))
    r = t * p / q
    r = 1.0 if x >= ERF_CLAMP else r
    return -1.0 if x <= -ERF_CLAMP else r


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _tanh(x: float) -> float:
    """``tanh(x)`` from mul/add/div and selects only (vectorisable, unlike a libm call per
    element): within 3.7e-8 of ``math.tanh``, exactly +-1 from ``|x| >= 9`` on."""
    t = min(max(x, -TANH_CLAMP), TANH_CLAMP)
    u = t * t
    p = _T0 + u * (_T1 + u * (_T2 + u * (_T3 + u * (_T4 + u * (_T5 + u * _T6)))))
    q = _U0 + u * (_U1 + u * (_U2 + u * _U3))
    r = t * p / q
    r = 1.0 if x >= TANH_CLAMP else r
    return -1.0 if x <= -TANH_CLAMP else r


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _act(v: float, act: int, alpha: float) -> float:
    if act == 1:
        return v if v > 0 else 0.0
    if act == 2:
        return min(max(v, 0.0), 6.0)
    if act == 3:
        return v if v >= 0 else alpha * v
    if act == 4:
        return _sigmoid(v)
    if act == 5:
        return math.tanh(v)
    if act == 6:
        return v * _sigmoid(v)
    if act == 7:
        return 0.5 * v * (1.0 + _erf(v * SQRT_HALF))
    if act == 10:
        return 0.5 * v * (1.0 + math.erf(v * SQRT_HALF))
    if act == 8:
        return 0.5 * v * (1.0 + _tanh(GELU_TANH_C * (v + 0.044715 * v * v * v)))
    if act == 11:
        return 0.5 * v * (1.0 + math.tanh(GELU_TANH_C * (v + 0.044715 * v * v * v)))
    if act == 9:
        return v * min(max(v + 3.0, 0.0), 6.0) / 6.0
    return v


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _epilogue_2d(y, bias, res, act, alpha, bias_rows, j0, j1):  # type: ignore[no-untyped-def]
    m = y.shape[0]
    nb = bias.shape[0]
    has_res = res.shape[0] > 0
    col_bias = nb > 0 and not bias_rows
    for i in range(m):
        row_bias = bias[i % nb] if bias_rows and nb > 0 else 0.0
        # One loop per activation kind, copied on purpose: with the activation switch inside the
        # loop LLVM does not vectorise it (measured 5x slower for relu on a ResNet-sized output).
        if act == 0:
            for j in range(j0, j1):
                v = y[i, j] + row_bias
                if col_bias:
                    v += bias[j]
                if has_res:
                    v += res[i, j]
                y[i, j] = v
        elif act == 1:
            for j in range(j0, j1):
                v = y[i, j] + row_bias
                if col_bias:
                    v += bias[j]
                if has_res:
                    v += res[i, j]
                y[i, j] = max(v, 0)
        elif act == 7:
            for j in range(j0, j1):
                v = y[i, j] + row_bias
                if col_bias:
                    v += bias[j]
                if has_res:
                    v += res[i, j]
                y[i, j] = 0.5 * v * (1.0 + _erf(v * SQRT_HALF))
        elif act == 8:
            for j in range(j0, j1):
                v = y[i, j] + row_bias
                if col_bias:
                    v += bias[j]
                if has_res:
                    v += res[i, j]
                y[i, j] = 0.5 * v * (1.0 + _tanh(GELU_TANH_C * (v + 0.044715 * v * v * v)))
        else:
            for j in range(j0, j1):
                v = y[i, j] + row_bias
                if col_bias:
                    v += bias[j]
                if has_res:
                    v += res[i, j]
                y[i, j] = _act(v, act, alpha)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _gelu_row32(r, b, res, act):  # type: ignore[no-untyped-def]
    """One float32 row (1-D, contiguous): ``r = gelu(r + b + res)`` (``b``/``res`` empty when
    absent), ``act`` 7 (erf form) or 8 (tanh form), in float64 arithmetic as :func:`_act`.
    Written with selects and no ``min``/``max`` or per-element branches so that LLVM
    vectorises it: the generic loop of :func:`_epilogue_2d` runs one element at a time
    (measured ~5x slower on a GPT-2 MLP output)."""
    tanh_clamp, erf_clamp = TANH_CLAMP, ERF_CLAMP
    n = r.shape[0]
    if b.shape[0] > 0:
        for j in range(n):
            r[j] += b[j]
    if res.shape[0] > 0:
        for j in range(n):
            r[j] += res[j]
    if act == 8:
        for j in range(n):
            v = float(r[j])
            x = GELU_TANH_C * (v + 0.044715 * v * v * v)
            t = x if x < tanh_clamp else tanh_clamp
            t = t if t > -tanh_clamp else -tanh_clamp
            u = t * t
            p = _T0 + u * (_T1 + u * (_T2 + u * (_T3 + u * (_T4 + u * (_T5 + u * _T6)))))
            q = _U0 + u * (_U1 + u * (_U2 + u * _U3))
            th = t * p / q
            th = 1.0 if x >= tanh_clamp else th
            th = -1.0 if x <= -tanh_clamp else th
            r[j] = 0.5 * v * (1.0 + th)
    else:
        for j in range(n):
            v = float(r[j])
            x = v * SQRT_HALF
            t = x if x < erf_clamp else erf_clamp
            t = t if t > -erf_clamp else -erf_clamp
            u = t * t
            p = _P0 + u * (_P1 + u * (_P2 + u * (_P3 + u * (_P4 + u * (_P5 + u * (_P6
                                                                            + u * _P7))))))
            q = _Q0 + u * (_Q1 + u * (_Q2 + u * (_Q3 + u * _Q4)))
            e = t * p / q
            e = 1.0 if x >= erf_clamp else e
            e = -1.0 if x <= -erf_clamp else e
            r[j] = 0.5 * v * (1.0 + e)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _gelu_2d32(y, bias, res, act, j0, j1):  # type: ignore[no-untyped-def]
    """:func:`_gelu_row32` on columns ``j0:j1`` of every row of a C-contiguous float32 ``y``
    (``res`` C-contiguous too, or ``(0, 0)``)."""
    b = bias[j0:j1] if bias.shape[0] > 0 else bias
    empty = np.empty(0, np.float32)
    for i in range(y.shape[0]):
        ri = res[i, j0:j1] if res.shape[0] > 0 else empty
        _gelu_row32(y[i, j0:j1], b, ri, act)


def epilogue_2d(
    y: np.ndarray,
    bias: np.ndarray | None,
    residual: np.ndarray | None,
    code: int,
    alpha: float,
    bias_rows: bool = False,
    cols: tuple[int, int] | None = None,
) -> None:
    """``y[i, j] = act(y[i, j] + bias[j] + residual[i, j])`` in place (with ``cols``, only
    for the columns ``cols[0] <= j < cols[1]``: a tile of a C-contiguous ``y`` without the slow
    strided loop a column slice would compile to).

    ``y`` is 2-D float (any strides, fastest along rows when C-contiguous); ``bias`` is
    ``(K,)`` along columns, or with ``bias_rows`` indexed by ``i % len(bias)`` (an NCHW output
    viewed as ``(N * C, H * W)``); ``residual`` is ``(M, K)`` (any strides).  Operands are
    optional and of ``y``'s dtype (callers check shapes and cast).
    """
    if code == 0 and bias is None and residual is None:
        return
    if code == 7 and y.dtype == np.float64:
        code = GELU_EXACT
    elif code == 8 and y.dtype == np.float64:
        code = GELU_TANH_EXACT
    j0, j1 = (0, y.shape[1]) if cols is None else cols
    mod = _epilogue_native.native()
    if mod is not None and mod.epilogue(y, bias, residual, code, float(alpha), bias_rows, j0, j1):
        return
    b = bias if bias is not None else np.empty(0, dtype=y.dtype)
    r = residual if residual is not None else np.empty((0, 0), dtype=y.dtype)
    if ((code == 7 or code == 8) and y.dtype == np.float32 and not bias_rows
            and y.flags.c_contiguous and r.flags.c_contiguous and r.dtype == np.float32
            and b.dtype == np.float32 and b.flags.c_contiguous):
        _gelu_2d32(y, b, r, code, j0, j1)
        return
    _epilogue_2d(y, b, r, code, float(alpha), bias_rows, j0, j1)
