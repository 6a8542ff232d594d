"""TF gradient ops (what ``tf.GradientTape`` emits) -> the graph dialect's ``grad`` family.

Activation gradients with a catalogue op map to it (``ReluGrad`` -> ``relu_grad``); the others
are expanded into elementwise arithmetic (``RsqrtGrad``: ``dy * y**3 * -0.5``). Convolution and
pooling gradients resolve TF's padding like the forward ops (:mod:`.tf_ops`); their shape
operand (``input_sizes``) also sets the op's ``static_shape`` hint from what is known.
NHWC only (TF's CPU gradient kernels are NHWC too).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.compiler.frontends.tf_ops import conv_attrs, depthwise_filter, filter_hw, pool_attrs
from pytfrt.compiler.frontends.tf_registry import tf_direct, tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, attr, tg_to_np

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _nhwc(node: Any) -> None:
    if attr(node, "data_format", "NHWC") != "NHWC":
        raise ConversionError("gradient ops support the NHWC layout only")


tf_direct(
    __name__,
    {
        "ReluGrad": "relu_grad",
        "Relu6Grad": "relu6_grad",
        "SigmoidGrad": "sigmoid_grad",
        "TanhGrad": "tanh_grad",
    },
)


@tf_op("RsqrtGrad", tg="`mul`, `square`", note="dy * y**3 * -0.5")
def _rsqrt_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    y, dy = ins
    y3 = cx.op("mul", [cx.op("square", [y]), y])
    return [cx.op("mul", [cx.op("mul", [dy, y3]), cx.scalar(-0.5, y.dtype)])]


@tf_op("SqrtGrad", tg="`div`, `mul`", note="dy * 0.5 / y")
def _sqrt_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    y, dy = ins
    return [cx.op("div", [cx.op("mul", [dy, cx.scalar(0.5, y.dtype)]), y])]


@tf_op("ReciprocalGrad", "InvGrad", tg="`mul`, `square`, `neg`", note="-dy * y**2")
def _reciprocal_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    y, dy = ins
    return [cx.op("neg", [cx.op("mul", [dy, cx.op("square", [y])])])]


@tf_op("EluGrad", tg="`select`, `mul`", note="from the forward outputs")
def _elu_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    dy, out = ins
    neg = cx.op("less", [out, cx.scalar(0, out.dtype)])
    return [
        cx.op("select", [neg, cx.op("mul", [dy, cx.op("add", [out, cx.scalar(1, out.dtype)])]), dy])
    ]


@tf_op("SeluGrad", tg="`select`, `mul`", note="from the forward outputs")
def _selu_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    dy, out = ins
    pos = cx.op("greater", [out, cx.scalar(0, out.dtype)])
    neg_branch = cx.op(
        "mul", [dy, cx.op("add", [out, cx.scalar(_SELU_SCALE * _SELU_ALPHA, out.dtype)])]
    )
    return [
        cx.op("select", [pos, cx.op("mul", [dy, cx.scalar(_SELU_SCALE, out.dtype)]), neg_branch])
    ]


@tf_op("SoftplusGrad", tg="`sigmoid`, `mul`")
def _softplus_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    dy, x = ins
    return [cx.op("mul", [dy, cx.op("sigmoid", [x])])]


@tf_op("SoftsignGrad", tg="`abs`, `add`, `square`, `div`")
def _softsign_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    dy, x = ins
    den = cx.op("square", [cx.op("add", [cx.op("abs", [x]), cx.scalar(1, x.dtype)])])
    return [cx.op("div", [dy, den])]


@tf_op("LeakyReluGrad", tg="`select`, `mul`")
def _leaky_relu_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    dy, x = ins
    alpha = float(attr(node, "alpha", 0.2))
    pos = cx.op("greater", [x, cx.scalar(0, x.dtype)])
    return [cx.op("select", [pos, dy, cx.op("mul", [dy, cx.scalar(alpha, x.dtype)])])]


@tf_op("BiasAddGrad", tg="`bias_add_grad`")
def _bias_add_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("bias_add_grad", ins, layout=attr(node, "data_format", "NHWC"))]


@tf_op(
    "BroadcastGradientArgs",
    tg="`broadcast_gradient_args` (folded when the shapes are known enough)",
    note="a dynamic result can only feed ops that accept runtime axes",
)
def _broadcast_gradient_args(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return cx.ops("broadcast_gradient_args", [cx.as_i64(t) for t in ins], 2)


@tf_op("SoftmaxCrossEntropyWithLogits", tg="`softmax_cross_entropy`")
def _softmax_xent(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    logits, labels = ins
    if labels.shape != logits.shape:
        labels = cx.op("broadcast_to", [labels, cx.as_i64(cx.op("shape", [logits]))])
    return cx.ops("softmax_cross_entropy", [logits, labels], 2)


@tf_op("SparseSoftmaxCrossEntropyWithLogits", tg="`sparse_softmax_cross_entropy`")
def _sparse_softmax_xent(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return cx.ops("sparse_softmax_cross_entropy", ins, 2)


def _shape_hint(tv: TV) -> list[int]:
    dims = tv.known_vector()
    if dims is None:
        return []
    return [-1 if d is None else int(d) for d in dims]


def _sizes(cx: Any, tv: TV) -> TV:
    return cx.as_i64(tv)


def _grad_conv_attrs(node: Any, sizes: TV, hw: tuple[int | None, int | None]) -> dict[str, Any]:
    dims = sizes.known_vector()
    fake = TV(dtype="f32", shape=tuple(dims) if dims is not None else (None,) * 4)
    return conv_attrs(node, fake, hw)


@tf_op("Conv2DBackpropInput", tg="`conv2d_backprop_input`", note="NHWC")
def _conv_backprop_input(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    _nhwc(node)
    sizes, w, dy = ins
    a = _grad_conv_attrs(node, sizes, filter_hw(w, node))
    _require_pads(a)
    dims = sizes.known_vector()
    groups = 1
    if dims is not None and dims[3] is not None and w.shape is not None and w.shape[2]:
        groups = int(dims[3]) // int(w.shape[2])
    return [
        cx.op(
            "conv2d_backprop_input",
            [_sizes(cx, sizes), w, dy],
            groups=groups,
            static_shape=_shape_hint(sizes),
            **a,
        )
    ]


@tf_op("Conv2DBackpropFilter", tg="`conv2d_backprop_filter`", note="NHWC")
def _conv_backprop_filter(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    _nhwc(node)
    x, sizes, dy = ins
    fdims = sizes.known_vector()
    if fdims is None or None in fdims[:3]:
        raise ConversionError("the filter shape must be static")
    a = conv_attrs(node, x, (int(fdims[0]), int(fdims[1])))  # type: ignore[arg-type]
    _require_pads(a)
    groups = 1
    if x.shape is not None and x.shape[3] is not None:
        groups = int(x.shape[3]) // int(fdims[2])  # type: ignore[arg-type]
    return [
        cx.op(
            "conv2d_backprop_filter",
            [x, _sizes(cx, sizes), dy],
            groups=groups,
            static_shape=_shape_hint(sizes),
            **a,
        )
    ]


@tf_op(
    "DepthwiseConv2dNativeBackpropInput", tg="`conv2d_backprop_input` (groups = cin)", note="NHWC"
)
def _depthwise_backprop_input(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    _nhwc(node)
    sizes, w, dy = ins
    a = _grad_conv_attrs(node, sizes, filter_hw(w, node))
    _require_pads(a)
    cin = int(w.shape[2]) if w.shape is not None and w.shape[2] is not None else 0
    return [
        cx.op(
            "conv2d_backprop_input",
            [_sizes(cx, sizes), depthwise_filter(cx, w), dy],
            groups=cin,
            static_shape=_shape_hint(sizes),
            **a,
        )
    ]


@tf_op(
    "DepthwiseConv2dNativeBackpropFilter",
    tg="`conv2d_backprop_filter` (groups = cin), `reshape`",
    note="NHWC",
)
def _depthwise_backprop_filter(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    _nhwc(node)
    x, sizes, dy = ins
    fdims = sizes.known_vector()
    if fdims is None or None in fdims:
        raise ConversionError("the filter shape must be static")
    kh, kw, cin, m = (int(d) for d in fdims)  # type: ignore[arg-type]
    a = conv_attrs(node, x, (kh, kw))
    _require_pads(a)
    grouped = cx.const([kh, kw, 1, cin * m])
    g = cx.op("conv2d_backprop_filter", [x, cx.as_i64(grouped), dy], groups=cin, **a)
    return [cx.reshape(g, [kh, kw, cin, m])]


def _require_pads(a: dict[str, Any]) -> None:
    if "pads" not in a:
        raise ConversionError(
            "SAME padding over a dynamic spatial size is not supported in gradients"
        )


@tf_op("MaxPoolGrad", tg="`max_pool2d_grad`", note="NHWC")
def _max_pool_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    _nhwc(node)
    x, y, dy = ins
    a = pool_attrs(node, x, attr(node, "ksize"), attr(node, "strides"))
    _require_pads(a)
    return [cx.op("max_pool2d_grad", [x, y, dy], **a)]


@tf_op("AvgPoolGrad", tg="`avg_pool2d_grad`", note="NHWC")
def _avg_pool_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    _nhwc(node)
    sizes, dy = ins
    dims = sizes.known_vector()
    fake = TV(dtype="f32", shape=tuple(dims) if dims is not None else (None,) * 4)
    a = pool_attrs(node, fake, attr(node, "ksize"), attr(node, "strides"))
    _require_pads(a)
    return [
        cx.op(
            "avg_pool2d_grad",
            [_sizes(cx, sizes), dy],
            count_include_pad=False,
            static_shape=_shape_hint(sizes),
            **a,
        )
    ]


@tf_op(
    "FusedBatchNormGrad",
    "FusedBatchNormGradV2",
    "FusedBatchNormGradV3",
    tg="`batch_norm_grad`",
    note="NHWC",
)
def _fused_batch_norm_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    _nhwc(node)
    dy, x, scale, mean, var = ins[:5]
    dx, dscale, doffset = cx.ops(
        "batch_norm_grad",
        [dy, x, scale, mean, var],
        3,
        epsilon=float(attr(node, "epsilon", 1e-4)),
        axis=3,
        is_training=bool(attr(node, "is_training", True)),
    )
    empty = cx.const(np.zeros((0,), np.float32))  # TF's unused reserve-space outputs
    return [dx, dscale, doffset, empty, empty]


def _resize_mode(node: Any) -> str:
    """The ``resize`` coordinate transformation of a TF resize node's flags."""
    if attr(node, "half_pixel_centers", False):
        return "half_pixel"
    return "align_corners" if attr(node, "align_corners", False) else "asymmetric"


@tf_op("ResizeBilinear", tg="`resize` (linear)", note="NHWC; a constant size")
def _resize_bilinear(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, size_tv = ins
    size = cx.ints(size_tv, "size")
    y = cx.op("resize", [x], size=size, layout="NHWC", mode="linear",
              coordinate_transformation_mode=_resize_mode(node))
    return [y if x.dtype == "f32" else cx.op("cast", [y], to="f32")]


@tf_op("ResizeBilinearGrad", tg="`einsum` by the resize's matrices",
       note="the transposed interpolation matrices of both spatial axes (static sizes)")
def _resize_bilinear_grad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    from pytfrt.backends.cpu.data_ops import resize_matrix

    g, original = ins
    if g.shape is None or original.shape is None or None in (*g.shape[1:3],
                                                             *original.shape[1:3]):
        raise ConversionError("ResizeBilinearGrad needs static spatial sizes")
    mode = _resize_mode(node)
    dt = tg_to_np(g.dtype or "f32")
    mh, mw = (
        cx.const(resize_matrix(int(original.shape[i] or 0), int(g.shape[i] or 0), mode="linear",
                               coordinate_transformation_mode=mode).astype(dt))
        for i in (1, 2)
    )
    dx = cx.op("einsum", [g, mh, mw], equation="nhwc,hi,wj->nijc")
    return [dx if original.dtype == g.dtype else cx.op("cast", [dx], to=original.dtype)]
