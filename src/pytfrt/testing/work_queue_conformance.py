"""The work-queue conformance suite: behaviour every :class:`~pytfrt.host.WorkQueue` must have.

Written once, run against every queue (``s``, ``mstd:N,M`` and any future one).  Subclass
:class:`WorkQueueConformance` in a test module and set :attr:`WorkQueueConformance.queue_type`
(or override :meth:`WorkQueueConformance.make_queue`)::

    class TestMultiThreaded(WorkQueueConformance):
        queue_type = "mstd:2"

The tests cover the contract in :mod:`pytfrt.host.work_queue`: every task runs exactly once,
tasks may add tasks, ``quiesce`` waits for everything (blocking tasks included), ``await_values``
returns as soon as the values are available, ``is_in_worker_thread``, ``await_values``/``quiesce``
from a task raise :class:`~pytfrt.host.WorkQueueError` instead of deadlocking, exceptions in
tasks are reported and do not stop the queue, ``shutdown`` finishes queued work, is idempotent,
refuses later tasks and leaves no thread behind.

Behaviour specific to one kind (FIFO order and lazy running on ``s``; real parallelism on
``mstd``) is tested next to that kind, not here.  Every test carries a ``pytest-timeout``
marker, so a deadlock fails instead of hanging; blocking waits inside tasks have timeouts too.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pytfrt.host.async_value import AsyncValue, make_available, make_unconstructed
from pytfrt.host.work_queue import WorkQueue, WorkQueueError, create_work_queue

# How long a task may wait on something the test controls before giving up (never reached
# when the queue is correct; keeps a broken queue from hanging the suite).
TASK_WAIT_S = 10.0


class TaskErrors:
    """An ``on_task_error`` hook that records the exceptions tasks raised (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.errors: list[BaseException] = []

    def __call__(self, exc: BaseException) -> None:
        with self._lock:
            self.errors.append(exc)


class WorkQueueConformance:
    """Mixin of behaviour tests; subclasses name the queue with :attr:`queue_type`."""

    pytestmark = [pytest.mark.timeout(30)]

    queue_type: str = ""
    """The ``create_work_queue`` type string of the queue under test."""

    def make_queue(self) -> WorkQueue:
        """A fresh queue under test (override for queues not built from a type string)."""
        return create_work_queue(self.queue_type)

    @pytest.fixture
    def queue(self) -> Iterator[WorkQueue]:
        """A fresh queue whose task errors are recorded; shut down after the test."""
        q = self.make_queue()
        q.on_task_error = TaskErrors()
        yield q
        q.shutdown()

    @staticmethod
    def task_errors(queue: WorkQueue) -> list[BaseException]:
        """The exceptions recorded by the ``queue`` fixture's error hook."""
        hook = queue.on_task_error
        assert isinstance(hook, TaskErrors)
        return hook.errors

    # -- running tasks ----------------------------------------------------------------------

    def test_every_task_runs_exactly_once(self, queue: WorkQueue) -> None:
        counts = [0] * 200
        lock = threading.Lock()

        def bump(i: int) -> None:
            with lock:
                counts[i] += 1

        for i in range(len(counts)):
            queue.add_task(functools.partial(bump, i))
        queue.quiesce()
        assert counts == [1] * len(counts)
        assert self.task_errors(queue) == []

    def test_tasks_adding_tasks_are_all_run_by_quiesce(self, queue: WorkQueue) -> None:
        # A binary tree of depth 6 built by tasks that spawn their children: 2**7 - 1 tasks.
        seen: list[tuple[int, int]] = []
        lock = threading.Lock()

        def node(depth: int, index: int) -> None:
            with lock:
                seen.append((depth, index))
            if depth < 6:
                queue.add_task(lambda: node(depth + 1, 2 * index))
                queue.add_task(lambda: node(depth + 1, 2 * index + 1))

        queue.add_task(lambda: node(0, 0))
        queue.quiesce()
        expected = {(d, i) for d in range(7) for i in range(2**d)}
        assert len(seen) == len(expected)
        assert set(seen) == expected

    def test_quiesce_waits_for_blocking_tasks(self, queue: WorkQueue) -> None:
        done: list[str] = []

        def slow_blocking() -> None:
            time.sleep(0.05)
            done.append("blocking")
            queue.add_task(lambda: done.append("follow-up"))

        assert queue.add_blocking_task(slow_blocking, allow_queuing=True)
        queue.quiesce()
        assert sorted(done) == ["blocking", "follow-up"]

    def test_quiesce_on_an_empty_queue_returns(self, queue: WorkQueue) -> None:
        queue.quiesce()
        queue.quiesce()

    def test_blocking_task_result_reaches_awaiter(self, queue: WorkQueue) -> None:
        value: AsyncValue[int] = make_unconstructed()
        assert queue.add_blocking_task(lambda: value.emplace(42))
        queue.await_values([value])
        assert value.get() == 42

    # -- await_values -----------------------------------------------------------------------

    def test_await_values_returns_once_values_are_available(self, queue: WorkQueue) -> None:
        values: list[AsyncValue[int]] = [make_unconstructed() for _ in range(5)]
        for i, v in enumerate(values):
            queue.add_task(functools.partial(v.emplace, i * i))
        queue.await_values(values)
        assert [v.get() for v in values] == [0, 1, 4, 9, 16]

    def test_await_values_on_available_values_returns_at_once(self, queue: WorkQueue) -> None:
        ready = [make_available(1), make_available(2)]
        queue.await_values(ready)
        queue.await_values([])
        queue.quiesce()

    def test_await_values_does_not_wait_for_unrelated_tasks(self, queue: WorkQueue) -> None:
        # The second task blocks until the test releases it, which the test only does after
        # await_values returned: a queue that waited for all work would time out here.
        value: AsyncValue[str] = make_unconstructed()
        release = threading.Event()
        released: list[bool] = []
        queue.add_task(lambda: value.emplace("ready"))
        queue.add_task(lambda: released.append(release.wait(TASK_WAIT_S)))
        queue.await_values([value])
        assert value.get() == "ready"
        release.set()
        queue.quiesce()
        assert released == [True]

    def test_await_values_sees_errors_as_available(self, queue: WorkQueue) -> None:
        value: AsyncValue[Any] = make_unconstructed()
        queue.add_task(lambda: value.set_error("boom"))
        queue.await_values([value])
        assert value.is_error()
        assert value.error.message == "boom"

    def test_await_values_made_available_by_another_thread(self, queue: WorkQueue) -> None:
        value: AsyncValue[int] = make_unconstructed()
        timer = threading.Timer(0.05, lambda: value.emplace(7))
        timer.start()
        try:
            queue.await_values([value])
        finally:
            timer.join()
        assert value.get() == 7

    # -- worker threads ---------------------------------------------------------------------

    def test_is_in_worker_thread(self, queue: WorkQueue) -> None:
        inside: list[bool] = []
        assert not queue.is_in_worker_thread()
        queue.add_task(lambda: inside.append(queue.is_in_worker_thread()))
        queue.add_blocking_task(lambda: inside.append(queue.is_in_worker_thread()))
        queue.quiesce()
        assert inside == [True, True]
        assert not queue.is_in_worker_thread()

    def test_is_in_worker_thread_is_per_queue(self, queue: WorkQueue) -> None:
        other = self.make_queue()
        try:
            seen: list[bool] = []
            queue.add_task(lambda: seen.append(other.is_in_worker_thread()))
            queue.quiesce()
            assert seen == [False]
        finally:
            other.shutdown()

    def test_await_values_from_a_task_raises_instead_of_deadlocking(
        self, queue: WorkQueue
    ) -> None:
        never: AsyncValue[int] = make_unconstructed()
        caught: list[BaseException] = []

        def task() -> None:
            try:
                queue.await_values([never])
            except WorkQueueError as exc:
                caught.append(exc)

        queue.add_task(task)
        queue.quiesce()
        assert len(caught) == 1
        assert "await_values()" in str(caught[0])

    def test_quiesce_from_a_task_raises_instead_of_deadlocking(self, queue: WorkQueue) -> None:
        caught: list[BaseException] = []

        def task() -> None:
            try:
                queue.quiesce()
            except WorkQueueError as exc:
                caught.append(exc)

        queue.add_task(task)
        queue.quiesce()
        assert len(caught) == 1
        assert "quiesce()" in str(caught[0])

    def test_parallelism_level_is_positive(self, queue: WorkQueue) -> None:
        assert queue.parallelism_level >= 1
        assert isinstance(queue.name, str) and queue.name

    # -- errors -----------------------------------------------------------------------------

    def test_task_exceptions_are_reported_and_the_queue_keeps_going(
        self, queue: WorkQueue
    ) -> None:
        ran: list[int] = []

        def bad() -> None:
            raise ValueError("task failed on purpose")

        queue.add_task(bad)
        queue.add_blocking_task(bad)
        for i in range(3):
            queue.add_task(functools.partial(ran.append, i))
        queue.quiesce()
        assert sorted(ran) == [0, 1, 2]
        errors = self.task_errors(queue)
        assert len(errors) == 2
        assert all(isinstance(e, ValueError) for e in errors)
        assert str(errors[0]) == "task failed on purpose"

    def test_default_error_hook_prints_the_traceback(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        q = self.make_queue()
        try:

            def bad() -> None:
                raise RuntimeError("visible failure")

            q.add_task(bad)
            q.quiesce()
        finally:
            q.shutdown()
        err = capsys.readouterr().err
        assert "a task raised an exception" in err
        assert "RuntimeError: visible failure" in err

    # -- shutdown ---------------------------------------------------------------------------

    def test_shutdown_finishes_queued_work(self) -> None:
        q = self.make_queue()
        ran: list[int] = []
        for i in range(20):
            q.add_task(functools.partial(ran.append, i))
        q.shutdown()
        assert sorted(ran) == list(range(20))

    def test_shutdown_is_idempotent_and_refuses_later_tasks(self) -> None:
        q = self.make_queue()
        q.shutdown()
        q.shutdown()
        with pytest.raises(WorkQueueError, match="shut down"):
            q.add_task(lambda: None)

    def test_no_thread_leaks_after_shutdown(self) -> None:
        before = set(threading.enumerate())
        q = self.make_queue()
        for _ in range(4):
            q.add_task(lambda: None)
            q.add_blocking_task(lambda: time.sleep(0.01))
        q.quiesce()
        q.shutdown()
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        assert leaked == []
