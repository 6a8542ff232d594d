"""``-tg-layout-nhwc``: NCHW convolutions and pooling rewritten to NHWC, transposes sunk and
cancelled.

ONNX models (and TF graphs converted by tf2onnx) are NCHW; the CPU backend's fast convolution
path (oneDNN's primitive, ``docs/kernels.md``) runs NHWC only.  In every function holding an
NCHW ``conv2d``, ``conv2d_transpose``, ``max_pool2d``, ``avg_pool2d``, ``global_avg_pool``,
``global_max_pool``, ``qconv2d`` or ``qglobal_avg_pool`` (:data:`TRIGGER_OPS`), the pass walks
the ops once in program order and

1. rewrites each such op, and each NCHW ``resize``, ``depth_to_space`` and
   ``space_to_depth`` (:data:`LAYOUT_OPS`), to ``layout = "NHWC"`` between two
   transposes: ``transpose(op_nhwc(transpose(x, [0, 2, 3, 1])), [0, 3, 1, 2])``; a constant
   filter is re-laid out at compile time (OIHW -> HWIO; ``conv2d_transpose``: IOHW -> HWOI), a
   non-constant one gets a transpose, a fused residual is transposed like ``x``, a fused 1-D
   bias (and ``qconv2d``'s weight scales) is kept;
2. sinks every transpose ``t = transpose(x, p)`` into the op that uses it when that op is
   layout-agnostic, by rewriting ``op(t, ...)`` as ``transpose(op'(x, ...), q)``:

   * ``quantize_linear`` / ``dequantize_linear`` with per-tensor (one-element) scale and zero
     point: elementwise;
   * elementwise ops (``add``, ``mul``, activations, ``select``, ...): the other operands are
     transposes by the same ``p`` (their inputs are used), constants (re-laid out at compile
     time, after NumPy's right-aligned broadcasting), scalars, or values of full rank, which
     get the inverse transpose -- one per value, placed after its definition and shared (the
     residual add of a model's input reuses the transpose the first conv made);
   * axis ops: ``softmax``, ``log_softmax``, ``lrn``, ``cumsum``, ``batch_norm`` (``axis`` ->
     ``p[axis]``), ``l2_normalize``; reductions ``reduce_*``, ``argmax``/``argmin`` and
     ``squeeze`` (axes remapped; the dims that remain keep ``x``'s order, so ``q`` is what is
     left of ``p`` -- often the identity, then no transpose is emitted);
   * ``concat`` (operands as for elementwise ops, all of full rank; ``axis`` remapped), ``split``
     (each result transposed), ``pad`` with attribute pads (remapped per dim);
   * ``reshape`` when ``t`` does not move data: the dims of ``x`` that may be larger than 1
     keep their order under ``p`` (global pooling's ``[N, 1, 1, C]`` before a flatten), so
     ``reshape(t, s) == reshape(x, s)``; a general reshape keeps the transpose;

3. composes ``transpose(transpose(x, p), q)`` into one transpose, or into ``x`` when it is the
   identity -- the inverse pairs at the boundary of two NHWC ops cancel, as do the
   NHWC -> NCHW transposes tf2onnx puts at the input of a Keras model.

A ResNet-50, MobileNetV3 or EfficientNet-B0 from ONNX ends with one transpose at its input and
none inside.  Transposes no longer used are erased; so is each old filter constant, with its
weight, as soon as its transposed copy replaced its last use (the pass never holds two copies
of every filter).  The pass runs in the default pipeline before ``-tg-fuse-epilogue`` (it expects no
``fused_elementwise`` regions; it does accept conv2d ops with fused epilogues).  Functions
without an NCHW layout op are left untouched.  ``docs/compiler.md`` shows an example.

Not thread-safe (one pass at a time per module); raises ``GraphError`` only for a module that
is malformed already.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    functions,
    make_constant,
    new_op,
    replace,
    ttype,
)

TO_NHWC = (0, 2, 3, 1)
"""The permutation taking an NCHW value to NHWC."""
TO_NCHW = (0, 3, 1, 2)
"""The permutation taking an NHWC value to NCHW."""
OIHW_TO_HWIO = (2, 3, 1, 0)
"""The permutation taking an OIHW filter to HWIO."""

TRIGGER_OPS = ("tg.conv2d", "tg.conv2d_transpose", "tg.max_pool2d", "tg.avg_pool2d",
               "tg.global_avg_pool", "tg.global_max_pool", "tg.qconv2d", "tg.qglobal_avg_pool")
"""NCHW ops that make the pass rewrite a function (their NHWC kernels are the fast ones)."""
LAYOUT_OPS = (*TRIGGER_OPS, "tg.resize", "tg.depth_to_space", "tg.space_to_depth")
"""Ops with a ``layout`` attribute the pass turns from NCHW to NHWC (in a function it
rewrites: a lone NCHW ``resize`` gains nothing from two transposes)."""

_QUANT_OPS = ("tg.quantize_linear", "tg.dequantize_linear")
_AXIS_OPS = ("tg.softmax", "tg.log_softmax", "tg.lrn", "tg.cumsum", "tg.batch_norm")
_DROP_OPS = ("tg.reduce_sum", "tg.reduce_mean", "tg.reduce_max", "tg.reduce_min",
             "tg.reduce_prod", "tg.reduce_any", "tg.reduce_all", "tg.argmax", "tg.argmin",
             "tg.squeeze")

Perm = tuple[int, ...]


def _inverse(p: Sequence[int]) -> Perm:
    inv = [0] * len(p)
    for i, a in enumerate(p):
        inv[a] = i
    return tuple(inv)


def _transposed_by(v: SSAValue) -> tuple[SSAValue, Perm] | None:
    """``(x, p)`` if ``v = transpose(x, p)``."""
    op = v.owner
    if isinstance(op, Operation) and op.name == "tg.transpose":
        return op.operands[0], tuple(attrs_of(op)["perm"])
    return None


def _moves_no_data(shape: Sequence[int | None] | None, p: Sequence[int]) -> bool:
    """Whether ``transpose(x, p)`` of a value of ``shape`` keeps every element at its flat
    index: the dims that may be larger than 1 appear in the same order."""
    if shape is None:
        return False
    order = [a for a in p if shape[a] != 1]
    return order == sorted(order)


def _same_shape(a: Sequence[int | None] | None, b: Sequence[int | None] | None) -> bool:
    """Whether a reshape from ``a`` to ``b`` is the identity (equal shapes, at most one
    dynamic dim, which the element count then fixes)."""
    return a is not None and b is not None and tuple(a) == tuple(b) and \
        sum(d is None for d in a) <= 1


class _Rewriter:
    """The program-order walk over one function (see the module docstring)."""

    def __init__(self, gm: GraphModule) -> None:
        self.gm = gm
        self.made: dict[tuple[SSAValue, Perm], SSAValue] = {}
        """Transposes of non-constant values made by the pass (placed right after the value's
        definition, so every later op may use them): one per value and permutation."""
        self.weight_refs: dict[str, int] = {}
        """Per weight name, the constants of the module naming it."""
        for f in functions(gm):
            for op in f.body.block.ops:
                w = op.attributes.get("weight") if op.name == "tg.constant" else None
                if isinstance(w, StringAttr):
                    self.weight_refs[w.data] = self.weight_refs.get(w.data, 0) + 1

    def drop_if_dead(self, v: SSAValue) -> None:
        """Erase the ``tg.constant`` defining ``v`` once nothing uses it, and its weight once
        no constant names it: a replaced filter is freed before the next is transposed."""
        op = v.owner
        if not isinstance(op, Operation) or op.name != "tg.constant" or v.uses:
            return
        w = op.attributes.get("weight")
        op.detach()
        op.erase()
        if isinstance(w, StringAttr):
            left = self.weight_refs.get(w.data, 1) - 1
            self.weight_refs[w.data] = left
            if left <= 0:
                self.gm.weights.pop(w.data, None)

    # -- building blocks ------------------------------------------------------------------
    def permuted(self, v: SSAValue, perm: Sequence[int], before: Operation) -> SSAValue:
        """``transpose(v, perm)``, composed with a transpose defining ``v``, folded for a
        constant, or ``v`` itself for the identity; new ops go before ``before``."""
        perm = tuple(perm)
        inner = _transposed_by(v)
        if inner is not None:
            v, q = inner
            perm = tuple(q[a] for a in perm)
        if perm == tuple(range(len(perm))):
            return v
        c = const_value(self.gm, v)
        if c is not None:
            w = v.owner.attributes.get("weight") if isinstance(v.owner, Operation) else None
            hint = f"{w.data}/nhwc" if isinstance(w, StringAttr) else "nhwc"
            return self.permuted_const(c, perm, before, hint)
        key = (v, perm)
        if key not in self.made:
            new = new_op(self.gm, "transpose", [v], {"perm": perm}, before.location)
            owner = v.owner
            if isinstance(owner, Operation):
                block = owner.parent_block()
                assert block is not None
                block.insert_op_after(new, owner)
            else:
                block = before.parent_block()
                assert block is not None and block.first_op is not None
                block.insert_op_before(new, block.first_op)
            self.made[key] = new.results[0]
        return self.made[key]

    def rebuild(self, op: Operation, operands: list[SSAValue], attrs: dict[str, Any],
                out_perms: Sequence[Perm | None]) -> None:
        """Replace ``op`` by ``op.name(operands, attrs)`` whose result ``i`` is transposed by
        ``out_perms[i]`` (``None``: used as is)."""
        new = new_op(self.gm, op.name[3:], operands, attrs, op.location)
        block = op.parent_block()
        assert block is not None
        block.insert_op_before(new, op)
        results = []
        for r, p in zip(new.results, out_perms, strict=True):
            results.append(r if p is None else self.permuted(r, p, op))
        old_operands = list(op.operands)
        replace(op, results)
        for v in old_operands:
            self.drop_if_dead(v)

    # -- 1. layout ops --------------------------------------------------------------------
    def to_nhwc(self, op: Operation) -> None:
        attrs = dict(attrs_of(op), layout="NHWC")
        operands = [self.permuted(op.operands[0], TO_NHWC, op)]
        if op.name == "tg.conv2d_transpose":  # IOHW -> HWOI: the same permutation
            operands.append(self.permuted(op.operands[1], OIHW_TO_HWIO, op))
        if op.name in ("tg.conv2d", "tg.qconv2d"):
            operands.append(self.permuted(op.operands[1], OIHW_TO_HWIO, op))
            n_fixed = 3 if op.name == "tg.qconv2d" else 2  # qconv2d: + the weight scales
            operands += op.operands[2:n_fixed]
            flags = attrs["epilogue_operands"]
            extra = list(op.operands[n_fixed:])
            if flags[0]:
                operands.append(extra.pop(0))  # the bias is 1-D: layout-free
            if flags[1]:
                operands.append(self.permuted(extra.pop(0), TO_NHWC, op))
        self.rebuild(op, operands, attrs, [TO_NCHW])

    # -- 2. sinking transposes ------------------------------------------------------------
    def sink(self, op: Operation) -> bool:
        """Rewrite ``op`` if an operand is a transpose it can absorb; whether it did."""
        found = [_transposed_by(v) for v in op.operands]
        lead = next((f for f in found if f is not None), None)
        if lead is None:
            return False
        x, p = lead
        rank = len(p)
        attrs = attrs_of(op)
        name = op.name
        opdef = get_opdef(name)
        if opdef.elementwise and opdef.family == "elementwise":
            return self._elementwise(op, p, attrs)
        if found[0] is None or found[0][1] != p:
            return False
        if name in _QUANT_OPS:  # per-tensor (de)quantization is elementwise
            if any(ttype(v).shape is None or any(d != 1 for d in ttype(v).shape or ())
                   for v in op.operands[1:]):
                return False
            self.rebuild(op, [x, *op.operands[1:]], attrs, [p])
            return True
        if name in _AXIS_OPS:
            attrs["axis"] = p[attrs["axis"] % rank]
            self.rebuild(op, [x, *op.operands[1:]], attrs, [p])
            return True
        if name == "tg.l2_normalize":
            attrs["axis"] = tuple(p[a % rank] for a in attrs["axis"])
            self.rebuild(op, [x], attrs, [p])
            return True
        if name in _DROP_OPS:
            return self._drop_dims(op, x, p, attrs)
        if name == "tg.pad" and len(op.operands) == 1:
            pads = attrs["pads"]
            if len(pads) != 2 * rank:
                return False
            inv = _inverse(p)
            attrs["pads"] = tuple(pads[inv[a]] for a in range(rank)) + tuple(
                pads[rank + inv[a]] for a in range(rank))
            self.rebuild(op, [x], attrs, [p])
            return True
        if name == "tg.split":
            attrs["axis"] = p[attrs["axis"] % rank]
            self.rebuild(op, [x], attrs, [p] * len(op.results))
            return True
        if name == "tg.concat":
            return self._concat(op, p, attrs)
        if name == "tg.reshape" and _same_shape(ttype(op.operands[0]).shape,
                                                ttype(op.results[0]).shape):
            replace(op, [op.operands[0]])  # a no-op reshape: let the transpose sink on
            return True
        if name == "tg.reshape" and (len(op.operands) == 1 or not attrs["copy_zero"]):
            if not _moves_no_data(ttype(x).shape, p):
                return False
            self.rebuild(op, [x, *op.operands[1:]], attrs, [None])
            return True
        return False

    def _elementwise(self, op: Operation, p: Perm, attrs: dict[str, Any]) -> bool:
        if ttype(op.results[0]).rank != len(p):
            return False
        operands = self._pulled(op, p, broadcast=True)
        if operands is None:
            return False
        self.rebuild(op, operands, attrs, [p])
        return True

    def _pulled(self, op: Operation, p: Perm, broadcast: bool) -> list[SSAValue] | None:
        """``op``'s operands for the rewritten op (see the module docstring), or ``None``:
        transposes by ``p`` give their inputs, other full-rank values the inverse transpose;
        with ``broadcast`` also lower-rank constants (aligned right) and scalars."""
        rank = len(p)
        inv = _inverse(p)
        operands: list[SSAValue] = []
        for v in op.operands:
            t = _transposed_by(v)
            if t is not None and t[1] == p:
                operands.append(t[0])
                continue
            r = ttype(v).rank
            c = const_value(self.gm, v) if broadcast else None
            if c is not None and c.ndim <= rank:
                if c.size == 1 and c.ndim <= 1:
                    operands.append(v)
                    continue
                aligned = c.reshape((1,) * (rank - c.ndim) + c.shape)
                operands.append(self.permuted_const(aligned, inv, op))
            elif broadcast and r == 0:
                operands.append(v)
            elif r == rank:  # a plain operand: transposed the other way (once per value)
                operands.append(self.permuted(v, inv, op))
            else:
                return None
        return operands

    def permuted_const(self, c: np.ndarray, perm: Perm, before: Operation,
                       hint: str = "nhwc") -> SSAValue:
        """A new constant ``transpose(c, perm)`` before ``before`` (a weight named after
        ``hint`` when large)."""
        block = before.parent_block()
        assert block is not None
        new = make_constant(self.gm, np.ascontiguousarray(np.transpose(c, perm)), hint)
        block.insert_op_before(new, before)
        return new.results[0]

    def _drop_dims(self, op: Operation, x: SSAValue, p: Perm, attrs: dict[str, Any]) -> bool:
        rank = len(p)
        if op.name == "tg.squeeze":
            axes = tuple(attrs["axes"])
            keep = False
            if not axes:
                return False
        elif op.name in ("tg.argmax", "tg.argmin"):
            axes, keep = (attrs["axis"],), attrs["keepdims"]
        else:
            axes, keep = tuple(attrs["axes"]), attrs["keepdims"]
        if not axes:  # every axis: the result does not depend on the order
            self.rebuild(op, [x], attrs, [None])
            return True
        dropped = {a % rank for a in axes}
        new_axes = tuple(sorted(p[a] for a in dropped))
        if op.name in ("tg.argmax", "tg.argmin"):
            attrs["axis"] = new_axes[0]
        else:
            attrs["axes"] = new_axes
        if keep:
            q: Perm = p
        else:
            kept = [p[k] for k in range(rank) if k not in dropped]
            order = sorted(kept)
            q = tuple(order.index(a) for a in kept)
        self.rebuild(op, [x], attrs, [q])
        return True

    def _concat(self, op: Operation, p: Perm, attrs: dict[str, Any]) -> bool:
        operands = self._pulled(op, p, broadcast=False)
        if operands is None:
            return False
        attrs["axis"] = p[attrs["axis"] % len(p)]
        self.rebuild(op, operands, attrs, [p])
        return True

    # -- the walk -------------------------------------------------------------------------
    def run(self, ops: list[Operation]) -> None:
        for op in ops:
            if op.parent is None or not op.name.startswith("tg.") or op.name == "tg.transpose":
                continue
            if op.name in LAYOUT_OPS and attrs_of(op)["layout"] == "NCHW":
                if ttype(op.operands[0]).rank == 4:
                    self.to_nhwc(op)
                continue
            if op.results and all(ttype(r).rank is not None for r in op.results):
                self.sink(op)


def _has_nchw(ops: list[Operation]) -> bool:
    return any(op.name in TRIGGER_OPS and attrs_of(op)["layout"] == "NCHW" for op in ops)


def _erase_dead_transposes(ops: list[Operation]) -> None:
    for op in reversed(ops):
        if op.name == "tg.transpose" and op.parent is not None and not op.results[0].uses:
            op.detach()
            op.erase()


def layout_nhwc(gm: GraphModule) -> GraphModule:
    """Run the pass in place; returns ``gm``."""
    for f in functions(gm):
        ops = list(f.body.block.ops)
        if not _has_nchw(ops):
            continue
        _Rewriter(gm).run(ops)
        _erase_dead_transposes(list(f.body.block.ops))
    return gm
