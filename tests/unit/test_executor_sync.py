"""Sync functions and native functions on hand-built Programs."""

from __future__ import annotations

from typing import Any

import pytest
from test_executor import FB, Env  # type: ignore[import-not-found]

from pytfrt.executor import LoadError, SyncBEFFunction
from pytfrt.host import (
    AsyncValue,
    Attr,
    ExecutionContext,
    Function,
    KernelError,
    RemainingAttrs,
    make_available,
)
from pytfrt.support.function_kind import FunctionKind

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def env() -> Any:
    e = Env("s")
    reg = e.registry

    def sum_s(*xs: int) -> int:
        return sum(xs)

    def attrs_s(x: int, rest: RemainingAttrs) -> int:
        return x + sum(rest)

    def invoke_s(ctx: ExecutionContext, f: Function, a: int) -> int:
        return f.execute_sync(ctx, [a, a])[0]  # type: ignore[no-any-return]

    def pair_s(x: int) -> tuple[int, int]:
        return x, -x

    reg.add_sync_kernel("t.sum_s", sum_s)
    reg.add_sync_kernel("t.attrs_s", attrs_s)
    reg.add_sync_kernel("t.invoke_s", invoke_s)
    reg.add_sync_kernel("t.pair_s", pair_s)

    def bad_pair_s(x: int) -> Any:
        return [x, -x] if x > 0 else (x, -x, 0) if x < 0 else x

    reg.add_sync_kernel("t.bad_pair_s", bad_pair_s)

    def lifetime_s(n: Attr[int]) -> Any:
        return Tracked(e, n)

    def peek_s(t: Tracked) -> int:
        e.record(f"peek {t.n}")
        return t.n

    reg.add_sync_kernel("t.tracked_s", lifetime_s)
    reg.add_sync_kernel("t.peek_s", peek_s)
    yield e
    e.host.shutdown()


class Tracked:
    """Records when Python frees it (the sync executor releases locals after last use)."""

    def __init__(self, env: Env, n: int) -> None:
        self.env, self.n = env, n

    def __del__(self) -> None:
        self.env.record(f"free {self.n}")


def fib_function() -> Any:
    f = FB("fib", args=["i32", "i32"], kind=FunctionKind.SYNC)
    a, b = 0, 1
    for _ in range(10):
        a, b = b, f.op("t.add_s", a, b)
    return f.ret(b)


def test_sync_function_computes_straight_line(env: Env) -> None:
    bef = env.load(fib_function())
    fn = bef.get_function("fib")
    assert isinstance(fn, SyncBEFFunction)
    ctx = env.host.new_execution_context()
    for a0, b0 in [(0, 1), (2, 3), (-5, 7)]:
        a, b = a0, b0
        for _ in range(10):
            a, b = b, a + b
        assert fn.execute_sync(ctx, [a0, b0]) == [b]


def test_sync_error_stops_the_function_and_is_not_emitted(env: Env) -> None:
    f = FB("f", args=["i32"], kind=FunctionKind.SYNC)
    x = f.op("t.fail_s", 0)
    y = f.op("t.add_s", x, 0)
    bef = env.load(f.ret(y))
    fn = bef.get_function("f")
    ctx = env.host.new_execution_context()
    with pytest.raises(KernelError, match="sync boom"):
        fn.execute_sync(ctx, [1])
    [res] = fn.execute(ctx, [make_available(1)])
    assert res.is_error() and res.error.message == "sync boom"
    assert env.diags.messages == []


def test_sync_binding_rules(env: Env) -> None:
    f = FB("f", args=["i32", "i32"], kind=FunctionKind.SYNC)
    s = f.op("t.sum_s", 0, 1, 0)
    t = f.op("t.attrs_s", s, attrs={"a": 100, "b": 1000})
    p, n = f.op("t.pair_s", t, results=["i32", "i32"])
    g = FB("g", args=["i32"], kind=FunctionKind.SYNC)
    u = g.op("t.invoke_s", 0, funcs=[0])
    bef = env.load(f.ret(p, n), g.ret(u))
    ctx = env.host.new_execution_context()
    assert bef.get_function("f").execute_sync(ctx, [2, 3]) == [1107, -1107]
    assert bef.get_function("g").execute_sync(ctx, [1]) == [1103]


def test_multi_result_kernels_are_bound_statically_and_checked(env: Env) -> None:
    f = FB("f", args=["i32"], kind=FunctionKind.SYNC)
    p, n = f.op("t.pair_s", 0, results=["i32", "i32"])
    q, m = f.op("t.bad_pair_s", p, results=["i32", "i32"])
    bef = env.load(f.ret(q, m, n))
    fn = bef.get_function("f")
    assert "_cs" not in fn.source  # no generic binding per call
    ctx = env.host.new_execution_context()
    # pair(-3) = (-3, 3): bad_pair(-3) has three results; pair(3) = (3, -3): bad_pair(3) a
    # list; pair(0): bad_pair(0) one int -- each the registry's own error, as call_sync says
    for x in (-3, 3, 0):
        with pytest.raises(KernelError, match="^kernel 't.bad_pair_s' must return 2 results$"):
            fn.execute_sync(ctx, [x])
    assert env.diags.messages == []


def test_sync_locals_are_released_after_last_use(env: Env) -> None:
    f = FB("f", kind=FunctionKind.SYNC)
    t1 = f.op("t.tracked_s", attrs={"n": 1})
    f.op("t.tracked_s", attrs={"n": 2})  # unused
    a = f.op("t.peek_s", t1)
    t3 = f.op("t.tracked_s", attrs={"n": 3})
    b = f.op("t.peek_s", t3)
    s = f.op("t.add_s", a, b)
    bef = env.load(f.ret(s))
    assert bef.get_function("f").execute_sync(env.host.new_execution_context(), []) == [4]
    assert env.log == ["free 2", "peek 1", "free 1", "peek 3", "free 3"]


def test_async_function_calls_sync_function(env: Env) -> None:
    bef = env.load(fib_function(), _caller())
    assert env.run(bef, "main") == [89]


def _caller() -> Any:
    main = FB("main")
    a = main.op("t.const", attrs={"value": 0})
    b = main.op("t.const", attrs={"value": 1})
    r = main.op("t.call", a, b, funcs=[0])
    return main.ret(r)


# -- native functions -------------------------------------------------------------------------


def _native(name: str, args: list[str], results: list[str]) -> Any:
    from pytfrt.bef.program import Function as PFunction

    return PFunction(name, FunctionKind.NATIVE, argument_types=args, result_types=results)


@pytest.mark.parametrize("queue", ["s", "mstd:2"])
@pytest.mark.parametrize("native", ["native_add", "native_async_add"])
def test_native_add(queue: str, native: str) -> None:
    env = Env(queue)
    try:
        main = FB("main")
        a = main.op("t.const", attrs={"value": 2})
        a2 = main.op("t.async_inc", a)
        b = main.op("t.const", attrs={"value": 2**31 - 1})
        r = main.op("t.call", a2, b, funcs=[0])
        bef = env.load(_native(native, ["i32", "i32"], ["i32"]), main.ret(r))
        expected = (3 + (2**31 - 1) + 2**31) % 2**32 - 2**31  # i32 wraparound
        assert env.run(bef, "main") == [expected]
        assert env.diags.messages == []
    finally:
        env.host.shutdown()


def test_native_error_and_sinks_are_not_emitted(env: Env) -> None:
    main = FB("main")
    a = main.op("t.const", attrs={"value": 2})
    e = main.op("t.call", a, a, funcs=[0])
    c1 = main.op("t.call", a, funcs=[1], results=["!tfrt.chain"])
    c2 = main.op("t.call", a, funcs=[2], results=["!tfrt.chain"])
    bef = env.load(
        _native("native_error", ["i32", "i32"], ["i32"]),
        _native("native_sink", ["i32"], ["!tfrt.chain"]),
        _native("native_async_sink", ["i32"], ["!tfrt.chain"]),
        main.ret(e, c1, c2),
    )
    err, ch1, ch2 = env.run(bef, "main")
    assert err.message == "something bad happened"
    assert env.diags.messages == []


def test_missing_native_fails_loading(env: Env) -> None:
    with pytest.raises(LoadError):
        env.load(_native("no_such_native", [], []))
    assert env.diags.messages == ["unable to find native function in global registry"]


def test_native_waits_for_unavailable_arguments(env: Env) -> None:
    bef = env.load(_native("native_add", ["i32", "i32"], ["i32"]))
    fn = bef.functions[0]
    pending: AsyncValue[Any] = AsyncValue()
    results = fn.execute(env.host.new_execution_context(), [make_available(5), pending])
    assert not results[0].is_available()
    pending.emplace(6)
    assert results[0].get() == 11


def test_unavailable_argument_to_sync_function_value(env: Env) -> None:
    fn = env.load(fib_function()).get_function("fib")
    err: AsyncValue[Any] = AsyncValue()
    err.set_error("bad input")
    [res] = fn.execute(env.host.new_execution_context(), [err, make_available(1)])
    assert res.error.message == "bad input"
