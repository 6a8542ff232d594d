"""Type stub of the optional C extension ``pytfrt.serving._json_scan`` (source: ``_json_scan.c``).

The float32 tensor scan of :mod:`pytfrt.serving.fast_json` in C, with the contract of
``fast_json._scan_impl``; numbers the fast arithmetic cannot settle are converted exactly as
``json.loads`` does.  Releases the GIL while it scans.
"""

from typing import Any

import numpy as np

def scan(
    buf: bytes | np.ndarray,
    start: int,
    stop: int,
    suffix: bool,
    pow10: Any,
    dims: np.ndarray,
    counts: np.ndarray,
    partial: np.ndarray,
    inherited: np.ndarray,
    out: np.ndarray,
    /,
) -> tuple[int, int, int, int, int, int, int, int]:
    """Scan ``buf[start:stop]``: (status, rank, number_depth, depth, min_depth, min_pos, count,
    end), as ``fast_json._scan_impl`` (``pow10`` is unused).

    Raises:
        TypeError: an argument of the wrong kind (``dims``, ``counts``, ``partial``: int64,
            ``inherited``: bool, 65 or more items; ``out``: float32).
        ValueError: ``start``/``stop`` outside ``buf``.
    """

vector: int
"""1 when the scan reads structural characters and numbers with SSE2 (x86-64), else 0."""

def dumps_float32(array: np.ndarray, /) -> bytes:
    """``json.dumps(array.tolist(), separators=(",", ":")).encode()`` for a C-contiguous,
    non-empty float32 array of rank 1 to 32.

    Raises:
        TypeError: any other array.
    """
