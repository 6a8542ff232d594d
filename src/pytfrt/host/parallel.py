"""The process's intra-op parallel runtime: kernels get their threads here (TFRT's ParallelFor).

One thread budget for the process: :func:`num_threads` (``PYTFRT_NUM_THREADS``, default the CPU
count; read once, on import).  A kernel that wants more than its own thread asks this module,
and every piece of kernel work that runs off its caller's thread holds one of the
``num_threads() - 1`` *helper slots* while it runs, whoever runs it:

* :func:`parallel_for` -- ``fn(0) .. fn(n - 1)`` on the calling thread *and* on up to
  ``num_threads() - 1`` persistent helper threads, which claim shard indices from a shared
  counter (the caller from the front, helpers from the back).  The caller never waits for a
  thread that has not started: if the helpers are busy or descheduled, the caller runs more
  shards itself, so the worst wait is one shard, not a whole operation.  Exceptions in a shard
  are re-raised in the caller (the first one) after every claimed shard finished; unclaimed
  shards are then skipped.  Nested calls (a shard calling :func:`parallel_for`) cannot
  deadlock: a caller only ever waits for shards another thread is running.
* :func:`submit` -- one task on the same helper threads, as a :class:`concurrent.futures.Future`
  (``cancel()`` succeeds while no helper has started it, so the submitter may run it itself:
  the serving JSON scanner's pieces).
* :func:`try_reserve` / :func:`release` -- helper slots for threads this module does not run
  (the convolutions' native spin pool, :mod:`pytfrt.backends.cpu._spin_pool`, reserves one per
  helper for each job; when they are not all free it takes its other path, through
  :func:`parallel_for`).

So at any moment at most ``num_threads() - 1`` helpers run kernel work besides the threads
that called in (the executor's).  :func:`chunks` cuts a range into shards sized for the budget.

Thread-safety: every function may be called from any thread at once.  The helpers are daemon
threads started on first use (:func:`start_helpers` starts them early); a forked child starts
its own.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pytfrt import config

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future

R = TypeVar("R")


def _threads_from_env() -> int:
    return max(1, config.integer("PYTFRT_NUM_THREADS") or os.cpu_count() or 1)


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

    def exhausted(self) -> bool:
        return self.next >= self.last or self.error is not None

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

    def run_shards(self, from_back: bool = False, slot: _State | None = None) -> None:
        """Run shards until none is left.  A helper passes its ``slot``'s state: the slot is
        given back before the helper's last shard is marked finished, so a caller that sees
        the job done (and, say, asks :func:`try_reserve` for the next operation) finds it free."""
        try:
            while True:
                i = self.claim(from_back)
                if i < 0:
                    return
                err: BaseException | None = None
                try:
                    self.fn(i)
                except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                    err = e
                if slot is not None and self.exhausted():
                    _give_back(slot, 1)
                    slot = None
                self.finish(err)
        finally:
            if slot is not None:
                _give_back(slot, 1)


class _Task:
    """One :func:`submit`: runs once, unless cancelled before a helper started it."""

    def __init__(self, future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]):
        self.future = future
        self.fn = fn
        self.args = args

    def run(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            result = self.fn(*self.args)
        except BaseException as exc:  # noqa: BLE001 - delivered through the future
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)


class _State:
    """The helpers, their queue and the free helper slots (one lock; replaced in a forked
    child, whose parent's helper threads do not exist)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)
        self.queue: deque[_Job | _Task] = deque()
        self.started = 0
        self.free = _NUM_THREADS - 1


_state = _State()


def _reset_after_fork() -> None:
    global _state
    _state = _State()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _next_work(st: _State) -> _Job | _Task:
    """The next piece of work for a helper, with a slot taken (waits for both)."""
    with st.ready:
        while True:
            if st.queue and st.free > 0:
                item = st.queue[0]
                if isinstance(item, _Job):
                    if item.exhausted():
                        st.queue.popleft()
                        continue
                else:
                    st.queue.popleft()
                st.free -= 1
                return item
            st.ready.wait()


def _give_back(st: _State, count: int) -> None:
    # st.lock is st.ready's lock: holding it is holding the condition, without the
    # condition's Python-level __enter__/__exit__ (a split convolution gives its slots back
    # once per call: ~2 us of Python each inside a model, where the interpreter's state is
    # cold after the kernels)
    with st.lock:
        st.free += count
        if st.queue:
            st.ready.notify(count)


def _worker(st: _State) -> None:
    while True:
        item = _next_work(st)
        if isinstance(item, _Job):
            item.run_shards(from_back=True, slot=st)  # gives the slot back
        else:
            try:
                item.run()
            finally:
                _give_back(st, 1)


def _ensure_helpers(count: int) -> _State:
    st = _state
    if st.started >= count:
        return st
    with st.lock:
        while st.started < count:
            threading.Thread(target=_worker, args=(st,), name=f"pytfrt-cpu-{st.started}",
                             daemon=True).start()
            st.started += 1
    return st


def start_helpers() -> None:
    """Start the helper threads now (a server's warm-up), not on the first parallel call."""
    _ensure_helpers(_NUM_THREADS - 1)


def helper_threads() -> int:
    """How many helper threads this process has started (at most ``num_threads() - 1``)."""
    return _state.started


def parallel_for(fn: Callable[[int], None], n: int, serial: bool = False) -> None:
    """Run ``fn(i)`` for ``0 <= i < n`` on this thread and the helper threads; wait for all.

    With ``serial`` (e.g. the GEMM inside ``fn`` is threaded already) all run on this thread.

    Raises:
        BaseException: the first exception a shard raised (the others are dropped).
    """
    helpers = 0 if serial else min(_NUM_THREADS - 1, n - 1)
    if helpers <= 0:
        for i in range(n):
            fn(i)
        return
    st = _ensure_helpers(_NUM_THREADS - 1)
    job = _Job(fn, n)
    with st.ready:
        st.queue.append(job)
        st.ready.notify(helpers)
    job.run_shards()
    with job.done:
        while job.active:
            job.done.wait()
    with st.ready:
        try:
            st.queue.remove(job)
        except ValueError:
            pass
    if job.error is not None:
        raise job.error


def submit(fn: Callable[..., R], *args: Any) -> Future[R]:
    """Run ``fn(*args)`` on a helper thread when a slot is free; its future.

    ``future.cancel()`` succeeds while no helper has started it.  With a budget of one thread
    (no helpers) it runs now, on this thread.
    """
    from concurrent.futures import Future  # here: it imports logging, which a compile never needs

    future: Future[R] = Future()
    task = _Task(future, fn, args)
    if _NUM_THREADS <= 1:
        task.run()
        return future
    st = _ensure_helpers(_NUM_THREADS - 1)
    with st.ready:
        st.queue.append(task)
        st.ready.notify()
    return future


def try_reserve(count: int) -> bool:
    """Take ``count`` helper slots for threads outside this module, if all are free now (never
    waits); give them back with :func:`release`."""
    st = _state
    with st.lock:
        if st.free < count:
            return False
        st.free -= count
        return True


def release(count: int) -> None:
    """Give back ``count`` slots taken by :func:`try_reserve`."""
    _give_back(_state, count)


def budget() -> Any:
    """The budget's current state, for native code that does what :func:`try_reserve` and
    :func:`release` do without Python frames (the spin pool's native entry,
    :func:`pytfrt.backends.cpu._spin_pool.try_job`): holding its ``lock``, it takes slots
    from the int ``free`` if that many are free, and gives them back by adding to ``free``
    and, when ``queue`` is not empty, ``ready.notify(count)``.  A forked child has a new
    state (ask again after a fork)."""
    return _state


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
