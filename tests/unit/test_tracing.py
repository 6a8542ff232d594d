"""The tracing layer: recorded slices, threads and flows of known programs, and the JSON schema.

Oracles: the program text itself (which kernels exist, which kernel's result each kernel
reads -- computed here from the compiled ``Program``, not from the tracer), the thread names
of the work queue, and the Trace Event Format's documented fields (checked by
:func:`check_trace_events`, written from the format description, independent of the writer).
"""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import pytfrt.tracing as tracing
from pytfrt.bef.program import Program
from pytfrt.executor import load_program
from pytfrt.host import ExecutionContext, HostContext
from pytfrt.kernel_libraries import builtin_registry
from pytfrt.tools import bef_executor
from pytfrt.tools.bef_executor import read_program

pytestmark = pytest.mark.timeout(60)

DIAMOND = """
func.func @diamond() -> i32 {
  %a = tfrt.constant.i32 1
  %b = tfrt.add.i32 %a, %a
  %c = tfrt.add.i32 %a, %b
  %d = tfrt.add.i32 %b, %c
  tfrt.return %d : i32
}
"""

# Two expensive independent kernels: stream analysis puts them in different streams, so under
# mstd:2 one of them runs on a worker thread.
PARALLEL = """
module attributes {tfrt.cost_threshold = 10 : i64} {
func.func @parallel() -> i32 {
  %x = tfrt.constant.i32 7
  %a = tfrt_test.test_cost %x {id = 1 : i64, _tfrt_cost = 100 : i64} : i32
  %b = tfrt_test.test_cost %x {id = 2 : i64, _tfrt_cost = 100 : i64} : i32
  %s = tfrt.add.i32 %a, %b
  tfrt.return %s : i32
}
}
"""

ERRORS = """
func.func @failing() -> i32 {
  %x = "tfrt_test.fail"() : () -> i32
  %y = tfrt.add.i32 %x, %x
  tfrt.return %y : i32
}
func.func @cancelled() -> i32 {
  %ch0 = tfrt.new.chain
  %zero, %ch1 = "tfrt_test.cancel"(%ch0) : (!tfrt.chain) -> (i32, !tfrt.chain)
  %one = tfrt.constant.i32 1
  %x = tfrt.add.i32 %zero, %one
  tfrt.return %x : i32
}
"""


def compile_text(tmp_path: Path, text: str, name: str = "prog.mlir") -> tuple[Program, str]:
    path = tmp_path / name
    path.write_text(text)
    return read_program(str(path)), str(path)


def run_traced(program: Program, function: str, queue: str = "s", **tracer_args: Any
               ) -> tuple[tracing.Trace, list[Any]]:
    """Run ``function`` once with a tracer on a fresh host; returns the trace and the results."""
    host = HostContext(queue, builtin_registry(), diagnostic_handler=lambda d: None)
    try:
        tracer = tracing.Tracer("debug", **tracer_args)
        host.tracer = tracer
        bef = load_program(program, host)
        fn = bef.get_function(function)
        assert fn is not None
        ctx = ExecutionContext(host.new_request())
        results = fn.execute(ctx, [])
        host.await_values(results)
        host.quiesce()
        values = [r.get() if not r.is_error() else r.error for r in results]
    finally:
        host.shutdown()
    return tracer.snapshot(), values


def dataflow_edges(program: Program, function: str) -> set[tuple[int, int]]:
    """(producer kernel id, consumer kernel id), ids = body index + 1, from the program."""
    fn = program.functions[program.function_index(function)]
    producer = {r: k + 1 for k, kern in enumerate(fn.kernels) for r in kern.results}
    return {
        (producer[r], k + 1)
        for k, kern in enumerate(fn.kernels)
        for r in kern.operands
        if r in producer
    }


# -- an independent checker of the Trace Event Format -------------------------------------------

REQUIRED: dict[str, dict[str, type | tuple[type, ...]]] = {
    "X": {"name": str, "cat": str, "pid": int, "tid": int, "ts": (int, float),
          "dur": (int, float), "args": dict},
    "M": {"name": str, "pid": int, "tid": int, "args": dict},
    "s": {"name": str, "cat": str, "id": int, "pid": int, "tid": int, "ts": (int, float)},
    "f": {"name": str, "cat": str, "id": int, "pid": int, "tid": int, "ts": (int, float),
          "bp": str},
    "i": {"name": str, "pid": int, "tid": int, "ts": (int, float), "s": str},
}


def check_trace_events(obj: Any) -> None:
    """Assert ``obj`` is a well-formed trace-event JSON object whose flows bind to slices."""
    assert isinstance(obj, dict) and isinstance(obj.get("traceEvents"), list)
    events = obj["traceEvents"]
    slices: dict[int, list[tuple[float, float]]] = {}
    named_threads = set()
    flows: dict[int, dict[str, dict[str, Any]]] = {}
    for e in events:
        ph = e.get("ph")
        assert ph in REQUIRED, f"unexpected phase {ph!r} in {e}"
        for key, typ in REQUIRED[ph].items():
            assert isinstance(e.get(key), typ), f"{key} missing or mistyped in {e}"
        if ph == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0
            slices.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
        elif ph == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index")
            if e["name"] == "thread_name":
                assert isinstance(e["args"].get("name"), str)
                named_threads.add(e["tid"])
        elif ph in "sf":
            assert ph not in flows.setdefault(e["id"], {}), f"duplicate flow {ph} {e['id']}"
            flows[e["id"]][ph] = e
        elif ph == "i":
            assert e["s"] in ("t", "p", "g")
    assert set(slices) <= named_threads, "every track with slices has a thread_name"
    for flow_id, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {flow_id} is not a start/finish pair"
        assert pair["f"]["bp"] == "e"
        assert pair["s"]["ts"] <= pair["f"]["ts"], f"flow {flow_id} goes back in time"
        for e in pair.values():
            assert any(a <= e["ts"] <= b for a, b in slices[e["tid"]]), (
                f"flow event {e} is not inside a slice of its thread"
            )


# -- tests --------------------------------------------------------------------------------------


def test_diamond_slices_and_flows(tmp_path: Path) -> None:
    program, path = compile_text(tmp_path, DIAMOND)
    trace, values = run_traced(program, "diamond")
    a = 1
    b = a + a
    c = a + b
    assert values == [b + c]
    kernels = trace.kernel_slices()
    fn = program.functions[program.function_index("diamond")]
    assert sorted(s.name for s in kernels) == sorted(k.name for k in fn.kernels)
    by_id = {s.args["kernel_id"]: s for s in kernels}
    assert set(by_id) == set(range(1, len(fn.kernels) + 1))
    for kid, s in by_id.items():
        kern = fn.kernels[kid - 1]
        assert s.args["function"] == "diamond"
        assert s.args["location"] == str(kern.location)
        assert path in s.args["location"]
        assert len(s.args["arguments"]) == len(kern.operands)
        assert s.queue_delay >= 0 and s.duration >= 0
    index = {id(s): i for i, s in enumerate(trace.slices)}
    edges = {
        (trace.slices[p].args["kernel_id"], trace.slices[c].args["kernel_id"])
        for p, c in trace.flows
    }
    assert edges == dataflow_edges(program, "diamond")
    for p, c in trace.flows:  # a consumer starts after its producer ended (one thread here)
        assert trace.slices[p].end <= trace.slices[c].start
    assert all(id(s) in index for s in kernels)
    assert [name for _, name in trace.threads] == [threading.current_thread().name]


def test_json_schema_and_content(tmp_path: Path) -> None:
    program, _ = compile_text(tmp_path, DIAMOND)
    trace, _ = run_traced(program, "diamond")
    out = tmp_path / "trace.json"
    tracing.write_chrome_trace(trace, str(out))
    obj = json.loads(out.read_text())
    check_trace_events(obj)
    events = obj["traceEvents"]
    xs = [e for e in events if e["ph"] == "X" and e["cat"] == "kernel"]
    assert sorted(e["name"] for e in xs) == sorted(s.name for s in trace.kernel_slices())
    assert sum(e["ph"] == "s" for e in events) == len(dataflow_edges(program, "diamond"))
    assert {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    for e in xs:
        assert {"function", "location", "arguments", "queue_delay_us"} <= set(e["args"])


def test_worker_threads_get_their_own_tracks(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    program, _ = compile_text(tmp_path, PARALLEL)
    trace, values = run_traced(program, "parallel", queue="mstd:2")
    assert values == [0 + 0]  # test_cost returns 0
    names = dict(trace.threads)
    kernel_tracks = {names[s.tid] for s in trace.kernel_slices()}
    assert any(n.startswith("pytfrt-worker") for n in kernel_tracks), kernel_tracks
    assert len({s.tid for s in trace.kernel_slices()}) >= 2
    edges = {
        (trace.slices[p].args["kernel_id"], trace.slices[c].args["kernel_id"])
        for p, c in trace.flows
    }
    assert edges == dataflow_edges(program, "parallel")
    check_trace_events(tracing.chrome_trace(trace))
    capsys.readouterr()


def test_error_and_cancellation_markers(tmp_path: Path) -> None:
    program, _ = compile_text(tmp_path, ERRORS)
    trace, values = run_traced(program, "failing")
    assert values[0].message == "something bad happened"
    categories = sorted((m.category, m.args.get("kernel")) for m in trace.instants)
    assert categories == [("error", "tfrt_test.fail"), ("skipped", "tfrt.add.i32")]
    failing = [s for s in trace.kernel_slices() if s.name == "tfrt_test.fail"]
    assert failing[0].error == "something bad happened"
    trace, values = run_traced(program, "cancelled")
    assert values[0].message == "Cancelled"
    assert ("cancelled", "tfrt.add.i32") in {(m.category, m.args.get("kernel"))
                                             for m in trace.instants}
    check_trace_events(tracing.chrome_trace(trace))


def test_text_sink_levels_and_nesting() -> None:
    stream = io.StringIO()
    tracer = tracing.Tracer("verbose", sinks=[tracing.TextSink(stream)])
    with tracer.scope("outer"):
        tracer.event("mark")
        with tracer.scope("inner", tracing.TracingLevel.VERBOSE):
            with tracer.scope("hidden", tracing.TracingLevel.DEBUG):
                tracer.event("hidden event", tracing.TracingLevel.DEBUG)
    tracer.flush()
    assert stream.getvalue().splitlines() == [
        "Scope:outer", "Event:mark", "Scope:inner", "End Scope", "End Scope",
    ]
    trace = tracer.snapshot()
    depth = {s.name: s.depth for s in trace.slices}
    assert depth == {"outer": 0, "inner": 1}
    outer = next(s for s in trace.slices if s.name == "outer")
    inner = next(s for s in trace.slices if s.name == "inner")
    assert outer.child_time == inner.duration


def test_scopes_from_several_threads_are_merged_in_time_order() -> None:
    tracer = tracing.Tracer("default")
    first_done = threading.Event()

    def worker() -> None:
        with tracer.scope("worker"):
            pass
        first_done.set()

    t = threading.Thread(target=worker, name="helper")
    t.start()
    first_done.wait(10)
    t.join(10)
    with tracer.scope("main"):
        pass
    trace = tracer.snapshot()
    assert trace.text_lines == ["Scope:worker", "End Scope", "Scope:main", "End Scope"]
    assert sorted(name for _, name in trace.threads) == sorted(
        ["helper", threading.current_thread().name]
    )


def test_tasks_are_traced_with_queueing_delay() -> None:
    host = HostContext("s")
    tracer = tracing.Tracer("debug")
    try:
        with tracing.trace(hosts=[host]) as tracer:
            values = [host.enqueue_work(lambda i=i: i * i) for i in range(5)]
            host.await_values(values)
        assert [v.get() for v in values] == [0, 1, 4, 9, 16]
        assert host.tracer is None  # restored
    finally:
        host.shutdown()
    tasks = [s for s in tracer.snapshot().slices if s.category == "task"]
    assert len(tasks) == 5
    assert all(s.name.startswith("Task: ") for s in tasks)
    assert all(s.queue_delay >= 0 for s in tasks)


def test_trace_context_manager_writes_json(tmp_path: Path) -> None:
    program, _ = compile_text(tmp_path, DIAMOND)
    host = HostContext("s", builtin_registry())
    out = tmp_path / "ctx.json"
    try:
        bef = load_program(program, host)
        fn = bef.get_function("diamond")
        assert fn is not None
        with tracing.trace(str(out), hosts=[host]):
            results = fn.execute(ExecutionContext(host.new_request()), [])
            host.await_values(results)
        assert results[0].get() == 5
    finally:
        host.shutdown()
    obj = json.loads(out.read_text())
    check_trace_events(obj)
    slices = sorted(e["name"] for e in obj["traceEvents"] if e["ph"] == "X")
    # The four kernels, inside the executor's one ready-kernel loop scope.
    assert slices == sorted(["BEFExecutor::ProcessReadyKernels", "tfrt.constant.i32",
                             "tfrt.add.i32", "tfrt.add.i32", "tfrt.add.i32"])


def test_bef_executor_trace_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, path = compile_text(tmp_path, DIAMOND)
    out = tmp_path / "run.json"
    assert bef_executor.main([path, f"--trace_file={out}"]) == 0
    stdout = capsys.readouterr().out
    assert "'diamond' returned 5" in stdout
    assert "Scope:" not in stdout  # no text sink without --enable_tracing
    obj = json.loads(out.read_text())
    check_trace_events(obj)
    names = [e["name"] for e in obj["traceEvents"] if e["ph"] == "X"]
    assert "Bef Executor" in names and "Function: diamond" in names
    assert names.count("tfrt.add.i32") == 3


def test_bad_level_and_unwritable_trace_file(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="unknown tracing level 'loud'"):
        tracing.Tracer("loud")
    _, path = compile_text(tmp_path, DIAMOND)
    bad = tmp_path / "missing-dir" / "x.json"
    assert bef_executor.main([path, f"--trace_file={bad}"]) == 1
    assert "could not open trace file" in capsys.readouterr().err


def test_tracing_off_means_no_tracer(tmp_path: Path) -> None:
    """Without a tracer nothing is recorded; a tracer that does not trace kernels binds None."""
    tracer = tracing.Tracer("default")
    assert tracer.trace_kernels is False
    assert tracer.bind_invocation(object()) is None  # type: ignore[arg-type]
    program, _ = compile_text(tmp_path, DIAMOND)
    trace, values = run_traced(program, "diamond", trace_kernels=False)
    assert values == [5] and trace.kernel_slices() == []


def test_describe_value() -> None:
    np = pytest.importorskip("numpy")
    assert tracing.InvocationTracer is not None
    from pytfrt.host.tracing import describe_value, task_name

    assert describe_value(np.zeros((2, 3), np.float32)) == "float32 [2, 3]"
    assert describe_value(3) == "int"
    assert task_name(lambda: 0) == "test_describe_value.<lambda>"
