"""Catalogue family: functional control flow (``if``, ``case``, ``while``).

Bodies are functions of the module (as TF's functional ops); result types are the bodies'
result types.  Lowered to ``tfrt.if``, ``tfrt.case`` and ``tfrt.while``.
"""

from __future__ import annotations

from pytfrt.compiler.ops.base import AttrSpec, InferContext, define
from pytfrt.compiler.types import TType


def _signature(ctx: InferContext, name: str) -> tuple[list[TType], list[TType]]:
    sig = ctx.functions.get(name)
    if sig is None:
        raise ctx.error(f"unknown function @{name}")
    return sig


def _check_args(ctx: InferContext, name: str, args: list[TType]) -> list[TType]:
    ins, outs = _signature(ctx, name)
    if len(ins) != len(args):
        raise ctx.error(f"@{name} takes {len(ins)} arguments, got {len(args)}")
    for i, (want, got) in enumerate(zip(ins, args, strict=True)):
        if want.dtype != got.dtype:
            raise ctx.error(f"argument {i} of @{name} is {want.dtype}, got {got.dtype}")
    return outs


def _same_results(ctx: InferContext, names: list[str], args: list[TType]) -> list[TType]:
    results = [_check_args(ctx, n, args) for n in names]
    first = results[0]
    for n, r in zip(names[1:], results[1:], strict=True):
        if [t.dtype for t in r] != [t.dtype for t in first]:
            raise ctx.error(f"@{names[0]} and @{n} return different element types")
    return [
        t if all(r[i] == t for r in results) else TType(t.dtype, None)
        for i, t in enumerate(first)
    ]


def _if(ctx: InferContext) -> list[TType]:
    cond = ctx.inputs[0]
    if cond.dtype != "i1" or cond.rank not in (0, None):
        raise ctx.error(f"the condition must be a scalar i1, got {cond}")
    names = [ctx.attrs["then_branch"], ctx.attrs["else_branch"]]
    return _same_results(ctx, names, ctx.inputs[1:])


def _case(ctx: InferContext) -> list[TType]:
    index = ctx.inputs[0]
    if index.dtype not in ("i32", "i64") or index.rank not in (0, None):
        raise ctx.error(f"the index must be a scalar i32/i64, got {index}")
    names = list(ctx.attrs["branches"])
    if not names:
        raise ctx.error("needs at least one branch")
    return _same_results(ctx, names, ctx.inputs[1:])


def _while(ctx: InferContext) -> list[TType]:
    cond, body = ctx.attrs["cond"], ctx.attrs["body"]
    couts = _check_args(ctx, cond, ctx.inputs)
    if len(couts) != 1 or couts[0].dtype != "i1":
        raise ctx.error(f"@{cond} must return one i1 scalar")
    bouts = _check_args(ctx, body, ctx.inputs)
    if [t.dtype for t in bouts] != [t.dtype for t in ctx.inputs]:
        raise ctx.error(f"@{body} must return the loop variables' element types")
    return [a if a == b else TType(a.dtype, None) for a, b in zip(ctx.inputs, bouts, strict=True)]


define("if", ("cond", "args*"), _if,
       {"then_branch": AttrSpec("sym"), "else_branch": AttrSpec("sym")},
       family="control", compute=None, num_results=None)
define("case", ("index", "args*"), _case, {"branches": AttrSpec("syms")},
       family="control", compute=None, num_results=None)
define("while", ("args*",), _while, {"cond": AttrSpec("sym"), "body": AttrSpec("sym")},
       family="control", compute=None, num_results=None)
