"""Convolution as GEMM on NHWC arrays: im2col forward, col2im input gradient, filter gradient.

Private helper of :mod:`pytfrt.backends.cpu.conv`.  NHWC filters arrive prepared as ``w_mat``:
``(groups, kh * kw * cin_g, cout_g)``, the rows ordered ``(i, j, c)`` -- the HWIO filter of
each group reshaped, so that one im2col row ``(i, j, c)`` of group ``g`` times ``w_mat[g]`` is
the convolution.  A 1x1 stride-1 unpadded convolution skips im2col (the input *is* the column
matrix).  Each tap ``(i, j)`` of the window is one strided view of the padded input, so im2col
is ``kh * kw`` block copies into per-thread scratch (:mod:`._scratch`).  NCHW convolutions
use the transposed formulation (filter rows times an ``(cin * kh * kw, oh * ow)`` column matrix
per image), so neither layout is transposed.  The gradients are written for clarity, not speed
(NHWC only; the public functions transpose).  Thread-safety: pure functions writing only their
outputs.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._blas import parallel_gemm, sgemm
from pytfrt.backends.cpu._epilogue import epilogue_2d
from pytfrt.backends.cpu._geometry import padded_nhwc, tap
from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu._parallel import chunks, parallel_for
from pytfrt.backends.cpu._scratch import scratch

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


MIN_SHARD_ROWS = 64
"""Fewest GEMM rows (output pixels) per parallel shard."""
COLUMN_SPLIT_ROWS = 128
"""1x1 convs with fewer output pixels than this split their output channels across shards."""
SHARD_BYTES = 2 * 1024 * 1024
"""Most column-plus-output bytes per shard: fewer, larger GEMM calls measured faster (oneDNN
packs the filter on every call) down to about this size, which still fits in L3."""


def _row_shards(rows: int, ow: int, row_bytes: int) -> list[tuple[int, int]]:
    """Shards of ``rows`` output rows (``ow`` pixels, ``row_bytes`` of columns plus output
    each): at least ``MIN_SHARD_ROWS`` pixels and at most ``SHARD_BYTES`` a shard."""
    return chunks(rows, max(1, MIN_SHARD_ROWS // ow), max(1, SHARD_BYTES // row_bytes))


def forward_nhwc(
    x: np.ndarray,
    w_mat: np.ndarray,
    geo: Geometry,
    y: np.ndarray,
    bias: np.ndarray | None,
    res: np.ndarray | None,
    code: int,
    alpha: float,
    beta: float = 0.0,
) -> None:
    """``y`` (N, oh, ow, cout; C-contiguous) = act(conv(``x``) + bias + res), NHWC.

    Work is split into shards of output rows ``(n, oh)``, each gathering its own columns (1x1
    unpadded: the input rows themselves, or the sampled pixels if strided; otherwise im2col of
    its rows into the thread's scratch), one GEMM per group and the epilogue on its rows while
    they are in cache.  ``beta = 1`` accumulates onto ``y`` (``y`` holds the residual).
    """
    groups, _, kg = w_mat.shape
    n, oh, ow, cout = y.shape
    cin = x.shape[3]
    cg = cin // groups
    kh, kw, sh, sw = geo[:4]
    pointwise = kh == kw == 1 and not any(geo[6:])
    if pointwise and groups == 1 and n * oh * ow < COLUMN_SPLIT_ROWS and x.flags.c_contiguous:
        _pointwise_by_columns(x, w_mat[0], (sh, sw), y, bias, res, code, alpha, beta)
        return
    xp = x if pointwise else padded_nhwc(x, *geo[6:], out_role="pad")
    row_bytes = ow * ((cin if pointwise else kh * kw * cg) + cout) * x.itemsize
    shards = _row_shards(n * oh, ow, row_bytes)

    def shard(i: int) -> None:
        r0, r1 = shards[i]
        for img, a0, a1 in _row_blocks(r0, r1, oh):
            m = (a1 - a0) * ow
            y2 = y[img, a0:a1].reshape(m, cout)
            if pointwise and (sh, sw) == (1, 1):
                cols = x[img, a0:a1].reshape(m, cin)
            elif pointwise:
                cols = scratch("cols", (a1 - a0, ow, cin), x.dtype)
                cols[...] = x[img, a0 * sh : (a1 - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw]
                cols = cols.reshape(m, cin)
            else:
                cols = None
            for g in range(groups):
                if cols is None:
                    part = im2col_rows(xp[img], a0, a1, ow, geo, g * cg, (g + 1) * cg)
                    sgemm(part, w_mat[g], y2[:, g * kg : (g + 1) * kg], beta)
                else:
                    sgemm(
                        cols[:, g * cg : (g + 1) * cg], w_mat[g], y2[:, g * kg : (g + 1) * kg], beta
                    )
            r2 = None if res is None else res[img, a0:a1].reshape(m, cout)
            epilogue_2d(y2, bias, r2, code, alpha)

    parallel_for(shard, len(shards), serial=not parallel_gemm())


def _pointwise_by_columns(
    x: np.ndarray,
    w: np.ndarray,
    strides: tuple[int, int],
    y: np.ndarray,
    bias: np.ndarray | None,
    res: np.ndarray | None,
    code: int,
    alpha: float,
    beta: float,
) -> None:
    """A 1x1 conv with few output pixels: shards split the *output channels*, so each reads
    only its slice of the (large) filter, and every GEMM keeps all the rows."""
    n, oh, ow, cout = y.shape
    m = n * oh * ow
    if strides == (1, 1):
        x2 = x.reshape(m, x.shape[3])
    else:
        sh, sw = strides
        xs = scratch("pad", (n, oh, ow, x.shape[3]), x.dtype)
        xs[...] = x[:, : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw]
        x2 = xs.reshape(m, x.shape[3])
    y2 = y.reshape(m, cout)
    r2 = None if res is None else res.reshape(m, cout)
    shards = chunks(cout, 64)

    def shard(i: int) -> None:
        k0, k1 = shards[i]
        sgemm(x2, w[:, k0:k1], y2[:, k0:k1], beta)
        epilogue_2d(
            y2[:, k0:k1],
            None if bias is None else bias[k0:k1],
            None if r2 is None else r2[:, k0:k1],
            code,
            alpha,
        )

    parallel_for(shard, len(shards), serial=not parallel_gemm())


def _row_blocks(r0: int, r1: int, oh: int) -> list[tuple[int, int, int]]:
    """Split flattened output rows ``[r0, r1)`` of ``(n, oh)`` into per-image row ranges."""
    out = []
    while r0 < r1:
        img, a0 = divmod(r0, oh)
        a1 = min(oh, a0 + (r1 - r0))
        out.append((img, a0, a1))
        r0 += a1 - a0
    return out


def im2col_rows(
    xp: np.ndarray, a0: int, a1: int, ow: int, geo: Geometry, c0: int, c1: int
) -> np.ndarray:
    """Columns ``((a1 - a0) * ow, kh * kw * (c1 - c0))`` of output rows ``a0:a1`` of one padded
    NHWC image ``xp`` (H, W, C), in the thread's scratch."""
    kh, kw, sh, sw, dh, dw = geo[:6]
    cg = c1 - c0
    cols = scratch("cols", ((a1 - a0) * ow, kh * kw * cg), xp.dtype)
    if dw == 1 and c0 == 0 and c1 == xp.shape[2] and xp.flags.c_contiguous:
        # A window row (kw pixels x all channels) is one contiguous run of the input row.
        _im2col_runs(xp, a0, a1, ow, kh, kw, sh, sw, dh, cols)
        return cols
    c5 = cols.reshape(a1 - a0, ow, kh, kw, cg)
    for i in range(kh):
        for j in range(kw):
            r = a0 * sh + i * dh
            c = j * dw
            c5[:, :, i, j, :] = xp[
                r : r + (a1 - a0 - 1) * sh + 1 : sh, c : c + (ow - 1) * sw + 1 : sw, c0:c1
            ]
    return cols


@numba.njit(nogil=True, cache=True)
def _im2col_runs(xp, a0, a1, ow, kh, kw, sh, sw, dh, cols):  # type: ignore[no-untyped-def]
    wp, c = xp.shape[1], xp.shape[2]
    run = kw * c
    flat = xp.reshape(-1)
    out = cols.reshape(-1)
    width = kh * run
    for a in range(a0, a1):
        for b in range(ow):
            base = ((a - a0) * ow + b) * width
            for i in range(kh):
                src = ((a * sh + i * dh) * wp + b * sw) * c
                dst = base + i * run
                for q in range(run):
                    out[dst + q] = flat[src + q]


def forward_nchw(
    x: np.ndarray,
    w_rows: np.ndarray,
    geo: Geometry,
    y: np.ndarray,
    bias: np.ndarray | None,
    res: np.ndarray | None,
    code: int,
    alpha: float,
    beta: float = 0.0,
) -> None:
    """``y`` (N, cout, oh, ow; C-contiguous) = act(conv(``x``) + bias + res), NCHW.

    ``w_rows`` is ``(groups, cout_g, cin_g * kh * kw)`` (the OIHW filter reshaped).  Shards of
    output rows compute ``y[n, group, rows] = w_rows[g] @ cols`` with ``cols`` ``(cin_g * kh *
    kw, rows * ow)`` (for a 1x1 stride-1 unpadded convolution, a column block of the image).
    ``beta = 1`` accumulates onto ``y`` (``y`` holds the residual).
    """
    groups, kg, kcols = w_rows.shape
    n, cout, oh, ow = y.shape
    cin, h, w = x.shape[1:]
    kh, kw, sh, sw, dh, dw, pt, pb, pl, pr = geo
    pointwise = kh == kw == sh == sw == 1 and not any(geo[6:])
    row_bytes = ow * ((cin if pointwise else kcols * groups) + cout) * x.itemsize
    shards = _row_shards(n * oh, ow, row_bytes)
    y3 = y.reshape(n, cout, oh * ow)
    r3 = None if res is None else res.reshape(n, cout, oh * ow)
    if pointwise:
        xsrc = x.reshape(n, cin, h * w)
    elif pt or pb or pl or pr:
        xsrc = scratch("pad", (n, cin, h + pt + pb, w + pl + pr), x.dtype)
        _pad_nchw(x, pt, pb, pl, pr, xsrc)
    else:
        xsrc = x

    def shard(i: int) -> None:
        r0, r1 = shards[i]
        for img, a0, a1 in _row_blocks(r0, r1, oh):
            c0, c1 = a0 * ow, a1 * ow
            if pointwise:
                cols = xsrc[img, :, c0:c1]
            else:
                cols6 = scratch("cols", (cin, kh, kw, a1 - a0, ow), x.dtype)
                for i_ in range(kh):
                    for j in range(kw):
                        r = a0 * sh + i_ * dh
                        c = j * dw
                        cols6[:, i_, j] = xsrc[
                            img,
                            :,
                            r : r + (a1 - a0 - 1) * sh + 1 : sh,
                            c : c + (ow - 1) * sw + 1 : sw,
                        ]
                cols = cols6.reshape(cin * kh * kw, (a1 - a0) * ow)
            yb = y3[img, :, c0:c1]
            for g in range(groups):
                sgemm(w_rows[g], cols[g * kcols : (g + 1) * kcols], yb[g * kg : (g + 1) * kg], beta)
            rb = None if r3 is None else r3[img, :, c0:c1]
            epilogue_2d(yb, bias, rb, code, alpha, bias_rows=True)

    parallel_for(shard, len(shards), serial=not parallel_gemm())


def _pad_nchw(x: np.ndarray, pt: int, pb: int, pl: int, pr: int, xp: np.ndarray) -> None:
    h, w = x.shape[2:]
    xp[:, :, :pt] = 0
    xp[:, :, pt + h :] = 0
    xp[:, :, pt : pt + h, :pl] = 0
    xp[:, :, pt : pt + h, pl + w :] = 0
    xp[:, :, pt : pt + h, pl : pl + w] = x


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
