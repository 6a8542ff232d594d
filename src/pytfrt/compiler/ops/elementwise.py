"""Catalogue family: elementwise ops (binary with NumPy broadcasting, unary, cast, select).

One ``tg`` op per record of :data:`pytfrt.backends.cpu.op_math.MATH`, where each elementwise
op's meaning lives (compute, scalar formula, gradient rule, epilogue activation, eager entry,
operand domain and attributes); this module only turns a record into its :class:`OpDef`
(inference from the record's ``domain``/``result``/``attrs``).  Every op here is
``elementwise`` (fusable by ``-tg-fuse-elementwise``); binary ops require equal operand element
types (front ends insert casts); comparisons and logical ops return ``i1``.
"""

from __future__ import annotations

from pytfrt.backends.cpu.op_math import MATH, Math
from pytfrt.compiler.ops.base import (
    AttrSpec,
    InferContext,
    broadcast_shapes,
    define,
    same_dtype,
)
from pytfrt.compiler.types import FLOAT_DTYPES, INT_DTYPES, TType

BINARY = tuple(n for n, m in MATH.items() if m.arity == 2)
UNARY = tuple(n for n, m in MATH.items() if m.arity == 1)
FLOAT_UNARY = tuple(n for n in UNARY if MATH[n].domain == "float")
NUMERIC_UNARY = tuple(n for n in UNARY if MATH[n].domain == "numeric")


def check_domain(ctx: InferContext, domain: str, dtype: str) -> None:
    """Raise if ``dtype`` is outside an op's operand ``domain`` (see ``op_math.Math``)."""
    if dtype == "string" and not (domain == "any" and ctx.op in ("equal", "not_equal")):
        raise ctx.error("string operands are not supported")
    what = {"float": "floating point", "numeric": "numeric", "bool": "i1",
            "integer": "integers"}.get(domain)
    ok = {"float": dtype in FLOAT_DTYPES, "arith": True, "numeric": dtype not in ("i1", "string"),
          "bool": dtype == "i1", "integer": dtype in INT_DTYPES or dtype == "i1"}.get(domain, True)
    if not ok:
        kind = "operands" if len(ctx.inputs) > 1 else "operand"
        raise ctx.error(f"{kind} must be {what}, got {dtype}")


def _infer(ctx: InferContext) -> list[TType]:
    m: Math = MATH[ctx.op]
    if len(ctx.inputs) != m.arity:
        names = " (cond, a, b)" if ctx.op == "select" else ""
        raise ctx.error(f"takes {m.arity} operands{names}, got {len(ctx.inputs)}")
    if ctx.op == "select":
        c = ctx.inputs[0]
        if c.dtype != "i1":
            raise ctx.error(f"the condition must be i1, got {c.dtype}")
        dtype = same_dtype(ctx, [1, 2])
    else:
        dtype = same_dtype(ctx)
        check_domain(ctx, m.domain, dtype)
    if m.arity == 1:
        shape = ctx.inputs[0].shape
    else:
        shape = broadcast_shapes(ctx, *(t.shape for t in ctx.inputs))
    return [TType("i1" if m.result == "bool" else dtype, shape)]


def _cast(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    return [TType(ctx.attrs["to"], x.shape)]


for _name, _m in MATH.items():
    define(_name, ("x", "y") if _m.arity == 2 else ("cond", "a", "b") if _m.arity == 3 else ("x",),
           _infer, {k: AttrSpec(kind, d) for k, (kind, d) in _m.attrs.items()},
           family="elementwise", elementwise=True, math=_m, grad=_m.vjp,
           differentiable=_m.differentiable, doc=_m.doc)
define("cast", ("x",), _cast, {"to": AttrSpec("dtype")}, family="elementwise", elementwise=True,
       grad=lambda c, g: [c.op("cast", g, to=c.x[0].dtype)])


def _made_by_pass(ctx: InferContext) -> list[TType]:
    raise ctx.error("is made by -tg-fuse-elementwise, not by front ends")


define("fused_elementwise", ("inputs*",), _made_by_pass, family="fusion", compute=None,
       no_grad="made by the fusion passes, which run after pytfrt.grad has differentiated the "
               "traced program",
       doc="a region of elementwise ops run as one Numba kernel (made by a pass)")
define("fused_graph", ("inputs*",), _made_by_pass, family="fusion", compute=None,
       num_results=None, no_grad="made by the fusion passes, which run after differentiation",
       doc="a region of ops with small static shapes run as one Numba function (made by "
           "-tg-fuse-small-graph; results: the values its yield returns)")
define("yield", ("value", "values*"), _made_by_pass, family="fusion", compute=None,
       num_results=0,
       no_grad="the terminator of a fused region (made by the passes, after differentiation)",
       doc="the terminator of a fused_elementwise (one value) or fused_graph region")
