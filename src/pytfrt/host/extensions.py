"""Named extension points: a lower layer uses a capability that a higher layer provides.

The executor fuses runs of tensor kernels into one native call, but the native kernels live in
the CPU backend, which the executor may not import (docs/layout.md).  So the backend
*provides* them under a name when its kernel library is registered, and the executor *asks*
for that name: ``provide(FUSED_SEGMENT_KERNELS, loader)`` / ``get(FUSED_SEGMENT_KERNELS)``.

A provider is a loader (a callable returning the extension object), called on the first
``get`` only, so providing costs nothing: a program that never asks never imports it (a
program with no tensor kernels never loads NumPy).  A loader that raises ``ImportError`` makes
the extension absent (``get`` returns ``None``), once and for all.

Process-wide; thread-safe (one lock; a loader runs at most once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

FUSED_SEGMENT_KERNELS = "fused_segment_kernels"
"""The native kernels of fused segments (``pytfrt.backends.cpu.fusible_kernels``), used by
:mod:`pytfrt.executor.fused_segments`."""

_lock = threading.Lock()
_loaders: dict[str, Callable[[], Any]] = {}
_loaded: dict[str, Any] = {}


def provide(name: str, loader: Callable[[], Any]) -> None:
    """Offer extension ``name``: ``loader()`` returns it when first asked for.

    Providing a name again before it was loaded replaces the loader; after, it is ignored.
    """
    with _lock:
        if name not in _loaded:
            _loaders[name] = loader


def get(name: str) -> Any | None:
    """Extension ``name``, or ``None`` if nobody provided it or its loader raised ImportError."""
    try:
        return _loaded[name]
    except KeyError:
        pass
    with _lock:
        if name not in _loaded:
            loader = _loaders.get(name)
            if loader is None:
                return None
            try:
                _loaded[name] = loader()
            except ImportError:
                _loaded[name] = None
        return _loaded[name]
