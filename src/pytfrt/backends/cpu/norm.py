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

from pytfrt.backends.cpu import _layer_norm_native
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
    if (type(x) is np.ndarray and x.dtype == np.float32 and x.ndim and x.size
            and axis in (-1, x.ndim - 1) and x.flags.c_contiguous
            and (out is None or (type(out) is np.ndarray and out.dtype == np.float32
                                 and out.shape == x.shape and out.flags.c_contiguous))):
        d = x.shape[-1]
        g, b = _vector(gamma, d), _vector(beta, d)
        if g is not None and b is not None:  # the common case, without the general checks
            y = np.empty_like(x) if out is None else out
            _norm_rows(x.reshape(-1, d), g, b, float(epsilon), y.reshape(-1, d))
            return y
    op = "layer_norm"
    work = _check_float(op, x)
    ax = _axis(op, axis, x.ndim)
    check_out(op, out, x.shape, x.dtype)
    rows = _row_params(op, x, ax, gamma, beta)
    if rows is not None and (out is None or (out.flags.c_contiguous
                                             and out.dtype == np.float32)):
        d = x.shape[-1]
        y = np.empty_like(x) if out is None else out
        _norm_rows(x.reshape(-1, d), *rows, float(epsilon), y.reshape(-1, d))
        return y
    return _layer_norm_numpy(x, gamma, beta, ax, epsilon, work, out)


def _norm_rows(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float,
               y: np.ndarray) -> None:
    """:func:`_layer_norm_rows` through :mod:`pytfrt.backends.cpu._layer_norm_native`'s C
    loops where they are built, else the Numba loops."""
    native = _layer_norm_native.module()
    if native is not None:
        native.rows(x, gamma, beta, eps, y)
    else:
        _layer_norm_rows(x, gamma, beta, eps, y)


def _add_norm_rows(a: np.ndarray, b: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                   eps: float, s: np.ndarray, y: np.ndarray) -> None:
    """:func:`_add_layer_norm_rows` through the C loops where they are built (as
    :func:`_norm_rows`)."""
    native = _layer_norm_native.module()
    if native is not None:
        native.add_rows(a, b, gamma, beta, eps, s, y)
    else:
        _add_layer_norm_rows(a, b, gamma, beta, eps, s, y)


def _vector(p: np.ndarray | None, d: int) -> np.ndarray | None:
    """``p`` itself if it is the row kernels' form already (absent, or a C-contiguous float32
    vector of length ``d``), else ``None``."""
    if p is None:
        return _NONE
    if (type(p) is np.ndarray and p.dtype == np.float32 and p.shape == (d,)
            and p.flags.c_contiguous):
        return p
    return None


def _row_params(op: str, x: np.ndarray, ax: int, gamma: np.ndarray | None,
                beta: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Check that ``gamma``/``beta`` broadcast to ``x.shape[ax:]``; return them as float32
    vectors (``_NONE`` when absent) when the row kernels apply -- float32 C-contiguous ``x``
    normalised over its last axis, parameters of that axis's length -- else ``None``.

    Raises:
        OpError: a parameter that does not broadcast to the normalised dims.
    """
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
    if not (ax == x.ndim - 1 and x.dtype == np.float32 and x.flags.c_contiguous and x.size):
        return None
    d = x.shape[-1]
    g, b = (_NONE if p is None else np.ascontiguousarray(p, np.float32).reshape(-1)
            for p in (gamma, beta))
    if g.size in (0, d) and b.size in (0, d):  # else a broadcast parameter: NumPy
        return g, b
    return None


def _layer_norm_numpy(x: np.ndarray, gamma: np.ndarray | None, beta: np.ndarray | None,
                      ax: int, epsilon: float, work: np.dtype,
                      out: np.ndarray | None) -> np.ndarray:
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
def _norm_row(x, i, gamma, beta, eps, y):  # type: ignore[no-untyped-def]
    """Layer norm of row ``i`` of the float32 ``x (rows, d)`` into row ``i`` of ``y`` (may be
    ``x``): mean, then the biased variance of the centred row (two passes while it is in
    cache; float32 sums that the reassociation spreads over the vector lanes, so each lane
    adds ``d / 16`` terms: 1e-7 relative on GPT-2's rows, as float64 sums, at two-thirds of
    their time), then ``(x - mean) * rsqrt(var + eps) * gamma + beta`` (``gamma``/``beta``:
    ``(d,)`` or ``(0,)`` when absent).  The row is indexed in the 2-D arrays rather than
    sliced out of them (a row view per call cost ~30% of a ``64 x 768`` norm: 18 -> 13 us)."""
    d = x.shape[1]
    s = np.float32(0.0)
    for j in range(d):
        s += x[i, j]
    m32 = np.float32(s / np.float32(d))
    q = np.float32(0.0)
    for j in range(d):
        c = x[i, j] - m32
        q += c * c
    inv32 = np.float32(1.0 / np.sqrt(np.float64(q) / d + eps))
    if gamma.shape[0] > 0 and beta.shape[0] > 0:
        for j in range(d):
            y[i, j] = (x[i, j] - m32) * inv32 * gamma[j] + beta[j]
    elif gamma.shape[0] > 0:
        for j in range(d):
            y[i, j] = (x[i, j] - m32) * inv32 * gamma[j]
    elif beta.shape[0] > 0:
        for j in range(d):
            y[i, j] = (x[i, j] - m32) * inv32 + beta[j]
    else:
        for j in range(d):
            y[i, j] = (x[i, j] - m32) * inv32


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _layer_norm_rows(x, gamma, beta, eps, y):  # type: ignore[no-untyped-def]
    """Layer norm of each row of the float32 ``x (rows, d)`` into ``y`` (may be ``x``),
    :func:`_norm_row` per row: one call instead of NumPy's half-dozen passes and temporaries
    (the reassociated sums vectorise)."""
    for i in range(x.shape[0]):
        _norm_row(x, i, gamma, beta, eps, y)


def add_layer_norm(
    a: np.ndarray,
    b: np.ndarray,
    gamma: np.ndarray | None,
    beta: np.ndarray | None,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
) -> tuple[np.ndarray, np.ndarray]:
    """``(s, layer_norm(s))`` with ``s = a + b`` (NumPy broadcasting): a Transformer's
    residual add and the layer norm that reads the sum, both of which its graph keeps.

    Operands of one shape (float32, C-contiguous, normalised over the last axis) take one
    pass per row -- the sum written once and its statistics taken while the row is in cache
    (:func:`_add_layer_norm_rows`); other operands add with NumPy, then :func:`layer_norm`.
    Both results are new arrays.  Rounding: ``s`` is exactly NumPy's ``a + b``; the norm is
    :func:`layer_norm`'s of ``s``.

    Raises:
        OpError: non-float or mismatched operands, shapes that do not broadcast, an axis out
            of range, gamma/beta that do not broadcast to the normalised dims.
    """
    if (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == np.float32
            and b.dtype == np.float32 and a.shape == b.shape and a.ndim and a.size
            and axis in (-1, a.ndim - 1) and a.flags.c_contiguous and b.flags.c_contiguous):
        d = a.shape[-1]
        g, bt = _vector(gamma, d), _vector(beta, d)
        if g is not None and bt is not None:  # the common case, without the general checks
            s, y = np.empty_like(a), np.empty_like(a)
            _add_norm_rows(a.reshape(-1, d), b.reshape(-1, d), g, bt, float(epsilon),
                           s.reshape(-1, d), y.reshape(-1, d))
            return s, y
    op = "add_layer_norm"
    _check_float(op, a)
    if not isinstance(b, np.ndarray) or b.dtype != a.dtype:
        raise OpError(f"{op}: operands must share one float dtype, got {a.dtype} and "
                      f"{getattr(b, 'dtype', type(b).__name__)}")
    if a.shape == b.shape and a.flags.c_contiguous and b.flags.c_contiguous:
        ax = _axis(op, axis, a.ndim)
        rows = _row_params(op, a, ax, gamma, beta)
        if rows is not None:
            d = a.shape[-1]
            s = np.empty_like(a)
            y = np.empty_like(a)
            _add_norm_rows(a.reshape(-1, d), b.reshape(-1, d), *rows, float(epsilon),
                           s.reshape(-1, d), y.reshape(-1, d))
            return s, y
    try:
        s = np.add(a, b)
    except ValueError as e:
        raise OpError(f"{op}: operands of shapes {list(a.shape)} and {list(b.shape)} do not "
                      "broadcast") from e
    return s, layer_norm(s, gamma, beta, axis=axis, epsilon=epsilon)


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _add_layer_norm_rows(a, b, gamma, beta, eps, s, y):  # type: ignore[no-untyped-def]
    """``s = a + b`` row by row into ``s``, then ``y`` = the row's layer norm as
    :func:`_layer_norm_rows` computes it (float64 statistics), while the row is in cache."""
    rows, d = a.shape
    for i in range(rows):
        for j in range(d):
            s[i, j] = a[i, j] + b[i, j]
        _norm_row(s, i, gamma, beta, eps, y)


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
