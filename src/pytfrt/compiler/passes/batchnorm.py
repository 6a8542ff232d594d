"""``-tg-fold-batch-norm``: fold an inference batch norm into the preceding conv/matmul.

Pattern: ``batch_norm(y, scale, offset, mean, variance)`` with constant parameters, where
``y = conv2d(x, w)`` or ``matmul(x, w)`` with a constant ``w``, ``y`` has no other user, its
epilogue has no residual or activation, and the norm's axis is ``y``'s channel axis.  With
``s = scale / sqrt(variance + epsilon)`` the rewrite is::

    conv2d(x, w * s) + ((bias - mean) * s + offset)      # bias: the op's fused bias, or 0

(``s`` along the filter's output-channel axis: last for HWIO and ``matmul``'s ``[K, N]``, first
for OIHW and a transposed ``matmul`` filter).  The add is left for ``-tg-fuse-epilogue``.
Arithmetic in float64, rounded once to the weight's dtype.

The same rewrite folds a batch norm that a front end has already expanded into elementwise ops
(TF's inference ``FusedBatchNormV3`` after constant folding): ``mul(y, s)`` or
``mul(add(y, b), s)``, optionally followed by ``add(., o)``, with constants ``b``, ``s``, ``o``
that vary only along ``y``'s channel axis, becomes ``conv2d(x, w * s) + ((bias + b) * s + o)``
-- so the affine part runs inside the conv's epilogue instead of as a separate pass over the
activation.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    functions,
    make_constant,
    new_op,
    replace,
    single_use,
    ttype,
)


def _fold(gm: GraphModule, bn: Operation) -> bool:
    y = bn.operands[0]
    prod = y.owner
    if not isinstance(prod, Operation) or prod.name not in ("tg.conv2d", "tg.matmul"):
        return False
    if single_use(y) is not bn:
        return False
    pa = attrs_of(prod)
    flags = pa["epilogue_operands"]
    if flags[1] or pa["activation"] != "none":
        return False
    w = const_value(gm, prod.operands[1])
    params = [const_value(gm, v) for v in bn.operands[1:]]
    if w is None or any(p is None for p in params):
        return False
    scale, offset, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)  # type: ignore[arg-type]
    bias = np.zeros_like(scale)
    if flags[0]:
        b = const_value(gm, prod.operands[2])
        if b is None:
            return False
        bias = np.asarray(b, np.float64).reshape(-1)
    rank = ttype(y).rank
    if rank is None:
        return False
    axis = attrs_of(bn)["axis"] % rank
    s = scale / np.sqrt(var + attrs_of(bn)["epsilon"])
    if prod.name == "tg.conv2d":
        nhwc = pa["layout"] == "NHWC"
        if axis != (rank - 1 if nhwc else 1):
            return False
        w2 = w.astype(np.float64) * (s if nhwc else s[:, None, None, None])
        bias_shape = (-1,) if nhwc else (-1, 1, 1)
    else:
        if axis != rank - 1 or w.ndim != 2:
            return False
        w2 = w.astype(np.float64) * (s[:, None] if pa["transpose_b"] else s[None, :])
        bias_shape = (-1,)
    b2 = ((bias - mean) * s + offset).astype(w.dtype).reshape(bias_shape)
    block = bn.parent_block()
    assert block is not None
    wc = make_constant(gm, w2.astype(w.dtype), "bn_folded_w")
    bc = make_constant(gm, b2, "bn_folded_b")
    attrs = {k: v for k, v in pa.items() if k not in ("epilogue_operands",)}
    conv = new_op(gm, prod.name[3:], [prod.operands[0], wc.results[0]], attrs, prod.location)
    add = new_op(gm, "add", [conv.results[0], bc.results[0]], {}, bn.location)
    for new in (wc, bc, conv, add):
        block.insert_op_before(new, bn)
    replace(bn, [add.results[0]])
    prod.detach()
    prod.erase()
    return True


def _channel_vector(c: np.ndarray, rank: int, axis: int, n: int) -> np.ndarray | None:
    """``c`` as a float64 vector of length ``n`` if it varies only along ``axis`` of a rank-
    ``rank`` value (broadcasting without growing it), else ``None``."""
    if c.ndim > rank:
        return None
    full = (1,) * (rank - c.ndim) + tuple(c.shape)
    if any(d != 1 for i, d in enumerate(full) if i != axis) or full[axis] not in (1, n):
        return None
    return np.broadcast_to(np.asarray(c, np.float64).reshape(-1), (n,))


def _const_operand(gm: GraphModule, op: Operation) -> tuple[int, np.ndarray] | None:
    """(index of the non-constant operand, the constant) of a binary op with one constant."""
    for side in (0, 1):
        c = const_value(gm, op.operands[1 - side])
        if c is not None and const_value(gm, op.operands[side]) is None:
            return side, c
    return None


def _fold_scale(gm: GraphModule, mul: Operation) -> bool:
    """The expanded form: ``[add(] mul([add(] y, b [)], s) [, o)]`` (see the module doc)."""
    found = _const_operand(gm, mul)
    if found is None:
        return False
    side, scale = found
    v = mul.operands[side]
    if single_use(v) is not mul or not isinstance(v.owner, Operation):
        return False
    pre_add = None
    prod = v.owner
    pre = _const_operand(gm, prod) if prod.name == "tg.add" else None
    if pre is not None:
        pre_add = prod
        v = prod.operands[pre[0]]
        if single_use(v) is not pre_add or not isinstance(v.owner, Operation):
            return False
        prod = v.owner
    if prod.name not in ("tg.conv2d", "tg.matmul"):
        return False
    pa = attrs_of(prod)
    flags = pa["epilogue_operands"]
    w = const_value(gm, prod.operands[1])
    rank = ttype(v).rank
    if flags[1] or pa["activation"] != "none" or w is None or rank is None:
        return False
    if prod.name == "tg.conv2d":
        nhwc = pa["layout"] == "NHWC"
        axis, n = (rank - 1, w.shape[3]) if nhwc else (1, w.shape[0])
        bias_shape: tuple[int, ...] = (-1,) if nhwc else (-1, 1, 1)
    else:
        if w.ndim != 2 or rank < 1:
            return False
        axis, n, bias_shape = rank - 1, w.shape[0 if pa["transpose_b"] else 1], (-1,)
    consts = [scale] + ([pre[1]] if pre is not None else [])
    post = single_use(mul.results[0])
    post_c = _const_operand(gm, post) if post is not None and post.name == "tg.add" else None
    if post_c is not None and post is not None and post.operands[post_c[0]] is mul.results[0]:
        consts.append(post_c[1])
    else:
        post = None
    if any(c.dtype != w.dtype for c in consts):
        return False
    vecs = [_channel_vector(c, rank, axis, n) for c in consts]
    if any(x is None for x in vecs):
        return False
    s = vecs[0]
    assert s is not None
    bias = np.zeros(n)
    if flags[0]:
        b = const_value(gm, prod.operands[2])
        if b is None or b.size != n:
            return False
        bias = np.asarray(b, np.float64).reshape(-1)
    if pre is not None:
        bias = bias + vecs[1]  # type: ignore[operator]
    b2 = bias * s + (vecs[-1] if post is not None else 0.0)  # type: ignore[operator]
    if prod.name == "tg.conv2d":
        w2 = w.astype(np.float64) * (s if nhwc else s[:, None, None, None])
    else:
        w2 = w.astype(np.float64) * (s[:, None] if pa["transpose_b"] else s[None, :])
    last = post if post is not None else mul
    block = last.parent_block()
    assert block is not None
    wc = make_constant(gm, w2.astype(w.dtype), "scale_folded_w")
    bc = make_constant(gm, b2.astype(w.dtype).reshape(bias_shape), "scale_folded_b")
    attrs = {k: val for k, val in pa.items() if k != "epilogue_operands"}
    op = new_op(gm, prod.name[3:], [prod.operands[0], wc.results[0]], attrs, prod.location)
    add = new_op(gm, "add", [op.results[0], bc.results[0]], {}, last.location)
    for new in (wc, bc, op, add):
        block.insert_op_before(new, last)
    replace(last, [add.results[0]])
    for dead in (mul, pre_add, prod):
        if dead is not None and dead is not last:
            dead.detach()
            dead.erase()
    return True


def fold_batch_norm(gm: GraphModule) -> GraphModule:
    """Run the pass in place (the old weights stay until ``-tg-dce``)."""
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.name == "tg.batch_norm":
                _fold(gm, op)
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.name == "tg.mul" and op.parent_block() is not None:
                _fold_scale(gm, op)
    return gm
