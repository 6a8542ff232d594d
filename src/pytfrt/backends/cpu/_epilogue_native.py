"""The fused epilogue ``y = act(y + bias + residual)`` in C: what :func:`pytfrt.backends.cpu.
_epilogue.epilogue_2d` runs when a C compiler is available (its Numba kernels stay as the
fallback without one).

Why: a small model whose other kernels are oneDNN or C (a Transformer's dense layers, an MLP)
imported Numba only for this epilogue -- ~80 MB of resident memory, ~45 MB more at its first
compile or cache load and 0.3-1.5 s on the first call (``docs/kernels.md``, "What a model
imports").  This module is compiled once per machine by :mod:`pytfrt.backends.cpu._ccompile`
(about a second, then loaded from the on-disk cache in about a millisecond).

The function, ``epilogue(y, bias, residual, code, alpha, bias_rows, j0, j1) -> bool``, has the
contract of ``epilogue_2d`` on columns ``j0:j1``: ``y`` 2-D float32 or float64 (any strides
that are whole elements), ``bias`` 1-D or ``None`` (along columns, or with ``bias_rows``
indexed by ``row % len(bias)``), ``residual`` 2-D or ``None`` (any strides, zero for
broadcasting), all of ``y``'s dtype.  It returns ``False`` without writing anything for
operands it does not take (another dtype, byte-swapped, strides that are not whole elements, a
read-only ``y``, an activation code above 11): the caller falls back to Numba.  The GIL is
released while it runs; thread-safe (it writes only ``y``; the scratch row is on the stack).

Numerics are those of the Numba kernel (``_epilogue._act``): the sum ``y + bias + residual``
in float64 arithmetic, in that order, the activation in float64 arithmetic, one rounding to
``y``'s dtype; GELU of a float32 ``y`` through the same rational ``erf`` / ``tanh`` (the
coefficients :data:`ERF_P` etc. are defined here, written into the source),
of a float64 ``y`` through libm's ``erf`` / ``tanh``; sigmoid, SiLU and tanh through libm's
``exp`` / ``tanh`` as the Numba kernel; ``max`` / ``min`` with Python's NaN rule (NaN
propagates).  (The Numba float32 GELU row kernel summed the operands in float32 first: the C
one rounds once.)  Per row the columns are processed in blocks of :data:`BLOCK` elements: the
float64 sum into a stack buffer, the activation over it (a loop GCC vectorises, compiled for
AVX-512 or AVX2 where the CPU has them), the store.
"""

from __future__ import annotations

import math
from types import ModuleType

from pytfrt.backends.cpu import _ccompile

SQRT_HALF = 1.0 / math.sqrt(2.0)
GELU_TANH_C = math.sqrt(2.0 / math.pi)
"""``sqrt(1 / 2)`` and ``sqrt(2 / pi)``: GELU's constants (the erf and tanh forms)."""

ERF_CLAMP = 3.92
"""Beyond this ``|erf(x)|`` is 1 to within 3e-8 (the rational ``erf`` returns +-1 there, so GELU
of a large negative input is within 8e-8 of its true tiny value, not a cancellation residue)."""
ERF_P = (1.1283790955680109, 0.1430860878305073, 0.044510130787718774, 0.0016640865977681442,
         0.00013687623996663055, -3.6561027689488348e-06, 7.990533973863077e-08,
         -8.184930358968592e-10)
ERF_Q = (1.0, 0.4601391832831839, 0.09282944180181939, 0.010206696188068886,
         0.0005738922566693674)
"""``erf(x) ~ x * P(x^2) / Q(x^2)`` on ``|x| <= 3.92``: a rational least-squares fit (Lawson
reweighting towards minimax) made for the epilogue; max abs error 7.7e-9 in float64 arithmetic,
checked against ``math.erf`` in ``tests/unit/backends/test_epilogue_erf.py``.  The C function
and the Numba fallback (``_epilogue._erf``) both use it for float32 outputs."""
TANH_CLAMP = 9.0
"""Beyond this ``|tanh(x)|`` is 1 to within 3.1e-8 (the rational ``tanh`` returns +-1 there)."""
TANH_P = (0.9999999689464059, 0.13079160508626222, 0.003098650607942336,
          1.1101779345907573e-05, -2.0029356688209897e-08, 5.192582704220817e-11,
          -8.291005010466318e-14)
TANH_Q = (1.0, 0.46412480763406466, 0.024473747280170353, 0.00025385954592916477)
"""``tanh(x) ~ x * P(x^2) / Q(x^2)`` on ``|x| <= 9``: a rational least-squares fit (Lawson
reweighting towards minimax) made for the epilogue; max abs error 3.7e-8 over the real line in
float64 arithmetic, checked against ``math.tanh`` in
``tests/unit/backends/test_epilogue_erf.py`` (GELU's tanh form of float32 outputs)."""
GELU_EXACT = 10
"""Internal kernel code: GELU with libm's ``erf`` (float64 outputs; code 7 is the rational
``erf``, which vectorises: a libm call per element does not)."""
GELU_TANH_EXACT = 11
"""Internal kernel code: GELU's tanh form with libm's ``tanh`` (float64 outputs; code 8 uses the
rational ``tanh``, which vectorises)."""

ENABLED = True
"""Whether :func:`pytfrt.backends.cpu._epilogue.epilogue_2d` uses the C function (``False``:
the Numba kernels, for A/B runs and tests; read at every call)."""

BLOCK = 256
"""Columns per block of a row (the float64 scratch of one block, 2 KiB, stays in L1)."""


def _horner(coefficients: tuple[float, ...], var: str) -> str:
    """C for ``c0 + var * (c1 + var * (...))`` with the coefficients written exactly."""
    text = repr(float(coefficients[-1]))
    for c in reversed(coefficients[:-1]):
        text = f"{float(c)!r} + {var} * ({text})"
    return text


_ACT = r"""
#define MAXP(a, b) ((b) > (a) ? (b) : (a))   /* Python's max(a, b): NaN in a propagates */
#define MINP(a, b) ((b) < (a) ? (b) : (a))

AI double sigmoid_d_@(double v) {
    if (v >= 0) return 1.0 / (1.0 + exp(-v));
    const double t = exp(v);
    return t / (1.0 + t);
}

/* the rational fits of erf and tanh: t P(t^2) / Q(t^2) for |x| < CLAMP, +-1 beyond */
#define RATIONAL(NAME, CLAMP, P, Q)                                                           \
AI double NAME(double x) {                                                                    \
    const double t = MINP(MAXP(x, -CLAMP), CLAMP), u = t * t;                                 \
    const double p = P, q = Q;                                                                \
    double r = t * p / q;                                                                     \
    r = x >= CLAMP ? 1.0 : r;                                                                 \
    return x <= -CLAMP ? -1.0 : r;                                                            \
}
RATIONAL(erf_r_@, ERF_CLAMP, ERF_P, ERF_Q)
RATIONAL(tanh_r_@, TANH_CLAMP, TANH_P, TANH_Q)
#undef RATIONAL

/* dst[0:n] = act(t[0:n]) rounded to T (codes of _epilogue.ACTIVATION_CODES, 10 and 11 the
   exact GELUs): one loop per code (with the switch inside, GCC would not vectorise).  LOOP
   rounds as it goes; SELECT_LOOP, for a select at the top of the expression, rounds in a second
   loop (rounded in the same loop, GCC turns the select into branches and does not vectorise) */
#define LOOP(EXPR)                                                                            \
    for (int64_t j = 0; j < n; j++) { const double v = t[j]; dst[j] = (__typeof__(*dst))(EXPR); }
#define SELECT_LOOP(EXPR)                                                                     \
    for (int64_t j = 0; j < n; j++) { const double v = t[j]; u[j] = (EXPR); }                 \
    for (int64_t j = 0; j < n; j++) dst[j] = (__typeof__(*dst))u[j];
#define ACT(T, NAME)                                                                          \
static void NAME##_@(const double *restrict t, T *restrict dst, int64_t n, int64_t act,       \
                     double alpha) {                                                          \
    double u[BLOCK];                                                                          \
    switch (act) {                                                                            \
    case 1: SELECT_LOOP(MAXP(v, 0.0)) break;                                                  \
    case 2: SELECT_LOOP(MINP(MAXP(v, 0.0), 6.0)) break;                                       \
    case 3: SELECT_LOOP(v >= 0 ? v : alpha * v) break;                                        \
    case 4: LOOP(sigmoid_d_@(v)) break;                                                       \
    case 5: LOOP(tanh(v)) break;                                                              \
    case 6: LOOP(v * sigmoid_d_@(v)) break;                                                   \
    case 7: LOOP(0.5 * v * (1.0 + erf_r_@(v * SQRT_HALF))) break;                             \
    case 8: LOOP(0.5 * v * (1.0 + tanh_r_@(GELU_C * (v + 0.044715 * v * v * v)))) break;     \
    case 9: LOOP(v * MINP(MAXP(v + 3.0, 0.0), 6.0) / 6.0) break;                              \
    case GELU_EXACT: LOOP(0.5 * v * (1.0 + erf(v * SQRT_HALF))) break;                        \
    case GELU_TANH_EXACT:                                                                     \
        LOOP(0.5 * v * (1.0 + tanh(GELU_C * (v + 0.044715 * v * v * v)))) break;              \
    default: LOOP(v) break;                                                                   \
    }                                                                                         \
}
ACT(float, act_f32)
ACT(double, act_f64)
#undef ACT
#undef LOOP
#undef SELECT_LOOP

/* t[0:w] OP the elements c0:c0 + w of the row SRC (element stride S), as double */
#define GATHER(OP, SRC, S)                                                                    \
    if ((S) == 1) {                                                                           \
        for (int64_t j = 0; j < w; j++) t[j] OP (double)(SRC)[c0 + j];                        \
    } else {                                                                                  \
        for (int64_t j = 0; j < w; j++) t[j] OP (double)(SRC)[(c0 + j) * (S)];                \
    }

/* rows of y (element strides ys0, ys1), columns j0:j1: y = act(y + bias + res) */
#define ROWS(T, NAME, ACTF)                                                                   \
static void NAME##_@(T *y, int64_t ys0, int64_t ys1, int64_t m, int64_t j0, int64_t j1,      \
                     const T *b, int64_t bs, int64_t nb, int bias_rows, const T *r,          \
                     int64_t rs0, int64_t rs1, int64_t act, double alpha) {                  \
    double t[BLOCK];                                                                          \
    for (int64_t i = 0; i < m; i++) {                                                         \
        const double rb = bias_rows && nb > 0 ? (double)b[(i % nb) * bs] : 0.0;               \
        const int col = nb > 0 && !bias_rows;                                                 \
        T *yi = y + i * ys0;                                                                  \
        const T *ri = r ? r + i * rs0 : NULL;                                                 \
        for (int64_t c0 = j0; c0 < j1; c0 += BLOCK) {                                         \
            const int64_t w = j1 - c0 < BLOCK ? j1 - c0 : BLOCK;                              \
            if (col && ys1 == 1 && bs == 1) {   /* the common case in one loop */             \
                for (int64_t j = 0; j < w; j++)                                               \
                    t[j] = (double)yi[c0 + j] + rb + (double)b[c0 + j];                       \
            } else {                                                                          \
                GATHER(=, yi, ys1)                                                            \
                for (int64_t j = 0; j < w; j++) t[j] += rb;                                   \
                if (col) GATHER(+=, b, bs)                                                    \
            }                                                                                 \
            if (ri) GATHER(+=, ri, rs1)                                                       \
            if (ys1 == 1) {                                                                   \
                ACTF(t, yi + c0, w, act, alpha);                                              \
            } else {                                                                          \
                T out[BLOCK];                                                                 \
                ACTF(t, out, w, act, alpha);                                                  \
                for (int64_t j = 0; j < w; j++) yi[(c0 + j) * ys1] = out[j];                  \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
}
ROWS(float, rows_f32, act_f32_@)
ROWS(double, rows_f64, act_f64_@)
#undef ROWS
#undef GATHER
"""

_TAIL = r"""
typedef void (*rows_f32_fn)(float *, int64_t, int64_t, int64_t, int64_t, int64_t,
                            const float *, int64_t, int64_t, int, const float *, int64_t,
                            int64_t, int64_t, double);
typedef void (*rows_f64_fn)(double *, int64_t, int64_t, int64_t, int64_t, int64_t,
                            const double *, int64_t, int64_t, int, const double *, int64_t,
                            int64_t, int64_t, double);
static rows_f32_fn ROWS_F32 = rows_f32_generic;
static rows_f64_fn ROWS_F64 = rows_f64_generic;

/* the array's element strides, or 0 when they are not whole elements (or not native order) */
static int element_strides(PyArrayObject *a, int type, int64_t *s) {
    if (PyArray_TYPE(a) != type || !PyArray_ISNOTSWAPPED(a)) return 0;
    const int64_t item = PyArray_ITEMSIZE(a);
    for (int d = 0; d < PyArray_NDIM(a); d++) {
        if (PyArray_STRIDES(a)[d] % item) return 0;
        s[d] = PyArray_STRIDES(a)[d] / item;
    }
    return 1;
}

/* epilogue(y, bias, residual, code, alpha, bias_rows, j0, j1) -> bool (module docstring) */
static PyObject *py_epilogue(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "epilogue takes 8 arguments");
        return NULL;
    }
    if (!PyArray_Check(args[0]) || (args[1] != Py_None && !PyArray_Check(args[1]))
            || (args[2] != Py_None && !PyArray_Check(args[2])))
        Py_RETURN_FALSE;
    PyArrayObject *ya = (PyArrayObject *)args[0];
    PyArrayObject *ba = args[1] == Py_None ? NULL : (PyArrayObject *)args[1];
    PyArrayObject *ra = args[2] == Py_None ? NULL : (PyArrayObject *)args[2];
    const int64_t act = PyLong_AsLongLong(args[3]);
    const double alpha = PyFloat_AsDouble(args[4]);
    const int bias_rows = PyObject_IsTrue(args[5]);
    const int64_t j0 = PyLong_AsLongLong(args[6]), j1 = PyLong_AsLongLong(args[7]);
    if (PyErr_Occurred()) return NULL;
    const int type = PyArray_TYPE(ya);
    int64_t ys[2], bs[1] = {0}, rs[2] = {0, 0};
    if (act < 0 || act > GELU_TANH_EXACT   /* a code this source does not know: Numba's */
            || (type != NPY_FLOAT32 && type != NPY_FLOAT64) || PyArray_NDIM(ya) != 2
            || !PyArray_ISWRITEABLE(ya) || !element_strides(ya, type, ys)
            || (ba && (PyArray_NDIM(ba) != 1 || !element_strides(ba, type, bs)))
            || (ra && (PyArray_NDIM(ra) != 2 || !element_strides(ra, type, rs))))
        Py_RETURN_FALSE;
    const int64_t m = PyArray_DIM(ya, 0), ncols = PyArray_DIM(ya, 1);
    const int64_t nb = ba ? PyArray_DIM(ba, 0) : 0;
    if (j0 < 0 || j1 > ncols || (nb > 0 && !bias_rows && nb < j1)
            || (ra && (PyArray_DIM(ra, 0) < m || PyArray_DIM(ra, 1) < j1)))
        Py_RETURN_FALSE;
    if (ra && PyArray_DIM(ra, 0) == 0) ra = NULL;   /* an empty (0, 0) residual: none */
    if (m == 0 || j1 <= j0) Py_RETURN_TRUE;
    void *y = PyArray_DATA(ya), *b = ba ? PyArray_DATA(ba) : NULL;
    void *r = ra ? PyArray_DATA(ra) : NULL;
    Py_BEGIN_ALLOW_THREADS
    if (type == NPY_FLOAT32)
        ROWS_F32((float *)y, ys[0], ys[1], m, j0, j1, (const float *)b, bs[0], nb, bias_rows,
                 (const float *)r, rs[0], rs[1], act, alpha);
    else
        ROWS_F64((double *)y, ys[0], ys[1], m, j0, j1, (const double *)b, bs[0], nb,
                 bias_rows, (const double *)r, rs[0], rs[1], act, alpha);
    Py_END_ALLOW_THREADS
    Py_RETURN_TRUE;
}

/* the functions for one instruction set (0 generic, 1 AVX2, 2 AVX-512), for use() */
static void select_isa(int isa) {
    switch (isa) {
#if defined(__x86_64__)
    case 2: ROWS_F32 = rows_f32_avx512; ROWS_F64 = rows_f64_avx512; break;
    case 1: ROWS_F32 = rows_f32_avx2; ROWS_F64 = rows_f64_avx2; break;
#endif
    default: ROWS_F32 = rows_f32_generic; ROWS_F64 = rows_f64_generic; break;
    }
}

#define MODULE_METHODS \
    {"epilogue", (PyCFunction)(void (*)(void))py_epilogue, METH_FASTCALL, NULL},
DISPATCH
"""

DISPATCH = r"""
/* version(): the instruction set the functions in use were compiled for */
static const char *const ISA_NAMES[] = {"generic", "avx2", "avx512"};
static int ISA = 0;
static PyObject *py_version(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(ISA_NAMES[ISA]);
}

/* whether the CPU runs the functions for isa (an index of ISA_NAMES) */
static int isa_supported(int isa) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (isa == 2)   /* the target sections() compiles the AVX-512 functions for */
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")
            && __builtin_cpu_supports("avx512vl");
    if (isa == 1) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return isa == 0;
}

/* use(name): run the functions compiled for name (tests); False if the CPU lacks it */
static PyObject *py_use(PyObject *self, PyObject *arg) {
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    for (int isa = 0; isa < 3; isa++)
        if (!strcmp(name, ISA_NAMES[isa]) && isa_supported(isa)) {
            select_isa(isa);
            ISA = isa;
            Py_RETURN_TRUE;
        }
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    MODULE_METHODS
    {"version", py_version, METH_NOARGS, NULL},
    {"use", py_use, METH_O, NULL},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) {
    import_array();
    /* the widest instruction set the CPU has */
    for (ISA = 2; ISA > 0 && !isa_supported(ISA); ISA--) {}
    select_isa(ISA);
    return PyModule_Create(&module_def);
}
"""
"""The end of a module whose functions come in the versions :func:`sections` makes (inserted
where its source says ``DISPATCH``): ``version()``, ``use(name)``, the method table (the
module's own entries are its macro ``MODULE_METHODS``) and ``PyInit``, which picks the widest
instruction set the CPU has through the module's own ``select_isa(int)`` (0 generic, 1 AVX2, 2
AVX-512)."""

HEAD = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#define AI static inline __attribute__((always_inline))
"""
"""The headers every native kernel module of this kind starts with (Python, NumPy's C API)."""


_OPTIMIZE = '#pragma GCC optimize("O3,unroll-loops,no-trapping-math")\n'
"""How :func:`sections` compiles: ``-O3`` (GCC vectorises the loops), unrolled, and without
trapping math (floating-point exception flags only: with it GCC would not turn the selects of
the rational ``erf`` / ``tanh`` into blends without AVX-512's masks, and the AVX2 GELU stayed
scalar, ~4x the AVX-512 time; the results are the same)."""


def sections(kernels: str) -> str:
    """``kernels`` (its functions' names ending ``_@``) three times: for AVX-512F (512-bit
    vectors preferred), for AVX2 with FMA (x86-64 only) and without a target (``_generic``),
    each with :data:`_OPTIMIZE`."""
    parts = [("avx512", "avx512f,avx512dq,avx512vl,prefer-vector-width=512"),
             ("avx2", "avx2,fma")]
    text = "#if defined(__x86_64__)\n"
    for isa, target in parts:
        text += (f'#pragma GCC push_options\n#pragma GCC target("{target}")\n{_OPTIMIZE}'
                 f'{kernels.replace("@", isa)}#pragma GCC pop_options\n')
    text += "#endif\n"
    return (text + f"#pragma GCC push_options\n{_OPTIMIZE}"
            + kernels.replace("@", "generic") + "#pragma GCC pop_options\n")


_CONSTANTS = {
    "ERF_CLAMP": repr(ERF_CLAMP), "TANH_CLAMP": repr(TANH_CLAMP),
    "ERF_P": _horner(ERF_P, "u"), "ERF_Q": _horner(ERF_Q, "u"),
    "TANH_P": _horner(TANH_P, "u"), "TANH_Q": _horner(TANH_Q, "u"),
    "SQRT_HALF": repr(SQRT_HALF), "GELU_C": repr(GELU_TANH_C),
    "GELU_EXACT": str(GELU_EXACT), "GELU_TANH_EXACT": str(GELU_TANH_EXACT),
    "BLOCK": str(BLOCK),
}

SOURCE = (HEAD + "".join(f"#define {k} ({v})\n" for k, v in _CONSTANTS.items())
          + sections(_ACT) + _TAIL.replace("DISPATCH", DISPATCH))
"""The C module (:data:`_ACT`'s functions for AVX-512, AVX2 and generic x86-64 / other CPUs;
the best the CPU has picked at import, :func:`use` switches)."""

module = _ccompile.OptionalExtension(SOURCE, "pytfrt_epilogue_")
"""``module()``: the compiled module, or ``None`` (no C compiler, or ``module.enabled`` false)."""


def native() -> ModuleType | None:
    """The compiled module if :data:`ENABLED` and it can be built, else ``None``."""
    return module() if ENABLED else None


def use(isa: str) -> bool:
    """Run the functions compiled for ``isa`` (``"avx512"``, ``"avx2"``, ``"generic"``) from now
    on in this process (tests and A/B runs); ``False`` (nothing changed) if the CPU lacks it or
    there is no module."""
    mod = module()
    return bool(mod is not None and mod.use(isa))
