"""Winograd F(4x4, 3x3) / F(2x2, 3x3) convolution of float32 NHWC images in C (AVX-512).

Private helper of :mod:`pytfrt.backends.cpu.conv` (the ``winograd_native`` algorithm; see
``docs/kernels.md``, "Native Winograd").  The Numba/BLAS Winograd of
:mod:`pytfrt.backends.cpu._winograd` transforms a whole layer at a time (``V`` and ``M`` far
bigger than L2) and glues three parallel phases together in Python; it lost to oneDNN's direct
convolution inside a network.  This one is one native call per convolution, split into *tile
blocks* that keep their data in L1/L2:

* the transformed filter ``U = G g G^T`` (:func:`pytfrt.backends.cpu._winograd.filter_transform`)
  is packed once per plan in the GEMM micro-kernel's order: per transform position ``e`` and
  block of 64 output channels (the last one 16, 32 or 48 wide; ``cout`` padded to a multiple of
  16 with zeros), ``cin`` rows of that block's columns;
* a part of the job is a range of tile blocks of ``T`` tiles (:func:`block_tiles`); per block,
  the input transform ``B^T d B`` of each tile's ``(m + 2)^2 x cin`` patch (zero outside the
  image) into ``V[e][t][c]``, then per block of 64 output channels the ``(m + 2)^2`` products
  ``M[e] = V[e] U[e]`` (a 6-row x 4-zmm register-blocked micro-kernel: broadcast FMAs of ``V``
  against 64 columns of ``U``) and the output transform ``A^T M A`` of those channels, with the
  epilogue (bias, the residual already in ``y``, ReLU / ReLU6 / leaky ReLU) applied in
  registers and written straight into ``y``;
* the parts run as *call parts* on :mod:`pytfrt.backends.cpu._spin_pool`'s helpers (the GIL
  released, one native call for the whole convolution: :meth:`WinoConv.launcher`) or, with one
  thread, all on the caller.

:data:`module` is the compiled C module (``None`` without a C compiler); :func:`available` is
false also on CPUs without AVX-512F (the callers keep oneDNN or the Numba Winograd there).
Accuracy: F(4x4) with the points 0, +-1, +-2 (Lavin & Gray's matrices) rounds more than a direct
convolution (errors ~1e-6 relative of the output's scale per layer, see the tests); F(2x2)
~2e-7.  Thread-safety: a :class:`WinoConv` is immutable after construction except its caches
(filled under a lock); its launchers may be called from any thread (a second concurrent caller
of the same launcher runs on its own thread instead of the pool).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _ccompile

ENABLED = True
"""Whether ``auto`` convolutions may pick the native Winograd (:func:`wins`; ``False``: oneDNN's
direct convolution everywhere, for A/B runs; read when a shape first runs)."""
MIN_PIXELS = 7 * 7
"""Fewest output pixels per image for which :func:`wins` picks the native Winograd."""
MAX_CHANNELS = 512
"""Most input or output channels for which :func:`wins` picks the native Winograd."""
MIN_CHANNELS = 32
"""Fewest input and output channels for which :func:`wins` picks the native Winograd (fewer:
the transforms' share grows and oneDNN's kernels were not measured against it)."""
F4_MIN_TILES = 32
"""Fewest 4x4 output tiles of a whole call for which :func:`tile_for` picks F(4x4): with fewer
(ResNet-50's 14x14 and 7x7 layers at batch 1: 16 and 4) F(2x2), whose transformed filter is
16/36 the size (read from memory once per call when a call's tiles are few: 7x7x512 at batch 1
ran 0.77x oneDNN's time with F(4x4), 1.26x faster with F(2x2); 14x14x256 level)."""
BLOCK_BYTES = 384 << 10
"""Bytes of a tile block's ``V`` (all channels) and ``M`` (one 64-channel block) together:
sets the tiles per block ``T`` (:func:`block_tiles`), kept within L2 (1 MiB per core here)."""
SPLIT_FILTER_BYTES = 2 << 20
"""Transformed filters of at least this many bytes are split between the threads by output
channels when a call has few tile blocks (:func:`split`): every tile block reads the whole
filter it uses, so with the tiles split alone each thread reads all of it once per block --
at batch 1 the filter, not the arithmetic, sets the time (28x28x128 0.49 -> 0.42 ms,
14x14x256 0.75 -> 0.56, 7x7x512 1.28 -> 0.74, against oneDNN's 0.99, 0.98 and 0.91; at batch 8,
many blocks, it measured level or 5-7% slower)."""
WIDE_BLOCK_BYTES = 768 << 10
""":data:`BLOCK_BYTES` for a split filter: larger blocks, fewer passes over the filter."""
ACTS = {0: 0, 1: 1, 2: 2, 3: 3}
"""Activation codes (:data:`pytfrt.backends.cpu._epilogue.ACTIVATION_CODES`) the kernel
applies: none, ReLU, ReLU6, leaky ReLU."""

# context words (an int64 array per input shape, read by the C part function)
(C_X, C_Y, C_U, C_BIAS, C_NB, C_H, C_W, C_CIN, C_COUT, C_COUTP, C_OH, C_OW, C_PT, C_PL, C_TH,
 C_TW, C_NTILES, C_TB, C_NPARTS, C_ACT, C_ALPHA, C_RES, C_TILE, C_BUSY, C_XPS, C_XCS, C_YPS,
 C_YCS, C_CGROUPS) = range(29)
NCTX = 32

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { X, Y, U, BIAS, NB, H, W, CIN, COUT, COUTP, OH, OW, PT, PL, TH, TW, NTILES, TB, NPARTS,
       ACT, ALPHA, RES, TILE, BUSY, XPS, XCS, YPS, YCS, CGROUPS, NCTX = 32 };
/* XPS, XCS (YPS, YCS): the input's (output's) floats between pixels and between blocks of 16
   channels -- NHWC: (channels, 16); NCHW16c: (16, H * W * 16) */
#define NBW 64  /* output channels per column block of U and M */

static int HAVE = -1;  /* whether the CPU has AVX-512F (checked once) */
static int have_avx512(void) {
    if (HAVE < 0) { __builtin_cpu_init(); HAVE = __builtin_cpu_supports("avx512f") ? 1 : 0; }
    return HAVE;
}

/* per-thread scratch (V and M of one tile block), grown as needed, kept for the thread */
static __thread float *SCR = NULL;
static __thread size_t SCR_N = 0;
static float *scratch(size_t n) {
    if (n > SCR_N) {
        free(SCR);
        SCR = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
        SCR_N = SCR ? n : 0;
    }
    return SCR;
}

#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#pragma GCC optimize("O3")
#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

/* B^T d for F(4x4, 3x3) (d: 6 vectors) */
AI void bt6(const __m512 *d, __m512 *o) {
    const __m512 four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f);
    const __m512 two = _mm512_set1_ps(2.0f);
    __m512 p = _mm512_fnmadd_ps(four, d[2], d[4]);           /* d4 - 4 d2 */
    __m512 q = _mm512_fnmadd_ps(four, d[1], d[3]);           /* d3 - 4 d1 */
    __m512 r = _mm512_sub_ps(d[4], d[2]);                     /* d4 - d2 */
    __m512 s = _mm512_sub_ps(d[3], d[1]);                     /* d3 - d1 */
    o[0] = _mm512_fnmadd_ps(five, d[2], _mm512_fmadd_ps(four, d[0], d[4]));
    o[1] = _mm512_add_ps(p, q);
    o[2] = _mm512_sub_ps(p, q);
    o[3] = _mm512_fmadd_ps(two, s, r);
    o[4] = _mm512_fnmadd_ps(two, s, r);
    o[5] = _mm512_fnmadd_ps(five, d[3], _mm512_fmadd_ps(four, d[1], d[5]));
}

/* A^T m for F(4x4, 3x3) (m: 6 vectors, 4 results) */
AI void at6(const __m512 *m, __m512 *o) {
    const __m512 two = _mm512_set1_ps(2.0f), four = _mm512_set1_ps(4.0f);
    const __m512 eight = _mm512_set1_ps(8.0f);
    __m512 a = _mm512_add_ps(m[1], m[2]), b = _mm512_sub_ps(m[1], m[2]);
    __m512 c = _mm512_add_ps(m[3], m[4]), d = _mm512_sub_ps(m[3], m[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], a), c);
    o[1] = _mm512_fmadd_ps(two, d, b);
    o[2] = _mm512_fmadd_ps(four, c, a);
    o[3] = _mm512_add_ps(_mm512_fmadd_ps(eight, d, b), m[5]);
}

/* B^T d for F(2x2, 3x3) (d: 4 vectors) */
AI void bt4(const __m512 *d, __m512 *o) {
    o[0] = _mm512_sub_ps(d[0], d[2]);
    o[1] = _mm512_add_ps(d[1], d[2]);
    o[2] = _mm512_sub_ps(d[2], d[1]);
    o[3] = _mm512_sub_ps(d[1], d[3]);
}

/* A^T m for F(2x2, 3x3) (m: 4 vectors, 2 results) */
AI void at4(const __m512 *m, __m512 *o) {
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], m[1]), m[2]);
    o[1] = _mm512_sub_ps(_mm512_sub_ps(m[1], m[2]), m[3]);
}

/* the input transform of tile t into row tr of V (V[e] at v + e * ldv, rows of cin) */
#define INPUT_TRANSFORM(NAME, A, MT, BT)                                                      \
static void NAME(const int64_t *c, const float *x, int64_t t, float *v, int64_t ldv,          \
                 int64_t tr) {                                                                \
    const int64_t th = c[TH], tw = c[TW], h = c[H], w = c[W], cin = c[CIN];                   \
    const int64_t n = t / (th * tw), ty = (t / tw) % th, tx = t % tw;                         \
    const int64_t r0 = ty * MT - c[PT], c0 = tx * MT - c[PL];                                 \
    const int64_t ps = c[XPS], cs = c[XCS];                                                   \
    const float *xn = x + n * h * w * cin;                                                    \
    float *vt = v + tr * cin;                                                                 \
    int okc[A];                                                                               \
    for (int j = 0; j < A; j++) okc[j] = c0 + j >= 0 && c0 + j < w;                           \
    for (int64_t ch = 0; ch < cin; ch += 16) {                                                \
        const __mmask16 m = cin - ch >= 16 ? (__mmask16)0xFFFF                                \
                                           : (__mmask16)((1u << (cin - ch)) - 1);             \
        __m512 tmp[A][A];                                                                     \
        for (int i = 0; i < A; i++) {                                                         \
            const int64_t r = r0 + i;                                                         \
            __m512 d[A];                                                                      \
            if (r < 0 || r >= h) {                                                            \
                for (int j = 0; j < A; j++) d[j] = _mm512_setzero_ps();                       \
            } else {                                                                          \
                const float *row = xn + (r * w + c0) * ps + ch / 16 * cs;                     \
                for (int j = 0; j < A; j++)                                                   \
                    d[j] = okc[j] ? _mm512_maskz_loadu_ps(m, row + j * ps)                    \
                                  : _mm512_setzero_ps();                                      \
            }                                                                                 \
            BT(d, tmp[i]);                                                                    \
        }                                                                                     \
        for (int k = 0; k < A; k++) {                                                         \
            __m512 d[A], o[A];                                                                \
            for (int i = 0; i < A; i++) d[i] = tmp[i][k];                                     \
            BT(d, o);                                                                         \
            for (int a = 0; a < A; a++)                                                       \
                _mm512_mask_storeu_ps(vt + (a * A + k) * ldv + ch, m, o[a]);                  \
        }                                                                                     \
    }                                                                                         \
}
INPUT_TRANSFORM(input4, 6, 4, bt6)
INPUT_TRANSFORM(input2, 4, 2, bt4)

AI __m512 activate(__m512 v, int64_t act, __m512 alpha) {
    const __m512 zero = _mm512_setzero_ps();
    switch (act) {
    case 1: return _mm512_max_ps(v, zero);
    case 2: return _mm512_min_ps(_mm512_max_ps(v, zero), _mm512_set1_ps(6.0f));
    case 3: return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, alpha);
    default: return v;
    }
}

/* the output transform of row tr of M (M[e] at mm + e * ldm, rows of NBW) for output channels
   ch0 .. ch0 + bw of tile t, with the epilogue, into y */
#define OUTPUT_TRANSFORM(NAME, A, MT, AT)                                                     \
static void NAME(const int64_t *c, const float *mm, int64_t ldm, int64_t tr, int64_t t,       \
                 int64_t ch0, int64_t bw, float *y) {                                         \
    const int64_t th = c[TH], tw = c[TW], oh = c[OH], ow = c[OW], cout = c[COUT];             \
    const int64_t n = t / (th * tw), ty = (t / tw) % th, tx = t % tw;                         \
    const int64_t oy = ty * MT, ox = tx * MT;                                                 \
    const int nr = oh - oy < MT ? (int)(oh - oy) : MT, nc = ow - ox < MT ? (int)(ow - ox) : MT; \
    const float *bias = (const float *)(intptr_t)c[BIAS];                                     \
    const int64_t act = c[ACT], res = c[RES];                                                 \
    double alpha_d; memcpy(&alpha_d, &c[ALPHA], sizeof alpha_d);                              \
    const __m512 alpha = _mm512_set1_ps((float)alpha_d);                                      \
    const float *mt = mm + tr * NBW;                                                          \
    const int64_t ps = c[YPS], cs = c[YCS];                                                   \
    float *yt = y + n * oh * ow * cout + (oy * ow + ox) * ps;                                 \
    for (int64_t cc = 0; cc < bw; cc += 16) {                                                 \
        const int64_t ch = ch0 + cc;                                                          \
        if (ch >= cout) break;                                                                \
        const __mmask16 m = cout - ch >= 16 ? (__mmask16)0xFFFF                               \
                                            : (__mmask16)((1u << (cout - ch)) - 1);           \
        __m512 tmp[A][MT];                                                                    \
        for (int i = 0; i < A; i++) {                                                         \
            __m512 d[A];                                                                      \
            for (int j = 0; j < A; j++) d[j] = _mm512_load_ps(mt + (i * A + j) * ldm + cc);   \
            AT(d, tmp[i]);                                                                    \
        }                                                                                     \
        const __m512 b = bias ? _mm512_loadu_ps(bias + ch) : _mm512_setzero_ps();             \
        for (int q = 0; q < nc; q++) {                                                        \
            __m512 d[A], o[MT];                                                               \
            for (int i = 0; i < A; i++) d[i] = tmp[i][q];                                     \
            AT(d, o);                                                                         \
            for (int p = 0; p < nr; p++) {                                                    \
                float *dst = yt + (p * ow + q) * ps + ch / 16 * cs;                           \
                __m512 val = _mm512_add_ps(o[p], b);                                          \
                if (res) val = _mm512_add_ps(val, _mm512_maskz_loadu_ps(m, dst));             \
                _mm512_mask_storeu_ps(dst, m, activate(val, act, alpha));                     \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
}
OUTPUT_TRANSFORM(output4, 6, 4, at6)
OUTPUT_TRANSFORM(output2, 4, 2, at4)

/* C (R x NC*16, rows ldc apart) = A (R x k, rows lda apart) B (k x NC*16, packed rows) */
AI void kern(const int R, const int NC, const float *a, int64_t lda, const float *b, int64_t k,
             float *cc, int64_t ldc) {
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int q = 0; q < NC; q++) acc[r][q] = _mm512_setzero_ps();
    for (int64_t p = 0; p < k; p++) {
        __m512 bq[4];
#pragma GCC unroll 4
        for (int q = 0; q < NC; q++) bq[q] = _mm512_load_ps(b + p * NC * 16 + q * 16);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            const __m512 av = _mm512_set1_ps(a[r * lda + p]);
#pragma GCC unroll 4
            for (int q = 0; q < NC; q++) acc[r][q] = _mm512_fmadd_ps(av, bq[q], acc[r][q]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int q = 0; q < NC; q++) _mm512_store_ps(cc + r * ldc + q * 16, acc[r][q]);
}

#define K(R, NC) case (R) * 8 + (NC): kern(R, NC, a, lda, b, k, cc, ldc); break;
#define KROW(R) K(R, 1) K(R, 2) K(R, 3) K(R, 4)
static void gemm_rows(int R, int NC, const float *a, int64_t lda, const float *b, int64_t k,
                      float *cc, int64_t ldc) {
    switch (R * 8 + NC) { KROW(1) KROW(2) KROW(3) KROW(4) KROW(5) KROW(6) default: break; }
}

/* tiles t0 .. t0 + tn of the job: V, then per 64-channel block from output channel cb0 to
   cb1 the products and outputs */
static void block(const int64_t *c, int64_t t0, int64_t tn, int64_t cb0, int64_t cb1, float *v,
                  float *mm) {
    const float *x = (const float *)(intptr_t)c[X];
    float *y = (float *)(intptr_t)c[Y];
    const float *u = (const float *)(intptr_t)c[U];
    const int64_t cin = c[CIN], coutp = c[COUTP], tb = c[TB];
    const int f4 = c[TILE] == 4;
    const int64_t ne = f4 ? 36 : 16, ldv = tb * cin, ldm = tb * NBW;
    for (int64_t tr = 0; tr < tn; tr++) {
        if (f4) input4(c, x, t0 + tr, v, ldv, tr);
        else input2(c, x, t0 + tr, v, ldv, tr);
    }
    for (int64_t ch0 = cb0; ch0 < cb1; ch0 += NBW) {
        const int64_t bw = coutp - ch0 < NBW ? coutp - ch0 : NBW;
        const int nc = (int)(bw / 16);
        for (int64_t e = 0; e < ne; e++) {
            const float *ue = u + e * cin * coutp + ch0 * cin;
            for (int64_t r = 0; r < tn; r += 6) {
                const int rows = tn - r < 6 ? (int)(tn - r) : 6;
                gemm_rows(rows, nc, v + e * ldv + r * cin, cin, ue, cin,
                          mm + e * ldm + r * NBW, NBW);
            }
        }
        for (int64_t tr = 0; tr < tn; tr++) {
            if (f4) output4(c, mm, ldm, tr, t0 + tr, ch0, bw, y);
            else output2(c, mm, ldm, tr, t0 + tr, ch0, bw, y);
        }
    }
}

/* part i of the job: its range of tile blocks for its group of output channels (the parts
   are group-major: NPARTS / CGROUPS parts per group) */
static int part(int64_t ctx, int64_t i) {
    const int64_t *c = (const int64_t *)(intptr_t)ctx;
    const int64_t nt = c[NTILES], tb = c[TB], ng = c[CGROUPS], np = c[NPARTS] / ng;
    const int64_t nblocks = (nt + tb - 1) / tb, g = i / np, j = i % np;
    const int64_t b0 = j * nblocks / np, b1 = (j + 1) * nblocks / np;
    const int64_t ncb = (c[COUTP] + NBW - 1) / NBW;  /* 64-channel blocks */
    const int64_t cb0 = g * ncb / ng * NBW, cb1e = (g + 1) * ncb / ng * NBW;
    const int64_t cb1 = cb1e < c[COUTP] ? cb1e : c[COUTP];
    const int64_t ne = c[TILE] == 4 ? 36 : 16;
    const int64_t vn = (ne * tb * c[CIN] + 15) / 16 * 16;  /* M 64-byte aligned */
    float *v = scratch((size_t)(vn + ne * tb * NBW));
    if (v == NULL) return -100;
    float *mm = v + vn;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t t0 = b * tb;
        block(c, t0, nt - t0 < tb ? nt - t0 : tb, cb0, cb1, v, mm);
    }
    return 0;
}
#pragma GCC pop_options

static int serial_c(int64_t *c) {
    int st = 0;
    for (int64_t i = 0; i < c[NPARTS] && st == 0; i++) st = part((int64_t)(intptr_t)c, i);
    return st;
}

/* -- Python entry points ------------------------------------------------------------------ */

static int64_t *ctx_of(PyObject *o) {
    PyArrayObject *a = (PyArrayObject *)o;
    if (!PyArray_Check(o) || PyArray_TYPE(a) != NPY_INT64 || !PyArray_IS_C_CONTIGUOUS(a)
        || PyArray_SIZE(a) < NCTX || !PyArray_ISWRITEABLE(a)) {
        PyErr_SetString(PyExc_TypeError, "the context must be a writeable int64 array of 32");
        return NULL;
    }
    return (int64_t *)PyArray_DATA(a);
}

static int addr_of(PyObject *o, int64_t *a, const char *what) {
    if (!PyArray_Check(o) || PyArray_TYPE((PyArrayObject *)o) != NPY_FLOAT32
        || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous float32 array", what);
        return -1;
    }
    *a = (int64_t)(intptr_t)PyArray_DATA((PyArrayObject *)o);
    return 0;
}

static PyObject *status(int st) {
    if (st != 0) {
        PyErr_Format(PyExc_MemoryError, "winograd: no scratch memory (status %d)", st);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* every part of c for these addresses on this thread, the GIL released */
static PyObject *run_serial(int64_t *c, int64_t xa, int64_t ya) {
    c[X] = xa; c[Y] = ya;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = serial_c(c);
    Py_END_ALLOW_THREADS
    return status(st);
}

/* serial(ctx, x, y): every part on this thread, the GIL released (ctx's X and Y set here) */
static PyObject *py_serial(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 3) { PyErr_SetString(PyExc_TypeError, "serial(ctx, x, y)"); return NULL; }
    int64_t *c = ctx_of(args[0]), xa, ya;
    if (!c || addr_of(args[1], &xa, "x") || addr_of(args[2], &ya, "y")) return NULL;
    if (!have_avx512()) { PyErr_SetString(PyExc_RuntimeError, "no AVX-512F"); return NULL; }
    return run_serial(c, xa, ya);
}

/* launch((ctx, go), x, y): ctx's X and Y set, go(x, y) (the spin pool's job of call parts, or
   its slow path); while another thread's launch of the same ctx runs, every part on this
   thread with a private copy of ctx instead */
static PyObject *py_launch(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 3 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 2) {
        PyErr_SetString(PyExc_TypeError, "launch((ctx, go), x, y)");
        return NULL;
    }
    int64_t *c = ctx_of(PyTuple_GET_ITEM(args[0], 0)), xa, ya;
    if (!c || addr_of(args[1], &xa, "x") || addr_of(args[2], &ya, "y")) return NULL;
    if (!have_avx512()) { PyErr_SetString(PyExc_RuntimeError, "no AVX-512F"); return NULL; }
    int64_t idle = 0;
    if (!__atomic_compare_exchange_n(c + BUSY, &idle, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        int64_t own[NCTX];
        memcpy(own, c, sizeof own);
        return run_serial(own, xa, ya);
    }
    c[X] = xa; c[Y] = ya;
    PyObject *call[2] = {args[1], args[2]};
    PyObject *r = PyObject_Vectorcall(PyTuple_GET_ITEM(args[0], 1), call, 2, NULL);
    __atomic_store_n(c + BUSY, 0, __ATOMIC_RELEASE);
    return r;
}

/* pack(w, g, u): u = the packed G w G^T (see pack_filter) of the HWIO float32 filter w
   (3, 3, cin, cout), g the float64 (A, 3) matrix G, u float32 of A^2 cin coutp elements; each
   element summed in double (G's rows, then its columns) and rounded once */
static PyObject *py_pack(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 3) { PyErr_SetString(PyExc_TypeError, "pack(w, g, u)"); return NULL; }
    PyArrayObject *wa = (PyArrayObject *)args[0], *ga = (PyArrayObject *)args[1];
    PyArrayObject *ua = (PyArrayObject *)args[2];
    if (!PyArray_Check(args[0]) || !PyArray_Check(args[1]) || !PyArray_Check(args[2])
        || PyArray_TYPE(wa) != NPY_FLOAT32 || PyArray_NDIM(wa) != 4
        || !PyArray_IS_C_CONTIGUOUS(wa) || PyArray_DIM(wa, 0) != 3 || PyArray_DIM(wa, 1) != 3
        || PyArray_TYPE(ga) != NPY_FLOAT64 || PyArray_NDIM(ga) != 2
        || !PyArray_IS_C_CONTIGUOUS(ga) || PyArray_DIM(ga, 1) != 3 || PyArray_DIM(ga, 0) > 8
        || PyArray_TYPE(ua) != NPY_FLOAT32 || !PyArray_IS_C_CONTIGUOUS(ua)
        || !PyArray_ISWRITEABLE(ua)) {
        PyErr_SetString(PyExc_TypeError, "pack(w, g, u): float32 (3, 3, cin, cout), float64 "
                        "(A, 3), writeable float32");
        return NULL;
    }
    const int64_t cin = PyArray_DIM(wa, 2), cout = PyArray_DIM(wa, 3);
    const int64_t coutp = (cout + 15) / 16 * 16, na = PyArray_DIM(ga, 0);
    if (PyArray_SIZE(ua) != na * na * cin * coutp) {
        PyErr_SetString(PyExc_TypeError, "pack: u has the wrong size");
        return NULL;
    }
    const float *w = (const float *)PyArray_DATA(wa);
    const double *g = (const double *)PyArray_DATA(ga);
    float *u = (float *)PyArray_DATA(ua);
    Py_BEGIN_ALLOW_THREADS
    for (int64_t c = 0; c < cin; c++)
        for (int64_t k = 0; k < coutp; k++) {
            double f[3][3], t[8][3];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    f[i][j] = k < cout ? w[((i * 3 + j) * cin + c) * cout + k] : 0.0;
            for (int a = 0; a < na; a++)
                for (int j = 0; j < 3; j++)
                    t[a][j] = g[a * 3] * f[0][j] + g[a * 3 + 1] * f[1][j] + g[a * 3 + 2] * f[2][j];
            const int64_t k0 = k / NBW * NBW, bw = coutp - k0 < NBW ? coutp - k0 : NBW;
            float *uk = u + k0 * cin + c * bw + (k - k0);
            for (int a = 0; a < na; a++)
                for (int b = 0; b < na; b++)
                    uk[(a * na + b) * cin * coutp] = (float)(
                        t[a][0] * g[b * 3] + t[a][1] * g[b * 3 + 1] + t[a][2] * g[b * 3 + 2]);
        }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_part_address(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    return PyLong_FromVoidPtr(have_avx512() ? (void *)part : NULL);
}

#define M(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, NULL}
static PyMethodDef methods[] = {M(serial), M(launch), M(pack), M(part_address),
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { import_array(); return PyModule_Create(&module_def); }
"""

module = _ccompile.OptionalExtension(SOURCE, "pytfrt_winograd_")
"""``module()``: the compiled module, or ``None`` (no C compiler, or ``module.enabled`` set
false: the callers keep their other paths)."""


@functools.cache
def _part_address() -> int:
    mod = module()
    return 0 if mod is None else int(mod.part_address() or 0)


def available() -> bool:
    """Whether the native Winograd can run here (a C compiler and an AVX-512F CPU)."""
    return module.enabled and module() is not None and _part_address() != 0


def eligible(kh: int, kw: int, strides: tuple[int, ...], dilations: tuple[int, ...],
             groups: int, act_code: int) -> bool:
    """Whether a float32 convolution with these attributes can run here: 3x3, stride 1,
    undilated, ungrouped, an activation of :data:`ACTS`, and :func:`available`."""
    return (kh == kw == 3 and tuple(strides) == (1, 1) and tuple(dilations) == (1, 1)
            and groups == 1 and act_code in ACTS and available())


def wins(cin: int, cout: int, oh: int, ow: int) -> bool:
    """Whether ``auto`` runs an :func:`eligible` convolution with an ``oh x ow`` output on the
    native Winograd rather than oneDNN's direct convolution (:data:`ENABLED`,
    :data:`MIN_PIXELS`, :data:`MIN_CHANNELS`, :data:`MAX_CHANNELS`; measured per layer and in
    ResNet-50, ``docs/kernels.md``)."""
    return (ENABLED and oh * ow >= MIN_PIXELS and min(cin, cout) >= MIN_CHANNELS
            and max(cin, cout) <= MAX_CHANNELS)


def tile_for(n: int, oh: int, ow: int) -> int:
    """The output tile (4 or 2) for ``n`` images of ``oh x ow`` outputs (:data:`F4_MIN_TILES`)."""
    return 4 if n * -(-oh // 4) * -(-ow // 4) >= F4_MIN_TILES else 2


def block_tiles(cin: int, tile: int, budget: int = BLOCK_BYTES) -> int:
    """Tiles per block for ``cin`` input channels: ``V`` (``(tile + 2)^2 x T x cin``) and one
    64-channel block of ``M`` within ``budget`` bytes, at least 6 (one micro-kernel's rows)."""
    ne = (tile + 2) ** 2
    return max(6, budget // (4 * ne * (cin + 64)))


def split(ntiles: int, cin: int, coutp: int, tile: int, threads: int) -> tuple[int, int, int]:
    """``(tiles per block, channel groups, parts)`` of a job: blocks of :func:`block_tiles`
    (about equal); with more than one thread and at most two blocks per thread, a transformed
    filter of at least :data:`SPLIT_FILTER_BYTES` split into ``threads`` groups of output
    channels (and blocks of :data:`WIDE_BLOCK_BYTES`), else the block count rounded up to a
    multiple of ``threads``;
    at most ``_spin_pool.MAX_PARTS`` parts (a part runs a range of blocks)."""
    from pytfrt.backends.cpu import _spin_pool

    ne = (tile + 2) ** 2
    groups = 1
    if (threads > 1 and ne * cin * coutp * 4 >= SPLIT_FILTER_BYTES
            and -(-ntiles // block_tiles(cin, tile)) <= 2 * threads):
        groups = min(threads, -(-coutp // 64))
    tb = block_tiles(cin, tile, WIDE_BLOCK_BYTES if groups > 1 else BLOCK_BYTES)
    nblocks = -(-ntiles // tb)
    if threads > 1 and groups == 1:
        nblocks = -(-nblocks // threads) * threads
    tb = -(-ntiles // nblocks)
    nblocks = -(-ntiles // tb)
    return tb, groups, groups * min(nblocks, _spin_pool.MAX_PARTS // groups)


def pack_filter(hwio: np.ndarray, tile: int) -> np.ndarray:
    """``U = G g G^T`` of a ``(3, 3, cin, cout)`` float32 filter (``G`` of
    :mod:`pytfrt.backends.cpu._winograd`, as its ``filter_transform``: summed in float64, rounded
    once) packed for the micro-kernel: per position ``e``, per block of 64 output channels
    (``cout`` padded to a multiple of 16 with zeros), ``cin`` rows of the block's columns;
    64-byte aligned, read-only.  Computed in C (the float64 ``einsum`` of ``filter_transform``
    and the copies into this order took ~0.1 s for a 512-channel filter: the first call of
    ResNet-50 grew by ~0.2 s at batch 1)."""
    from pytfrt.backends.cpu import _winograd, arena

    mod = module()
    assert mod is not None
    _, _, cin, cout = hwio.shape
    ne, coutp = (tile + 2) ** 2, -(-cout // 16) * 16
    packed = arena.empty((ne * cin * coutp,), np.float32)
    mod.pack(np.ascontiguousarray(hwio, np.float32), _winograd._G if tile == 4 else _winograd._G2,
             packed)
    packed.flags.writeable = False
    return packed


class WinoConv:
    """The native Winograd of one float32 3x3 stride-1 convolution on NHWC or, with
    ``blocked``, ``NCHW16c`` images (channels multiples of 16): per output tile its packed
    filter (made on first use) and, per input shape and residual mode, a context and
    launcher.  ``hwio`` is the ``(3, 3, cin, cout)`` filter, or a function returning it
    (called when a tile's filter is packed; ``channels`` then gives ``(cin, cout)``).
    ``tile`` fixes the tile (else :func:`tile_for` per shape)."""

    def __init__(self, hwio: np.ndarray | Callable[[], np.ndarray], bias: np.ndarray | None,
                 pads: tuple[int, ...], act_code: int, alpha: float, tile: int | None = None,
                 blocked: bool = False, channels: tuple[int, int] | None = None) -> None:
        self.tile, self.blocked = tile, blocked
        if callable(hwio):
            assert channels is not None
            self._filter = hwio
        else:
            w = np.array(hwio, np.float32)
            channels = (int(w.shape[2]), int(w.shape[3]))
            self._filter = lambda: w
        self.cin, self.cout = channels
        self.coutp = -(-self.cout // 16) * 16
        self._u: dict[int, np.ndarray] = {}
        self.bias = None
        if bias is not None:
            b = np.zeros(self.coutp, np.float32)
            b[:self.cout] = bias
            self.bias = b
        self.pads = tuple(pads)
        self.act, self.alpha = ACTS[act_code], float(alpha)
        self._launchers: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()

    def packed(self, tile: int) -> np.ndarray:
        """:func:`pack_filter` for ``tile``, made once (thread-safe)."""
        u = self._u.get(tile)
        if u is None:
            with self._lock:
                u = self._u.get(tile)
                if u is None:
                    u = self._u[tile] = pack_filter(self._filter(), tile)
        return u

    def context(self, x_shape: tuple[int, ...], out_shape: tuple[int, ...], res: bool,
                threads: int) -> np.ndarray:
        """The C context of one input shape (:data:`C_X` and :data:`C_Y` set per call)."""
        if self.blocked:
            nb, _, h, w, _ = x_shape
            _, _, oh, ow, _ = out_shape
            strides = (16, h * w * 16, 16, oh * ow * 16)
        else:
            nb, h, w, _ = x_shape
            _, oh, ow, _ = out_shape
            strides = (self.cin, 16, self.cout, 16)
        tile = self.tile or tile_for(nb, oh, ow)
        th, tw = -(-oh // tile), -(-ow // tile)
        ntiles = nb * th * tw
        tb, groups, nparts = split(ntiles, self.cin, self.coutp, tile, threads)
        c = np.zeros(NCTX, np.int64)
        c[C_U] = self.packed(tile).ctypes.data
        c[C_BIAS] = 0 if self.bias is None else self.bias.ctypes.data
        c[[C_NB, C_H, C_W, C_CIN, C_COUT, C_COUTP, C_OH, C_OW]] = (
            nb, h, w, self.cin, self.cout, self.coutp, oh, ow)
        c[C_PT], c[C_PL] = self.pads[0], self.pads[2]
        c[[C_TH, C_TW, C_NTILES, C_TB]] = th, tw, ntiles, tb
        c[C_NPARTS], c[C_CGROUPS] = nparts, groups
        c[C_ACT] = self.act
        c.view(np.float64)[C_ALPHA] = self.alpha
        c[C_RES], c[C_TILE] = int(res), tile
        c[[C_XPS, C_XCS, C_YPS, C_YCS]] = strides
        return c

    def launcher(self, x_shape: tuple[int, ...], out_shape: tuple[int, ...],
                 res: bool) -> Any:
        """``go(x, y)``: ``y = act(conv(x) + bias (+ y if res))`` for C-contiguous float32
        ``x`` of ``x_shape`` and ``y`` of ``out_shape`` (not overlapping; the caller checks):
        one native call, the parts on the spin pool's threads when it is free, else on this
        thread.  Thread-safe."""
        key = (tuple(x_shape), bool(res))
        go = self._launchers.get(key)
        if go is not None:
            return go
        from pytfrt.backends.cpu import _dnnl_conv, _parallel, _spin_pool

        mod = module()
        assert mod is not None
        threads = _parallel.num_threads()
        ctx = self.context(tuple(x_shape), tuple(out_shape), res, threads)
        fn, address, nparts = _part_address(), int(ctx.ctypes.data), int(ctx[C_NPARTS])
        serial = mod.serial

        def slow(x: np.ndarray, y: np.ndarray) -> None:
            if not _dnnl_conv.run_calls(fn, address, nparts):
                serial(ctx, x, y)

        inner: Any = slow
        if threads > 1 and nparts > 1:
            table = _spin_pool.call_table(fn, address, nparts)
            inner = _dnnl_conv.bind_job(_dnnl_conv._Job(table, 0, 0), slow)
        else:
            def inner(x: np.ndarray, y: np.ndarray) -> None:
                serial(ctx, x, y)
        go = functools.partial(mod.launch, (ctx, inner))
        go.keep = (ctx, self)  # type: ignore[attr-defined]
        with self._lock:
            return self._launchers.setdefault(key, go)

    def forward(self, x: np.ndarray, y: np.ndarray, res: bool) -> None:
        """:meth:`launcher`'s call for these arrays (shapes from them)."""
        self.launcher(x.shape, y.shape, res)(x, y)

    def run(self, x: np.ndarray, residual: np.ndarray | None, y: np.ndarray) -> None:
        """:meth:`forward` of any ``x`` (made C-contiguous) with a residual operand of ``y``'s
        shape or none: a residual that is not ``y`` itself is copied into ``y`` first (the
        kernel adds what ``y`` holds)."""
        x = np.ascontiguousarray(x)
        if residual is None:
            self.forward(x, y, False)
            return
        if not (residual.ctypes.data == y.ctypes.data and residual.strides == y.strides):
            np.copyto(y, residual.copy() if np.may_share_memory(residual, y) else residual)
        self.forward(x, y, True)
