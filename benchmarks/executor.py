"""Executor overhead per kernel: TFRT's bef_perf shapes against Python peers (docs/benchmarks.md).

Shapes, N trivial ``tfrt.add.i32`` kernels each (``tfrt_test.sum`` closes the star):

* ``serial``  -- ``c{i+1} = add(c{i}, a)``, a chain of N dependent kernels;
* ``fanout``  -- N independent ``add(c0, a)``, returning the last;
* ``star``    -- the fan-out followed by one ``tfrt_test.sum`` over all N results.

Runners: the async executor on the ``s`` and ``mstd:2`` work queues, a ``tfrt.sync`` function
(serial only: the shape a sync function has), a plain Python loop calling the same kernel
function, ``concurrent.futures`` (one task per kernel), ``asyncio`` tasks, and dask's threaded
scheduler (if installed; the ``bench`` extra).  Plus whole-process start-up of ``bef_executor``
on a small ``.bef``.

Run: ``.venv/bin/python benchmarks/executor.py [--n 10000] [--repeat 5] [--clock wall|cpu]
[--label NAME]``.  Prints a table (us/kernel, ratio to the plain loop), writes
``benchmarks/results/executor[-NAME].json`` and ``.png``.  ``--clock cpu`` times with the CPU
time of the process (``time.process_time``: every thread's, so the ``mstd`` rows include the
workers) instead of the wall clock: on a machine shared with other jobs it measures the
executor's own work, not the time it waited for a core.  To compare two trees, run the script
of one tree with ``PYTHONPATH=<other tree>/src`` and a ``--label``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytfrt.bef.program import Function, Kernel, Program
from pytfrt.executor import load_program
from pytfrt.host import HostContext, KernelRegistry
from pytfrt.kernels import basic, test_kernels
from pytfrt.kernels.basic.integer import add_i32
from pytfrt.kernels.test_kernels.async_kernels import sum_i32
from pytfrt.support.attributes import IntAttr
from pytfrt.support.function_kind import FunctionKind
from pytfrt.tools.bench import save_results


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (``platform.processor()`` is often empty)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


RESULTS = Path(__file__).resolve().parent / "results"


def build(shape: str, n: int, sync: bool = False) -> Program:
    """A one-function Program ``f`` of the given shape (see the module docstring)."""
    add = "tfrt.add_s.i32" if sync else "tfrt.add.i32"
    const = "tfrt.constant_s.i32" if sync else "tfrt.constant.i32"
    fn = Function("f", FunctionKind.SYNC if sync else FunctionKind.BEF)
    fn.kernels.append(Kernel(const, [], [0], [("value", IntAttr(1, "i32"))]))
    fn.kernels.append(Kernel(const, [], [1], [("value", IntAttr(1, "i32"))]))
    for i in range(n):
        src = i + 1 if shape == "serial" else 1
        fn.kernels.append(Kernel(add, [src, 0], [i + 2]))
    last = n + 1
    if shape == "star":
        fn.kernels.append(Kernel("tfrt_test.sum", list(range(2, n + 2)), [n + 2]))
        last = n + 2
    fn.register_types = ["i32"] * (last + 1)
    fn.return_registers = [last]
    fn.result_types = ["i32"]
    program = Program([fn]).finalize()
    try:  # the stream ids a real compilation would give (docs/executor.md)
        from pytfrt.bef.streams import assign_stream_ids

        assign_stream_ids(program)
    except ImportError:
        pass
    return program


CLOCK: Callable[[], float] = time.perf_counter
"""The clock of :func:`best_of` (``--clock``)."""


def best_of(repeat: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = CLOCK()
        run()
        best = min(best, CLOCK() - start)
    return best


# -- peers --------------------------------------------------------------------------------------


def plain_loop(shape: str, n: int) -> int:
    a = c0 = 1
    if shape == "serial":
        c = c0
        for _ in range(n):
            c = add_i32(c, a)
        return c
    outs = [add_i32(c0, a) for _ in range(n)]
    return sum_i32(*outs) if shape == "star" else outs[-1]


def futures_run(pool: concurrent.futures.ThreadPoolExecutor, shape: str, n: int) -> int:
    a = c0 = 1
    if shape == "serial":
        c = c0
        for _ in range(n):
            c = pool.submit(add_i32, c, a).result()
        return c
    futs = [pool.submit(add_i32, c0, a) for _ in range(n)]
    outs = [f.result() for f in futs]
    return pool.submit(sum_i32, *outs).result() if shape == "star" else outs[-1]


async def _asyncio_run(shape: str, n: int) -> int:
    async def add(x: int, y: int) -> int:
        return add_i32(x, y)

    a = c0 = 1
    if shape == "serial":
        c = c0
        for _ in range(n):
            c = await asyncio.create_task(add(c, a))
        return c
    outs = await asyncio.gather(*[asyncio.create_task(add(c0, a)) for _ in range(n)])
    return sum_i32(*outs) if shape == "star" else outs[-1]


def dask_run(shape: str, n: int) -> int:
    import dask

    graph: dict[str, object] = {"a": 1, "c0": 1}
    for i in range(n):
        src = f"c{i}" if shape == "serial" else "c0"
        graph[f"c{i + 1}"] = (add_i32, src, "a")
    key = f"c{n}"
    if shape == "star":
        graph["sum"] = (sum_i32, *[f"c{i + 1}" for i in range(n)])
        key = "sum"
    return dask.threaded.get(graph, key)  # type: ignore[no-any-return]


def startup_seconds(repeat: int) -> float | None:
    """Whole-process ``bef_executor`` on a small .bef (None if the BEF writer is missing)."""
    try:
        from pytfrt.bef.writer import write_bef
    except ImportError:
        return None
    exe = Path(sys.executable).parent / "bef_executor"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "small.bef")
        with open(path, "wb") as fh:
            fh.write(write_bef(build("serial", 10)))
        return best_of(repeat, lambda: subprocess.run([str(exe), path], check=True,
                                                      capture_output=True))


# -- main ---------------------------------------------------------------------------------------


def measure_shape(shape: str, n: int, repeat: int, hosts: dict[str, HostContext],
                  pool: concurrent.futures.ThreadPoolExecutor, have_dask: bool
                  ) -> dict[str, float]:
    """Seconds per run of every runner on one shape (results checked against the loop)."""
    expected = plain_loop(shape, n)
    timings: dict[str, float] = {"python loop": best_of(repeat, lambda: plain_loop(shape, n))}
    for queue, host in hosts.items():
        fn = load_program(build(shape, n), host).get_function("f")
        assert fn is not None

        def run_async(fn: Any = fn, host: HostContext = host) -> None:
            results = fn.execute(host.new_execution_context(), [])
            host.await_values(results)
            host.quiesce()
            assert results[0].get() == expected

        timings[f"executor {queue}"] = best_of(repeat, run_async)
    if shape == "serial":
        sync_fn = load_program(build(shape, n, sync=True), hosts["s"]).get_function("f")
        assert sync_fn is not None
        ctx = hosts["s"].new_execution_context()
        assert sync_fn.execute_sync(ctx, []) == [expected]
        timings["sync function"] = best_of(repeat, lambda: sync_fn.execute_sync(ctx, []))
    timings["concurrent.futures"] = best_of(
        max(1, repeat // 2), lambda: futures_run(pool, shape, n))
    timings["asyncio"] = best_of(max(1, repeat // 2),
                                 lambda: asyncio.run(_asyncio_run(shape, n)))
    if have_dask:
        timings["dask threaded"] = best_of(1, lambda: dask_run(shape, n))
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--label", default="", help="suffix of the result files")
    args = parser.parse_args()
    n, repeat = args.n, args.repeat
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    import pytfrt
    print(f"pytfrt from {Path(pytfrt.__file__).parent}, clock: {args.clock}")
    registry = KernelRegistry()
    registry.add_module(basic)
    registry.add_module(test_kernels)
    rows: list[dict[str, object]] = []
    notes: list[str] = []
    pool = concurrent.futures.ThreadPoolExecutor(2)
    try:
        import dask  # noqa: F401
        have_dask = True
    except ImportError:
        have_dask = False
        notes.append("dask not installed (bench extra): dask column skipped")
    hosts = {q: HostContext(q, registry) for q in ("s", "mstd:2")}
    for shape in ("serial", "fanout", "star"):
        timings = measure_shape(shape, n, repeat, hosts, pool, have_dask)
        base = timings["python loop"]
        for runner, seconds in timings.items():
            rows.append({"shape": shape, "runner": runner, "us_per_kernel": seconds / n * 1e6,
                         "ratio_to_loop": seconds / base})
    for host in hosts.values():
        host.shutdown()
    pool.shutdown()
    startup = startup_seconds(3)
    print(f"{'shape':8} {'runner':20} {'us/kernel':>10} {'x loop':>8}")
    for row in rows:
        print(f"{row['shape']:8} {row['runner']:20} {row['us_per_kernel']:10.3f} "
              f"{row['ratio_to_loop']:8.1f}")
    if startup is not None:
        print(f"bef_executor start-up on a small .bef (whole process): {startup:.3f} s")
    for note in notes:
        print("note:", note)
    meta = {"n": n, "repeat": repeat, "clock": args.clock,
            "tree": str(Path(pytfrt.__file__).parent), "nproc": os.cpu_count(),
            "machine": cpu_model(),
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"),
            "startup_s": startup, "notes": notes, "rows": rows}
    stem = f"executor-{args.label}" if args.label else "executor"
    save_results(stem, meta, lambda path: plot(rows, path), newline=False, results_dir=RESULTS)


def plot(rows: list[dict[str, object]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib not installed, no plot")
        return
    shapes = ["serial", "fanout", "star"]
    runners = list(dict.fromkeys(str(r["runner"]) for r in rows))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(runners)
    for j, runner in enumerate(runners):
        values = [next((float(r["us_per_kernel"]) for r in rows  # type: ignore[arg-type]
                        if r["shape"] == s and r["runner"] == runner), 0.0) for s in shapes]
        ax.bar([i + j * width for i in range(len(shapes))], values, width, label=runner)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(shapes))], shapes)
    ax.set_yscale("log")
    ax.set_ylabel("µs per kernel (log)")
    ax.set_title("Executor overhead per trivial kernel")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
