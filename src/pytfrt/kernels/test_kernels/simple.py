"""Simple test kernels: values, strings, aliasing and uniqueness probes, resources,
shared contexts, locations, logging, thread ids, costs and a deliberate memory leak.

Kernels that return one of their arguments (``identity``, ``share_to_two``,
``multi_arg_result``, ...) return that AsyncValue with one more reference per result, as TFRT's
``Result::Set(arg)`` does, so destruction and ``is_unique`` stay exact.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
from typing import Any

import numpy as np

from pytfrt.host.async_value import CHAIN, AsyncValue, Chain, make_indirect
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import (
    Attr,
    KernelError,
    KernelFrame,
    KernelRegistry,
    RemainingAttrs,
    kernel,
)
from pytfrt.kernels.common import print_line, wrap_i32

# -- values and strings ------------------------------------------------------------------------


@kernel("tfrt_test.flat")
def flat(value: Attr[Any]) -> tuple[str, int, int, Any]:
    """Unpacks ``[["string", [a : i32, b : i32]], [f : f32]]`` into ``("string", a, b, f)``."""
    (text, (a, b)), (f, *_) = value
    return str(text), int(a), int(b), np.float32(f)


@kernel("tfrt_test.get_string")
def get_string(value: Attr[str]) -> str:
    """The ``value`` string attribute."""
    return value


@kernel("tfrt_test.print_string")
def print_string(text: str) -> Chain:
    """Prints ``string = <text>``."""
    print_line(f"string = {text}")
    return CHAIN


@kernel("tfrt_test.append_string")
def append_string(a: str, b: str) -> str:
    """``a + b``."""
    return a + b


@kernel("tfrt_test.print_hello")
def print_hello() -> Chain:
    """Prints ``hello host executor!``."""
    print_line("hello host executor!")
    return CHAIN


@kernel("tfrt_test.print_bool")
def print_bool(chain: Chain, value: bool) -> Chain:
    """Prints ``true`` or ``false`` (note: the chain comes first)."""
    print_line("true" if value else "false")
    return CHAIN


@kernel("tfrt_test.count3.i32")
def count3_i32(x: int) -> tuple[int, int, int]:
    """``(x + 1, x + 2, x + 3)`` with 32-bit wrap-around."""
    return wrap_i32(x + 1), wrap_i32(x + 2), wrap_i32(x + 3)


# -- aliasing, indirection, uniqueness -------------------------------------------------------


@kernel("tfrt_test.identity")
def identity(chain: AsyncValue[Any], *args: AsyncValue[Any]) -> Any:
    """Returns the operands after the leading chain, aliased."""
    outs = [a.add_ref() for a in args]
    return outs[0] if len(outs) == 1 else (tuple(outs) if outs else None)


@kernel("tfrt_test.multi_arg_result")
def multi_arg_result(*args: AsyncValue[Any]) -> Any:
    """Returns every operand, aliased."""
    outs = [a.add_ref() for a in args]
    return outs[0] if len(outs) == 1 else (tuple(outs) if outs else None)


@kernel("tfrt_test.share_to_two")
def share_to_two(value: AsyncValue[Any]) -> tuple[AsyncValue[Any], AsyncValue[Any]]:
    """Both results alias the operand (no copy)."""
    value.add_ref(2)
    return value, value


@kernel("tfrt_test.make_indirect")
def make_indirect_kernel(value: AsyncValue[Any]) -> AsyncValue[Any]:
    """A new IndirectAsyncValue forwarded to the operand."""
    indirect = make_indirect()
    indirect.forward_to(value.add_ref())
    return indirect


@kernel("tfrt_test.get_uniqueness")
def get_uniqueness(*args: AsyncValue[Any]) -> Any:
    """Per operand: whether its AsyncValue is unique (one reference, not indirect)."""
    outs = tuple(a.is_unique() for a in args)
    return outs[0] if len(outs) == 1 else outs


# -- resources and shared contexts -------------------------------------------------------------


class TestResource:
    """Prints ``Allocated TestResource`` when made and ``Destroyed TestResource`` when freed.

    The payload of ``!tfrt.test.resource``: freed by ``tfrt_test.deallocate_resource`` or,
    if that never runs (error, cancellation), when its AsyncValue dies.
    """

    def __init__(self) -> None:
        self._alive = True
        print_line("Allocated TestResource")

    def reset(self) -> None:
        """Destroy the resource now (idempotent)."""
        if self._alive:
            self._alive = False
            print_line("Destroyed TestResource")

    def __tfrt_destroy__(self) -> None:
        self.reset()


@kernel("tfrt_test.allocate_resource")
def allocate_resource(chain: AsyncValue[Any]) -> tuple[TestResource, AsyncValue[Any]]:
    """A new :class:`TestResource` and the incoming chain."""
    return TestResource(), chain.add_ref()


@kernel("tfrt_test.deallocate_resource")
def deallocate_resource(resource: TestResource, chain: AsyncValue[Any]) -> AsyncValue[Any]:
    """Destroys ``resource``, then prints ``tfrt_test.deallocate_resource done``."""
    resource.reset()
    print_line("tfrt_test.deallocate_resource done")
    return chain.add_ref()


class SampleSharedContext:
    """A shared context (one per HostContext) named ``sample_shared_context<n>``."""

    _instances = 0
    _lock = threading.Lock()

    def __init__(self, host: Any) -> None:
        with SampleSharedContext._lock:
            self.name = f"sample_shared_context{SampleSharedContext._instances}"
            SampleSharedContext._instances += 1


@kernel("tfrt_test.use_sample_shared_context")
def use_sample_shared_context(
    exec_ctx: ExecutionContext, chain: AsyncValue[Any]
) -> tuple[str, AsyncValue[Any]]:
    """The name of the host's :class:`SampleSharedContext` and the incoming chain."""
    shared = exec_ctx.host.get_or_create_shared_context(SampleSharedContext)
    return shared.name, chain.add_ref()


# -- locations ---------------------------------------------------------------------------------


class LocationNames:
    """Shared context for ``tfrt_test.unique_loc``: the name seen at each kernel location.

    A location is identified by its object (each kernel has its own location record in BEF,
    so the executor gives each kernel its own location object).
    """

    def __init__(self, host: Any) -> None:
        self._lock = threading.Lock()
        self._names: dict[int, tuple[Any, str]] = {}

    def check(self, location: Any, name: str) -> None:
        with self._lock:
            seen = self._names.setdefault(id(location), (location, name))
        if seen[1] != name:
            raise KernelError(f"duplicate locations {id(location)}")


@kernel("tfrt_test.unique_loc")
def unique_loc(frame: KernelFrame, name: Attr[str]) -> Chain:
    """Fails with ``duplicate locations <id>`` if kernels with different ``name`` attributes
    share one location."""
    frame.exec_ctx.host.get_or_create_shared_context(LocationNames).check(frame.location, name)
    return CHAIN


@kernel("tfrt_test.print_debug_info")
def print_debug_info(frame: KernelFrame) -> Chain:
    """Prints the debug info of the kernel's location or ``Kernel has no debug info``."""
    info = frame.location.debug_info()
    print_line(info if info is not None else "Kernel has no debug info")
    return CHAIN


@kernel("tfrt_test.test_cost")
def test_cost(attrs: RemainingAttrs, *args: Any) -> Any:
    """Prints ``id: <id>`` (``_tfrt_cost`` only feeds the stream analysis).  Returns 0 (the
    i32 result of TFRT's main-branch form, over any operands), or a chain when every operand
    is a chain (the earlier form: chains in, a chain out)."""
    print_line(f"id: {attrs[-1]}")
    if args and all(isinstance(a, Chain) for a in args):
        return CHAIN
    return 0


# -- logging, threads, memory ------------------------------------------------------------------

def _log(severity: str, message: str, line: int) -> None:
    now = datetime.datetime.now()
    stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f")
    prefix = f"{severity} {stamp} {threading.get_native_id()} {os.path.basename(__file__)}:{line}]"
    sys.stderr.write(f"{prefix} {message}\n")
    sys.stderr.flush()


@kernel("tfrt_test.logging")
def logging(text: str) -> Chain:
    """Six TFRT_LOG-format lines on stderr (INFO, WARNING, ERROR, and the ``_IF(.., true)``
    forms; the ``false`` forms print nothing)."""
    line = sys._getframe().f_lineno
    _log("I", f"from TFRT_LOG(INFO): {text}", line)
    _log("W", f"from TFRT_LOG(WARNING): {text}", line)
    _log("E", f"from TFRT_LOG(ERROR): {text}", line)
    for severity, level in (("I", "INFO"), ("W", "WARNING"), ("E", "ERROR")):
        _log(severity, f"from TFRT_LOG_IF({level}, true): {text}", line)
    return CHAIN


class ThreadIds:
    """Shared context: sequential ids per thread, in order of first request (from 0)."""

    def __init__(self, host: Any) -> None:
        self._lock = threading.Lock()
        self._ids: dict[int, int] = {}

    def get(self) -> int:
        ident = threading.get_ident()
        with self._lock:
            return self._ids.setdefault(ident, len(self._ids))


@kernel("tfrt_test.get_thread_id")
def get_thread_id(exec_ctx: ExecutionContext) -> int:
    """The calling thread's id: 0 for the first thread that asked (the host thread), then 1..."""
    return exec_ctx.host.get_or_create_shared_context(ThreadIds).get()


@kernel("tfrt_test.memory_leak_one_int32")
def memory_leak_one_int32(exec_ctx: ExecutionContext) -> None:
    """Allocates 4 bytes through the host allocator and never frees them."""
    allocator = exec_ctx.host.allocator
    if allocator is not None:
        allocator.allocate(4)


def register(registry: KernelRegistry) -> None:
    """Register the simple test kernels."""
    registry.add(
        flat, get_string, print_string, append_string, print_hello, print_bool, count3_i32,
        identity, multi_arg_result, share_to_two, make_indirect_kernel, get_uniqueness,
        allocate_resource, deallocate_resource, use_sample_shared_context, unique_loc,
        print_debug_info, test_cost, logging, get_thread_id, memory_leak_one_int32,
    )
