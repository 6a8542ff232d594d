"""The executor's load-time fast paths: generated kernel calls, unboxed and uncounted registers,
token reference counts, and ``make_available`` staying in step with ``AsyncValue()``.

Each test checks observable behaviour (results, errors, destroy hooks, reference counts)
against what the general path (docs/host.md, docs/executor.md) must give.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from pytfrt.bef.program import Function as PFunction
from pytfrt.bef.program import Kernel, Program
from pytfrt.executor import load_program
from pytfrt.host import (
    AsyncValue,
    Attr,
    DiagnosticCollector,
    ExecutionContext,
    HostContext,
    KernelError,
    KernelRegistry,
    RemainingAttrs,
)
from pytfrt.host.async_value import make_available, make_unconstructed
from pytfrt.support.attributes import IntAttr
from pytfrt.support.errors import Status
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import FileLineColLoc

pytestmark = pytest.mark.timeout(30)


def test_make_available_sets_every_slot_like_init() -> None:
    fresh: AsyncValue[int] = AsyncValue()
    fast = make_available(7)
    for slot in AsyncValue.__slots__:
        if slot == "__weakref__":
            continue
        assert hasattr(fast, slot), slot
        if slot not in ("_value", "_state"):
            assert getattr(fast, slot) == getattr(fresh, slot), slot
    assert fast.get() == 7 and fast.ref_count == 1 and fast.is_unique()
    seen: list[int] = []
    fast.and_then(lambda: seen.append(fast.get()))
    assert seen == [7]


class _Hooked:
    def __init__(self) -> None:
        self.destroyed = 0

    def __tfrt_destroy__(self) -> None:
        self.destroyed += 1


def test_token_refcount_destroys_exactly_once_under_threads() -> None:
    payload = _Hooked()
    value = make_available(payload)
    threads, rounds = 4, 2000
    value.add_ref(threads)  # one reference per thread, dropped at its end

    def work() -> None:
        for _ in range(rounds):
            value.add_ref()
            value.add_ref(2)
            value.drop_ref(3)
        value.drop_ref()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert value.ref_count == 1 and payload.destroyed == 0
    value.drop_ref()
    assert payload.destroyed == 1
    with pytest.raises(Exception, match="below zero"):
        value.drop_ref()
    assert payload.destroyed == 1


# -- programs -----------------------------------------------------------------------------------


def _function(kernels: list[tuple[str, list[int], int, dict[str, int]]], types: list[str],
              returns: list[int]) -> Program:
    """A function from ``(name, operands, result register (-1: none), int attrs)`` tuples."""
    fn = PFunction("f", FunctionKind.BEF, register_types=list(types))
    for line, (name, operands, result, attrs) in enumerate(kernels, 1):
        fn.kernels.append(Kernel(
            name, operands, [] if result < 0 else [result],
            [(k, IntAttr(v, "i32")) for k, v in sorted(attrs.items())], [],
            FileLineColLoc("t.mlir", line, 3), 0,
        ))
    fn.return_registers = returns
    fn.result_types = [types[r] for r in returns]
    return Program([fn]).finalize()


class Env:
    def __init__(self) -> None:
        self.diags = DiagnosticCollector()
        self.registry = KernelRegistry()
        self.host = HostContext("s", self.registry, self.diags)
        self.calls: list[str] = []
        self.pending: list[AsyncValue[Any]] = []
        self.seen_lists: list[list[Any]] = []
        self.locations: list[Any] = []
        self.unique: list[bool] = []
        self.objects: list[_Hooked] = []
        self.boxed: list[AsyncValue[Any]] = []
        env = self

        def const(value: Attr[int]) -> int:
            return value

        def add(a: int, b: int) -> int:
            env.calls.append("add")
            return a + b

        def later(x: int) -> AsyncValue[int]:
            value: AsyncValue[int] = make_unconstructed()
            env.pending.append(value)
            return value

        def sum_attrs(x: int, rest: RemainingAttrs) -> int:
            env.seen_lists.append(list(rest))
            total = x + sum(rest)
            rest.append(1000)  # a kernel may mutate its list: the next call gets a fresh one
            return total

        def where(x: int, ctx: ExecutionContext) -> int:
            env.locations.append(ctx.location)
            return x

        def is_unique(x: AsyncValue[int]) -> int:
            env.unique.append(x.is_unique())
            env.boxed.append(x)
            return 0

        def obj(value: Attr[int]) -> _Hooked:
            env.objects.append(_Hooked())
            return env.objects[-1]

        def use_obj(o: _Hooked) -> int:
            env.calls.append(f"use {o.destroyed}")
            return 1

        def fail(x: int) -> int:
            raise KernelError("boom")

        kernels: list[tuple[str, Callable[..., Any]]] = [
            ("t.const", const), ("t.add", add), ("t.later", later), ("t.sum_attrs", sum_attrs),
            ("t.where", where), ("t.is_unique", is_unique), ("t.obj", obj),
            ("t.use_obj", use_obj), ("t.fail", fail),
        ]
        for name, fn in kernels:
            self.registry.add_kernel(name, fn)

    def run(self, program: Program) -> list[AsyncValue[Any]]:
        fn = load_program(program, self.host).get_function("f")
        assert fn is not None
        results = fn.execute(self.host.new_execution_context(), [])
        return results


def test_scalar_chain_is_unboxed_and_returned_register_is_counted() -> None:
    env = Env()
    program = _function(
        [("t.const", [], 0, {"value": 2}), ("t.add", [0, 0], 1, {}),
         ("t.add", [1, 0], 2, {})],
        ["i32"] * 3, [2],
    )
    bef = load_program(program, env.host)
    info = bef.functions[0].info  # type: ignore[attr-defined]
    assert info.unboxed == (True, True, False)
    assert info.counted == (False, False, True)
    results = bef.functions[0].execute(env.host.new_execution_context(), [])
    env.host.await_values(results)
    assert results[0].get() == 6 and results[0].is_indirect()


def test_error_reaching_an_unboxed_register_later_skips_consumers() -> None:
    env = Env()
    program = _function(
        [("t.const", [], 0, {"value": 1}), ("t.later", [0], 1, {}), ("t.add", [1, 0], 2, {}),
         ("t.add", [2, 0], 3, {})],
        ["i32"] * 4, [3],
    )
    results = env.run(program)
    assert results[0].is_unavailable() and env.calls == []
    env.pending[0].set_error(Status("late failure"))
    env.host.await_values(results)
    assert results[0].is_error() and results[0].error.message == "late failure"
    assert env.calls == []  # strict: neither add ran (docs/executor.md), no diagnostic
    assert env.diags.diagnostics == []


def test_async_payload_into_unboxed_register_is_unwrapped() -> None:
    env = Env()
    program = _function(
        [("t.const", [], 0, {"value": 1}), ("t.later", [0], 1, {}), ("t.add", [1, 0], 2, {})],
        ["i32"] * 3, [2],
    )
    results = env.run(program)
    env.pending[0].emplace(41)
    env.host.await_values(results)
    assert results[0].get() == 42


def test_kernel_error_in_static_call_is_reported_once_at_its_location() -> None:
    env = Env()
    program = _function(
        [("t.const", [], 0, {"value": 1}), ("t.fail", [0], 1, {}), ("t.add", [1, 0], 2, {})],
        ["i32"] * 3, [2],
    )
    results = env.run(program)
    env.host.await_values(results)
    assert results[0].error.message == "boom" and env.calls == []
    reported = [(d.message, getattr(d.location, "line", None)) for d in env.diags.diagnostics]
    assert reported == [("boom", 2)]


def test_remaining_attrs_are_a_fresh_list_per_call() -> None:
    env = Env()
    program = _function(
        [("t.const", [], 0, {"value": 1}),
         ("t.sum_attrs", [0], 1, {"a": 10, "b": 20})],
        ["i32"] * 2, [1],
    )
    fn = load_program(program, env.host).get_function("f")
    assert fn is not None
    for _ in range(2):
        results = fn.execute(env.host.new_execution_context(), [])
        env.host.await_values(results)
        assert results[0].get() == 31
    assert env.seen_lists == [[10, 20], [10, 20]]  # name-sorted; the mutation did not stick


def test_execution_context_carries_the_kernel_location() -> None:
    env = Env()
    program = _function(
        [("t.const", [], 0, {"value": 1}), ("t.where", [0], 1, {}), ("t.where", [1], 2, {})],
        ["i32"] * 3, [2],
    )
    for _ in range(2):  # the second call reuses the located contexts
        env.host.await_values(env.run(program))
    assert [loc.line for loc in env.locations] == [2, 3, 2, 3]


def test_register_read_as_async_value_is_counted() -> None:
    env = Env()
    program = _function(
        [("t.const", [], 0, {"value": 1}), ("t.add", [0, 0], 1, {}),
         ("t.is_unique", [1], 2, {})],
        ["i32"] * 3, [2],
    )
    bef = load_program(program, env.host)
    info = bef.functions[0].info  # type: ignore[attr-defined]
    assert info.counted[1] and not info.unboxed[1]
    env.host.await_values(bef.functions[0].execute(env.host.new_execution_context(), []))
    assert env.unique == [True]  # its only user holds the only reference
    # The executor builds such values inline (make_available's recipe): every slot is set.
    slots = [s for s in AsyncValue.__slots__ if s != "__weakref__"]
    assert all(hasattr(env.boxed[0], s) for s in slots) and env.boxed[0].get() == 2


def test_hooked_payload_is_destroyed_after_its_last_consumer() -> None:
    env = Env()
    program = _function(
        [("t.obj", [], 0, {"value": 0}), ("t.use_obj", [0], 1, {}),
         ("t.use_obj", [0], 2, {}), ("t.add", [1, 2], 3, {})],
        ["!t.obj", "i32", "i32", "i32"], [3],
    )
    bef = load_program(program, env.host)
    info = bef.functions[0].info  # type: ignore[attr-defined]
    assert info.counted[0] and not info.unboxed[0]
    results = bef.functions[0].execute(env.host.new_execution_context(), [])
    env.host.await_values(results)
    assert results[0].get() == 2
    assert env.calls == ["use 0", "use 0", "add"]  # alive while used
    assert [o.destroyed for o in env.objects] == [1]  # then destroyed exactly once
