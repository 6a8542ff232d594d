"""From runtime work to asyncio: chaining AsyncValues and awaiting them on an event loop.

The server never runs model work on the event loop.  A request becomes a chain of runtime
tasks on the host's work queue (decode -> predict -> encode, :func:`then_work`) whose final
:class:`~pytfrt.host.AsyncValue` the request handler awaits with :func:`wrap_future`: the
AsyncValue's ``and_then`` waiter -- which runs on whichever runtime thread publishes the value
-- hands the result to the loop with ``loop.call_soon_threadsafe``, the one thread-safe way
into asyncio.

Errors travel as values: a :class:`ServingError` raised by a step becomes an error AsyncValue
carrying its code (:func:`fill`); any other exception becomes ``INTERNAL`` with the exception's
message (its traceback is printed to stderr for the operator, never sent to the client).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from pytfrt.host import AsyncValue, HostContext, make_unconstructed
from pytfrt.serving.errors import ServingError
from pytfrt.support.errors import ErrorCode, Status

T = TypeVar("T")
U = TypeVar("U")


def error_status(exc: BaseException) -> Status:
    """The runtime :class:`Status` for an exception raised by a serving step."""
    if isinstance(exc, ServingError):
        return exc.to_status()
    if isinstance(exc, ValueError | TypeError):
        # Input errors of the model itself (pytfrt.model.InputError is a ValueError).
        return Status(str(exc) or type(exc).__name__, ErrorCode.INVALID_ARGUMENT)
    print("pytfrt serve: a request step raised an exception:", file=sys.stderr)
    traceback.print_exception(exc, file=sys.stderr)
    return Status(f"internal error: {type(exc).__name__}: {exc}", ErrorCode.INTERNAL)


def fill(result: AsyncValue[T], fn: Callable[[], T]) -> None:
    """Run ``fn`` and publish its value, or its exception as an error, into ``result``."""
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - becomes the error value
        result.set_error(error_status(exc))
        return
    result.emplace(value)


def then(value: AsyncValue[T], fn: Callable[[T], U]) -> AsyncValue[U]:
    """``fn(value)`` as a new AsyncValue, run inline by whichever thread publishes ``value``.

    For cheap steps (reshaping a result); errors in ``value`` propagate unchanged.
    """
    result: AsyncValue[U] = make_unconstructed()

    def step() -> None:
        if value.is_error():
            result.set_error(value.error)
        else:
            fill(result, lambda: fn(value.get()))

    value.and_then(step)
    return result


def then_work(host: HostContext, value: AsyncValue[T], fn: Callable[[T], U]) -> AsyncValue[U]:
    """``fn(value)`` as a new task on ``host``'s work queue once ``value`` is available."""
    result: AsyncValue[U] = make_unconstructed()

    def step() -> None:
        if value.is_error():
            result.set_error(value.error)
            return
        host.work_queue.add_task(lambda: fill(result, lambda: fn(value.get())))

    value.and_then(step)
    return result


def chain(value: AsyncValue[T], fn: Callable[[T], AsyncValue[U]]) -> AsyncValue[U]:
    """The AsyncValue ``fn(value)`` returns, once ``value`` is available (a monadic bind)."""
    result: AsyncValue[U] = make_unconstructed()

    def forward(inner: AsyncValue[U]) -> None:
        if inner.is_error():
            result.set_error(inner.error)
        else:
            result.emplace(inner.get())

    def step() -> None:
        if value.is_error():
            result.set_error(value.error)
            return
        try:
            inner = fn(value.get())
        except Exception as exc:  # noqa: BLE001 - becomes the error value
            result.set_error(error_status(exc))
            return
        inner.and_then(lambda: forward(inner))

    value.and_then(step)
    return result


def submit(host: HostContext, fn: Callable[[], T]) -> AsyncValue[T]:
    """Run ``fn`` as a task on ``host``'s work queue (errors keep their serving codes)."""
    result: AsyncValue[T] = make_unconstructed()
    host.work_queue.add_task(lambda: fill(result, fn))
    return result


def wrap_future(value: AsyncValue[T], loop: asyncio.AbstractEventLoop) -> asyncio.Future[T]:
    """An asyncio future on ``loop`` settled with ``value``'s result or error.

    Call on the loop's thread.  The error becomes a :class:`ServingError` with the error's code.
    Safe if the loop closes first (the late result is dropped).
    """
    future: asyncio.Future[T] = loop.create_future()

    def settle() -> None:
        if future.done():  # cancelled (client went away)
            return
        if value.is_error():
            future.set_exception(ServingError.from_status(value.error))
        else:
            future.set_result(value.get())

    def on_ready() -> None:
        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    value.and_then(on_ready)
    return future


def result_or_raise(value: AsyncValue[Any]) -> Any:
    """The value of an available AsyncValue, or its error raised as :class:`ServingError`."""
    if value.is_error():
        raise ServingError.from_status(value.error)
    return value.get()


def wait(value: AsyncValue[Any]) -> Any:
    """Block the calling thread (never a work-queue thread: it would wait for itself) until
    ``value`` is available; its value, or its error raised as :class:`ServingError`."""
    if not value.is_available():
        ready = threading.Event()
        value.and_then(ready.set)
        ready.wait()
    return result_or_raise(value)
