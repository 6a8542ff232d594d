"""Catalogue family: elementwise ops (binary with NumPy broadcasting, unary, cast, select).

Every op here is ``elementwise`` (fusable by ``-tg-fuse-elementwise``); binary ops require
equal operand element types (front ends insert casts); comparisons and logical ops return
``i1``.
"""

from __future__ import annotations

from pytfrt.compiler.ops.base import (
    AttrSpec,
    InferContext,
    broadcast_shapes,
    define,
    same_dtype,
)
from pytfrt.compiler.types import FLOAT_DTYPES, INT_DTYPES, TType, np_dtype

ARITHMETIC = (
    "add", "sub", "mul", "div", "floor_div", "floor_mod", "pow", "maximum", "minimum",
    "squared_difference", "atan2",
)  # fmt: skip
COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
LOGICAL = ("logical_and", "logical_or", "logical_xor")
BITWISE = ("bitwise_and", "bitwise_or")
BINARY = ARITHMETIC + COMPARISONS + LOGICAL + BITWISE

FLOAT_UNARY = (
    "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "elu",
    "selu", "softplus", "softsign", "erf", "sin", "cos", "tan", "silu", "hard_swish",
)  # fmt: skip
NUMERIC_UNARY = ("neg", "abs", "square", "sign", "floor", "ceil", "round", "relu", "relu6")
UNARY = FLOAT_UNARY + NUMERIC_UNARY + ("identity", "logical_not", "is_nan", "is_inf")


def _binary(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) != 2:
        raise ctx.error(f"takes 2 operands, got {len(ctx.inputs)}")
    dtype = same_dtype(ctx)
    op = ctx.op
    if op in LOGICAL and dtype != "i1":
        raise ctx.error(f"operands must be i1, got {dtype}")
    if op in BITWISE and dtype not in INT_DTYPES and dtype != "i1":
        raise ctx.error(f"operands must be integers, got {dtype}")
    if op == "atan2" and dtype not in FLOAT_DTYPES:
        raise ctx.error(f"operands must be floating point, got {dtype}")
    if dtype == "string" and op not in ("equal", "not_equal"):
        raise ctx.error("string operands are not supported")
    shape = broadcast_shapes(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape)
    out = "i1" if op in COMPARISONS else dtype
    return [TType(out, shape)]


def _unary(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    op = ctx.op
    if op in FLOAT_UNARY + ("gelu", "leaky_relu", "hard_sigmoid", "is_nan", "is_inf"):
        if x.dtype not in FLOAT_DTYPES:
            raise ctx.error(f"operand must be floating point, got {x.dtype}")
    if op == "logical_not" and x.dtype != "i1":
        raise ctx.error(f"operand must be i1, got {x.dtype}")
    if op in NUMERIC_UNARY + ("clip",) and x.dtype in ("i1", "string"):
        raise ctx.error(f"operand must be numeric, got {x.dtype}")
    if op in ("is_nan", "is_inf"):
        return [TType("i1", x.shape)]
    return [x]


def _cast(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    return [TType(ctx.attrs["to"], x.shape)]


def _select(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) != 3:
        raise ctx.error(f"takes 3 operands (cond, a, b), got {len(ctx.inputs)}")
    c, a, b = ctx.inputs
    if c.dtype != "i1":
        raise ctx.error(f"the condition must be i1, got {c.dtype}")
    dtype = same_dtype(ctx, [1, 2])
    return [TType(dtype, broadcast_shapes(ctx, c.shape, a.shape, b.shape))]


for _name in BINARY:
    define(_name, ("x", "y"), _binary, family="elementwise", elementwise=True)
for _name in UNARY:
    define(_name, ("x",), _unary, family="elementwise", elementwise=True)
define("gelu", ("x",), _unary, {"approximate": AttrSpec("bool", False)}, family="elementwise",
       elementwise=True)
define("leaky_relu", ("x",), _unary, {"alpha": AttrSpec("float", 0.2)}, family="elementwise",
       elementwise=True)
define("hard_sigmoid", ("x",), _unary,
       {"alpha": AttrSpec("float", 0.2), "beta": AttrSpec("float", 0.5)},
       family="elementwise", elementwise=True)
define("clip", ("x",), _unary,
       {"min": AttrSpec("float", float("-inf")), "max": AttrSpec("float", float("inf"))},
       family="elementwise", elementwise=True)
define("cast", ("x",), _cast, {"to": AttrSpec("dtype")}, family="elementwise", elementwise=True)


def _bitcast(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    to = ctx.attrs["to"]
    if x.dtype in ("i1", "string") or to in ("i1", "string") or (
            np_dtype(x.dtype).itemsize != np_dtype(to).itemsize):
        raise ctx.error(f"bitcast needs numeric types of one size, got {x.dtype} to {to}")
    return [TType(to, x.shape)]


define("bitcast", ("x",), _bitcast, {"to": AttrSpec("dtype")}, family="elementwise",
       doc="the same bits read as another type of the same size (TF's Bitcast)")
define("select", ("cond", "a", "b"), _select, family="elementwise", elementwise=True)


def _made_by_pass(ctx: InferContext) -> list[TType]:
    raise ctx.error("is made by -tg-fuse-elementwise, not by front ends")


define("fused_elementwise", ("inputs*",), _made_by_pass, family="fusion", compute=None,
       doc="a region of elementwise ops run as one Numba kernel (made by a pass)")
define("fused_graph", ("inputs*",), _made_by_pass, family="fusion", compute=None,
       num_results=None,
       doc="a region of ops with small static shapes run as one Numba function (made by "
           "-tg-fuse-small-graph; results: the values its yield returns)")
define("yield", ("value", "values*"), _made_by_pass, family="fusion", compute=None,
       num_results=0,
       doc="the terminator of a fused_elementwise (one value) or fused_graph region")
