"""The attention's per-(batch, head) work in C: two ``dnnl_sgemm`` products around a row
softmax, for AVX-512, AVX2 with FMA, or portable C (no Numba).

Private helper of :mod:`pytfrt.backends.cpu.attention` (see its docstring for the
computation).  One C function, ``int part(int64 context, int64 i)``, runs shard ``i`` of the
(batch, head) pairs a *context* describes (an ``int64`` array laid out as the ``C_*`` words
below): per pair ``dnnl_sgemm`` of the strided query rows against the strided key rows into
a scratch block of scores (the scale folded into ``alpha``), the mask -- additive ``float32``
with any strides (0 where it broadcasts), or with ``select`` a boolean mask putting ``fill``
where it is false --, the row softmax of :data:`pytfrt.backends.cpu._softmax_native.SOFTMAX_ROWS`
(an additive mask of unit column stride added inside its first pass, other masks by a pass of
their own), and ``dnnl_sgemm`` of the probabilities against the strided value rows straight
into the result's head columns.  The queries are taken in blocks of at most
:data:`ROW_BLOCK_FLOATS` / ``Sk`` rows, so the per-thread scratch block (kept by the thread,
grown as needed) stays within 256 KB (BERT's and GPT-2's heads are one block).

The same function is the spin pool's call part (:func:`pytfrt.backends.cpu._dnnl_conv.run_calls`
calls it by address, no GIL) and, through ctypes (which releases the GIL),
:func:`pytfrt.backends.cpu._parallel.parallel_for`'s shard.  It is compiled once per machine
(:mod:`pytfrt.backends.cpu._ccompile`) in three versions, the CPU picking at run time
(:func:`part_address`; :data:`ISA` forces one, e.g. to run on this machine what an AVX2-only
CPU runs).  Without a C compiler, or with :data:`ENABLED` false, :func:`part_address` is 0 and
the attention takes its NumPy path.

The caller pins oneDNN's OpenMP to one thread on each thread that calls the function
(:func:`pytfrt.backends.cpu._blas.pin_thread`; the pool's threads are pinned).  Thread-safe: a
part writes only its pairs' result columns and its thread's scratch.  A part returns 0, the OR
of ``dnnl_sgemm``'s nonzero statuses, or -1 when its scratch cannot be allocated.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

from pytfrt.backends.cpu import _ccompile
from pytfrt.backends.cpu._softmax_native import EXP_AVX512, SOFTMAX_ROWS

ENABLED = True
"""Whether the attention runs the C function (``False``: its NumPy path; read per call)."""

ISA: str | None = None
"""``"avx2"`` or ``"generic"``: that version even where the CPU has a wider one (tests, and
measuring what an AVX2-only CPU runs; read per call); ``None``: the widest the CPU has."""

ROW_BLOCK_FLOATS = 1 << 16
"""Scores per scratch block: queries are taken ``max(1, ROW_BLOCK_FLOATS // Sk)`` rows at a
time (a block of 256 KB stays in L2; a whole ``Sq x Sk`` block at long sequences would not).
Written into the C source when this module is imported (setting it later changes nothing)."""

# words of a context (int64): the geometry, the operands' addresses, the mask, then the shards
(C_B, C_SQ, C_H, C_D, C_SK, C_DV, C_QS0, C_QS1, C_QS2, C_KS0, C_KS1, C_KS2, C_VS0, C_VS1, C_VS2,
 C_YS0, C_YS1, C_YS2, C_Q, C_K, C_V, C_Y, C_MASK, C_MASK_LEN, C_MS0, C_MS1, C_MS2, C_MS3,
 C_MODE, C_SCALE, C_FILL, C_GEMM, C_SHARDS) = range(33)
"""Context words: batch, Sq, heads, D, Sk, Dv; the element strides of ``q``, ``k``, ``v`` and
``y`` over (batch, sequence, head); their addresses; the mask's address, its element count and
its element strides over ``[B, H, Sq, Sk]`` (0 where it broadcasts); :data:`MODE_NONE`,
:data:`MODE_ADD` or :data:`MODE_SELECT`; the scale and ``fill`` (a float64's bits);
``dnnl_sgemm``'s address; from :data:`C_SHARDS` on ``[lo, hi)`` of each shard's pairs."""
MODE_NONE, MODE_ADD, MODE_SELECT = 0, 1, 2

_HEAD = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

enum { B, SQ, H, D, SK, DV, QS0, QS1, QS2, KS0, KS1, KS2, VS0, VS1, VS2, YS0, YS1, YS2,
       AQ, AK, AV, AY, MASK, MASK_LEN, MS0, MS1, MS2, MS3, MODE, SCALE, FILL, GEMM, SHARDS };
#define ROW_BLOCK ROW_BLOCK_FLOATS_VALUE

/* oneDNN's row-major float32 GEMM: C = alpha op(A) op(B) + beta C */
typedef int (*sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
                        const float *, int64_t, float, float *, int64_t);

/* per-thread scratch (one block of scores), grown as needed, kept for the thread */
static __thread float *SCR = NULL;
static __thread int64_t SCR_N = 0;
static float *scratch(int64_t n) {
    if (n > SCR_N) {
        free(SCR);
        SCR = aligned_alloc(64, (size_t)((n * 4 + 63) / 64) * 64);
        SCR_N = SCR ? n : 0;
    }
    return SCR;
}

static float word_float(int64_t w) {
    double d;
    memcpy(&d, &w, sizeof d);
    return (float)d;
}
"""

_KERNELS = r"""
/* rows of cols scores at s, each softmaxed in place, the additive mask row i at m + i * ms
   (unit column stride; m NULL: none) added first.  Not inlined into its callers: inlined, the
   attention's per-pair loop ran ~3% slower */
__attribute__((noinline))
static void rows_@(float *s, int64_t rows, int64_t cols, const float *m, int64_t ms) {
    for (int64_t i = 0; i < rows; i++) softmax_row_@(s + i * cols, cols, m ? m + i * ms : NULL);
}

/* the mask of query row r (of the pair whose mask starts at moff) applied to a row of
   scores, unless it is additive with unit column stride (then rows_@ adds it) */
static inline void mask_row_@(const int64_t *c, float *row, int64_t moff, int64_t r,
                              float fill) {
    const int64_t sk = c[SK], ms3 = c[MS3], base = moff + r * c[MS2];
    if (c[MODE] == 1) {
        const float *m = (const float *)c[MASK] + base;
        for (int64_t j = 0; j < sk; j++) row[j] += m[j * ms3];
    } else if (ms3 == 1) {
        const uint8_t *m = (const uint8_t *)c[MASK] + base;
        for (int64_t j = 0; j < sk; j++) row[j] = m[j] ? row[j] : fill;
    } else {
        const uint8_t *m = (const uint8_t *)c[MASK] + base;
        for (int64_t j = 0; j < sk; j++) row[j] = m[j * ms3] ? row[j] : fill;
    }
}

/* the pairs [lo, hi) of a context */
static int pairs_@(const int64_t *c, int64_t lo, int64_t hi) {
    const int64_t sq = c[SQ], h = c[H], d = c[D], sk = c[SK], dv = c[DV], mode = c[MODE];
    const float scale = word_float(c[SCALE]), fill = word_float(c[FILL]);
    const sgemm_fn gemm = (sgemm_fn)c[GEMM];
    const int inline_mask = mode == 1 && c[MS3] == 1;
    int64_t rb = ROW_BLOCK / sk;
    rb = rb < 1 ? 1 : (rb > sq ? sq : rb);
    float *s = scratch(rb * sk);
    if (!s) return -1;
    int status = 0;
    for (int64_t pair = lo; pair < hi; pair++) {
        const int64_t bi = pair / h, hh = pair - bi * h;
        const float *q = (const float *)c[AQ] + bi * c[QS0] + hh * c[QS2];
        const float *k = (const float *)c[AK] + bi * c[KS0] + hh * c[KS2];
        const float *v = (const float *)c[AV] + bi * c[VS0] + hh * c[VS2];
        float *y = (float *)c[AY] + bi * c[YS0] + hh * c[YS2];
        const int64_t moff = bi * c[MS0] + hh * c[MS1];
        for (int64_t i0 = 0; i0 < sq; i0 += rb) {
            const int64_t n = sq - i0 < rb ? sq - i0 : rb;
            /* scores [n, Sk] = scale * q rows [n, D] @ k_bh^T (rows of q and k strided) */
            status |= gemm('N', 'T', n, sk, d, scale, q + i0 * c[QS1], c[QS1], k, c[KS1], 0.0f,
                           s, sk);
            if (mode != 0 && !inline_mask)
                for (int64_t i = 0; i < n; i++) mask_row_@(c, s + i * sk, moff, i0 + i, fill);
            rows_@(s, n, sk, inline_mask ? (const float *)c[MASK] + moff + i0 * c[MS2] : NULL,
                   c[MS2]);
            /* y rows [n, Dv] = p [n, Sk] @ v_bh [Sk, Dv], into the result's head columns */
            status |= gemm('N', 'N', n, dv, sk, 1.0f, s, sk, v, c[VS1], 0.0f, y + i0 * c[YS1],
                           c[YS1]);
        }
    }
    return status;
}

/* shard i of a context: the spin pool's call part (and the parallel_for shard) */
static int part_@(int64_t context, int64_t i) {
    const int64_t *c = (const int64_t *)context;
    return pairs_@(c, c[SHARDS + 2 * i], c[SHARDS + 2 * i + 1]);
}

/* the row softmax alone (tests): rows of cols scores at s, the additive mask's row i at
   mask + 4 * i * mask_row_stride (0: none) */
static int softmax_rows_@(int64_t s, int64_t rows, int64_t cols, int64_t mask,
                          int64_t mask_row_stride) {
    rows_@((float *)s, rows, cols, (const float *)mask, mask_row_stride);
    return 0;
}
"""

_TAIL = r"""
/* addresses(): ((part, softmax_rows) for AVX-512, AVX2 and portable C), (0, 0) for a version
   this CPU cannot run */
static PyObject *addresses(PyObject *self, PyObject *args) {
    int a5 = 0, a2 = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    a5 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    a2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    void *p5 = NULL, *s5 = NULL, *p2 = NULL, *s2 = NULL;
#if defined(__x86_64__) || defined(__i386__)
    if (a5) { p5 = (void *)part_avx512; s5 = (void *)softmax_rows_avx512; }
    if (a2) { p2 = (void *)part_avx2; s2 = (void *)softmax_rows_avx2; }
#endif
    return Py_BuildValue("((NN)(NN)(NN))", PyLong_FromVoidPtr(p5), PyLong_FromVoidPtr(s5),
                         PyLong_FromVoidPtr(p2), PyLong_FromVoidPtr(s2),
                         PyLong_FromVoidPtr((void *)part_generic),
                         PyLong_FromVoidPtr((void *)softmax_rows_generic));
}

static PyMethodDef methods[] = {{"addresses", addresses, METH_NOARGS, NULL},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { return PyModule_Create(&module_def); }
"""


def _section(isa: str, target: str | None) -> str:
    """:data:`_KERNELS` for one version, compiled for ``target`` (``None``: portable C)."""
    body = _KERNELS.replace("@", isa)
    if target is None:
        return (f'#pragma GCC push_options\n#pragma GCC optimize("O3", "no-trapping-math")\n'
                f'{body}#pragma GCC pop_options\n')
    return ("#if defined(__x86_64__) || defined(__i386__)\n#pragma GCC push_options\n"
            f'#pragma GCC target("{target}")\n#pragma GCC optimize("O3")\n{body}'
            "#pragma GCC pop_options\n#endif\n")


SOURCE = (_HEAD.replace("ROW_BLOCK_FLOATS_VALUE", str(ROW_BLOCK_FLOATS))
          + SOFTMAX_ROWS.replace("EXP_AVX512", EXP_AVX512)
          + _section("avx512", "avx512f,avx512dq,avx2,fma") + _section("avx2", "avx2,fma")
          + _section("generic", None) + _TAIL)
"""The C module: :data:`_KERNELS` for AVX-512 (F and DQ), for AVX2 with FMA and in portable C
around the matching row softmax."""

module = _ccompile.OptionalExtension(SOURCE, "pytfrt_attention_")
"""``module()``: the compiled module, or ``None`` (no C compiler, or ``module.enabled`` set
false)."""

_VERSIONS = ("avx512", "avx2", "generic")


@functools.cache
def _addresses() -> dict[str, tuple[int, int]]:
    """``{version: (part, softmax_rows)}`` of the versions this CPU runs (compiled on first
    use); empty without a C compiler."""
    mod = module()
    if mod is None:
        return {}
    return {name: (int(p), int(s)) for name, (p, s) in zip(_VERSIONS, mod.addresses(),
                                                            strict=True) if p}


def version() -> str | None:
    """The version this process runs: :data:`ISA` if set and runnable here, else the widest
    the CPU has; ``None`` without a C compiler or with :data:`ENABLED` false."""
    if not ENABLED or not module.enabled:
        return None
    found = _addresses()
    if ISA in found:
        return ISA
    return next((name for name in _VERSIONS if name in found), None)


_chosen: dict[tuple[bool, bool, str | None], int] = {}
""":func:`part_address` by the switches it depends on (it runs on every attention call)."""


def part_address() -> int:
    """The address of ``int part(int64 context, int64 i)`` for :func:`version` (0: none)."""
    key = (ENABLED, module.enabled, ISA)
    address = _chosen.get(key)
    if address is None:
        name = version()
        address = _chosen[key] = 0 if name is None else _addresses()[name][0]
    return address


def softmax_rows_address(name: str) -> int:
    """The address of version ``name``'s ``int softmax_rows(int64 s, int64 rows, int64 cols,
    int64 mask, int64 mask_row_stride)`` (the row softmax alone, for tests), 0 where it does
    not run."""
    return _addresses().get(name, (0, 0))[1] if module.enabled else 0


@functools.cache
def part_function(address: int) -> Callable[[int, int], int]:
    """The part function at ``address`` as a ctypes function (calls release the GIL)."""
    i64 = ctypes.c_int64
    return ctypes.CFUNCTYPE(ctypes.c_int, i64, i64)(address)
