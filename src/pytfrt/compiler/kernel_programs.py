"""The JSON programs that the fused kernels run, made from a fused op's region.

* :func:`region_program` -- a ``tg.fused_elementwise`` region for :mod:`pytfrt.backends.cpu.fused`.
* :func:`graph_program` -- a ``tg.fused_graph`` region for :mod:`pytfrt.backends.cpu.small_graph`.
* :func:`shape_plan_program` -- a ``tg.shape_plan`` region for
  :mod:`pytfrt.backends.cpu.shape_plan`.

Both the passes that build those ops and the lowering that puts the programs into the kernels'
attributes use them, so they sit below both.  Pure functions of the IR; they raise
:class:`~pytfrt.compiler.errors.GraphError` for an op with a bad attribute.
"""

from __future__ import annotations

import json

from xdsl.ir import Block, Operation, SSAValue

from pytfrt.compiler.attrs import from_xattr, op_attrs
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.types import from_xdsl

DTYPES = {"f32": "float32", "f64": "float64"}
"""The element types a small-graph program carries, by graph-dialect name."""


def region_program(block: Block) -> str:
    """The JSON program (``pytfrt.backends.cpu.fused``) of a ``fused_elementwise`` region."""
    ids: dict[SSAValue, int] = {a: i for i, a in enumerate(block.args)}
    ops = []
    for inner in block.ops:
        if inner.name == "tg.yield":
            break
        attrs = {k: (list(v) if isinstance(v, tuple) else v)
                 for k, v in op_attrs(inner, get_opdef(inner.name)).items()}
        ops.append([inner.name[3:], [ids[v] for v in inner.operands], attrs])
        ids[inner.results[0]] = len(block.args) + len(ops) - 1
    return json.dumps({"n": len(block.args), "ops": ops}, separators=(",", ":"),
                      sort_keys=True)

def _type(v: SSAValue) -> list[object]:
    t = from_xdsl(v.type)
    return [DTYPES[t.dtype], list(t.shape or ())]


def _region(op: Operation) -> tuple[Block, dict[SSAValue, int]]:
    """The op's region block and its arguments' value ids (``0 .. n - 1``)."""
    block = op.regions[0].blocks.first
    assert block is not None
    return block, {a: i for i, a in enumerate(block.args)}


def _body(block: Block) -> list[Operation]:
    """The region's ops before its ``yield``."""
    ops = []
    for inner in block.ops:
        if inner.name == "tg.yield":
            break
        ops.append(inner)
    return ops


def _yielded(block: Block, ids: dict[SSAValue, int]) -> list[int]:
    """The value ids the region's ``yield`` returns (none without one)."""
    last = block.last_op
    return [] if last is None or last.name != "tg.yield" else [ids[v] for v in last.operands]


def graph_program(op: Operation) -> str:
    """The JSON program (:mod:`pytfrt.backends.cpu.small_graph`) of a ``fused_graph`` op."""
    block, ids = _region(op)
    ops: list[list[object]] = []
    for inner in _body(block):
        if inner.name == "tg.fused_elementwise":
            inner_block = inner.regions[0].blocks.first
            assert inner_block is not None
            attrs: dict[str, object] = {"program": region_program(inner_block)}
        else:
            attrs = {k: (list(v) if isinstance(v, tuple) else v)
                     for k, v in op_attrs(inner, get_opdef(inner.name)).items()}
        ops.append([inner.name[3:], [ids[v] for v in inner.operands], attrs,
                    [_type(r) for r in inner.results]])
        for r in inner.results:
            ids[r] = len(ids)
    return json.dumps({"inputs": [_type(a) for a in block.args], "ops": ops,
                       "outputs": _yielded(block, ids)}, separators=(",", ":"), sort_keys=True)


def shape_plan_program(op: Operation) -> str:
    """The JSON program (:mod:`pytfrt.backends.cpu.shape_plan`) of a ``shape_plan`` op: its
    region's ops by compute key, and which operands are read for their shapes only (the key)."""
    block, ids = _region(op)
    key: list[int] = []
    ops: list[list[object]] = []
    for inner in _body(block):
        if inner.name == "tg.constant":  # a small constant copied in (-tg-shape-plans)
            arr = from_xattr("dense", inner.attributes["value"], "tg.constant")
            ops.append(["constant", [], {"dtype": arr.dtype.str, "shape": list(arr.shape),
                                         "value": arr.reshape(-1).tolist()}])
            ids[inner.results[0]] = len(ids)
            continue
        opdef = get_opdef(inner.name)
        if inner.name in SHAPE_READERS:
            j = ids[inner.operands[0]]
            if j < len(block.args) and j not in key:
                key.append(j)
        attrs = {k: (list(v) if isinstance(v, tuple) else v)
                 for k, v in op_attrs(inner, opdef).items()}
        ops.append([opdef.compute_key, [ids[v] for v in inner.operands], attrs])
        for r in inner.results:
            ids[r] = len(ids)
    return json.dumps({"inputs": len(block.args), "key": sorted(key), "ops": ops,
                       "outputs": _yielded(block, ids)}, separators=(",", ":"), sort_keys=True)


SHAPE_READERS = frozenset({"tg.shape", "tg.size"})
"""The ops that read only their operand's shape (a ``shape_plan``'s key operands)."""
