"""float32 layer norms along the last axis, in C: the row loops of :mod:`pytfrt.backends.cpu.norm`.

Private helper of :mod:`pytfrt.backends.cpu.norm`.  A Transformer runs a layer norm per
sub-layer (BERT-base 25 per call, on ``128 x 768`` at sequence 128), each on the calling
thread between two dense layers.  The Numba row loops (``norm._layer_norm_rows``) took
~45-55 us per ``128 x 768`` norm with the operand in cache; these loops, the same arithmetic,
compiled once per machine (:mod:`pytfrt.backends.cpu._ccompile`), take ~23-31 us alone and
~20% less than the Numba loops inside BERT (docs/kernels.md, "Layer norms in C").

Arithmetic (as the Numba loops): per row the float32 sum spread over 32 lanes (each lane adds
``d / 32`` terms; the lanes then added in order, or pairwise by the AVX-512 version, which is
written with intrinsics and picked at load time), the mean ``m``; the float32 sum of
``(x - m)^2`` spread the same way; ``inv = float32(1 / sqrt(double(q) / d + eps))``; then
``(x - m) * inv * gamma + beta`` (no contraction into fused multiply-adds).  Within 2e-7
relative of the float64 norm on BERT's and GPT-2's rows, as the Numba loops.

:func:`module` gives the compiled module (``None`` without a C compiler, or with
:data:`ENABLED` false: the callers keep the Numba loops) with:

* ``rows(x, gamma, beta, eps, y)`` -- the layer norm of each row of ``x (rows, d)`` into ``y``
  (may be ``x``);
* ``add_rows(a, b, gamma, beta, eps, s, y)`` -- ``s = a + b``, then ``y`` = the norm of ``s``,
  row by row while the row is in cache.

``gamma`` and ``beta`` are ``(d,)`` or ``(0,)`` (absent).  Every array must be float32 and
C-contiguous, ``x``/``a``/``b``/``s``/``y`` of one rank-2 shape (``TypeError`` or
``ValueError`` otherwise); the functions release the GIL and write only their outputs
(thread-safe).
"""

from __future__ import annotations

from types import ModuleType

from pytfrt.backends.cpu import _ccompile

ENABLED = True
"""Whether :func:`module` gives the C loops (``False``: ``None``, the Numba loops)."""

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>

#pragma GCC optimize("O3")
#define HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#define LANES 32

/* the float32 sum of x[0 .. d), or of (x[j] - m)^2 with squares, spread over LANES lanes */
HOT static float lane_sum(const float *restrict x, long d, float m, int squares) {
    float acc[LANES] = {0};
    long j = 0;
    if (squares) {
        for (; j + LANES <= d; j += LANES)
            for (int l = 0; l < LANES; l++) { float c = x[j + l] - m; acc[l] += c * c; }
    } else {
        for (; j + LANES <= d; j += LANES)
            for (int l = 0; l < LANES; l++) acc[l] += x[j + l];
    }
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) s += acc[l];
    for (; j < d; j++) { float c = squares ? x[j] - m : x[j]; s += squares ? c * c : c; }
    return s;
}

HOT static void norm_row(const float *restrict x, long d, const float *restrict g,
                         const float *restrict b, double eps, float *y) {
    const float m = lane_sum(x, d, 0.0f, 0) / (float)d;
    const float q = lane_sum(x, d, m, 1);
    const float inv = (float)(1.0 / sqrt((double)q / (double)d + eps));
    if (g && b) for (long j = 0; j < d; j++) y[j] = (x[j] - m) * inv * g[j] + b[j];
    else if (g) for (long j = 0; j < d; j++) y[j] = (x[j] - m) * inv * g[j];
    else if (b) for (long j = 0; j < d; j++) y[j] = (x[j] - m) * inv + b[j];
    else for (long j = 0; j < d; j++) y[j] = (x[j] - m) * inv;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* norm_row with AVX-512 intrinsics: the same lane spread (two 16-lane accumulators, the lanes
   then added in order), the same operations per element (no fused multiply-adds) */
__attribute__((target("avx512f"))) static float lane_sum512(const float *x, long d, float m,
                                                            int squares) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), vm = _mm512_set1_ps(m);
    long j = 0;
    for (; j + LANES <= d; j += LANES) {
        __m512 u = _mm512_loadu_ps(x + j), v = _mm512_loadu_ps(x + j + 16);
        if (squares) {
            u = _mm512_sub_ps(u, vm); v = _mm512_sub_ps(v, vm);
            u = _mm512_mul_ps(u, u); v = _mm512_mul_ps(v, v);
        }
        a0 = _mm512_add_ps(a0, u); a1 = _mm512_add_ps(a1, v);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; j < d; j++) { float c = squares ? x[j] - m : x[j]; s += squares ? c * c : c; }
    return s;
}

__attribute__((target("avx512f"))) static void norm_row512(
        const float *restrict x, long d, const float *restrict g, const float *restrict b,
        double eps, float *y) {
    const float m = lane_sum512(x, d, 0.0f, 0) / (float)d;
    const float q = lane_sum512(x, d, m, 1);
    const float inv = (float)(1.0 / sqrt((double)q / (double)d + eps));
    const __m512 vm = _mm512_set1_ps(m), vi = _mm512_set1_ps(inv);
    for (long j = 0; j < d; j += 16) {
        __mmask16 k = d - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d - j)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), vm), vi);
        if (g) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, g + j));
        if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, b + j));
        _mm512_mask_storeu_ps(y + j, k, v);
    }
}
static int has512 = -1;
#define NORM_ROW(...) (has512 ? norm_row512(__VA_ARGS__) : norm_row(__VA_ARGS__))
#else
static int has512 = 0;
#define NORM_ROW norm_row
#endif

HOT static void add_row(const float *restrict a, const float *restrict b, long d,
                        float *restrict s) {
    for (long j = 0; j < d; j++) s[j] = a[j] + b[j];
}

static PyArrayObject *f32(PyObject *o, int ndim, const char *what) {
    if (!PyArray_Check(o) || PyArray_TYPE((PyArrayObject *)o) != NPY_FLOAT32
        || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o)
        || PyArray_NDIM((PyArrayObject *)o) != ndim) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous float32 array of rank %d",
                     what, ndim);
        return NULL;
    }
    return (PyArrayObject *)o;
}

static int same(PyArrayObject *x, PyArrayObject *o, const char *what) {
    if (PyArray_DIM(o, 0) != PyArray_DIM(x, 0) || PyArray_DIM(o, 1) != PyArray_DIM(x, 1)) {
        PyErr_Format(PyExc_ValueError, "%s must have the shape of the rows", what);
        return 0;
    }
    return 1;
}

/* gamma or beta: (d,) -> its data, (0,) -> NULL (absent); *bad set on a wrong one */
static const float *param(PyObject *o, npy_intp d, const char *what, int *bad) {
    PyArrayObject *p = f32(o, 1, what);
    if (!p) { *bad = 1; return NULL; }
    if (PyArray_DIM(p, 0) == 0) return NULL;
    if (PyArray_DIM(p, 0) != d) {
        PyErr_Format(PyExc_ValueError, "%s must have the rows' length or be empty", what);
        *bad = 1;
        return NULL;
    }
    return (const float *)PyArray_DATA(p);
}

static PyObject *py_rows(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 5) { PyErr_SetString(PyExc_TypeError, "rows takes 5 arguments"); return NULL; }
    PyArrayObject *x = f32(a[0], 2, "x"), *y = x ? f32(a[4], 2, "y") : NULL;
    if (!y || !same(x, y, "y")) return NULL;
    double eps = PyFloat_AsDouble(a[3]);
    if (eps == -1.0 && PyErr_Occurred()) return NULL;
    const npy_intp r = PyArray_DIM(x, 0), d = PyArray_DIM(x, 1);
    int bad = 0;
    const float *g = param(a[1], d, "gamma", &bad), *b = bad ? NULL : param(a[2], d, "beta", &bad);
    if (bad) return NULL;
    const float *xp = (const float *)PyArray_DATA(x);
    float *yp = (float *)PyArray_DATA(y);
    Py_BEGIN_ALLOW_THREADS
    for (npy_intp i = 0; i < r; i++) NORM_ROW(xp + i * d, d, g, b, eps, yp + i * d);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_add_rows(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 7) { PyErr_SetString(PyExc_TypeError, "add_rows takes 7 arguments"); return NULL; }
    PyArrayObject *x = f32(a[0], 2, "a"), *x2 = x ? f32(a[1], 2, "b") : NULL;
    PyArrayObject *s = x2 ? f32(a[5], 2, "s") : NULL, *y = s ? f32(a[6], 2, "y") : NULL;
    if (!y || !same(x, x2, "b") || !same(x, s, "s") || !same(x, y, "y")) return NULL;
    double eps = PyFloat_AsDouble(a[4]);
    if (eps == -1.0 && PyErr_Occurred()) return NULL;
    const npy_intp r = PyArray_DIM(x, 0), d = PyArray_DIM(x, 1);
    int bad = 0;
    const float *g = param(a[2], d, "gamma", &bad), *b = bad ? NULL : param(a[3], d, "beta", &bad);
    if (bad) return NULL;
    const float *ap = (const float *)PyArray_DATA(x), *bp = (const float *)PyArray_DATA(x2);
    float *sp = (float *)PyArray_DATA(s), *yp = (float *)PyArray_DATA(y);
    Py_BEGIN_ALLOW_THREADS
    for (npy_intp i = 0; i < r; i++) {
        add_row(ap + i * d, bp + i * d, d, sp + i * d);
        NORM_ROW(sp + i * d, d, g, b, eps, yp + i * d);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

#define M(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, NULL}
static PyMethodDef methods[] = {M(rows), M(add_rows), {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) {
    import_array();
#if defined(__x86_64__)
    __builtin_cpu_init();
    has512 = __builtin_cpu_supports("avx512f");
#endif
    return PyModule_Create(&module_def);
}
"""

_extension = _ccompile.OptionalExtension(SOURCE, "pytfrt_layer_norm_")


def module() -> ModuleType | None:
    """The compiled module (built or loaded on first use), or ``None`` without a C compiler
    or with :data:`ENABLED` false."""
    if not ENABLED:
        return None
    return _extension()

