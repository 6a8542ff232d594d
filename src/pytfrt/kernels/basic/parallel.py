"""``tfrt.parallel_for.i32`` and ``tfrt.parallel_call.i32`` (docs/executor.md).

The range ``[start, end)`` is cut into fixed blocks of ``min(block_size, end - start)``
elements.  The body (a region or a named function) is called once per block with
``(block_start, block_end, args...)``.  A body without results is *synchronous* (a block is done
when ``execute`` returns); a body returning exactly one ``!tfrt.chain`` is *asynchronous* (a
block is done when that chain is available).  Any other signature gives the non-emitted error
``Invalid parallel body function result types``.

Blocks are spread by recursive halving: the upper half of the remaining blocks is enqueued as a
task, the lower half continues in the current thread, and the last single block runs in the
caller.  The result is a chain that becomes available when every block is done (errors of async
bodies are ignored, as in TFRT); a range of one block runs inline, an empty range gives a ready
chain at once.

Bounded memory: the halving spreads at most :data:`MAX_BLOCK_TASKS` tasks.  A range of more
blocks (billions of tiny ones) is cut into that many runs of consecutive blocks, each run one
task calling the body block after block, so the queue never holds more than that many tasks
(up to that count the behaviour is exactly the one above).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from pytfrt.host.async_value import CHAIN, AsyncValue, make_available, make_error
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.registry import KernelError, KernelRegistry, kernel

INVALID_BODY = "Invalid parallel body function result types"
MAX_BLOCK_TASKS = 4096


def body_kind(body: Function) -> str | None:
    """``"sync"``, ``"async"`` or ``None`` (invalid) from the body's result types."""
    types = list(body.result_types)
    if not types:
        return "sync"
    if len(types) == 1 and str(types[0]).endswith("chain"):
        return "async"
    return None


class _Countdown:
    """Counts finished blocks; publishes ``done`` and releases the arguments at zero."""

    def __init__(self, pending: int, args: list[AsyncValue[Any]]) -> None:
        self._lock = threading.Lock()
        self._pending = pending
        self._args = args
        self.done: AsyncValue[Any] = AsyncValue()

    def finish_one(self) -> None:
        with self._lock:
            self._pending -= 1
            last = self._pending == 0
        if last:
            for a in self._args:
                a.drop_ref()
            self.done.emplace(CHAIN)


@kernel("tfrt.parallel_for.i32", "tfrt.parallel_call.i32")
def parallel_for_i32(
    exec_ctx: ExecutionContext,
    body: Function,
    start: int,
    end: int,
    block_size: int,
    *args: AsyncValue[Any],
) -> AsyncValue[Any]:
    """Calls ``body(block_start, block_end, args...)`` for each fixed-size block of
    ``[start, end)``; returns a chain available when every block is done."""
    kind = body_kind(body)
    if kind is None:
        return make_error(INVALID_BODY)
    total = end - start
    if total <= 0:
        return make_available(CHAIN)
    if block_size <= 0:
        raise KernelError(f"parallel block size must be positive, got {block_size}")
    size = min(block_size, total)
    num_blocks = -(-total // size)
    is_async = kind == "async"

    def run_block(k: int, on_done: Callable[[], None]) -> None:
        lo = start + k * size
        hi = min(lo + size, end)
        outs = body.execute(exec_ctx, [make_available(lo), make_available(hi), *args])
        if is_async:
            chain = outs[0]

            def block_done() -> None:
                chain.drop_ref()
                on_done()

            chain.and_then(block_done)
        else:
            for out in outs:
                out.drop_ref()
            on_done()

    if num_blocks == 1:
        if not is_async:
            run_block(0, lambda: None)
            return make_available(CHAIN)
        single: AsyncValue[Any] = AsyncValue()
        run_block(0, lambda: single.emplace(CHAIN))
        return single

    countdown = _Countdown(num_blocks, [a.add_ref() for a in args])
    queue = exec_ctx.queue
    num_tasks = min(num_blocks, MAX_BLOCK_TASKS)
    per_task = -(-num_blocks // num_tasks)  # consecutive blocks per task (1 up to the cap)

    def run_range(lo: int, hi: int) -> None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            queue.add_task(functools.partial(run_range, mid, hi))
            hi = mid
        for k in range(lo * per_task, min((lo + 1) * per_task, num_blocks)):
            run_block(k, countdown.finish_one)

    run_range(0, -(-num_blocks // per_task))
    return countdown.done


def register(registry: KernelRegistry) -> None:
    """Register the parallel kernels."""
    registry.add(parallel_for_i32)
