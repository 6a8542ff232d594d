"""``-tg-shape-plans``: the values that depend only on tensor shapes, computed once per shape.

A value is *shape-determined* when it is computed by pure ops from constants and from
``shape`` / ``size`` of tensors (the *key* tensors: only their shapes are read): a
Transformer's reshape targets, position ids, causal and padding masks.  With a dynamic batch
and sequence those ops run on every call -- GPT-2 exported from torch ran ~850 of them per call
(``shape``, ``gather``, ``expand_dims``, ``concat``, ``slice``, ``squeeze``, ``range``...) for
some 30 distinct values -- although their results only change when the shapes do.

The pass groups the shape-determined ops by the latest key tensor they depend on (a group can
run as soon as that tensor exists) and replaces each group that other ops read from by one
``tg.shape_plan`` whose region holds the group's ops and every shape-determined op they need
(copied, so a region never waits for another's results); its operands are the key tensors and
the constants the region reads; its results are the group's values that other ops use.  It is
inserted before the first of those users; small constants the region reads are copied into
it (so a program's text says everything it computes).  The kernel
(:mod:`pytfrt.backends.cpu.shape_plan`) runs the region on the first call with a new tuple of
key shapes and returns the kept results afterwards.  The original ops are left for
``-tg-dce``.

Ops with regions, control flow, stateful ops, ops with a load-time preparation, constants
themselves, ops on no key tensor
(left to constant folding) and groups of a single ``shape`` (nothing to save) stay as they
are.  Only functions without control flow are changed (``@main`` of an inference model).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from xdsl.ir import Block, Operation, Region, SSAValue

from pytfrt.compiler.attrs import op_attrs
from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.dialect import op_class
from pytfrt.compiler.kernel_programs import SHAPE_READERS
from pytfrt.compiler.lowering import CONTROL
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.passes.common import INLINE_LIMIT, const_value, functions, make_constant

_NEVER = CONTROL | {"tg.constant", "tg.shape_plan", "tg.yield"}


def _candidate(op: Operation) -> bool:
    if not op.name.startswith("tg.") or op.name in _NEVER or op.regions:
        return False
    opdef = get_opdef(op.name)
    if opdef.stateful or opdef.compute_key is None or opdef.prepare or not op.results:
        return False
    try:  # the kernel's program carries the attributes as JSON
        json.dumps(op_attrs(op, opdef))
    except (TypeError, ValueError):
        return False
    return True


def _small_const(gm: GraphModule, v: SSAValue) -> np.ndarray | None:
    """The value of a small numeric constant (copied into the regions), else ``None``."""
    arr = const_value(gm, v)
    if arr is None or arr.size > INLINE_LIMIT or arr.dtype.kind not in "biuf":
        return None
    return arr


def _plan_block(gm: GraphModule, block: Block) -> None:
    ops = list(block.ops)
    if any(op.name in CONTROL for op in ops):
        return
    pos = {op: i for i, op in enumerate(ops)}
    avail: dict[Operation, int] = {}  # shape-determined op -> position of its latest key
    for op in ops:
        if not _candidate(op):
            continue
        if op.name in SHAPE_READERS:
            owner = op.operands[0].owner
            avail[op] = pos[owner] if isinstance(owner, Operation) else -1
            continue
        if any(_is_constant_op(v) and _small_const(gm, v) is None for v in op.operands):
            continue
        inner = [v.owner for v in op.operands if not _is_constant_op(v)]
        if not inner or not all(isinstance(o, Operation) and o in avail for o in inner):
            continue
        avail[op] = max(avail[o] for o in inner if isinstance(o, Operation))
    if not avail:
        return
    groups: dict[int, list[Operation]] = defaultdict(list)
    for op in ops:
        if op in avail:
            groups[avail[op]].append(op)
    for _at, members in sorted(groups.items()):
        outputs = [r for m in members for r in m.results
                   if any(u.operation not in avail for u in r.uses)]
        if not outputs:
            continue
        closure = _closure(outputs, avail)
        if len(closure) < 2:
            continue
        closure.sort(key=pos.__getitem__)
        _replace_group(gm, block, closure, outputs, avail)


def _closure(outputs: Sequence[SSAValue], avail: dict[Operation, int]) -> list[Operation]:
    """The shape-determined ops ``outputs`` need (their owners included)."""
    seen: set[Operation] = set()
    stack = [v.owner for v in outputs]
    while stack:
        op = stack.pop()
        if not isinstance(op, Operation) or op in seen or op not in avail:
            continue
        seen.add(op)
        if op.name not in SHAPE_READERS:
            stack.extend(v.owner for v in op.operands)
    return list(seen)


def _is_constant_op(v: SSAValue) -> bool:
    return isinstance(v.owner, Operation) and v.owner.name == "tg.constant"


def _replace_group(gm: GraphModule, block: Block, closure: list[Operation],
                   outputs: Sequence[SSAValue], avail: dict[Operation, int]) -> None:
    members = set(closure)
    inputs: list[SSAValue] = []
    consts: list[SSAValue] = []
    for op in closure:
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in members:
                continue
            reads_shape = op.name in SHAPE_READERS
            target = consts if _is_constant_op(v) and not reads_shape else inputs
            if v not in target:
                target.append(v)
    first_user = min((u.operation for v in outputs for u in v.uses
                      if u.operation not in avail), key=_index_in(block))
    region_block = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, region_block.args, strict=True))
    for v in consts:  # copied in: the program holds every value it computes with
        arr = _small_const(gm, v)
        assert arr is not None
        c = make_constant(gm, arr)
        region_block.add_op(c)
        mapping[v] = c.results[0]
    for op in closure:
        region_block.add_op(op.clone(value_mapper=mapping))
    region_block.add_op(op_class("yield").create(operands=[mapping[v] for v in outputs]))
    plan = op_class("shape_plan").create(operands=inputs, result_types=[v.type for v in outputs],
                                         regions=[Region(region_block)])
    plan.location = first_user.location
    block.insert_op_before(plan, first_user)
    for v, new in zip(outputs, plan.results, strict=True):
        for use in list(v.uses):
            if use.operation not in avail:
                use.operation.operands[use.index] = new


def _index_in(block: Block):  # type: ignore[no-untyped-def]
    index = {op: i for i, op in enumerate(block.ops)}
    return index.__getitem__


def shape_plans(gm: GraphModule) -> GraphModule:
    """Run the pass in place."""
    for f in functions(gm):
        _plan_block(gm, f.body.block)
    return gm


__all__ = ["shape_plans"]
