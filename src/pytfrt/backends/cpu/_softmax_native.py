"""The attention kernel's row softmax (mask add, max, ``exp``, sum, scale) as C source for
AVX-512, AVX2 with FMA and portable C, and the vectorised ``exp`` other native kernels share.

Private helper of :mod:`pytfrt.backends.cpu._attention_native` (which compiles
:data:`SOFTMAX_ROWS` into the attention's per-(batch, head) C function) and of
:mod:`pytfrt.backends.cpu._gelu_native` (:data:`EXP_AVX512`, :func:`with_module`).  Between
its two GEMMs per (batch, head), the attention takes a softmax of the ``Sq x Sk`` scores:
pass 1 adds the mask row (when there is one) and keeps a running maximum, pass 2 computes
``exp(x - max)`` (``n = round(x / ln 2)``, ``x - n ln 2`` in two parts, a degree-6
polynomial, ``2^n`` applied by ``scalef`` with AVX-512 or built as the float32 bit pattern
``(127 + n) << 23`` otherwise) and the row's sum, zeroing what lies more than 80 below the
maximum (no subnormals: they cost a microcode assist in every GEMM that reads them), pass 3
scales by the reciprocal of the sum.  Within about 2e-6 relative of the float64 softmax (the
float32 sum of a row); with AVX-512 ~7 us per ``128 x 128`` head on one thread (the former
Numba loops, vectorised at 256 bits through scratch rows of mantissas and exponent bits:
~17 us).  Source text only: nothing here compiles or runs by itself.
"""

from __future__ import annotations

from pytfrt.backends.cpu import _ccompile

_EXP_TEMPLATE = r"""
__attribute__((target("@TARGET@"), always_inline))
static inline @VEC@ exp_@ISA@(@VEC@ x) {
    const @VEC@ log2e = @PFX@_set1_ps(1.4426950408889634f);
    const @VEC@ ln2hi = @PFX@_set1_ps(0.693145751953125f);
    const @VEC@ ln2lo = @PFX@_set1_ps(1.428606765330187e-06f);
    @VEC@ n = @ROUND@(@PFX@_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    @VEC@ r = @PFX@_fnmadd_ps(n, ln2lo, @PFX@_fnmadd_ps(n, ln2hi, x));
    @VEC@ p = @PFX@_fmadd_ps(@PFX@_set1_ps(1.0f / 720.0f), r, @PFX@_set1_ps(1.0f / 120.0f));
    p = @PFX@_fmadd_ps(p, r, @PFX@_set1_ps(1.0f / 24.0f));
    p = @PFX@_fmadd_ps(p, r, @PFX@_set1_ps(1.0f / 6.0f));
    p = @PFX@_fmadd_ps(p, r, @PFX@_set1_ps(0.5f));
    p = @PFX@_fmadd_ps(p, r, @PFX@_set1_ps(1.0f));
    p = @PFX@_fmadd_ps(p, r, @PFX@_set1_ps(1.0f));
    return @TWO_N@;
}
"""
"""``exp`` of a vector of float32 in ``[-80, 0]``, written once for both instruction sets
(:func:`_exp`)."""


def _exp(isa: str) -> str:
    """:data:`_EXP_TEMPLATE` as ``exp_avx512`` (``2^n`` applied by ``scalef``) or ``exp_avx2``
    (``2^n`` built as the float32 bit pattern ``(127 + n) << 23``: ``n >= -116``, a normal
    number)."""
    if isa == "avx512":
        return (_EXP_TEMPLATE.replace("@TARGET@", "avx512f,avx512dq").replace("@VEC@", "__m512")
                .replace("@PFX@", "_mm512").replace("@ROUND@", "_mm512_roundscale_ps")
                .replace("@TWO_N@", "_mm512_scalef_ps(p, n)").replace("@ISA@", isa))
    two_n = ("_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(\n"
             "        _mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)))")
    return (_EXP_TEMPLATE.replace("@TARGET@", "avx2,fma").replace("@VEC@", "__m256")
            .replace("@PFX@", "_mm256").replace("@ROUND@", "_mm256_round_ps")
            .replace("@TWO_N@", two_n).replace("@ISA@", isa))


EXP_AVX512 = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <immintrin.h>

/* exp(x) for float32 x in [-80, 0] (16 lanes; exp_avx2 the same in 8): n = round(x / ln 2),
   x - n ln 2 in two parts (Cody and Waite), a degree-6 polynomial, times 2^n; within about
   2e-7 relative.  The callers clamp x at -80 and zero what lay below (no subnormals). */
EXP_AVX512_FUNCTION
static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}
"""
EXP_AVX512 = EXP_AVX512.replace("EXP_AVX512_FUNCTION", _exp("avx512"))
"""C shared with :mod:`pytfrt.backends.cpu._gelu_native` and :data:`SOFTMAX_ROWS`: the headers,
the vectorised ``exp`` and the mask of a row's last partial vector (inserted where a source
says ``EXP_AVX512``)."""

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


def native_address(extension: _ccompile.OptionalExtension) -> int:
    """What the ``address()`` of ``extension``'s module returns (the address of its C
    function for this CPU, or 0), or 0 when the module cannot be built."""
    module = extension()
    return 0 if module is None else int(module.address() or 0)


SOFTMAX_ROWS = r"""
#if defined(__x86_64__) || defined(__i386__)
EXP_AVX512

/* one row's softmax in place: the mask row m (unit stride; NULL: none) added and the maximum
   kept, exp(x - max) and the sum (0 more than 80 below the maximum), scaled by 1 / sum */
__attribute__((target("avx512f,avx512dq"), always_inline))
static inline void softmax_row_avx512(float *row, int64_t cols, const float *m) {
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff()), floor80 = _mm512_set1_ps(-80.0f);
    __m512 vmax = ninf;
    for (int64_t j = 0; j < cols; j += 16) {              /* the mask added; the maximum */
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
    for (int64_t j = 0; j < cols; j += 16) {              /* exp(x - max) and the sum */
        __mmask16 k = tail_mask(cols - j);
        __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), mx);
        __mmask16 keep = _mm512_mask_cmp_ps_mask(k, d, floor80, _CMP_GE_OQ);
        __m512 e = _mm512_maskz_mov_ps(keep, exp_avx512(_mm512_max_ps(d, floor80)));
        vsum = _mm512_add_ps(vsum, e);
        _mm512_mask_storeu_ps(row + j, k, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
    for (int64_t j = 0; j < cols; j += 16) {              /* scaled by 1 / sum */
        __mmask16 k = tail_mask(cols - j);
        __m512 v = _mm512_maskz_loadu_ps(k, row + j);
        _mm512_mask_storeu_ps(row + j, k, _mm512_mul_ps(v, inv));
    }
}

EXP_AVX2

/* lanes below `left` set (all 8 from 8 on) */
__attribute__((target("avx2,fma"), always_inline))
static inline __m256i tail_mask8(int64_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : (int)left),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8 floats at p, of which `left` (< 8: a row's last partial vector) are the row's: the others
   read as `fill`; and the store of those lanes.  Whole vectors take plain loads and stores
   (a masked store, vmaskmovps, is slow on AMD's cores) */
__attribute__((target("avx2,fma"), always_inline))
static inline __m256 load8(const float *p, int64_t left, __m256 fill) {
    if (left >= 8) return _mm256_loadu_ps(p);
    __m256i k = tail_mask8(left);
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, k), _mm256_castsi256_ps(k));
}

__attribute__((target("avx2,fma"), always_inline))
static inline void store8(float *p, int64_t left, __m256 v) {
    if (left >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, tail_mask8(left), v);
}

/* softmax_row_avx512 at 8 lanes */
__attribute__((target("avx2,fma"), always_inline))
static inline void softmax_row_avx2(float *row, int64_t cols, const float *m) {
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff()), floor80 = _mm256_set1_ps(-80.0f);
    const __m256 zero = _mm256_setzero_ps();
    __m256 vmax = ninf;
    for (int64_t j = 0; j < cols; j += 8) {
        __m256 v = load8(row + j, cols - j, ninf);
        if (m) {
            v = _mm256_add_ps(v, load8(m + j, cols - j, zero));
            store8(row + j, cols - j, v);
        }
        vmax = _mm256_max_ps(vmax, v);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    const __m256 mx = _mm256_set1_ps(_mm_cvtss_f32(h));
    __m256 vsum = zero;
    for (int64_t j = 0; j < cols; j += 8) {            /* tail lanes: -inf, so e = 0 */
        __m256 d = _mm256_sub_ps(load8(row + j, cols - j, ninf), mx);
        __m256 keep = _mm256_cmp_ps(d, floor80, _CMP_GE_OQ);
        __m256 e = _mm256_and_ps(keep, exp_avx2(_mm256_max_ps(d, floor80)));
        vsum = _mm256_add_ps(vsum, e);
        store8(row + j, cols - j, e);
    }
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(vsum), _mm256_extractf128_ps(vsum, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_shuffle_ps(t, t, 1));
    const __m256 inv = _mm256_set1_ps(1.0f / _mm_cvtss_f32(t));
    for (int64_t j = 0; j < cols; j += 8)
        store8(row + j, cols - j, _mm256_mul_ps(load8(row + j, cols - j, zero), inv));
}
#endif

/* the same algorithm in portable C (any CPU): n = round(x / ln 2) as an integer, 2^n as
   (127 + n) << 23; without trapping math (FP exception flags only) its loops vectorise */
#pragma GCC push_options
#pragma GCC optimize("O3", "no-trapping-math")
static inline float exp_generic(float x) {
    int32_t ni = (int32_t)(0.5f - x * 1.4426950408889634f);            /* -round(x / ln 2) */
    float n = -(float)ni;
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187e-06f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6.0f + r * (1.0f / 24.0f
                     + r * (1.0f / 120.0f + r * (1.0f / 720.0f))))));
    union { int32_t i; float f; } two_n = {(127 - ni) << 23};
    return p * two_n.f;
}

static inline void softmax_row_generic(float *row, int64_t cols, const float *m) {
    /* eight running maxima and sums (loops the compiler can vectorise without reordering a
       single chain of float operations), exp(x - max) in a loop of its own */
    float mx8[8], sum8[8], mx = -__builtin_inff(), sum = 0.0f;
    int64_t j, c8 = cols - cols % 8;
    if (m)
        for (j = 0; j < cols; j++) row[j] += m[j];
    for (int l = 0; l < 8; l++) mx8[l] = -__builtin_inff(), sum8[l] = 0.0f;
    for (j = 0; j < c8; j += 8)
        for (int l = 0; l < 8; l++) mx8[l] = row[j + l] > mx8[l] ? row[j + l] : mx8[l];
    for (; j < cols; j++) mx = row[j] > mx ? row[j] : mx;
    for (int l = 0; l < 8; l++) mx = mx8[l] > mx ? mx8[l] : mx;
    for (j = 0; j < cols; j++) {
        float d = row[j] - mx;
        float e = exp_generic(d > -80.0f ? d : -80.0f);
        row[j] = d >= -80.0f ? e : 0.0f;
    }
    for (j = 0; j < c8; j += 8)
        for (int l = 0; l < 8; l++) sum8[l] += row[j + l];
    for (; j < cols; j++) sum += row[j];
    for (int l = 0; l < 8; l++) sum += sum8[l];
    const float inv = 1.0f / sum;
    for (j = 0; j < cols; j++) row[j] *= inv;
}
#pragma GCC pop_options
"""
"""C of a row softmax (in place, an optional additive mask row of unit stride added first):
``softmax_row_avx512``, ``softmax_row_avx2`` (both on x86 only, each compiled for its
instruction set: callers check the CPU) and ``softmax_row_generic`` (portable C), each
``static inline void (float *row, int64_t cols, const float *mask_row_or_NULL)``.  Needs
``<stdint.h>`` and, on x86, ``<immintrin.h>`` included before it (:data:`EXP_AVX512`'s
headers)."""
SOFTMAX_ROWS = SOFTMAX_ROWS.replace("EXP_AVX2", _exp("avx2"))
