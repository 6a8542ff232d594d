"""The process heap's policy for tensor-sized blocks: keep freed memory for the next step.

NumPy takes every array's memory from ``malloc``.  glibc serves a block above its mmap
threshold (128 KB at start, raised to the largest freed mmapped block, at most 32 MB) with a
fresh ``mmap``, and returns the top of the heap to the system once more than its trim
threshold (twice the mmap threshold) is free there.  A train step frees its activations and
gradients (MBs each) at its end and allocates them again in the next step: each time they
come back as fresh pages, one page fault per 4 KB (the residual CNN's step 11.8 -> 10.0 ms
without them: docs/benchmarks.md).  TensorFlow's own
allocator keeps what it freed, so its step does not pay this.

:func:`keep_freed_memory` sets glibc's mmap threshold to 64 MB and its trim threshold to
256 MB (``mallopt``), as TensorFlow's pooling does: freed blocks below 64 MB stay in the heap
for reuse, at the cost of a resident size that does not shrink after a step.  It is called when
a :class:`pytfrt.CompiledModel` that updates variables (a train step) is made.  Process-wide;
not done when ``PYTFRT_KEEP_HEAP=0``, when the user set either threshold
(``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``: theirs stands) or on a C library
without ``mallopt`` (not glibc).  Thread-safe, idempotent.
"""

from __future__ import annotations

import ctypes
import os
import threading

from pytfrt import config

MMAP_THRESHOLD = 64 << 20
"""Bytes from which a block is still its own ``mmap`` (returned to the system when freed)."""
TRIM_THRESHOLD = 256 << 20
"""Free bytes at the top of the heap above which glibc returns them to the system."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters

_lock = threading.Lock()
_done: list[bool] = []


def keep_freed_memory() -> bool:
    """Set the heap policy of the module docstring once per process; whether it is in force
    (``False``: switched off, the user's own thresholds, or not glibc)."""
    with _lock:
        if not _done:
            _done.append(_apply())
        return _done[0]


def _apply() -> bool:
    if not config.flag("PYTFRT_KEEP_HEAP") or any(
            k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - glibc's parameters only
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]
