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
``[-0.5, 0.5]``, ``n`` put into the exponent bits; ``-x`` clamped to ``[-87, 89]``, so from
``x < -88.7`` on the exponential is ``inf`` and the result ``-0``); IEEE arithmetic (no
fast-math: NaN stays NaN, ``inf`` gives ``inf``, ``-inf`` NaN as the formula does).  Within
5e-6 relative of the float64 SiLU over float32's range, 1e-30 absolute where that underflows
(``tests/unit/test_cpu_silu.py``).  It is compiled once per machine
with the C compiler (:mod:`pytfrt.backends.cpu._ccompile`: a cached extension module) in an
AVX-512 and an AVX2 version, the CPU picking one at run time; :func:`address` is ``0`` (the
caller keeps oneDNN's post-op) without a compiler, on other CPUs, or with
:data:`ENABLED` false.  Thread-safe (pure function of its buffer).
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

#define FAST optimize("O3", "fp-contract=fast")
__attribute__((target("avx512f,avx512dq,prefer-vector-width=512"), FAST))
static int silu_avx512(float *y, int64_t n) { SILU_BODY }

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
