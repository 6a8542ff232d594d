"""More ONNX op handlers: ops composed from catalogue ops, registered in ``ONNX_OPS``.

Imported by :mod:`pytfrt.compiler.frontends.onnx_mapping` (at its end), like
:mod:`~pytfrt.compiler.frontends.onnx_control`.  Each handler emits only core catalogue ops:
inverse and hyperbolic trigonometry from ``exp``/``log``/``sqrt``/``atan2``, ``Hardmax`` from
``argmax`` + ``one_hot``, ``LpNormalization`` and ``Shrink`` from elementwise ops and
reductions, ``Mod`` with ``fmod = 1`` as ``x - trunc(x / y) * y``.  (The quantisation ops are in
:mod:`pytfrt.compiler.frontends.onnx_quant`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pytfrt.compiler.frontends.onnx_common import tg_dtype
from pytfrt.compiler.frontends.onnx_mapping import (
    OnnxGraphImporter,
    Out,
    _axis,
    _dims,
    _is_float,
    _np_dtype,
    _rank,
    _static_shape,
    onnx_op,
)

if TYPE_CHECKING:  # pragma: no cover
    from pytfrt.compiler.builder import Value


def _c(ctx: OnnxGraphImporter, value: float, like: Value) -> Value:
    return ctx.scalar(value, like, "const")


def _trig(ctx: OnnxGraphImporter, op: str, x: Value) -> Value:
    def e(name: str, *args: Value) -> Value:
        return ctx.op(name, list(args))

    one = _c(ctx, 1.0, x)
    half = _c(ctx, 0.5, x)
    if op == "Atan":
        return e("atan2", x, e("add", e("mul", x, _c(ctx, 0.0, x)), one))
    if op in ("Asin", "Acos"):
        root = e("sqrt", e("sub", one, e("mul", x, x)))
        return e("atan2", x, root) if op == "Asin" else e("atan2", root, x)
    if op in ("Sinh", "Cosh"):
        a, b = e("exp", x), e("exp", e("neg", x))
        return e("mul", e("sub" if op == "Sinh" else "add", a, b), half)
    if op == "Asinh":  # sign(x) log(|x| + sqrt(x^2 + 1)): no cancellation for x < 0
        ax = e("abs", x)
        return e("mul", e("sign", x), e("log", e("add", ax, e("sqrt", e("add", e("mul", ax, ax),
                                                                         one)))))
    if op == "Acosh":
        return e("log", e("add", x, e("sqrt", e("sub", e("mul", x, x), one))))
    # Atanh
    return e("mul", half, e("log", e("div", e("add", one, x), e("sub", one, x))))


_TRIG = ("Acos", "Asin", "Atan", "Acosh", "Asinh", "Atanh", "Sinh", "Cosh")


def _trig_handler(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    if not _is_float(x):
        ctx.unsupported(node, f"element type {x.dtype}")
    return [_trig(ctx, node.op_type, x)]


for _t in _TRIG:
    onnx_op(_t, note="composed from `exp`/`log`/`sqrt`/`atan2`")(_trig_handler)


@onnx_op("Hardmax", note="`argmax` + `one_hot` along `axis`")
def _hardmax(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    axis = _axis(int(ctx.attrs(node).get("axis", -1)), rank)
    n = x.shape[axis] if x.shape is not None else None
    if n is None:
        ctx.unsupported(node, "a dynamic size along axis")
    idx = ctx.op("argmax", [x], axis=axis, keepdims=False, output_type="i64")
    depth = ctx.constant(np.asarray(n, np.int64), "hardmax/depth")
    on, off = _c(ctx, 1.0, x), _c(ctx, 0.0, x)
    return [ctx.op("one_hot", [idx, depth, on, off], axis=axis)]


@onnx_op("LpNormalization", note="`x / reduce_sum(|x|^p)^(1/p)` (p = 1 or 2)")
def _lp_norm(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    axis = _axis(int(a.get("axis", -1)), _rank(ctx, x))
    p = int(a.get("p", 2))
    if p == 1:
        norm = ctx.op("reduce_sum", [ctx.op("abs", [x])], axes=[axis], keepdims=True)
    elif p == 2:
        norm = ctx.op("sqrt", [ctx.op("reduce_sum", [ctx.op("mul", [x, x])], axes=[axis],
                                      keepdims=True)])
    else:
        ctx.unsupported(node, f"p = {p} (ONNX allows 1 or 2)")
    zero = _c(ctx, 0.0, x)
    safe = ctx.op("select", [ctx.op("equal", [norm, zero]), _c(ctx, 1.0, x), norm])
    return [ctx.op("div", [x, safe])]


@onnx_op("Shrink", note="`select(x < -lambd, x + bias, select(x > lambd, x - bias, 0))`")
def _shrink(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    lambd, bias = float(a.get("lambd", 0.5)), float(a.get("bias", 0.0))
    lo = ctx.op("less", [x, _c(ctx, -lambd, x)])
    hi = ctx.op("greater", [x, _c(ctx, lambd, x)])
    b = _c(ctx, bias, x)
    return [ctx.op("select", [lo, ctx.op("add", [x, b]),
                              ctx.op("select", [hi, ctx.op("sub", [x, b]), _c(ctx, 0.0, x)])])]


@onnx_op("EyeLike", note="a constant (the input's shape must be static)")
def _eye_like(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    shape = _static_shape(x)
    if shape is None or len(shape) != 2:
        ctx.unsupported(node, "a dynamic or non-2-D input")
    a = ctx.attrs(node)
    dtype = tg_dtype(int(a["dtype"])) if "dtype" in a else x.dtype
    return [np.eye(shape[0], shape[1], k=int(a.get("k", 0)), dtype=_np_dtype(dtype))]


def _trunc_div(ctx: OnnxGraphImporter, x: Value, y: Value) -> Value:
    q = ctx.op("div", [x, y])
    if not _is_float(x):
        return q
    return ctx.op("mul", [ctx.op("sign", [q]), ctx.op("floor", [ctx.op("abs", [q])])])


def mod_fmod(ctx: OnnxGraphImporter, node: Any) -> Value:
    """``Mod`` with ``fmod = 1``: the remainder with the dividend's sign (C ``fmod``)."""
    x, y = ctx.input(node, 0), ctx.input(node, 1)
    if not _is_float(x):  # integer div truncates (as ONNX Runtime): x - (x / y) * y
        q = ctx.op("cast", [ctx.op("div", [ctx.op("cast", [x], to="f64"),
                                           ctx.op("cast", [y], to="f64")])], to="f64")
        q = ctx.op("mul", [ctx.op("sign", [q]), ctx.op("floor", [ctx.op("abs", [q])])])
        return ctx.op("sub", [x, ctx.op("mul", [ctx.op("cast", [q], to=x.dtype), y])])
    wide = x.dtype != "f64"
    xx = ctx.op("cast", [x], to="f64") if wide else x
    yy = ctx.op("cast", [y], to="f64") if wide else y
    r = ctx.op("sub", [xx, ctx.op("mul", [_trunc_div(ctx, xx, yy), yy])])
    return ctx.op("cast", [r], to=x.dtype) if wide else r


# -- ops with kernels of their own (catalogue family ``onnx_more``) -------------------------


@onnx_op("BitShift", note="`bit_shift {direction}` (onnx_more family)")
def _bit_shift(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    direction = str(ctx.attrs(node)["direction"])
    return [ctx.op("bit_shift", [ctx.input(node, 0), ctx.input(node, 1)], direction=direction)]


@onnx_op("BitwiseXor", note="`bitwise_xor` (onnx_more family)")
def _bitwise_xor(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return [ctx.op("bitwise_xor", [ctx.input(node, 0), ctx.input(node, 1)])]


@onnx_op("BitwiseNot", note="`bitwise_not` (onnx_more family)")
def _bitwise_not(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return [ctx.op("bitwise_not", [ctx.input(node, 0)])]


@onnx_op("CumProd", note="`cumprod {axis, exclusive, reverse}` (onnx_more family)")
def _cumprod(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    axis = _axis(int(ctx.const_input(node, 1, "axis").reshape(-1)[0]), _rank(ctx, x))
    return [ctx.op("cumprod", [x], axis=axis, exclusive=bool(a.get("exclusive", 0)),
                   reverse=bool(a.get("reverse", 0)))]


@onnx_op("NonMaxSuppression",
         note="`non_max_suppression {center_point_box}` ([n, 3] rows, n at run time)")
def _nms(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    operands = [ctx.input(node, 0), ctx.input(node, 1)]
    defaults = (np.zeros((), np.int64), np.zeros((), np.float32), None)
    for i, default in zip((2, 3, 4), defaults, strict=True):
        if ctx.has(node, i):
            operands.append(ctx.input(node, i))
        elif i < len(node.input) or default is not None:
            if default is None:
                break
            operands.append(ctx.constant(default, f"nms/default{i}"))
    return [ctx.op("non_max_suppression", operands,
                   center_point_box=int(ctx.attrs(node).get("center_point_box", 0)))]


@onnx_op("GridSample", note="`grid_sample {mode, padding_mode, align_corners}` (4-D and 5-D "
         "inputs)")
def _grid_sample(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    mode = str(a.get("mode", "linear"))
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    if rank not in (4, 5):
        ctx.unsupported(node, f"a rank-{rank} input (2-D or 3-D sampling: NCHW or NCDHW)")
    if rank == 5 and mode == "cubic":
        ctx.unsupported(node, "cubic mode on a 3-D input (ONNX defines it for 2-D only)")
    return [ctx.op("grid_sample", [x, ctx.input(node, 1)], mode=mode,
                   padding_mode=str(a.get("padding_mode", "zeros")),
                   align_corners=bool(a.get("align_corners", 0)))]


@onnx_op("DeformConv", note="`deform_conv {strides, pads, dilations, group, offset_group}` "
         "(onnx_more family; 2-D)")
def _deform_conv(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    if _rank(ctx, x) != 4:
        ctx.unsupported(node, f"a rank-{_rank(ctx, x)} input (2-D deformable convolution only, "
                              "as ONNX Runtime)")
    operands = [x, ctx.input(node, 1), ctx.input(node, 2)]
    has_bias, has_mask = ctx.has(node, 3), ctx.has(node, 4)
    operands += [ctx.input(node, i) for i, on in ((3, has_bias), (4, has_mask)) if on]
    return [ctx.op("deform_conv", operands,
                   strides=[int(v) for v in a.get("strides", [1, 1])],
                   pads=[int(v) for v in a.get("pads", [0, 0, 0, 0])],
                   dilations=[int(v) for v in a.get("dilations", [1, 1])],
                   group=int(a.get("group", 1)), offset_group=int(a.get("offset_group", 1)),
                   has_bias=has_bias, has_mask=has_mask)]


@onnx_op("ai.onnx.ml.TreeEnsemble", note="`tree_ensemble` (onnx_more family; the trees as "
         "attributes; post_transform none, softmax, logistic, softmax_zero)")
def _tree_ensemble(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    from pytfrt.compiler.frontends.onnx_proto import TensorProto, to_array

    a = {k: to_array(v) if isinstance(v, TensorProto) else v
         for k, v in ctx.attrs(node).items()}

    def ints(name: str) -> list[int]:
        return [int(v) for v in np.asarray(a.get(name, [])).reshape(-1)]

    def floats(name: str) -> list[float]:
        return [float(v) for v in np.asarray(a.get(name, []), np.float64).reshape(-1)]

    post = int(a.get("post_transform", 0))
    if post not in (0, 1, 2, 3):
        ctx.unsupported(node, f"post_transform {post} (PROBIT)")
    modes = ints("nodes_modes")
    # membership sets: NaN-separated runs, one per membership node in node order
    sets: list[list[float]] = []
    current: list[float] = []
    for v in floats("membership_values"):
        if np.isnan(v):  # a NaN ends a set
            sets.append(current)
            current = []
        else:
            current.append(v)
    member_values: list[float] = []
    offsets = [0]
    k = 0
    for m in modes:
        if m == 6:
            if k >= len(sets):
                ctx.unsupported(node, "a membership node without its set in membership_values")
            member_values += sets[k]
            k += 1
        offsets.append(len(member_values))
    return [ctx.op(
        "tree_ensemble", [ctx.input(node, 0)], roots=ints("tree_roots"),
        features=ints("nodes_featureids"), modes=modes, splits=floats("nodes_splits"),
        true_ids=ints("nodes_truenodeids"), false_ids=ints("nodes_falsenodeids"),
        true_leafs=ints("nodes_trueleafs"), false_leafs=ints("nodes_falseleafs"),
        missing_true=ints("nodes_missing_value_tracks_true"), member_values=member_values,
        member_offsets=offsets, leaf_targets=ints("leaf_targetids"),
        leaf_weights=floats("leaf_weights"), n_targets=int(a["n_targets"]),
        aggregate=int(a.get("aggregate_function", 1)), post_transform=post)]


@onnx_op("DFT", note="`dft {axis, length, inverse, onesided}` (onnx_more family; "
         "`dft_length` and `axis` inputs constant or specialised on)")
def _dft(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    if ctx.opset >= 20:
        axis = int(ctx.const_input(node, 2, "axis").reshape(-1)[0]) if ctx.has(node, 2) else -2
    else:
        axis = int(a.get("axis", 1))
    length = -1
    if ctx.has(node, 1):
        length = int(ctx.const_input(node, 1, "dft_length").reshape(-1)[0])
    return [ctx.op("dft", [x], axis=axis % rank, length=length,
                   inverse=bool(a.get("inverse", 0)), onesided=bool(a.get("onesided", 0)))]


@onnx_op("STFT", note="`stft {frame_step, frame_length, onesided}` (onnx_more family; the "
         "step and frame length constant or specialised on)")
def _stft(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    sig = ctx.input(node, 0)
    step = int(ctx.const_input(node, 1, "frame_step").reshape(-1)[0])
    operands = [sig]
    if ctx.has(node, 3):
        frame_length = int(ctx.const_input(node, 3, "frame_length").reshape(-1)[0])
    elif ctx.has(node, 2):
        wdims = _dims(ctx, ctx.input(node, 2))
        if wdims[0] is None:
            ctx.unsupported(node, "a window of a length known only at run time", [2])
        frame_length = int(wdims[0])
    else:
        sdims = _dims(ctx, sig)
        if sdims[1] is None:
            ctx.unsupported(node, "no window or frame_length, and a dynamic signal length", [0])
        frame_length = int(sdims[1])
    if ctx.has(node, 2):
        operands.append(ctx.input(node, 2))
    return [ctx.op("stft", operands, frame_step=step, frame_length=frame_length,
                   onesided=bool(ctx.attrs(node).get("onesided", 1)))]


@onnx_op("MelWeightMatrix", note="folded at import by ONNX's reference implementation (its "
         "operands are specialised on)")
def _mel_weight_matrix(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    # reached only when an operand is unknown: once all five are known the importer folds
    # the node before any handler runs
    ctx.unsupported(node, "operands known only at run time", range(len(node.input)))


@onnx_op("RoiAlign", note="`roi_align {mode, output_height, output_width, sampling_ratio, "
         "spatial_scale, half_pixel}` (onnx_more family)")
def _roi_align(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    ctm = str(a.get("coordinate_transformation_mode",
                    "half_pixel" if ctx.opset >= 16 else "output_half_pixel"))
    return [ctx.op("roi_align", [ctx.input(node, i) for i in range(3)],
                   mode=str(a.get("mode", "avg")), output_height=int(a.get("output_height", 1)),
                   output_width=int(a.get("output_width", 1)),
                   sampling_ratio=int(a.get("sampling_ratio", 0)),
                   spatial_scale=float(a.get("spatial_scale", 1.0)),
                   half_pixel=ctm == "half_pixel")]


@onnx_op("TensorScatter", note="`tensor_scatter {axis, mode}` (onnx_more family)")
def _tensor_scatter(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    operands = [ctx.input(node, 0), ctx.input(node, 1)]
    if ctx.has(node, 2):
        operands.append(ctx.input(node, 2))
    return [ctx.op("tensor_scatter", operands, axis=int(a.get("axis", -2)),
                   mode=str(a.get("mode", "linear")))]


@onnx_op("StringConcat", note="`string_concat` (onnx_more family)")
def _string_concat(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return [ctx.op("string_concat", [ctx.input(node, 0), ctx.input(node, 1)])]


@onnx_op("RegexFullMatch", note="`regex_full_match {pattern}` (Python `re` syntax)")
def _regex_full_match(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    pattern = str(ctx.attrs(node).get("pattern", ""))
    return [ctx.op("regex_full_match", [ctx.input(node, 0)], pattern=pattern)]


@onnx_op("BitCast", note="`bitcast {to}` (same element size)")
def _bitcast(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    to = tg_dtype(int(ctx.attrs(node)["to"]), where=f"{ctx.origin}: node {node.name!r}: ")
    return [ctx.op("bitcast", [ctx.input(node, 0)], to=to)]


@onnx_op("Det", note="`det` (onnx_more family)")
def _det(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return [ctx.op("det", [ctx.input(node, 0)])]


@onnx_op("ReverseSequence", note="`reverse_sequence {batch_axis, time_axis}`")
def _reverse_sequence(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    return [ctx.op("reverse_sequence", [ctx.input(node, 0), ctx.input(node, 1)],
                   batch_axis=int(a.get("batch_axis", 1)), time_axis=int(a.get("time_axis", 0)))]


@onnx_op("Compress", note="`compress {axis}` (the result size known at run time)")
def _compress(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    axis = [int(a["axis"])] if "axis" in a else []
    return [ctx.op("compress", [ctx.input(node, 0), ctx.input(node, 1)], axis=axis)]


@onnx_op("Unique", note="`unique {axis, sorted}` (four results, sizes known at run time)")
def _unique(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    axis = [int(a["axis"])] if "axis" in a else []
    return list(ctx.op("unique", [ctx.input(node, 0)], axis=axis,
                       sorted=bool(a.get("sorted", 1)), n_results=4))
