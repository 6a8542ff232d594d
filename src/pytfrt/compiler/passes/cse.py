"""``-tg-cse``: common-subexpression elimination of the graph dialect's pure ops.

Exported Transformers recompute their shapes from scratch in every layer: GPT-2's ONNX graph
asks ``Shape`` of the same tensor several times per block and rebuilds identical index
constants, ``Gather``/``Unsqueeze``/``Concat`` chains and masks -- some 900 small ops per call
that each cost the call function a Python dispatch.  This pass keeps the first of any two ops
that are the same computation (same op name, the same operand values, equal attributes and
result types) and points the second's users at the first's results; ``-tg-dce`` then drops
nothing else (the duplicate is erased here).

Only ops whose results depend on nothing but their operands and attributes are merged: graph
ops that are not stateful (variables), not control flow and without regions (fused segments
keep their own bodies).  The random ops are stateless (Philox on an explicit key and counter),
so two draws from the same key and counter are the same numbers.  Runs before buffer planning
(a merged value simply has more users).  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from typing import Any

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.lowering import CONTROL
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.passes.common import functions, is_tg, replace


def _key(op: Any) -> tuple[Any, ...] | None:
    """What makes two ops the same computation, or ``None`` if ``op`` must stay."""
    if not is_tg(op) or op.regions or op.name in CONTROL or get_opdef(op.name).stateful:
        return None
    attrs = tuple(sorted((k, str(v)) for k, v in op.attributes.items()))
    props = tuple(sorted((k, str(v)) for k, v in op.properties.items()))
    return (op.name, tuple(id(v) for v in op.operands), attrs, props,
            tuple(str(r.type) for r in op.results))


def cse(gm: GraphModule) -> GraphModule:
    """Run ``-tg-cse`` in place."""
    for f in functions(gm):
        seen: dict[tuple[Any, ...], Any] = {}
        for op in list(f.body.block.ops):
            key = _key(op)
            if key is None:
                continue
            first = seen.get(key)
            if first is None:
                seen[key] = op
                continue
            replace(op, first.results)
    return gm
