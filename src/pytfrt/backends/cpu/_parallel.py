"""Intra-op parallelism for the conv kernels: shards pulled by the caller and a small pool.

Private helper of the conv kernels.  ``parallel_for(fn, n)`` runs ``fn(0) .. fn(n - 1)`` (each a
call that releases the GIL: Numba ``nogil`` code, oneDNN GEMMs) on the calling thread *and* on
``workers()`` persistent helper threads, which claim shard indices from a shared counter.  The
caller never waits for a thread that has not started: if the helpers are busy or descheduled
(a loaded machine, other ops running on the executor's threads), the caller simply runs more
shards itself, so the worst wait is one shard, not a whole operation.  That is why the GEMMs
inside a shard are single-threaded (:func:`pytfrt.backends.cpu._blas.sgemm` pins oneDNN's
OpenMP to one thread per calling thread): many small synchronisations of a threaded BLAS are
what a shared 2-core machine punishes most.

``PYTFRT_NUM_THREADS`` sets the total parallelism (default: the CPU count; read at import).
Exceptions in a shard are re-raised in the caller after all claimed shards finish.
Thread-safety: any number of threads may call :func:`parallel_for` at once (they share the
helpers).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable

from pytfrt import config

_lock = threading.Lock()
_queue: deque[_Job] = deque()
_ready = threading.Condition(_lock)
_started = 0


def _threads_from_env() -> int:
    return config.integer("PYTFRT_NUM_THREADS") or os.cpu_count() or 1


_NUM_THREADS = _threads_from_env()
AFFINITY = True
"""Whether helpers claim shards from the back (:meth:`_Job.claim`)."""


def num_threads() -> int:
    """Total threads a parallel loop may use, the caller included (``PYTFRT_NUM_THREADS`` or
    the CPU count, read at import)."""
    return _NUM_THREADS


class _Job:
    """One ``parallel_for``: a shard counter, an in-flight count and the first error."""

    def __init__(self, fn: Callable[[int], None], n: int) -> None:
        self.fn = fn
        self.n = n
        self.next = 0
        self.last = n
        """Shards ``[next, last)`` are unclaimed: the caller takes them from the front, helpers
        from the back (see :meth:`claim`)."""
        self.active = 0
        self.error: BaseException | None = None
        self.done = threading.Condition(threading.Lock())

    def claim(self, from_back: bool) -> int:
        """An unclaimed shard index (``-1``: none left).  The caller claims from the front
        and helpers from the back, so with one part per thread each thread runs the same
        part of consecutive operations when both are running: a conv split by batch or by
        output rows then reads the rows the same core wrote (its own L2 cache)."""
        with self.done:
            if self.next >= self.last or self.error is not None:
                return -1
            if from_back and AFFINITY:
                self.last -= 1
                i = self.last
            else:
                i = self.next
                self.next += 1
            self.active += 1
            return i

    def finish(self, err: BaseException | None) -> None:
        with self.done:
            self.active -= 1
            if err is not None and self.error is None:
                self.error = err
            if self.active == 0:
                self.done.notify_all()

    def run_shards(self, from_back: bool = False) -> None:
        while True:
            i = self.claim(from_back)
            if i < 0:
                return
            err: BaseException | None = None
            try:
                self.fn(i)
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                err = e
            self.finish(err)


def _worker() -> None:
    while True:
        with _ready:
            while not _queue:
                _ready.wait()
            job = _queue[0]
            if job.next >= job.last or job.error is not None:
                _queue.popleft()
                continue
        job.run_shards(from_back=True)


def _ensure_workers(count: int) -> None:
    global _started
    if _started >= count:
        return
    with _lock:
        while _started < count:
            threading.Thread(target=_worker, name=f"pytfrt-cpu-{_started}", daemon=True).start()
            _started += 1


def parallel_for(fn: Callable[[int], None], n: int, serial: bool = False) -> None:
    """Run ``fn(i)`` for ``0 <= i < n`` on this thread and the helper threads; wait for all.

    With ``serial`` (e.g. the GEMM inside ``fn`` is threaded already) all run on this thread.
    """
    helpers = 0 if serial else min(num_threads() - 1, n - 1)
    if helpers <= 0:
        for i in range(n):
            fn(i)
        return
    _ensure_workers(helpers)
    job = _Job(fn, n)
    with _ready:
        _queue.append(job)
        _ready.notify(helpers)
    job.run_shards()
    with job.done:
        while job.active:
            job.done.wait()
    with _ready:
        if job in _queue:
            _queue.remove(job)
    if job.error is not None:
        raise job.error


def chunks(total: int, min_size: int, max_size: int = 0) -> list[tuple[int, int]]:
    """``[start, end)`` ranges covering ``range(total)``: ``2 * num_threads()`` of them (spare
    shards absorb imbalance), fewer if they would be smaller than ``min_size``, more if they
    would be larger than ``max_size`` (when given: a cache-sized working set)."""
    parts = max(1, min(2 * num_threads(), total // max(min_size, 1)))
    if max_size > 0:
        parts = max(parts, -(-total // max_size))
    parts = min(parts, max(total, 1))
    step, extra = divmod(total, parts)
    out: list[tuple[int, int]] = []
    start = 0
    for p in range(parts):
        end = start + step + (1 if p < extra else 0)
        out.append((start, end))
        start = end
    return out
