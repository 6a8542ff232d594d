"""Helpers of the robustness suite: run MLIR text on a fresh host, generate adversarial programs.

``run_mlir`` compiles text with the real front end, loads it against the built-in kernels (plus
optional extra kernel functions) and awaits one function's results on the given work queue
type.  The generators build the deep and long programs the tests (and ``benchmarks/fuzz.py``)
feed it; each has a closed-form answer the tests compare against.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytfrt.bef.program import Program
from pytfrt.bef.streams import assign_stream_ids
from pytfrt.executor import load_program
from pytfrt.host import AsyncValue, DiagnosticCollector, HostContext, kernel, make_unconstructed
from pytfrt.host.file_access import DataDirectories
from pytfrt.kernel_libraries import builtin_registry

QUEUES = ("s", "mstd:2", "mstd:1,2")


@dataclass
class Run:
    """The outcome of :func:`run_mlir`: formatted results and emitted diagnostics."""

    results: list[Any]
    diagnostics: list[str] = field(default_factory=list)


def run_mlir(text: str, queue: str = "s", function: str = "main",
             extra_kernels: tuple[Callable[..., Any], ...] = (),
             timeout: float | None = None, data_dirs: list[str] | None = None) -> Run:
    """Compile, load and run ``function`` of ``text``.

    Results are payloads, or ``"<<error: message>>"`` for error values."""
    from pytfrt.mlir import compile_mlir

    return run_program(compile_mlir(text, "robust.mlir"), queue, function, extra_kernels,
                       timeout, data_dirs)


def run_program(program: Program, queue: str = "s", function: str = "main",
                extra_kernels: tuple[Callable[..., Any], ...] = (),
                timeout: float | None = None, data_dirs: list[str] | None = None,
                whole_function: bool | None = None) -> Run:
    """Load ``program`` on a fresh host and run ``function`` (as :func:`run_mlir`);
    ``whole_function=False`` keeps every function on the dataflow executor."""
    if not program.streams_assigned:
        assign_stream_ids(program)
    registry = builtin_registry(entry_points=False)
    if extra_kernels:
        registry.add(*extra_kernels)
    diags = DiagnosticCollector()
    dirs = DataDirectories(data_dirs) if data_dirs is not None else None
    with HostContext(queue, registry, diags, data_dirs=dirs) as host:
        bef = load_program(program, host, whole_function=whole_function)
        fn = bef.get_function(function)
        assert fn is not None
        ctx = host.new_execution_context()
        if timeout is not None:
            ctx.request_context.set_deadline(timeout)
        results = fn.execute(ctx, [])
        host.await_values(results)
        out = [r.get() if r.is_concrete() else f"<<error: {r.error.message}>>" for r in results]
        host.quiesce()
    return Run(out, diags.messages)


# -- a probe of the Python stack ---------------------------------------------------------------

STACK_DEPTHS: list[int] = []


@kernel("robust.probe.i32")
def probe_i32(x: int) -> int:
    """Records the calling thread's Python stack depth; returns ``x``."""
    frame = sys._getframe()
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    STACK_DEPTHS.append(depth)
    return x


# -- generators ------------------------------------------------------------------------------


def call_chain(n: int, leaf: str = "tfrt.add.i32 %x, %x") -> str:
    """``@f0 -> @f1 -> ... -> @f{n-1}`` (distinct functions); each level adds 1 after its
    callee and probes the stack; ``main`` returns ``leaf(1) + n`` (leaf 2: ``n + 2``)."""
    parts = []
    for k in range(n):
        callee = f"tfrt.call @f{k + 1}(%x) : (i32) -> i32" if k + 1 < n else leaf
        parts.append(
            f"func.func private @f{k}(%x: i32) -> i32 {{\n"
            f"  %y = {callee}\n"
            f"  %one = tfrt.constant.i32 1\n"
            f"  %p = \"robust.probe.i32\"(%y) : (i32) -> i32\n"
            f"  %z = tfrt.add.i32 %p, %one\n"
            f"  tfrt.return %z : i32\n}}"
        )
    parts.append("func.func @main() -> i32 {\n  %one = tfrt.constant.i32 1\n"
                 "  %r = tfrt.call @f0(%one) : (i32) -> i32\n  tfrt.return %r : i32\n}")
    return "\n".join(parts)


def nested_ifs(depth: int) -> str:
    """``tfrt.if`` nested ``depth`` deep (true branches); ``main`` returns 2."""
    body = "%y = tfrt.add.i32 %x, %x\n"
    for _ in range(depth):
        body = (f"%y = tfrt.if %t, %x, %t : (i32, i1) -> (i32) {{\n{body}"
                "tfrt.return %y : i32\n} else {\ntfrt.return %x : i32\n}\n")
    return ("func.func @main() -> i32 {\n%x = tfrt.constant.i32 1\n%t = tfrt.constant.i1 1\n"
            f"{body}tfrt.return %y : i32\n}}\n")


def while_loop(n: int, add: str = "tfrt.add.i32 %i, %one", parallel: int = 1) -> str:
    """A ``tfrt.while`` counting ``i`` from 0 while ``i <= n``; ``main`` returns ``n + 1``.

    ``add`` computes ``%i1`` (use ``"tfrt_test.async_add.i32"(%i, %one) : (i32, i32) -> i32``
    for a condition that is not available when the body returns)."""
    return f"""
func.func private @body(%i: i32, %n: i32) -> (i32, i32, i1) {{
  %one = tfrt.constant.i32 1
  %i1 = {add}
  %more = "tfrt.lessequal.i32"(%i1, %n) : (i32, i32) -> i1
  tfrt.return %i1, %n, %more : i32, i32, i1
}}
func.func @main() -> i32 {{
  %zero = tfrt.constant.i32 0
  %n = tfrt.constant.i32 {n}
  %t = tfrt.constant.i1 1
  %r:2 = tfrt.while %t @body(%zero, %n) parallel_iterations({parallel}) : (i32, i32) -> (i32, i32)
  tfrt.return %r#0 : i32
}}
"""


def repeat_loop(n: int, add: str = "tfrt.add.i32 %zero, %one") -> str:
    """``tfrt.repeat.i32`` ``n`` times with one loop value (named ``%zero`` in the region, as
    the region's arguments take the operands' names) incremented by ``add``; returns ``n``."""
    return f"""
func.func @main() -> i32 {{
  %n = tfrt.constant.i32 {n}
  %zero = tfrt.constant.i32 0
  %r = tfrt.repeat.i32 %n, %zero : i32 {{
    %one = tfrt.constant.i32 1
    %y = {add}
    tfrt.return %y : i32
  }}
  tfrt.return %r : i32
}}
"""


def read_btf(path: str, dtype: str = "i32", rank: int = 1, index: int = 0) -> str:
    """A program whose ``main`` reads tensor ``index`` of ``path`` and returns its chain."""
    return f"""
func.func @main() -> !tfrt.chain {{
  %ch0 = tfrt.new.chain
  %path = "tfrt_test.get_string"() {{ value = "{path}" }} : () -> !tfrt.string
  %i = tfrt.constant.i32 {index}
  %t = "btf.read_dense_tensor.{dtype}.{rank}"(%path, %i) : (!tfrt.string, i32) -> (!t.tensor)
  %ch1 = tfrt_dht.print_tensor %t, %ch0
  tfrt.return %ch1 : !tfrt.chain
}}
"""


# -- kernels that misbehave ----------------------------------------------------------------------


@kernel("robust.never.i32")
def never_i32(x: int) -> AsyncValue[int]:
    """Returns a result that nobody will ever set (a stuck kernel)."""
    return make_unconstructed()


@kernel("robust.dies.i32")
def dies_i32(x: int) -> AsyncValue[int]:
    """Hands its result to a helper thread that dies before setting it."""
    result: AsyncValue[int] = make_unconstructed()

    def helper() -> None:
        return  # the thread ends without setting ``result``

    threading.Thread(target=helper, daemon=True).start()
    return result


@kernel("robust.oom.i32")
def oom_i32(x: int) -> int:
    """Raises MemoryError (as a huge allocation would)."""
    raise MemoryError


@kernel("robust.wrong_type.i32")
def wrong_type_i32(x: int) -> int:
    """Returns a string for its i32 result."""
    return "not an int"  # type: ignore[return-value]


MISBEHAVING = (never_i32, dies_i32, oom_i32, wrong_type_i32)


def stuck_program(kernel_name: str) -> str:
    """``main`` returns (stuck result + 1, an independent 7)."""
    return f"""
func.func @main() -> (i32, i32) {{
  %one = tfrt.constant.i32 1
  %x = "{kernel_name}"(%one) : (i32) -> i32
  %y = tfrt.add.i32 %x, %one
  %seven = tfrt.constant.i32 7
  tfrt.return %y, %seven : i32, i32
}}
"""
