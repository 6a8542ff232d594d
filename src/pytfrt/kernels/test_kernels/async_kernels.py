"""Asynchronous test kernels: results produced by tasks, delays, sleeps, atomics,
``tfrt_test.do.async``, ``quiesce`` and the AsyncValue API probes.

Tasks go to the execution context's work queue: with the single-threaded ``s`` queue they run
only when the driver awaits or quiesces, which the order-sensitive tests rely on.  Blocking
work (``usleep``) goes to the blocking pool.  A task keeps its own reference to every operand it
reads after the kernel returns.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from pytfrt.host.async_value import (
    CHAIN,
    AsyncValue,
    Chain,
    make_available,
    make_unconstructed,
    run_when_ready,
)
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.registry import Attr, KernelFrame, KernelRegistry, kernel
from pytfrt.host.work_queue import SingleThreadedWorkQueue
from pytfrt.kernels.common import enqueue, enqueue_blocking, print_line, wrap_i32


def _delay() -> None:
    """Sleep 1-10 ms (TFRT's ``with_delay`` kernels)."""
    time.sleep(random.uniform(0.001, 0.010))


@kernel("tfrt_test.copy.with_delay.i32", "tfrt_test.copy.with_delay.i64")
def copy_with_delay(value: int) -> int:
    """Sleeps 1-10 ms in the calling thread, then returns ``value``."""
    _delay()
    return value


@kernel("tfrt_test.async_add.i32")
def async_add_i32(exec_ctx: ExecutionContext, a: int, b: int) -> AsyncValue[Any]:
    """A task computes ``a + b`` (32-bit wrap-around)."""
    return enqueue(exec_ctx, lambda: wrap_i32(a + b))


@kernel("tfrt_test.async_constant.i32", "tfrt_test.async_constant.i1")
def async_constant(exec_ctx: ExecutionContext, value: Attr[Any]) -> AsyncValue[Any]:
    """A task produces the ``value`` attribute."""
    return enqueue(exec_ctx, lambda: value)


@kernel("tfrt_test.async_copy.i32")
def async_copy(exec_ctx: ExecutionContext, value: Any) -> AsyncValue[Any]:
    """A task returns ``value``."""
    return enqueue(exec_ctx, lambda: value)


@kernel("tfrt_test.async_copy_2.i32")
def async_copy_2(exec_ctx: ExecutionContext, value: Any) -> AsyncValue[Any]:
    """A task enqueues a second task that returns ``value`` (two hops through the queue)."""
    result: AsyncValue[Any] = make_unconstructed()
    queue = exec_ctx.queue
    queue.add_task(lambda: queue.add_task(lambda: result.emplace(value)))
    return result


@kernel("tfrt_test.async_copy.with_delay.i32", "tfrt_test.async_copy.with_delay.i64")
def async_copy_with_delay(exec_ctx: ExecutionContext, value: Any) -> AsyncValue[Any]:
    """A task sleeps 1-10 ms, then returns ``value``."""

    def task() -> Any:
        _delay()
        return value

    return enqueue(exec_ctx, task)


@kernel("tfrt_test.as_chain")
def as_chain(*args: AsyncValue[Any]) -> AsyncValue[Any]:
    """A chain available once every operand is available."""
    chain: AsyncValue[Any] = make_unconstructed()
    run_when_ready(args, lambda: chain.emplace(CHAIN))
    return chain


@kernel("tfrt_test.sum")
def sum_i32(*args: int) -> int:
    """The 32-bit wrapping sum of every operand."""
    return wrap_i32(sum(args))


@kernel("tfrt_test.do.async")
def do_async(frame: KernelFrame, body: Function, *args: AsyncValue[Any]) -> None:
    """Enqueues a task that executes the region on the operands; the results are
    IndirectAsyncValues forwarded to the region's results."""
    results = [frame.allocate_indirect_result(i) for i in range(frame.num_results)]
    kept = [a.add_ref() for a in args]
    exec_ctx = frame.exec_ctx

    def task() -> None:
        outs = body.execute(exec_ctx, kept)
        for a in kept:
            a.drop_ref()
        if len(outs) != len(results):
            for out in outs:
                out.drop_ref()
            message = (
                f"tfrt_test.do.async body returned {len(outs)} results, expected {len(results)}"
            )
            for result in results:
                result.set_error(message)
            return
        for result, out in zip(results, outs, strict=True):
            result.forward_to(out)

    exec_ctx.queue.add_task(task)


def _sleep_and_print(microseconds: int) -> Chain:
    time.sleep(microseconds / 1e6)
    print_line(f"Slept for {microseconds} microseconds")
    return CHAIN


@kernel("tfrt_test.usleep")
def usleep(exec_ctx: ExecutionContext, microseconds: int) -> None:
    """A blocking task sleeps ``microseconds`` then prints ``Slept for <n> microseconds``."""
    enqueue_blocking(exec_ctx, lambda: _sleep_and_print(microseconds))


@kernel("tfrt_test.blocking.usleep")
def blocking_usleep(exec_ctx: ExecutionContext, microseconds: int) -> AsyncValue[Any]:
    """Like ``tfrt_test.usleep``; the chain result is available after the print."""
    return enqueue_blocking(exec_ctx, lambda: _sleep_and_print(microseconds))


@kernel("tfrt_test.quiesce")
def quiesce(frame: KernelFrame) -> None:
    """Quiesces the host's work queue from inside a kernel; any results are ready chains.

    On the single-threaded queue a kernel may itself run inside a task (a stream the executor
    enqueued): then, as TFRT's ``Quiesce`` does, the queued tasks run inline
    (``SingleThreadedWorkQueue.run_pending``).  Elsewhere it is ``host.quiesce()``, which
    reports an error when called from a worker thread of the multi-threaded queue.
    """
    queue = frame.exec_ctx.queue
    if isinstance(queue, SingleThreadedWorkQueue) and queue.is_in_worker_thread():
        queue.run_pending()
    else:
        frame.exec_ctx.host.quiesce()
    for i in range(frame.num_results):
        frame.emplace_result(i, CHAIN)


# -- atomics -----------------------------------------------------------------------------------


class AtomicI32:
    """A thread-safe 32-bit counter (``!test.atomic.i32``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0

    def add(self, delta: int) -> None:
        """Atomically add ``delta`` (wrapping)."""
        with self._lock:
            self._value = wrap_i32(self._value + delta)

    def get(self) -> int:
        """The current value."""
        with self._lock:
            return self._value


@kernel("tfrt_test.atomic.create.i32")
def atomic_create_i32() -> AtomicI32:
    """A new counter at 0."""
    return AtomicI32()


@kernel("tfrt_test.atomic.inc.i32")
def atomic_inc_i32(counter: AtomicI32) -> Chain:
    """Increments ``counter``."""
    counter.add(1)
    return CHAIN


@kernel("tfrt_test.atomic.add.i32")
def atomic_add_i32(counter: AtomicI32, value: int) -> Chain:
    """Adds ``value`` to ``counter``."""
    counter.add(value)
    return CHAIN


@kernel("tfrt_test.atomic.get.i32")
def atomic_get_i32(counter: AtomicI32) -> tuple[int, Chain]:
    """The counter's value and a chain."""
    return counter.get(), CHAIN


# -- AsyncValue API probes ---------------------------------------------------------------------


class _Base1:
    def __init__(self) -> None:
        self.base1 = "base1"


class _Child1(_Base1):
    def __init__(self) -> None:
        super().__init__()
        self.child1 = "child1"


class _Base2:
    def __init__(self) -> None:
        self.base2 = "base2"


class _Child2(_Base2):
    def __init__(self) -> None:
        super().__init__()
        self.child2 = "child2"


class _FinalClass:
    def __init__(self) -> None:
        self.name = "final_class"


@kernel("tfrt_test.async_value_get")
def async_value_get() -> str:
    """Reads payloads back through ``AsyncValue.get`` (incl. as a base class):
    ``base1:base2:final_class:3``."""
    parts: list[str] = []
    child1: _Base1 = make_available(_Child1()).get()
    parts.append(child1.base1)
    child2: _Base2 = make_available(_Child2()).get()
    parts.append(child2.base2)
    parts.append(make_available(_FinalClass()).get().name)
    parts.append(str(make_available(3).get()))
    return ":".join(parts)


def _describe(value: AsyncValue[Any]) -> str:
    if value.is_available():
        return f"available:{value.get()}"
    return "unavailable"


@kernel("tfrt_test.async_value_ref")
def async_value_ref() -> str:
    """Shows that ``and_then`` waiters run synchronously inside ``emplace``:
    ``available:2;unavailable;(3);available:3;unavailable;available:4``."""
    out: list[str] = []
    two = make_available(2)
    out.append(_describe(two))
    three: AsyncValue[int] = make_unconstructed()
    out.append(";" + _describe(three))
    three.and_then(lambda: out.append(f"({three.get()})"))
    out.append(";")
    three.emplace(3)
    out.append(";" + _describe(three))
    four: AsyncValue[int] = make_unconstructed()
    out.append(";" + _describe(four))
    four_copy = four.add_ref()
    (lambda: four_copy.emplace(4))()
    four_copy.drop_ref()
    out.append(";" + _describe(four))
    return "".join(out)


def register(registry: KernelRegistry) -> None:
    """Register the asynchronous test kernels."""
    registry.add(
        copy_with_delay, async_add_i32, async_constant, async_copy, async_copy_2,
        async_copy_with_delay, as_chain, sum_i32, do_async, usleep, blocking_usleep, quiesce,
        atomic_create_i32, atomic_inc_i32, atomic_add_i32, atomic_get_i32,
        async_value_get, async_value_ref,
    )

