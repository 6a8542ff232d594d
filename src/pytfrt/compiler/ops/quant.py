"""Catalogue family ``quant``: quantisation ops of the graph dialect (ONNX semantics).

* ``quantize_linear(x, scale, zero_point?) {axis, block_size, dtype}`` -- ``saturate(
  round_half_even(x / scale) + zero_point)``, result element type ``dtype`` (``ui8``, ``i8``,
  ``ui16``, ``i16``; the zero point, when given, has that type);
* ``dequantize_linear(q, scale, zero_point?) {axis, block_size}`` -- ``(q - zero_point) *
  scale`` in the scale's (floating) type;
* ``dynamic_quantize_linear(x)`` -- three results: ``x`` quantised to ``ui8`` with a scale
  (f32 scalar) and zero point (ui8 scalar) computed from its range, as ONNX's
  ``DynamicQuantizeLinear``;
* ``qglobal_avg_pool(q) {layout, x_scale, x_zero_point, y_scale, y_zero_point, dtype}`` --
  ``quantize(global_avg_pool(dequantize(q)))`` on u8/s8 codes (made by ``-tg-fold-quant``).

The scale (and zero point) is per tensor (a scalar or one element), per axis (1-D, one element
per index along ``axis``) or blocked (``block_size > 0``: the rank of ``x``, one element per
``block_size`` indices along ``axis``).  A float graph with quantize/dequantize pairs in it runs
as it is (these ops are ordinary kernels); ``-tg-fold-quant`` turns the pairs around
convolutions and matrix products into integer ops (``docs/compiler.md``, "Quantization").
Not differentiable.

Compute functions: :mod:`pytfrt.backends.cpu.quant`.  Filled at import, then read only.
"""

from __future__ import annotations

from typing import Any

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


# -- integer ops made by -tg-fold-quant -----------------------------------------------------


def _q_split(attrs: dict[str, Any], n: int) -> tuple[list[int], list[int]]:
    """qconv2d/qmatmul: prepared from (w, w_scale, bias?); run on (x, residual?)."""
    flags = attrs.get("epilogue_operands", (0, 0))
    prep, run = [1, 2], [0]
    if flags[0]:
        prep.append(3)
    if flags[1]:
        run.append(3 + flags[0])
    return prep, run


def _q_common(ctx: InferContext, cout: int | None) -> str:
    """Checks shared by qconv2d and qmatmul; returns the result type."""
    x, w, ws = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    a = ctx.attrs
    if x.dtype not in ("ui8", "i8") or x.dtype != a["x_dtype"]:
        raise ctx.error(f"the input must be ui8 or i8 (x_dtype {a['x_dtype']}), got {x.dtype}")
    if w.dtype != "i8":
        raise ctx.error(f"the weight must be i8, got {w.dtype}")
    if ws.dtype != "f32" or ws.rank not in (None, 0, 1):
        raise ctx.error(f"the weight scale must be a f32 scalar or vector, got {ws}")
    if cout is not None and ws.shape and ws.shape[0] not in (None, 1, cout):
        raise ctx.error(f"{ws.shape[0]} weight scales for {cout} output channels")
    flags = a["epilogue_operands"]
    if len(flags) != 2 or any(f not in (0, 1) for f in flags):
        raise ctx.error(f"epilogue_operands must be two 0/1 flags, got {list(flags)}")
    if len(ctx.inputs) != 3 + sum(flags):
        raise ctx.error(f"takes {3 + sum(flags)} operands with epilogue_operands = "
                        f"{list(flags)}, got {len(ctx.inputs)}")
    if flags[0] and ctx.inputs[3].dtype != "f32":
        raise ctx.error(f"the bias must be f32, got {ctx.inputs[3].dtype}")
    if a["dtype"] not in ("ui8", "i8", "f32"):
        raise ctx.error(f"the result must be ui8, i8 or f32, got {a['dtype']}")
    if a["dtype"] != "f32" and not a["y_scale"] > 0:
        raise ctx.error(f"y_scale must be positive, got {a['y_scale']}")
    if not a["x_scale"] > 0:
        raise ctx.error(f"x_scale must be positive, got {a['x_scale']}")
    if flags[1] and ctx.inputs[-1].dtype != a["dtype"]:
        raise ctx.error(f"the residual must be {a['dtype']}, got {ctx.inputs[-1].dtype}")
    return str(a["dtype"])


def _qconv2d(ctx: InferContext) -> list[TType]:
    from pytfrt.compiler.ops.nn import _conv2d

    x, w = ctx.inputs[0], ctx.inputs[1]
    a = ctx.attrs
    nhwc = a["layout"] == "NHWC"
    cout = None if w.shape is None else (w.shape[3] if nhwc else w.shape[0])
    dtype = _q_common(ctx, cout)
    conv_attrs = {k: a[k] for k in ("layout", "strides", "pads", "dilations", "groups")}
    sub = InferContext("qconv2d", [TType("f32", x.shape), TType("f32", w.shape)],
                       {**conv_attrs, "padding": "", "activation": "none", "alpha": 0.0,
                        "epilogue_operands": (0, 0)})
    (out,) = _conv2d(sub)
    return [TType(dtype, out.shape)]


def _qmatmul(ctx: InferContext) -> list[TType]:
    x, w = ctx.inputs[0], ctx.inputs[1]
    if w.rank not in (None, 2):
        raise ctx.error(f"the weight must be 2-D [K, N], got {w}")
    n = None if w.shape is None else w.shape[1]
    dtype = _q_common(ctx, n)
    if x.shape is None:
        return [TType(dtype, None)]
    k = None if w.shape is None else w.shape[0]
    if x.shape[-1] is not None and k is not None and x.shape[-1] != k:
        raise ctx.error(f"inner dimensions differ: {x} @ {w}")
    return [TType(dtype, (*x.shape[:-1], n))]


_Q_ATTRS = {
    "x_scale": AttrSpec("float"), "x_zero_point": AttrSpec("int", 0),
    "x_dtype": AttrSpec("dtype", "ui8"),
    "y_scale": AttrSpec("float", 0.0), "y_zero_point": AttrSpec("int", 0),
    "dtype": AttrSpec("dtype", "ui8"),
    "activation": AttrSpec("str", "none", implicit=True, choices=("none", "relu")),
    "alpha": AttrSpec("float", 0.0, implicit=True),
    "residual_scale": AttrSpec("float", 0.0, implicit=True),
    "residual_zero_point": AttrSpec("int", 0, implicit=True),
    "epilogue_operands": AttrSpec("ints", (0, 0), implicit=True),
}

define("qconv2d", ("x", "w", "w_scale", "extra*"), _qconv2d,
       {"layout": AttrSpec("str", choices=("NHWC", "NCHW")), "strides": AttrSpec("ints", (1, 1)),
        "pads": AttrSpec("ints", (0, 0, 0, 0)), "dilations": AttrSpec("ints", (1, 1)),
        "groups": AttrSpec("int", 1), **_Q_ATTRS,
        "inner_scale": AttrSpec("float", 0.0, implicit=True),
        "inner_zero_point": AttrSpec("int", 0, implicit=True)},
       family="quant", doc="int8 convolution with requantisation (made by -tg-fold-quant)",
       differentiable=False, prepare="qconv2d.prepare", prepare_operands=_q_split)
define("qmatmul", ("x", "w", "w_scale", "extra*"), _qmatmul, dict(_Q_ATTRS),
       family="quant", doc="int8 matrix product with requantisation (made by -tg-fold-quant)",
       differentiable=False, prepare="qmatmul.prepare", prepare_operands=_q_split)


def _qglobal_avg_pool(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    a = ctx.attrs
    if x.dtype not in ("ui8", "i8"):
        raise ctx.error(f"the input must be ui8 or i8, got {x.dtype}")
    if a["dtype"] not in ("ui8", "i8"):
        raise ctx.error(f"the result must be ui8 or i8, got {a['dtype']}")
    if not (a["x_scale"] > 0 and a["y_scale"] > 0):
        raise ctx.error(f"scales must be positive, got {a['x_scale']} and {a['y_scale']}")
    if x.rank not in (None, 4):
        raise ctx.error(f"the input must have rank 4, got {x}")
    if x.shape is None:
        return [TType(a["dtype"], None)]
    n = x.shape[0]
    shape = (n, 1, 1, x.shape[3]) if a["layout"] == "NHWC" else (n, x.shape[1], 1, 1)
    return [TType(a["dtype"], shape)]


define("qglobal_avg_pool", ("x",), _qglobal_avg_pool,
       {"layout": AttrSpec("str", choices=("NHWC", "NCHW")),
        "x_scale": AttrSpec("float"), "x_zero_point": AttrSpec("int", 0),
        "y_scale": AttrSpec("float"), "y_zero_point": AttrSpec("int", 0),
        "dtype": AttrSpec("dtype", "ui8")},
       family="quant", doc="quantized global average pool (made by -tg-fold-quant)",
       differentiable=False)
