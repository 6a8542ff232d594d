"""Fork-join of oneDNN primitive parts on GIL-free helper threads that spin between jobs.

Private helper of :mod:`pytfrt.backends.cpu._dnnl_conv`.  A convolution split into parts (one
per thread) used to be run by :func:`pytfrt.host.parallel.parallel_for`: the caller
wakes a Python helper thread through a condition variable, the helper needs the GIL to run
its part's Python, and the caller sleeps on another condition variable until the helper is
done.  Measured in ResNet-50 at batch 1 (53 split convolutions, 2 cores): the helper started
its part ~40 us after the caller and the caller waited ~37 us after its own part, per
convolution -- two futex wake-ups of an idle virtual CPU and GIL hand-offs, ~4 ms of a 21 ms
call.  Here the whole fork-join is native code:

* a job is a table of parts (:data:`NF` int64 fields each: the primitive, its argument array,
  the memory objects whose data handles change per call, byte offsets; channel parts also
  the copy between a per-thread buffer and their output channels) plus the call's source,
  destination and residual addresses;
* :meth:`Pool.run` (the caller, GIL released once) publishes the job, runs parts claimed from the
  front of the table, then waits for the parts helpers claimed from the back by polling a
  counter;
* each helper thread polls for the next job in a GIL-free native loop for up to
  :data:`SPIN_US` after its last part (so consecutive operations of one model call find it
  awake), then sleeps until the next job's caller wakes it (the C loops: on a futex on the
  job sequence word, natively; the Numba loops: on a condition variable, from :meth:`Pool.run`).

With the C loops a whole job is also one native call, lock and budget included
(:func:`try_job`; :func:`bound` makes a launcher of it that falls back to a Python path when
the pool cannot take the job now): no Python frame between a convolution's launcher and its
finished job.

A part is claimed by exactly one thread (one atomic word holds the front and back of the
unclaimed range), so the caller never waits for a helper that has not started: it claims the
helper's parts itself.  It only waits for a part a helper is running (polling for
:data:`SPIN_US`, then sleeping 50 us at a time), as :mod:`pytfrt.host.parallel` does.

The native loops are C (:mod:`pytfrt.backends.cpu._spin_native`, compiled once per machine:
no Numba in the process); without a C compiler they are the Numba functions of this module, on
:mod:`pytfrt.backends.cpu._native`'s intrinsics (:func:`loops` picks).

A part may also be a *call part* (:data:`NF`, :func:`call_table`): a native function called
with a context address and the part's index, for kernels that are not oneDNN primitives (the
attention's (batch, head) shards, :mod:`pytfrt.backends.cpu.attention`).

Contract: :func:`pool` gives the process's :class:`Pool` (its helpers are started then:
``parallel.num_threads() - 1`` of them, at most 15; a forked child makes its own).  A caller
takes :attr:`Pool.lock` without blocking (if another thread holds it, or the process's thread
budget has not a free helper slot per pool helper -- :class:`BudgetLock`, the caller uses
another path: the pool serves one job at a time), calls :meth:`Pool.reserve` and :meth:`Pool.run` on
its own thread, and releases the lock.  Statuses are oneDNN's; the first nonzero one is
returned.  Nothing checks a table: its addresses must be valid for the whole job.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import time
from typing import Any

import numpy as np

from pytfrt.backends.cpu import _spin_native
from pytfrt.backends.cpu._jit import numba
from pytfrt.host import parallel

nv: Any = None
""":mod:`pytfrt.backends.cpu._native` (which imports Numba), set by :func:`_numba_loops` before
the Numba versions of the loops first run."""

# fields of a part (one row of a job table)
PRIM, NARGS, ARGS, SRC_MEM, SRC_OFF, DST_MEM, DST_OFF, RES_MEM, SP_MEM = range(9)
CH_OFF, CH_BYTES, CH_ROWS, CH_STRIDE, CH_COPY_IN = range(9, 14)
"""Channel parts (``CH_BYTES > 0``) write ``CH_ROWS`` rows of ``CH_BYTES`` to the running
thread's part buffer; row ``r`` is then copied to ``dst + CH_OFF + r * CH_STRIDE`` (and, with
``CH_COPY_IN``, first copied from there into the buffer: the ``sum`` post-op's residual)."""
ACT_FN, ACT_N = 14, 15
"""A part with ``ACT_FN`` (the address of an ``int f(float *y, int64 n)``, e.g.
:func:`pytfrt.backends.cpu._silu.address`) finally applies it in place to its ``ACT_N``
output elements: at ``dst + DST_OFF``, or for a channel part its buffer before the copy."""
NF = 16
"""Fields per part.  A *call part* has ``PRIM`` 0: the thread that claims it runs
``int ACT_FN(int64 ARGS, int64 ACT_N)`` (a native function, its context address and the
part's index; nonzero is an error status) and nothing else -- how a kernel that is not a
oneDNN primitive (the attention's (batch, head) shards, :func:`call_table`) runs its shards
on these helpers."""


def call_table(fn: int, context: int, n: int) -> np.ndarray:
    """A job table of ``n`` call parts: part ``i`` runs ``fn(context, i)`` (see :data:`NF`)."""
    table = np.zeros((n, NF), np.int64)
    table[:, ACT_FN] = fn
    table[:, ARGS] = context
    table[:, ACT_N] = np.arange(n)
    return table


MAX_PARTS = 64
_LINE = 8  # int64 words per 64-byte cache line: every shared word on its own line
# control words (index into the control array, in units of lines)
_SEQ, _CLAIM, _FINISHED, _ERROR, _STOP, _NPARTS, _XA, _YA, _RA = range(9)
_HELPERS = 9
"""Line of the first thread slot: slot ``k`` (line ``_HELPERS + k``) holds a thread's stream,
scratchpad address, part-buffer address and whether it sleeps (``_H_*`` words).  Slots
``0 .. helpers - 1`` are the helpers', slot ``helpers`` the caller's (whichever thread holds
:attr:`Pool.lock`: one at a time)."""
_H_STREAM, _H_SCRATCH, _H_BUF, _H_SLEEPING = range(4)
_R_SCRATCH, _R_BUF = 1, 2
"""Words of the :data:`_STOP` line holding the scratchpad and part-buffer bytes every thread
slot has (:meth:`Pool.reserve`; the native entry :func:`bound` runs only jobs that fit)."""
_MAX_HELPERS = 15

SPIN_US = 300
"""How long a helper polls for the next job after its last part, and how long the caller polls
for a helper's part before sleeping between checks (microseconds)."""
PENDING = -1
"""What :func:`_caller` returns while a helper's part is still running."""
YIELD_US = 20
"""While polling, a thread yields its CPU (``sched_yield``) this often (microseconds): on an
overloaded machine a polling thread sharing a core with a thread that has work must not keep
it off the core for a whole scheduler time slice."""
_EXECUTE, _WAIT, _SET_HANDLE, _YIELD = range(4)  # the C functions' addresses in ``fns``
_SPIN, _YIELD_EVERY = 4, 5  # ``fns`` also holds the polling budgets, in cycles


@numba.njit(nogil=True, cache=True)
def _line(k: int) -> int:
    return k * _LINE


@numba.njit(nogil=True, cache=True)
def _claim(ctrl: np.ndarray, from_back: bool) -> int:
    """Claim an unclaimed part (``-1``: none left).  ``ctrl[_CLAIM]`` holds ``front |
    back << 32``: parts ``[front, back)`` are unclaimed."""
    at = _line(_CLAIM)
    while True:
        word = nv.load_acquire(ctrl, at)
        front = word & 0xFFFFFFFF
        back = word >> 32
        if front >= back:
            return -1
        if from_back:
            new = front | ((back - 1) << 32)
            index = back - 1
        else:
            new = (front + 1) | (back << 32)
            index = front
        if nv.compare_exchange(ctrl, at, word, new):
            return index


@numba.njit(nogil=True, cache=True)
def _run_part(ctrl: np.ndarray, jobs: np.ndarray, fns: np.ndarray, i: int, stream: int,
              scratch: int, buf: int) -> int:
    """Run part ``i`` of the posted job on this thread (its oneDNN stream, scratchpad and
    part buffer); returns oneDNN's status."""
    return _run_row_nb(jobs[i], fns, nv.load_acquire(ctrl, _line(_XA)),
                   nv.load_acquire(ctrl, _line(_YA)), nv.load_acquire(ctrl, _line(_RA)),
                   stream, scratch, buf)


@numba.njit(nogil=True, cache=True)
def _run_row_nb(row: np.ndarray, fns: np.ndarray, xa: int, ya: int, ra: int, stream: int,
            scratch: int, buf: int) -> int:
    """Run the part described by ``row`` (:data:`NF` fields) for these source, destination
    and residual addresses with this thread's oneDNN stream, scratchpad and part buffer
    (``fns``: the addresses of ``dnnl_primitive_execute``, ``dnnl_stream_wait`` and
    ``dnnl_memory_set_data_handle``, in that order); returns oneDNN's status.  Also the
    whole call of an unsplit convolution (:mod:`pytfrt.backends.cpu._dnnl_conv`): one
    GIL-free native call instead of six ctypes calls.  A call part (``PRIM`` 0) is
    ``ACT_FN(ARGS, ACT_N)`` instead (see :data:`NF`)."""
    if row[PRIM] == 0:
        return nv.call2(row[ACT_FN], row[ARGS], row[ACT_N])
    set_handle = fns[_SET_HANDLE]
    st = nv.call2(set_handle, row[SRC_MEM], xa + row[SRC_OFF])
    ch_bytes = row[CH_BYTES]
    rows, stride = row[CH_ROWS], row[CH_STRIDE]
    out = ya + row[CH_OFF]
    if ch_bytes > 0:
        if row[CH_COPY_IN]:
            for r in range(rows):
                nv.copy_bytes(buf + r * ch_bytes, out + r * stride, ch_bytes)
        st |= nv.call2(set_handle, row[DST_MEM], buf)
    else:
        st |= nv.call2(set_handle, row[DST_MEM], ya + row[DST_OFF])
    if row[RES_MEM]:
        st |= nv.call2(set_handle, row[RES_MEM], ra + row[DST_OFF])
    if row[SP_MEM]:
        st |= nv.call2(set_handle, row[SP_MEM], scratch)
    if st != 0:
        return st
    st = nv.call4(fns[_EXECUTE], row[PRIM], stream, row[NARGS], row[ARGS])
    if st == 0:
        st = nv.call1(fns[_WAIT], stream)
    if st == 0 and row[ACT_FN]:
        st = nv.call2(row[ACT_FN], buf if ch_bytes > 0 else ya + row[DST_OFF], row[ACT_N])
    if st == 0 and ch_bytes > 0:
        for r in range(rows):
            nv.copy_bytes(out + r * stride, buf + r * ch_bytes, ch_bytes)
    return st


@numba.njit(nogil=True, cache=True)
def _run_row_arrays_nb(row: np.ndarray, fns: np.ndarray, x: np.ndarray, y: np.ndarray,
                   stream: int, scratch: int, buf: int) -> int:
    """:func:`run_row` for the C-contiguous arrays ``x`` and ``y`` (no residual operand):
    the addresses taken natively (``ndarray.ctypes.data`` costs ~1-3 us of Python a call,
    more than this whole dispatch)."""
    return _run_row_nb(row, fns, x.ctypes.data, y.ctypes.data, 0, stream, scratch, buf)


@numba.njit(nogil=True, cache=True)
def _run_claimed(ctrl: np.ndarray, jobs: np.ndarray, fns: np.ndarray, from_back: bool,
                 stream: int, scratch: int, buf: int) -> None:
    """Claim and run parts until none is left, counting each finished one."""
    while True:
        i = _claim(ctrl, from_back)
        if i < 0:
            return
        st = _run_part(ctrl, jobs, fns, i, stream, scratch, buf)
        if st != 0:
            nv.compare_exchange(ctrl, _line(_ERROR), 0, st)
        nv.fetch_add(ctrl, _line(_FINISHED), 1)


@numba.njit(nogil=True, cache=True)
def _relax(fns: np.ndarray, last_yield: int) -> int:
    """One step of a polling loop: a ``pause``, and every :data:`YIELD_US` a
    ``sched_yield``.  Returns the cycle count of the last yield."""
    nv.cpu_pause()
    now = nv.cycles()
    if now - last_yield > fns[_YIELD_EVERY]:
        nv.call0(fns[_YIELD])
        return now
    return last_yield


@numba.njit(nogil=True, cache=True)
def _wait_finished(ctrl: np.ndarray, fns: np.ndarray) -> int:
    """Poll until every part of the job is finished: oneDNN's first error status (0: none),
    or :data:`PENDING` after :data:`SPIN_US`."""
    n = nv.load_acquire(ctrl, _line(_NPARTS))
    start = nv.cycles()
    last_yield = start
    while nv.load_acquire(ctrl, _line(_FINISHED)) < n:
        if nv.cycles() - start > fns[_SPIN]:
            return PENDING
        last_yield = _relax(fns, last_yield)
    return nv.load_acquire(ctrl, _line(_ERROR))


@numba.njit(nogil=True, cache=True)
def _run_slot(ctrl: np.ndarray, jobs: np.ndarray, fns: np.ndarray, slot: int,
              from_back: bool) -> None:
    """:func:`_run_claimed` with the stream and buffers of thread slot ``slot``."""
    mine = _line(_HELPERS + slot)
    _run_claimed(ctrl, jobs, fns, from_back, ctrl[mine + _H_STREAM], ctrl[mine + _H_SCRATCH],
                 ctrl[mine + _H_BUF])


@numba.njit(nogil=True, cache=True)
def _caller(ctrl: np.ndarray, jobs: np.ndarray, fns: np.ndarray, table: np.ndarray,
            xa: int, ya: int, ra: int, helpers: int) -> int:
    """Post the job of ``table``, run the front parts on this thread, wait for the rest.
    Returns the status (see :func:`_wait_finished`), or ``-2 - mask`` right after posting
    when helpers (bits of ``mask``) sleep: the caller wakes them and calls
    :func:`_wait_finished` after :func:`_continue`."""
    n = table.shape[0]
    for i in range(n):
        for f in range(NF):
            jobs[i, f] = table[i, f]
    ctrl[_line(_XA)] = xa
    ctrl[_line(_YA)] = ya
    ctrl[_line(_RA)] = ra
    ctrl[_line(_NPARTS)] = n
    ctrl[_line(_FINISHED)] = 0
    ctrl[_line(_ERROR)] = 0
    nv.store_release(ctrl, _line(_CLAIM), n << 32)
    nv.store_seq_cst(ctrl, _line(_SEQ), ctrl[_line(_SEQ)] + 1)
    sleeping = 0
    for k in range(helpers):
        if nv.load_seq_cst(ctrl, _line(_HELPERS + k) + _H_SLEEPING):
            sleeping |= 1 << k
    if sleeping:
        return -2 - sleeping
    _run_slot(ctrl, jobs, fns, helpers, False)
    return _wait_finished(ctrl, fns)


@numba.njit(nogil=True, cache=True)
def _caller_arrays(ctrl: np.ndarray, jobs: np.ndarray, fns: np.ndarray, table: np.ndarray,
                   x: np.ndarray, y: np.ndarray, helpers: int) -> int:
    """:func:`_caller` for the C-contiguous arrays ``x`` and ``y`` (no residual operand)."""
    return _caller(ctrl, jobs, fns, table, x.ctypes.data, y.ctypes.data, 0, helpers)


@numba.njit(nogil=True, cache=True)
def _continue(ctrl: np.ndarray, jobs: np.ndarray, fns: np.ndarray, helpers: int) -> int:
    """The rest of :func:`_caller` after waking sleeping helpers."""
    _run_slot(ctrl, jobs, fns, helpers, False)
    return _wait_finished(ctrl, fns)


@numba.njit(nogil=True, cache=True)
def _helper(ctrl: np.ndarray, jobs: np.ndarray, fns: np.ndarray, k: int, seen: int) -> int:
    """Helper ``k``'s loop: run the back parts of each new job; after :data:`SPIN_US` without
    one, mark itself sleeping and return the last job seen (``-1``: asked to stop)."""
    mine = _line(_HELPERS + k)
    start = nv.cycles()
    last_yield = start
    while True:
        if nv.load_acquire(ctrl, _line(_STOP)):
            return -1
        seq = nv.load_acquire(ctrl, _line(_SEQ))
        if seq != seen:
            seen = seq
            _run_slot(ctrl, jobs, fns, k, True)
            start = last_yield = nv.cycles()
        elif nv.cycles() - start > fns[_SPIN]:
            nv.store_seq_cst(ctrl, mine + _H_SLEEPING, 1)
            if nv.load_seq_cst(ctrl, _line(_SEQ)) == seen:
                return seen
            nv.store_seq_cst(ctrl, mine + _H_SLEEPING, 0)
        else:
            last_yield = _relax(fns, last_yield)


@numba.njit(nogil=True, cache=True)
def _now() -> int:
    return nv.cycles()


class _NumbaLoops:
    """The Numba versions of :mod:`_spin_native`'s functions (no C compiler)."""

    def __init__(self) -> None:
        global nv
        from pytfrt.backends.cpu import _native

        nv = _native
        self.run_row, self.run_row_arrays = _run_row_nb, _run_row_arrays_nb
        self.caller, self.caller_arrays, self.cont = _caller, _caller_arrays, _continue
        self.wait_finished, self.helper, self.now = _wait_finished, _helper, _now


def _at(k: int) -> int:
    """:func:`_line` for Python code: the index of control line ``k``."""
    return k * _LINE


@functools.cache
def loops() -> Any:
    """The native loops: :mod:`pytfrt.backends.cpu._spin_native`'s C module, or without a C
    compiler the Numba functions of this module (``run_row``, ``run_row_arrays``, ``caller``,
    ``caller_arrays``, ``cont``, ``wait_finished``, ``helper``, ``now``)."""
    return _spin_native.module() or _NumbaLoops()


def __getattr__(name: str) -> Any:
    """``run_row`` and ``run_row_arrays`` (see :func:`_run_row_nb`): :func:`loops`'."""
    if name in ("run_row", "run_row_arrays"):
        fn = getattr(loops(), name)
        globals()[name] = fn
        return fn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


TRACE_FIELDS = 4
"""int64 words per :func:`trace` record."""


def trace(buffer: np.ndarray | None) -> np.ndarray | None:
    """Record every job and part into ``buffer`` (C-contiguous int64, kept alive here until
    the next call) from now on, or stop recording (``None``); returns the records written
    since the previous call, as ``(n, TRACE_FIELDS)`` rows of that call's buffer (``None``
    when there was none, or without the C loops: the Numba loops do not trace).  A job is
    ``(-1, parts, publish time, its first part's PRIM)``, a part ``(thread slot, index, start,
    end)``; times in :func:`_native.cycles` units (:func:`cycles_per_us`), slot ``helpers``
    is the caller's.  Records past the buffer's end are dropped.  For diagnostics
    (``benchmarks/split_balance.py``): call it while no job runs."""
    mod = _spin_native.module()
    if mod is None:
        return None
    global _traced
    previous, _traced = _traced, buffer
    written = int(mod.trace(buffer))
    if previous is None:
        return None
    return previous[:written].reshape(-1, TRACE_FIELDS)


_traced: np.ndarray | None = None


def cycles_per_us() -> float:
    """Rate of the fork-join's clock (:func:`trace`'s times), measured once per process."""
    return _cycles_per_us()


@functools.cache
def _cycles_per_us() -> float:
    """Rate of :func:`_native.cycles` (measured over 20 ms once per process)."""
    now = loops().now
    c0, t0 = now(), time.perf_counter()
    time.sleep(0.02)
    c1, t1 = now(), time.perf_counter()
    return max((c1 - c0) / ((t1 - t0) * 1e6), 1.0)


GRACE_US = 100
"""How long a non-blocking :meth:`BudgetLock.acquire` waits for the budget's slots (yielding
its CPU) before it fails (microseconds)."""


class BudgetLock:
    """:attr:`Pool.lock`: the pool's own lock *and* one helper slot of the process's thread
    budget (:mod:`pytfrt.host.parallel`) per helper, so the pool's native helpers count
    against the same budget as the Python helpers of ``parallel_for``.  A non-blocking
    :meth:`acquire` fails when either is taken (the caller then takes its other path); a
    blocking one waits for both."""

    def __init__(self, slots: int) -> None:
        self._lock = threading.Lock()
        self.slots = max(slots, 0)

    def acquire(self, blocking: bool = True) -> bool:
        if not self._lock.acquire(blocking):
            return False
        if not self.slots or parallel.try_reserve(self.slots):
            return True
        # A helper of the previous operation may be between its last shard and giving its
        # slot back: yield a few times before taking the other path.
        deadline = time.perf_counter() + GRACE_US * 1e-6
        while not parallel.try_reserve(self.slots):
            if not blocking and time.perf_counter() > deadline:
                self._lock.release()
                return False
            time.sleep(0 if not blocking else 50e-6)
        return True

    def release(self) -> None:
        if self.slots:
            parallel.release(self.slots)
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> BudgetLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Pool:
    """The helper threads, the shared control words and the job table (one per process)."""

    def __init__(self, fns: tuple[int, int, int], helpers: int,
                 new_stream: Any) -> None:
        self._loops = loops()
        rate = _cycles_per_us()
        sched_yield = ctypes.CDLL(None).sched_yield
        self.fns = np.array([*fns, ctypes.cast(sched_yield, ctypes.c_void_p).value or 0,
                             int(SPIN_US * rate), int(YIELD_US * rate)], np.int64)
        self.ctrl = np.zeros((_HELPERS + _MAX_HELPERS + 1) * _LINE, np.int64)  # + caller
        self.jobs = np.zeros((MAX_PARTS, NF), np.int64)
        self.helpers = min(helpers, _MAX_HELPERS)
        self.lock = BudgetLock(min(self.helpers, parallel.num_threads() - 1))
        self.wake = threading.Condition(threading.Lock())
        self.scratch: list[np.ndarray] = [np.empty(0, np.uint8)] * (self.helpers + 1)
        self.bufs: list[np.ndarray] = [np.empty(0, np.uint8)] * (self.helpers + 1)
        self._reserved = (-1, -1)
        self._new_stream = new_stream
        self.ctrl[_at(_HELPERS + self.helpers) + _H_STREAM] = new_stream()
        self.reserve(0, 0)
        self.threads = [threading.Thread(target=self._helper_main, args=(k,), daemon=True,
                                         name=f"pytfrt-dnnl-{k}")
                        for k in range(self.helpers)]
        self._ready = threading.Barrier(self.helpers + 1)
        for t in self.threads:
            t.start()
        self._ready.wait()

    def _helper_main(self, k: int) -> None:
        from pytfrt.backends.cpu import _blas

        _blas.pin_thread()
        mine = _at(_HELPERS + k)
        self.ctrl[mine + _H_STREAM] = self._new_stream()
        self._ready.wait()
        seen = int(self.ctrl[_at(_SEQ)])
        while True:
            seen = int(self._loops.helper(self.ctrl, self.jobs, self.fns, k, seen))
            if seen < 0:
                return
            with self.wake:
                while self.ctrl[mine + _H_SLEEPING] and not self.ctrl[_at(_STOP)]:
                    self.wake.wait()

    def reserve(self, scratch: int, buf: int) -> None:
        """Make every thread slot's scratchpad and part buffer at least these sizes in bytes
        (called between jobs, with :attr:`lock` held)."""
        if scratch <= self._reserved[0] and buf <= self._reserved[1]:
            return
        self._reserved = (max(scratch, self._reserved[0]), max(buf, self._reserved[1]))
        self.ctrl[_at(_STOP) + _R_SCRATCH] = self.ctrl[_at(_STOP) + _R_BUF] = 0
        for k in range(self.helpers + 1):
            mine = _at(_HELPERS + k)
            if self.scratch[k].size < scratch + 64:
                self.scratch[k] = np.empty(max(scratch + 64, 1 << 20), np.uint8)
                self.ctrl[mine + _H_SCRATCH] = (self.scratch[k].ctypes.data + 63) & ~63
            if self.bufs[k].size < buf + 64:
                self.bufs[k] = np.empty(max(buf + 64, 1 << 16), np.uint8)
                self.ctrl[mine + _H_BUF] = (self.bufs[k].ctypes.data + 63) & ~63
        self.ctrl[_at(_STOP) + _R_SCRATCH] = min(s.size for s in self.scratch) - 64
        self.ctrl[_at(_STOP) + _R_BUF] = min(b.size for b in self.bufs) - 64

    def run(self, table: np.ndarray, xa: int, ya: int, ra: int) -> int:
        """Run the parts of ``table`` (``(n, NF)`` int64, ``n <= MAX_PARTS``) for these
        source, destination and residual addresses, on this thread (with the caller slot's
        stream and buffers) and the helpers.  Call with :attr:`lock` held after
        :meth:`reserve`.  Returns oneDNN's first nonzero status, or 0."""
        return self._finish(
            self._loops.caller(self.ctrl, self.jobs, self.fns, table, xa, ya, ra, self.helpers))

    def run_arrays(self, table: np.ndarray, x: np.ndarray, y: np.ndarray) -> int:
        """:meth:`run` for the C-contiguous arrays ``x`` and ``y`` (their addresses; no
        residual operand)."""
        return self._finish(
            self._loops.caller_arrays(self.ctrl, self.jobs, self.fns, table, x, y, self.helpers))

    def _finish(self, st: int) -> int:
        """The rest of a job after :func:`_caller` returned ``st``: wake sleeping helpers,
        wait for parts helpers run."""
        if st <= -2:
            sleeping = -2 - st
            with self.wake:
                for k in range(self.helpers):
                    if sleeping >> k & 1:
                        self.ctrl[_at(_HELPERS + k) + _H_SLEEPING] = 0
                self.wake.notify_all()
            st = self._loops.cont(self.ctrl, self.jobs, self.fns, self.helpers)
        while st == PENDING:  # a helper's part still runs: it may have been descheduled
            time.sleep(50e-6)
            st = self._loops.wait_finished(self.ctrl, self.fns)
        return int(st)

    def stop(self) -> None:
        """Ask the helpers to exit (tests; the process's helpers are daemons)."""
        self.ctrl[_at(_STOP)] = 1
        wake = getattr(self._loops, "wake", None)
        if wake is not None:  # the C helpers sleep on a futex
            wake(self.ctrl)
        with self.wake:
            self.wake.notify_all()
        for t in self.threads:
            t.join()


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool(fns: tuple[int, int, int], helpers: int, new_stream: Any) -> Pool | None:
    """The process's pool (made on first use; ``None`` without helpers).  ``fns``: the
    addresses of ``dnnl_primitive_execute``, ``dnnl_stream_wait`` and
    ``dnnl_memory_set_data_handle``; ``new_stream()`` makes a new oneDNN stream (an int
    handle; each thread slot has its own)."""
    global _pool, _unavailable
    if _pool is not None or helpers < 1 or _unavailable:
        return _pool
    with _pool_lock:
        if _pool is None and not _unavailable:
            try:
                made = Pool(fns, helpers, new_stream)
            except (OSError, AttributeError, RuntimeError):  # no sched_yield, no stream
                _unavailable = True
            else:
                _register(made)
                _pool = made
    return _pool


def _register(p: Pool | None) -> None:
    """Make ``p`` the pool of the native entry (:func:`try_job`, :func:`bound`; ``None``:
    none), with the current thread budget (:func:`pytfrt.host.parallel.budget`)."""
    register = getattr(_spin_native.module() if p is None else p._loops, "register", None)
    if register is None:  # the Numba loops: no native entry
        return
    if p is None:
        register(None)
        return
    budget = parallel.budget()
    register((p.ctrl, p.jobs, p.fns, p.helpers, p.lock._lock, budget, budget.lock,
                  p.lock.slots))


_unavailable = False
"""Whether making the pool failed once (callers then keep their Python path)."""


def try_job(table: np.ndarray, scratch: int, buf: int, xa: int, ya: int, ra: int) -> bool:
    """Run the job of ``table`` for these addresses on the process's pool in one native call
    -- the pool's lock and the budget's slots taken without waiting, the job posted, sleeping
    helpers woken, the caller's parts run, the helpers' waited for, slots and lock given back
    -- if that is possible now: the pool exists (:func:`pool`), it has the C loops,
    ``scratch`` and ``buf`` bytes are reserved
    (:meth:`Pool.reserve`), and the lock and the slots are free.  ``False``: nothing ran (the
    caller takes the Python path, :meth:`Pool.run`, or its other one).  Call it only on a
    thread whose oneDNN runs on one OpenMP thread (:func:`pytfrt.backends.cpu._blas.pin_thread`
    has run on it): the native entry notes that, and :func:`bound`'s launchers run jobs only
    on threads where this has been called.

    Raises:
        RuntimeError: a part returned a nonzero status (oneDNN's, named in the message).
    """
    if _pool is None:
        return False
    fn = getattr(_pool._loops, "try_job", None)
    return fn is not None and bool(fn(table, scratch, buf, xa, ya, ra))


def bound(table: np.ndarray, scratch: int, buf: int, slow: Any,
          gate: dict[str, Any]) -> Any:
    """``go(x, y)`` for C-contiguous arrays ``x`` and ``y``: :func:`try_job` of ``table`` for
    their addresses (no residual operand) while ``gate["SPIN_POOL"]`` is true, else (or when
    that does not run it) ``slow(x, y)`` -- with no Python frame between the caller and the
    finished job: ``go`` is the C module's ``launch`` bound to its context (``slow`` itself
    when there are no C loops or more than :data:`MAX_PARTS` parts).  Whatever the table's
    rows point at must stay alive as long as ``go``.  Thread-safe.

    Raises (from ``go``):
        RuntimeError: a part returned a nonzero status.
    """
    mod = _spin_native.module()
    if mod is None or not 0 < len(table) <= MAX_PARTS:
        return slow
    return functools.partial(mod.launch, (table, int(scratch), int(buf), slow, gate))


def _forget_after_fork() -> None:
    global _pool, _pool_lock
    if _pool is not None:
        forget = getattr(_pool._loops, "forget", None)
        if forget is not None:
            forget()  # the native entry stops using the parent's pool
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def native_runner(fast: dict[tuple[int, ...], tuple[tuple[int, ...], Any, Any]],
                  run: Any) -> Any:
    """``run`` (a convolution's ``run(x, residual=None, out=None)``,
    :func:`pytfrt.backends.cpu.conv.launch_runner`) with its short path in C: when ``x`` and
    ``out`` are C-contiguous, aligned float32 ndarrays in the machine's byte order (``out``
    writeable), ``fast[x.shape]`` is ``(out shape, plain,
    into)`` with ``out`` of that shape, the residual is ``None`` (``plain``) or ``out`` itself
    (``into``), that launcher is not ``None`` and ``x`` and ``out`` do not overlap, it calls
    ``launcher(x, out)`` and returns ``out``; every other call is ``run(x, residual, out)``
    (which keeps ``fast`` up to date).  The result's ``kernel`` attribute is the same in the
    form of a compute function, ``kernel(x, plan, *residual, out=None)`` (the plan operand
    ignored).  ``run`` itself (no ``kernel``) without the C module.  Thread-safe as ``run``."""
    mod = _spin_native.module()
    if mod is None:
        return run
    native = functools.partial(mod.run_launcher, (fast, run, False))
    native.kernel = functools.partial(mod.run_launcher, (fast, run, True))  # type: ignore[attr-defined]
    return native
