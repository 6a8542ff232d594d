"""The native loops of :mod:`pytfrt.backends.cpu._spin_pool` in C (no Numba).

:mod:`_spin_pool` describes the fork-join: a job table of parts, control words each on a
cache line of an ``int64`` array, helpers polling for the next job.  Its loops were Numba
functions; importing Numba for them cost a process ~80 MB and its first call ~45 MB more
(``docs/benchmarks.md``, peak memory), which a model whose kernels are all C or oneDNN
(the mobile CNNs) paid only for this fork-join.  This module is the same loops, word for
word, in C, compiled once per machine into the on-disk cache
(:mod:`pytfrt.backends.cpu._ccompile`); :func:`module` returns it, or ``None`` without a C
compiler (then :mod:`_spin_pool` keeps its Numba functions).

The module's functions, with :mod:`_spin_pool`'s names and contracts (each releases the GIL;
arguments are NumPy arrays and Python ints; an array of the wrong kind raises
``TypeError``, nothing else is checked: the addresses are the caller's):
``run_row(row, fns, xa, ya, ra, stream, scratch, buf)``,
``run_row_arrays(row, fns, x, y, stream, scratch, buf)``,
``caller(ctrl, jobs, fns, table, xa, ya, ra, helpers)``,
``caller_arrays(ctrl, jobs, fns, table, x, y, helpers)``, ``cont(ctrl, jobs, fns, helpers)``,
``wait_finished(ctrl, fns)``, ``helper(ctrl, jobs, fns, k, seen)`` and ``now()``; and
``trace(buffer)``, for diagnostics only (:func:`pytfrt.backends.cpu._spin_pool.trace`).
Unlike the Numba loops, ``caller`` wakes sleeping helpers itself (they sleep on a futex on the
job sequence word: ``helper`` returns only when asked to stop, ``wake(ctrl)`` after setting
the stop word).

The native entry (:func:`pytfrt.backends.cpu._spin_pool.try_job` and ``bound``):
``register(pool)`` (a tuple ``(ctrl, jobs, fns, helpers, lock, budget, budget_lock, slots)``,
or ``None``) names the process's pool; ``forget()`` drops it without a reference count (a
forked child); ``try_job(table, scratch, buf, xa, ya, ra)`` runs a job on it if it can now
(``True``), else returns ``False``, and marks the calling thread as pinned;
``launch((table, scratch, buf, slow, gate), x, y)`` is ``try_job`` for two arrays'
addresses, or ``slow(x, y)`` when it cannot run the job now (or ``gate["SPIN_POOL"]`` is
false, or the thread was never marked pinned).  Both raise ``RuntimeError`` for a part's
nonzero status, after the lock and the budget's slots are given back.
Thread-safe as :mod:`_spin_pool` describes (atomics on the control words).
"""

from __future__ import annotations

from pytfrt.backends.cpu import _ccompile

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#if defined(__linux__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
/* sleep while the low 32 bits of *w are v (the job sequence word: it changes on every job) */
static void futex_wait(int64_t *w, int64_t v) {
    syscall(SYS_futex, (int32_t *)w, FUTEX_WAIT_PRIVATE, (int32_t)v, NULL, NULL, 0);
}
static void futex_wake(int64_t *w) {
    syscall(SYS_futex, (int32_t *)w, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}
#else
static void futex_wait(int64_t *w, int64_t v) {  /* no futex: poll every 100 us */
    struct timespec t = {0, 100000};
    while ((int32_t)__atomic_load_n(w, __ATOMIC_SEQ_CST) == (int32_t)v) nanosleep(&t, NULL);
}
static void futex_wake(int64_t *w) { (void)w; }
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define PAUSE() _mm_pause()
#define CYCLES() ((int64_t)__rdtsc())
#else
#include <time.h>
#define PAUSE() ((void)0)
static int64_t CYCLES(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
#endif

enum { PRIM, NARGS, ARGS, SRC_MEM, SRC_OFF, DST_MEM, DST_OFF, RES_MEM, SP_MEM,
       CH_OFF, CH_BYTES, CH_ROWS, CH_STRIDE, CH_COPY_IN, ACT_FN, ACT_N, NF };
enum { LINE = 8 };
enum { SEQ_, CLAIM_, FINISHED_, ERROR_, STOP_, NPARTS_, XA_, YA_, RA_, HELPERS_ };
enum { R_SCRATCH = 1, R_BUF = 2 };  /* words of the STOP_ line: the reserved buffer sizes */
#define MAX_PARTS 64
enum { H_STREAM, H_SCRATCH, H_BUF, H_SLEEPING };
enum { EXECUTE, WAIT, SET_HANDLE, YIELD, SPIN, YIELD_EVERY };
#define PENDING (-1)
#define L(k) ((k) * LINE)

typedef int (*fn0)(void);
typedef int (*fn1)(int64_t);
typedef int (*fn2)(int64_t, int64_t);
typedef int (*fn4)(int64_t, int64_t, int64_t, int64_t);

#define ACQ __ATOMIC_ACQUIRE
#define SC __ATOMIC_SEQ_CST
static inline int64_t ld_acq(int64_t *c, int64_t i) { return __atomic_load_n(c + i, ACQ); }
static inline int64_t ld_sc(int64_t *c, int64_t i) { return __atomic_load_n(c + i, SC); }
static inline void st_rel(int64_t *c, int64_t i, int64_t v) {
    __atomic_store_n(c + i, v, __ATOMIC_RELEASE);
}
static inline void st_sc(int64_t *c, int64_t i, int64_t v) { __atomic_store_n(c + i, v, SC); }
static inline int cas(int64_t *c, int64_t i, int64_t expected, int64_t v) {
    return __atomic_compare_exchange_n(c + i, &expected, v, 0, SC, SC);
}

#define PTR(a) ((void *)(intptr_t)(a))

static int run_row_c(const int64_t *row, const int64_t *fns, int64_t xa, int64_t ya,
                     int64_t ra, int64_t stream, int64_t scratch, int64_t buf) {
    if (row[PRIM] == 0) return ((fn2)(intptr_t)row[ACT_FN])(row[ARGS], row[ACT_N]);
    fn2 set_handle = (fn2)(intptr_t)fns[SET_HANDLE];
    int st = set_handle(row[SRC_MEM], xa + row[SRC_OFF]);
    int64_t ch_bytes = row[CH_BYTES], rows = row[CH_ROWS], stride = row[CH_STRIDE];
    int64_t out = ya + row[CH_OFF];
    if (ch_bytes > 0) {
        if (row[CH_COPY_IN])
            for (int64_t r = 0; r < rows; r++)
                memcpy(PTR(buf + r * ch_bytes), PTR(out + r * stride), ch_bytes);
        st |= set_handle(row[DST_MEM], buf);
    } else {
        st |= set_handle(row[DST_MEM], ya + row[DST_OFF]);
    }
    if (row[RES_MEM]) st |= set_handle(row[RES_MEM], ra + row[DST_OFF]);
    if (row[SP_MEM]) st |= set_handle(row[SP_MEM], scratch);
    if (st != 0) return st;
    st = ((fn4)(intptr_t)fns[EXECUTE])(row[PRIM], stream, row[NARGS], row[ARGS]);
    if (st == 0) st = ((fn1)(intptr_t)fns[WAIT])(stream);
    if (st == 0 && row[ACT_FN])
        st = ((fn2)(intptr_t)row[ACT_FN])(ch_bytes > 0 ? buf : ya + row[DST_OFF], row[ACT_N]);
    if (st == 0 && ch_bytes > 0)
        for (int64_t r = 0; r < rows; r++)
            memcpy(PTR(out + r * stride), PTR(buf + r * ch_bytes), ch_bytes);
    return st;
}

/* -- tracing (diagnostics: benchmarks/split_balance.py) ------------------------------------- */
static int64_t *TRACE = NULL;
static int64_t TRACE_CAP = 0, TRACE_N = 0;
static PyObject *TRACE_OBJ = NULL;
static void trace_rec(int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t *t = __atomic_load_n(&TRACE, ACQ);
    if (t == NULL) return;
    int64_t k = __atomic_fetch_add(&TRACE_N, 4, SC);
    if (k + 4 > TRACE_CAP) return;
    t[k] = a; t[k + 1] = b; t[k + 2] = c; t[k + 3] = d;
}
static int64_t claim(int64_t *ctrl, int from_back) {
    int64_t at = L(CLAIM_);
    for (;;) {
        int64_t word = ld_acq(ctrl, at), front = word & 0xFFFFFFFF, back = word >> 32;
        int64_t nw, index;
        if (front >= back) return -1;
        if (from_back) { nw = front | ((back - 1) << 32); index = back - 1; }
        else { nw = (front + 1) | (back << 32); index = front; }
        if (cas(ctrl, at, word, nw)) return index;
    }
}

static void run_slot(int64_t *ctrl, const int64_t *jobs, const int64_t *fns, int64_t slot,
                     int from_back) {
    int64_t mine = L(HELPERS_ + slot);
    int64_t stream = ctrl[mine + H_STREAM], scratch = ctrl[mine + H_SCRATCH];
    int64_t buf = ctrl[mine + H_BUF];
    for (;;) {
        int64_t i = claim(ctrl, from_back);
        if (i < 0) return;
        int64_t t0 = TRACE ? CYCLES() : 0;
        int st = run_row_c(jobs + i * NF, fns, ld_acq(ctrl, L(XA_)), ld_acq(ctrl, L(YA_)),
                           ld_acq(ctrl, L(RA_)), stream, scratch, buf);
        if (TRACE) trace_rec(slot, i, t0, CYCLES());
        if (st != 0) cas(ctrl, L(ERROR_), 0, st);
        __atomic_fetch_add(ctrl + L(FINISHED_), 1, __ATOMIC_SEQ_CST);
    }
}

static int64_t relax(const int64_t *fns, int64_t last_yield) {
    PAUSE();
    int64_t now = CYCLES();
    if (now - last_yield > fns[YIELD_EVERY]) { ((fn0)(intptr_t)fns[YIELD])(); return now; }
    return last_yield;
}

static int64_t wait_finished_c(int64_t *ctrl, const int64_t *fns) {
    int64_t n = ld_acq(ctrl, L(NPARTS_)), start = CYCLES(), last_yield = start;
    while (ld_acq(ctrl, L(FINISHED_)) < n) {
        if (CYCLES() - start > fns[SPIN]) return PENDING;
        last_yield = relax(fns, last_yield);
    }
    return ld_acq(ctrl, L(ERROR_));
}

static int64_t caller_c(int64_t *ctrl, int64_t *jobs, const int64_t *fns, const int64_t *table,
                        int64_t n, int64_t xa, int64_t ya, int64_t ra, int64_t helpers) {
    if (TRACE) trace_rec(-1, n, CYCLES(), table[PRIM]);
    memcpy(jobs, table, (size_t)(n * NF) * sizeof(int64_t));
    ctrl[L(XA_)] = xa; ctrl[L(YA_)] = ya; ctrl[L(RA_)] = ra;
    ctrl[L(NPARTS_)] = n; ctrl[L(FINISHED_)] = 0; ctrl[L(ERROR_)] = 0;
    st_rel(ctrl, L(CLAIM_), n << 32);
    st_sc(ctrl, L(SEQ_), ctrl[L(SEQ_)] + 1);
    int woke = 0;
    for (int64_t k = 0; k < helpers; k++)
        if (ld_sc(ctrl, L(HELPERS_ + k) + H_SLEEPING)
            && cas(ctrl, L(HELPERS_ + k) + H_SLEEPING, 1, 0)) woke = 1;
    if (woke) futex_wake(ctrl + L(SEQ_));
    run_slot(ctrl, jobs, fns, helpers, 0);
    return wait_finished_c(ctrl, fns);
}

static int64_t helper_c(int64_t *ctrl, const int64_t *jobs, const int64_t *fns, int64_t k,
                        int64_t seen) {
    int64_t mine = L(HELPERS_ + k), start = CYCLES(), last_yield = start;
    for (;;) {
        if (ld_acq(ctrl, L(STOP_))) return -1;
        int64_t seq = ld_acq(ctrl, L(SEQ_));
        if (seq != seen) {
            seen = seq;
            run_slot(ctrl, jobs, fns, k, 1);
            start = last_yield = CYCLES();
        } else if (CYCLES() - start > fns[SPIN]) {
            /* sleep until a caller posts a job (it sees the flag and wakes the futex) */
            st_sc(ctrl, mine + H_SLEEPING, 1);
            if (ld_sc(ctrl, L(SEQ_)) == seen && !ld_sc(ctrl, L(STOP_)))
                futex_wait(ctrl + L(SEQ_), seen);
            st_sc(ctrl, mine + H_SLEEPING, 0);
            start = last_yield = CYCLES();
        } else {
            last_yield = relax(fns, last_yield);
        }
    }
}

/* -- argument parsing ---------------------------------------------------------------------- */

static int64_t *i64(PyObject *o, npy_intp min_size, const char *what) {
    if (!PyArray_Check(o) || PyArray_TYPE((PyArrayObject *)o) != NPY_INT64
        || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o)
        || PyArray_SIZE((PyArrayObject *)o) < min_size) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous int64 array of at least %zd "
                     "elements", what, (Py_ssize_t)min_size);
        return NULL;
    }
    return (int64_t *)PyArray_DATA((PyArrayObject *)o);
}

static int addr(PyObject *o, int64_t *out, const char *what) {
    if (!PyArray_Check(o) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous array", what);
        return -1;
    }
    *out = (int64_t)(intptr_t)PyArray_DATA((PyArrayObject *)o);
    return 0;
}

static int ints(PyObject *const *args, Py_ssize_t n, int64_t *out) {
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(args[i]);
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

#define NARGS_CHECK(name, want) \
    if (nargs != (want)) { \
        PyErr_Format(PyExc_TypeError, name "() takes %d arguments (%zd given)", (want), nargs); \
        return NULL; }

static PyObject *py_run_row(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("run_row", 8)
    int64_t *row = i64(args[0], NF, "row"), *fns = i64(args[1], 3, "fns"), v[6];
    if (!row || !fns || ints(args + 2, 6, v)) return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = run_row_c(row, fns, v[0], v[1], v[2], v[3], v[4], v[5]);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(st);
}

static PyObject *py_run_row_arrays(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("run_row_arrays", 7)
    int64_t *row = i64(args[0], NF, "row"), *fns = i64(args[1], 3, "fns"), x, y, v[3];
    if (!row || !fns || addr(args[2], &x, "x") || addr(args[3], &y, "y") || ints(args + 4, 3, v))
        return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = run_row_c(row, fns, x, y, 0, v[0], v[1], v[2]);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(st);
}

static int pool_args(PyObject *const *args, int64_t **ctrl, int64_t **jobs, int64_t **fns) {
    *ctrl = i64(args[0], L(HELPERS_ + 16), "ctrl");
    *jobs = *ctrl ? i64(args[1], NF, "jobs") : NULL;
    *fns = *jobs ? i64(args[2], YIELD_EVERY + 1, "fns") : NULL;
    return *fns ? 0 : -1;
}

static int64_t *table_of(PyObject *o, PyObject *jobs, int64_t *n) {
    int64_t *t = i64(o, 0, "table");
    if (t == NULL) return NULL;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_NDIM(a) != 2 || PyArray_DIM(a, 1) != NF
        || PyArray_SIZE(a) > PyArray_SIZE((PyArrayObject *)jobs)) {
        PyErr_SetString(PyExc_TypeError, "table must be (n, NF) with n at most the job rows");
        return NULL;
    }
    *n = PyArray_DIM(a, 0);
    return t;
}

static PyObject *py_caller(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("caller", 8)
    int64_t *ctrl, *jobs, *fns, n, v[4], st;
    if (pool_args(args, &ctrl, &jobs, &fns)) return NULL;
    int64_t *table = table_of(args[3], args[1], &n);
    if (!table || ints(args + 4, 4, v)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = caller_c(ctrl, jobs, fns, table, n, v[0], v[1], v[2], v[3]);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(st);
}

static PyObject *py_caller_arrays(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("caller_arrays", 7)
    int64_t *ctrl, *jobs, *fns, n, x, y, h, st;
    if (pool_args(args, &ctrl, &jobs, &fns)) return NULL;
    int64_t *table = table_of(args[3], args[1], &n);
    if (!table || addr(args[4], &x, "x") || addr(args[5], &y, "y") || ints(args + 6, 1, &h))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = caller_c(ctrl, jobs, fns, table, n, x, y, 0, h);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(st);
}

static PyObject *py_cont(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("cont", 4)
    int64_t *ctrl, *jobs, *fns, h, st;
    if (pool_args(args, &ctrl, &jobs, &fns) || ints(args + 3, 1, &h)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    run_slot(ctrl, jobs, fns, h, 0);
    st = wait_finished_c(ctrl, fns);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(st);
}

static PyObject *py_wait_finished(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("wait_finished", 2)
    int64_t *ctrl = i64(args[0], L(HELPERS_ + 16), "ctrl"), *fns, st;
    fns = ctrl ? i64(args[1], YIELD_EVERY + 1, "fns") : NULL;
    if (!fns) return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = wait_finished_c(ctrl, fns);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(st);
}

static PyObject *py_helper(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("helper", 5)
    int64_t *ctrl, *jobs, *fns, v[2], r;
    if (pool_args(args, &ctrl, &jobs, &fns) || ints(args + 3, 2, v)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    r = helper_c(ctrl, jobs, fns, v[0], v[1]);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(r);
}


/* -- the bound job: one native entry from a launcher to the finished job ------------------ */

static PyObject *POOL = NULL;  /* register(): the process pool's tuple, or NULL */
static __thread int PINNED = 0;  /* try_job() ran on this thread: its oneDNN is pinned */
static PyObject *S_ACQUIRE, *S_RELEASE, *S_FREE, *S_QUEUE, *S_READY, *S_NOTIFY, *S_GATE;

enum { P_CTRL, P_JOBS, P_FNS, P_HELPERS, P_LOCK, P_BUDGET, P_BUDGET_LOCK, P_SLOTS, P_SIZE };

static int call_bool(PyObject *o, PyObject *name, PyObject *arg) {  /* o.name(arg) is True */
    PyObject *r = arg ? PyObject_CallMethodOneArg(o, name, arg)
                      : PyObject_CallMethodNoArgs(o, name);
    if (r == NULL) return -1;
    int t = r == Py_True;
    Py_DECREF(r);
    return t;
}

static int call_none(PyObject *o, PyObject *name) {
    PyObject *r = PyObject_CallMethodNoArgs(o, name);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* parallel.try_reserve / parallel.release on the budget's _State (its lock, free, queue and
   ready condition), with the GIL held: 1 taken, 0 not, -1 error */
static int budget_take(PyObject *budget, PyObject *lock, int64_t slots) {
    if (call_bool(lock, S_ACQUIRE, NULL) < 0) return -1;
    PyObject *f = PyObject_GetAttr(budget, S_FREE);
    int64_t free_ = f ? PyLong_AsLongLong(f) : -1;
    Py_XDECREF(f);
    int taken = 0;
    if (!PyErr_Occurred() && free_ >= slots) {
        PyObject *v = PyLong_FromLongLong(free_ - slots);
        taken = v && PyObject_SetAttr(budget, S_FREE, v) == 0;
        Py_XDECREF(v);
    }
    int failed = PyErr_Occurred() != NULL;
    if (call_none(lock, S_RELEASE) < 0 || failed) return -1;
    return taken;
}

static int budget_give(PyObject *budget, PyObject *lock, int64_t slots) {
    if (call_bool(lock, S_ACQUIRE, NULL) < 0) return -1;
    PyObject *f = PyObject_GetAttr(budget, S_FREE), *v = NULL, *q = NULL;
    int64_t free_ = f ? PyLong_AsLongLong(f) : -1;
    if (!PyErr_Occurred()) v = PyLong_FromLongLong(free_ + slots);
    if (v && PyObject_SetAttr(budget, S_FREE, v) == 0) q = PyObject_GetAttr(budget, S_QUEUE);
    if (q && PyObject_IsTrue(q) == 1) {  /* a parallel_for's helper may wait for a slot */
        PyObject *ready = PyObject_GetAttr(budget, S_READY), *n = PyLong_FromLongLong(slots);
        PyObject *r = ready && n ? PyObject_CallMethodOneArg(ready, S_NOTIFY, n) : NULL;
        Py_XDECREF(r); Py_XDECREF(n); Py_XDECREF(ready);
    }
    Py_XDECREF(f); Py_XDECREF(v); Py_XDECREF(q);
    int failed = PyErr_Occurred() != NULL;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    int released = call_none(lock, S_RELEASE);
    PyErr_Restore(et, ev, tb);
    return failed || released < 0 ? -1 : 0;
}

/* Run the job of ``table`` on the registered pool if it is free now: 1 ran, 0 not (the
   caller takes its other path), -1 an exception is set (oneDNN's status as RuntimeError) */
static int try_job(PyObject *table_obj, int64_t scratch, int64_t buf, PyObject *gate,
                   int64_t xa, int64_t ya, int64_t ra) {
    if (POOL == NULL || !PINNED) return 0;
    if (gate != NULL) {
        PyObject *on = PyDict_GetItemWithError(gate, S_GATE);  /* borrowed */
        if (on == NULL) return PyErr_Occurred() ? -1 : 0;
        int t = PyObject_IsTrue(on);
        if (t <= 0) return t;
    }
    PyObject *pool = POOL;
    int64_t *ctrl = (int64_t *)PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(pool, P_CTRL));
    int64_t *jobs = (int64_t *)PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(pool, P_JOBS));
    int64_t *fns = (int64_t *)PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(pool, P_FNS));
    int64_t n, helpers = PyLong_AsLongLong(PyTuple_GET_ITEM(pool, P_HELPERS));
    int64_t slots = PyLong_AsLongLong(PyTuple_GET_ITEM(pool, P_SLOTS));
    PyObject *lock = PyTuple_GET_ITEM(pool, P_LOCK), *budget = PyTuple_GET_ITEM(pool, P_BUDGET);
    PyObject *budget_lock = PyTuple_GET_ITEM(pool, P_BUDGET_LOCK);
    int64_t *table = table_of(table_obj, PyTuple_GET_ITEM(pool, P_JOBS), &n);
    if (table == NULL) return -1;
    if (scratch > ctrl[L(STOP_) + R_SCRATCH] || buf > ctrl[L(STOP_) + R_BUF]) return 0;
    Py_INCREF(pool);  /* alive while the GIL is released, whatever register() does meanwhile */
    int got = call_bool(lock, S_ACQUIRE, Py_False);
    if (got <= 0) { Py_DECREF(pool); return got; }
    got = slots ? budget_take(budget, budget_lock, slots) : 1;
    if (got <= 0) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        call_none(lock, S_RELEASE);
        PyErr_Restore(et, ev, tb);
        Py_DECREF(pool);
        return got;
    }
    int64_t st;
    Py_BEGIN_ALLOW_THREADS
    st = caller_c(ctrl, jobs, fns, table, n, xa, ya, ra, helpers);
    while (st == PENDING) {  /* a helper's part still runs: it may have been descheduled */
        struct timespec t = {0, 50000};
        nanosleep(&t, NULL);
        st = wait_finished_c(ctrl, fns);
    }
    Py_END_ALLOW_THREADS
    int failed = slots ? budget_give(budget, budget_lock, slots) : 0;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    failed |= call_none(lock, S_RELEASE);
    if (et != NULL) PyErr_Restore(et, ev, tb);
    Py_DECREF(pool);
    if (failed) return -1;
    if (st != 0) {
        PyErr_Format(PyExc_RuntimeError, "oneDNN dnnl_primitive_execute failed with status %lld",
                     (long long)st);
        return -1;
    }
    return 1;
}

static PyObject *py_register(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("register", 1)
    PyObject *p = args[0];
    if (p != Py_None) {
        int64_t *c, *j, *f;
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != P_SIZE) {
            PyErr_SetString(PyExc_TypeError, "register() takes a pool tuple or None");
            return NULL;
        }
        PyObject *const *items = &PyTuple_GET_ITEM(p, 0);
        if (pool_args(items, &c, &j, &f)) return NULL;
        if (!PyLong_Check(items[P_HELPERS]) || !PyLong_Check(items[P_SLOTS])) {
            PyErr_SetString(PyExc_TypeError, "register(): helpers and slots must be ints");
            return NULL;
        }
        Py_INCREF(p);
    } else {
        p = NULL;
    }
    PyObject *old = POOL;
    POOL = p;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *py_forget(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("forget", 0)
    POOL = NULL;  /* a forked child: the parent's pool (its reference leaks on purpose) */
    Py_RETURN_NONE;
}


static PyObject *py_wake(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("wake", 1)
    int64_t *ctrl = i64(args[0], L(HELPERS_ + 16), "ctrl");
    if (!ctrl) return NULL;
    __atomic_fetch_add(ctrl + L(SEQ_), 1, SC);
    futex_wake(ctrl + L(SEQ_));
    Py_RETURN_NONE;
}

static PyObject *py_try_job(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("try_job", 6)
    int64_t v[5];
    if (ints(args + 1, 5, v)) return NULL;
    PINNED = 1;  /* the caller pinned this thread (its contract) */
    int r = try_job(args[0], v[0], v[1], NULL, v[2], v[3], v[4]);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

static PyObject *py_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("launch", 3)
    PyObject *ctx = args[0];
    int64_t x, y, sizes[2];
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 5
        || !PyDict_Check(PyTuple_GET_ITEM(ctx, 4))) {
        PyErr_SetString(PyExc_TypeError, "launch() takes (table, scratch, buf, slow, gate)");
        return NULL;
    }
    if (addr(args[1], &x, "x") || addr(args[2], &y, "y")
        || ints(&PyTuple_GET_ITEM(ctx, 1), 2, sizes)) return NULL;
    int r = try_job(PyTuple_GET_ITEM(ctx, 0), sizes[0], sizes[1], PyTuple_GET_ITEM(ctx, 4),
                    x, y, 0);
    if (r < 0) return NULL;
    if (r == 0) return PyObject_Vectorcall(PyTuple_GET_ITEM(ctx, 3), args + 1, 2, NULL);
    Py_RETURN_NONE;
}

/* -- a shape-checked launcher call: conv.launch_runner's short path, natively --------------- */

static PyObject *S_OUT;

/* ``run(x, residual=None, out=None)`` (or with ``skip``, ``run(x, plan, *residual, out=None)``)
   for ctx = (fast, slow, skip): the launcher fast[x.shape] = (out shape, plain, into) when x and
   out are C-contiguous, aligned, native-byte-order float32 ndarrays of those shapes (out
   writeable), the residual is absent (plain) or out
   itself (into), and they do not overlap; else slow(x, residual, out). */
static PyObject *py_run_launcher(PyObject *self, PyObject *const *args, Py_ssize_t nargsf,
                                 PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 3) {
        PyErr_SetString(PyExc_TypeError, "run_launcher() takes (fast, slow, skip) and x");
        return NULL;
    }
    PyObject *fast = PyTuple_GET_ITEM(args[0], 0), *slow = PyTuple_GET_ITEM(args[0], 1);
    Py_ssize_t skip = PyObject_IsTrue(PyTuple_GET_ITEM(args[0], 2)) ? 1 : 0;
    PyObject *x = args[1], *residual = Py_None, *out = Py_None;
    Py_ssize_t extra = nargs - 2 - skip;  /* positional after x (and the plan) */
    if (extra < 0 || extra > (skip ? 1 : 2)) {
        PyErr_Format(PyExc_TypeError, "conv run() got %zd positional arguments", nargs - 1);
        return NULL;
    }
    if (extra >= 1) residual = args[2 + skip];
    if (extra == 2) out = args[3 + skip];
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i);
            if (PyUnicode_Compare(k, S_OUT) != 0 || extra == 2) {
                PyErr_Format(PyExc_TypeError, "conv run() got an unexpected keyword argument %R",
                             k);
                return NULL;
            }
            out = args[nargs + i];
        }
    }
    if (out != Py_None && Py_TYPE(x) == &PyArray_Type && Py_TYPE(out) == &PyArray_Type
        && PyDict_Check(fast)) {
        PyArrayObject *xa = (PyArrayObject *)x, *oa = (PyArrayObject *)out;
        int nd = PyArray_NDIM(xa);
        PyObject *shape = PyTuple_New(nd);
        if (shape == NULL) return NULL;
        for (int i = 0; i < nd; i++) {
            PyObject *d = PyLong_FromSsize_t(PyArray_DIM(xa, i));
            if (d == NULL) { Py_DECREF(shape); return NULL; }
            PyTuple_SET_ITEM(shape, i, d);
        }
        PyObject *entry = PyDict_GetItemWithError(fast, shape);  /* borrowed */
        Py_DECREF(shape);
        if (entry == NULL && PyErr_Occurred()) return NULL;
        if (entry != NULL && PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) == 3
            && PyArray_TYPE(xa) == NPY_FLOAT32 && PyArray_TYPE(oa) == NPY_FLOAT32
            && PyArray_ISNOTSWAPPED(xa) && PyArray_ISNOTSWAPPED(oa)  /* native float32 */
            && PyArray_ISALIGNED(xa) && PyArray_ISALIGNED(oa) && PyArray_ISWRITEABLE(oa)
            && PyArray_IS_C_CONTIGUOUS(xa) && PyArray_IS_C_CONTIGUOUS(oa)) {
            PyObject *want = PyTuple_GET_ITEM(entry, 0);
            int same = PyTuple_Check(want) && PyTuple_GET_SIZE(want) == PyArray_NDIM(oa);
            for (int i = 0; same && i < PyArray_NDIM(oa); i++)
                same = PyLong_AsSsize_t(PyTuple_GET_ITEM(want, i)) == PyArray_DIM(oa, i);
            if (PyErr_Occurred()) return NULL;
            PyObject *go = !same ? Py_None : residual == Py_None ? PyTuple_GET_ITEM(entry, 1)
                           : residual == out ? PyTuple_GET_ITEM(entry, 2) : Py_None;
            char *x0 = PyArray_BYTES(xa), *o0 = PyArray_BYTES(oa);
            char *x1 = x0 + PyArray_NBYTES(xa), *o1 = o0 + PyArray_NBYTES(oa);
            if (go != Py_None && (x1 <= o0 || o1 <= x0)) {
                PyObject *call[2] = {x, out};
                PyObject *r = PyObject_Vectorcall(go, call, 2, NULL);
                if (r == NULL) return NULL;
                Py_DECREF(r);
                Py_INCREF(out);
                return out;
            }
        }
    }
    PyObject *call[3] = {x, residual, out};
    return PyObject_Vectorcall(slow, call, 3, NULL);
}

static PyObject *py_trace(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("trace", 1)
    int64_t *t = NULL;
    if (args[0] != Py_None && (t = i64(args[0], 4, "trace buffer")) == NULL) return NULL;
    int64_t written = __atomic_exchange_n(&TRACE, (int64_t *)NULL, SC) ? TRACE_N : 0;
    if (written > TRACE_CAP) written = TRACE_CAP;
    Py_XDECREF(TRACE_OBJ);
    TRACE_OBJ = NULL;
    TRACE_N = 0;
    if (t != NULL) {
        Py_INCREF(args[0]);
        TRACE_OBJ = args[0];
        TRACE_CAP = PyArray_SIZE((PyArrayObject *)args[0]) & ~(int64_t)3;
        __atomic_store_n(&TRACE, t, SC);
    }
    return PyLong_FromLongLong(written);
}
static PyObject *py_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NARGS_CHECK("now", 0)
    return PyLong_FromLongLong(CYCLES());
}

#define M(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, NULL}
static PyMethodDef methods[] = {
    M(run_row), M(run_row_arrays), M(caller), M(caller_arrays), M(cont), M(wait_finished),
    M(helper), M(now), M(trace), M(register), M(forget), M(wake), M(try_job),
    M(launch),
    {"run_launcher", (PyCFunction)(void (*)(void))py_run_launcher, METH_FASTCALL | METH_KEYWORDS,
     NULL},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) {
    import_array();
#define INTERN(v, s) if ((v = PyUnicode_InternFromString(s)) == NULL) return NULL
    INTERN(S_ACQUIRE, "acquire"); INTERN(S_RELEASE, "release"); INTERN(S_FREE, "free");
    INTERN(S_QUEUE, "queue"); INTERN(S_READY, "ready"); INTERN(S_NOTIFY, "notify");
    INTERN(S_GATE, "SPIN_POOL"); INTERN(S_OUT, "out");
    return PyModule_Create(&module_def);
}
"""


module = _ccompile.OptionalExtension(SOURCE, "pytfrt_spin_")
"""``module()``: the compiled module, or ``None`` (no C compiler, or ``module.enabled`` set
false: the callers keep Numba)."""
