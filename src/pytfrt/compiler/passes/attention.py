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
    p  = softmax(x) {axis = 3 or -1}
    vt = transpose(v, [0, 2, 1, 3])
    o  = matmul(p, vt)                              # [B, H, Sq, Dv]
    y  = transpose(o, [0, 2, 1, 3])                 # [B, Sq, H, Dv]

becomes ``y = attention(q, k, v[, mask]) {scale = c (or 1 / c), has_mask}``.  ``s``, ``t``,
``x``, ``p`` and ``o`` must have no other user; the matmuls no epilogue; all of one float
dtype, the mask of rank <= 4.  The transposes of ``q``, ``k``, ``v`` are left for ``-tg-dce``
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
)

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
    scale = 1.0
    op = v.owner
    if isinstance(op, Operation) and op.name == "tg.add" and len(op.operands) == 2 \
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
    if isinstance(op, Operation) and op.name in ("tg.mul", "tg.div") and single_use(v) is not None:
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
    if not isinstance(op, Operation) or single_use(v) is None:
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
    return y_op, erase, operands, {"scale": scale, "has_mask": mask is not None}


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
            block.insert_op_before(att, y_op)
            replace(y_op, [att.results[0]])
            for op in erase[1:]:
                op.detach()
                op.erase()
    return gm


__all__ = ["fuse_attention"]
