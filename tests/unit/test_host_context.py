"""HostContext: enqueue_work, blocking work, shared contexts, diagnostics, lifetime."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from pytfrt.config import ConfigError
from pytfrt.host import (
    AsyncValue,
    Diagnostic,
    DiagnosticCollector,
    ExecutionContext,
    HostContext,
    KernelRegistry,
    MultiThreadedWorkQueue,
    SingleThreadedWorkQueue,
    make_unconstructed,
)
from pytfrt.host.allocator import create_allocator
from pytfrt.support.errors import ErrorCode, Status
from pytfrt.support.location import FileLineColLoc

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["s", "mstd:2"])
def host(request: pytest.FixtureRequest) -> Iterator[HostContext]:
    with HostContext(request.param, diagnostic_handler=DiagnosticCollector()) as h:
        yield h


def test_defaults() -> None:
    host = HostContext()
    assert isinstance(host.work_queue, SingleThreadedWorkQueue)
    assert isinstance(host.registry, KernelRegistry)
    assert host.num_worker_threads == 1
    assert not host.is_in_worker_thread()
    host.shutdown()


def test_accepts_a_queue_object_registry_and_allocator() -> None:
    queue = MultiThreadedWorkQueue(2, 4)
    registry = KernelRegistry()
    allocator = create_allocator("malloc")
    with HostContext(queue, registry=registry, allocator=allocator) as host:
        assert host.work_queue is queue
        assert host.registry is registry
        assert host.allocator is allocator
        assert host.num_worker_threads == 2
    with pytest.raises(Exception, match="shut down"):  # the context manager shut it down
        queue.add_task(lambda: None)


def test_bad_work_queue_string_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="accepted forms"):
        HostContext("mstd:zero")


def test_enqueue_work_value(host: HostContext) -> None:
    results = [host.enqueue_work(lambda i=i: i * 10) for i in range(10)]
    host.await_values(results)
    assert [r.get() for r in results] == [i * 10 for i in range(10)]


def test_enqueue_work_exception_becomes_error(host: HostContext) -> None:
    def fail() -> int:
        raise ZeroDivisionError("division by zero in a task")

    def fail_silently() -> int:
        raise KeyError

    bad = host.enqueue_work(fail)
    unnamed = host.enqueue_work(fail_silently)
    status = host.enqueue_work(lambda: Status("returned status", ErrorCode.ABORTED))
    host.await_values([bad, unnamed, status])
    assert bad.error == Status("division by zero in a task", ErrorCode.INTERNAL)
    assert unnamed.error.message == "KeyError"
    assert status.error == Status("returned status", ErrorCode.ABORTED)


def test_enqueue_work_runs_on_a_worker(host: HostContext) -> None:
    flags = host.enqueue_work(host.is_in_worker_thread)
    host.await_values([flags])
    assert flags.get() is True


def test_enqueue_work_on_s_runs_only_when_awaited() -> None:
    with HostContext("s") as host:
        ran: list[int] = []

        def work() -> int:
            ran.append(1)
            return 5

        result = host.enqueue_work(work)
        assert ran == [] and result.is_unavailable()
        host.await_values([result])
        assert ran == [1] and result.get() == 5


def test_enqueue_blocking_work(host: HostContext) -> None:
    value = host.enqueue_blocking_work(lambda: 6 * 7)
    failed = host.enqueue_blocking_work(lambda: int("x"))
    host.await_values([value, failed])
    assert value.get() == 42
    assert "invalid literal" in failed.error.message


def test_blocking_work_on_mstd_does_not_hold_back_compute_work() -> None:
    with HostContext("mstd:1,2") as host:
        event = threading.Event()
        waiter = host.enqueue_blocking_work(lambda: event.wait(10))  # blocks until set
        setter = host.enqueue_work(event.set)  # runs on the compute worker meanwhile
        host.await_values([waiter, setter])
        assert waiter.get() is True


def test_enqueue_blocking_work_refused_is_an_error() -> None:
    class RefusingQueue(SingleThreadedWorkQueue):
        def add_blocking_task(self, task: object, allow_queuing: bool = True) -> bool:
            return False

    with HostContext(RefusingQueue()) as host:
        result = host.enqueue_blocking_work(lambda: 1)
        assert result.error.message == "Failed to enqueue blocking work."


def test_run_blocking_work_without_queuing() -> None:
    with HostContext("s") as host:
        assert host.run_blocking_work(lambda: None) is False
    with HostContext("mstd:1,1") as host:
        done = threading.Event()
        assert host.run_blocking_work(done.set) is True
        host.quiesce()
        assert done.is_set()


def test_quiesce_and_run_when_ready(host: HostContext) -> None:
    a: AsyncValue[int] = make_unconstructed()
    b: AsyncValue[int] = make_unconstructed()
    seen: list[int] = []
    host.run_when_ready([a, b], lambda: seen.append(a.get() + b.get()))
    host.enqueue_work(lambda: a.emplace(1))
    host.enqueue_work(lambda: b.emplace(2))
    host.quiesce()
    assert seen == [3]


def test_shared_contexts_are_created_once_under_concurrency() -> None:
    created: list[object] = []
    gate = threading.Barrier(8, timeout=10)

    class Shared:
        def __init__(self, host: HostContext) -> None:
            self.host = host
            created.append(self)

    host = HostContext()
    got: list[Shared] = []
    lock = threading.Lock()

    def race() -> None:
        gate.wait()
        instance = host.get_or_create_shared_context(Shared)
        with lock:
            got.append(instance)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(created) == 1
    assert len(got) == 8 and all(g is created[0] for g in got)
    assert created[0].host is host  # type: ignore[attr-defined]
    assert HostContext().get_or_create_shared_context(Shared) is not created[0]  # per host


def test_shared_context_may_create_another_shared_context() -> None:
    class Inner:
        def __init__(self, host: HostContext) -> None:
            pass

    class Outer:
        def __init__(self, host: HostContext) -> None:
            self.inner = host.get_or_create_shared_context(Inner)

    host = HostContext()
    outer = host.get_or_create_shared_context(Outer)
    assert outer.inner is host.get_or_create_shared_context(Inner)


def test_diagnostics_reach_the_handler(host: HostContext) -> None:
    handler = host.diagnostic_handler
    assert isinstance(handler, DiagnosticCollector)
    loc = FileLineColLoc("prog.mlir", 3, 7)
    host.emit_error(Diagnostic("first", loc))
    done = host.enqueue_work(lambda: host.emit_error(Diagnostic("from a task", loc)))
    host.await_values([done])
    assert handler.messages == ["first", "from a task"]
    assert str(handler.diagnostics[0]) == "prog.mlir:3:7: error: first"
    assert handler.diagnostics[0].status == Status("first", ErrorCode.INTERNAL)


def test_a_kernel_error_code_follows_the_tfrt_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    # TFRT's EmitErrorAsync: INTERNAL since its errors are absl::Status, Unknown at de22adc4.
    assert Diagnostic("x").code is ErrorCode.INTERNAL
    monkeypatch.setenv("PYTFRT_TFRT_REVISION", "de22adc4")
    assert Diagnostic("x").code is ErrorCode.UNKNOWN
    assert Diagnostic("x", code=ErrorCode.CANCELLED).code is ErrorCode.CANCELLED
    monkeypatch.setenv("PYTFRT_TFRT_REVISION", "2019")
    with pytest.raises(ConfigError, match="PYTFRT_TFRT_REVISION"):
        Diagnostic("x")


def test_default_diagnostic_handler_prints_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    host = HostContext()
    host.emit_error(Diagnostic("visible", FileLineColLoc("f.mlir", 1, 2)))
    assert capsys.readouterr().err == "f.mlir:1:2: error: visible\n"


def test_new_execution_context(host: HostContext) -> None:
    ctx = host.new_execution_context()
    assert isinstance(ctx, ExecutionContext)
    assert ctx.host is host
    assert ctx.queue is host.work_queue
    other = host.new_execution_context()
    assert other.request_context.id != ctx.request_context.id


def test_shutdown_finishes_queued_work_and_is_idempotent() -> None:
    for queue_type in ("s", "mstd:2"):
        host = HostContext(queue_type)
        result = host.enqueue_work(lambda: "done")
        host.shutdown()
        host.shutdown()
        assert result.get() == "done"
