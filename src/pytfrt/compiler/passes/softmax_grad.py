"""``-tg-fuse-softmax-grad``: a softmax's gradient, as TensorFlow writes it, into one op.

TF's ``SoftmaxGrad`` is imported as the ops that compute it (``(dy - sum(dy * y)) * y`` along
the softmax's axis, ``y`` its output): a multiply, a ``reduce_sum`` along a short axis (slow in
NumPy: an attention's 16-wide rows), a subtract and a multiply.  Pattern::

    y = softmax(x) {axis = a}
    p = mul(dy, y)                          # either operand order, p read only by s
    s = reduce_sum(p) {axes = [a], keepdims = true}      # s read only by d
    d = sub(dy, s)                          # d read only by r
    r = mul(d, y)                           # either order
        -> r = softmax_grad(y, dy) {axis = a}

``softmax_grad`` (``docs/graph_dialect.md``) broadcasts as the ops it replaces; its kernel is
one compiled pass per row for float32 along the last axis
(:mod:`pytfrt.backends.cpu.softmax_rows`).  Runs before ``-tg-fuse-elementwise`` (a scale after
``r`` then fuses on its own).  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    functions,
    new_op,
    other_operand,
    replace,
    single_use,
    ttype,
)


def _match(y: SSAValue, axis: int, p: Operation) -> tuple[SSAValue, Operation] | None:
    """``(dy, r)`` if ``p = mul(dy, y)`` starts the pattern, else ``None``."""
    dy = other_operand(p, y)
    if dy is None or dy is y:
        return None
    s = single_use(p.results[0])
    if s is None or s.name != "tg.reduce_sum" or len(s.operands) != 1:
        return None
    sa = attrs_of(s)
    rank = ttype(y).rank or 1  # ranked: the caller checked
    if not sa["keepdims"] or [int(x) % rank for x in sa["axes"]] != [axis]:
        return None
    d = single_use(s.results[0])
    if (d is None or d.name != "tg.sub" or d.operands[0] is not dy
            or d.operands[1] is not s.results[0]):
        return None
    r = single_use(d.results[0])
    if r is None or r.name != "tg.mul" or other_operand(r, d.results[0]) is not y:
        return None
    return dy, r


def fuse_softmax_grad(gm: GraphModule) -> GraphModule:
    """Run ``-tg-fuse-softmax-grad`` in place; returns ``gm``."""
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.name != "tg.softmax" or ttype(op.results[0]).rank in (None, 0):
                continue
            y = op.results[0]
            axis = int(attrs_of(op)["axis"]) % ttype(y).rank  # type: ignore[operator]
            for p in [u.operation for u in list(y.uses)]:
                if p.name != "tg.mul" or p.parent is None:
                    continue
                found = _match(y, axis, p)
                if found is None:
                    continue
                dy, r = found
                fused = new_op(gm, "softmax_grad", [y, dy], {"axis": axis}, r.location)
                if fused.results[0].type != r.results[0].type:
                    fused.erase()
                    continue
                block = r.parent_block()
                assert block is not None
                block.insert_op_before(fused, r)
                d = r.operands[0].owner if r.operands[0] is not y else r.operands[1].owner
                replace(r, list(fused.results))
                for dead in (d, d.operands[1].owner, p):  # type: ignore[union-attr]
                    assert isinstance(dead, Operation)
                    dead.detach()
                    dead.erase()
    return gm


__all__ = ["fuse_softmax_grad"]
