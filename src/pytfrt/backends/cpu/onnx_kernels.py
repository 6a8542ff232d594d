"""Compute functions of the ``onnx_more`` catalogue family (``pytfrt.compiler.ops.onnx_more``).

Same conventions as :mod:`pytfrt.backends.cpu.onnx_ops`: operands positional, attributes
keyword-only, new arrays returned (operands are never written),
:class:`~pytfrt.backends.cpu.ops.OpError` for bad data.  Pure functions: thread-safe.
"""

from __future__ import annotations

import itertools
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


def _cubic_coeffs(t: np.ndarray) -> list[np.ndarray]:
    """The four cubic convolution weights (a = -0.75) of the samples at -1, 0, 1, 2."""
    a = -0.75

    def near(d: np.ndarray) -> np.ndarray:
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: np.ndarray) -> np.ndarray:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@GRAPH_OPS.op("grid_sample")
def grid_sample(x: np.ndarray, grid: np.ndarray, *, mode: str, padding_mode: str,
                align_corners: bool) -> np.ndarray:
    """``x`` ([N, C, *spatial], 2-D or 3-D) sampled at ``grid`` ([N, *out, nd], the
    coordinates in [-1, 1] innermost axis first: (x, y) or (x, y, z)); ``linear`` mode is
    bilinear or trilinear, ``cubic`` takes 4 samples per axis."""
    n_, c_ = x.shape[:2]
    spatial = x.shape[2:]
    nd = len(spatial)
    if grid.shape[-1] != nd or grid.ndim != nd + 2:
        raise OpError(f"grid_sample: grid {grid.shape} does not fit input {x.shape}")
    g = grid.astype(np.float64)

    def unnorm(v: np.ndarray, size: int) -> np.ndarray:
        return (v + 1) / 2 * (size - 1) if align_corners else ((v + 1) * size - 1) / 2

    # p[i]: the position along spatial axis i (grid component nd - 1 - i)
    p = [unnorm(g[..., nd - 1 - i], spatial[i]) for i in range(nd)]
    if padding_mode == "border":
        p = [np.clip(p[i], 0, spatial[i] - 1) for i in range(nd)]
    elif padding_mode == "reflection":
        p = [_reflect(p[i], 0, spatial[i] - 1) if align_corners
             else _reflect(p[i], -0.5, spatial[i] - 0.5) for i in range(nd)]
    xf = x.astype(np.float64)
    batch = np.arange(n_).reshape((n_,) + (1,) * nd)

    def at(idx: list[np.ndarray]) -> np.ndarray:
        """Samples [N, *out, C] at integer coordinates, padded per padding_mode."""
        inside = np.ones(idx[0].shape, bool)
        clipped = []
        for i, (ix, size) in enumerate(zip(idx, spatial, strict=True)):
            inside &= (ix >= 0) & (ix < size)
            if padding_mode == "reflection":
                lo = 0 if align_corners else -0.5
                hi = size - 1 - lo if align_corners else size - 0.5
                ix = np.rint(_reflect(idx[i].astype(np.float64), lo, hi)).astype(np.int64)
            clipped.append(np.clip(ix, 0, size - 1))
        vals = xf[(batch, slice(None), *clipped)]  # [N, *out, C]
        if padding_mode != "zeros":
            return vals
        return np.where(inside[..., None], vals, 0.0)

    if mode == "nearest":
        out = at([np.rint(pi).astype(np.int64) for pi in p])
    else:
        base = [np.floor(pi).astype(np.int64) for pi in p]
        frac = [pi - b for pi, b in zip(p, base, strict=True)]
        if mode == "linear":
            per_axis = [[(0, 1 - f), (1, f)] for f in frac]
        else:  # cubic
            per_axis = [list(zip(range(-1, 3), _cubic_coeffs(f), strict=True)) for f in frac]
        out = np.zeros((n_,) + p[0].shape[1:] + (c_,))
        for corner in itertools.product(*per_axis):
            wgt = np.ones(p[0].shape)
            for _, w_ in corner:
                wgt = wgt * w_
            out += wgt[..., None] * at([b + off for b, (off, _) in zip(base, corner,
                                                                         strict=True)])
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


@GRAPH_OPS.op("tensor_scatter")
def tensor_scatter(past: np.ndarray, update: np.ndarray, *write_indices: np.ndarray, axis: int,
                   mode: str) -> np.ndarray:
    """ONNX ``TensorScatter``: a copy of ``past`` with, for each batch row ``b``, ``update[b]``
    written along ``axis`` from position ``write_indices[b]`` (0 without the operand);
    ``mode = "circular"`` wraps the positions modulo the cache length, ``"linear"`` requires
    them inside the cache."""
    ax = axis % past.ndim
    if ax == 0:
        raise OpError("tensor_scatter: the sequence axis cannot be the batch axis 0")
    if (update.ndim != past.ndim or update.shape[ax] > past.shape[ax]
            or any(u != p for i, (u, p) in enumerate(zip(update.shape, past.shape, strict=True))
                   if i != ax)):
        raise OpError(f"tensor_scatter: update {update.shape} does not fit cache {past.shape} "
                      f"along axis {ax}")
    batch, length, cache = past.shape[0], update.shape[ax], past.shape[ax]
    start = (write_indices[0].reshape(-1).astype(np.int64) if write_indices
             else np.zeros(batch, np.int64))
    if start.size != batch:
        raise OpError(f"tensor_scatter: {start.size} write indices for a batch of {batch}")
    out = past.copy()
    for b in range(batch):
        pos = start[b] + np.arange(length)
        if mode == "circular":
            pos %= cache
        elif length and (pos[0] < 0 or pos[-1] >= cache):
            raise OpError(f"tensor_scatter: rows {pos[0]}..{pos[-1]} outside a cache of {cache}")
        np.moveaxis(out[b], ax - 1, 0)[pos] = np.moveaxis(update[b], ax - 1, 0)
    return out


def _bilinear_zeros(img: np.ndarray, ph: np.ndarray, pw: np.ndarray) -> np.ndarray:
    """``img`` [N, C, H, W] sampled bilinearly at rows ``ph`` and columns ``pw`` (both
    [N, *S], pixel coordinates; samples outside the image count as 0): [N, C, *S]."""
    n, c, h, w = img.shape
    y0, x0 = np.floor(ph).astype(np.int64), np.floor(pw).astype(np.int64)
    fy, fx = ph - y0, pw - x0
    batch = np.arange(n).reshape((n,) + (1,) * (ph.ndim - 1))
    out = np.zeros(ph.shape + (c,))
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            yy, xx = y0 + dy, x0 + dx
            inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            vals = img[batch, :, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]  # [N, *S, C]
            out += vals * (wy * wx * inside)[..., None]
    return np.moveaxis(out, -1, 1)


@GRAPH_OPS.op("deform_conv")
def deform_conv(x: np.ndarray, w: np.ndarray, offset: np.ndarray, *rest: np.ndarray,
                strides: tuple[int, ...], pads: tuple[int, ...], dilations: tuple[int, ...],
                group: int, offset_group: int, has_bias: bool, has_mask: bool) -> np.ndarray:
    """ONNX ``DeformConv`` (2-D): a convolution whose every kernel tap of every output
    position reads the input at its regular position plus a learned ``offset`` ([N,
    offset_group * kH * kW * 2, oH, oW], (dy, dx) pairs) by bilinear interpolation (0 outside),
    weighted by ``mask`` ([N, offset_group * kH * kW, oH, oW], default 1); then ``bias``."""
    bias = rest[0] if has_bias else None
    mask = rest[int(has_bias)] if has_mask else None
    n, c, _, _ = x.shape
    oc, cg, kh, kw = w.shape
    oh, ow = offset.shape[2:]
    if c != cg * group or oc % group or c % offset_group:
        raise OpError(f"deform_conv: {c} input channels, weights {w.shape}, group {group}, "
                      f"offset_group {offset_group} do not fit")
    if offset.shape[:2] != (n, offset_group * kh * kw * 2):
        raise OpError(f"deform_conv: offset {offset.shape} must be [{n}, "
                      f"{offset_group * kh * kw * 2}, oH, oW]")
    want = [(x.shape[2 + i] + pads[i] + pads[i + 2] - ((k - 1) * dilations[i] + 1))
            // strides[i] + 1 for i, k in enumerate((kh, kw))]
    if [oh, ow] != want:
        raise OpError(f"deform_conv: offset's output size {[oh, ow]} is not the "
                      f"convolution's {want}")
    off = offset.astype(np.float64).reshape(n, offset_group, kh, kw, 2, oh, ow)
    m = (np.ones((n, offset_group, kh, kw, oh, ow)) if mask is None
         else mask.astype(np.float64).reshape(n, offset_group, kh, kw, oh, ow))
    base_h = (np.arange(kh) * dilations[0])[:, None, None, None] + \
        (np.arange(oh) * strides[0] - pads[0])[None, None, :, None]
    base_w = (np.arange(kw) * dilations[1])[None, :, None, None] + \
        (np.arange(ow) * strides[1] - pads[1])[None, None, None, :]
    xf = x.astype(np.float64)
    per = c // offset_group
    cols = np.empty((n, c, kh, kw, oh, ow))
    for g in range(offset_group):
        ph = base_h[None] + off[:, g, :, :, 0]  # [N, kH, kW, oH, oW]
        pw = base_w[None] + off[:, g, :, :, 1]
        sampled = _bilinear_zeros(xf[:, g * per:(g + 1) * per], ph, pw)
        cols[:, g * per:(g + 1) * per] = sampled * m[:, g][:, None]
    og = oc // group
    out = np.empty((n, oc, oh, ow))
    for g in range(group):
        out[:, g * og:(g + 1) * og] = np.einsum(
            "ockl,nckl...->no...", w[g * og:(g + 1) * og].astype(np.float64),
            cols[:, g * cg:(g + 1) * cg])
    if bias is not None:
        out += bias.astype(np.float64).reshape(1, -1, 1, 1)
    return out.astype(x.dtype)


@GRAPH_OPS.op("tree_ensemble")
def tree_ensemble(x: np.ndarray, *, roots: tuple[int, ...], features: tuple[int, ...],
                  modes: tuple[int, ...], splits: tuple[float, ...],
                  true_ids: tuple[int, ...], false_ids: tuple[int, ...],
                  true_leafs: tuple[int, ...], false_leafs: tuple[int, ...],
                  missing_true: tuple[int, ...], member_values: tuple[float, ...],
                  member_offsets: tuple[int, ...], leaf_targets: tuple[int, ...],
                  leaf_weights: tuple[float, ...], n_targets: int, aggregate: int,
                  post_transform: int) -> np.ndarray:
    """ONNX-ML ``TreeEnsemble`` on ``x`` [N, F]: every row walks every tree from its root
    (node ``i`` compares feature ``features[i]`` with ``splits[i]`` by ``modes[i]``: 0 ``<=``,
    1 ``<``, 2 ``>=``, 3 ``>``, 4 ``==``, 5 ``!=``, 6 membership in ``member_values[
    member_offsets[i]:member_offsets[i + 1]]``; a NaN feature goes the true way where
    ``missing_true[i]``) to a leaf, whose weight is added to its target (``aggregate`` 0:
    average over the trees, 1: sum, 2: minimum, 3: maximum); ``post_transform`` 0: none,
    1: softmax, 2: logistic, 3: softmax keeping zeros.  Result [N, n_targets] in ``x``'s
    type."""
    n = x.shape[0]
    xf = x.astype(np.float64).reshape(n, -1)
    feat, mode = np.asarray(features, np.int64), np.asarray(modes, np.int64)
    split = np.asarray(splits, np.float64)
    t_id, f_id = np.asarray(true_ids, np.int64), np.asarray(false_ids, np.int64)
    t_leaf, f_leaf = np.asarray(true_leafs, bool), np.asarray(false_leafs, bool)
    miss = np.asarray(missing_true, bool) if missing_true else np.zeros(len(feat), bool)
    if feat.size and (feat.max() >= xf.shape[1] or feat.min() < 0):
        raise OpError(f"tree_ensemble: a node reads feature {int(feat.max())} of "
                      f"{xf.shape[1]}")
    members = np.asarray(member_values, np.float64)
    offs = np.asarray(member_offsets, np.int64)
    rows = np.arange(n)
    scores = np.zeros((n, n_targets))
    if aggregate == 2:
        scores.fill(np.inf)
    elif aggregate == 3:
        scores.fill(-np.inf)
    hit = np.zeros((n, n_targets), bool)
    targets, weights = np.asarray(leaf_targets, np.int64), np.asarray(leaf_weights, np.float64)
    for root in roots:
        node = np.full(n, root, np.int64)
        at_leaf = np.zeros(n, bool)
        for _ in range(len(feat) + 1):  # a path visits each node at most once
            if at_leaf.all():
                break
            walk = ~at_leaf
            nd = node[walk]
            v = xf[rows[walk], feat[nd]]
            s, m = split[nd], mode[nd]
            go = np.select([m == 0, m == 1, m == 2, m == 3, m == 4, m == 5],
                           [v <= s, v < s, v >= s, v > s, v == s, v != s], False)
            for k in np.flatnonzero(m == 6):
                i = nd[k]
                go[k] = bool(np.isin(v[k], members[offs[i]:offs[i + 1]]))
            go |= np.isnan(v) & miss[nd]
            node[walk] = np.where(go, t_id[nd], f_id[nd])
            at_leaf[walk] = np.where(go, t_leaf[nd], f_leaf[nd])
        if not at_leaf.all():
            raise OpError("tree_ensemble: a tree has a cycle")
        tgt, w = targets[node], weights[node]
        if aggregate in (0, 1):
            np.add.at(scores, (rows, tgt), w)
        elif aggregate == 2:
            np.minimum.at(scores, (rows, tgt), w)
        else:
            np.maximum.at(scores, (rows, tgt), w)
        hit[rows, tgt] = True
    if aggregate == 0 and roots:
        scores /= len(roots)
    scores = np.where(hit, scores, 0.0)  # a target no leaf reached scores 0
    if post_transform == 2:
        scores = 1.0 / (1.0 + np.exp(-scores))
    elif post_transform in (1, 3):
        keep = scores != 0 if post_transform == 3 else np.ones(scores.shape, bool)
        top = np.max(np.where(keep, scores, -np.inf), axis=1, keepdims=True)
        e = np.where(keep, np.exp(scores - np.where(np.isfinite(top), top, 0.0)), 0.0)
        total = e.sum(axis=1, keepdims=True)
        scores = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    elif post_transform != 0:
        raise OpError(f"tree_ensemble: post_transform {post_transform} is not supported")
    return scores.astype(x.dtype)


def _complex_signal(x: np.ndarray) -> np.ndarray:
    """ONNX's signal layout [..., 1] (real) or [..., 2] (real, imaginary) as complex numbers
    of the input's precision (complex128 for float64, else complex64: NumPy's FFT keeps it,
    and ONNX's expected values are computed so, rounding noise included)."""
    if x.shape[-1] not in (1, 2):
        raise OpError(f"a signal's last axis must be 1 (real) or 2 (complex), got {x.shape}")
    ctype = np.complex128 if x.dtype == np.float64 else np.complex64
    z = np.zeros(x.shape[:-1], ctype)
    z.real = x[..., 0]
    if x.shape[-1] == 2:
        z.imag = x[..., 1]
    return z


def _real_pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


def dft_length(size: int, inverse: bool, onesided: bool) -> int:
    """``DFT``'s default transform length along an axis of ``size`` (an inverse one-sided
    transform restores an even-length real signal)."""
    return 2 * (size - 1) if inverse and onesided else size


@GRAPH_OPS.op("dft")
def dft(x: np.ndarray, *, axis: int, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """ONNX ``DFT`` of ``x`` ([..., 1|2], see :func:`_complex_signal`) along ``axis`` (not the
    last): ``length`` points (-1: :func:`dft_length`; the signal is cut or zero-padded);
    ``onesided`` forward: the first ``length // 2 + 1`` bins; ``inverse``: normalised by
    ``1 / length``, and with ``onesided`` a real signal from the one-sided bins ([..., 1])."""
    if not 0 <= axis < x.ndim - 1:
        raise OpError(f"dft: axis {axis} is not a signal axis of {x.shape}")
    sig = _complex_signal(x)
    n = length if length > 0 else dft_length(x.shape[axis], inverse, onesided)
    if inverse and onesided:
        out = np.fft.irfft(sig, n=n, axis=axis)[..., None]
    elif inverse:
        out = _real_pairs(np.fft.ifft(sig, n=n, axis=axis))
    else:
        z = np.fft.fft(sig, n=n, axis=axis)
        if onesided:
            z = np.take(z, np.arange(n // 2 + 1), axis=axis)
        out = _real_pairs(z)
    return out.astype(x.dtype)


@GRAPH_OPS.op("stft")
def stft(signal: np.ndarray, *window: np.ndarray, frame_step: int, frame_length: int,
         onesided: bool) -> np.ndarray:
    """ONNX ``STFT``: ``signal`` [B, L, 1|2] cut into ``1 + (L - frame_length) // frame_step``
    frames of ``frame_length`` samples, each multiplied by ``window`` (ones without it) and
    transformed: [B, frames, bins, 2] (``onesided``: ``frame_length // 2 + 1`` bins)."""
    sig = _complex_signal(signal)
    length = sig.shape[1]
    if frame_step < 1 or not 1 <= frame_length <= length:
        raise OpError(f"stft: frame_step {frame_step} and frame_length {frame_length} do not "
                      f"fit a signal of {length} samples")
    frames = 1 + (length - frame_length) // frame_step
    idx = np.arange(frames)[:, None] * frame_step + np.arange(frame_length)[None, :]
    cut = sig[:, idx]
    if window:
        w = window[0].reshape(-1)
        if w.size != frame_length:
            raise OpError(f"stft: a window of {w.size} for frames of {frame_length}")
        cut = cut * w.astype(np.float64)
    z = np.fft.fft(cut, n=frame_length, axis=-1)
    if onesided:
        z = z[..., : frame_length // 2 + 1]
    return _real_pairs(z).astype(signal.dtype)


def _roi_axis(v: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
    """Per sample position along one axis: low and high pixel, their weights, and whether
    the sample lies within a pixel of the image (RoiAlign's bilinear rule)."""
    valid = (v >= -1.0) & (v <= size)
    v = np.maximum(v, 0.0)
    low = np.floor(v).astype(np.int64)
    edge = low >= size - 1
    low = np.where(edge, size - 1, low)
    high = np.where(edge, size - 1, low + 1)
    frac = np.where(edge, 0.0, v - low)
    return low, high, frac, 1.0 - frac, valid


@GRAPH_OPS.op("roi_align")
def roi_align(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, *, mode: str,
              output_height: int, output_width: int, sampling_ratio: int,
              spatial_scale: float, half_pixel: bool) -> np.ndarray:
    """ONNX ``RoiAlign``: for each region ``rois[r]`` ((x1, y1, x2, y2) scaled by
    ``spatial_scale``) of image ``batch_indices[r]`` of ``x`` [N, C, H, W], an
    [output_height, output_width] grid of bins, each the average (or the maximum of the
    weighted corner values, ``mode = "max"``, as ONNX defines it) of a grid of bilinear
    samples (``sampling_ratio`` per axis, or ``ceil(bin size)`` when 0)."""
    n_img, c, h, w = x.shape
    boxes = rois.astype(np.float64).reshape(-1, 4)
    idx = batch_indices.reshape(-1).astype(np.int64)
    if idx.size != boxes.shape[0]:
        raise OpError(f"roi_align: {idx.size} batch indices for {boxes.shape[0]} regions")
    if idx.size and (idx.min() < 0 or idx.max() >= n_img):
        raise OpError(f"roi_align: a batch index outside [0, {n_img})")
    oh, ow = output_height, output_width
    out = np.zeros((boxes.shape[0], c, oh, ow))
    off = 0.5 if half_pixel else 0.0
    xf = x.astype(np.float64)
    for r, (x1, y1, x2, y2) in enumerate(boxes * spatial_scale - off):
        rh, rw = y2 - y1, x2 - x1
        if not half_pixel:
            rh, rw = max(rh, 1.0), max(rw, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rh / oh))
        gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rw / ow))
        if gh <= 0 or gw <= 0:
            continue
        ys = (y1 + np.arange(oh)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh)
        xs = (x1 + np.arange(ow)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw)
        ylo, yhi, ly, hy, vy = _roi_axis(ys.reshape(-1), h)
        xlo, xhi, lx, hx, vx = _roi_axis(xs.reshape(-1), w)
        valid = (vy[:, None] & vx[None, :]).astype(np.float64)
        img = xf[idx[r]]
        terms = [img[:, yi[:, None], xi[None, :]] * (wy[:, None] * wx[None, :] * valid)
                 for yi, wy in ((ylo, hy), (yhi, ly)) for xi, wx in ((xlo, hx), (xhi, lx))]
        if mode == "avg":
            val = (terms[0] + terms[1] + terms[2] + terms[3]).reshape(c, oh, gh, ow, gw)
            out[r] = val.sum(axis=(2, 4)) / max(gh * gw, 1)
        else:
            val = np.maximum(np.maximum(terms[0], terms[1]), np.maximum(terms[2], terms[3]))
            out[r] = val.reshape(c, oh, gh, ow, gw).max(axis=(2, 4))
    return out.astype(x.dtype)
