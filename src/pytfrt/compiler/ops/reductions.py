"""Catalogue family: reductions (``reduce_*``, ``argmax``/``argmin``, ``cumsum``).

``axes`` empty means every axis; results keep the operand's element type (``reduce_any`` and
``reduce_all`` take and return ``i1``).
"""

from __future__ import annotations

from pytfrt.compiler.ops import grad_rules as gr
from pytfrt.compiler.ops.base import AttrSpec, InferContext, define, norm_axis
from pytfrt.compiler.types import TType

REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
              "reduce_any", "reduce_all")


def _reduce_shape(ctx: InferContext, shape: tuple | None, axes: tuple[int, ...],
                  keepdims: bool) -> tuple | None:
    if shape is None:
        return None
    rank = len(shape)
    norm = {norm_axis(ctx, a, rank) for a in axes} if axes else set(range(rank))
    if len(norm) != len(axes) and axes:
        raise ctx.error(f"repeated axes {list(axes)}")
    if keepdims:
        return tuple(1 if i in norm else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in norm)


def _reduce(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    logical = ctx.op in ("reduce_any", "reduce_all")
    if logical != (x.dtype == "i1"):
        raise ctx.error(f"bad operand element type {x.dtype}")
    if x.dtype == "string":
        raise ctx.error("string operands are not supported")
    return [TType(x.dtype, _reduce_shape(ctx, x.shape, ctx.attrs["axes"],
                                         ctx.attrs["keepdims"]))]


def _arg(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    axis = ctx.attrs["axis"]
    shape = _reduce_shape(ctx, x.shape, (axis,), ctx.attrs["keepdims"])
    if ctx.attrs["output_type"] not in ("i32", "i64"):
        raise ctx.error(f"output_type must be i32 or i64, got {ctx.attrs['output_type']}")
    return [TType(ctx.attrs["output_type"], shape)]


def _cumsum(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    norm_axis(ctx, ctx.attrs["axis"], x.rank)
    return [x]


_REDUCTION_GRADS = (gr.reduce_sum, gr.reduce_mean, gr.reduce_extremum, gr.reduce_extremum,
                    gr.reduce_prod, None, None)  # in REDUCTIONS' order; any/all: booleans
for _name, _grad in zip(REDUCTIONS, _REDUCTION_GRADS, strict=True):
    define(_name, ("x",), _reduce,
           {"axes": AttrSpec("ints", ()), "keepdims": AttrSpec("bool", False)},
           family="reductions", grad=_grad, differentiable=_grad is not None)
for _name in ("argmax", "argmin"):
    define(_name, ("x",), _arg,
           {"axis": AttrSpec("int", 0), "keepdims": AttrSpec("bool", False),
            "output_type": AttrSpec("dtype", "i64")}, family="reductions", differentiable=False)
define("cumsum", ("x",), _cumsum,
       {"axis": AttrSpec("int", 0), "exclusive": AttrSpec("bool", False),
        "reverse": AttrSpec("bool", False)}, family="reductions", grad=gr.cumsum)
