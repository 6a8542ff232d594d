"""Shared helpers for the kernel unit tests: a fake ``Function`` that runs a Python callable,
a host fixture factory, and ``invoke`` to run a registered kernel through ``KernelEntry``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytfrt.host import (
    AsyncValue,
    DiagnosticCollector,
    ExecutionContext,
    Function,
    FunctionKind,
    HostContext,
    KernelFrame,
    KernelRegistry,
    ResourceContext,
    make_available,
    make_indirect,
)
from pytfrt.kernels import basic, test_kernels


def make_registry() -> KernelRegistry:
    """A registry with the basic and test kernel libraries."""
    registry = KernelRegistry()
    registry.add_module(basic)
    registry.add_module(test_kernels)
    return registry


REGISTRY = make_registry()


class PyFunction(Function):
    """A ``Function`` whose body is a Python callable on payloads.

    ``body(*payloads)`` returns a value, a tuple of values (several results) or ``None``; each
    value may already be an AsyncValue (returned as is, +1).  Like a BEF function, results are
    IndirectAsyncValues.  Records each call's payloads in ``calls``.
    """

    def __init__(
        self,
        body: Callable[..., Any],
        argument_types: Sequence[str] = (),
        result_types: Sequence[str] = (),
        name: str = "fake",
        kind: FunctionKind = FunctionKind.BEF,
        raw: bool = False,
    ) -> None:
        self.body = body
        self.argument_types = tuple(argument_types)
        self.result_types = tuple(result_types)
        self.name = name
        self.kind = kind
        self.raw = raw
        self.calls: list[tuple[Any, ...]] = []

    def execute(
        self, exec_ctx: ExecutionContext, arguments: Sequence[AsyncValue[Any]]
    ) -> list[AsyncValue[Any]]:
        if self.raw:
            out = self.body(exec_ctx, list(arguments))
        else:
            payloads = tuple(a.get() for a in arguments)
            self.calls.append(payloads)
            out = self.body(*payloads)
        values = [] if out is None else list(out) if isinstance(out, tuple) else [out]
        results: list[AsyncValue[Any]] = []
        for v in values:
            indirect = make_indirect()
            indirect.forward_to(v if isinstance(v, AsyncValue) else make_available(v))
            results.append(indirect)
        return results

    def execute_sync(self, exec_ctx: ExecutionContext, arguments: Sequence[Any]) -> list[Any]:
        self.calls.append(tuple(arguments))
        out = self.body(*arguments)
        return [] if out is None else list(out) if isinstance(out, tuple) else [out]


def new_host(
    work_queue: str = "s", resource_context: bool = True
) -> tuple[HostContext, ExecutionContext, DiagnosticCollector]:
    """A host with the kernel registry, a diagnostic collector and an execution context."""
    diags = DiagnosticCollector()
    host = HostContext(work_queue, registry=REGISTRY, diagnostic_handler=diags)
    ctx = host.new_execution_context(ResourceContext() if resource_context else None)
    return host, ctx, diags


def as_av(value: Any) -> AsyncValue[Any]:
    """``value`` if it is an AsyncValue, else an available one holding it."""
    return value if isinstance(value, AsyncValue) else make_available(value)


def invoke(
    name: str,
    args: Sequence[Any] = (),
    attrs: Sequence[Any] = (),
    funcs: Sequence[Function] = (),
    num_results: int = 1,
    exec_ctx: ExecutionContext | None = None,
) -> KernelFrame:
    """Run the async kernel ``name`` through its ``KernelEntry`` and return the frame."""
    if exec_ctx is None:
        exec_ctx = new_host()[1]
    frame = KernelFrame(
        [as_av(a) for a in args], list(attrs), list(funcs), num_results, exec_ctx, name=name
    )
    REGISTRY.get(name).invoke(frame)
    return frame


def values_of(frame: KernelFrame) -> list[Any]:
    """The payloads of every result (each must be concrete)."""
    return [r.get() for r in frame.results]  # type: ignore[union-attr]


def test_fake_function_returns_indirect_results() -> None:
    host, ctx, _ = new_host()
    fn = PyFunction(lambda a, b: (a + b, a - b), ("i32", "i32"), ("i32", "i32"))
    outs = fn.execute(ctx, [make_available(5), make_available(3)])
    assert [o.is_indirect() for o in outs] == [True, True]
    assert [o.get() for o in outs] == [8, 2]
    assert fn.calls == [(5, 3)]
