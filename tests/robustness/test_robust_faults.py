"""Stuck or failed kernels never hang the process; awaiting from several threads works.

A kernel that never resolves its result, or whose helper thread dies first, is abandoned by
a deadline (``RequestContext.set_deadline``, ``bef_executor --timeout_seconds``) or, without
one, detected as a deadlock; its results become errors, the rest of the program still runs.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from robust_harness import MISBEHAVING, QUEUES, run_mlir, stuck_program

from pytfrt.host import HostContext, make_unconstructed
from pytfrt.host.async_value import make_available
from pytfrt.host.work_queue import WorkQueueError, create_work_queue
from pytfrt.support.location import UNKNOWN_LOC

pytestmark = pytest.mark.timeout(60)

HARNESS = str(Path(__file__).with_name("robust_harness.py"))


@pytest.mark.parametrize("queue", QUEUES)
@pytest.mark.parametrize("kernel", ["robust.never.i32", "robust.dies.i32"])
def test_deadline_turns_stuck_results_into_errors(queue: str, kernel: str) -> None:
    run = run_mlir(stuck_program(kernel), queue, extra_kernels=MISBEHAVING, timeout=0.3)
    assert run.results == ["<<error: Deadline exceeded>>", 7]


@pytest.mark.parametrize("queue", QUEUES)
def test_memory_error_in_a_kernel_is_an_error_value(queue: str) -> None:
    run = run_mlir(stuck_program("robust.oom.i32"), queue, extra_kernels=MISBEHAVING)
    assert run.results == ["<<error: MemoryError>>", 7]
    assert run.diagnostics == ["MemoryError"]


@pytest.mark.parametrize("queue", QUEUES)
def test_cancel_unblocks_a_waiting_await(queue: str) -> None:
    with HostContext(queue) as host:
        request = host.new_request()
        stuck = make_unconstructed()
        proxy = request.watch(stuck, "k", UNKNOWN_LOC)
        threading.Timer(0.2, request.cancel).start()
        assert host.await_values([proxy], timeout=30)
        assert proxy.error.message == "Cancelled"
        assert [name for name, _ in request.unfinished()] == ["k"]
        stuck.emplace(1)  # the late result is dropped, not an error
        assert proxy.error.message == "Cancelled"


def test_await_timeout_returns_false() -> None:
    for queue in QUEUES:
        with HostContext(queue) as host:
            value = make_unconstructed()
            threading.Timer(1.0, value.emplace, (1,)).start()  # keeps a thread alive
            assert host.await_values([value], timeout=0.1) is False
            assert host.await_values([value], timeout=30) is True


DEADLOCK_SCRIPT = """
from pytfrt.host import HostContext, make_unconstructed
from pytfrt.host.work_queue import WorkQueueError
with HostContext({queue!r}) as host:
    try:
        host.await_values([make_unconstructed()])
    except WorkQueueError as exc:
        print("raised:", exc)
"""


@pytest.mark.parametrize("queue", ["s", "mstd:2"])
def test_deadlock_is_detected_when_no_thread_can_help(queue: str) -> None:
    # In a fresh process: the detection needs every thread but the queue's own to be gone
    # (this test process keeps unrelated threads alive).
    out = subprocess.run([sys.executable, "-c", DEADLOCK_SCRIPT.format(queue=queue)],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("raised: await_values(): the queue ")
    assert "(deadlock)" in out.stdout


# -- several threads awaiting on one single-threaded host ----------------------------------------


def test_several_threads_await_on_one_s_host() -> None:
    with HostContext("s") as host:
        values = [host.enqueue_work(functools.partial(pow, i, 2)) for i in range(40)]
        got: dict[int, int] = {}
        errors: list[BaseException] = []

        def waiter(i: int) -> None:
            try:
                host.await_values([values[i]])
                got[i] = values[i].get()
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion
                errors.append(exc)

        threads = [threading.Thread(target=waiter, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []
        assert got == {i: i * i for i in range(40)}


def test_awaiting_from_inside_a_task_is_still_refused() -> None:
    with HostContext("s") as host:
        inner: list[BaseException] = []

        def task() -> None:
            try:
                host.await_values([make_available(1)] + [make_unconstructed()])
            except WorkQueueError as exc:
                inner.append(exc)

        host.work_queue.add_task(task)
        host.quiesce()
        assert inner and "inside a task" in str(inner[0])


# -- resource caps of the work queues ----------------------------------------------------------


@pytest.mark.parametrize("spec", ["mstd:100000", "mstd:2,100000000", "mstd:0", "mstd:-1"])
def test_absurd_thread_counts_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="1 <= N <= 1024"):
        create_work_queue(spec)


# -- bef_executor --------------------------------------------------------------------------------


def bef_executor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytfrt.tools.bef_executor",
                           f"--kernels={HARNESS}", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=60)


@pytest.mark.parametrize("queue", QUEUES)
def test_bef_executor_timeout_reports_unfinished_kernels(tmp_path: Path, queue: str) -> None:
    program = tmp_path / "stuck.mlir"
    program.write_text(stuck_program("robust.never.i32")
                       + stuck_program("robust.oom.i32").replace("@main", "@after"))
    start = time.monotonic()
    out = bef_executor("--timeout_seconds=0.5", f"--work_queue_type={queue}", str(program),
                       cwd=tmp_path)
    assert time.monotonic() - start < 30
    assert out.returncode == 1
    assert "'main' returned <<error: Deadline exceeded>>,7" in out.stdout
    assert "'after' returned <<error: MemoryError>>,7" in out.stdout  # the rest still runs
    assert (f"{program}:4:3: error: unexpected error: runtime error: kernel "
            "'robust.never.i32' did not finish before the deadline (--timeout_seconds=0.5)"
            in out.stderr)
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("queue", ["s", "mstd:2"])
def test_bef_executor_reports_a_dead_helper_without_timeout(tmp_path: Path, queue: str) -> None:
    program = tmp_path / "dies.mlir"
    program.write_text(stuck_program("robust.dies.i32"))
    out = bef_executor(f"--work_queue_type={queue}", str(program), cwd=tmp_path)
    assert out.returncode == 1
    assert "'main' returned <<error: Deadlock: no thread can produce the results>>,7" in out.stdout
    assert "kernel 'robust.dies.i32' never finished" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "nan"])
def test_bef_executor_rejects_a_bad_timeout(tmp_path: Path, value: str) -> None:
    out = bef_executor(f"--timeout_seconds={value}", "x.mlir", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip() == (f"bef_executor: --timeout_seconds needs a positive number "
                                  f"of seconds, got '{value}'")


# -- wrong values are errors, not output ---------------------------------------------------------


@pytest.mark.parametrize("queue", QUEUES)
def test_wrong_result_type_is_an_error_at_the_kernel(queue: str) -> None:
    run = run_mlir(stuck_program("robust.wrong_type.i32"), queue, extra_kernels=MISBEHAVING)
    message = "kernel 'robust.wrong_type.i32' returned a str for its i32 result 0"
    assert run.results == [f"<<error: {message}>>", 7]
    assert run.diagnostics == [message]  # reported once, at the producer


def test_wrong_result_type_does_not_stop_the_other_functions(tmp_path: Path) -> None:
    program = tmp_path / "wrong.mlir"
    program.write_text(stuck_program("robust.wrong_type.i32").replace("@main", "@first")
                       + stuck_program("tfrt_test.async_add.i32").replace(
                           '"tfrt_test.async_add.i32"(%one) : (i32) -> i32',
                           '"tfrt_test.async_add.i32"(%one, %one) : (i32, i32) -> i32'))
    out = bef_executor(str(program), cwd=tmp_path)
    assert out.returncode == 1
    assert "'first' returned <<error: kernel 'robust.wrong_type.i32' returned a str" in out.stdout
    assert "'main' returned 3,7" in out.stdout
    assert "Traceback" not in out.stderr
