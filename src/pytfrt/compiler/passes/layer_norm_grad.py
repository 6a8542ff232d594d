"""``-tg-fuse-layer-norm-grad``: a last-axis layer norm's gradient, as TensorFlow writes it,
into one op.

Keras' ``LayerNormalization`` under ``tf.GradientTape`` arrives (after ``-tg-fold-reshapes``)
as its forward pieces -- ``mean, var = moments(x)`` over the last axis, ``r = rsqrt(var +
eps)``, ``s = r * gamma``, ``y = x * s + (beta - mean * s)`` -- and, for an incoming gradient
``dy``, about twenty ops: five ``reduce_sum``, two ``broadcast_to`` of per-row values and the
products between them.  The pattern matched (every ``mul``/``add`` in either operand order,
``bcast(v)`` a ``broadcast_to(v, shape)`` or ``v`` itself, ``C`` the constant row width,
``Σrow`` a ``reduce_sum`` over the last axis with ``keepdims``, ``Σlead`` one over all the
other axes)::

    p  = mul(dy, s)
    gs = add(mul(x, dy), mul(neg(mean), dy))
    dx = add(add(p, bcast(div(neg(Σrow(p)), C))),
             mul(bcast(mul(2, div(mul(mul(Σrow(mul(gs, gamma)), mul(square(r), r)), -0.5), C))),
                 sub(x, mean)))
    dgamma = Σlead(mul(r, gs))       # then, if so written, reshape to [C]
    dbeta  = Σlead(dy)               # idem
        -> dx, dgamma, dbeta = layer_norm_grad(dy, x, gamma) {axis = rank - 1, epsilon}

``layer_norm_grad`` (``docs/graph_dialect.md``) is one pass over the rows
(:mod:`pytfrt.backends.cpu.layer_norm_rows`).  Anything else -- another order of the sums, a
norm over several axes, a gradient that reaches only some of the three results -- is left as
it is.  Runs after ``-tg-fold-reshapes`` (which removes the reshapes between these ops) and
before ``-tg-fuse-elementwise``.  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    functions,
    is_tg,
    make_constant,
    new_op,
    single_use,
    ttype,
)

Env = dict[str, Any]
Pattern = Callable[[SSAValue, Env], Env | None]


class _Ctx:
    """What the patterns read besides the values: the module (constants) and the row rank."""

    def __init__(self, gm: GraphModule) -> None:
        self.gm = gm


def _bind(name: str) -> Pattern:
    """Binds ``name`` to the value (or checks it is the value bound before)."""
    def match(v: SSAValue, env: Env) -> Env | None:
        if name in env:
            return env if env[name] is v else None
        return {**env, name: v}
    return match


def _op(name: str, *subs: Pattern, comm: bool = False,
        check: Callable[[Operation, Env], bool] | None = None, index: int = 0,
        tag: str | None = None) -> Pattern:
    """Matches result ``index`` of a ``tg.<name>`` whose operands match ``subs`` (in either
    order for a two-operand ``comm`` op); ``tag`` binds the op itself."""
    def match(v: SSAValue, env: Env) -> Env | None:
        op = v.owner
        if (not isinstance(op, Operation) or op.name != "tg." + name
                or len(op.operands) != len(subs) or op.results[index] is not v):
            return None
        orders = [list(op.operands)]
        if comm:
            orders.append(list(reversed(op.operands)))
        for operands in orders:
            e: Env | None = env
            for sub, operand in zip(subs, operands, strict=True):
                e = sub(operand, e) if e is not None else None
            if e is not None and (check is None or check(op, e)):
                e = dict(e)
                e.setdefault("_ops", [])
                e["_ops"] = [*e["_ops"], op]
                if tag is not None:
                    e[tag] = op
                return e
        return None
    return match


def _const(value: float, ctx: _Ctx) -> Pattern:
    """A scalar constant of ``value`` (``value`` None: the row width bound as ``C``)."""
    def match(v: SSAValue, env: Env) -> Env | None:
        arr = const_value(ctx.gm, v)
        if arr is None or arr.size != 1:
            return None
        want = value if value is not None else env.get("C")
        return env if want is not None and float(arr.reshape(())) == want else None
    return match


def _either(*alts: Pattern) -> Pattern:
    def match(v: SSAValue, env: Env) -> Env | None:
        for alt in alts:
            e = alt(v, env)
            if e is not None:
                return e
        return None
    return match


def _any(v: SSAValue, env: Env) -> Env | None:
    return env


def _axes(op: Operation, lead: bool) -> bool:
    """Whether the ``reduce_sum`` ``op`` sums the last axis with keepdims (``lead``: every
    axis but the last)."""
    rank = ttype(op.operands[0]).rank
    if not rank:
        return False
    a = attrs_of(op)
    axes = sorted(int(x) % rank for x in a["axes"])
    return axes == list(range(rank - 1)) if lead else (axes == [rank - 1] and bool(a["keepdims"]))


def _row_sum(sub: Pattern) -> Pattern:
    return _op("reduce_sum", sub, check=lambda op, e: _axes(op, False))


def _dx_pattern(ctx: _Ctx) -> Pattern:
    def bcast(sub: Pattern) -> Pattern:
        return _either(_op("broadcast_to", sub, _any), sub)

    width = _const(None, ctx)  # type: ignore[arg-type]
    x, dy, mean, r, gamma = (_bind(n) for n in ("x", "dy", "mean", "r", "gamma"))
    moments_mean = _op("moments", _bind("x"), index=0, tag="moments")
    moments_var = _op("moments", _bind("x"), index=1, tag="moments")
    r_def = _op("rsqrt", _op("add", moments_var, _epsilon(ctx), comm=True))
    scale = _op("mul", _both(r, r_def), gamma, comm=True)
    p = _bind("p")
    p_def = _op("mul", dy, scale, comm=True)
    gs = _op("add", _op("mul", x, dy, comm=True),
             _op("mul", _op("neg", _both(mean, moments_mean)), dy, comm=True), comm=True)
    b1 = bcast(_op("div", _op("neg", _row_sum(p)), width))
    s2 = _row_sum(_op("mul", _both(_bind("gs"), gs), gamma, comm=True))
    coef = _op("mul", _op("mul", s2, _op("mul", _op("square", r), r, comm=True), comm=True),
               _const(-0.5, ctx), comm=True)
    b2 = _op("mul", bcast(_op("mul", _const(2.0, ctx), _op("div", coef, width), comm=True)),
             _op("sub", x, mean), comm=True)
    first = _op("add", _both(p, p_def), b1, comm=True)
    return _op("add", first, b2, comm=True, tag="root")


def _both(a: Pattern, b: Pattern) -> Pattern:
    """Matches what ``a`` and then ``b`` match."""
    def match(v: SSAValue, env: Env) -> Env | None:
        e = a(v, env)
        return b(v, e) if e is not None else None
    return match


def _epsilon(ctx: _Ctx) -> Pattern:
    """A scalar float constant, bound as ``epsilon`` (a layer norm's)."""
    def match(v: SSAValue, env: Env) -> Env | None:
        arr = const_value(ctx.gm, v)
        if arr is None or arr.size != 1 or arr.dtype.kind != "f":
            return None
        return {**env, "epsilon": float(arr.reshape(()))}
    return match


def _lead_sum(v: SSAValue, width: int) -> SSAValue | None:
    """The ``[width]`` value of the ``reduce_sum`` over every axis but the last that reads
    ``v`` (its own result, or that of the reshape to ``[width]`` that alone reads it)."""
    for use in list(v.uses):
        op = use.operation
        if op.name != "tg.reduce_sum" or len(op.operands) != 1 or not _axes(op, True):
            continue
        out = op.results[0]
        if ttype(out).shape == (width,):
            return out
        reshape = single_use(out)
        if reshape is not None and reshape.name == "tg.reshape" and (
                ttype(reshape.results[0]).shape == (width,)):
            return reshape.results[0]
    return None


def _lead_sum_of_product(r: SSAValue, gs: SSAValue, width: int) -> SSAValue | None:
    for use in list(gs.uses):
        op = use.operation
        if op.name == "tg.mul" and {id(o) for o in op.operands} == {id(r), id(gs)}:
            found = _lead_sum(op.results[0], width)
            if found is not None:
                return found
    return None


def _row_vector(gm: GraphModule, gamma: SSAValue, width: int) -> SSAValue | None:
    """``gamma`` as a ``[width]`` value: itself, what the reshape defining it reads, or a new
    constant (inserted after gamma's) of a constant's values."""
    shape = ttype(gamma).shape
    if shape == (width,):
        return gamma
    op = gamma.owner
    if not isinstance(op, Operation) or shape is None or any(d != 1 for d in shape[:-1]):
        return None
    if op.name == "tg.reshape" and ttype(op.operands[0]).shape == (width,):
        return op.operands[0]
    value = const_value(gm, gamma)
    if value is None:
        return None
    flat = make_constant(gm, value.reshape(width), "layer_norm_gamma")
    block = op.parent_block()
    assert block is not None
    block.insert_op_after(flat, op)
    return flat.results[0]


def _erase_dead(ops: list[Operation]) -> None:
    """Erase the pure graph ops among ``ops`` (and, in turn, their operands' defining ops)
    whose results nothing reads."""
    todo = list(ops)
    while todo:
        op = todo.pop()
        if (op.parent is None or not is_tg(op) or get_opdef(op.name).stateful
                or any(r.uses for r in op.results)):
            continue
        owners = [o.owner for o in op.operands if isinstance(o.owner, Operation)]
        op.detach()
        op.erase()
        todo.extend(owners)  # type: ignore[arg-type]


def fuse_layer_norm_grad(gm: GraphModule) -> GraphModule:
    """Run ``-tg-fuse-layer-norm-grad`` in place; returns ``gm``."""
    ctx = _Ctx(gm)
    pattern = _dx_pattern(ctx)
    for f in functions(gm):
        for root in list(f.body.block.ops):
            if root.parent is None or root.name != "tg.add":
                continue
            t = ttype(root.results[0])
            if t.dtype != "f32" or not t.rank or t.shape is None or t.shape[-1] is None:
                continue
            width = int(t.shape[-1])
            env = pattern(root.results[0], {"C": float(width)})
            if env is None:
                continue
            dbeta = _lead_sum(env["dy"], width)
            dgamma = _lead_sum_of_product(env["r"], env["gs"], width)
            gamma = _row_vector(gm, env["gamma"], width)
            if dbeta is None or dgamma is None or gamma is None:
                continue
            fused = new_op(gm, "layer_norm_grad", [env["dy"], env["x"], gamma],
                           {"axis": t.rank - 1, "epsilon": env["epsilon"]}, root.location)
            outs = (root.results[0], dgamma, dbeta)
            if any(n.type != o.type for n, o in zip(fused.results, outs, strict=True)):
                fused.erase()
                continue
            # after every operand's definition: the op defining the last of them
            block = root.parent_block()
            assert block is not None
            order = {id(op): i for i, op in enumerate(block.ops)}
            defs = [v.owner for v in fused.operands if isinstance(v.owner, Operation)]
            users = [u.operation for o in outs for u in o.uses] + [o.owner for o in outs]
            last = max(defs, key=lambda op: order.get(id(op), -1), default=None)
            first_user = min(order.get(id(op), len(order)) for op in users)  # type: ignore[arg-type]
            if last is not None and order.get(id(last), -1) >= first_user:
                fused.erase()
                continue
            if last is None or id(last) not in order:
                block.insert_op_before(fused, block.first_op)  # type: ignore[arg-type]
            else:
                block.insert_op_after(fused, last)
            for old, new in zip(outs, fused.results, strict=True):
                old.replace_all_uses_with(new)
            dead = [o.owner for o in outs if isinstance(o.owner, Operation)]
            _erase_dead(dead + list(env["_ops"]))
    return gm


__all__ = ["fuse_layer_norm_grad"]
