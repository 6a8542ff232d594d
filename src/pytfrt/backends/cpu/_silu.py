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

The function: ``int silu_f32(float *y, int64 n)`` (returns 0): ``x / (1 + exp(-x))``,
``exp(-x)`` as ``2^(n + f)`` (Cody-Waite split, a degree-6 polynomial for ``2^f`` on
``[-0.5, 0.5]``; ``-x`` at least -87, so from ``x < -88.7`` on the exponential is ``inf`` and
the result ``-0``); IEEE semantics at the edges (NaN stays NaN, ``inf`` gives ``inf``,
``-inf`` NaN as the formula does).  The AVX-512 version is written with intrinsics: ``2^n``
applied by ``scalef`` and the division replaced by ``rcp14`` and one Newton step, 18 vector
operations per 16 outputs against the compiled scalar loop's 22 with a ``vdivps``
(0.35 -> 0.29 ns per element in L1, one thread; EfficientNet-B0 at batch 1, both threads,
8.83 -> 8.49 ms median per call, 150 interleaved calls at real-time priority beside ONNX
Runtime's 8.59).  The AVX2 version is that scalar loop.  Within 5e-6 relative of the
float64 SiLU over float32's range, 1e-30 absolute where that underflows
(``tests/unit/test_cpu_silu.py``).  It is compiled once per machine with the C compiler
(:mod:`pytfrt.backends.cpu._ccompile`: a cached extension module), the CPU picking a
version at run time; :func:`address` is ``0`` (the caller keeps oneDNN's post-op) without
a compiler, on other CPUs, or with :data:`ENABLED` false.  Thread-safe (pure function of its
buffer).
"""

from __future__ import annotations

import threading

ENABLED = True
"""Whether float32 SiLU epilogues of oneDNN convolutions use :func:`address`'s function
(``False``: oneDNN's ``eltwise_swish`` post-op)."""

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

#define SILU_BODY                                                              \
    for (int64_t i = 0; i < n; i++) {                                          \
        float v = y[i];                                                        \
        float t = -v;                                                          \
        t = t > 89.0f ? 89.0f : t;                                             \
        t = t < -87.0f ? -87.0f : t;                                           \
        t = t * 1.44269504088896341f;                                          \
        float k = __builtin_rintf(t);                                          \
        float f = t - k;                                                       \
        float p = 1.535336188319500e-4f;                                       \
        p = p * f + 1.339887440266574e-3f;                                     \
        p = p * f + 9.618437357674640e-3f;                                     \
        p = p * f + 5.550332471162809e-2f;                                     \
        p = p * f + 2.402264791363012e-1f;                                     \
        p = p * f + 6.931472028550421e-1f;                                     \
        p = p * f + 1.0f;                                                      \
        int32_t e = ((int32_t)k + 127) << 23;                                  \
        float s;                                                               \
        memcpy(&s, &e, 4);                                                     \
        y[i] = v / (1.0f + p * s);                                             \
    }                                                                          \
    return 0;

__attribute__((target("avx512f,avx512dq"), optimize("O3")))
static int silu_avx512(float *y, int64_t n) {
    /* t = -x log2(e), at least -87 log2(e) (exp(-x) stays normal); no upper bound: from
       x < -88.7 on, scalef makes exp(-x) inf and the result -0, as in SILU_BODY.  NaN stays
       NaN (max returns its 2nd operand), -inf gives NaN (k = inf, f = NaN), inf gives inf. */
    const __m512 lo = _mm512_set1_ps(-87.0f * 1.44269504088896341f);
    const __m512 nlog2e = _mm512_set1_ps(-1.44269504088896341f), one = _mm512_set1_ps(1.0f);
    const __m512 inf = _mm512_set1_ps(__builtin_inff());
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, y + i);
        __m512 t = _mm512_max_ps(lo, _mm512_mul_ps(v, nlog2e));
        __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 f = _mm512_sub_ps(t, k);
        __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
        p = _mm512_fmadd_ps(p, f, one);
        __m512 d = _mm512_add_ps(one, _mm512_scalef_ps(p, k));   /* 1 + exp(-x), inf beyond */
        __m512 r = _mm512_rcp14_ps(d);                           /* 1/d within 2^-14 */
        __m512 e = _mm512_fnmadd_ps(d, r, one);                  /* one Newton step */
        r = _mm512_mask_fmadd_ps(r, _mm512_cmp_ps_mask(d, inf, _CMP_NEQ_UQ), e, r); /* d=inf: 0 */
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, r));
    }
    return 0;
}

#define FAST optimize("O3", "fp-contract=fast")
__attribute__((target("avx2,fma"), FAST))
static int silu_avx2(float *y, int64_t n) { SILU_BODY }

static PyObject *address(PyObject *self, PyObject *args) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        return PyLong_FromVoidPtr((void *)silu_avx512);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return PyLong_FromVoidPtr((void *)silu_avx2);
    return PyLong_FromLong(0);
}

static PyMethodDef methods[] = {{"address", address, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { return PyModule_Create(&module); }
"""

_lock = threading.Lock()
_address: int | None = None


def address() -> int:
    """The address of ``silu_f32`` for this CPU (compiled on first use), or ``0``."""
    global _address
    if _address is not None:
        return _address if ENABLED else 0
    with _lock:
        if _address is None:
            _address = _build()
    return _address if ENABLED else 0


def _build() -> int:
    from pytfrt.backends.cpu import _ccompile

    name = _ccompile.module_name(SOURCE, "pytfrt_silu_")
    try:
        module = _ccompile.extension(SOURCE.replace("MODNAME", name), name)
        return int(module.address())
    except (_ccompile.CompileError, AttributeError, TypeError, ValueError):
        return 0
