"""Per-thread scratch buffers for the conv kernels (im2col columns, Winograd tiles).

Private helper of :mod:`pytfrt.backends.cpu.conv`.  Each thread owns one growing byte arena
per *role* (``"cols"``, ``"wino_v"``, ...); :func:`scratch` returns a view of the requested
shape into it, reallocating only when a larger size is asked for, so a steady stream of calls
of the same shapes allocates nothing.  A buffer is valid until the same thread asks for the
same role again: kernels use each role once per call and never hand a scratch view out.
Thread-safety: per-thread by construction (``threading.local``).
"""

from __future__ import annotations

import threading

import numpy as np

_local = threading.local()


def scratch(role: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` owned by this thread's ``role`` arena."""
    arenas: dict[str, np.ndarray] | None = getattr(_local, "arenas", None)
    if arenas is None:
        arenas = _local.arenas = {}
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    buf = arenas.get(role)
    if buf is None or buf.nbytes < nbytes:
        # 64-byte alignment for vector loads: over-allocate and offset.
        raw = np.empty(nbytes + 64, dtype=np.uint8)
        off = (-raw.ctypes.data) % 64
        buf = raw[off : off + nbytes]
        arenas[role] = buf
    return buf[:nbytes].view(dt).reshape(shape)


def release() -> None:
    """Drop this thread's arenas (for tests and long-lived threads that are done with convs)."""
    _local.arenas = {}
