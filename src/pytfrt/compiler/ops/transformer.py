"""Catalogue family ``transformer``: the fused attention op and the packed projection's views.

``attention(q, k, v, mask?) {scale, has_mask}`` -- ``softmax(scale * q k^T + mask) v`` per
(batch, head), with ``q [B, Sq, H, D]``, ``k [B, Sk, H, D]``, ``v [B, Sk, H, Dv]`` and the
result ``[B, Sq, H, Dv]`` in the layout a Transformer's projections produce (sequence before
heads: no transposes), and a ``mask`` broadcasting to ``[B, H, Sq, Sk]``: additive (same
float dtype), or with ``select`` a boolean one that keeps the scores where it is true and puts
``fill`` elsewhere (Keras' masked softmax; a fully masked row averages every value).
Made by ``-tg-fuse-attention`` from an exported BERT's or GPT-2's
transposes, batched products, scale, mask and softmax; compute function
:mod:`pytfrt.backends.cpu.attention`.  Runs after differentiation (inference pipelines), so it
carries no gradient rule.

``columns(x) {start, size}`` -- ``x[..., start:start + size]`` as a strided view (no copy): one
projection's columns of the packed query/key/value product ``-tg-merge-matmuls`` makes, read
by ``attention`` through a ``reshape`` (the kernel takes strided heads).
"""

from __future__ import annotations

from pytfrt.compiler.ops.base import AttrSpec, InferContext, define
from pytfrt.compiler.types import FLOAT_DTYPES, TType


def _dims_agree(a: int | None, b: int | None) -> bool:
    return a is None or b is None or a == b


def _attention(ctx: InferContext) -> list[TType]:
    n = 4 if ctx.attrs["has_mask"] else 3
    if len(ctx.inputs) != n:
        raise ctx.error(f"takes {n} operands with has_mask = {ctx.attrs['has_mask']}, got "
                        f"{len(ctx.inputs)}")
    q, k, v = ctx.inputs[:3]
    if q.dtype not in FLOAT_DTYPES or any(t.dtype != q.dtype for t in ctx.inputs[:3]):
        raise ctx.error(f"q, k and v must share one float dtype, got "
                        f"{', '.join(str(t) for t in ctx.inputs[:3])}")
    if n == 4:
        want = "i1" if ctx.attrs["select"] else q.dtype
        if ctx.inputs[3].dtype != want:
            raise ctx.error(f"the mask must be {want} (select = {ctx.attrs['select']}), got "
                            f"{ctx.inputs[3]}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.shape is not None and len(t.shape) != 4:
            raise ctx.error(f"{name} must be rank 4 [batch, seq, heads, depth], got {t}")
    if n == 4 and ctx.inputs[3].shape is not None and len(ctx.inputs[3].shape) > 4:
        raise ctx.error(f"the mask must have rank <= 4, got {ctx.inputs[3]}")
    qs = q.shape or (None,) * 4
    ks = k.shape or (None,) * 4
    vs = v.shape or (None,) * 4
    checks = ((qs[0], ks[0]), (qs[0], vs[0]), (ks[1], vs[1]), (qs[2], ks[2]), (qs[2], vs[2]),
              (qs[3], ks[3]))
    if not all(_dims_agree(a, b) for a, b in checks):
        raise ctx.error(f"q {q}, k {k} and v {v} do not agree: expected k [B, Sk, H, D] and "
                        "v [B, Sk, H, Dv] for q [B, Sq, H, D]")
    batch = qs[0] if qs[0] is not None else ks[0] if ks[0] is not None else vs[0]
    heads = qs[2] if qs[2] is not None else ks[2] if ks[2] is not None else vs[2]
    return [TType(q.dtype, (batch, qs[1], heads, vs[3]))]


define("attention", ("q", "k", "v", "mask?"), _attention,
       {"scale": AttrSpec("float", 1.0), "has_mask": AttrSpec("bool", False),
        "select": AttrSpec("bool", False), "fill": AttrSpec("float", 0.0)},
       family="transformer",
       doc="softmax(scale * q k^T + mask) v per (batch, head) (with select: the scores where the"
           " boolean mask is true, fill elsewhere); q [B, Sq, H, D], k [B, Sk, H, D],"
           " v [B, Sk, H, Dv] -> [B, Sq, H, Dv] (made by -tg-fuse-attention)",
       no_grad="made by -tg-fuse-attention, which runs after differentiation")


def _columns(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    start, size = int(ctx.attrs["start"]), int(ctx.attrs["size"])
    if x.shape is None or not x.shape:
        raise ctx.error(f"needs an operand of known rank >= 1, got {x}")
    last = x.shape[-1]
    if start < 0 or size < 0 or (last is not None and start + size > last):
        raise ctx.error(f"columns [{start}, {start + size}) do not fit the last axis of {x}")
    return [TType(x.dtype, (*x.shape[:-1], size))]


define("columns", ("x",), _columns,
       {"start": AttrSpec("int"), "size": AttrSpec("int")},
       family="transformer",
       doc="x[..., start:start + size] as a strided view, no copy (made by -tg-merge-matmuls)",
       no_grad="made by -tg-merge-matmuls, which runs after differentiation")
