"""Whole-function execution (pytfrt.executor.whole_function) against the dataflow executor.

The oracle is the dataflow executor itself: the same program loaded with
``whole_function=False`` (or ``PYTFRT_WHOLE_FUNCTION=0``) must print the same lines in the same
order, emit the same diagnostics and return the same values or errors.  Programs: the XOR
training example, TFRT's own test programs under tests/lit, and random programs (Hypothesis).
"""

from __future__ import annotations

import contextlib
import io
import re
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytfrt.executor import load_program
from pytfrt.executor.whole_function import WholeBEFFunction, schedule
from pytfrt.host import CHAIN, Attr, Chain, DiagnosticCollector, HostContext, ResourceContext
from pytfrt.host.allocator import HostAllocator
from pytfrt.kernel_libraries import builtin_registry
from pytfrt.mlir import compile_mlir
from pytfrt.tools import bef_executor

REPO = Path(__file__).resolve().parents[3]
XOR = REPO / "examples" / "mlp_xor" / "xor_training.mlir"
LIT = REPO / "tests" / "lit"

pytestmark = pytest.mark.timeout(120)


def _run(text: str, name: str, whole: bool, queue: str = "s",
         cancel: bool = False, deadline: float | None = None) -> tuple[str, list[str], list[str]]:
    """Run ``name`` of MLIR ``text``; (stdout, diagnostics, result reprs)."""
    diagnostics = DiagnosticCollector()
    host = HostContext(queue, builtin_registry(), diagnostic_handler=diagnostics)
    bef = load_program(compile_mlir(text, "test.mlir"), host, whole_function=whole)
    fn = bef.get_function(name)
    assert fn is not None
    ctx = host.new_execution_context(ResourceContext())
    if cancel:
        ctx.request_context.cancel()
    if deadline is not None:
        ctx.request_context.set_deadline(deadline)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        results = fn.execute(ctx, [])
        host.await_values(results)
        host.quiesce()
    shown = [repr(r.get()) if r.is_concrete() else f"error: {r.error.message}"
             for r in results]
    host.shutdown()
    return out.getvalue(), [str(d) for d in diagnostics.diagnostics], shown


def _qualifies(text: str, name: str) -> bool:
    host = HostContext("s", builtin_registry())
    fn = load_program(compile_mlir(text, "test.mlir"), host).get_function(name)
    return isinstance(fn, WholeBEFFunction) and fn.whole_function is not None


# -- the XOR training program -----------------------------------------------------------------


def test_xor_training_qualifies_and_matches_the_dataflow_executor() -> None:
    text = XOR.read_text().replace("tfrt.constant.i32 2000", "tfrt.constant.i32 200")
    assert _qualifies(text, "xor_training")
    fast = _run(text, "xor_training", True)
    slow = _run(text, "xor_training", False)
    assert fast == slow
    assert "step 200: loss = 0.193501" in fast[0] and "correct: 3/4" in fast[0]


def test_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    text = XOR.read_text()
    monkeypatch.setenv("PYTFRT_WHOLE_FUNCTION", "0")
    host = HostContext("s", builtin_registry())
    fn = load_program(compile_mlir(text, "x.mlir"), host).get_function("xor_training")
    assert not isinstance(fn, WholeBEFFunction)
    monkeypatch.setenv("PYTFRT_WHOLE_FUNCTION", "1")
    fn = load_program(compile_mlir(text, "x.mlir"), host).get_function("xor_training")
    assert isinstance(fn, WholeBEFFunction) and fn.whole_function is not None


# -- TFRT's test programs -----------------------------------------------------------------------

LIT_PROGRAMS = [
    "tfrt/basic_kernels/control_flow.mlir",
    "tfrt/basic_kernels/kernels.mlir",
    "tfrt/basic_kernels/kernel_errors.mlir",
    "tfrt/basic_kernels/float_kernels.mlir",
    "tfrt/bef_executor/basics.mlir",
    "tfrt/bef_executor/allocator.mlir",
    "tfrt/bef_executor/lifetimes.mlir",
    "tfrt/bef_executor/memory_leak.mlir",
    "tfrt/bef_executor/scheduling.mlir",
    "tfrt/bef_executor/uniqueness.mlir",
    "tfrt/bef_executor/error_code.mlir",
    "tfrt/bef_executor/tutorial.mlir",
    "basic_kernels/control_flow.mlir",
    "basic_kernels/integer_kernels.mlir",
    "bef_executor/scheduling.mlir",
    "bef_executor/errors.mlir",
]


def _bef_executor(path: Path, monkeypatch: pytest.MonkeyPatch,
                  capsys: pytest.CaptureFixture[str], whole: str) -> tuple[int, str, str]:
    monkeypatch.setenv("PYTFRT_WHOLE_FUNCTION", whole)
    status = bef_executor.main([str(path)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("name", LIT_PROGRAMS)
def test_lit_program_output_is_unchanged(name: str, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = LIT / name
    fast = _bef_executor(path, monkeypatch, capsys, "1")
    slow = _bef_executor(path, monkeypatch, capsys, "0")
    # Addresses, log timestamps and shared-context instance counts (per process) differ from
    # run to run.
    scrub = re.compile(r"0x[0-9a-f]+|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \d+"
                       r"|sample_shared_context\d+")
    assert tuple(scrub.sub("0x?", str(x)) for x in fast) == \
        tuple(scrub.sub("0x?", str(x)) for x in slow)


def test_lit_programs_use_the_fast_path() -> None:
    """Most functions of these programs qualify (else the comparison above proves little)."""
    qualified = total = 0
    for name in ("tfrt/basic_kernels/control_flow.mlir", "tfrt/bef_executor/basics.mlir"):
        text = (LIT / name).read_text()
        host = HostContext("s", builtin_registry())
        for fn in load_program(compile_mlir(text, name), host).functions:
            if isinstance(fn, WholeBEFFunction) and fn.name:
                total += 1
                qualified += fn.whole_function is not None
    assert total and qualified / total > 0.6


# -- semantics kept --------------------------------------------------------------------------

ERRORS = """
func.func @f() -> (!tfrt.chain, i32, i32) {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.i32 7
  %z = tfrt.constant.i32 0
  %bad = "tfrt_test.fail"() : () -> i32
  %skipped = tfrt.add.i32 %bad, %a
  %ch1 = tfrt.print.i32 %a, %ch0
  %ok = tfrt.add.i32 %a, %a
  %ch2 = tfrt.print.i32 %ok, %ch1
  tfrt.return %ch2, %skipped, %ok : !tfrt.chain, i32, i32
}
"""


def test_errors_propagate_and_independent_kernels_run() -> None:
    fast = _run(ERRORS, "f", True)
    assert _qualifies(ERRORS, "f")
    assert fast == _run(ERRORS, "f", False)
    out, diagnostics, results = fast
    assert out == "int32 = 7\nint32 = 14\n"
    assert len(diagnostics) == 1
    assert results[0] == "Chain()" and results[1].startswith("error:") and results[2] == "14"


LOOP = """
func.func @loop() -> (!tfrt.chain, i32) {
  %ch0 = tfrt.new.chain
  %n = tfrt.constant.i32 100000000
  %zero = tfrt.constant.i32 0
  %r:2 = tfrt.repeat.i32 %n, %ch0, %zero : !tfrt.chain, i32 {
    %one = tfrt.constant.i32 1
    %next = tfrt.add.i32 %zero, %one
    tfrt.return %ch0, %next : !tfrt.chain, i32
  }
  tfrt.return %r#0, %r#1 : !tfrt.chain, i32
}
"""


def test_cancelled_request_skips_everything() -> None:
    assert _qualifies(LOOP, "loop")
    fast = _run(LOOP, "loop", True, cancel=True)
    assert fast == _run(LOOP, "loop", False, cancel=True)
    assert all(r.startswith("error:") for r in fast[2])


def test_deadline_stops_a_long_loop() -> None:
    start = time.monotonic()
    out, diagnostics, results = _run(LOOP, "loop", True, deadline=0.2)
    assert time.monotonic() - start < 30
    assert all("eadline" in r for r in results), results


def _allocator_counts(whole: bool) -> tuple[int, ...]:
    text = XOR.read_text().replace("tfrt.constant.i32 2000", "tfrt.constant.i32 3")
    allocator = HostAllocator()
    host = HostContext("s", builtin_registry(), allocator=allocator)
    fn = load_program(compile_mlir(text, "x.mlir"), host, whole_function=whole).get_function(
        "xor_training")
    assert fn is not None
    ctx = host.new_execution_context(ResourceContext())
    with contextlib.redirect_stdout(io.StringIO()):
        results = fn.execute(ctx, [])
        host.await_values(results)
        host.quiesce()
    for r in results:
        r.drop_ref()
    s = allocator.stats
    return (s.current_allocations, s.max_allocations, s.total_allocations, s.current_bytes,
            s.max_bytes)


def test_destroy_hooks_fire_after_the_last_use() -> None:
    """Allocator accounting of the tensors made in the loop body: the peak number of live
    tensors (each released by its destroy hook after its last use) is the dataflow
    executor's, and nothing is left allocated."""
    fast = _allocator_counts(True)
    slow = _allocator_counts(False)
    # Same allocations, none left; the dataflow executor overlaps loop iterations (their
    # other streams run later, as tasks), so its peak can only be higher.
    assert fast[0] == slow[0] == 0 and fast[3] == slow[3] == 0
    assert fast[2] == slow[2] > 20
    assert fast[1] <= slow[1]


class _Tracked:
    def __init__(self, name: str) -> None:
        self.name = name

    def __tfrt_destroy__(self) -> None:
        print(f"destroy {self.name}")


def _tracked_registry() -> Any:
    registry = builtin_registry()

    def make(name: Attr[str], ch: Chain) -> _Tracked:
        print(f"make {name}")
        return _Tracked(name)

    def use(t: _Tracked, ch: Chain) -> Chain:
        print(f"use {t.name}")
        return CHAIN

    registry.add_kernel("wf.make", make)
    registry.add_kernel("wf.use", use)
    return registry


TRACKED = """
func.func @f() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = "wf.make"(%ch0) {name = "a"} : (!tfrt.chain) -> !wf.t
  %ch1 = "wf.use"(%a, %ch0) : (!wf.t, !tfrt.chain) -> !tfrt.chain
  %b = "wf.make"(%ch1) {name = "b"} : (!tfrt.chain) -> !wf.t
  %unused = "wf.make"(%ch1) {name = "unused"} : (!tfrt.chain) -> !wf.t
  %ch2 = "wf.use"(%b, %ch1) : (!wf.t, !tfrt.chain) -> !tfrt.chain
  %ch3 = "wf.use"(%a, %ch2) : (!wf.t, !tfrt.chain) -> !tfrt.chain
  %ch4 = tfrt.call @g(%ch3, %b) : (!tfrt.chain, !wf.t) -> !tfrt.chain
  tfrt.return %ch4 : !tfrt.chain
}

func.func @g(%ch: !tfrt.chain, %t: !wf.t) -> !tfrt.chain {
  %ch1 = "wf.use"(%t, %ch) : (!wf.t, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1 : !tfrt.chain
}
"""


def test_destroy_hooks_run_in_the_dataflow_executors_order() -> None:
    outs = []
    for whole in (True, False):
        host = HostContext("s", _tracked_registry())
        fn = load_program(compile_mlir(TRACKED, "t.mlir"), host,
                          whole_function=whole).get_function("f")
        assert fn is not None
        assert isinstance(fn, WholeBEFFunction) == whole
        if isinstance(fn, WholeBEFFunction):
            assert fn.whole_function is not None, fn.why_not
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            results = fn.execute(host.new_execution_context(ResourceContext()), [])
            host.await_values(results)
            host.quiesce()
        outs.append(out.getvalue())
    assert outs[0] == outs[1]
    lines = outs[0].splitlines()
    assert lines.index("destroy a") > lines.index("use a") and "destroy unused" in lines


def test_schedule_is_lifo_within_a_stream() -> None:
    text = """
    func.func @f() -> !tfrt.chain {
      %c0 = tfrt.constant.i32 0
      %c1 = tfrt_test.test_cost %c0 {id = 0 : i64, _tfrt_cost = 1 : i64} : i32
      %c2 = tfrt_test.test_cost %c0 {id = 1 : i64, _tfrt_cost = 1 : i64} : i32
      %c3 = tfrt_test.test_cost %c1 {id = 2 : i64, _tfrt_cost = 1 : i64} : i32
      %ch = tfrt.merge.chains %c2, %c3 : i32, i32
      tfrt.return %ch : !tfrt.chain
    }
    """
    host = HostContext("s", builtin_registry())
    fn = load_program(compile_mlir(text, "t.mlir"), host).get_function("f")
    order, _ = schedule(fn.info)  # type: ignore[union-attr]
    # Kernel ids are 1 + program position: constant, test_cost 0, 1, 2, merge.
    assert order == [1, 2, 4, 3, 5]
    fast = _run(text, "f", True)
    assert fast == _run(text, "f", False)
    assert fast[0] == "id: 0\nid: 2\nid: 1\n"


def test_tracing_uses_the_dataflow_executor(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = LIT / "tfrt" / "bef_executor" / "basics.mlir"
    outs = []
    for whole in ("1", "0"):
        monkeypatch.setenv("PYTFRT_WHOLE_FUNCTION", whole)
        bef_executor.main([str(path), "--enable_tracing"])
        outs.append(re.sub(r"\d+(\.\d+)?", "N", capsys.readouterr().out))
    assert outs[0] == outs[1]


# -- random programs ----------------------------------------------------------------------------


@st.composite
def programs(draw: Any) -> str:
    """A random function of integer kernels, errors, calls, ifs and loops; prints are ordered
    by one chain threaded through them (the ordering contract, docs/executor.md)."""
    lines = ["%ch0 = tfrt.new.chain", f"%i0 = tfrt.constant.i32 {draw(st.integers(-5, 5))}"]
    ints = ["%i0"]
    chain = "%ch0"
    n = draw(st.integers(1, 14))
    for j in range(n):
        op = draw(st.sampled_from(["const", "add", "div", "print", "fail", "if", "repeat",
                                   "call"]))
        a = draw(st.sampled_from(ints))
        b = draw(st.sampled_from(ints))
        new = f"%i{len(ints)}"
        nch = f"%ch{j + 1}"
        if op == "const":
            lines.append(f"{new} = tfrt.constant.i32 {draw(st.integers(-5, 5))}")
        elif op == "add":
            lines.append(f"{new} = tfrt.add.i32 {a}, {b}")
        elif op == "div":  # division by zero is a kernel error
            lines.append(f"{new}, %r{j} = tfrt.div.i32 {a}, {b}")
        elif op == "print":
            lines.append(f"{nch} = tfrt.print.i32 {a}, {chain}")
            chain = nch
            continue
        elif op == "fail":
            lines.append(f'{new} = "tfrt_test.fail"() : () -> i32')
        elif op == "if":
            lines.append(f"%c{j} = tfrt.equal.i32 {a}, {b}")
            lines.append(
                f"{nch}, {new} = tfrt.if %c{j}, {chain}, {a} "
                f": (!tfrt.chain, i32) -> (!tfrt.chain, i32) {{\n"
                f"    %p = tfrt.print.i32 {a}, {chain}\n"
                f"    tfrt.return %p, {a} : !tfrt.chain, i32\n"
                f"  }} else {{\n"
                f"    %one = tfrt.constant.i32 1\n"
                f"    %z = tfrt.add.i32 {a}, %one\n"
                f"    tfrt.return {chain}, %z : !tfrt.chain, i32\n"
                f"  }}"
            )
            chain = nch
        elif op == "repeat":
            lines.append(f"%n{j} = tfrt.constant.i32 {draw(st.integers(-1, 3))}")
            lines.append(
                f"{nch}, {new} = tfrt.repeat.i32 %n{j}, {chain}, {a} : !tfrt.chain, i32 {{\n"
                f"    %p = tfrt.print.i32 {a}, {chain}\n"
                f"    %two = tfrt.constant.i32 2\n"
                f"    %q, %r = tfrt.div.i32 {a}, %two\n"
                f"    tfrt.return %p, %q : !tfrt.chain, i32\n"
                f"  }}"
            )
            chain = nch
        else:
            lines.append(f"{nch}, {new} = tfrt.call @helper({chain}, {a}, {b}) "
                         f": (!tfrt.chain, i32, i32) -> (!tfrt.chain, i32)")
            chain = nch
        ints.append(new)
    body = "\n  ".join(lines)
    ret = draw(st.sampled_from(ints))
    return f"""
func.func @helper(%ch: !tfrt.chain, %a: i32, %b: i32) -> (!tfrt.chain, i32) {{
  %s = tfrt.add.i32 %a, %b
  %p = tfrt.print.i32 %s, %ch
  %q, %r = tfrt.div.i32 %a, %b
  tfrt.return %p, %q : !tfrt.chain, i32
}}

func.func @main() -> (!tfrt.chain, i32, i32) {{
  {body}
  tfrt.return {chain}, {ret}, %i0 : !tfrt.chain, i32, i32
}}
"""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_match_the_dataflow_executor(text: str) -> None:
    """Same results, same prints in the same order; the same diagnostics (errors of kernels
    in different functions that no chain orders may be reported in another order)."""
    assert _qualifies(text, "main"), text
    out, diagnostics, results = _run(text, "main", True)
    out0, diagnostics0, results0 = _run(text, "main", False)
    assert (out, sorted(diagnostics), results) == (out0, sorted(diagnostics0), results0), text


NOT_QUALIFIED = {
    # a frame kernel (it reads reference counts)
    "frame": """
func.func @f() -> i1 {
  %a = tfrt.constant.i32 1
  %u = "tfrt_test.get_uniqueness"(%a) : (i32) -> (i1)
  tfrt.return %u : i1
}
""",
    # a branch returns a new tensor: which value the result is depends on the branch
    "branch": """
func.func @f() -> !t.tensor {
  %ch0 = tfrt.new.chain
  %true = tfrt.constant.i1 1
  %x = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %r = tfrt.if %true, %x : (!t.tensor) -> (!t.tensor) {
    %y = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
    tfrt.return %y : !t.tensor
  } else {
    tfrt.return %x : !t.tensor
  }
  tfrt.return %r : !t.tensor
}
""",
    # recursion cannot be inlined
    "recursive": """
func.func @f(%n: i32) -> i32 {
  %r = tfrt.call @f(%n) : (i32) -> i32
  tfrt.return %r : i32
}
""",
}


@pytest.mark.parametrize("case", sorted(NOT_QUALIFIED))
def test_functions_that_keep_the_dataflow_executor(case: str) -> None:
    host = HostContext("s", builtin_registry())
    fn = load_program(compile_mlir(NOT_QUALIFIED[case], "t.mlir"), host).get_function("f")
    assert isinstance(fn, WholeBEFFunction)
    assert fn.whole_function is None and fn.why_not


PASS_THROUGH = """
func.func @f() -> (!tfrt.chain, i32) {
  %ch0 = tfrt.new.chain
  %x = tfrt_dht.create_uninitialized_tensor.f32.1 [2 : i64]
  %ch1 = tfrt_dht.fill_tensor_with_constant.f32 %x, %ch0 1.0 : f32
  %n = tfrt.constant.i32 3
  %zero = tfrt.constant.i32 0
  %rc, %rt, %ri = tfrt.repeat.i32 %n, %ch1, %x, %zero : !tfrt.chain, !t.tensor, i32 {
    %one = tfrt.constant.i32 1
    %next = tfrt.add.i32 %zero, %one
    %ch2 = tfrt_dht.print_tensor %x, %ch1
    tfrt.return %ch2, %x, %next : !tfrt.chain, !t.tensor, i32
  }
  %c = tfrt.equal.i32 %ri, %n
  %sc, %st = tfrt.if %c, %rc, %rt : (!tfrt.chain, !t.tensor) -> (!tfrt.chain, !t.tensor) {
    %p = tfrt_dht.print_tensor %rt, %rc
    tfrt.return %p, %rt : !tfrt.chain, !t.tensor
  } else {
    tfrt.return %rc, %rt : !tfrt.chain, !t.tensor
  }
  %p = tfrt_dht.print_tensor %st, %sc
  tfrt.return %p, %ri : !tfrt.chain, i32
}
"""


def test_tensors_passed_through_loops_and_branches() -> None:
    assert _qualifies(PASS_THROUGH, "f")
    fast = _run(PASS_THROUGH, "f", True)
    assert fast == _run(PASS_THROUGH, "f", False)
    assert fast[0].count("DenseHostTensor") == 5 and fast[2] == ["Chain()", "3"]
