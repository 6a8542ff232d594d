"""Catalogue family ``quant_dynamic``: the dynamically quantized matrix product that
``pytfrt.quantize(..., method="dynamic")`` emits.

``qmatmul_dynamic(x, w, w_scale, bias?) {epilogue_operands, activation, alpha}`` -- ``x [..., K]``
(f32) quantized
per call to u8 as ``dynamic_quantize_linear`` does (ONNX's ``DynamicQuantizeLinear``: the range
``[min(0, min x), max(0, max x)]`` over 255 steps), times the s8 weight ``w [K, N]`` with its
per-column (or single) scale ``w_scale``, plus an optional f32 bias ``[N]``:
``act(dequantize_linear(dynamic_quantize_linear(x)) @ dequantize_linear(w, w_scale) + bias)``
(``act``: an epilogue activation, ``docs/kernels.md``; a transformer's GELU), computed as an
integer product (oneDNN) scaled afterwards.  The result is f32 ``[..., N]``.
The weight, scales and bias are prepared at load time (``qmatmul_dynamic.prepare``).
Compute functions: :mod:`pytfrt.backends.cpu.quant_dynamic`.  Not differentiable.
"""

from __future__ import annotations

from typing import Any

from pytfrt.compiler.ops.base import AttrSpec, InferContext, define
from pytfrt.compiler.ops.nn import ACTIVATIONS
from pytfrt.compiler.types import TType


def _split(attrs: dict[str, Any], n: int) -> tuple[list[int], list[int]]:
    """Prepared from (w, w_scale, bias?); run on x."""
    return ([1, 2, 3] if attrs.get("epilogue_operands", (0, 0))[0] else [1, 2]), [0]


def _infer(ctx: InferContext) -> list[TType]:
    x, w, ws = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    flags = ctx.attrs["epilogue_operands"]
    if x.dtype != "f32":
        raise ctx.error(f"the input must be f32, got {x.dtype}")
    if w.dtype != "i8" or w.rank not in (None, 2):
        raise ctx.error(f"the weight must be a 2-D i8 [K, N], got {w}")
    if ws.dtype != "f32" or ws.rank not in (None, 0, 1):
        raise ctx.error(f"the weight scale must be a f32 scalar or vector, got {ws}")
    if tuple(flags) not in ((0, 0), (1, 0)) or len(ctx.inputs) != 3 + flags[0]:
        raise ctx.error(f"epilogue_operands {list(flags)} (bias only) does not match "
                        f"{len(ctx.inputs)} operands")
    if flags[0] and ctx.inputs[3].dtype != "f32":
        raise ctx.error(f"the bias must be f32, got {ctx.inputs[3].dtype}")
    n = None if w.shape is None else w.shape[1]
    if x.shape is None:
        return [TType("f32", None)]
    k = None if w.shape is None else w.shape[0]
    if x.rank == 0 or (x.shape[-1] is not None and k is not None and x.shape[-1] != k):
        raise ctx.error(f"inner dimensions differ: {x} @ {w}")
    return [TType("f32", (*x.shape[:-1], n))]


define("qmatmul_dynamic", ("x", "w", "w_scale", "bias?"), _infer,
       {"epilogue_operands": AttrSpec("ints", (0, 0)),
        "activation": AttrSpec("str", "none", implicit=True, choices=ACTIVATIONS),
        "alpha": AttrSpec("float", 0.0, implicit=True)}, family="quant_dynamic",
       doc="dynamically quantized u8 x s8 matrix product (pytfrt.quantize, method='dynamic')",
       differentiable=False, prepare="qmatmul_dynamic.prepare", prepare_operands=_split)
