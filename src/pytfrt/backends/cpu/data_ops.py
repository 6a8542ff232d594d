"""Compute functions of the graph dialect's data-movement ops (reshape, transpose, concat, ...).

Same conventions as :mod:`pytfrt.backends.cpu.array_ops`: operands positional, attributes
keyword-only (named as in ``docs/graph_dialect.md``), new arrays returned; :data:`GRAPH_OPS`
maps op names to the functions.  Results never alias an operand (a reshape copies only when
NumPy must; callers never write into results in place unless the buffer planner proved it
safe).  Pure functions: thread-safe.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.backends.cpu import _layout_copy
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError, onnx_slice

GRAPH_OPS = OpTable()
"""Op name -> compute function (see the module docstring)."""


def _ints(t: np.ndarray) -> tuple[int, ...]:
    """The elements of ``t`` as Python ints (an integer vector, such as a shape plan's shape
    vector, through one ``tolist``: ~1 us, where converting element by element took ~6)."""
    if type(t) is not np.ndarray or t.ndim != 1:
        t = np.asarray(t).reshape(-1)
    if t.dtype.kind in "iu":
        return tuple(t.tolist())
    return tuple(int(v) for v in t)


@GRAPH_OPS.op("reshape")
def reshape(x: np.ndarray, *shape_t: np.ndarray, shape: tuple[int, ...],
            copy_zero: bool) -> np.ndarray:
    """``x`` with a new shape (from the operand if given, else the attribute; one -1)."""
    dims = list(_ints(shape_t[0]) if shape_t else shape)
    if copy_zero and 0 in dims:
        dims = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(dims)]
    try:
        return x.reshape(dims)
    except ValueError:
        raise OpError(f"reshape: cannot reshape {list(x.shape)} to {dims}") from None


@GRAPH_OPS.op("transpose")
def transpose(x: np.ndarray, *, perm: tuple[int, ...],
              out: np.ndarray | None = None) -> np.ndarray:
    """The axes permuted (a contiguous copy; into ``out``, of the result's shape and dtype,
    when given: a compiled model's arena buffer, so a CNN's input image is not copied into
    fresh pages on every call)."""
    if tuple(perm) == (0, 2, 3, 1) and x.ndim == 4 and x.dtype in _layout_copy.FLOATS:
        return _layout_copy.nchw_to_nhwc(x, out)  # a CNN's input after -tg-layout-nhwc
    if out is not None:
        np.copyto(out, np.transpose(x, perm))
        return out
    return np.ascontiguousarray(np.transpose(x, perm))


@GRAPH_OPS.op("concat")
def concat(*xs: np.ndarray, axis: int) -> np.ndarray:
    """The operands joined along ``axis``."""
    return np.concatenate(xs, axis=axis)


@GRAPH_OPS.op("split")
def split(x: np.ndarray, *, axis: int, sizes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """``x`` cut along ``axis`` into pieces of ``sizes`` (one may be -1)."""
    dim = x.shape[axis]
    sz = list(sizes)
    if -1 in sz:
        sz[sz.index(-1)] = dim - sum(s for s in sz if s != -1)
    if sum(sz) != dim or any(s < 0 for s in sz):
        raise OpError(f"split: sizes {list(sizes)} do not fit dimension {dim}")
    bounds = np.cumsum(sz)[:-1]
    return tuple(np.ascontiguousarray(p) for p in np.split(x, bounds, axis=axis))


_SPLIT_BYTES = 1 << 21
"""A slice's or constant pad's copy from this many bytes is split over the helper threads (a
ResNet-50 b8 step's stem: a 26 MB slice and pad took 9.5 and 5.6 ms on one thread)."""


def _split_axis(shape: tuple[int, ...]) -> int | None:
    """The first axis with at least as many entries as threads (shards along it write whole
    sub-blocks), or ``None``."""
    from pytfrt.backends.cpu._parallel import num_threads

    n = num_threads()
    return next((i for i, d in enumerate(shape) if d >= n), None) if n > 1 else None


def _copy_split(out: np.ndarray, src: np.ndarray) -> bool:
    """``out[...] = src`` (same shape) on the helper threads, sharded along one axis; ``False``
    (nothing written) if the copy is small or no axis splits."""
    if out.nbytes < _SPLIT_BYTES:
        return False
    axis = _split_axis(out.shape)
    if axis is None:
        return False
    from pytfrt.backends.cpu._parallel import chunks, parallel_for

    parts = chunks(out.shape[axis], 1)
    lead = (slice(None),) * axis

    def run(i: int) -> None:
        sl = (*lead, slice(*parts[i]))
        np.copyto(out[sl], src[sl])

    parallel_for(run, len(parts))
    return True


@GRAPH_OPS.op("slice")
def slice_(x: np.ndarray, *operands: np.ndarray, starts: tuple[int, ...], ends: tuple[int, ...],
           axes: tuple[int, ...], steps: tuple[int, ...]) -> np.ndarray:
    """ONNX ``Slice``: per axis ``x[start:end:step]``, clamped; tensor operands win."""
    if operands:
        starts, ends = _ints(operands[0]), _ints(operands[1])
        axes = _ints(operands[2]) if len(operands) > 2 else ()
        steps = _ints(operands[3]) if len(operands) > 3 else ()
    axes = axes or tuple(range(len(starts)))
    steps = steps or (1,) * len(starts)
    idx: list[slice] = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        if st == 0:
            raise OpError("slice: a step must not be 0")
        idx[a] = onnx_slice(s, e, st, x.shape[a])
    view = x[tuple(idx)]
    if view.nbytes >= _SPLIT_BYTES and not view.flags.c_contiguous:
        out = np.empty(view.shape, view.dtype)
        if _copy_split(out, view):
            return out
    return np.ascontiguousarray(view)


@GRAPH_OPS.op("pad")
def pad(x: np.ndarray, *pads_t: np.ndarray, pads: tuple[int, ...], mode: str,
        value: float) -> np.ndarray:
    """``x`` padded by ``pads`` (all befores, then all afters); negative pads crop."""
    p = _ints(pads_t[0]) if pads_t else pads
    r = x.ndim
    if len(p) != 2 * r:
        raise OpError(f"pad: pads must have {2 * r} entries, got {len(p)}")
    crop = [slice(max(-p[i], 0), x.shape[i] - max(-p[i + r], 0)) for i in range(r)]
    x = x[tuple(crop)]
    width = [(max(p[i], 0), max(p[i + r], 0)) for i in range(r)]
    if mode == "constant" and x.nbytes >= _SPLIT_BYTES:
        out = np.empty(tuple(d + b + a for d, (b, a) in zip(x.shape, width, strict=True)),
                       x.dtype)
        inner = tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, width, strict=True))
        if _copy_split(out[inner], x):
            fill = x.dtype.type(value)
            for i, (b, a) in enumerate(width):  # the border slabs (corners written twice)
                lead = (slice(None),) * i
                if b:
                    out[(*lead, slice(0, b))] = fill
                if a:
                    out[(*lead, slice(out.shape[i] - a, None))] = fill
            return out
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=x.dtype.type(value))
    numpy_mode: Any = mode  # reflect, edge, wrap: NumPy's meanings are ONNX's
    return np.pad(x, width, mode=numpy_mode)


def _check_indices(idx: np.ndarray, dim: int, op: str) -> np.ndarray:
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise OpError(f"{op}: indices out of range [{-dim}, {dim})")
    return np.where(idx < 0, idx + dim, idx)


@GRAPH_OPS.op("gather")
def gather(x: np.ndarray, indices: np.ndarray, *, axis: int, batch_dims: int) -> np.ndarray:
    """``take`` along ``axis`` with ``batch_dims`` leading batch dimensions."""
    axis = axis % x.ndim
    idx = _check_indices(indices, x.shape[axis], "gather")
    if batch_dims == 0:
        return np.take(x, idx, axis=axis)
    batch = x.shape[:batch_dims]
    out = [gather(x[b], idx[b], axis=axis - batch_dims, batch_dims=0) for b in np.ndindex(batch)]
    return np.stack(out).reshape(batch + out[0].shape) if out else np.zeros((0,), x.dtype)


@GRAPH_OPS.op("gather_nd")
def gather_nd(x: np.ndarray, indices: np.ndarray, *, batch_dims: int) -> np.ndarray:
    """TF ``GatherNd`` / ONNX ``GatherND``."""
    if batch_dims:
        batch = x.shape[:batch_dims]
        out = [gather_nd(x[b], indices[b], batch_dims=0) for b in np.ndindex(batch)]
        return np.stack(out).reshape(batch + out[0].shape)
    k = indices.shape[-1]
    flat = indices.reshape(-1, k).astype(np.int64)  # a copy: the operand is never written
    for j in range(k):
        flat[:, j] = _check_indices(flat[:, j], x.shape[j], "gather_nd")
    res = x[tuple(flat.T)]
    return np.ascontiguousarray(res.reshape(indices.shape[:-1] + x.shape[k:]))


@GRAPH_OPS.op("scatter_nd")
def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    """A copy of ``data`` with ``updates`` written at ``indices`` (ONNX ``ScatterND``)."""
    out = data.copy()
    k = indices.shape[-1]
    flat = indices.reshape(-1, k).astype(np.int64)  # a copy: the operand is never written
    upd = updates.reshape((flat.shape[0],) + data.shape[k:])
    for j in range(k):
        flat[:, j] = _check_indices(flat[:, j], data.shape[j], "scatter_nd")
    out[tuple(flat.T)] = upd
    return out


@GRAPH_OPS.op("tile")
def tile(x: np.ndarray, *mult_t: np.ndarray, multiples: tuple[int, ...]) -> np.ndarray:
    """``x`` repeated ``multiples`` times per axis."""
    m = _ints(mult_t[0]) if mult_t else multiples
    if len(m) != x.ndim:
        raise OpError(f"tile: multiples {list(m)} do not match rank {x.ndim}")
    return np.tile(x, m)


@GRAPH_OPS.op("broadcast_to")
def broadcast_to(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """``x`` broadcast to ``shape`` (NumPy rules, the result a real C-contiguous array: a copy
    in the view's stride order would hand the flat loops downstream a transposed layout)."""
    target = _ints(shape)
    try:
        out_shape = np.broadcast_shapes(x.shape, target)
    except ValueError:
        raise OpError(f"broadcast_to: {list(x.shape)} does not broadcast to {list(target)}") \
            from None
    return np.array(np.broadcast_to(x, out_shape), order="C")


@GRAPH_OPS.op("expand_dims")
def expand_dims(x: np.ndarray, *, axis: int) -> np.ndarray:
    """``x`` with a new size-1 axis at ``axis``."""
    return np.expand_dims(x, axis)


@GRAPH_OPS.op("squeeze")
def squeeze(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
    """``x`` without the size-1 ``axes`` (all of them if empty)."""
    try:
        return np.squeeze(x, axis=tuple(axes) if axes else None)
    except ValueError:
        raise OpError(f"squeeze: cannot squeeze axes {list(axes)} of {list(x.shape)}") from None


def _index_dtype(name: str) -> Any:
    return np.int32 if name == "i32" else np.int64


@GRAPH_OPS.op("shape")
def shape(x: np.ndarray, *, out_type: str) -> np.ndarray:
    """The shape of ``x`` as a 1-D tensor."""
    return np.array(x.shape, dtype=_index_dtype(out_type))


@GRAPH_OPS.op("size")
def size(x: np.ndarray, *, out_type: str) -> np.ndarray:
    """The number of elements of ``x`` as a scalar."""
    return np.array(x.size, dtype=_index_dtype(out_type))


@GRAPH_OPS.op("fill")
def fill(shape: np.ndarray, value: np.ndarray) -> np.ndarray:
    """A tensor of ``shape`` filled with the scalar ``value``."""
    dims = _ints(shape)
    if any(d < 0 for d in dims):
        raise OpError(f"fill: negative dimension in {list(dims)}")
    return np.full(dims, value.reshape(()), dtype=value.dtype)


@GRAPH_OPS.op("range")
def range_(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``arange(start, limit, delta)`` in the operands' element type."""
    d = delta.reshape(()).item()
    if d == 0:
        raise OpError("range: delta must not be 0")
    return np.arange(start.reshape(()).item(), limit.reshape(()).item(), d, dtype=start.dtype)


@GRAPH_OPS.op("one_hot")
def one_hot(indices: np.ndarray, depth: np.ndarray, on: np.ndarray, off: np.ndarray, *,
            axis: int) -> np.ndarray:
    """One-hot vectors of length ``depth`` along ``axis`` (out-of-range indices are all off)."""
    d = int(np.asarray(depth).reshape(-1)[0])
    idx = indices.astype(np.int64)
    hot = idx[..., None] == np.arange(d)
    out = np.where(hot, on.reshape(()), off.reshape(()))
    axis = axis % out.ndim
    return np.ascontiguousarray(np.moveaxis(out, -1, axis)).astype(on.dtype, copy=False)


@GRAPH_OPS.op("where")
def where(cond: np.ndarray) -> np.ndarray:
    """Indices of the true elements, one row per element (TF ``Where``)."""
    return np.ascontiguousarray(np.argwhere(cond).astype(np.int64))


@GRAPH_OPS.op("top_k")
def top_k(x: np.ndarray, k: np.ndarray, *, sorted: bool,  # noqa: A002 - op attribute
          index_type: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest values of the last axis and their indices (ties: lower index first)."""
    kk = int(np.asarray(k).reshape(-1)[0])
    if not 0 <= kk <= x.shape[-1]:
        raise OpError(f"top_k: k = {kk} is out of range for a last dimension of {x.shape[-1]}")
    # a key that sorts descending: -x for floats; ~x for integers and bools (order-reversing
    # without the overflow of -x at the signed minimum or the wrap of unsigned 0)
    key = -x if x.dtype.kind in "fc" else ~x
    order = np.argsort(key, axis=-1, kind="stable")[..., :kk]
    vals = np.take_along_axis(x, order, axis=-1)
    return np.ascontiguousarray(vals), order.astype(_index_dtype(index_type))


def _to_nhwc(x: np.ndarray, layout: str) -> np.ndarray:
    return x if layout == "NHWC" else np.transpose(x, (0, 2, 3, 1))


def _from_nhwc(x: np.ndarray, layout: str) -> np.ndarray:
    return np.ascontiguousarray(x if layout == "NHWC" else np.transpose(x, (0, 3, 1, 2)))


@GRAPH_OPS.op("depth_to_space")
def depth_to_space(x: np.ndarray, *, block_size: int, layout: str, mode: str) -> np.ndarray:
    """TF ``DepthToSpace`` (``DCR``) or ONNX's ``CRD`` mode."""
    b = block_size
    y = _to_nhwc(x, layout)
    n, h, w, c = y.shape
    if c % (b * b):
        raise OpError(f"depth_to_space: {c} channels are not divisible by {b * b}")
    oc = c // (b * b)
    if mode == "DCR":
        y = y.reshape(n, h, w, b, b, oc).transpose(0, 1, 3, 2, 4, 5)
    else:
        y = y.reshape(n, h, w, oc, b, b).transpose(0, 1, 4, 2, 5, 3)
    return _from_nhwc(y.reshape(n, h * b, w * b, oc), layout)


@GRAPH_OPS.op("space_to_depth")
def space_to_depth(x: np.ndarray, *, block_size: int, layout: str, mode: str) -> np.ndarray:
    """TF ``SpaceToDepth`` (the inverse of ``DCR`` depth_to_space) or ONNX's ``CRD`` mode."""
    b = block_size
    y = _to_nhwc(x, layout)
    n, h, w, c = y.shape
    if h % b or w % b:
        raise OpError(f"space_to_depth: {h}x{w} is not divisible by {b}")
    # DCR: depth = (row in block, column in block, channel); CRD: (channel, row, column)
    order = (0, 1, 3, 2, 4, 5) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    y = y.reshape(n, h // b, b, w // b, b, c).transpose(order)
    return _from_nhwc(y.reshape(n, h // b, w // b, b * b * c), layout)


def _source_coords(n_in: int, n_out: int, mode: str) -> np.ndarray:
    """Input coordinate of each output index along one axis (ONNX ``Resize`` modes)."""
    x = np.arange(n_out, dtype=np.float64)
    scale = n_out / n_in
    if mode == "align_corners":
        return x * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    if mode == "pytorch_half_pixel" and n_out == 1:
        return np.zeros(n_out)
    return (x + 0.5) / scale - 0.5


def _resize_axis(x: np.ndarray, axis: int, n_out: int, mode: str, ctm: str,
                 nearest_mode: str) -> np.ndarray:
    n_in = x.shape[axis]
    src = _source_coords(n_in, n_out, ctm)
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            idx = np.ceil(src - 0.5)
        elif nearest_mode == "round_prefer_ceil":
            idx = np.floor(src + 0.5)
        elif nearest_mode == "floor":
            idx = np.floor(src)
        else:
            idx = np.ceil(src)
        return np.take(x, np.clip(idx, 0, n_in - 1).astype(np.int64), axis=axis)
    src = np.clip(src, 0, n_in - 1)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    shape = [1] * x.ndim
    shape[axis] = n_out
    w = (src - i0).reshape(shape)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    lo = np.take(x, i0, axis=axis).astype(acc)
    hi = np.take(x, i1, axis=axis).astype(acc)
    return lo + (hi - lo) * w.astype(acc)


@GRAPH_OPS.op("resize")
def resize(x: np.ndarray, *, size: tuple[int, ...], layout: str, mode: str,
           coordinate_transformation_mode: str, nearest_mode: str) -> np.ndarray:
    """Spatial resize of a rank-4 tensor to ``size`` = (H, W): ``nearest`` or (bi)``linear``,
    with ONNX's coordinate transformation and nearest rounding modes."""
    if x.ndim != 4 or len(size) != 2 or min(size) < 1:
        raise OpError(f"resize: needs a rank-4 input and a positive (H, W) size, got "
                      f"{list(x.shape)} and {list(size)}")
    h_ax, w_ax = (1, 2) if layout == "NHWC" else (2, 3)
    y = _resize_axis(x, h_ax, size[0], mode, coordinate_transformation_mode, nearest_mode)
    y = _resize_axis(y, w_ax, size[1], mode, coordinate_transformation_mode, nearest_mode)
    return np.ascontiguousarray(y.astype(x.dtype, copy=False))


def resize_matrix(n_in: int, n_out: int, *, mode: str, coordinate_transformation_mode: str,
                  nearest_mode: str = "round_prefer_floor") -> np.ndarray:
    """The ``[n_out, n_in]`` matrix :func:`resize` applies along one axis (the kernel run on
    the identity: each basis vector a batch entry, the other spatial axis kept at size 1)."""
    basis = np.eye(n_in).reshape(n_in, n_in, 1, 1)
    out = resize(basis, size=(n_out, 1), layout="NHWC", mode=mode,
                 coordinate_transformation_mode=coordinate_transformation_mode,
                 nearest_mode=nearest_mode)
    return out[:, :, 0, 0].T  # type: ignore[no-any-return]


@GRAPH_OPS.op("identity_n")
def identity_n(*xs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Copies of the operands."""
    return tuple(x.copy() for x in xs)
