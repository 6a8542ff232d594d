"""float32 (and u8/s8) max pooling through oneDNN's pooling primitive (C API, via ctypes).

Private helper of :mod:`pytfrt.backends.cpu.pooling`: :func:`max_pool2d` runs a C-contiguous
float32, uint8 or int8 ``NHWC``/``NCHW`` max pool (the integer ones: an int8 model's quantized
activations) in oneDNN (forward inference, ``pooling_max``) when the
library is present (:func:`pytfrt.backends.cpu._dnnl_conv.library`, so ``PYTFRT_CONV=builtin``
disables it too), and returns ``False`` otherwise (the caller runs its NumPy path).  One
primitive per (shape, layout, window), made on first use and kept (at most
:data:`MAX_PRIMITIVES`); single-threaded on the calling thread, except that a large batched
input is split by batch into one primitive per thread run by
:mod:`pytfrt.backends.cpu._spin_pool` (:data:`SPLIT_MIN_BYTES`), and a large ``NHWC`` image
into bands of output rows (:data:`ROW_SPLIT_MIN_BYTES`), like the convolutions.
Thread-safe: per-thread streams, memory objects and scratchpads (user scratchpad mode).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _dnnl_conv as dc
from pytfrt.backends.cpu import _parallel

_POOLING_MAX = 0x1FF  # dnnl_pooling_max (oneapi/dnnl/dnnl_types.h)
POOLING_AVG = 0x3FF  # dnnl_pooling_avg_exclude_padding
MAX_PRIMITIVES = 256
"""Most pooling primitives kept (further shapes run the NumPy path)."""

SPLIT_MIN_BYTES = 4 << 20
"""Batched inputs of at least this many bytes are pooled in one part per thread (by batch)
on :mod:`pytfrt.backends.cpu._spin_pool`: ResNet-50's first pool at batch 8 (25.7 MB in)
took ~1.5-2 ms on one thread."""

ROW_SPLIT_MIN_BYTES = 1 << 20
"""One ``NHWC`` image of at least this many bytes is pooled in one band of output rows per
thread on :mod:`pytfrt.backends.cpu._spin_pool`: ResNet-50's first pool at batch 1 (3.2 MB
in) took ~0.3 ms of a ~35 ms call on one thread, ONNX Runtime's ~0.1 ms on both."""

_lock = threading.Lock()
"""Guards the primitive and job caches (held while primitives are made)."""
_state_lock = threading.Lock()
"""Guards the primitives' per-thread memory objects (:meth:`_dnnl_conv._Prim.state`)."""
_prims: dict[tuple[Any, ...], dc._Prim | None] = {}
_jobs: dict[tuple[Any, ...], dc._Job | None] = {}
_split_prims: dict[tuple[Any, ...], list[dc._Prim]] = {}
"""The batch parts of :data:`_jobs` (kept alive with them)."""


_DTYPES = {np.dtype(np.float32): dc._F32, np.dtype(np.uint8): 6, np.dtype(np.int8): 5}
"""The element types run here, as oneDNN's ``dnnl_data_type_t``."""


def _create(lib: dc._Lib, key: tuple[Any, ...]) -> dc._Prim:
    layout, src, dst, kernel, strides, dil, pad_l, pad_r, dtype = key
    dt = _DTYPES[np.dtype(dtype)]
    dc._pin_one_thread()
    return pooling_primitive(
        lib, _POOLING_MAX, lib.strided_md(src, dc._md_strides(layout, src), dt),
        lib.strided_md(dst, dc._md_strides(layout, dst), dt), strides, kernel, dil, pad_l, pad_r)


def pooling_primitive(lib: dc._Lib, alg: int, src_md: Any, dst_md: Any,
                      strides: tuple[int, ...], kernel: tuple[int, ...], dil: tuple[int, ...],
                      pad_l: tuple[int, ...], pad_r: tuple[int, ...]) -> dc._Prim:
    """A oneDNN forward-inference pooling primitive of algorithm ``alg`` (``dnnl_alg_kind_t``:
    :data:`_POOLING_MAX`, :data:`POOLING_AVG`) from ``src_md`` to ``dst_md`` (memory
    descriptors handed over: the result frees them, as it does on an error), with a
    user-managed scratchpad.  Also the blocked layout's global mean
    (:mod:`pytfrt.backends.cpu._dnnl_blocked`).

    Raises:
        RuntimeError: oneDNN returned an error status, or has only its reference pooling.
    """
    p = dc._Prim(lib)
    temp = dc._Prim(lib)
    md_free = "dnnl_memory_desc_destroy"
    p.src_md, p.dst_md = p.own(md_free, src_md), p.own(md_free, dst_md)
    try:
        attr = dc.user_scratchpad_attr(lib, temp.own)
        p.pd = p.own("dnnl_primitive_desc_destroy", lib.new(
            "dnnl_pooling_forward_primitive_desc_create", lib.engine, dc._FORWARD_INFERENCE,
            alg, p.src_md, p.dst_md, dc._DIMS(*strides), dc._DIMS(*kernel), dc._DIMS(*dil),
            dc._DIMS(*pad_l), dc._DIMS(*pad_r), attr))
        dc.query_impl(lib, p)
        p.create_primitive()
    except RuntimeError:
        p.destroy()
        raise
    finally:
        temp.destroy()
    return p


def _part_keys(key: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], int, int]]:
    """The parts of the pool of ``key`` as ``(part key, src byte offset, dst byte offset)``:
    a batch in one batch band per thread; one ``NHWC`` image in one band of output rows per
    thread (each band's input rows with the padding its first and last window need, as the
    convolutions split, ``_dnnl_conv.DnnlConv._split``)."""
    layout, src, dst, kernel, strides, dil, pad_l, pad_r, dtype = key
    size = np.dtype(dtype).itemsize
    n, c, h, w = src
    threads = _parallel.num_threads()
    if n >= 2:
        k = min(threads, n)
        bounds = [n * i // k for i in range(k + 1)]
        return [((layout, (b1 - b0, *src[1:]), (b1 - b0, *dst[1:]), *key[3:]),
                 size * b0 * c * h * w, size * b0 * dst[1] * dst[2] * dst[3])
                for b0, b1 in zip(bounds, bounds[1:], strict=False)]
    oh, ow = dst[2], dst[3]
    k = min(threads, oh)
    bounds = [oh * i // k for i in range(k + 1)]
    parts = []
    for r0, r1 in zip(bounds, bounds[1:], strict=False):
        first = r0 * strides[0] - pad_l[0]  # input row of the band's first tap (may be < 0)
        last = (r1 - 1) * strides[0] - pad_l[0] + (dil[0] + 1) * (kernel[0] - 1)
        i0, i1 = max(first, 0), min(last, h - 1)
        part = (layout, (1, c, i1 - i0 + 1, w), (1, c, r1 - r0, ow), kernel, strides, dil,
                (i0 - first, pad_l[1]), (last - i1, pad_r[1]), dtype)
        parts.append((part, size * i0 * w * c, size * r0 * ow * c))
    return parts


def _split_job(lib: dc._Lib, key: tuple[Any, ...]) -> dc._Job | None:
    """The pool of ``key`` split into one part per thread (:func:`_part_keys`), as a
    :mod:`_spin_pool` job (made on first use; ``None`` if a part has no primitive)."""
    job = _jobs.get(key)
    if job is not None or key in _jobs:
        return job
    parts: list[dc._Prim] = []
    with _lock:
        if key in _jobs:
            return _jobs[key]
        try:
            for part, src_off, dst_off in _part_keys(key):
                p = _create(lib, part)
                p.src_off, p.dst_off = src_off, dst_off
                parts.append(p)
        except RuntimeError:
            for p in parts:
                p.destroy()
            _jobs[key] = None
            return None
        _split_prims[key] = parts
        _jobs[key] = dc._job(parts, 0, _state_lock)
        return _jobs[key]


def _key(layout: str, x_shape: tuple[int, ...], y_shape: tuple[int, ...],
         win: tuple[int, ...], pads_br: tuple[int, int], dtype: np.dtype) -> tuple[Any, ...]:
    kh, kw, sh, sw, dh, dw, pt, pl, _, _, _, _ = win
    return (layout, dc._nchw_dims(layout, x_shape), dc._nchw_dims(layout, y_shape), (kh, kw),
            (sh, sw), (dh - 1, dw - 1), (pt, pl), pads_br, dtype.str)


def _primitive(lib: dc._Lib, key: tuple[Any, ...]) -> dc._Prim | None:
    """The kept primitive of ``key`` (made on first use; ``None`` if oneDNN has none or
    :data:`MAX_PRIMITIVES` are kept)."""
    p = _prims.get(key, 0)
    if p == 0:
        with _lock:
            if key not in _prims and len(_prims) < MAX_PRIMITIVES:
                try:
                    _prims[key] = _create(lib, key)
                except RuntimeError:
                    _prims[key] = None
            p = _prims.get(key)
    return p if isinstance(p, dc._Prim) else None


def _split(key: tuple[Any, ...], nbytes: int) -> bool:
    """Whether the pool of ``key`` (an input of ``nbytes``) runs split over the threads."""
    layout, src, dst = key[:3]
    return _parallel.num_threads() >= 2 and (
        (nbytes >= SPLIT_MIN_BYTES and src[0] >= 2)
        or (nbytes >= ROW_SPLIT_MIN_BYTES and src[0] == 1 and layout == "NHWC"
            and dst[2] >= 2))


def launcher(x_shape: tuple[int, ...], y_shape: tuple[int, ...], dtype: np.dtype, layout: str,
             win: tuple[int, ...], pads_br: tuple[int, int]
             ) -> Callable[[np.ndarray, np.ndarray], None] | None:
    """``go(x, y)``: :func:`max_pool2d` prepared for one input shape and type, as one native
    call per call (:func:`_dnnl_conv.row_launcher`) -- for an input small enough to be pooled
    on the calling thread; ``None`` where that does not apply (no oneDNN or no primitive, a
    type not in :data:`_DTYPES`, a pool split over the threads: the caller then calls
    :func:`max_pool2d`).  The choice is made here: a later change of the thread count does
    not split a prepared pool.  ``go`` takes C-contiguous non-overlapping ``x``
    and ``y`` of these shapes and ``dtype`` (the caller checks them).  Thread-safe."""
    lib = dc.library()
    if lib is None or dtype not in _DTYPES:
        return None
    key = _key(layout, x_shape, y_shape, win, pads_br, dtype)
    p = _primitive(lib, key)
    nbytes = int(np.prod(x_shape)) * dtype.itemsize
    if p is None or _split(key, nbytes):
        return None
    return dc.row_launcher(lib, p, _state_lock)


def max_pool2d(
    x: np.ndarray,
    y: np.ndarray,
    layout: str,
    win: tuple[int, ...],
    pads_br: tuple[int, int],
) -> bool:
    """``y = max_pool(x)`` in oneDNN for checked C-contiguous ``x`` and ``y`` of one of the
    types of :data:`_DTYPES`.

    ``win`` is pooling's ``(kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ha, wa)``; ``pads_br`` the
    bottom/right padding that gives ``oh``/``ow`` (ceil mode included).  Returns ``False`` if
    oneDNN is absent or has no optimised primitive for it (``y`` untouched).
    """
    lib = dc.library()
    if lib is None:
        return False
    key = _key(layout, x.shape, y.shape, win, pads_br, x.dtype)
    p = _primitive(lib, key)
    if p is None:
        return False
    if _split(key, x.nbytes):
        job = _split_job(lib, key)
        if job is not None and dc.run_job(lib, job, x.ctypes.data, y.ctypes.data, 0):
            return True
    if not getattr(dc._blas._local, "pinned", False):
        dc._pin_one_thread()
    args, srcm, dstm, sp, _ = p.state(threading.get_ident(), _state_lock)
    set_handle = lib.fn["dnnl_memory_set_data_handle"]
    set_handle(srcm, x.ctypes.data)
    set_handle(dstm, y.ctypes.data)
    if sp:
        set_handle(sp, dc._scratch(lib, p.scratch))
    stream = lib.stream()
    lib.call("dnnl_primitive_execute", p.prim, stream, len(args), args)
    lib.call("dnnl_stream_wait", stream)
    return True
