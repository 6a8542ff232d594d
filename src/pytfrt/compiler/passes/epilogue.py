"""``-tg-fuse-epilogue``: bias add, residual add and activation into the producing
conv2d/matmul (the fused form of ``docs/graph_dialect.md``).

For ``y = conv2d(...)`` / ``matmul(...)`` whose only user is

* ``add(y, b)`` with ``b`` a constant holding one value per output channel (shape ``[C]``, or
  ``[C, 1, 1]``/``[1, C, 1, 1]`` for NCHW) -> bias (stored 1-D);
* ``add(y, r)`` with ``r`` of exactly ``y``'s type -> residual;
* an elementwise op whose :mod:`~pytfrt.backends.cpu.op_math` record names an epilogue
  activation (``relu``, ``relu6``, ``sigmoid``, ``tanh``, ``silu``, ``gelu``, ``leaky_relu``,
  ``hard_swish``) -> activation,
* ``mul(y, sigmoid(y))`` (SiLU written out: ``y``'s only two users) -> activation ``silu``,
* ``mul(y, relu6(y + 3) / 6)`` (hard-swish written out, also ``* (1 / 6)``: Keras'
  MobileNetV3) -> activation ``hard_swish``,

the op is rebuilt with the extra operand/attribute and replaces the user; repeated until
nothing changes.  An activation applied after a ``reshape`` that is the op's only user (a
dense layer on ``[batch * seq, d]`` rows viewed back as ``[batch, seq, d]``, as GPT-2's
exported MLP does) is fused too: ``act(reshape(y)) == reshape(act(y))``, the reshape stays.
Result = act(op(x, w) + bias + residual), so a bias or residual is taken only
while no activation is set, and each at most once.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from pytfrt.backends.cpu import op_math
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
    users,
)
from pytfrt.compiler.types import np_dtype

ACTIVATIONS: dict[str, op_math.Math] = {
    f"tg.{name}": m for name, m in op_math.MATH.items() if m.activation is not None}
"""``tg`` op name -> the record of an op that can become an epilogue activation."""


def _channels(op: Operation, attrs: dict) -> tuple[int | None, int | None]:
    """(channel axis, channel count) of the op's result."""
    t = ttype(op.results[0])
    if t.shape is None:
        return None, None
    if op.name == "tg.conv2d" and attrs["layout"] == "NCHW":
        return 1, t.shape[1]
    return len(t.shape) - 1, (t.shape[-1] if t.shape else None)


def _bias_value(gm: GraphModule, op: Operation, attrs: dict, v: SSAValue) -> np.ndarray | None:
    b = const_value(gm, v)
    axis, c = _channels(op, attrs)
    if b is None or c is None or axis is None or b.dtype != np_dtype(ttype(op.results[0]).dtype):
        return None
    rank = ttype(op.results[0]).rank or 0
    shape = list(b.shape)
    if b.size != c or b.ndim > rank:
        return None
    # the single non-1 dim must sit on the channel axis (right-aligned broadcasting)
    padded = [1] * (rank - len(shape)) + shape
    if c != 1 and padded[axis] != c:
        return None
    return b.reshape(c)


def _variable_bias(op: Operation, attrs: dict, v: SSAValue) -> bool:
    """Whether ``v``, not a constant, is a 1-D bias of an NHWC ``conv2d``'s output channels
    (a training step's bias variable: its plan is made per call anyway, and oneDNN adds the
    bias in the convolution's store instead of a separate pass over the output)."""
    if op.name != "tg.conv2d" or attrs["layout"] != "NHWC":
        return False
    axis, c = _channels(op, attrs)
    t, out = ttype(v), ttype(op.results[0])
    return (c is not None and axis == (out.rank or 0) - 1 and t.shape == (c,)
            and t.dtype == out.dtype)


def _rebuild(gm: GraphModule, op: Operation, user: Operation, attrs: dict,
             bias: SSAValue | None, residual: SSAValue | None) -> Operation:
    base = list(op.operands[:2])
    flags = list(attrs["epilogue_operands"])
    old = list(op.operands[2:])
    cur_bias = old[0] if flags[0] else None
    cur_res = old[flags[0]] if flags[1] else None
    bias = bias or cur_bias
    residual = residual or cur_res
    extra = [v for v in (bias, residual) if v is not None]
    attrs = dict(attrs, epilogue_operands=(int(bias is not None), int(residual is not None)))
    new = new_op(gm, op.name[3:], base + extra, attrs, op.location)
    block = user.parent_block()
    assert block is not None
    block.insert_op_before(new, user)
    replace(user, [new.results[0]])
    op.detach()
    op.erase()
    return new


def activation_attrs(user: Operation) -> dict:
    """The ``activation`` / ``alpha`` attributes that fuse the activation op ``user``."""
    ua = attrs_of(user)
    act = ACTIVATIONS[user.name].activation_of(ua)
    assert act is not None
    return {"activation": act, "alpha": ua.get("alpha", 0.0) if act == "leaky_relu" else 0.0}


def _unit_scale(gm: GraphModule, op: Operation, y: SSAValue) -> bool:
    """Whether ``op`` is ``mul(1, y)`` / ``mul(y, 1)`` with a constant scalar 1 (Keras 3's
    ``swish`` is ``y * sigmoid(beta * y)`` with ``beta = 1``) of ``y``'s type."""
    if op.name != "tg.mul" or ttype(op.results[0]) != ttype(y):
        return False
    other = [v for v in op.operands if v is not y]
    if len(other) != 1:
        return False
    c = const_value(gm, other[0])
    return c is not None and c.size == 1 and float(c.reshape(())) == 1.0


def _swish(gm: GraphModule, op: Operation) -> Operation | None:
    """``mul(y, sigmoid(y))`` (SiLU written out, as TensorFlow's graphs of Keras' ``swish``
    have it, also with ``sigmoid(1 * y)``) on ``op``'s result ``y`` into ``op`` as
    ``activation = "silu"``; the new op, or ``None``.  ``y`` must have exactly those two users
    and the sigmoid (and the unit scale) no other."""
    y = op.results[0]
    us = users(y)
    if len(us) != 2:
        return None
    dead: list[Operation] = []  # the sigmoid (then the unit scale feeding it)
    for u in us:
        if u.name == "tg.sigmoid":
            dead = [u]
        elif _unit_scale(gm, u, y):
            s = single_use(u.results[0])
            if s is not None and s.name == "tg.sigmoid":
                dead = [s, u]
    mul = next((u for u in us if u not in dead and u.name == "tg.mul"), None)
    if not dead or mul is None:
        return None
    sig = dead[0]
    if single_use(sig.results[0]) is not mul:
        return None
    if {mul.operands[0], mul.operands[1]} != {y, sig.results[0]}:
        return None
    if ttype(mul.results[0]) != ttype(y):
        return None
    return _with_activation(gm, op, "silu", mul, dead)


def _with_activation(gm: GraphModule, op: Operation, activation: str, last: Operation,
                     dead: list[Operation] | tuple[Operation, ...]) -> Operation:
    """``op`` rebuilt with ``activation``, replacing ``last`` (the written-out activation's
    final op); ``last``, the ``dead`` ops (users first) and ``op`` are erased."""
    new = new_op(gm, op.name[3:], list(op.operands),
                 dict(attrs_of(op), activation=activation, alpha=0.0), op.location)
    block = last.parent_block()
    assert block is not None
    block.insert_op_before(new, last)
    replace(last, [new.results[0]])
    for gone in (*dead, op):
        gone.detach()
        gone.erase()
    return new


def _scalar(gm: GraphModule, op: Operation, v: SSAValue) -> float | None:
    """The constant scalar that is ``op``'s operand other than ``v`` (``None``: not one)."""
    other = [u for u in op.operands if u is not v]
    if len(other) != 1:
        return None
    c = const_value(gm, other[0])
    return float(c.reshape(())) if c is not None and c.size == 1 else None


def hard_sigmoid_chain(gm: GraphModule, add: Operation,
                       v: SSAValue) -> tuple[Operation, Operation, Operation] | None:
    """``(add, relu6, scale)`` if ``add`` starts ``relu6(v + 3) / 6`` (or ``* (1 / 6)``: the
    hard sigmoid as TensorFlow's graphs of Keras' MobileNetV3 write it) on ``v``, each op of
    the chain with one user and ``v``'s type; else ``None``."""
    if add.name != "tg.add" or _scalar(gm, add, v) != 3.0:
        return None
    relu6 = single_use(add.results[0])
    if relu6 is None or relu6.name != "tg.relu6":
        return None
    h = relu6.results[0]
    scale = single_use(h)
    if scale is None or not (
            (scale.name == "tg.div" and scale.operands[0] is h and _scalar(gm, scale, h) == 6.0)
            or (scale.name == "tg.mul" and abs((_scalar(gm, scale, h) or 0.0) - 1 / 6) < 1e-7)):
        return None
    if not all(ttype(o.results[0]) == ttype(v) for o in (add, relu6, scale)):
        return None
    return add, relu6, scale


def _hard_swish(gm: GraphModule, op: Operation) -> Operation | None:
    """``mul(y, relu6(y + 3) / 6)`` (hard-swish written out, as TensorFlow's graphs of Keras'
    MobileNetV3 have it; also ``* (1 / 6)``) on ``op``'s result ``y`` into ``op`` as
    ``activation = "hard_swish"``; the new op, or ``None``.  ``y`` must have exactly those two
    users and each op of the chain one user."""
    y = op.results[0]
    us = users(y)
    if len(us) != 2:
        return None
    chain = next((c for c in (hard_sigmoid_chain(gm, u, y) for u in us) if c), None)
    if chain is None:
        return None
    scale = chain[2]
    mul = single_use(scale.results[0])
    if (mul is None or mul.name != "tg.mul" or mul not in us
            or {mul.operands[0], mul.operands[1]} != {y, scale.results[0]}
            or ttype(mul.results[0]) != ttype(y)):
        return None
    return _with_activation(gm, op, "hard_swish", mul, tuple(reversed(chain)))


def _step(gm: GraphModule, op: Operation) -> Operation | None:
    """Fuse ``op``'s only user into it; the new op, or ``None``."""
    y = op.results[0]
    user = single_use(y)
    attrs = attrs_of(op)
    if user is None:
        if attrs["activation"] != "none":
            return None
        return _swish(gm, op) or _hard_swish(gm, op)
    flags = attrs["epilogue_operands"]
    act_free = attrs["activation"] == "none"
    if user.name in ACTIVATIONS and act_free:
        return _rebuild(gm, op, user, dict(attrs, **activation_attrs(user)), None, None)
    if user.name == "tg.reshape" and act_free:
        after = single_use(user.results[0])
        if after is None or after.name not in ACTIVATIONS:
            return None
        new = new_op(gm, op.name[3:], list(op.operands), dict(attrs, **activation_attrs(after)),
                     op.location)
        block = op.parent_block()
        assert block is not None
        block.insert_op_before(new, op)
        replace(op, [new.results[0]])  # the reshape now reads the activated result
        replace(after, [user.results[0]])
        return new
    if user.name == "tg.add" and act_free:
        other = user.operands[1] if user.operands[0] is y else user.operands[0]
        if other is y:
            return None
        if ttype(user.results[0]) != ttype(y):
            return None
        if not flags[0]:
            b = _bias_value(gm, op, attrs, other)
            if b is not None:
                if ttype(other).rank == 1:  # already 1-D: use the constant as is
                    return _rebuild(gm, op, user, attrs, other, None)
                block = user.parent_block()
                assert block is not None
                c = make_constant(gm, b, "bias")
                block.insert_op_before(c, user)
                return _rebuild(gm, op, user, attrs, c.results[0], None)
            if _variable_bias(op, attrs, other):
                return _rebuild(gm, op, user, attrs, other, None)
        if not flags[1] and ttype(other) == ttype(y) and const_value(gm, other) is None:
            return _rebuild(gm, op, user, attrs, None, other)
    return None


def fuse_epilogue(gm: GraphModule) -> GraphModule:
    """Run the pass in place."""
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.name not in ("tg.conv2d", "tg.matmul") or op.parent is None:
                continue
            cur: Operation | None = op
            while cur is not None:
                cur = _step(gm, cur)
    return gm
