"""The JSON programs that the fused kernels run, made from a fused op's region.

* :func:`region_program` -- a ``tg.fused_elementwise`` region for :mod:`pytfrt.backends.cpu.fused`.
* :func:`graph_program` -- a ``tg.fused_graph`` region for :mod:`pytfrt.backends.cpu.small_graph`.

Both the passes that build those ops and the lowering that puts the programs into the kernels'
attributes use them, so they sit below both.  Pure functions of the IR; they raise
:class:`~pytfrt.compiler.errors.GraphError` for an op with a bad attribute.
"""

from __future__ import annotations

import json

from xdsl.ir import Block, Operation, SSAValue

from pytfrt.compiler.attrs import op_attrs
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


def graph_program(op: Operation) -> str:
    """The JSON program (:mod:`pytfrt.backends.cpu.small_graph`) of a ``fused_graph`` op."""
    block = op.regions[0].blocks.first
    assert block is not None
    ids: dict[SSAValue, int] = {a: i for i, a in enumerate(block.args)}
    ops: list[list[object]] = []
    outputs: list[int] = []
    for inner in block.ops:
        if inner.name == "tg.yield":
            outputs = [ids[v] for v in inner.operands]
            break
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
                       "outputs": outputs}, separators=(",", ":"), sort_keys=True)
