"""Helpers shared by the graph passes: reading constants, creating ops with inferred types,
replacing ops, refreshing function types and the module signature.

Passes work on a :class:`~pytfrt.compiler.builder.GraphModule` in place (its xDSL module and
its weights).  Not thread-safe: one pass at a time per module.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import builtin as b
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue

from pytfrt.compiler.attrs import from_xattr, op_attrs, to_xattr
from pytfrt.compiler.builder import INLINE_LIMIT, GraphBuilder, GraphModule
from pytfrt.compiler.dialect import op_class
from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.ops import InferContext, OpDef, get_opdef
from pytfrt.compiler.types import TType, from_xdsl, np_dtype, to_xdsl, ttype_of_array
from pytfrt.signature import TensorSpec


def functions(gm: GraphModule) -> list[FuncOp]:
    """The module's functions, in order."""
    return [op for op in gm.module.body.block.ops if isinstance(op, FuncOp)]


def ops_named(gm: GraphModule, name: str) -> list[Operation]:
    """The ops called ``name`` in every function body, in order (a list: callers may rewrite
    them while iterating)."""
    return [op for f in functions(gm) for op in f.body.block.ops if op.name == name]


def ttype(v: SSAValue) -> TType:
    """The TType of a value."""
    return from_xdsl(v.type)


def is_tg(op: Operation) -> bool:
    """Whether ``op`` is a graph-dialect op."""
    return op.name.startswith("tg.")


def producer(v: SSAValue, name: str) -> Operation | None:
    """The op defining ``v`` if it is named ``name`` (``"tg.add"``...), else ``None``."""
    op = v.owner
    return op if isinstance(op, Operation) and op.name == name else None


def other_operand(op: Operation, v: SSAValue) -> SSAValue | None:
    """The operand of the two-operand ``op`` beside ``v`` (``None`` unless ``v`` is one)."""
    lhs, rhs = op.operands
    return rhs if lhs is v else lhs if rhs is v else None


def const_value(gm: GraphModule | GraphBuilder, v: SSAValue) -> np.ndarray | None:
    """The value of ``v`` if a ``tg.constant`` defines it (missing weights: ``None``).  ``gm``
    may be a builder still building the module (only its weights are read)."""
    op = v.owner
    if not isinstance(op, Operation) or op.name != "tg.constant":
        return None
    value = op.attributes.get("value")
    if value is not None:
        return from_xattr("dense", value, "tg.constant")  # type: ignore[no-any-return]
    w = op.attributes.get("weight")
    if isinstance(w, b.StringAttr):
        arr = gm.weights.get(w.data)
        return None if arr is None else np.asarray(arr)
    return None


def scalar_const(gm: GraphModule, v: SSAValue) -> float | None:
    """The value of a one-element constant ``v`` as a float (otherwise ``None``)."""
    c = const_value(gm, v)
    return None if c is None or c.size != 1 else float(c.reshape(()))


_names = itertools.count()


def make_constant(gm: GraphModule, arr: np.ndarray, hint: str = "folded") -> Operation:
    """A ``tg.constant`` op holding ``arr`` (inline if small, else a new weight)."""
    arr = np.asarray(arr)
    t = ttype_of_array(arr)
    if arr.size <= INLINE_LIMIT and t.dtype != "string":
        attrs = {"value": to_xattr("dense", arr)}
    else:
        name = f"{hint}_{next(_names)}"
        while name in gm.weights:
            name = f"{hint}_{next(_names)}"
        gm.weights[name] = arr
        attrs = {"weight": b.StringAttr(name)}
    return op_class("constant").create(result_types=[to_xdsl(t)], attributes=attrs)


def function_types(gm: GraphModule) -> dict[str, tuple[list[TType], list[TType]]]:
    """Argument and result types of every function, by name."""
    return {
        f.sym_name.data: ([from_xdsl(t) for t in f.function_type.inputs.data],
                          [from_xdsl(t) for t in f.function_type.outputs.data])
        for f in functions(gm)
    }


def variable_types(gm: GraphModule) -> dict[str, TType]:
    """Types of the module's variables (from their initial values)."""
    return {n: ttype_of_array(np.asarray(gm.weights[n])) for n in gm.variables
            if n in gm.weights}


def infer(gm: GraphModule, opdef: OpDef, operands: Sequence[SSAValue], attrs: dict[str, Any],
          fn_types: dict[str, tuple[list[TType], list[TType]]] | None = None) -> list[TType]:
    """Result types of ``opdef`` on ``operands`` (attributes complete).

    Raises:
        GraphError: what the op's inference raises.
    """
    ctx = InferContext(opdef.name, [ttype(v) for v in operands], attrs,
                       [const_value(gm, v) for v in operands],
                       fn_types if fn_types is not None else function_types(gm),
                       variable_types(gm))
    return opdef.infer(ctx)


def new_op(gm: GraphModule, name: str, operands: Sequence[SSAValue], attrs: dict[str, Any],
           loc: Any = None) -> Operation:
    """A new ``tg.<name>`` op with inferred result types (not inserted anywhere).

    Raises:
        GraphError: bad attributes or operands.
    """
    opdef = get_opdef(name)
    full = opdef.check_attrs(attrs)
    results = infer(gm, opdef, operands, full)
    stored = opdef.stored_attrs(full)
    op = op_class(opdef.name).create(
        operands=list(operands), result_types=[to_xdsl(t) for t in results],
        attributes={k: to_xattr(opdef.attrs[k].kind, stored[k]) for k in sorted(stored)})
    if loc is not None:
        op.location = loc
    return op


def attrs_of(op: Operation) -> dict[str, Any]:
    """The op's attributes with defaults (see ``lowering.op_attrs``)."""
    return op_attrs(op, get_opdef(op.name))


def replace(old: Operation, new_values: Sequence[SSAValue]) -> None:
    """Replace every use of ``old``'s results by ``new_values`` and erase ``old``."""
    for r, v in zip(old.results, new_values, strict=True):
        if r is not v:
            r.replace_all_uses_with(v)
    old.detach()
    old.erase()


def erase_unused(ops: Sequence[Operation]) -> None:
    """Erase, in the order given (consumers before their producers), each of ``ops`` whose
    results nothing reads any more."""
    for op in ops:
        if all(not r.uses for r in op.results):
            op.detach()
            op.erase()


def users(v: SSAValue) -> list[Operation]:
    """The ops using ``v`` (once per use)."""
    return [u.operation for u in v.uses]


def single_use(v: SSAValue) -> Operation | None:
    """The only user of ``v``, or ``None``."""
    uses = list(v.uses)
    return uses[0].operation if len(uses) == 1 else None


def refresh_types(gm: GraphModule) -> None:
    """Set every function's result types from what it returns, and the module signature's
    output shapes (names and structure kept)."""
    for f in functions(gm):
        ret = f.body.block.last_op
        if not isinstance(ret, ReturnOp):
            raise GraphError(f"@{f.sym_name.data} does not end with func.return")
        f.function_type = b.FunctionType.from_lists(
            list(f.function_type.inputs.data), [v.type for v in ret.operands])
    sig = gm.signature
    if not any(f.sym_name.data == "main" for f in functions(gm)):
        return
    main = gm.function("main")
    outs = [from_xdsl(t) for t in main.function_type.outputs.data]
    if len(outs) == len(sig.outputs):
        gm.signature = dataclasses.replace(
            sig, outputs=tuple(TensorSpec(s.name, np_dtype(t.dtype), t.shape)
                               for s, t in zip(sig.outputs, outs, strict=True)))


def prune_weights(gm: GraphModule) -> None:
    """Drop weights no constant refers to (variables are kept)."""
    used = set(gm.variables)
    for f in functions(gm):
        for op in f.body.block.ops:
            w = op.attributes.get("weight") if op.name == "tg.constant" else None
            if isinstance(w, b.StringAttr):
                used.add(w.data)
    for name in [n for n in gm.weights if n not in used]:
        del gm.weights[name]


def make_region(ops: Sequence[Operation], name: str, outputs: Sequence[SSAValue]) -> Operation:
    """Move ``ops`` (consecutive in effect: no op outside them both uses one of their results
    and feeds one of them) into the region of a new ``tg.<name>`` op inserted before the last
    of them.  The region's arguments are the values ``ops`` use from outside; its ``yield``
    returns ``outputs``, whose uses outside ``ops`` now use the new op's results.  Returns it.
    """
    members = set(ops)
    inputs: list[SSAValue] = []
    for op in ops:
        for v in op.operands:
            owner = v.owner
            if (not isinstance(owner, Operation) or owner not in members) and v not in inputs:
                inputs.append(v)
    last = ops[-1]
    block = Block(arg_types=[v.type for v in inputs])
    region_op = op_class(name).create(
        operands=inputs, result_types=[v.type for v in outputs], regions=[Region(block)])
    region_op.location = last.location
    parent = last.parent_block()
    assert parent is not None
    parent.insert_op_before(region_op, last)
    for v, new in zip(outputs, region_op.results, strict=True):
        for use in list(v.uses):
            if use.operation not in members:
                use.operation.operands[use.index] = new
    mapping = dict(zip(inputs, block.args, strict=True))
    for op in ops:
        op.detach()
        for i, v in enumerate(op.operands):
            if v in mapping:
                op.operands[i] = mapping[v]
        block.add_op(op)
    block.add_op(op_class("yield").create(operands=list(outputs)))
    return region_op
