"""Catalogue family: ONNX's N-dimensional resampling and pooling (``onnx_nd``).

The core ``resize``, ``max_pool2d`` and ``avg_pool2d`` are 2-D (NCHW/NHWC, the shapes the
conv nets of every front end use, with fast kernels).  ONNX also has them on any rank and
with modes those do not take; these two ops cover the rest:

* ``resize_nd(x) {sizes, scales, roi, mode, coordinate_transformation_mode, nearest_mode,
  cubic_coeff_a, exclude_outside, antialias, extrapolation_value}`` -- ONNX ``Resize`` with one
  output size and one scale per axis (the importer resolves ``axes``, ``scales`` versus
  ``sizes`` and ``keep_aspect_ratio_policy``);
* ``pool_nd(x) {kind, kernel, strides, dilations, pads, ceil_mode, count_include_pad, p,
  storage_order}`` -- ``MaxPool``, ``AveragePool`` and ``LpPool`` on ``[N, C, *spatial]``;
  ``pads`` are ``(begins..., ends...)`` (auto padding resolved by the importer); ``kind =
  "argmax"`` gives ``MaxPool``'s int64 ``Indices`` output;
* ``max_unpool(x, indices) {kernel, strides, pads, output}`` -- ONNX ``MaxUnpool``: zeros with
  ``x`` put at ``indices``; ``output``: an explicit spatial output size (``[]``: the inferred
  one);
* ``conv_transpose_nd(x, w) {strides, dilations, pads, output_padding, groups}`` -- ONNX
  ``ConvTranspose`` on any number of spatial axes (``output_shape`` and auto padding resolved
  to ``pads`` by the importer);
* ``col2im(x) {image_shape, block_shape, strides, dilations, pads}`` -- ONNX ``Col2Im`` (the
  image and block shapes known at import).

Compute functions: :mod:`pytfrt.backends.cpu.onnx_nd`.  Filled at import, then read only.
"""

from __future__ import annotations

from pytfrt.backends.cpu.onnx_nd import pool_out_size, unpool_size
from pytfrt.compiler.ops.base import AttrSpec, InferContext, define
from pytfrt.compiler.types import FLOAT_DTYPES, TType


def _resize_nd(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    sizes = tuple(int(s) for s in ctx.attrs["sizes"])
    if x.rank is not None and len(sizes) != x.rank:
        raise ctx.error(f"sizes {list(sizes)} must give one size per axis of {x}")
    if len(ctx.attrs["scales"]) != len(sizes):
        raise ctx.error("scales must give one scale per axis")
    return [TType(x.dtype, sizes)]


def _pool_nd(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    a = ctx.attrs
    kernel, strides, dil, pads = a["kernel"], a["strides"], a["dilations"], a["pads"]
    nd = len(kernel)
    if not (len(strides) == len(dil) == nd and len(pads) == 2 * nd):
        raise ctx.error("kernel, strides, dilations and pads must fit the spatial axes")
    if a["kind"] not in ("max", "argmax") and x.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"{a['kind']} pooling needs a float operand, got {x.dtype}")
    dtype = "i64" if a["kind"] == "argmax" else x.dtype
    if x.shape is None:
        return [TType(dtype, None)]
    if len(x.shape) != nd + 2:
        raise ctx.error(f"a {nd}-D window on {x}")
    out: list[int | None] = list(x.shape[:2])
    for i, d in enumerate(x.shape[2:]):
        if d is None:
            out.append(None)
            continue
        out.append(pool_out_size(d, kernel[i], strides[i], dil[i], pads[i], pads[i + nd],
                                 a["ceil_mode"]))
    return [TType(dtype, tuple(out))]


def _max_unpool(ctx: InferContext) -> list[TType]:
    x, idx = ctx.inputs
    a = ctx.attrs
    nd = len(a["kernel"])
    if not (len(a["strides"]) == nd and len(a["pads"]) == 2 * nd):
        raise ctx.error("kernel, strides and pads must fit the spatial axes")
    if a["output"] and len(a["output"]) != nd:
        raise ctx.error(f"output {list(a['output'])} must give {nd} spatial sizes")
    if idx.dtype != "i64":
        raise ctx.error(f"indices must be i64, got {idx.dtype}")
    if x.rank not in (None, nd + 2):
        raise ctx.error(f"{x} does not have {nd} spatial axes")
    if x.shape is None:
        return [TType(x.dtype, None)]
    spatial: tuple[int | None, ...] = tuple(int(s) for s in a["output"]) or tuple(
        None if d is None else unpool_size(d, a["kernel"][i], a["strides"][i], a["pads"][i],
                                           a["pads"][i + nd])
        for i, d in enumerate(x.shape[2:]))
    return [TType(x.dtype, tuple(x.shape[:2]) + spatial)]


def _col2im(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    image, block = ctx.attrs["image_shape"], ctx.attrs["block_shape"]
    if x.rank not in (None, 3):
        raise ctx.error(f"columns must have rank 3, got {x}")
    n = x.shape[0] if x.shape else None
    c = None
    if x.shape and x.shape[1] is not None:
        blocks = 1
        for k in block:
            blocks *= int(k)
        if x.shape[1] % blocks:
            raise ctx.error(f"{x.shape[1]} rows are not a multiple of the block size {blocks}")
        c = x.shape[1] // blocks
    return [TType(x.dtype, (n, c, *(int(d) for d in image)))]


def _conv_transpose_nd(ctx: InferContext) -> list[TType]:
    x, w = ctx.inputs
    a = ctx.attrs
    nd = len(a["strides"])
    if x.rank not in (None, nd + 2) or w.rank not in (None, nd + 2):
        raise ctx.error(f"a {nd}-D transposed convolution of {x} with {w}")
    if x.shape is None or w.shape is None:
        return [TType(x.dtype, None)]
    out: list[int | None] = [x.shape[0], None if w.shape[1] is None else
                             w.shape[1] * a["groups"]]
    for i in range(nd):
        d, k = x.shape[2 + i], w.shape[2 + i]
        out.append(None if d is None or k is None else
                   a["strides"][i] * (d - 1) + (k - 1) * a["dilations"][i] + 1
                   + a["output_padding"][i] - a["pads"][i] - a["pads"][i + nd])
    return [TType(x.dtype, tuple(out))]


define("resize_nd", ("x",), _resize_nd, {
    "sizes": AttrSpec("ints"), "scales": AttrSpec("floats"), "roi": AttrSpec("floats", ()),
    "mode": AttrSpec("str", "nearest", choices=("nearest", "linear", "cubic")),
    "coordinate_transformation_mode": AttrSpec("str", "half_pixel", choices=(
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
        "asymmetric", "tf_crop_and_resize")),
    "nearest_mode": AttrSpec("str", "round_prefer_floor", choices=(
        "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")),
    "cubic_coeff_a": AttrSpec("float", -0.75), "exclude_outside": AttrSpec("bool", False),
    "antialias": AttrSpec("bool", False), "extrapolation_value": AttrSpec("float", 0.0),
}, family="onnx", doc="ONNX Resize on any rank, every mode", differentiable=False)
define("pool_nd", ("x",), _pool_nd, {
    "kind": AttrSpec("str", choices=("max", "avg", "lp", "argmax")), "kernel": AttrSpec("ints"),
    "strides": AttrSpec("ints"), "dilations": AttrSpec("ints"), "pads": AttrSpec("ints"),
    "ceil_mode": AttrSpec("bool", False), "count_include_pad": AttrSpec("bool", False),
    "p": AttrSpec("int", 2), "storage_order": AttrSpec("int", 0),
}, family="onnx", doc="ONNX MaxPool/AveragePool/LpPool on any number of spatial axes",
    differentiable=False)
define("max_unpool", ("x", "indices"), _max_unpool, {
    "kernel": AttrSpec("ints"), "strides": AttrSpec("ints"), "pads": AttrSpec("ints"),
    "output": AttrSpec("ints", ())},
       family="onnx", doc="ONNX MaxUnpool", differentiable=False)
define("conv_transpose_nd", ("x", "w"), _conv_transpose_nd, {
    "strides": AttrSpec("ints"), "dilations": AttrSpec("ints"), "pads": AttrSpec("ints"),
    "output_padding": AttrSpec("ints"), "groups": AttrSpec("int", 1),
}, family="onnx", doc="ONNX ConvTranspose on any number of spatial axes", differentiable=False)
define("col2im", ("x",), _col2im, {
    "image_shape": AttrSpec("ints"), "block_shape": AttrSpec("ints"),
    "strides": AttrSpec("ints"), "dilations": AttrSpec("ints"), "pads": AttrSpec("ints"),
}, family="onnx", doc="ONNX Col2Im", differentiable=False)
