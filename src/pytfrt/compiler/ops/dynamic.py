"""Catalogue family: slices with run-time bounds (``dynamic``).

* ``dynamic_slice(x, begin, end) {begin_mask, end_mask, shrink_mask, sizes}`` -- TF's
  ``StridedSlice`` with unit strides and bounds known at run time; ``sizes[i]`` is axis
  ``i``'s size when the front end can tell it (``end = begin + k``), ``-1`` otherwise;
* ``dynamic_slice_grad(dy, shape, begin, end) {begin_mask, end_mask, shrink_mask,
  static_shape}`` -- its gradient (TF's ``StridedSliceGrad``), zeros of ``shape`` with ``dy``
  at the slice; ``static_shape`` the shape as far as known (``-1`` unknown).

``begin``/``end`` are integer vectors, one entry per axis of ``x``.  Compute functions:
:mod:`pytfrt.backends.cpu.dynamic_slice`.  Filled at import, then read only.
"""

from __future__ import annotations

from pytfrt.compiler.ops import grad_rules as gr
from pytfrt.compiler.ops.base import AttrSpec, InferContext, define
from pytfrt.compiler.types import INT_DTYPES, TType

_MASKS = {"begin_mask": AttrSpec("int", 0), "end_mask": AttrSpec("int", 0),
          "shrink_mask": AttrSpec("int", 0)}


def _check_bounds(ctx: InferContext, rank: int | None, *bounds: TType) -> None:
    for t in bounds:
        if t.dtype not in INT_DTYPES or t.rank not in (None, 1):
            raise ctx.error(f"begin and end must be integer vectors, got {t}")
        if rank is not None and t.shape is not None and t.shape[0] not in (None, rank):
            raise ctx.error(f"begin and end need one entry per axis ({rank}), got {t}")


def _dynamic_slice(ctx: InferContext) -> list[TType]:
    x, begin, end = ctx.inputs
    _check_bounds(ctx, x.rank, begin, end)
    sizes = ctx.attrs["sizes"]
    if x.shape is None:
        return [TType(x.dtype, None)]
    if len(sizes) != len(x.shape):
        raise ctx.error(f"sizes needs one entry per axis ({len(x.shape)}), got {list(sizes)}")
    a = ctx.attrs
    shape: list[int | None] = []
    for i, (d, n) in enumerate(zip(x.shape, sizes, strict=True)):
        if a["shrink_mask"] >> i & 1:
            continue
        whole = a["begin_mask"] >> i & 1 and a["end_mask"] >> i & 1
        shape.append(n if n >= 0 else d if whole else None)
    return [TType(x.dtype, tuple(shape))]


def _dynamic_slice_grad(ctx: InferContext) -> list[TType]:
    dy, shape, begin, end = ctx.inputs
    hint = ctx.attrs["static_shape"]
    rank = len(hint) if hint else (shape.shape[0] if shape.shape else None)
    _check_bounds(ctx, rank, begin, end)
    if rank is None:
        return [TType(dy.dtype, None)]
    return [TType(dy.dtype, tuple(None if d < 0 else d for d in hint) if hint else
                  (None,) * rank)]


define("dynamic_slice", ("x", "begin", "end"), _dynamic_slice,
       {**_MASKS, "sizes": AttrSpec("ints")}, family="dynamic", grad=gr.dynamic_slice)
define("dynamic_slice_grad", ("dy", "shape", "begin", "end"), _dynamic_slice_grad,
       {**_MASKS, "static_shape": AttrSpec("ints", ())}, family="dynamic",
       no_grad="the gradient of a gradient (a second derivative of a slice is not needed)")
