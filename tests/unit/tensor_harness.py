"""Run one registered tensor/CPU kernel directly on a KernelFrame (no executor, no MLIR).

``run(name, args, attrs)`` builds a HostContext with the tensor and CPU kernel libraries, wraps
``args`` in available AsyncValues, invokes the kernel, drives the work queue until its results
are available, and returns the result AsyncValues plus the emitted diagnostic messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytfrt.backends.cpu import kernels as cpu_kernels
from pytfrt.host.allocator import HostAllocator
from pytfrt.host.async_value import CHAIN, AsyncValue, make_available
from pytfrt.host.diagnostics import DiagnosticCollector
from pytfrt.host.host_context import HostContext
from pytfrt.host.registry import KernelFrame, KernelRegistry
from pytfrt.tensor import kernels as tensor_kernels

_REGISTRY: KernelRegistry | None = None


def registry() -> KernelRegistry:
    """One shared registry with the tensor and CPU kernels (built once)."""
    global _REGISTRY
    if _REGISTRY is None:
        r = KernelRegistry()
        tensor_kernels.register(r)
        cpu_kernels.register(r)
        _REGISTRY = r
    return _REGISTRY


@dataclass
class Run:
    """The outcome of one kernel invocation."""

    results: list[AsyncValue[Any]]
    diagnostics: list[str] = field(default_factory=list)

    def value(self, i: int = 0) -> Any:
        """Payload of result ``i`` (must be concrete)."""
        return self.results[i].get()

    def error(self, i: int = 0) -> str:
        """Message of result ``i`` (must be an error)."""
        return self.results[i].error.message


def run(
    name: str,
    args: list[Any],
    attrs: list[Any] | None = None,
    num_results: int = 1,
    allocator: Any = None,
    chain: bool = True,
) -> Run:
    """Invoke kernel ``name`` on ``args`` (+ a trailing chain if ``chain``) and ``attrs``."""
    collector = DiagnosticCollector()
    host = HostContext(
        "s",
        registry=registry(),
        diagnostic_handler=collector,
        allocator=allocator if allocator is not None else HostAllocator(),
    )
    entry = registry().get(name)
    operands = [make_available(a) for a in args]
    if chain:
        operands.append(make_available(CHAIN))
    exec_ctx = host.new_execution_context()
    frame = KernelFrame(operands, list(attrs or []), [], num_results, exec_ctx, name=name)
    entry.invoke(frame)
    results = [r for r in frame.results if r is not None]
    host.await_values(results)
    host.shutdown()
    return Run(results, collector.messages)
