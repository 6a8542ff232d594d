"""CPU neural-network ops on NHWC NumPy arrays: pooling, convolution, batch norm, padding.

Shape rules and compute are separate plain functions, as in :mod:`pytfrt.backends.cpu.ops`.
Convolution is an im2col (``sliding_window_view``) followed by one ``tensordot`` (BLAS, GIL
released); pooling is a vectorised window reduction.  Filters are HWIO (``[kh, kw, cin, cout]``).

Padding ``"valid"``: ``out = ceil((in - k + 1) / s)``; ``"same"``: ``out = ceil(in / s)``,
padded as :func:`pytfrt.backends.cpu._geometry.same_pad` (the odd row/column after).
Any other padding string is ``<Op> padding '<p>' is not recognized``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pytfrt.backends.cpu._geometry import same_pad
from pytfrt.backends.cpu.ops import OpError
from pytfrt.tensor.shape import format_dims

Dims = tuple[int, ...]

FLOAT32_MIN_POSITIVE = float(np.finfo(np.float32).tiny)
"""TFRT's max-pool initial value (the smallest positive normal float; a TFRT quirk)."""


def _window_geometry(
    op: str, padding: str, size: int, kernel: int, stride: int
) -> tuple[int, int, int]:
    """(output size, padding before, padding after) for one spatial dimension."""
    if stride <= 0 or kernel <= 0:
        raise OpError(f"{op} strides and window sizes must be positive")
    if padding == "valid":
        out = max(0, -(-(size - kernel + 1) // stride))
        return out, 0, 0
    if padding == "same":
        return -(-size // stride), *same_pad(size, kernel, stride, 1)
    raise OpError(f"{op} padding '{padding}' is not recognized")


def pool_shape(
    op: str, x: Sequence[int], out: Sequence[int], padding: str,
    pool_size: Sequence[int], strides: Sequence[int],
) -> Dims:
    """Expected NHWC output shape of a 2-D pooling; it must equal ``out``.

    Raises:
        OpError: ``<op> padding '<p>' is not recognized`` or ``<op> output shape [..] does not
            match the expected output shape [..]``.
    """
    if len(x) != 4:
        raise OpError(f"{op} expects a rank 4 NHWC input, got shape {format_dims(x)}")
    if len(pool_size) != 2 or len(strides) != 2:
        raise OpError(f"{op} pool_size and strides must have two elements")
    oh, _, _ = _window_geometry(op, padding, x[1], pool_size[0], strides[0])
    ow, _, _ = _window_geometry(op, padding, x[2], pool_size[1], strides[1])
    expected = (x[0], oh, ow, x[3])
    if tuple(out) != expected:
        raise OpError(
            f"{op} output shape {format_dims(out)} does not match the expected output shape "
            f"{format_dims(expected)}"
        )
    return expected


def _windows(
    op: str, x: np.ndarray, padding: str, ksize: Sequence[int], strides: Sequence[int],
    pad_value: float,
) -> np.ndarray:
    """View of shape ``[N, OH, OW, C, kh, kw]`` over the (padded) input."""
    kh, kw = int(ksize[0]), int(ksize[1])
    sh, sw = int(strides[0]), int(strides[1])
    oh, pt, pb = _window_geometry(op, padding, x.shape[1], kh, sh)
    ow, pl, pr = _window_geometry(op, padding, x.shape[2], kw, sw)
    if pt or pb or pl or pr:
        x = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=pad_value)
    win = sliding_window_view(x, (kh, kw), axis=(1, 2))
    return win[:, ::sh, ::sw][:, :oh, :ow]


def max_pool_2d(
    x: np.ndarray, out: np.ndarray, padding: str, pool_size: Sequence[int],
    strides: Sequence[int], positive_floor: bool = True, op: str = "MaxPool2D",
) -> None:
    """NHWC max pooling into ``out`` (check with :func:`pool_shape` first).

    With ``positive_floor`` (TFRT's ``tfrt_test.max_pooling_2d`` quirk) every output is at
    least the smallest positive normal float; padded positions never win.
    """
    if out.size == 0:
        return
    win = _windows(op, x, padding, pool_size, strides, -np.inf)
    np.max(win, axis=(4, 5), out=out)
    if positive_floor:
        np.maximum(out, out.dtype.type(FLOAT32_MIN_POSITIVE), out=out)


def conv2d_shape(
    x: Sequence[int], w: Sequence[int], out: Sequence[int], padding: str, strides: Sequence[int]
) -> Dims:
    """NHWC input, HWIO filter -> ``[N, OH, OW, cout]``; must equal ``out``.

    Raises:
        OpError: for bad ranks, channel mismatch, padding or output shape.
    """
    if len(x) != 4 or len(w) != 4:
        raise OpError(
            f"Conv2D expects rank 4 input and filter, got {format_dims(x)} and {format_dims(w)}"
        )
    if x[3] != w[2]:
        raise OpError(
            f"Conv2D input channels {x[3]} do not match the filter input channels {w[2]}"
        )
    if len(strides) != 2:
        raise OpError("Conv2D strides must have two elements")
    oh, _, _ = _window_geometry("Conv2D", padding, x[1], w[0], strides[0])
    ow, _, _ = _window_geometry("Conv2D", padding, x[2], w[1], strides[1])
    expected = (x[0], oh, ow, w[3])
    if tuple(out) != expected:
        raise OpError(
            f"Conv2D output shape {format_dims(out)} does not match the expected output shape "
            f"{format_dims(expected)}"
        )
    return expected


def conv2d(
    x: np.ndarray, w: np.ndarray, out: np.ndarray, padding: str, strides: Sequence[int]
) -> None:
    """NHWC/HWIO 2-D convolution (cross-correlation, as TF) into ``out``."""
    if out.size == 0:
        return
    win = _windows("Conv2D", x, padding, (w.shape[0], w.shape[1]), strides, 0.0)
    # win: [N, OH, OW, C, kh, kw]; w: [kh, kw, C, O]
    out[...] = np.tensordot(win, w, axes=((3, 4, 5), (2, 0, 1)))


def batch_norm_inplace(
    x: np.ndarray, scale: np.ndarray, offset: np.ndarray, mean: np.ndarray,
    variance: np.ndarray, epsilon: float,
) -> None:
    """``x = (x - mean) * scale / sqrt(variance + epsilon) + offset`` over the last axis.

    Raises:
        OpError: if a parameter's length differs from the channel count.
    """
    c = x.shape[-1] if x.ndim else 1
    for name, p in (("scale", scale), ("offset", offset), ("mean", mean), ("variance", variance)):
        if p.size != c:
            raise OpError(
                f"BatchNorm {name} has {p.size} elements but the input has {c} channels"
            )
    dt = x.dtype.type
    factor = scale.reshape(-1) / np.sqrt(variance.reshape(-1) + dt(epsilon))
    x -= mean.reshape(-1)
    x *= factor
    x += offset.reshape(-1)


def zero_padding_shape(x: Sequence[int], out: Sequence[int], padding: Sequence[int]) -> Dims:
    """``[N, H + 2 ph, W + 2 pw, C]``; must equal ``out``.

    Raises:
        OpError: if the shapes do not fit.
    """
    if len(x) != 4 or len(padding) != 2:
        raise OpError(f"ZeroPadding expects a rank 4 input, got shape {format_dims(x)}")
    expected = (x[0], x[1] + 2 * padding[0], x[2] + 2 * padding[1], x[3])
    if tuple(out) != expected:
        raise OpError(
            f"ZeroPadding output shape {format_dims(out)} does not match the expected output "
            f"shape {format_dims(expected)}"
        )
    return expected


def zero_padding(x: np.ndarray, out: np.ndarray, padding: Sequence[int]) -> None:
    """Copy ``x`` into the centre of ``out`` and zero the border."""
    ph, pw = int(padding[0]), int(padding[1])
    out[...] = 0
    out[:, ph : ph + x.shape[1], pw : pw + x.shape[2], :] = x


def global_average_pooling_shape(x: Sequence[int], out: Sequence[int]) -> Dims:
    """``[N, H, W, C] -> [N, C]``; must equal ``out``.

    Raises:
        OpError: if the shapes do not fit.
    """
    if len(x) != 4 or tuple(out) != (x[0], x[3]):
        raise OpError(
            f"GlobalAveragePooling output shape {format_dims(out)} does not match the input "
            f"shape {format_dims(x)}"
        )
    return (x[0], x[3])


def global_average_pooling(x: np.ndarray, out: np.ndarray) -> None:
    """``out = mean(x, axis=(1, 2))``."""
    np.mean(x, axis=(1, 2), out=out, dtype=out.dtype)
