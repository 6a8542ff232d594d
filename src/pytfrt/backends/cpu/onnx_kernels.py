"""Compute functions of the ``onnx_more`` catalogue family (``pytfrt.compiler.ops.onnx_more``).

Same conventions as :mod:`pytfrt.backends.cpu.onnx_ops`: operands positional, attributes
keyword-only, new arrays returned (operands are never written),
:class:`~pytfrt.backends.cpu.ops.OpError` for bad data.  Pure functions: thread-safe.
"""

from __future__ import annotations

import re

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function."""


@GRAPH_OPS.op("bit_shift")
def bit_shift(x: np.ndarray, y: np.ndarray, *, direction: str) -> np.ndarray:
    """``x << y`` or ``x >> y`` elementwise.  A shift by the width or more gives 0, except
    an arithmetic right shift of a negative signed value, which gives -1."""
    bits = x.dtype.itemsize * 8
    big = y >= bits
    s = np.where(big, 0, y).astype(x.dtype)
    out = np.left_shift(x, s) if direction == "LEFT" else np.right_shift(x, s)
    fill = np.zeros((), x.dtype)
    if direction == "RIGHT" and x.dtype.kind == "i":
        fill = np.where(x < 0, np.asarray(-1, x.dtype), fill)
    return np.where(big, fill, out).astype(x.dtype)


@GRAPH_OPS.op("bitwise_xor")
def bitwise_xor(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ^ y`` elementwise."""
    return np.bitwise_xor(x, y)


@GRAPH_OPS.op("bitwise_not")
def bitwise_not(x: np.ndarray) -> np.ndarray:
    """``~x`` elementwise."""
    return np.invert(x)


@GRAPH_OPS.op("cumprod")
def cumprod(x: np.ndarray, *, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """The running product along ``axis`` (``exclusive``: shifted by one, starting at 1)."""
    axis = axis % x.ndim
    y = np.flip(x, axis) if reverse else x
    out = np.cumprod(y, axis=axis, dtype=x.dtype)
    if exclusive:
        ones = np.ones_like(np.take(out, [0], axis=axis))
        out = np.concatenate([ones, np.delete(out, -1, axis=axis)], axis=axis)
    return np.ascontiguousarray(np.flip(out, axis) if reverse else out)


@GRAPH_OPS.op("scatter_nd_reduce")
def scatter_nd_reduce(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                      reduction: str) -> np.ndarray:
    """A copy of ``data`` with ``updates`` combined into it at ``indices``."""
    out = data.copy()
    k = indices.shape[-1]
    flat = indices.reshape(-1, k).astype(np.int64)
    for j in range(k):
        dim = data.shape[j]
        col = flat[:, j]
        if col.size and (col.min() < -dim or col.max() >= dim):
            raise OpError(f"scatter_nd_reduce: an index is out of range [-{dim}, {dim})")
        flat[:, j] = np.where(col < 0, col + dim, col)
    upd = updates.reshape((flat.shape[0],) + data.shape[k:])
    ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction]
    ufunc.at(out, tuple(flat.T), upd)
    return out


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of box ``a`` ([4], corners) with boxes ``b`` ([n, 4])."""
    ya1, ya2 = min(a[0], a[2]), max(a[0], a[2])
    xa1, xa2 = min(a[1], a[3]), max(a[1], a[3])
    yb1, yb2 = np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 0], b[:, 2])
    xb1, xb2 = np.minimum(b[:, 1], b[:, 3]), np.maximum(b[:, 1], b[:, 3])
    ih = np.clip(np.minimum(ya2, yb2) - np.maximum(ya1, yb1), 0, None)
    iw = np.clip(np.minimum(xa2, xb2) - np.maximum(xa1, xb1), 0, None)
    inter = ih * iw
    union = (ya2 - ya1) * (xa2 - xa1) + (yb2 - yb1) * (xb2 - xb1) - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


@GRAPH_OPS.op("non_max_suppression")
def non_max_suppression(boxes: np.ndarray, scores: np.ndarray, *rest: np.ndarray,
                        center_point_box: int) -> np.ndarray:
    """``[n, 3]`` rows (batch, class, box) kept by greedy NMS per batch and class."""
    max_out = int(rest[0].reshape(-1)[0]) if len(rest) > 0 and rest[0].size else 0
    iou_t = float(rest[1].reshape(-1)[0]) if len(rest) > 1 and rest[1].size else 0.0
    score_t = float(rest[2].reshape(-1)[0]) if len(rest) > 2 and rest[2].size else None
    b = boxes.astype(np.float64)
    if center_point_box:
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        b = np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    rows: list[tuple[int, int, int]] = []
    for n in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[n, c].astype(np.float64)
            order = np.argsort(-s, kind="stable")
            if score_t is not None:
                order = order[s[order] > score_t]
            kept: list[int] = []
            for i in order:
                if len(kept) >= max_out:
                    break
                if kept and np.any(_iou(b[n, i], b[n, kept]) > iou_t):
                    continue
                kept.append(int(i))
            rows.extend((n, c, i) for i in kept)
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, np.where(above, x - hi, 0.0))
    flips = np.floor(d / span)
    r = d - flips * span
    even = (flips % 2) == 0
    return np.where(below, np.where(even, lo + r, hi - r),
                    np.where(above, np.where(even, hi - r, lo + r), x))


@GRAPH_OPS.op("grid_sample")
def grid_sample(x: np.ndarray, grid: np.ndarray, *, mode: str, padding_mode: str,
                align_corners: bool) -> np.ndarray:
    """``x`` ([N, C, H, W]) sampled at ``grid`` ([N, Ho, Wo, 2], (x, y) in [-1, 1])."""
    n_, c_, h, w = x.shape
    g = grid.astype(np.float64)

    def unnorm(v: np.ndarray, size: int) -> np.ndarray:
        return (v + 1) / 2 * (size - 1) if align_corners else ((v + 1) * size - 1) / 2

    px, py = unnorm(g[..., 0], w), unnorm(g[..., 1], h)
    if padding_mode == "border":
        px, py = np.clip(px, 0, w - 1), np.clip(py, 0, h - 1)
    elif padding_mode == "reflection":
        if align_corners:
            px, py = _reflect(px, 0, w - 1), _reflect(py, 0, h - 1)
        else:
            px, py = _reflect(px, -0.5, w - 0.5), _reflect(py, -0.5, h - 0.5)
    xf = x.astype(np.float64)
    batch = np.arange(n_)[:, None, None]

    def at(iy: np.ndarray, ix: np.ndarray) -> np.ndarray:
        """Pixels [N, Ho, Wo, C] at integer coordinates, padded per padding_mode."""
        inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
        if padding_mode == "zeros":
            cy, cx = np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)
        elif padding_mode == "border":
            cy, cx = np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)
            inside = np.ones_like(inside)
        else:
            lo = 0 if align_corners else -0.5
            cy = np.clip(np.rint(_reflect(iy.astype(np.float64), lo, h - 1 - lo if align_corners
                                          else h - 0.5)).astype(np.int64), 0, h - 1)
            cx = np.clip(np.rint(_reflect(ix.astype(np.float64), lo, w - 1 - lo if align_corners
                                          else w - 0.5)).astype(np.int64), 0, w - 1)
            inside = np.ones_like(inside)
        vals = xf[batch, :, cy, cx]  # [N, Ho, Wo, C]
        return np.where(inside[..., None], vals, 0.0)

    if mode == "nearest":
        out = at(np.rint(py).astype(np.int64), np.rint(px).astype(np.int64))
    elif mode == "linear":
        x0, y0 = np.floor(px).astype(np.int64), np.floor(py).astype(np.int64)
        fx, fy = (px - x0)[..., None], (py - y0)[..., None]
        out = (at(y0, x0) * (1 - fx) * (1 - fy) + at(y0, x0 + 1) * fx * (1 - fy)
               + at(y0 + 1, x0) * (1 - fx) * fy + at(y0 + 1, x0 + 1) * fx * fy)
    else:  # cubic (a = -0.75)
        x0, y0 = np.floor(px).astype(np.int64), np.floor(py).astype(np.int64)
        tx, ty = px - x0, py - y0

        def coeffs(t: np.ndarray) -> list[np.ndarray]:
            a = -0.75
            def near(d: np.ndarray) -> np.ndarray:
                return ((a + 2) * d - (a + 3)) * d * d + 1
            def far(d: np.ndarray) -> np.ndarray:
                return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
            return [far(t + 1), near(t), near(1 - t), far(2 - t)]

        cx, cy = coeffs(tx), coeffs(ty)
        out = np.zeros((n_,) + px.shape[1:] + (c_,))
        for i in range(4):
            for j in range(4):
                wgt = (cy[i] * cx[j])[..., None]
                out += wgt * at(y0 - 1 + i, x0 - 1 + j)
    return np.ascontiguousarray(np.moveaxis(out, -1, 1)).astype(x.dtype)


@GRAPH_OPS.op("string_concat")
def string_concat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise string concatenation (NumPy broadcasting)."""
    out = np.frompyfunc(lambda p, q: str(p) + str(q), 2, 1)(a, b)
    return np.asarray(out, dtype=object)


@GRAPH_OPS.op("regex_full_match")
def regex_full_match(x: np.ndarray, *, pattern: str) -> np.ndarray:
    """Whether each string matches ``pattern`` entirely (Python ``re`` syntax)."""
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise OpError(f"regex_full_match: bad pattern {pattern!r}: {exc}") from None
    flat = [rx.fullmatch(str(s)) is not None for s in x.reshape(-1)]
    return np.asarray(flat, dtype=bool).reshape(x.shape)


@GRAPH_OPS.op("bitcast")
def bitcast(x: np.ndarray, *, to: str) -> np.ndarray:
    """``x``'s bytes reinterpreted as ``to`` (same element size)."""
    from pytfrt.tensor.dtype import dtype_from_name

    return np.array(x, order="C").view(dtype_from_name(to).np_dtype)  # (a copy; keeps rank 0)


@GRAPH_OPS.op("det")
def det(x: np.ndarray) -> np.ndarray:
    """The determinant of each trailing square matrix."""
    return np.asarray(np.linalg.det(x), dtype=x.dtype)


@GRAPH_OPS.op("reverse_sequence")
def reverse_sequence(x: np.ndarray, lengths: np.ndarray, *, batch_axis: int,
                     time_axis: int) -> np.ndarray:
    """Each batch entry's first ``lengths[b]`` steps along ``time_axis`` reversed."""
    out = x.copy()
    for b, n in enumerate(np.asarray(lengths).reshape(-1).tolist()):
        if not 0 <= n <= x.shape[time_axis]:
            raise OpError(f"reverse_sequence: length {n} is out of range")
        src = [slice(None)] * x.ndim
        src[batch_axis] = slice(b, b + 1)
        src[time_axis] = slice(0, n)
        out[tuple(src)] = np.flip(x[tuple(src)], axis=time_axis)
    return out


@GRAPH_OPS.op("compress")
def compress(x: np.ndarray, condition: np.ndarray, *, axis: tuple[int, ...]) -> np.ndarray:
    """The slices of ``x`` along ``axis`` (or the flattened elements) where ``condition``."""
    cond = np.asarray(condition, dtype=bool).reshape(-1)
    if axis:
        return np.ascontiguousarray(np.compress(cond, x, axis=axis[0] % x.ndim))
    return np.ascontiguousarray(np.compress(cond, x.reshape(-1)))


@GRAPH_OPS.op("unique")
def unique(x: np.ndarray, *, axis: tuple[int, ...], sorted: bool  # noqa: A002 - op attribute
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """ONNX ``Unique``: values, first indices, inverse indices and counts."""
    ax = axis[0] % x.ndim if axis else None
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                          return_counts=True, axis=ax)
    inverse = inverse.reshape(-1)
    if not sorted:  # in order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = np.take(y, order, axis=0 if ax is None else ax)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return (np.ascontiguousarray(y), first.astype(np.int64), inverse.astype(np.int64),
            counts.astype(np.int64))
