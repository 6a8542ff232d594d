"""Native functions: body-less ``tfrt.native`` declarations bound to Python callables.

A :class:`NativeRegistry` maps a declaration's name to a callable
``impl(exec_ctx, arguments, num_results) -> list[AsyncValue]`` that receives *available*
argument values (borrowed) and returns ``num_results`` values carrying one reference each
(available or not; errors are error values and are **not** emitted).  The loader looks every
native declaration up at load time; a missing one fails loading with
``unable to find native function in global registry``.

Calling a :class:`NativeFunction` waits until all arguments are available (``run_when_ready``)
and then invokes the callable; results not produced yet are IndirectAsyncValues forwarded later.

:func:`test_native_registry` holds TFRT's test natives: ``native_add``, ``native_async_add``,
``native_sink``, ``native_async_sink`` and ``native_error``.

Thread-safety: a registry is filled before loading and then only read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytfrt.host.async_value import (
    AsyncValue,
    IndirectAsyncValue,
    make_available,
    make_error,
    make_ready_chain,
    run_when_ready,
)
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function, FunctionKind
from pytfrt.support.errors import Status

NativeImpl = Callable[[ExecutionContext, Sequence[AsyncValue[Any]], int], list[AsyncValue[Any]]]


class NativeRegistry:
    """Name -> native implementation (TFRT's global native-function registry)."""

    def __init__(self) -> None:
        self._impls: dict[str, NativeImpl] = {}

    def add(self, name: str, impl: NativeImpl) -> None:
        """Register ``impl`` under ``name``; raises ``KeyError`` if the name is taken."""
        if name in self._impls:
            raise KeyError(f"native function '{name}' is already registered")
        self._impls[name] = impl

    def get(self, name: str) -> NativeImpl | None:
        """The implementation named ``name``, or ``None``."""
        return self._impls.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._impls


class NativeFunction(Function):
    """A native function of a loaded program (see the module docstring)."""

    kind = FunctionKind.NATIVE

    def __init__(self, name: str, impl: NativeImpl, argument_types: Sequence[str],
                 result_types: Sequence[str]) -> None:
        self.name = name
        self.impl = impl
        self.argument_types = tuple(argument_types)
        self.result_types = tuple(result_types)

    def execute(
        self, exec_ctx: ExecutionContext, arguments: Sequence[AsyncValue[Any]]
    ) -> list[AsyncValue[Any]]:
        """Call the implementation once every argument is available."""
        n = len(self.result_types)
        if all(a.is_available() for a in arguments):
            return self._call(exec_ctx, arguments)
        args = list(arguments)
        for a in args:
            a.add_ref()  # borrowed: keep them alive until the call
        results: list[IndirectAsyncValue[Any]] = [IndirectAsyncValue() for _ in range(n)]

        def call() -> None:
            values = self._call(exec_ctx, args)
            for a in args:
                a.drop_ref()
            for indirect, value in zip(results, values, strict=True):
                indirect.forward_to(value)

        run_when_ready(args, call)
        return list(results)

    def _call(self, exec_ctx: ExecutionContext, args: Sequence[AsyncValue[Any]]
              ) -> list[AsyncValue[Any]]:
        n = len(self.result_types)
        try:
            values = self.impl(exec_ctx, args, n)
        except Exception as exc:  # noqa: BLE001 - becomes an error value, not emitted
            values = [make_error(Status(str(exc) or type(exc).__name__)) for _ in range(n)]
        if len(values) != n:
            values = [
                make_error(f"native function '{self.name}' returned {len(values)} results, "
                           f"expected {n}")
                for _ in range(n)
            ]
        return values


# -- TFRT's test natives ---------------------------------------------------------------------


def _wrap_i32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def _chains(n: int) -> list[AsyncValue[Any]]:
    return [make_ready_chain() for _ in range(n)]


def _native_add(ctx: ExecutionContext, args: Sequence[AsyncValue[Any]], n: int
                ) -> list[AsyncValue[Any]]:
    return [make_available(_wrap_i32(args[0].get() + args[1].get()))]


def _native_async_add(ctx: ExecutionContext, args: Sequence[AsyncValue[Any]], n: int
                      ) -> list[AsyncValue[Any]]:
    a, b = args[0].get(), args[1].get()
    return [ctx.host.enqueue_work(lambda: _wrap_i32(a + b))]


def _native_sink(ctx: ExecutionContext, args: Sequence[AsyncValue[Any]], n: int
                 ) -> list[AsyncValue[Any]]:
    return _chains(n)


def _native_async_sink(ctx: ExecutionContext, args: Sequence[AsyncValue[Any]], n: int
                       ) -> list[AsyncValue[Any]]:
    from pytfrt.host.async_value import CHAIN

    done = ctx.host.enqueue_work(lambda: CHAIN)
    if n > 1:
        done.add_ref(n - 1)
    return [done] * n


def _native_error(ctx: ExecutionContext, args: Sequence[AsyncValue[Any]], n: int
                  ) -> list[AsyncValue[Any]]:
    error = make_error(Status("something bad happened"))
    if n > 1:
        error.add_ref(n - 1)
    return [error] * n


def test_native_registry() -> NativeRegistry:
    """A registry with TFRT's test natives (docs/executor.md)."""
    registry = NativeRegistry()
    registry.add("native_add", _native_add)
    registry.add("native_async_add", _native_async_add)
    registry.add("native_sink", _native_sink)
    registry.add("native_async_sink", _native_async_sink)
    registry.add("native_error", _native_error)
    return registry


test_native_registry.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
