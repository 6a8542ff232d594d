"""Squeeze-and-excitation of a large input over both threads, through oneDNN primitives.

Private helper of :mod:`pytfrt.backends.cpu.squeeze_excite`.  At batch 1 the squeeze-excite
kernel is two passes over the image on one thread (the channel means, then every pixel
scaled by its channel's gate), while the convolutions before and after it run in one part
per thread; EfficientNet-B0's first blocks (112x112x32 .. 28x28x240) took ~2 ms of its
~11 ms per call that way.  Here both passes are split by output-row bands, as the
convolutions are, and run as :mod:`pytfrt.backends.cpu._spin_pool` jobs (so each thread
reads the rows it has just written; a batch is split into batch bands instead, each image
with its own means and gate):

1. one oneDNN average-pooling primitive per band, its window the whole band: the band's
   channel means, each into its own row of a small ``(parts, C)`` array;
2. the caller combines them (weighted by the band heights) and computes the gate (the two
   small fully connected layers, :func:`pytfrt.backends.cpu.squeeze_excite._excite`);
3. one oneDNN binary ``mul`` primitive per band, ``x`` times the gate broadcast over the
   pixels, into ``y``.

:func:`run` returns ``False`` (nothing written) for one image unless :data:`ONE_IMAGE` is
set, and when oneDNN or the pool's helpers are not available, another thread is using the
pool, or oneDNN has only its reference kernels for the shape: the caller then runs its
one-thread kernel.  Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _dnnl_conv as dc
from pytfrt.backends.cpu import _parallel, _spin_pool
from pytfrt.backends.cpu._dnnl_pool import POOLING_AVG, pooling_primitive

SPLIT_MIN_ELEMENTS = 1 << 16
"""Fewest elements of ``x`` for which a squeeze-excite is split over the threads.  Measured
for one image (before squeeze-excite ran in place; see :data:`ONE_IMAGE`) at real-time
priority on the shared machine, medians of interleaved calls: EfficientNet-B0 10.2 -> 9.3 ms
per call (its blocks from 112x112x32 to 14x14x672 split);
MobileNetV3-small, whose blocks are at most 56x56x16, no change (2.41 / 2.34 ms), nor with the
threshold at 30k elements (2.39).  Alone, hot: 112x112x32 187 -> 141 us, 56x56x96 118 ->
86, 28x28x240 61 -> 54 (the two passes are memory-bound)."""
ONE_IMAGE = False
"""Whether one image (batch 1) is split too, in output-row bands (``False``: :func:`run`
declines it and the caller's one-thread kernel runs; read per call, for A/B runs).  Since
squeeze-excite runs in place in compiled models (``-tg-plan-buffers``), the one-thread C
kernel measured faster on EfficientNet-B0 at batch 1 than these two jobs: the model's call
0.933x, 0.965x, 0.952x of the split one's time with ONNX Runtime and OpenVINO called in turn
(load 4-5), 0.974x and 0.925x at real-time priority, 0.980x without OpenVINO
(docs/benchmarks.md): each job is a fork-join that waits for a helper the loaded machine
often deschedules, against blocks bound by the memory system."""
MAX_SHAPES = 128
"""Most image shapes whose primitives are kept (further shapes run on one thread)."""
_BINARY_MUL = 0x1FFF1  # dnnl_binary_mul
_ARG_SRC_1 = 2  # DNNL_ARG_SRC_1

_lock = threading.Lock()
_state_lock = threading.Lock()
_plans: dict[tuple[int, int, int, int], _Plan | None] = {}


class _Plan:
    """The two jobs of one ``(N, H, W, C)`` input: band means and the scale.  One image is
    split into output-row bands; a batch into batch bands (each image's means, then its own
    gate rows)."""

    def __init__(self, lib: dc._Lib, n: int, h: int, w: int, c: int, k: int) -> None:
        self.n, self.h = n, h
        if n == 1:  # (b0, b1, r0, r1) per part
            rb = [h * i // k for i in range(k + 1)]
            bands = [(0, 1, r0, r1) for r0, r1 in zip(rb, rb[1:], strict=False)]
        else:
            bb = [n * i // k for i in range(k + 1)]
            bands = [(b0, b1, 0, h) for b0, b1 in zip(bb, bb[1:], strict=False)]
        self.heights = np.array([r1 - r0 for _, _, r0, r1 in bands], np.float32)
        self.means = np.zeros((k if n == 1 else n, c), np.float32)
        self.gate = np.zeros((n, c), np.float32)
        fold = _fold(w, c)
        self.tiled = np.zeros((n, fold, c), np.float32)
        """The gate repeated for ``fold`` consecutive pixels (the scale's channel axis)."""
        self.prims: list[dc._Prim] = []
        cf = c * fold
        means, scales = [], []
        try:
            for i, (b0, b1, r0, r1) in enumerate(bands):
                nb = b1 - b0
                at = 4 * (b0 * h * w * c + r0 * w * c)
                row = i if n == 1 else b0  # the part's first row of the means
                means.append(self._pool(lib, (nb, c, r1 - r0, w), at, 4 * row * c))
                holder = dc._Prim(lib)
                self.prims.append(holder)
                md = holder.own("dnnl_memory_desc_destroy",
                                lib.strided_md((nb, cf, 1, 1), (cf, 1, cf, cf)))
                gate_mem = holder.own("dnnl_memory_destroy", lib.new(
                    "dnnl_memory_create", md, lib.engine, self.tiled.ctypes.data + 4 * b0 * cf))
                scales.append(self._mul(lib, (nb, cf, r1 - r0, w // fold), md, gate_mem, at))
        except RuntimeError:
            self.destroy()
            raise
        self.mean_job = dc._job(means, c, _state_lock)
        self.scale_job = dc._job(scales, c, _state_lock)

    def _new(self, lib: dc._Lib, src: tuple[int, int, int, int],
             dst: tuple[int, int, int, int], src_off: int,
             dst_off: int) -> tuple[dc._Prim, Any]:
        p = dc._Prim(lib)
        self.prims.append(p)
        md_free = "dnnl_memory_desc_destroy"
        p.src_md = p.own(md_free, lib.strided_md(src, dc._md_strides("NHWC", src)))
        p.dst_md = p.own(md_free, lib.strided_md(dst, dc._md_strides("NHWC", dst)))
        p.src_off, p.dst_off = src_off, dst_off
        attr = dc.user_scratchpad_attr(lib, p.own)
        return p, attr

    def _pool(self, lib: dc._Lib, band: tuple[int, int, int, int], src_off: int,
              dst_off: int) -> dc._Prim:
        dst = (band[0], band[1], 1, 1)
        p = pooling_primitive(lib, POOLING_AVG,
                              lib.strided_md(band, dc._md_strides("NHWC", band)),
                              lib.strided_md(dst, dc._md_strides("NHWC", dst)),
                              (1, 1), (band[2], band[3]), (0, 0), (0, 0), (0, 0))
        self.prims.append(p)
        p.src_off, p.dst_off = src_off, dst_off
        return p

    def _mul(self, lib: dc._Lib, band: tuple[int, int, int, int], gate_md: Any,
             gate_mem: Any, off: int) -> dc._Prim:
        p, attr = self._new(lib, band, band, off, off)
        p.pd = p.own("dnnl_primitive_desc_destroy", lib.new(
            "dnnl_binary_primitive_desc_create", lib.engine, _BINARY_MUL, p.src_md, gate_md,
            p.dst_md, attr))
        p.extra = [(_ARG_SRC_1, gate_mem)]
        dc.query_impl(lib, p)
        p.create_primitive()
        return p

    def destroy(self) -> None:
        for p in reversed(self.prims):
            p.destroy()


FOLD_CHANNELS = 256
"""The scale pass sees ``fold`` consecutive pixels of ``C`` channels as one pixel of
``fold * C`` channels (the same bytes), ``fold`` the smallest divisor of the width giving at
least this many: oneDNN's binary kernel is slow on short channel rows (112x112x32: 131 us
with 32 channels, 57 us folded to 256; both threads, hot)."""


def _fold(w: int, c: int) -> int:
    """Pixels per folded pixel of the scale pass (:data:`FOLD_CHANNELS`)."""
    for f in range(1, w + 1):
        if w % f == 0 and f * c >= FOLD_CHANNELS:
            return f
    return w


def _plan(lib: dc._Lib, n: int, h: int, w: int, c: int) -> _Plan | None:
    key = (n, h, w, c)
    plan = _plans.get(key, 0)
    if plan != 0:
        return plan  # type: ignore[return-value]
    with _lock:
        if key not in _plans:
            if len(_plans) >= MAX_SHAPES:
                return None
            k = min(_parallel.num_threads(), h if n == 1 else n)
            try:
                _plans[key] = _Plan(lib, n, h, w, c, k)
            except RuntimeError:
                _plans[key] = None
        return _plans[key]


def run(x: np.ndarray, y: np.ndarray, excite: Callable[[np.ndarray, np.ndarray], None]) -> bool:
    """``y = x * gate`` for a C-contiguous float32 NHWC ``x`` (``y`` likewise, the same
    shape; it may be ``x`` itself), where ``excite(means, gate)`` writes one image's ``(C,)``
    float32 gate from its ``(C,)`` float32 channel means.  ``False``: nothing was computed
    (see the module docstring)."""
    if x.shape[0] == 1 and not ONE_IMAGE:
        return False
    lib = dc.library()
    threads = _parallel.num_threads()
    if lib is None or threads < 2 or x.size < SPLIT_MIN_ELEMENTS:
        return False
    n, h, w, c = x.shape
    if n == 1 and h < 2:
        return False
    plan = _plan(lib, n, h, w, c)
    if plan is None:
        return False
    pool = _spin_pool.pool(lib.addresses, threads - 1, lib.new_stream_handle)
    if pool is None or not pool.lock.acquire(blocking=False):
        return False
    try:
        pool.reserve(max(plan.mean_job.scratch, plan.scale_job.scratch), 0)
        st = pool.run_arrays(plan.mean_job.table, x, plan.means)
        if st == 0:
            if n == 1:
                excite((plan.heights @ plan.means) / np.float32(h), plan.gate[0])
            else:
                for b in range(n):
                    excite(plan.means[b], plan.gate[b])
            plan.tiled[:] = plan.gate[:, None, :]
            st = pool.run_arrays(plan.scale_job.table, x, y)
    finally:
        pool.lock.release()
    if st != 0:
        raise RuntimeError(f"oneDNN dnnl_primitive_execute failed with status {st}")
    return True
