"""Helpers shared by the kernel libraries: integer wrap-around, printing, task submission.

* ``wrap_i32``/``wrap_i64``/``wrap_u32``/``wrap_u64``: C++ fixed-width wrap-around of Python ints
  (two's complement), a couple of integer operations each: kernels call them on the hot path.
* :func:`print_line`: TFRT's kernels write one line to stdout and flush it at once, so stdout and
  stderr interleave in execution order (docs/conformance.md).  Writes go to the *current*
  ``sys.stdout``.
* :func:`enqueue` / :func:`enqueue_blocking`: run a callable as a task of the execution
  context's work queue; the returned AsyncValue receives its result (or its exception as error).

Thread-safe: nothing here keeps state.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from pytfrt.host.async_value import AsyncValue, make_unconstructed
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.support.errors import Status

T = TypeVar("T")

_I32_BIAS = 0x80000000
_U32_MASK = 0xFFFFFFFF
_I64_BIAS = 0x8000000000000000
_U64_MASK = 0xFFFFFFFFFFFFFFFF

I32_MIN = -_I32_BIAS
I32_MAX = _I32_BIAS - 1
I64_MIN = -_I64_BIAS
I64_MAX = _I64_BIAS - 1


def wrap_i32(x: int) -> int:
    """``x`` reduced to a signed 32-bit integer (two's complement wrap-around)."""
    return ((x + _I32_BIAS) & _U32_MASK) - _I32_BIAS


def wrap_i64(x: int) -> int:
    """``x`` reduced to a signed 64-bit integer (two's complement wrap-around)."""
    return ((x + _I64_BIAS) & _U64_MASK) - _I64_BIAS


def wrap_u32(x: int) -> int:
    """``x`` reduced modulo 2**32."""
    return x & _U32_MASK


def wrap_u64(x: int) -> int:
    """``x`` reduced modulo 2**64."""
    return x & _U64_MASK


def print_line(text: str) -> None:
    """Write ``text`` and a newline to stdout in one call, then flush."""
    out = sys.stdout
    out.write(text + "\n")
    out.flush()


def _fill(result: AsyncValue[Any], fn: Callable[[], Any]) -> None:
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - becomes the error value
        result.set_error(Status(str(exc) or type(exc).__name__))
        return
    if isinstance(value, AsyncValue):
        # The task produced an AsyncValue itself: publish once it is available.
        def publish() -> None:
            if value.is_error():
                result.set_error(value.error)
            else:
                result.emplace(value.get())

        value.and_then(publish)
        return
    result.emplace(value)


def enqueue(exec_ctx: ExecutionContext, fn: Callable[[], T]) -> AsyncValue[T]:
    """Run ``fn`` as a task on ``exec_ctx``'s work queue; returns its (future) result."""
    result: AsyncValue[T] = make_unconstructed()
    exec_ctx.queue.add_task(lambda: _fill(result, fn))
    return result


def enqueue_blocking(exec_ctx: ExecutionContext, fn: Callable[[], T]) -> AsyncValue[T]:
    """Run ``fn`` on the blocking pool; error ``Failed to enqueue blocking work.`` if refused."""
    result: AsyncValue[T] = make_unconstructed()
    if not exec_ctx.queue.add_blocking_task(lambda: _fill(result, fn), allow_queuing=True):
        result.set_error(Status("Failed to enqueue blocking work."))
    return result


def results_of(values: list[AsyncValue[Any]]) -> Any:
    """Convert a list of result AsyncValues to what a ``@kernel`` returns for that many results."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return tuple(values)
