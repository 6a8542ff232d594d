"""Fast copies between the NCHW and NHWC layouts (float arrays, and the u8/s8 codes of an int8
model's quantized input).

Private helper of :func:`pytfrt.backends.cpu.data_ops.transpose` and the stem convolution
(:class:`pytfrt.backends.cpu.conv.StemConv`).  ``-tg-layout-nhwc`` leaves one
``transpose {perm = [0, 2, 3, 1]}`` at a CNN's input (an NCHW image of 3 channels).  NumPy's
copy of that transposed view walks the 3-element channel axis innermost (measured 180-200 us
for a 224x224 RGB image); copying one channel plane at a time reads contiguous rows and
writes with a fixed stride (about 40 us, Numba).  A C-contiguous float32 image takes the C
copy of :data:`native` (compiled once per machine): the three planes of an RGB image
interleaved in one pass, 24-26 us hot on one thread.  It replaced the oneDNN copy split over
both threads (:mod:`pytfrt.backends.cpu._dnnl_layout`, still the path without a C compiler):
the image is a model call's first operation, when the pool's helper is often asleep (the
caller's previous call ended long ago) and must be woken -- in MobileNetV3-small calls
interleaved with ONNX Runtime's the copy took 137 -> 91 us (loaded machine) and 116 -> 95 us
(real-time priority), medians of 200 calls.  Thread-safety: pure functions that write only
``out``.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu import _ccompile
from pytfrt.backends.cpu._jit import numba

NATIVE = True
"""Whether C-contiguous float32 images take :data:`native`'s copy (``False``: the oneDNN
split copy or Numba's; read per call, for A/B runs)."""

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#pragma GCC optimize("O3")
#define HOT __attribute__((target_clones("avx512f", "avx2", "default")))

/* one NCHW image's c planes of hw pixels into NHWC: three channels (RGB) interleaved in one
   pass (the compiler's permutes), others plane by plane */
HOT static void rgb(const float *restrict x, float *restrict y, long hw) {
    const float *r = x, *g = x + hw, *b = x + 2 * hw;
    for (long j = 0; j < hw; j++) {
        y[3 * j] = r[j];
        y[3 * j + 1] = g[j];
        y[3 * j + 2] = b[j];
    }
}

HOT static void planes(const float *restrict x, float *restrict y, long c_n, long hw) {
    for (long k = 0; k < c_n; k++)
        for (long j = 0; j < hw; j++) y[j * c_n + k] = x[k * hw + j];
}

/* nchw_to_nhwc(x, y): x C-contiguous float32 (N, C, H, W), y C-contiguous float32 of its
   size, not overlapping x (the caller checks shapes and overlap) */
static PyObject *py_nchw_to_nhwc(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 2) { PyErr_SetString(PyExc_TypeError, "nchw_to_nhwc(x, y)"); return NULL; }
    for (int i = 0; i < 2; i++) {
        PyArrayObject *o = (PyArrayObject *)a[i];
        if (!PyArray_Check(a[i]) || PyArray_TYPE(o) != NPY_FLOAT32 || PyArray_NDIM(o) != 4
            || !PyArray_IS_C_CONTIGUOUS(o) || (i == 1 && !PyArray_ISWRITEABLE(o))) {
            PyErr_SetString(PyExc_TypeError, "x and y must be C-contiguous float32 rank-4 "
                            "arrays (y writable)");
            return NULL;
        }
    }
    PyArrayObject *x = (PyArrayObject *)a[0], *y = (PyArrayObject *)a[1];
    if (PyArray_SIZE(x) != PyArray_SIZE(y)) {
        PyErr_SetString(PyExc_TypeError, "x and y must have the same size");
        return NULL;
    }
    long nb = (long)PyArray_DIM(x, 0), c_n = (long)PyArray_DIM(x, 1);
    long hw = (long)(PyArray_DIM(x, 2) * PyArray_DIM(x, 3));
    const float *xp = (const float *)PyArray_DATA(x);
    float *yp = (float *)PyArray_DATA(y);
    Py_BEGIN_ALLOW_THREADS
    for (long b = 0; b < nb; b++) {
        if (c_n == 3) rgb(xp + b * 3 * hw, yp + b * 3 * hw, hw);
        else planes(xp + b * c_n * hw, yp + b * c_n * hw, c_n, hw);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"nchw_to_nhwc", (PyCFunction)(void (*)(void))py_nchw_to_nhwc, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { import_array(); return PyModule_Create(&module_def); }
"""

native = _ccompile.OptionalExtension(SOURCE, "pytfrt_layout_")
"""``native()``: the compiled module (``nchw_to_nhwc(x, y)`` for C-contiguous float32 images,
the GIL released), or ``None`` without a C compiler (the callers keep the other paths)."""

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
    if NATIVE and x.dtype == np.float32 and x.flags.c_contiguous:
        mod = native()
        if mod is not None:
            mod.nchw_to_nhwc(x, out)
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
