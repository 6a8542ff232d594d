"""TF math, neural-network and linear-algebra ops -> graph dialect ops.

Elementwise ops map one to one (tables below); ``BiasAdd`` is an ``add``; convolutions and
pooling resolve ``SAME``/``VALID``/``EXPLICIT`` padding into explicit pads when the spatial size
is static (``padding = "SAME"`` otherwise); depthwise filters ``[kh, kw, cin, m]`` become the
grouped form ``[kh, kw, 1, cin*m]`` with ``groups = cin``; NCHW convolutions and pools are
wrapped in transposes (TF's CPU kernels are NHWC too). ``Einsum`` with two operands becomes
transposes, reshapes and one batched ``matmul``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pytfrt.backends.cpu._geometry import same_pad
from pytfrt.compiler.frontends.tf_registry import tf_direct, tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, attr, tf_dtype_name, tg_to_np

_BINARY = {
    "Add": "add",
    "AddV2": "add",
    "Sub": "sub",
    "Mul": "mul",
    "RealDiv": "div",
    "FloorDiv": "floor_div",
    "FloorMod": "floor_mod",
    "Pow": "pow",
    "Maximum": "maximum",
    "Minimum": "minimum",
    "SquaredDifference": "squared_difference",
    "Equal": "equal",
    "NotEqual": "not_equal",
    "Less": "less",
    "LessEqual": "less_equal",
    "Greater": "greater",
    "GreaterEqual": "greater_equal",
    "LogicalAnd": "logical_and",
    "LogicalOr": "logical_or",
    "BitwiseAnd": "bitwise_and",
    "BitwiseOr": "bitwise_or",
    "Atan2": "atan2",
}

_UNARY = {
    "Neg": "neg",
    "Abs": "abs",
    "Exp": "exp",
    "Expm1": "expm1",
    "Log": "log",
    "Log1p": "log1p",
    "Sqrt": "sqrt",
    "Rsqrt": "rsqrt",
    "Square": "square",
    "Reciprocal": "reciprocal",
    "Inv": "reciprocal",
    "Sign": "sign",
    "Floor": "floor",
    "Ceil": "ceil",
    "Round": "round",
    "Tanh": "tanh",
    "Sigmoid": "sigmoid",
    "Relu": "relu",
    "Relu6": "relu6",
    "Elu": "elu",
    "Selu": "selu",
    "Softplus": "softplus",
    "Softsign": "softsign",
    "Erf": "erf",
    "Sin": "sin",
    "Cos": "cos",
    "Tan": "tan",
    "LogicalNot": "logical_not",
    "IsNan": "is_nan",
    "IsInf": "is_inf",
}


tf_direct(__name__, _BINARY, note="NumPy broadcasting")
tf_direct(__name__, _UNARY)


@tf_op("Div", tg="`div`", note="floating point only (TF's integer `Div` truncates)")
def _div(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    if ins[0].dtype not in ("f16", "bf16", "f32", "f64"):
        raise ConversionError(f"integer Div ({ins[0].dtype}) is not supported; use FloorDiv")
    return [cx.op("div", ins)]


@tf_op("DivNoNan", tg="`equal`, `div`, `select`", note="0 where the divisor is 0")
def _div_no_nan(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, y = ins
    zero = cx.scalar(0, y.dtype)
    is_zero = cx.op("equal", [y, zero])
    safe = cx.op("select", [is_zero, cx.scalar(1, y.dtype), y])
    return [cx.op("select", [is_zero, zero, cx.op("div", [x, safe])])]


@tf_op("Erfc", tg="`erf`, `sub`", note="computed as 1 - erf(x)")
def _erfc(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("sub", [cx.scalar(1, ins[0].dtype), cx.op("erf", ins)])]


@tf_op("LeakyRelu", tg="`leaky_relu`")
def _leaky_relu(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("leaky_relu", ins, alpha=float(attr(node, "alpha", 0.2)))]


@tf_op("Cast", tg="`cast`")
def _cast(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    dst = tf_dtype_name(attr(node, "DstT"))
    if ins[0].dtype == dst:
        return [ins[0]]
    return [cx.op("cast", ins, to=dst)]


@tf_op("Bitcast", tg="`bitcast`", note="types of one size (Keras' `signbit`, float `argmax`)")
def _bitcast(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    dst = tf_dtype_name(attr(node, "type"))
    if ins[0].dtype == dst:
        return [ins[0]]
    if tg_to_np(ins[0].dtype or "f32").itemsize != tg_to_np(dst).itemsize:
        raise ConversionError("a bitcast between types of different sizes changes the shape")
    return [cx.op("bitcast", ins, to=dst)]


@tf_op(
    "Select",
    "SelectV2",
    tg="`select`",
    note="`Select` with a vector condition broadcasts it over rows",
)
def _select(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    c, a, b = ins
    if node.op == "Select" and c.rank == 1 and a.rank is not None and a.rank > 1:
        c = cx.op("reshape", [c], shape=[-1] + [1] * (a.rank - 1))
    return [cx.op("select", [c, a, b])]


@tf_op("ClipByValue", tg="`maximum`, `minimum`")
def _clip(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, lo, hi = ins
    return [cx.op("minimum", [cx.op("maximum", [x, lo]), hi])]


@tf_op("AddN", tg="`add`", note="a chain of adds")
def _add_n(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    acc = ins[0]
    for x in ins[1:]:
        acc = cx.op("add", [acc, x])
    return [acc]


@tf_op("BiasAdd", "BiasAddV1", tg="`add`", note="NCHW biases are reshaped to `[C, 1, 1]`")
def _bias_add(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, b = ins
    if attr(node, "data_format", "NHWC") == "NCHW" and x.rank is not None and x.rank > 2:
        b = cx.reshape(b, [-1] + [1] * (x.rank - 2))
    return [cx.op("add", [x, b])]


# -- linear algebra ---------------------------------------------------------------------------


@tf_op("MatMul", tg="`matmul`")
def _matmul(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [
        cx.op(
            "matmul",
            ins,
            transpose_a=bool(attr(node, "transpose_a", False)),
            transpose_b=bool(attr(node, "transpose_b", False)),
        )
    ]


@tf_op(
    "BatchMatMul",
    "BatchMatMulV2",
    "BatchMatMulV3",
    tg="`matmul`",
    note="real types only (`adj_x` = transpose)",
)
def _batch_matmul(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    out = cx.op(
        "matmul",
        ins,
        transpose_a=bool(attr(node, "adj_x", False)),
        transpose_b=bool(attr(node, "adj_y", False)),
    )
    if node.op == "BatchMatMulV3":
        want = tf_dtype_name(attr(node, "Tout"))
        if out.dtype != want:
            out = cx.op("cast", [out], to=want)
    return [out]


@tf_op(
    "Einsum",
    tg="`transpose`, `reshape`, `matmul`, `reduce_sum`",
    note="one or two operands, no repeated index within an operand, no ellipsis; "
    "at most one merged index group (contracted, or one operand's own) dynamic per operand",
)
def _einsum(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    equation = attr(node, "equation").replace(" ", "")
    if "..." in equation or "->" not in equation:
        raise ConversionError(
            f"einsum '{equation}': ellipsis and implicit output are not supported"
        )
    lhs, out = equation.split("->")
    terms = lhs.split(",")
    if len(terms) != len(ins) or len(terms) not in (1, 2):
        raise ConversionError(f"einsum '{equation}': only one or two operands are supported")
    for t in terms:
        if len(set(t)) != len(t):
            raise ConversionError(f"einsum '{equation}': repeated index within an operand")
    if len(terms) == 1:
        x, t = ins[0], terms[0]
        drop = [i for i, c in enumerate(t) if c not in out]
        if drop:
            x = cx.op("reduce_sum", [x], axes=drop, keepdims=False)
            t = "".join(c for c in t if c in out)
        return [cx.transpose(x, [t.index(c) for c in out])]
    return [_einsum2(cx, equation, ins[0], ins[1], terms[0], terms[1], out)]


def _einsum2(cx: Any, eq: str, a: TV, b: TV, ta: str, tb: str, out: str) -> TV:
    # Indices only in one operand and not in the output are summed first.
    for which in (0, 1):
        x, t, other = (a, ta, tb) if which == 0 else (b, tb, ta)
        drop = [i for i, c in enumerate(t) if c not in out and c not in other]
        if drop:
            x = cx.op("reduce_sum", [x], axes=drop, keepdims=False)
            t = "".join(c for i, c in enumerate(t) if i not in drop)
        if which == 0:
            a, ta = x, t
        else:
            b, tb = x, t
    dims: dict[str, int | None] = {}
    for x, t in ((a, ta), (b, tb)):
        if x.shape is None:
            raise ConversionError(f"einsum '{eq}': operand rank unknown")
        for c, d in zip(t, x.shape, strict=True):
            if dims.get(c) is None:
                dims[c] = d
    if len([c for c in tb if c not in ta]) > 1 and any(dims[c] is None for c in tb if c not in ta):
        a, b, ta, tb = b, a, tb, ta  # b's own indices are merged: keep dynamic ones on a's side
    batch = [c for c in ta if c in tb and c in out]
    contract = [c for c in ta if c in tb and c not in out]
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]
    # a: [*batch, *free_a, K], b: [*batch, K, N] (K, N merged from the contracted and b-only
    # indices), then one broadcasting matmul: the leading dims keep their places (copied, not
    # merged), so any number of them may be dynamic.
    a2 = cx.transpose(a, [ta.index(c) for c in batch + free_a + contract])
    b2 = cx.transpose(b, [tb.index(c) for c in batch + contract + free_b])
    lead = len(batch)
    a3 = _merge_tail(cx, a2, lead + len(free_a), [dims[c] for c in contract], eq)
    b3 = _merge_tail(
        cx, b2, lead, [dims[c] for c in contract], eq, [dims[c] for c in free_b] or None
    )
    if not free_a:
        a3 = cx.op("expand_dims", [a3], axis=lead)
    if not free_b:
        b3 = cx.op("expand_dims", [b3], axis=lead + 1)
    for _ in range(max(len(free_a) - 1, 0)):
        b3 = cx.op("expand_dims", [b3], axis=lead)
    y = cx.op("matmul", [a3, b3], transpose_a=False, transpose_b=False)
    if not free_b:
        y = cx.op("squeeze", [y], axes=[lead + max(len(free_a), 1)])
    if not free_a:
        y = cx.op("squeeze", [y], axes=[lead])
    if len(free_b) > 1:
        keep = lead + len(free_a)
        target = [0] * keep + [-1 if dims[c] is None else dims[c] for c in free_b]
        if target[keep:].count(-1) > 1:
            raise ConversionError(f"einsum '{eq}': more than one dynamic output-only index")
        y = cx.op("reshape", [y], shape=target, copy_zero=True)
    order = batch + free_a + free_b
    return cx.transpose(y, [order.index(c) for c in out])


def _merge_tail(
    cx: Any,
    x: TV,
    keep: int,
    first: list[int | None],
    eq: str,
    second: list[int | None] | None = None,
) -> TV:
    """``x`` with its first ``keep`` dims kept and the rest merged into one or two groups."""
    groups = [first] if second is None else [first, second]
    if all(len(g) == 1 for g in groups):
        return x
    merged: list[int] = []
    for g in groups:
        if any(d is None for d in g):
            merged.append(-1)  # the reshape infers it: the only dynamic group (checked below)
        else:
            merged.append(math.prod(int(d or 0) for d in g))
    if merged.count(-1) > 1:
        raise ConversionError(f"einsum '{eq}': two dynamic merged groups")
    return cx.op("reshape", [x], shape=[0] * keep + merged, copy_zero=True)


# -- convolution and pooling ------------------------------------------------------------------


def _spatial(node: Any, values: list[int], fmt: str) -> list[int]:
    """The two spatial entries of a 4-element NHWC/NCHW list attribute."""
    return [int(values[1]), int(values[2])] if fmt == "NHWC" else [int(values[2]), int(values[3])]


def resolve_pads(
    node: Any,
    sizes: tuple[int | None, int | None],
    kernel: tuple[int | None, int | None],
    strides: list[int],
    dilations: list[int],
    fmt: str = "NHWC",
) -> dict[str, Any]:
    """``pads=[top, bottom, left, right]`` for a node's padding (``padding="SAME"`` if dynamic)."""
    padding = attr(node, "padding")
    if padding == "VALID":
        return {"pads": [0, 0, 0, 0]}
    if padding == "EXPLICIT":
        p = [int(v) for v in attr(node, "explicit_paddings")]
        if fmt == "NHWC":
            return {"pads": [p[2], p[3], p[4], p[5]]}
        return {"pads": [p[4], p[5], p[6], p[7]]}
    if padding != "SAME":
        raise ConversionError(f"padding '{padding}' is not supported")
    pads: list[int] = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        if size is None or k is None:
            return {"padding": "SAME"}
        pads += same_pad(size, k, s, d)
    return {"pads": pads}


def _to_nhwc(cx: Any, x: TV, fmt: str) -> TV:
    return x if fmt == "NHWC" else cx.transpose(x, [0, 2, 3, 1])


def _from_nhwc(cx: Any, y: TV, fmt: str) -> TV:
    return y if fmt == "NHWC" else cx.transpose(y, [0, 3, 1, 2])


def _check_fmt(node: Any) -> str:
    fmt = attr(node, "data_format", "NHWC")
    if fmt not in ("NHWC", "NCHW"):
        raise ConversionError(f"data_format {fmt} is not supported")
    return str(fmt)


def conv_attrs(node: Any, x: TV, w_hw: tuple[int | None, int | None]) -> dict[str, Any]:
    """The tg ``conv2d`` attributes (NHWC) of a TF convolution node."""
    fmt = _check_fmt(node)
    strides = _spatial(node, attr(node, "strides"), fmt)
    dilations = _spatial(node, attr(node, "dilations", [1, 1, 1, 1]), fmt)
    shape = x.shape or (None, None, None, None)
    sizes = (shape[1], shape[2]) if fmt == "NHWC" else (shape[2], shape[3])
    return {
        "layout": "NHWC",
        "strides": strides,
        "dilations": dilations,
        **resolve_pads(node, sizes, w_hw, strides, dilations, fmt),
    }


def filter_hw(w: TV, node: Any) -> tuple[int | None, int | None]:
    """The filter's static spatial size; a run-time one (``None``) only with SAME padding (the
    kernel pads by the filter it gets)."""
    if w.shape is None or w.shape[0] is None or w.shape[1] is None:
        if attr(node, "padding") != "SAME" or w.rank != 4:
            raise ConversionError("the filter's spatial size must be static (or the padding "
                                  "SAME)")
        return None, None
    return int(w.shape[0]), int(w.shape[1])


def _conv(cx: Any, node: Any, x: TV, w: TV, filt: TV, groups: int) -> TV:
    """A TF convolution node as ``conv2d`` on ``filt`` (NCHW wrapped in transposes)."""
    fmt = _check_fmt(node)
    attrs = conv_attrs(node, x, filter_hw(w, node))
    y = cx.op("conv2d", [_to_nhwc(cx, x, fmt), filt], groups=groups, **attrs)
    return _from_nhwc(cx, y, fmt)


@tf_op(
    "Conv2D",
    tg="`conv2d`",
    note="NHWC; NCHW via transposes; grouped when cin is a multiple of the filter's",
)
def _conv2d(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, w = ins
    cin = None if x.shape is None else x.shape[3 if _check_fmt(node) == "NHWC" else 1]
    groups = 1
    if cin is not None and w.shape is not None and w.shape[2] not in (None, cin):
        groups = cin // int(w.shape[2])
    return [_conv(cx, node, x, w, w, groups)]


def depthwise_filter(cx: Any, w: TV) -> TV:
    """TF's depthwise filter ``[kh, kw, cin, m]`` as the grouped ``[kh, kw, 1, cin*m]`` (a
    run-time ``kh``, ``kw`` kept: a blur whose size is drawn at run time)."""
    if w.shape is None or any(d is None for d in w.shape):
        if w.rank not in (None, 4):
            raise ConversionError(f"the depthwise filter must have rank 4, got {w.shape}")
        return cx.op("reshape", [w], shape=[0, 0, 1, -1], copy_zero=True)
    kh, kw, cin, m = (int(d or 0) for d in w.shape)
    if w.const is not None:
        return cx.const(w.const.reshape(kh, kw, 1, cin * m), name=cx.weight_name(w))
    return cx.reshape(w, [kh, kw, 1, cin * m])


@tf_op(
    "DepthwiseConv2dNative",
    tg="`conv2d` (groups = cin)",
    note="filter reshaped to `[kh, kw, 1, cin*m]`",
)
def _depthwise(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, w = ins
    cin = int(w.shape[2] or 0) if w.shape else 0
    if not cin:  # a filter shaped at run time: the groups are the input's channels
        fmt = _check_fmt(node)
        c = None if x.shape is None else x.shape[3 if fmt == "NHWC" else 1]
        if c is None:
            raise ConversionError("the input's channels or the filter's must be static")
        cin = int(c)
    return [_conv(cx, node, x, w, depthwise_filter(cx, w), cin)]


def pool_attrs(node: Any, x: TV, ksize: list[int], strides: list[int]) -> dict[str, Any]:
    """The tg pooling attributes (NHWC) of a TF pooling node."""
    fmt = _check_fmt(node)
    k = _spatial(node, ksize, fmt)
    s = _spatial(node, strides, fmt)
    shape = x.shape or (None, None, None, None)
    sizes = (shape[1], shape[2]) if fmt == "NHWC" else (shape[2], shape[3])
    pad = resolve_pads(node, sizes, (k[0], k[1]), s, [1, 1], fmt)
    return {"layout": "NHWC", "ksize": k, "strides": s, "ceil_mode": False, **pad}


@tf_op("MaxPool", "MaxPoolV2", tg="`max_pool2d`", note="`MaxPoolV2` needs constant ksize/strides")
def _max_pool(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    if node.op == "MaxPoolV2":
        ksize, strides = cx.ints(ins[1], "ksize"), cx.ints(ins[2], "strides")
    else:
        ksize, strides = attr(node, "ksize"), attr(node, "strides")
    fmt = _check_fmt(node)
    a = pool_attrs(node, x, ksize, strides)
    y = cx.op("max_pool2d", [_to_nhwc(cx, x, fmt)], count_include_pad=False, **a)
    return [_from_nhwc(cx, y, fmt)]


@tf_op("AvgPool", tg="`avg_pool2d`", note="padding excluded from the average, as TF")
def _avg_pool(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    fmt = _check_fmt(node)
    a = pool_attrs(node, x, attr(node, "ksize"), attr(node, "strides"))
    y = cx.op("avg_pool2d", [_to_nhwc(cx, x, fmt)], count_include_pad=False, **a)
    return [_from_nhwc(cx, y, fmt)]


# -- normalisation ----------------------------------------------------------------------------


@tf_op(
    "FusedBatchNorm",
    "FusedBatchNormV2",
    "FusedBatchNormV3",
    tg="`batch_norm`; training: reductions",
    note="`is_training` computes batch statistics (variance output Bessel-corrected, as TF)",
)
def _fused_batch_norm(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, scale, offset, mean, var = ins[:5]
    fmt = _check_fmt(node)
    axis = 3 if fmt == "NHWC" else 1
    eps = float(attr(node, "epsilon", 1e-3))
    n_out = 6 if node.op == "FusedBatchNormV3" else 5
    if not attr(node, "is_training", True):
        y = cx.op("batch_norm", [x, scale, offset, mean, var], epsilon=eps, axis=axis)
        return [y, mean, var, mean, var, var][:n_out]
    if x.dtype != "f32":
        raise ConversionError("training-mode batch norm supports f32 only")
    axes = [0, 1, 2] if fmt == "NHWC" else [0, 2, 3]
    bmean = cx.op("reduce_mean", [x], axes=axes, keepdims=False)
    bshape = [-1] if fmt == "NHWC" else [-1, 1, 1]
    centered = cx.op("sub", [x, cx.reshape(bmean, bshape)])
    bvar = cx.op("reduce_mean", [cx.op("square", [centered])], axes=axes, keepdims=False)
    inv = cx.op("rsqrt", [cx.op("add", [bvar, cx.scalar(eps, "f32")])])
    y = cx.op(
        "add",
        [
            cx.op("mul", [centered, cx.reshape(cx.op("mul", [inv, scale]), bshape)]),
            cx.reshape(offset, bshape),
        ],
    )
    if x.shape is not None and all(x.shape[a] is not None for a in axes):
        n = math.prod(int(x.shape[a] or 0) for a in axes)
        unbiased = cx.op("mul", [bvar, cx.scalar(n / max(n - 1, 1), "f32")])
    else:
        raise ConversionError("training-mode batch norm needs static N, H, W")
    return [y, bmean, unbiased, bmean, bvar, bvar][:n_out]


@tf_op("Softmax", tg="`softmax` (last axis)")
def _softmax(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("softmax", ins, axis=cx.last_axis(ins[0]))]


@tf_op("LogSoftmax", tg="`log_softmax` (last axis)")
def _log_softmax(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("log_softmax", ins, axis=cx.last_axis(ins[0]))]


@tf_op("L2Loss", tg="`square`, `reduce_sum`, `mul`", note="sum(x**2) / 2")
def _l2_loss(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    s = cx.op("reduce_sum", [cx.op("square", ins)], axes=[], keepdims=False)
    return [cx.op("mul", [s, cx.scalar(0.5, ins[0].dtype)])]


# -- reductions -------------------------------------------------------------------------------

_REDUCE = {
    "Sum": "reduce_sum",
    "Mean": "reduce_mean",
    "Max": "reduce_max",
    "Min": "reduce_min",
    "Prod": "reduce_prod",
    "Any": "reduce_any",
    "All": "reduce_all",
}


def _reduce(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, axes_tv = ins
    axes = cx.ints(axes_tv, "reduction axes")
    keep = bool(attr(node, "keep_dims", False))
    if not axes:
        return [x]  # TF reduces over nothing for an empty axis list (tg: empty = all)
    rank = x.rank
    if rank is not None:
        axes = sorted({a % rank for a in axes}) if rank else []
        if not axes:
            return [x]
    return [cx.op(_REDUCE[node.op], [x], axes=axes, keepdims=keep)]


for _name, _tg in _REDUCE.items():
    tf_op(_name, tg=f"`{_tg}`", note="constant axes; an empty axis list is the identity")(_reduce)


@tf_op("ArgMax", "ArgMin", tg="`argmax` / `argmin`", note="constant axis")
def _argmax(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, axis_tv = ins
    (axis,) = cx.ints(axis_tv, "axis")
    if x.rank:
        axis %= x.rank
    out = tf_dtype_name(attr(node, "output_type", 9))  # DT_INT64 = 9
    op = "argmax" if node.op == "ArgMax" else "argmin"
    return [cx.op(op, [x], axis=axis, keepdims=False, output_type=out)]


@tf_op("Cumsum", tg="`cumsum`", note="constant axis")
def _cumsum(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, axis_tv = ins
    (axis,) = cx.ints(axis_tv, "axis")
    if x.rank:
        axis %= x.rank
    return [
        cx.op(
            "cumsum",
            [x],
            axis=axis,
            exclusive=bool(attr(node, "exclusive", False)),
            reverse=bool(attr(node, "reverse", False)),
        )
    ]


# -- colour spaces ------------------------------------------------------------------------------


def _channels(cx: Any, x: TV) -> list[TV]:
    """The three channels of an image batch ``[..., 3]``, each ``[..., 1]``."""
    if x.rank is None or x.shape is None or x.shape[-1] != 3:
        raise ConversionError("an image with 3 channels in its last dimension is expected")
    axis = x.rank - 1
    return [cx.op("slice", [x], starts=[i], ends=[i + 1], axes=[axis], steps=[1])
            for i in range(3)]


def _formula(cx: Any, dtype: str | None) -> tuple[Callable[[float], TV], Callable[..., TV]]:
    """Builders for an elementwise formula: ``k(c)`` the scalar ``c`` of ``dtype``, ``f(op,
    *xs)`` the op ``op`` on ``xs``."""
    return (lambda c: cx.scalar(c, dtype)), (lambda op, *xs: cx.op(op, list(xs)))


@tf_op("RGBToHSV", tg="`maximum`, `minimum`, `div`, `select`, `concat`",
       note="TF's CPU kernel's formula, elementwise")
def _rgb_to_hsv(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    r, g, b = _channels(cx, x)
    k, f = _formula(cx, x.dtype)
    v = f("maximum", f("maximum", r, g), b)
    rng = f("sub", v, f("minimum", f("minimum", r, g), b))
    s = f("select", f("greater", v, k(0)), f("div", rng, f("select", f("greater", v, k(0)), v,
                                                            k(1))), k(0))
    norm = f("div", k(1), f("mul", k(6), f("select", f("greater", rng, k(0)), rng, k(1))))
    h = f("select", f("equal", r, v), f("mul", norm, f("sub", g, b)),
          f("select", f("equal", g, v), f("add", f("mul", norm, f("sub", b, r)), k(2 / 6)),
            f("add", f("mul", norm, f("sub", r, g)), k(4 / 6))))
    h = f("select", f("greater", rng, k(0)), h, k(0))
    h = f("select", f("less", h, k(0)), f("add", h, k(1)), h)
    return [cx.op("concat", [h, s, v], axis=x.rank - 1)]  # type: ignore[operator]


@tf_op("HSVToRGB", tg="`abs`, `minimum`, `maximum`, `mul`, `concat`",
       note="TF's CPU kernel's formula, elementwise")
def _hsv_to_rgb(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    h, s, v = _channels(cx, x)
    k, f = _formula(cx, x.dtype)

    def clamp(t: TV) -> TV:
        return f("minimum", f("maximum", t, k(0)), k(1))

    dh = f("mul", h, k(6))
    dr = clamp(f("sub", f("abs", f("sub", dh, k(3))), k(1)))
    dg = clamp(f("sub", k(2), f("abs", f("sub", dh, k(2)))))
    db = clamp(f("sub", k(2), f("abs", f("sub", dh, k(4)))))
    one_minus_s = f("sub", k(1), s)
    out = [f("mul", f("add", one_minus_s, f("mul", s, d)), v) for d in (dr, dg, db)]
    return [cx.op("concat", out, axis=x.rank - 1)]  # type: ignore[operator]


# -- image warps ---------------------------------------------------------------------------------


@tf_op("ImageProjectiveTransformV3", "ImageProjectiveTransformV2", tg="`projective_transform`",
       note="NHWC; TF's fill modes and interpolations")
def _projective_transform(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    images, transforms, shape = ins[0], ins[1], ins[2]
    fill = ins[3] if len(ins) > 3 else cx.scalar(0.0, "f32")
    if fill.dtype != images.dtype:
        fill = cx.op("cast", [fill], to=images.dtype)
    if transforms.dtype != "f32":
        transforms = cx.op("cast", [transforms], to="f32")
    interpolation = attr(node, "interpolation").lower()
    fill_mode = attr(node, "fill_mode", "CONSTANT").lower()
    return [cx.op("projective_transform", [images, transforms, cx.as_i64(shape), fill],
                  interpolation=interpolation, fill_mode=fill_mode)]


@tf_op("MatrixInverse", tg="`matrix_inverse`", note="no `adjoint`")
def _matrix_inverse(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    if attr(node, "adjoint", False):
        raise ConversionError("MatrixInverse with adjoint=True")
    return [cx.op("matrix_inverse", ins)]


@tf_op("MatrixSolve", tg="`matrix_solve`", note="no `adjoint`")
def _matrix_solve(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    if attr(node, "adjoint", False):
        raise ConversionError("MatrixSolve with adjoint=True")
    return [cx.op("matrix_solve", ins)]


@tf_op("LeftShift", "RightShift", tg="`bit_shift`", note="unsigned integers")
def _shift(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, y = ins
    if x.dtype is None or not x.dtype.startswith("ui"):
        raise ConversionError(f"bit shifts of {x.dtype} (unsigned integers only)")
    direction = "LEFT" if node.op == "LeftShift" else "RIGHT"
    return [cx.op("bit_shift", [x, y], direction=direction)]
