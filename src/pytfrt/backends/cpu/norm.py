"""Normalisations: softmax, log-softmax, layer norm and inference batch norm.

The compute functions of the graph dialect's ``softmax``, ``log_softmax``, ``layer_norm`` and
``batch_norm`` (``docs/graph_dialect.md``).  All are numerically safe (softmax subtracts the
maximum; norms use ``1 / sqrt(var + eps)``), keep the input's float dtype (float16 computes in
float32) and accept ``out=`` (any array of the result's shape and dtype, may be ``x`` itself).
Thread-safety: pure functions writing only ``out``.  Errors:
:class:`pytfrt.backends.cpu.ops.OpError`.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._geometry import check_out
from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu.ops import OpError


def _check_float(op: str, x: np.ndarray) -> np.dtype:
    if not isinstance(x, np.ndarray) or not np.issubdtype(x.dtype, np.floating):
        raise OpError(f"{op}: needs a float array, got {getattr(x, 'dtype', type(x).__name__)}")
    return np.dtype(np.float32) if x.dtype == np.float16 else x.dtype


def _axis(op: str, axis: int, ndim: int) -> int:
    if not isinstance(axis, int | np.integer) or not -ndim <= axis < max(ndim, 1):
        raise OpError(f"{op}: axis {axis} is out of range for rank {ndim}")
    return int(axis) % max(ndim, 1)


def _finish(y: np.ndarray, x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    if out is None:
        return y.astype(x.dtype, copy=False)
    np.copyto(out, y, casting="same_kind")
    return out


def _shifted(
    op: str, x: np.ndarray, axis: int, out: np.ndarray | None
) -> tuple[np.ndarray, int]:
    """The checks of (log-)softmax, then ``x - max(x)`` along the axis in the working dtype."""
    work = _check_float(op, x)
    ax = _axis(op, axis, x.ndim)
    check_out(op, out, x.shape, x.dtype)
    return np.subtract(x, np.max(x, axis=ax, keepdims=True), dtype=work), ax


def softmax(x: np.ndarray, axis: int = -1, out: np.ndarray | None = None) -> np.ndarray:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``.

    Raises:
        OpError: a non-float ``x``, an axis out of range, a bad ``out``.
    """
    y, ax = _shifted("softmax", x, axis, out)
    np.exp(y, out=y)
    y /= np.sum(y, axis=ax, keepdims=True)
    return _finish(y, x, out)


def log_softmax(x: np.ndarray, axis: int = -1, out: np.ndarray | None = None) -> np.ndarray:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``.

    Raises:
        OpError: a non-float ``x``, an axis out of range, a bad ``out``.
    """
    y, ax = _shifted("log_softmax", x, axis, out)
    y -= np.log(np.sum(np.exp(y), axis=ax, keepdims=True))
    return _finish(y, x, out)


def layer_norm(
    x: np.ndarray,
    gamma: np.ndarray | None,
    beta: np.ndarray | None,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Normalise over dims ``axis .. rank-1``: ``(x - mean) / sqrt(var + eps) * gamma + beta``.

    ``gamma`` and ``beta`` (either may be ``None``) broadcast against ``x.shape[axis:]``.  The
    variance is the biased one (divide by the count), as TensorFlow, ONNX and PyTorch.

    Raises:
        OpError: a non-float ``x``, an axis out of range, gamma/beta that do not broadcast to
            the normalised dims, a bad ``out``.
    """
    op = "layer_norm"
    work = _check_float(op, x)
    ax = _axis(op, axis, x.ndim)
    check_out(op, out, x.shape, x.dtype)
    tail = x.shape[ax:]
    for name, p in (("gamma", gamma), ("beta", beta)):
        if p is None:
            continue
        try:
            ok = np.broadcast_shapes(np.shape(p), tail) == tail
        except ValueError:
            ok = False
        if not ok:
            raise OpError(
                f"{op}: {name} of shape {list(np.shape(p))} does not broadcast to the "
                f"normalised dims {list(tail)}"
            )
    if (ax == x.ndim - 1 and x.dtype == np.float32 and x.flags.c_contiguous and x.size
            and (out is None or (out.flags.c_contiguous and out.dtype == np.float32))):
        d = x.shape[-1]
        g, b = (_NONE if p is None else np.ascontiguousarray(p, np.float32).reshape(-1)
                for p in (gamma, beta))
        if g.size in (0, d) and b.size in (0, d):  # else a broadcast parameter: NumPy below
            y = np.empty_like(x) if out is None else out
            _layer_norm_rows(x.reshape(-1, d), g, b, float(epsilon), y.reshape(-1, d))
            return y
    axes = tuple(range(ax, x.ndim))
    xw = x.astype(work, copy=False)
    mean = np.mean(xw, axis=axes, keepdims=True)
    y = xw - mean
    var = np.mean(np.square(y), axis=axes, keepdims=True)
    y *= 1.0 / np.sqrt(var + work.type(epsilon))
    if gamma is not None:
        y *= np.asarray(gamma, dtype=work)
    if beta is not None:
        y += np.asarray(beta, dtype=work)
    return _finish(y, x, out)


_NONE = np.empty(0, np.float32)


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _layer_norm_rows(x, gamma, beta, eps, y):  # type: ignore[no-untyped-def]
    """Layer norm of each row of the float32 ``x (rows, d)`` into ``y`` (may be ``x``):
    mean and biased variance accumulated in float64 (two passes over the row while it is in
    cache), then ``(x - mean) * rsqrt(var + eps) * gamma + beta`` (``gamma``/``beta``:
    ``(d,)`` or ``(0,)`` when absent).  One call instead of NumPy's half-dozen passes and
    temporaries (the reassociated sums vectorise)."""
    rows, d = x.shape
    for i in range(rows):
        xi = x[i]
        s = 0.0
        for j in range(d):
            s += xi[j]
        mean = s / d
        q = 0.0
        for j in range(d):
            c = xi[j] - mean
            q += c * c
        inv = 1.0 / np.sqrt(q / d + eps)
        yi = y[i]
        m32, inv32 = np.float32(mean), np.float32(inv)
        if gamma.shape[0] > 0 and beta.shape[0] > 0:
            for j in range(d):
                yi[j] = (xi[j] - m32) * inv32 * gamma[j] + beta[j]
        elif gamma.shape[0] > 0:
            for j in range(d):
                yi[j] = (xi[j] - m32) * inv32 * gamma[j]
        elif beta.shape[0] > 0:
            for j in range(d):
                yi[j] = (xi[j] - m32) * inv32 + beta[j]
        else:
            for j in range(d):
                yi[j] = (xi[j] - m32) * inv32


def batch_norm(
    x: np.ndarray,
    scale: np.ndarray,
    offset: np.ndarray,
    mean: np.ndarray,
    variance: np.ndarray,
    *,
    epsilon: float = 1e-3,
    axis: int = -1,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Inference batch norm: ``(x - mean) * scale / sqrt(variance + eps) + offset``.

    The four parameters are 1-D of length ``x.shape[axis]`` (the channel axis: ``-1`` for
    NHWC, ``1`` for NCHW).  Computed as ``x * a + b`` with per-channel ``a`` and ``b``
    (rounding differs from the textbook order by a few ulps).

    Raises:
        OpError: a non-float ``x``, an axis out of range, parameters of the wrong length.
    """
    op = "batch_norm"
    work = _check_float(op, x)
    ax = _axis(op, axis, x.ndim)
    check_out(op, out, x.shape, x.dtype)
    c = x.shape[ax]
    params = []
    for name, p in (("scale", scale), ("offset", offset), ("mean", mean), ("variance", variance)):
        arr = np.asarray(p)
        if arr.size != c or arr.ndim > 1:
            raise OpError(
                f"{op}: {name} must be 1-D of length {c} (the channel axis {ax} of "
                f"{list(x.shape)}), got shape {list(arr.shape)}"
            )
        params.append(arr.reshape(c).astype(np.float64))
    s, o, m, v = params
    a = s / np.sqrt(v + float(epsilon))
    b = o - m * a
    bshape = [1] * x.ndim
    bshape[ax] = c
    a_w = a.astype(work).reshape(bshape)
    b_w = b.astype(work).reshape(bshape)
    if out is not None and out.dtype == work:
        np.multiply(x, a_w, out=out)
        out += b_w
        return out
    y = x * a_w
    y += b_w
    return _finish(y, x, out)
