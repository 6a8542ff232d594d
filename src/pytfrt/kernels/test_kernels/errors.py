"""Test kernels that produce errors or cancel the request (docs/conformance.md, docs/host.md).

* Emitted errors (diagnostic at the kernel's location): ``tfrt_test.fail``,
  ``tfrt_test.partial_fail``, ``tfrt_test.error_chain`` and the asynchronous
  ``tfrt_test.report_error_async`` / ``report_error_concrete_async`` /
  ``report_error_indirect_async`` (reported later from a task, still at the kernel's location).
* Sync kernels ``tfrt_test.fail_s`` / ``tfrt_test.error_s`` raise: the sync function stops with
  that error, nothing is emitted (docs/executor.md).
* ``tfrt_test.cancel`` cancels the request: every kernel that has not started yet resolves to
  ``Cancelled`` silently.
"""

from __future__ import annotations

from typing import Any

from pytfrt.host.async_value import AsyncValue, make_available
from pytfrt.host.registry import KernelError, KernelFrame, KernelRegistry, kernel

SOMETHING_BAD = "something bad happened"
SOMETHING_BAD_ASYNC = "something bad happened asynchronously"


@kernel("tfrt_test.fail")
def fail() -> int:
    """Reports ``something bad happened``."""
    raise KernelError(SOMETHING_BAD)


@kernel("tfrt_test.partial_fail")
def partial_fail(frame: KernelFrame) -> None:
    """First result ``1``; then reports ``something bad happened`` (the second result errors)."""
    frame.emplace_result(0, 1)
    frame.report_error(SOMETHING_BAD)


@kernel("tfrt_test.report_error_async")
def report_error_async(frame: KernelFrame) -> None:
    """Allocates the result; a task later reports ``something bad happened asynchronously``."""
    frame.allocate_result(0)
    frame.exec_ctx.queue.add_task(lambda: frame.report_error(SOMETHING_BAD_ASYNC))


@kernel("tfrt_test.report_error_concrete_async")
def report_error_concrete_async(frame: KernelFrame, value: int) -> None:
    """In a task: result ``0`` if ``value == 0``, else reports the asynchronous error."""
    result = frame.allocate_result(0)

    def task() -> None:
        if value == 0:
            result.emplace(0)
        else:
            frame.report_error(SOMETHING_BAD_ASYNC)

    frame.exec_ctx.queue.add_task(task)


@kernel("tfrt_test.report_error_indirect_async")
def report_error_indirect_async(frame: KernelFrame, value: int) -> None:
    """Like ``report_error_concrete_async`` with an IndirectAsyncValue result."""
    result = frame.allocate_indirect_result(0)

    def task() -> None:
        if value == 0:
            result.forward_to(make_available(0))
        else:
            frame.report_error(SOMETHING_BAD_ASYNC)

    frame.exec_ctx.queue.add_task(task)


@kernel("tfrt_test.error_chain")
def error_chain(*args: Any) -> Any:
    """Reports ``error chain``."""
    raise KernelError("error chain")


@kernel("tfrt_test.fail_s", "tfrt_test.error_s", sync=True)
def fail_s(*args: Any) -> Any:
    """Sync: fails with ``something bad happened`` (stops the sync function, not emitted)."""
    raise KernelError(SOMETHING_BAD)


@kernel("tfrt_test.cancel")
def cancel(frame: KernelFrame, chain: AsyncValue[Any]) -> tuple[int, AsyncValue[Any]]:
    """Cancels the request; returns ``0`` and the incoming chain."""
    frame.exec_ctx.request_context.cancel()
    return 0, chain.add_ref()


def register(registry: KernelRegistry) -> None:
    """Register the error test kernels."""
    registry.add(
        fail, partial_fail, report_error_async, report_error_concrete_async,
        report_error_indirect_async, error_chain, fail_s, cancel,
    )
