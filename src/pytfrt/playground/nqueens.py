"""The ``nqueens.i32`` kernel: N-Queens as a tree of AsyncValue tasks (examples/mlp_xor/README.md).

``nqueens.i32(n: i32, levels: i32) -> i32`` counts the solutions of the n-queens puzzle the way
the original playground kernel did, to measure what the runtime's task scheduling costs:

* one task per valid partial placement of ``0..levels`` columns, each started with
  :meth:`HostContext.enqueue_work`, which returns an :class:`AsyncValue` for the task's result;
* a task whose placement has fewer than ``levels`` columns enqueues one task per valid
  extension and yields 0; a task at depth ``levels`` counts its subtree with the plain
  backtracking solver of :mod:`pytfrt.playground.nqueens_solvers` and yields that count;
* for ``n = 14, levels = 4`` that is 11,167 tasks (the root included) and the result 365,596.

Differences from the original, which were faults there:

* The original appended task AsyncValues to a vector shared by every task without a lock (a
  data race on any multi-threaded queue) and then **blocked** the kernel on each of them.
  Here no thread ever waits: each task's AsyncValue gets an ``and_then`` callback that adds its
  payload to a tally under a lock; a task adds its children to the tally's pending count
  *before* it returns, so the count reaches zero exactly once, after the last task, and that
  callback emplaces the kernel's result.  The kernel itself returns the unavailable result at
  once.
* Arguments are checked: ``n`` in ``1..18`` (the count overflows i32 from n = 19),
  ``0 <= levels <= n``; anything else is a ``KernelError`` (a diagnostic at the op).
* A task that fails makes the result an error; a cancelled request stops expanding and
  solving, and the result becomes the request's ``Cancelled`` error.

Two kernels are registered: ``nqueens.i32`` with the Numba solver (``nogil``, so leaf tasks
run in parallel on ``mstd`` queues) and ``nqueens.python.i32`` with the pure-Python solver,
for comparison.  :func:`schedule_nqueens` is the same machinery as a plain function, for the
benchmark harness.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from pytfrt.host.async_value import AsyncValue, make_unconstructed
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.host_context import HostContext
from pytfrt.host.registry import KernelError, KernelRegistry, kernel
from pytfrt.playground.nqueens_solvers import (
    Placement,
    Solver,
    check_arguments,
    children,
    get_solver,
)
from pytfrt.support.errors import CANCELLED_STATUS, Status


class _Tally:
    """Pending-task count, running sum and first error of one N-Queens run (lock-protected)."""

    __slots__ = ("_lock", "_pending", "_total", "_error", "_result", "_cancelled")

    def __init__(self, result: AsyncValue[int], cancelled: Callable[[], bool]) -> None:
        self._lock = threading.Lock()
        self._pending = 0
        self._total = 0
        self._error: Status | None = None
        self._result = result
        self._cancelled = cancelled

    def expect(self, count: int) -> None:
        """Announce ``count`` more tasks (called before they are enqueued)."""
        with self._lock:
            self._pending += count

    def finish(self, value: AsyncValue[Any]) -> None:
        """Account for one finished task; the last one publishes the result."""
        with self._lock:
            if value.is_error():
                if self._error is None:
                    self._error = value.error
            else:
                self._total += value.get()
            self._pending -= 1
            last = self._pending == 0
        if not last:
            return
        if self._error is not None:
            self._result.set_error(self._error)
        elif self._cancelled():
            self._result.set_error(CANCELLED_STATUS)
        else:
            self._result.emplace(self._total)


def schedule_nqueens(
    host: HostContext,
    n: int,
    levels: int,
    solver: Solver,
    cancelled: Callable[[], bool] = lambda: False,
) -> AsyncValue[int]:
    """Start the task tree for ``(n, levels)`` on ``host``'s work queue; never blocks.

    Returns an unavailable AsyncValue that becomes the solution count (or an error) once the
    last task has finished.  With the ``s`` queue nothing runs until the caller awaits it.

    Raises:
        ValueError: for invalid ``n`` / ``levels`` (see ``check_arguments``).
    """
    check_arguments(n, levels)
    result: AsyncValue[int] = make_unconstructed()
    tally = _Tally(result, cancelled)
    enqueue = host.enqueue_work
    finish = tally.finish

    def run(placement: Placement) -> int:
        if cancelled():
            return 0
        if len(placement) == levels:
            return solver(n, placement)
        kids = children(n, placement)
        tally.expect(len(kids))
        for kid in kids:
            spawn(kid)
        return 0

    def spawn(placement: Placement) -> None:
        value = enqueue(partial(run, placement))
        value.and_then(partial(finish, value))

    tally.expect(1)
    spawn(())
    return result


def _start(ctx: ExecutionContext, n: int, levels: int, solver_name: str) -> AsyncValue[int]:
    try:
        check_arguments(n, levels)
        solver = get_solver(solver_name)
    except ValueError as exc:
        raise KernelError(str(exc)) from None
    return schedule_nqueens(ctx.host, n, levels, solver, ctx.is_cancelled)


@kernel("nqueens.i32")
def nqueens_i32(ctx: ExecutionContext, n: int, levels: int) -> AsyncValue[int]:
    """Count n-queens solutions with one task per placement down to ``levels`` (Numba)."""
    return _start(ctx, n, levels, "numba")


@kernel("nqueens.python.i32")
def nqueens_python_i32(ctx: ExecutionContext, n: int, levels: int) -> AsyncValue[int]:
    """As ``nqueens.i32``, with the pure-Python solver (holds the interpreter lock)."""
    return _start(ctx, n, levels, "python")


def register(registry: KernelRegistry) -> None:
    """Register ``nqueens.i32`` and ``nqueens.python.i32``."""
    registry.add(nqueens_i32, nqueens_python_i32)
