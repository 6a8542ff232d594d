"""``-tg-infer-shapes``: shape and dtype inference over the whole module.

Re-runs every op's catalogue inference (the same functions ``GraphBuilder`` calls) in program
order, callees before callers, with constant operands' values, and narrows result types where
the inferred type is more precise (``tensor<*xf32>`` -> ``tensor<?x8xf32>``, ``?`` -> ``8``).
A contradiction between a declared and an inferred type is a :class:`GraphError`.  Function
result types and the module signature follow.
"""

from __future__ import annotations

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.passes.common import (
    attrs_of,
    function_types,
    functions,
    infer,
    is_tg,
    refresh_types,
    ttype,
)
from pytfrt.compiler.types import TType, to_xdsl


def refine(old: TType, new: TType, where: str) -> TType:
    """The more precise of two compatible types.

    Raises:
        GraphError: if they contradict each other.
    """
    if old.dtype != new.dtype:
        raise GraphError(f"{where}: declared element type {old.dtype}, inferred {new.dtype}")
    if new.shape is None:
        return old
    if old.shape is None:
        return new
    if len(old.shape) != len(new.shape):
        raise GraphError(f"{where}: declared type {old}, inferred {new}")
    dims = []
    for a, c in zip(old.shape, new.shape, strict=True):
        if a is not None and c is not None and a != c:
            raise GraphError(f"{where}: declared type {old}, inferred {new}")
        dims.append(a if a is not None else c)
    return TType(old.dtype, tuple(dims))


def infer_shapes(gm: GraphModule) -> GraphModule:
    """Run the pass (in place); returns ``gm``."""
    funcs = functions(gm)
    order = [f for f in funcs if f.sym_name.data != "main"] + [
        f for f in funcs if f.sym_name.data == "main"]
    for _round in range(2):  # callee result types may depend on a caller-independent order
        for f in order:
            fn_types = function_types(gm)
            for op in f.body.block.ops:
                if not is_tg(op) or op.name == "tg.constant":
                    continue
                opdef = get_opdef(op.name)
                if opdef.family == "fusion":  # typed by the pass that made it
                    continue
                inferred = infer(gm, opdef, op.operands, attrs_of(op), fn_types)
                if len(inferred) != len(op.results):
                    raise GraphError(f"{op.name}: {len(op.results)} results declared, "
                                     f"{len(inferred)} inferred")
                for i, (r, t) in enumerate(zip(op.results, inferred, strict=True)):
                    better = refine(ttype(r), t, f"{op.name} result {i}")
                    if better != ttype(r):
                        r._type = to_xdsl(better)
            refresh_types(gm)
    return gm
