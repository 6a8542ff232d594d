"""Reverse mode through functional control flow: the ``tg.if``, ``tg.case`` and ``tg.while``
rules.

The rules build new functions of the module being traced (through the
:class:`~pytfrt.compiler.builder.GraphBuilder` that holds the bodies) and differentiate a copy
of a body with :func:`pytfrt.compiler.autodiff.backprop`; a body's inner values are recomputed
in the gradient function from the body's inputs, so nested control flow (a ``cond`` in a loop
body, a loop in a branch, loops in loops) is handled by the same rules recursively.

``tg.if(p, args...)`` (JAX's ``lax.cond`` contract: both branches are differentiated, the taken
one runs): the gradient is ``tg.if(p, args..., cotangents...)`` on the same predicate, whose
branches ``@<branch>_grad_N`` recompute their forward branch from ``args`` and return its
vector-Jacobian product (the float arguments' cotangents).  ``tg.case(i, args...)`` (TF's
``Case``, ``tf.switch_case``) is the same with N branches: the gradient is a ``tg.case`` on the
same index, so an out-of-range index differentiates the branch it ran (the last one, TF's rule,
which ``tfrt.case`` implements).

``tg.while(vars...)`` (TF's approach for ``tf.while_loop``, which JAX's ``while_loop`` does not
support in reverse mode): the loop is replaced by one that also counts its iterations and pushes
the loop-carried values of each iteration onto stacks (``[n, *shape]`` tensors, the first
dimension dynamic).  Every op makes a new tensor, so a stack grown by one ``concat`` per
iteration would be copied whole each time (``n^2 / 2`` rows for ``n`` iterations); instead the
forward loop is two nested loops: the inner one stacks up to ``limit = max(CHUNK,
sqrt(iterations so far))`` iterations onto a chunk, the outer one appends each chunk to the
stacks.  Rows copied per iteration: about ``limit / 2`` onto the chunk plus ``n / limit`` for
the appends -- at most about ``1.5 * CHUNK`` up to ``CHUNK^2`` iterations, about
``1.5 * sqrt(n)`` beyond: ``O(n^1.5)`` in all instead of ``n^2 / 2``.  (An amortised ``O(1)``
push needs a kernel appending in place, which the catalogue lacks.)  The adjoint loop then runs
the trip count down:
iteration ``k`` reads the values of forward iteration ``k`` from the stacks (``gather``),
recomputes the body from them and maps the loop variables' cotangents through the body's
vector-Jacobian product.  Loop variables the body passes through unchanged (the captured values)
are not stacked.  A loop variable with a dynamic shape cannot be stacked: :class:`AutodiffError`.

Importing this module registers the rules in
:data:`pytfrt.compiler.autodiff.CONTROL_RULES`; :func:`value_and_grad_traced` (what
``pytfrt.value_and_grad`` runs inside a trace) lives here so that using it always has them.

Not thread-safe (a trace belongs to one thread, as the builder).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler import autodiff
from pytfrt.compiler.autodiff import AutodiffError, ControlRule, _Ctx, _static, backprop
from pytfrt.compiler.builder import FunctionBuilder, GraphBuilder, Value
from pytfrt.compiler.types import FLOAT_DTYPES, from_xdsl, np_dtype

__all__ = ["CONTROL_RULES", "forwarded"]

_forwarded: weakref.WeakKeyDictionary[FunctionBuilder, dict[SSAValue, Value]] = (
    weakref.WeakKeyDictionary())


def forwarded(fb: FunctionBuilder, ssa: SSAValue) -> Value | None:
    """The value that replaced ``ssa`` (a result of a ``tg.while`` the while rule rebuilt)."""
    table = _forwarded.get(fb)
    return None if table is None else table.get(ssa)


# -- helpers -------------------------------------------------------------------------------------


def _body(gb: GraphBuilder, name: str, where: str) -> FunctionBuilder:
    fb = gb.functions.get(name)
    if fb is None or fb.result_types is None:
        raise AutodiffError(f"{where}: the body @{name} is not a function of the module being "
                            "traced (differentiate while tracing)")
    return fb


def _fresh_name(gb: GraphBuilder, base: str) -> str:
    i = 1
    while f"{base}_{i}" in gb.functions:
        i += 1
    return f"{base}_{i}"


def inline(dst: FunctionBuilder, src: FunctionBuilder, args: Sequence[Value]) -> list[Value]:
    """Copy ``src``'s ops into ``dst`` with its arguments bound to ``args``; its results."""
    mapping: dict[SSAValue, SSAValue] = {
        a: v.ssa for a, v in zip(src.block.args, args, strict=True)}
    results: list[Value] = []
    for op in src.block.ops:
        if isinstance(op, ReturnOp):
            results = [Value(mapping.get(o, o), from_xdsl(o.type)) for o in op.operands]
            continue
        dst.block.add_op(op.clone(value_mapper=mapping))
    return results


def _inline_ops(dst: FunctionBuilder, src: FunctionBuilder, args: Sequence[Value]
                ) -> tuple[list[Operation], list[Value]]:
    """:func:`inline`, plus the ops it added."""
    last = dst.block.last_op
    outs = inline(dst, src, args)
    return _ops_after(dst, last), outs


def _ops_after(fb: FunctionBuilder, last: Operation | None) -> list[Operation]:
    """The ops of ``fb`` after ``last`` (all of them for ``None``)."""
    ops: list[Operation] = []
    op = fb.block.first_op if last is None else last.next_op
    while op is not None:
        ops.append(op)
        op = op.next_op
    return ops


@contextmanager
def _before(fb: FunctionBuilder, anchor: Operation) -> Iterator[None]:
    """Ops ``fb`` appends inside the block are moved before ``anchor``."""
    last = fb.block.last_op
    yield
    for op in _ops_after(fb, last):
        op.detach()
        fb.block.insert_op_before(op, anchor)


def _zeros(fb: FunctionBuilder, like: Value, where: str) -> Value:
    return fb.constant(np.zeros(_static(like, where), np_dtype(like.dtype)))


def _results(out: Value | list[Value]) -> list[Value]:
    return out if isinstance(out, list) else [out]


# -- tg.if / tg.case -----------------------------------------------------------------------------


class _Branch:
    """One branch's gradient function while the ``tg.if``/``tg.case`` rule builds it.

    ``fwd``: the ops recomputing the forward branch (first in ``fn``), ``outs``: its results,
    ``saved``: the forward values the gradient ops use (the intermediates the forward op
    will return instead).
    """

    def __init__(self, fn: FunctionBuilder, fwd: list[Operation], outs: list[Value]) -> None:
        self.fn = fn
        self.fwd = fwd
        self.outs = [forwarded(fn, o.ssa) or o for o in outs]
        inside = set(fwd)
        self.saved: list[SSAValue] = []
        for op in fwd:
            if op.name == "tg.constant":
                continue  # constants stay in the gradient function
            for r in op.results:
                if any(u.operation not in inside for u in r.uses):
                    self.saved.append(r)

    def forward_into(self, dst: FunctionBuilder, branches: Sequence[_Branch]) -> None:
        """End ``dst`` (a forward branch): the branch's results, then the saved values of
        every branch in order -- this branch's own, placeholders for the others' (never
        read: the other branches are not taken)."""
        mapping: dict[SSAValue, SSAValue] = {
            a: v.ssa for a, v in zip(self.fn.block.args, dst.arguments, strict=False)}
        for op in self.fwd:
            dst.block.add_op(op.clone(value_mapper=mapping))
        res = [Value(mapping.get(v.ssa, v.ssa), v.type) for v in self.outs]
        for br in branches:
            res += [Value(mapping[v], from_xdsl(v.type)) if br is self
                    else _placeholder(dst, from_xdsl(v.type)) for v in br.saved]
        dst.returns(res)

    def take_saved(self, saved: Sequence[SSAValue]) -> None:
        """Give the gradient function arguments for ``saved`` (the saved values of every
        branch; this branch's are read, the others' only passed), and drop the forward ops
        the gradient no longer needs."""
        fn = self.fn
        for v in saved:
            t = from_xdsl(v.type)
            arg = fn.block.insert_arg(v.type, len(fn.block.args))
            fn.arguments.append(Value(arg, t))
            fn.input_names.append(f"saved_{len(fn.input_names)}")
            if v in self.saved:
                v.replace_all_uses_with(arg)
        for op in reversed(self.fwd):
            if all(not r.uses for r in op.results):
                op.detach()
                op.erase()


def _placeholder(fb: FunctionBuilder, t: Any) -> Value:
    shape = () if t.shape is None else tuple(d or 0 for d in t.shape)
    return fb.constant(np.zeros(shape, np_dtype(t.dtype)))


def _branching(c: _Ctx, gs: list[Value | None], names: list[str], what: str,
               emit: Callable[[list[Value], list[str], int], list[Value]]
               ) -> list[Value | None]:
    """The rule of a branching op (``tg.if``, ``tg.case``): operand 0 selects one of the
    functions ``names``, the other operands are their arguments.

    Every branch gets a gradient function recomputing nothing it can read: the forward op is
    rebuilt (``emit(operands, branch names, result count)``) with branches that also return
    their saved intermediates, and the gradient is the same op on the same selector over the
    gradient functions (which take the arguments, the seeded cotangents and every branch's
    saved values).
    """
    fb, gb = c.fb, c.fb.graph
    sel, args = c.x[0], c.x[1:]
    seeds = [(j, g) for j, g in enumerate(gs) if g is not None]
    diff = [i for i, a in enumerate(args)
            if a.dtype in FLOAT_DTYPES and c.operation.operands[1 + i] in c.active]
    if not diff:
        return [None] * len(c.x)
    branches = []
    for name in names:
        src = _body(gb, name, f"{what} (at {c.loc})")
        inputs: list[tuple[str, Any, str]] = [(f"arg_{i}", a.shape, a.dtype)
                                              for i, a in enumerate(args)]
        inputs += [(f"cotangent_{j}", g.shape, g.dtype) for j, g in seeds]
        gfb = gb.function(_fresh_name(gb, f"{src.name}_grad"), inputs)
        ops, outs = _inline_ops(gfb, src, gfb.arguments[:len(args)])
        last = gfb.block.last_op  # the forward ops end here (rules insert before their op)
        cots = gfb.arguments[len(args):]
        seeded: list[tuple[Value, Value | None]] = [
            (outs[j], cots[k]) for k, (j, _) in enumerate(seeds)]
        gfb.returns(backprop(gfb, ops, [gfb.arguments[i] for i in diff], seeded))
        fwd = [] if last is None else _ops_after(gfb, None)
        if last is not None:
            fwd = fwd[:fwd.index(last) + 1]
        branches.append(_Branch(gfb, fwd, outs))
    # the forward op again, returning each branch's saved intermediates too
    fwd_fns = []
    for br, name in zip(branches, names, strict=True):
        dst = gb.function(_fresh_name(gb, f"{name}_saving"),
                          [(f"arg_{i}", a.shape, a.dtype) for i, a in enumerate(args)])
        br.forward_into(dst, branches)
        fwd_fns.append(dst.name)
    m = len(c.y)
    saved = [v for br in branches for v in br.saved]
    op = c.operation
    with _before(fb, op):
        new = emit([sel, *args], fwd_fns, m + len(saved))
    _forward_results(fb, op, new[:m])
    for br in branches:
        br.take_saved(saved)
    res = emit([sel, *args, *[g for _, g in seeds], *new[m:]], [br.fn.name for br in branches],
               len(diff))
    out: list[Value | None] = [None] * len(c.x)
    for k, i in enumerate(diff):
        out[1 + i] = res[k]
    return out


def _if(c: _Ctx, gs: list[Value | None]) -> list[Value | None]:
    def emit(operands: list[Value], fns: list[str], n: int) -> list[Value]:
        return _results(c.fb.op("if", operands, loc=c.loc, then_branch=fns[0],
                                else_branch=fns[1], n_results=n))

    return _branching(c, gs, [c.attrs["then_branch"], c.attrs["else_branch"]], "tg.if", emit)


def _case(c: _Ctx, gs: list[Value | None]) -> list[Value | None]:
    def emit(operands: list[Value], fns: list[str], n: int) -> list[Value]:
        return _results(c.fb.op("case", operands, loc=c.loc, branches=fns, n_results=n))

    return _branching(c, gs, list(c.attrs["branches"]), "tg.case", emit)


def _forward_results(fb: FunctionBuilder, old: Operation, new: Sequence[Value]) -> None:
    """The uses of ``old``'s results move to ``new`` (``old``, unused, is removed by
    ``-tg-dce``; a traced value still naming it keeps it correct and :func:`forwarded` maps
    it)."""
    table = _forwarded.setdefault(fb, {})
    for r, v in zip(old.results, new, strict=True):
        r.replace_all_uses_with(v.ssa)
        table[r] = v


# -- tg.while ------------------------------------------------------------------------------------


def _while(c: _Ctx, gs: list[Value | None]) -> list[Value | None]:
    fb, gb = c.fb, c.fb.graph
    where = f"tg.while (at {c.loc})"
    body = _body(gb, c.attrs["body"], where)
    cond = _body(gb, c.attrs["cond"], where)
    vs = c.x
    n = len(vs)
    ret = body.block.last_op
    assert isinstance(ret, ReturnOp)
    passthrough = [ret.operands[k] is body.block.args[k] for k in range(n)]
    carried = [k for k in range(n) if not passthrough[k]]
    floats = [k for k in range(n) if vs[k].dtype in FLOAT_DTYPES]
    shapes: dict[int, tuple[int, ...]] = {}
    for k in sorted(set(carried) | set(floats)):
        shape = vs[k].shape
        if shape is None or any(d is None for d in shape):
            raise AutodiffError(
                f"{where}: loop variable {k} has the dynamic type {vs[k].type}; pytfrt.grad "
                "stacks the loop variables of every iteration and needs static shapes (so a "
                "gradient of a while loop's gradient, whose loop carries the stacks, is not "
                "supported)")
        if from_xdsl(ret.operands[k].type) != vs[k].type:
            raise AutodiffError(f"{where}: the body returns loop variable {k} as "
                                f"{ret.operands[k].type}, not as its type {vs[k].type}")
        shapes[k] = _static(vs[k], "while")

    # 1. the forward loop again, counting its iterations and stacking the carried values: an
    #    outer loop of chunks, each an inner loop that stacks at most `limit` iterations
    #    (max(CHUNK, sqrt(trips so far))) before the outer one appends the chunk to the stacks
    stack_in: list[tuple[str, Any, str]] = [(f"stack_{k}", (None, *shapes[k]), vs[k].dtype)
                                            for k in carried]
    inputs: list[tuple[str, Any, str]] = [(f"arg_{k}", v.shape, v.dtype)
                                          for k, v in enumerate(vs)]
    chunk_in = [*inputs, ("j", (), "i32"), ("limit", (), "i32"), *stack_in]
    icond = gb.function(_fresh_name(gb, f"{cond.name}_chunk"), chunk_in)
    a = icond.arguments
    icond.returns([icond.op("logical_and", [inline(icond, cond, a[:n])[0], icond.op(
        "less", [a[n], a[n + 1]], loc=c.loc)], loc=c.loc)])
    ibody = gb.function(_fresh_name(gb, f"{body.name}_chunk"), chunk_in)
    a = ibody.arguments
    outs = inline(ibody, body, a[:n])
    j = ibody.op("add", [a[n], ibody.constant(np.int32(1))], loc=c.loc)
    chunks = [ibody.op("concat", [a[n + 2 + i], ibody.op(
        "expand_dims", [a[k]], axis=0, loc=c.loc)], axis=0, loc=c.loc)
        for i, k in enumerate(carried)]
    ibody.returns([*outs, j, a[n + 1], *chunks])

    inputs += [("trip_count", (), "i32"), *stack_in]
    fcond = gb.function(_fresh_name(gb, f"{cond.name}_stacked"), inputs)
    fcond.returns(inline(fcond, cond, fcond.arguments[:n]))
    fbody = gb.function(_fresh_name(gb, f"{body.name}_stacked"), inputs)
    a = fbody.arguments
    root = fbody.op("cast", [fbody.op("sqrt", [fbody.op("cast", [a[n]], to="f32", loc=c.loc)],
                                      loc=c.loc)], to="i32", loc=c.loc)
    limit = fbody.op("maximum", [root, fbody.constant(np.int32(CHUNK))], loc=c.loc)
    empty = [fbody.constant(np.zeros((0, *shapes[k]), np_dtype(vs[k].dtype))) for k in carried]
    inner = _results(fbody.op("while", [*a[:n], fbody.constant(np.int32(0)), limit, *empty],
                              n_results=n + 2 + len(carried), loc=c.loc, cond=icond.name,
                              body=ibody.name))
    trip = fbody.op("add", [a[n], inner[n]], loc=c.loc)
    stacks = [fbody.op("concat", [a[n + 1 + i], inner[n + 2 + i]], axis=0, loc=c.loc)
              for i in range(len(carried))]
    fbody.returns([*inner[:n], trip, *stacks])
    op = c.operation
    with _before(fb, op):
        init = [fb.constant(np.int32(0))] + [
            fb.constant(np.zeros((0, *shapes[k]), np_dtype(vs[k].dtype))) for k in carried]
        fwd = _results(fb.op("while", [*vs, *init], n_results=n + 1 + len(carried), loc=c.loc,
                             cond=fcond.name, body=fbody.name))
    _forward_results(fb, op, fwd[:n])

    # 2. the adjoint loop: k = trip_count - 1 ... 0
    g_init: list[Value] = []
    for k in floats:
        g = gs[k]
        g_init.append(_zeros(fb, vs[k], "while") if g is None else g)
    passed = [k for k in range(n) if passthrough[k]]
    binputs: list[tuple[str, Any, str]] = [("k", (), "i32")]
    binputs += [(f"cotangent_{k}", shapes[k], vs[k].dtype) for k in floats]
    binputs += stack_in + [(f"arg_{k}", vs[k].shape, vs[k].dtype) for k in passed]
    bcond = gb.function(_fresh_name(gb, f"{cond.name}_adjoint"), binputs)
    bcond.returns([bcond.op("greater_equal", [bcond.arguments[0], bcond.constant(np.int32(0))],
                            loc=c.loc)])
    bbody = gb.function(_fresh_name(gb, f"{body.name}_adjoint"), binputs)
    a = bbody.arguments
    kk, cots = a[0], a[1:1 + len(floats)]
    stack_args = a[1 + len(floats):1 + len(floats) + len(carried)]
    pass_args = a[1 + len(floats) + len(carried):]
    state: list[Value] = [None] * n  # type: ignore[list-item]
    for s, k in zip(stack_args, carried, strict=True):
        v = bbody.op("gather", [s, kk], axis=0, loc=c.loc)
        if v.shape != shapes[k]:
            v = bbody.op("reshape", [v], shape=list(shapes[k]), loc=c.loc)
        state[k] = v
    for p, k in zip(pass_args, passed, strict=True):
        state[k] = p
    ops, outs = _inline_ops(bbody, body, state)
    seeded: list[tuple[Value, Value | None]] = [
        (outs[k], g) for k, g in zip(floats, cots, strict=True)]
    grads = backprop(bbody, ops, [state[k] for k in floats], seeded)
    k_next = bbody.op("sub", [kk, bbody.constant(np.int32(1))], loc=c.loc)
    bbody.returns([k_next, *grads, *stack_args, *pass_args])
    k0 = fb.op("sub", [fwd[n], fb.constant(np.int32(1))], loc=c.loc)
    res = _results(fb.op("while", [k0, *g_init, *fwd[n + 1:], *[vs[k] for k in passed]],
                         n_results=len(binputs), loc=c.loc, cond=bcond.name, body=bbody.name))
    out: list[Value | None] = [None] * n
    for i, k in enumerate(floats):
        out[k] = res[1 + i]
    return out


CHUNK = 64
"""The least number of iterations the while rule's forward loop stacks in a chunk."""

CONTROL_RULES: dict[str, ControlRule] = {"if": _if, "case": _case, "while": _while}
"""Control-flow op name -> its reverse-mode rule (operand cotangents from result cotangents)."""
autodiff.CONTROL_RULES.update(CONTROL_RULES)  # registration: backprop finds them there


def value_and_grad_traced(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                          nums: tuple[int, ...], multi: bool, has_aux: bool) -> Any:
    """``pytfrt.value_and_grad(fn, nums, has_aux)(*args, **kwargs)`` inside the current trace."""
    from pytfrt.compiler.frontends import trace
    from pytfrt.support.tree import tree_flatten, tree_unflatten

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
    grads = [trace.TracedValue(t, g) for g in autodiff.vjp(t.fb, wrt, t.resolve(v))]
    # a loop the while rule rebuilt: the value and aux name the new loop's results
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
