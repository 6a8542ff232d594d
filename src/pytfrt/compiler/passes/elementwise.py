"""``-tg-fuse-elementwise``: chains of elementwise ops -> one ``tg.fused_elementwise`` op.

Groups are grown in program order: an elementwise op joins the groups of the fusable ops that
produce its operands when it is their only user, so each group is a tree with one output (its
last op).  Groups of two or more ops become::

    %r = "tg.fused_elementwise"(%in0, %in1) ({
    ^bb0(%a: tensor<...>, %b: tensor<...>):
      %0 = "tg.mul"(%a, %b) ...
      %1 = "tg.relu"(%0) ...
      "tg.yield"(%1) ...
    }) : (...) -> tensor<...>

Fusable: the ops of :data:`pytfrt.backends.cpu.fused.SCALAR` on float32/float64 values (every
operand and result).  At run time the region is one Numba ufunc, compiled once per fused
program and input dtypes (:mod:`pytfrt.backends.cpu.fused`).
"""

from __future__ import annotations

from xdsl.ir import Operation

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import functions, make_region, single_use, ttype

FLOATS = ("f32", "f64")


def fusable(op: Operation) -> bool:
    """Whether ``op`` may be part of a fused region."""
    from pytfrt.backends.cpu.fused import SCALAR

    if not op.name.startswith("tg.") or op.name[3:] not in SCALAR or len(op.results) != 1:
        return False
    return all(ttype(v).dtype in FLOATS for v in [*op.operands, *op.results])


def _fuse(group: list[Operation]) -> None:
    make_region(group, "fused_elementwise", [group[-1].results[0]])


def fuse_elementwise(gm: GraphModule) -> GraphModule:
    """Run the pass in place."""
    for f in functions(gm):
        group_of: dict[Operation, list[Operation]] = {}
        for op in list(f.body.block.ops):
            if not fusable(op):
                continue
            group = [op]
            for v in op.operands:
                owner = v.owner
                if (isinstance(owner, Operation) and owner in group_of
                        and single_use(v) is op and group_of[owner] is not group):
                    sub = group_of[owner]
                    group = sub + [o for o in group if o not in sub]
            for o in group:
                group_of[o] = group
        seen: set[int] = set()
        for group in list(group_of.values()):
            if id(group) in seen or len(group) < 2:
                continue
            seen.add(id(group))
            if group_of.get(group[-1]) is group:
                _fuse(group)
    return gm
