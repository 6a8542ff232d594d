"""``-tg-fuse-layer-norm``: a layer norm written out in elementwise ops and reductions -> one
``tg.layer_norm``.

Exports before ONNX opset 17 (torch's default for years, TensorFlow's converters) have no
``LayerNormalization``: each norm is ``ReduceMean``, ``Sub``, ``Pow``, ``ReduceMean``, ``Add``,
``Sqrt``, ``Div`` and the affine ``Mul``/``Add``, seven to nine kernels and as many passes over
the activations.  Matched (``axes`` the trailing dims ``k .. rank-1``, ``keepdims``)::

    %m = reduce_mean(%x) {axes, keepdims = true}
    %d = sub(%x, %m)
    %q = pow(%d, 2.0)  |  mul(%d, %d)
    %v = reduce_mean(%q) {axes, keepdims = true}
    %e = add(%v, eps)                          (eps a scalar constant, either order)
    %n = div(%d, sqrt(%e))
    [%n = mul(%n, gamma)]  [%n = add(%n, beta)]  (constants of the normalised dims, either order)
      -> layer_norm(%x, gamma?, beta?) {axis = k, epsilon = eps}

The inner values must have no users outside the pattern (``%d`` is read by the square and the
division only).  A ``gamma`` or ``beta`` is taken only when it is a constant that broadcasts to
the normalised dims without widening the result.  Runs after ``-tg-cse`` (which merges an
exporter's repeated constants) and before ``-tg-fuse-epilogue`` and
``-tg-fuse-add-layer-norm``.  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    erase_unused,
    functions,
    new_op,
    other_operand,
    producer,
    scalar_const,
    single_use,
    ttype,
    users,
)
from pytfrt.compiler.types import FLOAT_DTYPES


def _trailing_mean(op: Operation | None) -> int | None:
    """The first normalised axis of a ``reduce_mean`` over trailing axes with keepdims."""
    if op is None or op.name != "tg.reduce_mean":
        return None
    rank = ttype(op.operands[0]).rank
    a = attrs_of(op)
    if rank is None or not a.get("keepdims"):
        return None
    axes = sorted(int(x) % rank for x in a["axes"]) if rank else []
    if not axes or axes != list(range(axes[0], rank)):
        return None
    return axes[0]


def _param(gm: GraphModule, v: SSAValue, tail: tuple[int | None, ...]) -> bool:
    """Whether ``v`` is a constant that broadcasts to ``tail`` without widening it."""
    c = const_value(gm, v)
    if c is None or c.ndim > len(tail):
        return False
    dims = tail[len(tail) - c.ndim:]
    return all(s == 1 or s == t for s, t in zip(c.shape, dims, strict=True)) and all(
        t is not None for t in tail)


def _match(gm: GraphModule, div: Operation) -> tuple[list[Operation], int, float] | None:
    """The ops of a written-out norm ending at ``div`` (``[mean, sub, square, var, add, sqrt,
    div]``), its first normalised axis and its epsilon, or ``None``."""
    d, s = div.operands
    sqrt = producer(s, "tg.sqrt")
    sub = producer(d, "tg.sub")
    if sqrt is None or sub is None or single_use(s) is not div:
        return None
    x, m = sub.operands
    mean = m.owner if isinstance(m.owner, Operation) else None
    k = _trailing_mean(mean)
    if k is None or mean is None or mean.operands[0] is not x or single_use(m) is not sub:
        return None
    add = producer(sqrt.operands[0], "tg.add")
    if add is None or single_use(add.results[0]) is not sqrt:
        return None
    v = next((o for o in add.operands if _trailing_mean(producer(o, "tg.reduce_mean")) == k),
             None)
    if v is None or single_use(v) is not add:
        return None
    eps = scalar_const(gm, other_operand(add, v) or v)
    var = v.owner
    assert isinstance(var, Operation)
    q = var.operands[0]
    sq = q.owner
    if eps is None or eps < 0 or not isinstance(sq, Operation) or single_use(q) is not var:
        return None
    if sq.name == "tg.pow":
        if sq.operands[0] is not d or scalar_const(gm, sq.operands[1]) != 2.0:
            return None
    elif sq.name != "tg.mul" or sq.operands[0] is not d or sq.operands[1] is not d:
        return None
    readers = users(d)
    if len(readers) != (3 if sq.name == "tg.mul" else 2) or any(
            u is not sq and u is not div for u in readers):
        return None
    if ttype(x).dtype not in FLOAT_DTYPES or ttype(div.results[0]) != ttype(x):
        return None
    return [mean, sub, sq, var, add, sqrt, div], k, eps


def _fuse(gm: GraphModule, div: Operation) -> bool:
    matched = _match(gm, div)
    if matched is None:
        return False
    ops, k, eps = matched
    x = ops[1].operands[0]
    shape = ttype(x).shape
    assert shape is not None
    tail = shape[k:]
    last = div
    affine: dict[str, SSAValue] = {}  # gamma (a multiply), then beta (an add)
    for name in ("tg.mul", "tg.add"):
        nxt = single_use(last.results[0])
        p = None if nxt is None or nxt.name != name else other_operand(nxt, last.results[0])
        if nxt is not None and p is not None and _param(gm, p, tail) and ttype(
                nxt.results[0]) == ttype(x):
            last, affine[name] = nxt, p
            ops.append(nxt)
    gamma, beta = affine.get("tg.mul"), affine.get("tg.add")
    fused = new_op(gm, "layer_norm", [x, *(p for p in (gamma, beta) if p is not None)],
                   {"axis": k, "epsilon": eps, "has_gamma": gamma is not None,
                    "has_beta": beta is not None}, loc=last.location)
    if fused.results[0].type != last.results[0].type:
        return False
    block = last.parent_block()
    assert block is not None
    block.insert_op_before(fused, last)
    last.results[0].replace_all_uses_with(fused.results[0])
    erase_unused(ops[::-1])
    return True


def fuse_layer_norm(gm: GraphModule) -> GraphModule:
    """Run the pass in place (every function)."""
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.name == "tg.div" and op.parent_block() is not None:
                _fuse(gm, op)
    return gm
