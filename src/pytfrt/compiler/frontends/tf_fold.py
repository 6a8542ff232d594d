"""Import-time evaluation of TF shape arithmetic: constants and partially known shapes.

Keras and TF's gradient code compute shapes at run time (``Shape -> StridedSlice -> Pack ->
Reshape``, ``BroadcastGradientArgs -> Sum``). When the inputs are known this module evaluates
such nodes with NumPy, so the graph dialect sees static attributes; when only some dimensions
are known (a dynamic batch) it propagates a *partial* vector (``[None, 784]``), which is enough
to keep a single ``-1`` in a reshape or to decide the reduction axes of a broadcast gradient.

:func:`fold` returns ``None`` when it cannot decide; the converter then emits real ops (and
the partial value, if any, rides along on the emitted value). Only small tensors are folded
(``MAX_FOLD_ELEMENTS``): big constant computations are left to the compiler's constant folding.
Pure functions; thread-safe.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.compiler.frontends.tf_values import TV, Sym, attr, tf_dtype_name, tg_to_np

MAX_FOLD_ELEMENTS = 4096
"""Largest input or output (in elements) evaluated at import time."""

Folded = list[TV] | None
_FOLDERS: dict[str, Callable[[Any, list[TV]], Folded]] = {}


def fold(node: Any, ins: list[TV]) -> Folded:
    """The node's outputs if they are known (fully or partially) from its inputs, else ``None``."""
    folder = _FOLDERS.get(node.op)
    if folder is None:
        return None
    for tv in ins:
        if tv.const is not None and tv.const.size > MAX_FOLD_ELEMENTS:
            return None
    out = folder(node, ins)
    if out is not None:
        for tv in out:
            if tv.const is not None and tv.const.size > MAX_FOLD_ELEMENTS:
                return None
    return out


def _folder(*ops: str) -> Callable[[Callable[[Any, list[TV]], Folded]], Any]:
    def deco(fn: Callable[[Any, list[TV]], Folded]) -> Any:
        for op in ops:
            _FOLDERS[op] = fn
        return fn

    return deco


def _all_const(ins: list[TV]) -> bool:
    return all(tv.const is not None for tv in ins)


def _k(tv: TV) -> np.ndarray:
    """The constant of ``tv`` (callers checked it is one)."""
    assert tv.const is not None
    return tv.const


def _c(array: Any, dtype: Any = None) -> TV:
    return TV(const=np.asarray(array, dtype=dtype))


def _unknown(v: Any) -> bool:
    return v is None or isinstance(v, Sym)


def _partial(entries: list[Any], dtype: str, scalar: bool = False) -> TV:
    """A vector (or scalar) from entries that are ints, ``None`` or :class:`Sym` (unknown)."""
    if not any(_unknown(e) for e in entries):
        arr = np.asarray(entries, dtype=tg_to_np(dtype))
        return TV(const=arr.reshape(()) if scalar else arr)
    tv = TV(
        partial=[None if _unknown(e) else int(e) for e in entries],
        dtype=dtype,
        shape=() if scalar else (len(entries),),
    )
    syms = [e if isinstance(e, Sym) else None for e in entries]
    tv.syms = syms if any(syms) else None
    return tv


def _out_dtype(node: Any, name: str = "out_type") -> str:
    return tf_dtype_name(attr(node, name, 3))  # DT_INT32 = 3 is TF's default


# -- shapes of values -------------------------------------------------------------------------


@_folder("Shape")
def _shape(node: Any, ins: list[TV]) -> Folded:
    x = ins[0]
    if x.shape is None:
        return None
    return [_partial(_dims(x), _out_dtype(node))]


def _dims(x: TV) -> list[Any]:
    """``x``'s shape with a :class:`Sym` for each dynamic dimension."""
    return [Sym(x, i) if d is None else d for i, d in enumerate(x.shape or ())]


@_folder("ShapeN")
def _shape_n(node: Any, ins: list[TV]) -> Folded:
    if any(x.shape is None for x in ins):
        return None
    return [_partial(_dims(x), _out_dtype(node)) for x in ins]


@_folder("Size")
def _size(node: Any, ins: list[TV]) -> Folded:
    shape = ins[0].shape
    if shape is None:
        return None
    if any(d is None for d in shape):  # an unknown scalar: concat([size, ...]) stays partial
        return [_partial([None], _out_dtype(node), scalar=True)]
    return [_c(math.prod(int(d or 0) for d in shape), tg_to_np(_out_dtype(node)))]


@_folder("Rank")
def _rank(node: Any, ins: list[TV]) -> Folded:
    if ins[0].shape is None:
        return None
    return [_c(len(ins[0].shape), np.int32)]


# -- vectors that may be partial --------------------------------------------------------------


def _vector(tv: TV) -> np.ndarray | None:
    """An object array of a const or partial tensor (``None`` entries unknown); ``None`` for a
    floating-point constant (not shape arithmetic: the folders keep integers only, so a float
    weight is sliced by the emitted op instead of being truncated here)."""
    if tv.const is not None:
        if np.asarray(tv.const).dtype.kind in "fc":
            return None
        return np.asarray(tv.const, dtype=object)
    if tv.partial is not None:
        syms = tv.syms or [None] * len(tv.partial)
        arr = np.empty(len(tv.partial), dtype=object)
        arr[:] = [s if v is None else v for v, s in zip(tv.partial, syms, strict=True)]
        return arr.reshape(()) if tv.shape == () else arr
    return None


def _from_object(arr: Any, dtype: str) -> TV:
    arr = np.asarray(arr, dtype=object)
    entries = [v if _unknown(v) else int(v) for v in arr.reshape(-1)]
    if arr.ndim > 1:
        if any(_unknown(e) for e in entries):
            raise ValueError("partial tensors are vectors")
        return TV(const=np.asarray(entries, dtype=tg_to_np(dtype)).reshape(arr.shape))
    return _partial(entries, dtype, scalar=arr.ndim == 0)


def strided_slice_index(node: Any, begin: Any, end: Any, strides: Any) -> tuple[Any, ...]:
    """The NumPy index tuple equivalent to a ``StridedSlice`` node's spec (masks decoded)."""
    masks = {
        k: int(attr(node, k, 0))
        for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    }
    index: list[Any] = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides, strict=True)):
        bit = 1 << i
        if masks["ellipsis_mask"] & bit:
            index.append(Ellipsis)
        elif masks["new_axis_mask"] & bit:
            index.append(np.newaxis)
        elif masks["shrink_axis_mask"] & bit:
            index.append(int(b))
        else:
            index.append(
                slice(
                    None if masks["begin_mask"] & bit else int(b),
                    None if masks["end_mask"] & bit else int(e),
                    int(s),
                )
            )
    return tuple(index)


@_folder("StridedSlice")
def _strided_slice(node: Any, ins: list[TV]) -> Folded:
    x = _vector(ins[0])
    small_float = ins[0].const is not None and ins[0].const.size <= 64  # exact: no arithmetic
    if (x is None and not small_float) or not _all_const(ins[1:]):
        return None
    b, e, s = (np.asarray(t.const).reshape(-1) for t in ins[1:])
    idx = strided_slice_index(node, b, e, s)
    if x is None:
        return [TV(const=np.asarray(np.asarray(ins[0].const)[idx]))]
    return [_from_object(x[idx], ins[0].dtype or "i32")]


@_folder("Slice")
def _slice(node: Any, ins: list[TV]) -> Folded:
    x = _vector(ins[0])
    if x is None or not _all_const(ins[1:]):
        return None
    begin = np.asarray(ins[1].const).reshape(-1)
    size = np.asarray(ins[2].const).reshape(-1)
    idx = tuple(
        slice(int(b), None if int(n) < 0 else int(b) + int(n))
        for b, n in zip(begin, size, strict=True)
    )
    return [_from_object(x[idx], ins[0].dtype or "i32")]


@_folder("GatherV2")
def _gather(node: Any, ins: list[TV]) -> Folded:
    x = _vector(ins[0])
    if x is None or not _all_const(ins[1:]) or int(attr(node, "batch_dims", 0)) != 0:
        return None
    return [_from_object(np.take(x, _k(ins[1]), axis=int(_k(ins[2]))), ins[0].dtype or "i32")]


@_folder("Pack")
def _pack(node: Any, ins: list[TV]) -> Folded:
    if _all_const(ins):
        return [_c(np.stack([_k(t) for t in ins], axis=int(attr(node, "axis", 0))))]
    parts = [_vector(t) for t in ins]
    if any(p is None or p.ndim != 0 for p in parts) or int(attr(node, "axis", 0)) != 0:
        return None
    return [_partial([p.item() for p in parts if p is not None], ins[0].dtype or "i32")]


@_folder("ConcatV2")
def _concat(node: Any, ins: list[TV]) -> Folded:
    vals, axis = ins[:-1], ins[-1]
    if axis.const is None:
        return None
    if _all_const(vals):
        return [_c(np.concatenate([t.const for t in vals], axis=int(axis.const)))]
    parts = [_vector(t) for t in vals]
    if any(p is None or p.ndim != 1 for p in parts):
        return None
    return [
        _partial([v for p in parts if p is not None for v in p.tolist()], vals[0].dtype or "i32")
    ]


@_folder("DynamicStitch", "ParallelDynamicStitch")
def _dynamic_stitch(node: Any, ins: list[TV]) -> Folded:
    """``merged[indices[m][i]] = data[m][i]`` for constant indices and const/partial data of
    the indices' shape (the reductions' gradient stitches ``output_shape_kept_dims`` so);
    later pieces win, as TF."""
    n = len(ins) // 2
    idx, data = ins[:n], ins[n:]
    if not _all_const(idx):
        return None
    flat_idx = [np.asarray(_k(t)).reshape(-1) for t in idx]
    parts = [_vector(t) for t in data]
    merged: dict[int, Any] = {}
    for i, p in zip(flat_idx, parts, strict=True):
        if p is None or p.size != i.size:
            return None
        for j, v in zip(i.tolist(), p.reshape(-1).tolist(), strict=True):
            merged[int(j)] = v
    if sorted(merged) != list(range(len(merged))):
        return None
    return [_partial([merged[j] for j in range(len(merged))], data[0].dtype or "i32")]


@_folder("InvertPermutation")
def _invert_permutation(node: Any, ins: list[TV]) -> Folded:
    if not _all_const(ins):
        return None
    return [_c(np.argsort(_k(ins[0]).reshape(-1)).astype(_k(ins[0]).dtype))]


@_folder("ConcatOffset")
def _concat_offset(node: Any, ins: list[TV]) -> Folded:
    """Where each input starts in a concatenation (the concat gradient's slice offsets): only
    the sizes along the axis need to be known."""
    if ins[0].const is None:
        return None
    shapes = [t.known_vector() for t in ins[1:]]
    if any(s is None for s in shapes):
        return None
    rank = len(shapes[0])  # type: ignore[arg-type]
    axis = int(ins[0].const) % rank
    out: list[TV] = []
    start = 0
    for s in shapes:
        offset = [0] * rank
        offset[axis] = start
        out.append(_c(np.asarray(offset, dtype=tg_to_np(ins[1].dtype or "i32"))))
        size = s[axis]  # type: ignore[index]
        if size is None:
            return None
        start += int(size)
    return out


@_folder("Cast")
def _cast(node: Any, ins: list[TV]) -> Folded:
    dst = tf_dtype_name(attr(node, "DstT"))
    x = ins[0]
    if x.const is not None:
        return [_c(x.const.astype(tg_to_np(dst)))]
    v = _vector(x)
    if x.partial is not None and v is not None and dst in ("i32", "i64"):
        return [_partial(list(v.reshape(-1)), dst, scalar=x.shape == ())]
    return None


@_folder("Identity", "StopGradient", "Snapshot", "PreventGradient")
def _identity(node: Any, ins: list[TV]) -> Folded:
    x = ins[0]
    if x.const is not None or x.partial is not None:
        return [x]
    return None


@_folder("IdentityN")
def _identity_n(node: Any, ins: list[TV]) -> Folded:
    if all(t.const is not None or t.partial is not None for t in ins):
        return list(ins)
    return None


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "Add": lambda a, b: a + b,
    "AddV2": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "FloorDiv": lambda a, b: a // b,
    "FloorMod": lambda a, b: a % b,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
}


@_folder(*_ARITH)
def _arith(node: Any, ins: list[TV]) -> Folded:
    fn = _ARITH[node.op]
    a, b = ins
    if _all_const(ins):
        with np.errstate(all="ignore"):
            return [_c(np.asarray(fn(a.const, b.const)).astype(a.const.dtype))]  # type: ignore[union-attr]
    va, vb = _vector(a), _vector(b)
    if va is None or vb is None or a.dtype not in ("i32", "i64"):
        return None
    ea, eb = np.broadcast_arrays(va, vb)
    out = [
        None if _unknown(x) or _unknown(y) else int(fn(x, y))
        for x, y in zip(ea.reshape(-1), eb.reshape(-1), strict=True)
    ]
    return [_from_object(np.asarray(out, dtype=object).reshape(ea.shape), a.dtype)]


_SIMPLE: dict[str, Callable[..., Any]] = {
    "RealDiv": lambda a, b: a / b,
    "Neg": lambda a: -a,
    "Equal": np.equal,
    "NotEqual": np.not_equal,
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
    "LogicalNot": np.logical_not,
    "SelectV2": np.where,
}


@_folder(*_SIMPLE)
def _simple(node: Any, ins: list[TV]) -> Folded:
    if not _all_const(ins):
        return None
    with np.errstate(all="ignore"):
        out = np.asarray(_SIMPLE[node.op](*[t.const for t in ins]))
    if node.op in ("RealDiv", "Neg"):
        out = out.astype(ins[0].const.dtype)  # type: ignore[union-attr]
    if node.op == "SelectV2":
        out = out.astype(ins[1].const.dtype)  # type: ignore[union-attr]
    return [_c(out)]


def _axes(tv: TV) -> tuple[int, ...] | None:
    if tv.const is None:
        return None
    return tuple(int(a) for a in np.asarray(tv.const).reshape(-1))


_REDUCERS: dict[str, Callable[..., Any]] = {
    "Prod": np.prod,
    "Sum": np.sum,
    "Max": np.max,
    "Min": np.min,
}


@_folder(*_REDUCERS)
def _reduce(node: Any, ins: list[TV]) -> Folded:
    x, axes_tv = ins
    axes = _axes(axes_tv)
    if axes is None:
        return None
    keep = bool(attr(node, "keep_dims", False))
    fn = _REDUCERS[node.op]
    if x.const is None:
        return None
    return [_c(np.asarray(fn(x.const, axis=axes, keepdims=keep)).astype(x.const.dtype))]


@_folder("Reshape")
def _reshape(node: Any, ins: list[TV]) -> Folded:
    x, shape = ins
    if x.const is None or shape.const is None:
        return None
    return [_c(x.const.reshape([int(d) for d in np.asarray(shape.const).reshape(-1)]))]


@_folder("ExpandDims")
def _expand_dims(node: Any, ins: list[TV]) -> Folded:
    x, axis = ins
    if axis.const is None:
        return None
    if x.const is not None:
        return [_c(np.expand_dims(x.const, int(axis.const)))]
    v = _vector(x)
    if v is not None and x.partial is not None and x.shape == () and int(axis.const) in (0, -1):
        return [_partial([v.item()], x.dtype or "i32")]
    return None


@_folder("Squeeze")
def _squeeze(node: Any, ins: list[TV]) -> Folded:
    x = ins[0]
    if x.const is None:
        return None
    dims = attr(node, "squeeze_dims", [])
    return [_c(np.squeeze(x.const, axis=tuple(dims) if dims else None))]


@_folder("Fill")
def _fill(node: Any, ins: list[TV]) -> Folded:
    dims, value = ins
    if not _all_const(ins):
        return None
    shape = [int(d) for d in np.asarray(dims.const).reshape(-1)]
    if int(np.prod(shape, dtype=np.int64)) > MAX_FOLD_ELEMENTS:
        return None
    return [_c(np.full(shape, value.const, dtype=value.const.dtype))]  # type: ignore[union-attr]


@_folder("Range")
def _range(node: Any, ins: list[TV]) -> Folded:
    if not _all_const(ins):
        return None
    start, limit, delta = (_k(t).item() for t in ins)
    dtype = tg_to_np(tf_dtype_name(attr(node, "Tidx", 3)))
    return [_c(np.arange(start, limit, delta).astype(dtype))]


@_folder("Transpose")
def _transpose(node: Any, ins: list[TV]) -> Folded:
    if not _all_const(ins):
        return None
    return [_c(np.transpose(_k(ins[0]), [int(p) for p in _k(ins[1]).reshape(-1)]))]


@_folder("ZerosLike", "OnesLike")
def _zeros_like(node: Any, ins: list[TV]) -> Folded:
    x = ins[0]
    if x.shape is None or any(d is None for d in x.shape) or x.dtype is None:
        return None
    fill = 0 if node.op == "ZerosLike" else 1
    return [_c(np.full(x.shape, fill, dtype=tg_to_np(x.dtype)))]


@_folder("BroadcastArgs")
def _broadcast_args(node: Any, ins: list[TV]) -> Folded:
    vectors = [_vector(t) for t in ins]
    if any(v is None or v.ndim != 1 for v in vectors):
        return None
    s0, s1 = (list(v) for v in vectors if v is not None)
    n = max(len(s0), len(s1))
    out: list[Any] = []
    for x, y in zip([1] * (n - len(s0)) + s0, [1] * (n - len(s1)) + s1, strict=True):
        if _unknown(x) and _unknown(y):
            out.append(x if x == y else None)
        elif _unknown(x) or _unknown(y):  # the known size, unless it is 1
            known, other = (y, x) if _unknown(x) else (x, y)
            out.append(other if known == 1 else known)
        elif x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None  # sizes that do not broadcast: the run-time op reports it
    return [_partial(out, ins[0].dtype or "i32")]


@_folder("BroadcastGradientArgs")
def _broadcast_gradient_args(node: Any, ins: list[TV]) -> Folded:
    s0, s1 = (t.known_vector() for t in ins)
    if s0 is None or s1 is None:
        return None
    axes = broadcast_gradient_axes(s0, s1)
    if axes is None:
        return None
    dtype = tg_to_np(ins[0].dtype or "i32")
    return [_c(np.asarray(axes[0], dtype=dtype)), _c(np.asarray(axes[1], dtype=dtype))]


def broadcast_gradient_axes(
    s0: list[int | None], s1: list[int | None]
) -> tuple[list[int], list[int]] | None:
    """TF's ``BroadcastGradientArgs`` on partly known shapes, or ``None`` if it depends on them.

    The axes each operand's gradient is summed over. Summing over an axis whose output size
    turns out to be 1 is harmless (the gradient is reshaped to the operand's shape next), so an
    operand's known size 1 opposite an unknown size is always reduced. An unknown size opposite
    a known size other than 1 is taken to equal it (TF's own shape inference assumes the same),
    and two unknown sizes are taken to be equal: in the graphs TF's gradients produce they are
    the same dynamic (batch) dimension. ``None`` if a rank is unknown.
    """
    rank = max(len(s0), len(s1))
    a = [1] * (rank - len(s0)) + list(s0)
    b = [1] * (rank - len(s1)) + list(s1)
    r0: list[int] = []
    r1: list[int] = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if i < rank - len(s0):
            r0.append(i)
            if y == 1:
                r1.append(i)
            continue
        if i < rank - len(s1):
            r1.append(i)
            if x == 1:
                r0.append(i)
            continue
        if x is None and y is None:
            continue  # two dynamic sizes: taken to be the same (the dynamic batch)
        if x == 1:
            r0.append(i)
        if y == 1:
            r1.append(i)
    return r0, r1
