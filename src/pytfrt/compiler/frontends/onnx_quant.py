"""ONNX's quantised operators, registered in ``ONNX_OPS``.

Imported by :mod:`pytfrt.compiler.frontends.onnx_mapping` (at its end), like the other
``onnx_*`` handler modules.  ``QuantizeLinear``, ``DequantizeLinear`` and
``DynamicQuantizeLinear`` become the graph dialect's ``quantize_linear``,
``dequantize_linear`` and ``dynamic_quantize_linear`` (family ``quant``); the integer
products (``MatMulInteger``, ``QLinearMatMul``) are exact integer arithmetic requantised as
ONNX Runtime does.  A QDQ model (``DequantizeLinear`` -> float op -> ``QuantizeLinear``, as
ONNX Runtime's ``quantize_static`` writes it) imports as that float graph with the
quantisation ops in it; ``-tg-fold-quant`` then folds the pairs into integer ops
(``docs/compiler.md``, "Quantization").  ``QLinearConv``/``QLinearMatMul`` with a constant s8
weight, and ONNX Runtime's ``com.microsoft`` contrib ops of QOperator models (``QLinearAdd``,
``QLinearMul``, ``QLinearGlobalAveragePool``, ``QLinearAveragePool``, ``QLinearSigmoid``,
``QLinearLeakyRelu``, ``QLinearSoftmax``, ``QLinearConcat``, ``QGemm``; registered in
``MS_OPS``) import as
dequantize -> the float op -> quantize, the form the pass folds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pytfrt.compiler.frontends.onnx_common import tg_dtype
from pytfrt.compiler.frontends.onnx_mapping import (
    MS_OPS,
    OnnxGraphImporter,
    Out,
    _np_dtype,
    onnx_op,
)
from pytfrt.compiler.ops.quant import QUANT_DTYPES

if TYPE_CHECKING:  # pragma: no cover
    from pytfrt.compiler.builder import Value


def _axis_attrs(ctx: OnnxGraphImporter, node: Any) -> dict[str, int]:
    a = ctx.attrs(node)
    return {"axis": int(a.get("axis", 1)), "block_size": int(a.get("block_size", 0))}


@onnx_op("QuantizeLinear", note="`quantize_linear {axis, block_size, dtype}` (u8, i8, u16, i16)")
def _quantize_linear(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    scale = ctx.input(node, 1)
    zp = _opt(ctx, node, 2)
    a = ctx.attrs(node)
    out = zp.dtype if zp is not None else tg_dtype(int(a.get("output_dtype", 0)) or 2)
    if out not in QUANT_DTYPES:
        ctx.unsupported(node, f"quantising to {out}")
    operands = [x, scale] if zp is None else [x, scale, zp]
    return [ctx.op("quantize_linear", operands, dtype=out, **_axis_attrs(ctx, node))]


@onnx_op("DequantizeLinear", note="`dequantize_linear {axis, block_size}`")
def _dequantize_linear(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    scale = ctx.input(node, 1)
    operands = [x, scale]
    if ctx.has(node, 2):
        operands.append(ctx.input(node, 2))
    y = ctx.op("dequantize_linear", operands, **_axis_attrs(ctx, node))
    want = int(ctx.attrs(node).get("output_dtype", 0))
    if want and tg_dtype(want) != y.dtype:
        y = ctx.op("cast", [y], to=tg_dtype(want))
    return [y]


@onnx_op("DynamicQuantizeLinear", note="`dynamic_quantize_linear` (three results)")
def _dynamic_quantize_linear(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return list(ctx.op("dynamic_quantize_linear", [ctx.input(node, 0)]))


def _saturate(ctx: OnnxGraphImporter, v: Value, dtype: str) -> Value:
    info = np.iinfo(_np_dtype(dtype))
    v = ctx.op("maximum", [v, ctx.scalar(float(info.min), v, "const")])
    return ctx.op("minimum", [v, ctx.scalar(float(info.max), v, "const")])


def _via(ctx: OnnxGraphImporter, node: Any, op_type: str, inputs: Sequence[Value | None],
         **attrs: Any) -> Value:
    """Import ``op_type`` (its default-domain handler) on ``inputs`` with ``node``'s
    attributes (or ``attrs``): the float op between the quantization ops, so that the
    handler's attribute logic (pads, auto_pad, 1-D, ...) is not written again."""
    from onnx import helper

    from pytfrt.compiler.frontends.onnx_mapping import ONNX_OPS

    names = []
    for i, v in enumerate(inputs):
        if v is None:
            names.append("")
            continue
        name = f"__quant/{node.output[0]}/{op_type}/{i}"
        ctx.values[name] = v
        names.append(name)
    sub = helper.make_node(op_type, names, [f"__quant/{node.output[0]}/{op_type}"],
                           name=node.name)
    if attrs:
        sub.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    else:
        sub.attribute.extend(a for a in node.attribute if a.name not in ("axis",))
    (out,) = ONNX_OPS[op_type](ctx, sub)
    assert not isinstance(out, np.ndarray | np.generic)
    return out


def _opt(ctx: OnnxGraphImporter, node: Any, i: int) -> Value | None:
    """Optional input ``i`` (``None`` when absent)."""
    return ctx.input(node, i) if ctx.has(node, i) else None


def _scalar_known(ctx: OnnxGraphImporter, node: Any, i: int) -> bool:
    v = ctx.known_input(node, i)
    return v is not None and v.size == 1


def _foldable(ctx: OnnxGraphImporter, node: Any, x: int, w: int, wz: int, y: int) -> bool:
    """Whether a QLinear node's integer form is what ``-tg-fold-quant`` turns into an integer
    op: u8/s8 input and output, per-tensor known input/output parameters, a constant s8
    weight with zero zero points."""
    wk = ctx.known_input(node, w)
    wzk = ctx.known_input(node, wz)
    return (ctx.input(node, x).dtype in ("ui8", "i8") and wk is not None
            and wk.dtype == np.int8 and (wzk is None or not np.any(wzk))
            and all(_scalar_known(ctx, node, i) for i in (x + 1, x + 2, y, y + 1))
            and ctx.input(node, y + 1).dtype in ("ui8", "i8"))


def _shifted(ctx: OnnxGraphImporter, v: Value, z: Value | None, axis_shape: list[int] | None
             = None) -> Value:
    """``v - z`` in f64 (exact for 32-bit integers); ``axis_shape``: how a 1-D ``z``
    broadcasts (e.g. ``[-1, 1, 1, 1]`` for per-output-channel filter zero points)."""
    vf = ctx.op("cast", [v], to="f64")
    if z is None:
        return vf
    zf = ctx.op("cast", [z], to="f64")
    if axis_shape is not None and z.shape is not None and len(z.shape) == 1 and (
            z.shape[0] or 0) > 1:
        zf = ctx.op("reshape", [zf], shape=axis_shape)
    return ctx.op("sub", [vf, zf])


def _requantize(ctx: OnnxGraphImporter, acc: Value, scales: list[Value], sy: Value, zy: Value,
                scale_shape: list[int] | None) -> Value:
    """``saturate(round(acc * prod(scales) / sy) + zy)`` in f64, as ``zy``'s type."""
    f = [ctx.op("cast", [s], to="f64") for s in scales]
    m = f[0]
    for other in f[1:]:
        if scale_shape is not None and other.shape is not None and len(other.shape) == 1:
            other = ctx.op("reshape", [other], shape=scale_shape)
        m = ctx.op("mul", [m, other])
    m = ctx.op("div", [m, ctx.op("cast", [sy], to="f64")])
    q = ctx.op("add", [ctx.op("round", [ctx.op("mul", [acc, m])]),
                       ctx.op("cast", [zy], to="f64")])
    return ctx.op("cast", [_saturate(ctx, q, zy.dtype)], to=zy.dtype)


@onnx_op("QLinearConv", note="`dequantize_linear` -> `conv2d` -> `quantize_linear` (folded into "
         "`qconv2d`); other weights: exact integer `conv2d` in f64, requantised")
def _qlinear_conv(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x, xs, xz = (ctx.input(node, i) for i in range(3))
    w, ws = ctx.input(node, 3), ctx.input(node, 4)
    wz = _opt(ctx, node, 5)
    ys, yz = ctx.input(node, 6), ctx.input(node, 7)
    b = _opt(ctx, node, 8)
    if _foldable(ctx, node, 0, 3, 5, 6):
        xd = ctx.op("dequantize_linear", [x, xs, xz])
        wd = ctx.op("dequantize_linear", [w, ws], axis=0)
        bias = None
        if b is not None:
            bias = ctx.op("mul", [ctx.op("cast", [b], to="f32"), ctx.op("mul", [xs, ws])])
        y = _via(ctx, node, "Conv", [xd, wd, bias])
        return [ctx.op("quantize_linear", [y, ys, yz], dtype=yz.dtype)]
    acc = _via(ctx, node, "Conv", [_shifted(ctx, x, xz), _shifted(ctx, w, wz, [-1, 1, 1, 1]),
                                   None if b is None else ctx.op("cast", [b], to="f64")])
    return [_requantize(ctx, acc, [xs, ws], ys, yz, [-1, 1, 1])]


@onnx_op("ConvInteger", note="exact integer `conv2d` in f64 of the zero-point-shifted "
         "operands, as i32")
def _conv_integer(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x, w, xz, wz = ctx.input(node, 0), ctx.input(node, 1), _opt(ctx, node, 2), _opt(ctx, node, 3)
    acc = _via(ctx, node, "Conv", [_shifted(ctx, x, xz), _shifted(ctx, w, wz, [-1, 1, 1, 1])])
    return [ctx.op("cast", [acc], to="i32")]


@onnx_op("MatMulInteger", note="exact integer `matmul` in f64 of the zero-point-shifted "
         "operands, as i32")
def _matmul_integer(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a, b, za, zb = ctx.input(node, 0), ctx.input(node, 1), _opt(ctx, node, 2), _opt(ctx, node, 3)
    y = ctx.op("matmul", [_shifted(ctx, a, za, [-1, 1]), _shifted(ctx, b, zb)],
               transpose_a=False, transpose_b=False)
    return [ctx.op("cast", [y], to="i32")]


@onnx_op("QLinearMatMul", note="`dequantize_linear` -> `matmul` -> `quantize_linear` (folded "
         "into `qmatmul`); other weights: exact integer `matmul` in f64, requantised")
def _qlinear_matmul(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a, sa, za = ctx.input(node, 0), ctx.input(node, 1), ctx.input(node, 2)
    b, sb, zb = ctx.input(node, 3), ctx.input(node, 4), ctx.input(node, 5)
    sy, zy = ctx.input(node, 6), ctx.input(node, 7)
    bk = ctx.known_input(node, 3)
    if _foldable(ctx, node, 0, 3, 5, 6) and bk is not None and bk.ndim == 2:
        ad = ctx.op("dequantize_linear", [a, sa, za])
        bd = ctx.op("dequantize_linear", [b, sb], axis=1)
        y = ctx.op("matmul", [ad, bd], transpose_a=False, transpose_b=False)
        return [ctx.op("quantize_linear", [y, sy, zy], dtype=zy.dtype)]
    acc = ctx.op("matmul", [_shifted(ctx, a, za, [-1, 1]), _shifted(ctx, b, zb)],
                 transpose_a=False, transpose_b=False)
    return [_requantize(ctx, acc, [sa, sb], sy, zy, None)]


# -- ONNX Runtime's contrib ops in QOperator models (domain com.microsoft) ------------------
# Each is dequantize -> the float op -> quantize, so -tg-fold-quant and the layout pass treat
# them as the QDQ form (QGemm with a constant s8 weight becomes a qmatmul).


def _dq(ctx: OnnxGraphImporter, node: Any, i: int, axis: int = 1) -> Value:
    """``dequantize_linear`` of input ``i`` with its scale ``i + 1`` and zero point ``i + 2``."""
    ops = [ctx.input(node, i), ctx.input(node, i + 1)]
    if ctx.has(node, i + 2):
        ops.append(ctx.input(node, i + 2))
    return ctx.op("dequantize_linear", ops, axis=axis)


def _q(ctx: OnnxGraphImporter, node: Any, y: Value, i: int) -> Value:
    """``quantize_linear`` of ``y`` with the scale / zero point inputs ``i``, ``i + 1``."""
    ops = [y, ctx.input(node, i)]
    dtype = "ui8"
    if ctx.has(node, i + 1):
        ops.append(ctx.input(node, i + 1))
        dtype = ops[-1].dtype
    return ctx.op("quantize_linear", ops, dtype=dtype)


def _ms(op_type: str) -> Any:
    def register(fn: Any) -> Any:
        MS_OPS[op_type] = fn
        return fn

    return register


def _binary(op_type: str) -> Any:
    def handler(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
        y = _via(ctx, node, op_type, [_dq(ctx, node, 0), _dq(ctx, node, 3)])
        return [_q(ctx, node, y, 6)]

    return handler


_ms("QLinearAdd")(_binary("Add"))
_ms("QLinearMul")(_binary("Mul"))


def _unary(op_type: str) -> Any:
    def handler(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
        attrs = {k: v for k, v in ctx.attrs(node).items()
                 if k not in ("channels_last", "opset")}  # (QLinearSoftmax's opset)
        if int(ctx.attrs(node).get("channels_last", 0)):
            ctx.unsupported(node, "channels_last = 1")
        y = _via(ctx, node, op_type, [_dq(ctx, node, 0)], **attrs) if attrs else _via(
            ctx, node, op_type, [_dq(ctx, node, 0)])
        return [_q(ctx, node, y, 3)]

    return handler


for _ms_op, _float_op in (("QLinearGlobalAveragePool", "GlobalAveragePool"),
                          ("QLinearAveragePool", "AveragePool"),
                          ("QLinearSigmoid", "Sigmoid"), ("QLinearLeakyRelu", "LeakyRelu"),
                          ("QLinearSoftmax", "Softmax")):
    _ms(_ms_op)(_unary(_float_op))


@_ms("QLinearConcat")
def _qlinear_concat(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    parts = [_dq(ctx, node, i) for i in range(2, len(node.input), 3)]
    y = _via(ctx, node, "Concat", parts, axis=int(ctx.attrs(node)["axis"]))
    return [_q(ctx, node, y, 0)]


@_ms("QGemm")
def _qgemm(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    trans_b = int(a.get("transB", 0))
    ad = _dq(ctx, node, 0)
    bd = _dq(ctx, node, 3, axis=0 if trans_b else 1)
    c = None
    if ctx.has(node, 6):  # int32 bias on the scale a_scale * b_scale
        c = ctx.op("mul", [ctx.op("cast", [ctx.input(node, 6)], to="f32"),
                           ctx.op("mul", [ctx.input(node, 1), ctx.input(node, 4)])])
    gemm = {k: a[k] for k in ("alpha", "transA", "transB") if k in a}
    y = _via(ctx, node, "Gemm", [ad, bd, c], **gemm)
    return [_q(ctx, node, y, 7) if ctx.has(node, 7) else y]
