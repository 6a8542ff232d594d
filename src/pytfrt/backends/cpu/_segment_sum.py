"""The compiled loop of ``unsorted_segment_sum``: rows of ``data`` added into the rows of
``out`` that ``ids`` name, in row order (as TensorFlow's CPU kernel sums them); ids outside
``[0, len(out))`` are skipped.  An embedding's gradient: a few hundred rows into a table of
any size, without the one-hot matrix a product would need.  Writes only ``out``; thread-safe
for distinct ``out`` arrays (no GIL held).
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._jit import numba


@numba.njit(nogil=True, cache=True)
def segment_sum_rows(data: np.ndarray, ids: np.ndarray, out: np.ndarray) -> None:
    n, width = data.shape
    segments = out.shape[0]
    for i in range(n):
        s = ids[i]
        if 0 <= s < segments:
            for j in range(width):
                out[s, j] += data[i, j]
