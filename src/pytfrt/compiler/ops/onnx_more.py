"""Catalogue family: more ONNX ops with no core equivalent (bit ops, CumProd, reductions in
ScatterND, NonMaxSuppression, GridSample, string ops).

Each exists because composing it from core ops is impossible (bit shifts, string kernels, a
data-dependent result size) or much slower:

* ``bit_shift(x, y) {direction}`` -- ONNX ``BitShift`` (unsigned integers, NumPy broadcasting);
* ``bitwise_xor(x, y)``, ``bitwise_not(x)`` -- ONNX ``BitwiseXor`` / ``BitwiseNot``;
* ``cumprod(x) {axis, exclusive, reverse}`` -- ONNX ``CumProd`` with a constant axis;
* ``scatter_nd_reduce(data, indices, updates) {reduction}`` -- ONNX ``ScatterND`` with
  ``reduction`` add, mul, max or min;
* ``non_max_suppression(boxes, scores, max_out, iou, score) {center_point_box}`` -- ONNX
  ``NonMaxSuppression``: ``[n, 3]`` i64 (batch, class, box) rows, ``n`` known at run time;
* ``grid_sample(x, grid) {mode, padding_mode, align_corners}`` -- ONNX ``GridSample`` on NCHW
  and NCDHW;
* ``deform_conv(x, w, offset, bias?, mask?) {strides, pads, dilations, group, offset_group,
  has_bias, has_mask}`` -- ONNX ``DeformConv`` on NCHW;
* ``dft(x) {axis, length, inverse, onesided}``, ``stft(signal, window?) {frame_step,
  frame_length, onesided}`` -- ONNX ``DFT`` and ``STFT`` (signals as ``[..., 1]`` real or
  ``[..., 2]`` complex values);
* ``roi_align(x, rois, batch_indices) {mode, output_height, output_width, sampling_ratio,
  spatial_scale, half_pixel}`` -- ONNX ``RoiAlign``;
* ``tree_ensemble(x) {roots, features, modes, splits, ...}`` -- ONNX-ML ``TreeEnsemble``
  (the trees as flat per-node and per-leaf lists; membership sets as ``member_values``
  sliced by ``member_offsets``);
* ``tensor_scatter(past_cache, update, write_indices?) {axis, mode}`` -- ONNX
  ``TensorScatter``: ``update`` written into a copy of the cache along ``axis`` from each
  batch row's write index (``mode = circular``: modulo the cache length);
* ``string_concat(a, b)``, ``regex_full_match(x) {pattern}`` -- ONNX's string ops;
* ``bitcast {to}``, ``det``, ``reverse_sequence {batch_axis, time_axis}``, ``compress {axis}``
  and ``unique {axis, sorted}`` (four results) -- the ONNX ops of those names (``axis = []``:
  over the flattened input).

Compute functions: :mod:`pytfrt.backends.cpu.onnx_kernels`.  Filled at import, then read only.
"""

from __future__ import annotations

from pytfrt.backends.cpu.onnx_kernels import dft_length
from pytfrt.compiler.ops.base import (
    AttrSpec,
    InferContext,
    broadcast_shapes,
    define,
    norm_axis,
    same_dtype,
)
from pytfrt.compiler.types import INT_DTYPES, TType

_INFERENCE_ONLY = "an ONNX op (compiler/ops/onnx_more.py), imported from inference graphs only"
"""The ``no_grad`` reason of this family's float ops without a ``pytfrt.grad`` rule."""

def _int_binary(ctx: InferContext) -> list[TType]:
    dtype = same_dtype(ctx)
    if dtype not in INT_DTYPES and dtype != "i1":
        raise ctx.error(f"operands must be integers, got {dtype}")
    return [TType(dtype, broadcast_shapes(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape))]


def _int_unary(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype not in INT_DTYPES and x.dtype != "i1":
        raise ctx.error(f"operand must be an integer, got {x.dtype}")
    return [x]


def _cumprod(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    norm_axis(ctx, ctx.attrs["axis"], x.rank)
    return [x]


def _scatter_nd_reduce(ctx: InferContext) -> list[TType]:
    data, idx, _ = ctx.inputs
    if idx.dtype not in INT_DTYPES:
        raise ctx.error(f"indices must be integers, got {idx.dtype}")
    same_dtype(ctx, [0, 2])
    return [data]


def _nms(ctx: InferContext) -> list[TType]:
    boxes, scores = ctx.inputs[0], ctx.inputs[1]
    if boxes.rank not in (None, 3) or scores.rank not in (None, 3):
        raise ctx.error(f"boxes and scores must have rank 3, got {boxes} and {scores}")
    return [TType("i64", (None, 3))]


def _grid_sample(ctx: InferContext) -> list[TType]:
    x, grid = ctx.inputs
    rank = x.rank if x.rank is not None else grid.rank
    if rank not in (None, 4, 5) or grid.rank not in (None, rank):
        raise ctx.error(f"x and grid must both have rank 4 (2-D sampling) or 5 (3-D), got {x} "
                        f"and {grid}")
    if rank is None:
        return [TType(x.dtype, None)]
    n = x.shape[0] if x.shape else None
    c = x.shape[1] if x.shape else None
    out = tuple(grid.shape[1:-1]) if grid.shape else (None,) * (rank - 2)
    return [TType(x.dtype, (n, c, *out))]


def _deform_conv(ctx: InferContext) -> list[TType]:
    x, w, offset = ctx.inputs[:3]
    a = ctx.attrs
    if len(ctx.inputs) != 3 + int(a["has_bias"]) + int(a["has_mask"]):
        raise ctx.error("the operands after offset must be the bias and mask the attributes name")
    for v, what in ((x, "x"), (w, "w"), (offset, "offset")):
        if v.rank not in (None, 4):
            raise ctx.error(f"{what} must have rank 4 (2-D deformable convolution), got {v}")
    same_dtype(ctx)
    n = x.shape[0] if x.shape else None
    oc = w.shape[0] if w.shape else None
    oh, ow = offset.shape[2:] if offset.shape else (None, None)
    return [TType(x.dtype, (n, oc, oh, ow))]


def _signal(ctx: InferContext, v: TType, what: str) -> None:
    if v.dtype not in ("f16", "f32", "f64", "bf16"):
        raise ctx.error(f"{what} must be floats, got {v.dtype}")
    if v.shape is not None and v.shape[-1] not in (None, 1, 2):
        raise ctx.error(f"{what}'s last axis must be 1 (real) or 2 (complex), got {v}")


def _dft(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    _signal(ctx, x, "the signal")
    a = ctx.attrs
    if x.shape is None:
        return [TType(x.dtype, None)]
    if not 0 <= a["axis"] < len(x.shape) - 1:
        raise ctx.error(f"axis {a['axis']} is not a signal axis of {x}")
    dims = list(x.shape)
    size = dims[a["axis"]]
    n = a["length"] if a["length"] > 0 else (
        None if size is None else dft_length(size, a["inverse"], a["onesided"]))
    if a["inverse"] and a["onesided"]:
        dims[a["axis"]], dims[-1] = n, 1
    else:
        dims[a["axis"]] = n // 2 + 1 if (a["onesided"] and n is not None) else n
        dims[-1] = 2
    return [TType(x.dtype, tuple(dims))]


def _stft(ctx: InferContext) -> list[TType]:
    sig = ctx.inputs[0]
    _signal(ctx, sig, "the signal")
    if sig.rank not in (None, 3):
        raise ctx.error(f"the signal must be [batch, length, 1 or 2], got {sig}")
    a = ctx.attrs
    fl, step = a["frame_length"], a["frame_step"]
    bins = fl // 2 + 1 if a["onesided"] else fl
    if sig.shape is None:
        return [TType(sig.dtype, (None, None, bins, 2))]
    length = sig.shape[1]
    frames = None if length is None else 1 + (length - fl) // step
    return [TType(sig.dtype, (sig.shape[0], frames, bins, 2))]


def _roi_align(ctx: InferContext) -> list[TType]:
    x, rois, idx = ctx.inputs
    if x.rank not in (None, 4) or rois.rank not in (None, 2):
        raise ctx.error(f"x must be [N, C, H, W] and rois [R, 4], got {x} and {rois}")
    if idx.dtype not in INT_DTYPES:
        raise ctx.error(f"batch_indices must be integers, got {idx.dtype}")
    r = rois.shape[0] if rois.shape else None
    c = x.shape[1] if x.shape else None
    return [TType(x.dtype, (r, c, ctx.attrs["output_height"], ctx.attrs["output_width"]))]


def _tree_ensemble(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype not in ("f16", "f32", "f64"):
        raise ctx.error(f"features must be floats, got {x.dtype}")
    a = ctx.attrs
    n = len(a["features"])
    if not all(len(a[k]) == n for k in ("modes", "splits", "true_ids", "false_ids",
                                         "true_leafs", "false_leafs")):
        raise ctx.error("the node attributes must all have one entry per node")
    if len(a["leaf_targets"]) != len(a["leaf_weights"]):
        raise ctx.error("leaf_targets and leaf_weights must have one entry per leaf")
    batch = x.shape[0] if x.shape else None
    return [TType(x.dtype, (batch, a["n_targets"]))]


def _tensor_scatter(ctx: InferContext) -> list[TType]:
    past, update = ctx.inputs[0], ctx.inputs[1]
    same_dtype(ctx, [0, 1])
    if len(ctx.inputs) > 2 and ctx.inputs[2].dtype not in INT_DTYPES:
        raise ctx.error(f"write_indices must be integers, got {ctx.inputs[2].dtype}")
    if past.rank is not None:
        axis = norm_axis(ctx, ctx.attrs["axis"], past.rank)
        if axis == 0:
            raise ctx.error("the sequence axis cannot be the batch axis 0")
        if update.rank not in (None, past.rank):
            raise ctx.error(f"update {update} must have the rank of past_cache {past}")
    return [past]


def _string_binary(ctx: InferContext) -> list[TType]:
    if same_dtype(ctx) != "string":
        raise ctx.error("operands must be strings")
    return [TType("string", broadcast_shapes(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape))]


def _regex(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype != "string":
        raise ctx.error("the operand must be strings")
    return [TType("i1", x.shape)]


define("bit_shift", ("x", "y"), _int_binary,
       {"direction": AttrSpec("str", choices=("LEFT", "RIGHT"))}, family="onnx",
       doc="ONNX BitShift", differentiable=False)
define("bitwise_xor", ("x", "y"), _int_binary, family="onnx", doc="ONNX BitwiseXor",
       differentiable=False)
define("bitwise_not", ("x",), _int_unary, family="onnx", doc="ONNX BitwiseNot",
       differentiable=False)
define("cumprod", ("x",), _cumprod,
       {"axis": AttrSpec("int"), "exclusive": AttrSpec("bool", False),
        "reverse": AttrSpec("bool", False)}, family="onnx", doc="ONNX CumProd (constant axis)",
       no_grad=_INFERENCE_ONLY)
define("scatter_nd_reduce", ("data", "indices", "updates"), _scatter_nd_reduce,
       {"reduction": AttrSpec("str", choices=("add", "mul", "max", "min"))}, family="onnx",
       doc="ONNX ScatterND with a reduction", no_grad=_INFERENCE_ONLY)
define("non_max_suppression", ("boxes", "scores", "max_out?", "iou?", "score?"), _nms,
       {"center_point_box": AttrSpec("int", 0)}, family="onnx", doc="ONNX NonMaxSuppression",
       differentiable=False)
define("grid_sample", ("x", "grid"), _grid_sample,
       {"mode": AttrSpec("str", "linear", choices=("linear", "nearest", "cubic")),
        "padding_mode": AttrSpec("str", "zeros", choices=("zeros", "border", "reflection")),
        "align_corners": AttrSpec("bool", False)}, family="onnx",
       doc="ONNX GridSample (2-D and 3-D)", no_grad=_INFERENCE_ONLY)
define("tensor_scatter", ("past_cache", "update", "write_indices?"), _tensor_scatter,
       {"axis": AttrSpec("int", -2), "mode": AttrSpec("str", "linear",
                                                      choices=("linear", "circular"))},
       family="onnx", doc="ONNX TensorScatter (a KV-cache update)", differentiable=False)
define("deform_conv", ("x", "w", "offset", "rest*"), _deform_conv,
       {"strides": AttrSpec("ints"), "pads": AttrSpec("ints"), "dilations": AttrSpec("ints"),
        "group": AttrSpec("int", 1), "offset_group": AttrSpec("int", 1),
        "has_bias": AttrSpec("bool", False), "has_mask": AttrSpec("bool", False)},
       family="onnx", doc="ONNX DeformConv (2-D)", no_grad=_INFERENCE_ONLY)
define("tree_ensemble", ("x",), _tree_ensemble, {
    "roots": AttrSpec("ints"), "features": AttrSpec("ints"), "modes": AttrSpec("ints"),
    "splits": AttrSpec("floats"), "true_ids": AttrSpec("ints"), "false_ids": AttrSpec("ints"),
    "true_leafs": AttrSpec("ints"), "false_leafs": AttrSpec("ints"),
    "missing_true": AttrSpec("ints", ()), "member_values": AttrSpec("floats", ()),
    "member_offsets": AttrSpec("ints", ()), "leaf_targets": AttrSpec("ints"),
    "leaf_weights": AttrSpec("floats"), "n_targets": AttrSpec("int"),
    "aggregate": AttrSpec("int", 1), "post_transform": AttrSpec("int", 0)},
    family="onnx", doc="ONNX-ML TreeEnsemble", differentiable=False)
define("dft", ("x",), _dft, {
    "axis": AttrSpec("int"), "length": AttrSpec("int", -1), "inverse": AttrSpec("bool", False),
    "onesided": AttrSpec("bool", False)}, family="onnx", doc="ONNX DFT",
    differentiable=False)
define("stft", ("signal", "window?"), _stft, {
    "frame_step": AttrSpec("int"), "frame_length": AttrSpec("int"),
    "onesided": AttrSpec("bool", True)}, family="onnx", doc="ONNX STFT", differentiable=False)
define("roi_align", ("x", "rois", "batch_indices"), _roi_align, {
    "mode": AttrSpec("str", "avg", choices=("avg", "max")), "output_height": AttrSpec("int", 1),
    "output_width": AttrSpec("int", 1), "sampling_ratio": AttrSpec("int", 0),
    "spatial_scale": AttrSpec("float", 1.0), "half_pixel": AttrSpec("bool", True)},
    family="onnx", doc="ONNX RoiAlign", differentiable=False)
define("string_concat", ("a", "b"), _string_binary, family="onnx", doc="ONNX StringConcat",
       differentiable=False)
define("regex_full_match", ("x",), _regex, {"pattern": AttrSpec("str")}, family="onnx",
       doc="ONNX RegexFullMatch", differentiable=False)


def _bitcast(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    from pytfrt.compiler.types import np_dtype

    to = ctx.attrs["to"]
    if "string" in (x.dtype, to) or np_dtype(x.dtype).itemsize != np_dtype(to).itemsize:
        raise ctx.error(f"cannot reinterpret {x.dtype} as {to} (sizes differ)")
    return [TType(to, x.shape)]


def _det(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.rank is not None and x.rank < 2:
        raise ctx.error(f"needs rank >= 2, got {x}")
    return [TType(x.dtype, None if x.shape is None else x.shape[:-2])]


def _reverse_sequence(ctx: InferContext) -> list[TType]:
    return [ctx.inputs[0]]


def _compress(ctx: InferContext) -> list[TType]:
    x = ctx.inputs[0]
    axis = ctx.attrs["axis"][0] if ctx.attrs["axis"] else None
    if axis is None or x.shape is None:
        return [TType(x.dtype, (None,) if axis is None else None)]
    shape = list(x.shape)
    shape[norm_axis(ctx, axis, x.rank)] = None
    return [TType(x.dtype, tuple(shape))]


def _unique(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    axis = ctx.attrs["axis"][0] if ctx.attrs["axis"] else None
    if axis is None or x.shape is None:
        y = TType(x.dtype, (None,) if axis is None else None)
    else:
        shape = list(x.shape)
        shape[norm_axis(ctx, axis, x.rank)] = None
        y = TType(x.dtype, tuple(shape))
    return [y, TType("i64", (None,)), TType("i64", (None,)), TType("i64", (None,))]


define("bitcast", ("x",), _bitcast, {"to": AttrSpec("dtype")}, family="onnx",
       doc="ONNX BitCast (same element size)", differentiable=False)
define("det", ("x",), _det, family="onnx", doc="ONNX Det", no_grad=_INFERENCE_ONLY)
define("reverse_sequence", ("x", "lengths"), _reverse_sequence,
       {"batch_axis": AttrSpec("int", 1), "time_axis": AttrSpec("int", 0)}, family="onnx",
       doc="ONNX ReverseSequence", no_grad=_INFERENCE_ONLY)
define("compress", ("x", "condition"), _compress, {"axis": AttrSpec("ints", ())},
       family="onnx", doc="ONNX Compress", no_grad=_INFERENCE_ONLY)
define("unique", ("x",), _unique, {"axis": AttrSpec("ints", ()), "sorted": AttrSpec("bool", True)},
       family="onnx", num_results=4, doc="ONNX Unique (Y, indices, inverse_indices, counts)",
       no_grad=_INFERENCE_ONLY)
