"""Sync test kernels and the bridge from async code to sync functions (docs/executor.md).

``tfrt_test.sync_sum`` / ``sync_sum2`` / ``sync_sum_attributes`` are sync kernels (they run in
``tfrt.sync`` functions on plain values).  ``tfrt_test.invoke_sync_function.*`` is an async
kernel that runs a sync function with ``Function.execute_sync``; an error of the sync function
is reported (emitted) at the invoking kernel's location.
"""

from __future__ import annotations

from typing import Any

from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.registry import KernelError, KernelRegistry, RemainingAttrs, kernel
from pytfrt.kernels.common import wrap_i32


@kernel("tfrt_test.sync_sum", "tfrt_test.sync_sum2", sync=True)
def sync_sum(*args: int) -> int:
    """Sync: the 32-bit wrapping sum of every argument."""
    return wrap_i32(sum(args))


@kernel("tfrt_test.sync_sum_attributes", sync=True)
def sync_sum_attributes(attrs: RemainingAttrs) -> int:
    """Sync: the 32-bit wrapping sum of every (integer) attribute."""
    return wrap_i32(sum(int(a) for a in attrs))


@kernel(
    "tfrt_test.invoke_sync_function.i32_i32.i32",
    "tfrt_test.invoke_sync_function.i32_i32.i32_i32",
)
def invoke_sync_function(exec_ctx: ExecutionContext, fn: Function, a: int, b: int) -> Any:
    """Runs the sync function ``fn`` on ``(a, b)``; its results become this kernel's results."""
    try:
        outs = fn.execute_sync(exec_ctx, [a, b])
    except NotImplementedError as exc:
        raise KernelError(str(exc)) from exc
    if len(outs) == 1:
        return outs[0]
    return tuple(outs)


def register(registry: KernelRegistry) -> None:
    """Register the sync test kernels."""
    registry.add(sync_sum, sync_sum_attributes, invoke_sync_function)
