"""HostContext: the runtime instance every kernel runs in (docs/host.md).

A HostContext owns the work queue, the kernel registry, the diagnostic handler, the host
allocator, the data directories kernels may read files from (docs/security.md) and the shared
contexts (one instance per type, created lazily).  It is explicit, never global: create one per
executor instance or test, and call :meth:`HostContext.shutdown` (or use it as a context
manager) to stop its threads.

Thread-safety: every method may be called from any thread, except :meth:`await_values` and
:meth:`quiesce`, which must be called from a non-worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pytfrt.host import async_value as av_mod
from pytfrt.host.async_value import AsyncValue, make_unconstructed
from pytfrt.host.diagnostics import Diagnostic, DiagnosticHandler, print_diagnostic
from pytfrt.host.execution_context import ExecutionContext, RequestContext, ResourceContext
from pytfrt.host.file_access import DataDirectories
from pytfrt.host.registry import KernelRegistry
from pytfrt.host.work_queue import WorkQueue, create_work_queue
from pytfrt.support.errors import Status

T = TypeVar("T")


class HostContext:
    """Owns the work queue, kernel registry, diagnostic handler, allocator and shared contexts.

    Args:
        work_queue: a :class:`WorkQueue` or a TFRT type string (``"s"``, ``"mstd:2"``, ...).
        registry: the kernel registry; a new empty one if omitted.
        diagnostic_handler: called with every emitted :class:`Diagnostic` (any thread).
        allocator: the host allocator object (see ``pytfrt.host.allocator``), or ``None``.
        data_dirs: where kernels may read files (:class:`DataDirectories`); by default the
            working directory at creation (docs/security.md).

    Raises:
        ValueError: for a bad work-queue type string.
    """

    def __init__(
        self,
        work_queue: WorkQueue | str = "s",
        registry: KernelRegistry | None = None,
        diagnostic_handler: DiagnosticHandler | None = None,
        allocator: Any = None,
        data_dirs: DataDirectories | None = None,
    ) -> None:
        self.work_queue = (
            create_work_queue(work_queue) if isinstance(work_queue, str) else work_queue
        )
        self.registry = registry if registry is not None else KernelRegistry()
        self.diagnostic_handler: DiagnosticHandler = diagnostic_handler or print_diagnostic
        self.allocator = allocator
        self.data_dirs = data_dirs if data_dirs is not None else DataDirectories.default()
        self._shared_lock = threading.RLock()  # a shared context may create another
        self._shared: dict[type, Any] = {}
        self.tracer: Any = None
        """A :class:`pytfrt.host.tracing.Tracer` while tracing, else ``None`` (the default)."""
        self.errors_emitted = 0
        """How many diagnostics :meth:`emit_error` has sent (a plain counter, GIL-updated)."""

    # -- diagnostics ----------------------------------------------------------------------

    def emit_error(self, diagnostic: Diagnostic) -> None:
        """Send ``diagnostic`` to the diagnostic handler."""
        self.errors_emitted += 1
        self.diagnostic_handler(diagnostic)

    # -- shared contexts ------------------------------------------------------------------

    def get_or_create_shared_context(self, cls: Callable[[HostContext], T]) -> T:
        """The one instance of ``cls`` for this host, created as ``cls(self)`` on first use.

        Thread-safe: concurrent first calls create one instance; ``cls(self)`` may itself ask
        for another shared context.
        """
        with self._shared_lock:
            if cls not in self._shared:
                self._shared[cls] = cls(self)  # type: ignore[index]
            return self._shared[cls]  # type: ignore[no-any-return,index]

    # -- work -----------------------------------------------------------------------------

    def enqueue_work(self, fn: Callable[[], T]) -> AsyncValue[T]:
        """Run ``fn`` as a task; the returned value gets its result, or its exception as error."""
        result: AsyncValue[T] = make_unconstructed()
        if self.tracer is not None:
            fn = self.tracer.wrap_task(fn)
        self.work_queue.add_task(lambda: _fill(result, fn))
        return result

    def enqueue_blocking_work(self, fn: Callable[[], T]) -> AsyncValue[T]:
        """Run ``fn`` on the blocking pool (error ``Failed to enqueue blocking work.`` if refused).

        Like :meth:`enqueue_work`, the result gets ``fn``'s return value or its exception as error.
        """
        result: AsyncValue[T] = make_unconstructed()
        if self.tracer is not None:
            fn = self.tracer.wrap_task(fn)
        if not self.work_queue.add_blocking_task(lambda: _fill(result, fn), allow_queuing=True):
            result.set_error("Failed to enqueue blocking work.")
        return result

    def run_blocking_work(self, fn: Callable[[], None]) -> bool:
        """Start ``fn`` on a blocking thread without queuing; False if none is free."""
        return self.work_queue.add_blocking_task(fn, allow_queuing=False)

    def await_values(self, values: Sequence[AsyncValue[Any]],
                     timeout: float | None = None) -> bool:
        """Block until every value is available (drives the ``s`` queue).

        Returns False if ``timeout`` seconds passed first.  Several threads may await on one
        host at once, whatever the queue: on ``s`` one of them drives the queue and the others
        wait for their values (or take over driving when it returns).

        Raises:
            WorkQueueError: called from a task, or a certain deadlock (no thread can make the
                values available).
        """
        return self.work_queue.await_values(values, timeout)

    def quiesce(self, timeout: float | None = None) -> bool:
        """Block until no task is pending or running; False if ``timeout`` passed first."""
        return self.work_queue.quiesce(timeout)

    @staticmethod
    def run_when_ready(values: Sequence[AsyncValue[Any]], callback: Callable[[], None]) -> None:
        """Run ``callback`` once every value is available (see ``async_value.run_when_ready``)."""
        av_mod.run_when_ready(values, callback)

    @property
    def num_worker_threads(self) -> int:
        """The work queue's parallelism level."""
        return self.work_queue.parallelism_level

    def is_in_worker_thread(self) -> bool:
        """True if called from a task of this host's work queue."""
        return self.work_queue.is_in_worker_thread()

    # -- contexts -------------------------------------------------------------------------

    def new_request(self, resource_context: ResourceContext | None = None) -> RequestContext:
        """A new RequestContext on this host."""
        return RequestContext(self, resource_context)

    def new_execution_context(
        self, resource_context: ResourceContext | None = None
    ) -> ExecutionContext:
        """An ExecutionContext for a new request on this host."""
        return ExecutionContext(self.new_request(resource_context))

    # -- lifetime -------------------------------------------------------------------------

    def shutdown(self, timeout: float | None = None) -> None:
        """Finish queued work (waiting at most ``timeout`` seconds for it) and stop the work
        queue's threads. Idempotent."""
        self.work_queue.shutdown(timeout)

    def __enter__(self) -> HostContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _fill(result: AsyncValue[T], fn: Callable[[], T]) -> None:
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - becomes the error value
        result.set_error(Status(str(exc) or type(exc).__name__))
        return
    if isinstance(value, Status):
        result.set_error(value)
    else:
        result.emplace(value)
