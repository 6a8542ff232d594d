"""``-tg-fuse-add-layer-norm``: a residual add and the layer norm reading it -> one
``tg.add_layer_norm`` with both results.

A pre-norm Transformer block (GPT-2) keeps the running sum ``h = h + f(ln(h))``: each residual
``add`` feeds the next block's ``layer_norm`` and the next residual ``add``.  Run as two
kernels that is two passes over the activations and two kernel calls; fused, the kernel
writes each row's sum and normalises it while the row is in cache
(:func:`pytfrt.backends.cpu.norm.add_layer_norm`)::

    %s = "tg.add"(%a, %b)
    %y = "tg.layer_norm"(%s, %g, %bt) {axis = 2, epsilon = 1e-05}
      -> %s, %y = "tg.add_layer_norm"(%a, %b, %g, %bt) {axis = 2, epsilon = 1e-05}

Matched: a float ``tg.add`` whose result is the ``x`` of a ``tg.layer_norm`` (the sum may
have other users: they read the fused op's first result).  The fused op takes the layer
norm's place, so it is skipped when another user of the sum comes before the layer norm.
Runs after ``-tg-fuse-epilogue`` (an add that a GEMM's epilogue can take stays there) and
before ``-tg-fuse-elementwise``.  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from xdsl.ir import Operation

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import attrs_of, functions, new_op, producer, ttype, users
from pytfrt.compiler.types import FLOAT_DTYPES


def _fuse(gm: GraphModule, ln: Operation, index: dict[Operation, int]) -> bool:
    add = producer(ln.operands[0], "tg.add")
    if add is None:
        return False
    s = add.results[0]
    if ttype(s).dtype not in FLOAT_DTYPES or any(ttype(v).dtype != ttype(s).dtype
                                                 for v in add.operands):
        return False
    if any(u is not ln and index.get(u, -1) < index[ln] for u in users(s)):
        return False
    attrs = attrs_of(ln)
    fused = new_op(gm, "add_layer_norm", [*add.operands, *ln.operands[1:]],
                   {k: attrs[k] for k in ("axis", "epsilon", "has_gamma", "has_beta")},
                   loc=ln.location)
    if [r.type for r in fused.results] != [s.type, ln.results[0].type]:
        return False  # the operands' types say less than the ops' results did: left alone
    block = ln.parent_block()
    assert block is not None
    block.insert_op_before(fused, ln)
    ln.results[0].replace_all_uses_with(fused.results[1])
    s.replace_all_uses_with(fused.results[0])
    ln.detach()
    ln.erase()
    add.detach()
    add.erase()
    return True


def fuse_add_layer_norm(gm: GraphModule) -> GraphModule:
    """Run the pass in place (every function)."""
    for f in functions(gm):
        ops = list(f.body.block.ops)
        index = {op: i for i, op in enumerate(ops)}
        for op in ops:
            if op.name == "tg.layer_norm":
                _fuse(gm, op, index)
    return gm
