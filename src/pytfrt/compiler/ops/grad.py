"""Catalogue family: gradient ops (TF's own gradient ops, and what reverse-mode autodiff emits).

Operand orders follow TF's ops (``relu_grad(dy, x)`` like ``ReluGrad(gradients, features)``,
``sigmoid_grad(y, dy)`` like ``SigmoidGrad(y, dy)``). Compute functions are in
:mod:`pytfrt.backends.cpu.grad_ops` (convolution and pooling gradients reuse
:mod:`pytfrt.backends.cpu.conv` and :mod:`pytfrt.backends.cpu.pooling`).

Ops whose first operand is a *shape* (``conv2d_backprop_input``, ``avg_pool2d_grad``) infer
their result from it when it is a constant; otherwise from the implicit ``static_shape``
attribute (``-1`` for dynamic dimensions), which a front end sets from what it knows.
``batch_norm_grad`` has three results (dx, dscale, doffset), ``layer_norm_grad`` three (dx,
dgamma, dbeta), the cross-entropy ops two (loss per row, dlogits), ``broadcast_gradient_args``
two (the reduction axes of each operand).  ``moments(x) {axes, keepdims}`` (mean and
variance) and ``sum_and_dot(a, b) {axes, keepdims}`` (``sum(a)``, ``sum(a * b)``), two results
each, and ``relu_grad_sums(dy, y, b)`` (``g = relu_grad(dy, y)`` and ``g``'s two sums) are
the batch statistics ``-tg-fuse-batch-stats`` makes of a training step's reductions (compute
functions in :mod:`pytfrt.backends.cpu.batch_stats`).

Also here, because a training step's dropout needs them: ``random_key_counter(seed)`` and
``random_uniform(shape, key, counter) {dtype}`` (and ``random_uniform_int(shape, key, counter,
minval, maxval) {dtype}``), TF's stateless Philox random numbers
(``StatelessRandomGetKeyCounter`` / ``StatelessRandomUniformV2``), reproduced bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable

from pytfrt.compiler.ops import grad_rules as gr
from pytfrt.compiler.ops.base import (
    REQUIRED,
    AttrSpec,
    InferContext,
    broadcast_shapes,
    const_ints,
    define,
    norm_axis,
    same_dtype,
)
from pytfrt.compiler.types import FLOAT_DTYPES, INT_DTYPES, TType

_LAYOUT = AttrSpec("str", REQUIRED, choices=("NHWC", "NCHW"))
_CONV = {
    "layout": _LAYOUT,
    "strides": AttrSpec("ints", (1, 1)),
    "dilations": AttrSpec("ints", (1, 1)),
    "pads": AttrSpec("ints", (0, 0, 0, 0)),
    "groups": AttrSpec("int", 1),
}
_POOL = {
    "layout": _LAYOUT,
    "ksize": AttrSpec("ints"),
    "strides": AttrSpec("ints", (1, 1)),
    "pads": AttrSpec("ints", (0, 0, 0, 0)),
    "dilations": AttrSpec("ints", (1, 1)),
    "ceil_mode": AttrSpec("bool", False),
}
_HINT = {"static_shape": AttrSpec("ints", (), implicit=True)}


def _float(ctx: InferContext, t: TType, what: str) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"{what} must be floating point, got {t.dtype}")


def _like_first_float(ctx: InferContext) -> list[TType]:
    """Elementwise gradients: the result has the type of operand 0 (both operands float)."""
    if len(ctx.inputs) != 2:
        raise ctx.error(f"takes 2 operands, got {len(ctx.inputs)}")
    dtype = same_dtype(ctx)
    _float(ctx, ctx.inputs[0], "operands")
    a, b = ctx.inputs
    shape = a.shape if a.static or b.shape is None else b.shape
    return [TType(dtype, shape)]


def _shape_operand(ctx: InferContext, i: int, dtype: str, rank: int) -> TType:
    """A result whose shape is given by operand ``i`` (a shape) or the ``static_shape`` hint."""
    dims = const_ints(ctx, i)
    if dims is not None:
        if len(dims) != rank:
            raise ctx.error(f"the shape operand must have {rank} entries, got {list(dims)}")
        return TType(dtype, tuple(dims))
    hint = ctx.attrs.get("static_shape") or ()
    if hint:
        if len(hint) != rank:
            raise ctx.error(f"static_shape must have {rank} entries, got {list(hint)}")
        return TType(dtype, tuple(None if d < 0 else d for d in hint))
    return TType(dtype, (None,) * rank)


def _conv_grads(ctx: InferContext) -> list[TType]:
    """``conv2d_grads(x, w, dy)``: ``dx`` of ``x``'s type and ``dw`` of ``w``'s;
    ``conv2d_bias_grads`` also ``db`` of ``w``'s output channels."""
    if len(ctx.inputs) != 3:
        raise ctx.error("takes 3 operands (x, w, dy)")
    dtype = same_dtype(ctx)
    _float(ctx, ctx.inputs[2], "dy")
    for t, what in zip(ctx.inputs, ("x", "w", "dy"), strict=True):
        if t.shape is not None and len(t.shape) != 4:
            raise ctx.error(f"{what} must be rank 4, got {t}")
    grads = [TType(dtype, ctx.inputs[0].shape), TType(dtype, ctx.inputs[1].shape)]
    if ctx.op == "conv2d_bias_grads":
        w = ctx.inputs[1].shape
        cout = None if w is None else w[3] if ctx.attrs["layout"] == "NHWC" else w[0]
        grads.append(TType(dtype, (cout,)))
    return grads


def _conv_backprop(operands: tuple[str, ...]) -> Callable[[InferContext], list[TType]]:
    """The inference of a conv2d gradient with ``operands``: the ``*_shape`` one is the result's
    shape, the other two the float tensors it is computed from (``dy`` last)."""
    shape_at = next(i for i, n in enumerate(operands) if n.endswith("_shape"))
    arrays = [i for i in range(3) if i != shape_at]

    def infer(ctx: InferContext) -> list[TType]:
        if len(ctx.inputs) != 3:
            raise ctx.error(f"takes 3 operands ({', '.join(operands)})")
        dtype = same_dtype(ctx, arrays)
        _float(ctx, ctx.inputs[2], "dy")
        return [_shape_operand(ctx, shape_at, dtype, 4)]

    return infer


def _max_pool_grad(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) != 3:
        raise ctx.error("takes 3 operands (x, y, dy)")
    same_dtype(ctx)
    _float(ctx, ctx.inputs[0], "x")
    return [ctx.inputs[0]]


def _avg_pool_grad(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) != 2:
        raise ctx.error("takes 2 operands (input_shape, dy)")
    dy = ctx.inputs[1]
    _float(ctx, dy, "dy")
    return [_shape_operand(ctx, 0, dy.dtype, 4)]


def _batch_norm_grad(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) != 5:
        raise ctx.error("takes 5 operands (dy, x, scale, mean, variance)")
    dy, x, scale = ctx.inputs[:3]
    same_dtype(ctx, [0, 1])
    _float(ctx, x, "x")
    norm_axis(ctx, ctx.attrs["axis"], x.rank)
    return [x if x.shape is not None else dy, scale, scale]


def _layer_norm_grad(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) != 3:
        raise ctx.error("takes 3 operands (dy, x, gamma)")
    dy, x, gamma = ctx.inputs
    same_dtype(ctx)
    _float(ctx, x, "x")
    norm_axis(ctx, ctx.attrs["axis"], x.rank)
    return [x, gamma, gamma]


def _attention_heads(ctx: InferContext, names: tuple[str, ...]) -> list[TType]:
    """The operands (``names``) of the train step's attention ops: one float dtype, rank 4."""
    if len(ctx.inputs) != len(names):
        raise ctx.error(f"takes {len(names)} operands ({', '.join(names)})")
    same_dtype(ctx)
    _float(ctx, ctx.inputs[0], names[0])
    for t, what in zip(ctx.inputs, names, strict=True):
        if t.rank not in (None, 4):
            raise ctx.error(f"{what} must be rank 4, got {t}")
    return list(ctx.inputs)


def _attention_grad(ctx: InferContext) -> list[TType]:
    q, k, v, _, _ = _attention_heads(ctx, ("q", "k", "v", "p", "dy"))
    return [q, k, v]


def _attention_probs(ctx: InferContext) -> list[TType]:
    q, k, _ = _attention_heads(ctx, ("q", "k", "v"))
    heads = None
    if q.shape is not None and k.shape is not None:
        heads = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    return [q, TType(q.dtype, heads)]


def _cross_entropy(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) != 2:
        raise ctx.error("takes 2 operands (logits, labels)")
    logits, labels = ctx.inputs
    _float(ctx, logits, "logits")
    if logits.rank not in (None, 2):
        raise ctx.error(f"logits must be 2-D [batch, classes], got {logits}")
    if ctx.op == "sparse_softmax_cross_entropy":
        if labels.dtype not in INT_DTYPES:
            raise ctx.error(f"labels must be integers, got {labels.dtype}")
    elif labels.dtype != logits.dtype:
        raise ctx.error(f"labels must be {logits.dtype}, got {labels.dtype}")
    rows = None if logits.shape is None else logits.shape[:1]
    return [TType(logits.dtype, rows), logits]


def _bias_add_grad(ctx: InferContext) -> list[TType]:
    (dy,) = ctx.inputs
    _float(ctx, dy, "dy")
    if dy.shape is None:
        return [TType(dy.dtype, (None,))]
    if len(dy.shape) < 2 and ctx.attrs["layout"] == "NCHW":
        raise ctx.error(f"NCHW needs rank >= 2, got {dy}")
    channel = dy.shape[-1] if ctx.attrs["layout"] == "NHWC" else dy.shape[1]
    return [TType(dy.dtype, (channel,))]



def _unsorted_segment_sum(ctx: InferContext) -> list[TType]:
    data, ids = ctx.inputs
    if data.dtype not in FLOAT_DTYPES or ids.dtype not in INT_DTYPES:
        raise ctx.error(f"needs float data and integer ids, got {data} and {ids}")
    if (data.shape is not None and len(data.shape) != 2) or (
            ids.shape is not None and len(ids.shape) != 1):
        raise ctx.error(f"needs data [n, w] and ids [n], got {data} and {ids}")
    n = ctx.attrs["num_segments"]
    if n < 0:
        raise ctx.error(f"num_segments must be >= 0, got {n}")
    return [TType(data.dtype, (n, None if data.shape is None else data.shape[1]))]


def _softmax_grad(ctx: InferContext) -> list[TType]:
    y, dy = ctx.inputs
    dtype = same_dtype(ctx)
    _float(ctx, y, "operands")
    shape = broadcast_shapes(ctx, y.shape, dy.shape)
    if shape is not None:
        norm_axis(ctx, ctx.attrs["axis"], len(shape))
    return [TType(dtype, shape)]

def _broadcast_gradient_args(ctx: InferContext) -> list[TType]:
    if len(ctx.inputs) != 2:
        raise ctx.error("takes 2 operands (s0, s1)")
    dtype = same_dtype(ctx)
    if dtype not in ("i32", "i64"):
        raise ctx.error(f"shapes must be i32 or i64, got {dtype}")
    return [TType(dtype, (None,)), TType(dtype, (None,))]


for _name in ("relu_grad", "relu6_grad"):
    define(_name, ("dy", "x"), _like_first_float, family="grad", grad=gr.masked_grad)
define("sigmoid_grad", ("y", "dy"), _like_first_float, family="grad", grad=gr.sigmoid_grad)
define("tanh_grad", ("y", "dy"), _like_first_float, family="grad", grad=gr.tanh_grad)
define(
    "gelu_grad",
    ("dy", "x"),
    _like_first_float,
    {"approximate": AttrSpec("bool", False)},
    family="grad",
    grad_multi=gr.gelu_grad,
)
for _name, _operands, _grad in (
    ("conv2d_backprop_input", ("input_shape", "w", "dy"), gr.conv2d_backprop_input),
    ("conv2d_backprop_filter", ("x", "filter_shape", "dy"), gr.conv2d_backprop_filter),
):
    define(_name, _operands, _conv_backprop(_operands), {**_CONV, **_HINT}, family="grad",
           grad=_grad)
define("conv2d_grads", ("x", "w", "dy"), _conv_grads, dict(_CONV), family="grad",
       num_results=2, no_grad="made by -tg-pair-conv-grads, which runs after differentiation",
       doc="(dx, dw): conv2d_backprop_input and conv2d_backprop_filter of one convolution "
       "(input x, filter w, output gradient dy), computed together")
define("conv2d_bias_grads", ("x", "w", "dy"), _conv_grads, dict(_CONV), family="grad",
       num_results=3, no_grad="made by -tg-pair-conv-grads, which runs after differentiation",
       doc="(dx, dw, db): conv2d_grads and bias_add_grad(dy) (NHWC) of one convolution with "
       "a bias, computed together")
define("max_pool2d_grad", ("x", "y", "dy"), _max_pool_grad, dict(_POOL), family="grad",
       grad=gr.max_pool2d_grad)
define(
    "avg_pool2d_grad",
    ("input_shape", "dy"),
    _avg_pool_grad,
    {**_POOL, "count_include_pad": AttrSpec("bool", False), **_HINT},
    family="grad",
    grad=gr.avg_pool2d_grad,
)
define(
    "batch_norm_grad",
    ("dy", "x", "scale", "mean", "variance"),
    _batch_norm_grad,
    {
        "epsilon": AttrSpec("float", 1e-3),
        "axis": AttrSpec("int", -1),
        "is_training": AttrSpec("bool", True),
    },
    family="grad",
    num_results=3,
    grad_multi=gr.batch_norm_grad,
)
define(
    "layer_norm_grad",
    ("dy", "x", "gamma"),
    _layer_norm_grad,
    {"axis": AttrSpec("int", -1), "epsilon": AttrSpec("float", 1e-5)},
    family="grad",
    num_results=3,
    grad_multi=gr.layer_norm_grad,
)
for _name in ("softmax_cross_entropy", "sparse_softmax_cross_entropy"):
    define(_name, ("logits", "labels"), _cross_entropy, family="grad", num_results=2,
           grad_multi=gr.cross_entropy)
define(
    "bias_add_grad",
    ("dy",),
    _bias_add_grad,
    {"layout": AttrSpec("str", "NHWC", choices=("NHWC", "NCHW"))},
    family="grad",
    grad=gr.bias_add_grad,
)
define("softmax_grad", ("y", "dy"), _softmax_grad, {"axis": AttrSpec("int", -1)},
       family="grad", no_grad="made by -tg-fuse-softmax-grad, which runs after differentiation",
       doc="(dy - sum(dy * y, axis)) * y: a softmax's gradient through its output y")
define("attention_probs", ("q", "k", "v"), _attention_probs,
       {"scale": AttrSpec("float", 1.0)}, family="grad", num_results=2,
       no_grad="made by -tg-fuse-attention-grad, which runs after differentiation",
       doc="(y, p): p = softmax(scale * Q K^T) per head [B, H, Sq, Sk] and y = p V [B, Sq, H, D] "
       "for q [B, Sq, H, D], k, v [B, Sk, H, D]: a train step's attention forward, keeping p "
       "for attention_grad")
define("attention_grad", ("q", "k", "v", "p", "dy"), _attention_grad,
       {"scale": AttrSpec("float", 1.0)}, family="grad", num_results=3,
       no_grad="made by -tg-fuse-attention-grad, which runs after differentiation",
       doc="(dq, dk, dv) of o = softmax(scale * Q K^T) V per head, from p (the softmax, "
       "[B, H, Sq, Sk]) and dy (o's gradient); q, dy [B, Sq, H, D] and k, v [B, Sk, H, D], "
       "heads second as the projections write them")
define("unsorted_segment_sum", ("data", "ids"), _unsorted_segment_sum,
       {"num_segments": AttrSpec("int", REQUIRED)}, family="grad",
       no_grad="made for an embedding's gradient (its own gradient, a second derivative, is "
       "not needed)",
       doc="rows of data summed into num_segments rows by ids (TF's UnsortedSegmentSum; ids "
       "out of range are dropped)")
define(
    "broadcast_gradient_args", ("s0", "s1"), _broadcast_gradient_args, family="grad", num_results=2
, differentiable=False)


# -- batch statistics of a training step (made by -tg-fuse-batch-stats) -----------------------


def _batch_stats(ctx: InferContext) -> list[TType]:
    from pytfrt.compiler.ops.reductions import _reduce_shape

    x = ctx.inputs[0]
    if x.dtype not in FLOAT_DTYPES or any(t.dtype != x.dtype for t in ctx.inputs):
        raise ctx.error(f"operands must share one float dtype, got "
                        f"{', '.join(str(t) for t in ctx.inputs)}")
    out = TType(x.dtype, _reduce_shape(ctx, x.shape, ctx.attrs["axes"], ctx.attrs["keepdims"]))
    return [out, out]


_STATS = {"axes": AttrSpec("ints", REQUIRED), "keepdims": AttrSpec("bool", True)}
_MADE = "made by -tg-fuse-batch-stats, which runs after differentiation"
define("moments", ("x",), _batch_stats, _STATS, family="grad", num_results=2, no_grad=_MADE,
       doc="(mean, biased variance) of x over axes in one pass (tf.nn.moments)")
define("sum_and_dot", ("a", "b"), _batch_stats, _STATS, family="grad", num_results=2,
       no_grad=_MADE,
       doc="(sum(a), sum(a * b)) over axes in one pass (a batch norm's gradient statistics)")


def _relu_grad_sums(ctx: InferContext) -> list[TType]:
    dy, y = ctx.inputs[:2]
    sums = _batch_stats(ctx)
    if dy.shape is not None and y.shape is not None and len(dy.shape) != len(y.shape):
        raise ctx.error(f"dy and y must have one shape, got {dy} and {y}")
    if len(ctx.inputs) > 3 and (dy.shape != y.shape or ctx.inputs[3].shape != y.shape):
        raise ctx.error(f"dy and dy2 must have y's type, got {dy}, {ctx.inputs[3]} and {y}")
    return [dy if dy.shape == y.shape else TType(dy.dtype, y.shape), *sums]


define("relu_grad_sums", ("dy", "y", "b", "dy2?"), _relu_grad_sums, _STATS, family="grad",
       num_results=3, no_grad=_MADE,
       doc="g = relu_grad(dy [+ dy2], y), sum(g), sum(g * b) over axes in one pass (dy: y's "
           "shape, or one row per batch item broadcast over the summed axes after the batch "
           "axis; dy2, a second gradient of y's type, added as add does, in the same pass)")



def _relu_grad_sums2(ctx: InferContext) -> list[TType]:
    dy, y, b, b2 = ctx.inputs[:4]
    if len(ctx.inputs) > 4 and (dy.shape != y.shape or ctx.inputs[4].shape != y.shape):
        raise ctx.error(f"dy and dy2 must have y's type, got {dy}, {ctx.inputs[4]} and {y}")
    sums = _batch_stats(ctx)
    if dy.shape is not None and y.shape is not None and len(dy.shape) != len(y.shape):
        raise ctx.error(f"dy and y must have one shape, got {dy} and {y}")
    return [dy if dy.shape == y.shape else TType(dy.dtype, y.shape), sums[0], *sums]


define("relu_grad_sums2", ("dy", "y", "b", "b2", "dy2?"), _relu_grad_sums2, _STATS,
       family="grad", num_results=4, no_grad=_MADE,
       doc="relu_grad_sums with a second product: g, sum(g), sum(g * b), sum(g * b2) over "
           "axes in one pass (two batch norms reading one gradient: a residual stage's main "
           "branch and its projection shortcut)")

# -- stateless random numbers (dropout in a training step) ------------------------------------


def _random_key_counter(ctx: InferContext) -> list[TType]:
    (seed,) = ctx.inputs
    if seed.dtype not in INT_DTYPES or seed.shape not in (None, (2,)):
        raise ctx.error(f"the seed must be two integers, got {seed}")
    return [TType("ui64", (1,)), TType("ui64", (2,))]


def _random_uniform(ctx: InferContext) -> list[TType]:
    shape, key, counter = ctx.inputs
    if key.dtype != "ui64" or counter.dtype != "ui64":
        raise ctx.error(f"key and counter must be ui64, got {key.dtype} and {counter.dtype}")
    if ctx.attrs["dtype"] != "f32":
        raise ctx.error(f"only f32 is supported, got {ctx.attrs['dtype']}")
    rank = shape.shape[0] if shape.shape is not None and len(shape.shape) == 1 else None
    if rank is None:
        dims = const_ints(ctx, 0)
        return [TType("f32", None if dims is None else tuple(dims))]
    return [_shape_operand(ctx, 0, "f32", rank)]


def _random_uniform_int(ctx: InferContext) -> list[TType]:
    shape, key, counter, lo, hi = ctx.inputs
    dtype = ctx.attrs["dtype"]
    if key.dtype != "ui64" or counter.dtype != "ui64":
        raise ctx.error(f"key and counter must be ui64, got {key.dtype} and {counter.dtype}")
    if dtype not in ("i32", "i64") or lo.dtype != dtype or hi.dtype != dtype:
        raise ctx.error(f"minval, maxval and the result must be one of i32/i64, got "
                        f"{lo.dtype}, {hi.dtype}, {dtype}")
    rank = shape.shape[0] if shape.shape is not None and len(shape.shape) == 1 else None
    if rank is None:
        dims = const_ints(ctx, 0)
        return [TType(dtype, None if dims is None else tuple(dims))]
    return [_shape_operand(ctx, 0, dtype, rank)]


define("random_uniform_int", ("shape", "key", "counter", "minval", "maxval"),
       _random_uniform_int, {"dtype": AttrSpec("dtype", "i32"), **_HINT}, family="grad",
       differentiable=False)
define("random_key_counter", ("seed",), _random_key_counter, family="grad", num_results=2,
       differentiable=False)
for _name in ("random_uniform", "random_normal"):
    define(
        _name,
        ("shape", "key", "counter"),
        _random_uniform,
        {"dtype": AttrSpec("dtype", "f32"), **_HINT},
        family="grad",
        differentiable=False,
    )


def _random_gamma(ctx: InferContext) -> list[TType]:
    shape, key, counter, alpha = ctx.inputs
    dtype = ctx.attrs["dtype"]
    if key.dtype != "ui64" or counter.dtype != "ui64":
        raise ctx.error(f"key and counter must be ui64, got {key.dtype} and {counter.dtype}")
    if dtype not in ("f32", "f64") or alpha.dtype != dtype:
        raise ctx.error(f"alpha and the result must be one of f32/f64, got {alpha.dtype}, {dtype}")
    rank = shape.shape[0] if shape.shape is not None and len(shape.shape) == 1 else None
    if rank is None:
        dims = const_ints(ctx, 0)
        return [TType(dtype, None if dims is None else tuple(dims))]
    return [_shape_operand(ctx, 0, dtype, rank)]


define("random_gamma", ("shape", "key", "counter", "alpha"), _random_gamma,
       {"dtype": AttrSpec("dtype", "f32"), **_HINT}, family="grad", differentiable=False)
