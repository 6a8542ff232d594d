"""float32 SiLU (``x * sigmoid(x)``) in place over a buffer, as a C function for native code.

Private helper of :mod:`pytfrt.backends.cpu._dnnl_conv`.  oneDNN 3.2's ``eltwise_swish``
post-op cost ~0.5 ns per element and thread on this project's AVX-512 machine -- in
EfficientNet-B0 (6.3M SiLU outputs per image) about a third of the convolutions' time, as
much as the convolutions that produce them.  The same outputs written by the convolution
without the post-op and then passed once through :func:`address`'s function, while the part
is still in cache (``_spin_pool.run_row``), measured ~7% less per convolution with SiLU
(nine EfficientNet layers on one thread: 3.27 -> 3.06 ms) and EfficientNet-B0 at batch 1 on
both threads 7.44 -> 7.11 ms per call (medians of 100 interleaved calls, real-time priority;
outputs within 9e-8 of the post-op's).

The function: ``int silu_f32(float *y, int64 n)`` (returns 0): ``x / (1 + exp(-x))``, ``exp(-x)``
as ``2^(n + f)`` (split, a degree-6 polynomial for ``2^f`` on ``[-0.5, 0.5]``; ``-x`` at least
-87, so from ``x < -88.7`` on the exponential is ``inf`` and the result ``-0``); IEEE semantics at
the edges (NaN stays NaN, ``inf`` gives ``inf``, ``-inf`` NaN as the formula does).  The AVX-512
version is written with intrinsics: ``2^n`` applied by ``scalef`` and the division replaced by
``rcp14`` and one Newton step, 18 vector operations per 16 outputs against the compiled scalar
loop's 22 with a ``vdivps`` (0.35 -> 0.29 ns per element in L1, one thread; EfficientNet-B0 at
batch 1, both threads, 8.83 -> 8.49 ms median per call, 150 interleaved calls at real-time
priority beside ONNX Runtime's 8.59).  It now splits ``t = n + f`` with ``floor`` instead (``f``
in ``[0, 1)`` by one ``reduce``, and ``scalef`` applies ``2^floor(t)`` from ``t`` itself) and a
degree-5 polynomial fitted to ``2^f``'s relative error on ``[0, 1)`` (1.5e-7), and without a
clamp: 14 operations, EfficientNet-B0 0.971x and then 0.983x per call (docs/benchmarks.md).  The
AVX2 version (8 lanes) is written the same way with ``rcp`` and a Newton step, ``2^n`` put into
the exponent field, and masked loads and stores for the last partial vector: GCC did not vectorise
the scalar loop it replaces (a ``vdivps`` per element; see docs/kernels.md for the
figures).  :data:`ISA` picks the AVX2 version on an AVX-512 CPU (tests run both).  Within 5e-6
relative of the float64 SiLU over float32's range, 1e-30 absolute where that underflows
(``tests/unit/test_cpu_silu.py``).  It is compiled once per machine with the C compiler
(:mod:`pytfrt.backends.cpu._ccompile`: a cached extension module), the CPU picking a version at
run time; :func:`address` is ``0`` (the caller keeps oneDNN's post-op) without a compiler, on CPUs
without AVX2 and FMA, or with :data:`ENABLED` false.  Thread-safe (pure function of its buffer).
"""

from __future__ import annotations

import threading

ENABLED = True
"""Whether float32 SiLU epilogues of oneDNN convolutions use :func:`address`'s function
(``False``: oneDNN's ``eltwise_swish`` post-op)."""
ISA: str | None = None
"""``"avx2"``: :func:`address` gives the AVX2 version even on an AVX-512 CPU (tests, and
measuring what an AVX2-only machine runs); ``None``: the widest the CPU has."""

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

/* 2^f on [-0.5, 0.5], degree 6 (Horner), for one vector width's fmadd and set1 */
#define EXP2_POLY(FMA, SET1, f)                                                               \
    FMA(FMA(FMA(FMA(FMA(FMA(SET1(1.535336188319500e-4f), f, SET1(1.339887440266574e-3f)), f, \
                        SET1(9.618437357674640e-3f)), f, SET1(5.550332471162809e-2f)), f,    \
                SET1(2.402264791363012e-1f)), f, SET1(6.931472028550421e-1f)), f, SET1(1.0f))

/* 2^f on [0, 1), degree 5 (Horner): within 1.5e-7 relative (fitted to the relative error) */
#define EXP2_POLY01(FMA, SET1, f)                                                             \
    FMA(FMA(FMA(FMA(FMA(SET1(1.87782e-3f), f, SET1(8.98876e-3f)), f, SET1(5.58268e-2f)), f,   \
                SET1(2.4015345e-1f)), f, SET1(6.9315309e-1f)), f, SET1(1.0f))

__attribute__((target("avx512f,avx512dq"), optimize("O3")))
static int silu_avx512(float *y, int64_t n) {
    /* t = -x log2(e), unclamped; f = t - floor(t) in one reduce, and scalef applies
       2^floor(t) itself (no rounding or subtraction of its own).  From x > 87 on exp(-x)
       becomes subnormal and then 0 (the result x); from x < -88.7 on scalef makes it inf and
       the result -0, as in SILU_BODY.  reduce gives +0 for an infinite t: inf gives inf
       (exp(-x) = 0), -inf NaN (exp(-x) inf, x times 0); NaN stays NaN.  14 vector operations
       per 16 outputs. */
    const __m512 nlog2e = _mm512_set1_ps(-1.44269504088896341f), one = _mm512_set1_ps(1.0f);
    const __m512 inf = _mm512_set1_ps(__builtin_inff());
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, y + i);
        __m512 t = _mm512_mul_ps(v, nlog2e);
        __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m512 p = EXP2_POLY01(_mm512_fmadd_ps, _mm512_set1_ps, f);
        __m512 d = _mm512_add_ps(one, _mm512_scalef_ps(p, t));   /* 1 + exp(-x), inf beyond */
        __m512 r = _mm512_rcp14_ps(d);                           /* 1/d within 2^-14 */
        __m512 e = _mm512_fnmadd_ps(d, r, one);                  /* one Newton step */
        r = _mm512_mask_fmadd_ps(r, _mm512_cmp_ps_mask(d, inf, _CMP_NEQ_UQ), e, r); /* d=inf: 0 */
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, r));
    }
    return 0;
}

__attribute__((target("avx2,fma"), optimize("O3")))
static int silu_avx2(float *y, int64_t n) {
    /* As silu_avx512, 8 lanes: t = -x log2(e) clamped to [-87, 89] log2(e); 2^k built in the
       exponent field (k = 128 at the top: inf, so exp(-x) is inf and the result -0 from
       x < -88.7 on); 1 / d by rcp (12 bits) plus one Newton step, 0 where d is inf.  NaN
       stays NaN (max returns its 2nd operand, the product keeps x's NaN), -inf gives NaN,
       inf gives inf.  The last partial vector is read and written with masks. */
    const __m256 lo = _mm256_set1_ps(-87.0f * 1.44269504088896341f);
    const __m256 hi = _mm256_set1_ps(89.0f * 1.44269504088896341f);
    const __m256 nlog2e = _mm256_set1_ps(-1.44269504088896341f), one = _mm256_set1_ps(1.0f);
    const __m256 inf = _mm256_set1_ps(__builtin_inff());
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), bias = _mm256_set1_epi32(127);
    for (int64_t i = 0; i < n; i += 8) {
        const int64_t left = n - i;
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : (int)left), lane);
        __m256 v = left >= 8 ? _mm256_loadu_ps(y + i) : _mm256_maskload_ps(y + i, m);
        __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v, nlog2e), lo), hi);
        __m256 k = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 f = _mm256_sub_ps(t, k);
        __m256 p = EXP2_POLY(_mm256_fmadd_ps, _mm256_set1_ps, f);
        __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), bias), 23);
        __m256 d = _mm256_fmadd_ps(p, _mm256_castsi256_ps(e), one);  /* 1 + exp(-x) */
        __m256 r = _mm256_rcp_ps(d);
        r = _mm256_fmadd_ps(_mm256_fnmadd_ps(d, r, one), r, r);        /* one Newton step */
        r = _mm256_andnot_ps(_mm256_cmp_ps(d, inf, _CMP_EQ_OQ), r);     /* d = inf: 0 */
        __m256 out = _mm256_mul_ps(v, r);
        if (left >= 8) _mm256_storeu_ps(y + i, out); else _mm256_maskstore_ps(y + i, m, out);
    }
    return 0;
}

static PyObject *address(PyObject *self, PyObject *args) {
    /* (the AVX-512 function or 0, the AVX2 function or 0) for this CPU */
    __builtin_cpu_init();
    int a5 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    int a2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return Py_BuildValue("(NN)", PyLong_FromVoidPtr(a5 ? (void *)silu_avx512 : NULL),
                         PyLong_FromVoidPtr(a2 ? (void *)silu_avx2 : NULL));
}

static PyMethodDef methods[] = {{"address", address, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { return PyModule_Create(&module); }
"""

_lock = threading.Lock()
_addresses: tuple[int, int] | None = None


def address() -> int:
    """The address of ``silu_f32`` for this CPU (compiled on first use), or ``0``: the AVX-512
    version where the CPU has it unless :data:`ISA` is ``"avx2"``, else the AVX2 version."""
    if not ENABLED:
        return 0
    avx512, avx2 = addresses()
    return avx2 if ISA == "avx2" or not avx512 else avx512


def addresses() -> tuple[int, int]:
    """``(AVX-512 version, AVX2 version)``, each ``0`` where this CPU (or the lack of a C
    compiler) rules it out; compiled on first use."""
    global _addresses
    if _addresses is None:
        with _lock:
            if _addresses is None:
                _addresses = _build()
    return _addresses


def _build() -> tuple[int, int]:
    from pytfrt.backends.cpu import _ccompile

    name = _ccompile.module_name(SOURCE, "pytfrt_silu_")
    try:
        module = _ccompile.extension(SOURCE.replace("MODNAME", name), name)
        avx512, avx2 = module.address()
        return int(avx512 or 0), int(avx2 or 0)
    except (_ccompile.CompileError, AttributeError, TypeError, ValueError):
        return 0, 0
