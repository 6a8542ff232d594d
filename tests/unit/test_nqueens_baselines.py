"""Tests of the N-Queens baselines and of the ``pytfrt bench nqueens`` harness (docs/nqueens.md).

Every baseline must give the known counts (OEIS A000170) and the same task count as the
kernel's schedule; the harness is run on tiny boards only (timings are never asserted).
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pytfrt.playground import nqueens_baselines as bl
from pytfrt.playground.nqueens_solvers import (
    KNOWN_COUNTS,
    count_tasks,
    get_solver,
    solve_python,
)
from pytfrt.tools.pytfrt_cli import main as pytfrt_main

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def solver() -> Any:
    return get_solver("numba")


def _cases(max_n: int = 12) -> list[tuple[int, int]]:
    return [
        (n, levels) for n in range(1, max_n + 1) for levels in sorted({0, min(n, 2), min(n, 3)})
    ]


def test_single(solver: Any) -> None:
    assert [bl.solve_single(n, solver)[0] for n in range(1, 13)] == list(KNOWN_COUNTS[:12])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_task_queue_pool(solver: Any, threads: int) -> None:
    with bl.TaskQueuePool(threads) as pool:
        for n, levels in _cases():
            assert pool.solve(n, levels, solver) == (KNOWN_COUNTS[n - 1], count_tasks(n, levels))
        # The pure-Python solver too, and levels = n (leaves are complete boards).
        assert pool.solve(6, 6, solve_python) == (4, count_tasks(6, 6))


def test_task_queue_pool_has_no_capacity_limit(solver: Any) -> None:
    # The original ring buffer held n^levels tasks; 8 queens down to 8 levels is 2,057 tasks.
    with bl.TaskQueuePool(2) as pool:
        assert pool.solve(8, 8, solver) == (92, 2057)


def test_task_queue_pool_reports_task_errors_and_stays_usable() -> None:
    def failing(n: int, placement: tuple[int, ...]) -> int:
        raise RuntimeError("boom")

    with bl.TaskQueuePool(2) as pool:
        with pytest.raises(RuntimeError, match="boom"):
            pool.solve(6, 2, failing)
        assert pool.solve(6, 2, solve_python) == (4, count_tasks(6, 2))
    with pytest.raises(ValueError, match="closed pool"):
        pool.solve(6, 2, solve_python)


@pytest.mark.parametrize("threads", [1, 2])
def test_executor(solver: Any, threads: int) -> None:
    with ThreadPoolExecutor(threads) as executor:
        for n, levels in _cases():
            expected = (KNOWN_COUNTS[n - 1], count_tasks(n, levels))
            assert bl.solve_executor(executor, n, levels, solver) == expected


def test_executor_reports_task_errors() -> None:
    def failing(n: int, placement: tuple[int, ...]) -> int:
        raise RuntimeError("boom")

    with ThreadPoolExecutor(2) as executor, pytest.raises(RuntimeError, match="boom"):
        bl.solve_executor(executor, 6, 1, failing)


@pytest.mark.parametrize("threads", [1, 2])
def test_dask(solver: Any, threads: int) -> None:
    pytest.importorskip("dask")
    for n, levels in _cases(10):
        assert bl.solve_dask(n, levels, threads, solver) == (
            KNOWN_COUNTS[n - 1],
            count_tasks(n, levels),
        )


@pytest.mark.parametrize(
    "call",
    [
        lambda: bl.solve_single(0, solve_python),
        lambda: bl.TaskQueuePool(1).solve(4, 5, solve_python),
        lambda: bl.solve_executor(ThreadPoolExecutor(1), 4, -1, solve_python),
        lambda: bl.dask_graph(0, 0, solve_python),
    ],
)
def test_invalid_arguments(call: Any) -> None:
    with pytest.raises(ValueError, match="nqueens: "):
        call()


# -- the harness ------------------------------------------------------------------------------


def test_bench_harness_small_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = pytfrt_main(
        [
            "bench", "nqueens", "--n", "5-7", "--threads", "1,2", "--levels", "1,2",
            "--repetitions", "2", "--no-native", "--output-dir", str(tmp_path), "--quiet",
            "--skip-noop",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    record = json.loads((tmp_path / "nqueens.json").read_text())
    assert (tmp_path / "nqueens.png").stat().st_size > 0
    assert record["machine"]["nproc"] >= 1
    rows = record["rows"]
    variants = {r["variant"] for r in rows}
    assert {"single", "runtime-s", "runtime", "taskpool", "executor"} <= variants
    for row in rows:
        assert row["solutions"] == KNOWN_COUNTS[row["n"] - 1]
        assert len(row["times"]) == 2
        if row["variant"] != "single":
            assert row["tasks"] == count_tasks(row["n"], row["levels"])
    assert "overhead us/task" in out and "runtime" in out


def test_bench_harness_noop_overhead(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = pytfrt_main(
        [
            "bench", "nqueens", "--n", "6", "--threads", "2", "--levels", "2", "-r", "1",
            "--variants", "single,runtime,taskpool", "--output-dir", str(tmp_path), "--no-plot",
            "--quiet",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    noop = json.loads((tmp_path / "nqueens.json").read_text())["noop_overhead"]
    assert [(e["variant"], e["threads"], e["tasks"]) for e in noop] == [
        ("runtime", 2, count_tasks(12, 4)),
        ("taskpool", 2, count_tasks(12, 4)),
    ]
    assert all(e["us_per_task"] > 0 for e in noop)
    assert "scheduling cost per task, no-op solver" in out


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_bench_harness_native(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = pytfrt_main(
        [
            "bench", "nqueens", "--n", "6-7", "--threads", "2", "--levels", "2",
            "--repetitions", "1", "--variants", "single,native,native-pool",
            "--output-dir", str(tmp_path), "--no-plot", "--quiet",
        ]
    )  # fmt: skip
    assert status == 0, capsys.readouterr().out
    rows = json.loads((tmp_path / "nqueens.json").read_text())["rows"]
    pool_rows = [r for r in rows if r["variant"] == "native-pool"]
    assert [(r["n"], r["solutions"], r["tasks"]) for r in pool_rows] == [
        (6, 4, count_tasks(6, 2)),
        (7, 40, count_tasks(7, 2)),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--n", "0-3"], "n must be at least 1"),
        (["--n", "6", "--threads", "0"], "--threads must be positive"),
        (["--n", "6", "--variants", "single,quantum"], "unknown variant(s) quantum"),
        (["--n", "15"], "no known count"),
    ],
)
def test_bench_harness_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status = pytfrt_main(["bench", "nqueens", *argv, "--output-dir", str(tmp_path), "-q"])
    assert status == 1
    assert message in capsys.readouterr().out
