"""Reverse-mode automatic differentiation on the graph dialect.

:func:`vjp` reads the ops of a function being built (a
:class:`~pytfrt.compiler.builder.FunctionBuilder`'s block of ``tg.*`` ops), finds those on a path
from the differentiated values to the output, and appends their vector-Jacobian products -- more
catalogue ops, emitted through the same builder -- in reverse order.  Each differentiable op has
one rule in :data:`VJP_RULES`; the rules reuse the catalogue's gradient ops where they fit
(``relu_grad``, ``relu6_grad``, ``sigmoid_grad``, ``tanh_grad``, ``gelu_grad``, the conv2d
backprops).  Broadcasting is undone by summing over the broadcast axes (static shapes are
required); every gather (``gather``, ``gather_nd``, ``gather_elements``, ``top_k``) is
transposed by a ``scatter_elements`` that adds (repeated indices add up).

Ops with several results (``split``, ``identity_n``, ``top_k``) have their rule in
:data:`MULTI_VJP_RULES`, and so have the gradient ops that are differentiated by re-emitting them
as the catalogue ops they are made of (``gelu_grad``, ``layer_norm_grad``, ``batch_norm_grad``,
the cross-entropy ops): second-order gradients.  Every catalogue op is in exactly one of: a rule,
:data:`NON_DIFFERENTIABLE` (non-float values carry no gradient; integer, boolean and
piecewise-constant ops such as comparisons, ``floor``, ``argmax`` stop it), or :data:`NO_RULE`
(deliberate exceptions, each with its reason); ``tests/unit/test_autodiff_catalogue.py``
enumerates the catalogue to keep it so.  An op without a rule on a differentiated path raises
:class:`AutodiffError` naming the op, its source location and the reason.

Control flow (``tg.if``, ``tg.case``, ``tg.while``) has rules of its own in
:mod:`pytfrt.compiler.autodiff_control`: they build gradient functions of the module and
differentiate the bodies with :func:`backprop`.

:func:`pytfrt.compiler.autodiff_control.value_and_grad_traced` is what ``pytfrt.value_and_grad``
runs inside a trace.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import builtin as b
from xdsl.ir import Operation, SSAValue

from pytfrt.backends.cpu._geometry import same_pad
from pytfrt.compiler.attrs import from_xattr
from pytfrt.compiler.builder import FunctionBuilder, Value
from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.ops import CATALOGUE, get_opdef
from pytfrt.compiler.types import FLOAT_DTYPES, from_xdsl, np_dtype

__all__ = ["MULTI_VJP_RULES", "NON_DIFFERENTIABLE", "NO_RULE", "VJP_RULES", "AutodiffError",
           "CONTROL_RULES", "backprop", "vjp"]


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
    """Unit steps: ``g`` padded back with zeros; other steps: ``g`` added into zeros at the
    positions each strided axis took (Python's slice clamping, as the kernel's)."""
    if len(c.x) != 1:
        raise AutodiffError(f"tg.slice with tensor operands has no gradient rule (at {c.loc})")
    xs = _static(c.x[0], c.name)
    starts, ends = c.attrs["starts"], c.attrs["ends"]
    axes = c.attrs["axes"] or tuple(range(len(starts)))
    steps = c.attrs["steps"] or (1,) * len(starts)
    before, after = [0] * len(xs), [0] * len(xs)
    strided: list[tuple[int, np.ndarray]] = []
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a %= len(xs)
        d = xs[a]
        if st != 1:
            strided.append((a, np.arange(d)[s:e:st]))
            continue
        s = min(max(s + d if s < 0 else s, 0), d)
        e = min(max(e + d if e < 0 else e, 0), d)
        before[a] = s
        after[a] = d - max(e, s)
    shape = list(_static(g, c.name))
    for a, taken in strided:
        shape[a] = xs[a]
        where = [1] * len(xs)
        where[a] = len(taken)
        g = _scatter_add(c, shape, _ints_const(c, taken.reshape(where)), g, a)
    if any(before) or any(after):
        g = c.op("pad", g, pads=before + after, mode="constant", value=0.0)
    return [g]


def _softmax(c: _Ctx, g: Value) -> list[Value | None]:
    y = c.y[0]
    axis = c.attrs["axis"]
    s = c.op("reduce_sum", c.op("mul", g, y), axes=[axis], keepdims=True)
    return [c.op("mul", y, c.op("sub", g, s))]


def _log_softmax(c: _Ctx, g: Value) -> list[Value | None]:
    axis = c.attrs["axis"]
    s = c.op("reduce_sum", g, axes=[axis], keepdims=True)
    return [c.op("sub", g, c.op("mul", c.op("exp", c.y[0]), s))]


def _tanh_grad(c: _Ctx, g: Value) -> list[Value | None]:
    y, dy = c.x  # dy * (1 - y^2)
    gy = c.mul(c.op("mul", g, c.op("mul", dy, y)), -2.0)
    return [c.unbroadcast(gy, y), c.unbroadcast(c.op("tanh_grad", y, g), dy)]


def _sigmoid_grad(c: _Ctx, g: Value) -> list[Value | None]:
    y, dy = c.x  # dy * y * (1 - y)
    gy = c.op("mul", c.op("mul", g, dy), c.op("sub", c.const(1.0, y), c.mul(y, 2.0)))
    return [c.unbroadcast(gy, y), c.unbroadcast(c.op("sigmoid_grad", y, g), dy)]


def _masked_grad(c: _Ctx, g: Value) -> list[Value | None]:
    # relu_grad / relu6_grad(dy, x): linear in dy, piecewise constant in x
    return [c.op(c.name, g, c.x[1]), None]


def _pad(c: _Ctx, g: Value) -> list[Value | None]:
    """Constant mode: the slice of ``g`` where ``x`` sits.  ``edge``/``reflect``: per axis a
    gather of fixed positions (``np.pad`` of the positions themselves says which), whose
    transpose adds ``g`` back at them."""
    if len(c.x) != 1:
        raise AutodiffError(f"tg.pad with a pads operand has no gradient rule (at {c.loc})")
    xs = _static(c.x[0], c.name)
    pads = list(c.attrs["pads"])
    r = len(xs)
    if any(p < 0 for p in pads):
        raise AutodiffError(f"tg.pad: negative pads have no gradient rule (at {c.loc})")
    starts = pads[:r]
    if c.attrs["mode"] == "constant":
        return [c.op("slice", g, starts=starts,
                     ends=[s + d for s, d in zip(starts, xs, strict=True)],
                     axes=list(range(r)), steps=[1] * r)]
    shape = list(_static(g, c.name))
    for a in range(r):
        if pads[a] == pads[a + r] == 0:
            continue
        width = (pads[a], pads[a + r])
        taken = (np.pad(np.arange(xs[a]), width, mode="reflect") if c.attrs["mode"] == "reflect"
                 else np.pad(np.arange(xs[a]), width, mode="edge"))
        where = [1] * r
        where[a] = len(taken)
        shape[a] = xs[a]
        g = _scatter_add(c, shape, _ints_const(c, taken.reshape(where)), g, a)
    return [g]


def _tile(c: _Ctx, g: Value) -> list[Value | None]:
    if len(c.x) != 1:
        raise AutodiffError(f"tg.tile with a multiples operand has no gradient rule (at {c.loc})")
    xs = _static(c.x[0], c.name)
    mult = list(c.attrs["multiples"])
    split = [v for m, d in zip(mult, xs, strict=True) for v in (m, d)]
    g = c.op("reshape", g, shape=split)
    g = c.op("reduce_sum", g, axes=list(range(0, 2 * len(xs), 2)), keepdims=False)
    return [g]


def _cumsum(c: _Ctx, g: Value) -> list[Value | None]:
    return [c.op("cumsum", g, axis=c.attrs["axis"], exclusive=c.attrs["exclusive"],
                 reverse=not c.attrs["reverse"])]


def _same_op(c: _Ctx, g: Value) -> list[Value | None]:
    # linear ops that are their own transpose (trilu: a mask)
    return [c.op(c.name, g, **c.attrs)]


def _depth_to_space(c: _Ctx, g: Value) -> list[Value | None]:
    """A permutation: its transpose is its inverse, space_to_depth for TF's DCR order; for
    ONNX's CRD order a gather of the inverse permutation (the kernel run on positions)."""
    if c.attrs["mode"] == "DCR":
        return [c.op("space_to_depth", g, block_size=c.attrs["block_size"],
                     layout=c.attrs["layout"])]
    from pytfrt.backends.cpu.data_ops import depth_to_space

    xs = _static(c.x[0], c.name)
    n = int(np.prod(xs))
    source = depth_to_space(np.arange(n).reshape(xs), block_size=c.attrs["block_size"],
                            layout=c.attrs["layout"], mode=c.attrs["mode"]).reshape(-1)
    inverse = np.empty(n, np.int64)
    inverse[source] = np.arange(n)
    flat = c.op("gather", c.op("reshape", g, shape=[n]), _ints_const(c, inverse), axis=0)
    return [c.op("reshape", flat, shape=list(xs))]


def _space_to_depth(c: _Ctx, g: Value) -> list[Value | None]:
    return [c.op("depth_to_space", g, block_size=c.attrs["block_size"],
                 layout=c.attrs["layout"], mode="DCR")]


def _fill(c: _Ctx, g: Value) -> list[Value | None]:
    return [None, c.op("reduce_sum", g, axes=[], keepdims=False)]


def _global_avg_pool(c: _Ctx, g: Value) -> list[Value | None]:
    xs = _static(c.x[0], c.name)
    spatial = (1, 2) if c.attrs["layout"] == "NHWC" else (2, 3)
    g = c.op("broadcast_to", g, c.fb.constant(np.asarray(xs, np.int64)))
    return [c.mul(g, 1.0 / (xs[spatial[0]] * xs[spatial[1]]))]


def _global_max_pool(c: _Ctx, g: Value) -> list[Value | None]:
    x = c.x[0]
    shape = c.fb.constant(np.asarray(_static(x, c.name), np.int64))
    spatial = [1, 2] if c.attrs["layout"] == "NHWC" else [2, 3]
    mask = c.op("cast", c.op("equal", x, c.op("broadcast_to", c.y[0], shape)), to=x.dtype)
    share = c.op("div", mask, c.op("reduce_sum", mask, axes=spatial, keepdims=True))
    return [c.op("mul", c.op("broadcast_to", g, shape), share)]


def _window_pads(c: _Ctx, xs: tuple[int, ...], k: Sequence[int]) -> list[int]:
    """The op's ``(top, bottom, left, right)`` pads, ``SAME`` resolved as TF does (output
    ``ceil(in / stride)``, the odd row/column at the end)."""
    if c.attrs["padding"] != "SAME":
        return list(c.attrs["pads"])
    spatial = (1, 2) if c.attrs["layout"] == "NHWC" else (2, 3)
    pads: list[int] = []
    for ax, kk, st, d in zip(spatial, k, c.attrs["strides"], c.attrs["dilations"], strict=True):
        pads += same_pad(xs[ax], kk, st, d)
    return pads


def _conv2d(c: _Ctx, g: Value) -> list[Value | None]:
    if len(c.x) != 2 or c.attrs["activation"] != "none":
        raise AutodiffError(f"tg.conv2d with a fused epilogue has no gradient rule "
                            f"(differentiate before the passes; at {c.loc})")
    x, w = c.x
    xs, ws = _static(x, c.name), _static(w, c.name)
    k = ws[:2] if c.attrs["layout"] == "NHWC" else ws[2:]
    conv = {key: c.attrs[key] for key in ("layout", "strides", "dilations", "groups")}
    conv["pads"] = _window_pads(c, xs, k)
    shape = c.fb.constant
    return [c.op("conv2d_backprop_input", shape(np.asarray(xs, np.int64)), w, g, **conv),
            c.op("conv2d_backprop_filter", x, shape(np.asarray(ws, np.int64)), g, **conv)]


def _pool_attrs(c: _Ctx, xs: tuple[int, ...]) -> dict[str, Any]:
    attrs = {key: c.attrs[key] for key in ("layout", "ksize", "strides", "dilations",
                                             "ceil_mode")}
    attrs["pads"] = _window_pads(c, xs, c.attrs["ksize"])
    return attrs


def _max_pool2d(c: _Ctx, g: Value) -> list[Value | None]:
    x = c.x[0]
    return [c.op("max_pool2d_grad", x, c.y[0], g, **_pool_attrs(c, _static(x, c.name)))]


def _avg_pool2d(c: _Ctx, g: Value) -> list[Value | None]:
    xs = _static(c.x[0], c.name)
    return [c.op("avg_pool2d_grad", c.fb.constant(np.asarray(xs, np.int64)), g,
                 count_include_pad=c.attrs["count_include_pad"], **_pool_attrs(c, xs))]


def _batch_norm(c: _Ctx, g: Value) -> list[Value | None]:
    """Inference batch norm ``(x - mean) * scale / sqrt(variance + eps) + offset``: every
    operand may be differentiated (mean and variance are operands, not batch statistics)."""
    x, scale, _offset, _mean, var = c.x
    rank = len(_static(x, c.name))
    axis = c.attrs["axis"] % rank
    dx, dscale, doffset = c.fb.op("batch_norm_grad", [g, *c.x[:2], *c.x[3:]], n_results=3,
                                  loc=c.loc, epsilon=c.attrs["epsilon"], axis=axis,
                                  is_training=False)
    others = [a for a in range(rank) if a != axis]
    dmean = c.op("neg", c.op("reduce_sum", dx, axes=others, keepdims=False))
    dvar = c.mul(c.op("div", c.op("mul", dscale, scale), c.op(
        "add", var, c.const(c.attrs["epsilon"], var))), -0.5)
    return [dx, dscale, doffset, dmean, dvar]


def _layer_norm(c: _Ctx, g: Value) -> list[Value | None]:
    x = c.x[0]
    xs = _static(x, c.name)
    axis = c.attrs["axis"] % len(xs)
    has_gamma, has_beta = c.attrs["has_gamma"], c.attrs["has_beta"]
    gamma = c.x[1] if has_gamma else c.fb.constant(np.ones(xs[axis:], np_dtype(x.dtype)))
    dx, dgamma, dbeta = c.fb.op("layer_norm_grad", [g, x, gamma], n_results=3, loc=c.loc,
                                axis=axis, epsilon=c.attrs["epsilon"])
    grads: list[Value | None] = [dx]
    if has_gamma:
        grads.append(c.unbroadcast(dgamma, c.x[1]))
    if has_beta:
        grads.append(c.unbroadcast(dbeta, c.x[-1]))
    return grads


def _l2_normalize(c: _Ctx, g: Value) -> list[Value | None]:
    """``y = x * r``, ``r = rsqrt(max(sum(x^2), eps))``: ``g * r - x * r^3 * sum(g * x)``, the
    second term only where the sum exceeds ``eps`` (elsewhere ``r`` is a constant)."""
    x, y = c.x[0], c.y[0]
    axes, eps = list(c.attrs["axis"]), c.attrs["epsilon"]
    ss = c.op("reduce_sum", c.op("square", x), axes=axes, keepdims=True)
    r = c.op("rsqrt", c.op("maximum", ss, c.const(eps, ss)))
    gx = c.op("reduce_sum", c.op("mul", g, x), axes=axes, keepdims=True)
    live = c.op("cast", c.op("greater", ss, c.const(eps, ss)), to=x.dtype)
    second = c.op("mul", c.op("mul", y, c.op("square", r)), c.op("mul", gx, live))
    return [c.op("sub", c.op("mul", g, r), second)]


# -- indexing, scattering and the remaining nn ops -------------------------------------------------


def _ints_const(c: _Ctx, values: Any) -> Value:
    return c.fb.constant(np.asarray(values, np.int64))


def _scatter_add(c: _Ctx, shape: Sequence[int], idx: Value, upd: Value, axis: int) -> Value:
    """Zeros of ``shape`` with ``upd`` added at ``idx`` along ``axis`` (``idx`` broadcast to
    ``upd``'s shape): the transpose of every gather (repeated indices add up)."""
    us = _static(upd, c.name)
    if _static(idx, c.name) != us:
        idx = c.op("broadcast_to", idx, _ints_const(c, us))
    zeros = c.fb.constant(np.zeros(tuple(shape), np_dtype(upd.dtype)))
    return c.op("scatter_elements", zeros, idx, upd, axis=axis, reduction="add")


def _linear_index(c: _Ctx, idx: Value, dims: Sequence[int]) -> Value:
    """``idx[..., k]`` (per-row coordinates into ``dims``, negative ones wrapped) as one i64
    row-major offset per row: shape ``idx.shape[:-1]``."""
    idx = c.op("cast", idx, to="i64")
    idx = c.op("floor_mod", idx, _ints_const(c, list(dims)))
    strides = [int(np.prod(dims[j + 1:])) for j in range(len(dims))]
    return c.op("reduce_sum", c.op("mul", idx, _ints_const(c, strides)), axes=[-1],
                keepdims=False)


def _gather(c: _Ctx, g: Value) -> list[Value | None]:
    """The transpose of a gather: ``g`` added into zeros at the gathered rows (per batch entry
    with ``batch_dims``)."""
    x, idx = c.x
    xs, ids = _static(x, c.name), _static(idx, c.name)
    bd = c.attrs["batch_dims"]
    a = c.attrs["axis"] % len(xs)
    nb, k = int(np.prod(xs[:bd])), int(np.prod(ids[bd:]))
    p, r = int(np.prod(xs[bd:a])), int(np.prod(xs[a + 1:]))
    flat = c.op("reshape", idx, shape=[nb, 1, k, 1])
    gx = _scatter_add(c, (nb, p, xs[a], r), flat, c.op("reshape", g, shape=[nb, p, k, r]), 2)
    return [c.op("reshape", gx, shape=list(xs)), None]


def _gather_nd(c: _Ctx, g: Value) -> list[Value | None]:
    """``x[B..., idx[B..., I..., :], R...]``: ``g`` added at the rows the indices name."""
    x, idx = c.x
    xs, ids = _static(x, c.name), _static(idx, c.name)
    bd, k = c.attrs["batch_dims"], ids[-1]
    nb, ni = int(np.prod(xs[:bd])), int(np.prod(ids[bd:-1]))
    nx, nr = int(np.prod(xs[bd:bd + k])), int(np.prod(xs[bd + k:]))
    lin = c.op("reshape", _linear_index(c, idx, xs[bd:bd + k]), shape=[nb, ni, 1])
    gx = _scatter_add(c, (nb, nx, nr), lin, c.op("reshape", g, shape=[nb, ni, nr]), 1)
    return [c.op("reshape", gx, shape=list(xs)), None]


def _gather_elements(c: _Ctx, g: Value) -> list[Value | None]:
    x, idx = c.x
    axis = c.attrs["axis"] % len(_static(x, c.name))
    return [_scatter_add(c, _static(x, c.name), idx, g, axis), None]


def _scatter_written(c: _Ctx, g: Value, idx: Value, axis: int) -> tuple[Value, Value]:
    """The cotangents of ``data`` and ``updates`` of an overwriting ``scatter_elements``:
    ``g`` where nothing was written, and per update ``g`` at its index if that update is the
    one that stayed (the same op run on update numbers says which, repeated indices included)."""
    ids_shape = _static(idx, c.name)
    ids = _ints_const(c, np.arange(int(np.prod(ids_shape))).reshape(ids_shape))
    blank = c.fb.constant(np.full(_static(g, c.name), -1, np.int64))
    winner = c.op("scatter_elements", blank, idx, ids, axis=axis, reduction="none")
    zero = c.const(0.0, g)
    g_data = c.op("select", c.op("equal", winner, _ints_const(c, -1)), g, zero)
    kept = c.op("equal", c.op("gather_elements", winner, idx, axis=axis), ids)
    g_upd = c.op("select", kept, c.op("gather_elements", g, idx, axis=axis), zero)
    return g_data, g_upd


def _scatter_extremum(c: _Ctx, g: Value, idx: Value, axis: int) -> list[Value | None]:
    """``max``/``min`` scatter: ``g`` goes to whichever of the data and the updates at a place
    equal the result, shared equally among ties (as ``reduce_max``'s rule does)."""
    data, _idx, upd = c.x
    y = c.y[0]
    on_data = c.op("cast", c.op("equal", data, y), to=g.dtype)
    on_upd = c.op("cast", c.op("equal", upd, c.op("gather_elements", y, idx, axis=axis)),
                  to=g.dtype)
    count = c.op("add", on_data, _scatter_add(c, _static(data, c.name), idx, on_upd, axis))
    share = c.op("div", g, count)
    return [c.op("mul", share, on_data), None,
            c.op("mul", c.op("gather_elements", share, idx, axis=axis), on_upd)]


def _scatter_mul(c: _Ctx, g: Value, idx: Value, axis: int) -> list[Value | None]:
    """``mul`` scatter, zero-safe: each factor of a place (the data, the updates written there)
    gets ``g`` times the product of the others -- the product of the non-zero factors divided by
    its own where the place has no zero, that product for the only zero factor, else 0."""
    data, _idx, upd = c.x
    ds = _static(data, c.name)
    one, zero = c.const(1.0, g), c.const(0.0, g)
    d_zero, u_zero = c.op("equal", data, zero), c.op("equal", upd, zero)
    d_nz, u_nz = c.op("select", d_zero, one, data), c.op("select", u_zero, one, upd)
    prod = c.op("scatter_elements", d_nz, idx, u_nz, axis=axis, reduction="mul")
    zeros = c.op("add", c.op("cast", d_zero, to=g.dtype),
                 _scatter_add(c, ds, idx, c.op("cast", u_zero, to=g.dtype), axis))

    def others(is_zero: Value, nz: Value, prod_at: Value, zeros_at: Value) -> Value:
        only_zero = c.op("logical_and", is_zero, c.op("equal", zeros_at, one))
        rest: Value = c.op("select", c.op("equal", zeros_at, zero), c.op("div", prod_at, nz),
                           c.op("select", only_zero, prod_at, zero))
        return rest

    def at_updates(v: Value) -> Value:
        return c.op("gather_elements", v, idx, axis=axis)  # type: ignore[no-any-return]

    g_data = c.op("mul", g, others(d_zero, d_nz, prod, zeros))
    g_upd = c.op("mul", at_updates(g), others(u_zero, u_nz, at_updates(prod), at_updates(zeros)))
    return [g_data, None, g_upd]


def _scatter_elements(c: _Ctx, g: Value) -> list[Value | None]:
    data, idx, _upd = c.x
    axis = c.attrs["axis"] % len(_static(data, c.name))
    reduction = c.attrs["reduction"]
    if reduction == "add":
        return [g, None, c.op("gather_elements", g, idx, axis=axis)]
    if reduction in ("max", "min"):
        return _scatter_extremum(c, g, idx, axis)
    if reduction == "mul":
        return _scatter_mul(c, g, idx, axis)
    g_data, g_upd = _scatter_written(c, g, idx, axis)
    return [g_data, None, g_upd]


def _scatter_nd(c: _Ctx, g: Value) -> list[Value | None]:
    """Overwriting ``scatter_nd`` as a ``scatter_elements`` over rows of the flattened data."""
    data, idx, upd = c.x
    ds, ids, us = _static(data, c.name), _static(idx, c.name), _static(upd, c.name)
    k = ids[-1]
    nx, nr, ni = int(np.prod(ds[:k])), int(np.prod(ds[k:])), int(np.prod(ids[:-1]))
    lin = c.op("reshape", _linear_index(c, idx, ds[:k]), shape=[ni, 1])
    lin = c.op("broadcast_to", lin, _ints_const(c, [ni, nr]))
    g_data, g_upd = _scatter_written(c, c.op("reshape", g, shape=[nx, nr]), lin, 0)
    return [c.op("reshape", g_data, shape=list(ds)), None, c.op("reshape", g_upd, shape=list(us))]


def _top_k(c: _Ctx, gs: list[Value | None]) -> list[Value | None]:
    """The values' cotangent added at the selected indices (the indices carry none)."""
    g = gs[0]
    if g is None:
        return [None, None]
    x = c.x[0]
    xs = _static(x, c.name)
    return [_scatter_add(c, xs, c.y[1], g, len(xs) - 1), None]


def _one_hot(c: _Ctx, g: Value) -> list[Value | None]:
    """Differentiable in the on/off values only: ``on`` gets ``g`` summed where hot."""
    idx, depth, on, off = c.x
    hot = c.op("one_hot", idx, depth, c.const(1.0, g), c.const(0.0, g), axis=c.attrs["axis"])
    g_on = c.op("mul", g, hot)
    return [None, None, c.unbroadcast(g_on, on), c.unbroadcast(c.op("sub", g, g_on), off)]


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_terms(c: _Ctx) -> tuple[list[str], str]:
    """The equation with ``...`` spelled out as letters and the output term made explicit."""
    eq = c.attrs["equation"].replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    shapes = [_static(x, c.name) for x in c.x]
    free = [ch for ch in _LETTERS if ch not in eq]
    n_ell = max((len(s) - len(t) + 3 for t, s in zip(terms, shapes, strict=True)
                 if "..." in t), default=0)
    ell = "".join(free[:n_ell])
    sizes: dict[str, int] = {}
    out_terms = []
    for t, s in zip(terms, shapes, strict=True):
        if "..." in t:
            t = t.replace("...", ell[n_ell - (len(s) - len(t) + 3):])
        for ch, d in zip(t, s, strict=True):
            if sizes.setdefault(ch, d) != d:
                raise AutodiffError(f"tg.einsum: label {ch!r} has sizes {sizes[ch]} and {d}: "
                                    f"broadcast labels have no gradient rule (at {c.loc})")
        out_terms.append(t)
    if not arrow:
        rhs = "..." + "".join(sorted(ch for ch in lhs if lhs.count(ch) == 1 and ch.isalpha()))
    rhs = rhs.replace("...", ell)
    return out_terms, rhs


def _einsum(c: _Ctx, g: Value) -> list[Value | None]:
    """Per operand, the einsum of the cotangent with the other operands; labels only that
    operand has are broadcast back, and a label it repeats (a diagonal) is put back on the
    diagonal by a constant mask."""
    terms, rhs = _einsum_terms(c)
    grads: list[Value | None] = []
    for i, (t, x) in enumerate(zip(terms, c.x, strict=True)):
        if x.ssa not in c.active:
            grads.append(None)
            continue
        xs = _static(x, c.name)
        others = [u for j, u in enumerate(terms) if j != i] + [rhs]
        seen = set("".join(others))
        first = [k for k, ch in enumerate(t) if t.index(ch) == k]
        kept = "".join(t[k] for k in first if t[k] in seen)
        operands = [v for j, v in enumerate(c.x) if j != i] + [g]
        gx = c.op("einsum", *operands, equation=",".join(others) + "->" + kept)
        if kept != t:
            gx = c.op("reshape", gx, shape=[xs[k] if k in first and t[k] in seen else 1
                                            for k in range(len(t))])
            gx = c.op("broadcast_to", gx, _ints_const(c, xs))
        if len(first) != len(t):
            grid = np.indices(xs)
            on_diagonal = np.ones(xs, bool)
            for k, ch in enumerate(t):
                on_diagonal &= grid[k] == grid[t.index(ch)]
            gx = c.op("mul", gx, c.fb.constant(on_diagonal.astype(np_dtype(g.dtype))))
        grads.append(gx)
    return grads


def _resize_matrix(c: _Ctx, n_in: int, n_out: int) -> np.ndarray:
    """The ``[n_out, n_in]`` matrix one axis of the resize applies (the kernel run on the
    identity: each basis vector a batch entry, the other spatial axis kept at size 1)."""
    from pytfrt.backends.cpu.data_ops import resize

    basis = np.eye(n_in).reshape(n_in, n_in, 1, 1)
    out = resize(basis, size=(n_out, 1), layout="NHWC", mode=c.attrs["mode"],
                 coordinate_transformation_mode=c.attrs["coordinate_transformation_mode"],
                 nearest_mode=c.attrs["nearest_mode"])
    return out[:, :, 0, 0].T  # type: ignore[no-any-return]


def _resize(c: _Ctx, g: Value) -> list[Value | None]:
    """Resize is linear, one matrix per spatial axis: its transpose applies their transposes."""
    xs = _static(c.x[0], c.name)
    (ho, wo), nhwc = c.attrs["size"], c.attrs["layout"] == "NHWC"
    hi, wi = (xs[1], xs[2]) if nhwc else (xs[2], xs[3])
    dt = np_dtype(g.dtype)
    mh = c.fb.constant(_resize_matrix(c, hi, ho).astype(dt))
    mw = c.fb.constant(_resize_matrix(c, wi, wo).astype(dt))
    eq = "nhwc,hi,wj->nijc" if nhwc else "nchw,hi,wj->ncij"
    return [c.op("einsum", g, mh, mw, equation=eq)]


def _conv_attrs(c: _Ctx) -> dict[str, Any]:
    return {key: c.attrs[key] for key in ("layout", "strides", "dilations", "groups", "pads")}


def _conv2d_transpose(c: _Ctx, g: Value) -> list[Value | None]:
    """``conv2d_transpose(x, w)`` is the input gradient of the conv2d from its output's
    shape to ``x``'s with filter ``w``: its transpose is that conv2d (output_padding rows
    only widen the output, which that conv2d's floor drops), and the filter's gradient is
    the conv2d's filter gradient with ``g`` as its input and ``x`` as its output gradient."""
    x, w = c.x
    conv = _conv_attrs(c)
    ws = _ints_const(c, _static(w, c.name))
    return [c.op("conv2d", g, w, **conv), c.op("conv2d_backprop_filter", g, ws, x, **conv)]


def _conv2d_backprop_input(c: _Ctx, g: Value) -> list[Value | None]:
    """Linear in the filter and ``dy``: the conv2d of ``g`` and the filter gradient."""
    _shape, w, dy = c.x
    conv = _conv_attrs(c)
    ws = _ints_const(c, _static(w, c.name))
    return [None, c.op("conv2d_backprop_filter", g, ws, dy, **conv), c.op("conv2d", g, w, **conv)]


def _conv2d_backprop_filter(c: _Ctx, g: Value) -> list[Value | None]:
    """Linear in ``x`` and ``dy``: ``g`` acts as a filter."""
    x, _shape, dy = c.x
    conv = _conv_attrs(c)
    xs = _ints_const(c, _static(x, c.name))
    return [c.op("conv2d_backprop_input", xs, g, dy, **conv), None, c.op("conv2d", x, g, **conv)]


def _bias_add_grad(c: _Ctx, g: Value) -> list[Value | None]:
    """A sum over every axis but the channels': ``g`` broadcast back along them."""
    ds = _static(c.x[0], c.name)
    channel = len(ds) - 1 if c.attrs["layout"] == "NHWC" else 1
    others = [a for a in range(len(ds)) if a != channel]
    return [c.broadcast_back(g, c.x[0], others, False) if others else g]


def _max_pool2d_grad(c: _Ctx, g: Value) -> list[Value | None]:
    """Linear in ``dy`` (``x`` and ``y`` only choose where it goes): the transpose reads, per
    window, ``g`` at the tap that received ``dy`` -- the first tap (row-major) whose input
    equals the window's maximum, as the kernel chooses."""
    x, y, _dy = c.x
    xs, ys = _static(x, c.name), _static(y, c.name)
    nhwc = c.attrs["layout"] == "NHWC"
    ha, wa = (1, 2) if nhwc else (2, 3)
    kh, kw = c.attrs["ksize"]
    sh, sw = c.attrs["strides"]
    dh, dw = c.attrs["dilations"]
    pt, _pb, pl, _pr = c.attrs["pads"]
    oh, ow = ys[ha], ys[wa]
    bottom = max(0, (kh - 1) * dh + (oh - 1) * sh + 1 - pt - xs[ha])
    right = max(0, (kw - 1) * dw + (ow - 1) * sw + 1 - pl - xs[wa])
    pads = [0] * 8
    pads[ha], pads[wa], pads[4 + ha], pads[4 + wa] = pt, pl, bottom, right
    xp = c.op("pad", x, pads=pads, mode="constant", value=0.0)
    gp = c.op("pad", g, pads=pads, mode="constant", value=0.0)
    real = np.zeros((pt + xs[ha] + bottom, pl + xs[wa] + right), bool)
    real[pt:pt + xs[ha], pl:pl + xs[wa]] = True  # padding never holds the maximum
    mask_shape = [1, 1, 1, 1]
    mask_shape[ha], mask_shape[wa] = oh, ow
    zero = c.const(0.0, g)
    out: Value | None = None
    taken: Value | None = None
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
            cols = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
            tap = {"starts": [rows.start, cols.start], "ends": [rows.stop, cols.stop],
                   "axes": [ha, wa], "steps": [sh, sw]}
            hit = c.op("equal", c.op("slice", xp, **tap), y)
            valid = real[rows, cols]
            if not valid.all():
                hit = c.op("logical_and", hit, c.fb.constant(valid.reshape(mask_shape)))
            if taken is None:
                taken = hit
            else:
                hit = c.op("logical_and", hit, c.op("logical_not", taken))
                taken = c.op("logical_or", taken, hit)
            part = c.op("select", hit, c.op("slice", gp, **tap), zero)
            out = part if out is None else c.op("add", out, part)
    return [None, None, out]


def _avg_pool2d_grad(c: _Ctx, g: Value) -> list[Value | None]:
    """Linear in ``dy`` and the transpose of ``avg_pool2d``: its transpose is the pooling."""
    attrs = {key: c.attrs[key] for key in ("layout", "ksize", "strides", "pads", "dilations",
                                             "ceil_mode", "count_include_pad")}
    return [None, c.op("avg_pool2d", g, **attrs)]


def _exclusive_products(c: _Ctx, x2: Value, n: int, reverse: bool) -> Value:
    """Per row of ``x2`` ``[m, n]``, the product of the entries before (``reverse``: after)
    each one: a shift by one, then a doubling scan (``log2 n`` multiplies of shifted copies)."""
    m = _static(x2, c.name)[0]
    if n == 1:
        return c.fb.constant(np.ones((m, 1), np_dtype(x2.dtype)))

    def shifted(v: Value, s: int) -> Value:  # v moved s places along the row, ones let in
        part = c.op("slice", v, starts=[0, s if reverse else 0], ends=[m, n if reverse else n - s],
                    axes=[0, 1], steps=[1, 1])
        pads = [0, 0, 0, s] if reverse else [0, s, 0, 0]
        return c.op("pad", part, pads=pads, mode="constant", value=1.0)  # type: ignore[no-any-return]

    p = shifted(x2, 1)
    s = 1
    while s < n:
        p = c.op("mul", p, shifted(p, s))
        s *= 2
    return p


def _reduce_prod(c: _Ctx, g: Value) -> list[Value | None]:
    """Zero-safe: the derivative of the product by each entry is the product of the others,
    the exclusive products from the left times those from the right."""
    x = c.x[0]
    xs = _static(x, c.name)
    red = sorted(_norm_axes(c.attrs["axes"], len(xs)))
    kept = [a for a in range(len(xs)) if a not in red]
    n = int(np.prod([xs[a] for a in red]))
    m = int(np.prod([xs[a] for a in kept]))
    if n == 0 or m == 0:
        return [_zeros_like(c, x)]
    perm = kept + red
    x2 = c.op("reshape", c.op("transpose", x, perm=perm), shape=[m, n])
    others = c.op("mul", _exclusive_products(c, x2, n, False), _exclusive_products(c, x2, n, True))
    g2 = c.op("mul", c.op("reshape", g, shape=[m, 1]), others)
    g2 = c.op("reshape", g2, shape=[xs[a] for a in perm])
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return [c.op("transpose", g2, perm=inv)]


def _lrn(c: _Ctx, g: Value) -> list[Value | None]:
    """``y = x * d^-beta``, ``d = bias + alpha * W(x^2)`` with ``W`` the (symmetric) window
    sum over ``axis``: ``g * d^-beta - 2 alpha beta x W(g y / d)``."""
    x, y = c.x[0], c.y[0]
    xs = _static(x, c.name)
    axis = c.attrs["axis"] % len(xs)
    alpha, beta = c.attrs["alpha"], c.attrs["beta"]
    n, r = xs[axis], c.attrs["depth_radius"]
    band = (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= r).astype(np_dtype(x.dtype))
    letters = _LETTERS[:len(xs)]
    eq = f"{letters},{letters[axis]}Z->{letters[:axis]}Z{letters[axis + 1:]}"

    def window(v: Value) -> Value:
        return c.op("einsum", v, c.fb.constant(band), equation=eq)  # type: ignore[no-any-return]

    d = c.op("add", c.mul(window(c.op("square", x)), alpha), c.const(c.attrs["bias"], x))
    p = c.op("pow", d, c.const(-beta, d))
    back = window(c.op("div", c.op("mul", g, y), d))
    return [c.op("sub", c.op("mul", g, p), c.mul(c.op("mul", x, back), 2.0 * alpha * beta))]


MultiRule = Callable[[_Ctx, list[Value | None]], list[Value | None]]


def _zeros_like(c: _Ctx, v: Value) -> Value:
    return c.fb.constant(np.zeros(_static(v, c.name), np_dtype(v.dtype)))


def _split(c: _Ctx, gs: list[Value | None]) -> list[Value | None]:
    parts = [g if g is not None else _zeros_like(c, y) for g, y in zip(gs, c.y, strict=True)]
    return [parts[0] if len(parts) == 1 else c.op("concat", *parts, axis=c.attrs["axis"])]


def _identity_n(c: _Ctx, gs: list[Value | None]) -> list[Value | None]:
    return list(gs)


# -- gradient ops written out as catalogue ops (their second order) ------------------------------


def _expanded(expand: Callable[[_Ctx], list[Value]]) -> MultiRule:
    """The rule of an op re-emitted as catalogue ops with rules of their own (``expand``
    returns its results, computed again from its operands): those ops are differentiated by
    :func:`backprop`.  The copies are dead code to the forward program."""

    def rule(c: _Ctx, gs: list[Value | None]) -> list[Value | None]:
        start = len(list(c.fb.block.ops))
        outs = expand(c)
        ops = list(c.fb.block.ops)[start:]
        wrt: list[Value] = []
        for x in c.x:
            if x.ssa in c.active and all(x.ssa is not w.ssa for w in wrt):
                wrt.append(x)
        pairs = [(o, g) for o, g in zip(outs, gs, strict=True) if g is not None]
        grads = dict(zip([w.ssa for w in wrt], backprop(c.fb, ops, wrt, pairs), strict=True))
        return [grads.pop(x.ssa, None) for x in c.x]

    return rule


def _sum_over(c: _Ctx, v: Value, axes: Sequence[int], keepdims: bool) -> Value:
    """``reduce_sum`` over ``axes`` -- none (not all) when ``axes`` is empty."""
    return c.op("reduce_sum", v, axes=list(axes), keepdims=keepdims) if axes else v


def _gelu_grad_ops(c: _Ctx) -> list[Value]:
    dy, x = c.x
    if c.attrs["approximate"]:
        k = math.sqrt(2.0 / math.pi)
        x2 = c.op("square", x)
        t = c.op("tanh", c.mul(c.op("mul", x, c.op("add", c.mul(x2, 0.044715),
                                                     c.const(1.0, x))), k))
        du = c.op("add", c.mul(x2, 3 * 0.044715 * k), c.const(k, x))
        half_x = c.mul(x, 0.5)
        d = c.op("add", c.op("add", c.mul(t, 0.5), c.const(0.5, x)),
                 c.op("mul", c.op("mul", half_x, c.op("sub", c.const(1.0, t), c.op("square", t))),
                      du))
    else:
        cdf = c.op("add", c.mul(c.op("erf", c.mul(x, 1.0 / math.sqrt(2.0))), 0.5),
                   c.const(0.5, x))
        pdf = c.mul(c.op("exp", c.mul(c.op("square", x), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
        d = c.op("add", cdf, c.op("mul", x, pdf))
    return [c.op("mul", dy, d)]


def _layer_norm_grad_ops(c: _Ctx) -> list[Value]:
    dy, x, gamma = c.x
    rank = len(_static(x, c.name))
    axis = c.attrs["axis"] % rank
    norm, lead = list(range(axis, rank)), list(range(axis))
    xc = c.op("sub", x, c.op("reduce_mean", x, axes=norm, keepdims=True))
    var = c.op("reduce_mean", c.op("square", xc), axes=norm, keepdims=True)
    inv = c.op("rsqrt", c.op("add", var, c.const(c.attrs["epsilon"], var)))
    xhat = c.op("mul", xc, inv)
    g = c.op("mul", dy, gamma)
    mean_g = c.op("reduce_mean", g, axes=norm, keepdims=True)
    mean_gx = c.op("reduce_mean", c.op("mul", g, xhat), axes=norm, keepdims=True)
    dx = c.op("mul", inv, c.op("sub", c.op("sub", g, mean_g), c.op("mul", xhat, mean_gx)))
    return [dx, _sum_over(c, c.op("mul", dy, xhat), lead, False), _sum_over(c, dy, lead, False)]


def _batch_norm_grad_ops(c: _Ctx) -> list[Value]:
    dy, x, scale, mean, var = c.x
    xs = _static(x, c.name)
    axis = c.attrs["axis"] % len(xs)
    others = [a for a in range(len(xs)) if a != axis]
    bshape = [xs[a] if a == axis else 1 for a in range(len(xs))]

    def b(v: Value) -> Value:
        return c.op("reshape", v, shape=bshape)  # type: ignore[no-any-return]

    inv = b(c.op("rsqrt", c.op("add", var, c.const(c.attrs["epsilon"], var))))
    xhat = c.op("mul", c.op("sub", x, b(mean)), inv)
    doffset = _sum_over(c, dy, others, False)
    dscale = _sum_over(c, c.op("mul", dy, xhat), others, False)
    gain = c.op("mul", b(scale), inv)
    if c.attrs["is_training"]:
        n = int(np.prod(xs)) // xs[axis]
        centred = c.op("sub", c.op("sub", dy, c.mul(b(doffset), 1.0 / n)),
                       c.mul(c.op("mul", xhat, b(dscale)), 1.0 / n))
        dx = c.op("mul", gain, centred)
    else:
        dx = c.op("mul", gain, dy)
    return [dx, dscale, doffset]


def _cross_entropy_ops(c: _Ctx) -> list[Value]:
    """``(-sum(labels * log_softmax(logits)), softmax(logits) - labels)`` per row, the labels
    one-hot first for the sparse form."""
    logits, labels = c.x
    if c.name == "sparse_softmax_cross_entropy":
        depth = c.fb.constant(np.asarray(_static(logits, c.name)[1], np.int64))
        labels = c.op("one_hot", labels, depth, c.const(1.0, logits), c.const(0.0, logits),
                      axis=-1)
    logp = c.op("log_softmax", logits, axis=1)
    loss = c.op("neg", c.op("reduce_sum", c.op("mul", labels, logp), axes=[1], keepdims=False))
    return [loss, c.op("sub", c.op("softmax", logits, axis=1), labels)]


MULTI_VJP_RULES: dict[str, MultiRule] = {
    "split": _split,
    "identity_n": _identity_n,
    "top_k": _top_k,
    "gelu_grad": _expanded(_gelu_grad_ops),
    "layer_norm_grad": _expanded(_layer_norm_grad_ops),
    "batch_norm_grad": _expanded(_batch_norm_grad_ops),
    "softmax_cross_entropy": _expanded(_cross_entropy_ops),
    "sparse_softmax_cross_entropy": _expanded(_cross_entropy_ops),
}
"""Catalogue op name -> the rule of an op with several results (a cotangent per result,
``None`` for results the output does not depend on), and of the gradient ops differentiated
through their expansion (:func:`_expanded`)."""


VJP_RULES: dict[str, Rule] = {
    **{name: d.grad for name, d in CATALOGUE.items() if d.grad is not None},
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
    "tanh_grad": _tanh_grad,
    "sigmoid_grad": _sigmoid_grad,
    "relu_grad": _masked_grad,
    "relu6_grad": _masked_grad,
    "pad": _pad,
    "tile": _tile,
    "cumsum": _cumsum,
    "trilu": _same_op,
    "depth_to_space": _depth_to_space,
    "space_to_depth": _space_to_depth,
    "fill": _fill,
    "global_avg_pool": _global_avg_pool,
    "global_max_pool": _global_max_pool,
    "gather": _gather,
    "conv2d": _conv2d,
    "max_pool2d": _max_pool2d,
    "avg_pool2d": _avg_pool2d,
    "batch_norm": _batch_norm,
    "layer_norm": _layer_norm,
    "l2_normalize": _l2_normalize,
    "gather_nd": _gather_nd,
    "gather_elements": _gather_elements,
    "scatter_elements": _scatter_elements,
    "scatter_nd": _scatter_nd,
    "one_hot": _one_hot,
    "einsum": _einsum,
    "resize": _resize,
    "conv2d_transpose": _conv2d_transpose,
    "conv2d_backprop_input": _conv2d_backprop_input,
    "conv2d_backprop_filter": _conv2d_backprop_filter,
    "reduce_prod": _reduce_prod,
    "lrn": _lrn,
    "bias_add_grad": _bias_add_grad,
    "avg_pool2d_grad": _avg_pool2d_grad,
    "max_pool2d_grad": _max_pool2d_grad,
}
"""Catalogue op name -> its vector-Jacobian product rule: the ``grad`` of the op's
:class:`~pytfrt.compiler.ops.OpDef` (every elementwise op's, from its ``op_math`` record), and
the rules of this module for the ops whose ``OpDef`` does not carry one yet."""

NON_DIFFERENTIABLE = frozenset({name for name, d in CATALOGUE.items() if not d.differentiable} | {
    "argmax", "argmin", "shape", "size", "where", "constant", "reduce_all", "reduce_any", "range",
    "broadcast_gradient_args", "random_key_counter", "random_uniform",
})
"""Ops whose outputs carry no gradient (integer-valued, boolean, piecewise constant or random
samples)."""

NO_RULE: dict[str, str] = {
    # -- not on a differentiable path by construction
    "read_variable": "a source (no operands): differentiate a variable's value by passing it "
                     "as an argument",
    "assign_variable": "no results (a state write)",
    "assign_add_variable": "no results (a state write)",
    "assign_sub_variable": "no results (a state write)",
    "fused_elementwise": "made by the fusion passes, which run after pytfrt.grad has "
                         "differentiated the traced program",
    "fused_graph": "made by the fusion passes, which run after differentiation",
    "squeeze_excite": "made by -tg-fuse-squeeze-excite, which runs after differentiation",
    "yield": "the terminator of a fused region (made by the passes, after differentiation)",
    "recurrent": "imported from ONNX/Keras inference graphs only (a traced program's loops "
                 "are tg.while, which has its rule)",
    **{op: "an ONNX op (compiler/ops/onnx_more.py), imported from inference graphs only"
       for op in ("cumprod", "det", "grid_sample", "reverse_sequence", "scatter_nd_reduce",
                  "compress", "unique")},
}
"""Ops without a gradient rule, deliberately: name -> the reason (the :class:`AutodiffError`
raised when one is on a differentiated path says it)."""


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
