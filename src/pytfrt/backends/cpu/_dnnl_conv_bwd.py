"""float32 convolution gradients through oneDNN's backward primitives (C API, via ctypes).

Private helper of :mod:`pytfrt.backends.cpu.grad_ops`: :func:`backprop_input` (oneDNN's
convolution *backward data*) and :func:`backprop_filter` (*backward weights*) compute what
:func:`pytfrt.backends.cpu.conv.conv2d_backprop_input` and ``conv2d_backprop_filter`` compute
with im2col and GEMMs, several times faster on training-sized batches; :func:`forward` is the
forward convolution of a training step, whose filter changes every call (for
:mod:`pytfrt.backends.cpu.graph_nn`).  A 1x1 convolution's filter
gradient (NHWC, unpadded, one group, large enough) is one GEMM instead
(:func:`_pointwise_filter`: ``dnnl_sgemm`` per thread, 1.5-2x oneDNN 3.2's backward-weights
kernel on ResNet-50's shapes).  All return ``None``
when oneDNN cannot take the call (library absent or ``PYTFRT_CONV=builtin``, not float32,
only oneDNN's reference implementation, or operands oneDNN rejects -- the caller then runs the
built-in path, which also reports bad operands).

It reuses the forward module's loaded library, per-thread streams and scratchpads and its
descriptor helpers (:mod:`pytfrt.backends.cpu._dnnl_conv`).  Per geometry (kind, input and
filter shape, strides, dilations, pads, groups, layout) one :class:`_Plan` is made on first use
and kept for the process: a forward-training primitive descriptor (the hint oneDNN's backward
primitives require), the backward primitive per batch part, and cached reorders between the
user's filter format (HWIO for NHWC, OIHW for NCHW) and the one the primitive prefers.

Threading: as the forward convolutions, each primitive runs single-threaded on the calling
thread (OpenMP team size one); a batch of two or more large enough images is split into
:func:`pytfrt.backends.cpu._parallel.num_threads` parts run by
:func:`pytfrt.backends.cpu._parallel.parallel_for`.  Backward data writes disjoint slices of
the input gradient; backward weights gives each part its own filter-gradient buffer and sums
them.  Memory objects are made per call, so any number of threads may call at once.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _blas, _dnnl_conv, _parallel
from pytfrt.backends.cpu._dnnl_conv import _DIMS, _ExecArg

_FORWARD_TRAINING = 64  # dnnl_forward_training
_ARG_DIFF_SRC, _ARG_DIFF_DST, _ARG_DIFF_WEIGHTS = 129, 145, 161
_Q_DIFF_WEIGHTS_MD = 132  # dnnl_query_diff_weights_md

_SIGS: dict[str, tuple[list[Any], Any]] = {
    "dnnl_convolution_backward_data_primitive_desc_create": (
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
         ctypes.c_void_p, ctypes.c_void_p, _DIMS, _DIMS, _DIMS, _DIMS, ctypes.c_void_p,
         ctypes.c_void_p],
        ctypes.c_int,
    ),
    "dnnl_convolution_backward_weights_primitive_desc_create": (
        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
         ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, _DIMS, _DIMS, _DIMS, _DIMS,
         ctypes.c_void_p, ctypes.c_void_p],
        ctypes.c_int,
    ),
}

PARALLEL_MIN_MACS = _dnnl_conv.PARALLEL_MIN_MACS
"""Fewest multiply-adds for which a gradient is split into batch parts run in parallel."""

_lock = threading.Lock()
_plans: dict[tuple[Any, ...], _Plan | None] = {}
_bound = False


def _library() -> _dnnl_conv._Lib | None:
    """The forward module's library with the backward functions' signatures added."""
    global _bound
    lib = _dnnl_conv.library()
    if lib is None or _bound:
        return lib
    with _lock:
        if not _bound:
            raw = _blas._find_library()
            try:
                for name, (argtypes, restype) in _SIGS.items():
                    f = getattr(raw, name)
                    f.argtypes = argtypes
                    f.restype = restype
                    lib.fn[name] = f
            except AttributeError:  # pragma: no cover - a oneDNN without these entry points
                return None
            _bound = True
    return lib


class _Geometry:
    """The attributes of one gradient call, normalised (NCHW dims for oneDNN)."""

    def __init__(self, layout: str, x_shape: Sequence[int], w_shape: Sequence[int],
                 strides: Sequence[int], dilations: Sequence[int],
                 pads: Sequence[int] | None, groups: int) -> None:
        self.layout = layout
        self.x_dims = _dnnl_conv._nchw_dims(layout, tuple(int(v) for v in x_shape))
        if layout == "NHWC":
            kh, kw, cig, cout = (int(v) for v in w_shape)
        else:
            cout, cig, kh, kw = (int(v) for v in w_shape)
        self.kh, self.kw, self.cig, self.cout, self.groups = kh, kw, cig, cout, int(groups)
        self.w_shape = tuple(int(v) for v in w_shape)
        self.strides = (int(strides[0]), int(strides[1]))
        self.dil = (int(dilations[0]) - 1, int(dilations[1]) - 1)
        pt, pb, pl, pr = (int(v) for v in (pads if pads is not None else (0, 0, 0, 0)))
        self.pad_l, self.pad_r = (pt, pl), (pb, pr)
        n, _, h, w = self.x_dims
        eh = (self.dil[0] + 1) * (kh - 1) + 1
        ew = (self.dil[1] + 1) * (kw - 1) + 1
        self.oh = (h + pt + pb - eh) // self.strides[0] + 1
        self.ow = (w + pl + pr - ew) // self.strides[1] + 1

    def y_dims(self, n: int) -> tuple[int, int, int, int]:
        return (n, self.cout, self.oh, self.ow)

    def x_shape(self, n: int) -> tuple[int, ...]:
        _, c, h, w = self.x_dims
        return (n, h, w, c) if self.layout == "NHWC" else (n, c, h, w)

    def y_shape(self, n: int) -> tuple[int, ...]:
        _, c, h, w = self.y_dims(n)
        return (n, h, w, c) if self.layout == "NHWC" else (n, c, h, w)


class _Part:
    """One batch part's primitive: descriptors, the primitive, its scratchpad size."""

    def __init__(self, b0: int, b1: int) -> None:
        self.b0, self.b1 = b0, b1
        self.src_md = ctypes.c_void_p()
        self.dst_md = ctypes.c_void_p()
        self.bias_md: Any = None
        """The bias descriptor of a ``forward_bias`` plan's primitive."""
        self.w_md = 0
        """The (diff) weights descriptor the primitive chose (owned by its descriptor)."""
        self.pd = ctypes.c_void_p()
        self.hint = ctypes.c_void_p()
        self.prim = ctypes.c_void_p()
        self.scratch = 0
        self.impl = ""


class _Plan:
    """The oneDNN objects of one gradient geometry (see the module docstring); never freed."""

    def __init__(self, lib: _dnnl_conv._Lib, kind: str, geo: _Geometry,
                 split: bool = True) -> None:
        self.lib, self.kind, self.geo, self.split = lib, kind, geo, split
        self.parts: list[_Part] = []
        self.user_w_md = ctypes.c_void_p()
        self.reorder = ctypes.c_void_p()
        """Reorder primitive: user filter -> primitive's weights (forward, data), or
        primitive's diff weights -> user filter (weights)."""
        self.w_bytes = 0
        self._temps: list[tuple[str, ctypes.c_void_p]] = []

    def _own(self, kind: str, h: ctypes.c_void_p) -> ctypes.c_void_p:
        self._temps.append((kind, h))
        return h

    def build(self) -> bool:
        """Make the descriptors and primitives; ``False`` if oneDNN offers only reference
        code or rejects the geometry."""
        lib, geo = self.lib, self.geo
        n = geo.x_dims[0]
        _dnnl_conv._pin_one_thread()
        macs = n * geo.oh * geo.ow * geo.cout * geo.kh * geo.kw * geo.cig
        k = 1
        if self.split and n >= 2 and macs >= PARALLEL_MIN_MACS:
            k = min(_parallel.num_threads(), n)
        bounds = [n * i // k for i in range(k + 1)]
        wdims, wstrides = _dnnl_conv._weights_md_dims(
            geo.layout, geo.kh, geo.kw, geo.cig, geo.cout, geo.groups)
        self.user_w_md = lib.strided_md(wdims, wstrides)
        any_w = self._own("dnnl_memory_desc_destroy", lib.new(
            "dnnl_memory_desc_create_with_tag", len(wdims), _DIMS(*wdims), _dnnl_conv._F32,
            _dnnl_conv._FORMAT_ANY))
        attr = _dnnl_conv.user_scratchpad_attr(lib, self._own)
        try:
            for b0, b1 in zip(bounds, bounds[1:], strict=False):
                part = _Part(b0, b1)
                self.parts.append(part)
                self._create(part, any_w, attr)
                if part.impl.startswith("ref"):
                    return False
                if not lib.fn["dnnl_memory_desc_equal"](part.w_md, self.parts[0].w_md):
                    return False
            w_md = self.parts[0].w_md
            self.w_bytes = int(lib.fn["dnnl_memory_desc_get_size"](w_md))
            src, dst = ((w_md, self.user_w_md) if self.kind == "weights"
                        else (self.user_w_md, w_md))
            rpd = self._own("dnnl_primitive_desc_destroy", lib.new(
                "dnnl_reorder_primitive_desc_create", src, lib.engine, dst, lib.engine, None))
            self.reorder = lib.new("dnnl_primitive_create", rpd)
        except RuntimeError:
            return False
        finally:
            for kind, h in reversed(self._temps):
                lib.fn[kind](h)
            self._temps.clear()
        return True

    def _create(self, part: _Part, any_w: ctypes.c_void_p, attr: ctypes.c_void_p) -> None:
        lib, geo = self.lib, self.geo
        nb = part.b1 - part.b0
        xd, yd = (nb, *geo.x_dims[1:]), geo.y_dims(nb)
        part.src_md = lib.strided_md(xd, _dnnl_conv._md_strides(geo.layout, xd))
        part.dst_md = lib.strided_md(yd, _dnnl_conv._md_strides(geo.layout, yd))
        conv = (_DIMS(*geo.strides), _DIMS(*geo.dil), _DIMS(*geo.pad_l), _DIMS(*geo.pad_r))
        part.hint = hint = lib.new(  # kept: oneDNN may refer to it after creation
            "dnnl_convolution_forward_primitive_desc_create", lib.engine, _FORWARD_TRAINING,
            _dnnl_conv._CONV_DIRECT, part.src_md, any_w, None, part.dst_md, *conv, None)
        if self.kind in ("forward", "forward_bias"):
            if self.kind == "forward_bias":
                part.bias_md = lib.strided_md((geo.cout,), (1,))
            part.pd = lib.new(
                "dnnl_convolution_forward_primitive_desc_create", lib.engine, _FORWARD_TRAINING,
                _dnnl_conv._CONV_DIRECT, part.src_md, any_w, part.bias_md, part.dst_md, *conv,
                attr)
            part.w_md = lib.fn["dnnl_primitive_desc_query_md"](
                part.pd, _dnnl_conv._Q_WEIGHTS_MD, 0)
        elif self.kind == "data":
            part.pd = lib.new(
                "dnnl_convolution_backward_data_primitive_desc_create", lib.engine,
                _dnnl_conv._CONV_DIRECT, part.src_md, any_w, part.dst_md, *conv, hint, attr)
            part.w_md = lib.fn["dnnl_primitive_desc_query_md"](
                part.pd, _dnnl_conv._Q_WEIGHTS_MD, 0)
        else:
            part.pd = lib.new(
                "dnnl_convolution_backward_weights_primitive_desc_create", lib.engine,
                _dnnl_conv._CONV_DIRECT, part.src_md, any_w, None, part.dst_md, *conv, hint,
                attr)
            part.w_md = lib.fn["dnnl_primitive_desc_query_md"](part.pd, _Q_DIFF_WEIGHTS_MD, 0)
        info = ctypes.c_char_p()
        lib.call("dnnl_primitive_desc_query", part.pd, _dnnl_conv._Q_IMPL_INFO, 0,
                 ctypes.byref(info))
        part.impl = (info.value or b"").decode()
        if part.impl.startswith("ref"):
            return
        sp_md = lib.fn["dnnl_primitive_desc_query_md"](part.pd, _dnnl_conv._Q_SCRATCHPAD_MD, 0)
        part.scratch = int(lib.fn["dnnl_memory_desc_get_size"](sp_md)) if sp_md else 0
        part.prim = lib.new("dnnl_primitive_create", part.pd)

    def run_reorder(self, src_md: Any, src_addr: int, dst_md: Any, dst_addr: int) -> None:
        """Run the cached filter reorder from ``src_addr`` to ``dst_addr``."""
        lib = self.lib
        src = lib.new("dnnl_memory_create", src_md, lib.engine, src_addr)
        dst = lib.new("dnnl_memory_create", dst_md, lib.engine, dst_addr)
        try:
            args = (_ExecArg * 2)(_ExecArg(_dnnl_conv._ARG_FROM, src.value),
                                  _ExecArg(_dnnl_conv._ARG_TO, dst.value))
            stream = lib.stream()
            lib.call("dnnl_primitive_execute", self.reorder, stream, 2, args)
            lib.call("dnnl_stream_wait", stream)
        finally:
            lib.fn["dnnl_memory_destroy"](src)
            lib.fn["dnnl_memory_destroy"](dst)

    def run_part(self, part: _Part, x_addr: int, w_addr: int, y_addr: int,
                 b_addr: int = 0) -> None:
        """Execute one part: ``x_addr``/``y_addr`` are the whole (diff) input and (diff)
        output; ``w_addr`` is this part's (diff) weights in the primitive's format, ``b_addr``
        the bias of a ``forward_bias`` plan."""
        lib, geo = self.lib, self.geo
        if not getattr(_blas._local, "pinned", False):
            _dnnl_conv._pin_one_thread()
        _, c, h, w = geo.x_dims
        x_off = 4 * part.b0 * c * h * w
        y_off = 4 * part.b0 * geo.cout * geo.oh * geo.ow
        mems = [lib.new("dnnl_memory_create", part.src_md, lib.engine, x_addr + x_off),
                lib.new("dnnl_memory_create", part.dst_md, lib.engine, y_addr + y_off),
                lib.new("dnnl_memory_create", part.w_md, lib.engine, w_addr)]
        try:
            if self.kind in ("forward", "forward_bias"):
                pairs = [(_dnnl_conv._ARG_SRC, mems[0]), (_dnnl_conv._ARG_DST, mems[1]),
                         (_dnnl_conv._ARG_WEIGHTS, mems[2])]
                if part.bias_md is not None:
                    mems.append(lib.new("dnnl_memory_create", part.bias_md, lib.engine, b_addr))
                    pairs.append((_dnnl_conv._ARG_BIAS, mems[-1]))
            elif self.kind == "data":
                pairs = [(_ARG_DIFF_SRC, mems[0]), (_ARG_DIFF_DST, mems[1]),
                         (_dnnl_conv._ARG_WEIGHTS, mems[2])]
            else:
                pairs = [(_dnnl_conv._ARG_SRC, mems[0]), (_ARG_DIFF_DST, mems[1]),
                         (_ARG_DIFF_WEIGHTS, mems[2])]
            if part.scratch:
                sp_md = lib.fn["dnnl_primitive_desc_query_md"](
                    part.pd, _dnnl_conv._Q_SCRATCHPAD_MD, 0)
                mems.append(lib.new("dnnl_memory_create", sp_md, lib.engine,
                                    _dnnl_conv._scratch(lib, part.scratch)))
                pairs.append((_dnnl_conv._ARG_SCRATCHPAD, mems[-1]))
            args = (_ExecArg * len(pairs))(*(_ExecArg(k, m.value) for k, m in pairs))
            stream = lib.stream()
            lib.call("dnnl_primitive_execute", part.prim, stream, len(pairs), args)
            lib.call("dnnl_stream_wait", stream)
        finally:
            for m in mems:
                lib.fn["dnnl_memory_destroy"](m)

    def run_parts(self, x_addr: int, w_addrs: Sequence[int], y_addr: int,
                  b_addr: int = 0) -> None:
        if len(self.parts) == 1:
            self.run_part(self.parts[0], x_addr, w_addrs[0], y_addr, b_addr)
            return
        _parallel.parallel_for(
            lambda i: self.run_part(self.parts[i], x_addr, w_addrs[i], y_addr, b_addr),
            len(self.parts))


def _plan(kind: str, geo: _Geometry, split: bool = True) -> _Plan | None:
    """The kept plan of ``kind`` for ``geo``; with ``split=False`` one part (the whole batch
    on the calling thread)."""
    lib = _library()
    if lib is None:
        return None
    key = (kind, geo.layout, geo.x_dims, geo.w_shape, geo.strides, geo.dil, geo.pad_l,
           geo.pad_r, geo.groups, split)
    try:
        return _plans[key]
    except KeyError:
        pass
    with _lock:
        if key not in _plans:
            plan = _Plan(lib, kind, geo, split)
            _plans[key] = plan if plan.build() else None
        return _plans[key]


def _aligned(nbytes: int) -> np.ndarray:
    """A new float32 array of ``nbytes`` bytes whose data is 64-byte aligned."""
    buf = np.empty(nbytes + 64, np.uint8)
    off = -int(buf.ctypes.data) % 64
    return buf[off:off + nbytes].view(np.float32)


def _usable(arrays: tuple[np.ndarray, ...], layout: str, strides: Sequence[int],
            dilations: Sequence[int], pads: Sequence[int] | None, groups: int) -> bool:
    """Whether the operands and attributes are of the forms oneDNN is tried with (anything
    else goes to the built-in path, which reports what is wrong)."""
    def ints(v: Any, n: int, low: int) -> bool:
        return len(v) == n and all(isinstance(i, int | np.integer) and i >= low for i in v)

    return (all(a.dtype == np.float32 and a.ndim == 4 for a in arrays)
            and layout in ("NHWC", "NCHW") and ints(strides, 2, 1) and ints(dilations, 2, 1)
            and (pads is None or ints(pads, 4, 0)) and isinstance(groups, int | np.integer)
            and groups >= 1)


def _plan_for(kind: str, arrays: tuple[np.ndarray, ...], x_shape: Sequence[int],
              w_shape: Sequence[int], dy: np.ndarray, layout: str, strides: Sequence[int],
              dilations: Sequence[int], pads: Sequence[int] | None,
              groups: int, split: bool = True) -> _Plan | None:
    """The plan of a call, or ``None`` if oneDNN is not given it."""
    if (not _usable(arrays, layout, strides, dilations, pads, groups) or len(x_shape) != 4
            or len(w_shape) != 4):
        return None
    geo = _Geometry(layout, x_shape, w_shape, strides, dilations, pads, groups)
    if (dy.shape != geo.y_shape(geo.x_dims[0]) or min(geo.x_dims) < 1 or geo.oh < 1
            or geo.ow < 1 or geo.cig * geo.groups != geo.x_dims[1] or geo.cout % geo.groups):
        return None
    return _plan(kind, geo, split)


def backprop_input(input_shape: Sequence[int], w: np.ndarray, dy: np.ndarray, *, layout: str,
                   strides: Sequence[int], dilations: Sequence[int],
                   pads: Sequence[int] | None, groups: int) -> np.ndarray | None:
    """The gradient of ``conv2d(x, w)`` with respect to ``x`` (shape ``input_shape``, in
    ``layout``) by oneDNN, or ``None`` if oneDNN does not take this call (see the module
    docstring).  Thread-safe."""
    dx_gemm = _strided_pointwise_input(input_shape, w, dy, layout, strides, pads, groups)
    if dx_gemm is not None:
        return dx_gemm
    plan = _plan_for("data", (w, dy), input_shape, w.shape, dy, layout, strides, dilations,
                     pads, groups)
    return None if plan is None else _input_grad(plan, w, dy)


def _input_grad(plan: _Plan, w: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Run a ``data`` plan: the input gradient of ``dy`` through the filter ``w``."""
    dx = np.empty(plan.geo.x_shape(plan.geo.x_dims[0]), np.float32)
    _run_with_filter(plan, w, dx, np.ascontiguousarray(dy))
    return dx


def _run_with_filter(plan: _Plan, w: np.ndarray, x: np.ndarray, y: np.ndarray,
                     bias: np.ndarray | None = None) -> None:
    """Reorder the user's filter ``w`` into the primitive's format, then run the parts on the
    C-contiguous (diff) input ``x`` and (diff) output ``y`` (forward and backward data; a
    ``forward_bias`` plan also reads the C-contiguous float32 ``bias``)."""
    wc = np.ascontiguousarray(w)
    w_prim = _aligned(plan.w_bytes)
    plan.run_reorder(plan.user_w_md, int(wc.ctypes.data), plan.parts[0].w_md,
                     int(w_prim.ctypes.data))
    plan.run_parts(int(x.ctypes.data), [int(w_prim.ctypes.data)] * len(plan.parts),
                   int(y.ctypes.data), 0 if bias is None else int(bias.ctypes.data))


def backprop_filter(x: np.ndarray, filter_shape: Sequence[int], dy: np.ndarray, *, layout: str,
                    strides: Sequence[int], dilations: Sequence[int],
                    pads: Sequence[int] | None, groups: int) -> np.ndarray | None:
    """The gradient of ``conv2d(x, w)`` with respect to ``w`` (shape ``filter_shape``: HWIO
    for NHWC, OIHW for NCHW) by oneDNN, or ``None`` if oneDNN does not take this call.
    Thread-safe."""
    dw_gemm = _pointwise_filter(x, filter_shape, dy, layout, strides, pads, groups)
    if dw_gemm is not None:
        return dw_gemm
    plan = _plan_for("weights", (x, dy), x.shape, filter_shape, dy, layout, strides, dilations,
                     pads, groups)
    return None if plan is None else _filter_grad(plan, x, dy)


def _filter_grad(plan: _Plan, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Run a ``weights`` plan: the filter gradient of input ``x`` and output gradient
    ``dy`` (each part into its own buffer, summed)."""
    xc, dyc = np.ascontiguousarray(x), np.ascontiguousarray(dy)
    bufs = [_aligned(plan.w_bytes) for _ in plan.parts]
    plan.run_parts(int(xc.ctypes.data), [int(b.ctypes.data) for b in bufs],
                   int(dyc.ctypes.data))
    total = bufs[0]
    for b in bufs[1:]:
        total += b
    dw = np.empty(plan.geo.w_shape, np.float32)
    plan.run_reorder(plan.parts[0].w_md, int(total.ctypes.data), plan.user_w_md,
                     int(dw.ctypes.data))
    return dw


def backprop_both(x: np.ndarray, w: np.ndarray, dy: np.ndarray, *, layout: str,
                  strides: Sequence[int], dilations: Sequence[int],
                  pads: Sequence[int] | None, groups: int,
                  extra: Callable[[], np.ndarray] | None = None
                  ) -> tuple[np.ndarray, ...] | None:
    """Both gradients of ``conv2d(x, w)`` for the output gradient ``dy``: ``(dx, dw)``, as
    :func:`backprop_input` and :func:`backprop_filter` give them, computed at the same time,
    one on each of two threads, each unsplit (they are independent: both read ``dy``, one
    ``w``, the other ``x``); no split of either gradient into batch parts, no partial filter
    gradients to sum.  With ``extra`` (a short computation, e.g. the bias gradient of
    ``dy``), ``(dx, dw, extra())``: ``extra`` runs on whichever thread finishes its gradient
    first.  ``None`` if oneDNN does not take either call or the process has one thread (the
    caller then computes them one after the other).  Thread-safe."""
    if _parallel.num_threads() < 2:
        return None
    d_gemm = _strided_pointwise(w, dy, layout, strides, pads, groups)
    d_plan = None if d_gemm else _plan_for(
        "data", (w, dy), x.shape, w.shape, dy, layout, strides, dilations, pads, groups,
        split=False)
    w_gemm = _pointwise(layout, groups, (x, dy), w.shape, pads)
    w_plan = None if w_gemm else _plan_for(
        "weights", (x, dy), x.shape, w.shape, dy, layout, strides, dilations, pads, groups,
        split=False)
    if (not d_gemm and d_plan is None) or (not w_gemm and w_plan is None):
        return None
    out: list[Any] = [None, None, None]
    # shards from both ends: the caller takes dx, a helper dw, the first one done the middle
    kinds = ("dx", "dw") if extra is None else ("dx", "extra", "dw")

    def run(i: int) -> None:
        if kinds[i] == "extra":
            assert extra is not None
            out[2] = extra()
        elif kinds[i] == "dx":
            out[0] = (_input_grad(d_plan, w, dy) if d_plan is not None else
                      _strided_pointwise_input(x.shape, w, dy, layout, strides, pads, groups,
                                               threads=1))
        elif w_plan is None:
            out[1] = _pointwise_filter(x, w.shape, dy, layout, strides, pads, groups,
                                       threads=1)
        elif IM2COL and (dw := _im2col_filter(x, w.shape, dy, layout, strides, dilations,
                                              pads, groups)) is not None:
            out[1] = dw
        else:
            out[1] = _filter_grad(w_plan, x, dy)

    _parallel.parallel_for(run, len(kinds))
    if out[0] is None or out[1] is None:  # a 1x1 geometry the GEMMs do not take
        return None
    return (out[0], out[1]) if extra is None else (out[0], out[1], out[2])


GEMM_MIN_FILTER = 128 * 128
"""Fewest filter elements (``cin * cout``) for which a 1x1 filter gradient is a GEMM
(:func:`_pointwise_filter`); smaller ones (ResNet-50's 64x64) stay oneDNN's."""


def _pointwise(layout: str, groups: int, arrays: tuple[np.ndarray, ...],
               filter_shape: Sequence[int], pads: Sequence[int] | None) -> bool:
    """Whether a call is a 1x1 NHWC float32 convolution's, unpadded, one group, with oneDNN
    loaded and a filter of at least :data:`GEMM_MIN_FILTER` elements (the GEMM paths)."""
    return (layout == "NHWC" and groups == 1 and len(filter_shape) == 4
            and all(a.dtype == np.float32 and a.ndim == 4 for a in arrays)
            and tuple(int(v) for v in filter_shape[:2]) == (1, 1)
            and int(filter_shape[2]) * int(filter_shape[3]) >= GEMM_MIN_FILTER
            and (pads is None or not any(int(p) for p in pads)) and _library() is not None)


def _pointwise_filter(x: np.ndarray, filter_shape: Sequence[int], dy: np.ndarray, layout: str,
                      strides: Sequence[int], pads: Sequence[int] | None, groups: int,
                      threads: int = 0) -> np.ndarray | None:
    """The filter gradient of a 1x1 NHWC convolution (no padding, one group, any stride) as
    one GEMM, ``dw[ci, co] = sum over (n, h, w) of x[n, h*s, w*s, ci] * dy[n, h, w, co]``, or
    ``None`` for any other call.  oneDNN 3.2's backward-weights kernel for these
    (``jit_1x1:avx512_core``) ran at 50-85 GFLOP/s per thread on ResNet-50's shapes at batch 8
    where ``dnnl_sgemm`` on the same product runs at 110-160 (:func:`_rows_product`; with more
    input than output channels and many rows as ``(dy.T @ x).T``)."""
    if not _pointwise(layout, groups, (x, dy), filter_shape, pads):
        return None
    ci, co = int(filter_shape[2]), int(filter_shape[3])
    n, h, w, c = x.shape
    sh, sw = (int(v) for v in strides)
    oh, ow = (h - 1) // sh + 1, (w - 1) // sw + 1
    if c != ci or dy.shape != (n, oh, ow, co) or n * oh * ow == 0:
        return None
    xs = x if (sh, sw) == (1, 1) else x[:, ::sh, ::sw, :]
    a = np.ascontiguousarray(xs).reshape(-1, ci)
    d = np.ascontiguousarray(dy).reshape(-1, co)
    if ci > co and a.shape[0] >= 3 * ci:  # the wider operand on the right: dnnl_sgemm ran
        # 1.2-1.3x faster so, where transposing the small result costs little
        return np.ascontiguousarray(_rows_product(d, a, threads).T).reshape(1, 1, ci, co)
    return _rows_product(a, d, threads).reshape(1, 1, ci, co)


IM2COL_MAX_PIXELS = 49
"""Most output pixels per image for which a one-thread filter gradient of a stride-1 NHWC
convolution with at least :data:`IM2COL_MIN_CHANNELS` input channels is im2col and one GEMM
(:func:`_im2col_filter`)."""
IM2COL_MIN_CHANNELS = 256


def _im2col_filter(x: np.ndarray, w_shape: Sequence[int], dy: np.ndarray, layout: str,
                   strides: Sequence[int], dilations: Sequence[int],
                   pads: Sequence[int] | None, groups: int) -> np.ndarray | None:
    """The filter gradient of a small-image stride-1 NHWC convolution (one group, no
    dilation, at most :data:`IM2COL_MAX_PIXELS` output pixels per image, at least
    :data:`IM2COL_MIN_CHANNELS` input channels: ResNet-50's 7x7 3x3 convolutions) on the
    calling thread as im2col and one GEMM, ``dw = cols.T @ dy`` with ``cols`` the
    ``(N*OH*OW, KH*KW*C)`` patches of the zero-padded input, or ``None`` for any other call.
    oneDNN 3.2's one-part backward-weights kernel (``jit:avx512_core``) ran at ~120 GFLOP/s
    there, the GEMM at ~150 with the copies."""
    if (layout != "NHWC" or groups != 1 or len(w_shape) != 4 or x.dtype != np.float32
            or dy.dtype != np.float32 or x.ndim != 4 or dy.ndim != 4
            or tuple(int(v) for v in strides) != (1, 1)
            or tuple(int(v) for v in dilations) != (1, 1)):
        return None
    kh, kw, ci, co = (int(v) for v in w_shape)
    n, h, wd, c = x.shape
    pt, pb, pl, pr = (int(v) for v in (pads if pads is not None else (0, 0, 0, 0)))
    oh, ow = h + pt + pb - kh + 1, wd + pl + pr - kw + 1
    if (c != ci or ci < IM2COL_MIN_CHANNELS or oh * ow > IM2COL_MAX_PIXELS or oh < 1
            or ow < 1 or dy.shape != (n, oh, ow, co)):
        return None
    xp = np.zeros((n, h + pt + pb, wd + pl + pr, ci), np.float32)
    xp[:, pt:pt + h, pl:pl + wd] = x
    cols = np.empty((n, oh, ow, kh, kw, ci), np.float32)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, :, i, j] = xp[:, i:i + oh, j:j + ow]
    out = _aligned(4 * kh * kw * ci * co).reshape(kh * kw * ci, co)
    _blas.sgemm(cols.reshape(-1, kh * kw * ci).T, np.ascontiguousarray(dy).reshape(-1, co), out)
    return out.reshape(kh, kw, ci, co)


IM2COL = True
"""Whether a pair's small-image filter gradient may take :func:`_im2col_filter`."""


def _strided_pointwise(w: np.ndarray, dy: np.ndarray, layout: str, strides: Sequence[int],
                       pads: Sequence[int] | None, groups: int) -> bool:
    """Whether a convolution's input gradient may take :func:`_strided_pointwise_input`'s
    GEMM: a 1x1 NHWC filter, no padding, one group, a stride above 1 on some axis."""
    return (_usable((w, dy), layout, strides, (1, 1), pads, groups)
            and tuple(int(v) for v in strides) != (1, 1)
            and _pointwise(layout, groups, (w, dy), w.shape, pads))


def _strided_pointwise_input(input_shape: Sequence[int], w: np.ndarray, dy: np.ndarray,
                             layout: str, strides: Sequence[int], pads: Sequence[int] | None,
                             groups: int, threads: int = 0) -> np.ndarray | None:
    """The input gradient of a strided 1x1 NHWC convolution (no padding, one group, a stride
    above 1 on some axis) as one GEMM into the pixels the convolution read, or ``None`` for
    any other call: ``dx[n, h*s, w*s, :] = dy[n, h, w, :] @ W.T``, every other pixel zero.
    oneDNN 3.2's kernel for these (``brgconv_strided``) ran at 55-97 GFLOP/s per thread on
    ResNet-50's shapes at batch 8 where ``dnnl_sgemm`` on the dense product runs at 110-130.
    The batch is split into :func:`pytfrt.backends.cpu._parallel.num_threads` parts (at most
    ``threads`` when given), each its GEMM and its scatter into its images."""
    if len(input_shape) != 4 or not _strided_pointwise(w, dy, layout, strides, pads, groups):
        return None
    sh, sw = (int(v) for v in strides)
    n, h, wd, ci = (int(v) for v in input_shape)
    co = int(w.shape[3])
    oh, ow = (h - 1) // sh + 1, (wd - 1) // sw + 1
    if int(w.shape[2]) != ci or dy.shape != (n, oh, ow, co) or n * oh * ow == 0:
        return None
    wt = np.ascontiguousarray(w).reshape(ci, co).T
    d = np.ascontiguousarray(dy).reshape(n, oh * ow, co)
    dense = _aligned(4 * n * oh * ow * ci).reshape(n, oh * ow, ci)
    dx = np.zeros((n, h, wd, ci), np.float32)
    picked = dx[:, ::sh, ::sw, :]
    k = _parallel.num_threads() if threads <= 0 else min(threads, _parallel.num_threads())
    if n * oh * ow * ci * co < PARALLEL_MIN_MACS:
        k = 1
    k = min(k, n)
    cuts = [n * i // k for i in range(k + 1)]

    def part(i: int) -> None:
        b0, b1 = cuts[i], cuts[i + 1]
        rows = (b1 - b0) * oh * ow
        _blas.sgemm(d[b0:b1].reshape(rows, co), wt, dense[b0:b1].reshape(rows, ci))
        picked[b0:b1] = dense[b0:b1].reshape(b1 - b0, oh, ow, ci)

    _parallel.parallel_for(part, k)
    return dx


def _rows_product(a: np.ndarray, d: np.ndarray, threads: int = 0) -> np.ndarray:
    """``a.T @ d`` of two C-contiguous float32 matrices with one row count, by ``dnnl_sgemm``
    on the threads: split by rows (each part its own partial, summed) or, when the result is
    large beside the rows (reading ``a`` twice costs less than summing partials), by 16-wide
    blocks of ``d``'s columns written in place.  ``threads`` caps the threads (0: all)."""
    rows, m = a.shape
    n = d.shape[1]
    out = _aligned(4 * m * n).reshape(m, n)  # sgemm's blocking follows the alignment
    k = _parallel.num_threads() if threads <= 0 else min(threads, _parallel.num_threads())
    if k < 2 or rows * m * n < PARALLEL_MIN_MACS:
        _blas.sgemm(a.T, d, out)
    elif rows < 3 * n:
        bounds = [16 * (-(-n * i // k) // 16) if i < k else n for i in range(k + 1)]
        _parallel.parallel_for(
            lambda i: _blas.sgemm(a.T, d[:, bounds[i]:bounds[i + 1]],
                                  out[:, bounds[i]:bounds[i + 1]]), k)
    else:
        parts = [out] + [_aligned(4 * m * n).reshape(m, n) for _ in range(k - 1)]
        cuts = [rows * i // k for i in range(k + 1)]
        _parallel.parallel_for(
            lambda i: _blas.sgemm(a[cuts[i]:cuts[i + 1]].T, d[cuts[i]:cuts[i + 1]], parts[i]), k)
        for extra in parts[1:]:
            out += extra
    return out


def forward(x: np.ndarray, w: np.ndarray, *, layout: str, strides: Sequence[int],
            dilations: Sequence[int], pads: Sequence[int] | None, groups: int,
            out: np.ndarray | None = None, bias: np.ndarray | None = None
            ) -> np.ndarray | None:
    """``conv2d(x, w) + bias`` (``bias`` float32 of the output channels, or ``None``; no
    epilogue) by oneDNN with the filter given per call: the
    primitives are kept per geometry, the filter is reordered into the primitive's format on
    each call (a training step's forward convolution, whose filter is a variable that changes
    every step: a :class:`pytfrt.backends.cpu._dnnl_conv.DnnlConv` would be made anew for
    each).  Written into ``out`` when it is a C-contiguous float32 array of the result's
    shape (it must not overlap ``x``).  ``None`` if oneDNN does not take this call (see the
    module docstring).  Thread-safe."""
    if not _usable((x, w), layout, strides, dilations, pads, groups) or len(w.shape) != 4:
        return None
    geo = _Geometry(layout, x.shape, w.shape, strides, dilations, pads, groups)
    if (min(geo.x_dims) < 1 or geo.oh < 1 or geo.ow < 1 or geo.cig * geo.groups != geo.x_dims[1]
            or geo.cout % geo.groups):
        return None
    if bias is not None:
        if bias.dtype != np.float32 or bias.shape != (geo.cout,):
            return None
        bias = np.ascontiguousarray(bias)
    plan = _plan("forward" if bias is None else "forward_bias", geo)
    if plan is None:
        return None
    shape = geo.y_shape(geo.x_dims[0])
    direct = (out is not None and out.shape == shape and out.dtype == np.float32
              and out.flags.c_contiguous and not np.may_share_memory(out, x))
    y = out if direct and out is not None else np.empty(shape, np.float32)
    _run_with_filter(plan, w, np.ascontiguousarray(x), y, bias)
    if out is not None and y is not out:
        out[...] = y
        return out
    return y
