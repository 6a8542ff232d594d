"""TF shape and data-movement ops -> graph dialect ops.

Shape operands that :mod:`.tf_fold` knows at import time become attributes (``reshape
{shape}``, ``slice {starts...}``); a reshape target with one unknown dimension keeps a ``-1``;
otherwise the shape is passed as a runtime operand. ``StridedSlice`` is decoded into one
``slice`` plus ``squeeze``/``expand_dims`` for its shrink and new-axis masks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pytfrt.compiler.frontends.tf_fold import strided_slice_index
from pytfrt.compiler.frontends.tf_graph import split_input
from pytfrt.compiler.frontends.tf_registry import tf_direct, tf_op
from pytfrt.compiler.frontends.tf_values import (
    TV,
    ConversionError,
    attr,
    tf_dtype_name,
    tg_to_np,
)

_BIG = 2**62
"""Slice bound meaning "to the end" (clamped, as ONNX's slice)."""


@tf_op(
    "Reshape",
    tg="`reshape`",
    note="static target (one `-1`) when known, else a runtime shape operand",
)
def _reshape(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, shape = ins
    dims = shape.known_vector()
    if dims is not None:
        unknown = sum(1 for d in dims if d is None or d < 0)
        if unknown <= 1:
            return [cx.reshape(x, [-1 if d is None or d < 0 else d for d in dims])]
        target = static_target(x, dims, shape.syms)
        if target is not None:
            return [cx.reshape(x, target)]
    return [cx.op("reshape", [x, cx.as_i64(shape)])]


def static_target(x: TV, dims: list[int | None], syms: list[Any] | None) -> list[int] | None:
    """A static reshape target (one ``-1``) for ``dims`` whose unknown entries are ``x``'s own.

    ``tf.reshape(x, [tf.shape(x)[0], -1])`` with ``x: [?, 2, 2, 8]``: the first entry is
    ``x``'s dynamic batch and the ``-1`` therefore 32, so the target is ``[-1, 32]``. ``None``
    unless every dynamic dimension of ``x`` appears exactly once (as a symbol) and at most one
    of them remains after resolving a literal ``-1``.
    """
    if x.shape is None or syms is None:
        return None
    dynamic = sorted(i for i, d in enumerate(x.shape) if d is None)
    used: list[int] = []
    for d, s in zip(dims, syms, strict=True):
        if d is None:
            if s is None or s.tv is not x:
                return None
            used.append(s.axis)
    if sorted(used) != dynamic or len(used) != 1:
        return None
    known_x = math.prod(int(d) for d in x.shape if d is not None)
    known_t = math.prod(int(d) for d in dims if d is not None and d >= 0)
    literal = [i for i, d in enumerate(dims) if d is not None and d < 0]
    out = [-1 if d is None else int(d) for d in dims]
    if literal:
        if len(literal) > 1 or known_t == 0 or known_x % known_t:
            return None
        out[literal[0]] = known_x // known_t
    return out


@tf_op("Transpose", tg="`transpose`", note="constant permutation")
def _transpose(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.transpose(ins[0], cx.ints(ins[1], "perm"))]


@tf_op("ConcatV2", "Concat", tg="`concat`", note="constant axis")
def _concat(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    if node.op == "Concat":
        axis_tv, vals = ins[0], ins[1:]
    else:
        axis_tv, vals = ins[-1], ins[:-1]
    (axis,) = cx.ints(axis_tv, "axis")
    rank = vals[0].rank
    if rank:
        axis %= rank
    if len(vals) == 1:
        return [vals[0]]
    return [cx.op("concat", vals, axis=axis)]


@tf_op("Pack", tg="`expand_dims`, `concat`")
def _pack(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    axis = int(attr(node, "axis", 0))
    rank = ins[0].rank
    if axis < 0 and rank is not None:
        axis += rank + 1
    parts = [cx.op("expand_dims", [x], axis=axis) for x in ins]
    return [parts[0] if len(parts) == 1 else cx.op("concat", parts, axis=axis)]


@tf_op("Unpack", tg="`split`, `squeeze`")
def _unpack(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    axis = int(attr(node, "axis", 0))
    num = int(attr(node, "num"))
    if x.rank is not None:
        axis %= x.rank
    parts = cx.ops("split", [x], num, axis=axis, sizes=[1] * num) if num > 1 else [x]
    return [cx.op("squeeze", [p], axes=[axis]) for p in parts]


@tf_op("Split", tg="`split`", note="constant axis")
def _split(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    axis_tv, x = ins
    (axis,) = cx.ints(axis_tv, "axis")
    n = int(attr(node, "num_split"))
    if x.rank is not None:
        axis %= x.rank
    size = x.shape[axis] if x.shape is not None else None
    if size is None:
        raise ConversionError("Split needs a static size along the split axis")
    if n == 1:
        return [x]
    return cx.ops("split", [x], n, axis=axis, sizes=[size // n] * n)


@tf_op("SplitV", tg="`split`", note="constant sizes and axis (one `-1` size allowed)")
def _split_v(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, sizes_tv, axis_tv = ins
    (axis,) = cx.ints(axis_tv, "axis")
    sizes = cx.ints(sizes_tv, "size_splits")
    if x.rank is not None:
        axis %= x.rank
    if -1 in sizes:
        total = x.shape[axis] if x.shape is not None else None
        if total is None:
            raise ConversionError("SplitV with a -1 size needs a static split axis")
        sizes[sizes.index(-1)] = total - sum(s for s in sizes if s != -1)
    if len(sizes) == 1:
        return [x]
    return cx.ops("split", [x], len(sizes), axis=axis, sizes=sizes)


def apply_index(cx: Any, x: TV, index: tuple[Any, ...]) -> TV:
    """``x[index]`` (a NumPy basic index: ints, slices, ``None``, ``Ellipsis``) as tg ops."""
    if x.rank is None:
        raise ConversionError("slicing needs a known rank")
    consuming = sum(1 for e in index if e is not None and e is not Ellipsis)
    expanded: list[Any] = []
    for e in index:
        if e is Ellipsis:
            expanded += [slice(None)] * (x.rank - consuming)
        else:
            expanded.append(e)
    if Ellipsis not in index:
        expanded += [slice(None)] * (x.rank - consuming)
    starts: list[int] = []
    ends: list[int] = []
    axes: list[int] = []
    steps: list[int] = []
    shrink: list[int] = []
    new_axes: list[int] = []
    in_axis = out_axis = 0
    for e in expanded:
        if e is None:
            new_axes.append(out_axis)
            out_axis += 1
            continue
        if isinstance(e, int):
            starts.append(e)
            ends.append(_BIG if e == -1 else e + 1)
            axes.append(in_axis)
            steps.append(1)
            shrink.append(in_axis)
        else:
            step = 1 if e.step is None else int(e.step)
            if step == 0:
                raise ConversionError("slice step 0")
            full = e.start in (None, 0) and e.stop is None and step == 1
            dim = x.shape[in_axis] if x.shape is not None else None
            if (step < 0 and e.start is not None and dim is not None
                    and int(e.start) < -dim):  # NumPy: nothing; tg.slice (ONNX): from 0
                starts.append(0)
                ends.append(0)
                axes.append(in_axis)
                steps.append(step)
            elif not full:
                starts.append(e.start if e.start is not None else (0 if step > 0 else _BIG))
                ends.append(e.stop if e.stop is not None else (_BIG if step > 0 else -_BIG))
                axes.append(in_axis)
                steps.append(step)
            out_axis += 1
        in_axis += 1
    y = x
    if axes:
        y = cx.op("slice", [y], starts=starts, ends=ends, axes=axes, steps=steps)
    if shrink:
        y = cx.op("squeeze", [y], axes=shrink)
    for a in new_axes:
        y = cx.op("expand_dims", [y], axis=a)
    return y


@tf_op(
    "StridedSlice",
    tg="`slice`, `squeeze`, `expand_dims`; run-time bounds: `dynamic_slice`",
    note="constant begin/end/strides: all masks; bounds known at run time: unit strides, no "
    "ellipsis or new axes (an axis whose end is its begin plus a constant keeps a static size)",
)
def _strided_slice(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    if ins[1].const is None or ins[2].const is None:
        return [_dynamic_strided_slice(cx, node, ins)]
    b, e, s = (cx.ints(t, "strided slice bounds") for t in ins[1:])
    return [apply_index(cx, x, strided_slice_index(node, b, e, s))]


def _dynamic_masks(cx: Any, node: Any, ins: list[TV], rank: int | None) -> dict[str, int]:
    """The masks of a strided slice (or its gradient) with run-time bounds, checked to be
    what ``dynamic_slice`` takes: unit strides, no ellipsis or new axis, a known rank."""
    strides = cx.ints(ins[3], "strided slice strides")
    if any(v != 1 for v in strides):
        raise ConversionError("a strided slice with run-time bounds needs unit strides")
    if attr(node, "ellipsis_mask", 0) or attr(node, "new_axis_mask", 0):
        raise ConversionError("a strided slice with run-time bounds cannot have an ellipsis or "
                              "new axes")
    if rank is None or len(strides) != rank:
        raise ConversionError("a strided slice with run-time bounds needs one bound per axis")
    return {"begin_mask": attr(node, "begin_mask", 0), "end_mask": attr(node, "end_mask", 0),
            "shrink_mask": attr(node, "shrink_axis_mask", 0)}


def _offset_size(cx: Any, node: Any, axis: int) -> int | None:
    """``k`` when the slice's end along ``axis`` is its begin plus the constant ``k``
    (``x[:, i : i + k]``: the begin and end vectors packed from scalars)."""
    graph = cx.lg.by_name if cx.lg is not None else {}
    begin_pack, end_pack = (graph.get(split_input(node.input[j])[0]) for j in (1, 2))
    if begin_pack is None or end_pack is None:
        return None
    if any(p.op != "Pack" or len(p.input) <= axis for p in (begin_pack, end_pack)):
        return None
    begin_ref = begin_pack.input[axis].removesuffix(":0")
    add = graph.get(split_input(end_pack.input[axis])[0])
    if add is None or add.op not in ("AddV2", "Add"):
        return None
    refs = [r.removesuffix(":0") for r in add.input[:2]]
    if begin_ref not in refs:
        return None
    other = graph.get(split_input(refs[1 - refs.index(begin_ref)])[0])
    if other is None or other.op != "Const":
        return None
    k = np.asarray(attr(other, "value"))
    return int(k) if k.size == 1 and k.dtype.kind in "iu" else None


def _dynamic_strided_slice(cx: Any, node: Any, ins: list[TV]) -> TV:
    x, begin, end = ins[:3]
    masks = _dynamic_masks(cx, node, ins, x.rank)
    assert x.shape is not None
    b, e = begin.known_vector(), end.known_vector()
    sizes: list[int] = []
    for i, d in enumerate(x.shape):
        known = (None if b is None or masks["begin_mask"] >> i & 1 else b[i],
                 None if e is None or masks["end_mask"] >> i & 1 else e[i])
        size: int | None = None
        if masks["shrink_mask"] >> i & 1:
            size = 1
        elif d is not None and (known[0] is not None or masks["begin_mask"] >> i & 1) and (
            known[1] is not None or masks["end_mask"] >> i & 1
        ):
            start = 0 if masks["begin_mask"] >> i & 1 else known[0]
            stop = d if masks["end_mask"] >> i & 1 else known[1]
            size = len(range(*slice(start, stop).indices(d)))
        else:
            size = _offset_size(cx, node, i)
        sizes.append(-1 if size is None else size)
    return cx.op("dynamic_slice", [x, cx.as_i64(begin), cx.as_i64(end)], sizes=sizes, **masks)


@tf_op(
    "Slice",
    tg="`slice`",
    note="constant begin and size; an unknown size from 0 along a dynamic axis takes it whole",
)
def _slice(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    begin = cx.ints(ins[1], "begin")
    known = ins[2].known_vector()
    if known is None:
        raise ConversionError("size must be constant")
    size: list[int] = []
    for i, (b, n) in enumerate(zip(begin, known, strict=True)):
        if n is None:
            # a dynamic size (the gradient of Pad slices dy to tf.shape(x)): only a whole
            # dynamic axis can be told apart without its run-time value
            if b != 0 or x.shape is None or x.shape[i] is not None:
                raise ConversionError("size must be constant")
            n = -1
        size.append(n)
    index = tuple(slice(b, None if n < 0 else b + n) for b, n in zip(begin, size, strict=True))
    return [apply_index(cx, x, index)]


def _full_rank_spec(node: Any, ins: list[TV], rank: int
                    ) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """A constant-bound strided slice as one begin/end per axis and its masks (the ellipsis
    expanded), as ``dynamic_slice_grad`` takes it; unit strides, no new axes."""
    index = strided_slice_index(node, *(
        [int(v) for v in np.asarray(t.const).reshape(-1)] for t in ins[1:4]))
    if any(i is None for i in index):
        raise ConversionError("a strided slice gradient with new axes on a dynamic axis")
    consuming = sum(1 for i in index if i is not Ellipsis)
    axes: list[Any] = []
    for i in index:
        axes += [slice(None)] * (rank - consuming) if i is Ellipsis else [i]
    axes += [slice(None)] * (rank - len(axes))
    begin, end = np.zeros(rank, np.int64), np.zeros(rank, np.int64)
    masks = {"begin_mask": 0, "end_mask": 0, "shrink_mask": 0}
    for k, item in enumerate(axes):
        if isinstance(item, int):
            begin[k], end[k] = item, item + 1
            masks["shrink_mask"] |= 1 << k
            continue
        if item.step not in (None, 1):
            raise ConversionError("strided slice gradients need unit strides")
        if item.start is None:
            masks["begin_mask"] |= 1 << k
        else:
            begin[k] = item.start
        if item.stop is None:
            masks["end_mask"] |= 1 << k
        else:
            end[k] = item.stop
    return begin, end, masks


def _static_slice_grad(node: Any, ins: list[TV], dims: list[int | None]) -> bool:
    """True if every axis a constant-bound slice cuts is static (a pad can then undo it)."""
    try:
        index = strided_slice_index(node, *(
            [int(v) for v in np.asarray(t.const).reshape(-1)] for t in ins[1:4]))
    except ConversionError:
        return True  # the static path reports it
    consuming = sum(1 for i in index if i is not None and i is not Ellipsis)
    axes: list[Any] = []
    for i in index:
        axes += [slice(None)] * (len(dims) - consuming) if i is Ellipsis else [i]
    axes = [i for i in axes if i is not None]
    for dim, item in zip(dims, axes, strict=False):
        whole = isinstance(item, slice) and item.start in (None, 0) and item.stop is None
        if dim is None and not whole:
            return False
    return True


@tf_op(
    "StridedSliceGrad",
    tg="`reshape`, `pad`; run-time bounds: `dynamic_slice_grad`",
    note="unit strides; constant bounds on static axes: a `pad`, else `dynamic_slice_grad`",
)
def _strided_slice_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    shape_tv, dy = ins[0], ins[4]
    dims = shape_tv.known_vector()
    if dims is None:
        raise ConversionError("the input shape's rank must be known")
    if ins[1].const is not None and ins[2].const is not None and not _static_slice_grad(
        node, ins, dims
    ):  # constant bounds cutting a dynamic axis: the full-rank spec, bounds at run time
        begin, end, masks = _full_rank_spec(node, ins, len(dims))
        hint = [-1 if d is None else int(d) for d in dims]
        return [cx.op("dynamic_slice_grad",
                      [dy, cx.as_i64(shape_tv), cx.const(begin), cx.const(end)],
                      static_shape=hint, **masks)]
    if ins[1].const is None or ins[2].const is None:
        masks = _dynamic_masks(cx, node, ins, len(dims))
        hint = [-1 if d is None else int(d) for d in dims]
        return [cx.op("dynamic_slice_grad",
                      [dy, cx.as_i64(shape_tv), cx.as_i64(ins[1]), cx.as_i64(ins[2])],
                      static_shape=hint, **masks)]
    b, e, s = (cx.ints(t, "strided slice bounds") for t in ins[1:4])
    index = strided_slice_index(node, b, e, s)
    consuming = sum(1 for i in index if i is not None and i is not Ellipsis)
    expanded: list[Any] = []
    for i in index:
        expanded += [slice(None)] * (len(dims) - consuming) if i is Ellipsis else [i]
    expanded += [slice(None)] * (len(dims) - len([i for i in expanded if i is not None]))
    axes = [i for i in expanded if i is not None]
    before: list[int] = []
    after: list[int] = []
    target: list[int | None] = []
    for dim, item in zip(dims, axes, strict=True):
        if isinstance(item, slice) and item.start in (None, 0) and item.stop is None:
            if item.step not in (None, 1):
                raise ConversionError("strided slice gradients need unit strides")
            before.append(0)
            after.append(0)
            target.append(dim)
            continue
        if dim is None:
            raise ConversionError("a sliced axis of the input must be static")
        if isinstance(item, int):
            start, stop, step = item % dim, item % dim + 1, 1
        else:
            start, stop, step = item.indices(dim)
        if step != 1:
            raise ConversionError("strided slice gradients need unit strides")
        stop = max(stop, start)
        before.append(start)
        after.append(dim - stop)
        target.append(stop - start)
    g = cx.reshape(dy, target)
    if not any(before) and not any(after):
        return [g]
    return [cx.op("pad", [g], pads=before + after, mode="constant", value=0.0)]


@tf_op(
    "ConcatOffset",
    tg="(constant)",
    note="folded: the sizes along the axis must be known",
)
def _concat_offset(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    raise ConversionError("the sizes along the concatenation axis must be known")


@tf_op("InvertPermutation", tg="(constant)", note="folded; the permutation must be constant")
def _invert_permutation(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    perm = np.asarray(cx.ints(ins[0], "the permutation"))
    return [cx.const(np.argsort(perm).astype(tg_to_np(ins[0].dtype or "i32")))]


@tf_op(
    "UnsortedSegmentSum",
    tg="`reshape`, `matmul`, `unsorted_segment_sum`, `one_hot`",
    note="a matmul by the 0/1 segment matrix for constant ids; `unsorted_segment_sum` for "
    "run-time ids and a constant count of float rows; else one-hot rows and a matmul; dynamic "
    "trailing dimensions",
)
def _unsorted_segment_sum(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    data, ids_tv, count_tv = ins
    count = cx.ints(count_tv, "num_segments")[0] if count_tv.const is not None else None
    if data.shape is None or data.dtype is None or ids_tv.rank is None:
        raise ConversionError("the data's and the segment ids' ranks must be known")
    rest = list(data.shape[ids_tv.rank :])
    width: int | None = None if None in rest else math.prod(rest)  # type: ignore[arg-type]
    if ids_tv.const is not None and count is not None:
        flat = np.asarray(ids_tv.const).reshape(-1)
        matrix = np.zeros((count, flat.size), dtype=tg_to_np(data.dtype))
        ok = (flat >= 0) & (flat < count)
        matrix[flat[ok], np.nonzero(ok)[0]] = 1  # ids out of range are dropped, as TF
        rows = cx.reshape(data, [flat.size, width])
        out = cx.op("matmul", [cx.const(matrix), rows])
    else:  # ids known at run time (Adam on an Embedding): one-hot rows, then a matmul
        n_ids = None if ids_tv.shape is None or None in ids_tv.shape else math.prod(
            int(d or 0) for d in ids_tv.shape
        )
        if width is None and n_ids is None and ids_tv.rank != 1:
            raise ConversionError("the data's trailing dimensions must be static")
        if width is None and n_ids is None:  # [n, rest...] -> [n, -1] by the run-time n
            head = cx.op("slice", [cx.op("shape", [data], out_type="i64")], starts=[0],
                         ends=[1], axes=[0], steps=[1])
            shape = cx.op("concat", [head, cx.const(np.asarray([-1], np.int64))], axis=0)
            rows = cx.op("reshape", [data, shape])
        else:
            rows = cx.reshape(data, [n_ids, width])
        if count is not None and data.dtype in ("f32", "f64"):  # rows added in place by id
            out = cx.op("unsorted_segment_sum", [rows, cx.reshape(ids_tv, [-1])],
                        num_segments=int(count))
        else:  # a run-time count: a product by the one-hot rows
            hot = cx.op(
                "one_hot",
                [
                    cx.reshape(ids_tv, [-1]),
                    count_tv if count is None else cx.scalar(count, "i32"),
                    cx.scalar(1, data.dtype),
                    cx.scalar(0, data.dtype),
                ],
                axis=-1,
            )
            out = cx.op("matmul", [hot, rows], transpose_a=True)
    if rest.count(None) + (count is None) <= 1:
        return [cx.reshape(out, [count, *rest])]
    tail = cx.op("slice", [cx.op("shape", [data], out_type="i64")], starts=[ids_tv.rank],
                 ends=[len(data.shape)], axes=[0], steps=[1])
    head = cx.reshape(cx.as_i64(count_tv), [1])
    shape = cx.op("concat", [head, tail], axis=0)
    return [cx.op("reshape", [out, shape])]


@tf_op("Bucketize", tg="`expand_dims`, `greater_equal`, `cast`, `reduce_sum`")
def _bucketize(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    bounds = np.asarray(attr(node, "boundaries", []), dtype=tg_to_np(x.dtype or "f32"))
    if x.rank is None:
        raise ConversionError("the input's rank must be known")
    if bounds.size == 0:
        return [cx.op("fill", [cx.as_i64(cx.op("shape", [x])), cx.scalar(0, "i32")])]
    ge = cx.op("greater_equal", [cx.op("expand_dims", [x], axis=x.rank), cx.const(bounds)])
    return [cx.op("reduce_sum", [cx.op("cast", [ge], to="i32")], axes=[x.rank], keepdims=False)]


@tf_op("Pad", "PadV2", "MirrorPad", tg="`pad`", note="constant paddings; MirrorPad SYMMETRIC "
       "(static padded axes) as a matmul by the 0/1 matrix of `MirrorPadGrad`, transposed")
def _pad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, p = ins[0], ins[1]
    flat = cx.ints(p, "paddings")
    pads = flat[0::2] + flat[1::2]
    mode, value = "constant", 0.0
    if node.op == "MirrorPad":
        if attr(node, "mode") == "SYMMETRIC":
            return [_mirror_matmuls(cx, x, flat, "SYMMETRIC", forward=True)]
        if attr(node, "mode") != "REFLECT":
            raise ConversionError(f"MirrorPad mode {attr(node, 'mode')} is not supported")
        mode = "reflect"
    elif node.op == "PadV2":
        if ins[2].const is None:
            raise ConversionError("PadV2 needs a constant padding value")
        value = float(ins[2].const)
    if not any(pads):
        return [x]
    return [cx.op("pad", [x], pads=pads, mode=mode, value=value)]


def mirror_pad_matrix(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """The ``[lo + n + hi, n]`` 0/1 matrix taking a mirror-padded axis back to its source
    entries (``MirrorPad``'s gradient sums the mirrored copies into them)."""
    skip = 1 if mode == "REFLECT" else 0
    src = [lo - j - 1 + skip for j in range(lo)] + list(range(n))
    src += [n - 1 - skip - k for k in range(hi)]
    if min(src) < 0 or max(src) >= n:
        raise ConversionError(f"paddings {lo}, {hi} are too large for a {mode} pad of {n}")
    m = np.zeros((len(src), n))
    m[np.arange(len(src)), src] = 1.0
    return m


@tf_op(
    "MirrorPadGrad",
    tg="`matmul` (per padded axis; `transpose`)",
    note="constant paddings, static padded axes: a matmul by the 0/1 matrix folding the "
    "mirrored borders back (both modes)",
)
def _mirror_pad_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    g, p = ins
    return [_mirror_matmuls(cx, g, cx.ints(p, "paddings"), attr(node, "mode"), forward=False)]


def _mirror_matmuls(cx: Any, x: TV, flat: list[int], mode: str, forward: bool) -> TV:
    """``x`` mirror-padded by ``flat`` (``forward``) or a padded gradient folded back: per
    padded axis a matmul by :func:`mirror_pad_matrix` (transposed to pad)."""
    if mode not in ("REFLECT", "SYMMETRIC") or x.shape is None:
        raise ConversionError(f"mirror padding mode {mode} of a tensor of unknown rank")
    rank = len(x.shape)
    for axis in range(rank):
        lo, hi = flat[2 * axis], flat[2 * axis + 1]
        if not lo and not hi:
            continue
        size = x.shape[axis]
        if size is None:
            raise ConversionError(f"mirror padding ({mode}) of a dynamic axis: a padded axis "
                                  "must be static")
        n = size if forward else size - lo - hi
        m = mirror_pad_matrix(n, lo, hi, mode).astype(tg_to_np(x.dtype or "f32"))
        perm = [a for a in range(rank) if a != axis] + [axis]
        back = list(np.argsort(perm))
        y = cx.op("matmul", [cx.transpose(x, perm), cx.const(m.T if forward else m)])
        x = cx.transpose(y, back)
    return x


@tf_op("GatherV2", "Gather", tg="`gather`", note="constant axis")
def _gather(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, idx = ins[0], ins[1]
    axis = cx.ints(ins[2], "axis")[0] if node.op == "GatherV2" else 0
    if x.rank is not None:
        axis %= x.rank
    bd = int(attr(node, "batch_dims", 0))
    if bd < 0 and idx.rank is not None:
        bd += idx.rank
    return [cx.op("gather", [x, idx], axis=axis, batch_dims=bd)]


@tf_op(
    "DynamicStitch",
    "ParallelDynamicStitch",
    tg="`reshape`, `concat`, `gather`",
    note="constant indices (later pieces win, as TF); folded when the data are known",
)
def _dynamic_stitch(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    n = len(ins) // 2
    idx, data = ins[:n], ins[n:]
    flat = [np.asarray(cx.ints(t, "indices"), dtype=np.int64) for t in idx]
    size = 1 + max((int(i.max()) for i in flat if i.size), default=-1)
    source = np.full(size, -1, dtype=np.int64)
    offset = 0
    for i in flat:
        source[i] = offset + np.arange(i.size)
        offset += i.size
    if (source < 0).any():
        raise ConversionError("the indices leave positions of the result unset")
    pieces = []
    for t, d in zip(idx, data, strict=True):
        lead = np.asarray(t.const).ndim
        if d.shape is None:
            raise ConversionError("the data's rank must be known")
        rest = list(d.shape[lead:])
        count = int(np.asarray(t.const).size)
        if count:
            pieces.append(cx.reshape(d, [count, *rest]))
    stacked = pieces[0] if len(pieces) == 1 else cx.op("concat", pieces, axis=0)
    if np.array_equal(source, np.arange(offset)):
        return [stacked]
    return [cx.op("gather", [stacked, cx.const(source)], axis=0, batch_dims=0)]


tf_direct(__name__, {"GatherNd": "gather_nd"})


@tf_op("ScatterNd", tg="`fill`, `scatter_nd_reduce` (add)",
       note="updates summed into zeros of the shape (duplicates add up, as TF's)")
def _scatter_nd(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    idx, upd, shape = ins
    zeros = cx.op("fill", [cx.as_i64(shape), cx.scalar(0, upd.dtype)])
    dims = shape.known_vector()
    if dims is not None and None not in dims and zeros.shape != tuple(dims):
        zeros = cx.reshape(zeros, dims)
    return [cx.op("scatter_nd_reduce", [zeros, idx, upd], reduction="add")]


@tf_op("Tile", tg="`tile`")
def _tile(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, m = ins
    if m.const is not None:
        mult = cx.ints(m, "multiples")
        if all(v == 1 for v in mult):
            return [x]
        return [cx.op("tile", [x], multiples=mult)]
    return [cx.op("tile", [x, cx.as_i64(m)])]


@tf_op("BroadcastTo", tg="`broadcast_to`")
def _broadcast_to(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, shape = ins
    dims = shape.known_vector()
    if (
        dims is not None
        and x.shape is not None
        and tuple(dims) == tuple(x.shape)
        and None not in dims
    ):
        return [x]
    return [cx.op("broadcast_to", [x, cx.as_i64(shape)])]


@tf_op(
    "BroadcastArgs",
    tg="(folded when the shapes are known enough) or `fill`, `add`, `shape`",
    note="the broadcast of two shapes",
)
def _broadcast_args(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    s0, s1 = ins
    zero = cx.scalar(0, "i8")
    both = cx.op("add", [cx.op("fill", [cx.as_i64(s), zero]) for s in (s0, s1)])
    return [cx.op("shape", [both], out_type=s0.dtype or "i32")]


@tf_op("Fill", tg="`fill`", note="a shape known but for one dimension keeps it (`reshape`)")
def _fill(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    shape, value = ins
    out = cx.op("fill", [cx.as_i64(shape), value])
    dims = shape.known_vector()
    if dims is not None and out.shape is not None and None in out.shape and dims.count(None) == 1:
        if 0 not in dims:  # -1 then stands for the one unknown dimension
            out = cx.reshape(out, dims)
    return [out]


@tf_op("ZerosLike", "OnesLike", tg="`shape`, `fill`")
def _zeros_like(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    shape = cx.op("shape", [x], out_type="i64")
    return [cx.op("fill", [shape, cx.scalar(0 if node.op == "ZerosLike" else 1, x.dtype)])]


@tf_op("ExpandDims", tg="`expand_dims`", note="constant axis")
def _expand_dims(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, axis_tv = ins
    (axis,) = cx.ints(axis_tv, "axis")
    if axis < 0:
        if x.rank is None:
            raise ConversionError("ExpandDims with a negative axis needs a known rank")
        axis += x.rank + 1
    return [cx.op("expand_dims", [x], axis=axis)]


@tf_op("Squeeze", tg="`squeeze`")
def _squeeze(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    dims = [int(d) for d in attr(node, "squeeze_dims", [])]
    if x.rank is None:
        raise ConversionError("Squeeze needs a known rank")
    if not dims:
        if x.shape is None or None in x.shape:
            raise ConversionError("Squeeze without axes needs a static shape")
        dims = [i for i, d in enumerate(x.shape) if d == 1]
    if not dims:
        return [x]
    return [cx.op("squeeze", [x], axes=sorted(d % x.rank for d in dims))]


@tf_op("Shape", tg="`shape` (folded when static)")
def _shape(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("shape", ins, out_type=tf_dtype_name(attr(node, "out_type", 3)))]


@tf_op("ShapeN", tg="`shape` (folded when static)")
def _shape_n(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    out = tf_dtype_name(attr(node, "out_type", 3))
    return [cx.op("shape", [x], out_type=out) for x in ins]


@tf_op("Size", tg="`size` (folded when static)")
def _size(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    y = cx.op("size", ins)
    want = tf_dtype_name(attr(node, "out_type", 3))
    return [y if y.dtype == want else cx.op("cast", [y], to=want)]


@tf_op("Rank", tg="(constant)", note="needs a known rank")
def _rank(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    raise ConversionError("Rank of a tensor of unknown rank")


tf_direct(__name__, {"Range": "range"})


@tf_op("OneHot", tg="`one_hot`")
def _one_hot(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("one_hot", ins, axis=int(attr(node, "axis", -1)))]


_COMPARISONS = frozenset({"Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual"})


def _int_bounds(cx: Any, ref: str, depth: int = 0) -> tuple[int | None, int | None]:
    """Bounds ``(low, high)`` (``None``: unbounded) of the values of integer tensor ``ref`` of
    the graph being translated: constants, comparisons, ``Maximum``/``Minimum`` (clipping),
    ``Max``/``Min`` reductions, ``AddV2``/``Sub``, ``Mul`` of non-negative values, and the
    ops that keep values (``Identity``, ``Reshape``, ``Cast``)."""
    name = split_input(ref)[0]
    node = cx.lg.by_name.get(name) if cx.lg is not None else None
    if node is None or depth > 12:
        return None, None
    op = node.op
    if op == "Const":
        v = np.asarray(attr(node, "value"))
        if v.size == 0 or v.dtype.kind not in "iub":
            return None, None
        return int(v.min()), int(v.max())
    if op in _COMPARISONS:
        return 0, 1
    if op in ("Identity", "Reshape", "Cast", "Max", "Min", "ExpandDims", "Squeeze"):
        return _int_bounds(cx, node.input[0], depth + 1)
    if op not in ("Maximum", "Minimum", "AddV2", "Add", "Sub", "Mul") or len(node.input) < 2:
        return None, None
    (a_lo, a_hi), (b_lo, b_hi) = (_int_bounds(cx, r, depth + 1) for r in node.input[:2])
    if op == "Maximum":
        lo = max((v for v in (a_lo, b_lo) if v is not None), default=None)
        return lo, None if a_hi is None or b_hi is None else max(a_hi, b_hi)
    if op == "Minimum":
        hi = min((v for v in (a_hi, b_hi) if v is not None), default=None)
        return None if a_lo is None or b_lo is None else min(a_lo, b_lo), hi
    if op in ("AddV2", "Add"):
        return (None if a_lo is None or b_lo is None else a_lo + b_lo,
                None if a_hi is None or b_hi is None else a_hi + b_hi)
    if op == "Sub":
        return (None if a_lo is None or b_hi is None else a_lo - b_hi,
                None if a_hi is None or b_lo is None else a_hi - b_lo)
    if a_lo is None or b_lo is None or a_lo < 0 or b_lo < 0:  # Mul: non-negative factors only
        return None, None
    return a_lo * b_lo, None if a_hi is None or b_hi is None else a_hi * b_hi


@tf_op(
    "DenseBincount",
    tg="`one_hot`, `reduce_sum` / `reduce_max`",
    note="a size known at import (constant, or bounded through min/max and clipped data); counts "
    "per row for a matrix; values outside `[0, size)` dropped",
)
def _dense_bincount(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, size_tv, weights = ins
    lo, hi = _int_bounds(cx, node.input[1])
    if size_tv.const is None and lo is not None and lo == hi:
        size = lo  # tf.math.bincount's length, bounded: maxlength == minlength, or data clipped
    else:
        (size,) = cx.ints(size_tv, "size")
    if x.rank not in (1, 2):
        raise ConversionError("DenseBincount takes a vector or a matrix")
    dtype = tf_dtype_name(attr(node, "T"))
    weighted = weights.shape is None or weights.shape != (0,)
    hot = cx.op(
        "one_hot",
        [x, cx.scalar(size, "i32"), cx.scalar(1, dtype), cx.scalar(0, dtype)],
        axis=-1,
    )
    if weighted:
        hot = cx.op("mul", [hot, cx.op("expand_dims", [weights], axis=-1)])
    reduce = "reduce_max" if attr(node, "binary_output", False) and not weighted else "reduce_sum"
    if weighted and attr(node, "binary_output", False):
        raise ConversionError("DenseBincount with weights and binary_output")
    return [cx.op(reduce, [hot], axes=[x.rank - 1], keepdims=False)]


tf_direct(__name__, {"Where": "where"}, note="one operand (indices of true elements)")


@tf_op("TopKV2", tg="`top_k`")
def _top_k(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    vals, idx = cx.ops("top_k", ins, 2, sorted=bool(attr(node, "sorted", True)))
    return [vals, idx]


@tf_op("DepthToSpace", "SpaceToDepth", tg="`depth_to_space` / `space_to_depth`")
def _depth_to_space(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    op = "depth_to_space" if node.op == "DepthToSpace" else "space_to_depth"
    return [
        cx.op(
            op,
            ins,
            block_size=int(attr(node, "block_size")),
            layout=attr(node, "data_format", "NHWC"),
        )
    ]


@tf_op(
    "Identity",
    "StopGradient",
    "Snapshot",
    "PreventGradient",
    "EnsureShape",
    tg="(none)",
    note="pass-through",
)
def _identity(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [ins[0]]


@tf_op("IdentityN", tg="(none)", note="pass-through")
def _identity_n(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return list(ins)


@tf_op("CheckNumerics", tg="(none)", note="pass-through (no check)")
def _check_numerics(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [ins[0]]


def _block_args(
    cx: Any, x: TV, block_tv: TV, pads_tv: TV, what: str
) -> tuple[list[int], list[int], list[int]]:
    """(block, paddings or crops, the static non-batch dims of ``x``)."""
    block = cx.ints(block_tv, "block_shape")
    pads = cx.ints(pads_tv, what)
    if x.shape is None or len(x.shape) < len(block) + 1 or any(d is None for d in x.shape[1:]):
        raise ConversionError(f"{what}: the non-batch dimensions must be static")
    return block, pads, [int(d or 0) for d in x.shape[1:]]


@tf_op(
    "SpaceToBatchND",
    tg="`pad`, `reshape`, `transpose`",
    note="constant block and paddings; static non-batch dims",
)
def _space_to_batch(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, block_tv, pads_tv = ins
    block, pads, dims = _block_args(cx, x, block_tv, pads_tv, "paddings")
    m = len(block)
    rest = dims[m:]
    spatial = [d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(dims[:m])]
    if any(pads):
        befores = [0] + pads[0::2] + [0] * len(rest)
        afters = [0] + pads[1::2] + [0] * len(rest)
        x = cx.op("pad", [x], pads=befores + afters, mode="constant", value=0.0)
    split: list[int | None] = [None]
    for size, b in zip(spatial, block, strict=True):
        if size % b:
            raise ConversionError("padded size is not a multiple of the block")
        split += [size // b, b]
    y = cx.reshape(x, split + rest)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    y = cx.transpose(y, perm)
    return [
        cx.reshape(y, [None] + [size // b for size, b in zip(spatial, block, strict=True)] + rest)
    ]


@tf_op(
    "BatchToSpaceND",
    tg="`reshape`, `transpose`, `slice`",
    note="constant block and crops; static non-batch dims",
)
def _batch_to_space(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, block_tv, crops_tv = ins
    block, crops, dims = _block_args(cx, x, block_tv, crops_tv, "crops")
    m = len(block)
    spatial, rest = dims[:m], dims[m:]
    y = cx.reshape(x, [*block, None, *spatial, *rest])
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    y = cx.transpose(y, perm)
    full = [size * b for size, b in zip(spatial, block, strict=True)]
    y = cx.reshape(y, [None, *full, *rest])
    if any(crops):
        index = (slice(None),) + tuple(
            slice(crops[2 * i], full[i] - crops[2 * i + 1]) for i in range(m)
        )
        y = apply_index(cx, y, index)
    return [y]


@tf_op("ReverseV2", tg="`slice` (step -1)", note="constant axes")
def _reverse(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    if x.rank is None:
        raise ConversionError("ReverseV2 needs a known rank")
    axes = {a % x.rank for a in cx.ints(ins[1], "axis")} if x.rank else set()
    index = tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(x.rank))
    return [apply_index(cx, x, index)]


@tf_op(
    "MatrixBandPart",
    tg="`trilu` (one or two)",
    note="constant `num_lower`/`num_upper` (-1 keeps that whole triangle; bounds beyond the"
    " matrix are not rejected as TF does)",
)
def _matrix_band_part(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    """``band_part(x, lower, upper)`` keeps ``x[..., i, j]`` where ``i - j <= lower`` and
    ``j - i <= upper`` (a negative bound: no limit), zeros elsewhere: the upper triangle from
    diagonal ``-lower`` intersected with the lower triangle up to diagonal ``upper``."""
    x, lower_tv, upper_tv = ins
    if x.rank is not None and x.rank < 2:
        raise ConversionError(f"the input must have rank >= 2, got rank {x.rank}")
    (lower,) = cx.ints(lower_tv, "num_lower")
    (upper,) = cx.ints(upper_tv, "num_upper")
    out = x
    if lower >= 0:
        out = cx.op("trilu", [out], upper=True, k=-lower)
    if upper >= 0:
        out = cx.op("trilu", [out], upper=False, k=upper)
    return [out]
