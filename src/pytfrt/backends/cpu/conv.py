"""2-D convolution: planned forward pass with a fused epilogue, transpose and gradients.

The compute functions of the graph dialect's ``conv2d`` (plain and fused), ``conv2d_transpose``,
``conv2d_backprop_input`` and ``conv2d_backprop_filter`` (``docs/graph_dialect.md``).

Layouts: ``"NHWC"`` inputs with ``HWIO`` filters (``[kh, kw, cin / groups, cout]``) and
``"NCHW"`` inputs with ``OIHW`` filters (``[cout, cin / groups, kh, kw]``).  ``strides`` and
``dilations`` are ``(h, w)``; ``pads`` is ``(top, bottom, left, right)``; ``groups`` divides
``cin`` and ``cout`` (depthwise: ``groups == cin``).  The operation is cross-correlation, as in
TensorFlow, ONNX and PyTorch.

Usage: :func:`plan_conv2d` does all weight-dependent work once (validation, the filter packed
for each algorithm that may run it, the epilogue's bias and activation); :func:`conv2d` then
runs the plan on any input with the right channel count.  Algorithms (``docs/kernels.md``):

* ``gemm`` -- one GEMM for 1x1 convolutions (after gathering the sampled pixels if strided),
  else im2col into per-thread scratch and one GEMM per group; bias, residual and activation in
  one compiled pass over the output.
* ``winograd4`` / ``winograd2`` -- F(4x4, 3x3) / F(2x2, 3x3) for float32 3x3 stride-1
  undilated ungrouped convolutions (4x / 2.25x fewer multiplies; the transformed filter is 4x /
  1.8x the filter's size, which is what limits them on small images); epilogue fused into the
  output transform.  ``auto`` picks among ``gemm`` and the two by a cost model of GEMM work,
  filter traffic and transform work (:func:`estimate_ms`), per input shape.
* ``winograd_native`` -- F(4x4, 3x3) / F(2x2, 3x3) in C (AVX-512 or AVX2) for float32 NHWC 3x3
  stride-1 ungrouped convolutions with ReLU-like or no activation
  (:mod:`pytfrt.backends.cpu._winograd_native`: tile blocks in L2, one native call on both
  threads); ``auto`` runs it instead of ``dnnl`` for the shapes
  :func:`pytfrt.backends.cpu._winograd_native.wins` picks.
* ``depthwise`` -- direct compiled loops (``groups == cin``), epilogue fused.
* ``dnnl`` -- oneDNN's convolution primitive with the epilogue as fused post-ops
  (:mod:`pytfrt.backends.cpu._dnnl_conv`): float32 NHWC plans run it under ``auto`` whenever
  the oneDNN library is installed and has an optimised (non-reference) primitive for the shape
  (NCHW only when forced: oneDNN's NCHW kernels are slower than the built-in ones);
  the algorithms above are the fallback (measured on ResNet-50 and MobileNetV2,
  ``docs/kernels.md``); ``PYTFRT_CONV=builtin`` disables it.

GEMMs run in oneDNN when its library is installed, else NumPy (``pytfrt.backends.cpu._blas``).
float16 plans compute in float32 and round once.

Thread-safety: a :class:`ConvPlan` is immutable after :func:`plan_conv2d`; :func:`conv2d` may
run one plan from several threads at once (scratch space is per thread).  Steady-state calls
with ``out=`` allocate nothing.  Errors: :class:`pytfrt.backends.cpu.ops.OpError` naming the op
and what does not fit.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _conv_gemm as cg
from pytfrt.backends.cpu import (
    _depthwise,
    _dnnl_conv,
    _spin_pool,
    _winograd,
    _winograd_native,
    arena,
)
from pytfrt.backends.cpu._blas import sgemm
from pytfrt.backends.cpu._epilogue import epilogue_2d
from pytfrt.backends.cpu._geometry import (
    check_layout,
    check_out,
    check_rank4,
    from_nhwc_shape,
    nhwc_shape,
    out_size,
    pair,
    quad,
    same_pad,
    to_nhwc,
)
from pytfrt.backends.cpu.activations import check_activation
from pytfrt.backends.cpu.gemm import apply_epilogue
from pytfrt.backends.cpu.ops import OpError

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
ALGORITHMS = ("auto", "gemm", "winograd", "winograd2", "winograd4", "winograd_native",
              "depthwise", "dnnl")
GEMM_FLOPS = 200e9
"""Cost model: sustained GEMM FLOP/s of one core (oneDNN, AVX-512; measured)."""
WEIGHT_BYTES_PER_S = 20e9
"""Cost model: bandwidth for filter bytes that are not in cache."""
MOVE_S = {"gemm": 0.3e-9, "winograd2": 0.25e-9, "winograd4": 0.5e-9}
"""Cost model: seconds per element of im2col copy / Winograd transform (measured)."""
WINOGRAD_MIN_CHANNELS = 8
"""Fewest input and output channels for which a plan prepares Winograd."""


@dataclass(frozen=True, eq=False)
class ConvPlan:
    """A convolution with its filter prepared (by :func:`plan_conv2d`, run by :func:`conv2d`)."""

    layout: str
    """``"NHWC"`` or ``"NCHW"``."""
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int, int, int]
    """``(top, bottom, left, right)``."""
    groups: int
    kh: int
    kw: int
    cin: int
    cout: int
    dtype: np.dtype
    algorithm: str
    """What :func:`plan_conv2d` was asked for: ``auto`` or a forced algorithm."""
    winograd_ok: bool
    """Whether the plan may run Winograd (its transformed filters are made on first use)."""
    bias: np.ndarray | None
    activation: str
    alpha: float
    act_code: int
    compute: ConvPlan | None = None
    """For float16 plans: the float32 plan that does the work."""
    dnnl: _dnnl_conv.DnnlConv | None = None
    """The oneDNN primitives (float32 plans, when the library is installed)."""
    gemv_ok: bool = False
    """A 1x1, ungrouped, unpadded float32/float64 plan: on a 1x1 image :func:`conv2d` runs it
    as one small matrix product (squeeze-and-excite blocks)."""
    filter_shape: tuple[int, ...] = ()
    """The shape of the filter given to :func:`plan_conv2d` (HWIO or OIHW)."""
    wino_native: bool = False
    """Whether the plan may run the native Winograd (:mod:`_winograd_native`: a float32 NHWC
    3x3 stride-1 ungrouped plan with an activation it applies, on an AVX-512 or AVX2 CPU with a
    C compiler); :meth:`algorithm_for` says for which shapes ``auto`` does."""
    source: weakref.ref[np.ndarray] | None = None
    """A weak reference to the filter array given to :func:`plan_conv2d` when it was not
    copied (``copy=False``): its owner may drop it and rely on :meth:`filter` instead."""
    _cache: dict[Any, np.ndarray] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _native: dict[str, _winograd_native.WinoConv] = field(default_factory=dict, repr=False)

    def _made(self, key: Any, make: Any) -> np.ndarray:
        """``self._cache[key]``, made by ``make()`` on first use (thread-safe, read-only)."""
        u = self._cache.get(key)
        if u is None:
            with self._lock:
                u = self._cache.get(key)
                if u is None:
                    u = make()
                    u.flags.writeable = False
                    self._cache[key] = u
        return u

    @property
    def weights(self) -> np.ndarray:
        """The filter packed for ``gemm`` or ``depthwise``: NHWC ``(groups, kh*kw*cin_g,
        cout_g)``; NCHW ``(groups, cout_g, cin_g*kh*kw)``; depthwise ``(kh, kw, cin * m)``.

        Plans that run oneDNN's primitive make it only if a shape falls back to the built-in
        algorithms; otherwise it is what the plan holds (a view of the filter where possible).
        """
        return self._made("packed", lambda: _packed(self.filter(), self._attrs()))

    def gemv_matrix(self) -> np.ndarray:
        """The filter of a 1x1 ungrouped plan as the ``(cin, cout)`` matrix of its product
        with a 1x1 image (a view of the filter where the plan still has it; made once)."""
        def make() -> np.ndarray:
            f = self.filter()
            if self.layout == "NHWC":
                return f.reshape(self.cin, self.cout)
            return f.reshape(self.cout, self.cin).T
        return self._made("gemv", make)

    def winograd_filter(self, tile: int) -> np.ndarray:
        """The F(tile x tile, 3x3) transformed filter, made once (thread-safe)."""
        return self._made(tile, lambda: _winograd.filter_transform(
            _hwio(self.filter(), self.layout), tile))

    def native_winograd(self) -> _winograd_native.WinoConv:
        """The native Winograd of this plan (its filter transformed and packed on first use;
        thread-safe)."""
        wc = self._native.get("wino")
        if wc is None:
            with self._lock:
                wc = self._native.get("wino")
                if wc is None:
                    wc = self._native["wino"] = _winograd_native.WinoConv(
                        lambda: _hwio(self.filter(), self.layout), self.bias, self.pads,
                        self.act_code, self.alpha, channels=(self.cin, self.cout))
        return wc

    def filter(self) -> np.ndarray:
        """The filter as given to :func:`plan_conv2d` (HWIO for NHWC, OIHW for NCHW), read-only.

        The plan keeps one prepared copy of the filter, not the original: this reconstructs
        it exactly (a view of the packed filter, a reorder back from oneDNN's blocked format,
        or float32 -> float16 for half plans).  Thread-safe.
        """
        if self.compute is not None:
            w = self.compute.filter().astype(self.dtype)
            w.flags.writeable = False
            return w
        src = None if self.source is None else self.source()
        if src is not None:
            return src
        if self.dnnl is not None:
            return self.dnnl.user_filter()
        return _unpacked(self._cache["packed"], self._attrs(), self.filter_shape)

    def _attrs(self) -> dict[str, Any]:
        return dict(layout=self.layout, groups=self.groups, kh=self.kh, kw=self.kw,
                    cin=self.cin, cout=self.cout, algorithm=self.algorithm)

    @property
    def geometry(self) -> cg.Geometry:
        """``(kh, kw, sh, sw, dh, dw, pt, pb, pl, pr)``."""
        return (self.kh, self.kw, *self.strides, *self.dilations, *self.pads)

    def output_shape(self, x_shape: Sequence[int]) -> tuple[int, int, int, int]:
        """The output shape for an input shape (in the plan's layout).

        Raises:
            OpError: a channel count that does not fit, an input smaller than the window.
        """
        n, h, w, c = nhwc_shape(x_shape, self.layout)
        if c != self.cin:
            raise OpError(
                f"conv2d: input has {c} channels but the filter expects {self.cin} "
                f"(input shape {list(x_shape)}, layout {self.layout})"
            )
        oh = out_size(h, self.kh, self.strides[0], self.dilations[0], *self.pads[:2])
        ow = out_size(w, self.kw, self.strides[1], self.dilations[1], *self.pads[2:])
        assert oh is not None and ow is not None
        if oh <= 0 or ow <= 0:
            raise OpError(
                f"conv2d: input {list(x_shape)} is smaller than the {self.kh}x{self.kw} window "
                f"(dilations {list(self.dilations)}, pads {list(self.pads)})"
            )
        return from_nhwc_shape(n, oh, ow, self.cout, self.layout)

    def algorithm_for(self, out_shape: Sequence[int]) -> str:
        """The algorithm :func:`conv2d` runs for an output shape (in the plan's layout)."""
        if self.compute is not None:
            return self.compute.algorithm_for(out_shape)
        if self.wino_native and (self.algorithm == "winograd_native" or (
                self.algorithm == "auto"
                and _winograd_native.wins(self.cin, self.cout, out_shape[1], out_shape[2]))):
            return "winograd_native"
        if self.dnnl is not None and self.algorithm in ("auto", "dnnl"):
            return "dnnl"
        return self.builtin_algorithm_for(out_shape)

    def builtin_algorithm_for(self, out_shape: Sequence[int]) -> str:
        """The algorithm without oneDNN's primitive (its fallback for shapes it cannot run)."""
        if self.algorithm in ("winograd", "winograd_native"):  # native: its fallback
            costs = {a: estimate_ms(self, out_shape, a) for a in ("winograd2", "winograd4")}
            return min(costs, key=costs.__getitem__)
        if self.algorithm not in ("auto", "dnnl"):
            return self.algorithm
        if self.groups > 1 and self.groups == self.cin:
            return "depthwise"
        if not self.winograd_ok:
            return "gemm"
        costs = {a: estimate_ms(self, out_shape, a) for a in ("gemm", "winograd2", "winograd4")}
        return min(costs, key=costs.__getitem__)


def estimate_ms(plan: ConvPlan, out_shape: Sequence[int], algorithm: str) -> float:
    """The cost model behind ``auto``: estimated single-core milliseconds of one algorithm.

    GEMM FLOPs at :data:`GEMM_FLOPS`, filter bytes at :data:`WEIGHT_BYTES_PER_S` (at batch 1
    the transformed Winograd filters are what bounds it), data movement (im2col, transforms)
    at :data:`MOVE_S` per element.  Calibrated on ResNet-50's 3x3 layers at batch 1 and 8.
    """
    n, oh, ow, k = nhwc_shape(out_shape, plan.layout)
    c = plan.cin
    if algorithm == "gemm":
        taps = plan.kh * plan.kw
        flops = 2.0 * n * oh * ow * taps * c * k
        weights = 4.0 * taps * c * k
        moved = 0 if taps == 1 else n * oh * ow * taps * c
    else:
        tile = 4 if algorithm == "winograd4" else 2
        ne = (tile + 2) ** 2
        th, tw = _winograd.tiles(oh, ow, tile)
        t = n * th * tw
        flops = 2.0 * ne * t * c * k
        weights = 4.0 * ne * c * k
        moved = ne * t * (c + k)
    return 1e3 * (flops / GEMM_FLOPS + weights / WEIGHT_BYTES_PER_S + moved * MOVE_S[algorithm])


def _filter_dims(op: str, w_shape: Sequence[int], layout: str) -> tuple[int, int, int, int]:
    """``(kh, kw, cin_per_group, cout)`` of a filter shape in the layout's filter format."""
    if len(w_shape) != 4:
        raise OpError(f"{op}: filter must be rank 4, got shape {list(w_shape)}")
    if layout == "NHWC":
        kh, kw, ci, co = w_shape
    else:
        co, ci, kh, kw = w_shape
    if min(kh, kw, ci, co) <= 0:
        raise OpError(f"{op}: filter dimensions must be positive, got {list(w_shape)}")
    return int(kh), int(kw), int(ci), int(co)


def _hwio(w: np.ndarray, layout: str) -> np.ndarray:
    return w if layout == "NHWC" else w.transpose(2, 3, 1, 0)


def conv2d_output_shape(
    x_shape: Sequence[int | None],
    w_shape: Sequence[int],
    *,
    layout: str,
    strides: Sequence[int] = (1, 1),
    dilations: Sequence[int] = (1, 1),
    pads: Sequence[int] | None = None,
) -> tuple[int | None, ...]:
    """The output shape of a convolution; ``None`` (unknown) input dims give ``None``.

    Raises:
        OpError: bad attributes or ranks, or an input smaller than the window.
    """
    op = "conv2d"
    check_layout(op, layout)
    sh, sw = pair(op, "strides", strides)
    dh, dw = pair(op, "dilations", dilations)
    pt, pb, pl, pr = quad(op, pads)
    if len(x_shape) != 4:
        raise OpError(f"{op}: input must be rank 4, got shape {list(x_shape)}")
    kh, kw, _, co = _filter_dims(op, w_shape, layout)
    n, h, w, _ = nhwc_shape(list(x_shape), layout)  # type: ignore[arg-type]
    oh = out_size(h, kh, sh, dh, pt, pb)
    ow = out_size(w, kw, sw, dw, pl, pr)
    if (oh is not None and oh <= 0) or (ow is not None and ow <= 0):
        raise OpError(f"{op}: input {list(x_shape)} is smaller than the {kh}x{kw} window")
    return from_nhwc_shape(n, oh, ow, co, layout)  # type: ignore[arg-type]


def same_pads(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    *,
    layout: str,
    strides: Sequence[int] = (1, 1),
    dilations: Sequence[int] = (1, 1),
) -> tuple[int, int, int, int]:
    """TensorFlow's ``SAME`` padding as explicit ``(top, bottom, left, right)`` pads.

    Output ``ceil(in / stride)``; the total padding is split with the extra row/column at the
    end (bottom/right), as TensorFlow does.
    """
    op = "conv2d"
    check_layout(op, layout)
    sh, sw = pair(op, "strides", strides)
    dh, dw = pair(op, "dilations", dilations)
    kh, kw, _, _ = _filter_dims(op, w_shape, layout)
    _, h, w, _ = nhwc_shape(x_shape, layout)
    return (*same_pad(h, kh, sh, dh), *same_pad(w, kw, sw, dw))


def plan_conv2d(
    w: np.ndarray,
    *,
    layout: str,
    strides: Sequence[int] = (1, 1),
    dilations: Sequence[int] = (1, 1),
    pads: Sequence[int] | None = None,
    groups: int = 1,
    bias: np.ndarray | None = None,
    activation: str = "none",
    alpha: float = 0.0,
    algorithm: str = "auto",
    copy: bool = True,
) -> ConvPlan:
    """Prepare a convolution with filter ``w`` (and its fused epilogue) for :func:`conv2d`.

    Args:
        w: the filter, ``HWIO`` for ``NHWC``, ``OIHW`` for ``NCHW``; float16/32/64.  It is
            copied into the plan (later changes to ``w`` do not affect it) unless ``copy`` is
            false: then the plan may keep ``w`` itself until it has prepared its own form
            (the caller must not modify ``w``; :attr:`ConvPlan.source` says whether the plan
            still refers to it).  Either way the plan holds one prepared copy of the filter
            and :meth:`ConvPlan.filter` gives back the original.
        layout, strides, dilations, pads, groups: see the module docstring.
        bias: optional 1-D of length ``cout``, added per output channel.
        activation, alpha: applied last (:mod:`pytfrt.backends.cpu.activations`).
        algorithm: ``"auto"`` (chosen per input shape), or force ``"gemm"``, ``"winograd"``
            (float32 3x3 stride-1 undilated, groups 1; the tile size chosen per shape),
            ``"winograd2"``, ``"winograd4"``, ``"winograd_native"`` (float32 NHWC 3x3 stride-1,
            groups 1: :mod:`_winograd_native`, or where that cannot run -- no AVX2, no C
            compiler, another activation or layout -- the Numba ``"winograd"``),
            ``"depthwise"`` (``groups == cin``) or
            ``"dnnl"`` (float32, the oneDNN library installed) -- for tests and benchmarks.

    Raises:
        OpError: bad attributes, a filter that does not fit ``groups``, a bias of the wrong
            shape or dtype, an unknown activation, an algorithm that cannot run this conv.
    """
    op = "conv2d"
    check_layout(op, layout)
    if not isinstance(w, np.ndarray):
        raise OpError(f"{op}: filter must be an ndarray, got {type(w).__name__}")
    if w.dtype not in FLOAT_DTYPES:
        raise OpError(f"{op}: filter dtype must be float16, float32 or float64, got {w.dtype}")
    kh, kw, cig, cout = _filter_dims(op, w.shape, layout)
    if not isinstance(groups, int | np.integer) or groups < 1 or cout % groups:
        raise OpError(
            f"{op}: groups ({groups}) must be a positive divisor of the output channels ({cout})"
        )
    groups = int(groups)
    sh, sw = pair(op, "strides", strides)
    dh, dw = pair(op, "dilations", dilations)
    pt, pb, pl, pr = quad(op, pads)
    work = np.dtype(np.float32) if w.dtype == np.float16 else w.dtype
    code = check_activation(op, activation, work)
    if algorithm not in ALGORITHMS:
        raise OpError(f"{op}: algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if bias is not None:
        bias = np.asarray(bias)
        if bias.shape != (cout,) or bias.dtype != w.dtype:
            raise OpError(
                f"{op}: bias must have shape [{cout}] and dtype {w.dtype}, got "
                f"{list(bias.shape)} {bias.dtype}"
            )
        bias = bias.copy()
    attrs: dict[str, Any] = dict(
        layout=layout,
        strides=(sh, sw),
        dilations=(dh, dw),
        pads=(pt, pb, pl, pr),
        groups=groups,
        kh=kh,
        kw=kw,
        cin=cig * groups,
        cout=cout,
        activation=activation,
        alpha=float(alpha),
        act_code=code,
        algorithm=algorithm,
    )
    if w.dtype == np.float16:
        twin = _pack(w.astype(np.float32), None if bias is None else bias.astype(np.float32),
                     attrs, None)
        return ConvPlan(dtype=w.dtype, winograd_ok=False, bias=bias, compute=twin,
                        filter_shape=tuple(w.shape), **attrs)
    if copy:
        return _pack(np.array(w, order="C", copy=True), bias, attrs, None)
    wc = np.ascontiguousarray(w)
    return _pack(wc, bias, attrs, weakref.ref(w) if wc is w else None)


def _is_depthwise_packing(attrs: dict[str, Any]) -> bool:
    groups = attrs["groups"]
    return groups > 1 and groups == attrs["cin"] and attrs["algorithm"] in ("auto", "depthwise")


def _packed(w: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """The filter packed for ``gemm``/``depthwise`` (see :attr:`ConvPlan.weights`): a view of
    a C-contiguous ``w`` except for grouped, not depthwise, NHWC filters."""
    layout, groups = attrs["layout"], attrs["groups"]
    kh, kw, cout = attrs["kh"], attrs["kw"], attrs["cout"]
    if _is_depthwise_packing(attrs):
        return np.ascontiguousarray(_hwio(w, layout).reshape(kh, kw, cout))
    if layout == "NHWC":
        return np.ascontiguousarray(cg.group_matrices(w, groups))
    return np.ascontiguousarray(w.reshape(groups, cout // groups, -1))


def _unpacked(packed: np.ndarray, attrs: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of :func:`_packed`: the filter of ``shape`` (HWIO or OIHW)."""
    layout, groups = attrs["layout"], attrs["groups"]
    if _is_depthwise_packing(attrs):
        hwio = packed.reshape(attrs["kh"], attrs["kw"], 1, attrs["cout"])
        return hwio if layout == "NHWC" else hwio.transpose(3, 2, 0, 1)
    if layout == "NCHW":
        return packed.reshape(shape)
    kh, kw, cig, cout = shape
    return (packed.reshape(groups, kh, kw, cig, cout // groups)
            .transpose(1, 2, 3, 0, 4).reshape(shape))


def _pack(w: np.ndarray, bias: np.ndarray | None, attrs: dict[str, Any],
          source: weakref.ref[np.ndarray] | None) -> ConvPlan:
    """The plan for a C-contiguous float32/float64 filter ``w`` (owned by the plan, or the
    caller's array that ``source`` refers to): it keeps one prepared form of the filter."""
    op = "conv2d"
    layout, groups, algorithm = attrs["layout"], attrs["groups"], attrs["algorithm"]
    kh, kw, cin, cout = attrs["kh"], attrs["kw"], attrs["cin"], attrs["cout"]
    depthwise = groups > 1 and groups == cin
    if algorithm == "depthwise" and not depthwise:
        raise OpError(f"{op}: algorithm 'depthwise' needs groups == cin ({cin}), got {groups}")
    winograd_ok = (
        kh == kw == 3
        and attrs["strides"] == (1, 1)
        and attrs["dilations"] == (1, 1)
        and groups == 1
        and w.dtype == np.float32
    )
    wino_native = (w.dtype == np.float32 and layout == "NHWC"
                   and algorithm in ("auto", "winograd_native")
                   and _winograd_native.eligible(kh, kw, attrs["strides"], attrs["dilations"],
                                                 groups, attrs["act_code"]))
    if algorithm.startswith("winograd") and not winograd_ok:
        raise OpError(
            f"{op}: algorithm 'winograd' needs a float32 3x3 filter, stride 1, dilation 1, groups 1"
        )
    wants_winograd = algorithm.startswith("winograd") or (
        algorithm == "auto" and min(cin, cout) >= WINOGRAD_MIN_CHANNELS
    )
    use_winograd = winograd_ok and wants_winograd
    dnnl = None
    if w.dtype == np.float32 and (
        algorithm == "dnnl" or (algorithm == "auto" and layout == "NHWC")
    ):  # NCHW: oneDNN's im2col kernels measured 2x slower than the built-in ones
        dnnl = _dnnl_conv.make(w, bias, attrs)
    if algorithm == "dnnl" and dnnl is None:
        raise OpError(f"{op}: algorithm 'dnnl' needs float32 and the oneDNN library")
    gemv_ok = kh == kw == 1 and groups == 1 and attrs["pads"] == (0, 0, 0, 0) and (
        algorithm in ("auto", "gemm"))
    plan = ConvPlan(dtype=w.dtype, winograd_ok=use_winograd, bias=bias, dnnl=dnnl,
                    wino_native=wino_native,
                    gemv_ok=gemv_ok, filter_shape=tuple(w.shape), source=source, **attrs)
    if dnnl is None:  # the packed filter is what the plan holds (a view of w where possible)
        packed = _packed(w, attrs)
        packed.flags.writeable = False
        plan._cache["packed"] = packed
        if source is not None and not np.shares_memory(packed, w):
            object.__setattr__(plan, "source", None)  # the packed copy replaces w
    return plan


def conv2d(
    plan: ConvPlan,
    x: np.ndarray,
    residual: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``activation(conv(x, w) + bias + residual)`` for a :func:`plan_conv2d` plan.

    Args:
        plan: the prepared convolution.
        x: rank-4 input in the plan's layout, of the filter's dtype.
        residual: optional, exactly the output's shape and dtype.
        out: optional result buffer of the output's shape and dtype (written and returned;
            C-contiguous buffers are written directly, others through a temporary).  It
            must not overlap ``x``; it may *be* ``residual`` (the residual add in place).

    Raises:
        OpError: wrong rank, channel count or dtype; an input smaller than the window; a
            residual or ``out`` of the wrong shape or dtype.
    """
    if plan.gemv_ok and x.ndim == 4 and x.dtype == plan.dtype:
        y = _gemv(plan, x, residual, out)
        if y is not None:
            return y
    op = "conv2d"
    check_rank4(op, x)
    if x.dtype != plan.dtype:
        raise OpError(f"{op}: input dtype {x.dtype} differs from the filter dtype {plan.dtype}")
    shape = plan.output_shape(x.shape)
    if residual is not None:
        check_rank4(op, residual, "residual")
        if residual.shape != shape or residual.dtype != plan.dtype:
            raise OpError(
                f"{op}: residual must have the output shape {list(shape)} and dtype "
                f"{plan.dtype}, got {list(residual.shape)} {residual.dtype}"
            )
    check_out(op, out, shape, plan.dtype)
    if out is not None and np.may_share_memory(out, x):
        raise OpError(f"{op}: out must not overlap the input")
    if plan.compute is not None:  # float16: compute in float32, round once
        y32 = _forward(
            plan.compute,
            x.astype(np.float32),
            None if residual is None else residual.astype(np.float32),
            np.empty(shape, np.float32),
        )
        if out is None:
            return y32.astype(plan.dtype)
        np.copyto(out, y32, casting="same_kind")
        return out
    direct = out is not None and out.flags.c_contiguous
    y = out if direct else arena.empty(shape, plan.dtype)
    assert y is not None
    _forward(plan, x, residual, y)
    if out is not None and not direct:
        out[...] = y
        return out
    return y


def runner(plan: ConvPlan) -> Callable[..., np.ndarray]:
    """:func:`conv2d` bound to ``plan``, as ``run(x, residual=None, out=None)``: the same
    results and errors, with a short path for the call a compiled model makes on every call
    after its first -- a C-contiguous float32 input of a shape this plan ran on oneDNN's
    primitives before, a C-contiguous ``out`` of that shape's output shape, and no residual or
    the residual being ``out`` itself (the in-place residual of ``-tg-plan-buffers``).  That
    path checks only identities, shapes and that ``out`` does not overlap ``x``, then runs the
    shape's :meth:`~pytfrt.backends.cpu._dnnl_conv.DnnlConv.launcher` (measured per call in
    ResNet-50: ~10 us less Python on the calling thread while the helpers wait than through
    :func:`conv2d`, and a few more without ``ndarray.ctypes``).  Every other call goes
    through :func:`conv2d`.  Thread-safe.
    """
    dnnl = plan.dnnl
    wino = plan.wino_native and plan.compute is None
    if (not wino and dnnl is None) or plan.compute is not None or plan.algorithm not in (
            "auto", "dnnl", "winograd_native"):
        return lambda x, residual=None, out=None: conv2d(plan, x, residual, out)

    def native(x_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> tuple[Any, Any] | None:
        if not wino or plan.algorithm_for(y_shape) != "winograd_native":
            return None
        wc = plan.native_winograd()
        return wc.launcher(x_shape, y_shape, False), wc.launcher(x_shape, y_shape, True)

    return launch_runner(dnnl, lambda x, residual, out: conv2d(plan, x, residual, out), native)


def launch_runner(dnnl: _dnnl_conv.DnnlConv | None,
                  slow: Callable[[np.ndarray, np.ndarray | None, np.ndarray | None], np.ndarray],
                  native: Callable[[tuple[int, ...], tuple[int, ...]], tuple[Any, Any] | None]
                  | None = None) -> Callable[..., np.ndarray]:
    """``run(x, residual=None, out=None)``: ``slow(x, residual, out)`` (a convolution whose
    oneDNN primitives are ``dnnl``'s) with the short path of :func:`runner`: once ``slow`` has
    run a shape on the primitives, calls with C-contiguous float32 ``x`` of that shape, ``out``
    of its output shape not overlapping ``x`` and no residual or the residual being ``out`` go
    straight to the shape's :meth:`~pytfrt.backends.cpu._dnnl_conv.DnnlConv.launcher`.  Also
    the blocked convolutions' (:meth:`pytfrt.backends.cpu._dnnl_blocked.BlockedConv.runner`).
    ``native(x_shape, y_shape)``, if given, returns the launchers without and with the residual
    in ``out`` of a shape that does not run on ``dnnl`` (the native Winograd,
    :meth:`ConvPlan.native_winograd`), or ``None``.
    With the spin pool's C module those checks are native too
    (:func:`pytfrt.backends.cpu._spin_pool.native_runner`; ``run.kernel`` is then the same
    call in the compute function's form, ``kernel(x, plan, *residual, out=None)``).
    Thread-safe."""
    fast: dict[tuple[int, ...], tuple[tuple[int, ...], Any, Any]] = {}
    """Input shape -> (output shape, launcher without residual, launcher with the residual in
    ``out``), for the shapes :func:`conv2d` has run (a launcher is ``None`` until its
    primitives are made)."""
    nd, f32 = np.ndarray, np.dtype(np.float32)
    overlap = np.may_share_memory
    none, in_dst = _dnnl_conv.NO_RESIDUAL, _dnnl_conv.RESIDUAL_IN_DST

    def run(x: np.ndarray, residual: np.ndarray | None = None,
            out: np.ndarray | None = None) -> np.ndarray:
        if out is not None and x.__class__ is nd and out.__class__ is nd:
            entry = fast.get(x.shape)
            if (entry is not None and out.shape == entry[0] and x.dtype == f32
                    and out.dtype == f32 and x.flags.c_contiguous and out.flags.c_contiguous):
                go = entry[1] if residual is None else entry[2] if residual is out else None
                if go is not None and not overlap(out, x):
                    go(x, out)
                    return out
        y = slow(x, residual, out)
        if x.__class__ is nd and y.__class__ is nd:
            entry = fast.get(x.shape)
            plain, into = (None, None) if entry is None else entry[1:]
            own = None if native is None or entry is not None else native(x.shape, y.shape)
            if own is not None:
                plain, into = own
            elif dnnl is not None:
                if plain is None and dnnl.prepared(x.shape, none):
                    plain = dnnl.launcher(x.shape, none)
                if into is None and dnnl.prepared(x.shape, in_dst):
                    into = dnnl.launcher(x.shape, in_dst)
            if entry is None or plain is not entry[1] or into is not entry[2]:
                fast[x.shape] = (y.shape, plain, into)
        return y

    return _spin_pool.native_runner(fast, run)


class StemConv:
    """A prepared ``conv2d {layout = "NCHW>NHWC"}`` (:data:`_dnnl_conv.STEM`, made by
    ``-tg-conv-nchw-input``): ``act(conv(x, w) + bias)`` of an NCHW image ``x`` with an HWIO
    filter, NHWC result -- the NHWC convolution of ``transpose(x, [0, 2, 3, 1])``.

    On one thread (:func:`pytfrt.backends.cpu._parallel.num_threads`), where oneDNN has a fast
    kernel reading the NCHW image itself (float32, 16 output channels: :data:`_dnnl_conv.STEM`),
    that kernel runs and the image is never transposed.  Otherwise the image is transposed into
    a buffer this plan keeps per thread and input shape (the copy on both threads,
    :func:`pytfrt.backends.cpu._layout_copy.nchw_to_nhwc`) and an NHWC :func:`plan_conv2d` plan
    runs (split over the threads): oneDNN's NCHW kernel cannot be split into row bands (a band
    of NCHW rows is not dense and gets its reference kernel), and the one-part convolution
    measured no faster in MobileNetV3-small on two threads than the transpose and the split
    one (``docs/benchmarks.md``).  No residual.  Thread-safe; errors are :class:`OpError`
    naming ``conv2d``.
    """

    def __init__(self, w: np.ndarray, bias: np.ndarray | None, *, strides: Sequence[int],
                 dilations: Sequence[int], pads: Sequence[int], groups: int,
                 activation: str, alpha: float) -> None:
        from pytfrt.backends.cpu import _parallel

        kw: dict[str, Any] = dict(strides=tuple(strides), dilations=tuple(dilations),
                                  pads=tuple(pads), groups=groups, activation=activation,
                                  alpha=float(alpha))
        self._nhwc = plan_conv2d(w, layout="NHWC", bias=bias, **kw)  # validates the filter too
        self._run_nhwc = runner(self._nhwc)
        self._local = threading.local()
        self.dnnl: _dnnl_conv.DnnlConv | None = None
        """oneDNN's convolution from the NCHW image (``None``: not used by this plan)."""
        if (_parallel.num_threads() < 2 and w.dtype == np.float32 and groups == 1
                and w.ndim == 4 and w.shape[3] == _dnnl_conv.BLOCK):
            kh, kw_, cin, cout = (int(d) for d in w.shape)
            attrs = dict(layout=_dnnl_conv.STEM, kh=kh, kw=kw_, cin=cin, cout=cout, **kw)
            self.dnnl = _dnnl_conv.make(np.ascontiguousarray(w), bias, attrs)

    def _transposed(self, x: np.ndarray) -> np.ndarray:
        """``x`` in NHWC, in this thread's buffer for its shape and dtype."""
        from pytfrt.backends.cpu import _layout_copy

        shape = (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
        buf = getattr(self._local, "buf", None)
        if buf is None or buf.shape != shape or buf.dtype != x.dtype:
            buf = self._local.buf = arena.empty(shape, x.dtype)
        if x.dtype not in _layout_copy.FLOATS:
            np.copyto(buf, x.transpose(0, 2, 3, 1))
            return buf
        return _layout_copy.nchw_to_nhwc(x, buf)

    def __call__(self, x: np.ndarray, residual: np.ndarray | None = None,
                 out: np.ndarray | None = None) -> np.ndarray:
        """The convolution of the NCHW image ``x`` into ``out`` (NHWC; made if ``None``); a
        ``residual`` is an error (the pass never fuses one)."""
        if residual is not None:
            raise OpError("conv2d: layout NCHW>NHWC takes no residual")
        check_rank4("conv2d", x)
        n, c, h, w = x.shape
        shape = self._nhwc.output_shape((n, h, w, c))  # checks the channels and window
        dnnl = self.dnnl
        if (dnnl is not None and x.dtype == np.float32 and x.flags.c_contiguous
                and dnnl.ready(x.shape, _dnnl_conv.NO_RESIDUAL)):
            check_out("conv2d", out, shape, np.dtype(np.float32))
            if out is not None and np.may_share_memory(out, x):
                raise OpError("conv2d: out must not overlap the input")
            y = out if out is not None and out.flags.c_contiguous else np.empty(shape, np.float32)
            dnnl.forward(x, _dnnl_conv.NO_RESIDUAL, y)
            if out is not None and y is not out:
                out[...] = y
                return out
            return y
        if out is not None and np.may_share_memory(out, x):
            raise OpError("conv2d: out must not overlap the input")
        return self._run_nhwc(self._transposed(x), None, out)  # type: ignore[no-any-return]

    def runner(self) -> Callable[..., np.ndarray]:
        """``run(x, residual=None, out=None)``: :meth:`__call__`, through :func:`launch_runner`'s
        short path when oneDNN reads the NCHW image."""
        if self.dnnl is None:
            return self
        return launch_runner(self.dnnl, self)


DENSE_MAX_ROWS = 8
"""Most rows (batch items) for which :func:`dense_runner` runs a dense layer."""
DENSE_MIN_WEIGHTS = 1 << 19
"""Fewest weight elements (2 MB of float32) for which :func:`dense_runner` runs a dense layer:
smaller ones (an MLP's layers) cost less on the calling thread (``gemm.dense_rows``) than a
oneDNN call and a fork-join."""
DENSE_MAX_WEIGHTS = 1 << 23
"""Most weight elements (32 MB) for which :func:`dense_runner` prepares its own copy."""


def dense_runner(
    w: np.ndarray, bias: np.ndarray | None, activation: str, alpha: float
) -> Callable[[np.ndarray, np.ndarray | None], np.ndarray | None] | None:
    """``run(x, out)``: ``act(x @ w + bias)`` for a dense layer with the constant float32
    weight ``w`` (``(K, N)``, a transposed view is fine) at a small batch, as a oneDNN 1x1
    convolution over a ``1 x M`` image: the weight is prepared once in oneDNN's blocked
    layout, the activation is a post-op, and from :data:`_dnnl_conv.PARALLEL_MIN_MACS` the
    output channels are split over the threads (each streams half of the weight: a classifier
    head at batch 1 reads 2-5 MB of weights for 1-2 M multiply-adds).  Measured with cold
    weights at real-time priority: ``1 x 576 x 1024`` with hard-swish 131 -> 60 us against
    the general matmul path.

    ``None`` unless the weight is float32 with :data:`DENSE_MIN_WEIGHTS` to
    :data:`DENSE_MAX_WEIGHTS` elements, the bias (if any) float32 ``(N,)``, oneDNN is
    installed and expresses the activation.  ``run`` returns ``None`` (nothing computed)
    unless ``x`` is a C-contiguous float32 ``(M, K)`` with ``1 <= M <= DENSE_MAX_ROWS`` and
    ``out`` (if given) a C-contiguous float32 ``(M, N)`` not overlapping ``x``: the caller then
    takes its general path.  The plan (and its copy of the weight) is made on the first call
    that runs.  Thread-safe.
    """
    k, n = w.shape
    f32 = np.dtype(np.float32)
    if not (w.dtype == f32 and DENSE_MIN_WEIGHTS <= w.size <= DENSE_MAX_WEIGHTS
            and (bias is None or (bias.dtype == f32 and bias.shape == (n,)))
            and _dnnl_conv.available()
            and (activation == "none" or _dnnl_conv.eltwise_for(activation, alpha) is not None)):
        return None
    lock = threading.Lock()
    made: list[Any] = []
    none = _dnnl_conv.NO_RESIDUAL
    launchers: dict[int, Any] = {}
    """Rows -> the primitives' launcher (:meth:`_dnnl_conv.DnnlConv.launcher`)."""

    def conv() -> Any:
        with lock:
            if not made:
                hwio = np.ascontiguousarray(w).reshape(1, 1, k, n)
                plan = plan_conv2d(hwio, layout="NHWC", bias=bias, activation=activation,
                                   alpha=alpha, copy=False)
                made.append(plan.dnnl)
        return made[0]

    def run(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray | None:
        if x.ndim != 2 or x.dtype != f32 or not x.flags.c_contiguous:
            return None
        m = x.shape[0]
        if not 1 <= m <= DENSE_MAX_ROWS or x.shape[1] != k:
            return None
        if out is None:
            out = np.empty((m, n), f32)
        elif (out.shape != (m, n) or out.dtype != f32 or not out.flags.c_contiguous
              or np.may_share_memory(out, x)):
            return None
        go = launchers.get(m)
        if go is None:
            dnnl = made[0] if made else conv()
            shape = (1, 1, m, k)
            if dnnl is None or not (dnnl.prepared(shape, none) or dnnl.ready(shape, none)):
                return None
            go = launchers[m] = dnnl.launcher(shape, none)
        go(x.reshape(1, 1, m, k), out.reshape(1, 1, m, n))
        return out

    return run


GEMV_SGEMM_MACS = 1 << 16
"""Above this many multiply-adds a 1x1-spatial convolution's product runs in oneDNN's GEMM
(single-threaded) rather than NumPy's (whose OpenBLAS may thread it)."""


def _gemv(plan: ConvPlan, x: np.ndarray, residual: np.ndarray | None,
          out: np.ndarray | None) -> np.ndarray | None:
    """A 1x1 convolution of a 1x1 image (squeeze-and-excite): ``act(x[n, :] @ W + b [+ r])``
    as one small matrix product and the epilogue, without the primitive's per-call set-up.
    ``None`` when the operands are not the simple case (the caller takes the general path,
    which also reports errors)."""
    if plan.layout == "NHWC":
        n, h, w, c = x.shape
    else:
        n, c, h, w = x.shape
    if h != 1 or w != 1 or c != plan.cin:
        return None
    cout = plan.cout
    shape = (n, 1, 1, cout) if plan.layout == "NHWC" else (n, cout, 1, 1)
    if residual is not None and (residual.shape != shape or residual.dtype != plan.dtype):
        return None
    if out is None:
        y = np.empty(shape, plan.dtype)
    elif out.shape == shape and out.dtype == plan.dtype and out.flags.c_contiguous:
        if np.may_share_memory(out, x):
            return None
        y = out
    else:
        return None
    if residual is not None and np.may_share_memory(residual, y):
        residual = residual.copy()  # the product overwrites y first
    wm = plan.gemv_matrix()
    x2, y2 = x.reshape(n, c), y.reshape(n, cout)
    if plan.dtype == np.float32 and n * c * cout > GEMV_SGEMM_MACS:
        sgemm(x2, wm, y2)
    else:
        np.matmul(x2, wm, out=y2)
    epilogue_2d(y2, plan.bias, None if residual is None else residual.reshape(n, cout),
                plan.act_code, plan.alpha)
    return y


def _forward(
    plan: ConvPlan, x: np.ndarray, residual: np.ndarray | None, y: np.ndarray
) -> np.ndarray:
    """Run ``plan`` into the C-contiguous ``y`` (shapes and dtypes checked)."""
    algo = plan.algorithm_for(y.shape)
    if algo == "winograd_native":
        plan.native_winograd().run(x, residual, y)
        return y
    if algo == "dnnl":
        assert plan.dnnl is not None
        mode = _dnnl_conv.NO_RESIDUAL
        if residual is not None:
            if residual.ctypes.data == y.ctypes.data and residual.strides == y.strides:
                mode = _dnnl_conv.RESIDUAL_IN_DST  # y holds it: the sum post-op
            elif (plan.layout == "NHWC" and residual.flags.c_contiguous
                  and not np.may_share_memory(residual, y)):
                mode = _dnnl_conv.RESIDUAL_OPERAND  # read where it is: no copy
            else:
                mode = _dnnl_conv.RESIDUAL_IN_DST
        if mode == _dnnl_conv.RESIDUAL_OPERAND and not plan.dnnl.ready(x.shape, mode):
            mode = _dnnl_conv.RESIDUAL_IN_DST  # this kernel cannot read it: copy it into y
        if plan.dnnl.ready(x.shape, mode):
            xc = np.ascontiguousarray(x)
            if mode == _dnnl_conv.RESIDUAL_IN_DST and residual is not None and not (
                residual.ctypes.data == y.ctypes.data and residual.strides == y.strides
            ):  # oneDNN's sum post-op adds what y holds
                np.copyto(y, residual)
            plan.dnnl.forward(xc, mode, y, residual)
            return y
        algo = plan.builtin_algorithm_for(y.shape)
    nhwc = plan.layout == "NHWC"
    beta = 0.0
    if residual is not None and np.may_share_memory(residual, y):
        same = residual.ctypes.data == y.ctypes.data and residual.strides == y.strides
        if not same:
            residual = residual.copy()
        elif algo == "gemm":  # y already holds the residual: accumulate the GEMM onto it
            residual, beta = None, 1.0
    if algo != "gemm":
        xv, yv = to_nhwc(x, plan.layout), to_nhwc(y, plan.layout)
        rv = None if residual is None else to_nhwc(residual, plan.layout)
        if algo.startswith("winograd"):
            _winograd.forward(
                xv,
                plan.winograd_filter(4 if algo == "winograd4" else 2),
                plan.pads[0],
                plan.pads[2],
                plan.bias,
                rv,
                plan.act_code,
                plan.alpha,
                yv,
            )
        else:
            _depthwise.depthwise(
                xv, plan.weights, plan.geometry, plan.bias, rv, plan.act_code, plan.alpha, yv
            )
        return y
    xc = np.ascontiguousarray(x)
    args = (plan.bias, residual, plan.act_code, plan.alpha, beta)
    if nhwc:
        cg.forward_nhwc(xc, plan.weights, plan.geometry, y, *args)
    else:
        cg.forward_nchw(xc, plan.weights, plan.geometry, y, *args)
    return y


# -- transpose and gradients -----------------------------------------------------------------


def _attrs(
    op: str,
    layout: str,
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int] | None,
    groups: int,
) -> tuple[int, int, int, int, int, int, int, int]:
    check_layout(op, layout)
    sh, sw = pair(op, "strides", strides)
    dh, dw = pair(op, "dilations", dilations)
    pt, pb, pl, pr = quad(op, pads)
    if not isinstance(groups, int | np.integer) or groups < 1:
        raise OpError(f"{op}: groups must be a positive integer, got {groups!r}")
    return sh, sw, dh, dw, pt, pb, pl, pr


def _shape4(op: str, name: str, shape: Sequence[int] | np.ndarray) -> tuple[int, int, int, int]:
    vals = [int(v) for v in np.asarray(shape).reshape(-1)]
    if len(vals) != 4 or min(vals) < 0:
        raise OpError(f"{op}: {name} must be four non-negative sizes, got {vals}")
    return vals[0], vals[1], vals[2], vals[3]


def conv2d_backprop_input(
    input_shape: Sequence[int] | np.ndarray,
    w: np.ndarray,
    dy: np.ndarray,
    *,
    layout: str,
    strides: Sequence[int] = (1, 1),
    dilations: Sequence[int] = (1, 1),
    pads: Sequence[int] | None = None,
    groups: int = 1,
) -> np.ndarray:
    """The gradient of ``conv2d(x, w)`` with respect to ``x`` (of shape ``input_shape``).

    ``dy`` has the convolution's output shape for ``input_shape``.

    Raises:
        OpError: shapes that do not fit each other or the attributes.
    """
    op = "conv2d_backprop_input"
    sh, sw, dh, dw, pt, pb, pl, pr = _attrs(op, layout, strides, dilations, pads, groups)
    in_shape = _shape4(op, "input_shape", input_shape)
    check_rank4(op, w, "filter")
    check_rank4(op, dy, "dy")
    if w.dtype != dy.dtype:
        raise OpError(f"{op}: filter dtype {w.dtype} differs from dy dtype {dy.dtype}")
    kh, kw, cig, cout = _filter_dims(op, w.shape, layout)
    n, h, wd, cin = nhwc_shape(in_shape, layout)
    if cin != cig * groups or cout % groups:
        raise OpError(
            f"{op}: filter {list(w.shape)} with groups={groups} does not fit input shape "
            f"{list(in_shape)}"
        )
    expected = conv2d_output_shape(
        in_shape, w.shape, layout=layout, strides=(sh, sw), dilations=(dh, dw), pads=pads
    )
    if dy.shape != expected:
        raise OpError(
            f"{op}: dy has shape {list(dy.shape)} but the convolution of {list(in_shape)} "
            f"gives {list(expected)}"
        )
    hwio = _hwio(w, layout)
    w_mat = cg.group_matrices(hwio, groups)
    geo = (kh, kw, sh, sw, dh, dw, pt, pb, pl, pr)
    dx = cg.conv_backprop_input(
        np.ascontiguousarray(to_nhwc(dy, layout)), w_mat, geo, (n, h, wd, cin)
    )
    return np.ascontiguousarray(dx if layout == "NHWC" else dx.transpose(0, 3, 1, 2))


def conv2d_backprop_filter(
    x: np.ndarray,
    filter_shape: Sequence[int] | np.ndarray,
    dy: np.ndarray,
    *,
    layout: str,
    strides: Sequence[int] = (1, 1),
    dilations: Sequence[int] = (1, 1),
    pads: Sequence[int] | None = None,
    groups: int = 1,
) -> np.ndarray:
    """The gradient of ``conv2d(x, w)`` with respect to ``w`` (of shape ``filter_shape``).

    Raises:
        OpError: shapes that do not fit each other or the attributes.
    """
    op = "conv2d_backprop_filter"
    sh, sw, dh, dw, pt, pb, pl, pr = _attrs(op, layout, strides, dilations, pads, groups)
    f_shape = _shape4(op, "filter_shape", filter_shape)
    check_rank4(op, x)
    check_rank4(op, dy, "dy")
    if x.dtype != dy.dtype:
        raise OpError(f"{op}: input dtype {x.dtype} differs from dy dtype {dy.dtype}")
    kh, kw, cig, cout = _filter_dims(op, f_shape, layout)
    _, _, _, cin = nhwc_shape(x.shape, layout)
    if cin != cig * groups or cout % groups:
        raise OpError(
            f"{op}: filter shape {list(f_shape)} with groups={groups} does not fit input "
            f"shape {list(x.shape)}"
        )
    expected = conv2d_output_shape(
        x.shape, f_shape, layout=layout, strides=(sh, sw), dilations=(dh, dw), pads=pads
    )
    if dy.shape != expected:
        raise OpError(
            f"{op}: dy has shape {list(dy.shape)} but the convolution of {list(x.shape)} "
            f"gives {list(expected)}"
        )
    geo = (kh, kw, sh, sw, dh, dw, pt, pb, pl, pr)
    dw_hwio = cg.conv_backprop_filter(
        np.ascontiguousarray(to_nhwc(x, layout)),
        np.ascontiguousarray(to_nhwc(dy, layout)),
        geo,
        groups,
    )
    return dw_hwio if layout == "NHWC" else np.ascontiguousarray(dw_hwio.transpose(3, 2, 0, 1))


def conv2d_transpose_output_shape(
    x_shape: Sequence[int | None],
    w_shape: Sequence[int],
    *,
    layout: str,
    strides: Sequence[int] = (1, 1),
    dilations: Sequence[int] = (1, 1),
    pads: Sequence[int] | None = None,
    groups: int = 1,
    output_padding: Sequence[int] = (0, 0),
) -> tuple[int | None, ...]:
    """The output shape of :func:`conv2d_transpose` (``None`` input dims give ``None``).

    Spatial size ``(in - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + 1 +
    output_padding``; channels ``groups * <filter's output channels per group>``.
    """
    op = "conv2d_transpose"
    sh, sw, dh, dw, pt, pb, pl, pr = _attrs(op, layout, strides, dilations, pads, groups)
    oph, opw = pair(op, "output_padding", output_padding, minimum=0)
    if oph >= sh or opw >= sw:
        raise OpError(
            f"{op}: output_padding {[oph, opw]} must be smaller than the strides {[sh, sw]}"
        )
    if len(x_shape) != 4:
        raise OpError(f"{op}: input must be rank 4, got shape {list(x_shape)}")
    # The transpose's filter is the forward convolution's filter (HWIO / OIHW), whose
    # "input channels" are the transpose's output channels per group.
    kh, kw, co_g, ci = _filter_dims(op, w_shape, layout)
    n, h, w, c = nhwc_shape(list(x_shape), layout)  # type: ignore[arg-type]
    if c is not None and c != ci:
        raise OpError(f"{op}: input has {c} channels but the filter expects {ci}")
    if ci % groups:
        raise OpError(f"{op}: groups ({groups}) must divide the input channels ({ci})")

    def size(v: int | None, k: int, s: int, d: int, p0: int, p1: int, op_: int) -> int | None:
        return None if v is None else (v - 1) * s - p0 - p1 + d * (k - 1) + 1 + op_

    oh = size(h, kh, sh, dh, pt, pb, oph)
    ow = size(w, kw, sw, dw, pl, pr, opw)
    if (oh is not None and oh <= 0) or (ow is not None and ow <= 0):
        raise OpError(f"{op}: the pads {list((pt, pb, pl, pr))} leave an empty output")
    return from_nhwc_shape(n, oh, ow, co_g * groups, layout)  # type: ignore[arg-type]


def conv2d_transpose(
    x: np.ndarray,
    w: np.ndarray,
    *,
    layout: str,
    strides: Sequence[int] = (1, 1),
    dilations: Sequence[int] = (1, 1),
    pads: Sequence[int] | None = None,
    groups: int = 1,
    output_padding: Sequence[int] = (0, 0),
    bias: np.ndarray | None = None,
    activation: str = "none",
    alpha: float = 0.0,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Transposed ("de-") convolution: the input gradient of the matching forward conv.

    The filter is ``HWOI`` for ``NHWC`` (TensorFlow's ``[kh, kw, cout / groups, cin]``) and
    ``IOHW`` for ``NCHW`` (ONNX's ``[cin, cout / groups, kh, kw]``).  ``output_padding`` adds
    rows/columns at the bottom/right (ONNX's attribute; TF's explicit output shape maps to it).

    Raises:
        OpError: bad attributes, ranks, dtypes or shapes.
    """
    op = "conv2d_transpose"
    check_rank4(op, x)
    check_rank4(op, w, "filter")
    if x.dtype != w.dtype or w.dtype not in FLOAT_DTYPES:
        raise OpError(f"{op}: input and filter must have one float dtype, got {x.dtype}, {w.dtype}")
    shape = conv2d_transpose_output_shape(
        x.shape,
        w.shape,
        layout=layout,
        strides=strides,
        dilations=dilations,
        pads=pads,
        groups=groups,
        output_padding=output_padding,
    )
    int_shape = tuple(int(d) for d in shape)  # type: ignore[arg-type]
    code = check_activation(
        op, activation, np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
    )
    cout = int_shape[3] if layout == "NHWC" else int_shape[1]
    if bias is not None and (np.shape(bias) != (cout,) or np.asarray(bias).dtype != x.dtype):
        raise OpError(f"{op}: bias must have shape [{cout}] and dtype {x.dtype}")
    check_out(op, out, int_shape, x.dtype)
    y = conv2d_backprop_input(
        int_shape,
        w,
        x,
        layout=layout,
        strides=strides,
        dilations=dilations,
        pads=pads,
        groups=groups,
    )
    if bias is not None or code:
        yn = np.ascontiguousarray(to_nhwc(y, layout))
        b = None if bias is None else np.asarray(bias)
        if y.dtype == np.float16:
            y32 = yn.astype(np.float32)
            apply_epilogue(y32, None if b is None else b.astype(np.float32), None, code, alpha)
            yn = y32.astype(np.float16)
        else:
            apply_epilogue(yn, b, None, code, alpha)
        y = yn if layout == "NHWC" else np.ascontiguousarray(yn.transpose(0, 3, 1, 2))
    if out is not None:
        out[...] = y
        return out
    return y
