"""Convolutions, layout reorders and global average pooling on channel-blocked activations
(oneDNN's ``nChw16c``; pytfrt's layout name ``NCHW16c``).

``-tg-dnnl-blocked`` (``pytfrt.compiler.passes.blocked``) keeps runs of convolutions on small
images -- ResNet-50's 14x14 and 7x7 stages -- in this layout: an NHWC image of ``C`` channels (a
multiple of 16) stored as a C-contiguous ``(N, C / 16, H, W, 16)`` array.  On it oneDNN 3.2 runs
its ``jit_1x1:avx512_core`` / ``jit:avx512_core`` kernels (2-5% faster than ``brgconv`` on
NHWC for those stages, ``docs/benchmarks.md``), and at batch 1 a convolution splits into runs
of whole output-channel blocks, each a dense run of the output that its part writes in place
(:meth:`pytfrt.backends.cpu._dnnl_conv.DnnlConv._blocked_split`).  oneDNN has only its
reference kernel for a convolution between NHWC and ``nChw16c``, so the pass puts a
``reorder_layout`` where a run starts or a value leaves it.

What is here:

* :class:`BlockedConv` -- the prepared ``conv2d {layout = "NCHW16c"}`` (filter HWIO, bias,
  fused epilogue and residual as for NHWC); without oneDNN, or for a shape oneDNN has only its
  reference kernel for, it reorders to NHWC and runs the ordinary NHWC plan;
* :func:`reorder` -- ``NHWC <-> NCHW16c`` (a oneDNN reorder primitive per shape, or NumPy);
* :func:`global_avg_pool` -- the mean over H and W of a blocked image, ``(N, C / 16, 1, 1, 16)``
  (the same bytes as the NHWC ``(N, 1, 1, C)`` result).

Thread-safety: every function and :class:`BlockedConv` may be called from several threads at
once; they write only their ``out`` arrays.  Errors: shapes and dtypes that do not fit raise
:class:`pytfrt.backends.cpu.ops.OpError`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _dnnl_conv as dc
from pytfrt.backends.cpu import _parallel
from pytfrt.backends.cpu.ops import OpError

LAYOUT = dc.BLOCKED
"""The layout name (``"NCHW16c"``)."""
BLOCK = dc.BLOCK
"""Channels per block (16: one AVX-512 register of float32)."""
BLOCKED_MAX_PIXELS = 196
"""``-tg-dnnl-blocked`` keeps convolutions whose input and output images have at most this
many pixels (14x14) in the blocked layout (0: the pass is off).  Measured on ResNet-50's
bottleneck chains (``benchmarks/conv_variants.py chain``): 14x14 and 7x7 2-5% faster blocked,
28x28 level on one thread and 20% slower on two (split by channels, each part reading the whole
input), ``docs/benchmarks.md``."""
BLOCKED_WINDOW_MIN_PIXELS = 100
"""Convolutions with a window larger than 1x1 inside a blocked run run blocked too (oneDNN's
``jit:avx512_core`` on ``nChw16c``) when their output has at least this many pixels; smaller
ones stay NHWC (``brgconv``) between a reorder out of the run and one back into it.  Per layer
in ResNet-50 on one thread (thread time, both models in one process, 30 calls): blocked, the 3x3
layers took 1.03x their NHWC time at 14x14 (256 channels, +47 us), 1.08x at 7x7 (512, +144 us)
and 1.09x from 14x14 to 7x7 with stride 2 (+180 us), against 0.86-0.91x for the 1x1 layers that
widen to 1024 / 2048 channels or narrow 2048 -> 512 and for the stride-2 1x1 shortcut; the two
reorders around a 14x14x256 layer cost ~64 us in the model, around a 7x7x512 one ~55 (~90 for
the stride-2 layer's).  So 14x14 (196 pixels) blocked, 7x7 (49) NHWC."""
BLOCKED_MIN_MACS_PER_MOVED = 1000
"""Fewest multiply-adds of a blocked run's convolutions per element its reorders copy.  In
ResNet-50 a reordered element cost 0.6-0.7 ns of one thread inside the model and a blocked 1x1
layer gained ~8% of ~0.012 ns per multiply-add (~0.001 ns): break-even near 600.  ResNet-50's
stages 3 and 4 have more than 3,000 per element (7 reorders); MobileNetV3-small's 7x7
projections (their inputs from depthwise layers, each reordered) 100-200."""
BLOCKED_STRIDED_ENTRY = True
"""Whether a 1x1 convolution without padding and of stride 2 (or more) from a larger image
into a blocked run joins it (``-tg-dnnl-blocked``'s *strided entry*, ResNet-50's stage-3
shortcut, 28x28x512 -> 14x14x1024): its input is reordered *subsampled* -- only the pixels
the convolution reads, a quarter of them -- into the blocked layout, where it runs as a 1x1
convolution of stride 1 (``jit_1x1``) writing the run's first blocked value directly, instead
of ``brgconv_1x1`` on NHWC followed by a reorder of its four-times-larger output."""
BLOCKED_MIN_CONVS = 3
"""Fewest convolutions in a connected blocked run (a shorter run costs its reorders and gains
little)."""


def blocked_shape(nhwc: tuple[int, ...]) -> tuple[int, int, int, int, int]:
    """The ``NCHW16c`` shape of an NHWC shape (``C`` a multiple of :data:`BLOCK`)."""
    n, h, w, c = nhwc
    return (n, c // BLOCK, h, w, BLOCK)


def nhwc_shape(blocked: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The NHWC shape of an ``NCHW16c`` shape."""
    n, cb, h, w, b = blocked
    return (n, h, w, cb * b)


def _check(op: str, x: np.ndarray, rank: int) -> None:
    if x.ndim != rank or x.dtype != np.float32 or (rank == 5 and x.shape[4] != BLOCK) or (
            rank == 4 and x.shape[3] % BLOCK):
        want = ("(N, C/16, H, W, 16)" if rank == 5 else "(N, H, W, C) with C a multiple of 16")
        raise OpError(f"{op}: needs a float32 {want} array, got {x.dtype} {list(x.shape)}")


# -- reorders ------------------------------------------------------------------------------

_Launch = Callable[[np.ndarray, np.ndarray], None]
_reorders: dict[tuple[str, tuple[int, ...], tuple[int, int], int], _Launch | None] = {}
_reorder_prims: list[dc._Prim] = []
"""The reorder primitives of :data:`_reorders` (kept alive with them)."""
_reorder_lock = threading.Lock()
MAX_REORDER_SHAPES = 64
"""Most (direction, shape) pairs whose oneDNN reorder is kept (further ones use NumPy)."""


SPLIT_MIN_ELEMENTS = 1 << 14
"""Fewest elements of an image reordered on both threads (one part per thread: at batch 1
runs of whole 16-channel blocks, else batch items)."""


def _reorder_prim(lib: dc._Lib, to_blocked: bool, nhwc: tuple[int, ...], n0: int, n1: int,
                  c0: int, c1: int, strides: tuple[int, int] = (1, 1)) -> dc._Prim:
    """The reorder of batch items ``[n0, n1)`` and channels ``[c0, c1)`` (whole blocks; all
    channels unless ``n1 - n0 == 1``) of an ``nhwc`` image, NHWC <-> blocked; NHWC -> blocked
    may read every ``strides[0]``-th row and ``strides[1]``-th column (:func:`reorder`).

    Raises:
        RuntimeError: oneDNN returned an error, or has only its reference reorder.
    """
    from pytfrt.backends.cpu._dnnl_layout import reorder_primitive

    n, h, w, c = nhwc
    sh, sw = strides
    oh, ow = -(-h // sh), -(-w // sw)
    dims = (n1 - n0, c1 - c0, oh, ow)
    plain = lib.strided_md(dims, (h * w * c, 1, sh * w * c, sw * c))
    blocked = dc.activation_md(lib, LAYOUT, dims)
    plain_off, blocked_off = 4 * (n0 * h * w * c + c0), 4 * (n0 * c * oh * ow + c0 * oh * ow)
    if to_blocked:
        return reorder_primitive(lib, plain, blocked, plain_off, blocked_off)
    return reorder_primitive(lib, blocked, plain, blocked_off, plain_off)


def _reorder_launcher(to_blocked: bool, nhwc: tuple[int, ...],
                      strides: tuple[int, int] = (1, 1)
                      ) -> Callable[[np.ndarray, np.ndarray], None] | None:
    """``go(x, y)`` running oneDNN's reorder of one shape (NHWC ``nhwc``, subsampled by
    ``strides`` into the blocked layout) for C-contiguous ``x`` and ``y`` (split over the
    threads from :data:`SPLIT_MIN_ELEMENTS` elements written, else on the calling thread), or
    ``None`` (no oneDNN, or only its reference reorder)."""
    key = ("to" if to_blocked else "from", nhwc, strides, SPLIT_MIN_ELEMENTS)
    return _kept(_reorders, key, lambda: _make_reorder(to_blocked, nhwc, strides))


def _kept(cache: dict[Any, _Launch | None], key: Any, make: Callable[[], _Launch | None]
          ) -> _Launch | None:
    """``cache[key]``, made by ``make()`` on first use under one lock (kept even if
    ``None``); ``None`` without making anything once :data:`MAX_REORDER_SHAPES` are kept."""
    if key in cache:
        return cache[key]
    with _reorder_lock:
        if key not in cache:
            if len(cache) >= MAX_REORDER_SHAPES:
                return None
            cache[key] = make()
        return cache[key]


def _make_reorder(to_blocked: bool, nhwc: tuple[int, ...], strides: tuple[int, int]
                  ) -> _Launch | None:
    """:func:`_reorder_launcher`'s launcher, made (called with :data:`_reorder_lock` held)."""
    lib = dc.library()
    if lib is None:
        return None
    n, h, w, c = nhwc
    made: list[dc._Prim] = []
    go: Callable[[np.ndarray, np.ndarray], None] | None = None
    try:
        whole = _reorder_prim(lib, to_blocked, nhwc, 0, n, 0, c, strides)
        made.append(whole)
        one = dc.row_launcher(lib, whole, threading.Lock())
        go = one
        k = min(_parallel.num_threads(), n if n > 1 else c // BLOCK)
        written = n * -(-h // strides[0]) * -(-w // strides[1]) * c
        if k >= 2 and written >= SPLIT_MIN_ELEMENTS:
            if n > 1:
                bounds = [n * i // k for i in range(k + 1)]
                parts = [(b0, b1, 0, c) for b0, b1 in zip(bounds, bounds[1:], strict=False)]
            else:
                bounds = [BLOCK * (c // BLOCK * i // k) for i in range(k + 1)]
                parts = [(0, 1, c0, c1) for c0, c1 in zip(bounds, bounds[1:], strict=False)]
            split = [_reorder_prim(lib, to_blocked, nhwc, *part, strides)
                     for part in parts]
            made.extend(split)
            job = dc._job(split, c, threading.Lock())

            def go_split(x: np.ndarray, y: np.ndarray) -> None:
                if not dc.run_job(lib, job, 0, 0, 0, x, y):
                    one(x, y)

            go = dc.bind_job(job, go_split)
    except RuntimeError:
        for p in made:
            p.destroy()
        made, go = [], None
    _reorder_prims.extend(made)
    return go


def reorder_launcher(shape: tuple[int, ...], src_layout: str, dst_layout: str,
                     strides: tuple[int, ...] = (1, 1)
                     ) -> tuple[tuple[int, ...], Callable[[np.ndarray, np.ndarray], None]] | None:
    """``(result shape, go(x, y))``: :func:`reorder` of a float32 image of ``shape`` prepared
    once (oneDNN's primitives), for a caller that keeps it per shape and checks that ``x`` and
    ``y`` are C-contiguous float32 arrays of these shapes that do not overlap; ``None`` where
    that path does not apply (another layout pair or shape, no oneDNN primitive: the caller
    runs :func:`reorder`, which reports bad operands)."""
    pair = (src_layout, dst_layout)
    try:
        step = _strides("reorder_layout", strides)
    except OpError:
        return None
    if min(shape, default=0) <= 0:
        return None
    out: tuple[int, ...]
    if pair == ("NHWC", LAYOUT) and len(shape) == 4 and shape[3] % BLOCK == 0:
        n, h, w, c = shape
        out = blocked_shape((n, -(-h // step[0]), -(-w // step[1]), c))
        go = _reorder_launcher(True, tuple(shape), step)
    elif pair == (LAYOUT, "NHWC") and step == (1, 1) and len(shape) == 5 and shape[4] == BLOCK:
        out = nhwc_shape(shape)
        go = _reorder_launcher(False, tuple(out))
    else:
        return None
    return None if go is None else (out, go)


def reorder(x: np.ndarray, src_layout: str, dst_layout: str,
            out: np.ndarray | None = None, *, strides: tuple[int, ...] = (1, 1)) -> np.ndarray:
    """``x`` (float32, C-contiguous or not) from ``src_layout`` to ``dst_layout`` (``NHWC`` ->
    ``NCHW16c`` or back; the same layout: a copy), new or written into ``out`` (C-contiguous,
    of the result's shape and dtype, not overlapping ``x``).  ``strides`` ``(sh, sw)``
    (``NHWC`` -> ``NCHW16c`` only) subsample the image first: rows ``0, sh, 2 sh, ...`` and
    columns ``0, sw, ...``, what a 1x1 convolution of those strides without padding reads, so
    that it runs as a 1x1 convolution of stride 1 on the blocked result (``-tg-dnnl-blocked``).

    Raises:
        OpError: another layout pair, strides with another pair or not positive, or an array
            that does not fit ``src_layout``.
    """
    op = "reorder_layout"
    pair = (src_layout, dst_layout)
    if pair not in (("NHWC", LAYOUT), (LAYOUT, "NHWC"), ("NHWC", "NHWC"), (LAYOUT, LAYOUT)):
        raise OpError(f"{op}: from {src_layout} to {dst_layout} is not supported (NHWC <-> "
                      f"{LAYOUT})")
    sh, sw = step = _strides(op, strides)
    if step != (1, 1) and pair != ("NHWC", LAYOUT):
        raise OpError(f"{op}: strides subsample NHWC -> {LAYOUT} only, not {src_layout} -> "
                      f"{dst_layout}")
    _check(op, x, 5 if src_layout == LAYOUT else 4)
    to_blocked = src_layout == "NHWC"
    if src_layout == dst_layout:
        shape: tuple[int, ...] = x.shape
    elif to_blocked:
        n, h, w, c = x.shape
        shape = blocked_shape((n, -(-h // sh), -(-w // sw), c))
    else:
        shape = nhwc_shape(x.shape)
    if out is None or not (out.shape == shape and out.dtype == x.dtype
                           and out.flags.c_contiguous) or np.may_share_memory(out, x):
        y = np.empty(shape, np.float32)
    else:
        y = out
    if src_layout == dst_layout:
        np.copyto(y, x)
    else:
        nhwc = x.shape if to_blocked else shape
        go = _reorder_launcher(to_blocked, tuple(nhwc), step) if x.flags.c_contiguous else None
        if go is not None:
            go(x, y)
        elif to_blocked:
            xs = x[:, ::sh, ::sw, :]
            n, h, w, c = xs.shape
            np.copyto(y, xs.reshape(n, h, w, c // BLOCK, BLOCK).transpose(0, 3, 1, 2, 4))
        else:
            n, cb, h, w, b = x.shape
            np.copyto(y.reshape(n, h, w, cb, b), x.transpose(0, 2, 3, 1, 4))
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


def _strides(op: str, strides: tuple[int, ...]) -> tuple[int, int]:
    """``strides`` as two positive ints, or :class:`OpError`."""
    step = tuple(int(s) for s in strides)
    if len(step) != 2 or min(step) < 1:
        raise OpError(f"{op}: strides are two positive integers, got {list(strides)}")
    return step[0], step[1]


# -- global average pooling ------------------------------------------------------------------

_pools: dict[tuple[int, ...], _Launch | None] = {}
POOL_SPLIT_MIN_ELEMENTS = 1 << 14
"""Fewest elements of a batch-1 blocked image whose global mean runs on both threads."""


def _pool_prim(lib: dc._Lib, h: int, w: int, b0: int, b1: int) -> dc._Prim:
    """oneDNN's average pooling of channel blocks ``[b0, b1)`` of a batch-1 blocked image
    over its whole ``h x w`` window (each part's input and output blocks are dense runs).

    Raises:
        RuntimeError: oneDNN returned an error, or has only its reference pooling.
    """
    from pytfrt.backends.cpu._dnnl_pool import POOLING_AVG, pooling_primitive

    c = BLOCK * (b1 - b0)
    p = pooling_primitive(lib, POOLING_AVG, dc.activation_md(lib, LAYOUT, (1, c, h, w)),
                          dc.activation_md(lib, LAYOUT, (1, c, 1, 1)), (1, 1), (h, w), (0, 0),
                          (0, 0), (0, 0))
    p.src_off, p.dst_off = 4 * BLOCK * b0 * h * w, 4 * BLOCK * b0
    return p


def pool_launcher(shape: tuple[int, ...]) -> Callable[[np.ndarray, np.ndarray], None] | None:
    """``go(x, y)``: the global mean of a batch-1 blocked float32 image of ``shape`` (at least
    :data:`POOL_SPLIT_MIN_ELEMENTS` elements, two blocks or more) on both threads, one run of
    channel blocks each -- the blocks the same thread's convolution part wrote last, still in
    its core's cache -- as oneDNN average poolings on :mod:`_spin_pool`; for C-contiguous
    non-overlapping ``x`` and ``y`` of ``shape`` and the result's shape (the caller checks).
    ``None``: another shape, one thread, no oneDNN or only its reference pooling (the caller
    runs :func:`global_avg_pool`).  In ResNet-50 at batch 1 the one-thread mean took ~0.1 ms
    in the model and the classifier after it found the pool's helper asleep."""
    return _kept(_pools, tuple(shape), lambda: _make_pool(tuple(shape)))


def _make_pool(shape: tuple[int, ...]) -> _Launch | None:
    """:func:`pool_launcher`'s launcher, made (called with :data:`_reorder_lock` held)."""
    lib = dc.library()
    k = _parallel.num_threads()
    if (lib is None or len(shape) != 5 or shape[0] != 1 or shape[4] != BLOCK or k < 2
            or shape[1] < 2 or min(shape) <= 0
            or int(np.prod(shape)) < POOL_SPLIT_MIN_ELEMENTS):
        return None
    _, cb, h, w, _ = shape
    k = min(k, cb)
    bounds = [cb * i // k for i in range(k + 1)]
    made: list[dc._Prim] = []
    try:
        for b0, b1 in zip(bounds, bounds[1:], strict=False):
            made.append(_pool_prim(lib, h, w, b0, b1))
    except RuntimeError:
        for p in made:
            p.destroy()
        return None
    _reorder_prims.extend(made)
    job = dc._job(made, cb * BLOCK, threading.Lock())

    def go_split(x: np.ndarray, y: np.ndarray) -> None:
        if not dc.run_job(lib, job, 0, 0, 0, x, y):
            _mean(x, y)

    return dc.bind_job(job, go_split)


def _mean(x: np.ndarray, y: np.ndarray) -> None:
    """``y`` = the spatial mean of the blocked ``x`` on the calling thread, summed in float64
    (:func:`pytfrt.backends.cpu.pooling.spatial_mean`, each block an NHWC image of 16
    channels)."""
    from pytfrt.backends.cpu.pooling import spatial_mean

    n, cb, h, w, b = x.shape
    spatial_mean(np.ascontiguousarray(x).reshape(n * cb, h, w, b), True, y.reshape(n * cb, b))


def global_avg_pool(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The mean over H and W of a blocked float32 ``(N, C/16, H, W, 16)`` image:
    ``(N, C/16, 1, 1, 16)`` (its bytes are the NHWC ``(N, 1, 1, C)`` mean's): one large batch-1
    image on both threads (:func:`pool_launcher`, float32 sums), else summed in float64 by
    :func:`pytfrt.backends.cpu.pooling.spatial_mean` on the calling thread.

    Raises:
        OpError: ``x`` is not such an array.
    """
    _check("global_avg_pool", x, 5)
    n, cb, h, w, b = x.shape
    shape = (n, cb, 1, 1, b)
    y = out if out is not None and out.shape == shape and out.flags.c_contiguous and (
        out.dtype == x.dtype) and not np.may_share_memory(out, x) else np.empty(shape, np.float32)
    go = pool_launcher(x.shape) if x.flags.c_contiguous else None
    if go is not None:
        go(x, y)
    else:
        _mean(x, y)
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


# -- convolutions ------------------------------------------------------------------------------

class BlockedConv:
    """A prepared float32 ``conv2d {layout = "NCHW16c"}``: ``act(conv(x, w) + bias
    [+ residual])`` on blocked ``x`` and residual, blocked result.

    Made once per convolution at load (``conv2d.prepare``) from the HWIO filter, which it keeps
    referenced (:attr:`source`) only until oneDNN's primitives hold their prepared copy;
    :meth:`filter` gives it back.  Thread-safe.
    """

    def __init__(self, w: np.ndarray, bias: np.ndarray | None, *, strides: tuple[int, ...],
                 dilations: tuple[int, ...], pads: tuple[int, ...], groups: int,
                 activation: str, alpha: float) -> None:
        if w.ndim != 4 or w.dtype != np.float32 or groups != 1 or w.shape[2] % BLOCK or (
                w.shape[3] % BLOCK):
            raise OpError(f"conv2d: layout {LAYOUT} needs a float32 HWIO filter with channels "
                          f"in and out multiples of {BLOCK} and groups 1, got {w.dtype} "
                          f"{list(w.shape)}, groups {groups}")
        if bias is not None and (bias.shape != (w.shape[3],) or bias.dtype != np.float32):
            raise OpError(f"conv2d: bias must have shape [{w.shape[3]}] and dtype float32, got "
                          f"{list(bias.shape)} {bias.dtype}")
        kh, kw, cin, cout = (int(d) for d in w.shape)
        self.cin, self.cout = cin, cout
        self._conv: dict[str, Any] = dict(
            strides=tuple(strides), dilations=tuple(dilations), pads=tuple(pads), groups=1,
            activation=activation, alpha=float(alpha))
        self._bias = bias
        attrs = dict(layout=LAYOUT, kh=kh, kw=kw, cin=cin, cout=cout, **self._conv)
        wc = np.ascontiguousarray(w)
        self.dnnl = dc.make(wc, bias, attrs)
        """The oneDNN convolution (``None``: no oneDNN, or it cannot express the epilogue)."""
        self._w: np.ndarray | None = None if self.dnnl is not None else wc
        self.source: weakref.ref[np.ndarray] | None = (
            weakref.ref(w) if wc is w and self.dnnl is not None else None)
        """A weak reference to the caller's filter while it may still be read (the model
        may then drop its own copy: :meth:`filter` rebuilds it)."""
        self._nhwc: Any = None
        self._lock = threading.Lock()
        from pytfrt.backends.cpu import _winograd_native as wn
        from pytfrt.backends.cpu._epilogue import ACTIVATION_CODES

        code = ACTIVATION_CODES.get(activation, -1)
        self._wino = wn.WinoConv(self.filter, bias, tuple(pads), code, alpha, blocked=True,
                                 channels=(cin, cout)) if (
            wn.eligible(kh, kw, strides, dilations, groups, code)) else None
        """The native Winograd (3x3 stride-1 convolutions; the shapes
        :func:`~pytfrt.backends.cpu._winograd_native.wins` picks run it)."""

    def filter(self) -> np.ndarray:
        """The HWIO filter (read back from oneDNN's prepared copy once that exists)."""
        if self.dnnl is not None:
            return self.dnnl.user_filter()
        assert self._w is not None
        return self._w

    def output_shape(self, x_shape: tuple[int, ...]) -> tuple[int, int, int, int, int]:
        """The blocked output shape for a blocked input shape.

        Raises:
            OpError: not a blocked shape with the filter's input channels, or the window does
                not fit.
        """
        from pytfrt.backends.cpu._geometry import out_size

        if len(x_shape) != 5 or x_shape[4] != BLOCK or x_shape[1] * BLOCK != self.cin:
            raise OpError(f"conv2d: a {LAYOUT} input of {self.cin} channels is "
                          f"(N, {self.cin // BLOCK}, H, W, {BLOCK}), got {list(x_shape)}")
        n, _, h, w, _ = x_shape
        c = self._conv
        kh_kw = self._kernel()
        oh = out_size(h, kh_kw[0], c["strides"][0], c["dilations"][0], c["pads"][0], c["pads"][1])
        ow = out_size(w, kh_kw[1], c["strides"][1], c["dilations"][1], c["pads"][2], c["pads"][3])
        if not oh or not ow or oh <= 0 or ow <= 0:
            raise OpError(f"conv2d: the window does not fit the input {list(x_shape)}")
        return (n, self.cout // BLOCK, oh, ow, BLOCK)

    def _kernel(self) -> tuple[int, int]:
        if self.dnnl is not None:
            a = self.dnnl._attrs
            return a["kh"], a["kw"]
        assert self._w is not None
        return self._w.shape[0], self._w.shape[1]

    def __call__(self, x: np.ndarray, residual: np.ndarray | None = None,
                 out: np.ndarray | None = None) -> np.ndarray:
        """Run it: ``x`` and ``residual`` blocked float32 (the residual of the output's
        shape; it may be ``out`` itself), the result into ``out`` when that is a C-contiguous
        array of the output's shape not overlapping ``x``, else new.

        Raises:
            OpError: operands of the wrong shape or dtype.
        """
        shape = self.output_shape(tuple(x.shape))
        if x.dtype != np.float32:
            raise OpError(f"conv2d: a {LAYOUT} input must be float32, got {x.dtype}")
        if residual is not None and (residual.shape != shape or residual.dtype != np.float32):
            raise OpError(f"conv2d: the residual must be float32 {list(shape)}, got "
                          f"{residual.dtype} {list(residual.shape)}")
        y = out if out is not None and out.shape == shape and out.dtype == np.float32 and (
            out.flags.c_contiguous) and not np.may_share_memory(out, x) else None
        if y is None:
            y = np.empty(shape, np.float32)
        in_dst = residual is not None and residual.ctypes.data == y.ctypes.data and (
            residual.strides == y.strides)
        mode = dc.RESIDUAL_IN_DST if residual is not None else dc.NO_RESIDUAL
        if self._wino_runs(shape):
            assert self._wino is not None
            self._wino.run(x, residual, y)
        elif self.dnnl is not None and self.dnnl.ready(tuple(x.shape), mode):
            if residual is not None and not in_dst:
                np.copyto(y, residual)  # the sum post-op adds what y holds
            self.dnnl.forward(np.ascontiguousarray(x), mode, y)
        else:
            self._fallback(x, residual, y)
        if out is not None and y is not out:
            out[...] = y
            return out
        return y

    def _fallback(self, x: np.ndarray, residual: np.ndarray | None, y: np.ndarray) -> None:
        """The NHWC plan on reordered operands (no oneDNN primitive for this shape)."""
        from pytfrt.backends.cpu.conv import conv2d, plan_conv2d

        with self._lock:
            if self._nhwc is None:
                self._nhwc = plan_conv2d(self.filter(), layout="NHWC", bias=self._bias,
                                         **self._conv)
        r = None if residual is None else reorder(residual, LAYOUT, "NHWC")
        yn = conv2d(self._nhwc, reorder(x, LAYOUT, "NHWC"), r)
        reorder(yn, "NHWC", LAYOUT, out=y)

    def runner(self) -> Callable[..., np.ndarray]:
        """``run(x, residual=None, out=None)``: :meth:`__call__` with a short path for a
        compiled model's calls after the first -- C-contiguous float32 ``x`` of a shape run
        before, ``out`` of its output shape not overlapping ``x``, no residual or the residual
        being ``out`` -- straight into the shape's :meth:`~pytfrt.backends.cpu._dnnl_conv.
        DnnlConv.launcher`.  Thread-safe."""
        from pytfrt.backends.cpu.conv import launch_runner

        if self.dnnl is None and self._wino is None:
            return self
        return launch_runner(self.dnnl, self, self._native)

    def _wino_runs(self, out_shape: tuple[int, ...]) -> bool:
        """Whether an output shape runs on the native Winograd."""
        from pytfrt.backends.cpu import _winograd_native as wn

        return self._wino is not None and wn.wins(self.cin, self.cout, out_shape[2],
                                                  out_shape[3])

    def _native(self, x_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> Any:
        """The native Winograd's launchers (no residual, residual in ``out``) of a shape that
        runs it (:func:`pytfrt.backends.cpu.conv.launch_runner`), else ``None``."""
        if not self._wino_runs(y_shape):
            return None
        assert self._wino is not None
        return (self._wino.launcher(x_shape, y_shape, False),
                self._wino.launcher(x_shape, y_shape, True))
