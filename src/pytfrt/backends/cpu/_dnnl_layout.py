"""A CNN's NCHW float32 input image to NHWC on both threads (oneDNN reorder primitives).

Private helper of :func:`pytfrt.backends.cpu._layout_copy.nchw_to_nhwc`, the copy of the one
``transpose`` ``-tg-layout-nhwc`` leaves at a CNN's input: one image of a few channels (RGB)
whose copy ran on one thread while the other waited for the first convolution -- 5% of a
MobileNetV3-small call at batch 1 (~90 of 1,770 us).  Here the image is split into one band
of rows per thread, each band a oneDNN reorder from the NCHW band to the same rows of the
NHWC output, run as a :mod:`pytfrt.backends.cpu._spin_pool` job (as the convolutions split).

:func:`run` returns ``False`` (nothing written) when oneDNN or the pool's helpers are not
available, another thread is using the pool, the image is small, or oneDNN has only its
reference reorder for it: the caller then copies on its own thread.  Thread-safe.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _dnnl_conv as dc
from pytfrt.backends.cpu import _parallel

SPLIT_MIN_ELEMENTS = 1 << 16
"""Fewest elements of an image copied on both threads (224x224x3: 150k)."""
MAX_SHAPES = 32
"""Most image shapes whose primitives are kept (further shapes are copied on one thread)."""

_lock = threading.Lock()
_state_lock = threading.Lock()
_jobs: dict[tuple[int, int, int], dc._Job | None] = {}
_prims: list[dc._Prim] = []
"""The bands of every job (kept alive with them)."""


def _job(lib: dc._Lib, c: int, h: int, w: int) -> dc._Job | None:
    key = (c, h, w)
    if key in _jobs:
        return _jobs[key]
    with _lock:
        if key in _jobs or len(_jobs) >= MAX_SHAPES:
            return _jobs.get(key)
        k = min(_parallel.num_threads(), h)
        bounds = [h * i // k for i in range(k + 1)]
        made: list[dc._Prim] = []
        try:
            for r0, r1 in zip(bounds, bounds[1:], strict=False):
                made.append(_band(lib, c, h, w, r0, r1))
        except RuntimeError:
            for p in made:
                p.destroy()
            _jobs[key] = None
            return None
        _prims.extend(made)
        _jobs[key] = dc._job(made, c, _state_lock)
        return _jobs[key]


def _band(lib: dc._Lib, c: int, h: int, w: int, r0: int, r1: int) -> dc._Prim:
    """The reorder of rows ``[r0, r1)``: NCHW strides in, NHWC strides out."""
    dims = (1, c, r1 - r0, w)
    return reorder_primitive(lib, lib.strided_md(dims, (c * h * w, h * w, w, 1)),
                             lib.strided_md(dims, (h * w * c, 1, w * c, c)),
                             4 * r0 * w, 4 * r0 * w * c)


def reorder_primitive(lib: dc._Lib, src_md: Any, dst_md: Any, src_off: int = 0,
                      dst_off: int = 0) -> dc._Prim:
    """A oneDNN reorder primitive from ``src_md`` to ``dst_md`` (memory descriptors handed
    over: the result frees them, as it does on an error) at those byte offsets of the arrays it
    is run on, with a user-managed scratchpad (:func:`pytfrt.backends.cpu._dnnl_conv.run_part`
    and its jobs run it).  Also the channel-blocked layout's reorders
    (:mod:`pytfrt.backends.cpu._dnnl_blocked`).

    Raises:
        RuntimeError: oneDNN returned an error status, or has only its reference reorder.
    """
    p = dc._Prim(lib)
    temp = dc._Prim(lib)
    md_free = "dnnl_memory_desc_destroy"
    p.src_md, p.dst_md = p.own(md_free, src_md), p.own(md_free, dst_md)
    p.src_off, p.dst_off = src_off, dst_off
    try:
        attr = dc.user_scratchpad_attr(lib, temp.own)
        p.pd = p.own("dnnl_primitive_desc_destroy", lib.new(
            "dnnl_reorder_primitive_desc_create", p.src_md, lib.engine, p.dst_md, lib.engine,
            attr))
        dc.query_impl(lib, p)
        p.create_primitive()
    except RuntimeError:
        p.destroy()
        raise
    finally:
        temp.destroy()
    return p


def run(x: np.ndarray, out: np.ndarray) -> bool:
    """``out = x.transpose(0, 2, 3, 1)`` for a C-contiguous float32 ``(1, C, H, W)`` ``x`` and
    a C-contiguous ``(1, H, W, C)`` ``out`` not overlapping it.  ``False``: nothing written
    (see the module docstring).

    Raises:
        RuntimeError: oneDNN returned an error status.
    """
    if x.size < SPLIT_MIN_ELEMENTS or _parallel.num_threads() < 2:
        return False
    lib = dc.library()
    if lib is None:
        return False
    _, c, h, w = x.shape
    job = _job(lib, c, h, w)
    if job is None:
        return False
    return dc.run_job(lib, job, 0, 0, 0, x, out)
