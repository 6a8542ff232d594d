"""Catalogue family: linear algebra and neural-network ops (matmul, conv, norms, pooling).

Layouts are explicit attributes (``NHWC`` with ``HWIO`` filters, ``NCHW`` with ``OIHW``).
``matmul`` and ``conv2d`` carry the fused-epilogue attributes (``activation``, ``alpha``,
``epilogue_operands``) implicitly: front ends never set them, ``-tg-fuse-epilogue`` does.
``conv2d`` has a load-time ``prepare`` step (the weight-dependent plan of
``pytfrt.backends.cpu.conv``).
"""

from __future__ import annotations

from typing import Any

from pytfrt.backends.cpu import op_math
from pytfrt.backends.cpu._geometry import out_size
from pytfrt.backends.cpu.ops import MatmulShapeError, matmul_result_shape
from pytfrt.compiler.ops import grad_rules as gr
from pytfrt.compiler.ops.base import (
    REQUIRED,
    AttrSpec,
    InferContext,
    broadcast_shapes,
    define,
    norm_axis,
    same_dtype,
)
from pytfrt.compiler.types import FLOAT_DTYPES, TType

LAYOUTS = ("NHWC", "NCHW")
BLOCKED = "NCHW16c"
"""The channel-blocked layout of ``conv2d`` and ``global_avg_pool`` (oneDNN's ``nChw16c``): an
NHWC image of ``C`` channels (a multiple of 16) as ``(N, C/16, H, W, 16)``, filters HWIO.  Only
``-tg-dnnl-blocked`` makes it (after differentiation and the other rewrites), with
``reorder_layout`` at its edges."""
STEM = "NCHW>NHWC"
"""The ``conv2d`` layout of a convolution that reads an NCHW image and writes NHWC, filter HWIO
(made by ``-tg-conv-nchw-input`` from ``conv2d {NHWC}(transpose(x, [0, 2, 3, 1]))``)."""
ACTIVATIONS: tuple[str, ...] = tuple(op_math.ACTIVATIONS)
"""The fused epilogue's activations (:data:`pytfrt.backends.cpu.op_math.ACTIVATIONS`)."""


def _epilogue_attrs() -> dict[str, AttrSpec]:
    return {
        "activation": AttrSpec("str", "none", implicit=True, choices=ACTIVATIONS),
        "alpha": AttrSpec("float", 0.0, implicit=True),
        "epilogue_operands": AttrSpec("ints", (0, 0), implicit=True),
    }


def _check_epilogue(ctx: InferContext, base: int, out: TType) -> None:
    flags = ctx.attrs["epilogue_operands"]
    if len(flags) != 2 or any(f not in (0, 1) for f in flags):
        raise ctx.error(f"epilogue_operands must be two 0/1 flags, got {list(flags)}")
    if len(ctx.inputs) != base + sum(flags):
        raise ctx.error(
            f"takes {base + sum(flags)} operands with epilogue_operands = {list(flags)}, "
            f"got {len(ctx.inputs)}"
        )
    i = base
    if flags[0]:
        bias = ctx.inputs[i]
        i += 1
        if bias.rank is not None and bias.rank > 1:
            raise ctx.error(f"the bias must be 1-D, got {bias}")
    if flags[1]:
        res = ctx.inputs[i]
        broadcast_shapes(ctx, res.shape, out.shape)
    if ctx.attrs["activation"] != "none" and out.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"an activation needs a floating-point result, got {out.dtype}")


def _matmul(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) < 2:
        raise ctx.error("takes at least 2 operands")
    a, b = ctx.inputs[0], ctx.inputs[1]
    dtype = same_dtype(ctx, [0, 1])
    out = TType(dtype, _matmul_shape(ctx, a.shape, b.shape))
    _check_epilogue(ctx, 2, out)
    return [out]


def _matmul_shape(ctx: InferContext, sa: Any, sb: Any) -> Any:
    """The result shape by the one matmul rule (:func:`pytfrt.backends.cpu.ops.
    matmul_result_shape`), its errors in the catalogue's words."""
    if sa is None or sb is None:
        return None
    try:
        return matmul_result_shape(sa, sb, transpose_a=ctx.attrs["transpose_a"],
                                   transpose_b=ctx.attrs["transpose_b"])
    except MatmulShapeError as exc:
        if exc.reason == "inner":
            raise ctx.error(f"contraction dimensions differ: {exc.k[0]} and {exc.k[1]}") from None
        if exc.reason == "rank":
            raise ctx.error("operands must have rank >= 1") from None
        if exc.reason.startswith("transpose"):
            raise ctx.error(f"{exc.reason} needs rank >= 2") from None
        raise ctx.error(f"operand shapes {list(sa)}, {list(sb)} do not broadcast") from None


def _window_out(size: int | None, k: int, s: int, d: int, p0: int, p1: int, ceil: bool = False,
                same: bool = False) -> int | None:
    """Output length along one dim (the CPU kernels' rule; ``SAME``: ``ceil(size / s)``)."""
    if size is not None and same:
        return -(-size // s)
    out = out_size(size, k, s, d, p0, p1, ceil=ceil)
    return None if out is None else max(out, 0)


def _spatial(ctx: InferContext, x: TType) -> tuple[int, int, int]:
    """(H axis, W axis, C axis) of ``x`` for the op's layout."""
    if ctx.attrs["layout"] == BLOCKED:
        if x.rank is not None and x.rank != 5 or (x.shape is not None
                                                  and x.shape[4] not in (None, 16)):
            raise ctx.error(f"an {BLOCKED} input has shape (N, C/16, H, W, 16), got {x}")
        return (2, 3, 1)
    if x.rank is not None and x.rank != 4:
        raise ctx.error(f"the input must have rank 4, got {x}")
    return (1, 2, 3) if ctx.attrs["layout"] == "NHWC" else (2, 3, 1)  # NCHW, STEM: NCHW in


def _pair(ctx: InferContext, name: str, n: int = 2) -> tuple[int, ...]:
    v = ctx.attrs[name]
    if len(v) != n or any(e < (0 if name in ("pads", "output_padding") else 1) for e in v):
        raise ctx.error(f"{name} must be {n} {'non-negative' if name == 'pads' else 'positive'} "
                        f"integers, got {list(v)}")
    return tuple(v)


def _conv2d(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) < 2:
        raise ctx.error("takes at least 2 operands (x, w)")
    x, w = ctx.inputs[0], ctx.inputs[1]
    dtype = same_dtype(ctx, [0, 1])
    if dtype not in FLOAT_DTYPES:
        raise ctx.error(f"operands must be floating point, got {dtype}")
    h_ax, w_ax, c_ax = _spatial(ctx, x)
    if w.rank is not None and w.rank != 4:
        raise ctx.error(f"the filter must have rank 4, got {w}")
    strides, dil = _pair(ctx, "strides"), _pair(ctx, "dilations")
    pads = _pair(ctx, "pads", 4)
    groups = ctx.attrs["groups"]
    if groups < 1:
        raise ctx.error(f"groups must be >= 1, got {groups}")
    blocked = ctx.attrs["layout"] == BLOCKED
    nhwc = ctx.attrs["layout"] in ("NHWC", BLOCKED, STEM)  # HWIO filter, NHWC-like output
    if w.shape is not None:
        kh, kw, cin_g, cout = (w.shape if nhwc else (w.shape[2], w.shape[3], w.shape[1],
                                                     w.shape[0]))
    else:
        kh = kw = cin_g = cout = None
    if x.shape is None:
        return [TType(dtype, None)]
    cin = x.shape[c_ax]
    if blocked:
        cin = None if cin is None else 16 * cin
        if groups != 1 or (cout is not None and cout % 16):
            raise ctx.error(f"an {BLOCKED} convolution needs groups 1 and output channels a "
                            f"multiple of 16, got groups {groups}, {cout} channels")
    if cin is not None and cin_g is not None and cin != cin_g * groups:
        raise ctx.error(f"input channels {cin} do not match filter channels {cin_g} x groups "
                        f"{groups}")
    if cout is not None and cout % groups:
        raise ctx.error(f"output channels {cout} are not divisible by groups {groups}")
    same = ctx.attrs["padding"] == "SAME"
    oh = None if kh is None else _window_out(x.shape[h_ax], kh, strides[0], dil[0], pads[0],
                                             pads[1], same=same)
    ow = None if kw is None else _window_out(x.shape[w_ax], kw, strides[1], dil[1], pads[2],
                                             pads[3], same=same)
    shape: tuple[int | None, ...] = ((x.shape[0], oh, ow, cout) if nhwc
                                     else (x.shape[0], cout, oh, ow))
    if blocked:
        shape = (x.shape[0], None if cout is None else cout // 16, oh, ow, 16)
    if any(d == 0 for d in (oh, ow)):
        raise ctx.error(f"the window does not fit the input {x}")
    out = TType(dtype, shape)
    _check_epilogue(ctx, 2, out)
    return [out]


def _conv_split(attrs: dict[str, Any], n: int) -> tuple[list[int], list[int]]:
    """conv2d: the prepare step takes the filter (and bias); the run step x (and residual)."""
    flags = attrs.get("epilogue_operands", (0, 0))
    prep, run = [1], [0]
    i = 2
    if flags[0]:
        prep.append(i)
        i += 1
    if flags[1]:
        run.append(i)
    return prep, run


def _conv2d_transpose(ctx: InferContext) -> list[TType]:
    """The CPU kernel's own output-shape rule (``conv.conv2d_transpose_output_shape``)."""
    from pytfrt.backends.cpu.conv import conv2d_transpose_output_shape
    from pytfrt.backends.cpu.ops import OpError

    x, w = ctx.inputs
    dtype = same_dtype(ctx)
    _spatial(ctx, x)
    if w.shape is None or x.shape is None or any(d is None for d in w.shape):
        return [TType(dtype, None)]
    try:
        shape = conv2d_transpose_output_shape(
            x.shape, w.shape,  # type: ignore[arg-type]
            layout=ctx.attrs["layout"], strides=_pair(ctx, "strides"),
            dilations=_pair(ctx, "dilations"), pads=_pair(ctx, "pads", 4),
            groups=ctx.attrs["groups"], output_padding=_pair(ctx, "output_padding"),
        )
    except OpError as exc:
        raise ctx.error(str(exc).removeprefix("conv2d_transpose: ")) from None
    return [TType(dtype, shape)]


def _float_same(ctx: InferContext) -> list[TType]:
    x = ctx.inputs[0]
    if x.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"the input must be floating point, got {x.dtype}")
    same_dtype(ctx)
    return [x]


def _axis_op(ctx: InferContext) -> list[TType]:
    x = ctx.inputs[0]
    norm_axis(ctx, ctx.attrs["axis"], x.rank)
    return _float_same(ctx)


def _batch_norm(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) != 5:
        raise ctx.error(f"takes 5 operands (x, scale, offset, mean, variance), got "
                        f"{len(ctx.inputs)}")
    x = ctx.inputs[0]
    axis = norm_axis(ctx, ctx.attrs["axis"], x.rank)
    c = None if x.shape is None else x.shape[axis]
    for t in ctx.inputs[1:]:
        if t.shape is not None and (len(t.shape) != 1 or (c is not None and t.shape[0]
                                                          not in (None, c))):
            raise ctx.error(f"scale/offset/mean/variance must be 1-D of size {c}, got {t}")
    return _float_same(ctx)


def _layer_norm(ctx: InferContext) -> list[TType]:
    n = 1 + int(ctx.attrs["has_gamma"]) + int(ctx.attrs["has_beta"])
    if len(ctx.inputs) != n:
        raise ctx.error(f"takes {n} operands with has_gamma/has_beta, got {len(ctx.inputs)}")
    return _axis_op(ctx)


def _add_layer_norm(ctx: InferContext) -> list[TType]:
    n = 2 + int(ctx.attrs["has_gamma"]) + int(ctx.attrs["has_beta"])
    if len(ctx.inputs) != n:
        raise ctx.error(f"takes {n} operands with has_gamma/has_beta, got {len(ctx.inputs)}")
    a, b = ctx.inputs[:2]
    if a.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"the input must be floating point, got {a.dtype}")
    same_dtype(ctx)
    shape = broadcast_shapes(ctx, a.shape, b.shape)
    s = TType(a.dtype, None if shape is None else tuple(shape))
    norm_axis(ctx, ctx.attrs["axis"], s.rank)
    return [s, s]


def _l2_normalize(ctx: InferContext) -> list[TType]:
    x = ctx.inputs[0]
    for a in ctx.attrs["axis"]:
        norm_axis(ctx, a, x.rank)
    return _float_same(ctx)


def _pool(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    h_ax, w_ax, _ = _spatial(ctx, x)
    k, s, pads = _pair(ctx, "ksize"), _pair(ctx, "strides"), _pair(ctx, "pads", 4)
    d = _pair(ctx, "dilations")
    if x.shape is None:
        return [x]
    ceil, same = ctx.attrs["ceil_mode"], ctx.attrs["padding"] == "SAME"
    oh = _window_out(x.shape[h_ax], k[0], s[0], d[0], pads[0], pads[1], ceil, same)
    ow = _window_out(x.shape[w_ax], k[1], s[1], d[1], pads[2], pads[3], ceil, same)
    if oh == 0 or ow == 0:
        raise ctx.error(f"the window does not fit the input {x}")
    shape = list(x.shape)
    shape[h_ax], shape[w_ax] = oh, ow
    return [TType(x.dtype, tuple(shape))]


def _global_pool(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    h_ax, w_ax, _ = _spatial(ctx, x)
    if x.shape is None:
        return [x]
    shape = list(x.shape)
    shape[h_ax] = shape[w_ax] = 1
    return [TType(x.dtype, tuple(shape))]


_LAYOUT = AttrSpec("str", REQUIRED, choices=LAYOUTS)
_WINDOW = {
    "layout": _LAYOUT,
    "strides": AttrSpec("ints", (1, 1)),
    "pads": AttrSpec("ints", (0, 0, 0, 0)),
    "padding": AttrSpec("str", "", implicit=True, choices=("", "SAME", "VALID")),
}

define("matmul", ("a", "b", "extra*"), _matmul,
       {"transpose_a": AttrSpec("bool", False), "transpose_b": AttrSpec("bool", False),
        **_epilogue_attrs()}, family="nn", grad=gr.matmul)
_BLOCKED_OK = AttrSpec("str", REQUIRED, choices=(*LAYOUTS, BLOCKED))
"""``layout`` of the ops that also take :data:`BLOCKED` images."""
_CONV_LAYOUT = AttrSpec("str", REQUIRED, choices=(*LAYOUTS, BLOCKED, STEM))
"""``conv2d``'s ``layout``: also :data:`STEM`."""

define("conv2d", ("x", "w", "extra*"), _conv2d,
       {**_WINDOW, "layout": _CONV_LAYOUT, "dilations": AttrSpec("ints", (1, 1)),
        "groups": AttrSpec("int", 1), **_epilogue_attrs()},
       family="nn", prepare="conv2d.prepare", prepare_operands=_conv_split, grad=gr.conv2d)
define("conv2d_transpose", ("x", "w"), _conv2d_transpose,
       {"layout": _LAYOUT, "strides": AttrSpec("ints", (1, 1)),
        "pads": AttrSpec("ints", (0, 0, 0, 0)), "dilations": AttrSpec("ints", (1, 1)),
        "groups": AttrSpec("int", 1), "output_padding": AttrSpec("ints", (0, 0))}, family="nn",
       grad=gr.conv2d_transpose)
define("batch_norm", ("x", "scale", "offset", "mean", "variance"), _batch_norm,
       {"epsilon": AttrSpec("float", 1e-3), "axis": AttrSpec("int", -1)}, family="nn",
       grad=gr.batch_norm)
define("layer_norm", ("x", "gamma?", "beta?"), _layer_norm,
       {"axis": AttrSpec("int", -1), "epsilon": AttrSpec("float", 1e-5),
        "has_gamma": AttrSpec("bool", True), "has_beta": AttrSpec("bool", True)}, family="nn",
       grad=gr.layer_norm)
define("add_layer_norm", ("a", "b", "gamma?", "beta?"), _add_layer_norm,
       {"axis": AttrSpec("int", -1), "epsilon": AttrSpec("float", 1e-5),
        "has_gamma": AttrSpec("bool", True), "has_beta": AttrSpec("bool", True)}, family="nn",
       num_results=2,
       doc="(s, layer_norm(s)) with s = a + b: a residual add and the layer norm reading it "
           "(made by -tg-fuse-add-layer-norm)",
       no_grad="made by -tg-fuse-add-layer-norm, which runs after differentiation")
define("softmax", ("x",), _axis_op, {"axis": AttrSpec("int", -1)}, family="nn", grad=gr.softmax)
define("log_softmax", ("x",), _axis_op, {"axis": AttrSpec("int", -1)}, family="nn",
       grad=gr.log_softmax)
define("l2_normalize", ("x",), _l2_normalize,
       {"axis": AttrSpec("ints", (-1,)), "epsilon": AttrSpec("float", 1e-12)}, family="nn",
       grad=gr.l2_normalize)
define("lrn", ("x",), _axis_op,
       {"depth_radius": AttrSpec("int", 5), "bias": AttrSpec("float", 1.0),
        "alpha": AttrSpec("float", 1.0), "beta": AttrSpec("float", 0.5),
        "axis": AttrSpec("int", -1)}, family="nn", grad=gr.lrn)
for _name, _grad in (("max_pool2d", gr.max_pool2d), ("avg_pool2d", gr.avg_pool2d)):
    define(_name, ("x",), _pool,
           {**_WINDOW, "ksize": AttrSpec("ints"), "dilations": AttrSpec("ints", (1, 1)),
            "count_include_pad": AttrSpec("bool", False),
            "ceil_mode": AttrSpec("bool", False)}, family="nn", grad=_grad)
define("global_avg_pool", ("x",), _global_pool, {"layout": _BLOCKED_OK}, family="nn",
       grad=gr.global_avg_pool)
define("global_max_pool", ("x",), _global_pool, {"layout": _LAYOUT}, family="nn",
       grad=gr.global_max_pool)


def _reorder_layout(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    src, dst = ctx.attrs["src_layout"], ctx.attrs["dst_layout"]
    if x.dtype != "f32":
        raise ctx.error(f"needs a float32 image, got {x}")
    if x.rank is not None and x.rank != (5 if src == BLOCKED else 4):
        raise ctx.error(f"a {src} image has rank {5 if src == BLOCKED else 4}, got {x}")
    sh, sw = strides = tuple(ctx.attrs["strides"])
    if len(strides) != 2 or min(strides) < 1:
        raise ctx.error(f"strides are two positive integers, got {list(strides)}")
    if strides != (1, 1) and (src, dst) != ("NHWC", BLOCKED):
        raise ctx.error(f"strides subsample an NHWC image into {BLOCKED} only, not {src} -> "
                        f"{dst}")
    if x.shape is None or src == dst:
        return [TType(x.dtype, None if x.shape is None else tuple(x.shape))]
    if src == "NHWC":
        n, h, w, c = x.shape
        if c is not None and c % 16:
            raise ctx.error(f"{BLOCKED} needs channels a multiple of 16, got {x}")
        h = None if h is None else -(-h // sh)
        w = None if w is None else -(-w // sw)
        return [TType(x.dtype, (n, None if c is None else c // 16, h, w, 16))]
    n, cb, h, w, b = x.shape
    if b not in (None, 16):
        raise ctx.error(f"an {BLOCKED} image has shape (N, C/16, H, W, 16), got {x}")
    return [TType(x.dtype, (n, h, w, None if cb is None else cb * 16))]


define("reorder_layout", ("x",), _reorder_layout,
       {"src_layout": AttrSpec("str", REQUIRED, choices=("NHWC", BLOCKED)),
        "dst_layout": AttrSpec("str", REQUIRED, choices=("NHWC", BLOCKED)),
        "strides": AttrSpec("ints", (1, 1), implicit=True)}, family="nn",
       doc=f"an image from one layout to the other, NHWC <-> {BLOCKED}; NHWC -> {BLOCKED} "
           "may subsample it (`strides`: every sh-th row and sw-th column from the first, "
           "the input of a strided 1x1 convolution; made by -tg-dnnl-blocked)",
       no_grad="made by -tg-dnnl-blocked, which runs after differentiation")


def _squeeze_excite(ctx: InferContext) -> list[TType]:
    x, w1, b1, w2, b2 = ctx.inputs
    _, _, c_ax = _spatial(ctx, x)
    if x.dtype not in FLOAT_DTYPES or any(t.dtype != x.dtype for t in (w1, b1, w2, b2)):
        raise ctx.error(f"x and the weights must share one float dtype, got {x}, {w1}, {b1}, "
                        f"{w2}, {b2}")
    c = None if x.shape is None else x.shape[c_ax]
    r = None if w1.shape is None or len(w1.shape) != 2 else w1.shape[1]
    want = ((c, r), (r,), (r, c), (c,))
    for t, shape in zip((w1, b1, w2, b2), want, strict=True):
        if t.shape is not None and (len(t.shape) != len(shape) or any(
                a is not None and b is not None and a != b
                for a, b in zip(t.shape, shape, strict=True))):
            raise ctx.error(f"weights must be w1 [C, R], b1 [R], w2 [R, C], b2 [C] (C = the "
                            f"input's channels), got {w1}, {b1}, {w2}, {b2}")
    return [x]


define("squeeze_excite", ("x", "w1", "b1", "w2", "b2"), _squeeze_excite,
       {"layout": _LAYOUT, "activation": AttrSpec("str", "relu", choices=ACTIVATIONS),
        "alpha": AttrSpec("float", 0.0),
        "gate": AttrSpec("str", "sigmoid", choices=("sigmoid", "hard_sigmoid")),
        "gate_alpha": AttrSpec("float", 1.0 / 6.0), "gate_beta": AttrSpec("float", 0.5)},
       family="nn",
       doc="x * gate(act(mean_hw(x) @ w1 + b1) @ w2 + b2): a squeeze-and-excitation block "
           "(made by -tg-fuse-squeeze-excite)",
       no_grad="made by -tg-fuse-squeeze-excite, which runs after differentiation")
