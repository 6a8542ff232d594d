"""``-tg-pair-conv-grads``: a convolution's input and filter gradients as one op.

A train step differentiates each convolution into two ops that read the same output
gradient ``dy``: the input gradient (reads the filter) and the filter gradient (reads the
input).  They are independent, and each alone is split across the threads, with a join
each.  Pattern::

    dx = conv2d_backprop_input(s, w, dy) {attrs}     # s: the input's shape
    dw = conv2d_backprop_filter(x, f, dy) {attrs}    # f: the filter's shape; same dy, attrs
        -> dx, dw = conv2d_grads(x, w, dy) {attrs}

when the attributes (layout, strides, dilations, pads, groups) are equal, ``dw`` has the
static type of ``w``, ``dx`` the type of ``x`` and its shape is known to be ``x``'s (both
static, or ``s`` is ``shape(x)``, also through an integer cast: a dynamic batch), and the
fused op can stand where one of the two stood: before the first
if ``x``, ``w`` and ``dy`` are defined before it, else before the second if nothing between
them reads the first's result.  Each ``dy`` pairs at most one input gradient with one filter
gradient.  ``conv2d_grads`` (``docs/graph_dialect.md``) computes the two at once, one per
thread, each unsplit (``docs/kernels.md``).  Then a ``conv2d_grads`` and the NHWC
``bias_add_grad(dy)`` of the same ``dy`` (a Keras ``Conv2D``'s bias) become one
``conv2d_bias_grads`` (results dx, dw, db) where the pair stands, if nothing before it reads
the bias gradient: its kernel sums the bias gradient on whichever thread finishes first.
Runs after differentiation and the gradient fusions that rewrite ``dy``'s producer
(``-tg-fuse-batch-stats``).  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import attrs_of, functions, new_op, replace, ttype
from pytfrt.compiler.types import INT_DTYPES

_ATTRS = ("layout", "strides", "dilations", "pads", "groups")


def _defined_before(v: SSAValue, index: dict[Operation, float], at: float) -> bool:
    """Whether ``v`` is available at position ``at`` of the block ``index`` numbers."""
    owner = v.owner
    if not isinstance(owner, Operation) or owner not in index:
        return True  # a block argument, or defined outside this block
    return index[owner] < at


def _site(block: Block, first: Operation, second: Operation, operands: list[SSAValue],
          index: dict[Operation, float]) -> Operation | None:
    """The op before which the fused op goes, or ``None`` if neither position is valid."""
    if all(_defined_before(v, index, index[first]) for v in operands):
        return first
    lo, hi = index[first], index[second]
    for use in first.results[0].uses:
        user = use.operation
        while user.parent_block() is not block:  # a use inside a nested region
            parent = user.parent_op()
            if parent is None:
                return None
            user = parent
        if lo < index[user] < hi:
            return None
    return second


def _same_attrs(a: Operation, b: Operation) -> bool:
    aa, ba = attrs_of(a), attrs_of(b)
    return all(aa.get(k) == ba.get(k) for k in _ATTRS)


def _static(t: object) -> tuple[int, ...] | None:
    shape = getattr(t, "shape", None)
    if shape is None or any(d is None for d in shape):
        return None
    return tuple(shape)


def _shape_source(v: SSAValue) -> SSAValue | None:
    """``t`` if ``v`` is ``shape(t)``, also through casts to another integer type."""
    owner = v.owner
    while isinstance(owner, Operation) and owner.name == "tg.cast":
        if ttype(owner.results[0]).dtype not in INT_DTYPES:
            return None
        owner = owner.operands[0].owner
    if isinstance(owner, Operation) and owner.name == "tg.shape" and len(owner.operands) == 1:
        return owner.operands[0]
    return None


def _input_shaped(gi: Operation, x: SSAValue) -> bool:
    """Whether the input gradient ``gi`` has ``x``'s shape: both static and equal, or its
    shape operand is ``shape(x)``."""
    xs = _static(ttype(x))
    if xs is not None and _static(ttype(gi.results[0])) == xs:
        return True
    return _shape_source(gi.operands[0]) is x and ttype(gi.results[0]) == ttype(x)


def pair_conv_grads(gm: GraphModule) -> GraphModule:
    """Run ``-tg-pair-conv-grads`` in place; returns ``gm``."""
    for f in functions(gm):
        block = f.body.block
        ops = list(block.ops)
        index: dict[Operation, float] = {op: float(i) for i, op in enumerate(ops)}
        inputs: dict[SSAValue, Operation] = {}
        filters: dict[SSAValue, Operation] = {}
        for op in ops:
            if op.name == "tg.conv2d_backprop_input":
                inputs.setdefault(op.operands[2], op)
            elif op.name == "tg.conv2d_backprop_filter":
                filters.setdefault(op.operands[2], op)
        for key, gi in inputs.items():
            gf = filters.get(key)
            if gf is None or not _same_attrs(gi, gf):
                continue
            # the operands as they are now (an earlier pair may have produced them)
            x, w, dy = gf.operands[0], gi.operands[1], gi.operands[2]
            ws = _static(ttype(w))
            if (ws is None or _static(ttype(gf.results[0])) != ws
                    or not _input_shaped(gi, x)):
                continue
            first, second = (gi, gf) if index[gi] < index[gf] else (gf, gi)
            site = _site(block, first, second, [x, w, dy], index)
            if site is None:
                continue
            fused = new_op(gm, "conv2d_grads", [x, w, dy],
                           {k: attrs_of(gi)[k] for k in _ATTRS}, gi.location)
            if [r.type for r in fused.results] != [gi.results[0].type, gf.results[0].type]:
                fused.erase()
                continue
            block.insert_op_before(fused, site)
            index[fused] = index[site] - 0.5
            replace(gi, [fused.results[0]])
            replace(gf, [fused.results[1]])
        _join_bias_grads(gm, block)
    return gm


def _join_bias_grads(gm: GraphModule, block: Block) -> None:
    """``conv2d_grads`` and an NHWC ``bias_add_grad`` of its ``dy`` into one
    ``conv2d_bias_grads``, where the pair stands, when nothing before it reads the bias
    gradient."""
    ops = list(block.ops)
    index = {op: i for i, op in enumerate(ops)}
    biases: dict[SSAValue, Operation] = {}
    for op in ops:
        if op.name == "tg.bias_add_grad" and attrs_of(op)["layout"] == "NHWC":
            biases.setdefault(op.operands[0], op)
    for g in ops:
        if g.name != "tg.conv2d_grads" or attrs_of(g)["layout"] != "NHWC":
            continue
        b = biases.pop(g.operands[2], None)
        if b is None or any(_position(u.operation, block, index) < index[g]
                            for u in b.results[0].uses):
            continue
        fused = new_op(gm, "conv2d_bias_grads", list(g.operands), attrs_of(g), g.location)
        if [r.type for r in fused.results] != [*(r.type for r in g.results), b.results[0].type]:
            fused.erase()
            continue
        block.insert_op_before(fused, g)
        replace(g, list(fused.results[:2]))
        replace(b, [fused.results[2]])


def _position(op: Operation, block: Block, index: dict[Operation, int]) -> int:
    """The position in ``block`` of ``op`` or of the op of ``block`` that holds it."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        if parent is None:
            return -1
        op = parent
    return index.get(op, -1)


__all__ = ["pair_conv_grads"]
