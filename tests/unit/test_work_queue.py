"""Work queues: the shared conformance suite on ``s`` and ``mstd``, plus each kind's own rules."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from pytfrt.host import (
    AsyncValue,
    MultiThreadedWorkQueue,
    SingleThreadedWorkQueue,
    WorkQueueError,
    create_work_queue,
    make_unconstructed,
)
from pytfrt.testing.work_queue_conformance import TASK_WAIT_S, WorkQueueConformance


class TestSingleThreadedConformance(WorkQueueConformance):
    queue_type = "s"


class TestMultiThreadedConformance(WorkQueueConformance):
    queue_type = "mstd:2"


class TestMultiThreadedOneWorkerConformance(WorkQueueConformance):
    queue_type = "mstd:1,2"


# -- "s": lazy, FIFO, on the calling thread ------------------------------------------------------

pytestmark = pytest.mark.timeout(30)


def test_s_runs_nothing_before_await_or_quiesce() -> None:
    q = SingleThreadedWorkQueue()
    ran: list[int] = []
    q.add_task(lambda: ran.append(1))
    q.add_blocking_task(lambda: ran.append(2))
    time.sleep(0.01)
    assert ran == []
    q.quiesce()
    assert ran == [1, 2]


def test_s_runs_tasks_fifo_on_the_calling_thread() -> None:
    q = SingleThreadedWorkQueue()
    log: list[tuple[int, threading.Thread]] = []
    for i in range(50):
        q.add_task(lambda i=i: log.append((i, threading.current_thread())))
    q.quiesce()
    assert [i for i, _ in log] == list(range(50))
    assert {t for _, t in log} == {threading.current_thread()}


def test_s_tasks_added_during_a_batch_run_after_the_batch() -> None:
    q = SingleThreadedWorkQueue()
    order: list[str] = []

    def first() -> None:
        order.append("a")
        q.add_task(lambda: order.append("a-child"))

    q.add_task(first)
    q.add_task(lambda: order.append("b"))
    q.add_task(lambda: order.append("c"))
    q.quiesce()
    assert order == ["a", "b", "c", "a-child"]


def test_s_run_pending_from_a_task_runs_later_tasks_inline() -> None:
    # TFRT's single-threaded Quiesce called by a task: the tasks queued after the driver took
    # the current batch run at once, inline; the rest of the batch runs after the caller.
    q = SingleThreadedWorkQueue()
    order: list[str] = []

    def child() -> None:
        order.append("child")
        q.add_task(lambda: order.append("grand"))

    def first() -> None:
        order.append("a")
        q.add_task(child)
        q.run_pending()
        order.append("a-end")

    q.add_task(first)
    q.add_task(lambda: order.append("b"))
    q.quiesce()
    assert order == ["a", "child", "grand", "a-end", "b"]


def test_s_run_pending_outside_a_task_is_an_error() -> None:
    q = SingleThreadedWorkQueue()
    q.add_task(lambda: None)
    with pytest.raises(WorkQueueError, match="run_pending"):
        q.run_pending()


def test_s_await_stops_early_and_leaves_the_rest_queued_in_order() -> None:
    q = SingleThreadedWorkQueue()
    value: AsyncValue[int] = make_unconstructed()
    order: list[str] = []
    q.add_task(lambda: order.append("t1"))

    def second() -> None:
        order.append("t2")
        value.emplace(2)

    q.add_task(second)
    q.add_task(lambda: order.append("t3"))
    q.add_task(lambda: order.append("t4"))
    q.await_values([value])
    assert order == ["t1", "t2"]
    q.add_task(lambda: order.append("t5"))
    q.quiesce()
    assert order == ["t1", "t2", "t3", "t4", "t5"]


def test_s_refuses_blocking_task_without_queuing() -> None:
    q = SingleThreadedWorkQueue()
    ran: list[int] = []
    assert q.add_blocking_task(lambda: ran.append(1), allow_queuing=False) is False
    q.quiesce()
    assert ran == []


def test_s_properties() -> None:
    q = create_work_queue("s")
    assert isinstance(q, SingleThreadedWorkQueue)
    assert q.name == "single-threaded"
    assert q.parallelism_level == 1


def test_s_await_with_nothing_to_run_and_no_other_thread_raises() -> None:
    # In a fresh interpreter, so that no thread left by another test keeps the await waiting.
    code = (
        "from pytfrt.host import SingleThreadedWorkQueue, WorkQueueError, make_unconstructed\n"
        "q = SingleThreadedWorkQueue()\n"
        "try:\n"
        "    q.await_values([make_unconstructed()])\n"
        "except WorkQueueError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "no other thread can make them available (deadlock)" in out.stdout


def test_s_await_wakes_for_a_task_added_by_another_thread() -> None:
    q = SingleThreadedWorkQueue()
    value: AsyncValue[int] = make_unconstructed()
    ran_on: list[threading.Thread] = []

    def task() -> None:
        ran_on.append(threading.current_thread())
        value.emplace(5)

    timer = threading.Timer(0.05, lambda: q.add_task(task))
    timer.start()
    q.await_values([value])
    timer.join()
    assert value.get() == 5
    assert ran_on == [threading.current_thread()]  # run by the driver, not the timer thread


# -- "mstd": real worker threads ----------------------------------------------------------------


def test_mstd_runs_tasks_in_parallel_on_worker_threads() -> None:
    q = create_work_queue("mstd:2")
    try:
        barrier = threading.Barrier(2, timeout=TASK_WAIT_S)
        names: list[str] = []

        def meet() -> None:
            barrier.wait()  # both workers must be inside a task at once
            names.append(threading.current_thread().name)

        q.add_task(meet)
        q.add_task(meet)
        q.quiesce()
        assert sorted(names) == ["pytfrt-worker-0", "pytfrt-worker-1"]
    finally:
        q.shutdown()


def test_mstd_properties() -> None:
    q = create_work_queue("mstd:3,5")
    try:
        assert isinstance(q, MultiThreadedWorkQueue)
        assert q.parallelism_level == 3
        assert q.name == "Multi-threaded C++ work queue (3 threads, 5 blocking threads)"
    finally:
        q.shutdown()


def test_mstd_refuses_blocking_task_without_queuing_when_all_threads_are_busy() -> None:
    q = create_work_queue("mstd:1,1")
    try:
        release = threading.Event()
        started = threading.Event()

        def hold() -> None:
            started.set()
            release.wait(TASK_WAIT_S)

        assert q.add_blocking_task(hold, allow_queuing=False) is True
        assert started.wait(TASK_WAIT_S)
        assert q.add_blocking_task(lambda: None, allow_queuing=False) is False
        assert q.add_blocking_task(lambda: None, allow_queuing=True) is True  # queued
        release.set()
        q.quiesce()
    finally:
        q.shutdown()


def test_mstd_default_thread_counts() -> None:
    q = create_work_queue("mstd")
    try:
        assert isinstance(q, MultiThreadedWorkQueue)
        assert q.num_threads >= 1
        assert q.num_blocking_threads == 256
    finally:
        q.shutdown()


# -- create_work_queue -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind", "threads", "blocking"),
    [
        ("s", SingleThreadedWorkQueue, None, None),
        ("mstd:1", MultiThreadedWorkQueue, 1, 256),
        ("mstd:2", MultiThreadedWorkQueue, 2, 256),
        ("mstd:2,3", MultiThreadedWorkQueue, 2, 3),
    ],
)
def test_create_work_queue_accepts(
    spec: str, kind: type, threads: int | None, blocking: int | None
) -> None:
    q = create_work_queue(spec)
    try:
        assert isinstance(q, kind)
        if isinstance(q, MultiThreadedWorkQueue):
            assert (q.num_threads, q.num_blocking_threads) == (threads, blocking)
    finally:
        q.shutdown()


@pytest.mark.parametrize(
    "spec",
    ["s:1", "s:", "mstd:", "mstd:0", "mstd:a", "mstd:1,2,3", "mstd:1,", "mstd:-1", "foo", ""],
)
def test_create_work_queue_rejects_bad_strings(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        create_work_queue(spec)
    message = str(info.value)
    assert repr(spec) in message
    assert '"s", "mstd", "mstd:N" or "mstd:N,M"' in message
