"""``pytfrt bench nqueens``: what the AsyncValue runtime's task scheduling costs (docs/nqueens.md).

Runs, in one process and with one solver, every way of executing the N-Queens task tree of
``nqueens.i32`` (one task per valid placement of ``0..levels`` columns):

==============  =========================================================================
variant         what runs the tasks
==============  =========================================================================
single          no tasks: the solver on the empty board (the reference)
native          C++ single-threaded solver, ``g++ -O2`` (if a compiler is present)
runtime-s       the ``nqueens.i32`` kernel on pytfrt's ``s`` queue (1 thread)
runtime         the ``nqueens.i32`` kernel on ``mstd:T``
taskpool        an explicit task queue + T worker threads (the original C++ design, correct)
executor        ``concurrent.futures.ThreadPoolExecutor(T)``
dask            ``dask.threaded.get`` with T workers (graph build included)
native-pool     C++ task queue + T threads (correct version of the original program)
==============  =========================================================================

Every run's count is checked against the known sequence.  Per configuration it reports the
median of the repetitions, the speedup over the single-threaded reference of the same language
(Python variants vs ``single``, C++ vs ``native``), and the scheduling overhead per task:
``(min(T, cores) * median - reference) / tasks`` -- the core time spent beyond the solve,
idle time included.  It then evaluates the issue's goals at n = 13 and 14, prints a table,
and writes ``<name>.json`` and ``<name>.png`` into the output directory.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytfrt.tools.bench import format_table, machine_info, median, progress, write_json

VARIANTS = (
    "single",
    "native",
    "runtime-s",
    "runtime",
    "taskpool",
    "executor",
    "dask",
    "native-pool",
)
PYTHON_VARIANTS = ("runtime-s", "runtime", "taskpool", "executor", "dask")
ORIGINAL_CPP_POOL_2T = (2.5, 3.1)
"""The original C++ thread-pool program's 2-thread time at n = 14, levels 2..4 (docs/nqueens.md)."""

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples" / "nqueens"


def _int_list(text: str) -> list[int]:
    """Parse ``"8-14"``, ``"12,14"`` or ``"8-10,13"`` into a sorted list of ints."""
    values: set[int] = set()
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            if sep:
                values.update(range(int(lo), int(hi) + 1))
            else:
                values.add(int(lo))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers like '8-14' or '1,2', got {text!r}"
        ) from None
    return sorted(values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``pytfrt bench nqueens``."""
    parser.add_argument(
        "--n",
        type=_int_list,
        default=_int_list("8-13"),
        help="board sizes, e.g. '8-14' or '12,14' (default 8-13)",
    )
    parser.add_argument(
        "--threads", type=_int_list, default=[1, 2], help="worker thread counts (default 1,2)"
    )
    parser.add_argument(
        "--levels",
        type=_int_list,
        default=[2, 3, 4],
        help="schedule levels: tasks are created down to this depth (default 2,3,4)",
    )
    parser.add_argument(
        "--repetitions",
        "-r",
        type=int,
        default=3,
        help="timed runs per configuration; the median is reported (default 3)",
    )
    parser.add_argument(
        "--solver",
        choices=("numba", "python"),
        default="numba",
        help="subtree solver of every Python variant (default numba)",
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated subset of: {', '.join(VARIANTS)}",
    )
    parser.add_argument(
        "--no-native", action="store_true", help="do not build and time the C++ references"
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path("benchmarks/results"),
        help="where <name>.json and <name>.png go (default benchmarks/results)",
    )
    parser.add_argument("--name", default="nqueens", help="file stem of the outputs")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    parser.add_argument(
        "--skip-noop",
        action="store_true",
        help="skip measuring the scheduling cost per task with a no-op solver",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress lines")


@dataclass
class Row:
    """One configuration's measurements."""

    variant: str
    n: int
    threads: int
    levels: int
    tasks: int = 0
    solutions: int = 0
    times: list[float] = field(default_factory=list)
    median_s: float = 0.0
    speedup: float | None = None
    overhead_us: float | None = None


class _Native:
    """Builds the C++ references into a temporary directory and runs them."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pytfrt-nqueens-"))
        self.single = self._build("nqueens_1thread")
        self.pool = self._build("nqueens_thread_pool")

    def _build(self, stem: str) -> Path:
        exe = self.dir / stem
        cmd = ["g++", "-O2", "-pthread", "-o", str(exe), str(EXAMPLES_DIR / f"{stem}.cpp")]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return exe

    @staticmethod
    def _run(cmd: list[str]) -> tuple[int, int, float]:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        count = re.search(r"Num of solutions: (\d+)", out)
        tasks = re.search(r"Num of total tasks = (\d+)", out)
        micros = re.search(r"Time = (\d+) us", out)
        if count is None or micros is None:
            raise RuntimeError(f"unexpected output from {cmd[0]}: {out!r}")
        return int(count[1]), int(tasks[1]) if tasks else 0, int(micros[1]) / 1e6

    def run_single(self, n: int) -> tuple[int, int, float]:
        return self._run([str(self.single), str(n)])

    def run_pool(self, n: int, threads: int, levels: int) -> tuple[int, int, float]:
        return self._run([str(self.pool), str(n), str(threads), str(levels)])

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class _Runners:
    """Creates each variant's resources once (hosts, pools, executors) and times one run."""

    def __init__(self, solver_name: str, native: _Native | None) -> None:
        from pytfrt.host.registry import KernelRegistry
        from pytfrt.playground import nqueens
        from pytfrt.playground.nqueens_solvers import get_solver

        self.solver = get_solver(solver_name)  # compiles (or loads) Numba once, untimed
        registry = KernelRegistry()
        registry.add_module(nqueens)
        self.entry = registry.get("nqueens.i32" if solver_name == "numba" else "nqueens.python.i32")
        self.registry = registry
        self.native = native
        self._hosts: dict[str, Any] = {}
        self._pools: dict[int, Any] = {}
        self._executors: dict[int, ThreadPoolExecutor] = {}

    def time_one(self, variant: str, n: int, threads: int, levels: int) -> tuple[int, int, float]:
        """Run one configuration once: ``(solutions, tasks, seconds)``."""
        from pytfrt.playground import nqueens_baselines as bl

        if variant == "native":
            assert self.native is not None
            return self.native.run_single(n)
        if variant == "native-pool":
            assert self.native is not None
            return self.native.run_pool(n, threads, levels)
        if variant in ("runtime", "runtime-s"):
            return self._time_runtime(
                "s" if variant == "runtime-s" else f"mstd:{threads}", n, levels
            )
        start = time.perf_counter()
        if variant == "single":
            count, tasks = bl.solve_single(n, self.solver)
        elif variant == "taskpool":
            if threads not in self._pools:
                self._pools[threads] = bl.TaskQueuePool(threads)
            count, tasks = self._pools[threads].solve(n, levels, self.solver)
        elif variant == "executor":
            if threads not in self._executors:
                self._executors[threads] = ThreadPoolExecutor(threads)
            count, tasks = bl.solve_executor(self._executors[threads], n, levels, self.solver)
        elif variant == "dask":
            count, tasks = bl.solve_dask(n, levels, threads, self.solver)
        else:
            raise ValueError(f"unknown variant {variant!r}")
        return count, tasks, time.perf_counter() - start

    def time_noop(self, variant: str, threads: int, n: int, levels: int) -> float:
        """Seconds for the task tree of ``(n, levels)`` with a no-op solver: pure scheduling."""
        from pytfrt.host.host_context import HostContext
        from pytfrt.playground.nqueens import schedule_nqueens

        solver, self.solver = self.solver, _noop_solver
        try:
            if variant not in ("runtime", "runtime-s"):
                return self.time_one(variant, n, threads, levels)[2]
            queue = "s" if variant == "runtime-s" else f"mstd:{threads}"
            host = self._hosts.get(queue)
            if host is None:
                host = self._hosts[queue] = HostContext(queue, self.registry)
            start = time.perf_counter()
            result = schedule_nqueens(host, n, levels, _noop_solver)
            host.await_values([result])
            return time.perf_counter() - start
        finally:
            self.solver = solver

    def _time_runtime(self, queue: str, n: int, levels: int) -> tuple[int, int, float]:
        from pytfrt.host.async_value import make_available
        from pytfrt.host.host_context import HostContext
        from pytfrt.host.registry import KernelFrame
        from pytfrt.playground.nqueens_solvers import count_tasks

        host = self._hosts.get(queue)
        if host is None:
            host = self._hosts[queue] = HostContext(queue, self.registry)
        frame = KernelFrame(
            [make_available(n), make_available(levels)],
            [],
            [],
            1,
            host.new_execution_context(),
            name="nqueens.i32",
        )
        start = time.perf_counter()
        self.entry.invoke(frame)
        result = frame.results[0]
        assert result is not None
        host.await_values([result])
        elapsed = time.perf_counter() - start
        if result.is_error():
            raise RuntimeError(f"nqueens.i32 failed: {result.error.message}")
        return int(result.get()), count_tasks(n, levels), elapsed

    def close(self) -> None:
        for host in self._hosts.values():
            host.shutdown()
        for pool in self._pools.values():
            pool.close()
        for executor in self._executors.values():
            executor.shutdown()


def _noop_solver(n: int, placement: tuple[int, ...]) -> int:
    return 1


NOOP_N, NOOP_LEVELS = 12, 4  # 4,959 tasks


def _noop_overheads(runners: _Runners, args: argparse.Namespace, variants: list[str]) -> list[Any]:
    """Scheduling cost per task of each Python variant, measured with a no-op solver."""
    from pytfrt.playground.nqueens_solvers import count_tasks

    tasks = count_tasks(NOOP_N, NOOP_LEVELS)
    out = []
    for variant in [v for v in PYTHON_VARIANTS if v in variants]:
        for threads in [1] if variant == "runtime-s" else args.threads:
            times = [
                runners.time_noop(variant, threads, NOOP_N, NOOP_LEVELS)
                for _ in range(max(3, args.repetitions))
            ]
            us = median(times) / tasks * 1e6
            out.append({"variant": variant, "threads": threads, "tasks": tasks, "us_per_task": us})
            progress(f"no-op solver: {variant} T={threads}: {us:.2f} us/task", args.quiet)
    return out


def _configurations(
    args: argparse.Namespace, variants: list[str]
) -> list[tuple[str, int, int, int]]:
    """(variant, n, threads, levels) in run order: per n, references first."""
    configs = []
    for n in args.n:
        levels = [lv for lv in args.levels if lv <= n]
        for variant in variants:
            if variant in ("single", "native"):
                configs.append((variant, n, 1, 0))
            elif variant == "runtime-s":
                configs.extend((variant, n, 1, lv) for lv in levels)
            else:
                configs.extend((variant, n, t, lv) for t in args.threads for lv in levels)
    return configs


def _fill_derived(rows: list[Row]) -> None:
    """Speedup and overhead per task against the same-language single-threaded reference."""
    cores = os.cpu_count() or 1
    refs = {(r.variant, r.n): r.median_s for r in rows if r.variant in ("single", "native")}
    for row in rows:
        ref_name = "native" if row.variant.startswith("native") else "single"
        ref = refs.get((ref_name, row.n))
        if ref is None or row.median_s <= 0:
            continue
        row.speedup = ref / row.median_s
        if row.tasks > 0 and row.variant not in ("single", "native"):
            busy = min(row.threads, cores) * row.median_s
            row.overhead_us = (busy - ref) / row.tasks * 1e6


def _goal(name: str, n: int, threads: int, levels: int, value: float, met: bool) -> dict[str, Any]:
    return {
        "goal": name,
        "n": n,
        "threads": threads,
        "levels": levels,
        "value": round(value, 3),
        "met": met,
    }


def _goals(rows: list[Row]) -> list[dict[str, Any]]:
    """The issue's benchmark goals at n = 13 and 14, evaluated on this run."""
    by_key = {(r.variant, r.n, r.threads, r.levels): r for r in rows}
    lo, hi = ORIGINAL_CPP_POOL_2T
    goals: list[dict[str, Any]] = []
    for n in sorted({r.n for r in rows if r.n in (13, 14)}):
        runtime_rows = [r for r in rows if r.variant == "runtime" and r.n == n]
        for row in runtime_rows:
            t, lv = row.threads, row.levels
            pool = by_key.get(("taskpool", n, t, lv))
            if pool is not None:
                ratio = row.median_s / pool.median_s
                goals.append(
                    _goal(
                        "runtime within 1.1x of the task-queue pool", n, t, lv, ratio, ratio <= 1.1
                    )
                )
            one = by_key.get(("runtime", n, 1, lv))
            if t == 2 and one is not None:
                ratio = one.median_s / row.median_s
                goals.append(
                    _goal(
                        "runtime on 2 threads >= 1.8x faster than on 1",
                        n,
                        t,
                        lv,
                        ratio,
                        ratio >= 1.8,
                    )
                )
            if t == 2 and n == 14:
                goals.append(
                    _goal(
                        f"runtime on 2 threads faster than the original C++ pool ({lo}-{hi} s)",
                        n,
                        t,
                        lv,
                        row.median_s,
                        row.median_s < lo,
                    )
                )
        single = by_key.get(("single", n, 1, 0))
        native = by_key.get(("native", n, 1, 0))
        if single is not None and native is not None:
            ratio = single.median_s / native.median_s
            goals.append(
                _goal(
                    "solver within 1.3x of native single-threaded code",
                    n,
                    1,
                    0,
                    ratio,
                    ratio <= 1.3,
                )
            )
    return goals


def _table(rows: list[Row]) -> str:
    headers = [
        "variant",
        "n",
        "threads",
        "levels",
        "tasks",
        "solutions",
        "median s",
        "speedup",
        "overhead us/task",
    ]
    body = [
        [
            r.variant,
            r.n,
            r.threads,
            r.levels if r.variant not in ("single", "native") else "-",
            r.tasks,
            r.solutions,
            f"{r.median_s:.4f}",
            "-" if r.speedup is None else f"{r.speedup:.2f}x",
            "-" if r.overhead_us is None else f"{r.overhead_us:.1f}",
        ]
        for r in rows
    ]
    return format_table(headers, body)


def _plot(rows: list[Row], path: Path, plot_levels: int, solver: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_speed) = plt.subplots(1, 2, figsize=(13, 5))
    series: dict[str, list[Row]] = {}
    for r in rows:
        if r.variant in ("single", "native"):
            label = f"{r.variant}" + (f" ({solver})" if r.variant == "single" else " (C++)")
        elif r.levels == plot_levels:
            label = f"{r.variant} T={r.threads}"
        else:
            continue
        series.setdefault(label, []).append(r)
    colors = plt.get_cmap("tab20").colors  # type: ignore[attr-defined]
    for index, (label, points) in enumerate(series.items()):
        points.sort(key=lambda r: r.n)
        color = colors[index % len(colors)]
        style = "--" if label.startswith("native") else "-"
        ax_time.plot(
            [p.n for p in points],
            [p.median_s for p in points],
            style,
            marker="o",
            label=label,
            color=color,
        )
        ax_speed.plot(
            [p.n for p in points],
            [p.speedup or 0 for p in points],
            style,
            marker="o",
            label=label,
            color=color,
        )
    ax_time.set_yscale("log")
    ax_time.set_xlabel("n")
    ax_time.set_ylabel("median time (s)")
    ax_time.set_title(f"N-Queens time (levels = {plot_levels})")
    ax_speed.set_xlabel("n")
    ax_speed.set_ylabel("speedup vs single-threaded (same language)")
    ax_speed.set_title("speedup")
    ax_speed.axhline(1.0, color="grey", linewidth=0.8)
    ax_speed.legend(fontsize=7, ncol=2)
    for ax in (ax_time, ax_speed):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _measure(runners: _Runners, rows: list[Row], repetitions: int, quiet: bool) -> bool:
    """Time every row ``repetitions`` times; returns True if any count was wrong.

    Repetitions are interleaved per board size (rep 1 of every configuration of n, then rep 2,
    ...), so drifting machine load affects every variant alike and same-run ratios hold.
    """
    from pytfrt.playground.nqueens_solvers import KNOWN_COUNTS

    failed = False
    done = 0
    total = len(rows) * repetitions
    for n in sorted({r.n for r in rows}):
        group = [r for r in rows if r.n == n]
        for rep in range(repetitions):
            for row in group:
                count, tasks, seconds = runners.time_one(row.variant, n, row.threads, row.levels)
                row.times.append(seconds)
                row.solutions, row.tasks = count, tasks
                done += 1
                progress(
                    f"[{done}/{total}] n={n} rep {rep + 1}/{repetitions} {row.variant} "
                    f"T={row.threads} L={row.levels}: {seconds:.4f} s",
                    quiet,
                )
                if count != KNOWN_COUNTS[n - 1]:
                    failed = True
                    print(
                        f"WRONG COUNT: {row.variant} n={n} T={row.threads} L={row.levels}: "
                        f"{count} != {KNOWN_COUNTS[n - 1]}",
                        flush=True,
                    )
        for row in group:
            row.median_s = median(row.times)
    return failed


def _select_variants(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The variants to run and notes about skipped ones."""
    import importlib.util

    chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise ValueError(
            f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}"
        )
    notes = []
    if "dask" in chosen and importlib.util.find_spec("dask") is None:
        chosen.remove("dask")
        notes.append("dask is not installed: skipped (pip install 'pytfrt[bench]')")
    natives = [v for v in chosen if v.startswith("native")]
    if natives and (args.no_native or shutil.which("g++") is None):
        for v in natives:
            chosen.remove(v)
        if not args.no_native:
            notes.append("no g++ found: the C++ references were skipped")
    return chosen, notes


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; returns 0, or 1 if a count was wrong or an argument invalid."""
    from pytfrt.playground.nqueens_solvers import KNOWN_COUNTS, check_arguments

    try:
        variants, notes = _select_variants(args)
        if args.repetitions < 1:
            raise ValueError("--repetitions must be at least 1")
        for n in args.n:
            for lv in args.levels:
                check_arguments(n, min(lv, n))
            if n > len(KNOWN_COUNTS):
                raise ValueError(f"n = {n}: no known count to check against (n <= 14)")
        if any(t < 1 for t in args.threads):
            raise ValueError("--threads must be positive")
    except ValueError as exc:
        print(f"pytfrt bench nqueens: {exc}", flush=True)
        return 1
    for note in notes:
        print(f"note: {note}", flush=True)

    native: _Native | None = None
    if any(v.startswith("native") for v in variants):
        try:
            native = _Native()
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"note: building the C++ references failed, skipped ({exc})", flush=True)
            variants = [v for v in variants if not v.startswith("native")]
    progress(f"preparing the {args.solver} solver ...", args.quiet)
    runners = _Runners(args.solver, native)
    configs = _configurations(args, variants)
    rows: list[Row] = []
    try:
        for v in variants:  # warm up threads, imports and caches on a tiny board
            runners.time_one(v, 6, max(args.threads), min(2, min(args.levels)))
        noop = [] if args.skip_noop else _noop_overheads(runners, args, variants)
        rows = [Row(*config) for config in configs]
        failed = _measure(runners, rows, args.repetitions, args.quiet)
    finally:
        runners.close()
        if native is not None:
            native.close()

    _fill_derived(rows)
    goals = _goals(rows)
    print(_table(rows))
    if noop:
        print(f"\nscheduling cost per task, no-op solver (n = {NOOP_N}, levels = {NOOP_LEVELS}):")
        for entry in noop:
            print(f"  {entry['variant']:<10} T={entry['threads']}: {entry['us_per_task']:.2f} us")
    if goals:
        print("\ngoals (n = 13, 14):")
        for g in goals:
            mark = "met" if g["met"] else "NOT met"
            print(
                f"  {g['goal']}: n={g['n']} T={g['threads']} L={g['levels']}: "
                f"{g['value']} -> {mark}"
            )
    plot_levels = max(args.levels)
    record = {
        "benchmark": "nqueens",
        "machine": machine_info(),
        "settings": {
            "n": args.n,
            "threads": args.threads,
            "levels": args.levels,
            "repetitions": args.repetitions,
            "solver": args.solver,
            "variants": variants,
            "notes": notes,
        },
        "rows": [asdict(r) for r in rows],
        "goals": goals,
        "noop_overhead": noop,
    }
    json_path = args.output_dir / f"{args.name}.json"
    write_json(json_path, record)
    print(f"\nwrote {json_path}")
    if not args.no_plot and rows:
        png_path = args.output_dir / f"{args.name}.png"
        _plot(rows, png_path, plot_levels, args.solver)
        print(f"wrote {png_path}")
    return 1 if failed else 0
