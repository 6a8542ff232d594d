"""Control-flow and parallel kernels of ``tfrt`` with fake ``Function``s (Python callables):
the results are compared with plain Python loops, and reference counts with the ownership rules
(every intermediate value destroyed exactly once, arguments never)."""

from __future__ import annotations

import pytest
from test_kernels_support import PyFunction, invoke, new_host

from pytfrt.host import AsyncValue, make_available, make_error, make_unconstructed
from pytfrt.kernels.basic.control_flow import ONCE_NO_RESOURCE_CONTEXT
from pytfrt.kernels.basic.parallel import INVALID_BODY
from pytfrt.kernels.common import wrap_i32
from pytfrt.kernels.test_kernels.async_kernels import AtomicI32

pytestmark = pytest.mark.timeout(30)


def await_all(host, frame) -> list:
    host.await_values([r for r in frame.results])
    return [r.get() if r.is_concrete() else r.error.message for r in frame.results]


class Counted:
    """A payload that counts its destructions."""

    destroyed: list[int] = []

    def __init__(self, v: int) -> None:
        self.v = v

    def __tfrt_destroy__(self) -> None:
        Counted.destroyed.append(self.v)


# -- call / if / case ------------------------------------------------------------------------


def test_call_returns_function_results() -> None:
    host, ctx, _ = new_host()
    fn = PyFunction(lambda a, b: (a * b, a + b), ("i32", "i32"), ("i32", "i32"))
    frame = invoke("tfrt.call", [6, 7], funcs=[fn], num_results=2, exec_ctx=ctx)
    assert all(r.is_indirect() for r in frame.results)
    assert await_all(host, frame) == [42, 13]


def test_call_result_count_mismatch_is_reported() -> None:
    host, ctx, diags = new_host()
    fn = PyFunction(lambda: (1, 2), (), ("i32", "i32"), name="f")
    frame = invoke("tfrt.call", [], funcs=[fn], num_results=1, exec_ctx=ctx)
    assert frame.results[0].is_error()
    assert diags.messages == ["function 'f' returned 2 results but the op has 1"]


@pytest.mark.parametrize("name", ["tfrt.if", "tfrt.cond"])
@pytest.mark.parametrize("cond,expected", [(True, 11), (False, 9)])
def test_if_selects_branch(name: str, cond: bool, expected: int) -> None:
    host, ctx, _ = new_host()
    then_fn = PyFunction(lambda x: x + 1, ("i32",), ("i32",))
    else_fn = PyFunction(lambda x: x - 1, ("i32",), ("i32",))
    frame = invoke(name, [cond, 10], funcs=[then_fn, else_fn], exec_ctx=ctx)
    assert await_all(host, frame) == [expected]
    assert len(then_fn.calls) + len(else_fn.calls) == 1


def test_if_without_else_and_false_condition_does_nothing() -> None:
    host, ctx, _ = new_host()
    then_fn = PyFunction(lambda: None)
    frame = invoke("tfrt.if", [False], funcs=[then_fn], num_results=0, exec_ctx=ctx)
    assert frame.results == [] and then_fn.calls == []


def test_if_error_condition_propagates_to_all_results() -> None:
    host, ctx, diags = new_host()
    fn = PyFunction(lambda x: (x, x), ("i32",), ("i32", "i32"))
    err = make_error("bad cond")
    frame = invoke("tfrt.if", [err, 1], funcs=[fn, fn], num_results=2, exec_ctx=ctx)
    assert [r.error.message for r in frame.results] == ["bad cond", "bad cond"]
    assert diags.messages == [] and fn.calls == []


def test_if_with_unavailable_condition_defers() -> None:
    host, ctx, _ = new_host()
    cond: AsyncValue = make_unconstructed()
    arg = make_available(5)
    fn = PyFunction(lambda x: x * 2, ("i32",), ("i32",))
    frame = invoke("tfrt.if", [cond, arg], funcs=[fn, fn], exec_ctx=ctx)
    assert frame.results[0].is_unavailable() and arg.ref_count == 2  # kept alive
    cond.emplace(True)
    assert frame.results[0].get() == 10 and arg.ref_count == 1


@pytest.mark.parametrize("index,expected", [(0, "b0"), (1, "b1"), (2, "b2"), (3, "b2"), (-1, "b2")])
def test_case_out_of_range_selects_last_branch(index: int, expected: str) -> None:
    host, ctx, _ = new_host()
    branches = [PyFunction(lambda x, n=n: f"{n}:{x}", ("i32",), ("s",)) for n in ("b0", "b1", "b2")]
    frame = invoke("tfrt.case", [index, 7], funcs=branches, exec_ctx=ctx)
    assert await_all(host, frame) == [f"{expected}:7"]


def test_case_error_index() -> None:
    _, ctx, _ = new_host()
    fn = PyFunction(lambda x: x, ("i32",), ("i32",))
    frame = invoke("tfrt.case", [make_error("no index"), 1], funcs=[fn], exec_ctx=ctx)
    assert frame.results[0].error.message == "no index"


# -- while ---------------------------------------------------------------------------------------


def py_while(i: int, acc: int, limit: int) -> tuple[int, int]:
    while i < limit:
        i, acc = i + 1, wrap_i32(acc + i)
    return i, acc


@pytest.mark.parametrize("parallel_iterations", [1, 4])
@pytest.mark.parametrize("queue", ["s", "mstd:2"])
@pytest.mark.parametrize("limit", [0, 1, 10, 100])
def test_while_matches_python_loop(parallel_iterations: int, queue: str, limit: int) -> None:
    host, ctx, _ = new_host(queue)
    try:
        body = PyFunction(
            lambda i, acc: (i + 1, wrap_i32(acc + i), i + 1 < limit),
            ("i32", "i32"),
            ("i32", "i32", "i1"),
        )
        frame = invoke(
            "tfrt.while", [0 < limit, 0, 0], attrs=[parallel_iterations], funcs=[body],
            num_results=2, exec_ctx=ctx,
        )
        assert await_all(host, frame) == list(py_while(0, 0, limit))
        assert len(body.calls) == limit
    finally:
        host.shutdown()


def test_while_waits_for_async_condition_then_continues_in_a_task() -> None:
    host, ctx, _ = new_host()
    pending: list[AsyncValue] = []

    def body(exec_ctx, args):
        (i,) = args
        cond: AsyncValue = make_unconstructed()
        pending.append(cond)
        return (make_available(i.get() + 1), cond)

    fn = PyFunction(body, ("i32",), ("i32", "i1"), raw=True)
    frame = invoke("tfrt.while", [True, 0], attrs=[1], funcs=[fn], exec_ctx=ctx)
    assert len(pending) == 1 and frame.results[0].is_unavailable()
    pending[0].emplace(True)  # continuation is enqueued, not run inline
    assert len(pending) == 1
    host.quiesce()
    assert len(pending) == 2
    pending[1].emplace(False)
    host.quiesce()
    assert frame.results[0].get() == 2


def test_while_condition_error_becomes_every_result() -> None:
    host, ctx, _ = new_host()
    fn = PyFunction(lambda i: (i + 1, make_error("cond failed")), ("i32",), ("i32", "i1"))
    frame = invoke("tfrt.while", [True, 0], attrs=[1], funcs=[fn], exec_ctx=ctx)
    assert await_all(host, frame) == ["cond failed"]


# -- once ----------------------------------------------------------------------------------------


def test_once_executes_once_per_resource_context() -> None:
    host, ctx, _ = new_host()
    fn = PyFunction(lambda x: x * 10, ("i32",), ("i32",), name="f")
    first = invoke("tfrt.once", [1], funcs=[fn], exec_ctx=ctx)
    second = invoke("tfrt.once", [2], funcs=[fn], exec_ctx=ctx)
    assert await_all(host, first) == await_all(host, second) == [10]
    assert fn.calls == [(1,)]
    assert ctx.resource_context.get_resource("tfrt.once @f") is not None
    other_ctx = host.new_execution_context(type(ctx.resource_context)())
    assert await_all(host, invoke("tfrt.once", [3], funcs=[fn], exec_ctx=other_ctx)) == [30]


def test_once_without_resource_context_is_a_silent_error() -> None:
    host, ctx, diags = new_host(resource_context=False)
    fn = PyFunction(lambda: (1, 2), (), ("i32", "i32"))
    frame = invoke("tfrt.once", [], funcs=[fn], num_results=2, exec_ctx=ctx)
    assert [r.error.message for r in frame.results] == [ONCE_NO_RESOURCE_CONTEXT] * 2
    assert diags.messages == [] and fn.calls == []


# -- repeat --------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 2, 31, 32, 33, 100])
def test_repeat_matches_python_loop(count: int) -> None:
    host, ctx, _ = new_host()
    body = PyFunction(lambda a, b: (b, wrap_i32(a + b)), ("i32", "i32"), ("i32", "i32"))
    frame = invoke("tfrt.repeat.i32", [count, 0, 1], funcs=[body], num_results=2, exec_ctx=ctx)
    a, b = 0, 1
    for _ in range(count):
        a, b = b, wrap_i32(a + b)
    assert await_all(host, frame) == [a, b]
    assert len(body.calls) == count


def test_repeat_without_loop_values_runs_count_times() -> None:
    host, ctx, _ = new_host()
    body = PyFunction(lambda: None)
    invoke("tfrt.repeat.i32", [70], funcs=[body], num_results=0, exec_ctx=ctx)
    assert len(body.calls) == 70


def test_repeat_continues_blocks_after_async_values() -> None:
    host, ctx, _ = new_host()

    def body(exec_ctx, args):
        (x,) = args
        return (exec_ctx.host.enqueue_work(lambda: x.get() + 1),)

    fn = PyFunction(body, ("i32",), ("i32",), raw=True)
    frame = invoke("tfrt.repeat.i32", [100, 0], funcs=[fn], exec_ctx=ctx)
    assert frame.results[0].is_unavailable()  # the first block waits for a task
    assert await_all(host, frame) == [100]


def test_repeat_refcounts_destroy_each_intermediate_once() -> None:
    host, ctx, _ = new_host()
    Counted.destroyed = []
    seed = make_available(Counted(0))
    body = PyFunction(lambda c: Counted(c.v + 1), ("vt",), ("vt",))
    frame = invoke("tfrt.repeat.i32", [40, seed], funcs=[body], exec_ctx=ctx)
    (result,) = frame.results
    assert result.get().v == 40
    assert Counted.destroyed == list(range(1, 40))  # 1..39 dropped in order, 40 is the result
    assert seed.ref_count == 1
    result.drop_ref()
    assert Counted.destroyed[-1] == 40


def test_repeat_stops_on_cancellation() -> None:
    host, ctx, diags = new_host()

    def body(n):
        if n == 3:
            ctx.request_context.cancel()
        return n + 1

    fn = PyFunction(body, ("i32",), ("i32",))
    frame = invoke("tfrt.repeat.i32", [10, 0], funcs=[fn], exec_ctx=ctx)
    assert await_all(host, frame) == ["Cancelled"]
    assert len(fn.calls) == 4 and diags.messages == []


def test_repeat_error_count_and_zero_count() -> None:
    _, ctx, _ = new_host()
    fn = PyFunction(lambda x: x, ("i32",), ("i32",))
    frame = invoke("tfrt.repeat.i32", [make_error("no count"), 5], funcs=[fn], exec_ctx=ctx)
    assert frame.results[0].error.message == "no count"
    arg = make_available(5)
    frame = invoke("tfrt.repeat.i32", [0, arg], funcs=[fn], exec_ctx=ctx)
    assert frame.results[0].get() == 5 and fn.calls == []


# -- parallel_for / parallel_call -------------------------------------------------------------


@pytest.mark.parametrize("queue", ["s", "mstd:2"])
@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("name", ["tfrt.parallel_for.i32", "tfrt.parallel_call.i32"])
@pytest.mark.parametrize("start,end,block", [(0, 10, 1), (0, 10, 3), (5, 6, 4), (-7, 100, 8)])
def test_parallel_for_covers_range(queue, kind, name, start, end, block) -> None:
    host, ctx, _ = new_host(queue)
    try:
        starts, ends = AtomicI32(), AtomicI32()
        covered: list[int] = []

        def body(s, e, c0, c1):
            c0.add(s)
            c1.add(e)
            covered.extend(range(s, e))
            return ctx.host.enqueue_work(lambda: "chain") if kind == "async" else None

        types = ("!tfrt.chain",) if kind == "async" else ()
        fn = PyFunction(body, ("i32", "i32", "a", "a"), types)
        frame = invoke(name, [start, end, block, starts, ends], funcs=[fn], exec_ctx=ctx)
        host.await_values(frame.results)
        blocks = [(s, min(s + block, end)) for s in range(start, end, block)]
        assert sorted(covered) == list(range(start, end))
        assert starts.get() == sum(s for s, _ in blocks)
        assert ends.get() == sum(e for _, e in blocks)
        assert frame.results[0].is_concrete()
    finally:
        host.shutdown()


def test_parallel_for_empty_range_and_invalid_body() -> None:
    _, ctx, diags = new_host()
    fn = PyFunction(lambda s, e: None, ("i32", "i32"), ())
    assert invoke("tfrt.parallel_for.i32", [4, 4, 2], funcs=[fn], exec_ctx=ctx).results[0].get()
    assert fn.calls == []
    bad = PyFunction(lambda s, e: 1, ("i32", "i32"), ("i32",))
    frame = invoke("tfrt.parallel_for.i32", [0, 4, 2], funcs=[bad], exec_ctx=ctx)
    assert frame.results[0].error.message == INVALID_BODY and diags.messages == []


def test_parallel_for_keeps_arguments_alive_until_done() -> None:
    host, ctx, _ = new_host()
    counter = make_available(AtomicI32())
    fn = PyFunction(lambda s, e, c: c.add(e - s), ("i32", "i32", "a"), ())
    frame = invoke("tfrt.parallel_for.i32", [0, 8, 1, counter], funcs=[fn], exec_ctx=ctx)
    assert counter.ref_count == 2  # the enqueued halves hold a reference
    host.await_values(frame.results)
    assert counter.ref_count == 1 and counter.get().get() == 8
