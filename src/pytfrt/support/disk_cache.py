"""The owner-only directory of generated code that pytfrt keeps between processes.

Compiled fused segments (C shared objects, :mod:`pytfrt.backends.cpu._ccompile`), the
whole-region Numba kernels (:mod:`pytfrt.backends.cpu.small_graph`) and the byte code of large
generated Python functions (:mod:`pytfrt.support.codegen`) live in :func:`cache_dir`.  What is
there is loaded and run, so the directory is used only when the current user owns it and
nobody else may write to it (docs/security.md).

Thread-safe (no state).
"""

from __future__ import annotations

import os
from pathlib import Path

from pytfrt.config import text as config_text


def cache_dir() -> Path | None:
    """Where generated kernels live: ``$PYTFRT_CACHE_DIR/graphs``, else
    ``$XDG_CACHE_HOME/pytfrt/graphs`` (``~/.cache``); ``None`` if it cannot be created.

    Code is imported from this directory, so it is used only when the current user owns it and
    nobody else may write to it; otherwise kernels are compiled afresh each run
    (docs/security.md)."""
    root = config_text("PYTFRT_CACHE_DIR")
    if root:
        base = Path(root)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "pytfrt"
    d = base / "graphs"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(d, os.W_OK):
        return None
    try:
        st = d.stat()
    except OSError:
        return None
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        return None
    return d


def key_digest(text: str) -> str:
    """32 hex digits naming what ``text`` generates in :func:`cache_dir` (BLAKE2b, 128 bits).

    Uses CPython's own BLAKE2 module where present: ``hashlib`` loads OpenSSL's library on
    import, which costs a short program more than everything it caches."""
    try:
        from _blake2 import blake2b
    except ImportError:  # another Python
        from hashlib import blake2b
    return blake2b(text.encode(), digest_size=16).hexdigest()
