"""Split points of two-part convolutions that follow the two threads' speeds, call by call.

Private helper of :mod:`pytfrt.backends.cpu._dnnl_conv`.  A convolution split in two (one part
per thread on :mod:`pytfrt.backends.cpu._spin_pool`) takes as long as its slower part.  On a
virtual machine the two virtual CPUs do not run at one speed: traced in ResNet-50 at batch 1
(``benchmarks/split_balance.py``), for stretches of tens of milliseconds -- several whole
calls -- one of them ran every part ~1.4x slower than the other (the host's other guests on
its core), then the other one, then neither; the caller waited for the helper's part, or the
helper for the caller's, ~10% of the jobs' time.  So a job whose convolution has several
*variants* (two-part splits at different points: :data:`SHARES` of the work for the calling
thread) runs the variant closest to the current estimate of the share the caller should take,
and every run updates that estimate.

How, without timers in the fork-join itself: each part of a variant's table has this module's
``stamp`` as its :data:`_spin_pool.ACT_FN` (the function a part calls right after its
primitive, while its output is in cache; a part's own activation function, if any, is called
first, so SiLU parts keep theirs).  ``stamp`` records the part's end (the cycle counter) and
its thread; the second part to end compares the two ends.  Both parts start within a few
microseconds of each other (the helper polls for the job), so the difference of the ends is
the difference of the parts' times; with ``T`` the job's nominal time on one thread (its
multiply-adds at :data:`MACS_PER_US`), running the caller's share ``f`` and ending ``d``
before the helper means the caller could have taken ``f + d / 2T``.  The estimate (one for
the process: the speeds are the virtual CPUs', not the layers') moves a quarter of the way
there (:data:`GAIN`), clamped to the variants' range, and the job's table -- the rows the pool
copies when it publishes the job -- is overwritten with the nearest variant's rows for its next
run (the even split while the estimate is within :data:`DEADBAND` of 0.5).
A job whose two parts ran on one thread (the helper was asleep), or whose parts' ends are
further apart than the whole job's nominal time (a thread was preempted, which no split point
can follow), leaves the estimate alone.
Writing the table is safe: it happens inside the job's last part, before the pool counts it
finished, and the table is read only when its job is published again, by the thread that waits
for that count.

Contract: :func:`stamp_address` is the ``stamp`` function's address, ``0`` without a C
compiler or with :data:`ENABLED` false (the convolutions keep their one even split).
:func:`job_context` builds what one job's variants need; the arrays it returns must stay alive
as long as the job table.  :func:`share` / :func:`set_share` read and set the process's
estimate (tests, benchmarks).  The estimate is a plain shared double: one job runs on the pool
at a time (its lock), so one thread writes it at a time.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu import _ccompile

ENABLED = True
"""Whether batch-1 two-part convolutions get split variants that follow the threads' speeds
(``False``: one even split, as before)."""
SHARES = (0.375, 0.4375, 0.5, 0.5625, 0.625)
"""The caller's shares of a job's work its variants are made for (the even split included);
the widest measured speed difference, 1.4-1.5x, wants 0.58-0.6."""
MIN_MACS = 10_000_000
"""Fewest multiply-adds of a convolution whose split gets variants (~150 us on one thread):
every split convolution of ResNet-50 but none of MobileNetV3-small, whose peak memory the
variants' primitives took from 1.21x to 1.29x ONNX Runtime's (101 -> 107 MB) for jobs of
10-100 us, where a join's wait is a few microseconds."""
MACS_PER_US = 70_000.0
"""Nominal multiply-adds per microsecond of one thread (ResNet-50's 3x3 and 1x1 parts run at
55-80k alone: an error only scales the step of the estimate)."""
GAIN = 0.25
"""How far the estimate moves towards what the last job measured."""
DEADBAND = 0.05
"""A job keeps its even split while the estimate is within this of 0.5: on a quiet machine
the estimate wanders by a few hundredths (parts of one layer differ a little -- the edge
rows' padding, the residual), and each switch of split costs more than it gains there."""

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define CYCLES() ((int64_t)__rdtsc())
#else
#include <time.h>
static int64_t CYCLES(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
#endif

/* a job's context (int64 words): the live table, its size in bytes, the variant running, the
   stamps of this run, the nominal time, then per variant its table and the caller's share */
enum { J_LIVE, J_BYTES, J_NV, J_CUR, J_COUNT, J_END0, J_END1, J_TID0, J_TID1, J_T, J_VARS };
/* a part's context: its job's context, its index (0: front, the caller's), the part's own
   activation function and its argument */
enum { P_JOB, P_INDEX, P_FN, P_N };
#define ONE 1048576.0

typedef int (*actfn)(int64_t, int64_t);
static double SHARE = 0.5, GAIN = 0.25, DEADBAND = 0.05;

static void update(int64_t *j) {
    int64_t nv = j[J_NV], cur = j[J_CUR];
    double s = SHARE;
    double d = (double)(j[J_END1] - j[J_END0]), t = (double)j[J_T];
    /* not when one thread ran both parts, nor when the ends are further apart than the whole
       job should take (a thread was preempted: no speed a split could follow) */
    if (j[J_TID0] != j[J_TID1] && t > 0 && d <= t && -d <= t) {
        double lo = j[J_VARS + 1] / ONE, hi = j[J_VARS + 2 * (nv - 1) + 1] / ONE;
        double f = j[J_VARS + 2 * cur + 1] / ONE;
        double want = f + d / (2.0 * t);
        if (want < lo) want = lo;
        if (want > hi) want = hi;
        SHARE = s = s + GAIN * (want - s);
    }
    int64_t best = cur;
    double gap = 2.0;
    if (s > 0.5 - DEADBAND && s < 0.5 + DEADBAND) s = 0.5;
    for (int64_t k = 0; k < nv; k++) {
        double g = j[J_VARS + 2 * k + 1] / ONE - s;
        if (g < 0) g = -g;
        if (g < gap) { gap = g; best = k; }
    }
    if (best != cur) {
        memcpy((void *)(intptr_t)j[J_LIVE], (void *)(intptr_t)j[J_VARS + 2 * best],
               (size_t)j[J_BYTES]);
        j[J_CUR] = best;
    }
}

static int stamp(int64_t y, int64_t part) {
    const int64_t *p = (const int64_t *)(intptr_t)part;
    int st = p[P_FN] ? ((actfn)(intptr_t)p[P_FN])(y, p[P_N]) : 0;
    int64_t *j = (int64_t *)(intptr_t)p[P_JOB];
    int64_t i = p[P_INDEX] ? 1 : 0;
    j[J_END0 + i] = CYCLES();
    j[J_TID0 + i] = (int64_t)(intptr_t)pthread_self();
    if (__atomic_add_fetch(j + J_COUNT, 1, __ATOMIC_SEQ_CST) >= 2) {
        j[J_COUNT] = 0;
        update(j);
    }
    return st;
}

static PyObject *address(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong((long long)(intptr_t)&stamp);
}
static PyObject *get_share(PyObject *self, PyObject *unused) {
    return PyFloat_FromDouble(SHARE);
}
static PyObject *set_share(PyObject *self, PyObject *args) {
    double s, g, d;
    if (!PyArg_ParseTuple(args, "ddd", &s, &g, &d)) return NULL;
    SHARE = s; GAIN = g; DEADBAND = d;
    Py_RETURN_NONE;
}
static PyMethodDef methods[] = {
    {"address", address, METH_NOARGS, NULL},
    {"share", get_share, METH_NOARGS, NULL},
    {"set_share", set_share, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { return PyModule_Create(&module); }
"""

_module = _ccompile.OptionalExtension(SOURCE, "pytfrt_part_balance_")

J_LIVE, J_BYTES, J_NV, J_CUR, J_COUNT, J_END0, J_END1, J_TID0, J_TID1, J_T, J_VARS = range(11)
P_JOB, P_INDEX, P_FN, P_N = range(4)
ONE = 1 << 20
"""Fixed-point unit of the shares in a job's context."""


def stamp_address() -> int:
    """The address of ``int stamp(int64 y, int64 part)`` (``0``: no balancing)."""
    if not ENABLED:
        return 0
    mod = _module()
    if mod is None:
        return 0
    mod.set_share(mod.share(), GAIN, DEADBAND)  # read when a job is built
    return int(mod.address())


def share() -> float:
    """The process's current estimate of the caller's share (0.5 without the module)."""
    mod = _module()
    return 0.5 if mod is None else float(mod.share())


def set_share(value: float) -> None:
    """Set the estimate (and :data:`GAIN`, :data:`DEADBAND`): tests and benchmarks start from
    a known state."""
    mod = _module()
    if mod is not None:
        mod.set_share(float(value), float(GAIN), float(DEADBAND))


def job_context(live: np.ndarray, variants: list[tuple[float, np.ndarray]], current: int,
                nominal_cycles: float, act_field: int, arg_field: int
                ) -> list[np.ndarray]:
    """Wire the two-row tables ``variants`` (``(caller's share, table)``, shares ascending;
    each ``(2, NF)`` int64, C-contiguous) for balancing: each row's activation function and
    argument (fields ``act_field`` and ``arg_field``) move into a part context and the row calls
    ``stamp`` instead; ``live`` (the table the pool is given) gets a copy of variant
    ``current``.  Returns the arrays that must outlive the tables (the job's and parts'
    contexts).  Requires :func:`stamp_address` to be nonzero."""
    fn = stamp_address()
    assert fn and live.shape == variants[0][1].shape and live.shape[0] == 2
    job = np.zeros(J_VARS + 2 * len(variants), np.int64)
    job[J_LIVE] = live.ctypes.data
    job[J_BYTES] = live.nbytes
    job[J_NV] = len(variants)
    job[J_CUR] = current
    job[J_T] = int(nominal_cycles)
    keep = [job]
    for k, (share_k, table) in enumerate(variants):
        job[J_VARS + 2 * k] = table.ctypes.data
        job[J_VARS + 2 * k + 1] = round(share_k * ONE)
        for i in range(2):
            part = np.array([job.ctypes.data, i, table[i, act_field], table[i, arg_field]],
                            np.int64)
            table[i, act_field] = fn
            table[i, arg_field] = part.ctypes.data
            keep.append(part)
    live[:] = variants[current][1]
    return keep
