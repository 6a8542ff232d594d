"""Catalogue family: variables (state).

Variables live in the runtime's resource context under their name; their initial values are
the module's weights of the same name.  Every op here is *stateful*: no pass removes, reorders
or folds it, and the lowering threads one chain through them in program order.
"""

from __future__ import annotations

from pytfrt.compiler.ops.base import AttrSpec, InferContext, define
from pytfrt.compiler.types import TType


def _variable(ctx: InferContext) -> TType:
    name = ctx.attrs["name"]
    t = ctx.variables.get(name)
    if t is None:
        raise ctx.error(f"unknown variable '{name}' (declare it with GraphBuilder.variable)")
    return t


def _read(ctx: InferContext) -> list[TType]:
    return [_variable(ctx)]


def _assign(ctx: InferContext) -> list[TType]:
    t = _variable(ctx)
    (x,) = ctx.inputs
    if x.dtype != t.dtype:
        raise ctx.error(f"variable '{ctx.attrs['name']}' is {t.dtype}, the value is {x.dtype}")
    if (x.static and t.static and x.shape != t.shape) or (
        x.rank is not None and t.rank is not None and x.rank != t.rank
    ):
        raise ctx.error(f"variable '{ctx.attrs['name']}' has type {t}, the value {x}")
    return []


_NAME = {"name": AttrSpec("str")}
define("read_variable", (), _read, dict(_NAME), family="state", stateful=True, compute=None,
       no_grad="a source (no operands): differentiate a variable's value by passing it as an "
               "argument")
for _name in ("assign_variable", "assign_add_variable", "assign_sub_variable"):
    define(_name, ("value",), _assign, dict(_NAME), family="state", stateful=True,
           compute=None, num_results=0, no_grad="no results (a state write)")
