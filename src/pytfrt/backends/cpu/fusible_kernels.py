"""C implementations of host tensor kernels, for fused segments of whole-function code.

Whole-function execution (:mod:`pytfrt.executor.whole_function`, docs/executor.md) may run a
run of consecutive kernels as ONE native call (:mod:`pytfrt.executor.fused_segments`).  A
kernel takes part when it has an entry in :data:`FUSIBLE` here: its operand roles, what its
result is, a *check* (a C expression over its operands that is true only if the Python kernel
would succeed, so that a fused segment can validate every kernel before it mutates anything)
and a *call* (the C statement computing it, with the functions of :data:`PRELUDE`).
:func:`segment_source` writes a segment as a C extension module with one function ``_seg``;
:func:`compile_segment` compiles it once with the machine's C compiler into the on-disk cache
(:mod:`pytfrt.backends.cpu._ccompile`), so a process that runs a fused segment loads a shared
object and imports neither Numba nor SciPy.

The Python kernels (``backends/cpu/kernels.py``, ``playground/mlp.py``) keep their own NumPy
code; the C functions here repeat their formulas step by step in float32 with the same
operation order and roundings (compiled without contraction or fast-math), so a fused kernel
gives the same bits as its Python kernel.  Two steps call NumPy back, through the functions
:func:`matmul_into`, :func:`matmul_new` and :func:`exp_inplace` below: matrix products (the
same BLAS call NumPy's ``@`` makes) and ``exp`` (NumPy's own SIMD approximation, which is not
correctly rounded); being Python functions of this package, any warning they raise is filtered
as the Python kernels' are (``pytfrt.backends.cpu``'s ``RuntimeWarning`` filter).

Operand roles: ``t`` a float32 DenseHostTensor, ``s`` a float32 scalar, ``i`` a Python int
(or bool), ``h`` a shape known when the code is generated (``ts.build_shape``), ``-`` any
value (a chain) that is only waited for.  Results: ``chain``, ``f32`` (a Python float),
``int`` (a Python int; ``int int`` for two), ``bool``, ``new`` (a new float32 tensor whose shape
is known when the code is generated) or ``shape``.

Thread-safety: a segment runs holding the GIL (it calls NumPy back); the functions are pure
apart from writing their output operands.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytfrt.backends.cpu import _ccompile
from pytfrt.host import numpy_free

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Fusible:
    """How a kernel takes part in a fused segment.

    Attributes:
        roles: one character per operand (see the module docstring); operands beyond it are
            ``-``.
        result: ``chain``, ``f32``, ``int``, ``int int``, ``bool``, ``new`` or ``shape``.
        check: a format string over the operand names (``{0}``, ``{1}``...) giving a C
            boolean expression, or ``""`` (always succeeds once the guards hold).
        call: a format string of the C statement computing the kernel; ``{out}`` is the
            result's name (``new``/``f32``/``int``/``bool``), ``{outs[i]}`` one of several.
        calls_back: it calls NumPy from the compiled code, which may raise only if
            :func:`numpy_errors_quiet` is false (then the segment runs unfused).
        distinct: operand pairs that must be different values (an out-of-place kernel whose
            NumPy code copies through a temporary when they are the same).
    """

    roles: str
    result: str
    check: str = ""
    call: str = ""
    distinct: tuple[tuple[int, int], ...] = ()
    calls_back: bool = False


# -- the NumPy calls back ------------------------------------------------------------------------


def matmul_into(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """``c = a @ b`` (``ops.matmul``'s product when ``beta`` is 0)."""
    import numpy as np

    np.matmul(a, b, out=c)


def matmul_new(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` as a new array (``ops.matmul``'s product when ``beta`` is not 0)."""
    return a @ b  # type: ignore[no-any-return]


def exp_inplace(a: np.ndarray) -> None:
    """``a = exp(a)`` by NumPy (its float32 ``exp`` is not correctly rounded, so a fused
    kernel calls it back rather than differ in the last bit)."""
    import numpy as np

    np.exp(a, out=a)


def _errstate_getter() -> Any:
    try:
        from numpy._core import _ufunc_config

        return _ufunc_config._extobj_contextvar.get  # type: ignore[attr-defined]
    except (ImportError, AttributeError):  # another NumPy: check every time
        return object


_errstate: Any = None  # _errstate_getter(), on first use
_quiet_errstate: list[Any] = []


def numpy_errors_quiet() -> bool:
    """Whether NumPy's floating-point error handling (``np.seterr``/``np.errstate``) neither
    raises nor calls back, so :func:`exp_inplace` cannot raise.  Fast when the state is
    one seen before (a context variable's identity).  Always true in a NumPy-free process,
    whose segments call nothing back."""
    global _errstate
    if numpy_free.ENABLED:
        return True
    if _errstate is None:
        _errstate = _errstate_getter()
    state = _errstate()
    if _quiet_errstate and state is _quiet_errstate[0]:
        return True
    import numpy as np

    if any(v in ("raise", "call") for v in np.geterr().values()):
        return False
    _quiet_errstate[:] = [state]
    return True


# -- the C kernels --------------------------------------------------------------------------------

_HEAD_NUMPY = r"""
#define PY_SSIZE_T_CLEAN
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>

typedef PyArrayObject *T;
static PyObject *cb_matmul_into, *cb_matmul_new, *cb_exp;

/* An outside operand the segment may read and write: a C-contiguous, aligned, writeable,
   native-order float32 ndarray. */
static inline int fk_usable(PyObject *o) {
    if (!PyArray_Check(o)) return 0;
    T a = (T)o;
    return PyArray_TYPE(a) == NPY_FLOAT32 && PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a)
        && PyArray_ISWRITEABLE(a) && PyArray_ISNOTSWAPPED(a);
}
static inline float *fk_f(T a) { return (float *)PyArray_DATA(a); }
static inline npy_intp fk_size(T a) { return PyArray_SIZE(a); }
static inline int fk_ndim(T a) { return PyArray_NDIM(a); }
/* shape[i], or -1 if the rank is smaller */
static inline npy_intp fk_dim(T a, int i) { return i < PyArray_NDIM(a) ? PyArray_DIM(a, i) : -1; }
static inline int fk_overlap(T a, T b) {
    char *sa = PyArray_BYTES(a), *sb = PyArray_BYTES(b);
    return sa < sb + PyArray_NBYTES(b) && sb < sa + PyArray_NBYTES(a);
}

"""

_CHECKS = r"""/* -- shape checks -- */
static inline int fk_same_shape(T a, T b) {
    int n = fk_ndim(a);
    if (n != fk_ndim(b)) return 0;
    for (int i = 0; i < n; i++) if (fk_dim(a, i) != fk_dim(b, i)) return 0;
    return 1;
}
/* eigen.matmul's shape rule: [m, k] x [k, n] -> [m, n] */
static inline int fk_matmul_ok(T a, T b, T c) {
    return fk_ndim(a) == 2 && fk_ndim(b) == 2 && fk_ndim(c) == 2 && fk_dim(a, 1) == fk_dim(b, 0)
        && fk_dim(c, 0) == fk_dim(a, 0) && fk_dim(c, 1) == fk_dim(b, 1);
}
/* [m, n] -> [n, m] */
static inline int fk_transpose_ok(T a, T o) {
    return fk_ndim(a) == 2 && fk_ndim(o) == 2 && fk_dim(o, 0) == fk_dim(a, 1)
        && fk_dim(o, 1) == fk_dim(a, 0);
}
/* same first dimension and element count (both ranked) */
static inline int fk_flatten_ok(T a, T o) {
    return fk_ndim(a) >= 1 && fk_ndim(o) >= 1 && fk_dim(a, 0) == fk_dim(o, 0)
        && fk_size(a) == fk_size(o);
}
/* [n, m] -> [m] with at least one row */
static inline int fk_mean_axis_zero_ok(T a, T o) {
    return fk_ndim(a) == 2 && fk_ndim(o) == 1 && fk_dim(o, 0) == fk_dim(a, 1) && fk_dim(a, 0) > 0;
}
/* lr has one element (rank 1) and g, out the same shape */
static inline int fk_gradient_descent_ok(T g, T lr, T o) {
    return fk_ndim(lr) == 1 && fk_size(lr) == 1 && fk_same_shape(g, o);
}
/* a rank-1 bias repeated along a last axis of `last` elements */
static inline int fk_broadcast_ok(T b, npy_intp last) {
    return fk_ndim(b) == 1 && fk_size(b) == last && last > 0;
}
/* z = beta z + alpha q, element-wise in float32 (the scalings skipped when they are 1) */
static void fk_combine(float *z, const float *q, npy_intp n, float al, float be) {
    for (npy_intp i = 0; i < n; i++) {
        float v = q[i];
        if (al != 1) v = v * al;
        float w = z[i];
        if (be != 1) w = w * be;
        z[i] = w + v;
    }
}
static inline int fk_is_i32(long long a) { return -0x80000000LL <= a && a <= 0x7FFFFFFFLL; }

"""

_NUMPY_MATMUL = r"""/* -- kernels (0: done, -1: a NumPy call raised) -- */

/* c = alpha a b + beta c in float32, as ops.matmul (the product first, by NumPy) */
static int fk_matmul(float al, T a, T b, float be, T c) {
    float *z = fk_f(c);
    npy_intp n = fk_size(c);
    if (be == 0) {
        PyObject *r = PyObject_CallFunctionObjArgs(cb_matmul_into, a, b, c, NULL);
        if (r == NULL) return -1;
        Py_DECREF(r);
        if (al != 1) for (npy_intp i = 0; i < n; i++) z[i] = z[i] * al;
        return 0;
    }
    PyObject *p = PyObject_CallFunctionObjArgs(cb_matmul_new, a, b, NULL);
    if (p == NULL) return -1;
    if (!fk_usable(p) || fk_size((T)p) != n) {
        Py_DECREF(p);
        PyErr_SetString(PyExc_RuntimeError, "fused matmul: unexpected product");
        return -1;
    }
    fk_combine(z, fk_f((T)p), n, al, be);
    Py_DECREF(p);
    return 0;
}
"""

_BROADCAST = r"""/* every row of out set to bias */
static void fk_broadcast(T bias, T out) {
    float *b = fk_f(bias), *o = fk_f(out);
    npy_intp m = fk_size(bias), rows = fk_size(out) / m;
    for (npy_intp i = 0; i < rows; i++)
        for (npy_intp j = 0; j < m; j++) o[i * m + j] = b[j];
}
"""

_NUMPY_SIGMOID = "/* a = 1 / (1 + exp(-a)) step by step in float32 (ops.sigmoid_inplace); " \
    + r"""exp is NumPy's */
static int fk_sigmoid_inplace(T a) {
    float *x = fk_f(a);
    npy_intp n = fk_size(a);
    for (npy_intp i = 0; i < n; i++) x[i] = -x[i];
    PyObject *r = PyObject_CallFunctionObjArgs(cb_exp, a, NULL);
    if (r == NULL) return -1;
    Py_DECREF(r);
    for (npy_intp i = 0; i < n; i++) x[i] = 1.0f / (x[i] + 1.0f);
    return 0;
}
"""

_KERNELS = r"""/* g = a - a * a */
static void fk_sigmoid_grad_inplace(T a, T g) {
    float *x = fk_f(a), *y = fk_f(g);
    for (npy_intp i = 0, n = fk_size(a); i < n; i++) { y[i] = x[i] * x[i]; y[i] = x[i] - y[i]; }
}
/* b = a * b */
static void fk_multiply_inplace(T a, T b) {
    float *x = fk_f(a), *y = fk_f(b);
    for (npy_intp i = 0, n = fk_size(a); i < n; i++) y[i] = x[i] * y[i];
}
/* out -= a */
static void fk_subtract_inplace(T a, T out) {
    float *x = fk_f(a), *y = fk_f(out);
    for (npy_intp i = 0, n = fk_size(a); i < n; i++) y[i] = y[i] - x[i];
}
/* mean((p - t)**2): the float32 sum in order, divided in float64, rounded to float32 */
static double fk_mse_loss(T p, T t) {
    float *x = fk_f(p), *y = fk_f(t), s = 0.0f;
    npy_intp n = fk_size(p);
    for (npy_intp i = 0; i < n; i++) { float d = x[i] - y[i]; d = d * d; s = s + d; }
    return (double)(float)((double)s / (double)n);
}
/* out's elements = a's, row-major */
static void fk_copy_flat(T a, T out) {
    float *x = fk_f(a), *y = fk_f(out);
    for (npy_intp i = 0, n = fk_size(a); i < n; i++) y[i] = x[i];
}
/* out = a.T (rank 2) */
static void fk_transpose(T a, T out) {
    float *x = fk_f(a), *y = fk_f(out);
    npy_intp r = fk_dim(a, 0), c = fk_dim(a, 1);
    for (npy_intp i = 0; i < r; i++)
        for (npy_intp j = 0; j < c; j++) y[j * r + i] = x[i * c + j];
}
/* out = mean(a, axis=0): float32 row sums in order from +0 (as NumPy's sum: -0 rows give +0),
   divided by the row count */
static void fk_mean_axis_zero(T a, T out) {
    float *x = fk_f(a), *y = fk_f(out);
    npy_intp rows = fk_dim(a, 0), cols = fk_dim(a, 1);
    for (npy_intp j = 0; j < cols; j++) y[j] = 0.0f;
    for (npy_intp i = 0; i < rows; i++)
        for (npy_intp j = 0; j < cols; j++) y[j] = y[j] + x[i * cols + j];
    float r = (float)rows;
    for (npy_intp j = 0; j < cols; j++) y[j] = y[j] / r;
}
/* out -= g * lr[0] */
static void fk_gradient_descent(T g, T lr, T out) {
    float *x = fk_f(g), *y = fk_f(out), r = fk_f(lr)[0];
    for (npy_intp i = 0, n = fk_size(g); i < n; i++) { float d = x[i] * r; y[i] = y[i] - d; }
}
/* wrapping 32-bit addition (tfrt.add.i32) */
static inline long long fk_add_i32(long long a, long long b) {
    return ((a + b + 0x80000000LL) & 0xFFFFFFFFLL) - 0x80000000LL;
}
/* truncating quotient (wrapped to 32 bits) and remainder (tfrt.div.i32; b != 0) */
static inline void fk_div_i32(long long a, long long b, long long *q, long long *m) {
    long long t = (a < 0 ? -a : a) / (b < 0 ? -b : b);
    if ((a < 0) != (b < 0)) t = -t;
    *q = ((t + 0x80000000LL) & 0xFFFFFFFFLL) - 0x80000000LL;
    *m = a - b * t;
}
"""

PRELUDE = _HEAD_NUMPY + _CHECKS + _NUMPY_MATMUL + _BROADCAST + _NUMPY_SIGMOID + _KERNELS

_HEAD_BUFFER = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef Py_ssize_t npy_intp;
#define FK_MAX_RANK 8
/* An operand: the float32 elements of a buffer exporter (a NumPy-free tensor's memoryview, or
   an ndarray) with its shape. */
typedef struct { float *data; npy_intp size, nbytes; int ndim; npy_intp dims[FK_MAX_RANK]; } fk_t;
typedef fk_t *T;

/* Fill *t from the buffer of o (*got set once the buffer is held: release it after): 1 if it
   is a writeable, C-contiguous, aligned, native float32 buffer of rank <= FK_MAX_RANK. */
static int fk_get(PyObject *o, Py_buffer *v, int *got, T t) {
    if (PyObject_GetBuffer(o, v, PyBUF_RECORDS) < 0) { PyErr_Clear(); return 0; }
    *got = 1;
    const char *f = v->format;
    if (f != NULL && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f++;
    if (f == NULL || strcmp(f, "f") != 0 || v->itemsize != 4 || v->ndim > FK_MAX_RANK
        || !PyBuffer_IsContiguous(v, 'C') || ((uintptr_t)v->buf & 3) != 0) return 0;
    t->data = (float *)v->buf;
    t->nbytes = v->len;
    t->size = v->len / 4;
    t->ndim = v->ndim;
    for (int i = 0; i < v->ndim; i++) t->dims[i] = v->shape[i];
    return 1;
}
/* a new zero-filled float32 tensor of the given shape: a bytearray (NULL: no memory) */
static PyObject *fk_new(int ndim, const npy_intp *dims, T t) {
    npy_intp n = 1;
    for (int i = 0; i < ndim; i++) { n *= dims[i]; t->dims[i] = dims[i]; }
    PyObject *b = PyByteArray_FromStringAndSize(NULL, n * 4);
    if (b == NULL) return NULL;
    memset(PyByteArray_AS_STRING(b), 0, (size_t)(n * 4));
    t->data = (float *)PyByteArray_AS_STRING(b);
    t->size = n;
    t->nbytes = n * 4;
    t->ndim = ndim;
    return b;
}
static inline float *fk_f(T a) { return a->data; }
static inline npy_intp fk_size(T a) { return a->size; }
static inline int fk_ndim(T a) { return a->ndim; }
/* shape[i], or -1 if the rank is smaller */
static inline npy_intp fk_dim(T a, int i) { return i < a->ndim ? a->dims[i] : -1; }
static inline int fk_overlap(T a, T b) {
    char *sa = (char *)a->data, *sb = (char *)b->data;
    return sa < sb + b->nbytes && sb < sa + a->nbytes;
}

"""

_BUFFER_MATMUL = r"""
/* c = alpha a b + beta c in float32: the product first (into a temporary: c may be a or b),
   each sum in order, a float32 rounding after every multiply and add */
static int fk_matmul(float al, T a, T b, float be, T c) {
    float *x = fk_f(a), *y = fk_f(b), *z = fk_f(c);
    npy_intp m = fk_dim(a, 0), k = fk_dim(a, 1), n = fk_dim(b, 1);
    float *p = (float *)PyMem_Malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof(float));
    if (p == NULL) { PyErr_NoMemory(); return -1; }
    for (npy_intp i = 0; i < m; i++)
        for (npy_intp j = 0; j < n; j++) {
            float s = 0.0f;
            for (npy_intp t = 0; t < k; t++) { float q = x[i * k + t] * y[t * n + j]; s = s + q; }
            p[i * n + j] = s;
        }
    if (be == 0)
        for (npy_intp i = 0, mn = m * n; i < mn; i++) z[i] = al != 1 ? p[i] * al : p[i];
    else
        fk_combine(z, p, m * n, al, be);
    PyMem_Free(p);
    return 0;
}
"""

_BUFFER_SIGMOID = r"""
/* a = 1 / (1 + exp(-a)) step by step in float32; exp in double, rounded to float32 */
static int fk_sigmoid_inplace(T a) {
    float *x = fk_f(a);
    for (npy_intp i = 0, n = fk_size(a); i < n; i++) {
        float e = (float)exp((double)-x[i]);
        x[i] = 1.0f / (e + 1.0f);
    }
    return 0;
}
"""

BUFFER_PRELUDE = _HEAD_BUFFER + _CHECKS + _BUFFER_MATMUL + _BROADCAST + _BUFFER_SIGMOID + _KERNELS
"""The NumPy-free flavour of :data:`PRELUDE` (:mod:`pytfrt.host.numpy_free`): operands are
buffer exporters, new tensors are bytearrays, and ``exp`` and the matrix product are computed
in C (so its bits may differ from NumPy's in the last place: see docs/host.md)."""
"""The C helpers and kernels every segment module starts with."""

_RUN = "if ({call} < 0) goto fail;"

FUSIBLE: dict[str, Fusible] = {
    "tfrt.new.chain": Fusible("", "chain"),
    "tfrt.merge.chains": Fusible("", "chain"),
    "ts.build_shape": Fusible("", "shape"),
    "eigen.matmul.f32": Fusible(
        "sttst", "chain", "fk_matmul_ok({1}, {2}, {4})",
        _RUN.format(call="fk_matmul({0}, {1}, {2}, {3}, {4})")),
    "tfrt_test.broadcast.f32.2": Fusible("th", "new", "", "fk_broadcast({0}, {out});"),
    "sigmoid_inplace.f32": Fusible("t", "chain", "", _RUN.format(call="fk_sigmoid_inplace({0})"),
                                   calls_back=True),
    "sigmoid_grad_inplace.f32": Fusible(
        "tt", "chain", "fk_same_shape({0}, {1})", "fk_sigmoid_grad_inplace({0}, {1});"),
    "mlp.multiply_inplace.f32": Fusible(
        "tt", "chain", "fk_same_shape({0}, {1})", "fk_multiply_inplace({0}, {1});"),
    "mlp.mse_loss.f32": Fusible(
        "tt", "f32", "fk_same_shape({0}, {1}) && fk_size({0}) > 0",
        "{out} = fk_mse_loss({0}, {1});"),
    "tfrt_test.subtract_inplace.f32": Fusible(
        "tt", "chain", "fk_same_shape({0}, {1})", "fk_subtract_inplace({0}, {1});"),
    "tfrt_test.flatten.f32": Fusible(
        "tt", "chain", "fk_flatten_ok({0}, {1})", "fk_copy_flat({0}, {1});",
        distinct=((0, 1),)),
    "tfrt_test.tensor_transpose.f32": Fusible(
        "tt", "chain", "fk_transpose_ok({0}, {1})", "fk_transpose({0}, {1});",
        distinct=((0, 1),)),
    "tfrt_test.mean_axis_zero.f32": Fusible(
        "tt", "chain", "fk_mean_axis_zero_ok({0}, {1})", "fk_mean_axis_zero({0}, {1});",
        distinct=((0, 1),)),
    "tfrt.add.i32": Fusible(
        "ii", "int", "fk_is_i32({0}) && fk_is_i32({1})", "{out} = fk_add_i32({0}, {1});"),
    "tfrt.div.i32": Fusible(
        "ii", "int int", "fk_is_i32({0}) && fk_is_i32({1}) && {1} != 0",
        "fk_div_i32({0}, {1}, &{outs[0]}, &{outs[1]});"),
    "tfrt.equal.i32": Fusible(
        "ii", "bool", "fk_is_i32({0}) && fk_is_i32({1})", "{out} = {0} == {1};"),
    "tfrt_test.gradient_descent.f32": Fusible(
        "ttt", "chain", "fk_gradient_descent_ok({0}, {1}, {2})",
        "fk_gradient_descent({0}, {1}, {2});"),
}
"""Kernel name -> how it is fused (``tfrt_dht.create_uninitialized_tensor.f32.R`` and the
folded ``tfrt.constant.*`` kernels are handled by the segment builder itself)."""


def broadcast_check(bias: str, last: int) -> str:
    """The check of a ``new`` broadcast result: ``bias`` repeated along ``last`` elements."""
    return f"fk_broadcast_ok({bias}, {last})"


_FALSE = 'Py_BuildValue("(O)", Py_False)'
_C_TYPES = {"f32": "double", "int": "long long", "bool": "int"}
_C_BOX = {"f32": "PyFloat_FromDouble", "int": "PyLong_FromLongLong", "bool": "PyBool_FromLong"}


def segment_source(tensors: Sequence[str], scalars: Sequence[str], ints: Sequence[str],
                   allocs: Sequence[tuple[str, tuple[int, ...], bool]],
                   computed: Sequence[tuple[str, str]], checks: Sequence[str],
                   calls: Sequence[str], outs: Sequence[str], name: str = "@NAME@",
                   buffer: bool | None = None) -> str:
    """The C source of a segment module ``name`` whose function ``_seg(tensors..., scalars...,
    ints...)`` returns ``(True, *outs)``, or ``(False,)`` when an operand is not a usable
    float32 array, an integer does not fit, or a check fails -- then nothing was mutated.

    ``allocs``: new tensors ``(name, dims, zeroed)``; ``computed``: scalar results ``(name,
    kind)`` with kind ``f32``/``int``/``bool``; ``checks``: C conditions; ``calls``: C
    statements; ``outs``: names of new tensors and computed scalars to return, in order.
    ``buffer``: the NumPy-free flavour (:data:`BUFFER_PRELUDE`: tensors are passed as buffer
    exporters, new tensors are returned as bytearrays); default: whether the process is
    NumPy-free (:mod:`pytfrt.host.numpy_free`)."""
    buffer = numpy_free.ENABLED if buffer is None else buffer
    lines = [BUFFER_PRELUDE if buffer else PRELUDE]
    lines += _function_lines("seg", tensors, scalars, ints, allocs, computed, checks, calls,
                             outs, buffer)
    lines.append(_module_source(name, [("_seg", "seg", "one fused segment")], buffer))
    return "\n".join(lines) + "\n"


def _function_lines(fname: str, tensors: Sequence[str], scalars: Sequence[str],
                    ints: Sequence[str], allocs: Sequence[tuple[str, tuple[int, ...], bool]],
                    computed: Sequence[tuple[str, str]], checks: Sequence[str],
                    calls: Sequence[str], outs: Sequence[str], buffer: bool) -> list[str]:
    """The C function ``fname`` of :func:`segment_source`."""
    kinds = dict(computed)
    new = [a[0] for a in allocs]
    lines = [f"static PyObject *{fname}(PyObject *self, PyObject *const *args, "
             "Py_ssize_t nargs) {",
             "    PyObject *result = NULL;",
             "    int ok = 1;"]
    if buffer:
        for x in tensors:
            lines.append(f"    Py_buffer b_{x}; int g_{x} = 0; fk_t s_{x}; T {x} = &s_{x};")
        lines += [f"    PyObject *o_{n} = NULL; fk_t s_{n}; T {n} = &s_{n};" for n in new]
    else:
        lines += [f"    T {n} = NULL;" for n in new]
    lines += [f"    {_C_TYPES[k]} {n} = 0;" for n, k in computed]
    nargs = len(tensors) + len(scalars) + len(ints)
    lines += [f"    if (nargs != {nargs}) {{",
              '        PyErr_SetString(PyExc_TypeError, "fused segment: wrong argument count");',
              "        return NULL;", "    }"]
    for i, x in enumerate(tensors):
        if buffer:
            lines.append(f"    if (ok && !fk_get(args[{i}], &b_{x}, &g_{x}, {x})) ok = 0;")
        else:
            lines.append(f"    if (!fk_usable(args[{i}])) return {_FALSE};")
            lines.append(f"    T {x} = (T)args[{i}];")
    if buffer and tensors:
        lines.append(f"    if (!ok) {{ result = {_FALSE}; goto fail; }}")
    for i, s in enumerate(scalars, len(tensors)):
        lines.append(f"    float {s} = (float)PyFloat_AsDouble(args[{i}]);")
        lines.append(f"    if ({s} == -1.0f && PyErr_Occurred()) "
                     + ("goto fail;" if buffer else "return NULL;"))
    for i, v in enumerate(ints, len(tensors) + len(scalars)):
        lines.append(f"    long long {v} = PyLong_AsLongLong(args[{i}]);")
        lines.append(f"    if ({v} == -1 && PyErr_Occurred()) {{ PyErr_Clear(); ok = 0; }}")
    for n, dims, zeroed in allocs:
        lines.append(f"    npy_intp d_{n}[] = {{{', '.join(map(str, dims))}}};")
        if buffer:
            lines.append(f"    o_{n} = fk_new({len(dims)}, d_{n}, {n});")
            lines.append(f"    if (o_{n} == NULL) goto fail;")
        else:
            make = "PyArray_ZEROS" if zeroed else "PyArray_EMPTY"
            lines.append(f"    {n} = (T){make}({len(dims)}, d_{n}, NPY_FLOAT32, 0);")
            lines.append(f"    if ({n} == NULL) goto fail;")
    conds = [f"!fk_overlap({a}, {b})" for i, a in enumerate(tensors) for b in tensors[i + 1:]]
    for c in [*conds, *checks]:
        lines.append(f"    if (ok && !({c})) ok = 0;")
    lines.append(f"    if (!ok) {{ result = {_FALSE}; goto fail; }}")
    lines += [f"    {c}" for c in calls]
    lines.append(f"    result = PyTuple_New({len(outs) + 1});")
    lines.append("    if (result == NULL) goto fail;")
    lines.append("    Py_INCREF(Py_True); PyTuple_SET_ITEM(result, 0, Py_True);")
    for j, o in enumerate(outs, 1):
        if o in kinds:
            lines.append(f"    {{ PyObject *v = {_C_BOX[kinds[o]]}({o});")
            lines.append("      if (v == NULL) { Py_CLEAR(result); goto fail; }")
            lines.append(f"      PyTuple_SET_ITEM(result, {j}, v); }}")
        elif buffer:
            lines.append(f"    Py_INCREF(o_{o}); PyTuple_SET_ITEM(result, {j}, o_{o});")
        else:
            lines.append(f"    Py_INCREF({o}); PyTuple_SET_ITEM(result, {j}, (PyObject *){o});")
    lines.append("fail:")
    if buffer:
        lines += [f"    Py_XDECREF(o_{n});" for n in new]
        lines += [f"    if (g_{x}) PyBuffer_Release(&b_{x});" for x in tensors]
    else:
        lines += [f"    Py_XDECREF({n});" for n in new]
    lines.append("    return result;")
    lines.append("}")
    return lines


def _module_source(name: str, functions: Sequence[tuple[str, str, str]], buffer: bool) -> str:
    """The module definition of ``name`` with ``functions`` ``(python name, C name, doc)``."""
    table = "".join(
        f'    {{"{py}", (PyCFunction)(void (*)(void)){c}, METH_FASTCALL, "{doc}"}},\n'
        for py, c, doc in functions)
    return (_BUFFER_MODULE if buffer else _MODULE).replace("@NAME@", name).replace(
        "@METHODS@", table)


_MODULE = r"""
static PyMethodDef methods[] = {
@METHODS@    {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "@NAME@", NULL, -1, methods};
PyMODINIT_FUNC PyInit_@NAME@(void) {
    import_array();
    PyObject *k = PyImport_ImportModule("pytfrt.backends.cpu.fusible_kernels");
    if (k == NULL) return NULL;
    cb_matmul_into = PyObject_GetAttrString(k, "matmul_into");
    cb_matmul_new = PyObject_GetAttrString(k, "matmul_new");
    cb_exp = PyObject_GetAttrString(k, "exp_inplace");
    Py_DECREF(k);
    if (cb_matmul_into == NULL || cb_matmul_new == NULL || cb_exp == NULL) return NULL;
    return PyModule_Create(&module_def);
}
"""

_BUFFER_MODULE = r"""
static PyMethodDef methods[] = {
@METHODS@    {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "@NAME@", NULL, -1, methods};
PyMODINIT_FUNC PyInit_@NAME@(void) { return PyModule_Create(&module_def); }
"""


def tensor_types() -> tuple[type, Any]:
    """The tensor class and dtype object a fused segment's outside tensors must have."""
    from pytfrt.tensor.dense_host_tensor import DenseHostTensor
    from pytfrt.tensor.dtype import F32

    return DenseHostTensor, F32


def buffer_flavour() -> bool:
    """Whether segments are generated in the NumPy-free flavour (:data:`BUFFER_PRELUDE`):
    outside tensors are passed as their ``raw`` memoryview, new ones leave as bytearrays."""
    return numpy_free.ENABLED


def scalar_type() -> type:
    """The class of the f32 scalars a segment takes: ``numpy.float32``, or ``float`` in a
    NumPy-free process."""
    if numpy_free.ENABLED:
        return float
    import numpy as np

    return np.float32


def new_tensor_wrapper() -> Any:
    """How a segment's new tensors leave it: ``wrap_result(exec_ctx, dtype, array)``, a
    DenseHostTensor accounted with the host allocator as the kernels account theirs (in a
    NumPy-free process ``wrap_raw(exec_ctx or None, dtype, bytearray, dims)``)."""
    from pytfrt.tensor.dense_host_tensor import wrap_raw, wrap_result

    return wrap_raw if numpy_free.ENABLED else wrap_result


MAX_NEW_ELEMENTS = 1 << 16
"""A fused segment makes new tensors of at most this many elements (bigger ones: unfused)."""


def new_tensor_dims(kernel_name: str, shape: Any) -> tuple[int, ...] | None:
    """The dimensions ``tfrt_dht.create_uninitialized_tensor.f32.R`` makes from its ``shape``
    attribute, or ``None`` if it would fail (or the tensor is big): decided without allocating
    anything."""
    from pytfrt.tensor.kernels.util import dims_of

    try:
        dims = dims_of(shape)
        rank = int(kernel_name.rsplit(".", 1)[1])
    except Exception:  # noqa: BLE001 - the kernel reports it at run time
        return None
    n = math.prod(dims)
    if len(dims) > rank or any(d < 0 for d in dims) or n > MAX_NEW_ELEMENTS or (
            n == 0 and numpy_free.ENABLED):  # an empty tensor has no NumPy-free storage
        return None
    return dims


def compile_segment(source: str, name: str = "_seg") -> Any:
    """The function ``name`` of the segment module whose C source is ``source`` (written by
    :func:`segment_source` with the module-name placeholder), compiled once into the on-disk
    cache (:func:`pytfrt.backends.cpu._ccompile.extension`).

    Raises:
        pytfrt.backends.cpu._ccompile.CompileError: no C compiler, or it failed.
    """
    uses_numpy = "numpy/arrayobject.h" in source
    module_name = _ccompile.module_name(source, "_pytfrt_seg_", uses_numpy)
    module = _ccompile.extension(source.replace("@NAME@", module_name), module_name, uses_numpy)
    return getattr(module, name)


def compile_after() -> int:
    """Runs of a segment that stay unfused before it compiles."""
    return _ccompile.COMPILE_AFTER


def buffer_kernel_functions() -> dict[str, tuple[str, Any]]:
    """The kernels of :data:`FUSIBLE` that take tensors and f32 scalars and return a chain or
    an f32, each as a function of ONE C module in the NumPy-free flavour, for the unfused
    kernels of a NumPy-free process (:mod:`pytfrt.playground.buffer_kernels`): they compute
    with the very code fused segments run, so the fused and unfused steps agree bit for bit.

    Returns ``{kernel name: (roles, function)}``; a function takes the ``raw`` memoryviews of
    the ``t`` operands, then the ``s`` operands, and returns ``(True,)`` (``(True, f32)``), or
    ``(False,)`` if a check failed (nothing was written; the caller runs the NumPy kernel,
    which reports the error).  Compiled once per machine into the kernel cache.

    Raises:
        pytfrt.backends.cpu._ccompile.CompileError: no C compiler, or it failed.
    """
    lines = [BUFFER_PRELUDE]
    table: list[tuple[str, str, str]] = []
    names: dict[str, str] = {}
    for i, (kernel, spec) in enumerate(sorted(FUSIBLE.items())):
        if not spec.call or spec.result not in ("chain", "f32") or set(spec.roles) - {"t", "s"}:
            continue
        args = [f"{r}{j}" for j, r in enumerate(spec.roles)]
        tensors = [a for a in args if a[0] == "t"]
        scalars = [a for a in args if a[0] == "s"]
        computed = [("r", "f32")] if spec.result == "f32" else []
        checks = [spec.check.format(*args)] if spec.check else []
        fname = f"k{i}"
        lines += _function_lines(fname, tensors, scalars, [], [], computed, checks,
                                 [spec.call.format(*args, out="r", outs=["r"])],
                                 ["r"] if computed else [], True)
        table.append((fname, fname, kernel))
        names[kernel] = fname
    source = "\n".join(lines) + "\n"
    module_name = _ccompile.module_name(source + _BUFFER_MODULE, "_pytfrt_bufk_", False)
    source += _module_source(module_name, table, True)
    module = _ccompile.extension(source, module_name, False)
    return {k: (FUSIBLE[k].roles, getattr(module, f)) for k, f in names.items()}
