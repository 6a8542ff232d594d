"""The attention kernel's row softmax (mask add, max, ``exp``, sum, scale) as an AVX-512 C
function that compiled loops call.

Private helper of :mod:`pytfrt.backends.cpu.attention`.  Between its two GEMMs per (batch,
head), the attention takes a softmax of the ``Sq x Sk`` scores; its Numba loops
(``attention._softmax_rows``: four passes per row through scratch rows of mantissas and
exponent bits, vectorised at 256 bits) cost as much as one of the GEMMs -- BERT-base at
sequence 128, one thread, 12 heads: ~200 us of softmax beside ~180 us per GEMM.  Here the
same computation is written with AVX-512 intrinsics: pass 1 adds the mask row (when there is
one) and keeps a running maximum, pass 2 computes ``exp(x - max)`` (the attention's own
algorithm: ``n = round(x / ln 2)``, ``x - n ln 2`` in two parts, a degree-6 polynomial,
``2^n`` applied by ``scalef``) and the row's sum, zeroing what lies more than 80 below the
maximum (no subnormals: they cost a microcode assist in every GEMM that reads them), pass 3
scales by the reciprocal of the sum.  Within about 2e-6 relative of the float64 softmax
(the float32 sum of a row); 7 us per ``128 x 128`` head on one thread against ~17 us.

The function: ``int softmax_rows_f32(int64 s, int64 rows, int64 cols, int64 mask,
int64 mask_row_stride)`` (returns 0): ``rows`` rows of ``cols`` float32 scores at address
``s`` (C-contiguous), in place; ``mask`` the address of the first row's additive float32
mask (unit column stride; row ``i`` at ``mask + 4 * i * mask_row_stride``, a stride of 0
broadcasts one row), or 0 for none.  :func:`address` gives it compiled once per machine
(:mod:`pytfrt.backends.cpu._ccompile`), or 0 (the caller keeps its Numba loops) without a C
compiler, on a CPU without AVX-512, or with :data:`ENABLED` false.  Thread-safe (a pure
function of its buffers).
"""

from __future__ import annotations

import threading

ENABLED = True
"""Whether the attention kernel uses :func:`address`'s function (``False``: its Numba loops;
read when the attention's compiled loop is first built)."""

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <immintrin.h>

static inline __mmask16 tail(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

__attribute__((target("avx512f,avx512dq"), optimize("O3")))
static int softmax_rows_f32(int64_t s_addr, int64_t rows, int64_t cols, int64_t mask_addr,
                            int64_t mask_row_stride) {
    float *s = (float *)s_addr;
    const float *mask = (const float *)mask_addr;
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff()), floor80 = _mm512_set1_ps(-80.0f);
    const __m512 log2e = _mm512_set1_ps(1.4426950408889634f);
    const __m512 ln2hi = _mm512_set1_ps(0.693145751953125f);
    const __m512 ln2lo = _mm512_set1_ps(1.428606765330187e-06f);
    const __m512 c6 = _mm512_set1_ps(1.0f / 720.0f), c5 = _mm512_set1_ps(1.0f / 120.0f);
    const __m512 c4 = _mm512_set1_ps(1.0f / 24.0f), c3 = _mm512_set1_ps(1.0f / 6.0f);
    const __m512 c2 = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < rows; i++) {
        float *row = s + i * cols;
        const float *m = mask ? mask + i * mask_row_stride : 0;
        __m512 vmax = ninf;
        for (int64_t j = 0; j < cols; j += 16) {          /* the mask added; the maximum */
            __mmask16 k = tail(cols - j);
            __m512 v = _mm512_mask_loadu_ps(ninf, k, row + j);
            if (m) {
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, m + j));
                _mm512_mask_storeu_ps(row + j, k, v);
            }
            vmax = _mm512_max_ps(vmax, v);
        }
        const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
        __m512 vsum = _mm512_setzero_ps();
        for (int64_t j = 0; j < cols; j += 16) {          /* exp(x - max) and the sum */
            __mmask16 k = tail(cols - j);
            __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), mx);
            __mmask16 keep = _mm512_mask_cmp_ps_mask(k, d, floor80, _CMP_GE_OQ);
            __m512 x = _mm512_max_ps(d, floor80);
            __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __m512 r = _mm512_fnmadd_ps(n, ln2hi, x);
            r = _mm512_fnmadd_ps(n, ln2lo, r);
            __m512 p = _mm512_fmadd_ps(c6, r, c5);
            p = _mm512_fmadd_ps(p, r, c4);
            p = _mm512_fmadd_ps(p, r, c3);
            p = _mm512_fmadd_ps(p, r, c2);
            p = _mm512_fmadd_ps(p, r, one);
            p = _mm512_fmadd_ps(p, r, one);
            __m512 e = _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
            vsum = _mm512_add_ps(vsum, e);
            _mm512_mask_storeu_ps(row + j, k, e);
        }
        const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
        for (int64_t j = 0; j < cols; j += 16) {          /* scaled by 1 / sum */
            __mmask16 k = tail(cols - j);
            __m512 v = _mm512_maskz_loadu_ps(k, row + j);
            _mm512_mask_storeu_ps(row + j, k, _mm512_mul_ps(v, inv));
        }
    }
    return 0;
}

static PyObject *address(PyObject *self, PyObject *args) {
    /* the AVX-512 function, or 0 on a CPU without AVX-512 F and DQ */
    __builtin_cpu_init();
    int a5 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    return PyLong_FromVoidPtr(a5 ? (void *)softmax_rows_f32 : NULL);
}

static PyMethodDef methods[] = {{"address", address, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { return PyModule_Create(&module); }
"""

_lock = threading.Lock()
_address: int | None = None


def address() -> int:
    """The address of ``softmax_rows_f32`` (compiled on first use), or ``0``: no C compiler,
    no AVX-512, or :data:`ENABLED` false."""
    global _address
    if not ENABLED:
        return 0
    if _address is None:
        with _lock:
            if _address is None:
                _address = _build()
    return _address


def _build() -> int:
    from pytfrt.backends.cpu import _ccompile

    name = _ccompile.module_name(SOURCE, "pytfrt_softmax_", uses_numpy=False)
    try:
        module = _ccompile.extension(SOURCE.replace("MODNAME", name), name, uses_numpy=False)
        return int(module.address() or 0)
    except (_ccompile.CompileError, AttributeError, TypeError, ValueError):
        return 0
