"""Catalogue family ``quant``: quantisation ops of the graph dialect (ONNX semantics).

* ``quantize_linear(x, scale, zero_point?) {axis, block_size, dtype}`` -- ``saturate(
  round_half_even(x / scale) + zero_point)``, result element type ``dtype`` (``ui8``, ``i8``,
  ``ui16``, ``i16``; the zero point, when given, has that type);
* ``dequantize_linear(q, scale, zero_point?) {axis, block_size}`` -- ``(q - zero_point) *
  scale`` in the scale's (floating) type;
* ``dynamic_quantize_linear(x)`` -- three results: ``x`` quantised to ``ui8`` with a scale
  (f32 scalar) and zero point (ui8 scalar) computed from its range, as ONNX's
  ``DynamicQuantizeLinear``.

The scale (and zero point) is per tensor (a scalar or one element), per axis (1-D, one element
per index along ``axis``) or blocked (``block_size > 0``: the rank of ``x``, one element per
``block_size`` indices along ``axis``).  A float graph with quantize/dequantize pairs in it runs
as it is (these ops are ordinary kernels); ``-tg-fold-quant`` turns the pairs around
convolutions and matrix products into integer ops (``docs/compiler.md``, "Quantization").
Not differentiable.

Compute functions: :mod:`pytfrt.backends.cpu.quant`.  Filled at import, then read only.
"""

from __future__ import annotations

from pytfrt.compiler.ops.base import AttrSpec, InferContext, define, norm_axis
from pytfrt.compiler.types import FLOAT_DTYPES, TType

QUANT_DTYPES = ("ui8", "i8", "ui16", "i16")
"""Element types a ``quantize_linear`` may produce."""
DEQUANT_DTYPES = frozenset({"ui8", "i8", "ui16", "i16", "i32"})
"""Element types a ``dequantize_linear`` accepts."""


def _check_param(ctx: InferContext, i: int, x: TType, what: str) -> None:
    """Operand ``i`` (a scale or zero point) must be per tensor, per axis or blocked."""
    p = ctx.inputs[i]
    if p.shape is None or x.shape is None:
        return
    if len(p.shape) == 0 or (len(p.shape) == 1 and p.shape[0] == 1):
        return
    axis = norm_axis(ctx, ctx.attrs["axis"], x.rank)
    dim = x.shape[axis]
    block = ctx.attrs["block_size"]
    if block > 0:
        want = list(x.shape)
        want[axis] = None if dim is None else -(-dim // block)
        ok = len(p.shape) == len(want) and all(
            a is None or b is None or a == b for a, b in zip(p.shape, want, strict=True))
        if not ok:
            raise ctx.error(f"blocked {what} {p} does not fit {x} with block size {block}")
        return
    if len(p.shape) != 1 or (dim is not None and p.shape[0] is not None and p.shape[0] != dim):
        raise ctx.error(f"{what} {p} is neither per tensor nor per axis {axis} of {x}")


def _quantize(ctx: InferContext) -> list[TType]:
    x, scale = ctx.inputs[0], ctx.inputs[1]
    out = ctx.attrs["dtype"]
    if out not in QUANT_DTYPES:
        raise ctx.error(f"cannot quantise to {out} (supported: {', '.join(QUANT_DTYPES)})")
    if x.dtype not in FLOAT_DTYPES and x.dtype != "i32":
        raise ctx.error(f"the input must be floating point or i32, got {x.dtype}")
    if scale.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"the scale must be floating point, got {scale.dtype}")
    _check_param(ctx, 1, x, "scale")
    if len(ctx.inputs) > 2:
        if ctx.inputs[2].dtype != out:
            raise ctx.error(f"the zero point is {ctx.inputs[2].dtype}, the result {out}")
        _check_param(ctx, 2, x, "zero point")
    return [TType(out, x.shape)]


def _dequantize(ctx: InferContext) -> list[TType]:
    q, scale = ctx.inputs[0], ctx.inputs[1]
    if q.dtype not in DEQUANT_DTYPES:
        raise ctx.error(f"cannot dequantise {q.dtype} (supported: "
                        f"{', '.join(sorted(DEQUANT_DTYPES))})")
    if scale.dtype not in FLOAT_DTYPES:
        raise ctx.error(f"the scale must be floating point, got {scale.dtype}")
    _check_param(ctx, 1, q, "scale")
    if len(ctx.inputs) > 2:
        if ctx.inputs[2].dtype != q.dtype:
            raise ctx.error(f"the zero point is {ctx.inputs[2].dtype}, the input {q.dtype}")
        _check_param(ctx, 2, q, "zero point")
    return [TType(scale.dtype, q.shape)]


def _dynamic(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype != "f32":
        raise ctx.error(f"the input must be f32, got {x.dtype}")
    return [TType("ui8", x.shape), TType("f32", ()), TType("ui8", ())]


_AXIS = {"axis": AttrSpec("int", 1), "block_size": AttrSpec("int", 0)}

define("quantize_linear", ("x", "scale", "zero_point?"), _quantize,
       {**_AXIS, "dtype": AttrSpec("dtype", "ui8")}, family="quant",
       doc="ONNX QuantizeLinear", differentiable=False)
define("dequantize_linear", ("q", "scale", "zero_point?"), _dequantize, dict(_AXIS),
       family="quant", doc="ONNX DequantizeLinear", differentiable=False)
define("dynamic_quantize_linear", ("x",), _dynamic, family="quant", num_results=3,
       doc="ONNX DynamicQuantizeLinear (y, y_scale, y_zero_point)", differentiable=False)
