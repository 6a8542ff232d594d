"""``-tg-fold-reshapes``: drop reshapes that change nothing and collapse chains of reshapes.

TensorFlow's gradients end most elementwise and broadcast gradients with
``Reshape(Sum(g, BroadcastGradientArgs(...)), Shape(x))``; once the sums over no axes are
gone, what is left is ``reshape(g) {shape = [-1, 16, 32]}`` of a ``tensor<?x16x32>``: a
kernel call that returns its operand, and, worse, a break in every chain of elementwise ops
(``-tg-fuse-elementwise`` fuses only ops that read each other directly).  A Transformer
block's train step has some 40 of them.  Two rewrites, each only on a reshape whose target is
its ``shape`` attribute (not a run-time operand):

* **identity** -- the result is the operand when both have the same rank and every target
  entry is the operand's static size there, except at most one ``-1`` at a dimension the
  operand leaves dynamic (the element counts are equal, so that ``-1`` is the operand's size
  there).  A ``0`` entry (``copy_zero``) is never treated as an identity;
* **chain** -- ``reshape(reshape(x))`` reads ``x`` directly (a reshape depends only on the
  row-major order of the elements, which a reshape keeps), unless the outer one copies
  dimensions with ``0`` entries.  The inner reshape is erased once nothing else reads it.

Runs after the passes that match reshapes in their patterns (attention, optimizer) and before
``-tg-fuse-elementwise``.  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import attrs_of, functions, replace, ttype


def _is_identity(op: Operation) -> bool:
    """Whether the attribute-only reshape ``op`` returns its operand's shape unchanged."""
    src, dst = ttype(op.operands[0]), ttype(op.results[0])
    if src.shape is None or dst.shape is None or src.dtype != dst.dtype:
        return False
    target = [int(d) for d in attrs_of(op)["shape"]]
    if len(target) != len(src.shape):
        return False
    wild = 0
    for want, have in zip(target, src.shape, strict=True):
        if want == -1 and have is None:
            wild += 1
        elif have is None or want != have:
            return False
    return wild <= 1


def _attr_only(op: Operation) -> bool:
    return op.name == "tg.reshape" and len(op.operands) == 1


def fold_reshapes(gm: GraphModule) -> GraphModule:
    """Run ``-tg-fold-reshapes`` in place; returns ``gm``."""
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if not _attr_only(op):
                continue
            inner = op.operands[0].owner
            a = attrs_of(op)
            if (isinstance(inner, Operation) and _attr_only(inner)
                    and not (a["copy_zero"] and 0 in a["shape"])):
                op.operands[0] = inner.operands[0]
                if not list(inner.results[0].uses):
                    inner.detach()
                    inner.erase()
            if _is_identity(op):
                src: SSAValue = op.operands[0]
                replace(op, [src])
    return gm


__all__ = ["fold_reshapes"]
