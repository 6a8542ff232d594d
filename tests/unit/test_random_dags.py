"""Random dataflow graphs run by the async executor agree with a sequential reference.

Hypothesis generates Programs of integer kernels (add/mul/neg with i32 wraparound, constants,
kernels that fail at once or later from the work queue, async kernels completing on the work
queue) with random stream ids and returned registers.  Each program runs on the ``s`` and
``mstd:2`` work queues; every result (value or error message) and the multiset of emitted
diagnostics must equal what an independent sequential interpreter computes from the strictness
rules (docs/executor.md): a kernel with an error operand does not run and forwards its *last* error
operand; only kernels that run and fail emit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
    KernelFrame,
    KernelRegistry,
    make_available,
)
from pytfrt.support.attributes import IntAttr
from pytfrt.support.location import FileLineColLoc

OPS = ("const", "add", "mul", "neg", "fail", "async_add", "async_fail")
ARITY = {"const": 0, "add": 2, "mul": 2, "neg": 1, "fail": 1, "async_add": 2, "async_fail": 1}


def wrap(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


@dataclass
class Node:
    op: str
    operands: list[int]  # register indices (arguments first)
    value: int  # the const value / the node's id for fail messages
    stream: int


@st.composite
def dags(draw: Any) -> tuple[int, list[int], list[Node], list[int]]:
    num_args = draw(st.integers(0, 2))
    args = draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=num_args,
                         max_size=num_args))
    nodes: list[Node] = []
    for i in range(draw(st.integers(1, 30))):
        available = num_args + i
        op = draw(st.sampled_from(OPS)) if available else "const"
        if available == 0:
            op = "const"
        operands = [draw(st.integers(0, available - 1)) for _ in range(ARITY[op])]
        value = draw(st.integers(-(2**31), 2**31 - 1)) if op == "const" else i
        nodes.append(Node(op, operands, value, draw(st.integers(0, 3))))
    total = num_args + len(nodes)
    returns = draw(st.lists(st.integers(0, total - 1), max_size=5))
    return num_args, args, nodes, returns


# -- the reference: sequential evaluation of the strictness rules ---------------------------


def reference(args: list[int], nodes: list[Node], returns: list[int]
              ) -> tuple[list[tuple[str, Any]], Counter[str]]:
    regs: list[tuple[str, Any]] = [("ok", a) for a in args]
    emitted: Counter[str] = Counter()
    for node in nodes:
        ops = [regs[r] for r in node.operands]
        errors = [v for v in ops if v[0] == "err"]
        if errors:
            regs.append(errors[-1])
            continue
        x = [v[1] for v in ops]
        if node.op == "const":
            regs.append(("ok", node.value))
        elif node.op in ("add", "async_add"):
            regs.append(("ok", wrap(x[0] + x[1])))
        elif node.op == "mul":
            regs.append(("ok", wrap(x[0] * x[1])))
        elif node.op == "neg":
            regs.append(("ok", wrap(-x[0])))
        else:  # fail, async_fail
            message = f"{node.op} {node.value}"
            emitted[message] += 1
            regs.append(("err", message))
    return [regs[r] for r in returns], emitted


# -- the executor side ----------------------------------------------------------------------


def make_registry() -> KernelRegistry:
    reg = KernelRegistry()

    def const(v: Attr[int]) -> int:
        return v

    def add(a: int, b: int) -> int:
        return wrap(a + b)

    def mul(a: int, b: int) -> int:
        return wrap(a * b)

    def neg(a: int) -> int:
        return wrap(-a)

    def fail(a: int, id_: Attr[int]) -> int:
        raise KernelError(f"fail {id_}")

    def async_add(a: int, b: int, ctx: ExecutionContext) -> AsyncValue[int]:
        return ctx.host.enqueue_work(lambda: wrap(a + b))

    def async_fail(a: int, id_: Attr[int], frame: KernelFrame) -> None:
        frame.allocate_result(0)
        frame.exec_ctx.queue.add_task(lambda: frame.report_error(f"async_fail {id_}"))

    for name, fn in [("r.const", const), ("r.add", add), ("r.mul", mul), ("r.neg", neg),
                     ("r.fail", fail), ("r.async_add", async_add),
                     ("r.async_fail", async_fail)]:
        reg.add_kernel(name, fn)
    return reg


def build(num_args: int, nodes: list[Node], returns: list[int]) -> Program:
    fn = PFunction("f", argument_types=["i32"] * num_args,
                   register_types=["i32"] * (num_args + len(nodes)))
    for i, node in enumerate(nodes):
        attrs = [("id_" if node.op in ("fail", "async_fail") else "v",
                  IntAttr(node.value, "i32"))] if node.op in ("const", "fail", "async_fail") else []
        fn.kernels.append(Kernel(f"r.{node.op}", node.operands, [num_args + i], attrs, [],
                                 FileLineColLoc("dag.mlir", i + 1, 1), node.stream))
    fn.return_registers = list(returns)
    fn.result_types = ["i32"] * len(returns)
    fn.root_stream_id = 0
    return Program([fn]).finalize()


REGISTRY = make_registry()
HOSTS: dict[str, tuple[HostContext, DiagnosticCollector]] = {}


def host_for(queue: str) -> tuple[HostContext, DiagnosticCollector]:
    if queue not in HOSTS:
        diags = DiagnosticCollector()
        HOSTS[queue] = (HostContext(queue, REGISTRY, diags), diags)
    return HOSTS[queue]


@pytest.fixture(scope="module", autouse=True)
def _shutdown_hosts() -> Any:
    yield
    for host, _ in HOSTS.values():
        host.shutdown()
    HOSTS.clear()


@pytest.mark.timeout(120)
@given(dags())
def test_random_dags_match_the_reference(dag: tuple[int, list[int], list[Node], list[int]]
                                         ) -> None:
    num_args, args, nodes, returns = dag
    expected, expected_diags = reference(args, nodes, returns)
    program = build(num_args, nodes, returns)
    for queue in ("s", "mstd:2"):
        host, diags = host_for(queue)
        diags.diagnostics.clear()
        fn = load_program(program, host).get_function("f")
        assert fn is not None
        arg_values = [make_available(a) for a in args]
        results = fn.execute(host.new_execution_context(), arg_values)
        host.await_values(results)
        host.quiesce()
        got = [("err", r.error.message) if r.is_error() else ("ok", r.get()) for r in results]
        assert got == expected, queue
        assert Counter(diags.messages) == expected_diags, queue
        for r in results:
            r.drop_ref()
        assert all(a.ref_count == 1 for a in arg_values), "arguments are borrowed"
