"""No Python-sized limits: million-iteration loops, 10,000-call chains, 10,000 nested ifs.

Each case runs with a closed-form oracle and reports its wall time; the loops and call chains
run with Python's recursion limit lowered to ``FRAME_MARGIN`` frames above the caller (a loop
or call chain that recursed per iteration would need a million frames), on every work queue
type.  The nesting case times each phase (parse, verify, lower, BEF write, BEF read, run).  Loops
and calls run twice: on the dataflow executor (``whole_function=False``, the path of programs
with asynchronous kernels) and by default (whole-function code where a function qualifies).
The suite tests 100,000 iterations and 1,000 levels (``tests/robustness/``); these are the
sizes too slow for it.

Run: ``.venv/bin/python benchmarks/limits.py [--iterations 1000000] [--calls 10000]
[--depth 10000]``.  Prints a table, writes ``benchmarks/results/limits.json`` and
``limits.png``; recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "robustness"))

from robust_harness import (  # noqa: E402
    QUEUES,
    call_chain,
    nested_ifs,
    probe_i32,
    repeat_loop,
    run_program,
    while_loop,
)

from pytfrt.bef.program import Program  # noqa: E402
from pytfrt.bef.reader import read_bef  # noqa: E402
from pytfrt.bef.writer import write_bef  # noqa: E402
from pytfrt.mlir import compile_mlir  # noqa: E402
from pytfrt.mlir.api import lower, parse_source, verify_module  # noqa: E402
from pytfrt.mlir.walk import stack_depth  # noqa: E402
from pytfrt.tools.bench import pyplot, save_results  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FRAME_MARGIN = 600


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()``'s value (or its exception, as text) and its wall time."""
    start = time.perf_counter()
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - recorded as a wrong result
        value = f"<<{type(exc).__name__}: {str(exc)[:200]}>>"
    return value, time.perf_counter() - start


def run_results(program: Program, queue: str, whole_function: bool | None = None) -> list[Any]:
    return run_program(program, queue, extra_kernels=(probe_i32,),
                       whole_function=whole_function).results


def low_stack(fn: Callable[[], Any]) -> Any:
    """``fn()`` with the recursion limit FRAME_MARGIN frames above the caller."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(stack_depth() + FRAME_MARGIN)
    try:
        return fn()
    finally:
        sys.setrecursionlimit(old)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=1_000_000)
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=10_000)
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []

    def record(case: str, queue: str, got: Any, want: Any, seconds: float) -> None:
        verdict = "ok" if got == want else f"WRONG ({got!r})"
        rows.append({"case": case, "queue": queue, "verdict": verdict,
                     "seconds": round(seconds, 2)})
        print(f"{case:<48} {queue:<9} {verdict:<6} {seconds:8.1f} s", flush=True)

    n = args.iterations
    loops = {
        f"tfrt.while, {n:,} iterations": (while_loop(n), n + 1),
        f"tfrt.repeat.i32, {n:,} iterations": (repeat_loop(n), n),
    }
    for case, (text, want) in loops.items():
        loop = compile_mlir(text, "loop.mlir")
        for mode, whole_function in (("dataflow", False), ("default", None)):
            for queue in QUEUES:
                result, seconds = timed(partial(
                    low_stack, partial(run_results, loop, queue, whole_function)))
                record(f"{case} ({mode})", queue, result, [want], seconds)

    calls = f"{args.calls:,} distinct tfrt.call"
    start = time.perf_counter()
    chain = compile_mlir(call_chain(args.calls), "chain.mlir")
    record(f"{calls}: compile", "-", "ok", "ok", time.perf_counter() - start)
    for mode, whole_function in (("dataflow", False), ("default", None)):
        for queue in QUEUES:
            result, seconds = timed(partial(
                low_stack, partial(run_results, chain, queue, whole_function)))
            record(f"{calls}: run ({mode})", queue, result, [args.calls + 2], seconds)

    d = args.depth
    ifs = f"{d:,} nested tfrt.if"
    text = nested_ifs(d)
    start = time.perf_counter()
    parsed = parse_source(text, "deep.mlir")
    record(f"{ifs}: parse", "-", "ok", "ok", time.perf_counter() - start)
    start = time.perf_counter()
    verify_module(parsed)
    record(f"{ifs}: verify", "-", "ok", "ok", time.perf_counter() - start)
    start = time.perf_counter()
    program = lower(parsed)
    record(f"{ifs}: lower", "-", len(program.functions), 2 * d + 1, time.perf_counter() - start)
    del parsed
    start = time.perf_counter()
    data = write_bef(program)
    record(f"{ifs}: BEF write", "-", "ok", "ok", time.perf_counter() - start)
    start = time.perf_counter()
    again = read_bef(data)
    record(f"{ifs}: BEF read", "-", len(again.functions), 2 * d + 1, time.perf_counter() - start)
    for queue in QUEUES:
        result, seconds = timed(partial(run_results, again, queue))
        record(f"{ifs}: run", queue, result, [2], seconds)

    meta: dict[str, Any] = {"command": " ".join(["benchmarks/limits.py", *sys.argv[1:]]),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_average": os.getloadavg(), "frame_margin": FRAME_MARGIN}
    def draw(path: Path) -> None:
        plt = pyplot()
        if plt is None:
            return
        labels = [f"{r['case']} [{r['queue']}]" for r in rows]
        fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1))
        ax.barh(labels, [r["seconds"] for r in rows],
                color=["tab:blue" if r["verdict"] == "ok" else "tab:red" for r in rows])
        ax.invert_yaxis()
        ax.set_xlabel("seconds (wall)")
        ax.set_title(f"pytfrt limits ({meta['date']}, load {meta['load_average'][0]:.1f})")
        fig.tight_layout()
        fig.savefig(path, dpi=100)

    save_results("limits", {"meta": meta, "rows": rows}, draw, indent=1, newline=False,
                 results_dir=RESULTS)
    bad = [r for r in rows if r["verdict"] != "ok"]
    print(f"{len(rows)} cases, {len(bad)} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
