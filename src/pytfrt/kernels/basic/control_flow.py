"""Function-calling and control-flow kernels of the ``tfrt`` dialect (docs/executor.md).

``tfrt.call``, ``tfrt.if``/``tfrt.cond``, ``tfrt.case``, ``tfrt.while``, ``tfrt.once`` and
``tfrt.repeat.i32``.  They run sub-functions only through :class:`pytfrt.host.Function`:
``fn.execute(exec_ctx, args)`` borrows ``args`` and returns one owned reference per result
(usually unavailable IndirectAsyncValues).

Reference discipline (seen in ``vt.value`` destruction prints, docs/executor.md): a kernel's
arguments are borrowed; anything a kernel keeps past its return gets its own reference
(``add_ref``) that is dropped when no longer needed; results handed to the frame or forwarded
into an IndirectAsyncValue transfer their reference.  Loop-carried values produced by one
iteration are dropped right after the next iteration has been started.

The executor is strict, so conditions and counts are available when a kernel runs; the kernels
still accept an unavailable one (results become IndirectAsyncValues resolved later), as TFRT's do.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pytfrt.host.async_value import AsyncValue, IndirectAsyncValue, make_error, run_when_ready
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.registry import (
    KernelError,
    KernelFrame,
    KernelRegistry,
    RemainingAttrs,
    RemainingFunctions,
    kernel,
)

AVs = list[AsyncValue[Any]]

REPEAT_BLOCK_SIZE = 32
ONCE_NO_RESOURCE_CONTEXT = "tfrt.once requires resource context"


def _set_results(frame: KernelFrame, values: Sequence[AsyncValue[Any]], what: str) -> None:
    if len(values) != len(frame.results):
        for v in values:
            v.drop_ref()
        raise KernelError(
            f"{what} returned {len(values)} results but the op has {len(frame.results)}"
        )
    frame.results[:] = values


def _when_available(
    frame: KernelFrame,
    trigger: AsyncValue[Any],
    args: Sequence[AsyncValue[Any]],
    compute: Callable[[Sequence[AsyncValue[Any]]], AVs],
    what: str,
) -> None:
    """Set ``frame``'s results to ``compute(args)`` now, or once ``trigger`` is available.

    In the deferred case the results are IndirectAsyncValues and ``args`` are kept alive
    (one reference each) until ``compute`` has run.
    """
    if trigger.is_available():
        _set_results(frame, compute(args), what)
        return
    kept = list(args)
    for a in kept:
        a.add_ref()
    indirects = [frame.allocate_indirect_result(i) for i in range(frame.num_results)]

    def later() -> None:
        try:
            outs = compute(kept)
            if len(outs) != len(indirects):
                raise KernelError(
                    f"{what} returned {len(outs)} results but the op has {len(indirects)}"
                )
        except Exception as exc:  # noqa: BLE001 - reported at the kernel's location
            outs = [frame.emit_error(str(exc))] * len(indirects)
            for extra in outs[1:]:
                extra.add_ref()
        for ind, out in zip(indirects, outs, strict=True):
            ind.forward_to(out)
        for a in kept:
            a.drop_ref()

    trigger.and_then(later)


def _error_results(error: AsyncValue[Any], n: int) -> AVs:
    """``n`` references to ``error``."""
    return [error.add_ref() for _ in range(n)]


# -- call, if, case ----------------------------------------------------------------------------


@kernel("tfrt.call")
def call(frame: KernelFrame, fn: Function, *args: AsyncValue[Any]) -> None:
    """Executes ``fn`` on the operands; the results are ``fn``'s (indirect) results."""
    _set_results(frame, fn.execute(frame.exec_ctx, args), f"function '{fn.name}'")


@kernel("tfrt.if", "tfrt.cond")
def if_(
    frame: KernelFrame, fns: RemainingFunctions, cond: AsyncValue[Any], *args: AsyncValue[Any]
) -> None:
    """Runs the first function (then-region / ``@a_true_fn``) if ``cond`` else the second.

    An error condition makes every result that error.  ``tfrt.if`` without an else region and
    without results does nothing when the condition is false.
    """
    exec_ctx = frame.exec_ctx
    n = frame.num_results

    def dispatch(all_args: Sequence[AsyncValue[Any]]) -> AVs:
        if cond.is_error():
            return _error_results(cond, n)
        if cond.get():
            return fns[0].execute(exec_ctx, all_args[1:])
        if len(fns) > 1:
            return fns[1].execute(exec_ctx, all_args[1:])
        return []

    _when_available(frame, cond, (cond, *args), dispatch, "tfrt.if branch")


@kernel("tfrt.case")
def case(
    frame: KernelFrame,
    branches: RemainingFunctions,
    index: AsyncValue[Any],
    *args: AsyncValue[Any],
) -> None:
    """Runs ``branches[index]`` on the remaining operands; an out-of-range index selects the
    last branch; an error index makes every result that error."""
    exec_ctx = frame.exec_ctx
    n = frame.num_results

    def dispatch(all_args: Sequence[AsyncValue[Any]]) -> AVs:
        if index.is_error():
            return _error_results(index, n)
        i = index.get()
        if not 0 <= i < len(branches):
            i = len(branches) - 1
        return branches[i].execute(exec_ctx, all_args[1:])

    if not branches:
        raise KernelError("tfrt.case needs at least one branch")
    _when_available(frame, index, (index, *args), dispatch, "tfrt.case branch")


# -- while -------------------------------------------------------------------------------------


def _finish_while(cond: AsyncValue[Any], args: AVs, results: list[IndirectAsyncValue[Any]]) -> None:
    """Resolve the loop: results = last args (owned, transferred), or the condition's error."""
    if not cond.is_error():
        cond.drop_ref()
        for result, arg in zip(results, args, strict=True):
            result.forward_to(arg)
        return

    def fail() -> None:
        for result in results:
            result.forward_to(cond.add_ref())
        cond.drop_ref()
        for arg in args:
            arg.drop_ref()

    run_when_ready(args, fail)


def _body_step(
    exec_ctx: ExecutionContext, body: Function, args: AVs
) -> tuple[AsyncValue[Any], AVs]:
    """Run one iteration; drops ``args`` (owned); returns (next condition, next args), owned."""
    outs = body.execute(exec_ctx, args)
    for arg in args:
        arg.drop_ref()
    if len(outs) != len(args) + 1:
        error = make_error(
            f"tfrt.while body '{body.name}' returned {len(outs)} results, "
            f"expected {len(args) + 1}"
        )
        for out in outs:
            out.drop_ref()
        return error, [error.add_ref() for _ in args]
    cond = outs.pop()
    return cond, outs


def _while_inline(
    exec_ctx: ExecutionContext,
    body: Function,
    cond: AsyncValue[Any],
    args: AVs,
    results: list[IndirectAsyncValue[Any]],
) -> None:
    """``parallel_iterations(1)``: iterate in this thread while the condition is available;
    otherwise continue in a task once it is (``cond`` and ``args`` are owned references)."""
    while not cond.is_error() and cond.get():
        cond.drop_ref()
        cond, args = _body_step(exec_ctx, body, args)
        if not cond.is_available():
            _continue_while_later(exec_ctx, body, cond, args, results)
            return
    _finish_while(cond, args, results)


def _continue_while_later(
    exec_ctx: ExecutionContext,
    body: Function,
    cond: AsyncValue[Any],
    args: AVs,
    results: list[IndirectAsyncValue[Any]],
) -> None:
    """Once ``cond`` is available, enqueue the rest of an inline loop as a task."""
    cond.and_then(
        lambda: exec_ctx.queue.add_task(
            lambda: _while_inline(exec_ctx, body, cond, args, results)
        )
    )


def _while_parallel(
    exec_ctx: ExecutionContext,
    body: Function,
    cond: AsyncValue[Any],
    args: AVs,
    results: list[IndirectAsyncValue[Any]],
) -> None:
    """``parallel_iterations(N > 1)``: each iteration is a task started as soon as the previous
    iteration's condition is available (its other results may still be pending)."""
    if cond.is_error() or not cond.get():
        _finish_while(cond, args, results)
        return
    cond.drop_ref()

    def iteration() -> None:
        next_cond, next_args = _body_step(exec_ctx, body, args)
        next_cond.and_then(
            lambda: _while_parallel(exec_ctx, body, next_cond, next_args, results)
        )

    exec_ctx.queue.add_task(iteration)


@kernel("tfrt.while")
def while_(
    frame: KernelFrame,
    body: Function,
    attrs: RemainingAttrs,
    cond: AsyncValue[Any],
    *args: AsyncValue[Any],
) -> None:
    """``while (cond) { args..., cond = body(args...) }``; results are the last args.

    The ``parallel_iterations`` attribute (default 1) picks the inline or the task-per-iteration
    strategy (docs/executor.md).
    """
    exec_ctx = frame.exec_ctx
    parallel_iterations = int(attrs[0]) if attrs else 1
    if len(args) != frame.num_results:
        raise KernelError(
            f"tfrt.while has {len(args)} loop values but {frame.num_results} results"
        )
    results = [frame.allocate_indirect_result(i) for i in range(frame.num_results)]
    owned = [a.add_ref() for a in args]
    cond.add_ref()
    loop = _while_parallel if parallel_iterations > 1 else _while_inline
    cond.and_then(lambda: loop(exec_ctx, body, cond, owned, results))


# -- once --------------------------------------------------------------------------------------


class OnceResults:
    """The cached results of one ``tfrt.once`` function in a ResourceContext."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.results: AVs | None = None

    def __tfrt_destroy__(self) -> None:
        results, self.results = self.results, None
        for r in results or ():
            r.drop_ref()


@kernel("tfrt.once")
def once(frame: KernelFrame, fn: Function, *args: AsyncValue[Any]) -> None:
    """Executes ``fn`` once per ResourceContext (key ``tfrt.once @<fname>``); later calls get
    the same results.  Without a resource context every result is the (non-emitted) error
    ``tfrt.once requires resource context``."""
    exec_ctx = frame.exec_ctx
    resources = exec_ctx.resource_context
    if resources is None:
        frame.results[:] = _error_results(make_error(ONCE_NO_RESOURCE_CONTEXT), frame.num_results)
        return
    cache = resources.get_or_create_resource(f"tfrt.once @{fn.name}", OnceResults)
    with cache.lock:
        if cache.results is None:
            cache.results = fn.execute(exec_ctx, args)
        cached = cache.results
    _set_results(frame, [r.add_ref() for r in cached], f"function '{fn.name}'")


# -- repeat ------------------------------------------------------------------------------------


def _repeat_block(
    exec_ctx: ExecutionContext,
    body: Function,
    start: int,
    block_size: int,
    count: int,
    passed: AVs,
    results: list[IndirectAsyncValue[Any]],
) -> None:
    """Run iterations from ``start`` in blocks of ``block_size``; between blocks continue at
    once if the first loop-carried value is available, else via its ``and_then`` (so the loop
    is iterative: no Python stack grows with the count).  ``passed`` is borrowed at iteration
    0 and owned afterwards."""
    request = exec_ctx.request_context
    while True:
        end = min(start + block_size, count)
        outs: AVs = []
        for i in range(start, end):
            cancel = request.cancel_value
            if cancel is not None:
                request.stopped("tfrt.repeat.i32", exec_ctx.location)
                if i > 0:
                    for value in passed:
                        value.drop_ref()
                for result in results:
                    result.forward_to(cancel.add_ref())
                return
            outs = body.execute(exec_ctx, passed)
            if i > 0:
                for value in passed:
                    value.drop_ref()
            if i + 1 != count:
                passed = outs
        if end >= count:
            for result, out in zip(results, outs, strict=True):
                result.forward_to(out)
            return
        if not passed[0].is_available():
            passed[0].and_then(
                functools.partial(
                    _repeat_block, exec_ctx, body, end, block_size, count, passed, results
                )
            )
            return
        start = end


def _repeat_start(
    exec_ctx: ExecutionContext,
    body: Function,
    count_av: AsyncValue[Any],
    args: AVs,
    results: list[IndirectAsyncValue[Any]],
) -> None:
    if count_av.is_error():
        for result in results:
            result.forward_to(count_av.add_ref())
        return
    count = int(count_av.get())
    if count <= 0:
        for result, arg in zip(results, args, strict=True):
            result.forward_to(arg.add_ref())
        return
    block_size = REPEAT_BLOCK_SIZE if args else count
    _repeat_block(exec_ctx, body, 0, block_size, count, list(args), results)


@kernel("tfrt.repeat.i32")
def repeat_i32(
    frame: KernelFrame, body: Function, count: AsyncValue[Any], *args: AsyncValue[Any]
) -> None:
    """Runs ``body`` ``count`` times, feeding each iteration's results to the next; results are
    IndirectAsyncValues forwarded from the last iteration (the arguments if ``count == 0``).

    Iterations run in blocks of 32 (all at once without loop values), each first checking for
    cancellation (then every result is the ``Cancelled`` value).
    """
    if len(args) != frame.num_results:
        raise KernelError(
            f"tfrt.repeat.i32 has {len(args)} loop values but {frame.num_results} results"
        )
    exec_ctx = frame.exec_ctx
    results = [frame.allocate_indirect_result(i) for i in range(frame.num_results)]
    if count.is_available():
        _repeat_start(exec_ctx, body, count, list(args), results)
        return
    kept = [a.add_ref() for a in args]
    count.add_ref()

    def later() -> None:
        _repeat_start(exec_ctx, body, count, kept, results)
        count.drop_ref()
        for a in kept:
            a.drop_ref()

    count.and_then(later)


def register(registry: KernelRegistry) -> None:
    """Register the control-flow kernels."""
    registry.add(call, if_, case, while_, once, repeat_i32)
