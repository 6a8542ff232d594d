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

Keras' ``MultiHeadAttention`` (TF's ``einsum`` ``abc,cde->abde`` projections) arrives in
another form, which the pass first rewrites into the one above (:func:`_canonical_dense`)::

    y = matmul(x, w3)               # x of rank >= 3, w3 a constant [1, k, n]
    r = reshape(y, [0, .., 0, h, d])   # splits only the last axis (h * d = n)
    z = add(r, b)                   # b a constant [h, d]

becomes ``reshape(add(matmul(x, w), b'), [0, .., 0, h, d])`` with ``w = w3[0]`` and ``b'`` the
bias flattened to ``[n]`` (the same values: a product with a ``[1, k, n]`` weight broadcasts it
over ``x``'s batch; the bias broadcast over the split axes is the flat one over the last).
Any matmul of a rank >= 3 ``x`` with a constant weight of leading unit dimensions loses them
(the output projection's ``abcd,cde->abe``): then the dense-layer kernels with a packed weight
and the epilogue fusion take them.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes import common as c
from pytfrt.compiler.passes.fold import dce

CANONICAL_DENSE = True
"""Whether the pass first rewrites Keras' ``einsum`` dense layers (:func:`_canonical_dense`;
an A/B switch, read per run)."""

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
        consts = [old_mm.operands[1].owner]
        if old_add is not None:
            consts += [v.owner for v in old_add.operands if v is not old_mm.results[0]]
            c.replace(old_add, [view.results[0]])
            old_mm.detach()
            old_mm.erase()
        else:
            c.replace(old_mm, [view.results[0]])
        for cst in consts:
            if isinstance(cst, Operation) and cst.name == "tg.constant" and cst.parent is not None:
                _drop_if_unused(gm, cst)


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


def _squeeze_weight(gm: GraphModule, mm: Operation) -> None:
    """``matmul(x, w)`` with ``x`` of rank >= 3 and a constant ``w`` ``[1, .., 1, k, n]`` of
    lower rank than ``x`` -> ``matmul(x, w[0, .., 0])`` (the same result shape and values)."""
    if len(mm.operands) < 2:
        return
    w = c.const_value(gm, mm.operands[1])
    xr = c.ttype(mm.operands[0]).rank
    if w is None or w.ndim < 3 or xr is None or w.ndim > xr or any(d != 1 for d in w.shape[:-2]):
        return
    old = mm.operands[1].owner
    w2 = c.make_constant(gm, w.reshape(w.shape[-2:]), "dense_w")
    block = mm.parent_block()
    assert block is not None and isinstance(old, Operation)
    block.insert_op_before(w2, mm)
    mm.operands[1] = w2.results[0]
    _drop_if_unused(gm, old)


def _drop_if_unused(gm: GraphModule, op: Operation) -> None:
    """Erase a constant no op reads any more (and its weight)."""
    if op.results[0].uses:
        return
    name = getattr(op.attributes.get("weight"), "data", None)
    op.detach()
    op.erase()
    if isinstance(name, str):
        gm.weights.pop(name, None)


def _split_tail(gm: GraphModule, r: Operation) -> int | None:
    """The length ``n`` of the last axis a ``reshape`` splits, when it keeps every other axis
    (``shape = [0, .., 0, d1, .., dm]`` with ``copy_zero``, ``d1 .. dm`` static and
    ``m >= 2``), else ``None``."""
    if len(r.operands) != 1:
        return None
    a = c.attrs_of(r)
    xs = c.ttype(r.operands[0]).shape
    shape = [int(d) for d in a.get("shape", ())]
    if not a.get("copy_zero") or not xs or len(shape) < len(xs) + 1:
        return None
    lead, tail = shape[:len(xs) - 1], shape[len(xs) - 1:]
    if any(d != 0 for d in lead) or any(d <= 0 for d in tail):
        return None
    n = int(np.prod(tail))
    return n if xs[-1] in (None, n) else None


def _hoist_bias(gm: GraphModule, add: Operation) -> None:
    """``add(reshape(matmul(..)), b)`` with the reshape splitting the matmul's last axis (its
    only user) and ``b`` a constant over the split axes -> ``reshape(add(matmul, b flat))``."""
    if len(add.operands) != 2:
        return
    for rv, bv in ((add.operands[0], add.operands[1]), (add.operands[1], add.operands[0])):
        r = rv.owner
        if not isinstance(r, Operation) or r.name != "tg.reshape" or c.single_use(rv) is not add:
            continue
        y = r.operands[0]
        mm = y.owner
        if not isinstance(mm, Operation) or mm.name != "tg.matmul" or c.single_use(y) is not r:
            continue
        n = _split_tail(gm, r)
        b = c.const_value(gm, bv)
        out, ys = c.ttype(rv).shape, c.ttype(y).shape
        if n is None or b is None or out is None or ys is None or b.dtype != np.float32 \
                or c.ttype(y).dtype != "f32" or b.size != n:
            continue
        if b.ndim > len(out) - len(ys) + 1 or b.shape != tuple(out[len(out) - b.ndim:]):
            continue  # the bias must lie along the split axes alone, in full
        block = add.parent_block()
        assert block is not None
        flat = c.make_constant(gm, np.ascontiguousarray(b.reshape(n)), "dense_b")
        new_add = c.new_op(gm, "add", [y, flat.results[0]], {}, add.location)
        new_r = c.new_op(gm, "reshape", [new_add.results[0]], c.attrs_of(r), r.location)
        for op in (flat, new_add, new_r):
            block.insert_op_before(op, add)
        old_b = bv.owner
        c.replace(add, [new_r.results[0]])
        r.detach()
        r.erase()
        if isinstance(old_b, Operation) and old_b.name == "tg.constant":
            _drop_if_unused(gm, old_b)
        return


def _canonical_dense(gm: GraphModule) -> None:
    """Keras' ``einsum`` dense layers in the plain form (see the module docstring)."""
    for mm in c.ops_named(gm, "tg.matmul"):
        _squeeze_weight(gm, mm)
    for add in c.ops_named(gm, "tg.add"):
        if add.parent is not None:
            _hoist_bias(gm, add)


def merge_matmuls(gm: GraphModule) -> GraphModule:
    """Run the pass in place; returns ``gm``."""
    dce(gm)  # the transposes -tg-fuse-attention left behind still read the projections
    if CANONICAL_DENSE:
        _canonical_dense(gm)
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
