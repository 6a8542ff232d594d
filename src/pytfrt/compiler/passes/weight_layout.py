"""``-tg-matmul-weight-layout``: store a dense layer's wide constant weight transposed.

The CPU matmul splits a product with few rows (a Transformer at batch 1) into column tiles
(``gemm.tiles_2d``), so each tile reads a block of columns of the ``(k, n)`` weight: ``k``
pieces of ``tile * 4`` bytes, one per row.  When the row stride ``n * 4`` is a multiple of 4 KB
(GPT-2's and BERT's MLP weight, ``768 x 3072``: 12 KB), those pieces alias in the caches and
``dnnl_sgemm`` packs the tile ~20-30% slower than a contiguous one (docs/kernels.md).  Stored
transposed, ``(n, k)``, a column tile is a contiguous block of rows.  Pattern::

    w = constant (k, n) float32          # one user; n * 4 % 4096 == 0, n >= MIN_COLUMNS
    matmul(x, w, ...) {transpose_b = false}
        -> matmul(x, constant w.T (n, k), ...) {transpose_b = true}

The weight is replaced, not copied (the old constant is erased with its weight), so the model
holds the same bytes.  Other weights, shared ones and other dtypes are left alone.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    make_constant,
    new_op,
    ops_named,
    replace,
    single_use,
)

MIN_COLUMNS = 1024
"""Narrowest weight (columns) the pass transposes: narrower ones are split into few tiles
whose pieces are short anyway (GPT-2's ``768 x 768`` measured no gain)."""
_ALIAS_BYTES = 4096


def _rewrite(gm: GraphModule, mm: Operation) -> bool:
    a = attrs_of(mm)
    if a["transpose_b"] or len(mm.operands) < 2:
        return False
    wv = mm.operands[1]
    cst = wv.owner
    if not isinstance(cst, Operation) or single_use(wv) is not mm:
        return False
    w = const_value(gm, wv)
    if w is None or w.ndim != 2 or w.dtype != np.float32:
        return False
    k, n = w.shape
    if n < MIN_COLUMNS or (n * w.itemsize) % _ALIAS_BYTES or k < 2:
        return False
    wt = make_constant(gm, np.ascontiguousarray(w.T), "transposed_w")
    new = new_op(gm, "matmul", [mm.operands[0], wt.results[0], *mm.operands[2:]],
                 {**a, "transpose_b": True}, mm.location)
    block = mm.parent_block()
    assert block is not None
    block.insert_op_before(wt, mm)
    block.insert_op_before(new, mm)
    replace(mm, list(new.results))
    old = cst.attributes.get("weight")
    cst.detach()
    cst.erase()
    name = getattr(old, "data", None)
    if isinstance(name, str):
        gm.weights.pop(name, None)
    return True


def matmul_weight_layout(gm: GraphModule) -> GraphModule:
    """Run the pass in place; returns ``gm``."""
    for op in ops_named(gm, "tg.matmul"):
        _rewrite(gm, op)
    return gm


__all__ = ["matmul_weight_layout"]
