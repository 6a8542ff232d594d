"""Fast copies between the NCHW and NHWC layouts (float arrays, and the u8/s8 codes of an int8
model's quantized input), compiled with Numba.

Private helper of :func:`pytfrt.backends.cpu.data_ops.transpose`.  ``-tg-layout-nhwc`` leaves
one ``transpose {perm = [0, 2, 3, 1]}`` at a CNN's input (an NCHW image of 3 channels).
NumPy's copy of that transposed view walks the 3-element channel axis innermost (measured
180-200 us for a 224x224 RGB image); copying one channel plane at a time reads contiguous
rows and writes with a fixed stride (about 40 us).  Thread-safety: pure functions that write
only ``out``.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._jit import numba

FLOATS = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.uint8), np.dtype(np.int8))
"""Element types :func:`nchw_to_nhwc` takes (the name is historical: the 8-bit integers are an
int8 model's input, quantized before the transpose; 220 -> 60 us for a 224x224 RGB image)."""


def nchw_to_nhwc(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A C-contiguous ``x.transpose(0, 2, 3, 1)`` of a rank-4 ``x`` of a type of
    :data:`FLOATS` (any strides): new (64-byte aligned), or written into ``out`` (of that
    shape and dtype, not overlapping ``x``; other strides: through NumPy's copy)."""
    from pytfrt.backends.cpu import arena

    shape = (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
    if out is not None and not (out.shape == shape and out.dtype == x.dtype
                                and out.flags.c_contiguous):
        np.copyto(out, x.transpose(0, 2, 3, 1))
        return out
    if out is None:
        out = arena.empty(shape, x.dtype)
    if x.shape[1] == 1:  # one channel (a grayscale image): the same order, a plain copy
        np.copyto(out, x.reshape(shape))
        return out
    if x.shape[0] == 1 and x.dtype == np.float32 and x.flags.c_contiguous:
        from pytfrt.backends.cpu import _dnnl_layout  # one image on both threads

        if _dnnl_layout.run(x, out):
            return out
    _planes_to_nhwc(x, out)
    return out


@numba.njit(nogil=True, cache=True)
def _planes_to_nhwc(x, out):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    n, c, h, w = x.shape
    for b in range(n):
        for k in range(c):
            for i in range(h):
                for j in range(w):
                    out[b, i, j, k] = x[b, k, i, j]
