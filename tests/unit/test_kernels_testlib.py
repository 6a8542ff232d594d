"""The ``tfrt_test``, ``vt`` and ``tfrt_tutorial`` kernels called directly and through
``KernelEntry.invoke``; async kernels on both work queues; benchmark statistics against a
sorted-list oracle."""

from __future__ import annotations

import re

import pytest
from test_kernels_support import REGISTRY, PyFunction, invoke, new_host, values_of

from pytfrt.host import AsyncValue, FunctionKind, make_available, make_ready_chain
from pytfrt.kernels.common import wrap_i32
from pytfrt.kernels.test_kernels import async_kernels, benchmark, simple, value_tracking
from pytfrt.support.location import FusedLoc, NameLoc, UnknownLoc

pytestmark = pytest.mark.timeout(60)


def test_fail_and_partial_fail_emit_at_kernel_location() -> None:
    _, ctx, diags = new_host()
    frame = invoke("tfrt_test.fail", exec_ctx=ctx)
    assert frame.results[0].error.message == "something bad happened"
    frame = invoke("tfrt_test.partial_fail", num_results=2, exec_ctx=ctx)
    assert frame.results[0].get() == 1 and frame.results[1].is_error()
    assert diags.messages == ["something bad happened"] * 2


@pytest.mark.parametrize("queue", ["s", "mstd:2"])
@pytest.mark.parametrize(
    "name", ["tfrt_test.report_error_concrete_async", "tfrt_test.report_error_indirect_async"]
)
def test_async_error_reports(queue: str, name: str) -> None:
    host, ctx, diags = new_host(queue)
    try:
        ok = invoke(name, [0], exec_ctx=ctx)
        bad = invoke(name, [1], exec_ctx=ctx)
        host.await_values(ok.results + bad.results)
        assert ok.results[0].get() == 0
        assert bad.results[0].error.message == "something bad happened asynchronously"
        assert diags.messages == ["something bad happened asynchronously"]
    finally:
        host.shutdown()


def test_report_error_async_runs_in_a_task() -> None:
    host, ctx, diags = new_host()
    frame = invoke("tfrt_test.report_error_async", exec_ctx=ctx)
    assert frame.results[0].is_unavailable() and diags.messages == []
    host.quiesce()
    assert frame.results[0].is_error() and len(diags.messages) == 1


def test_sync_failures_raise_without_emitting() -> None:
    _, ctx, diags = new_host()
    for name in ("tfrt_test.fail_s", "tfrt_test.error_s"):
        with pytest.raises(Exception, match="something bad happened"):
            REGISTRY.get(name).call_sync([], [], [], ctx)
    assert diags.messages == []


def test_cancel_cancels_the_request_and_passes_the_chain() -> None:
    _, ctx, _ = new_host()
    chain = make_ready_chain()
    frame = invoke("tfrt_test.cancel", [chain], num_results=2, exec_ctx=ctx)
    assert ctx.is_cancelled() and frame.results[0].get() == 0
    assert frame.results[1] is chain and chain.ref_count == 2


def test_flat_unpacks_nested_aggregate() -> None:
    s, a, b, f = simple.flat((("string", (1, 0)), (1.0,)))
    assert (s, a, b, float(f)) == ("string", 1, 0, 1.0)


def test_async_value_probe_strings() -> None:
    assert async_kernels.async_value_get() == "base1:base2:final_class:3"
    assert (
        async_kernels.async_value_ref()
        == "available:2;unavailable;(3);available:3;unavailable;available:4"
    )


def test_aliasing_kernels_add_one_reference_per_result() -> None:
    x = make_available(5)
    a, b = simple.share_to_two(x)
    assert a is x and b is x and x.ref_count == 3
    y = make_available(6)
    frame = invoke("tfrt_test.multi_arg_result", [x, y], num_results=2)
    assert frame.results == [x, y] and x.ref_count == 4 and y.ref_count == 2
    frame = invoke("tfrt_test.identity", [make_ready_chain(), y])
    assert frame.results[0] is y and y.ref_count == 3


def test_make_indirect_and_uniqueness() -> None:
    x = make_available(1)
    indirect = simple.make_indirect_kernel(x)
    assert indirect.is_indirect() and indirect.get() == 1
    assert simple.get_uniqueness(indirect) is False
    assert simple.get_uniqueness(make_available(2)) is True
    assert simple.get_uniqueness(make_available(2).add_ref(), make_available(3)) == (False, True)


@pytest.mark.parametrize("x", [0, 41, 2**31 - 2])
def test_count3_wraps(x: int) -> None:
    assert simple.count3_i32(x) == tuple(wrap_i32(x + i) for i in (1, 2, 3))


def test_prints(capsys) -> None:
    simple.print_string("abc")
    simple.print_hello()
    simple.print_bool(make_ready_chain().get(), True)
    simple.print_bool(make_ready_chain().get(), False)
    simple.test_cost([1, 7], 0)
    assert capsys.readouterr().out == "string = abc\nhello host executor!\ntrue\nfalse\nid: 7\n"


def test_resource_is_destroyed_once(capsys) -> None:
    resource, chain = simple.allocate_resource(make_ready_chain())
    av = make_available(resource)
    simple.deallocate_resource(resource, chain)
    av.drop_ref()  # already destroyed: prints nothing more
    assert capsys.readouterr().out.splitlines() == [
        "Allocated TestResource",
        "Destroyed TestResource",
        "tfrt_test.deallocate_resource done",
    ]
    resource2, _ = simple.allocate_resource(make_ready_chain())
    make_available(resource2).drop_ref()  # never deallocated: destroyed with its value
    assert capsys.readouterr().out.splitlines()[-1] == "Destroyed TestResource"


def test_shared_context_is_one_per_host() -> None:
    host, ctx, _ = new_host()
    (n1, _), (n2, _) = (
        simple.use_sample_shared_context(ctx, make_ready_chain()) for _ in range(2)
    )
    assert n1 == n2 and re.fullmatch(r"sample_shared_context\d+", n1)
    other = new_host()[1]
    assert simple.use_sample_shared_context(other, make_ready_chain())[0] != n1


@pytest.mark.parametrize(
    "location,line,revision",
    [
        (NameLoc("foo"), "foo", "main"),
        (FusedLoc((NameLoc("a"), UnknownLoc(), NameLoc("b"))), "ab", "main"),  # names joined
        (FusedLoc((UnknownLoc(),)), "", "main"),
        (FusedLoc((NameLoc("a"), UnknownLoc(), NameLoc("b"))), "a", "de22adc4"),  # the first
        (FusedLoc((UnknownLoc(),)), "Kernel has no debug info", "de22adc4"),
        (UnknownLoc(), "Kernel has no debug info", "main"),
    ],
)
def test_print_debug_info(capsys, monkeypatch, location, line: str, revision: str) -> None:
    from pytfrt.host import KernelFrame

    monkeypatch.setenv("PYTFRT_TFRT_REVISION", revision)

    ctx = new_host()[1]
    frame = KernelFrame([make_ready_chain()], [], [], 1, ctx, location)
    REGISTRY.get("tfrt_test.print_debug_info").invoke(frame)
    assert capsys.readouterr().out == line + "\n"


def test_unique_loc_detects_shared_location() -> None:
    from pytfrt.host import KernelFrame

    _, ctx, diags = new_host()
    loc_a, loc_b = NameLoc("x"), NameLoc("x")
    for loc, name in ((loc_a, "a"), (loc_b, "b"), (loc_a, "a")):
        REGISTRY.get("tfrt_test.unique_loc").invoke(KernelFrame([], [name], [], 1, ctx, loc))
    assert diags.messages == []
    REGISTRY.get("tfrt_test.unique_loc").invoke(KernelFrame([], ["c"], [], 1, ctx, loc_a))
    assert len(diags.messages) == 1 and diags.messages[0].startswith("duplicate locations")


def test_logging_format(capsys) -> None:
    simple.logging("hi")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 6
    pattern = r"[IWE] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} \d+ simple\.py:\d+\] from TFRT_LOG"
    assert all(re.match(pattern, line) for line in lines)
    assert [line.split("] ", 1)[1] for line in lines] == [
        "from TFRT_LOG(INFO): hi",
        "from TFRT_LOG(WARNING): hi",
        "from TFRT_LOG(ERROR): hi",
        "from TFRT_LOG_IF(INFO, true): hi",
        "from TFRT_LOG_IF(WARNING, true): hi",
        "from TFRT_LOG_IF(ERROR, true): hi",
    ]


def test_thread_ids_are_per_host_and_sequential() -> None:
    host, ctx, _ = new_host("mstd:1")
    try:
        assert simple.get_thread_id(ctx) == 0
        assert simple.get_thread_id(ctx) == 0
        worker = host.enqueue_work(lambda: simple.get_thread_id(ctx))
        host.await_values([worker])
        assert worker.get() == 1
    finally:
        host.shutdown()


def test_memory_leak_goes_through_the_allocator() -> None:
    from pytfrt.host.allocator import LeakCheckAllocator

    host, ctx, _ = new_host()
    host.allocator = LeakCheckAllocator()
    simple.memory_leak_one_int32(ctx)
    assert host.allocator.stats.current_bytes == 4
    assert host.allocator.stats.current_allocations == 1


@pytest.mark.parametrize("queue", ["s", "mstd:2"])
def test_async_kernels_on_both_queues(queue: str) -> None:
    host, ctx, _ = new_host(queue)
    try:
        results = [
            invoke("tfrt_test.async_add.i32", [2**31 - 1, 1], exec_ctx=ctx).results[0],
            invoke("tfrt_test.async_constant.i32", attrs=[7], exec_ctx=ctx).results[0],
            invoke("tfrt_test.async_copy.i32", [3], exec_ctx=ctx).results[0],
            invoke("tfrt_test.async_copy_2.i32", [4], exec_ctx=ctx).results[0],
            invoke("tfrt_test.async_copy.with_delay.i64", [5], exec_ctx=ctx).results[0],
        ]
        if queue == "s":
            assert all(r.is_unavailable() for r in results)  # only the driver runs tasks
        host.await_values(results)
        assert [r.get() for r in results] == [-(2**31), 7, 3, 4, 5]
        chain = invoke("tfrt_test.as_chain", results, exec_ctx=ctx).results[0]
        assert chain.is_concrete()
    finally:
        host.shutdown()


@pytest.mark.parametrize("queue", ["s", "mstd:2"])
def test_do_async_runs_body_in_a_task(queue: str) -> None:
    host, ctx, _ = new_host(queue)
    try:
        arg = make_available(20)
        body = PyFunction(lambda x: (x + 1, x * 2), ("i32",), ("i32", "i32"))
        frame = invoke("tfrt_test.do.async", [arg], funcs=[body], num_results=2, exec_ctx=ctx)
        assert arg.ref_count in (1, 2)
        host.await_values(frame.results)
        assert values_of(frame) == [21, 40] and arg.ref_count == 1
    finally:
        host.shutdown()


def test_usleep_prints_from_blocking_work(capsys) -> None:
    host, ctx, _ = new_host("mstd:1")
    try:
        chain = async_kernels.blocking_usleep(ctx, 100)
        async_kernels.usleep(ctx, 200)
        host.await_values([chain])
        host.quiesce()
        assert sorted(capsys.readouterr().out.splitlines()) == [
            "Slept for 100 microseconds",
            "Slept for 200 microseconds",
        ]
    finally:
        host.shutdown()


def test_atomics_and_sum() -> None:
    counter = async_kernels.atomic_create_i32()
    async_kernels.atomic_inc_i32(counter)
    async_kernels.atomic_add_i32(counter, 41)
    assert async_kernels.atomic_get_i32(counter)[0] == 42
    assert values_of(invoke("tfrt_test.sum", [1, 2, 2**31 - 1])) == [wrap_i32(2**31 + 2)]


def test_sync_sums_and_invoke_sync_function() -> None:
    host, ctx, diags = new_host()
    assert REGISTRY.get("tfrt_test.sync_sum").call_sync([1, 2, 3], [], [], ctx) == [6]
    assert REGISTRY.get("tfrt_test.sync_sum_attributes").call_sync([], [4, 5], [], ctx) == [9]
    fn = PyFunction(
        lambda a, b: (a + b, a * b), ("i32", "i32"), ("i32", "i32"), kind=FunctionKind.SYNC
    )
    frame = invoke(
        "tfrt_test.invoke_sync_function.i32_i32.i32_i32", [6, 7], funcs=[fn], num_results=2,
        exec_ctx=ctx,
    )
    assert values_of(frame) == [13, 42]

    def failing(a, b):
        raise RuntimeError("sync failure")

    bad = PyFunction(failing, ("i32", "i32"), ("i32",), kind=FunctionKind.SYNC)
    frame = invoke("tfrt_test.invoke_sync_function.i32_i32.i32", [1, 2], funcs=[bad], exec_ctx=ctx)
    assert frame.results[0].is_error() and diags.messages == ["sync failure"]


def test_vt_prints_construction_moves_and_destruction(capsys) -> None:
    v1 = make_available(value_tracking.vt_constant(1))
    v2 = make_available(value_tracking.vt_constant(2))
    r = make_available(value_tracking.vt_add(v1.get(), v2.get()))
    v1.drop_ref()
    v2.drop_ref()
    value_tracking.vt_print(r.get())
    r.drop_ref()
    assert capsys.readouterr().out.splitlines() == [
        "constructed vt.value(1)",
        "move constructed vt.value(1)",
        "constructed vt.value(2)",
        "move constructed vt.value(2)",
        "constructed vt.value(3)",
        "move constructed vt.value(3)",
        "destroyed vt.value(1)",
        "destroyed vt.value(2)",
        "print vt_value(3)",
        "destroyed vt.value(3)",
    ]


def test_tutorial(capsys) -> None:
    frame = invoke("tfrt_tutorial.create_coordinate", [1, -2])
    invoke("tfrt_tutorial.print_coordinate", [frame.results[0], make_ready_chain()])
    assert capsys.readouterr().out == "(1, -2)\n"


def test_benchmark_report_uses_sorted_percentiles() -> None:
    stats = benchmark.BenchmarkStats("x", 0, 100, 10)
    stats.wall_times = [50, 10, 40, 30, 20, 60, 70, 90, 80, 100]
    stats.cpu_times = [5, 1, 4, 3, 2, 6, 7, 9, 8, 10]
    stats.total_wall_ns, stats.total_cpu_ns = 550, 55
    wall, cpu = sorted(stats.wall_times), sorted(stats.cpu_times)
    lines = dict(line[len("BM:x:"):].split(": ") for line in stats.report_lines())
    assert lines["Count"] == "10" and lines["Time Min(ns)"] == str(wall[0])
    for p, key in ((0.5, "50%"), (0.95, "95%"), (0.99, "99%")):
        assert lines[f"Time {key}(ns)"] == str(wall[int(10 * p)])
        assert lines[f"CPU {key}(ns)"] == str(cpu[int(10 * p)])
    assert lines["CPU utilization(percent)"] == "%e" % (55 * 100.0 / 550)


@pytest.mark.parametrize("queue", ["s", "mstd:2"])
def test_async_benchmark_runs_serially_and_reports(capsys, queue: str) -> None:
    host, ctx, _ = new_host(queue)
    try:
        body = PyFunction(lambda x: x + 1, ("i32",), ("i32",))
        frame = invoke(
            "tfrt_test.benchmark", [make_available(1)], attrs=[10, 6, "bm", 2], funcs=[body],
            exec_ctx=ctx,
        )
        host.await_values(frame.results)
        out = capsys.readouterr().out.splitlines()
        assert len(body.calls) == 8 and len(out) == 11
        assert out[1] == "BM:bm:Count: 6" and all(line.startswith("BM:bm:") for line in out)
    finally:
        host.shutdown()


def test_benchmark_requires_one_result() -> None:
    _, ctx, diags = new_host()
    body = PyFunction(lambda: (1, 2), (), ("i32", "i32"))
    invoke("tfrt_test.benchmark", [], attrs=[1, 1, "bm"], funcs=[body], exec_ctx=ctx)
    assert diags.messages == [benchmark.ONE_RESULT_REQUIRED]


def test_sync_benchmark_checks_the_function(capsys) -> None:
    ctx = new_host()[1]
    entry = REGISTRY.get("tfrt_test.sync_benchmark")
    fn = PyFunction(lambda a: None, ("i32",), (), name="f", kind=FunctionKind.SYNC)
    assert entry.call_sync([1], [10, 4, 1], [fn], ctx) == []
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "BM:f:Count: 4" and len(fn.calls) == 5
    with pytest.raises(Exception, match="sync function"):
        entry.call_sync([1], [10, 4], [PyFunction(lambda a: None, ("i32",))], ctx)
    with pytest.raises(Exception, match="Incorrect number of arguments"):
        entry.call_sync([], [10, 4], [fn], ctx)


def test_every_listed_kernel_is_registered() -> None:
    names = set(REGISTRY.names())
    for name in (
        "tfrt_test.usleep", "tfrt_test.quiesce", "tfrt_test.get_string", "vt.print",
        "tfrt_test.invoke_sync_function.i32_i32.i32", "tfrt.parallel_call.i32",
    ):
        assert name in names
    for name in names:
        assert REGISTRY.get(name).fn.__doc__, f"{name} has no docstring"


def test_async_value_results_are_async_values() -> None:
    host, ctx, _ = new_host()
    av = async_kernels.async_add_i32(ctx, 1, 2)
    assert isinstance(av, AsyncValue) and av.is_unavailable()
    host.await_values([av])
    assert av.get() == 3
