"""Compute functions of the quantisation ops (catalogue family ``quant``,
:mod:`pytfrt.compiler.ops.quant`): ONNX's ``QuantizeLinear``, ``DequantizeLinear`` and
``DynamicQuantizeLinear`` semantics, in NumPy.

* ``quantize_linear(x, scale, zero_point?)``: ``saturate(round(x / scale) + zero_point)``,
  rounding half to even, saturating to the result type's range;
* ``dequantize_linear(q, scale, zero_point?)``: ``(q - zero_point) * scale``;
* ``dynamic_quantize_linear(x)``: u8 quantisation with the scale and zero point computed from
  ``x``'s range (which always includes 0), the three results of ONNX's op;
* ``qglobal_avg_pool(q)``: the mean of u8/s8 codes over H and W, requantized (the integer ops
  made by ``-tg-fold-quant`` follow).

A scale (and its zero point) is per tensor (a scalar or one element), per axis (1-D, one per
index along ``axis``) or blocked (``block_size > 0``: the rank of ``x``, each element covering
``block_size`` consecutive indices along ``axis``).  Floating inputs are computed in float32
(float64 for float64 and integer inputs), as ONNX's reference does.

Operands positional, attributes keyword-only, new arrays returned (operands are never
written), :class:`~pytfrt.backends.cpu.ops.OpError` for bad data.  Pure functions: thread-safe.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function."""


def broadcast_param(p: np.ndarray, x_shape: tuple[int, ...], axis: int,
                    block_size: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast against ``x_shape`` (see the module
    docstring for the three forms).

    Raises:
        OpError: if ``p``'s shape fits none of them.
    """
    p = np.asarray(p)
    if p.size == 1 and p.ndim <= 1:
        return p.reshape(())
    rank = len(x_shape)
    if rank == 0:
        raise OpError(f"a scale of shape {list(p.shape)} for a scalar input")
    ax = axis % rank if -rank <= axis < rank else None
    if ax is None:
        raise OpError(f"axis {axis} is out of range for rank {rank}")
    dim = x_shape[ax]
    if block_size > 0:
        want = list(x_shape)
        want[ax] = -(-dim // block_size)
        if list(p.shape) != want:
            raise OpError(f"blocked scale of shape {list(p.shape)} for input {list(x_shape)}"
                          f" and block size {block_size} (expected {want})")
        return np.take(np.repeat(p, block_size, axis=ax), np.arange(dim), axis=ax)
    if p.ndim != 1 or p.shape[0] != dim:
        raise OpError(f"per-axis scale of shape {list(p.shape)} for axis {ax} of input "
                      f"{list(x_shape)} (expected [{dim}])")
    shape = [1] * rank
    shape[ax] = dim
    return p.reshape(shape)


def _work_type(x: np.ndarray) -> type[np.floating]:
    return np.float64 if x.dtype == np.float64 or x.dtype.kind in "iu" else np.float32


def saturate(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``v`` (already rounded) clamped to ``dtype``'s range and converted."""
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


@numba.njit(nogil=True, cache=True)
def _quantize_flat(x, scale, zp, lo, hi, y):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``y[i] = clip(rint(x[i] / scale) + zp, lo, hi)`` computed in float32, as NumPy's path
    (round half to even)."""
    for i in range(x.shape[0]):
        v = np.rint(x[i] / scale) + zp
        y[i] = min(max(v, lo), hi)


_FAST_QUANT = (np.dtype(np.uint8), np.dtype(np.int8))
"""Result types of :func:`quantize_linear`'s compiled per-tensor float32 path (one pass
instead of NumPy's five: the quantization of an int8 model's input)."""


@GRAPH_OPS.op("quantize_linear")
def quantize_linear(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None, *,
                    axis: int, block_size: int, dtype: str) -> np.ndarray:
    """``saturate(round_half_even(x / scale) + zero_point)`` as ``dtype`` (see the module)."""
    from pytfrt.tensor.dtype import np_dtype

    out = np_dtype(dtype)
    if (x.dtype == np.float32 and out in _FAST_QUANT and np.size(scale) == 1
            and (zero_point is None or np.size(zero_point) == 1)):
        s1 = np.float32(np.asarray(scale).reshape(()))
        zp = np.float32(0 if zero_point is None else np.asarray(zero_point).reshape(()))
        info = np.iinfo(out)
        y = np.empty(x.shape, out)
        _quantize_flat(np.ascontiguousarray(x).reshape(-1), s1, zp,
                       np.float32(info.min), np.float32(info.max), y.reshape(-1))
        return y
    work = _work_type(x)
    s = broadcast_param(scale, x.shape, axis, block_size).astype(work)
    q = np.rint(np.asarray(x).astype(work) / s)
    if zero_point is not None:
        q = q + broadcast_param(zero_point, x.shape, axis, block_size).astype(work)
    return saturate(q, out)


@GRAPH_OPS.op("dequantize_linear")
def dequantize_linear(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None,
                      *, axis: int, block_size: int) -> np.ndarray:
    """``(q - zero_point) * scale`` in the scale's type (see the module)."""
    s = broadcast_param(scale, q.shape, axis, block_size)
    work = np.float64 if s.dtype == np.float64 else np.float32
    v = np.asarray(q).astype(work)
    if zero_point is not None:
        v = v - broadcast_param(zero_point, q.shape, axis, block_size).astype(work)
    return np.asarray(v * s.astype(work)).astype(s.dtype)


def dynamic_params(x: np.ndarray) -> tuple[np.float32, np.uint8]:
    """ONNX ``DynamicQuantizeLinear``'s u8 scale and zero point for ``x``: the range
    ``[min(0, min x), max(0, max x)]`` over 255 steps (an empty or all-zero input gives scale
    1, zero point 0, as ONNX Runtime).

    Raises:
        OpError: for NaN or infinite elements (no finite scale exists).
    """
    if x.size == 0:
        return np.float32(1.0), np.uint8(0)
    mn, mx = float(np.min(x)), float(np.max(x))
    if not (np.isfinite(mn) and np.isfinite(mx)):
        raise OpError("dynamic_quantize_linear: the input holds NaN or infinity")
    lo, hi = min(0.0, mn), max(0.0, mx)
    scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255.0))
    if scale == 0:
        return np.float32(1.0), np.uint8(0)
    zp = np.clip(np.rint(np.float32(0.0) - np.float32(lo) / scale), 0, 255)
    return scale, np.uint8(zp)


@GRAPH_OPS.op("dynamic_quantize_linear")
def dynamic_quantize_linear(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y u8, y_scale f32 scalar, y_zero_point u8 scalar)``, as ONNX's op (a float32 input:
    NumPy's min and max, then one compiled pass instead of NumPy's five: BERT's 128 x 3072
    activations 0.72 -> 0.16 ms)."""
    scale, zp = dynamic_params(x)
    if x.dtype == np.float32:
        y = np.empty(x.shape, np.uint8)
        _quantize_flat(np.ascontiguousarray(x).reshape(-1), scale, np.float32(zp),
                       np.float32(0), np.float32(255), y.reshape(-1))
    else:
        y = saturate(np.rint(x.astype(np.float32) / scale) + np.float32(zp),
                     np.dtype(np.uint8))
    return y, np.asarray(scale, np.float32), np.asarray(zp, np.uint8)


# -- integer convolution and matrix product (made by -tg-fold-quant) ------------------------


class QPlan:
    """The load-time plan of a ``qconv2d`` / ``qmatmul``: its s8 weight, quantisation
    (:class:`pytfrt.backends.cpu._dnnl_int8.QuantParams`), attributes, and the oneDNN runner
    (``None``: oneDNN absent; per input shape oneDNN may still refuse, then the NumPy
    reference runs).  Read-only after construction: thread-safe."""

    def __init__(self, kind: str, w: np.ndarray, q: Any, attrs: dict[str, Any],
                 x_dtype: str) -> None:
        from pytfrt.backends.cpu import _dnnl_int8
        from pytfrt.tensor.dtype import np_dtype

        self.kind = kind
        self.w = w
        self.q = q
        self.attrs = attrs
        self.x_dtype = np_dtype(x_dtype)
        lib = _dnnl_int8.library()
        self.dnnl: Any = None
        if lib is not None and self.x_dtype in (np.uint8, np.int8):
            if kind == "conv":
                self.dnnl = _dnnl_int8.Int8Conv(lib, w, q, attrs, self.x_dtype)
            else:
                self.dnnl = _dnnl_int8.Int8MatMul(lib, w, q, self.x_dtype)


def _params(w_scale: np.ndarray, bias: np.ndarray | None, cout: int, *, x_scale: float,
            x_zero_point: int, y_scale: float, y_zero_point: int, dtype: str,
            activation: str, alpha: float, residual_scale: float,
            residual_zero_point: int, has_residual: bool, inner_scale: float = 0.0,
            inner_zero_point: int = 0) -> Any:
    from pytfrt.backends.cpu._dnnl_int8 import QuantParams
    from pytfrt.tensor.dtype import np_dtype

    ws = np.asarray(w_scale, np.float32).reshape(-1)
    if ws.size == 1:
        ws = np.full(cout, ws[0], np.float32)
    if ws.size != cout:
        raise OpError(f"{ws.size} weight scales for {cout} output channels")
    return QuantParams(
        x_scale=x_scale, x_zero_point=x_zero_point, w_scale=ws, bias=bias, y_scale=y_scale,
        y_zero_point=y_zero_point, out_dtype=np_dtype(dtype), activation=activation,
        alpha=alpha, residual_scale=residual_scale if has_residual else None,
        residual_zero_point=residual_zero_point,
        inner_scale=inner_scale if inner_scale > 0 else None, inner_zero_point=inner_zero_point)


def _requantize(acc: np.ndarray, q: Any, residual: np.ndarray | None) -> np.ndarray:
    """The float epilogue of the NumPy reference (the module docstring of ``_dnnl_int8``):
    ``acc`` (float64, exact integers, channels last) to the result type."""
    from pytfrt.backends.cpu.activations import apply_activation

    real = (acc * (np.float64(q.x_scale) * q.w_scale.astype(np.float64))).astype(np.float32)
    if q.bias is not None:
        real += q.bias
    if q.inner_scale is not None:
        info = np.iinfo(q.out_dtype)
        s, z = np.float32(q.inner_scale), q.inner_zero_point
        real = np.clip(np.rint(real / s), info.min - z, info.max - z).astype(np.float32) * s
    if residual is not None:
        real += np.float32(q.residual_scale) * (residual.astype(np.float32)
                                               - np.float32(q.residual_zero_point))
    if q.activation != "none":
        real = apply_activation(real, q.activation, q.alpha)
    if q.out_dtype == np.float32:
        return real
    return saturate(np.rint(real / np.float32(q.y_scale)) + np.float32(q.y_zero_point),
                    q.out_dtype)


def reference_conv_acc(x: np.ndarray, w: np.ndarray, x_zero_point: int, *,
                       strides: tuple[int, ...], dilations: tuple[int, ...],
                       pads: tuple[int, ...], groups: int) -> np.ndarray:
    """The exact integer accumulator ``sum (x - x_zero_point) * w`` of an NHWC convolution
    with an HWIO filter, as float64 (exact below 2**53), NHWC."""
    n, h, wd, cin = x.shape
    kh, kw, cig, cout = w.shape
    sh, sw = strides
    dh, dw = dilations
    pt, pb, pl, pr = pads
    xi = np.zeros((n, h + pt + pb, wd + pl + pr, cin), np.float64)
    xi[:, pt:pt + h, pl:pl + wd, :] = x.astype(np.float64) - x_zero_point
    oh = (h + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
    cog = cout // groups
    wg = w.astype(np.float64).reshape(kh, kw, cig, groups, cog)
    acc = np.zeros((n, oh, ow, groups, cog), np.float64)
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dh, j * dw
            patch = xi[:, r0:r0 + sh * (oh - 1) + 1:sh, c0:c0 + sw * (ow - 1) + 1:sw]
            acc += np.einsum("nhwgc,cgo->nhwgo", patch.reshape(n, oh, ow, groups, cig),
                             wg[i, j])
    return acc.reshape(n, oh, ow, cout)


@GRAPH_OPS.op("qconv2d.prepare")
def qconv2d_prepare(w: np.ndarray, w_scale: np.ndarray, *extra: np.ndarray, layout: str,
                    strides: tuple[int, ...], pads: tuple[int, ...],
                    dilations: tuple[int, ...], groups: int, x_scale: float,
                    x_zero_point: int, x_dtype: str, y_scale: float, y_zero_point: int,
                    dtype: str, activation: str, alpha: float, residual_scale: float,
                    residual_zero_point: int, epilogue_operands: tuple[int, ...],
                    inner_scale: float = 0.0, inner_zero_point: int = 0) -> QPlan:
    """The weight-dependent plan of a ``qconv2d`` (s8 filter, weight scales, bias?)."""
    bias = extra[0] if epilogue_operands[0] and extra else None
    cout = w.shape[3] if layout == "NHWC" else w.shape[0]
    q = _params(w_scale, bias, cout, x_scale=x_scale, x_zero_point=x_zero_point,
                y_scale=y_scale, y_zero_point=y_zero_point, dtype=dtype, activation=activation,
                alpha=alpha, residual_scale=residual_scale,
                residual_zero_point=residual_zero_point, has_residual=bool(epilogue_operands[1]),
                inner_scale=inner_scale, inner_zero_point=inner_zero_point)
    attrs = dict(layout=layout, strides=tuple(strides), pads=tuple(pads),
                 dilations=tuple(dilations), groups=groups)
    return QPlan("conv", w, q, attrs, x_dtype)


qconv2d_prepare.opaque_result = True  # type: ignore[attr-defined]


@GRAPH_OPS.op("qconv2d")
def qconv2d(x: np.ndarray, plan: QPlan, *residual: np.ndarray,
            out: np.ndarray | None = None) -> np.ndarray:
    """The quantised convolution of a plan (oneDNN, or the NumPy reference)."""
    q, a = plan.q, plan.attrs
    r = residual[0] if residual else None
    if x.dtype != plan.x_dtype:
        raise OpError(f"qconv2d: input is {x.dtype}, the plan wants {plan.x_dtype}")
    d = plan.dnnl
    if d is not None and x.ndim == 4 and d.ready(x.shape):
        shape = d.out_shape(x.shape)
        y = out if out is not None and out.shape == shape and out.dtype == q.out_dtype \
            and out.flags.c_contiguous else np.empty(shape, q.out_dtype)
        if r is not None and not (r.flags.c_contiguous and r.ctypes.data == y.ctypes.data):
            np.copyto(y, r)  # (the buffer plan may give the result the residual's buffer)
        d.run(np.ascontiguousarray(x), y)
        return y
    nhwc = a["layout"] == "NHWC"
    xx = x if nhwc else x.transpose(0, 2, 3, 1)
    w = plan.w if nhwc else plan.w.transpose(2, 3, 1, 0)
    acc = reference_conv_acc(xx, w, q.x_zero_point, strides=a["strides"],
                             dilations=a["dilations"], pads=a["pads"], groups=a["groups"])
    rr = None if r is None else (r if nhwc else r.transpose(0, 2, 3, 1))
    y = _requantize(acc, q, rr)
    return y if nhwc else np.ascontiguousarray(y.transpose(0, 3, 1, 2))


qconv2d.opaque_operands = frozenset({1})  # type: ignore[attr-defined]


@GRAPH_OPS.op("qmatmul.prepare")
def qmatmul_prepare(w: np.ndarray, w_scale: np.ndarray, *extra: np.ndarray, x_scale: float,
                    x_zero_point: int, x_dtype: str, y_scale: float, y_zero_point: int,
                    dtype: str, activation: str, alpha: float, residual_scale: float,
                    residual_zero_point: int, epilogue_operands: tuple[int, ...]) -> QPlan:
    """The weight-dependent plan of a ``qmatmul`` (s8 ``[K, N]`` weight, scales, bias?)."""
    bias = extra[0] if epilogue_operands[0] and extra else None
    q = _params(w_scale, bias, w.shape[1], x_scale=x_scale, x_zero_point=x_zero_point,
                y_scale=y_scale, y_zero_point=y_zero_point, dtype=dtype, activation=activation,
                alpha=alpha, residual_scale=residual_scale,
                residual_zero_point=residual_zero_point, has_residual=bool(epilogue_operands[1]))
    return QPlan("matmul", w, q, {}, x_dtype)


qmatmul_prepare.opaque_result = True  # type: ignore[attr-defined]


@GRAPH_OPS.op("qmatmul")
def qmatmul(x: np.ndarray, plan: QPlan, *residual: np.ndarray,
            out: np.ndarray | None = None) -> np.ndarray:
    """The quantised product ``x [..., K] @ w [K, N]`` of a plan (oneDNN, or NumPy)."""
    q = plan.q
    r = residual[0] if residual else None
    if x.dtype != plan.x_dtype:
        raise OpError(f"qmatmul: input is {x.dtype}, the plan wants {plan.x_dtype}")
    k, n = plan.w.shape
    lead = x.shape[:-1]
    x2 = np.ascontiguousarray(x.reshape(-1, k))
    d = plan.dnnl
    if d is not None and x2.shape[0] > 0 and d.ready(x2.shape):
        y = np.empty((x2.shape[0], n), q.out_dtype)
        if r is not None:
            np.copyto(y, r.reshape(-1, n))
        d.run(x2, y)
        return y.reshape(*lead, n)
    acc = (x2.astype(np.float64) - q.x_zero_point) @ plan.w.astype(np.float64)
    y = _requantize(acc, q, None if r is None else r.reshape(-1, n))
    return y.reshape(*lead, n)


qmatmul.opaque_operands = frozenset({1})  # type: ignore[attr-defined]


@numba.njit(nogil=True, cache=True)
def _code_sums(x, nhwc, acc):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``acc[n, c]`` = the int64 sum over pixels of ``x``: ``(N, P, C)`` if ``nhwc`` else
    ``(N, C, P)``."""
    for b in range(x.shape[0]):
        if nhwc:
            for p in range(x.shape[1]):
                for c in range(x.shape[2]):
                    acc[b, c] += x[b, p, c]
        else:
            for c in range(x.shape[1]):
                t = 0
                for p in range(x.shape[2]):
                    t += x[b, c, p]
                acc[b, c] = t


@GRAPH_OPS.op("qglobal_avg_pool")
def qglobal_avg_pool(x: np.ndarray, *, layout: str, x_scale: float, x_zero_point: int,
                     y_scale: float, y_zero_point: int, dtype: str) -> np.ndarray:
    """``quantize(mean_HW(dequantize(x, x_scale, x_zero_point)), y_scale, y_zero_point)``:
    the mean of the codes (exact integer sums, the scale applied once, in float64) rounded half
    to even in float32 as ``quantize_linear`` does (the unfused ops' float sums of rounded
    products can differ from it by one step at an exact tie)."""
    from pytfrt.tensor.dtype import np_dtype

    if x.ndim != 4 or x.dtype not in _FAST_QUANT:
        raise OpError(f"qglobal_avg_pool: needs a rank-4 u8/s8 input, got {x.dtype} "
                      f"{list(x.shape)}")
    nhwc = layout == "NHWC"
    n, c = x.shape[0], x.shape[3] if nhwc else x.shape[1]
    pixels = x.shape[1] * x.shape[2] if nhwc else x.shape[2] * x.shape[3]
    if pixels == 0:
        raise OpError(f"qglobal_avg_pool: input {list(x.shape)} has no pixels")
    xc = np.ascontiguousarray(x)
    acc = np.zeros((n, c), np.int64)
    _code_sums(xc.reshape((n, -1, c) if nhwc else (n, c, -1)), nhwc, acc)
    mean = ((acc - np.int64(pixels) * x_zero_point) * (float(x_scale) / pixels)).astype(
        np.float32)
    y = saturate(np.rint(mean / np.float32(y_scale)) + np.float32(y_zero_point),
                 np_dtype(dtype))
    return y.reshape((n, 1, 1, c) if nhwc else (n, c, 1, 1))
