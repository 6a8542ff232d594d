"""The gradient rules of the catalogue's non-elementwise ops, set on their ``OpDef`` (``grad=``).

Each rule is ``rule(c, g) -> [cotangent or None per operand]`` (``c`` the autodiff context of
:mod:`pytfrt.compiler.autodiff`: ``c.x``, ``c.y``, ``c.attrs``, ``c.op``, ``c.const``,
``c.mul``, ``c.unbroadcast``, ``c.broadcast_back``, ``c.fb``, ``c.loc``, ``c.name``,
``c.active``, ``c.backprop``); the rules of ops with several results take the list of their
results' cotangents (``OpDef.grad_multi``).  The family modules of :mod:`pytfrt.compiler.ops`
pass them to ``define``, so an op's gradient is read where the op is defined; the elementwise
ops' rules are their ``op_math`` records' ``vjp`` (docs/ops.md, "Adding an op").  A rule only
calls the context it is given, so this module imports nothing of the compiler above the
catalogue's own layer.

Errors: :class:`AutodiffError` (re-exported by :mod:`pytfrt.compiler.autodiff`) for an op the
rule cannot differentiate (dynamic shapes, fused operands, tensor-valued attributes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.backends.cpu._geometry import same_pad
from pytfrt.backends.cpu.ops import onnx_slice
from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.types import np_dtype

Ctx = Any
"""The autodiff context a rule is given (``pytfrt.compiler.autodiff._Ctx``)."""
Value = Any
"""A value of the function being differentiated (``pytfrt.compiler.builder.Value``)."""
MultiRule = Callable[[Ctx, list[Any]], list[Any]]


class AutodiffError(GraphError):
    """An op on the differentiated path has no gradient rule (or the output is not a scalar)."""


def _static(v: Value, name: str) -> tuple[int, ...]:
    if v.shape is None or any(d is None for d in v.shape):
        raise AutodiffError(f"tg.{name}: differentiation needs static shapes, got {v.type}")
    return tuple(int(d) for d in v.shape)  # type: ignore[arg-type]


def _norm_axes(axes: Sequence[int], rank: int) -> set[int]:
    if not axes:
        return set(range(rank))
    return {a % rank for a in axes}


def matmul(c: Ctx, g: Value) -> list[Value | None]:
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


def reduce_sum(c: Ctx, g: Value) -> list[Value | None]:
    return [c.broadcast_back(g, c.x[0], c.attrs["axes"], c.attrs["keepdims"])]


def reduce_mean(c: Ctx, g: Value) -> list[Value | None]:
    xs = _static(c.x[0], c.name)
    n = int(np.prod([xs[i] for i in _norm_axes(c.attrs["axes"], len(xs))]))
    gb = c.broadcast_back(g, c.x[0], c.attrs["axes"], c.attrs["keepdims"])
    return [c.mul(gb, 1.0 / max(n, 1))]


def reduce_extremum(c: Ctx, g: Value) -> list[Value | None]:
    x = c.x[0]
    axes, keep = c.attrs["axes"], c.attrs["keepdims"]
    yb = c.broadcast_back(c.y[0], x, axes, keep)
    mask = c.op("cast", c.op("equal", x, yb), to=x.dtype)
    count = c.op("reduce_sum", mask, axes=list(axes), keepdims=True)
    share = c.op("div", mask, count)
    return [c.op("mul", c.broadcast_back(g, x, axes, keep), share)]


def reshape_like_input(c: Ctx, g: Value) -> list[Value | None]:
    grads: list[Value | None] = [c.op("reshape", g, shape=list(_static(c.x[0], c.name)))]
    return grads + [None] * (len(c.x) - 1)


def transpose(c: Ctx, g: Value) -> list[Value | None]:
    perm = list(c.attrs["perm"])
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p % len(perm)] = i
    return [c.op("transpose", g, perm=inv)]


def broadcast_to(c: Ctx, g: Value) -> list[Value | None]:
    return [c.unbroadcast(g, c.x[0]), None]


def concat(c: Ctx, g: Value) -> list[Value | None]:
    rank = len(_static(g, c.name))
    axis = c.attrs["axis"] % rank
    sizes = [_static(x, c.name)[axis] for x in c.x]
    if len(sizes) == 1:
        return [g]
    parts = c.fb.op("split", [g], n_results=len(sizes), loc=c.loc, axis=axis, sizes=sizes)
    return list(parts)


def slice_(c: Ctx, g: Value) -> list[Value | None]:
    """Unit steps: ``g`` padded back with zeros; other steps: ``g`` added into zeros at the
    positions each strided axis took (ONNX's slice clamping, as the kernel's)."""
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
        bounds = onnx_slice(s, e, st, d)
        if st != 1:
            strided.append((a, np.arange(d)[bounds]))
            continue
        before[a] = bounds.start
        after[a] = d - max(bounds.stop, bounds.start)
    shape = list(_static(g, c.name))
    for a, taken in strided:
        shape[a] = xs[a]
        where = [1] * len(xs)
        where[a] = len(taken)
        g = _scatter_add(c, shape, _ints_const(c, taken.reshape(where)), g, a)
    if any(before) or any(after):
        g = c.op("pad", g, pads=before + after, mode="constant", value=0.0)
    return [g]


def softmax(c: Ctx, g: Value) -> list[Value | None]:
    y = c.y[0]
    axis = c.attrs["axis"]
    s = c.op("reduce_sum", c.op("mul", g, y), axes=[axis], keepdims=True)
    return [c.op("mul", y, c.op("sub", g, s))]


def log_softmax(c: Ctx, g: Value) -> list[Value | None]:
    axis = c.attrs["axis"]
    s = c.op("reduce_sum", g, axes=[axis], keepdims=True)
    return [c.op("sub", g, c.op("mul", c.op("exp", c.y[0]), s))]


def tanh_grad(c: Ctx, g: Value) -> list[Value | None]:
    y, dy = c.x  # dy * (1 - y^2)
    gy = c.mul(c.op("mul", g, c.op("mul", dy, y)), -2.0)
    return [c.unbroadcast(gy, y), c.unbroadcast(c.op("tanh_grad", y, g), dy)]


def sigmoid_grad(c: Ctx, g: Value) -> list[Value | None]:
    y, dy = c.x  # dy * y * (1 - y)
    gy = c.op("mul", c.op("mul", g, dy), c.op("sub", c.const(1.0, y), c.mul(y, 2.0)))
    return [c.unbroadcast(gy, y), c.unbroadcast(c.op("sigmoid_grad", y, g), dy)]


def masked_grad(c: Ctx, g: Value) -> list[Value | None]:
    # relu_grad / relu6_grad(dy, x): linear in dy, piecewise constant in x
    return [c.op(c.name, g, c.x[1]), None]


def pad(c: Ctx, g: Value) -> list[Value | None]:
    """Constant mode: the slice of ``g`` where ``x`` sits.  ``edge``/``reflect``/``wrap``: per
    axis a gather of fixed positions (``np.pad`` of the positions themselves says which), whose
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
        taken = np.pad(np.arange(xs[a]), width, mode=c.attrs["mode"])
        where = [1] * r
        where[a] = len(taken)
        shape[a] = xs[a]
        g = _scatter_add(c, shape, _ints_const(c, taken.reshape(where)), g, a)
    return [g]


def tile(c: Ctx, g: Value) -> list[Value | None]:
    if len(c.x) != 1:
        raise AutodiffError(f"tg.tile with a multiples operand has no gradient rule (at {c.loc})")
    xs = _static(c.x[0], c.name)
    mult = list(c.attrs["multiples"])
    split = [v for m, d in zip(mult, xs, strict=True) for v in (m, d)]
    g = c.op("reshape", g, shape=split)
    g = c.op("reduce_sum", g, axes=list(range(0, 2 * len(xs), 2)), keepdims=False)
    return [g]


def cumsum(c: Ctx, g: Value) -> list[Value | None]:
    return [c.op("cumsum", g, axis=c.attrs["axis"], exclusive=c.attrs["exclusive"],
                 reverse=not c.attrs["reverse"])]


def same_op(c: Ctx, g: Value) -> list[Value | None]:
    # linear ops that are their own transpose (trilu: a mask)
    return [c.op(c.name, g, **c.attrs)]


def depth_to_space(c: Ctx, g: Value) -> list[Value | None]:
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


def space_to_depth(c: Ctx, g: Value) -> list[Value | None]:
    return [c.op("depth_to_space", g, block_size=c.attrs["block_size"],
                 layout=c.attrs["layout"], mode="DCR")]


def fill(c: Ctx, g: Value) -> list[Value | None]:
    return [None, c.op("reduce_sum", g, axes=[], keepdims=False)]


def global_avg_pool(c: Ctx, g: Value) -> list[Value | None]:
    xs = _static(c.x[0], c.name)
    spatial = (1, 2) if c.attrs["layout"] == "NHWC" else (2, 3)
    g = c.op("broadcast_to", g, c.fb.constant(np.asarray(xs, np.int64)))
    return [c.mul(g, 1.0 / (xs[spatial[0]] * xs[spatial[1]]))]


def global_max_pool(c: Ctx, g: Value) -> list[Value | None]:
    x = c.x[0]
    shape = c.fb.constant(np.asarray(_static(x, c.name), np.int64))
    spatial = [1, 2] if c.attrs["layout"] == "NHWC" else [2, 3]
    mask = c.op("cast", c.op("equal", x, c.op("broadcast_to", c.y[0], shape)), to=x.dtype)
    share = c.op("div", mask, c.op("reduce_sum", mask, axes=spatial, keepdims=True))
    return [c.op("mul", c.op("broadcast_to", g, shape), share)]


def _window_pads(c: Ctx, xs: tuple[int, ...], k: Sequence[int]) -> list[int]:
    """The op's ``(top, bottom, left, right)`` pads, ``SAME`` resolved as TF does (output
    ``ceil(in / stride)``, the odd row/column at the end)."""
    if c.attrs["padding"] != "SAME":
        return list(c.attrs["pads"])
    spatial = (1, 2) if c.attrs["layout"] == "NHWC" else (2, 3)
    pads: list[int] = []
    for ax, kk, st, d in zip(spatial, k, c.attrs["strides"], c.attrs["dilations"], strict=True):
        pads += same_pad(xs[ax], kk, st, d)
    return pads


def conv2d(c: Ctx, g: Value) -> list[Value | None]:
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


def _pool_attrs(c: Ctx, xs: tuple[int, ...]) -> dict[str, Any]:
    attrs = {key: c.attrs[key] for key in ("layout", "ksize", "strides", "dilations",
                                             "ceil_mode")}
    attrs["pads"] = _window_pads(c, xs, c.attrs["ksize"])
    return attrs


def max_pool2d(c: Ctx, g: Value) -> list[Value | None]:
    x = c.x[0]
    return [c.op("max_pool2d_grad", x, c.y[0], g, **_pool_attrs(c, _static(x, c.name)))]


def avg_pool2d(c: Ctx, g: Value) -> list[Value | None]:
    xs = _static(c.x[0], c.name)
    return [c.op("avg_pool2d_grad", c.fb.constant(np.asarray(xs, np.int64)), g,
                 count_include_pad=c.attrs["count_include_pad"], **_pool_attrs(c, xs))]


def batch_norm(c: Ctx, g: Value) -> list[Value | None]:
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


def layer_norm(c: Ctx, g: Value) -> list[Value | None]:
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


def l2_normalize(c: Ctx, g: Value) -> list[Value | None]:
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


def _ints_const(c: Ctx, values: Any) -> Value:
    return c.fb.constant(np.asarray(values, np.int64))


def _scatter_add(c: Ctx, shape: Sequence[int], idx: Value, upd: Value, axis: int) -> Value:
    """Zeros of ``shape`` with ``upd`` added at ``idx`` along ``axis`` (``idx`` broadcast to
    ``upd``'s shape): the transpose of every gather (repeated indices add up)."""
    us = _static(upd, c.name)
    if _static(idx, c.name) != us:
        idx = c.op("broadcast_to", idx, _ints_const(c, us))
    zeros = c.fb.constant(np.zeros(tuple(shape), np_dtype(upd.dtype)))
    return c.op("scatter_elements", zeros, idx, upd, axis=axis, reduction="add")


def _linear_index(c: Ctx, idx: Value, dims: Sequence[int]) -> Value:
    """``idx[..., k]`` (per-row coordinates into ``dims``, negative ones wrapped) as one i64
    row-major offset per row: shape ``idx.shape[:-1]``."""
    idx = c.op("cast", idx, to="i64")
    idx = c.op("floor_mod", idx, _ints_const(c, list(dims)))
    strides = [int(np.prod(dims[j + 1:])) for j in range(len(dims))]
    return c.op("reduce_sum", c.op("mul", idx, _ints_const(c, strides)), axes=[-1],
                keepdims=False)


def gather(c: Ctx, g: Value) -> list[Value | None]:
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


def gather_nd(c: Ctx, g: Value) -> list[Value | None]:
    """``x[B..., idx[B..., I..., :], R...]``: ``g`` added at the rows the indices name."""
    x, idx = c.x
    xs, ids = _static(x, c.name), _static(idx, c.name)
    bd, k = c.attrs["batch_dims"], ids[-1]
    nb, ni = int(np.prod(xs[:bd])), int(np.prod(ids[bd:-1]))
    nx, nr = int(np.prod(xs[bd:bd + k])), int(np.prod(xs[bd + k:]))
    lin = c.op("reshape", _linear_index(c, idx, xs[bd:bd + k]), shape=[nb, ni, 1])
    gx = _scatter_add(c, (nb, nx, nr), lin, c.op("reshape", g, shape=[nb, ni, nr]), 1)
    return [c.op("reshape", gx, shape=list(xs)), None]


def gather_elements(c: Ctx, g: Value) -> list[Value | None]:
    x, idx = c.x
    axis = c.attrs["axis"] % len(_static(x, c.name))
    return [_scatter_add(c, _static(x, c.name), idx, g, axis), None]


def _scatter_written(c: Ctx, g: Value, idx: Value, axis: int) -> tuple[Value, Value]:
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


def _scatter_extremum(c: Ctx, g: Value, idx: Value, axis: int) -> list[Value | None]:
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


def _scatter_mul(c: Ctx, g: Value, idx: Value, axis: int) -> list[Value | None]:
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


def scatter_elements(c: Ctx, g: Value) -> list[Value | None]:
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


def scatter_nd(c: Ctx, g: Value) -> list[Value | None]:
    """Overwriting ``scatter_nd`` as a ``scatter_elements`` over rows of the flattened data."""
    data, idx, upd = c.x
    ds, ids, us = _static(data, c.name), _static(idx, c.name), _static(upd, c.name)
    k = ids[-1]
    nx, nr, ni = int(np.prod(ds[:k])), int(np.prod(ds[k:])), int(np.prod(ids[:-1]))
    lin = c.op("reshape", _linear_index(c, idx, ds[:k]), shape=[ni, 1])
    lin = c.op("broadcast_to", lin, _ints_const(c, [ni, nr]))
    g_data, g_upd = _scatter_written(c, c.op("reshape", g, shape=[nx, nr]), lin, 0)
    return [c.op("reshape", g_data, shape=list(ds)), None, c.op("reshape", g_upd, shape=list(us))]


def top_k(c: Ctx, gs: list[Value | None]) -> list[Value | None]:
    """The values' cotangent added at the selected indices (the indices carry none)."""
    g = gs[0]
    if g is None:
        return [None, None]
    x = c.x[0]
    xs = _static(x, c.name)
    return [_scatter_add(c, xs, c.y[1], g, len(xs) - 1), None]


def one_hot(c: Ctx, g: Value) -> list[Value | None]:
    """Differentiable in the on/off values only: ``on`` gets ``g`` summed where hot."""
    idx, depth, on, off = c.x
    hot = c.op("one_hot", idx, depth, c.const(1.0, g), c.const(0.0, g), axis=c.attrs["axis"])
    g_on = c.op("mul", g, hot)
    return [None, None, c.unbroadcast(g_on, on), c.unbroadcast(c.op("sub", g, g_on), off)]


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_terms(c: Ctx) -> tuple[list[str], str]:
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


def einsum(c: Ctx, g: Value) -> list[Value | None]:
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


def _resize_matrix(c: Ctx, n_in: int, n_out: int) -> np.ndarray:
    """The ``[n_out, n_in]`` matrix one axis of the resize applies."""
    from pytfrt.backends.cpu.data_ops import resize_matrix

    return resize_matrix(n_in, n_out, mode=c.attrs["mode"],
                         coordinate_transformation_mode=c.attrs["coordinate_transformation_mode"],
                         nearest_mode=c.attrs["nearest_mode"])


def resize(c: Ctx, g: Value) -> list[Value | None]:
    """Resize is linear, one matrix per spatial axis: its transpose applies their transposes."""
    xs = _static(c.x[0], c.name)
    (ho, wo), nhwc = c.attrs["size"], c.attrs["layout"] == "NHWC"
    hi, wi = (xs[1], xs[2]) if nhwc else (xs[2], xs[3])
    dt = np_dtype(g.dtype)
    mh = c.fb.constant(_resize_matrix(c, hi, ho).astype(dt))
    mw = c.fb.constant(_resize_matrix(c, wi, wo).astype(dt))
    eq = "nhwc,hi,wj->nijc" if nhwc else "nchw,hi,wj->ncij"
    return [c.op("einsum", g, mh, mw, equation=eq)]


def _conv_attrs(c: Ctx) -> dict[str, Any]:
    return {key: c.attrs[key] for key in ("layout", "strides", "dilations", "groups", "pads")}


def conv2d_transpose(c: Ctx, g: Value) -> list[Value | None]:
    """``conv2d_transpose(x, w)`` is the input gradient of the conv2d from its output's
    shape to ``x``'s with filter ``w``: its transpose is that conv2d (output_padding rows
    only widen the output, which that conv2d's floor drops), and the filter's gradient is
    the conv2d's filter gradient with ``g`` as its input and ``x`` as its output gradient."""
    x, w = c.x
    conv = _conv_attrs(c)
    ws = _ints_const(c, _static(w, c.name))
    return [c.op("conv2d", g, w, **conv), c.op("conv2d_backprop_filter", g, ws, x, **conv)]


def conv2d_backprop_input(c: Ctx, g: Value) -> list[Value | None]:
    """Linear in the filter and ``dy``: the conv2d of ``g`` and the filter gradient."""
    _shape, w, dy = c.x
    conv = _conv_attrs(c)
    ws = _ints_const(c, _static(w, c.name))
    return [None, c.op("conv2d_backprop_filter", g, ws, dy, **conv), c.op("conv2d", g, w, **conv)]


def conv2d_backprop_filter(c: Ctx, g: Value) -> list[Value | None]:
    """Linear in ``x`` and ``dy``: ``g`` acts as a filter."""
    x, _shape, dy = c.x
    conv = _conv_attrs(c)
    xs = _ints_const(c, _static(x, c.name))
    return [c.op("conv2d_backprop_input", xs, g, dy, **conv), None, c.op("conv2d", x, g, **conv)]


def bias_add_grad(c: Ctx, g: Value) -> list[Value | None]:
    """A sum over every axis but the channels': ``g`` broadcast back along them."""
    ds = _static(c.x[0], c.name)
    channel = len(ds) - 1 if c.attrs["layout"] == "NHWC" else 1
    others = [a for a in range(len(ds)) if a != channel]
    return [c.broadcast_back(g, c.x[0], others, False) if others else g]


def max_pool2d_grad(c: Ctx, g: Value) -> list[Value | None]:
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


def avg_pool2d_grad(c: Ctx, g: Value) -> list[Value | None]:
    """Linear in ``dy`` and the transpose of ``avg_pool2d``: its transpose is the pooling."""
    attrs = {key: c.attrs[key] for key in ("layout", "ksize", "strides", "pads", "dilations",
                                             "ceil_mode", "count_include_pad")}
    return [None, c.op("avg_pool2d", g, **attrs)]


def _exclusive_products(c: Ctx, x2: Value, n: int, reverse: bool) -> Value:
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


def reduce_prod(c: Ctx, g: Value) -> list[Value | None]:
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


def lrn(c: Ctx, g: Value) -> list[Value | None]:
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


def _zeros_like(c: Ctx, v: Value) -> Value:
    return c.fb.constant(np.zeros(_static(v, c.name), np_dtype(v.dtype)))


def split(c: Ctx, gs: list[Value | None]) -> list[Value | None]:
    parts = [g if g is not None else _zeros_like(c, y) for g, y in zip(gs, c.y, strict=True)]
    return [parts[0] if len(parts) == 1 else c.op("concat", *parts, axis=c.attrs["axis"])]


def identity_n(c: Ctx, gs: list[Value | None]) -> list[Value | None]:
    return list(gs)


# -- gradient ops written out as catalogue ops (their second order) ------------------------------


def _expanded(expand: Callable[[Ctx], list[Value]]) -> MultiRule:
    """The rule of an op re-emitted as catalogue ops with rules of their own (``expand``
    returns its results, computed again from its operands): those ops are differentiated by
    :func:`pytfrt.compiler.autodiff.backprop` (``c.backprop``).  The copies are dead code to the
    forward program."""

    def rule(c: Ctx, gs: list[Value | None]) -> list[Value | None]:
        start = len(list(c.fb.block.ops))
        outs = expand(c)
        ops = list(c.fb.block.ops)[start:]
        wrt: list[Value] = []
        for x in c.x:
            if x.ssa in c.active and all(x.ssa is not w.ssa for w in wrt):
                wrt.append(x)
        pairs = [(o, g) for o, g in zip(outs, gs, strict=True) if g is not None]
        grads = dict(zip([w.ssa for w in wrt], c.backprop(ops, wrt, pairs), strict=True))
        return [grads.pop(x.ssa, None) for x in c.x]

    return rule


def _sum_over(c: Ctx, v: Value, axes: Sequence[int], keepdims: bool) -> Value:
    """``reduce_sum`` over ``axes`` -- none (not all) when ``axes`` is empty."""
    return c.op("reduce_sum", v, axes=list(axes), keepdims=keepdims) if axes else v


def _gelu_grad_ops(c: Ctx) -> list[Value]:
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


def _layer_norm_grad_ops(c: Ctx) -> list[Value]:
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


def _batch_norm_grad_ops(c: Ctx) -> list[Value]:
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


def _cross_entropy_ops(c: Ctx) -> list[Value]:
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


# The gradient ops with several results, differentiated through their expansion.
gelu_grad = _expanded(_gelu_grad_ops)
layer_norm_grad = _expanded(_layer_norm_grad_ops)
batch_norm_grad = _expanded(_batch_norm_grad_ops)
cross_entropy = _expanded(_cross_entropy_ops)  # softmax_ and sparse_softmax_cross_entropy


def dynamic_slice(c: Ctx, g: Value) -> list[Value | None]:
    """``g`` written into zeros of ``x``'s shape at the run-time slice."""
    x, begin, end = c.x
    masks = {k: c.attrs[k] for k in ("begin_mask", "end_mask", "shrink_mask")}
    hint = [-1] * x.rank if x.shape is None else [-1 if d is None else int(d) for d in x.shape]
    gx = c.op("dynamic_slice_grad", g, c.op("shape", x), begin, end, static_shape=hint, **masks)
    return [gx, None, None]
