/* pytfrt._eager_fast: the eager fast path of pytfrt.eager as C callables (docs/eager.md).
 *
 * An eager op such as ``pytfrt.eager.add`` is, when this extension is built, an ``op`` object
 * made by ``binary()``: its vectorcall does the commonest case itself -- both operands an
 * ``eager.Tensor`` holding an ndarray, or an ndarray, of one dtype float32 or float64 (or one
 * of them a Python float/int, converted to the array's dtype) -> the NumPy ufunc -> a new
 * available ``eager.Tensor`` -- and hands every other call, unchanged, to the Python op function
 * it wraps (``fallback``), which keeps all the rules (weak scalars, promotion, broadcasting
 * errors, tracing, the general core-runtime path).  ``unary()`` makes one for a one-operand
 * op.  The objects are also method descriptors, so they can serve as ``Tensor.__add__`` etc.
 *
 * NumPy objects are handled through the CPython API (types and dtypes are compared by identity)
 * and one field of NumPy's array struct, the dtype (its layout checked at ``configure``, else
 * ``ndarray.dtype`` is read as an attribute): no NumPy headers are needed to build.
 * The ``Tensor`` and ``FastPathCounts`` slots are written through the offsets of their
 * ``__slots__`` member descriptors, read once by ``configure``.
 *
 * Thread-safety: every call runs holding the GIL; operands are owned (INCREF'd) across the
 * ufunc call, which may release the GIL.  The fast-path counter is updated under the GIL.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>

/* -- process state set by configure() ------------------------------------------------------ */

typedef struct {
    int ready;
    PyTypeObject *tensor_type;   /* pytfrt.eager.Tensor (exact type only) */
    PyTypeObject *ndarray_type;  /* numpy.ndarray (exact type only) */
    PyObject *f32;               /* np.dtype(np.float32) */
    PyObject *f64;               /* np.dtype(np.float64) */
    PyObject *f32_type;          /* np.float32 (a weak Python scalar becomes one) */
    PyObject *f64_type;          /* np.float64 */
    PyObject *asarray;           /* np.asarray (0-d ufunc results are NumPy scalars) */
    PyObject *device;            /* the CPU device name put in Tensor._device */
    PyObject *counts;            /* pytfrt.eager.fast_path_counts */
    PyObject *dtype_name;        /* interned "dtype" */
    int weak_floats;             /* the ufuncs take a Python float as weak (NumPy >= 2) */
    int descr_direct;            /* ndarray's dtype is read from its struct (ArrayHead) */
    Py_ssize_t off_t, off_av, off_md, off_device, off_fast;
} State;

static State S;

/* The head of NumPy's array object (``PyArrayObject_fields`` in NumPy's ``ndarraytypes.h``):
 * part of NumPy's ABI, since its public macros (``PyArray_DESCR``) read these fields in
 * compiled extensions.  ``configure`` checks the layout on real arrays before using it and
 * reads ``.dtype`` as an attribute otherwise. */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
} ArrayHead;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static void
state_clear(void)
{
    Py_CLEAR(S.tensor_type);
    Py_CLEAR(S.ndarray_type);
    Py_CLEAR(S.f32);
    Py_CLEAR(S.f64);
    Py_CLEAR(S.f32_type);
    Py_CLEAR(S.f64_type);
    Py_CLEAR(S.asarray);
    Py_CLEAR(S.device);
    Py_CLEAR(S.counts);
    S.ready = 0;
}

/* The offset of the object slot ``name`` of ``type`` (a __slots__ member descriptor). */
static Py_ssize_t
slot_offset(PyObject *type, const char *name)
{
    PyObject *d = PyObject_GetAttrString(type, name);
    if (d == NULL) {
        return -1;
    }
    Py_ssize_t off = -1;
    if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY)) {
            off = m->offset;
        }
    }
    Py_DECREF(d);
    if (off < 0) {
        PyErr_Format(PyExc_TypeError, "%R.%s is not a writable __slots__ member", type, name);
    }
    return off;
}

PyDoc_STRVAR(configure_doc,
"configure(tensor_type, ndarray_type, f32, f64, f32_type, f64_type, asarray, device, counts,\n"
"          weak_floats=False, read_struct=True)\n"
"\n"
"Tell the extension the objects it works with (pytfrt.eager calls it once at import):\n"
"the Tensor class (its _t/_av/_md/_device slots are written directly), numpy.ndarray,\n"
"the float32/float64 dtypes and scalar types, np.asarray, the CPU device name and the\n"
"FastPathCounts object (its 'fast' slot is incremented). weak_floats: NumPy's ufuncs\n"
"convert a Python float operand to the array's dtype themselves (NEP 50, NumPy >= 2), so\n"
"it is passed as is. Returns whether an array's dtype is read from NumPy's array struct\n"
"(read_struct and its layout checked on two arrays) rather than as the .dtype attribute.\n"
"Raises TypeError if a class does not have the expected slots.");

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *tensor_type, *ndarray_type, *f32, *f64, *f32_type, *f64_type, *asarray, *device,
             *counts;
    int weak_floats = 0, read_struct = 1;
    if (!PyArg_ParseTuple(args, "O!O!OOOOOUO|pp:configure", &PyType_Type, &tensor_type,
                          &PyType_Type, &ndarray_type, &f32, &f64, &f32_type, &f64_type,
                          &asarray, &device, &counts, &weak_floats, &read_struct)) {
        return NULL;
    }
    Py_ssize_t off_t = slot_offset(tensor_type, "_t");
    Py_ssize_t off_av = off_t < 0 ? -1 : slot_offset(tensor_type, "_av");
    Py_ssize_t off_md = off_av < 0 ? -1 : slot_offset(tensor_type, "_md");
    Py_ssize_t off_device = off_md < 0 ? -1 : slot_offset(tensor_type, "_device");
    Py_ssize_t off_fast =
        off_device < 0 ? -1 : slot_offset((PyObject *)Py_TYPE(counts), "fast");
    if (off_fast < 0) {
        return NULL;
    }
    if (((PyTypeObject *)tensor_type)->tp_itemsize != 0) {
        PyErr_SetString(PyExc_TypeError, "the Tensor class must not be variable-sized");
        return NULL;
    }
    state_clear();
    S.tensor_type = (PyTypeObject *)Py_NewRef(tensor_type);
    S.ndarray_type = (PyTypeObject *)Py_NewRef(ndarray_type);
    S.f32 = Py_NewRef(f32);
    S.f64 = Py_NewRef(f64);
    S.f32_type = Py_NewRef(f32_type);
    S.f64_type = Py_NewRef(f64_type);
    S.asarray = Py_NewRef(asarray);
    S.device = Py_NewRef(device);
    S.counts = Py_NewRef(counts);
    S.off_t = off_t;
    S.off_av = off_av;
    S.off_md = off_md;
    S.off_device = off_device;
    S.off_fast = off_fast;
    S.weak_floats = weak_floats;
    S.descr_direct = 0;
    int direct = read_struct && S.ndarray_type->tp_basicsize >= (Py_ssize_t)sizeof(ArrayHead);
    for (int i = 0; i < 2 && direct; i++) {
        PyObject *scalar = PyObject_CallOneArg(i ? f64_type : f32_type, Py_False);
        PyObject *probe = scalar == NULL ? NULL : PyObject_CallOneArg(asarray, scalar);
        PyObject *d = probe == NULL ? NULL : PyObject_GetAttr(probe, S.dtype_name);
        direct = d != NULL && Py_IS_TYPE(probe, S.ndarray_type)
                 && ((ArrayHead *)probe)->descr == d && d == (i ? f64 : f32);
        Py_XDECREF(d);
        Py_XDECREF(probe);
        Py_XDECREF(scalar);
        if (PyErr_Occurred()) {
            state_clear();
            return NULL;
        }
    }
    S.descr_direct = direct;
    S.ready = 1;
    return PyBool_FromLong(direct);
}

/* -- the shared pieces ----------------------------------------------------------------------- */

/* A new reference to the ndarray an operand holds (an exact Tensor's ``_t`` or an exact
 * ndarray), or NULL (no exception set) when the operand is anything else. */
static inline PyObject *
operand_array(PyObject *v)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == S.ndarray_type) {
        return Py_NewRef(v);
    }
    if (t == S.tensor_type) {
        PyObject *a = SLOT(v, S.off_t);
        if (a != NULL && Py_IS_TYPE(a, S.ndarray_type)) {
            return Py_NewRef(a);
        }
    }
    return NULL;
}

/* The (borrowed) dtype of ndarray ``a`` when it is float32 or float64, else NULL.  Errors
 * (which reading ``.dtype`` of an exact ndarray does not raise) are cleared. */
static inline PyObject *
float_dtype(PyObject *a)
{
    if (S.descr_direct) {
        PyObject *d = ((ArrayHead *)a)->descr;
        return (d == S.f32 || d == S.f64) ? d : NULL;
    }
    PyObject *d = PyObject_GetAttr(a, S.dtype_name);
    if (d == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(d);  /* the array keeps its dtype alive */
    return (d == S.f32 || d == S.f64) ? d : NULL;
}

/* ``fast_path_counts.fast += 1`` (under the GIL). */
static inline int
bump_fast(void)
{
    PyObject **slot = &SLOT(S.counts, S.off_fast);
    PyObject *old = *slot;
    PyObject *new;
    if (old != NULL && PyLong_CheckExact(old)) {
        Py_ssize_t n = PyLong_AsSsize_t(old);
        if (n == -1 && PyErr_Occurred()) {
            PyObject *one = PyLong_FromLong(1);
            PyErr_Clear();
            new = one == NULL ? NULL : PyNumber_Add(old, one);
            Py_XDECREF(one);
        }
        else {
            new = PyLong_FromSsize_t(n + 1);
        }
    }
    else {
        new = PyLong_FromLong(1);
    }
    if (new == NULL) {
        return -1;
    }
    *slot = new;
    Py_XDECREF(old);
    return 0;
}

/* A new available Tensor holding ``r`` (stolen; an ndarray, or a NumPy scalar made 0-d). */
static PyObject *
make_tensor(PyObject *r)
{
    if (!Py_IS_TYPE(r, S.ndarray_type)) {
        PyObject *a = PyObject_CallOneArg(S.asarray, r);
        Py_DECREF(r);
        if (a == NULL) {
            return NULL;
        }
        r = a;
    }
    PyTypeObject *tp = S.tensor_type;
    PyObject *h = tp->tp_alloc(tp, 0);
    if (h == NULL) {
        Py_DECREF(r);
        return NULL;
    }
    SLOT(h, S.off_t) = r;
    SLOT(h, S.off_av) = Py_NewRef(Py_None);
    SLOT(h, S.off_md) = Py_NewRef(Py_None);
    SLOT(h, S.off_device) = Py_NewRef(S.device);
    if (bump_fast() < 0) {
        Py_DECREF(h);
        return NULL;
    }
    return h;
}

/* -- the op objects ---------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;        /* binary: the ufunc; unary: the ufunc or the op record's fast fn */
    PyObject *fallback;  /* the Python op function: every call the fast case declines */
    PyObject *dict;      /* __name__, __doc__, __wrapped__, ... (functools.update_wrapper) */
    vectorcallfunc vectorcall;
    int nargs;           /* 1 (unary) or 2 (binary) */
    int swapped;         /* binary: computes fn(args[1], args[0]) (a reflected operator) */
} FastOp;

static int
fastop_traverse(FastOp *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->fn);
    Py_VISIT(self->fallback);
    Py_VISIT(self->dict);
    return 0;
}

static int
fastop_clear(FastOp *self)
{
    Py_CLEAR(self->fn);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->dict);
    return 0;
}

static void
fastop_dealloc(FastOp *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    fastop_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* The Python function gets every declined call with its arguments unchanged (a reflected
 * operator's fallback is the Python ``__radd__`` etc., which swaps them itself). */
static PyObject *
fastop_call_fallback(FastOp *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

/* A weak Python scalar (exact float or int, not bool) as a NumPy scalar of the float dtype
 * ``d`` (a Python float as is when the ufunc converts it itself: the same rounding, the same
 * overflow warning).  NULL with no exception: not such a scalar, or the conversion failed with
 * OverflowError/ValueError (the Python op decides then); NULL with an exception: other errors. */
static PyObject *
weak_scalar(PyObject *v, PyObject *d)
{
    if (PyFloat_CheckExact(v)) {
        if (S.weak_floats) {
            return Py_NewRef(v);
        }
    }
    else if (!PyLong_CheckExact(v)) {
        return NULL;
    }
    PyObject *s = PyObject_CallOneArg(d == S.f32 ? S.f32_type : S.f64_type, v);
    if (s == NULL && (PyErr_ExceptionMatches(PyExc_OverflowError)
                      || PyErr_ExceptionMatches(PyExc_ValueError))) {
        PyErr_Clear();
    }
    return s;
}

static PyObject *
binary_vectorcall(FastOp *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!S.ready || PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL) {
        return fastop_call_fallback(self, args, nargsf, kwnames);
    }
    PyObject *x = args[self->swapped], *y = args[!self->swapped];
    PyObject *a = operand_array(x);
    PyObject *b = operand_array(y);
    if (a != NULL && b != NULL) {
        PyObject *d = float_dtype(a);
        if (d == NULL || float_dtype(b) != d) {
            goto fallback;
        }
    }
    else if (a != NULL || b != NULL) {
        /* one array and (maybe) a weak Python scalar of the other operand */
        PyObject *d = float_dtype(a != NULL ? a : b);
        if (d == NULL) {
            goto fallback;
        }
        PyObject *s = weak_scalar(a != NULL ? y : x, d);
        if (s == NULL) {
            if (PyErr_Occurred()) {
                goto error;
            }
            goto fallback;
        }
        if (a == NULL) {
            a = s;
        }
        else {
            b = s;
        }
    }
    else {
        goto fallback;
    }
    {
        PyObject *pair[2] = {a, b};
        PyObject *r = PyObject_Vectorcall(self->fn, pair, 2, NULL);
        Py_DECREF(a);
        Py_DECREF(b);
        if (r == NULL) {
            if (PyErr_ExceptionMatches(PyExc_ValueError)) {
                /* shapes that do not broadcast: the Python op reports it */
                PyErr_Clear();
                return fastop_call_fallback(self, args, nargsf, kwnames);
            }
            return NULL;
        }
        return make_tensor(r);
    }
fallback:
    Py_XDECREF(a);
    Py_XDECREF(b);
    return fastop_call_fallback(self, args, nargsf, kwnames);
error:
    Py_XDECREF(a);
    Py_XDECREF(b);
    return NULL;
}

static PyObject *
unary_vectorcall(FastOp *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!S.ready || PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        return fastop_call_fallback(self, args, nargsf, kwnames);
    }
    PyObject *a = operand_array(args[0]);
    if (a == NULL) {
        return fastop_call_fallback(self, args, nargsf, kwnames);
    }
    if (float_dtype(a) == NULL) {
        Py_DECREF(a);
        return fastop_call_fallback(self, args, nargsf, kwnames);
    }
    PyObject *r = PyObject_CallOneArg(self->fn, a);
    Py_DECREF(a);
    if (r == NULL) {
        return NULL;
    }
    if (r == Py_None) {  /* the record's fast function declined */
        Py_DECREF(r);
        return fastop_call_fallback(self, args, nargsf, kwnames);
    }
    return make_tensor(r);
}

static PyTypeObject *op_type;  /* pytfrt._eager_fast.op, created by module_exec */

static PyObject *
fastop_new(PyObject *args, PyObject *kwds, int nargs)
{
    static char *binary_kwlist[] = {"fn", "fallback", "swapped", NULL};
    static char *unary_kwlist[] = {"fn", "fallback", NULL};
    PyObject *fn, *fallback;
    int swapped = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, nargs == 2 ? "OO|p:binary" : "OO:unary",
                                     nargs == 2 ? binary_kwlist : unary_kwlist,
                                     &fn, &fallback, &swapped)) {
        return NULL;
    }
    if (!PyCallable_Check(fn) || !PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fn and fallback must be callable");
        return NULL;
    }
    FastOp *self = (FastOp *)op_type->tp_alloc(op_type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->fn = Py_NewRef(fn);
    self->fallback = Py_NewRef(fallback);
    self->dict = NULL;
    self->nargs = nargs;
    self->swapped = swapped;
    self->vectorcall = nargs == 2 ? (vectorcallfunc)binary_vectorcall
                                  : (vectorcallfunc)unary_vectorcall;
    return (PyObject *)self;
}

PyDoc_STRVAR(binary_doc,
"binary(ufunc, fallback, swapped=False) -> op\n"
"\n"
"A two-operand eager op: float32/float64 Tensors or ndarrays of one dtype (or one of them\n"
"and a Python float/int) -> ufunc(x, y) as a new Tensor; any other call -> fallback(*args).\n"
"swapped: computes ufunc(y, x) (a reflected operator such as Tensor.__radd__).");

static PyObject *
binary(PyObject *module, PyObject *args, PyObject *kwds)
{
    return fastop_new(args, kwds, 2);
}

PyDoc_STRVAR(unary_doc,
"unary(fn, fallback) -> op\n"
"\n"
"A one-operand eager op: a float32/float64 Tensor or ndarray -> fn(x) as a new Tensor (fn\n"
"returning None declines); any other call -> fallback(*args).");

static PyObject *
unary(PyObject *module, PyObject *args, PyObject *kwds)
{
    return fastop_new(args, kwds, 1);
}

/* Bound as a method (``Tensor.__add__ = binary(...)``): ``t.__add__`` is a bound method. */
static PyObject *
fastop_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static PyObject *
fastop_repr(FastOp *self)
{
    return PyUnicode_FromFormat("<%s %s%s wrapping %R>", Py_TYPE(self)->tp_name,
                                self->nargs == 2 ? "binary" : "unary",
                                self->swapped ? " (swapped)" : "", self->fallback);
}

/* Pickled by reference, as Python functions are: the name it is found by in its module. */
static PyObject *
fastop_reduce(PyObject *self, PyObject *unused)
{
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef fastop_methods[] = {
    {"__reduce__", fastop_reduce, METH_NOARGS, "pickled by its module and qualified name"},
    {NULL},
};

static PyMemberDef fastop_members[] = {
    {"fn", T_OBJECT_EX, offsetof(FastOp, fn), READONLY, "the ufunc (or fast function) called"},
    {"fallback", T_OBJECT_EX, offsetof(FastOp, fallback), READONLY,
     "the Python op function every declined call goes to"},
    {"nargs", T_INT, offsetof(FastOp, nargs), READONLY, "1 (unary) or 2 (binary)"},
    {"swapped", T_INT, offsetof(FastOp, swapped), READONLY,
     "1 if the operands are swapped (a reflected operator)"},
    {"__dictoffset__", T_PYSSIZET, offsetof(FastOp, dict), READONLY},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FastOp, vectorcall), READONLY},
    {NULL},
};

static PyGetSetDef fastop_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL},
};

static PyType_Slot op_slots[] = {
    {Py_tp_dealloc, fastop_dealloc},
    {Py_tp_traverse, fastop_traverse},
    {Py_tp_clear, fastop_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, fastop_descr_get},
    {Py_tp_repr, fastop_repr},
    {Py_tp_members, fastop_members},
    {Py_tp_methods, fastop_methods},
    {Py_tp_getset, fastop_getset},
    {Py_tp_doc, "An eager op made by binary() or unary() (see the module docstring)."},
    {0, NULL},
};

static PyType_Spec op_spec = {
    "pytfrt._eager_fast.op", sizeof(FastOp), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
        | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    op_slots,
};

/* -- the module -------------------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS, configure_doc},
    {"binary", (PyCFunction)(void (*)(void))binary, METH_VARARGS | METH_KEYWORDS, binary_doc},
    {"unary", (PyCFunction)(void (*)(void))unary, METH_VARARGS | METH_KEYWORDS, unary_doc},
    {NULL},
};

static int
module_exec(PyObject *m)
{
    S.dtype_name = PyUnicode_InternFromString("dtype");
    if (S.dtype_name == NULL) {
        return -1;
    }
    PyObject *type = PyType_FromModuleAndSpec(m, &op_spec, NULL);
    if (type == NULL || PyModule_AddObjectRef(m, "op", type) < 0) {
        Py_XDECREF(type);
        return -1;
    }
    Py_XSETREF(op_type, (PyTypeObject *)type);
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

PyDoc_STRVAR(module_doc,
"The eager fast path of pytfrt.eager in C (docs/eager.md): binary/unary op objects that run\n"
"the float32/float64 ufunc case directly and pass every other call to the Python op.");

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "pytfrt._eager_fast", module_doc, 0, module_methods, module_slots,
};

PyMODINIT_FUNC
PyInit__eager_fast(void)
{
    return PyModuleDef_Init(&module_def);
}
