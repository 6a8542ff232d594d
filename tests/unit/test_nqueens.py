"""Tests of the ``nqueens.i32`` kernel and its solvers (docs/nqueens.md).

Oracles: the known solution counts (OEIS A000170), themselves checked against a brute force
over permutations for small n; task counts checked against a brute force over partial
placements.  The kernel runs through ``KernelRegistry`` + ``KernelEntry.invoke`` on the ``s``
and ``mstd`` queues, as the executor would call it.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from pytfrt.host.async_value import AsyncValue, make_available
from pytfrt.host.host_context import HostContext
from pytfrt.host.registry import KernelFrame, KernelRegistry
from pytfrt.kernel_libraries import builtin_registry
from pytfrt.playground import nqueens
from pytfrt.playground.nqueens import schedule_nqueens
from pytfrt.playground.nqueens_solvers import (
    KNOWN_COUNTS,
    check_arguments,
    children,
    count_tasks,
    get_solver,
    solve_python,
)

pytestmark = pytest.mark.timeout(120)

QUEUES = ("s", "mstd:1", "mstd:2")


def _brute_force(n: int, depth: int | None = None) -> int:
    """Valid placements of ``depth`` queens (all n if None), by enumerating permutations."""
    depth = n if depth is None else depth
    total = 0
    for rows in itertools.permutations(range(n), depth):
        if all(abs(rows[a] - rows[b]) != b - a for a in range(depth) for b in range(a + 1, depth)):
            total += 1
    return total


@pytest.fixture(scope="module")
def numba_solver() -> Any:
    return get_solver("numba")


@pytest.fixture(scope="module", params=QUEUES)
def host(request: pytest.FixtureRequest) -> Any:
    registry = KernelRegistry()
    registry.add_module(nqueens)
    diagnostics: list[Any] = []
    with HostContext(request.param, registry, diagnostic_handler=diagnostics.append) as h:
        h.diagnostics = diagnostics  # type: ignore[attr-defined]
        yield h


def _invoke(host: HostContext, name: str, n: int, levels: int) -> AsyncValue[Any]:
    frame = KernelFrame(
        [make_available(n), make_available(levels)], [], [], 1, host.new_execution_context()
    )
    host.registry.get(name).invoke(frame)
    result = frame.results[0]
    assert result is not None
    host.await_values([result])
    return result


# -- oracles and solvers ----------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 8))
def test_known_counts_match_brute_force(n: int) -> None:
    assert KNOWN_COUNTS[n - 1] == _brute_force(n)


@pytest.mark.parametrize("n", range(1, 10))
def test_python_solver(n: int) -> None:
    assert solve_python(n) == KNOWN_COUNTS[n - 1]


def test_numba_solver(numba_solver: Any) -> None:
    assert [numba_solver(n, ()) for n in range(1, 13)] == list(KNOWN_COUNTS[:12])


def test_solvers_agree_on_partial_placements(numba_solver: Any) -> None:
    for placement in [(0,), (1, 3), (2, 0, 3), (0, 2, 4, 1)]:
        assert numba_solver(8, placement) == solve_python(8, placement)
    # The subtree counts of all depth-2 placements add up to the total.
    assert sum(numba_solver(9, p) for kid in children(9, ()) for p in children(9, kid)) == 352


@pytest.mark.parametrize(("n", "levels"), [(5, 2), (6, 3), (7, 2), (8, 4)])
def test_task_counts_match_brute_force(n: int, levels: int) -> None:
    assert count_tasks(n, levels) == sum(_brute_force(n, d) for d in range(levels + 1))


def test_task_count_of_the_original_program() -> None:
    # docs/nqueens.md: the C++ pool reports 11,167 tasks for 14/4 (root included).
    assert count_tasks(14, 4) == 11167


def test_unknown_solver_name() -> None:
    with pytest.raises(ValueError, match="unknown N-Queens solver 'fortran'"):
        get_solver("fortran")


# -- the kernel -------------------------------------------------------------------------------


def test_kernel_counts_numba(host: HostContext, numba_solver: Any) -> None:
    for n in range(1, 13):
        result = _invoke(host, "nqueens.i32", n, min(n, 3))
        assert result.get() == KNOWN_COUNTS[n - 1], n


def test_kernel_counts_python(host: HostContext) -> None:
    for n in range(1, 9):
        result = _invoke(host, "nqueens.python.i32", n, min(n, 2))
        assert result.get() == KNOWN_COUNTS[n - 1], n


def test_kernel_every_level(host: HostContext, numba_solver: Any) -> None:
    # levels = 0 (one task) up to levels = n (the leaves are complete boards).
    for levels in range(0, 7):
        assert _invoke(host, "nqueens.i32", 6, levels).get() == 4


def test_kernel_is_registered_lazily_for_its_prefix() -> None:
    registry = builtin_registry(entry_points=False)
    assert registry.get("nqueens.i32").fn is nqueens.nqueens_i32
    assert registry.get("nqueens.python.i32").fn is nqueens.nqueens_python_i32


@pytest.mark.parametrize(
    ("n", "levels", "message"),
    [
        (0, 0, "nqueens: n must be at least 1, got 0"),
        (-3, 1, "nqueens: n must be at least 1, got -3"),
        (19, 2, "nqueens: n must be at most 18 (the i32 count overflows), got 19"),
        (8, -1, "nqueens: levels must not be negative, got -1"),
        (5, 6, "nqueens: levels (6) must not exceed n (5)"),
    ],
)
def test_kernel_invalid_arguments(host: HostContext, n: int, levels: int, message: str) -> None:
    host.diagnostics.clear()  # type: ignore[attr-defined]
    result = _invoke(host, "nqueens.i32", n, levels)
    assert result.is_error()
    assert result.error.message == message
    assert [d.message for d in host.diagnostics] == [message]  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="nqueens: "):
        check_arguments(n, levels)


def test_kernel_returns_without_running_tasks() -> None:
    # On the "s" queue nothing runs until the host awaits: the kernel must hand back an
    # unavailable value at once instead of waiting for its tasks.
    registry = KernelRegistry()
    registry.add_module(nqueens)
    with HostContext("s", registry) as host:
        frame = KernelFrame(
            [make_available(8), make_available(2)], [], [], 1, host.new_execution_context()
        )
        registry.get("nqueens.python.i32").invoke(frame)
        result = frame.results[0]
        assert result is not None and result.is_unavailable()
        host.await_values([result])
        assert result.get() == 92


@pytest.mark.parametrize("queue", QUEUES)
def test_failing_task_makes_the_result_an_error(queue: str) -> None:
    def solver(n: int, placement: tuple[int, ...]) -> int:
        if placement == (2, 0):
            raise RuntimeError("solver exploded")
        return solve_python(n, placement)

    with HostContext(queue) as host:
        result = schedule_nqueens(host, 7, 2, solver)
        host.await_values([result])
        assert result.is_error()
        assert "solver exploded" in result.error.message
        host.quiesce()


@pytest.mark.parametrize("queue", QUEUES)
def test_cancelled_request_gives_cancelled(queue: str) -> None:
    with HostContext(queue) as host:
        ctx = host.new_execution_context()
        gate = threading.Event()

        def solver(n: int, placement: tuple[int, ...]) -> int:
            gate.wait(5)
            return solve_python(n, placement)

        result = schedule_nqueens(host, 7, 2, solver, ctx.is_cancelled)
        ctx.request_context.cancel()
        gate.set()
        host.await_values([result])
        assert result.is_error()
        assert result.error.message == "Cancelled"


@pytest.mark.parametrize("queue", ("mstd:2", "mstd:4"))
def test_many_concurrent_runs(queue: str, numba_solver: Any) -> None:
    # Several kernels in flight on one queue: each tally is independent (no shared state).
    with HostContext(queue) as host:
        results = [schedule_nqueens(host, n, 3, numba_solver) for n in (8, 9, 10, 8, 9, 10)]
        host.await_values(results)
        assert [r.get() for r in results] == [92, 352, 724, 92, 352, 724]


def test_numba_solver_without_a_writable_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    # A read-only checkout with no user cache: numba refuses cache=True with RuntimeError
    # ("cannot cache function ... no locator available"); the solver compiles without it.
    numba = pytest.importorskip("numba")
    from pytfrt.playground import nqueens_solvers

    real_njit = numba.njit

    def njit_without_cache(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return real_njit(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", njit_without_cache)
    solver = nqueens_solvers._compile_numba()
    assert solver(8, ()) == 92
