"""The async BEF executor on hand-built Programs: results, scheduling order, errors, lifetimes.

Each test builds a small :class:`pytfrt.bef.Program` directly (no front end) and registers a
few kernels that record what they do, then checks the observable behaviour against the rules
of docs/executor.md worked out by hand.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from pytfrt.bef.program import Function as PFunction
from pytfrt.bef.program import Kernel, Program
from pytfrt.executor import BEFFile, LoadError, load_program
from pytfrt.executor.async_executor import _switch_stream
from pytfrt.executor.kernel_info import KernelInfo
from pytfrt.host import (
    CHAIN,
    AsyncValue,
    Attr,
    DiagnosticCollector,
    ExecutionContext,
    Function,
    HostContext,
    KernelError,
    KernelRegistry,
    ResourceContext,
)
from pytfrt.support.attributes import IntAttr, StringAttr
from pytfrt.support.errors import ErrorCode
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import FileLineColLoc

pytestmark = pytest.mark.timeout(30)


# -- a tiny Program builder ---------------------------------------------------------------------


class FB:
    """Builds one function: registers are allocated as ops are added."""

    def __init__(self, name: str, args: Sequence[str] = (), kind: FunctionKind = FunctionKind.BEF):
        self.fn = PFunction(name, kind, argument_types=list(args), register_types=list(args))

    def op(self, name: str, *operands: int, results: Sequence[str] = ("i32",), stream: int = 0,
           attrs: dict[str, Any] | None = None, funcs: Sequence[int] = (), line: int = 0) -> Any:
        regs = list(range(len(self.fn.register_types), len(self.fn.register_types) + len(results)))
        self.fn.register_types.extend(results)
        attributes = []
        for key, value in sorted((attrs or {}).items()):
            attributes.append((key, StringAttr(value) if isinstance(value, str)
                               else IntAttr(value, "i32")))
        self.fn.kernels.append(Kernel(name, list(operands), regs, attributes, list(funcs),
                                      FileLineColLoc("t.mlir", line, 3), stream))
        if len(regs) == 1:
            return regs[0]
        return tuple(regs)

    def ret(self, *regs: int, types: Sequence[str] | None = None) -> PFunction:
        self.fn.return_registers = list(regs)
        self.fn.result_types = list(types) if types else [self.fn.register_types[r] for r in regs]
        return self.fn


class Env:
    """A host with recording test kernels."""

    def __init__(self, queue: str = "s") -> None:
        self.log: list[str] = []
        self.lock = threading.Lock()
        self.diags = DiagnosticCollector()
        self.registry = KernelRegistry()
        self.host = HostContext(queue, self.registry, self.diags)
        self._register()

    def record(self, text: str) -> None:
        with self.lock:
            self.log.append(text)

    def _register(self) -> None:
        reg = self.registry
        env = self

        def const(value: Attr[int]) -> int:
            return value

        def add(a: int, b: int) -> int:
            return a + b

        def tag(x: int, name: Attr[str]) -> int:
            env.record(name)
            return x

        def tag0(name: Attr[str]) -> int:
            env.record(name)
            return 0

        def fail(x: int) -> int:
            raise KernelError("boom")

        def fail0(msg: Attr[str]) -> int:
            raise KernelError(msg)

        def async_inc(x: int, ctx: ExecutionContext) -> AsyncValue[int]:
            return ctx.host.enqueue_work(lambda: x + 1)

        def new_chain() -> Any:
            return CHAIN

        def print_i32(x: int) -> Any:
            env.record(f"print {x}")
            return CHAIN

        def cancel(x: int, ctx: ExecutionContext) -> int:
            ctx.request_context.cancel()
            return x

        def unique(x: AsyncValue[int]) -> bool:
            return x.is_unique()

        def value(n: Attr[int]) -> Payload:
            return Payload(env, n)

        def use(p: Payload) -> int:
            env.record(f"use {p.n}")
            return p.n

        def call(ctx: ExecutionContext, f: Function, *args: AsyncValue[Any]) -> Any:
            results = f.execute(ctx, args)
            return tuple(results) if len(results) != 1 else results[0]

        def alias(x: AsyncValue[int]) -> AsyncValue[int]:
            return x.add_ref()  # returning an argument takes a reference (docs/host.md)

        for name, fn in [("t.const", const), ("t.add", add), ("t.tag", tag), ("t.tag0", tag0),
                         ("t.fail", fail), ("t.fail0", fail0), ("t.async_inc", async_inc),
                         ("t.new_chain", new_chain), ("t.print", print_i32),
                         ("t.cancel", cancel), ("t.unique", unique), ("t.value", value),
                         ("t.use", use), ("t.call", call), ("t.alias", alias)]:
            reg.add_kernel(name, fn)

        def add_s(a: int, b: int) -> int:
            return a + b

        def const_s(v: Attr[int]) -> int:
            return v

        def fail_s(x: int) -> int:
            raise KernelError("sync boom")

        for name, fn in [("t.add_s", add_s), ("t.const_s", const_s), ("t.fail_s", fail_s)]:
            reg.add_sync_kernel(name, fn)

    def load(self, *functions: PFunction) -> BEFFile:
        return load_program(Program(list(functions)).finalize(), self.host)

    def run(self, bef: BEFFile, name: str, args: Sequence[AsyncValue[Any]] = ()) -> list[Any]:
        fn = bef.get_function(name)
        assert fn is not None
        ctx = self.host.new_execution_context(ResourceContext())
        results = fn.execute(ctx, args)
        self.host.await_values(results)
        self.host.quiesce()
        return [r.error if r.is_error() else r.get() for r in results]


class Payload:
    """A value whose destruction is observable (like TFRT's ``vt.value``)."""

    def __init__(self, env: Env, n: int) -> None:
        self.env = env
        self.n = n
        env.record(f"construct {n}")

    def __tfrt_destroy__(self) -> None:
        self.env.record(f"destroy {self.n}")


@pytest.fixture(params=["s", "mstd:2"])
def env(request: pytest.FixtureRequest) -> Any:
    e = Env(request.param)
    yield e
    e.host.shutdown()


@pytest.fixture
def senv() -> Any:
    e = Env("s")
    yield e
    e.host.shutdown()


# -- results ------------------------------------------------------------------------------------


def test_serial_chain_and_results_are_indirect(env: Env) -> None:
    f = FB("f")
    x = f.op("t.const", attrs={"value": 1})
    for _ in range(50):
        x = f.op("t.add", x, x)
    bef = env.load(f.ret(x))
    fn = bef.get_function("f")
    ctx = env.host.new_execution_context()
    results = fn.execute(ctx, [])
    assert results[0].is_indirect()
    env.host.await_values(results)
    assert results[0].get() == 2**50


def test_async_kernels_complete_on_the_queue(env: Env) -> None:
    f = FB("f")
    x = f.op("t.const", attrs={"value": 0})
    for _ in range(300):  # > 100 nested continuations on one thread under "s"
        x = f.op("t.async_inc", x)
    y = f.op("t.add", x, x)
    bef = env.load(f.ret(y, x))
    assert env.run(bef, "f") == [600, 300]
    assert env.diags.messages == []


def test_arguments_returned_and_duplicated_results(senv: Env) -> None:
    f = FB("f", args=["i32", "i32"])
    s = f.op("t.add", 0, 1)
    bef = senv.load(f.ret(s, 1, s, 0))
    from pytfrt.host import make_available

    args = [make_available(3), make_available(4)]
    assert senv.run(bef, "f", args) == [7, 4, 7, 3]


def test_function_call_through_kernel(env: Env) -> None:
    callee = FB("callee", args=["i32"])
    y = callee.op("t.async_inc", 0)
    callee_fn = callee.ret(y)
    main = FB("main")
    c = main.op("t.const", attrs={"value": 41})
    r = main.op("t.call", c, funcs=[0])
    bef = env.load(callee_fn, main.ret(r))
    assert env.run(bef, "main") == [42]


# -- scheduling order (docs/executor.md) -----------------------------------------------------------


def test_other_streams_run_as_tasks_in_stream_order(senv: Env) -> None:
    # allocator.mlir (docs/executor.md): x0, x1, x2 in streams 3, 2, 1.
    f = FB("f")
    f.op("t.tag0", attrs={"name": "x0"}, stream=3)
    f.op("t.tag0", attrs={"name": "x1"}, stream=2)
    f.op("t.tag0", attrs={"name": "x2"}, stream=1)
    bef = senv.load(f.ret())
    fn = bef.get_function("f")
    fn.execute(senv.host.new_execution_context(), [])
    assert senv.log == ["x0"]  # the rest waits for the driver under "s"
    senv.host.quiesce()
    assert senv.log == ["x0", "x2", "x1"]


def test_lifo_depth_first_order(senv: Env) -> None:
    # scheduling.mlir lifo_scheduling (docs/executor.md): ids 0, 2, 1.
    f = FB("f")
    c0 = f.op("t.const", attrs={"value": 1})
    c1 = f.op("t.tag", c0, attrs={"name": "id 0"})
    f.op("t.tag", c0, attrs={"name": "id 1"})
    f.op("t.tag", c1, attrs={"name": "id 2"})
    bef = senv.load(f.ret())
    senv.run(bef, "f")
    assert senv.log == ["id 0", "id 2", "id 1"]


def test_zero_operand_ops_in_the_pseudo_stream_run_last_first(senv: Env) -> None:
    f = FB("f")
    for name in ["a", "b", "c"]:
        f.op("t.tag0", attrs={"name": name})
    senv.run(senv.load(f.ret()), "f")
    assert senv.log == ["c", "b", "a"]


def test_users_of_one_result_run_in_program_order(senv: Env) -> None:
    f = FB("f")
    c0 = f.op("t.const", attrs={"value": 1})
    for name in ["u1", "u2", "u3"]:
        f.op("t.tag", c0, attrs={"name": name})
    senv.run(senv.load(f.ret()), "f")
    assert senv.log == ["u1", "u2", "u3"]


def test_ready_outline_kernels_are_grouped_per_stream(senv: Env) -> None:
    f = FB("f")
    c0 = f.op("t.const", attrs={"value": 1})
    f.op("t.tag", c0, attrs={"name": "s2 a"}, stream=2)
    f.op("t.tag", c0, attrs={"name": "s1 a"}, stream=1)
    f.op("t.tag", c0, attrs={"name": "s2 b"}, stream=2)
    f.op("t.tag", c0, attrs={"name": "s1 b"}, stream=1)
    f.op("t.tag", c0, attrs={"name": "s0"})
    bef = senv.load(f.ret())
    bef.get_function("f").execute(senv.host.new_execution_context(), [])
    assert senv.log == ["s0"]
    senv.host.quiesce()
    # Used-by order is [s0, s1 b, s2 b, s1 a, s2 a]; the outline part is stably sorted by
    # stream ([s1 b, s1 a], [s2 b, s2 a]), one task per stream, each group popped LIFO.
    assert senv.log == ["s0", "s1 a", "s1 b", "s2 a", "s2 b"]


def _infos(streams: Sequence[int]) -> list[KernelInfo]:
    return [KernelInfo(f"k{i}", None, (), (), (), (), s, (), (), FileLineColLoc("x", 1, 1), [])
            for i, s in enumerate(streams)]


def test_switch_stream_emulates_libstdcxx_partition() -> None:
    kernels = _infos([1, 2, 1, 2])
    inline: list[int] = []
    outline = [0, 1, 2, 3]
    # libstdc++: swap(first=0, last=3) -> [3, 1, 2, 0]; returns 2 -> moved [2, 0].
    assert _switch_stream(kernels, inline, outline) == 1
    assert inline == [2, 0]
    assert outline == [3, 1]


# -- errors and cancellation (docs/executor.md, docs/host.md) --------------------------------------


def test_failing_kernel_emits_once_and_dependents_are_skipped(env: Env) -> None:
    f = FB("f")
    c = f.op("t.const", attrs={"value": 1})
    bad = f.op("t.fail", c, line=7)
    d = f.op("t.tag", bad, attrs={"name": "never"})
    e = f.op("t.add", d, c)
    bef = env.load(f.ret(e))
    [result] = env.run(bef, "f")
    assert result.message == "boom" and result.code == ErrorCode.INTERNAL
    assert env.log == []
    assert [(d.message, d.location) for d in env.diags.diagnostics] == [
        ("boom", FileLineColLoc("t.mlir", 7, 3))
    ]


def test_last_error_operand_wins(senv: Env) -> None:
    f = FB("f")
    e1 = f.op("t.fail0", attrs={"msg": "first"})
    e2 = f.op("t.fail0", attrs={"msg": "second"})
    s = f.op("t.add", e1, e2)
    t = f.op("t.add", e2, e1)
    [r1, r2] = senv.run(senv.load(f.ret(s, t)), "f")
    assert (r1.message, r2.message) == ("second", "first")
    assert sorted(senv.diags.messages) == ["first", "second"]


def test_unused_failure_only_emits(senv: Env) -> None:
    f = FB("f")
    c = f.op("t.const", attrs={"value": 5})
    f.op("t.fail", c)
    assert senv.run(senv.load(f.ret(c)), "f") == [5]
    assert senv.diags.messages == ["boom"]


def test_cancellation_skips_remaining_kernels_silently(env: Env) -> None:
    f = FB("f")
    c = f.op("t.const", attrs={"value": 1})
    x = f.op("t.cancel", c)
    y = f.op("t.tag", x, attrs={"name": "after cancel"})
    bef = env.load(f.ret(y))
    [result] = env.run(bef, "f")
    assert result.message == "Cancelled" and result.code == ErrorCode.CANCELLED
    assert env.log == [] and env.diags.messages == []


# -- lifetimes (docs/executor.md) ------------------------------------------------------------------


def test_values_die_right_after_their_last_consumer(senv: Env) -> None:
    f = FB("f")
    v = f.op("t.value", attrs={"n": 1}, results=["!vt"])
    a = f.op("t.use", v)
    b = f.op("t.use", v)
    f.op("t.value", attrs={"n": 2}, results=["!vt"])  # unused: destroyed at once
    s = f.op("t.add", a, b)
    p = f.op("t.print", s, results=["!tfrt.chain"])
    senv.run(senv.load(f.ret(p)), "f")
    assert senv.log == [
        "construct 2", "destroy 2",
        "construct 1", "use 1", "use 1", "destroy 1", "print 2",
    ]


def test_returned_values_die_when_the_caller_drops_them(senv: Env) -> None:
    f = FB("f")
    v = f.op("t.value", attrs={"n": 7}, results=["!vt"])
    f.op("t.use", v)
    bef = senv.load(f.ret(v))
    results = bef.get_function("f").execute(senv.host.new_execution_context(), [])
    senv.host.quiesce()
    assert senv.log == ["construct 7", "use 7"]
    results[0].drop_ref()
    assert senv.log == ["construct 7", "use 7", "destroy 7"]


def test_is_unique_follows_the_use_count(senv: Env) -> None:
    f = FB("f")
    c1 = f.op("t.const", attrs={"value": 1})
    u1 = f.op("t.unique", c1, results=["i1"])
    c2 = f.op("t.const", attrs={"value": 2})
    u2 = f.op("t.unique", c2, results=["i1"])
    f.op("t.add", c2, c2)
    assert senv.run(senv.load(f.ret(u1, u2)), "f") == [True, False]


def test_kernel_returning_its_argument(senv: Env) -> None:
    f = FB("f")
    v = f.op("t.value", attrs={"n": 3}, results=["!vt"])
    w = f.op("t.alias", v, results=["!vt"])
    f.op("t.use", w)
    senv.run(senv.load(f.ret()), "f")
    assert senv.log == ["construct 3", "use 3", "destroy 3"]


# -- loading --------------------------------------------------------------------------------


def test_unknown_kernel_is_diagnosed_at_its_first_use(senv: Env) -> None:
    f = FB("f")
    c = f.op("t.const", attrs={"value": 1})
    f.op("t.nope", c, line=12)
    f.op("t.nope", c, line=13)
    with pytest.raises(LoadError):
        senv.load(f.ret())
    assert [(d.message, d.location) for d in senv.diags.diagnostics] == [
        ("unknown kernel name 't.nope'", FileLineColLoc("t.mlir", 12, 3))
    ]


def test_sync_function_may_only_use_sync_kernels(senv: Env) -> None:
    f = FB("f", kind=FunctionKind.SYNC)
    c = f.op("t.const", attrs={"value": 1})
    with pytest.raises(LoadError):
        senv.load(f.ret(c))
    assert "not a sync kernel" in senv.diags.messages[0]


def test_a_loaded_program_runs_concurrent_requests() -> None:
    env = Env("mstd:2")
    try:
        f = FB("f", args=["i32"])
        x = 0
        for _ in range(20):
            x = f.op("t.async_inc", x)
        bef = env.load(f.ret(x))
        fn = bef.get_function("f")
        from pytfrt.host import make_available

        outs = [fn.execute(env.host.new_execution_context(), [make_available(i)])
                for i in range(50)]
        env.host.await_values([r for rs in outs for r in rs])
        assert [rs[0].get() for rs in outs] == [i + 20 for i in range(50)]
    finally:
        env.host.shutdown()
