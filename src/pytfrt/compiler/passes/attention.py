"""``-tg-fuse-attention``: scaled dot-product attention into one ``tg.attention``.

The pattern (an exported BERT or GPT-2, per layer; before ``-tg-fuse-epilogue`` and
``-tg-fuse-elementwise``)::

    qt = transpose(q, [0, 2, 1, 3])                 # q [B, Sq, H, D] -> [B, H, Sq, D]
    kt = transpose(k, [0, 2, 3, 1])                 # k [B, Sk, H, D] -> [B, H, D, Sk]
        -- or transpose(k, [0, 2, 1, 3]) read by the matmul with transpose_b
    s  = matmul(qt, kt)                             # [B, H, Sq, Sk]
    t  = mul(s, c)                                  # c a scalar constant (either order),
        -- or div(s, c), or no scale at all
    x  = add(t, mask)                               # optional, either order
        -- or select(mask, t, c): a boolean mask, c a scalar constant (Keras' masked softmax)
    p  = softmax(x) {axis = 3 or -1}
    vt = transpose(v, [0, 2, 1, 3])
    o  = matmul(p, vt)                              # [B, H, Sq, Dv]
    y  = transpose(o, [0, 2, 1, 3])                 # [B, Sq, H, Dv]

becomes ``y = attention(q, k, v[, mask]) {scale = c (or 1 / c), has_mask, select, fill}``.
``s``, ``t``, ``x``, ``p`` and ``o`` must have no other user -- but ``tg.shape`` of the
scores (Keras broadcasts its mask to them), which becomes the same shape assembled from ``q``'s
and ``k``'s --; the matmuls no epilogue; all of one float dtype, the mask of rank <= 4.
The transposes of ``q``, ``k``, ``v`` are left for ``-tg-dce``
(another user keeps them).  The op's kernel (:mod:`pytfrt.backends.cpu.attention`) reads the
heads where they lie: no transposed copies, no ``[B, H, Sq, Sk]`` scores between kernels.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    functions,
    new_op,
    replace,
    single_use,
    ttype,
    users,
)

SELECT_MASKS = True
"""Whether a ``select`` mask (Keras') is fused; ``benchmarks/keras_attention.py`` switches it
off for its "before" (the masked attention unfused)."""

_Q_PERM = (0, 2, 1, 3)
_K_PERM = (0, 2, 3, 1)


def _transposed(v: SSAValue, perm: tuple[int, ...]) -> SSAValue | None:
    """``x`` when ``v = transpose(x, perm)``."""
    op = v.owner
    if not isinstance(op, Operation) or op.name != "tg.transpose":
        return None
    if tuple(int(p) for p in attrs_of(op)["perm"]) != perm:
        return None
    return op.operands[0]


def _plain_matmul(op: Operation | None) -> dict[str, Any] | None:
    """The attributes of a matmul with two operands and no epilogue, or ``None``."""
    if op is None or op.name != "tg.matmul" or len(op.operands) != 2:
        return None
    a = attrs_of(op)
    if a["transpose_a"] or a["activation"] != "none" or tuple(a["epilogue_operands"]) != (0, 0):
        return None
    return a


def _scalar(gm: GraphModule, v: SSAValue) -> float | None:
    c = const_value(gm, v)
    if c is None or c.size != 1 or c.dtype.kind != "f":
        return None
    return float(c.reshape(-1)[0])


def _scale(gm: GraphModule, op: Operation, s: SSAValue) -> float | None:
    """The factor ``op`` multiplies ``s`` by (``mul`` by / ``div`` by a scalar constant)."""
    if op.name == "tg.mul" and len(op.operands) == 2:
        other = op.operands[1] if op.operands[0] is s else op.operands[0]
        if other is s:
            return None
        return _scalar(gm, other)
    if op.name == "tg.div" and len(op.operands) == 2 and op.operands[0] is s:
        c = _scalar(gm, op.operands[1])
        return None if c is None or c == 0.0 else 1.0 / c
    return None


def _sole_user(v: SSAValue) -> Operation | None:
    """The only user of ``v`` that is not a ``tg.shape``, or ``None``."""
    others = [u for u in users(v) if u.name != "tg.shape"]
    return others[0] if len(others) == 1 else None


def _select_mask(gm: GraphModule, op: Operation, dtype: str
                 ) -> tuple[SSAValue, SSAValue, float] | None:
    """``(mask, scores, fill)`` of ``op = select(mask, scores, fill)``: a boolean mask of rank
    <= 4 and a scalar constant ``fill``."""
    if op.name != "tg.select" or len(op.operands) != 3:
        return None
    cond, cand, other = op.operands
    mt = ttype(cond)
    fill = _scalar(gm, other)
    inner = cand.owner
    if fill is None or mt.dtype != "i1" or mt.rank is None or mt.rank > 4 \
            or ttype(cand).dtype != dtype or not isinstance(inner, Operation) \
            or inner.name not in ("tg.mul", "tg.div", "tg.matmul"):
        return None
    return cond, cand, fill


def _scores_shape(gm: GraphModule, shape_op: Operation, q: SSAValue, k: SSAValue,
                  ) -> list[Operation]:
    """Ops computing ``shape_op``'s value (the scores' shape ``[B, H, Sq, Sk]``) from ``q``
    ``[B, Sq, H, D]`` and ``k`` ``[B, Sk, H, D]``, the last one's result standing for it."""
    out_type = attrs_of(shape_op)["out_type"]
    sq = new_op(gm, "shape", [q], {"out_type": out_type}, shape_op.location)
    sk = new_op(gm, "shape", [k], {"out_type": out_type}, shape_op.location)
    parts = [new_op(gm, "slice", [src.results[0]],
                    {"starts": [i], "ends": [i + 1], "axes": [0], "steps": [1]},
                    shape_op.location)
             for src, i in ((sq, 0), (sq, 2), (sq, 1), (sk, 1))]
    cat = new_op(gm, "concat", [p.results[0] for p in parts], {"axis": 0}, shape_op.location)
    return [sq, sk, *parts, cat]


def _match(gm: GraphModule, p_op: Operation) -> tuple[Operation, list[Operation],
                                                     list[SSAValue], dict[str, Any]] | None:
    """``(final transpose, ops to erase, operands, attrs)`` of the attention whose softmax is
    ``p_op``, or ``None``."""
    xt = ttype(p_op.operands[0])
    if xt.rank != 4 or xt.dtype not in ("f32", "f64") or int(attrs_of(p_op)["axis"]) not in (3, -1):
        return None
    # backwards from the softmax: [add(mask)] <- [mul/div by c] <- matmul(qt, kt)
    chain: list[Operation] = []
    v = p_op.operands[0]
    mask: SSAValue | None = None
    fill: float | None = None
    scale = 1.0
    op = v.owner
    picked = _select_mask(gm, op, xt.dtype) if isinstance(op, Operation) and SELECT_MASKS \
        and single_use(v) is p_op else None
    if picked is not None and isinstance(op, Operation):
        mask, v, fill = picked
        chain.append(op)
        op = v.owner
    elif isinstance(op, Operation) and op.name == "tg.add" and len(op.operands) == 2 \
            and single_use(v) is p_op:
        for cand, other in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
            inner = cand.owner
            if isinstance(inner, Operation) and inner.name in ("tg.mul", "tg.div",
                                                              "tg.matmul"):
                mt = ttype(other)
                if mt.dtype == xt.dtype and mt.rank is not None and mt.rank <= 4:
                    mask, v = other, cand
                    chain.append(op)
                    break
        if mask is None:
            return None
        op = v.owner
    if isinstance(op, Operation) and op.name in ("tg.mul", "tg.div") and _sole_user(v) is not None:
        s_val = next((o for o in op.operands
                      if isinstance(o.owner, Operation) and o.owner.name == "tg.matmul"), None)
        if s_val is None:
            return None
        c = _scale(gm, op, s_val)
        if c is None:
            return None
        scale = c
        chain.append(op)
        v = s_val
        op = v.owner
    if not isinstance(op, Operation) or _sole_user(v) is None:
        return None
    s_attrs = _plain_matmul(op)
    if s_attrs is None:
        return None
    chain.append(op)
    q = _transposed(op.operands[0], _Q_PERM)
    k = _transposed(op.operands[1], _Q_PERM if s_attrs["transpose_b"] else _K_PERM)
    if q is None or k is None:
        return None
    # forwards from the softmax: matmul(p, vt) -> transpose
    o_op = single_use(p_op.results[0])
    o_attrs = _plain_matmul(o_op)
    if o_op is None or o_attrs is None or o_attrs["transpose_b"] or o_op.operands[0] \
            is not p_op.results[0]:
        return None
    val = _transposed(o_op.operands[1], _Q_PERM)
    y_op = single_use(o_op.results[0])
    if val is None or y_op is None or _transposed(y_op.results[0], _Q_PERM) is not o_op.results[0]:
        return None
    if any(ttype(x).rank != 4 or ttype(x).dtype != xt.dtype for x in (q, k, val)):
        return None
    operands = [q, k, val] + ([mask] if mask is not None else [])
    erase = [y_op, o_op, p_op, *chain]
    attrs: dict[str, Any] = {"scale": scale, "has_mask": mask is not None}
    if fill is not None:
        attrs.update(select=True, fill=fill)
    return y_op, erase, operands, attrs


def fuse_attention(gm: GraphModule) -> GraphModule:
    """Run the pass in place."""
    for f in functions(gm):
        for p_op in list(f.body.block.ops):
            if p_op.name != "tg.softmax" or p_op.parent is None:
                continue
            found = _match(gm, p_op)
            if found is None:
                continue
            y_op, erase, operands, attrs = found
            block = y_op.parent_block()
            assert block is not None
            att = new_op(gm, "attention", operands, attrs, y_op.location)
            if ttype(att.results[0]).rank != 4:  # pragma: no cover - inference says rank 4
                continue
            q, k = operands[0], operands[1]
            for op in erase[2:]:  # the scores' shape (Keras' mask), now from q and k
                for shape_op in [u for u in users(op.results[0]) if u.name == "tg.shape"]:
                    made = _scores_shape(gm, shape_op, q, k)
                    home = shape_op.parent_block()
                    assert home is not None
                    for m in made:
                        home.insert_op_before(m, shape_op)
                    replace(shape_op, [made[-1].results[0]])
            block.insert_op_before(att, y_op)
            replace(y_op, [att.results[0]])
            for op in erase[1:]:
                op.detach()
                op.erase()
    return gm


__all__ = ["fuse_attention"]
