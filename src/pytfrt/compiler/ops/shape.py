"""Catalogue family: constants, shapes and data movement (reshape, transpose, concat, ...).

Ops that take a shape-like operand (``reshape``, ``tile``, ``broadcast_to``, ``fill``, ``slice``
4-operand form ...) infer static results when that operand is a constant and dynamic dims
otherwise.  ``slice`` follows ONNX (clamped, negative indices count from the end).
"""

from __future__ import annotations

from typing import Any

from pytfrt.backends.cpu.ops import onnx_slice
from pytfrt.compiler.ops import grad_rules as gr
from pytfrt.compiler.ops.base import (
    AttrSpec,
    InferContext,
    broadcast_shapes,
    const_ints,
    define,
    norm_axis,
    same_dtype,
)
from pytfrt.compiler.types import INT_DTYPES, TType

INDEX_DTYPES = ("i32", "i64")


def _constant(ctx: InferContext) -> list[TType]:
    raise ctx.error("constants are made with FunctionBuilder.constant")


def _resolve_reshape(ctx: InferContext, x: TType, shape: tuple[int, ...]) -> tuple:
    dims: list[int | None] = []
    if ctx.attrs["copy_zero"] and x.shape is not None:
        shape = tuple(x.shape[i] if d == 0 and i < len(x.shape) else d  # type: ignore[misc]
                      for i, d in enumerate(shape))
    if sum(1 for d in shape if d == -1) > 1:
        raise ctx.error(f"at most one -1 is allowed in shape {list(shape)}")
    for d in shape:
        if d is None:  # a dynamic dim copied by copy_zero
            dims.append(None)
            continue
        if d < -1:
            raise ctx.error(f"bad dimension {d} in shape {list(shape)}")
        dims.append(None if d == -1 else d)
    if -1 in shape and x.static:
        total = 1
        for xd in x.shape or ():
            total *= xd or 0
        known = 1
        for od in dims:
            if od is not None:
                known *= od
        if known == 0 or total % known:
            raise ctx.error(f"cannot reshape {x} to {list(shape)}")
        dims[shape.index(-1)] = total // known
    elif x.static and all(d is not None for d in dims):
        total = known = 1
        for xd in x.shape or ():
            total *= xd or 0
        for od in dims:
            known *= od or 0
        if total != known:
            raise ctx.error(f"cannot reshape {x} to {list(shape)}")
    return tuple(dims)


def _reshape(ctx: InferContext) -> list[TType]:
    x = ctx.inputs[0]
    if len(ctx.inputs) == 2:
        s = ctx.inputs[1]
        if s.dtype not in INDEX_DTYPES or (s.rank is not None and s.rank != 1):
            raise ctx.error(f"the shape operand must be a 1-D i32/i64 tensor, got {s}")
        value = const_ints(ctx, 1)
        if value is None:
            if s.shape is None or s.shape[0] is None:
                return [TType(x.dtype, None)]
            return [TType(x.dtype, (None,) * s.shape[0])]
        return [TType(x.dtype, _resolve_reshape(ctx, x, value))]
    return [TType(x.dtype, _resolve_reshape(ctx, x, ctx.attrs["shape"]))]


def _transpose(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    perm = ctx.attrs["perm"]
    if x.shape is None:
        return [x]
    if sorted(perm) != list(range(len(x.shape))):
        raise ctx.error(f"perm {list(perm)} is not a permutation of rank {len(x.shape)}")
    return [TType(x.dtype, tuple(x.shape[p] for p in perm))]


def _concat(ctx: InferContext) -> list[TType]:
    if not ctx.inputs:
        raise ctx.error("takes at least one operand")
    dtype = same_dtype(ctx)
    ranked = [t.shape for t in ctx.inputs if t.shape is not None]
    if not ranked:
        return [TType(dtype, None)]
    rank = len(ranked[0])
    if any(len(s) != rank for s in ranked):
        raise ctx.error("operands have different ranks")
    axis = norm_axis(ctx, ctx.attrs["axis"], rank)
    out: list[int | None] = []
    for i in range(rank):
        col = [s[i] for s in ranked]
        if i == axis:
            out.append(None if any(d is None for d in col) or len(ranked) < len(ctx.inputs)
                       else sum(col))  # type: ignore[arg-type]
        else:
            known = {d for d in col if d is not None}
            if len(known) > 1:
                raise ctx.error(f"operand dims differ on axis {i}: {sorted(known)}")
            out.append(known.pop() if known else None)
    return [TType(dtype, tuple(out))]


def _split(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    sizes = list(ctx.attrs["sizes"])
    if not sizes:
        raise ctx.error("sizes must not be empty")
    if x.shape is None:
        return [TType(x.dtype, None)] * len(sizes)
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x.shape))
    dim = x.shape[axis]
    if sizes.count(-1) > 1:
        raise ctx.error("at most one size may be -1")
    if -1 in sizes and dim is not None:
        rest = dim - sum(s for s in sizes if s != -1)
        if rest < 0:
            raise ctx.error(f"sizes {sizes} exceed dimension {dim}")
        sizes[sizes.index(-1)] = rest
    if dim is not None and -1 not in sizes and sum(sizes) != dim:
        raise ctx.error(f"sizes {sizes} do not add up to dimension {dim}")
    out = []
    for s in sizes:
        shape = list(x.shape)
        shape[axis] = None if s == -1 else s
        out.append(TType(x.dtype, tuple(shape)))
    return out


def _slice(ctx: InferContext) -> list[TType]:
    x = ctx.inputs[0]
    if len(ctx.inputs) > 1:
        vals = [const_ints(ctx, i) for i in range(1, len(ctx.inputs))]
        if any(v is None for v in vals) or x.shape is None:
            if x.shape is None:
                return [x]
            return [TType(x.dtype, (None,) * len(x.shape))]
        starts, ends = vals[0], vals[1]
        axes = vals[2] if len(vals) > 2 else tuple(range(len(starts or ())))
        steps = vals[3] if len(vals) > 3 else (1,) * len(starts or ())
    else:
        starts, ends = ctx.attrs["starts"], ctx.attrs["ends"]
        axes = ctx.attrs["axes"] or tuple(range(len(starts)))
        steps = ctx.attrs["steps"] or (1,) * len(starts)
    assert starts is not None and ends is not None and axes is not None and steps is not None
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error("starts, ends, axes and steps must have the same length")
    if x.shape is None:
        return [x]
    shape = list(x.shape)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a = norm_axis(ctx, a, len(shape))
        if st == 0:
            raise ctx.error("a step must not be 0")
        dim = shape[a]
        shape[a] = None if dim is None else len(range(*onnx_slice(s, e, st, dim).indices(dim)))
    return [TType(x.dtype, tuple(shape))]


def _per_dim_list(ctx: InferContext, attr: str) -> tuple[TType, Any, list[TType] | None]:
    """(input, its per-dimension int list -- operand 1 when given, else the attribute -- and
    the result types when the input's rank or the list is unknown)."""
    x = ctx.inputs[0]
    values = const_ints(ctx, 1) if len(ctx.inputs) > 1 else ctx.attrs[attr]
    if x.shape is None:
        return x, values, [x]
    if values is None:
        return x, values, [TType(x.dtype, (None,) * len(x.shape))]
    return x, values, None


def _pad(ctx: InferContext) -> list[TType]:
    x, pads, unknown = _per_dim_list(ctx, "pads")
    if unknown is not None:
        return unknown
    assert x.shape is not None
    r = len(x.shape)
    if len(pads) != 2 * r:
        raise ctx.error(f"pads must have {2 * r} entries (befores, then afters), got "
                        f"{len(pads)}")
    shape = tuple(None if d is None else d + pads[i] + pads[i + r] for i, d in enumerate(x.shape))
    return [TType(x.dtype, shape)]


def _gather(ctx: InferContext) -> list[TType]:
    x, idx = ctx.inputs
    if idx.dtype not in INT_DTYPES:
        raise ctx.error(f"indices must be integers, got {idx.dtype}")
    if x.shape is None or idx.shape is None:
        return [TType(x.dtype, None)]
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x.shape))
    bd = ctx.attrs["batch_dims"]
    return [TType(x.dtype, x.shape[:axis] + idx.shape[bd:] + x.shape[axis + 1:])]


def _gather_nd(ctx: InferContext) -> list[TType]:
    x, idx = ctx.inputs
    if x.shape is None or idx.shape is None or idx.shape[-1] is None:
        return [TType(x.dtype, None)]
    bd = ctx.attrs["batch_dims"]
    return [TType(x.dtype, idx.shape[:-1] + x.shape[bd + idx.shape[-1]:])]


def _scatter_nd(ctx: InferContext) -> list[TType]:
    data, _idx, upd = ctx.inputs
    if data.dtype != upd.dtype:
        raise ctx.error(f"data and updates element types differ: {data.dtype}, {upd.dtype}")
    return [data]


def _tile(ctx: InferContext) -> list[TType]:
    x, mult, unknown = _per_dim_list(ctx, "multiples")
    if unknown is not None:
        return unknown
    assert x.shape is not None
    if len(mult) != len(x.shape):
        raise ctx.error(f"multiples {list(mult)} do not match rank {len(x.shape)}")
    return [TType(x.dtype, tuple(None if d is None else d * m
                                 for d, m in zip(x.shape, mult, strict=True)))]


def _shape_operand(ctx: InferContext, i: int) -> Any:
    s = ctx.inputs[i]
    if s.dtype not in INDEX_DTYPES:
        raise ctx.error(f"the shape operand must be i32/i64, got {s.dtype}")
    value = const_ints(ctx, i)
    if value is not None:
        return value
    if s.shape is None or not s.shape or s.shape[0] is None:
        return None
    return (None,) * s.shape[0]


def _broadcast_to(ctx: InferContext) -> list[TType]:
    x = ctx.inputs[0]
    shape = _shape_operand(ctx, 1)
    if shape is None:
        return [TType(x.dtype, None)]
    return [TType(x.dtype, broadcast_shapes(ctx, x.shape, tuple(shape)))]


def _expand_dims(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.shape is None:
        return [x]
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x.shape) + 1)
    return [TType(x.dtype, x.shape[:axis] + (1,) + x.shape[axis:])]


def _squeeze(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.shape is None:
        return [x]
    axes = {norm_axis(ctx, a, len(x.shape)) for a in ctx.attrs["axes"]}
    if not axes:
        if any(d is None for d in x.shape):
            raise ctx.error(f"cannot squeeze all size-1 dims of {x} (dynamic dims): give axes")
        axes = {i for i, d in enumerate(x.shape) if d == 1}
    for a in axes:
        if x.shape[a] not in (1, None):
            raise ctx.error(f"dimension {a} of {x} is not 1")
    return [TType(x.dtype, tuple(d for i, d in enumerate(x.shape) if i not in axes))]


def _shape(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    return [TType(ctx.attrs["out_type"], None if x.shape is None else (len(x.shape),))]


def _size(ctx: InferContext) -> list[TType]:
    return [TType(ctx.attrs["out_type"], ())]


def _fill(ctx: InferContext) -> list[TType]:
    shape = _shape_operand(ctx, 0)
    value = ctx.inputs[1]
    if value.rank not in (0, None):
        raise ctx.error(f"the value must be a scalar, got {value}")
    return [TType(value.dtype, None if shape is None else tuple(shape))]


def _range(ctx: InferContext) -> list[TType]:
    dtype = same_dtype(ctx)
    vals = [ctx.const(i) for i in range(3)]
    if all(v is not None for v in vals):
        import numpy as np

        n = len(np.arange(*(np.asarray(v).reshape(()).item() for v in vals)))  # type: ignore[union-attr]
        return [TType(dtype, (n,))]
    return [TType(dtype, (None,))]


def _one_hot(ctx: InferContext) -> list[TType]:
    idx, _depth, on, off = ctx.inputs
    if on.dtype != off.dtype:
        raise ctx.error(f"on and off values differ in element type: {on.dtype}, {off.dtype}")
    d = const_ints(ctx, 1)
    depth = None if d is None else d[0]
    if idx.shape is None:
        return [TType(on.dtype, None)]
    axis = ctx.attrs["axis"]
    rank = len(idx.shape) + 1
    axis = norm_axis(ctx, axis, rank)
    shape = list(idx.shape)
    shape.insert(axis, depth)
    return [TType(on.dtype, tuple(shape))]


def _where(ctx: InferContext) -> list[TType]:
    (c,) = ctx.inputs
    return [TType("i64", (None, c.rank))]


def _top_k(ctx: InferContext) -> list[TType]:
    x = ctx.inputs[0]
    k = const_ints(ctx, 1)
    if x.shape is None:
        return [x, TType(ctx.attrs["index_type"], None)]
    shape = list(x.shape)
    if not shape:
        raise ctx.error("the input must have rank >= 1")
    shape[-1] = None if k is None else k[0]
    if k is not None and x.shape[-1] is not None and k[0] > x.shape[-1]:
        raise ctx.error(f"k = {k[0]} exceeds the last dimension {x.shape[-1]}")
    return [TType(x.dtype, tuple(shape)), TType(ctx.attrs["index_type"], tuple(shape))]


def _resize(ctx: InferContext) -> list[TType]:
    x = ctx.inputs[0]
    if x.shape is None:
        return [x]
    if len(x.shape) != 4:
        raise ctx.error(f"the input must have rank 4, got {x}")
    size = ctx.attrs["size"]
    if len(size) != 2:
        raise ctx.error(f"size must be (height, width), got {list(size)}")
    shape = list(x.shape)
    h, w = (1, 2) if ctx.attrs["layout"] == "NHWC" else (2, 3)
    shape[h], shape[w] = size
    return [TType(x.dtype, tuple(shape))]


def _space(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    b = ctx.attrs["block_size"]
    if b < 1:
        raise ctx.error(f"block_size must be >= 1, got {b}")
    if x.shape is None:
        return [x]
    if len(x.shape) != 4:
        raise ctx.error(f"the input must have rank 4, got {x}")
    n, h, w, c = x.shape if ctx.attrs["layout"] == "NHWC" else (
        x.shape[0], x.shape[2], x.shape[3], x.shape[1])

    def mul(d: int | None, f: int) -> int | None:
        return None if d is None else d * f

    def div(d: int | None, f: int) -> int | None:
        if d is not None and d % f:
            raise ctx.error(f"dimension {d} is not divisible by {f}")
        return None if d is None else d // f

    if ctx.op == "depth_to_space":
        h, w, c = mul(h, b), mul(w, b), div(c, b * b)
    else:
        h, w, c = div(h, b), div(w, b), mul(c, b * b)
    shape = (n, h, w, c) if ctx.attrs["layout"] == "NHWC" else (n, c, h, w)
    return [TType(x.dtype, shape)]


def _identity_n(ctx: InferContext) -> list[TType]:
    return list(ctx.inputs)


_SPACE = {"block_size": AttrSpec("int"),
          "layout": AttrSpec("str", "NHWC", choices=("NHWC", "NCHW")),
          "mode": AttrSpec("str", "DCR", implicit=True, choices=("DCR", "CRD"))}

define("constant", (), _constant,
       {"weight": AttrSpec("str", "", implicit=True), "value": AttrSpec("dense", None,
                                                                        implicit=True)},
       compute=None, family="shape", differentiable=False)
define("reshape", ("x", "shape?"), _reshape,
       {"shape": AttrSpec("ints", (), implicit=True),
        "copy_zero": AttrSpec("bool", False, implicit=True)}, family="shape",
       grad=gr.reshape_like_input)
define("transpose", ("x",), _transpose, {"perm": AttrSpec("ints")}, family="shape",
       grad=gr.transpose)
define("concat", ("inputs*",), _concat, {"axis": AttrSpec("int")}, family="shape", grad=gr.concat)
define("split", ("x",), _split, {"axis": AttrSpec("int"), "sizes": AttrSpec("ints")},
       family="shape", num_results=None, grad_multi=gr.split)
define("slice", ("x", "starts?", "ends?", "axes?", "steps?"), _slice,
       {"starts": AttrSpec("ints", (), implicit=True), "ends": AttrSpec("ints", (), implicit=True),
        "axes": AttrSpec("ints", (), implicit=True), "steps": AttrSpec("ints", (), implicit=True)},
       family="shape", grad=gr.slice_)
define("pad", ("x", "pads?"), _pad,
       {"pads": AttrSpec("ints", (), implicit=True),
        "mode": AttrSpec("str", "constant", choices=("constant", "reflect", "edge", "wrap")),
        "value": AttrSpec("float", 0.0)}, family="shape", grad=gr.pad)
define("gather", ("x", "indices"), _gather,
       {"axis": AttrSpec("int", 0), "batch_dims": AttrSpec("int", 0)}, family="shape",
       grad=gr.gather)
define("gather_nd", ("x", "indices"), _gather_nd, {"batch_dims": AttrSpec("int", 0)},
       family="shape", grad=gr.gather_nd)
define("scatter_nd", ("data", "indices", "updates"), _scatter_nd, family="shape",
       grad=gr.scatter_nd)
define("tile", ("x", "multiples?"), _tile, {"multiples": AttrSpec("ints", (), implicit=True)},
       family="shape", grad=gr.tile)
define("broadcast_to", ("x", "shape"), _broadcast_to, family="shape", grad=gr.broadcast_to)
define("expand_dims", ("x",), _expand_dims, {"axis": AttrSpec("int")}, family="shape",
       grad=gr.reshape_like_input)
define("squeeze", ("x",), _squeeze, {"axes": AttrSpec("ints", ())}, family="shape",
       grad=gr.reshape_like_input)
define("shape", ("x",), _shape, {"out_type": AttrSpec("dtype", "i64")}, family="shape",
       differentiable=False)
define("size", ("x",), _size, {"out_type": AttrSpec("dtype", "i64")}, family="shape",
       differentiable=False)
define("fill", ("shape", "value"), _fill, family="shape", grad=gr.fill)
define("range", ("start", "limit", "delta"), _range, family="shape", differentiable=False)
define("one_hot", ("indices", "depth", "on", "off"), _one_hot, {"axis": AttrSpec("int", -1)},
       family="shape", grad=gr.one_hot)
define("where", ("cond",), _where, family="shape", differentiable=False)
define("top_k", ("x", "k"), _top_k,
       {"sorted": AttrSpec("bool", True), "index_type": AttrSpec("dtype", "i64")},
       family="shape", num_results=2, grad_multi=gr.top_k)
define("resize", ("x",), _resize,
       {"size": AttrSpec("ints"), "layout": AttrSpec("str", choices=("NHWC", "NCHW")),
        "mode": AttrSpec("str", "nearest", choices=("nearest", "linear")),
        "coordinate_transformation_mode": AttrSpec(
            "str", "half_pixel",
            choices=("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
                     "tf_half_pixel_for_nn")),
        "nearest_mode": AttrSpec(
            "str", "round_prefer_floor",
            choices=("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"))},
       family="shape", grad=gr.resize)
define("depth_to_space", ("x",), _space, dict(_SPACE), family="shape", grad=gr.depth_to_space)
define("space_to_depth", ("x",), _space, dict(_SPACE), family="shape", grad=gr.space_to_depth)
define("identity_n", ("inputs*",), _identity_n, family="shape", num_results=None,
       grad_multi=gr.identity_n)
