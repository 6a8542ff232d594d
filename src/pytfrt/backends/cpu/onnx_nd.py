"""Compute functions of the ``onnx_nd`` catalogue family (``pytfrt.compiler.ops.onnx_nd``).

ONNX's N-dimensional resampling and pooling, for the cases the 2-D NCHW kernels
(``resize``, ``max_pool2d``, ``avg_pool2d``) do not cover:

* :func:`resize_nd` -- ``Resize`` on any rank, every mode (nearest, linear, cubic), every
  coordinate transformation (``tf_crop_and_resize`` with its ``roi`` and extrapolation value,
  ``half_pixel_symmetric``...), ``antialias`` and ``exclude_outside``.  ONNX's interpolation is
  separable, so it is one weight matrix ``[out, in]`` per resized axis, applied with
  ``tensordot`` (the matrices are cached per geometry).
* :func:`pool_nd` -- ``MaxPool``/``AveragePool``/``LpPool`` on any number of spatial axes,
  with dilations, explicit pads and ``ceil_mode``: one strided view per kernel offset; also
  ``MaxPool``'s ``Indices`` output (``kind = "argmax"``);
* :func:`max_unpool` -- ``MaxUnpool``: the values put back at the indices ``MaxPool`` gave.

Same conventions as :mod:`pytfrt.backends.cpu.onnx_kernels`: operands positional, attributes
keyword-only, new arrays returned (operands are never written), pure functions (thread-safe;
the weight cache is an ``lru_cache``).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any, Literal

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function."""


def _cubic(s: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient ``a`` at distances ``s``."""
    s = np.abs(s)
    near = ((a + 2) * s - (a + 3)) * s * s + 1
    far = ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return np.where(s <= 1, near, np.where(s < 2, far, 0.0))


def _source_coordinate(x: float, n_in: int, n_out: int, scale: float, ctm: str,
                       roi: tuple[float, float]) -> float:
    """Where output index ``x`` samples the input (ONNX's coordinate transformations)."""
    out_f = scale * n_in
    if ctm == "align_corners":
        return 0.0 if out_f == 1 else x * (n_in - 1) / (out_f - 1)
    if ctm == "asymmetric":
        return x / scale
    if ctm == "tf_crop_and_resize":
        lo, hi = roi
        if n_out == 1:
            return (hi - lo) * (n_in - 1) / 2 + lo * (n_in - 1)
        return x * (hi - lo) * (n_in - 1) / (n_out - 1) + lo * (n_in - 1)
    if ctm == "pytorch_half_pixel":
        return -0.5 if out_f == 1 else (x + 0.5) / scale - 0.5
    if ctm == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / out_f)
        return offset + (x + 0.5) / scale - 0.5
    return (x + 0.5) / scale - 0.5  # half_pixel


def _nearest(x: float, mode: str) -> int:
    base = math.floor(x)
    r = x - base
    if r == 0:
        return base
    up = {"round_prefer_floor": r > 0.5, "round_prefer_ceil": r >= 0.5, "floor": False,
          "ceil": True}[mode]
    return base + int(up)


@functools.lru_cache(maxsize=256)
def _weights(n_in: int, n_out: int, scale: float, mode: str, ctm: str, nearest_mode: str,
             a: float, exclude_outside: bool, antialias: bool, roi: tuple[float, float]
             ) -> tuple[np.ndarray, np.ndarray]:
    """``(W [n_out, n_in], outside [n_out] bool)``: the 1-D interpolation along one axis."""
    w = np.zeros((n_out, n_in))
    outside = np.zeros(n_out, bool)
    aa = antialias and mode != "nearest" and scale < 1
    support = 1.0 if mode == "linear" else 2.0
    width = 1.0 if not aa else scale  # the kernel is stretched by 1/scale when downsampling
    n_taps = -2 * math.floor(-support / width)  # 2 (linear), 4 (cubic), more when widened
    for i in range(n_out):
        x = _source_coordinate(i, n_in, n_out, scale, ctm, roi)
        if ctm == "tf_crop_and_resize" and not 0 <= x <= n_in - 1:
            outside[i] = True
            continue
        if mode == "nearest":
            w[i, min(max(_nearest(x, nearest_mode), 0), n_in - 1)] = 1.0
            continue
        # the n_taps integers nearest x (ties to the lower one), as ONNX's reference picks them
        base = math.floor(x) if x != math.floor(x) else int(x) - 1
        taps = np.arange(base - n_taps // 2 + 1, base + n_taps // 2 + 1)
        d = (taps - x) * width
        k = np.clip(1 - np.abs(d), 0, 1) if mode == "linear" else _cubic(d, a)
        if exclude_outside:
            k = np.where((taps < 0) | (taps >= n_in), 0.0, k)
        if exclude_outside or aa:
            k = k / k.sum()
        np.add.at(w[i], np.clip(taps, 0, n_in - 1), k)
    w.setflags(write=False)
    outside.setflags(write=False)
    return w, outside


@GRAPH_OPS.op("resize_nd")
def resize_nd(x: np.ndarray, *, sizes: tuple[int, ...], scales: tuple[float, ...],
              roi: tuple[float, ...], mode: str, coordinate_transformation_mode: str,
              nearest_mode: str, cubic_coeff_a: float, exclude_outside: bool, antialias: bool,
              extrapolation_value: float) -> np.ndarray:
    """ONNX ``Resize`` of ``x`` to ``sizes`` (one per axis), ``scales`` the per-axis scale
    the coordinate transformation uses, ``roi`` ``(starts..., ends...)`` for
    ``tf_crop_and_resize`` (empty otherwise)."""
    if len(sizes) != x.ndim or len(scales) != x.ndim:
        raise OpError(f"resize_nd: sizes {sizes} and scales {scales} must give one value per "
                      f"axis of a rank-{x.ndim} input")
    ctm = coordinate_transformation_mode
    wide = np.float64 if x.dtype == np.float64 else np.float32
    y = x.astype(wide)
    out_mask = np.zeros((), bool)
    for ax, (n_in, n_out, sc) in enumerate(zip(x.shape, sizes, scales, strict=True)):
        r = (float(roi[ax]), float(roi[ax + x.ndim])) if roi else (0.0, 1.0)
        if n_out == n_in and sc == 1.0 and ctm != "tf_crop_and_resize":
            continue
        if n_in == 0:
            raise OpError("resize_nd: resizing an empty axis")
        w, outside = _weights(n_in, n_out, float(sc), mode, ctm, nearest_mode,
                              float(cubic_coeff_a), bool(exclude_outside), bool(antialias), r)
        y = np.moveaxis(np.tensordot(w.astype(wide), y, axes=([1], [ax])), 0, ax)  # type: ignore[type-var]
        if outside.any():
            shape = [1] * x.ndim
            shape[ax] = n_out
            out_mask = out_mask | outside.reshape(shape)
    if np.any(out_mask):
        y = np.where(out_mask, wide(extrapolation_value), y)
    if x.dtype.kind in "iub":
        info = np.iinfo(x.dtype) if x.dtype.kind != "b" else None
        y = np.rint(y)
        if info is not None:
            y = np.clip(y, info.min, info.max)
    return np.asarray(y.astype(x.dtype))


def pool_out_size(size: int, k: int, stride: int, dilation: int, pad_begin: int, pad_end: int,
                  ceil_mode: bool) -> int:
    """The number of pooling windows along one axis (ONNX's rule: with ``ceil_mode``, a last
    window that would start in the end padding is dropped)."""
    total = size + pad_begin + pad_end - ((k - 1) * dilation + 1)
    n = (-(-total // stride) if ceil_mode else total // stride) + 1
    if ceil_mode and (n - 1) * stride >= size + pad_begin:
        n -= 1
    return max(n, 0)


@GRAPH_OPS.op("pool_nd")
def pool_nd(x: np.ndarray, *, kind: str, kernel: tuple[int, ...], strides: tuple[int, ...],
            dilations: tuple[int, ...], pads: tuple[int, ...], ceil_mode: bool,
            count_include_pad: bool, p: int, storage_order: int = 0) -> np.ndarray:
    """Pooling of ``x`` ``[N, C, *spatial]`` over windows ``kernel`` (``kind``: ``max``,
    ``avg``, ``lp`` or ``argmax``); ``pads`` ``(begins..., ends...)``.  Windows reaching past
    the padding (``ceil_mode``) count only what they cover.  ``argmax``: ONNX ``MaxPool``'s
    ``Indices``, the int64 position of each window's first maximum in the flattened input
    (``storage_order`` 0: row-major, 1: the spatial axes column-major), batch and channel
    offsets included."""
    nd = x.ndim - 2
    if not (len(kernel) == len(strides) == len(dilations) == nd and len(pads) == 2 * nd):
        raise OpError(f"pool_nd: kernel/strides/dilations/pads do not fit {nd} spatial axes")
    spatial = x.shape[2:]
    out = [pool_out_size(spatial[i], kernel[i], strides[i], dilations[i], pads[i], pads[i + nd],
                         ceil_mode) for i in range(nd)]
    # a canvas holding the input at offset pads[:nd], large enough for every window
    ext = [(out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 for i in range(nd)]
    canvas_shape = [max(ext[i], pads[i] + spatial[i]) for i in range(nd)]
    inside = tuple(slice(pads[i], pads[i] + spatial[i]) for i in range(nd))
    valid = np.zeros(canvas_shape, bool)
    valid[inside] = True
    counted = valid.copy()
    if count_include_pad:  # the explicit padding counts, what lies past it does not
        counted[tuple(slice(0, min(pads[i] + spatial[i] + pads[i + nd], canvas_shape[i]))
                      for i in range(nd))] = True
    if kind == "argmax":
        return _pool_argmax(x, kernel, strides, dilations, out, canvas_shape, inside,
                            storage_order)
    if kind == "max":
        low = (np.asarray(-np.inf, x.dtype) if x.dtype.kind == "f"
               else np.asarray(np.iinfo(x.dtype).min, x.dtype))
        canvas = np.full(x.shape[:2] + tuple(canvas_shape), low, x.dtype)
        acc = np.full(x.shape[:2] + tuple(out), low, x.dtype)
    else:
        wide = np.float64 if x.dtype == np.float64 else np.float32
        canvas = np.zeros(x.shape[:2] + tuple(canvas_shape), wide)
        acc = np.zeros(x.shape[:2] + tuple(out), wide)
        count = np.zeros(tuple(out))
    canvas[(slice(None), slice(None), *inside)] = x if kind != "lp" else np.abs(x) ** p
    for offs in itertools.product(*(range(k) for k in kernel)):
        sl = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                   for o, d, n, s in zip(offs, dilations, out, strides, strict=True))
        win = canvas[(slice(None), slice(None), *sl)]
        if kind == "max":
            np.maximum(acc, win, out=acc)
        else:
            acc += win
            count += counted[sl]
    if kind == "avg":
        acc = acc / np.maximum(count, 1)
    elif kind == "lp":
        acc = acc ** (1.0 / p)
    return np.asarray(acc.astype(x.dtype))


def _pool_argmax(x: np.ndarray, kernel: tuple[int, ...], strides: tuple[int, ...],
                 dilations: tuple[int, ...], out: list[int], canvas_shape: list[int],
                 inside: tuple[slice, ...], storage_order: int) -> np.ndarray:
    """:func:`pool_nd`'s ``argmax`` (the windows scanned in row-major order; a later element
    wins only if strictly greater, as ONNX Runtime's kernel does)."""
    spatial = x.shape[2:]
    canvas = np.full(x.shape[:2] + tuple(canvas_shape), -np.inf, np.float64)
    canvas[(slice(None), slice(None), *inside)] = x
    where = np.full(tuple(canvas_shape), -1, np.int64)  # spatial flat position, -1 = padding
    order: Literal["C", "F"] = "F" if storage_order else "C"
    where[inside] = np.arange(math.prod(spatial)).reshape(spatial, order=order)
    best = np.full(x.shape[:2] + tuple(out), -np.inf, np.float64)
    arg = np.full(x.shape[:2] + tuple(out), -1, np.int64)
    for offs in itertools.product(*(range(k) for k in kernel)):
        sl = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                   for o, d, n, s in zip(offs, dilations, out, strides, strict=True))
        win = canvas[(slice(None), slice(None), *sl)]
        better = win > best
        best = np.where(better, win, best)
        arg = np.where(better, where[sl], arg)
    nc = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2])
    offset = nc.reshape(nc.shape + (1,) * len(out)) * math.prod(spatial)
    return np.asarray(arg + offset)


def unpool_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int) -> int:
    """The size ``MaxUnpool`` infers along one spatial axis (the input ``MaxPool`` had)."""
    return (size - 1) * stride - pad_begin - pad_end + k


@GRAPH_OPS.op("max_unpool")
def max_unpool(x: np.ndarray, indices: np.ndarray, *, kernel: tuple[int, ...],
               strides: tuple[int, ...], pads: tuple[int, ...],
               output: tuple[int, ...] = ()) -> np.ndarray:
    """ONNX ``MaxUnpool``: zeros of ``[N, C, *inferred]`` (the size ``MaxPool``'s input had,
    :func:`unpool_size`) with ``x``'s values at the flat positions ``indices`` (``MaxPool``'s
    ``Indices``); then, for an explicit ``output`` spatial size, that block at the start of
    zeros of ``[N, C, *output]`` (ONNX's reference; ONNX Runtime instead reads the indices as
    positions in the larger output)."""
    nd = x.ndim - 2
    if indices.shape != x.shape:
        raise OpError(f"max_unpool: indices {indices.shape} do not match x {x.shape}")
    if not (len(kernel) == len(strides) == nd and len(pads) == 2 * nd):
        raise OpError(f"max_unpool: kernel/strides/pads do not fit {nd} spatial axes")
    inferred = tuple(unpool_size(x.shape[2 + i], kernel[i], strides[i], pads[i], pads[i + nd])
                     for i in range(nd))
    shape = x.shape[:2] + inferred
    total = math.prod(shape)
    flat = indices.reshape(-1).astype(np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= total):
        raise OpError(f"max_unpool: indices out of range [0, {total}) for output {shape}")
    y = np.zeros(total, x.dtype)
    y[flat] = x.reshape(-1)
    if not output or tuple(output) == inferred:
        return y.reshape(shape)
    if len(output) != nd or any(o < i for o, i in zip(output, inferred, strict=True)):
        raise OpError(f"max_unpool: output size {list(output)} is smaller than the unpooled "
                      f"size {list(inferred)}")
    res = np.zeros(x.shape[:2] + tuple(output), x.dtype)
    res[(slice(None), slice(None), *(slice(0, i) for i in inferred))] = y.reshape(shape)
    return res


@GRAPH_OPS.op("col2im")
def col2im(x: np.ndarray, *, image_shape: tuple[int, ...], block_shape: tuple[int, ...],
           strides: tuple[int, ...], dilations: tuple[int, ...], pads: tuple[int, ...]
           ) -> np.ndarray:
    """ONNX ``Col2Im``: columns ``[N, C * prod(block), L]`` summed back into images
    ``[N, C, *image_shape]`` (the inverse layout of an im2col with these windows)."""
    nd = len(image_shape)
    n_win = [pool_out_size(image_shape[i], block_shape[i], strides[i], dilations[i], pads[i],
                           pads[i + nd], False) for i in range(nd)]
    blocks = math.prod(block_shape)
    if x.ndim != 3 or x.shape[1] % max(blocks, 1) or x.shape[2] != math.prod(n_win):
        raise OpError(f"col2im: input {list(x.shape)} does not hold blocks {list(block_shape)} "
                      f"at {n_win} positions")
    c = x.shape[1] // blocks
    cols = x.reshape(x.shape[0], c, *block_shape, *n_win)
    canvas = np.zeros((x.shape[0], c, *(image_shape[i] + pads[i] + pads[i + nd]
                                         for i in range(nd))), x.dtype)
    for offs in itertools.product(*(range(k) for k in block_shape)):
        sl = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                   for o, d, n, s in zip(offs, dilations, n_win, strides, strict=True))
        block: tuple[Any, ...] = (slice(None), slice(None), *offs)
        canvas[(slice(None), slice(None), *sl)] += cols[block]
    inner = tuple(slice(pads[i], pads[i] + image_shape[i]) for i in range(nd))
    return np.ascontiguousarray(canvas[(slice(None), slice(None), *inner)])


@GRAPH_OPS.op("conv_transpose_nd")
def conv_transpose_nd(x: np.ndarray, w: np.ndarray, *, strides: tuple[int, ...],
                      dilations: tuple[int, ...], pads: tuple[int, ...],
                      output_padding: tuple[int, ...], groups: int) -> np.ndarray:
    """ONNX ``ConvTranspose`` of ``x`` ``[N, C_in, *spatial]`` with filters ``w``
    ``[C_in, C_out / groups, *kernel]``: each input position scatters its filter-weighted
    values into the output; ``pads`` ``(begins..., ends...)`` are cropped off (a negative pad
    adds zeros), and ``output_padding`` adds rows at the end."""
    nd = x.ndim - 2
    if w.ndim != nd + 2 or x.shape[1] != w.shape[0] or x.shape[1] % groups:
        raise OpError(f"conv_transpose_nd: input {list(x.shape)} and filter {list(w.shape)} "
                      f"do not fit (groups {groups})")
    kernel = w.shape[2:]
    spatial = x.shape[2:]
    full = [strides[i] * (spatial[i] - 1) + (kernel[i] - 1) * dilations[i] + 1
            + output_padding[i] for i in range(nd)]
    out = [full[i] - pads[i] - pads[i + nd] for i in range(nd)]
    if any(o < 0 for o in out):
        raise OpError(f"conv_transpose_nd: pads {list(pads)} crop more than the output {full}")
    wide = np.float64 if x.dtype == np.float64 else np.float32
    cin_g, cout_g = x.shape[1] // groups, w.shape[1]
    canvas = np.zeros((x.shape[0], cout_g * groups, *full), wide)
    xs, ws = x.astype(wide), w.astype(wide)
    for g in range(groups):
        xg = xs[:, g * cin_g:(g + 1) * cin_g]
        wg = ws[g * cin_g:(g + 1) * cin_g]
        for offs in itertools.product(*(range(k) for k in kernel)):
            tap: tuple[Any, ...] = (slice(None), slice(None), *offs)
            contrib = np.tensordot(xg, wg[tap], axes=([1], [0]))  # [N, *spatial, C_out_g]
            sl = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                       for o, d, n, s in zip(offs, dilations, spatial, strides, strict=True))
            canvas[(slice(None), slice(g * cout_g, (g + 1) * cout_g), *sl)] += (
                np.moveaxis(contrib, -1, 1))
    grow = [(0, 0), (0, 0)] + [(max(-pads[i], 0), max(-pads[i + nd], 0)) for i in range(nd)]
    if any(g != (0, 0) for g in grow):  # negative pads (an output_shape past the full size)
        canvas = np.pad(canvas, grow)
    crop = tuple(slice(max(pads[i], 0), max(pads[i], 0) + out[i]) for i in range(nd))
    return np.ascontiguousarray(canvas[(slice(None), slice(None), *crop)].astype(x.dtype))
