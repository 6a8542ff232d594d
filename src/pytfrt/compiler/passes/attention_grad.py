"""``-tg-fuse-attention-grad``: scaled dot-product attention's backward, as TensorFlow writes
it, into one op.

Keras' ``MultiHeadAttention`` under ``tf.GradientTape`` keeps the heads where the projections
wrote them (``[B, S, H, D]``) and moves them to the front for each batched product; the
backward of ``o = softmax(scale * Q K^T) V`` then arrives (after ``-tg-fuse-softmax-grad``) as
four batched matmuls, the softmax's gradient, a scale and seven transposes.  ``T(x)`` below is
``x`` as ``[B, H, S, D]`` (``transpose(x) {perm = [0, 2, 1, 3]}``), ``T(x)^T`` the same with its
last two axes swapped (``perm = [0, 2, 3, 1]``); a matmul's ``transpose_a``/``transpose_b``
count as such a swap, ``transpose(s) {perm = [0, 1, 3, 2]}`` of a ``[B, H, Sq, Sk]`` value
likewise::

    dp  = matmul(T(dy), T(v)^T)
    ds  = mul(softmax_grad(p, dp) {axis = 3}, scale)     # or the softmax_grad itself (scale 1)
    dq  = transpose(matmul(ds, T(k)))     {perm = [0, 2, 1, 3]}
    dk  = transpose(matmul(ds^T, T(q)))   {perm = [0, 2, 1, 3]}
    dv  = transpose(matmul(T(dy)^T, p))   {perm = [0, 3, 1, 2]}   # or of matmul(p^T, T(dy))
                                                                  #   with [0, 2, 1, 3]
        -> dq, dk, dv = attention_grad(q, k, v, p, dy) {scale}

``attention_grad`` (``docs/graph_dialect.md``) computes exactly these products whatever ``p``
is, so the forward is not needed for it; its float32 kernel is one compiled pass per head
(:mod:`pytfrt.backends.cpu._attention_grad`) reading and writing ``[B, S, H, D]``.  A pattern
that reaches only some of the three gradients, or whose operands are defined after the first
of them, is left as it is.

Then the forward whose softmax that ``attention_grad`` reads, when it is written the same
way, becomes one op too (``p`` stays a result: the backward reads it)::

    p = softmax(mul(matmul(T(q), T(k)^T), scale)) {axis = 3}   # scale as attention_grad's
    o = transpose(matmul(p, T(v)))  {perm = [0, 2, 1, 3]}
        -> o, p = attention_probs(q, k, v) {scale}

(Inference graphs, without the backward, are ``-tg-fuse-attention``'s.)  Runs after
``-tg-fuse-softmax-grad`` and before ``-tg-fuse-elementwise``.  Not thread-safe (one pass at
a time per module).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    erase_unused,
    functions,
    new_op,
    producer,
    replace,
    scalar_const,
    single_use,
    ttype,
    users,
)

_HEADS = (0, 2, 1, 3)          # [B, S, H, D] -> [B, H, S, D]
_HEADS_T = (0, 2, 3, 1)        # [B, S, H, D] -> [B, H, D, S]
_SWAP = (0, 1, 3, 2)           # the last two axes of [B, H, ., .]
_SAME = (0, 1, 2, 3)

View = tuple[SSAValue, tuple[int, ...]]
"""A matmul's matrix operand as ``(base, perm)``: it equals ``transpose(base, perm)``."""
Form = tuple[View, View, tuple[int, ...]]
"""A product: its two operands' views and the perm of the transpose that reads its result."""


def _swap(perm: tuple[int, ...]) -> tuple[int, ...]:
    return (perm[0], perm[1], perm[3], perm[2])


def _view(v: SSAValue, swapped: bool) -> View:
    """``(base, perm)`` with the matrix operand ``v`` (its matmul flag ``swapped``) equal to
    ``transpose(base, perm)``: one rank-4 ``tg.transpose`` is looked through."""
    perm: tuple[int, ...] = _SAME
    op = v.owner
    if isinstance(op, Operation) and op.name == "tg.transpose" and ttype(v).rank == 4:
        perm = tuple(int(x) for x in attrs_of(op)["perm"])
        v = op.operands[0]
    return v, _swap(perm) if swapped else perm


def _operands(mm: Operation) -> tuple[View, View] | None:
    """The two matrix operands of a plain (no epilogue) rank-4 matmul as :func:`_view`s."""
    if mm.name != "tg.matmul" or len(mm.operands) != 2 or ttype(mm.results[0]).rank != 4:
        return None
    a = attrs_of(mm)
    if a.get("activation", "none") != "none":
        return None
    return (_view(mm.operands[0], bool(a["transpose_a"])),
            _view(mm.operands[1], bool(a["transpose_b"])))


def _out(mm: Operation, perm: tuple[int, ...]) -> Operation | None:
    """The only user of ``mm``'s result if it is ``transpose(.) {perm}``."""
    t = single_use(mm.results[0])
    if t is None or t.name != "tg.transpose" or tuple(
            int(x) for x in attrs_of(t)["perm"]) != perm:
        return None
    return t


def _product(candidates: list[Operation], forms: list[Form]
             ) -> tuple[Operation, Operation] | None:
    """``(matmul, transpose)``: the first candidate matmul whose operands are one of ``forms``'
    ``(a view, b view, result perm)`` and whose result only that transpose reads."""
    for mm in candidates:
        ops = _operands(mm)
        if ops is None:
            continue
        for a, b, perm in forms:
            if ops[0] == a and ops[1] == b:
                t = _out(mm, perm)
                if t is not None:
                    return mm, t
    return None


def _readers(v: SSAValue) -> list[Operation]:
    """The matmuls reading ``v``, directly or through one transpose."""
    out: list[Operation] = []
    for u in users(v):
        if u.name == "tg.matmul":
            out.append(u)
        elif u.name == "tg.transpose":
            out.extend(w for w in users(u.results[0]) if w.name == "tg.matmul")
    return out


def _fuse(gm: GraphModule, g: Operation) -> Operation | None:
    """Rewrite the pattern around ``g = softmax_grad(p, dp)``; the ``attention_grad`` made (or
    ``None``: no match)."""
    p, dp = g.operands
    if ttype(p).rank != 4 or int(attrs_of(g)["axis"]) % 4 != 3 or ttype(dp) != ttype(p):
        return None
    m1 = dp.owner
    if not isinstance(m1, Operation) or single_use(dp) is not g:
        return None
    ops = _operands(m1)
    if ops is None or ops[0][1] != _HEADS or ops[1][1] != _HEADS_T:
        return None
    dy, v = ops[0][0], ops[1][0]
    ds: SSAValue = g.results[0]
    scale, smul = 1.0, None
    user = single_use(ds)
    if user is not None and user.name == "tg.mul":
        other = user.operands[1] if user.operands[0] is ds else user.operands[0]
        c = scalar_const(gm, other)
        if c is not None and ttype(user.results[0]) == ttype(ds):
            scale, ds, smul = c, user.results[0], user
    readers = _readers(ds)
    k_form: list[Form] = [((ds, _SAME), (k, _HEADS), _HEADS) for k in _bases(readers, 1, _HEADS)]
    k_form += [((k, _HEADS_T), (ds, _SWAP), (0, 3, 1, 2)) for k in _bases(readers, 0, _HEADS_T)]
    found_q = _product(readers, k_form)
    q_form: list[Form] = [((ds, _SWAP), (q, _HEADS), _HEADS) for q in _bases(readers, 1, _HEADS)]
    q_form += [((q, _HEADS_T), (ds, _SAME), (0, 3, 1, 2))
               for q in _bases(readers, 0, _HEADS_T)]
    found_k = _product(readers, q_form)
    pr = _readers(p)
    found_v = _product(pr, [((dy, _HEADS_T), (p, _SAME), (0, 3, 1, 2)),
                            ((p, _SWAP), (dy, _HEADS), _HEADS)])
    if found_q is None or found_k is None or found_v is None:
        return None
    (mq, tq), (mk, tk), (mv, tv) = found_q, found_k, found_v
    k = _other(mq, ds)
    q = _other(mk, ds)
    block = g.parent_block()
    if block is None or k is None or q is None:
        return None
    order = {op: i for i, op in enumerate(block.ops)}
    first = min((tq, tk, tv), key=lambda op: order[op])
    for x in (q, k, v, p, dy):
        owner = x.owner
        if isinstance(owner, Operation) and (owner not in order or order[owner] >= order[first]):
            return None
    try:
        fused = new_op(gm, "attention_grad", [q, k, v, p, dy], {"scale": scale}, g.location)
    except Exception:  # noqa: BLE001 - operands the op does not take: leave the pattern
        return None
    if [r.type for r in fused.results] != [t.results[0].type for t in (tq, tk, tv)]:
        fused.erase()
        return None
    block.insert_op_before(fused, first)
    for t, r in zip((tq, tk, tv), fused.results, strict=True):
        replace(t, [r])
    dead = [mq, mk, mv, *_transposes(mq, mk, mv), *([smul] if smul else []), g, m1,
            *_transposes(m1)]
    _erase(dead)
    return fused


def _bases(readers: list[Operation], index: int, perm: tuple[int, ...]) -> list[SSAValue]:
    """The values that the readers' operand ``index`` views with ``perm``."""
    out: list[SSAValue] = []
    for mm in readers:
        ops = _operands(mm)
        if ops is not None and ops[index][1] == perm and ops[index][0] not in out:
            out.append(ops[index][0])
    return out


def _other(mm: Operation, ds: SSAValue) -> SSAValue | None:
    """The base of ``mm``'s operand that is not a view of ``ds``."""
    ops = _operands(mm)
    if ops is None:
        return None
    return ops[1][0] if ops[0][0] is ds else ops[0][0]


def _erase(ops: list[Operation]) -> None:
    """Erase the ops of ``ops`` (consumers listed before producers) nothing reads any more;
    an op listed twice is taken at its last place (after all its listed readers)."""
    erase_unused(list(reversed(dict.fromkeys(reversed(ops)))))


def _transposes(*mms: Operation) -> list[Operation]:
    """The transposes feeding the matmuls ``mms`` (candidates for erasing)."""
    return [x.owner for mm in mms for x in mm.operands
            if isinstance(x.owner, Operation) and x.owner.name == "tg.transpose"]


def _fuse_forward(gm: GraphModule, grad: Operation) -> bool:
    """Rewrite the forward whose softmax ``grad = attention_grad(q, k, v, p, dy)`` reads into
    ``attention_probs``; whether it matched."""
    q, k, v, p, _ = grad.operands
    sm = p.owner
    if (not isinstance(sm, Operation) or sm.name != "tg.softmax"
            or int(attrs_of(sm)["axis"]) % 4 != 3):
        return False
    scale = float(attrs_of(grad)["scale"])
    x = sm.operands[0]
    smul = producer(x, "tg.mul")
    if single_use(x) is not sm:
        return False
    if smul is not None:
        a, b = smul.operands
        s_val, c = (a, scalar_const(gm, b)) if ttype(a) == ttype(x) else (b, scalar_const(gm, a))
        if c is None or abs(c - scale) > 1e-7 * abs(scale) or ttype(s_val) != ttype(x):
            return False
        x = s_val
    elif scale != 1.0:
        return False
    mm = x.owner
    if not isinstance(mm, Operation) or single_use(x) is not (smul or sm):
        return False
    ops = _operands(mm)
    if ops is None or ops[0] != (q, _HEADS) or ops[1] != (k, _HEADS_T):
        return False
    found = _product(_readers(p), [((p, _SAME), (v, _HEADS), _HEADS)])
    if found is None:
        return False
    mo, to = found
    block = sm.parent_block()
    if block is None:
        return False
    order = {op: i for i, op in enumerate(block.ops)}
    first = min([to, *users(p)], key=lambda op: order.get(op, -1))
    for val in (q, k, v):
        owner = val.owner
        if isinstance(owner, Operation) and (owner not in order or order[owner] >= order[first]):
            return False
    try:
        fused = new_op(gm, "attention_probs", [q, k, v], {"scale": scale}, sm.location)
    except Exception:  # noqa: BLE001 - operands the op does not take: leave the pattern
        return False
    if [r.type for r in fused.results] != [to.results[0].type, p.type]:
        fused.erase()
        return False
    block.insert_op_before(fused, first)
    replace(to, [fused.results[0]])
    p.replace_all_uses_with(fused.results[1])
    dead = [mo, *_transposes(mo), sm, *([smul] if smul else []), mm, *_transposes(mm)]
    _erase(dead)
    return True


def fuse_attention_grad(gm: GraphModule) -> GraphModule:
    """Run ``-tg-fuse-attention-grad`` in place; returns ``gm``."""
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.name == "tg.softmax_grad" and op.parent is not None:
                grad = _fuse(gm, op)
                if grad is not None:
                    _fuse_forward(gm, grad)
    return gm


__all__ = ["fuse_attention_grad"]
