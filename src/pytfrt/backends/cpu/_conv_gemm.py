"""Convolution as GEMM on NHWC arrays: im2col forward, col2im input gradient, filter gradient.

Private helper of :mod:`pytfrt.backends.cpu.conv`.  Filters arrive prepared as ``w_mat``:
``(groups, kh * kw * cin_g, cout_g)``, the rows ordered ``(i, j, c)`` -- the HWIO filter of
each group reshaped, so that one im2col row ``(i, j, c)`` of group ``g`` times ``w_mat[g]`` is
the convolution.  A 1x1 stride-1 unpadded convolution skips im2col (the input *is* the column
matrix).  Each tap ``(i, j)`` of the window is one strided view of the padded input, so im2col
is ``kh * kw`` block copies.  Thread-safety: pure functions writing only their ``out``.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._geometry import padded_nhwc, tap

Geometry = tuple[int, int, int, int, int, int, int, int, int, int]
"""``(kh, kw, sh, sw, dh, dw, pt, pb, pl, pr)``."""


def group_matrices(hwio: np.ndarray, groups: int) -> np.ndarray:
    """``w_mat`` (a view where possible) of an HWIO filter ``[kh, kw, cin_g, cout]``."""
    kh, kw, cig, cout = hwio.shape
    kg = cout // groups
    return (
        hwio.reshape(kh, kw, cig, groups, kg)
        .transpose(3, 0, 1, 2, 4)
        .reshape(groups, kh * kw * cig, kg)
    )


def im2col(
    xp: np.ndarray, oh: int, ow: int, geo: Geometry, c0: int, c1: int, cols: np.ndarray | None
) -> np.ndarray:
    """Column matrix ``(N * oh * ow, kh * kw * (c1 - c0))`` of channels ``c0:c1`` of ``xp``.

    ``xp`` is the already padded NHWC input; ``cols`` an optional buffer of that shape.
    """
    kh, kw, sh, sw, dh, dw = geo[:6]
    n = xp.shape[0]
    cg = c1 - c0
    if cols is None:
        cols = np.empty((n * oh * ow, kh * kw * cg), dtype=xp.dtype)
    c6 = cols.reshape(n, oh, ow, kh, kw, cg)
    for i in range(kh):
        for j in range(kw):
            hs, ws = tap(i, j, oh, ow, sh, sw, dh, dw)
            c6[:, :, :, i, j, :] = xp[:, hs, ws, c0:c1]
    return cols


def is_pointwise(geo: Geometry) -> bool:
    """A 1x1, stride-1, unpadded window: the input is its own column matrix."""
    return geo[0] == geo[1] == geo[2] == geo[3] == 1 and not any(geo[6:])


def conv_forward(x: np.ndarray, w_mat: np.ndarray, geo: Geometry, y: np.ndarray) -> None:
    """``y`` (N, oh, ow, cout) = conv(``x`` (N, H, W, cin)) by im2col + one GEMM per group."""
    groups, _, kg = w_mat.shape
    n, oh, ow, _ = y.shape
    m = n * oh * ow
    y2 = y.reshape(m, groups * kg)
    cin = x.shape[3]
    cg = cin // groups
    if is_pointwise(geo):
        x2 = x.reshape(m, cin)
        for g in range(groups):
            _mm(x2[:, g * cg : (g + 1) * cg], w_mat[g], y2, g, kg, groups)
        return
    xp = padded_nhwc(x, *geo[6:])
    for g in range(groups):
        cols = im2col(xp, oh, ow, geo, g * cg, (g + 1) * cg, None)
        _mm(cols, w_mat[g], y2, g, kg, groups)


def _mm(a: np.ndarray, b: np.ndarray, y2: np.ndarray, g: int, kg: int, groups: int) -> None:
    if groups == 1:
        np.matmul(a, b, out=y2)
    else:
        y2[:, g * kg : (g + 1) * kg] = a @ b


def depthwise_forward(x: np.ndarray, w_dw: np.ndarray, geo: Geometry, y: np.ndarray) -> None:
    """Depthwise conv: ``y[..., c * m + q] = sum_ij xp[tap ij][..., c] * w_dw[i, j, c, q]``.

    ``w_dw`` is ``(kh, kw, cin, m)`` (channel multiplier ``m``); ``y`` is (N, oh, ow, cin*m).
    """
    kh, kw, sh, sw, dh, dw = geo[:6]
    n, oh, ow, _ = y.shape
    cin, mult = w_dw.shape[2], w_dw.shape[3]
    xp = padded_nhwc(x, *geo[6:])
    y5 = y.reshape(n, oh, ow, cin, mult)
    y5[...] = 0
    for i in range(kh):
        for j in range(kw):
            hs, ws = tap(i, j, oh, ow, sh, sw, dh, dw)
            y5 += xp[:, hs, ws, :, None] * w_dw[i, j]


def conv_backprop_input(
    dy: np.ndarray, w_mat: np.ndarray, geo: Geometry, input_shape: tuple[int, int, int, int]
) -> np.ndarray:
    """The gradient of :func:`conv_forward` with respect to its input (NHWC ``input_shape``)."""
    kh, kw, sh, sw, dh, dw, pt, pb, pl, pr = geo
    n, h, w, cin = input_shape
    groups, _, kg = w_mat.shape
    cg = cin // groups
    _, oh, ow, _ = dy.shape
    m = n * oh * ow
    dy2 = dy.reshape(m, groups * kg)
    dxp = np.zeros((n, h + pt + pb, w + pl + pr, cin), dtype=dy.dtype)
    for g in range(groups):
        dcols = (dy2[:, g * kg : (g + 1) * kg] @ w_mat[g].T).reshape(n, oh, ow, kh, kw, cg)
        for i in range(kh):
            for j in range(kw):
                hs, ws = tap(i, j, oh, ow, sh, sw, dh, dw)
                dxp[:, hs, ws, g * cg : (g + 1) * cg] += dcols[:, :, :, i, j, :]
    return dxp[:, pt : pt + h, pl : pl + w, :]


def conv_backprop_filter(x: np.ndarray, dy: np.ndarray, geo: Geometry, groups: int) -> np.ndarray:
    """The gradient of :func:`conv_forward` with respect to the filter, as HWIO."""
    kh, kw = geo[0], geo[1]
    n, oh, ow, cout = dy.shape
    cin = x.shape[3]
    cg, kg = cin // groups, cout // groups
    xp = padded_nhwc(x, *geo[6:])
    dy2 = dy.reshape(n * oh * ow, cout)
    dw = np.empty((kh, kw, cg, cout), dtype=dy.dtype)
    for g in range(groups):
        cols = im2col(xp, oh, ow, geo, g * cg, (g + 1) * cg, None)
        dw[..., g * kg : (g + 1) * kg] = (cols.T @ dy2[:, g * kg : (g + 1) * kg]).reshape(
            kh, kw, cg, kg
        )
    return dw
