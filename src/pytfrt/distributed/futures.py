"""RemoteFuture: the driver's view of a result that workers compute, bridged to AsyncValues.

A :class:`RemoteFuture` wraps one or more Ray object refs plus how to combine their values
(one result, several results as a tuple, or the chunks of a collective's result).  It offers:

* ``.result(timeout=None)`` -- block for the value (``ray.get``); raises :class:`WorkerLost`
  naming the worker if a worker it depends on died, :class:`RemoteError` if the program
  failed, ``TimeoutError`` if ``timeout`` passed while every worker it depends on is alive;
* ``.done()`` -- non-blocking;
* ``await future`` -- through ``ObjectRef.future()`` (Ray completes it from its own callback
  thread; no thread is blocked per request);
* ``.async_value`` -- a pytfrt :class:`~pytfrt.host.AsyncValue` completed by the same Ray
  callbacks, so remote results feed local dataflow (``and_then``, kernels);
* ``future[i]`` -- the ``i``-th result of a multi-result call, as its own future;
* passing a future as an argument of ``Cluster.remote_execute`` or a collective: the data goes
  from the object store to the worker, never through the driver.

Thread-safety: every method may be called from any thread; the AsyncValue and the awaitable are
created once, under a lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from pytfrt.distributed.errors import (
    ClusterError,
    DistributedError,
    RemoteError,
    WorkerLost,
    status_code,
)
from pytfrt.distributed.worker import Parts, combine_parts
from pytfrt.host.async_value import AsyncValue
from pytfrt.support.errors import Status

if TYPE_CHECKING:
    from pytfrt.distributed.cluster import Cluster


class RemoteFuture:
    """A value being computed on workers (see the module docstring).

    Args:
        cluster: the cluster whose workers produce it (maps Ray errors to worker indices).
        refs: the Ray object refs.
        how: ``"single"`` (one ref), ``"tuple"`` (one ref per result), ``"none"`` (no results;
            the one ref completes when the call does), ``"flat"``/``"concat"``/``"list"``
            (parts, see :class:`~pytfrt.distributed.worker.Parts`).
        workers: the worker indices this value depends on (for timeouts and error messages).
    """

    def __init__(
        self,
        cluster: Cluster,
        refs: Sequence[Any],
        how: str,
        workers: Sequence[int],
        *,
        axis: int = 0,
        shape_ref: Any = None,
    ) -> None:
        self._cluster = cluster
        self.refs = tuple(refs)
        self.how = how
        self.workers = tuple(workers)
        self._axis = axis
        self._shape_ref = shape_ref
        self._lock = threading.Lock()
        self._av: AsyncValue[Any] | None = None
        self._cf: concurrent.futures.Future[Any] | None = None

    @classmethod
    def failed(cls, cluster: Cluster, error: BaseException, workers: Sequence[int]) -> RemoteFuture:
        """A future that is already failed with ``error`` (e.g. a call to a lost worker)."""
        fut = cls(cluster, (), "error", workers)
        fut._error = error
        return fut

    _error: BaseException | None = None

    @property
    def worker(self) -> int | None:
        """The worker that produces this value, if exactly one does."""
        return self.workers[0] if len(self.workers) == 1 else None

    # -- composition --------------------------------------------------------------------------

    def __getitem__(self, index: int) -> RemoteFuture:
        """The ``index``-th result of a multi-result call."""
        if self.how != "tuple":
            if self.how == "single" and index in (0, -1):
                return self
            raise TypeError(f"this future holds one value ({self.how}); it cannot be indexed")
        return RemoteFuture(self._cluster, (self.refs[index],), "single", self.workers)

    def __len__(self) -> int:
        return len(self.refs) if self.how == "tuple" else 1

    def as_argument(self) -> Any:
        """What to pass to a worker for this value (an object ref, or :class:`Parts`)."""
        if self._error is not None:
            raise self._error
        if self.how == "single":
            return self.refs[0]
        if self.how in ("flat", "concat", "list"):
            return Parts(self.refs, self.how, self._axis, self._shape_ref)
        raise ClusterError(
            f"a future of {len(self.refs)} results cannot be one argument; index it "
            "(future[i]) to pass one result"
        )

    # -- blocking API -------------------------------------------------------------------------

    def done(self) -> bool:
        """True once the value (or its error) is available; never blocks."""
        if self._error is not None or not self.refs:
            return True
        import ray

        refs = self._all_refs()
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
        return len(ready) == len(refs)

    def result(self, timeout: float | None = None) -> Any:
        """The value: an ndarray, a tuple of results, a list (``all_gather``) or ``None``.

        Raises:
            WorkerLost: a worker this value depends on died (named in the message).
            RemoteError: the program or model failed on a worker.
            TimeoutError: ``timeout`` seconds passed and the workers are alive.
        """
        if self._error is not None:
            raise self._error
        import ray
        from ray.exceptions import GetTimeoutError

        try:
            values = ray.get(self._all_refs(), timeout=timeout)
        except GetTimeoutError:
            lost = self._cluster._first_lost(self.workers)
            if lost is not None:
                raise lost from None
            raise TimeoutError(
                f"no result from worker(s) {list(self.workers)} within {timeout} s"
            ) from None
        except Exception as exc:  # noqa: BLE001 - translated to pytfrt's errors
            raise self._cluster._translate(exc, self.workers) from None
        return self._combine(values)

    def __await__(self) -> Generator[Any, None, Any]:
        return asyncio.wrap_future(self._concurrent_future()).__await__()

    # -- AsyncValue bridge --------------------------------------------------------------------

    @property
    def async_value(self) -> AsyncValue[Any]:
        """A pytfrt AsyncValue holding :meth:`result`'s value, or an error ``Status``.

        Completed from Ray's callback thread; the error's code is ``UNAVAILABLE`` for a lost
        worker, ``INTERNAL`` for a remote failure.  The same object on every access.
        """
        with self._lock:
            if self._av is None:
                av: AsyncValue[Any] = AsyncValue()
                self._av = av
                self._concurrent_future_locked().add_done_callback(
                    lambda f: _fill(av, f)
                )
            return self._av

    def _concurrent_future(self) -> concurrent.futures.Future[Any]:
        with self._lock:
            return self._concurrent_future_locked()

    def _concurrent_future_locked(self) -> concurrent.futures.Future[Any]:
        """One ``concurrent.futures.Future`` completed by Ray callbacks (no blocked thread)."""
        if self._cf is not None:
            return self._cf
        out: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._cf = out
        if self._error is not None:
            out.set_exception(self._error)
            return out
        refs = self._all_refs()
        if not refs:
            out.set_result(self._combine([]))
            return out
        values: list[Any] = [None] * len(refs)
        remaining = [len(refs)]
        state_lock = threading.Lock()

        def on_done(i: int, f: concurrent.futures.Future[Any]) -> None:
            exc = f.exception()
            with state_lock:  # decide under the lock; complete `out` (run callbacks) outside
                if remaining[0] <= 0:
                    return  # already failed
                if exc is None:
                    values[i] = f.result()
                    remaining[0] -= 1
                    if remaining[0]:
                        return
                else:
                    remaining[0] = -1
            if exc is not None:
                out.set_exception(
                    self._cluster._translate(exc, self.workers, probe=False))
                return
            try:
                out.set_result(self._combine(values))
            except Exception as exc2:  # noqa: BLE001 - delivered through the future
                out.set_exception(exc2)

        for i, ref in enumerate(refs):
            ref.future().add_done_callback(_bind(on_done, i))
        return out

    # -- helpers ------------------------------------------------------------------------------

    def _all_refs(self) -> list[Any]:
        refs = list(self.refs)
        if self._shape_ref is not None:
            refs.append(self._shape_ref)
        return refs

    def _combine(self, values: Sequence[Any]) -> Any:
        if self.how == "single":
            return values[0]
        if self.how == "none":
            return None
        if self.how == "tuple":
            return tuple(values)
        if self._shape_ref is not None:
            shape, _dtype = values[-1]
            return combine_parts(values[:-1], self.how, self._axis, shape)
        return combine_parts(values, self.how, self._axis)

    def __repr__(self) -> str:
        state = "done" if self._error is not None else "pending"
        return f"<RemoteFuture {self.how} from worker(s) {list(self.workers)} ({state})>"


def _bind(
    fn: Callable[[int, concurrent.futures.Future[Any]], None], i: int
) -> Callable[[concurrent.futures.Future[Any]], None]:
    return lambda f: fn(i, f)


def _fill(av: AsyncValue[Any], f: concurrent.futures.Future[Any]) -> None:
    exc = f.exception()
    if exc is None:
        av.emplace(f.result())
        return
    message = str(exc) if isinstance(exc, DistributedError) else f"{type(exc).__name__}: {exc}"
    av.set_error(Status(message, status_code(exc)))


__all__ = ["RemoteError", "RemoteFuture", "WorkerLost"]
