"""Work queues: where kernels' tasks run (TFRT's ``ConcurrentWorkQueue``, docs/host.md).

Two kinds, chosen by a string as TFRT's ``--work_queue_type`` flag does (:func:`create_work_queue`):

* ``"s"`` -- :class:`SingleThreadedWorkQueue`. Spawns no thread. ``add_task`` only appends to one
  FIFO; nothing runs until the host thread calls :meth:`WorkQueue.await_values` or
  :meth:`WorkQueue.quiesce`, which run queued tasks on the calling thread in FIFO order (tasks
  added while a batch runs go after the batch). ``await_values`` stops as soon as the awaited
  values are available and puts the unprocessed rest back at the head. Deterministic. If the
  queue runs dry while the values are still unavailable, ``await_values`` sleeps until another
  thread adds a task or makes the values available; if no other thread is alive it raises
  :class:`WorkQueueError` (a certain deadlock) instead of hanging.  Several threads may await
  at once: one drives the queue, the others wait for their values and take over driving when
  it returns.
* ``"mstd"``, ``"mstd:N"``, ``"mstd:N,M"`` -- :class:`MultiThreadedWorkQueue` with N worker threads
  for non-blocking work (default: the number of CPUs) and up to M threads for blocking work
  (default 256), started on demand.  N is at most :data:`MAX_WORKER_THREADS` and M at most
  :data:`MAX_BLOCKING_THREADS`.  ``await_values`` raises :class:`WorkQueueError` (deadlock) when
  the queue is idle, the values are unavailable and no thread outside the queue is alive that
  could make them available (e.g. a kernel's helper thread died before setting its result).

Contract of every queue:
* ``add_task`` / ``add_blocking_task`` may be called from any thread, including from tasks.
* ``await_values`` and ``quiesce`` must be called from a non-worker thread; calling them from a
  task raises :class:`WorkQueueError` (they would deadlock).  ``await_values(values, timeout)``
  and ``quiesce(timeout)`` return False if ``timeout`` seconds passed first (True otherwise);
  ``shutdown(timeout)`` then stops waiting for stuck tasks (the threads are daemons).
* A task that raises does not kill the queue: the exception is reported through the queue's
  ``on_task_error`` callback (by default printed to stderr with its traceback).
* ``shutdown()`` first finishes the queued work (``quiesce``, unless called from a task), then
  stops and joins the worker threads; it is idempotent, and adding a task afterwards raises
  :class:`WorkQueueError`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from queue import Empty, SimpleQueue
from typing import Any, Final

from pytfrt.host.async_value import AsyncValue, run_when_ready
from pytfrt.support.errors import PytfrtError

Task = Callable[[], None]

MAX_WORKER_THREADS: Final = 1024
MAX_BLOCKING_THREADS: Final = 4096
ACCEPTED_FORMS: Final = (
    f'"s", "mstd", "mstd:N" or "mstd:N,M" (1 <= N <= {MAX_WORKER_THREADS}, '
    f"1 <= M <= {MAX_BLOCKING_THREADS})"
)
DEFAULT_BLOCKING_THREADS: Final = 256


_POLL_SECONDS: Final = 0.1  # how often a blocked await_values looks for a deadlock


class WorkQueueError(PytfrtError):
    """Misuse of a work queue (bad type string, awaiting from a worker thread, ...)."""


def _default_task_error(exc: BaseException) -> None:
    print("pytfrt: a task raised an exception:", file=sys.stderr)
    traceback.print_exception(exc, file=sys.stderr)


class WorkQueue:
    """Interface of a work queue. See the module docstring for the contract."""

    name: str = "work queue"

    def __init__(self) -> None:
        self.on_task_error: Callable[[BaseException], None] = _default_task_error

    def add_task(self, task: Task) -> None:
        """Queue non-blocking compute work."""
        raise NotImplementedError

    def add_blocking_task(self, task: Task, allow_queuing: bool = True) -> bool:
        """Queue work that may block; returns False if the queue refuses it."""
        raise NotImplementedError

    def await_values(self, values: Sequence[AsyncValue[Any]],
                     timeout: float | None = None) -> bool:
        """Block the calling (non-worker) thread until every value is available.

        Returns False if ``timeout`` seconds passed first.
        """
        raise NotImplementedError

    def quiesce(self, timeout: float | None = None) -> bool:
        """Block the calling (non-worker) thread until no task is pending or running.

        Returns False if ``timeout`` seconds passed first.
        """
        raise NotImplementedError

    @property
    def parallelism_level(self) -> int:
        """How many tasks may run at once."""
        raise NotImplementedError

    def is_in_worker_thread(self) -> bool:
        """True if the calling thread is running a task of this queue."""
        raise NotImplementedError

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop the queue's threads (after finishing queued work, waiting at most ``timeout``
        seconds for it). Idempotent."""

    def _run(self, task: Task) -> None:
        try:
            task()
        except BaseException as exc:  # noqa: BLE001 - reported, never lost
            self.on_task_error(exc)


class SingleThreadedWorkQueue(WorkQueue):
    """The ``"s"`` queue: runs tasks only inside ``await_values``/``quiesce``, FIFO."""

    name = "single-threaded"

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._tasks: deque[Task] = deque()
        self._running_depth = 0
        self._driver: threading.Thread | None = None
        self._drive_lock = threading.Lock()  # held by the thread running tasks
        self._sleeper: threading.Event | None = None  # set while await_values sleeps
        self._closed = False

    def add_task(self, task: Task) -> None:
        with self._lock:
            if self._closed:
                raise WorkQueueError("add_task() on a work queue that was shut down")
            self._tasks.append(task)
        sleeper = self._sleeper
        if sleeper is not None:
            sleeper.set()

    def add_blocking_task(self, task: Task, allow_queuing: bool = True) -> bool:
        if not allow_queuing:
            return False
        self.add_task(task)
        return True

    @property
    def parallelism_level(self) -> int:
        return 1

    def is_in_worker_thread(self) -> bool:
        return self._running_depth > 0 and self._driver is threading.current_thread()

    def _take_batch(self) -> list[Task]:
        with self._lock:
            batch = list(self._tasks)
            self._tasks.clear()
        return batch

    def _check_not_worker(self, what: str) -> None:
        if self.is_in_worker_thread():
            raise WorkQueueError(f"{what} called from inside a task of the single-threaded queue")

    def await_values(self, values: Sequence[AsyncValue[Any]],
                     timeout: float | None = None) -> bool:
        self._check_not_worker("await_values()")
        # Values never become unavailable again, so a cursor over the first unavailable one
        # makes the check after every task amortised O(1) (awaiting n values stays O(n)).
        cursor = 0
        count = len(values)

        def done() -> bool:
            nonlocal cursor
            while cursor < count and values[cursor].is_available():
                cursor += 1
            return cursor == count

        if done():
            return True
        return self._drive(done, values, _deadline(timeout))

    def quiesce(self, timeout: float | None = None) -> bool:
        self._check_not_worker("quiesce()")
        return self._drive(_never, None, _deadline(timeout))

    def run_pending(self) -> None:
        """From inside a task: run every queued task, and those they add, on this thread.

        What TFRT's single-threaded ``Quiesce`` does when a task calls it (the
        ``tfrt_test.quiesce`` kernel): the tasks queued so far run inline, in FIFO order, until
        the queue is empty.  Tasks of the batch the caller itself belongs to are not queued
        any more (the driver already took them), so they run after the caller, as in TFRT.

        Raises:
            WorkQueueError: if the calling thread is not running a task of this queue (use
                :meth:`quiesce` there).
        """
        if not self.is_in_worker_thread():
            raise WorkQueueError("run_pending() must be called from inside a task; use quiesce()")
        while batch := self._take_batch():
            for task in batch:
                self._running_depth += 1
                try:
                    self._run(task)
                finally:
                    self._running_depth -= 1

    def shutdown(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        if not self.is_in_worker_thread():
            self.quiesce(timeout)
        with self._lock:
            self._closed = True

    def _sleep_until_work(self, event: threading.Event, done: Callable[[], bool],
                          deadline: float | None) -> bool:
        """The queue is dry but the awaited values are not available: wait for another thread.

        ``event`` is set when a task is added or the awaited values become available.  Returns
        False once ``deadline`` (monotonic) has passed.
        """
        self._sleeper = event
        try:
            while True:
                event.clear()
                with self._lock:
                    if self._tasks:
                        return True
                if done() or event.wait(0.05):
                    return True
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                if threading.active_count() == 1:
                    # No other thread is left; one may have added a task or published a value
                    # just before it exited, so look once more before declaring a deadlock.
                    with self._lock:
                        if self._tasks:
                            return True
                    if done():
                        return True
                    raise WorkQueueError(
                        "await_values(): the queue is empty but the awaited values are not "
                        "available and no other thread can make them available (deadlock)"
                    )
        finally:
            self._sleeper = None

    def _drive(self, done: Callable[[], bool], values: Sequence[AsyncValue[Any]] | None,
               deadline: float | None) -> bool:
        """Drive the queue until ``done()`` (await) or it is empty (quiesce); one driver at once.

        Another thread awaiting meanwhile waits for its own values, and takes over driving
        when the driver returns.  Returns False if ``deadline`` (monotonic) passed first.
        """
        event: threading.Event | None = None
        while True:
            if self._drive_lock.acquire(blocking=False):
                try:
                    self._driver = threading.current_thread()
                    return self._drive_locked(done, values, deadline)
                finally:
                    self._driver = None
                    self._drive_lock.release()
            # Another thread drives: wait for our values (or for the driver to return).
            if values is not None and event is None:
                event = threading.Event()
                run_when_ready(values, event.set)
            if event is not None and event.wait(0.02) and done():
                return True
            if event is None:
                time.sleep(0.02)
            if deadline is not None and time.monotonic() >= deadline:
                return done()

    def _drive_locked(self, done: Callable[[], bool],
                      values: Sequence[AsyncValue[Any]] | None, deadline: float | None) -> bool:
        event: threading.Event | None = None
        while not done():
            batch = self._take_batch()
            if not batch:
                if values is None:  # quiesce(): nothing left to run
                    return True
                if event is None:
                    event = threading.Event()
                    run_when_ready(values, event.set)
                if not self._sleep_until_work(event, done, deadline):
                    return False
                continue
            for index, task in enumerate(batch):
                self._running_depth += 1
                try:
                    self._run(task)
                finally:
                    self._running_depth -= 1
                if done() or (deadline is not None and time.monotonic() >= deadline):
                    rest = batch[index + 1 :]
                    if rest:
                        with self._lock:
                            self._tasks.extendleft(reversed(rest))
                    return done()
        return True


def _never() -> bool:
    return False


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


class _Stop:
    """Sentinel that tells a worker thread to exit."""


_STOP: Final = _Stop()


class MultiThreadedWorkQueue(WorkQueue):
    """The ``"mstd:N,M"`` queue: N workers for non-blocking tasks, up to M blocking threads.

    Blocking threads are started on demand and exit after 5 s idle. A pending/running counter
    under one condition variable backs ``quiesce``.
    """

    def __init__(self, num_threads: int | None = None, num_blocking_threads: int | None = None):
        super().__init__()
        self.num_threads = num_threads or os.cpu_count() or 1
        self.num_blocking_threads = num_blocking_threads or DEFAULT_BLOCKING_THREADS
        if not (1 <= self.num_threads <= MAX_WORKER_THREADS
                and 1 <= self.num_blocking_threads <= MAX_BLOCKING_THREADS):
            raise WorkQueueError(f"invalid work queue thread counts: {ACCEPTED_FORMS}")
        self.name = (
            f"Multi-threaded C++ work queue ({self.num_threads} threads, "
            f"{self.num_blocking_threads} blocking threads)"
        )
        self._tasks: SimpleQueue[Task | _Stop] = SimpleQueue()
        self._blocking: SimpleQueue[Task | _Stop] = SimpleQueue()
        # One lock guards the counters; ``_cond`` (on the same lock) backs ``quiesce``.  The hot
        # paths take ``_mutex`` directly (a C-level lock) instead of the Python-level Condition.
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._pending = 0  # tasks queued or running, both pools
        self._idle_blocking = 0
        self._blocking_threads = 0
        self._blocking_list: list[threading.Thread] = []  # started blocking threads (joined)
        self._local = threading.local()
        self._closed = False
        self._workers = [
            threading.Thread(target=self._worker, name=f"pytfrt-worker-{i}", daemon=True)
            for i in range(self.num_threads)
        ]
        for worker in self._workers:
            worker.start()

    @property
    def parallelism_level(self) -> int:
        return self.num_threads

    def is_in_worker_thread(self) -> bool:
        return getattr(self._local, "is_worker", False)

    def add_task(self, task: Task) -> None:
        with self._mutex:
            if self._closed:
                raise WorkQueueError("add_task() on a work queue that was shut down")
            self._pending += 1
        self._tasks.put(task)

    def add_blocking_task(self, task: Task, allow_queuing: bool = True) -> bool:
        with self._mutex:
            if self._closed:
                raise WorkQueueError("add_blocking_task() on a work queue that was shut down")
            if self._idle_blocking == 0:
                if self._blocking_threads >= self.num_blocking_threads and not allow_queuing:
                    return False
                if self._blocking_threads < self.num_blocking_threads:
                    self._blocking_threads += 1
                    thread = threading.Thread(
                        target=self._blocking_worker, name="pytfrt-blocking", daemon=True
                    )
                    self._blocking_list = [t for t in self._blocking_list if t.is_alive()]
                    self._blocking_list.append(thread)
                    thread.start()
            else:
                self._idle_blocking -= 1
            self._pending += 1
        self._blocking.put(task)
        return True

    def _finish_one(self) -> None:
        with self._mutex:
            self._pending -= 1
            if self._pending == 0:
                self._cond.notify_all()

    def _worker(self) -> None:
        self._local.is_worker = True
        get = self._tasks.get
        while True:
            task = get()
            if task is _STOP:
                return
            self._run(task)  # type: ignore[arg-type]
            del task  # an idle worker must not keep the last task's values alive
            self._finish_one()

    def _blocking_worker(self) -> None:
        self._local.is_worker = True
        while True:
            try:
                task = self._blocking.get(timeout=5.0)
            except Empty:  # idle for too long
                with self._mutex:
                    if self._idle_blocking > 0:
                        self._idle_blocking -= 1
                        self._blocking_threads -= 1
                        return
                continue
            if task is _STOP:
                return
            self._run(task)  # type: ignore[arg-type]
            del task  # as in _worker: drop the finished task's values
            with self._mutex:
                self._idle_blocking += 1
            self._finish_one()

    def await_values(self, values: Sequence[AsyncValue[Any]],
                     timeout: float | None = None) -> bool:
        if self.is_in_worker_thread():
            raise WorkQueueError("await_values() called from a worker thread (would deadlock)")
        pending = [v for v in values if not v.is_available()]
        if not pending:
            return True
        # A plain lock as a one-shot latch: cheaper than an Event on both sides of the hand-off.
        latch = threading.Lock()
        latch.acquire()
        run_when_ready(pending, latch.release)
        deadline = _deadline(timeout)
        while not latch.acquire(timeout=_POLL_SECONDS):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if self._idle_and_alone():
                if latch.acquire(blocking=False):  # published just before the check
                    return True
                raise WorkQueueError(
                    "await_values(): the queue is idle but the awaited values are not "
                    "available and no other thread can make them available (deadlock)"
                )
        return True

    def _idle_and_alone(self) -> bool:
        """No task queued or running, and no live thread but the caller and the queue's own."""
        with self._mutex:
            if self._pending:
                return False
            own = set(self._workers) | set(self._blocking_list)
        current = threading.current_thread()
        return all(t is current or t in own for t in threading.enumerate())

    def quiesce(self, timeout: float | None = None) -> bool:
        if self.is_in_worker_thread():
            raise WorkQueueError("quiesce() called from a worker thread (would deadlock)")
        with self._mutex:
            return self._cond.wait_for(lambda: not self._pending, timeout)

    def shutdown(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        if not self.is_in_worker_thread() and not self.quiesce(timeout):
            with self._mutex:  # stuck tasks: stop accepting work, leave the daemon threads
                self._closed = True
            return
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            blocking = self._blocking_threads
            threads = self._workers + self._blocking_list
        for _ in self._workers:
            self._tasks.put(_STOP)
        for _ in range(blocking):
            self._blocking.put(_STOP)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join()


def parse_work_queue_type(spec: str) -> tuple[str, tuple[int, ...]]:
    """Split ``"mstd:2,8"`` into ``("mstd", (2, 8))``; raises ``ValueError`` on bad strings."""
    name, _, args = spec.partition(":")
    if name == "s":
        if args or ":" in spec:
            raise ValueError(
                f"invalid work queue type {spec!r}: 's' takes no arguments; "
                f"accepted forms: {ACCEPTED_FORMS}"
            )
        return ("s", ())
    if name == "mstd":
        if ":" not in spec:
            return ("mstd", ())
        parts = args.split(",")
        if len(parts) > 2 or not all(p.isdigit() and int(p) > 0 for p in parts) or (
            int(parts[0]) > MAX_WORKER_THREADS
            or (len(parts) == 2 and int(parts[1]) > MAX_BLOCKING_THREADS)
        ):
            raise ValueError(
                f"invalid work queue type {spec!r}: Invalid argument for mstd work queue: "
                f"{args!r}; accepted forms: {ACCEPTED_FORMS}"
            )
        return ("mstd", tuple(int(p) for p in parts))
    raise ValueError(f"unknown work queue type {spec!r}; accepted forms: {ACCEPTED_FORMS}")


def create_work_queue(spec: str) -> WorkQueue:
    """Create a work queue from a TFRT type string (``s``, ``mstd``, ``mstd:N``, ``mstd:N,M``).

    Raises:
        ValueError: if the string is not one of the accepted forms.
    """
    name, numbers = parse_work_queue_type(spec)
    if name == "s":
        return SingleThreadedWorkQueue()
    return MultiThreadedWorkQueue(*numbers)
