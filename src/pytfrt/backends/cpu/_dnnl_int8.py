"""int8 convolution and matrix product through oneDNN's primitives (C API, via ctypes).

Private helper of :mod:`pytfrt.backends.cpu.quant` (the ``qconv2d`` / ``qmatmul`` kernels).
It reuses :mod:`pytfrt.backends.cpu._dnnl_conv`'s library binding, primitive holder
(:class:`~pytfrt.backends.cpu._dnnl_conv._Prim`), threading and job runner: read that module's
docstring for the threading model (single-threaded primitives on the calling thread; a large
convolution split by batch, output rows or -- small images at batch 1, as the float
convolution -- output channels into parts that :mod:`_spin_pool` runs on pytfrt's own
threads).

What a primitive computes (oneDNN 3's quantisation model, all in float32 after the integer
accumulation)::

    acc  = sum (x - x_zero_point) * w                        (u8/s8 x, s8 w, s32 accumulator)
    real = acc * x_scale * w_scale[c] + bias[c]              (per-output-channel weight scales)
         [real = dequantize(quantize(real, inner_scale, inner_zero_point))]  (eltwise post-ops:
                                                             the conv's own requantization)
         [+ residual_scale * (residual - residual_zero_point)]   (``sum`` post-op)
    real = activation(real)                                  (``eltwise`` post-op: relu ...)
    y    = saturate(round_half_even(real / y_scale) + y_zero_point)   (u8/s8 result)
    or y = real                                              (f32 result)

With an inner requantization the primitive works in units of ``inner_scale`` instead (every
scale divided by it: weight scales, bias, the ``sum`` scale, the result scale; a ReLU commutes
with a positive scale), so the requantization is two eltwise post-ops (round, clip to the
codes' range less the zero point) rather than four (a scale, round, clip, a scale back): measured
on the 1x1 residual convolutions of ResNet-50 at batch 1, the post-op chain had cost as much as
the product.

oneDNN picks its int8 kernels for the CPU itself (AMX, AVX-512 VNNI, AVX2 VNNI, or plain
AVX2 with the u8 x s8 compensation it computes into the reordered weights); reference
implementations (``ref:``) are refused, and so are the kernels without VNNI when a weight lies
outside [-64, 63] (:func:`saturation_safe`); the caller then uses the NumPy reference of
:mod:`pytfrt.backends.cpu.quant`.  Thread-safe: any number of threads may call ``forward``.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _dnnl_conv as dc
from pytfrt.backends.cpu import _parallel

_S32, _S8, _U8 = 4, 5, 6  # dnnl_data_type_t
_ARG_ATTR_SCALES = 4096  # DNNL_ARG_ATTR_SCALES
_ARG_ATTR_ZERO_POINTS = 8192  # DNNL_ARG_ATTR_ZERO_POINTS
_LINEAR, _CLIP_V2, _ROUND = 0x26, 0x2F, 0x32  # dnnl_eltwise_linear, _clip_v2, _round
_DT = {np.dtype(np.uint8): _U8, np.dtype(np.int8): _S8, np.dtype(np.float32): dc._F32,
       np.dtype(np.int32): _S32}


def _dnnl_dtype(dtype: np.dtype) -> int:
    return _DT[np.dtype(dtype)]


class QuantParams:
    """The fixed quantisation of an int8 primitive (see the module docstring).

    Attributes:
        x_scale, x_zero_point: the input's.
        w_scale: float32 ``[cout]`` (per output channel; a per-tensor scale repeated).
        bias: float32 ``[cout]`` or ``None``.
        y_scale, y_zero_point: the result's (``out_dtype`` u8/s8); unused for f32.
        out_dtype: ``uint8``, ``int8`` or ``float32``.
        activation, alpha: the epilogue activation (a name of ``op_math.ACTIVATIONS``).
        residual_scale, residual_zero_point: the residual's quantisation (``None``: no
            residual; else the output buffer holds the residual on entry, ``sum`` post-op).
    """

    def __init__(self, *, x_scale: float, x_zero_point: int, w_scale: np.ndarray,
                 bias: np.ndarray | None, y_scale: float, y_zero_point: int,
                 out_dtype: np.dtype, activation: str = "none", alpha: float = 0.0,
                 residual_scale: float | None = None, residual_zero_point: int = 0,
                 inner_scale: float | None = None, inner_zero_point: int = 0) -> None:
        self.x_scale = float(x_scale)
        self.x_zero_point = int(x_zero_point)
        self.w_scale = np.ascontiguousarray(w_scale, np.float32)
        self.bias = None if bias is None else np.ascontiguousarray(bias, np.float32)
        self.y_scale = float(y_scale)
        self.y_zero_point = int(y_zero_point)
        self.out_dtype = np.dtype(out_dtype)
        self.activation = activation
        self.alpha = float(alpha)
        self.residual_scale = residual_scale
        self.residual_zero_point = int(residual_zero_point)
        self.inner_scale = inner_scale
        self.inner_zero_point = int(inner_zero_point)
        self.unit = 1.0
        """The unit the primitive computes in (``inner_scale`` for an integer result with an
        inner requantization, else 1: see the module docstring); the ``prim_*`` attributes are
        the scales and bias the primitive is given, divided by it."""
        if inner_scale is not None and self.out_dtype != np.float32:
            self.unit = float(inner_scale)
        u = np.float32(self.unit)
        self.prim_w_scale = self.w_scale if self.unit == 1.0 else self.w_scale / u
        self.prim_bias = self.bias if self.bias is None or self.unit == 1.0 else self.bias / u
        self.prim_y_scale = self.y_scale / self.unit
        self.prim_residual_scale = (None if residual_scale is None
                                    else float(residual_scale) / self.unit)

    def channels(self, c0: int, c1: int) -> QuantParams:
        """The parameters of output channels ``[c0, c1)`` (a channel part's)."""
        return QuantParams(
            x_scale=self.x_scale, x_zero_point=self.x_zero_point,
            w_scale=self.w_scale[c0:c1], bias=None if self.bias is None else self.bias[c0:c1],
            y_scale=self.y_scale, y_zero_point=self.y_zero_point, out_dtype=self.out_dtype,
            activation=self.activation, alpha=self.alpha, residual_scale=self.residual_scale,
            residual_zero_point=self.residual_zero_point, inner_scale=self.inner_scale,
            inner_zero_point=self.inner_zero_point)


class _Args:
    """The memories of the run-time scales and zero points (owned by one :class:`_Prim`)."""

    def __init__(self, lib: dc._Lib, p: dc._Prim, q: QuantParams, w_mask: int) -> None:
        self.arrays: list[np.ndarray] = []
        self.lib = lib
        self.p = p
        self.add(_ARG_ATTR_SCALES | dc._ARG_SRC, np.array([q.x_scale], np.float32))
        self.add(_ARG_ATTR_SCALES | dc._ARG_WEIGHTS,
                 q.prim_w_scale if w_mask else q.prim_w_scale[:1].copy())
        if q.out_dtype != np.float32:
            self.add(_ARG_ATTR_SCALES | dc._ARG_DST, np.array([q.prim_y_scale], np.float32))
            if q.y_zero_point:
                self.add(_ARG_ATTR_ZERO_POINTS | dc._ARG_DST,
                         np.array([q.y_zero_point], np.int32))
        if q.x_zero_point:
            self.add(_ARG_ATTR_ZERO_POINTS | dc._ARG_SRC, np.array([q.x_zero_point], np.int32))

    def add(self, arg: int, arr: np.ndarray) -> None:
        lib = self.lib
        md = self.p.own("dnnl_memory_desc_destroy",
                        lib.strided_md((arr.size,), (1,), _dnnl_dtype(arr.dtype)))
        mem = self.p.own("dnnl_memory_destroy",
                         lib.new("dnnl_memory_create", md, lib.engine, arr.ctypes.data))
        self.arrays.append(arr)
        self.p.extra.append((arg, mem))


def _attr(lib: dc._Lib, temp: dc._Prim, q: QuantParams, w_mask: int) -> ctypes.c_void_p:
    """Primitive attributes: user scratchpad, scales and zero points, sum/eltwise post-ops."""
    attr = dc.user_scratchpad_attr(lib, temp.own)
    lib.call("dnnl_primitive_attr_set_scales_mask", attr, dc._ARG_SRC, 0)
    lib.call("dnnl_primitive_attr_set_scales_mask", attr, dc._ARG_WEIGHTS, w_mask)
    if q.out_dtype != np.float32:
        lib.call("dnnl_primitive_attr_set_scales_mask", attr, dc._ARG_DST, 0)
        if q.y_zero_point:
            lib.call("dnnl_primitive_attr_set_zero_points_mask", attr, dc._ARG_DST, 0)
    if q.x_zero_point:
        lib.call("dnnl_primitive_attr_set_zero_points_mask", attr, dc._ARG_SRC, 0)
    eltwise = None
    if q.activation != "none":
        eltwise = dc.eltwise_for(q.activation, q.alpha)
        if eltwise is None:
            raise RuntimeError(f"no oneDNN post-op for activation {q.activation}")
    if q.residual_scale is not None or eltwise is not None or q.inner_scale is not None:
        po = temp.own("dnnl_post_ops_destroy", lib.new("dnnl_post_ops_create"))
        if q.inner_scale is not None:
            info = np.iinfo(q.out_dtype)
            s, z = float(q.inner_scale), q.inner_zero_point
            chain = [(_ROUND, 0.0, 0.0), (_CLIP_V2, float(info.min - z), float(info.max - z))]
            if q.unit != s:  # a float result: scale to inner units and back
                chain = [(_LINEAR, 1.0 / s, 0.0), *chain, (_LINEAR, s, 0.0)]
            for alg, a, b in chain:
                lib.call("dnnl_post_ops_append_eltwise", po, alg, a, b)
        if q.prim_residual_scale is not None:
            lib.call("dnnl_post_ops_append_sum", po, float(q.prim_residual_scale),
                     int(q.residual_zero_point), 0)
        if eltwise is not None:
            lib.call("dnnl_post_ops_append_eltwise", po, *eltwise)
        lib.call("dnnl_primitive_attr_set_post_ops", attr, po)
    return attr


def saturation_safe(impl: str) -> bool:
    """Whether a oneDNN int8 implementation accumulates u8 x s8 products exactly for every s8
    weight: the VNNI and AMX kernels do (``vpdpbusd``, tile products); the plain AVX2 and
    AVX-512 ones pair products in saturating 16-bit sums (``vpmaddubsw``), exact only for
    weights in [-64, 63] (measured: up to 126 steps off with full-range weights)."""
    return "vnni" in impl or "amx" in impl


def _finish(lib: dc._Lib, p: dc._Prim, user_w_md: ctypes.c_void_p, w: np.ndarray,
            holders: list[dc._Prim], channels: tuple[int, int]) -> None:
    """Query the implementation (refusing ``ref:``), size the scratchpad, give the primitive
    its weights in its format (its compensation included) and create it.  The reordered
    weights of output channels ``channels`` are shared by every primitive of the operation
    that wants the same format (``holders``: the operation's weight holders, each owning one
    copy): the row parts of a split convolution then read one copy from the shared cache
    instead of one copy each."""
    dc.query_impl(lib, p)
    if not saturation_safe(p.impl) and (int(w.max(initial=0)) > 63 or int(w.min(initial=0)) < -64):
        raise RuntimeError(f"{p.impl} would saturate on weights outside [-64, 63]")
    w_md = lib.fn["dnnl_primitive_desc_query_md"](p.pd, dc._Q_WEIGHTS_MD, 0)
    for h in holders:
        if h.channels == channels and lib.fn["dnnl_memory_desc_equal"](h.src_md, w_md):
            p.weights = h.weights
            break
    else:
        h = dc._Prim(lib)  # a holder: src_md is its weights' format, weights the memory
        h.channels = channels
        h.keep, addr = dc._filter_memory(int(lib.fn["dnnl_memory_desc_get_size"](w_md)))
        h.src_md = h.own("dnnl_memory_desc_destroy", dc._clone_md(lib, w_md))
        h.weights = h.own("dnnl_memory_destroy", lib.new(
            "dnnl_memory_create", h.src_md, lib.engine, ctypes.c_void_p(addr)))
        holders.append(h)
        dc.reorder(lib, user_w_md, w.ctypes.data, h.src_md, h.weights)
        p.weights = h.weights
    p.create_primitive()


class _Runner:
    """Per input shape, the parts of one int8 operation (made on first use) and their run."""

    def __init__(self, lib: dc._Lib, q: QuantParams | None = None, cout: int = 0) -> None:
        """``q``: the operation's quantisation (``None``: a float runner reusing this class,
        :mod:`_dnnl_matmul`); ``cout``: output channels of the whole operation (channel
        parts)."""
        self._lib = lib
        self.q: QuantParams = q  # type: ignore[assignment]  # (None: a float runner)
        self._cout = cout
        self._itemsize = 4 if q is None else q.out_dtype.itemsize
        self._lock = threading.Lock()
        self._prims: dict[tuple[int, ...], list[dc._Prim] | None] = {}
        self._jobs: dict[tuple[int, ...], Any] = {}
        self._holders: list[dc._Prim] = []
        """The reordered weights, shared by the primitives (:func:`_finish`)."""
        self._finalizer = weakref.finalize(self, dc._destroy, self._prims, self._holders)

    def _parts(self, shape: tuple[int, ...]) -> list[dc._Prim] | None:
        got = self._prims.get(shape, False)
        if got is not False:
            return got  # type: ignore[return-value]
        with self._lock:
            if shape not in self._prims:
                made: list[dc._Prim] = []
                try:
                    self._make(shape, made)
                except (RuntimeError, KeyError):
                    for p in made:
                        p.destroy()
                    self._prims[shape] = None
                else:
                    self._prims[shape] = made
            return self._prims[shape]

    def _make(self, shape: tuple[int, ...], made: list[dc._Prim]) -> None:
        raise NotImplementedError

    def impl(self, shape: tuple[int, ...]) -> str | None:
        """oneDNN's implementation for an input shape (``None``: oneDNN is not used)."""
        parts = self._parts(tuple(shape))
        return None if parts is None else parts[0].impl

    def ready(self, shape: tuple[int, ...]) -> bool:
        """Whether oneDNN runs this input shape (primitives made now if new)."""
        return self._parts(tuple(shape)) is not None

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        """Run the parts of ``x``'s shape (``ready`` was true) into ``y`` (both C-contiguous;
        with a residual, ``y`` holds it on entry)."""
        parts = self._prims[tuple(x.shape)]
        assert parts is not None
        xa, ya = int(x.ctypes.data), int(y.ctypes.data)
        if len(parts) == 1:
            self._run(parts[0], xa, ya)
            return
        job = self._jobs.get(tuple(x.shape))
        if job is None:
            job = dc._job(parts, self._cout, self._lock, self._itemsize)
            with self._lock:
                job = self._jobs.setdefault(tuple(x.shape), job)
        if dc.run_job(self._lib, job, xa, ya, 0):
            return
        _parallel.parallel_for(lambda i: self._run(parts[i], xa, ya), len(parts))

    def _run(self, p: dc._Prim, xa: int, ya: int) -> None:
        """Run one part on the calling thread (:func:`_dnnl_conv.run_part`; a channel part
        through this thread's buffer)."""
        dc.run_part(self._lib, p, self._lock, xa, ya, 0, self._cout, self._itemsize)


CONV_SPLIT_MIN_MACS = 8_000_000
"""Fewest multiply-adds for which an int8 convolution is split into parts run in parallel."""
CONV_PART_MIN_MACS = 4_000_000
"""Fewest multiply-adds per part of a split int8 convolution."""


class Int8Conv(_Runner):
    """A quantised 2-D convolution (fixed s8 filter, scales, bias, epilogue).

    ``w``: s8, HWIO for ``NHWC``, OIHW for ``NCHW``; ``attrs``: ``layout``, ``strides``,
    ``dilations``, ``pads`` (top, bottom, left, right), ``groups``; ``x_dtype``: u8 or s8.
    """

    def __init__(self, lib: dc._Lib, w: np.ndarray, q: QuantParams, attrs: dict[str, Any],
                 x_dtype: np.dtype) -> None:
        self.w = np.ascontiguousarray(w, np.int8)
        self.a = attrs
        self.x_dtype = np.dtype(x_dtype)
        layout = attrs["layout"]
        if layout == "NHWC":
            self.kh, self.kw, cig, self.cout = self.w.shape
        else:
            self.cout, cig, self.kh, self.kw = self.w.shape
        super().__init__(lib, q, self.cout)
        self.cin = cig * attrs["groups"]
        self._keep: list[Any] = []

    def out_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        n, _c, h, w = dc._nchw_dims(self.a["layout"], shape)
        oh, ow = self._out_hw(h, w)
        return (n, oh, ow, self.cout) if self.a["layout"] == "NHWC" else (n, self.cout, oh, ow)

    def _out_hw(self, h: int, w: int) -> tuple[int, int]:
        a = self.a
        sh, sw = a["strides"]
        dh, dw = a["dilations"]
        pt, pb, pl, pr = a["pads"]
        return ((h + pt + pb - (dh * (self.kh - 1) + 1)) // sh + 1,
                (w + pl + pr - (dw * (self.kw - 1) + 1)) // sw + 1)

    def _split(self, shape: tuple[int, ...]) -> list[dc._Part]:
        """Parts by batch, or at batch 1 in NHWC by output rows, or by output channels for
        small images (as the float convolution: :data:`_dnnl_conv.CHANNEL_SPLIT_MAX_PIXELS`;
        ResNet-50's 7x7 stage, whose 7 rows split 3 + 4 and whose filters are the largest)."""
        a = self.a
        layout = a["layout"]
        n, c, h, w = dc._nchw_dims(layout, shape)
        oh, ow = self._out_hw(h, w)
        cout = self.cout
        pads = tuple(a["pads"])
        xs, ys = self.x_dtype.itemsize, self.q.out_dtype.itemsize
        whole: dc._Part = ((n, c, h, w), (n, cout, oh, ow), pads, 0, 0, None)  # type: ignore[assignment]
        macs = n * oh * ow * cout * self.kh * self.kw * c // a["groups"]
        threads = _parallel.num_threads()
        if threads < 2 or macs < CONV_SPLIT_MIN_MACS:
            return [whole]
        k = min(threads, macs // CONV_PART_MIN_MACS)
        if (CHANNEL_SPLIT and layout == "NHWC" and oh * ow <= dc.CHANNEL_SPLIT_MAX_PIXELS
                and n * oh * ow <= dc.CHANNEL_SPLIT_MAX_ROWS and a["groups"] == 1 and k >= 2
                and cout % (16 * k) == 0):  # parts of whole 16-channel blocks
            cb = [cout * i // k for i in range(k + 1)]
            return [((n, c, h, w), (n, c1 - c0, oh, ow), pads, 0, 0, (c0, c1))
                    for c0, c1 in zip(cb, cb[1:], strict=False)]
        if n >= 2:
            k = min(k, n)
            b = [n * i // k for i in range(k + 1)]
            return [((b1 - b0, c, h, w), (b1 - b0, cout, oh, ow), pads, xs * b0 * c * h * w,
                     ys * b0 * cout * oh * ow, None) for b0, b1 in zip(b, b[1:], strict=False)]
        k = min(k, oh)
        if layout != "NHWC" or k < 2:
            return [whole]
        sh = a["strides"][0]
        dh = a["dilations"][0]
        pt, _pb, pl, pr = pads
        parts: list[dc._Part] = []
        bounds = [oh * i // k for i in range(k + 1)]
        for r0, r1 in zip(bounds, bounds[1:], strict=False):
            first = r0 * sh - pt
            last = (r1 - 1) * sh - pt + dh * (self.kh - 1)
            i0, i1 = max(first, 0), min(last, h - 1)
            parts.append(((1, c, i1 - i0 + 1, w), (1, cout, r1 - r0, ow),
                          (i0 - first, last - i1, pl, pr), xs * i0 * w * c,
                          ys * r0 * ow * cout, None))
        return parts

    def _make(self, shape: tuple[int, ...], made: list[dc._Prim]) -> None:
        for part in self._split(shape):
            p = dc._Prim(self._lib)
            made.append(p)
            self._create(p, part)

    def _create(self, p: dc._Prim, part: dc._Part) -> None:
        lib, a, q = self._lib, self.a, self.q
        layout, groups = a["layout"], a["groups"]
        src, dst, (pt, pb, pl, pr), p.src_off, p.dst_off, p.channels = part
        p.pixels = dst[0] * dst[2] * dst[3]
        p.residual = dc.NO_RESIDUAL if q.residual_scale is None else dc.RESIDUAL_IN_DST
        w, cout = self.w, self.cout
        if p.channels is not None:  # NHWC: the filter's last axis
            c0, c1 = p.channels
            w, cout, q = np.ascontiguousarray(w[..., c0:c1]), c1 - c0, q.channels(c0, c1)
            self._keep.append(q)  # (its bias is the primitive's bias memory)
        free, temp = "dnnl_memory_desc_destroy", dc._Prim(lib)
        dc._pin_one_thread()
        try:
            p.src_md = p.own(free, lib.strided_md(src, dc._md_strides(layout, src),
                                                  _dnnl_dtype(self.x_dtype)))
            p.dst_md = p.own(free, lib.strided_md(dst, dc._md_strides(layout, dst),
                                                  _dnnl_dtype(q.out_dtype)))
            wdims, wstrides = dc._weights_md_dims(layout, self.kh, self.kw, self.cin // groups,
                                                  cout, groups)
            user_w = temp.own(free, lib.strided_md(wdims, wstrides, _S8))
            any_w = temp.own(free, lib.new("dnnl_memory_desc_create_with_tag", len(wdims),
                                           dc._DIMS(*wdims), _S8, dc._FORMAT_ANY))
            bias_md = None
            if q.prim_bias is not None:
                bias_md = temp.own(free, lib.strided_md((cout,), (1,)))
                p.bias = p.own("dnnl_memory_destroy", lib.new(
                    "dnnl_memory_create", bias_md, lib.engine, q.prim_bias.ctypes.data))
            w_mask = 1 if groups == 1 else 3
            attr = _attr(lib, temp, q, w_mask)
            self._keep.append(_Args(lib, p, q, w_mask))
            sh, sw = a["strides"]
            dh, dw = a["dilations"]
            p.pd = p.own("dnnl_primitive_desc_destroy", lib.new(
                "dnnl_convolution_forward_primitive_desc_create", lib.engine,
                dc._FORWARD_INFERENCE, dc._CONV_DIRECT, p.src_md, any_w, bias_md, p.dst_md,
                dc._DIMS(sh, sw), dc._DIMS(dh - 1, dw - 1), dc._DIMS(pt, pl), dc._DIMS(pb, pr),
                attr))
            _finish(lib, p, user_w, w, self._holders, p.channels or (0, self.cout))
        finally:
            temp.destroy()


CHANNEL_SPLIT = True
"""Whether small images at batch 1 are split by output channels (else by rows); an A/B
switch for the benchmarks."""

PARALLEL_MIN_MACS = 2_000_000
"""Fewest multiply-adds for which an int8 matrix product is split into row bands run in
parallel (BERT-base's 128 x 768 x 768 products are 75M)."""


class Int8MatMul(_Runner):
    """A quantised matrix product ``x [M, K] @ w [K, N]`` (fixed s8 ``w``, per-column
    scales, bias, epilogue); ``x_dtype`` u8 or s8.  Large products are split by rows."""

    def __init__(self, lib: dc._Lib, w: np.ndarray, q: QuantParams, x_dtype: np.dtype) -> None:
        super().__init__(lib, q, int(w.shape[1]))
        self.w = np.ascontiguousarray(w, np.int8)
        self.x_dtype = np.dtype(x_dtype)
        self._keep: list[_Args] = []

    def _make(self, shape: tuple[int, ...], made: list[dc._Prim]) -> None:
        """One primitive, or at least :data:`PARALLEL_MIN_MACS` multiply-adds split into
        row bands (one per thread: each part reads the whole weight)."""
        m, k = shape
        n = self.w.shape[1]
        parts = 1
        if m * k * n >= PARALLEL_MIN_MACS:
            parts = min(_parallel.num_threads(), m)
        bounds = [m * i // parts for i in range(parts + 1)]
        for r0, r1 in zip(bounds, bounds[1:], strict=False):
            p = dc._Prim(self._lib)
            made.append(p)
            p.src_off = r0 * k * self.x_dtype.itemsize
            p.dst_off = r0 * n * self.q.out_dtype.itemsize
            self._create(p, r1 - r0, k, n)

    def _create(self, p: dc._Prim, m: int, k: int, n: int) -> None:
        lib, q = self._lib, self.q
        free, temp = "dnnl_memory_desc_destroy", dc._Prim(lib)
        dc._pin_one_thread()
        try:
            p.src_md = p.own(free, lib.strided_md((m, k), (k, 1), _dnnl_dtype(self.x_dtype)))
            p.dst_md = p.own(free, lib.strided_md((m, n), (n, 1), _dnnl_dtype(q.out_dtype)))
            user_w = temp.own(free, lib.strided_md((k, n), (n, 1), _S8))
            any_w = temp.own(free, lib.new("dnnl_memory_desc_create_with_tag", 2,
                                           dc._DIMS(k, n), _S8, dc._FORMAT_ANY))
            bias_md = None
            if q.prim_bias is not None:
                bias_md = temp.own(free, lib.strided_md((1, n), (n, 1)))
                p.bias = p.own("dnnl_memory_destroy", lib.new(
                    "dnnl_memory_create", bias_md, lib.engine, q.prim_bias.ctypes.data))
            attr = _attr(lib, temp, q, 2)
            self._keep.append(_Args(lib, p, q, 2))
            p.pd = p.own("dnnl_primitive_desc_destroy", lib.new(
                "dnnl_matmul_primitive_desc_create", lib.engine, p.src_md, any_w, bias_md,
                p.dst_md, attr))
            _finish(lib, p, user_w, self.w, self._holders, (0, n))
        finally:
            temp.destroy()


def library() -> dc._Lib | None:
    """oneDNN (shared with the float convolution), or ``None`` if absent or disabled."""
    return dc.library()
