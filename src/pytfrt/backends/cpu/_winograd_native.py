"""Winograd F(4x4, 3x3) / F(2x2, 3x3) convolution of float32 NHWC images in C (AVX-512, AVX2).

Private helper of :mod:`pytfrt.backends.cpu.conv` (the ``winograd_native`` algorithm; see
``docs/kernels.md``, "Native Winograd").  The Numba/BLAS Winograd of
:mod:`pytfrt.backends.cpu._winograd` transforms a whole layer at a time (``V`` and ``M`` far
bigger than L2) and glues three parallel phases together in Python; it lost to oneDNN's direct
convolution inside a network.  This one is one native call per convolution, split into *tile
blocks* that keep their data in L1/L2:

* the transformed filter ``U = G g G^T`` (:func:`pytfrt.backends.cpu._winograd.filter_transform`)
  is packed once per plan in the GEMM micro-kernel's order: per transform position ``e`` and
  block of 64 output channels (16 for the AVX2 kernels; the last one 16, 32 or 48 wide;
  ``cout`` padded to a multiple of 16 with zeros), ``cin`` rows of that block's columns;
* a part of the job is a range of tile blocks of ``T`` tiles (:func:`block_tiles`); per block,
  the input transform ``B^T d B`` of each tile's ``(m + 2)^2 x cin`` patch (zero outside the
  image) into ``V[e][t][c]``, then per block of 64 output channels the ``(m + 2)^2`` products
  ``M[e] = V[e] U[e]`` (a 6-row x 4-zmm register-blocked micro-kernel: broadcast FMAs of ``V``
  against 64 columns of ``U``; AVX2: 6 x 2 ymm, 16 columns) and the output transform
  ``A^T M A`` of those channels, with the epilogue (bias, the residual already in ``y``, ReLU
  / ReLU6 / leaky ReLU) applied in registers and written straight into ``y``;
* the parts run as *call parts* on :mod:`pytfrt.backends.cpu._spin_pool`'s helpers (the GIL
  released, one native call for the whole convolution: :meth:`WinoConv.launcher`) or, with one
  thread, all on the caller.

:data:`module` is the compiled C module (``None`` without a C compiler): the kernels are
written once with the vector operations as macros and compiled for AVX-512F and for AVX2 with
FMA, the CPU picking at run time (:data:`ISA`); :func:`available` is false without a compiler or
on CPUs with neither (the callers keep oneDNN or the Numba Winograd there).  Accuracy: F(4x4)
with the points 0, +-1, +-2 (Lavin & Gray's matrices) rounds more than a direct convolution
(6e-6 to 1.4e-5 of the output's largest magnitude per layer with 64-512 channels); F(2x2)
several times less.  Thread-safety: a :class:`WinoConv` is immutable after construction
except its caches (filled under a lock); its launchers may be called from any thread (a second
concurrent caller of the same launcher runs on its own thread instead of the pool).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _ccompile
from pytfrt.backends.cpu._epilogue import ACTIVATION_CODES

ENABLED = True
"""Whether ``auto`` convolutions may pick the native Winograd (:func:`wins`; ``False``: oneDNN's
direct convolution everywhere, for A/B runs; read when a shape first runs)."""
MIN_PIXELS = 7 * 7
"""Fewest output pixels per image for which :func:`wins` picks the native Winograd."""
MAX_CHANNELS = 512
"""Most input or output channels for which :func:`wins` picks the native Winograd."""
AVX2_MAX_CHANNELS = 256
""":data:`MAX_CHANNELS` with the AVX2 kernels (against oneDNN limited to AVX2,
``ONEDNN_MAX_CPU_ISA=AVX2``: 7x7x512 0.89x oneDNN's speed at batch 1, 0.92x at batch 8;
the layers with up to 256 channels 1.35-2.2x)."""
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
ISA: str | None = None
"""``"avx2"``: the AVX2 kernels even on an AVX-512 CPU (tests, and measuring what an AVX2-only
machine runs; read when a launcher is made); ``None``: the widest the CPU has."""
ACTS = {ACTIVATION_CODES[name]: k
        for k, name in enumerate(("none", "relu", "relu6", "leaky_relu"))}
"""Activation code (:data:`pytfrt.backends.cpu._epilogue.ACTIVATION_CODES`) -> the number the
kernel's ``activate`` switches on, for the activations it applies: none, ReLU, ReLU6, leaky
ReLU."""

# context words (an int64 array per input shape, read by the C part function)
(C_X, C_Y, C_U, C_BIAS, C_NB, C_H, C_W, C_CIN, C_COUT, C_COUTP, C_OH, C_OW, C_PT, C_PL, C_TH,
 C_TW, C_NTILES, C_TB, C_NPARTS, C_ACT, C_ALPHA, C_RES, C_TILE, C_BUSY, C_XPS, C_XCS, C_YPS,
 C_YCS, C_CGROUPS, C_PART) = range(30)
NCTX = 32

_HEAD = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { X, Y, U, BIAS, NB, H, W, CIN, COUT, COUTP, OH, OW, PT, PL, TH, TW, NTILES, TB, NPARTS,
       ACT, ALPHA, RES, TILE, BUSY, XPS, XCS, YPS, YCS, CGROUPS, PART, NCTX = 32 };
/* XPS, XCS (YPS, YCS): the input's (output's) floats between pixels and between blocks of 16
   channels -- NHWC: (channels, 16); NCHW16c: (16, H * W * 16) */
#define NBW 64  /* output channels per column block of U and M */

#include <immintrin.h>
#define AI static inline __attribute__((always_inline))
typedef int (*part_fn)(int64_t, int64_t);

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

"""

_KERNELS = r"""
/* B^T d for F(4x4, 3x3) (d: 6 vectors) */
AI void bt6_@(const vf *d, vf *o) {
    const vf four = VSET1(4.0f), five = VSET1(5.0f), two = VSET1(2.0f);
    vf p = VFNMA(four, d[2], d[4]);           /* d4 - 4 d2 */
    vf q = VFNMA(four, d[1], d[3]);           /* d3 - 4 d1 */
    vf r = VSUB(d[4], d[2]);                  /* d4 - d2 */
    vf s = VSUB(d[3], d[1]);                  /* d3 - d1 */
    o[0] = VFNMA(five, d[2], VFMA(four, d[0], d[4]));
    o[1] = VADD(p, q);
    o[2] = VSUB(p, q);
    o[3] = VFMA(two, s, r);
    o[4] = VFNMA(two, s, r);
    o[5] = VFNMA(five, d[3], VFMA(four, d[1], d[5]));
}

/* A^T m for F(4x4, 3x3) (m: 6 vectors, 4 results) */
AI void at6_@(const vf *m, vf *o) {
    const vf two = VSET1(2.0f), four = VSET1(4.0f), eight = VSET1(8.0f);
    vf a = VADD(m[1], m[2]), b = VSUB(m[1], m[2]);
    vf c = VADD(m[3], m[4]), d = VSUB(m[3], m[4]);
    o[0] = VADD(VADD(m[0], a), c);
    o[1] = VFMA(two, d, b);
    o[2] = VFMA(four, c, a);
    o[3] = VADD(VFMA(eight, d, b), m[5]);
}

/* B^T d for F(2x2, 3x3) (d: 4 vectors) */
AI void bt4_@(const vf *d, vf *o) {
    o[0] = VSUB(d[0], d[2]);
    o[1] = VADD(d[1], d[2]);
    o[2] = VSUB(d[2], d[1]);
    o[3] = VSUB(d[1], d[3]);
}

/* A^T m for F(2x2, 3x3) (m: 4 vectors, 2 results) */
AI void at4_@(const vf *m, vf *o) {
    o[0] = VADD(VADD(m[0], m[1]), m[2]);
    o[1] = VSUB(VSUB(m[1], m[2]), m[3]);
}

/* the input transform of tile t into row tr of V (V[e] at v + e * ldv, rows of cin); channel
   ch of a pixel is at ch / 16 * cs + ch % 16 from it (NHWC: cs = 16; NCHW16c: a block plane) */
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
    for (int64_t ch = 0; ch < cin; ch += VW) {                                                \
        const vm m = VMASK(cin - ch);                                                         \
        vf tmp[A][A];                                                                         \
        for (int i = 0; i < A; i++) {                                                         \
            const int64_t r = r0 + i;                                                         \
            vf d[A];                                                                          \
            if (r < 0 || r >= h) {                                                            \
                for (int j = 0; j < A; j++) d[j] = VZERO();                                   \
            } else {                                                                          \
                const float *row = xn + (r * w + c0) * ps + ch / 16 * cs + ch % 16;           \
                for (int j = 0; j < A; j++)                                                   \
                    d[j] = okc[j] ? VLOADM(m, row + j * ps) : VZERO();                        \
            }                                                                                 \
            BT(d, tmp[i]);                                                                    \
        }                                                                                     \
        for (int k = 0; k < A; k++) {                                                         \
            vf d[A], o[A];                                                                    \
            for (int i = 0; i < A; i++) d[i] = tmp[i][k];                                     \
            BT(d, o);                                                                         \
            for (int a = 0; a < A; a++) VSTOREM(vt + (a * A + k) * ldv + ch, m, o[a]);        \
        }                                                                                     \
    }                                                                                         \
}
INPUT_TRANSFORM(input4_@, 6, 4, bt6_@)
INPUT_TRANSFORM(input2_@, 4, 2, bt4_@)
#undef INPUT_TRANSFORM

AI vf activate_@(vf v, int64_t act, vf alpha) {
    switch (act) {
    case 1: return VMAX(v, VZERO());
    case 2: return VMIN(VMAX(v, VZERO()), VSET1(6.0f));
    case 3: return VLEAKY(v, alpha);
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
    const vf alpha = VSET1((float)alpha_d);                                                   \
    const float *mt = mm + tr * NBW;                                                          \
    const int64_t ps = c[YPS], cs = c[YCS];                                                   \
    float *yt = y + n * oh * ow * cout + (oy * ow + ox) * ps;                                 \
    for (int64_t cc = 0; cc < bw; cc += VW) {                                                 \
        const int64_t ch = ch0 + cc;                                                          \
        if (ch >= cout) break;                                                                \
        const vm m = VMASK(cout - ch);                                                        \
        vf tmp[A][MT];                                                                        \
        for (int i = 0; i < A; i++) {                                                         \
            vf d[A];                                                                          \
            for (int j = 0; j < A; j++) d[j] = VLOAD(mt + (i * A + j) * ldm + cc);            \
            AT(d, tmp[i]);                                                                    \
        }                                                                                     \
        const vf b = bias ? VLOADU(bias + ch) : VZERO();                                      \
        for (int q = 0; q < nc; q++) {                                                        \
            vf d[A], o[MT];                                                                   \
            for (int i = 0; i < A; i++) d[i] = tmp[i][q];                                     \
            AT(d, o);                                                                         \
            for (int p = 0; p < nr; p++) {                                                    \
                float *dst = yt + (p * ow + q) * ps + ch / 16 * cs + ch % 16;                 \
                vf val = VADD(o[p], b);                                                       \
                if (res) val = VADD(val, VLOADM(m, dst));                                     \
                VSTOREM(dst, m, activate_@(val, act, alpha));                                 \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
}
OUTPUT_TRANSFORM(output4_@, 6, 4, at6_@)
OUTPUT_TRANSFORM(output2_@, 4, 2, at4_@)
#undef OUTPUT_TRANSFORM

/* C (R x NC vectors, rows ldc apart) = A (R x k, rows lda apart) B (k x NC vectors, rows ldb
   apart): R rows of broadcast FMAs into R x NC accumulators */
AI void kern_@(const int R, const int NC, const float *a, int64_t lda, const float *b,
               int64_t ldb, int64_t k, float *cc, int64_t ldc) {
    vf acc[6][NCMAX];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int q = 0; q < NC; q++) acc[r][q] = VZERO();
    for (int64_t p = 0; p < k; p++) {
        vf bq[NCMAX];
#pragma GCC unroll 4
        for (int q = 0; q < NC; q++) bq[q] = VLOAD(b + p * ldb + q * VW);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            const vf av = VSET1(a[r * lda + p]);
#pragma GCC unroll 4
            for (int q = 0; q < NC; q++) acc[r][q] = VFMA(av, bq[q], acc[r][q]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int q = 0; q < NC; q++) VSTORE(cc + r * ldc + q * VW, acc[r][q]);
}

#define K(R, NC) case (R) * 8 + (NC): kern_@(R, NC, a, lda, b, ldb, k, cc, ldc); break;
#if NCMAX == 4
#define KROW(R) K(R, 1) K(R, 2) K(R, 3) K(R, 4)
#else
#define KROW(R) K(R, 1) K(R, 2)
#endif
static void gemm_rows_@(int R, int NC, const float *a, int64_t lda, const float *b,
                        int64_t ldb, int64_t k, float *cc, int64_t ldc) {
    switch (R * 8 + NC) { KROW(1) KROW(2) KROW(3) KROW(4) KROW(5) KROW(6) default: break; }
}
#undef K
#undef KROW

/* tiles t0 .. t0 + tn of the job: V, then per 64-channel block from output channel cb0 to
   cb1 the products and outputs */
static void block_@(const int64_t *c, int64_t t0, int64_t tn, int64_t cb0, int64_t cb1,
                    float *v, float *mm) {
    const float *x = (const float *)(intptr_t)c[X];
    float *y = (float *)(intptr_t)c[Y];
    const float *u = (const float *)(intptr_t)c[U];
    const int64_t cin = c[CIN], coutp = c[COUTP], tb = c[TB];
    const int f4 = c[TILE] == 4;
    const int64_t ne = f4 ? 36 : 16, ldv = tb * cin, ldm = tb * NBW;
    for (int64_t tr = 0; tr < tn; tr++) {
        if (f4) input4_@(c, x, t0 + tr, v, ldv, tr);
        else input2_@(c, x, t0 + tr, v, ldv, tr);
    }
    for (int64_t ch0 = cb0; ch0 < cb1; ch0 += NBW) {
        const int64_t bw = coutp - ch0 < NBW ? coutp - ch0 : NBW, nv = bw / VW;
        for (int64_t e = 0; e < ne; e++) {
            for (int64_t q0 = 0; q0 < nv; q0 += NCMAX) {
                /* U's columns col .. col + ubw: a block of its packing (UBW wide) */
                const int64_t col = ch0 + q0 * VW, ubw = coutp - col < UBW ? coutp - col : UBW;
                const float *ue = u + e * cin * coutp + col * cin;
                const int nc = (int)(ubw / VW);
                for (int64_t r = 0; r < tn; r += 6) {
                    const int rows = tn - r < 6 ? (int)(tn - r) : 6;
                    gemm_rows_@(rows, nc, v + e * ldv + r * cin, cin, ue, ubw, cin,
                                mm + e * ldm + r * NBW + q0 * VW, NBW);
                }
            }
        }
        for (int64_t tr = 0; tr < tn; tr++) {
            if (f4) output4_@(c, mm, ldm, tr, t0 + tr, ch0, bw, y);
            else output2_@(c, mm, ldm, tr, t0 + tr, ch0, bw, y);
        }
    }
}

/* part i of the job: its range of tile blocks for its group of output channels (the parts
   are group-major: NPARTS / CGROUPS parts per group) */
static int part_@(int64_t ctx, int64_t i) {
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
        block_@(c, t0, nt - t0 < tb ? nt - t0 : tb, cb0, cb1, v, mm);
    }
    return 0;
}
"""

_TAIL = r"""

static int serial_c(int64_t *c) {
    int st = 0;
    part_fn part = (part_fn)(intptr_t)c[PART];
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
    if (!c[PART]) { PyErr_SetString(PyExc_RuntimeError, "no part function"); return NULL; }
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
    if (!c[PART]) { PyErr_SetString(PyExc_RuntimeError, "no part function"); return NULL; }
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

/* pack's loops: per input channel and 16 output channels (within one block of ubw: ubw is a
   multiple of 16), G f (the filter's rows) then (G f) G^T, vectorised over the 16 channels */
#define PK 16
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))
static void pack_c(const float *w, const double *g, int64_t na, int64_t cin, int64_t cout,
                   int64_t coutp, int64_t ubw, float *u) {
    for (int64_t c = 0; c < cin; c++)
        for (int64_t k = 0; k < coutp; k += PK) {
            double f[3][3][PK], t[8][3][PK];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    const float *src = w + ((i * 3 + j) * cin + c) * cout + k;
                    if (k + PK <= cout)
                        for (int q = 0; q < PK; q++) f[i][j][q] = src[q];
                    else
                        for (int q = 0; q < PK; q++) f[i][j][q] = k + q < cout ? src[q] : 0.0;
                }
            for (int a = 0; a < na; a++)
                for (int j = 0; j < 3; j++)
                    for (int q = 0; q < PK; q++)
                        t[a][j][q] = g[a * 3] * f[0][j][q] + g[a * 3 + 1] * f[1][j][q]
                                     + g[a * 3 + 2] * f[2][j][q];
            const int64_t k0 = k / ubw * ubw, bw = coutp - k0 < ubw ? coutp - k0 : ubw;
            float *uk = u + k0 * cin + c * bw + (k - k0);
            for (int a = 0; a < na; a++)
                for (int b = 0; b < na; b++) {
                    float *dst = uk + (a * na + b) * cin * coutp;
                    for (int q = 0; q < PK; q++)
                        dst[q] = (float)(t[a][0][q] * g[b * 3] + t[a][1][q] * g[b * 3 + 1]
                                         + t[a][2][q] * g[b * 3 + 2]);
                }
        }
}
#undef PK

/* pack(w, g, u, ubw): u = the packed G w G^T (see pack_filter; blocks of ubw columns) of the
   HWIO float32 filter w (3, 3, cin, cout), g the float64 (A, 3) matrix G, u float32 of A^2 cin
   coutp elements; each element summed in double (G's rows, then its columns), rounded once */
static PyObject *py_pack(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 4) { PyErr_SetString(PyExc_TypeError, "pack(w, g, u, ubw)"); return NULL; }
    const int64_t ubwa = PyLong_AsLongLong(args[3]);
    if (ubwa == -1 && PyErr_Occurred()) return NULL;
    if (ubwa < 16 || ubwa % 16) {
        PyErr_SetString(PyExc_ValueError, "pack: ubw must be a positive multiple of 16");
        return NULL;
    }
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
    pack_c(w, g, na, cin, cout, coutp, ubwa, u);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* part_addresses(): (the AVX-512 part function or 0, the AVX2 one or 0) for this CPU */
static PyObject *py_part_addresses(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    __builtin_cpu_init();
    int a5 = __builtin_cpu_supports("avx512f");
    int a2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return Py_BuildValue("(NN)", PyLong_FromVoidPtr(a5 ? (void *)part_avx512 : NULL),
                         PyLong_FromVoidPtr(a2 ? (void *)part_avx2 : NULL));
}

#define M(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, NULL}
static PyMethodDef methods[] = {M(serial), M(launch), M(pack), M(part_addresses),
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { import_array(); return PyModule_Create(&module_def); }
"""

_AVX512 = r"""
#define VW 16
#define NCMAX 4
#define UBW 64
#define vf __m512
#define vm __mmask16
#define VZERO() _mm512_setzero_ps()
#define VSET1(x) _mm512_set1_ps(x)
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMAX _mm512_max_ps
#define VMIN _mm512_min_ps
#define VFMA _mm512_fmadd_ps
#define VFNMA _mm512_fnmadd_ps
#define VLOAD _mm512_load_ps
#define VLOADU _mm512_loadu_ps
#define VSTORE _mm512_store_ps
#define VMASK(n) ((n) >= 16 ? (vm)0xFFFF : (vm)((1u << (n)) - 1))
#define VLOADM(m, p) _mm512_maskz_loadu_ps(m, p)
#define VSTOREM(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#define VLEAKY(v, a) _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, VZERO(), _CMP_LT_OQ), v, a)
"""

_AVX2 = r"""
#define VW 8
#define NCMAX 2
#define UBW 16
#define vf __m256
#define vm __m256i
#define VZERO() _mm256_setzero_ps()
#define VSET1(x) _mm256_set1_ps(x)
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMAX _mm256_max_ps
#define VMIN _mm256_min_ps
#define VFMA _mm256_fmadd_ps
#define VFNMA _mm256_fnmadd_ps
#define VLOAD _mm256_load_ps
#define VLOADU _mm256_loadu_ps
#define VSTORE _mm256_store_ps
#define VMASK(n) _mm256_cmpgt_epi32(_mm256_set1_epi32((n) >= 8 ? 8 : (int)(n)), \
                                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define VLOADM(m, p) _mm256_maskload_ps(p, m)
#define VSTOREM(p, m, v) _mm256_maskstore_ps(p, m, v)
#define VLEAKY(v, a) _mm256_blendv_ps(v, _mm256_mul_ps(v, a), _mm256_cmp_ps(v, VZERO(), _CMP_LT_OQ))
"""

_UNDEF = ("VW", "NCMAX", "UBW", "vf", "vm", "VZERO", "VSET1", "VADD", "VSUB", "VMAX", "VMIN",
          "VFMA", "VFNMA", "VLOAD", "VLOADU", "VSTORE", "VMASK", "VLOADM", "VSTOREM", "VLEAKY")


def _section(isa: str, target: str, defines: str) -> str:
    """The kernels for one instruction set: :data:`_KERNELS` with its vector macros, compiled
    for ``target`` (the CPU picks at run time: ``part_addresses``)."""
    return (f'#pragma GCC push_options\n#pragma GCC target("{target}")\n'
            f'#pragma GCC optimize("O3")\n{defines}{_KERNELS.replace("@", isa)}'
            + "".join(f"#undef {m}\n" for m in _UNDEF) + "#pragma GCC pop_options\n")


SOURCE = (_HEAD + _section("avx512", "avx512f,fma", _AVX512) + _section("avx2", "avx2,fma", _AVX2)
          + _TAIL)
"""The C module: the kernels written once (:data:`_KERNELS`, vector operations as macros) for
AVX-512F (16 lanes, 6 x 4 accumulators) and for AVX2 with FMA (8 lanes, 6 x 2: 16 registers)."""

module = _ccompile.OptionalExtension(SOURCE, "pytfrt_winograd_")
"""``module()``: the compiled module, or ``None`` (no C compiler, or ``module.enabled`` set
false: the callers keep their other paths)."""


@functools.cache
def part_addresses() -> tuple[int, int]:
    """``(AVX-512 part function, AVX2 one)``, each ``0`` where the CPU (or the lack of a C
    compiler) rules it out; compiled on first use."""
    mod = module()
    if mod is None:
        return 0, 0
    avx512, avx2 = mod.part_addresses()
    return int(avx512 or 0), int(avx2 or 0)


def _part_address() -> int:
    """The part function this process runs: AVX-512 where the CPU has it unless :data:`ISA` is
    ``"avx2"``, else AVX2 (``0``: neither)."""
    avx512, avx2 = part_addresses() if module.enabled else (0, 0)
    return avx2 if ISA == "avx2" or not avx512 else avx512


def available() -> bool:
    """Whether the native Winograd can run here (a C compiler and a CPU with AVX-512F, or AVX2
    and FMA)."""
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
    :data:`MIN_PIXELS`, :data:`MIN_CHANNELS`, :data:`MAX_CHANNELS` or with the AVX2 kernels
    :data:`AVX2_MAX_CHANNELS`; measured per layer and in ResNet-50, ``docs/kernels.md``)."""
    most = MAX_CHANNELS if _part_address() == part_addresses()[0] else AVX2_MAX_CHANNELS
    return (ENABLED and oh * ow >= MIN_PIXELS and min(cin, cout) >= MIN_CHANNELS
            and max(cin, cout) <= most)


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


def pack_filter(hwio: np.ndarray, tile: int, width: int = 64) -> np.ndarray:
    """``U = G g G^T`` of a ``(3, 3, cin, cout)`` float32 filter (``G`` of
    :mod:`pytfrt.backends.cpu._winograd`, as its ``filter_transform``: summed in float64, rounded
    once) packed for the micro-kernel: per position ``e``, per block of ``width`` output
    channels (64 for the AVX-512 kernels, 16 for AVX2: the columns one micro-kernel call reads;
    ``cout`` padded to a multiple of 16 with zeros), ``cin`` rows of the block's columns;
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
             packed, width)
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
        self._u: dict[tuple[int, int], np.ndarray] = {}
        self.bias = None
        if bias is not None:
            b = np.zeros(self.coutp, np.float32)
            b[:self.cout] = bias
            self.bias = b
        self.pads = tuple(pads)
        self.act, self.alpha = ACTS[act_code], float(alpha)
        self._launchers: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()

    def packed(self, tile: int, width: int = 64) -> np.ndarray:
        """:func:`pack_filter` for ``tile`` and ``width``, made once (thread-safe)."""
        u = self._u.get((tile, width))
        if u is None:
            with self._lock:
                u = self._u.get((tile, width))
                if u is None:
                    u = self._u[(tile, width)] = pack_filter(self._filter(), tile, width)
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
        part = _part_address()
        c[C_U] = self.packed(tile, 64 if part == part_addresses()[0] else 16).ctypes.data
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
        c[C_PART] = part
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
        fn, address, nparts = int(ctx[C_PART]), int(ctx.ctypes.data), int(ctx[C_NPARTS])
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
