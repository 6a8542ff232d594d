"""``-tg-flatten-weight-grads``: a dense layer's weight gradient as one 2-D product.

A ``Dense`` (or ``EinsumDense``) layer applied to a ``[batch, seq, in]`` activation is a
batched product with a 2-D weight; TensorFlow's gradient of its weight is the batched
``matmul(x, dy, adjoint_a)`` -- ``batch`` products of ``[in, seq] x [seq, out]`` -- summed
over the batch.  That is the one product of the flattened rows::

    p = matmul(x[B, M, K], dy[B, M, N]) {transpose_a}    # [B, K, N]
    g = reduce_sum(p) {axes = [0], keepdims = false}      # [K, N]
        -> g = matmul(reshape(x) {[-1, K]}, reshape(dy) {[-1, N]}) {transpose_a}

one GEMM of ``B * M`` rows instead of ``B`` small ones and a reduction (a Transformer block's
train step has four: the attention projections).  Only for ``matmul`` ops without epilogue
whose only user is that ``reduce_sum``, rank-3 operands with the same static ``M`` and batch
dims that are the same size or both dynamic.  Two dynamic batch dims are equal in every graph
this pattern comes from (``dy`` has the shape of ``x @ w``); were they not, the flattened
product's rows differ and the matmul kernel raises its shape error rather than returning
anything.  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from xdsl.ir import Operation

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import attrs_of, functions, new_op, replace, single_use, ttype

_PLAIN = {"transpose_a": True, "transpose_b": False}


def _flat(op: Operation) -> bool:
    """Whether the matmul ``op`` fits the pattern (its reduce checked by the caller)."""
    if len(op.operands) != 2:
        return False
    a = attrs_of(op)
    if any(a[k] != v for k, v in _PLAIN.items()) or a.get("activation", "none") != "none":
        return False
    xs, ys = (ttype(v).shape for v in op.operands)
    if xs is None or ys is None or len(xs) != 3 or len(ys) != 3:
        return False
    if None in (xs[1], xs[2], ys[1], ys[2]) or xs[1] != ys[1]:
        return False
    return xs[0] == ys[0]  # both the same size, or both dynamic (None)


def flatten_weight_grads(gm: GraphModule) -> GraphModule:
    """Run ``-tg-flatten-weight-grads`` in place; returns ``gm``."""
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.name != "tg.matmul" or not _flat(op):
                continue
            red = single_use(op.results[0])
            if red is None or red.name != "tg.reduce_sum" or len(red.operands) != 1:
                continue
            ra = attrs_of(red)
            if [int(x) % 3 for x in ra["axes"]] != [0] or ra["keepdims"]:
                continue
            x, dy = op.operands
            k, n = ttype(x).shape[2], ttype(dy).shape[2]  # type: ignore[index]
            block = red.parent_block()
            assert block is not None
            rows_x = new_op(gm, "reshape", [x], {"shape": [-1, k]}, op.location)
            rows_dy = new_op(gm, "reshape", [dy], {"shape": [-1, n]}, op.location)
            prod = new_op(gm, "matmul", [rows_x.results[0], rows_dy.results[0]],
                          {"transpose_a": True}, op.location)
            if prod.results[0].type != red.results[0].type:  # e.g. a wider result dtype
                for new in (prod, rows_dy, rows_x):
                    new.erase()
                continue
            for new in (rows_x, rows_dy, prod):
                block.insert_op_before(new, red)
            replace(red, list(prod.results))
            op.detach()
            op.erase()
    return gm


__all__ = ["flatten_weight_grads"]
