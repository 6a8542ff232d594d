"""2-D max/average pooling (windowed and global) and their gradients, NHWC or NCHW.

The compute functions of the graph dialect's ``max_pool2d``, ``avg_pool2d``,
``global_avg_pool``, ``global_max_pool``, ``max_pool2d_grad`` and ``avg_pool2d_grad``
(``docs/graph_dialect.md``).  ``ksize``, ``strides`` and ``dilations`` are ``(h, w)``;
``pads`` is ``(top, bottom, left, right)``.

* Output size: ``floor((in + pads - eff_k) / stride) + 1``; with ``ceil_mode`` rounded up
  instead, except that a last window starting past the input and the leading padding is dropped
  (PyTorch's and ONNX's rule).  ``eff_k = dilation * (k - 1) + 1``.
* Max pooling ignores padding (padded cells are ``-inf``, or the dtype's minimum for integers).
* Average pooling divides by the number of cells of the window inside the input
  (``count_include_pad=False``, TensorFlow's rule) or inside the input plus its explicit pads
  (``count_include_pad=True``; cells added by ``ceil_mode`` never count).
* ``max_pool2d_grad`` routes each output gradient to the first maximum of its window in
  row-major scan order (TensorFlow's and PyTorch's choice); overlapping windows accumulate.

The windows are ``kh * kw`` strided views of the padded input (held in per-thread scratch),
reduced with NumPy ufuncs (GIL released in the loops).  ``global_avg_pool`` of float32 and
float64 runs a compiled loop (:func:`spatial_mean`): one pass over the input, contiguous
channel rows summed in float64 (NumPy's ``mean`` over two non-contiguous axes of an NHWC
array costs 10x more at batch 1).  Thread-safety: pure functions; they
write only ``out``.  Errors: :class:`pytfrt.backends.cpu.ops.OpError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pytfrt.backends.cpu import _dnnl_pool, _se_native
from pytfrt.backends.cpu._geometry import (
    check_layout,
    check_out,
    check_rank4,
    out_size,
    pair,
    quad,
)
from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu._scratch import scratch
from pytfrt.backends.cpu.ops import OpError

_Window = tuple[int, int, int, int, int, int, int, int, int, int, int, int]
"""``(kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ha, wa)``: ``ha``/``wa`` are the H and W axes."""


def _window(
    op: str,
    shape: Sequence[int],
    layout: str,
    ksize: Sequence[int],
    strides: Sequence[int] | None,
    pads: Sequence[int] | None,
    dilations: Sequence[int],
    ceil_mode: bool,
) -> _Window:
    check_layout(op, layout)
    kh, kw = pair(op, "ksize", ksize)
    sh, sw = pair(op, "strides", (1, 1) if strides is None else strides)
    dh, dw = pair(op, "dilations", dilations)
    pt, pb, pl, pr = quad(op, pads)
    ha, wa = (1, 2) if layout == "NHWC" else (2, 3)
    if len(shape) != 4:
        raise OpError(f"{op}: input must be rank 4, got shape {list(shape)}")
    oh = out_size(shape[ha], kh, sh, dh, pt, pb, ceil=ceil_mode)
    ow = out_size(shape[wa], kw, sw, dw, pl, pr, ceil=ceil_mode)
    assert oh is not None and ow is not None
    if oh <= 0 or ow <= 0:
        raise OpError(
            f"{op}: input {list(shape)} ({layout}) is smaller than the {kh}x{kw} window "
            f"(pads {[pt, pb, pl, pr]})"
        )
    if max(pt, pb) >= dh * (kh - 1) + 1 or max(pl, pr) >= dw * (kw - 1) + 1:
        # A window made only of padding has no maximum and no cell to average.
        raise OpError(f"{op}: pads {[pt, pb, pl, pr]} must be smaller than the window {kh}x{kw}")
    return kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ha, wa


def _out_shape(shape: Sequence[int], win: _Window) -> tuple[int, ...]:
    res = list(shape)
    res[win[10]], res[win[11]] = win[8], win[9]
    return tuple(res)


def _padded(x: np.ndarray, win: _Window, value: float, role: str | None = None) -> np.ndarray:
    """``x`` extended so every window tap fits: ``pt``/``pl`` before, whatever is needed after.

    With ``role`` the copy lives in this thread's scratch arena (forward passes: no allocation
    per call); only the border is filled with ``value``.
    """
    pt, pl, ha, wa = win[6], win[7], win[10], win[11]
    h, w = x.shape[ha], x.shape[wa]
    shape = _padded_shape(x.shape, win)
    if pt == pl == 0 and shape == x.shape:
        return x
    if role is None:
        xp = np.full(shape, value, dtype=x.dtype)
    else:
        xp = scratch(role, shape, x.dtype)
        hp, wp = shape[ha], shape[wa]
        xp[_index(ha, wa, slice(0, pt), slice(0, wp))] = value
        xp[_index(ha, wa, slice(pt + h, hp), slice(0, wp))] = value
        xp[_index(ha, wa, slice(pt, pt + h), slice(0, pl))] = value
        xp[_index(ha, wa, slice(pt, pt + h), slice(pl + w, wp))] = value
    xp[_index(ha, wa, slice(pt, pt + h), slice(pl, pl + w))] = x
    return xp


def _index(ha: int, wa: int, hs: slice, ws: slice) -> tuple[slice, ...]:
    idx = [slice(None)] * 4
    idx[ha], idx[wa] = hs, ws
    return tuple(idx)


def _taps(win: _Window) -> list[tuple[slice, ...]]:
    kh, kw, sh, sw, dh, dw, _, _, oh, ow, ha, wa = win
    return [
        _index(
            ha,
            wa,
            slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
            slice(j * dw, j * dw + (ow - 1) * sw + 1, sw),
        )
        for i in range(kh)
        for j in range(kw)
    ]


def _lowest(dtype: np.dtype) -> float:
    if np.issubdtype(dtype, np.floating):
        return -np.inf
    if np.issubdtype(dtype, np.integer):
        return int(np.iinfo(dtype).min)
    raise OpError(f"pooling: unsupported dtype {dtype}")


_DNNL_POOL_TYPES = (np.dtype(np.float32), np.dtype(np.uint8), np.dtype(np.int8))
"""Element types :func:`max_pool2d` runs in oneDNN (:mod:`_dnnl_pool`; u8/s8: int8 models)."""


def max_pool2d(
    x: np.ndarray,
    *,
    layout: str,
    ksize: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] = (1, 1),
    ceil_mode: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Windowed maximum (padding ignored).

    Raises:
        OpError: bad attributes, rank, dtype, an input smaller than the window, a bad ``out``.
    """
    op = "max_pool2d"
    check_rank4(op, x)
    win = _window(op, x.shape, layout, ksize, strides, pads, dilations, ceil_mode)
    return max_pool2d_window(x, layout, win, out)


def _pads_br(shape: Sequence[int], win: _Window) -> tuple[int, int]:
    """The bottom and right padding that give ``win``'s output size (ceil mode included)."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ha, wa = win
    return (max((oh - 1) * sh + dh * (kh - 1) + 1 - shape[ha] - pt, 0),
            max((ow - 1) * sw + dw * (kw - 1) + 1 - shape[wa] - pl, 0))


_Launch = Callable[[np.ndarray, np.ndarray], None]


def max_pool2d_launcher(shape: tuple[int, ...], dtype: np.dtype, layout: str, win: _Window
                        ) -> tuple[tuple[int, ...], _Launch] | None:
    """``(output shape, go(x, y))``: :func:`max_pool2d_window`'s oneDNN path prepared for
    an input of ``shape`` and ``dtype`` (``_dnnl_pool.launcher``), for a caller that keeps it
    per input shape and checks that ``x`` and ``y`` are C-contiguous, of that type and
    shapes, and do not overlap; ``None`` where that path does not apply (the caller runs
    :func:`max_pool2d_window`)."""
    if dtype not in _DNNL_POOL_TYPES or min(shape) <= 0:
        return None
    oshape = _out_shape(shape, win)
    go = _dnnl_pool.launcher(shape, oshape, dtype, layout, win, _pads_br(shape, win))
    return None if go is None else (oshape, go)


def max_pool2d_window(x: np.ndarray, layout: str, win: _Window,
                      out: np.ndarray | None = None) -> np.ndarray:
    """:func:`max_pool2d` of a rank-4 ``x`` of the shape ``win`` was made for (by
    :func:`_window`; a caller may keep it per input shape: it depends on nothing else).

    Raises:
        OpError: an unsupported dtype, a bad ``out``.
    """
    shape = _out_shape(x.shape, win)
    check_out("max_pool2d", out, shape, x.dtype)
    if x.dtype in _DNNL_POOL_TYPES and x.flags.c_contiguous and min(x.shape) > 0:
        # oneDNN's pooling primitive when installed (pytfrt.backends.cpu._dnnl_pool)
        y = (out if out is not None and out.flags.c_contiguous
             and not np.may_share_memory(x, out) else np.empty(shape, x.dtype))
        if _dnnl_pool.max_pool2d(x, y, layout, win, _pads_br(x.shape, win)):
            if out is not None and y is not out:
                out[...] = y
                return out
            return y
    xp = _padded(x, win, _lowest(x.dtype), role="pool")
    taps = _taps(win)
    y = (out if out is not None and not np.may_share_memory(x, out)
         else np.empty(shape, dtype=x.dtype))
    np.copyto(y, xp[taps[0]])
    for t in taps[1:]:
        np.maximum(y, xp[t], out=y)
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


def _counts(
    op: str, h: int, w: int, win: _Window, pads: Sequence[int] | None, include_pad: bool
) -> np.ndarray:
    """Per-output divisor ``(oh, ow)`` of average pooling (float64)."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, _, _ = win
    _, pb, _, pr = quad(op, pads)

    def along(size: int, k: int, s: int, d: int, p0: int, p1: int, n: int) -> np.ndarray:
        lo, hi = (-p0, size + p1) if include_pad else (0, size)
        start = np.arange(n)[:, None] * s - p0 + np.arange(k)[None, :] * d
        return ((start >= lo) & (start < hi)).sum(axis=1)

    ch = along(h, kh, sh, dh, pt, pb, oh)
    cw = along(w, kw, sw, dw, pl, pr, ow)
    return (ch[:, None] * cw[None, :]).astype(np.float64)


def _counts_bcast(counts: np.ndarray, ha: int) -> np.ndarray:
    return counts[None, :, :, None] if ha == 1 else counts[None, None, :, :]


def avg_pool2d(
    x: np.ndarray,
    *,
    layout: str,
    ksize: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] = (1, 1),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Windowed mean of a float array (see the module docstring for the divisor).

    Raises:
        OpError: bad attributes, rank, a non-float dtype, an input smaller than the window.
    """
    op = "avg_pool2d"
    check_rank4(op, x)
    if not np.issubdtype(x.dtype, np.floating):
        raise OpError(f"{op}: needs a float input, got {x.dtype}")
    win = _window(op, x.shape, layout, ksize, strides, pads, dilations, ceil_mode)
    counts = _counts(op, x.shape[win[10]], x.shape[win[11]], win, pads, count_include_pad)
    return avg_pool2d_window(x, win, _counts_bcast(counts, win[10]), out)


def avg_pool2d_window(x: np.ndarray, win: _Window, counts: np.ndarray,
                      out: np.ndarray | None = None) -> np.ndarray:
    """:func:`avg_pool2d` of a rank-4 float ``x`` of the shape ``win`` was made for (by
    :func:`_window`), ``counts`` its divisors broadcast over the output (float64; both depend
    on the input shape and the attributes only, so a caller may keep them per shape).

    Raises:
        OpError: a bad ``out``.
    """
    shape = _out_shape(x.shape, win)
    check_out("avg_pool2d", out, shape, x.dtype)
    xp = _padded(x, win, 0.0, role="pool")
    taps = _taps(win)
    acc = xp[taps[0]].astype(np.float32 if x.dtype == np.float16 else x.dtype)
    for t in taps[1:]:
        acc += xp[t]
    acc /= counts.astype(acc.dtype)
    if out is None:
        return acc.astype(x.dtype, copy=False)
    np.copyto(out, acc, casting="same_kind")
    return out


def _global(op: str, x: np.ndarray, layout: str, out: np.ndarray | None) -> tuple[int, int]:
    check_layout(op, layout)
    check_rank4(op, x)
    ha, wa = (1, 2) if layout == "NHWC" else (2, 3)
    if x.shape[ha] == 0 or x.shape[wa] == 0:
        raise OpError(f"{op}: input {list(x.shape)} has an empty spatial dimension")
    shape = list(x.shape)
    shape[ha] = shape[wa] = 1
    check_out(op, out, shape, x.dtype)
    return ha, wa


def global_avg_pool(x: np.ndarray, *, layout: str, out: np.ndarray | None = None) -> np.ndarray:
    """Mean over H and W, keeping them as size 1 (``N,1,1,C`` or ``N,C,1,1``)."""
    ha, wa = _global("global_avg_pool", x, layout, out)
    if not np.issubdtype(x.dtype, np.floating):
        raise OpError(f"global_avg_pool: needs a float input, got {x.dtype}")
    if x.dtype in _COMPILED_MEAN and x.size:
        n = x.shape[0]
        c = x.shape[3] if layout == "NHWC" else x.shape[1]
        shape = (n, 1, 1, c) if layout == "NHWC" else (n, c, 1, 1)
        y = out if out is not None and out.flags.c_contiguous else np.empty(shape, x.dtype)
        spatial_mean(x, layout == "NHWC", y.reshape(n, c))
        if out is not None and y is not out:
            out[...] = y
            return out
        return y
    return np.mean(x, axis=(ha, wa), keepdims=True, out=out)


_COMPILED_MEAN = (np.dtype(np.float32), np.dtype(np.float64))


def spatial_mean(x: np.ndarray, nhwc: bool, y: np.ndarray) -> None:
    """``y[n, c]`` = the mean of ``x`` (rank 4, NHWC if ``nhwc`` else NCHW, float32/float64,
    any strides) over H and W, summed in float64; ``y`` is ``(N, C)`` of ``x``'s dtype.  Runs
    without the GIL; writes only ``y``."""
    xc = np.ascontiguousarray(x)
    n, c = xc.shape[0], xc.shape[3] if nhwc else xc.shape[1]
    native = _se_native.module() if xc.dtype == np.float32 and y.flags.c_contiguous else None
    (native.spatial_mean if native is not None else _spatial_mean)(
        xc.reshape((n, -1, c) if nhwc else (n, c, -1)), nhwc, y)


@numba.njit(nogil=True, cache=True, fastmath=True, inline="always")
def channel_sums(x, b, nhwc, acc):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``acc[c]`` = the float64 sum over pixels of batch row ``b`` of ``x``: ``(N, P, C)``
    if ``nhwc`` (vectorised over the contiguous channels) else ``(N, C, P)``."""
    if nhwc:
        acc[:] = 0.0
        for p in range(x.shape[1]):
            for c in range(x.shape[2]):
                acc[c] += x[b, p, c]
    else:
        for c in range(x.shape[1]):
            t = 0.0
            for p in range(x.shape[2]):
                t += x[b, c, p]
            acc[c] = t


@numba.njit(nogil=True, cache=True, fastmath=True)
def _spatial_mean(x, nhwc, y):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    npix = x.shape[1] if nhwc else x.shape[2]
    acc = np.empty(y.shape[1], np.float64)
    for b in range(x.shape[0]):
        channel_sums(x, b, nhwc, acc)
        for c in range(y.shape[1]):
            y[b, c] = acc[c] / npix


def global_max_pool(x: np.ndarray, *, layout: str, out: np.ndarray | None = None) -> np.ndarray:
    """Maximum over H and W, keeping them as size 1 (``N,1,1,C`` or ``N,C,1,1``)."""
    ha, wa = _global("global_max_pool", x, layout, out)
    return np.amax(x, axis=(ha, wa), keepdims=True, out=out)


def max_pool2d_grad(
    x: np.ndarray,
    y: np.ndarray,
    dy: np.ndarray,
    *,
    layout: str,
    ksize: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] = (1, 1),
    ceil_mode: bool = False,
) -> np.ndarray:
    """The gradient of :func:`max_pool2d` with respect to ``x``, given its output ``y``.

    Raises:
        OpError: ``y`` or ``dy`` not of the pooled shape, or differing dtypes.
    """
    op = "max_pool2d_grad"
    check_rank4(op, x)
    win = _window(op, x.shape, layout, ksize, strides, pads, dilations, ceil_mode)
    shape = _out_shape(x.shape, win)
    for name, arr in (("y", y), ("dy", dy)):
        if not isinstance(arr, np.ndarray) or arr.shape != shape or arr.dtype != x.dtype:
            raise OpError(
                f"{op}: {name} must have the pooled shape {list(shape)} and dtype {x.dtype}, "
                f"got {list(getattr(arr, 'shape', ()))} {getattr(arr, 'dtype', None)}"
            )
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ha, wa = win
    if ha == 1:  # NHWC: one compiled pass (the same routing)
        from pytfrt.backends.cpu._pool_bwd import max_pool2d_grad_nhwc

        fast = max_pool2d_grad_nhwc(x, y, dy, (kh, kw, sh, sw, dh, dw, pt, pl))
        if fast is not None:
            return fast
    xp = _padded(x, win, _lowest(x.dtype))
    dxp = np.zeros(xp.shape, dtype=x.dtype)
    taken = np.zeros(shape, dtype=bool)
    for t in _taps(win):
        hit = xp[t] == y
        hit &= ~taken
        taken |= hit
        dxp[t] += np.where(hit, dy, 0)
    return np.ascontiguousarray(
        dxp[_index(ha, wa, slice(pt, pt + x.shape[ha]), slice(pl, pl + x.shape[wa]))]
    )


def avg_pool2d_grad(
    input_shape: Sequence[int] | np.ndarray,
    dy: np.ndarray,
    *,
    layout: str,
    ksize: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] = (1, 1),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
) -> np.ndarray:
    """The gradient of :func:`avg_pool2d` with respect to its input (of ``input_shape``).

    Raises:
        OpError: ``dy`` not of the pooled shape of ``input_shape``, bad attributes.
    """
    op = "avg_pool2d_grad"
    in_shape = tuple(int(v) for v in np.asarray(input_shape).reshape(-1))
    win = _window(op, in_shape, layout, ksize, strides, pads, dilations, ceil_mode)
    shape = _out_shape(in_shape, win)
    if not isinstance(dy, np.ndarray) or dy.shape != shape:
        raise OpError(
            f"{op}: dy must have the pooled shape {list(shape)}, got "
            f"{list(getattr(dy, 'shape', ()))}"
        )
    if not np.issubdtype(dy.dtype, np.floating):
        raise OpError(f"{op}: needs a float dy, got {dy.dtype}")
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ha, wa = win
    counts = _counts(op, in_shape[ha], in_shape[wa], win, pads, count_include_pad)
    share = dy / _counts_bcast(counts, ha).astype(dy.dtype)
    dxp = np.zeros(_padded_shape(in_shape, win), dtype=dy.dtype)
    for t in _taps(win):
        dxp[t] += share
    return np.ascontiguousarray(
        dxp[_index(ha, wa, slice(pt, pt + in_shape[ha]), slice(pl, pl + in_shape[wa]))]
    )


def _padded_shape(in_shape: Sequence[int], win: _Window) -> tuple[int, ...]:
    """The input's shape with leading pads and room for every window tap after it."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ha, wa = win
    shape = list(in_shape)
    shape[ha] = max((oh - 1) * sh + dh * (kh - 1) + 1, pt + in_shape[ha])
    shape[wa] = max((ow - 1) * sw + dw * (kw - 1) + 1, pl + in_shape[wa])
    return tuple(shape)
