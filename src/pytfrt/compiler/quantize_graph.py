"""The graph side of ``pytfrt.quantize``: which ops are quantized, the calibration graph, and
the quantize/dequantize ("QDQ") pairs inserted into a float graph.

* :func:`targets` -- the quantizable ops of ``@main``: ``conv2d`` and ``matmul`` with a constant
  float32 filter/weight (minus ``exclude``), each with the tensor it reads and the one it
  writes: its result, or the end of the ``add(bias)`` / ``relu`` chain after it, which the
  quantization pass (``-tg-fold-quant``) folds into the same int8 kernel -- so the graph is
  quantized before ``-tg-fuse-epilogue`` runs;
* :func:`activations` -- the activation tensors those ops read and write, and the inputs of
  pooling ops (calibrated);
* :func:`observer` -- a copy of the module whose ``@main`` also returns those tensors;
* :func:`activation_params` / :func:`weight_params` -- u8 asymmetric activation parameters from
  a range, s8 symmetric (per-channel) weights;
* :func:`insert_static` / :func:`insert_dynamic` -- the rewrite: ``t -> dequantize_linear(
  quantize_linear(t))`` for every activation tensor (all its users read the result), weights as
  ``dequantize_linear(s8 constant)``; dynamic: each matmul (and its bias add) becomes one
  ``qmatmul_dynamic`` (its input quantized per call, as ``dynamic_quantize_linear`` does);
  a ``max_pool2d`` of a dequantized tensor is moved before the dequantize (it runs on u8, its
  result keeps the input's parameters), and a quantize of a dequantize with the same
  parameters is dropped.

The ops are the graph dialect's quantization family (``docs/graph_dialect.md``); the default
pipeline folds the pairs into int8 kernels.  Works in place on a GraphModule; not thread-safe
(one rewrite per module at a time).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import builtin as b
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule, signature_of
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    make_constant,
    new_op,
    refresh_types,
    single_use,
    ttype,
)
from pytfrt.compiler.passes.epilogue import ACTIVATIONS, activation_attrs

__all__ = ["Target", "activation_params", "activations", "insert_dynamic", "insert_static",
           "observer", "own", "targets", "weight_axis", "weight_params"]

WEIGHTED = ("tg.conv2d", "tg.matmul")
POOLS = ("tg.max_pool2d", "tg.avg_pool2d", "tg.global_avg_pool", "tg.global_max_pool")


@dataclass
class Target:
    """A quantizable op, the tensor its int8 kernel reads (``x``) and the one it writes
    (``out``: the op's result, or the end of its bias-add / ReLU chain)."""

    op: Operation
    x: SSAValue
    out: SSAValue


def own(gm: GraphModule, obj: Any) -> GraphModule:
    """``gm``, copied when it is the caller's own object ``obj`` (the passes work in place)."""
    return gm.copy() if gm is obj else gm


def _name(op: Operation) -> str | None:
    loc = op.location
    return loc.desc.data if isinstance(loc, b.NameLoc) else None


def _is_f32(v: SSAValue) -> bool:
    return ttype(v).dtype == "f32"


def _bias_add(gm: GraphModule, op: Operation, channels: int
              ) -> tuple[Operation, np.ndarray] | None:
    """``op``'s only user when it adds a float32 constant bias with one value per output
    channel (the add and the bias), else ``None``."""
    y = op.results[0]
    user = single_use(y)
    if user is None or user.name != "tg.add":
        return None
    other = user.operands[1] if user.operands[0] is y else user.operands[0]
    bias = const_value(gm, other)
    if (bias is None or bias.dtype != np.float32 or bias.size != channels
            or ttype(user.results[0]) != ttype(y)):
        return None
    return user, bias


def _epilogue_end(gm: GraphModule, op: Operation, channels: int) -> SSAValue:
    """The end of ``op``'s chain ``[add(., constant bias with one value per channel)]
    [relu]``, each link its predecessor's only user: what one int8 kernel computes."""
    found = _bias_add(gm, op, channels)
    y = op.results[0] if found is None else found[0].results[0]
    user = single_use(y)
    return user.results[0] if user is not None and user.name == "tg.relu" else y


def targets(gm: GraphModule, exclude: frozenset[str] = frozenset()) -> list[Target]:
    """The quantizable ops of ``@main`` in program order: ``conv2d`` (explicit pads) and
    ``matmul`` (input of rank >= 2, 2-D weight) on float32 with a constant weight, in the
    unfused form (see the module docstring).

    ``exclude`` holds op kinds (``"conv2d"``), source node names (the op's location) or weight
    names; a matching op is left out.
    """
    out = []
    for op in gm.function("main").body.block.ops:
        if op.name not in WEIGHTED or op.name[3:] in exclude or _name(op) in exclude:
            continue
        if not all(_is_f32(v) for v in op.results) or not _is_f32(op.operands[0]):
            continue
        attrs = attrs_of(op)
        if attrs["epilogue_operands"] != (0, 0) or attrs["activation"] != "none":
            continue
        w = op.operands[1]
        value = const_value(gm, w)
        if value is None or value.dtype != np.float32:
            continue
        if op.name == "tg.matmul":
            if value.ndim != 2 or attrs["transpose_a"] or (ttype(op.operands[0]).rank or 0) < 2:
                continue
        elif attrs["padding"] == "SAME":
            continue
        wname = w.owner.attributes.get("weight")  # type: ignore[union-attr]
        if isinstance(wname, b.StringAttr) and wname.data in exclude:
            continue
        channels = value.shape[weight_axis(op)]
        out.append(Target(op, op.operands[0], _epilogue_end(gm, op, channels)))
    return out


def _pool_inputs(gm: GraphModule) -> list[SSAValue]:
    """The float32 tensors that pooling ops of ``@main`` read."""
    return [op.operands[0] for op in gm.function("main").body.block.ops
            if op.name in POOLS and _is_f32(op.operands[0])]


def activations(gm: GraphModule, found: Sequence[Target]) -> list[SSAValue]:
    """The activation tensors to calibrate, once each: each target's input and output, and
    the input of each pooling op when there are targets (so a residual sum before a global
    pool is quantized too, and its add can fold into the convolution making it)."""
    seen: dict[SSAValue, None] = {}
    for t in found:
        seen.setdefault(t.x)
        seen.setdefault(t.out)
    if found:
        for v in _pool_inputs(gm):
            seen.setdefault(v)
    return list(seen)


def observer(gm: GraphModule, values: Sequence[SSAValue]) -> GraphModule:
    """A copy of ``gm`` whose ``@main`` returns its outputs and then ``values`` (values of
    ``gm``'s ``@main``), as a tuple."""
    module = gm.module.clone()
    main, copy = gm.function("main"), GraphModule(module).function("main")
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(main.body.block.args, copy.body.block.args, strict=True))
    for a, c in zip(main.body.block.ops, copy.body.block.ops, strict=True):
        mapping.update(zip(a.results, c.results, strict=True))
    ret = copy.body.block.last_op
    assert isinstance(ret, ReturnOp)
    n = len(ret.operands)
    new_ret = ReturnOp(*ret.operands, *[mapping[v] for v in values])
    copy.body.block.insert_op_before(new_ret, ret)
    ret.detach()
    ret.erase()
    copy.function_type = b.FunctionType.from_lists(
        list(copy.function_type.inputs.data), [v.type for v in new_ret.operands])
    names = [f"output_{i}" for i in range(n)] + [f"observed_{i}" for i in range(len(values))]
    copy.attributes["tg.output_names"] = b.ArrayAttr([b.StringAttr(s) for s in names])
    copy.attributes["tg.structure"] = b.StringAttr("tuple")
    sig = dataclasses.replace(gm.signature, outputs=signature_of(module).outputs,
                              structure="tuple")
    return GraphModule(module, dict(gm.weights), sig, gm.variables, gm.zero_fill)


# -- parameters -------------------------------------------------------------------------------

def activation_params(lo: float, hi: float) -> tuple[np.float32, np.uint8]:
    """u8 asymmetric (scale, zero point) of the range ``[lo, hi]`` (widened to hold 0)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0
    if not scale > 0 or not math.isfinite(scale):
        return np.float32(1.0), np.uint8(0)
    zp = int(np.clip(np.rint(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zp)


def weight_params(w: np.ndarray, axis: int | None) -> tuple[np.ndarray, np.ndarray]:
    """s8 symmetric ``(quantized weight, scale)``: one scale along ``axis`` (None: one for the
    tensor); an all-zero channel gets scale 1."""
    if axis is None:
        amax = np.asarray(np.max(np.abs(w)), np.float64)
    else:
        others = tuple(d for d in range(w.ndim) if d != axis)
        amax = np.max(np.abs(w), axis=others).astype(np.float64)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    q = np.clip(np.rint(w / scale.reshape(shape).astype(np.float64)), -127, 127)
    return q.astype(np.int8), scale


def weight_axis(op: Operation) -> int:
    """The output-channel axis of a conv2d filter / matmul weight."""
    attrs = attrs_of(op)
    rank = ttype(op.operands[1]).rank or 2
    if op.name == "tg.conv2d":
        return 0 if attrs["layout"] == "NCHW" else 3
    return rank - 2 if attrs["transpose_b"] else rank - 1


# -- inserting QDQ ----------------------------------------------------------------------------

class _Inserter:
    """Inserts constants, quantize and dequantize ops into ``@main``."""

    def __init__(self, gm: GraphModule) -> None:
        self.gm = gm
        self.block = gm.function("main").body.block
        self.done: dict[SSAValue, SSAValue] = {}

    def _after(self, v: SSAValue) -> Operation | None:
        """The op to insert after to define something right after ``v`` (None: block start)."""
        return v.owner if isinstance(v.owner, Operation) else None

    def _put(self, ops: Sequence[Operation], anchor: Operation | None) -> None:
        if anchor is None:
            first = self.block.first_op
            assert first is not None
            for op in ops:
                self.block.insert_op_before(op, first)
        else:
            self.block.insert_ops_after(list(ops), anchor)

    def const(self, arr: np.ndarray, hint: str) -> Operation:
        return make_constant(self.gm, arr, hint)

    def qdq(self, v: SSAValue, scale: np.float32, zp: np.uint8) -> SSAValue:
        """Quantize ``v`` and dequantize it back; every user of ``v`` reads the result."""
        if v in self.done:
            return self.done[v]
        s, z = self.const(np.asarray(scale), "scale"), self.const(np.asarray(zp), "zero_point")
        q = new_op(self.gm, "quantize_linear", [v, s.results[0], z.results[0]], {})
        dq = new_op(self.gm, "dequantize_linear", [q.results[0], s.results[0], z.results[0]],
                    {})
        return self._reroute(v, [s, z, q, dq])

    def _reroute(self, v: SSAValue, ops: Sequence[Operation]) -> SSAValue:
        """Insert ``ops`` (ending in the dequantize; the one before it reads ``v``) right after
        ``v``'s definition; every other user of ``v`` now reads the dequantized value."""
        self._put(ops, self._after(v))
        out, reader = ops[-1].results[0], ops[-2]
        for use in list(v.uses):
            if use.operation is not reader:
                use.operation.operands[use.index] = out
        self.done[v] = out
        return out

    def weight(self, op: Operation, per_channel: bool) -> None:
        """``op``'s weight (operand 1, a float constant) read as s8 through a dequantize."""
        w = np.asarray(const_value(self.gm, op.operands[1]))
        axis = weight_axis(op) if per_channel else None
        q, scale = weight_params(w, axis)
        zp = np.zeros(scale.shape, np.int8)
        qc = self.const(q, "qweight")
        sc, zc = self.const(scale, "wscale"), self.const(zp, "wzero_point")
        attrs = {} if axis is None else {"axis": axis}
        dq = new_op(self.gm, "dequantize_linear", [qc.results[0], sc.results[0], zc.results[0]],
                    attrs)
        self.block.insert_ops_before([qc, sc, zc, dq], op)
        op.operands[1] = dq.results[0]


def insert_static(gm: GraphModule, found: Sequence[Target],
                  ranges: dict[SSAValue, tuple[float, float]], per_channel: bool) -> None:
    """QDQ pairs on every activation tensor of ``found`` (u8, parameters from ``ranges``), the
    weights as s8 constants through a dequantize."""
    ins = _Inserter(gm)
    # a max pool's result keeps its (quantized) input's parameters: the pool then runs on the
    # codes and needs no requantization (see _max_pools_in_u8)
    same = {v: v.owner.operands[0] for v in ranges  # before any use is rewritten
            if isinstance(v.owner, Operation) and v.owner.name == "tg.max_pool2d"
            and v.owner.operands[0] in ranges}

    def params(v: SSAValue) -> tuple[np.float32, np.uint8]:
        return activation_params(*ranges[same.get(v, v)])

    pools = _pool_inputs(gm)
    for t in found:
        ins.qdq(t.x, *params(t.x))
        ins.qdq(t.out, *params(t.out))
        ins.weight(t.op, per_channel)
    for v in pools:
        if v in ranges:
            ins.qdq(v, *params(v))
    _max_pools_in_u8(gm)
    _drop_requantize(gm)
    refresh_types(gm)


def _drop_requantize(gm: GraphModule) -> None:
    """``quantize_linear(dequantize_linear(q, s, z), s, z)`` (per tensor, the same values and
    result type) is ``q`` itself: its users read ``q``."""
    for op in list(gm.function("main").body.block.ops):
        dq = op.operands[0].owner if op.name == "tg.quantize_linear" else None
        if not isinstance(dq, Operation) or dq.name != "tg.dequantize_linear":
            continue
        if len(op.operands) != 3 or len(dq.operands) != 3:
            continue
        if ttype(dq.operands[0]) != ttype(op.results[0]):
            continue
        same = all(
            (a := const_value(gm, x)) is not None and (c := const_value(gm, y)) is not None
            and a.size == 1 and c.size == 1 and a.reshape(()) == c.reshape(())
            for x, y in zip(op.operands[1:], dq.operands[1:], strict=True))
        if same:
            _replace_erasing(op, dq.operands[0], dq)


def _max_pools_in_u8(gm: GraphModule) -> None:
    """``max_pool2d(dequantize_linear(q, s, z))`` (per-tensor ``s, z``) becomes
    ``dequantize_linear(max_pool2d(q), s, z)``: the maximum commutes with the increasing
    dequantization and a u8 pad (0, the smallest code) never wins a window holding an element,
    so the pool runs on the codes and its result needs no quantize before the next int8 op."""
    block = gm.function("main").body.block
    for op in list(block.ops):
        dq = op.operands[0].owner if op.name == "tg.max_pool2d" else None
        if not isinstance(dq, Operation) or dq.name != "tg.dequantize_linear":
            continue
        scale = const_value(gm, dq.operands[1])
        if scale is None or scale.size != 1 or len(dq.operands) != 3:
            continue
        pool = new_op(gm, "max_pool2d", [dq.operands[0]], attrs_of(op), op.location)
        back = new_op(gm, "dequantize_linear", [pool.results[0], *dq.operands[1:]], {})
        block.insert_ops_before([pool, back], op)
        _replace_erasing(op, back.results[0], dq)


def _replace_erasing(op: Operation, value: SSAValue, dq: Operation) -> None:
    """Users of ``op``'s result read ``value``; ``op`` is erased, and ``dq`` too when nothing
    reads it any more."""
    op.results[0].replace_all_uses_with(value)
    op.detach()
    op.erase()
    if not dq.results[0].uses:
        dq.detach()
        dq.erase()


def insert_dynamic(gm: GraphModule, found: Sequence[Target], per_channel: bool) -> None:
    """Each matmul of ``found`` (with the bias add after it, if any, and an activation after
    that: a transformer's GELU) becomes a ``qmatmul_dynamic``: its input quantized per call,
    its weight s8 (per column if ``per_channel``), the activation in its epilogue."""
    for t in found:
        op = t.op
        if op.name != "tg.matmul":
            continue
        w = np.asarray(const_value(gm, op.operands[1]))
        axis = weight_axis(op) if per_channel else None
        q, scale = weight_params(w, axis)
        if attrs_of(op)["transpose_b"]:
            q = np.ascontiguousarray(q.T)
        bias = _bias_add(gm, op, q.shape[1])
        consts = [make_constant(gm, q, "qweight"),
                  make_constant(gm, scale.reshape(-1), "wscale")]
        if bias is not None:
            consts.append(make_constant(gm, bias[1].reshape(-1), "bias"))
        last = op if bias is None else bias[0]
        act = single_use(last.results[0])  # an activation after it joins the epilogue
        attrs: dict[str, Any] = {"epilogue_operands": (int(bias is not None), 0)}
        if act is not None and act.name in ACTIVATIONS:
            attrs.update(activation_attrs(act))
        else:
            act = None
        # (the matmul's input now, not t.x: an earlier target's activation, which its
        # qmatmul_dynamic absorbed, may have produced it)
        new = new_op(gm, "qmatmul_dynamic", [op.operands[0], *(c.results[0] for c in consts)],
                     attrs, op.location)
        block = op.parent_block()
        assert block is not None
        block.insert_ops_before([*consts, new], op)
        chain = [op] + ([bias[0]] if bias is not None else []) + ([act] if act else [])
        chain[-1].results[0].replace_all_uses_with(new.results[0])
        for dead in reversed(chain):
            dead.detach()
            dead.erase()
    refresh_types(gm)
