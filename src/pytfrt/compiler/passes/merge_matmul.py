"""``-tg-merge-matmuls``: a Transformer's query/key/value projections as one GEMM.

An exported BERT computes each layer's queries, keys and values as three products of the same
hidden states with three ``d x d`` weights (plus biases): three GEMMs, each reading the input
and dispatched, threaded and packed on its own.  ONNX Runtime packs them into one.  Pattern
(after ``-tg-fuse-attention``, before ``-tg-fuse-epilogue``)::

    y_i = matmul(x, w_i)            # i = 1..n (n >= 2), the same x, w_i constant (k, n_i)
    z_i = add(y_i, b_i)             # optional, all or none: b_i constant [n_i] (either order)
    r_i = reshape(z_i, s_i)         # every user of z_i a reshape whose users are all
    a   = attention(r_q, r_k, r_v)  #   attention ops (or a ``shape`` of z_i)

becomes::

    y   = matmul(x, concat(w_1..w_n, axis 1))     # packed once, here at compile time
    z   = add(y, concat(b_1..b_n))
    z_i = columns(z) {start = n_1 + .. + n_(i-1), size = n_i}   # strided views, no copies

The ``attention`` kernel reads heads at any row stride, so nothing is copied between the one
GEMM and the attention; ``-tg-fuse-epilogue`` then folds the bias into the merged product.
Matmuls with ``transpose`` flags or an epilogue, weights that are shared or not float32 of one
``k``, and projections read by anything but a reshape into ``attention`` are left alone (a
strided view is only handed to the kernel known to take one).  GPT-2 packs its projections in
the exported model already, then copies them apart with a ``split`` along the last axis: a
split whose pieces all reach ``attention`` that way (static sizes) becomes ``columns`` views
of its operand too.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes import common as c
from pytfrt.compiler.passes.fold import dce

Projection = tuple[Operation, np.ndarray, Operation | None, np.ndarray | None]
"""(matmul, its weight, its bias add or ``None``, the bias or ``None``)."""


def _weight(gm: GraphModule, mm: Operation) -> np.ndarray | None:
    """The constant float32 ``(k, n)`` weight of a plain two-operand matmul used only there."""
    if len(mm.operands) != 2:
        return None
    a = c.attrs_of(mm)
    if a["transpose_a"] or a["transpose_b"] or a["activation"] != "none" \
            or tuple(a["epilogue_operands"]) != (0, 0):
        return None
    wv = mm.operands[1]
    if c.single_use(wv) is not mm:
        return None
    w = c.const_value(gm, wv)
    if w is None or w.ndim != 2 or w.dtype != np.float32:
        return None
    return w


def _bias(gm: GraphModule, mm: Operation, n: int) -> tuple[Operation, np.ndarray] | None:
    """The ``add`` of a constant ``[n]`` bias that is the matmul's only user, if any."""
    add = c.single_use(mm.results[0])
    if add is None or add.name != "tg.add" or len(add.operands) != 2:
        return None
    y = mm.results[0]
    other = add.operands[1] if add.operands[0] is y else add.operands[0]
    if other is y:
        return None
    b = c.const_value(gm, other)
    if b is None or b.shape != (n,) or b.dtype != np.float32:
        return None
    return add, b


def _feeds_attention_only(v: SSAValue) -> bool:
    """Whether ``v`` reaches only ``attention`` ops, through reshapes (its ``shape`` may also
    be read: the reshape's target computed from it)."""
    us = c.users(v)
    heads = [u for u in us if u.name == "tg.reshape" and u.operands[0] is v]
    return bool(heads) and all(u in heads or u.name == "tg.shape" for u in us) and all(
        c.users(u.results[0]) and all(a.name == "tg.attention" for a in c.users(u.results[0]))
        for u in heads)


def _projection(gm: GraphModule, mm: Operation) -> Projection | None:
    w = _weight(gm, mm)
    if w is None:
        return None
    found = _bias(gm, mm, w.shape[1])
    add, b = found if found is not None else (None, None)
    out = (add or mm).results[0]
    if not _feeds_attention_only(out):
        return None
    return mm, w, add, b


def _merge(gm: GraphModule, group: list[Projection]) -> None:
    first = group[0][0]
    block = first.parent_block()
    assert block is not None
    x = first.operands[0]
    w = c.make_constant(gm, np.concatenate([p[1] for p in group], axis=1), "packed_w")
    mm = c.new_op(gm, "matmul", [x, w.results[0]], c.attrs_of(first), first.location)
    made = [w, mm]
    z = mm.results[0]
    if group[0][3] is not None:
        b = c.make_constant(gm, np.concatenate([p[3] for p in group if p[3] is not None]),
                          "packed_b")
        add = c.new_op(gm, "add", [z, b.results[0]], {}, first.location)
        made += [b, add]
        z = add.results[0]
    start = 0
    views = []
    for p in group:
        size = p[1].shape[1]
        views.append(c.new_op(gm, "columns", [z], {"start": start, "size": size}, p[0].location))
        start += size
    for op in made + views:
        block.insert_op_before(op, first)
    for p, view in zip(group, views, strict=True):
        old_mm, _, old_add, _ = p
        wcst = old_mm.operands[1].owner
        if old_add is not None:
            c.replace(old_add, [view.results[0]])
            old_mm.detach()
            old_mm.erase()
        else:
            c.replace(old_mm, [view.results[0]])
        if isinstance(wcst, Operation) and not wcst.results[0].uses:
            name = getattr(wcst.attributes.get("weight"), "data", None)
            wcst.detach()
            wcst.erase()
            if isinstance(name, str):
                gm.weights.pop(name, None)


def _split_to_views(gm: GraphModule, op: Operation) -> None:
    """A ``split`` along the last axis, with static sizes, whose pieces all reach only
    ``attention`` (GPT-2's packed ``c_attn``) -> ``columns`` views instead of copies."""
    a = c.attrs_of(op)
    rank = c.ttype(op.operands[0]).rank
    sizes = [int(s) for s in a["sizes"]]
    if rank is None or int(a["axis"]) not in (rank - 1, -1) or any(s < 0 for s in sizes) \
            or not all(_feeds_attention_only(r) for r in op.results):
        return
    block = op.parent_block()
    assert block is not None
    views, start = [], 0
    for size in sizes:
        views.append(c.new_op(gm, "columns", [op.operands[0]], {"start": start, "size": size},
                              op.location))
        start += size
    for view in views:
        block.insert_op_before(view, op)
    c.replace(op, [v.results[0] for v in views])


def merge_matmuls(gm: GraphModule) -> GraphModule:
    """Run the pass in place; returns ``gm``."""
    dce(gm)  # the transposes -tg-fuse-attention left behind still read the projections
    for op in c.ops_named(gm, "tg.split"):
        _split_to_views(gm, op)
    for f in c.functions(gm):
        groups: dict[SSAValue, list[Projection]] = {}
        for op in list(f.body.block.ops):
            if op.name != "tg.matmul":
                continue
            p = _projection(gm, op)
            if p is not None:
                groups.setdefault(op.operands[0], []).append(p)
        for group in groups.values():
            by_kind: dict[tuple[int, bool], list[Projection]] = {}
            for p in group:
                by_kind.setdefault((p[1].shape[0], p[2] is not None), []).append(p)
            for same in by_kind.values():
                if len(same) >= 2:
                    _merge(gm, same)
    return gm


__all__ = ["merge_matmuls"]
