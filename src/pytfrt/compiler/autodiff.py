"""Reverse-mode automatic differentiation on the graph dialect.

:func:`vjp` reads the ops of a function being built (a
:class:`~pytfrt.compiler.builder.FunctionBuilder`'s block of ``tg.*`` ops), finds those on a path
from the differentiated values to the output, and appends their vector-Jacobian products -- more
catalogue ops, emitted through the same builder -- in reverse order. Each differentiable op has one
rule, on its ``OpDef`` (``grad``; the tables :data:`VJP_RULES` and :data:`MULTI_VJP_RULES` are
derived from the catalogue, and the non-elementwise ops' rules are written in
:mod:`pytfrt.compiler.ops.grad_rules`, the elementwise ops' in their ``op_math`` records); the
rules reuse the catalogue's gradient ops where they fit (``relu_grad``, ``relu6_grad``,
``sigmoid_grad``, ``tanh_grad``, ``gelu_grad``, the conv2d backprops). Broadcasting is undone by
summing over the broadcast axes (static shapes are required); every gather (``gather``,
``gather_nd``, ``gather_elements``, ``top_k``) is transposed by a ``scatter_elements`` that adds
(repeated indices add up).

Ops with several results (``split``, ``identity_n``, ``top_k``) have their rule in
``OpDef.grad_multi`` (:data:`MULTI_VJP_RULES`), and so have the gradient ops that are
differentiated by re-emitting them as the catalogue ops they are made of (``gelu_grad``,
``layer_norm_grad``, ``batch_norm_grad``, the cross-entropy ops): second-order gradients. Every
catalogue op is in exactly one of: a rule, :data:`NON_DIFFERENTIABLE` (non-float values carry no
gradient; integer, boolean and piecewise-constant ops such as comparisons, ``floor``, ``argmax``
stop it), or :data:`NO_RULE` (deliberate exceptions, each with its reason in ``OpDef.no_grad``);
``tests/unit/test_autodiff_catalogue.py`` enumerates the catalogue to keep it so. An op without a
rule on a differentiated path raises :class:`AutodiffError` naming the op, its source location and
the reason.

Control flow (``tg.if``, ``tg.case``, ``tg.while``) has rules of its own in
:mod:`pytfrt.compiler.autodiff_control`: they build gradient functions of the module and
differentiate the bodies with :func:`backprop`.

:func:`pytfrt.compiler.autodiff_control.value_and_grad_traced` is what ``pytfrt.value_and_grad``
runs inside a trace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import builtin as b
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.attrs import from_xattr
from pytfrt.compiler.builder import FunctionBuilder, Value
from pytfrt.compiler.ops import CATALOGUE, get_opdef
from pytfrt.compiler.ops.grad_rules import AutodiffError, _norm_axes, _static
from pytfrt.compiler.types import FLOAT_DTYPES, from_xdsl, np_dtype

__all__ = ["MULTI_VJP_RULES", "NON_DIFFERENTIABLE", "NO_RULE", "VJP_RULES", "AutodiffError",
           "CONTROL_RULES", "backprop", "vjp"]


class _Ctx:
    """What a rule sees: the op's operands, results, attributes and an emitter."""

    def __init__(self, fb: FunctionBuilder, op: Operation, name: str,
                 active: set[SSAValue] | None = None) -> None:
        self.fb = fb
        self.name = name
        self.operation = op
        self.active: set[SSAValue] = active if active is not None else set()
        self.x = [Value(v, from_xdsl(v.type)) for v in op.operands]
        self.y = [Value(v, from_xdsl(v.type)) for v in op.results]
        opdef = get_opdef(name)
        self.attrs: dict[str, Any] = {}
        for k, spec in opdef.attrs.items():
            attr = op.attributes.get(k)
            if attr is not None:
                self.attrs[k] = from_xattr(spec.kind, attr, f"tg.{name}")
            else:
                self.attrs[k] = spec.default
        self.loc = _loc(op)

    def op(self, name: str, *inputs: Value, **attrs: Any) -> Value:
        return self.fb.op(name, list(inputs), loc=self.loc, **attrs)  # type: ignore[no-any-return]

    def backprop(self, ops: Sequence[Operation], wrt: Sequence[Value],
                 outputs: Sequence[tuple[Value, Value | None]]) -> list[Value]:
        """:func:`backprop` in this function (for rules that re-emit an op as others)."""
        return backprop(self.fb, ops, wrt, outputs)

    def const(self, value: float, like: Value) -> Value:
        return self.fb.constant(np.asarray(value, np_dtype(like.dtype)))

    def mul(self, a: Value, c: Value | float) -> Value:
        if not isinstance(c, Value):
            c = self.const(c, a)
        return self.op("mul", a, c)

    def unbroadcast(self, g: Value, like: Value) -> Value:
        """``g`` summed down to ``like``'s shape (undoing NumPy broadcasting)."""
        gs, ts = _static(g, self.name), _static(like, self.name)
        if gs == ts:
            return g
        lead = len(gs) - len(ts)
        axes = list(range(lead)) + [i + lead for i, d in enumerate(ts)
                                    if d == 1 and gs[i + lead] != 1]
        if axes:
            g = self.op("reduce_sum", g, axes=axes, keepdims=False)
        if _static(g, self.name) != ts:
            g = self.op("reshape", g, shape=list(ts))
        return g

    def broadcast_back(self, g: Value, x: Value, axes: Sequence[int], keepdims: bool) -> Value:
        """A reduction's cotangent ``g`` broadcast back to ``x``'s shape."""
        xs = _static(x, self.name)
        red = _norm_axes(axes, len(xs))
        if not keepdims:
            kept = [1 if i in red else d for i, d in enumerate(xs)]
            g = self.op("reshape", g, shape=kept)
        return self.op("broadcast_to", g, self.fb.constant(np.asarray(xs, np.int64)))


def _loc(op: Operation) -> str:
    loc = getattr(op, "location", None)
    if isinstance(loc, b.NameLoc) and isinstance(loc.parameters[0], b.StringAttr):
        return loc.parameters[0].data
    return "autodiff"


Rule = Callable[[_Ctx, Value], list[Value | None]]


MultiRule = Callable[[_Ctx, list[Value | None]], list[Value | None]]

VJP_RULES: dict[str, Rule] = {name: d.grad for name, d in CATALOGUE.items() if d.grad is not None}
"""Catalogue op name -> its vector-Jacobian product rule: the ``grad`` of the op's
:class:`~pytfrt.compiler.ops.OpDef` (an elementwise op's from its ``op_math`` record, the others
from :mod:`pytfrt.compiler.ops.grad_rules`, given where the op is defined)."""

MULTI_VJP_RULES: dict[str, MultiRule] = {
    name: d.grad_multi for name, d in CATALOGUE.items() if d.grad_multi is not None}
"""Catalogue op name -> the rule of an op with several results (``OpDef.grad_multi``: a
cotangent per result, ``None`` for results the output does not depend on), and of the gradient
ops differentiated through their expansion."""


NON_DIFFERENTIABLE = frozenset(name for name, d in CATALOGUE.items() if not d.differentiable)
"""Ops whose outputs carry no gradient (integer-valued, boolean, piecewise constant or random
samples): their ``OpDef`` says ``differentiable=False``."""

NO_RULE: dict[str, str] = {name: d.no_grad for name, d in CATALOGUE.items() if d.no_grad}
"""Ops without a gradient rule, deliberately: name -> the reason, their ``OpDef.no_grad`` (the
:class:`AutodiffError` raised when one is on a differentiated path says it)."""


# -- the transformation ---------------------------------------------------------------------------


def vjp(fb: FunctionBuilder, wrt: Sequence[Value], output: Value,
        seed: Value | None = None) -> list[Value]:
    """Append to ``fb`` the gradient of ``output`` with respect to each of ``wrt``.

    Args:
        fb: the function holding the ops from ``wrt`` to ``output``.
        wrt: values of ``fb`` (each gets a result, zeros if ``output`` does not depend on it).
        output: the value differentiated.
        seed: the output's cotangent (default: ones of its type).

    Raises:
        AutodiffError: an op on the path without a rule.
    """
    return backprop(fb, list(fb.block.ops), wrt, [(output, seed)])


def backprop(fb: FunctionBuilder, ops: Sequence[Operation], wrt: Sequence[Value],
             outputs: Sequence[tuple[Value, Value | None]]) -> list[Value]:
    """Reverse mode over ``ops`` (ops of ``fb``, in program order), emitting into ``fb``.

    Args:
        fb: the function the ops belong to; the gradient ops are appended to it.
        ops: the forward ops to consider (the others are constants of the differentiation).
        wrt: the values differentiated against (distinct SSA values).
        outputs: ``(value, cotangent)`` pairs; a ``None`` cotangent means ones.  The same value
            may appear several times (the cotangents add up).

    Returns:
        Per ``wrt`` value its gradient (zeros where no output depends on it).

    Raises:
        AutodiffError: an op on the path without a rule, or with dynamic shapes.
    """
    active: set[SSAValue] = {v.ssa for v in wrt}
    tape: list[Operation] = []
    for op in ops:
        if any(o in active for o in op.operands):
            for r in op.results:
                if from_xdsl(r.type).dtype in FLOAT_DTYPES:
                    active.add(r)
            tape.append(op)
    cot: dict[SSAValue, Value] = {}

    def accumulate(v: SSAValue, g: Value, loc: str) -> None:
        prev = cot.get(v)
        cot[v] = g if prev is None else fb.op("add", [prev, g], loc=loc)

    for output, seed in outputs:
        if output.ssa in active:
            accumulate(output.ssa, seed if seed is not None else fb.constant(
                np.ones(tuple(output.shape or ()), np_dtype(output.dtype))), "autodiff")
    for op in reversed(tape):
        gs = [cot.get(r) for r in op.results]
        if all(g is None for g in gs):
            continue
        name = op.name.split(".", 1)[1]
        if name in NON_DIFFERENTIABLE:
            continue
        ctx = _Ctx(fb, op, name, active)
        multi = CONTROL_RULES.get(name) or MULTI_VJP_RULES.get(name)
        if multi is not None:
            grads = multi(ctx, gs)
        else:
            rule = VJP_RULES.get(name)
            if rule is None or len(op.results) != 1:
                why = NO_RULE.get(name)
                raise AutodiffError(f"tg.{name} is not differentiable by pytfrt.grad (at "
                                    f"{ctx.loc})" + (f": {why}" if why else ""))
            grads = rule(ctx, gs[0])  # type: ignore[arg-type]
        for operand, g in zip(op.operands, grads, strict=True):
            if g is not None and operand in active:
                accumulate(operand, g, ctx.loc)
    out = []
    for v in wrt:
        g = cot.get(v.ssa)
        if g is None:
            g = fb.constant(np.zeros(_static(v, "autodiff"), np_dtype(v.dtype)))
        out.append(g)
    return out


ControlRule = Callable[[_Ctx, list[Value | None]], list[Value | None]]


CONTROL_RULES: dict[str, ControlRule] = {}
"""Control-flow op name (``if``, ``case``, ``while``) -> its reverse-mode rule.  Filled by
:mod:`pytfrt.compiler.autodiff_control` when it is imported (registration by import: its rules
call :func:`backprop` on the bodies); :func:`pytfrt.value_and_grad` goes through that module."""
