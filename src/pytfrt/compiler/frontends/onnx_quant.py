"""ONNX's quantised operators, registered in ``ONNX_OPS``.

Imported by :mod:`pytfrt.compiler.frontends.onnx_mapping` (at its end), like the other
``onnx_*`` handler modules.  ``QuantizeLinear``, ``DequantizeLinear`` and
``DynamicQuantizeLinear`` become the graph dialect's ``quantize_linear``,
``dequantize_linear`` and ``dynamic_quantize_linear`` (family ``quant``); the integer
products (``MatMulInteger``, ``QLinearMatMul``) are exact integer arithmetic requantised as
ONNX Runtime does.  A QDQ model (``DequantizeLinear`` -> float op -> ``QuantizeLinear``, as
ONNX Runtime's ``quantize_static`` writes it) imports as that float graph with the
quantisation ops in it; ``-tg-fold-quant`` then folds the pairs into integer ops
(``docs/compiler.md``, "Quantization").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pytfrt.compiler.frontends.onnx_common import tg_dtype
from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter, Out, _np_dtype, onnx_op
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
    zp = ctx.input(node, 2) if ctx.has(node, 2) else None
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


@onnx_op("MatMulInteger", note="`matmul` in f64 of the zero-point-shifted operands, as i32")
def _matmul_integer(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a, b = ctx.input(node, 0), ctx.input(node, 1)
    af, bf = ctx.op("cast", [a], to="f64"), ctx.op("cast", [b], to="f64")
    if ctx.has(node, 2):
        af = ctx.op("sub", [af, ctx.op("cast", [ctx.input(node, 2)], to="f64")])
    if ctx.has(node, 3):
        bf = ctx.op("sub", [bf, ctx.op("cast", [ctx.input(node, 3)], to="f64")])
    y = ctx.op("matmul", [af, bf], transpose_a=False, transpose_b=False)
    return [ctx.op("cast", [y], to="i32")]


@onnx_op("QLinearMatMul", note="integer `matmul` (exact, in f64), requantised to the output")
def _qlinear_matmul(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a, sa, za = ctx.input(node, 0), ctx.input(node, 1), ctx.input(node, 2)
    b, sb, zb = ctx.input(node, 3), ctx.input(node, 4), ctx.input(node, 5)
    sy, zy = ctx.input(node, 6), ctx.input(node, 7)

    def shifted(v: Value, z: Value) -> Value:
        return ctx.op("sub", [ctx.op("cast", [v], to="f64"), ctx.op("cast", [z], to="f64")])

    acc = ctx.op("matmul", [shifted(a, za), shifted(b, zb)], transpose_a=False,
                 transpose_b=False)
    f64 = [ctx.op("cast", [s], to="f64") for s in (sa, sb, sy)]
    scale = ctx.op("div", [ctx.op("mul", [f64[0], f64[1]]), f64[2]])
    q = ctx.op("round", [ctx.op("mul", [acc, scale])])
    q = ctx.op("add", [q, ctx.op("cast", [zy], to="f64")])
    return [ctx.op("cast", [_saturate(ctx, q, zy.dtype)], to=zy.dtype)]
