"""Compute functions of ``qmatmul_dynamic`` (``pytfrt.compiler.ops.quant_dynamic``): a float
input quantized per call to u8, times a prepared s8 weight.

With ``s, z`` the input's dynamic scale and zero point (ONNX ``DynamicQuantizeLinear``,
:func:`pytfrt.backends.cpu.quant.dynamic_quantize_linear`) and ``ws`` the weight's column
scales::

    y = s * ws * sum_k (xq - z) * w  + bias
      = s * (ws * sum_k xq * w  -  z * ws * colsum(w))  + bias

The first product is oneDNN's u8 x s8 matmul with fixed parameters (input scale 1, zero point
0, the weight scales, float32 result), so one primitive serves every call whatever ``s`` and
``z``; ``ws * colsum(w)`` is computed at load time.  After the product is scaled by ``s``, the
zero point's term (``-s * z * ws * colsum(w)``, one value per column), the bias and the
activation (``act``, e.g. a transformer's GELU) are one compiled pass over the result
(:func:`pytfrt.backends.cpu._epilogue.epilogue_2d`).  Without oneDNN (or for a shape it refuses)
the exact integer product runs in NumPy.  The plan is read-only after load: thread-safe.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError
from pytfrt.backends.cpu.quant import dynamic_quantize_linear

GRAPH_OPS = OpTable()


class DynamicPlan:
    """The load-time part of a ``qmatmul_dynamic``: s8 weight ``[K, N]``, column scales,
    ``ws * colsum(w)``, bias, and the oneDNN product (``None``: oneDNN absent)."""

    def __init__(self, w: np.ndarray, w_scale: np.ndarray, bias: np.ndarray | None,
                 activation: str = "none", alpha: float = 0.0) -> None:
        from pytfrt.backends.cpu import _dnnl_int8
        from pytfrt.backends.cpu._epilogue import activation_code

        self.act = activation_code("qmatmul_dynamic", activation)
        self.alpha = float(alpha)

        k, n = w.shape
        ws = np.asarray(w_scale, np.float32).reshape(-1)
        if ws.size == 1:
            ws = np.full(n, ws[0], np.float32)
        if ws.size != n:
            raise OpError(f"qmatmul_dynamic: {ws.size} weight scales for {n} columns")
        self.w = np.ascontiguousarray(w, np.int8)
        self.w_scale = ws
        self.wsum = (ws.astype(np.float64) * self.w.sum(axis=0, dtype=np.int64)).astype(
            np.float32)
        self.bias = None if bias is None else np.asarray(bias, np.float32).reshape(n)
        lib = _dnnl_int8.library()
        self.dnnl: Any = None
        if lib is not None:
            q = _dnnl_int8.QuantParams(x_scale=1.0, x_zero_point=0, w_scale=ws, bias=None,
                                       y_scale=0.0, y_zero_point=0, out_dtype=np.dtype(np.float32))
            self.dnnl = _dnnl_int8.Int8MatMul(lib, self.w, q, np.dtype(np.uint8))


@GRAPH_OPS.op("qmatmul_dynamic.prepare")
def qmatmul_dynamic_prepare(w: np.ndarray, w_scale: np.ndarray, *bias: np.ndarray,
                            epilogue_operands: tuple[int, ...], activation: str = "none",
                            alpha: float = 0.0) -> DynamicPlan:
    """The weight-dependent plan (s8 ``[K, N]`` weight, scales, bias?, activation)."""
    return DynamicPlan(w, w_scale, bias[0] if epilogue_operands[0] and bias else None,
                       activation, alpha)


qmatmul_dynamic_prepare.opaque_result = True  # type: ignore[attr-defined]


@GRAPH_OPS.op("qmatmul_dynamic")
def qmatmul_dynamic(x: np.ndarray, plan: DynamicPlan, *,
                    out: np.ndarray | None = None) -> np.ndarray:
    """``x [..., K]`` quantized per call, times the plan's weight (see the module docstring).

    Raises:
        OpError: a NaN or infinite input (no scale exists), a non-float32 input.
    """
    if x.dtype != np.float32:
        raise OpError(f"qmatmul_dynamic: the input must be float32, got {x.dtype}")
    k, n = plan.w.shape
    lead = x.shape[:-1]
    xq, s, z = dynamic_quantize_linear(x)
    x2 = np.ascontiguousarray(xq.reshape(-1, k))
    d = plan.dnnl
    if d is not None and x2.shape[0] > 0 and d.ready(x2.shape):
        y = np.empty((x2.shape[0], n), np.float32)
        d.run(x2, y)
        y *= np.float32(s)
        # the zero point's term joins the bias: one pass over y for it, the bias and act
        shift = (np.float32(-np.float32(s) * np.float32(z)) * plan.wsum).astype(np.float32)
        bias = shift if plan.bias is None else shift + plan.bias
    else:
        acc = (x2.astype(np.float64) - float(z)) @ plan.w.astype(np.float64)
        y = (acc * (float(s) * plan.w_scale.astype(np.float64))).astype(np.float32)
        bias = plan.bias
    if bias is not None or plan.act:
        from pytfrt.backends.cpu._epilogue import epilogue_2d

        epilogue_2d(y, bias, None, plan.act, plan.alpha)
    return y.reshape(*lead, n)


qmatmul_dynamic.opaque_operands = frozenset({1})  # type: ignore[attr-defined]
