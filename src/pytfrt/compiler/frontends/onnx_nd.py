"""ONNX ``Resize`` and pooling beyond the 2-D kernels -> ``tg.resize_nd`` / ``tg.pool_nd``.

The main mapping (:mod:`~pytfrt.compiler.frontends.onnx_mapping`) imports the common 2-D
NCHW forms onto the core ``resize``/``max_pool2d``/``avg_pool2d``; what those cannot express
(other ranks, dilations, ``cubic``, ``antialias``, ``axes``, ``keep_aspect_ratio_policy``,
``tf_crop_and_resize``, scales that do not give whole sizes, ``LpPool``) comes here and is
imported onto the ``onnx_nd`` catalogue family (:mod:`pytfrt.compiler.ops.onnx_nd`).

Operands the ops take as attributes (``scales``, ``sizes``, ``roi``) must be known when the
model is imported; when they arrive as graph inputs, the handler names them and the backend
specialises the model on their values (:mod:`~pytfrt.compiler.frontends.onnx_specialize`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.backends.cpu._geometry import same_pad
from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter, Out, _dims, onnx_op


def resize_general(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    """``Resize`` (opset 11 and later) as ``tg.resize_nd``: every mode and option."""
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    dims = _dims(ctx, x)
    rank = len(dims)
    axes = [int(v) + rank if int(v) < 0 else int(v) for v in a.get("axes", range(rank))]
    ctm = str(a.get("coordinate_transformation_mode", "half_pixel"))
    policy = str(a.get("keep_aspect_ratio_policy", "stretch"))
    if any(dims[i] is None for i in axes):
        ctx.unsupported(node, "resizing an axis of size known only at run time")
    size_in = [int(dims[i] or 0) for i in axes]
    sizes = ctx.known_input(node, 3)
    scales = ctx.known_input(node, 2)
    if ctx.has(node, 3) and sizes is None:
        ctx.unsupported(node, "input 3 (sizes) must be a constant", [3])
    if sizes is None and (scales is None or scales.size == 0):
        ctx.unsupported(node, "input 2 (scales) or 3 (sizes) must be a constant", [2, 3])
    if sizes is not None and sizes.size:
        want = [int(v) for v in sizes.reshape(-1)]
        sc = [w / n for w, n in zip(want, size_in, strict=True)]
        if policy != "stretch":
            s = min(sc) if policy == "not_larger" else max(sc)
            sc = [s] * len(axes)
            want = [int(np.round(s * n)) for n in size_in]
    else:
        assert scales is not None
        sc = [float(v) for v in scales.reshape(-1)]
        want = [int(np.floor(n * s)) for n, s in zip(size_in, sc, strict=True)]
    if len(sc) != len(axes):
        ctx.unsupported(node, f"{len(sc)} scales or sizes for {len(axes)} axes")
    full_sizes = [int(d or 0) for d in dims]
    full_scales = [1.0] * rank
    for i, s, w in zip(axes, sc, want, strict=True):
        full_sizes[i], full_scales[i] = w, float(s)
    if any(d is None for i, d in enumerate(dims) if i not in axes):
        ctx.unsupported(node, "Resize with a dynamic axis (the op takes a static output size)")
    roi: list[float] = []
    if ctm == "tf_crop_and_resize":
        r = ctx.known_input(node, 1)
        if r is None:
            ctx.unsupported(node, "input 1 (roi) must be a constant", [1])
        vals = [float(v) for v in r.reshape(-1)]
        roi = [0.0] * rank + [1.0] * rank
        for k, i in enumerate(axes):
            roi[i], roi[i + rank] = vals[k], vals[k + len(axes)]
    return [ctx.op(
        "resize_nd", [x], sizes=full_sizes, scales=full_scales, roi=roi,
        mode=str(a.get("mode", "nearest")), coordinate_transformation_mode=ctm,
        nearest_mode=str(a.get("nearest_mode", "round_prefer_floor")),
        cubic_coeff_a=float(a.get("cubic_coeff_a", -0.75)),
        exclude_outside=bool(a.get("exclude_outside", 0)),
        antialias=bool(a.get("antialias", 0)),
        extrapolation_value=float(a.get("extrapolation_value", 0.0)),
    )]


def pool_general(ctx: OnnxGraphImporter, node: Any, kind: str) -> list[Out]:
    """``MaxPool`` (with its ``Indices`` output: a second ``tg.pool_nd {kind = argmax}``),
    ``AveragePool`` or ``LpPool`` as ``tg.pool_nd``."""
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    dims = _dims(ctx, x)
    nd = len(dims) - 2
    if nd < 1:
        ctx.unsupported(node, f"a rank-{len(dims)} input")
    kernel = [int(k) for k in a["kernel_shape"]]
    strides = [int(s) for s in a.get("strides", [1] * nd)]
    dil = [int(d) for d in a.get("dilations", [1] * nd)]
    auto = str(a.get("auto_pad", "NOTSET"))
    if auto in ("NOTSET", ""):
        pads = [int(p) for p in a.get("pads", [0] * 2 * nd)]
    elif auto == "VALID":
        pads = [0] * 2 * nd
    else:
        if any(d is None for d in dims[2:]):
            ctx.unsupported(node, f"auto_pad {auto} with dynamic spatial dimensions")
        both = [same_pad(int(dims[2 + i] or 0), kernel[i], strides[i], dil[i],
                         upper=auto == "SAME_UPPER") for i in range(nd)]
        pads = [b for b, _ in both] + [e for _, e in both]
    common: dict[str, Any] = dict(kernel=kernel, strides=strides, dilations=dil, pads=pads,
                                  ceil_mode=bool(a.get("ceil_mode", 0)))
    y = ctx.op("pool_nd", [x], kind=kind, count_include_pad=bool(a.get("count_include_pad", 0)),
               p=int(a.get("p", 2)), **common)
    if kind != "max" or len(node.output) < 2 or 1 not in ctx.used_outputs(node):
        return [y]
    order = int(a.get("storage_order", 0))
    return [y, ctx.op("pool_nd", [x], kind="argmax", storage_order=order, **common)]


@onnx_op("MaxUnpool", note="`max_unpool {kernel, strides, pads, output}` (onnx_nd family; "
         "`output_shape` a constant or specialised on)")
def _max_unpool(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x, idx = ctx.input(node, 0), ctx.input(node, 1)
    nd = len(a["kernel_shape"])
    output: list[int] = []
    if ctx.has(node, 2):
        output = [int(v) for v in ctx.const_input(node, 2, "output_shape").reshape(-1)][-nd:]
    if idx.dtype != "i64":
        idx = ctx.op("cast", [idx], to="i64")
    return [ctx.op("max_unpool", [x, idx], kernel=[int(k) for k in a["kernel_shape"]],
                   strides=[int(s) for s in a.get("strides", [1] * nd)],
                   pads=[int(p) for p in a.get("pads", [0] * 2 * nd)], output=output)]


@onnx_op("LpPool", note="`pool_nd {kind = lp}` (onnx_nd family; any number of spatial axes)")
def _lp_pool(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return pool_general(ctx, node, "lp")


@onnx_op("Col2Im", note="`col2im {image_shape, block_shape, ...}` (onnx_nd family)")
def _col2im(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    image = ctx.const_input(node, 1, "image_shape")
    block = ctx.const_input(node, 2, "block_shape")
    nd = int(image.size)
    a = ctx.attrs(node)
    return [ctx.op(
        "col2im", [ctx.input(node, 0)], image_shape=[int(v) for v in image.reshape(-1)],
        block_shape=[int(v) for v in block.reshape(-1)],
        strides=[int(v) for v in a.get("strides", [1] * nd)],
        dilations=[int(v) for v in a.get("dilations", [1] * nd)],
        pads=[int(v) for v in a.get("pads", [0] * 2 * nd)],
    )]


def conv_transpose_general(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    """``ConvTranspose`` as ``tg.conv_transpose_nd``: any rank, ``output_shape``, auto pads."""
    a = ctx.attrs(node)
    x, w = ctx.input(node, 0), ctx.input(node, 1)
    dims = _dims(ctx, x)
    nd = len(dims) - 2
    wk = _dims(ctx, w)
    kernel = [int(k) for k in a.get("kernel_shape", wk[2:])]
    strides = [int(v) for v in a.get("strides", [1] * nd)]
    dil = [int(v) for v in a.get("dilations", [1] * nd)]
    out_pad = [int(v) for v in a.get("output_padding", [0] * nd)]
    auto = str(a.get("auto_pad", "NOTSET"))
    pads = [int(v) for v in a.get("pads", [0] * 2 * nd)]
    if "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER"):
        if any(d is None for d in dims[2:]):
            ctx.unsupported(node, "output_shape or auto_pad with dynamic spatial dimensions")
        want = ([int(v) for v in a["output_shape"]][-nd:] if "output_shape" in a
                else [int(dims[2 + i] or 0) * strides[i] for i in range(nd)])
        total = [strides[i] * (int(dims[2 + i] or 0) - 1) + out_pad[i]
                 + (kernel[i] - 1) * dil[i] + 1 - want[i] for i in range(nd)]
        if auto == "SAME_UPPER":
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:
            pads = [t - t // 2 for t in total] + [t // 2 for t in total]
    elif auto == "VALID":
        pads = [0] * 2 * nd
    y = ctx.op("conv_transpose_nd", [x, w], strides=strides, dilations=dil, pads=pads,
               output_padding=out_pad, groups=int(a.get("group", 1)))
    if ctx.has(node, 2):
        b = ctx.op("reshape", [ctx.input(node, 2)], shape=[-1] + [1] * nd)
        y = ctx.op("add", [y, b])
    return [y]
