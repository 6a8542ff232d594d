"""RequestContext, ExecutionContext, ResourceContext and cancellation (spec 1.8).

* :class:`RequestContext` -- per request: the HostContext, an id, an optional
  :class:`ResourceContext`, typed data and the cancellation state.  ``cancel()`` installs (once)
  an error value with status ``CANCELLED``/``Cancelled``; the executor checks it before running
  each kernel and skips the kernel silently, so pending work resolves to ``Cancelled``.
* :class:`ExecutionContext` -- a RequestContext plus the work queue to use and the current
  kernel's location; immutable, cheap to copy into closures.
* :class:`ResourceContext` -- a thread-safe string-keyed map whose resources are destroyed in
  reverse insertion order (``tfrt.once`` caches live there).

All classes are thread-safe.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pytfrt.host.async_value import AsyncValue, make_error
from pytfrt.support.errors import CANCELLED_STATUS
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


class RequestContext:
    """Per-request state: host, id, resources, typed data and cancellation."""

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

    def get_data(self, key: type[T]) -> T:
        """The request data of type ``key`` (fixed when the request was built)."""
        return self._data[key]  # type: ignore[no-any-return]

    def cancel(self) -> None:
        """Cancel the request: kernels not yet started resolve to ``Cancelled`` (idempotent)."""
        with self._cancel_lock:
            if self._cancel_value is None:
                self._cancel_value = make_error(CANCELLED_STATUS)

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
