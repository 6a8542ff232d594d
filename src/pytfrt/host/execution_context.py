"""RequestContext, ExecutionContext, ResourceContext and cancellation (docs/host.md).

* :class:`RequestContext` -- per request: the HostContext, an id, an optional
  :class:`ResourceContext`, typed data, the cancellation state and an optional deadline.
  ``cancel()`` installs (once) an error value with status ``CANCELLED``/``Cancelled``; the
  executor checks it before running each kernel and skips the kernel silently.  Kernels already
  running cannot be stopped, so their results are *abandoned* instead: every in-flight result
  the executor registered (:meth:`RequestContext.watch`) resolves at once to the cancel error,
  and the kernel's own late result is dropped.  So after ``cancel()`` every result of the
  request becomes available and a waiting ``await_values`` returns.  A deadline
  (:meth:`RequestContext.set_deadline`) cancels with ``DEADLINE_EXCEEDED``/``Deadline
  exceeded`` when it passes; :meth:`RequestContext.unfinished` then names the kernels whose
  results were abandoned.
* :class:`ExecutionContext` -- a RequestContext plus the work queue to use and the current
  kernel's location; immutable, cheap to copy into closures.
* :class:`ResourceContext` -- a thread-safe string-keyed map whose resources are destroyed in
  reverse insertion order (``tfrt.once`` caches live there).

All classes are thread-safe.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pytfrt.host.async_value import AsyncValue, IndirectAsyncValue, make_error
from pytfrt.support.errors import CANCELLED_STATUS, ErrorCode, Status
from pytfrt.support.location import UNKNOWN_LOC, Location

if TYPE_CHECKING:
    from pytfrt.host.host_context import HostContext
    from pytfrt.host.work_queue import WorkQueue

T = TypeVar("T")

_request_ids = itertools.count()


class ResourceContext:
    """A thread-safe, string-keyed map of per-request resources."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resources: dict[str, Any] = {}

    def get_resource(self, name: str) -> Any | None:
        """The resource named ``name``, or ``None``."""
        with self._lock:
            return self._resources.get(name)

    def create_resource(self, name: str, value: T) -> T:
        """Store ``value`` under ``name``; raises ``KeyError`` if the name is taken."""
        with self._lock:
            if name in self._resources:
                raise KeyError(f"resource {name!r} already exists")
            self._resources[name] = value
            return value

    def get_or_create_resource(self, name: str, factory: Callable[[], T]) -> T:
        """The resource named ``name``, created with ``factory()`` (once) if missing."""
        with self._lock:
            if name not in self._resources:
                self._resources[name] = factory()
            return self._resources[name]  # type: ignore[no-any-return]

    def delete_resource(self, name: str) -> None:
        """Remove the resource named ``name`` (no error if missing)."""
        with self._lock:
            self._resources.pop(name, None)

    def destroy(self) -> None:
        """Drop every resource, in reverse insertion order, calling ``__tfrt_destroy__``."""
        with self._lock:
            items = list(self._resources.values())
            self._resources.clear()
        for value in reversed(items):
            hook = getattr(value, "__tfrt_destroy__", None)
            if hook is not None:
                hook()


DEADLINE_EXCEEDED_STATUS = Status("Deadline exceeded", ErrorCode.DEADLINE_EXCEEDED)


class RequestContext:
    """Per-request state: host, id, resources, typed data, cancellation and deadline."""

    def __init__(
        self,
        host: HostContext,
        resource_context: ResourceContext | None = None,
        request_id: int | None = None,
        data: dict[type, Any] | None = None,
    ) -> None:
        self.host = host
        self.resource_context = resource_context
        self.id = next(_request_ids) if request_id is None else request_id
        self._data = dict(data or {})
        self._cancel_lock = threading.Lock()
        self._cancel_value: AsyncValue[Any] | None = None
        # In-flight kernel results: id(proxy) -> (proxy, kernel name, location).  dict set/pop
        # are atomic; cancel() takes a snapshot.
        self._inflight: dict[int, tuple[IndirectAsyncValue[Any], str, Location]] = {}
        self._abandoned: list[tuple[str, Location]] = []
        self._cancel_done = threading.Event()  # set once cancel() has abandoned everything
        self._timer: threading.Timer | None = None
        self.deadline: float | None = None
        """The deadline (``time.monotonic()`` seconds), or ``None``."""

    def get_data(self, key: type[T]) -> T:
        """The request data of type ``key`` (fixed when the request was built)."""
        return self._data[key]  # type: ignore[no-any-return]

    def cancel(self, status: Status = CANCELLED_STATUS) -> None:
        """Cancel the request (idempotent: the first status wins).

        Kernels not yet started resolve to the cancel error; results of kernels still running
        are abandoned (they resolve to it at once, see the module docstring).
        """
        with self._cancel_lock:
            if self._cancel_value is not None:
                return
            self._cancel_value = make_error(status)
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        try:
            self._abandon_inflight()
        finally:
            self._cancel_done.set()

    def set_deadline(self, seconds: float) -> None:
        """Cancel the request with ``Deadline exceeded`` ``seconds`` from now (unless done).

        A daemon timer thread does it; :meth:`close` stops the timer early.
        """
        if seconds < 0 or seconds != seconds:
            raise ValueError(f"a deadline must be a non-negative number of seconds: {seconds}")
        timer = threading.Timer(seconds, self.cancel, (DEADLINE_EXCEEDED_STATUS,))
        timer.daemon = True
        with self._cancel_lock:
            if self._cancel_value is not None:
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = timer
            self.deadline = time.monotonic() + seconds
        timer.start()

    def close(self) -> None:
        """Stop the deadline timer (call when the request's results are all available)."""
        with self._cancel_lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def deadline_exceeded(self) -> bool:
        """True if the request was cancelled because its deadline passed."""
        value = self._cancel_value
        return value is not None and value.error.code is ErrorCode.DEADLINE_EXCEEDED

    # -- in-flight results (used by the executor) ---------------------------------------------

    def watch(self, value: AsyncValue[Any], name: str, location: Location) -> AsyncValue[Any]:
        """An abandonable stand-in for the unavailable result ``value`` of kernel ``name``.

        Takes over the caller's reference to ``value`` and returns a value carrying one
        reference that resolves to ``value`` -- or to the cancel error if the request is
        cancelled first (then ``value``'s own result is dropped when it comes).
        """
        proxy: IndirectAsyncValue[Any] = IndirectAsyncValue()
        key = id(proxy)
        self._inflight[key] = (proxy, name, location)

        def done() -> None:
            self._inflight.pop(key, None)
            if not proxy.try_forward_to(value):
                value.drop_ref()  # abandoned: the late result is not wanted

        value.and_then(done)
        if self._cancel_value is not None:  # cancelled while we registered
            self._abandon_inflight()
        return proxy

    def _abandon_inflight(self) -> None:
        cancel = self._cancel_value
        assert cancel is not None
        for key, (proxy, name, location) in list(self._inflight.items()):
            if self._inflight.pop(key, None) is None:
                continue  # finished (or abandoned) meanwhile
            entry = (name, location)
            self._abandoned.append(entry)  # before forwarding: that may wake a waiter at once
            if not proxy.try_forward_to(cancel.add_ref()):
                cancel.drop_ref()
                self._abandoned.remove(entry)

    def unfinished(self) -> list[tuple[str, Location]]:
        """The kernels whose results were abandoned by cancellation or the deadline.

        Once cancelled, waits (up to 5 s) until ``cancel()`` has abandoned every in-flight
        result, since a waiter may wake before the canceller is done.
        """
        if self._cancel_value is not None:
            self._cancel_done.wait(5.0)
        return list(self._abandoned)

    def stopped(self, name: str, location: Location) -> None:
        """Record that kernel ``name`` stopped early because the request was cancelled (a loop
        that checks for cancellation between iterations and ends with the cancel error);
        :meth:`unfinished` reports it with the abandoned kernels.  Recorded once."""
        entry = (name, location)
        if entry not in self._abandoned:
            self._abandoned.append(entry)

    def is_cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancel_value is not None

    @property
    def cancel_value(self) -> AsyncValue[Any] | None:
        """The ``Cancelled`` error value, or ``None`` if not cancelled."""
        return self._cancel_value


@dataclass(frozen=True, slots=True)
class ExecutionContext:
    """What a kernel needs besides its operands: request, work queue and location."""

    request_context: RequestContext
    work_queue: WorkQueue | None = None
    location: Location = UNKNOWN_LOC

    @property
    def host(self) -> HostContext:
        """The HostContext of the request."""
        return self.request_context.host

    @property
    def queue(self) -> WorkQueue:
        """The work queue to use (the host's unless overridden)."""
        return self.work_queue if self.work_queue is not None else self.host.work_queue

    @property
    def resource_context(self) -> ResourceContext | None:
        """The request's resource context, if any."""
        return self.request_context.resource_context

    def with_location(self, location: Location) -> ExecutionContext:
        """A copy with another current location."""
        return replace(self, location=location)

    def is_cancelled(self) -> bool:
        """True if the request was cancelled."""
        return self.request_context._cancel_value is not None
