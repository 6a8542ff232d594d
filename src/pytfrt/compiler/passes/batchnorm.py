"""``-tg-fold-batch-norm``: fold an inference batch norm into the preceding conv/matmul.

Pattern: ``batch_norm(y, scale, offset, mean, variance)`` with constant parameters, where
``y = conv2d(x, w)`` or ``matmul(x, w)`` with a constant ``w``, ``y`` has no other user, its
epilogue has no residual or activation, and the norm's axis is ``y``'s channel axis.  With
``s = scale / sqrt(variance + epsilon)`` the rewrite is::

    conv2d(x, w * s) + ((bias - mean) * s + offset)      # bias: the op's fused bias, or 0

(``s`` along the filter's output-channel axis: last for HWIO and ``matmul``'s ``[K, N]``, first
for OIHW and a transposed ``matmul`` filter).  The add is left for ``-tg-fuse-epilogue``.
Arithmetic in float64, rounded once to the weight's dtype.
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


def fold_batch_norm(gm: GraphModule) -> GraphModule:
    """Run the pass in place (the old weights stay until ``-tg-dce``)."""
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.name == "tg.batch_norm":
                _fold(gm, op)
    return gm
