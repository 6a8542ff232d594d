"""Native C for :mod:`pytfrt.backends.cpu.gemm`: the batch loop over ``dnnl_sgemm`` and the
small-batch dense layer (``dense_rows``), what ``gemm`` runs when a C compiler is available (its
Numba kernels stay as the fallback without one).

Why: a small model whose other kernels are oneDNN or C (a Transformer's attention products, a
batch-1 MLP) imported Numba only for these loops (``docs/kernels.md``, "What a model imports").
Compiled once per machine by :mod:`pytfrt.backends.cpu._ccompile` (about a second, then loaded
from the on-disk cache).  Functions (GIL released while they run; thread-safe: they write only
their outputs):

* ``batched(gemm, ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, lo, hi) -> int``: for ``i`` in
  ``lo:hi``, ``dnnl_sgemm(ta, tb, m, n, k, 1, pa[i], lda, pb[i], ldb, 0, pc[i], ldc)``, ``gemm``
  the address of ``dnnl_sgemm`` (:func:`pytfrt.backends.cpu._blas.gemm_address`), ``pa``,
  ``pb``, ``pc`` C-contiguous int64 arrays of matrix addresses (``ta``, ``tb`` the character
  codes of ``N`` / ``T``); returns the OR of the statuses (0: all succeeded).  The caller checks
  the addresses, layouts and array lengths (``gemm._batched``).
* ``dense_rows(x, w, bias, relu, y) -> bool``: ``y = relu?(x @ w + bias)`` for float32 ``x``
  ``(m, k)`` (any whole-element strides), C-contiguous ``w (k, n)``, ``bias (n,)`` (C-contiguous)
  or ``None`` and a C-contiguous writeable ``y (m, n)``; ``False`` (nothing written) for
  operands it does not take.  In float32 (no fused multiply-adds): per output element
  ``bias + sum over i in steps of 4 of (x0 w0 + x1 w1 + x2 w2 + x3 w3)``, the remainder one
  term at a time -- the order of the Numba kernel it replaces, so both give the same bits (a
  train step at batch 4 is chaotic enough for a changed order to move its 20th loss by 16%:
  ``tests/unit/frontends/test_tf_train.py``); every block of four rows of ``w`` is applied to
  all ``m`` rows while it is in L1 (``w`` is read from memory once per call; the Numba kernel
  read it once per row: 4 x 784 x 512 55 against ~75 us).  Compiled for AVX-512, AVX2 and
  without a target (the CPU picks at import).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType

from pytfrt.backends.cpu import _ccompile
from pytfrt.backends.cpu._epilogue_native import DISPATCH, HEAD, sections

ENABLED = True
"""Whether ``gemm`` uses these functions (``False``: the Numba kernels, for A/B runs and tests;
read at every ``dense_rows`` call and when the batch loop is first made)."""

_KERNELS = r"""
static void dense_@(const float *x, int64_t xs0, int64_t xs1, int64_t m, int64_t k,
                    const float *restrict w, int64_t n, const float *bias, int relu,
                    float *restrict y) {
    for (int64_t r = 0; r < m; r++) {
        float *restrict acc = y + r * n;
        if (bias) for (int64_t j = 0; j < n; j++) acc[j] = bias[j];
        else for (int64_t j = 0; j < n; j++) acc[j] = 0.0f;
    }
    const int64_t k4 = k - k % 4;
    for (int64_t i = 0; i < k4; i += 4) {
        const float *restrict w0 = w + i * n, *restrict w1 = w0 + n, *restrict w2 = w1 + n,
                    *restrict w3 = w2 + n;
        for (int64_t r = 0; r < m; r++) {
            const float *xr = x + r * xs0 + i * xs1;
            const float x0 = xr[0], x1 = xr[xs1], x2 = xr[2 * xs1], x3 = xr[3 * xs1];
            float *restrict acc = y + r * n;
            for (int64_t j = 0; j < n; j++)
                acc[j] += x0 * w0[j] + x1 * w1[j] + x2 * w2[j] + x3 * w3[j];
        }
    }
    for (int64_t i = k4; i < k; i++) {
        const float *restrict wi = w + i * n;
        for (int64_t r = 0; r < m; r++) {
            const float xi = x[r * xs0 + i * xs1];
            float *restrict acc = y + r * n;
            for (int64_t j = 0; j < n; j++) acc[j] += xi * wi[j];
        }
    }
    if (relu)
        for (int64_t r = 0; r < m; r++) {
            float *restrict acc = y + r * n;
            for (int64_t j = 0; j < n; j++) acc[j] = acc[j] > 0.0f ? acc[j] : 0.0f;
        }
}
"""

_TAIL = r"""
typedef int (*sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
                        const float *, int64_t, float, float *, int64_t);
typedef void (*dense_fn)(const float *, int64_t, int64_t, int64_t, int64_t, const float *,
                         int64_t, const float *, int, float *);
static dense_fn DENSE = dense_generic;

static PyObject *py_batched(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "batched takes 14 arguments");
        return NULL;
    }
    int64_t v[14];
    for (int i = 0; i < 14; i++) {
        if (i == 6 || i == 8 || i == 10) continue;
        v[i] = PyLong_AsLongLong(args[i]);
    }
    if (PyErr_Occurred()) return NULL;
    const int64_t *p[3];
    for (int q = 0; q < 3; q++) {
        PyObject *a = args[6 + 2 * q];
        if (!PyArray_Check(a) || PyArray_TYPE((PyArrayObject *)a) != NPY_INT64
                || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a)
                || PyArray_SIZE((PyArrayObject *)a) < v[13]) {
            PyErr_SetString(PyExc_TypeError, "batched: addresses must be C-contiguous int64 "
                            "arrays covering lo:hi");
            return NULL;
        }
        p[q] = (const int64_t *)PyArray_DATA((PyArrayObject *)a);
    }
    const sgemm_fn gemm = (sgemm_fn)(intptr_t)v[0];
    const char ta = (char)v[1], tb = (char)v[2];
    const int64_t m = v[3], n = v[4], k = v[5], lda = v[7], ldb = v[9], ldc = v[11];
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = v[12]; i < v[13]; i++)
        status |= gemm(ta, tb, m, n, k, 1.0f, (const float *)(intptr_t)p[0][i], lda,
                       (const float *)(intptr_t)p[1][i], ldb, 0.0f, (float *)(intptr_t)p[2][i],
                       ldc);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(status);
}

static int is_f32(PyObject *a, int contiguous) {
    return PyArray_Check(a) && PyArray_TYPE((PyArrayObject *)a) == NPY_FLOAT32
        && PyArray_ISNOTSWAPPED((PyArrayObject *)a)
        && (!contiguous || PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a));
}

static PyObject *py_dense_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "dense_rows takes 5 arguments");
        return NULL;
    }
    PyObject *xo = args[0], *wo = args[1], *bo = args[2], *yo = args[4];
    const int relu = PyObject_IsTrue(args[3]);
    if (relu < 0) return NULL;
    if (!is_f32(xo, 0) || !is_f32(wo, 1) || !is_f32(yo, 1) || (bo != Py_None && !is_f32(bo, 1)))
        Py_RETURN_FALSE;
    PyArrayObject *xa = (PyArrayObject *)xo, *wa = (PyArrayObject *)wo, *ya = (PyArrayObject *)yo;
    if (PyArray_NDIM(xa) != 2 || PyArray_NDIM(wa) != 2 || PyArray_NDIM(ya) != 2
            || !PyArray_ISWRITEABLE(ya))
        Py_RETURN_FALSE;
    const int64_t m = PyArray_DIM(xa, 0), k = PyArray_DIM(xa, 1), n = PyArray_DIM(wa, 1);
    if (PyArray_DIM(wa, 0) != k || PyArray_DIM(ya, 0) != m || PyArray_DIM(ya, 1) != n
            || PyArray_STRIDES(xa)[0] % 4 || PyArray_STRIDES(xa)[1] % 4)
        Py_RETURN_FALSE;
    if (bo != Py_None && (PyArray_NDIM((PyArrayObject *)bo) != 1
                          || PyArray_DIM((PyArrayObject *)bo, 0) != n))
        Py_RETURN_FALSE;
    const float *x = PyArray_DATA(xa), *w = PyArray_DATA(wa);
    const float *b = bo == Py_None ? NULL : PyArray_DATA((PyArrayObject *)bo);
    float *y = PyArray_DATA(ya);
    const int64_t xs0 = PyArray_STRIDES(xa)[0] / 4, xs1 = PyArray_STRIDES(xa)[1] / 4;
    Py_BEGIN_ALLOW_THREADS
    DENSE(x, xs0, xs1, m, k, w, n, b, relu, y);
    Py_END_ALLOW_THREADS
    Py_RETURN_TRUE;
}

/* the functions for one instruction set (0 generic, 1 AVX2, 2 AVX-512), for use() */
static void select_isa(int isa) {
    switch (isa) {
#if defined(__x86_64__)
    case 2: DENSE = dense_avx512; break;
    case 1: DENSE = dense_avx2; break;
#endif
    default: DENSE = dense_generic; break;
    }
}

#define MODULE_METHODS \
    {"batched", (PyCFunction)(void (*)(void))py_batched, METH_FASTCALL, NULL}, \
    {"dense_rows", (PyCFunction)(void (*)(void))py_dense_rows, METH_FASTCALL, NULL},
DISPATCH
"""

SOURCE = HEAD + sections(_KERNELS) + _TAIL.replace("DISPATCH", DISPATCH)
"""The C module (``dense_rows``' kernel for AVX-512, AVX2 and without a target; the batch
loop)."""

module = _ccompile.OptionalExtension(SOURCE, "pytfrt_gemm_")
"""``module()``: the compiled module, or ``None`` (no C compiler, or ``module.enabled`` false)."""


def native() -> ModuleType | None:
    """The compiled module if :data:`ENABLED` and it can be built, else ``None``."""
    return module() if ENABLED else None


def batch_loop() -> Callable[..., int] | None:
    """``run(ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, lo, hi) -> status``: the batch loop
    over ``dnnl_sgemm`` (the module's ``batched`` with the function's address bound), or
    ``None`` (no C compiler, no oneDNN, or :data:`ENABLED` false)."""
    from pytfrt.backends.cpu._blas import gemm_address

    mod = native()
    address = gemm_address() if mod is not None else 0
    return functools.partial(mod.batched, address) if mod is not None and address else None


def use(isa: str) -> bool:
    """Run ``dense_rows`` compiled for ``isa`` (``"avx512"``, ``"avx2"``, ``"generic"``) from now
    on in this process (tests and A/B runs); ``False`` if the CPU lacks it or there is no
    module."""
    mod = module()
    return bool(mod is not None and mod.use(isa))
