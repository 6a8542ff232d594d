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

from pytfrt.backends.cpu import _ccompile

ENABLED = True
"""Whether the attention kernel uses :func:`address`'s function (``False``: its Numba loops;
read on every call: each setting has its compiled loop)."""

EXP_AVX512 = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <immintrin.h>

/* exp(x) for float32 x in [-80, 0] (16 lanes): n = round(x / ln 2), x - n ln 2 in two parts
   (Cody and Waite), a degree-6 polynomial, 2^n applied by scalef; within about 2e-7
   relative.  The callers clamp x at -80 and zero what lay below (no subnormals). */
__attribute__((target("avx512f,avx512dq"), always_inline))
static inline __m512 exp_avx512(__m512 x) {
    const __m512 log2e = _mm512_set1_ps(1.4426950408889634f);
    const __m512 ln2hi = _mm512_set1_ps(0.693145751953125f);
    const __m512 ln2lo = _mm512_set1_ps(1.428606765330187e-06f);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, ln2lo, _mm512_fnmadd_ps(n, ln2hi, x));
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 720.0f), r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}
"""
"""C shared with :mod:`pytfrt.backends.cpu._gelu_native`: the headers, the vectorised ``exp``
and the mask of a row's last partial vector (inserted where a source says ``EXP_AVX512``)."""

MODULE_TAIL = r"""
static PyObject *address(PyObject *self, PyObject *args) {
    /* the AVX-512 function, or 0 on a CPU without AVX-512 F and DQ */
    __builtin_cpu_init();
    int a5 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    return PyLong_FromVoidPtr(a5 ? (void *)FUNCTION : NULL);
}

static PyMethodDef methods[] = {{"address", address, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { return PyModule_Create(&module); }
"""


def with_module(function: str, source: str) -> str:
    """A C extension module's source: ``source`` with :data:`EXP_AVX512` in its place and a
    module whose ``address()`` gives the AVX-512 ``function`` (0 on a CPU without it)."""
    return source.replace("EXP_AVX512", EXP_AVX512) + MODULE_TAIL.replace("FUNCTION", function)

SOURCE = r"""
EXP_AVX512

__attribute__((target("avx512f,avx512dq"), optimize("O3")))
static int softmax_rows_f32(int64_t s_addr, int64_t rows, int64_t cols, int64_t mask_addr,
                            int64_t mask_row_stride) {
    float *s = (float *)s_addr;
    const float *mask = (const float *)mask_addr;
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff()), floor80 = _mm512_set1_ps(-80.0f);
    for (int64_t i = 0; i < rows; i++) {
        float *row = s + i * cols;
        const float *m = mask ? mask + i * mask_row_stride : 0;
        __m512 vmax = ninf;
        for (int64_t j = 0; j < cols; j += 16) {          /* the mask added; the maximum */
            __mmask16 k = tail_mask(cols - j);
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
            __mmask16 k = tail_mask(cols - j);
            __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), mx);
            __mmask16 keep = _mm512_mask_cmp_ps_mask(k, d, floor80, _CMP_GE_OQ);
            __m512 e = _mm512_maskz_mov_ps(keep, exp_avx512(_mm512_max_ps(d, floor80)));
            vsum = _mm512_add_ps(vsum, e);
            _mm512_mask_storeu_ps(row + j, k, e);
        }
        const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
        for (int64_t j = 0; j < cols; j += 16) {          /* scaled by 1 / sum */
            __mmask16 k = tail_mask(cols - j);
            __m512 v = _mm512_maskz_loadu_ps(k, row + j);
            _mm512_mask_storeu_ps(row + j, k, _mm512_mul_ps(v, inv));
        }
    }
    return 0;
}
"""

_extension = _ccompile.OptionalExtension(with_module("softmax_rows_f32", SOURCE), "pytfrt_softmax_")


def address() -> int:
    """The address of ``softmax_rows_f32`` (compiled on first use), or ``0``: no C compiler,
    no AVX-512, or :data:`ENABLED` false."""
    return native_address(_extension) if ENABLED else 0


def native_address(extension: _ccompile.OptionalExtension) -> int:
    """What the ``address()`` of ``extension``'s module returns (the address of its C
    function for this CPU, or 0), or 0 when the module cannot be built."""
    module = extension()
    return 0 if module is None else int(module.address() or 0)
