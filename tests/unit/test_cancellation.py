"""RequestContext cancellation, ExecutionContext and ResourceContext (docs/host.md)."""

from __future__ import annotations

import threading

import pytest

from pytfrt.host import ExecutionContext, HostContext, RequestContext, ResourceContext
from pytfrt.support.errors import CANCELLED_STATUS, ErrorCode, Status
from pytfrt.support.location import UNKNOWN_LOC, FileLineColLoc

pytestmark = pytest.mark.timeout(30)


def test_cancel_installs_one_cancelled_error_value() -> None:
    request = HostContext().new_request()
    assert not request.is_cancelled() and request.cancel_value is None
    request.cancel()
    first = request.cancel_value
    assert first is not None and request.is_cancelled()
    assert first.is_error()
    assert first.error == Status("Cancelled", ErrorCode.CANCELLED) == CANCELLED_STATUS
    request.cancel()  # idempotent: the same value stays installed
    assert request.cancel_value is first


def test_concurrent_cancels_install_exactly_one_value() -> None:
    request = HostContext().new_request()
    gate = threading.Barrier(6, timeout=10)
    seen: list[object] = []

    def cancel() -> None:
        gate.wait()
        request.cancel()
        seen.append(request.cancel_value)

    threads = [threading.Thread(target=cancel) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(seen) == 6 and all(v is seen[0] for v in seen)


def test_execution_context_sees_its_request_cancellation() -> None:
    host = HostContext()
    ctx = host.new_execution_context()
    moved = ctx.with_location(FileLineColLoc("a.mlir", 1, 1))
    assert not ctx.is_cancelled() and not moved.is_cancelled()
    ctx.request_context.cancel()
    assert ctx.is_cancelled() and moved.is_cancelled()  # copies share the request


def test_requests_are_cancelled_independently() -> None:
    host = HostContext()
    a, b = host.new_request(), host.new_request()
    a.cancel()
    assert a.is_cancelled() and not b.is_cancelled()
    assert a.id != b.id


def test_execution_context_fields_and_copies() -> None:
    host = HostContext()
    resources = ResourceContext()
    ctx = host.new_execution_context(resources)
    assert ctx.location is UNKNOWN_LOC
    assert ctx.resource_context is resources
    assert ctx.queue is host.work_queue
    loc = FileLineColLoc("b.mlir", 4, 2)
    moved = ctx.with_location(loc)
    assert moved.location == loc and ctx.location is UNKNOWN_LOC
    assert moved.request_context is ctx.request_context
    other_queue = HostContext("s").work_queue
    assert ExecutionContext(ctx.request_context, other_queue).queue is other_queue
    with pytest.raises(AttributeError):
        ctx.location = loc  # type: ignore[misc]  # immutable


def test_request_data_and_explicit_id() -> None:
    host = HostContext()
    request = RequestContext(host, request_id=77, data={int: 5, str: "five"})
    assert request.id == 77
    assert request.get_data(int) == 5 and request.get_data(str) == "five"
    with pytest.raises(KeyError):
        request.get_data(float)


# -- ResourceContext ----------------------------------------------------------------------------


def test_resource_create_get_delete() -> None:
    rc = ResourceContext()
    assert rc.get_resource("x") is None
    assert rc.create_resource("x", [1]) == [1]
    assert rc.get_resource("x") == [1]
    with pytest.raises(KeyError, match="already exists"):
        rc.create_resource("x", [2])
    rc.delete_resource("x")
    rc.delete_resource("x")  # no error when missing
    assert rc.get_resource("x") is None


def test_get_or_create_is_thread_safe_under_contention() -> None:
    rc = ResourceContext()
    calls: list[int] = []
    gate = threading.Barrier(8, timeout=10)
    got: list[tuple[str, object]] = []

    def factory() -> object:
        calls.append(1)
        return object()

    def worker() -> None:
        gate.wait()
        for name in ("a", "b", "c"):
            got.append((name, rc.get_or_create_resource(name, factory)))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(calls) == 3  # one factory call per name, whatever the interleaving
    for name in ("a", "b", "c"):
        instances = {id(obj) for n, obj in got if n == name}
        assert len(instances) == 1


def test_destroy_runs_hooks_in_reverse_insertion_order() -> None:
    log: list[str] = []

    class Resource:
        def __init__(self, name: str) -> None:
            self.name = name

        def __tfrt_destroy__(self) -> None:
            log.append(self.name)

    rc = ResourceContext()
    rc.create_resource("first", Resource("first"))
    rc.get_or_create_resource("second", lambda: Resource("second"))
    rc.create_resource("plain", 3)  # resources without the hook are just dropped
    rc.create_resource("third", Resource("third"))
    rc.destroy()
    assert log == ["third", "second", "first"]
    assert rc.get_resource("first") is None
