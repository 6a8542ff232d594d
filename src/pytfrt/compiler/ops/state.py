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


# -- fused optimizer updates (made by -tg-fuse-optimizer, pytfrt.compiler.passes.optimizers) --
def split_names(text: str) -> list[str]:
    """The variable names of a fused update's comma-joined name attribute."""
    return text.split(",") if text else []


def _update_vars(ctx: InferContext, *keys: str) -> list[list[str]]:
    lists = [split_names(ctx.attrs[k]) for k in keys]
    if len({len(x) for x in lists}) != 1:
        raise ctx.error("the variable name lists differ in length")
    if ctx.variables:  # a module built with its variables (a parsed .mlir file has none)
        for names in lists:
            for name in names:
                _variable(InferContext(ctx.op, [], {"name": name}, variables=ctx.variables))
    return lists


def _float_operands(ctx: InferContext, want: int, what: str) -> None:
    if len(ctx.inputs) != want:
        raise ctx.error(f"expected {want} operands ({what}), got {len(ctx.inputs)}")
    for x in ctx.inputs:
        if x.dtype not in ("f32", "f64"):
            raise ctx.error(f"operands must be floating point, got {x}")


def _check_grads(ctx: InferContext, names: list[str], grads: list[TType]) -> None:
    for name, g in zip(names, grads, strict=True):
        t = ctx.variables.get(name)
        if t is None:
            continue
        if g.dtype != t.dtype or (g.rank is not None and t.rank is not None and (
                g.rank != t.rank or any(a is not None and b is not None and a != b
                                        for a, b in zip(g.shape or (), t.shape or (),
                                                        strict=True)))):
            raise ctx.error(f"variable '{name}' has type {t}, its gradient {g}")


def _apply_adam(ctx: InferContext) -> list[TType]:
    variables, _m, _v = _update_vars(ctx, "variables", "moments", "velocities")
    squares = list(ctx.attrs["squares"])
    n = len(variables)
    extra = sum(1 for s in squares if s >= 0)
    _float_operands(ctx, 1 + n + extra, "alpha, the gradients, the squared gradients given")
    if len(squares) != n or any(s >= 0 and not 1 + n <= s < 1 + n + extra for s in squares):
        raise ctx.error("'squares' must give -1 or an operand index past the gradients for "
                        "each variable")
    _check_grads(ctx, variables, ctx.inputs[1:1 + n])
    return []


def _apply_momentum(ctx: InferContext) -> list[TType]:
    variables, _m = _update_vars(ctx, "variables", "moments")
    n = len(variables)
    _float_operands(ctx, 1 + n, "the learning rate, the gradients")
    _check_grads(ctx, variables, ctx.inputs[1:])
    return []


_NO_GRAD = "no results (a state write)"
define("apply_adam", ("alpha", "grads*"), _apply_adam, {
    "variables": AttrSpec("str"), "moments": AttrSpec("str"), "velocities": AttrSpec("str"),
    "one_minus_beta_1": AttrSpec("float"), "one_minus_beta_2": AttrSpec("float"),
    "epsilon": AttrSpec("float"), "squares": AttrSpec("ints"),
}, family="state", stateful=True, compute=None, num_results=0, no_grad=_NO_GRAD,
    doc="Keras' Adam step of several variables in one pass")
define("apply_momentum", ("learning_rate", "grads*"), _apply_momentum, {
    "variables": AttrSpec("str"), "moments": AttrSpec("str"), "momentum": AttrSpec("float"),
}, family="state", stateful=True, compute=None, num_results=0, no_grad=_NO_GRAD,
    doc="Keras' SGD-with-momentum step of several variables in one pass")
