"""float32 squeeze-and-excitation and spatial means in C (no Numba).

Private helper of :mod:`pytfrt.backends.cpu.squeeze_excite` and
:mod:`pytfrt.backends.cpu.pooling`.  Their Numba kernels were the only Numba code a mobile
CNN's call ran besides the convolutions' fork-join (:mod:`_spin_native`); importing Numba
and loading their machine code cost the process ~125 MB (``docs/benchmarks.md``, peak
memory).  These are the same loops in C, compiled once per machine into the on-disk cache
(:mod:`pytfrt.backends.cpu._ccompile`); float64 operands keep the Numba kernels.

:func:`module` gives the compiled module (``None`` without a C compiler: the callers keep
Numba) with:

* ``spatial_mean(x, nhwc, y)`` -- ``y[n, c]`` = the mean over pixels of ``x`` (``(N, P, C)`` if
  ``nhwc`` else ``(N, C, P)``), summed in double (with 64 channels or more, of float32 sums of
  eight pixels);
* ``excite(s, w1, b1, w2, b2, act, alpha, gate, ga, gb, h, gv)`` -- the gate ``gv`` (``C``) of
  the channel means ``s``: ``gate(act(s @ w1 + b1) @ w2 + b2)``, ``h`` the hidden scratch;
* ``se(x, w1, b1, w2, b2, act, alpha, gate, ga, gb, nhwc, y)`` -- the whole block per batch
  row of ``x`` as :func:`squeeze_excite._se`.

Activation codes are :data:`pytfrt.backends.cpu._epilogue.ACTIVATION_CODES`' (the GELUs use
the C library's ``erf``/``tanh``), gates ``0`` (sigmoid) and ``1`` (hard sigmoid
``clip(ga * v + gb, 0, 1)``).  Every array must be float32 and C-contiguous of the shapes the
callers check (``TypeError`` otherwise); the functions release the GIL and write only their
outputs (thread-safe).
"""

from __future__ import annotations

from pytfrt.backends.cpu import _ccompile

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>
#include <stdlib.h>

/* the loops vectorised (no fast-math: IEEE float rounding; the channel sums in double, of
   float32 sums of eight pixels or, with few channels, as four interleaved partial sums) for
   the CPU the process runs on */
#pragma GCC optimize("O3")
#define HOT __attribute__((target_clones("avx512f", "avx2", "default")))

static double sigm(double v) {
    if (v >= 0) return 1.0 / (1.0 + exp(-v));
    double t = exp(v);
    return t / (1.0 + t);
}

static double act_of(double v, long act, double alpha) {
    const double sqrt_half = 0.70710678118654752440, c = 0.79788456080286535588;
    switch (act) {
    case 1: return v > 0 ? v : 0.0;
    case 2: return fmin(fmax(v, 0.0), 6.0);
    case 3: return v >= 0 ? v : alpha * v;
    case 4: return sigm(v);
    case 5: return tanh(v);
    case 6: return v * sigm(v);
    case 7: case 10: return 0.5 * v * (1.0 + erf(v * sqrt_half));
    case 8: case 11: return 0.5 * v * (1.0 + tanh(c * (v + 0.044715 * v * v * v)));
    case 9: return v * fmin(fmax(v + 3.0, 0.0), 6.0) / 6.0;
    default: return v;
    }
}

/* out = v @ w + b, w row-major (n_in, n_out): per block of AFB (then 48, 32 or 16) outputs
   the sums stay in registers over all n_in rows (one load of w per product; each output
   summed in row order, each product rounded and then added, as the plain loop for the last
   fewer than 16 outputs does).  The hidden layers of squeeze-excite blocks are narrow (4-48
   outputs in EfficientNet-B0): summed through memory, each row's additions wait for the last
   row's stores */
#define AFB 64
#define AFFINE_BLOCK(W)                                                                       \
    static inline __attribute__((always_inline)) void affine_##W(                            \
        const float *restrict v, const float *restrict w, const float *restrict b,            \
        float *restrict out, long n_in, long n_out, long j) {                                 \
        float acc[W];                                                                         \
        for (int k = 0; k < W; k++) acc[k] = b[j + k];                                        \
        for (long i = 0; i < n_in; i++) {                                                     \
            float vi = v[i];                                                                  \
            const float *wi = w + i * n_out + j;                                              \
            for (int k = 0; k < W; k++) acc[k] += vi * wi[k];                                 \
        }                                                                                     \
        for (int k = 0; k < W; k++) out[j + k] = acc[k];                                      \
    }
AFFINE_BLOCK(64)
AFFINE_BLOCK(48)
AFFINE_BLOCK(32)
AFFINE_BLOCK(16)

HOT static void affine(const float *restrict v, const float *restrict w,
                       const float *restrict b, float *restrict out, long n_in, long n_out) {
    long j = 0;
    for (; j + AFB <= n_out; j += AFB) affine_64(v, w, b, out, n_in, n_out, j);
    long rest = n_out - j;
    if (rest >= 48) { affine_48(v, w, b, out, n_in, n_out, j); j += 48; }
    else if (rest >= 32) { affine_32(v, w, b, out, n_in, n_out, j); j += 32; }
    else if (rest >= 16) { affine_16(v, w, b, out, n_in, n_out, j); j += 16; }
    if (j == n_out) return;
    for (long t = j; t < n_out; t++) out[t] = b[t];
    for (long i = 0; i < n_in; i++) {
        float vi = v[i];
        const float *wi = w + i * n_out;
        for (long t = j; t < n_out; t++) out[t] += vi * wi[t];
    }
}

typedef struct { long act, gate; double alpha, ga, gb; } params;

/* float32 sigmoid 1 / (1 + e^-v) in a loop the compiler vectorises (a C library exp per
   channel, ~20 ns, was most of the gate's time: 1152 channels ~23 us): e^-v = 2^k e^r with
   k = round(-v log2 e) (2^k built in the exponent field), r = -v - k ln 2
   in two steps (ln 2's high part times k is exact) and e^r by its Taylor polynomial of degree
   7 (|r| <= ln 2 / 2: 5e-9 relative), v clamped to [-87, 88] first (2^k stays a normal
   number or zero); within 3 float32 roundings of the float64 sigmoid for v >= -87, about 1e-38
   below (0 in float64 from -745 on); NaN gives NaN, -inf 1.6e-38 and inf 1 */
static inline __attribute__((always_inline)) float sigmoid_f(float v) {
    float u = v < -87.0f ? 87.0f : (v > 88.0f ? -88.0f : -v);  /* NaN stays NaN */
    float k = __builtin_rintf(u * 1.44269504088896341f);
    float r = (u - k * 0.693359375f) + k * 2.12194440e-4f;
    float e = 1.0f / 5040.0f;
    e = e * r + 1.0f / 720.0f;
    e = e * r + 1.0f / 120.0f;
    e = e * r + 1.0f / 24.0f;
    e = e * r + 1.0f / 6.0f;
    e = e * r + 0.5f;
    e = e * r + 1.0f;
    e = e * r + 1.0f;
    union { int i; float f; } two = {.i = ((int)k + 127) << 23};
    return 1.0f / (1.0f + e * two.f);
}

HOT static void sigmoid_f32(float *restrict g, long n) {
    for (long c = 0; c < n; c++) g[c] = sigmoid_f(g[c]);
}

HOT static void silu_f32(float *restrict g, long n) {
    for (long c = 0; c < n; c++) g[c] = g[c] * sigmoid_f(g[c]);
}

HOT static void hard_sigmoid_f32(float *restrict g, long n, double ga, double gb) {
    for (long c = 0; c < n; c++) g[c] = (float)fmin(fmax(ga * g[c] + gb, 0.0), 1.0);
}

static void gate_c(float *g, long n, const params *p) {
    if (p->gate == 0) sigmoid_f32(g, n);
    else hard_sigmoid_f32(g, n, p->ga, p->gb);
}

static void excite_c(const float *s, const float *w1, const float *b1, const float *w2,
                     const float *b2, long c_n, long r_n, const params *p, float *h, float *gv) {
    affine(s, w1, b1, h, c_n, r_n);
    if (p->act == 6) silu_f32(h, r_n);
    else for (long r = 0; r < r_n; r++) h[r] = (float)act_of(h[r], p->act, p->alpha);
    affine(h, w2, b2, gv, r_n, c_n);
    gate_c(gv, c_n, p);
}

/* the channel sums of an NHWC image of fewer than 4 * PSB channels: per block of PSB
   channels, PSI interleaved partial sums (pixels q, q + PSI, ...) in registers, added at the
   end (one running sum per channel is an addition's latency per pixel: 56x56x16 8.9 -> 6.2 us;
   with more channels the running sums of one pixel are independent enough) */
#define PSB 16
#define PSI 4
HOT static void few_channel_sums(const float *restrict x, long npix, long c_n,
                                 double *restrict acc) {
    long c0 = 0;
    for (; c0 + PSB <= c_n; c0 += PSB) {
        double a[PSI][PSB] = {{0}};
        long q = 0;
        for (; q + PSI <= npix; q += PSI)
            for (int k = 0; k < PSI; k++) {
                const float *row = x + (q + k) * c_n + c0;
                for (int c = 0; c < PSB; c++) a[k][c] += row[c];
            }
        for (; q < npix; q++)
            for (int c = 0; c < PSB; c++) a[0][c] += x[q * c_n + c0 + c];
        for (int c = 0; c < PSB; c++) acc[c0 + c] = (a[0][c] + a[1][c]) + (a[2][c] + a[3][c]);
    }
    for (long c = c0; c < c_n; c++) {
        double t = 0.0;
        for (long q = 0; q < npix; q++) t += x[q * c_n + c];
        acc[c] = t;
    }
}

/* the channel sums of an NHWC image of at least 4 * PSB channels: per group of MSP pixels,
   float32 partial sums of blocks of MCB (then 16) channels in registers, each group's added
   into the double sums (a double sum per channel read and written per pixel: 56x56x144 68 ->
   35 us, 7x7x1152 8.1 -> 6.0 us, one thread, hot) */
#define MSP 8
#define MCB 64
#define CHANNEL_BLOCK(W)                                                                      \
    {                                                                                         \
        float part[W];                                                                        \
        for (int c = 0; c < W; c++) part[c] = x0[c0 + c];                                     \
        for (long q = 1; q < qn; q++)                                                         \
            for (int c = 0; c < W; c++) part[c] += x0[q * c_n + c0 + c];                      \
        for (int c = 0; c < W; c++) acc[c0 + c] += part[c];                                   \
    }
HOT static void many_channel_sums(const float *restrict x, long npix, long c_n,
                                  double *restrict acc) {
    for (long c = 0; c < c_n; c++) acc[c] = 0.0;
    for (long q0 = 0; q0 < npix; q0 += MSP) {
        long qn = npix - q0 < MSP ? npix - q0 : MSP, c0 = 0;
        const float *x0 = x + q0 * c_n;
        for (; c0 + MCB <= c_n; c0 += MCB) CHANNEL_BLOCK(MCB)
        for (; c0 + 16 <= c_n; c0 += 16) CHANNEL_BLOCK(16)
        for (long q = 0; q < qn; q++)
            for (long c = c0; c < c_n; c++) acc[c] += x0[q * c_n + c];
    }
}

HOT static void means(const float *restrict x, long npix, long c_n, int nhwc,
                      double *restrict acc) {
    if (nhwc && c_n < 4 * PSB) {
        few_channel_sums(x, npix, c_n, acc);
    } else if (nhwc) {
        many_channel_sums(x, npix, c_n, acc);
    } else {
        for (long c = 0; c < c_n; c++) {
            const float *row = x + c * npix;
            double t = 0.0;
            for (long q = 0; q < npix; q++) t += row[q];
            acc[c] = t;
        }
    }
}

/* y = x * the channel's gate (x and y may be the same array: in place) */
HOT static void scale(const float *x, const float *restrict gv, float *y, long npix, long c_n,
                      int nhwc) {
    if (nhwc) {
        for (long q = 0; q < npix; q++) {
            const float *xq = x + q * c_n;
            float *yq = y + q * c_n;
            for (long c = 0; c < c_n; c++) yq[c] = xq[c] * gv[c];
        }
    } else {
        for (long c = 0; c < c_n; c++) {
            float g = gv[c];
            for (long q = 0; q < npix; q++) y[c * npix + q] = x[c * npix + q] * g;
        }
    }
}

/* -- arguments ----------------------------------------------------------------------------- */

static float *f32(PyObject *o, int ndim, const char *what) {
    if (!PyArray_Check(o) || PyArray_TYPE((PyArrayObject *)o) != NPY_FLOAT32
        || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o)
        || (ndim && PyArray_NDIM((PyArrayObject *)o) != ndim)) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous float32 array of rank %d",
                     what, ndim);
        return NULL;
    }
    return (float *)PyArray_DATA((PyArrayObject *)o);
}

#define DIM(o, i) ((long)PyArray_DIM((PyArrayObject *)(o), (i)))
#define SIZE(o) ((long)PyArray_SIZE((PyArrayObject *)(o)))

static int params_of(PyObject *const *a, params *p) {
    p->act = PyLong_AsLong(a[0]);
    p->alpha = PyFloat_AsDouble(a[1]);
    p->gate = PyLong_AsLong(a[2]);
    p->ga = PyFloat_AsDouble(a[3]);
    p->gb = PyFloat_AsDouble(a[4]);
    return PyErr_Occurred() ? -1 : 0;
}

/* the weights: w1 (C, R), b1 (R), w2 (R, C), b2 (C) */
static int weights(PyObject *const *a, float **w, long *c_n, long *r_n) {
    for (int i = 0; i < 4; i++)
        if (!(w[i] = f32(a[i], i % 2 ? 1 : 2, "a weight"))) return -1;
    *c_n = DIM(a[0], 0); *r_n = DIM(a[0], 1);
    if (SIZE(a[1]) != *r_n || DIM(a[2], 0) != *r_n || DIM(a[2], 1) != *c_n || SIZE(a[3]) != *c_n) {
        PyErr_SetString(PyExc_TypeError, "the weights do not chain C -> R -> C");
        return -1;
    }
    return 0;
}

static PyObject *py_spatial_mean(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 3) { PyErr_SetString(PyExc_TypeError, "spatial_mean(x, nhwc, y)"); return NULL; }
    float *x = f32(a[0], 3, "x"), *y = x ? f32(a[2], 2, "y") : NULL;
    int nhwc = PyObject_IsTrue(a[1]);
    if (!y || nhwc < 0) return NULL;
    long nb = DIM(a[0], 0), c_n = DIM(a[0], nhwc ? 2 : 1), npix = DIM(a[0], nhwc ? 1 : 2);
    if (DIM(a[2], 0) != nb || DIM(a[2], 1) != c_n) {
        PyErr_SetString(PyExc_TypeError, "y must be (N, C) of x");
        return NULL;
    }
    double *acc = malloc(sizeof(double) * (c_n ? c_n : 1));
    if (!acc) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    for (long b = 0; b < nb; b++) {
        means(x + b * npix * c_n, npix, c_n, nhwc, acc);
        for (long c = 0; c < c_n; c++) y[b * c_n + c] = (float)(acc[c] / npix);
    }
    Py_END_ALLOW_THREADS
    free(acc);
    Py_RETURN_NONE;
}

static PyObject *py_excite(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 12) { PyErr_SetString(PyExc_TypeError, "excite() takes 12 arguments"); return NULL; }
    float *w[4], *s = f32(a[0], 1, "s"), *h, *gv;
    long c_n, r_n;
    params p;
    if (!s || weights(a + 1, w, &c_n, &r_n) || params_of(a + 5, &p)) return NULL;
    if (!(h = f32(a[10], 1, "h")) || !(gv = f32(a[11], 1, "gv"))) return NULL;
    if (SIZE(a[0]) != c_n || SIZE(a[10]) != r_n || SIZE(a[11]) != c_n) {
        PyErr_SetString(PyExc_TypeError, "s, h, gv must have C, R, C elements");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    excite_c(s, w[0], w[1], w[2], w[3], c_n, r_n, &p, h, gv);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_se(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 12) { PyErr_SetString(PyExc_TypeError, "se() takes 12 arguments"); return NULL; }
    float *w[4], *x = f32(a[0], 3, "x"), *y;
    long c_n, r_n;
    params p;
    if (!x || weights(a + 1, w, &c_n, &r_n) || params_of(a + 5, &p)) return NULL;
    int nhwc = PyObject_IsTrue(a[10]);
    if (nhwc < 0 || !(y = f32(a[11], 3, "y"))) return NULL;
    long nb = DIM(a[0], 0), npix = DIM(a[0], nhwc ? 1 : 2);
    if (DIM(a[0], nhwc ? 2 : 1) != c_n || SIZE(a[11]) != SIZE(a[0])) {
        PyErr_SetString(PyExc_TypeError, "x and y must be (N, P, C) or (N, C, P) with the "
                        "weights' C");
        return NULL;
    }
    double *acc = malloc(sizeof(double) * (c_n + 1));
    float *buf = malloc(sizeof(float) * (2 * c_n + r_n + 1));
    if (!acc || !buf) { free(acc); free(buf); return PyErr_NoMemory(); }
    float *s = buf, *gv = buf + c_n, *h = buf + 2 * c_n;
    Py_BEGIN_ALLOW_THREADS
    for (long b = 0; b < nb; b++) {
        const float *xb = x + b * npix * c_n;
        float *yb = y + b * npix * c_n;
        means(xb, npix, c_n, nhwc, acc);
        for (long c = 0; c < c_n; c++) s[c] = (float)(acc[c] / npix);
        excite_c(s, w[0], w[1], w[2], w[3], c_n, r_n, &p, h, gv);
        scale(xb, gv, yb, npix, c_n, nhwc);
    }
    Py_END_ALLOW_THREADS
    free(acc);
    free(buf);
    Py_RETURN_NONE;
}

#define M(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, NULL}
static PyMethodDef methods[] = {M(spatial_mean), M(excite), M(se), {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { import_array(); return PyModule_Create(&module_def); }
"""


module = _ccompile.OptionalExtension(SOURCE, "pytfrt_se_")
"""``module()``: the compiled module, or ``None`` (no C compiler, or ``module.enabled`` set
false: the callers keep Numba)."""
