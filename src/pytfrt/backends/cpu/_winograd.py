"""Winograd F(4x4, 3x3) and F(2x2, 3x3) convolution for stride-1, undilated 3x3 filters, NHWC.

Private helper of :mod:`pytfrt.backends.cpu.conv`.  Lavin & Gray's minimal filtering: each
6x6 input tile ``d`` and filter ``g`` give a 4x4 output tile

    Y = A^T [ (G g G^T) * (B^T d B) ] A

so the 36 * cin * cout multiplies of a tile are 36 independent GEMMs ``M[e] = V[e] @ U[e]``
over all tiles at once (``V[e]``: tiles x cin, ``U[e]``: cin x cout), 4x fewer multiplies than
direct convolution.  ``U`` is computed once per filter (:func:`filter_transform`); the input
and output transforms are compiled Numba loops, the output transform applying the fused
epilogue (bias, residual, activation) while each tile is in registers.

Accuracy: the transform points (0, +-1, +-2, +-1/2) keep float32 errors near 1e-6 of the
output's magnitude for unit-scale data (tested against direct convolution).
Thread-safety: pure functions writing only their output arguments.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._blas import parallel_gemm, sgemm
from pytfrt.backends.cpu._epilogue import _act
from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu._parallel import chunks, parallel_for
from pytfrt.backends.cpu._scratch import scratch

TILE = 4
"""Output tile size of F(4x4, 3x3) (F(2x2, 3x3) uses 2)."""

_G = np.array(
    [
        [1 / 4, 0, 0],
        [-1 / 6, -1 / 6, -1 / 6],
        [-1 / 6, 1 / 6, -1 / 6],
        [1 / 24, 1 / 12, 1 / 6],
        [1 / 24, -1 / 12, 1 / 6],
        [0, 0, 1],
    ],
    dtype=np.float64,
)


_G2 = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)


def filter_transform(hwio: np.ndarray, m: int = TILE) -> np.ndarray:
    """``U``, ``((m + 2)**2, cin, cout)`` C-contiguous, of a ``(3, 3, cin, cout)`` (HWIO) filter
    for F(m x m, 3x3), ``m`` 4 or 2."""
    g = _G if m == 4 else _G2
    u = np.einsum("ai,ijck,bj->abck", g, hwio.astype(np.float64), g)
    a = m + 2
    return np.ascontiguousarray(u.reshape(a * a, hwio.shape[2], hwio.shape[3]).astype(hwio.dtype))


def tiles(oh: int, ow: int, m: int = TILE) -> tuple[int, int]:
    """Tile rows and columns covering an ``oh x ow`` output with ``m x m`` tiles."""
    return -(-oh // m), -(-ow // m)


@numba.njit(nogil=True, cache=True, inline="always")
def _bt(d0, d1, d2, d3, d4, d5):  # type: ignore[no-untyped-def]
    """``B^T d`` for one 6-vector."""
    return (
        4.0 * d0 - 5.0 * d2 + d4,
        -4.0 * d1 - 4.0 * d2 + d3 + d4,
        4.0 * d1 - 4.0 * d2 - d3 + d4,
        -2.0 * d1 - d2 + 2.0 * d3 + d4,
        2.0 * d1 - d2 - 2.0 * d3 + d4,
        4.0 * d1 - 5.0 * d3 + d5,
    )


@numba.njit(nogil=True, cache=True, inline="always")
def _at(m0, m1, m2, m3, m4, m5):  # type: ignore[no-untyped-def]
    """``A^T m`` for one 6-vector."""
    a = m1 + m2
    b = m1 - m2
    c = m3 + m4
    d = m3 - m4
    return (m0 + a + c, b + 2.0 * d, a + 4.0 * c, b + 8.0 * d + m5)


# Specialised by hand on purpose (tile gather and epilogue repeat in the F(2x2) kernels below):
# shared njit helpers measured 3-5% slower for the input transform, 6x for a relu epilogue.
@numba.njit(nogil=True, cache=True)
def input_transform(x, pt, pl, th, tw, v, t0, t1):  # type: ignore[no-untyped-def]
    """``v[e, t, :] = (B^T d_t B)[e]`` for tiles ``t0 <= t < t1`` of NHWC ``x``.

    Tile ``t = (n * th + ty) * tw + tx`` reads input rows ``4 ty - pt ..`` and columns
    ``4 tx - pl ..`` (zero outside the input).
    """
    n_, h, w, c = x.shape
    d = np.empty((6, 6, c), dtype=v.dtype)
    tmp = np.empty((6, 6, c), dtype=v.dtype)
    for t in range(t0, t1):
        n = t // (th * tw)
        ty = (t // tw) % th
        tx = t % tw
        r0 = ty * TILE - pt
        c0 = tx * TILE - pl
        for i in range(6):
            r = r0 + i
            for j in range(6):
                col = c0 + j
                if 0 <= r < h and 0 <= col < w:
                    for ch in range(c):
                        d[i, j, ch] = x[n, r, col, ch]
                else:
                    for ch in range(c):
                        d[i, j, ch] = 0.0
        # Columns of each row (d B), then rows (B^T .).
        for i in range(6):
            for ch in range(c):
                y0, y1, y2, y3, y4, y5 = _bt(
                    d[i, 0, ch], d[i, 1, ch], d[i, 2, ch], d[i, 3, ch], d[i, 4, ch], d[i, 5, ch]
                )
                tmp[i, 0, ch] = y0
                tmp[i, 1, ch] = y1
                tmp[i, 2, ch] = y2
                tmp[i, 3, ch] = y3
                tmp[i, 4, ch] = y4
                tmp[i, 5, ch] = y5
        for j in range(6):
            for ch in range(c):
                y0, y1, y2, y3, y4, y5 = _bt(
                    tmp[0, j, ch],
                    tmp[1, j, ch],
                    tmp[2, j, ch],
                    tmp[3, j, ch],
                    tmp[4, j, ch],
                    tmp[5, j, ch],
                )
                v[j, t, ch] = y0
                v[6 + j, t, ch] = y1
                v[12 + j, t, ch] = y2
                v[18 + j, t, ch] = y3
                v[24 + j, t, ch] = y4
                v[30 + j, t, ch] = y5


@numba.njit(nogil=True, cache=True)
def output_transform(m, th, tw, bias, res, act, alpha, y, t0, t1):  # type: ignore[no-untyped-def]
    """``y`` tiles ``t0 <= t < t1`` = act(A^T m_t A + bias + res), cropped to ``y``'s size.

    ``m`` is ``(36, T, K)``; ``bias`` ``(K,)`` or empty; ``res`` like ``y`` or empty.
    """
    n_, oh, ow, k = y.shape
    has_bias = bias.shape[0] > 0
    has_res = res.shape[0] > 0
    tmp = np.empty((4, 6, k), dtype=m.dtype)
    for t in range(t0, t1):
        n = t // (th * tw)
        ty = (t // tw) % th
        tx = t % tw
        for j in range(6):
            for ch in range(k):
                o0, o1, o2, o3 = _at(
                    m[j, t, ch],
                    m[6 + j, t, ch],
                    m[12 + j, t, ch],
                    m[18 + j, t, ch],
                    m[24 + j, t, ch],
                    m[30 + j, t, ch],
                )
                tmp[0, j, ch] = o0
                tmp[1, j, ch] = o1
                tmp[2, j, ch] = o2
                tmp[3, j, ch] = o3
        for i in range(4):
            r = ty * TILE + i
            if r >= oh:
                break
            for ch in range(k):
                o0, o1, o2, o3 = _at(
                    tmp[i, 0, ch],
                    tmp[i, 1, ch],
                    tmp[i, 2, ch],
                    tmp[i, 3, ch],
                    tmp[i, 4, ch],
                    tmp[i, 5, ch],
                )
                tmp[i, 0, ch] = o0
                tmp[i, 1, ch] = o1
                tmp[i, 2, ch] = o2
                tmp[i, 3, ch] = o3
            for j in range(4):
                col = tx * TILE + j
                if col >= ow:
                    break
                for ch in range(k):
                    val = tmp[i, j, ch]
                    if has_bias:
                        val += bias[ch]
                    if has_res:
                        val += res[n, r, col, ch]
                    if act == 1:
                        val = max(val, 0.0)
                    elif act != 0:
                        val = _act(val, act, alpha)
                    y[n, r, col, ch] = val


@numba.njit(nogil=True, cache=True)
def input_transform2(x, pt, pl, th, tw, v, t0, t1):  # type: ignore[no-untyped-def]
    """F(2x2, 3x3): ``v[e, t, :] = (B^T d_t B)[e]`` for 4x4 tiles ``t0 <= t < t1`` (stride 2)."""
    n_, h, w, c = x.shape
    d = np.empty((4, 4, c), dtype=v.dtype)
    for t in range(t0, t1):
        n = t // (th * tw)
        ty = (t // tw) % th
        tx = t % tw
        r0 = ty * 2 - pt
        c0 = tx * 2 - pl
        for i in range(4):
            r = r0 + i
            for j in range(4):
                col = c0 + j
                if 0 <= r < h and 0 <= col < w:
                    for ch in range(c):
                        d[i, j, ch] = x[n, r, col, ch]
                else:
                    for ch in range(c):
                        d[i, j, ch] = 0.0
        for i in range(4):  # d B (columns), in place
            for ch in range(c):
                a0 = d[i, 0, ch] - d[i, 2, ch]
                a1 = d[i, 1, ch] + d[i, 2, ch]
                a2 = d[i, 2, ch] - d[i, 1, ch]
                a3 = d[i, 1, ch] - d[i, 3, ch]
                d[i, 0, ch] = a0
                d[i, 1, ch] = a1
                d[i, 2, ch] = a2
                d[i, 3, ch] = a3
        for j in range(4):  # B^T . (rows)
            for ch in range(c):
                v[j, t, ch] = d[0, j, ch] - d[2, j, ch]
                v[4 + j, t, ch] = d[1, j, ch] + d[2, j, ch]
                v[8 + j, t, ch] = d[2, j, ch] - d[1, j, ch]
                v[12 + j, t, ch] = d[1, j, ch] - d[3, j, ch]


@numba.njit(nogil=True, cache=True)
def output_transform2(m, th, tw, bias, res, act, alpha, y, t0, t1):  # type: ignore[no-untyped-def]
    """F(2x2, 3x3): ``y`` tiles ``t0 <= t < t1`` = act(A^T m_t A + bias + res), cropped."""
    n_, oh, ow, k = y.shape
    has_bias = bias.shape[0] > 0
    has_res = res.shape[0] > 0
    tmp = np.empty((2, 4, k), dtype=m.dtype)
    for t in range(t0, t1):
        n = t // (th * tw)
        ty = (t // tw) % th
        tx = t % tw
        for j in range(4):
            for ch in range(k):
                tmp[0, j, ch] = m[j, t, ch] + m[4 + j, t, ch] + m[8 + j, t, ch]
                tmp[1, j, ch] = m[4 + j, t, ch] - m[8 + j, t, ch] - m[12 + j, t, ch]
        for i in range(2):
            r = ty * 2 + i
            if r >= oh:
                break
            for j in range(2):
                col = tx * 2 + j
                if col >= ow:
                    break
                for ch in range(k):
                    if j == 0:
                        val = tmp[i, 0, ch] + tmp[i, 1, ch] + tmp[i, 2, ch]
                    else:
                        val = tmp[i, 1, ch] - tmp[i, 2, ch] - tmp[i, 3, ch]
                    if has_bias:
                        val += bias[ch]
                    if has_res:
                        val += res[n, r, col, ch]
                    if act == 1:
                        val = max(val, 0.0)
                    elif act != 0:
                        val = _act(val, act, alpha)
                    y[n, r, col, ch] = val


def forward(
    x: np.ndarray,
    u: np.ndarray,
    pt: int,
    pl: int,
    bias: np.ndarray | None,
    res: np.ndarray | None,
    code: int,
    alpha: float,
    y: np.ndarray,
) -> None:
    """``y = act(conv3x3(x) + bias + res)``; ``x``, ``res``, ``y`` NHWC (views allowed).

    ``u`` is :func:`filter_transform` of the filter for F(``tile`` x ``tile``, 3x3) (its
    first dimension says which: 36 or 16); ``pt``/``pl`` the leading pads (the trailing ones
    are implied by ``y``'s size).  Three parallel phases: input transform over tile ranges, the
    36 (16) GEMMs split by ``e`` (each transformed filter slice read once), output transform
    over tile ranges.
    """
    n, _, _, c = x.shape
    _, oh, ow, k = y.shape
    ne = u.shape[0]
    tile = 4 if ne == 36 else 2
    th, tw = tiles(oh, ow, tile)
    t = n * th * tw
    v = scratch("wino_v", (ne, t, c), u.dtype)
    m = scratch("wino_m", (ne, t, k), u.dtype)
    fin = input_transform if tile == 4 else input_transform2
    fout = output_transform if tile == 4 else output_transform2
    b = bias if bias is not None else np.empty(0, dtype=y.dtype)
    r = res if res is not None else np.empty((0, 0, 0, 0), dtype=y.dtype)
    serial = not parallel_gemm()
    tile_shards = chunks(t, 8)
    e_shards = chunks(ne, 1)

    def inputs(i: int) -> None:
        fin(x, pt, pl, th, tw, v, *tile_shards[i])

    def products(i: int) -> None:
        for e in range(*e_shards[i]):
            sgemm(v[e], u[e], m[e])

    def outputs(i: int) -> None:
        fout(m, th, tw, b, r, code, float(alpha), y, *tile_shards[i])

    parallel_for(inputs, len(tile_shards))
    parallel_for(products, len(e_shards), serial=serial)
    parallel_for(outputs, len(tile_shards))
