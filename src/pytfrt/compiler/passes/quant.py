"""``-tg-fold-quant``: quantize/dequantize pairs around convolutions and matrix products folded
into the integer ops ``qconv2d`` / ``qmatmul`` (``docs/compiler.md``, "Quantization").

For each ``conv2d`` (explicit pads) or 2-D-weight ``matmul`` whose input is
``dequantize_linear(xq, xs, xz)`` (``xq`` u8 or s8, per-tensor constant scale and zero point) and
whose weight is ``dequantize_linear(wq, ws[, 0])`` of a constant s8 weight (per output
channel or per tensor, zero points 0; a ``transpose_b`` product's weight is transposed at
compile time), the pass follows the op's only user through

* ``add`` of a constant (or dequantized-constant) bias, one value per output channel
  (``[C]``, ``[C, 1, 1]``, ``[1, C, 1, 1]``),
* ``relu``,
* ``quantize_linear(., ys, yz)`` (per-tensor constants, u8 or s8 result),

and replaces the chain by one ``qconv2d`` / ``qmatmul(xq, wq, ws[, bias]) {x_scale,
x_zero_point, y_scale, y_zero_point, dtype, activation}`` whose result is the quantized value
(or, without a final ``quantize_linear``, the float value: ``dtype = f32``).  The bias stays in
float (oneDNN adds it after the scales).  Then, in a second sweep:

* ``quantize(relu?(dequantize(qconv2d(...)) + dequantize(r)))`` (a quantized residual block)
  becomes that ``qconv2d`` with ``r`` as its residual operand and the final quantization,
  its own requantization kept as ``inner_scale`` / ``inner_zero_point``;
* ``quantize(max_pool2d(dequantize(q, s, z)), s, z)`` (also ``global_max_pool``) becomes
  ``max_pool2d(q)`` -- exact, pooling only picks elements; so does
  ``quantize(reshape(dequantize(q, s, z)), s, z)``, which becomes ``reshape(q)``;
* ``quantize(global_avg_pool(dequantize(q, s, z)), s2, z2)`` becomes ``qglobal_avg_pool(q)``
  (the mean of the codes, requantized).

Chains that do not fit are left as they are (they still run, in float).  The quantization ops
left without users are erased; constants are left for ``-tg-dce``.

The pass runs in the default pipeline right after ``-tg-infer-shapes``, before
``-tg-constant-fold`` would fold a constant weight's ``dequantize_linear`` into a float
weight; a graph without quantization ops is not changed.  ``-tg-layout-nhwc`` then lays
``qconv2d`` out in NHWC as it does ``conv2d`` and moves transposes through per-tensor
quantize/dequantize ops.  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    erase_unused,
    functions,
    make_constant,
    new_op,
    producer,
    replace,
    single_use,
    ttype,
)

_CONST_THROUGH = ("tg.dequantize_linear", "tg.reshape", "tg.cast", "tg.mul")
"""Ops through which a bias is still a compile-time constant."""


def _scalar(gm: GraphModule, v: SSAValue | None) -> float | int | None:
    """A constant holding one element, as a Python number (``None`` otherwise)."""
    if v is None:
        return None
    c = const_value(gm, v)
    if c is None or c.size != 1:
        return None
    return c.reshape(()).item()


def _eval_const(gm: GraphModule, v: SSAValue, depth: int = 0) -> np.ndarray | None:
    """``v``'s value when it is a constant or a constant computed through
    :data:`_CONST_THROUGH` ops (evaluated with their compute functions)."""
    c = const_value(gm, v)
    if c is not None or depth > 4:
        return c
    op = v.owner
    if not isinstance(op, Operation) or op.name not in _CONST_THROUGH:
        return None
    vals = [_eval_const(gm, o, depth + 1) for o in op.operands]
    if any(x is None for x in vals):
        return None
    from pytfrt.backends.cpu.graph_kernels import graph_ops

    try:
        return np.asarray(graph_ops()[op.name[3:]](*vals, **attrs_of(op)))
    except Exception:  # noqa: BLE001 - not a constant we can use
        return None


def _act_input(gm: GraphModule, v: SSAValue) -> dict[str, Any] | None:
    """``{x, x_scale, x_zero_point, x_dtype}`` if ``v = dequantize_linear(xq, scalar consts)``."""
    dq = producer(v, "tg.dequantize_linear")
    if dq is None or ttype(v).dtype != "f32":
        return None
    xq = dq.operands[0]
    s = _scalar(gm, dq.operands[1])
    z = _scalar(gm, dq.operands[2]) if len(dq.operands) > 2 else 0
    dtype = ttype(xq).dtype
    if dtype not in ("ui8", "i8") or s is None or z is None or not s > 0:
        return None
    return {"x": xq, "x_scale": float(s), "x_zero_point": int(z), "x_dtype": dtype}


def _weight(gm: GraphModule, v: SSAValue, axis: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(wq s8, scales f32 [C] or [1])`` if ``v = dequantize_linear(const s8, const scale,
    0?)`` per tensor or per ``axis``."""
    dq = producer(v, "tg.dequantize_linear")
    if dq is None:
        return None
    wq = const_value(gm, dq.operands[0])
    ws = const_value(gm, dq.operands[1])
    if wq is None or ws is None or wq.dtype != np.int8 or ws.dtype != np.float32:
        return None
    if len(dq.operands) > 2:
        wz = const_value(gm, dq.operands[2])
        if wz is None or np.any(wz != 0):
            return None
    a = attrs_of(dq)
    if a["block_size"]:
        return None
    if ws.size > 1 and (ws.ndim != 1 or a["axis"] % wq.ndim != axis % wq.ndim):
        return None
    return wq, ws.reshape(-1)


def _bias(gm: GraphModule, add: Operation, y: SSAValue, cout: int,
          channel_axis: int) -> np.ndarray | None:
    """The per-channel bias of ``add(y, b)`` (``b`` constant), or ``None``."""
    other = add.operands[1] if add.operands[0] is y else add.operands[0]
    b = _eval_const(gm, other)
    if b is None or b.dtype != np.float32 or b.size != cout:
        return None
    rank = ttype(y).rank or 0
    shape = [1] * rank
    shape[channel_axis] = cout
    if b.ndim > rank or tuple(b.shape) != tuple(shape[rank - b.ndim:]):
        return None
    return b.reshape(-1)


def _fold_one(gm: GraphModule, op: Operation) -> bool:
    attrs = attrs_of(op)
    if attrs.get("epilogue_operands", (0, 0)) != (0, 0) or attrs.get("activation",
                                                                      "none") != "none":
        return False
    xin = _act_input(gm, op.operands[0])
    if xin is None:
        return False
    if op.name == "tg.conv2d":
        if attrs["padding"] == "SAME":
            return False
        nchw = attrs["layout"] == "NCHW"
        got = _weight(gm, op.operands[1], 0 if nchw else 3)
        if got is None:
            return False
        wq, ws = got
        cout = wq.shape[0] if nchw else wq.shape[3]
        channel_axis = 1 if nchw else 3
        op_attrs = {k: attrs[k] for k in ("layout", "strides", "pads", "dilations", "groups")}
        name = "qconv2d"
    else:  # matmul
        if attrs["transpose_a"] or (ttype(op.operands[0]).rank or 0) < 2:
            return False
        tb = attrs["transpose_b"]
        got = _weight(gm, op.operands[1], 0 if tb else 1)
        if got is None or got[0].ndim != 2:
            return False
        wq, ws = got
        if tb:
            wq = np.ascontiguousarray(wq.T)
        cout = wq.shape[1]
        channel_axis = (ttype(op.results[0]).rank or 1) - 1
        op_attrs = {}
        name = "qmatmul"
    if ws.size not in (1, cout):
        return False
    # follow the only user: bias add, relu, quantize
    last, y = op, op.results[0]
    bias = None
    activation = "none"
    user = single_use(y)
    if user is not None and user.name == "tg.add":
        bias = _bias(gm, user, y, cout, channel_axis)
        if bias is not None:
            last, y = user, user.results[0]
            user = single_use(y)
    if user is not None and user.name == "tg.relu":
        activation = "relu"
        last, y = user, user.results[0]
        user = single_use(y)
    out: dict[str, Any] = {"dtype": "f32", "y_scale": 0.0, "y_zero_point": 0}
    if user is not None and user.name == "tg.quantize_linear":
        ys = _scalar(gm, user.operands[1])
        yz = _scalar(gm, user.operands[2]) if len(user.operands) > 2 else 0
        qdtype = ttype(user.results[0]).dtype
        if ys is not None and yz is not None and ys > 0 and qdtype in ("ui8", "i8"):
            out = {"dtype": qdtype, "y_scale": float(ys), "y_zero_point": int(yz)}
            last = user
    block = op.parent_block()
    assert block is not None
    w_c = make_constant(gm, wq, "quant/w")
    s_c = make_constant(gm, ws.astype(np.float32), "quant/w_scale")
    operands = [xin.pop("x"), w_c.results[0], s_c.results[0]]
    for c in (w_c, s_c):
        block.insert_op_before(c, op)
    if bias is not None:
        b_c = make_constant(gm, bias.astype(np.float32), "quant/bias")
        block.insert_op_before(b_c, op)
        operands.append(b_c.results[0])
    new = new_op(gm, name, operands, {
        **op_attrs, **xin, **out, "activation": activation,
        "epilogue_operands": (int(bias is not None), 0)}, op.location)
    block.insert_op_before(new, op)
    # ops of the chain other than ``last`` have one user each (the next one): erase in order
    chain = []
    cur: Operation | None = op
    while cur is not None and cur is not last:
        chain.append(cur)
        nxt = single_use(cur.results[0])
        cur = nxt
    replace(last, [new.results[0]])
    erase_unused(chain[::-1])
    return True


def _dq_params(gm: GraphModule, v: SSAValue) -> tuple[SSAValue, float, int] | None:
    """``(q, scale, zero_point)`` if ``v = dequantize_linear(q, scalar consts)``."""
    got = _act_input(gm, v)
    return None if got is None else (got["x"], got["x_scale"], got["x_zero_point"])


def _fold_residual(gm: GraphModule, op: Operation) -> bool:
    """``quantize(act?(dequantize(qconv2d(...)) + dequantize(r)))`` -> ``qconv2d`` with ``r`` as
    its residual (oneDNN's ``sum`` post-op with ``r``'s scale and zero point) and the final
    quantization; the convolution's own requantization is kept as ``inner_scale`` /
    ``inner_zero_point`` (rounding as the quantized model does)."""
    a = attrs_of(op)
    if a["epilogue_operands"][1] or a["dtype"] == "f32":
        return False
    dq = single_use(op.results[0])
    if dq is None or dq.name != "tg.dequantize_linear" or _dq_params(gm, dq.results[0]) is None:
        return False
    add = single_use(dq.results[0])
    if add is None or add.name != "tg.add" or add.operands[0] is add.operands[1]:
        return False
    other = add.operands[1] if add.operands[0] is dq.results[0] else add.operands[0]
    res = _dq_params(gm, other)
    if res is None or ttype(other).shape != ttype(dq.results[0]).shape:
        return False
    r, rs, rz = res
    if ttype(r).dtype != a["dtype"] or r is op.operands[0]:
        return False
    user = single_use(add.results[0])
    activation = "none"
    if user is not None and user.name == "tg.relu" and a["activation"] == "none":
        activation = "relu"
        user = single_use(user.results[0])
    elif a["activation"] != "none":
        return False
    if user is None or user.name != "tg.quantize_linear":
        return False
    ys = _scalar(gm, user.operands[1])
    yz = _scalar(gm, user.operands[2]) if len(user.operands) > 2 else 0
    if ys is None or yz is None or not ys > 0 or ttype(user.results[0]).dtype != a["dtype"]:
        return False
    flags = a["epilogue_operands"]
    attrs = {k: v for k, v in a.items()}
    attrs.update(inner_scale=a["y_scale"], inner_zero_point=a["y_zero_point"])
    attrs.update(y_scale=float(ys), y_zero_point=int(yz), residual_scale=rs,
                 residual_zero_point=rz, epilogue_operands=(flags[0], 1),
                 activation=activation if activation != "none" else a["activation"])
    new = new_op(gm, "qconv2d", [*op.operands, r], attrs, op.location)
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(new, user)
    replace(user, [new.results[0]])
    return True


_MONOTONIC = ("tg.max_pool2d", "tg.global_max_pool", "tg.reshape")
"""Ops that commute with a per-tensor quantization (they only pick or move elements)."""


def _fold_pick(gm: GraphModule, op: Operation) -> bool:
    """``quantize(maxpool(dequantize(q, s, z)), s, z)`` -> ``maxpool(q)``: max pooling picks
    elements, and dequantization with a positive scale keeps their order, so the result is
    exact (a reshape only moves them: the same)."""
    got = _dq_params(gm, op.operands[0])
    user = single_use(op.results[0])
    if (got is None or user is None or user.name != "tg.quantize_linear"
            or len(op.operands) != 1):
        return False
    q, s, z = got
    ys = _scalar(gm, user.operands[1])
    yz = _scalar(gm, user.operands[2]) if len(user.operands) > 2 else 0
    if ys != s or yz != z or ttype(user.results[0]).dtype != ttype(q).dtype:
        return False
    new = new_op(gm, op.name[3:], [q], attrs_of(op), op.location)
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(new, user)
    replace(user, [new.results[0]])
    return True


def _fold_avg(gm: GraphModule, op: Operation) -> bool:
    """``quantize(global_avg_pool(dequantize(q, s, z)), s2, z2)`` -> ``qglobal_avg_pool(q)``."""
    got = _dq_params(gm, op.operands[0])
    user = single_use(op.results[0])
    if got is None or user is None or user.name != "tg.quantize_linear":
        return False
    q, s, z = got
    ys = _scalar(gm, user.operands[1])
    yz = _scalar(gm, user.operands[2]) if len(user.operands) > 2 else 0
    dtype = ttype(user.results[0]).dtype
    if ys is None or yz is None or not ys > 0 or dtype not in ("ui8", "i8"):
        return False
    new = new_op(gm, "qglobal_avg_pool", [q], {
        "layout": attrs_of(op)["layout"], "x_scale": s, "x_zero_point": z,
        "y_scale": float(ys), "y_zero_point": int(yz), "dtype": dtype}, op.location)
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(new, user)
    replace(user, [new.results[0]])
    return True


def _erase_dead(gm: GraphModule) -> None:
    """Erase the quantization chains left without users (everything but constants)."""
    for f in functions(gm):
        changed = True
        while changed:
            changed = False
            for op in reversed(list(f.body.block.ops)):
                if (op.name in _DEAD_OK and op.results
                        and all(not r.uses for r in op.results)):
                    op.detach()
                    op.erase()
                    changed = True


_DEAD_OK = ("tg.dequantize_linear", "tg.quantize_linear", "tg.add", "tg.relu", "tg.qconv2d",
            "tg.global_avg_pool", *_MONOTONIC)


def fold_quant(gm: GraphModule) -> GraphModule:
    """Run ``-tg-fold-quant`` in place (see the module docstring); returns ``gm``."""
    changed = False
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.parent_block() is None:
                continue
            if op.name in ("tg.conv2d", "tg.matmul") and _fold_one(gm, op):
                changed = True
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.parent_block() is None:
                continue
            if op.name == "tg.qconv2d" and _fold_residual(gm, op):
                changed = True
            elif op.name in _MONOTONIC and _fold_pick(gm, op):
                changed = True
            elif op.name == "tg.global_avg_pool" and _fold_avg(gm, op):
                changed = True
    if changed:
        _erase_dead(gm)
    return gm
