"""Catalogue family: ONNX ops with no equivalent in the core catalogue.

The ONNX front end (``pytfrt.compiler.frontends.onnx_mapping``) maps onto the core catalogue
wherever it can; these few ops exist because composing them from core ops would be much slower
or impossible with static attributes:

* ``gather_elements(x, indices) {axis}`` -- ONNX ``GatherElements`` (NumPy
  ``take_along_axis``, negative indices allowed);
* ``scatter_elements(data, indices, updates) {axis, reduction}`` -- ONNX ``ScatterElements``;
* ``einsum(inputs...) {equation}`` -- ONNX ``Einsum`` (NumPy's ``einsum`` grammar);
* ``trilu(x) {upper, k}`` -- ONNX ``Trilu`` with a constant diagonal offset.

Compute functions: :mod:`pytfrt.backends.cpu.onnx_ops`.  Filled at import, then read only.
"""

from __future__ import annotations

import re

from pytfrt.compiler.ops import grad_rules as gr
from pytfrt.compiler.ops.base import (
    AttrSpec,
    InferContext,
    broadcast_shapes,
    define,
    norm_axis,
    same_dtype,
)
from pytfrt.compiler.types import INT_DTYPES, TType


def _gather_elements(ctx: InferContext) -> list[TType]:
    x, idx = ctx.inputs
    if idx.dtype not in INT_DTYPES:
        raise ctx.error(f"indices must be integers, got {idx.dtype}")
    if x.rank is not None and idx.rank is not None and x.rank != idx.rank:
        raise ctx.error(f"x and indices must have the same rank, got {x} and {idx}")
    norm_axis(ctx, ctx.attrs["axis"], x.rank)
    return [TType(x.dtype, idx.shape)]


def _scatter_elements(ctx: InferContext) -> list[TType]:
    data, idx, upd = ctx.inputs
    if idx.dtype not in INT_DTYPES:
        raise ctx.error(f"indices must be integers, got {idx.dtype}")
    same_dtype(ctx, [0, 2])
    norm_axis(ctx, ctx.attrs["axis"], data.rank)
    return [data]


_TERM = re.compile(r"^[A-Za-z]*(\.\.\.)?[A-Za-z]*$")


def _einsum(ctx: InferContext) -> list[TType]:
    dtype = same_dtype(ctx)
    eq = ctx.attrs["equation"].replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ctx.inputs) or not all(_TERM.match(t) for t in terms):
        raise ctx.error(f"equation {eq!r} does not match {len(ctx.inputs)} operands")
    # every label's dims and every operand's "..." dims, broadcast NumPy's way at the end (a
    # label of size 1 in one operand takes the other operands' size)
    label_dims: dict[str, list[tuple[int | None]]] = {}
    ellipses: list[tuple[int | None, ...]] = []
    ellipsis_known = True
    for term, t in zip(terms, ctx.inputs, strict=True):
        if t.shape is None:
            ellipsis_known = ellipsis_known and "..." not in term
            for c in term.replace("...", ""):
                label_dims.setdefault(c, []).append((None,))
            continue
        head, _, tail = term.partition("...")
        n_ell = len(t.shape) - len(head) - len(tail) if "..." in term else 0
        if n_ell < 0 or ("..." not in term and len(term) != len(t.shape)):
            raise ctx.error(f"term {term!r} does not match the operand's rank {len(t.shape)}")
        dims = list(t.shape)
        labelled = dims[: len(head)] + dims[len(dims) - len(tail) :]
        for c, d in zip(head + tail, labelled, strict=True):
            label_dims.setdefault(c, []).append((d,))
        if "..." in term:
            ellipses.append(tuple(dims[len(head) : len(head) + n_ell]))
    sizes = {c: broadcast_shapes(ctx, *ds)[0] for c, ds in label_dims.items()}
    ellipsis = broadcast_shapes(ctx, *ellipses) if ellipsis_known else None
    if not arrow:
        letters = sorted(c for c in sizes if lhs.count(c) == 1)
        rhs = ("..." if "..." in lhs else "") + "".join(letters)
    if ellipsis is None and "..." in rhs:
        return [TType(dtype, None)]
    out: list[int | None] = []
    for part in re.split(r"(\.\.\.)", rhs):
        if part == "...":
            out.extend(ellipsis or ())
            continue
        for c in part:
            if c not in sizes:
                raise ctx.error(f"output label {c!r} does not appear in the inputs")
            out.append(sizes[c])
    return [TType(dtype, tuple(out))]


def _trilu(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.rank is not None and x.rank < 2:
        raise ctx.error(f"the input must have rank >= 2, got {x}")
    return [x]


define(
    "gather_elements",
    ("x", "indices"),
    _gather_elements,
    {"axis": AttrSpec("int", 0)},
    family="onnx",
    doc="ONNX GatherElements",
    grad=gr.gather_elements,
)
define(
    "scatter_elements",
    ("data", "indices", "updates"),
    _scatter_elements,
    {
        "axis": AttrSpec("int", 0),
        "reduction": AttrSpec("str", "none", choices=("none", "add", "mul", "max", "min")),
    },
    family="onnx",
    doc="ONNX ScatterElements",
    grad=gr.scatter_elements,
)
define(
    "einsum", ("inputs*",), _einsum, {"equation": AttrSpec("str")}, family="onnx", doc="ONNX Einsum"
, grad=gr.einsum)
define(
    "trilu",
    ("x",),
    _trilu,
    {"upper": AttrSpec("bool", True), "k": AttrSpec("int", 0)},
    family="onnx",
    doc="ONNX Trilu (constant k)",
    grad=gr.same_op,
)
