"""Reverse-mode automatic differentiation on the graph dialect.

:func:`vjp` reads the ops of a function being built (a
:class:`~pytfrt.compiler.builder.FunctionBuilder`'s block of ``tg.*`` ops), finds those on a path
from the differentiated values to the output, and appends their vector-Jacobian products -- more
catalogue ops, emitted through the same builder -- in reverse order.  Each differentiable op has
one rule in :data:`VJP_RULES`; the rules reuse the catalogue's gradient ops where they fit
(``relu_grad``, ``relu6_grad``, ``sigmoid_grad``, ``tanh_grad``, ``gelu_grad``).  Broadcasting
is undone by summing over the broadcast axes (static shapes are required).

Non-float values carry no gradient; integer/boolean ops (comparisons, ``floor``, ``argmax``...)
stop it.  Ops without a rule raise :class:`AutodiffError` naming the op and its source location.
Control flow (``tg.if``, ``tg.while``) has rules of its own in
:mod:`pytfrt.compiler.autodiff_control`: they build gradient functions of the module and
differentiate the bodies with :func:`backprop`.

:func:`value_and_grad_traced` is what ``pytfrt.value_and_grad`` runs inside a trace.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import builtin as b
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.attrs import from_xattr
from pytfrt.compiler.builder import FunctionBuilder, Value
from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.types import FLOAT_DTYPES, from_xdsl, np_dtype

__all__ = ["VJP_RULES", "AutodiffError", "backprop", "value_and_grad_traced", "vjp"]


class AutodiffError(GraphError):
    """An op on the differentiated path has no gradient rule (or the output is not a scalar)."""


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


def _static(v: Value, name: str) -> tuple[int, ...]:
    if v.shape is None or any(d is None for d in v.shape):
        raise AutodiffError(f"tg.{name}: differentiation needs static shapes, got {v.type}")
    return tuple(int(d) for d in v.shape)  # type: ignore[arg-type]


def _norm_axes(axes: Sequence[int], rank: int) -> set[int]:
    if not axes:
        return set(range(rank))
    return {a % rank for a in axes}


Rule = Callable[[_Ctx, Value], list[Value | None]]


# -- rules ---------------------------------------------------------------------------------------


def _add(c: _Ctx, g: Value) -> list[Value | None]:
    return [c.unbroadcast(g, c.x[0]), c.unbroadcast(g, c.x[1])]


def _sub(c: _Ctx, g: Value) -> list[Value | None]:
    return [c.unbroadcast(g, c.x[0]), c.unbroadcast(c.op("neg", g), c.x[1])]


def _mul(c: _Ctx, g: Value) -> list[Value | None]:
    a, bb = c.x
    return [c.unbroadcast(c.op("mul", g, bb), a), c.unbroadcast(c.op("mul", g, a), bb)]


def _div(c: _Ctx, g: Value) -> list[Value | None]:
    a, bb = c.x
    ga = c.op("div", g, bb)
    gb = c.op("neg", c.op("mul", ga, c.y[0]))
    return [c.unbroadcast(ga, a), c.unbroadcast(gb, bb)]


def _pow(c: _Ctx, g: Value) -> list[Value | None]:
    a, e = c.x
    ga = c.op("mul", c.op("mul", g, e), c.op("pow", a, c.op("sub", e, c.const(1.0, e))))
    gb = c.op("mul", c.op("mul", g, c.y[0]), c.op("log", a))
    return [c.unbroadcast(ga, a), c.unbroadcast(gb, e)]


def _extremum(c: _Ctx, g: Value) -> list[Value | None]:
    a, bb = c.x
    pick_a = c.op("greater_equal" if c.name == "maximum" else "less_equal", a, bb)
    zero = c.const(0.0, g)
    return [c.unbroadcast(c.op("select", pick_a, g, zero), a),
            c.unbroadcast(c.op("select", pick_a, zero, g), bb)]


def _squared_difference(c: _Ctx, g: Value) -> list[Value | None]:
    a, bb = c.x
    d = c.mul(c.op("mul", g, c.op("sub", a, bb)), 2.0)
    return [c.unbroadcast(d, a), c.unbroadcast(c.op("neg", d), bb)]


def _unary(f: Callable[[_Ctx, Value, Value, Value], Value]) -> Rule:
    return lambda c, g: [f(c, g, c.x[0], c.y[0])]


_UNARY: dict[str, Callable[[_Ctx, Value, Value, Value], Value]] = {
    "neg": lambda c, g, x, y: c.op("neg", g),
    "identity": lambda c, g, x, y: g,
    "exp": lambda c, g, x, y: c.op("mul", g, y),
    "expm1": lambda c, g, x, y: c.op("mul", g, c.op("add", y, c.const(1.0, y))),
    "log": lambda c, g, x, y: c.op("div", g, x),
    "log1p": lambda c, g, x, y: c.op("div", g, c.op("add", x, c.const(1.0, x))),
    "sqrt": lambda c, g, x, y: c.op("div", g, c.mul(y, 2.0)),
    "rsqrt": lambda c, g, x, y: c.mul(c.op("mul", g, c.op("mul", y, c.op("square", y))), -0.5),
    "square": lambda c, g, x, y: c.op("mul", g, c.mul(x, 2.0)),
    "reciprocal": lambda c, g, x, y: c.op("neg", c.op("mul", g, c.op("square", y))),
    "abs": lambda c, g, x, y: c.op("mul", g, c.op("sign", x)),
    "tanh": lambda c, g, x, y: c.op("tanh_grad", y, g),
    "sigmoid": lambda c, g, x, y: c.op("sigmoid_grad", y, g),
    "relu": lambda c, g, x, y: c.op("relu_grad", g, x),
    "relu6": lambda c, g, x, y: c.op("relu6_grad", g, x),
    "gelu": lambda c, g, x, y: c.op("gelu_grad", g, x, approximate=c.attrs["approximate"]),
    "sin": lambda c, g, x, y: c.op("mul", g, c.op("cos", x)),
    "cos": lambda c, g, x, y: c.op("neg", c.op("mul", g, c.op("sin", x))),
    "softplus": lambda c, g, x, y: c.op("mul", g, c.op("sigmoid", x)),
    "erf": lambda c, g, x, y: c.op("mul", g, c.mul(c.op("exp", c.op("neg", c.op("square", x))),
                                                   2.0 / math.sqrt(math.pi))),
    "silu": lambda c, g, x, y: c.op("mul", g, _silu_d(c, x)),
    "clip": lambda c, g, x, y: c.op("select", c.op("logical_and", c.op(
        "greater_equal", x, c.const(c.attrs["min"], x)), c.op(
        "less_equal", x, c.const(c.attrs["max"], x))), g, c.const(0.0, g)),
    "cast": lambda c, g, x, y: c.op("cast", g, to=x.dtype),
}


def _silu_d(c: _Ctx, x: Value) -> Value:
    s = c.op("sigmoid", x)
    one_minus = c.op("sub", c.const(1.0, s), s)
    return c.op("mul", s, c.op("add", c.const(1.0, x), c.op("mul", x, one_minus)))


def _matmul(c: _Ctx, g: Value) -> list[Value | None]:
    if len(c.x) != 2:
        raise AutodiffError("tg.matmul with fused operands has no gradient rule (differentiate "
                            "before the passes)")
    a, bb = c.x
    if (a.rank or 0) < 2 or (bb.rank or 0) < 2:
        raise AutodiffError(f"tg.matmul: differentiation needs rank >= 2 operands, got "
                            f"{a.type} and {bb.type} (at {c.loc})")
    ta, tb = c.attrs["transpose_a"], c.attrs["transpose_b"]
    mm = c.op
    if not ta and not tb:
        ga = mm("matmul", g, bb, transpose_a=False, transpose_b=True)
        gb = mm("matmul", a, g, transpose_a=True, transpose_b=False)
    elif ta and not tb:
        ga = mm("matmul", bb, g, transpose_a=False, transpose_b=True)
        gb = mm("matmul", a, g, transpose_a=False, transpose_b=False)
    elif not ta and tb:
        ga = mm("matmul", g, bb, transpose_a=False, transpose_b=False)
        gb = mm("matmul", g, a, transpose_a=True, transpose_b=False)
    else:
        ga = mm("matmul", bb, g, transpose_a=True, transpose_b=True)
        gb = mm("matmul", g, a, transpose_a=True, transpose_b=True)
    return [c.unbroadcast(ga, a), c.unbroadcast(gb, bb)]


def _reduce_sum(c: _Ctx, g: Value) -> list[Value | None]:
    return [c.broadcast_back(g, c.x[0], c.attrs["axes"], c.attrs["keepdims"])]


def _reduce_mean(c: _Ctx, g: Value) -> list[Value | None]:
    xs = _static(c.x[0], c.name)
    n = int(np.prod([xs[i] for i in _norm_axes(c.attrs["axes"], len(xs))]))
    gb = c.broadcast_back(g, c.x[0], c.attrs["axes"], c.attrs["keepdims"])
    return [c.mul(gb, 1.0 / max(n, 1))]


def _reduce_extremum(c: _Ctx, g: Value) -> list[Value | None]:
    x = c.x[0]
    axes, keep = c.attrs["axes"], c.attrs["keepdims"]
    yb = c.broadcast_back(c.y[0], x, axes, keep)
    mask = c.op("cast", c.op("equal", x, yb), to=x.dtype)
    count = c.op("reduce_sum", mask, axes=list(axes), keepdims=True)
    share = c.op("div", mask, count)
    return [c.op("mul", c.broadcast_back(g, x, axes, keep), share)]


def _reshape_like_input(c: _Ctx, g: Value) -> list[Value | None]:
    grads: list[Value | None] = [c.op("reshape", g, shape=list(_static(c.x[0], c.name)))]
    return grads + [None] * (len(c.x) - 1)


def _transpose(c: _Ctx, g: Value) -> list[Value | None]:
    perm = list(c.attrs["perm"])
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p % len(perm)] = i
    return [c.op("transpose", g, perm=inv)]


def _broadcast_to(c: _Ctx, g: Value) -> list[Value | None]:
    return [c.unbroadcast(g, c.x[0]), None]


def _concat(c: _Ctx, g: Value) -> list[Value | None]:
    rank = len(_static(g, c.name))
    axis = c.attrs["axis"] % rank
    sizes = [_static(x, c.name)[axis] for x in c.x]
    if len(sizes) == 1:
        return [g]
    parts = c.fb.op("split", [g], n_results=len(sizes), loc=c.loc, axis=axis, sizes=sizes)
    return list(parts)


def _slice(c: _Ctx, g: Value) -> list[Value | None]:
    if len(c.x) != 1:
        raise AutodiffError(f"tg.slice with tensor operands has no gradient rule (at {c.loc})")
    xs = _static(c.x[0], c.name)
    starts, ends = c.attrs["starts"], c.attrs["ends"]
    axes = c.attrs["axes"] or tuple(range(len(starts)))
    steps = c.attrs["steps"] or (1,) * len(starts)
    before, after = [0] * len(xs), [0] * len(xs)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a %= len(xs)
        if st != 1:
            raise AutodiffError(f"tg.slice with step {st} has no gradient rule (at {c.loc})")
        d = xs[a]
        s = min(max(s + d if s < 0 else s, 0), d)
        e = min(max(e + d if e < 0 else e, 0), d)
        before[a] = s
        after[a] = d - max(e, s)
    return [c.op("pad", g, pads=before + after, mode="constant", value=0.0)]


def _softmax(c: _Ctx, g: Value) -> list[Value | None]:
    y = c.y[0]
    axis = c.attrs["axis"]
    s = c.op("reduce_sum", c.op("mul", g, y), axes=[axis], keepdims=True)
    return [c.op("mul", y, c.op("sub", g, s))]


def _log_softmax(c: _Ctx, g: Value) -> list[Value | None]:
    axis = c.attrs["axis"]
    s = c.op("reduce_sum", g, axes=[axis], keepdims=True)
    return [c.op("sub", g, c.op("mul", c.op("exp", c.y[0]), s))]


def _select(c: _Ctx, g: Value) -> list[Value | None]:
    cond, a, bb = c.x
    zero = c.const(0.0, g)
    return [None, c.unbroadcast(c.op("select", cond, g, zero), a),
            c.unbroadcast(c.op("select", cond, zero, g), bb)]


VJP_RULES: dict[str, Rule] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "maximum": _extremum,
    "minimum": _extremum,
    "squared_difference": _squared_difference,
    **{name: _unary(f) for name, f in _UNARY.items()},
    "matmul": _matmul,
    "reduce_sum": _reduce_sum,
    "reduce_mean": _reduce_mean,
    "reduce_max": _reduce_extremum,
    "reduce_min": _reduce_extremum,
    "reshape": _reshape_like_input,
    "expand_dims": _reshape_like_input,
    "squeeze": _reshape_like_input,
    "transpose": _transpose,
    "broadcast_to": _broadcast_to,
    "concat": _concat,
    "slice": _slice,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "select": _select,
}
"""Catalogue op name -> its vector-Jacobian product rule."""

NON_DIFFERENTIABLE = frozenset({
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "sign", "floor",
    "ceil", "round", "floor_div", "floor_mod", "is_nan", "is_inf", "argmax", "argmin", "shape",
    "size", "where", "constant",
})
"""Ops whose outputs carry no gradient (integer-valued or piecewise constant)."""


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
        control = _control_rules().get(name)
        if control is not None:
            grads = control(ctx, gs)
        else:
            rule = VJP_RULES.get(name)
            if rule is None or len(op.results) != 1:
                raise AutodiffError(f"tg.{name} is not differentiable by pytfrt.grad (at "
                                    f"{ctx.loc})")
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


def _control_rules() -> dict[str, ControlRule]:
    from pytfrt.compiler.autodiff_control import CONTROL_RULES

    return CONTROL_RULES


def value_and_grad_traced(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                          nums: tuple[int, ...], multi: bool, has_aux: bool) -> Any:
    """``pytfrt.value_and_grad(fn, nums, has_aux)(*args, **kwargs)`` inside the current trace."""
    from pytfrt.compiler.frontends import trace
    from pytfrt.function import tree_flatten, tree_unflatten

    t = trace.current()
    if t is None:
        leaf = next(x for x in tree_flatten((args, kwargs))[0]
                    if isinstance(x, trace.TracedValue))
        t = leaf.tracer
    new_args = list(args)
    wrt: list[Value] = []
    trees = []
    for n in nums:
        leaves, td = tree_flatten(args[n])
        fresh = []
        for x in leaves:
            tv = trace.as_traced(t, x)
            if tv.value.dtype not in FLOAT_DTYPES:
                raise TypeError(f"grad requires floating-point inputs, argument {n} has a "
                                f"{tv.value.dtype} leaf (at {trace.user_location()})")
            f = t.emit("identity", [tv])  # a fresh value: the same array twice gets two grads
            fresh.append(f)
            wrt.append(f.value)
        new_args[n] = tree_unflatten(td, fresh)
        trees.append((td, len(fresh)))
    with t:
        out = fn(*new_args, **kwargs)
    value, aux = (out if has_aux else (out, None))
    v = trace.as_traced(t, value)
    if v.shape != () or v.value.dtype not in FLOAT_DTYPES:
        raise TypeError(f"grad requires a function returning a floating-point scalar, got "
                        f"{v.value.type} (at {trace.user_location()})")
    grads = [trace.TracedValue(t, g) for g in vjp(t.fb, wrt, t.resolve(v))]
    # a loop the while rule rebuilt: the value and aux name the new loop's results
    from pytfrt.compiler.autodiff_control import forwarded

    for leaf in tree_flatten((v, aux))[0]:
        if isinstance(leaf, trace.TracedValue) and leaf.tracer is t:
            new = forwarded(t.fb, leaf.value.ssa)
            if new is not None:
                leaf.value = new
    # the fresh identities have served (the gradients are separate values now): drop them
    for w in wrt:
        op = w.ssa.owner
        if isinstance(op, Operation) and op.name == "tg.identity":
            w.ssa.replace_all_uses_with(op.operands[0])
            op.detach()
            op.erase()
    per_arg = []
    i = 0
    for td, k in trees:
        per_arg.append(tree_unflatten(td, grads[i:i + k]))
        i += k
    g_out = tuple(per_arg) if multi else per_arg[0]
    return ((v, aux) if has_aux else v), g_out
