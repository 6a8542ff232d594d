"""Loops and call depth have no Python-sized limits (continuations are trampolined).

Every program has a closed-form answer; the stack probe (``robust.probe.i32``) shows that the
Python stack stays bounded as the program grows (a recursive executor grows it linearly and
fails with ``maximum recursion depth exceeded`` at a few hundred levels).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from robust_harness import (
    QUEUES,
    STACK_DEPTHS,
    call_chain,
    nested_ifs,
    probe_i32,
    repeat_loop,
    run_mlir,
    run_program,
    while_loop,
)

from pytfrt.bef.program import Program
from pytfrt.host.async_value import (
    MAX_NESTING,
    IndirectAsyncValue,
    make_unconstructed,
    nesting_depth,
    run_nested,
)
from pytfrt.mlir import compile_mlir
from pytfrt.mlir.walk import stack_depth

pytestmark = pytest.mark.timeout(120)

ASYNC_ADD_I = '"tfrt_test.async_add.i32"(%i, %one) : (i32, i32) -> i32'
ASYNC_ADD_X = '"tfrt_test.async_add.i32"(%zero, %one) : (i32, i32) -> i32'
PROBE = '"robust.probe.i32"(%i) : (i32) -> i32'


def max_stack(text: str, queue: str = "s") -> tuple[list[object], int]:
    STACK_DEPTHS.clear()
    run = run_mlir(text, queue, extra_kernels=(probe_i32,))
    return run.results, max(STACK_DEPTHS)


@pytest.mark.parametrize("queue", QUEUES)
def test_distinct_call_chain_1000_deep(queue: str) -> None:
    results, depth = max_stack(call_chain(1000), queue)
    assert results == [1002]
    assert depth < 600


def test_call_chain_stack_does_not_grow_with_depth() -> None:
    _, shallow = max_stack(call_chain(200))
    _, deep = max_stack(call_chain(1500))
    # Bounded by MAX_NESTING levels of a dozen frames each, whatever the chain length (a
    # recursive executor needs about nine frames per level: 13500 here).
    assert deep < 2 * shallow


@pytest.mark.parametrize("queue", QUEUES)
def test_call_chain_resolved_late_by_async_leaf(queue: str) -> None:
    # The leaf is asynchronous: 1000 pending indirect results resolve as one cascade.
    leaf = '"tfrt_test.async_add.i32"(%x, %x) : (i32, i32) -> i32'
    results, depth = max_stack(call_chain(1000, leaf), queue)
    assert results == [1002]
    assert depth < 600


@pytest.mark.parametrize("queue", QUEUES)
def test_if_nested_100_deep(queue: str) -> None:
    assert run_mlir(nested_ifs(100), queue).results == [2]


@pytest.mark.parametrize("queue", QUEUES)
@pytest.mark.parametrize("parallel", [1, 4])
@pytest.mark.parametrize("add", ["tfrt.add.i32 %i, %one", ASYNC_ADD_I])
def test_while_5000_iterations(queue: str, parallel: int, add: str) -> None:
    assert run_mlir(while_loop(5000, add, parallel), queue).results == [5001]


@pytest.mark.parametrize("queue", QUEUES)
@pytest.mark.parametrize("add", ["tfrt.add.i32 %zero, %one", ASYNC_ADD_X])
def test_repeat_with_loop_value_20000_iterations(queue: str, add: str) -> None:
    assert run_mlir(repeat_loop(20000, add), queue).results == [20000]


def test_while_stack_does_not_grow_with_iterations() -> None:
    # The body probes the stack: %i1 = probe(%i), %i2 = %i1 + 1.
    body = PROBE + "\n  %i2 = tfrt.add.i32 %i1, %one"
    text = while_loop(3000, body).replace("%more = \"tfrt.lessequal.i32\"(%i1",
                                          "%more = \"tfrt.lessequal.i32\"(%i2")
    text = text.replace("tfrt.return %i1, %n", "tfrt.return %i2, %n")
    results, depth = max_stack(text)
    assert results == [3001]
    _, short = max_stack(text.replace("tfrt.constant.i32 3000", "tfrt.constant.i32 30"))
    assert depth <= short + 10


# -- long loops on every queue, with Python's recursion limit lowered ---------------------------
# A loop that recursed per iteration would need 100,000 frames; these run with a limit a few
# hundred frames above the test's own depth (on every thread: the limit is process-wide).
# The million-iteration runs are in benchmarks/limits.py (docs/benchmarks.md).

#: Frames allowed above the caller (the executor nests at most MAX_NESTING levels per thread).
FRAME_MARGIN = 300


@pytest.fixture
def low_recursion_limit() -> Iterator[None]:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(stack_depth() + FRAME_MARGIN)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


@pytest.fixture(scope="module")
def long_loops() -> dict[str, Program]:
    return {"while": compile_mlir(while_loop(100_000), "while.mlir"),
            "repeat": compile_mlir(repeat_loop(100_000), "repeat.mlir")}


# Both executors: the dataflow one (trampolined continuations) and whole-function code.
@pytest.mark.parametrize("whole_function", [False, True])
@pytest.mark.parametrize("queue", QUEUES)
@pytest.mark.parametrize(("loop", "answer"), [("while", 100_001), ("repeat", 100_000)])
def test_100000_iterations_in_bounded_stack(long_loops: dict[str, Program], queue: str,
                                            loop: str, answer: int, whole_function: bool,
                                            low_recursion_limit: None) -> None:
    run = run_program(long_loops[loop], queue, whole_function=whole_function)
    assert run.results == [answer]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_distinct_call_chain_10000_deep_on_every_queue() -> None:
    program = compile_mlir(call_chain(10_000), "chain.mlir")
    # The dataflow executor on every queue, and the default (whole-function code where it fits).
    for queue, whole_function in [*((q, False) for q in QUEUES), ("s", None)]:
        STACK_DEPTHS.clear()
        run = run_program(program, queue, extra_kernels=(probe_i32,),
                          whole_function=whole_function)
        assert run.results == [10_002]
        assert len(STACK_DEPTHS) == 10_000 and max(STACK_DEPTHS) < 600


# -- the trampoline itself ---------------------------------------------------------------------


def test_indirect_chain_of_100000_resolves_in_constant_stack() -> None:
    # i_k forwards to i_{k+1}; the last forwards to a pending value made available last.
    root = make_unconstructed()
    chain: list[IndirectAsyncValue[int]] = [IndirectAsyncValue() for _ in range(100_000)]
    for a, b in zip(chain, chain[1:], strict=False):
        a.forward_to(b)
    chain[-1].forward_to(root)
    root.emplace(7)
    assert all(v.is_concrete() and v.get() == 7 for v in chain)


def test_run_nested_defers_beyond_the_bound_and_drains_fifo() -> None:
    order: list[int] = []
    depths: list[int] = []

    def nest(level: int) -> None:
        depths.append(nesting_depth())
        order.append(level)
        if level < MAX_NESTING + 5:
            run_nested(lambda: nest(level + 1))

    run_nested(lambda: nest(1))
    assert order == list(range(1, MAX_NESTING + 6))  # every level ran, in order
    assert max(depths) == MAX_NESTING
    assert nesting_depth() == 0


def test_run_nested_reraises_the_first_exception_after_draining() -> None:
    ran: list[int] = []

    def boom() -> None:
        ran.append(1)
        raise ValueError("first")

    def nest(level: int) -> None:
        if level == MAX_NESTING:
            run_nested(boom)  # deferred
            run_nested(lambda: ran.append(2))  # deferred after it
            return
        run_nested(lambda: nest(level + 1))

    with pytest.raises(ValueError, match="first"):
        run_nested(lambda: nest(1))
    assert ran == [1, 2]
    assert nesting_depth() == 0
