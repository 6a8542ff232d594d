"""``pytfrt profile``: run a BEF function N times under the tracer and print a kernel profile.

Usage::

    pytfrt profile program.mlir [--function F] [-n N] [--warmup W]
                   [--work_queue_type s|mstd:N] [--kernels MODULE]... [--top K]
                   [--plot out.png] [--trace_file out.json]

The table has one row per kernel (and per work-queue task) name: how many times it ran, its
total and mean *self* time (nested kernels -- a ``tfrt.call`` body, say -- are subtracted),
its share of the runs' wall-clock time, and its mean queueing delay (start minus the moment its
last operand became available, or for a task the moment it was enqueued).  A thread summary
follows: per track, how many kernels/tasks it ran and how busy it was.  ``--plot`` draws the
timeline of the last run with matplotlib (threads on the y axis, kernels as bars);
``--trace_file`` writes every run as Chrome/Perfetto trace-event JSON.

Errors (bad file, unknown function, a function that takes arguments) are one line on stderr
and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytfrt.host.trace_events import Slice, Trace

PROG = "pytfrt profile"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's options (see the module docstring)."""
    parser.add_argument("program", help="an .mlir or .bef file")
    parser.add_argument("--function", "--functions", dest="function", default=None,
                        help="the function to run (default: the only zero-argument one)")
    parser.add_argument("-n", "--runs", type=int, default=10, help="traced runs (default 10)")
    parser.add_argument("--warmup", type=int, default=1, help="untraced runs first (default 1)")
    parser.add_argument("--work_queue_type", "--work-queue-type", default="s",
                        help="s or mstd[:N[,M]] (default s)")
    parser.add_argument("--kernels", action="append", default=[],
                        help="extra kernel module or file.py (repeatable)")
    parser.add_argument("--top", type=int, default=25, help="rows in the table (default 25)")
    parser.add_argument("--plot", default=None, help="draw the last run's timeline here (PNG)")
    parser.add_argument("--trace_file", "--trace-file", default=None,
                        help="also write the trace-event JSON here")


@dataclass
class Row:
    """Aggregated statistics of one kernel or task name."""

    name: str
    category: str
    count: int = 0
    self_ns: int = 0
    total_ns: int = 0
    delay_ns: int = 0


def aggregate(slices: list[Slice]) -> list[Row]:
    """One :class:`Row` per (name, category) of kernel and task slices, by self time desc."""
    rows: dict[tuple[str, str], Row] = {}
    for s in slices:
        if s.category not in ("kernel", "task"):
            continue
        row = rows.get((s.name, s.category))
        if row is None:
            row = rows[(s.name, s.category)] = Row(s.name, s.category)
        row.count += 1
        row.self_ns += s.self_time
        row.total_ns += s.duration
        row.delay_ns += s.queue_delay
    return sorted(rows.values(), key=lambda r: (-r.self_ns, r.name))


def format_table(rows: list[Row], wall_ns: int, top: int) -> list[str]:
    """The profile table as text lines."""
    width = max([len(r.name) for r in rows[:top]] + [len("name")])
    lines = [
        f"{'name':<{width}}  {'kind':<6} {'count':>8} {'self ms':>10} {'incl ms':>10} "
        f"{'mean us':>9} {'share':>7} {'queue us':>9}",
    ]
    lines.append("-" * len(lines[0]))
    for r in rows[:top]:
        share = 100.0 * r.self_ns / wall_ns if wall_ns else 0.0
        lines.append(
            f"{r.name:<{width}}  {r.category:<6} {r.count:>8} {r.self_ns / 1e6:>10.3f} "
            f"{r.total_ns / 1e6:>10.3f} {r.self_ns / r.count / 1e3:>9.2f} {share:>6.1f}% "
            f"{r.delay_ns / r.count / 1e3:>9.2f}"
        )
    if len(rows) > top:
        rest = rows[top:]
        lines.append(f"... {len(rest)} more names, {sum(r.self_ns for r in rest) / 1e6:.3f} ms")
    return lines


def thread_summary(trace: Trace, wall_ns: int) -> list[str]:
    """Per thread: kernels and tasks run, and busy time (union of their slices) as a share."""
    counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for s in trace.slices:
        if s.category in ("kernel", "task"):
            counts[s.tid][s.category] += 1
            spans[s.tid].append((s.start, s.end))
    lines = [f"{'thread':<26} {'kernels':>8} {'tasks':>9} {'busy':>7}"]
    for tid, name in trace.threads:
        c = counts.get(tid, {})
        busy = _union_length(spans.get(tid, []))
        share = 100.0 * busy / wall_ns if wall_ns else 0.0
        lines.append(f"{name:<26} {c.get('kernel', 0):>8} {c.get('task', 0):>9} {share:>6.1f}%")
    return lines


def _union_length(spans: list[tuple[int, int]]) -> int:
    """Total length covered by possibly nested or overlapping intervals."""
    total = 0
    end = None
    for a, b in sorted(spans):
        if end is None or a >= end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def plot_timeline(trace: Trace, window: tuple[int, int], path: str, title: str) -> None:
    """Draw the kernel and task slices inside ``window`` (ns) as bars, one row per thread.

    The eight names with the most self time get their own colour (legend); nested slices are
    drawn thinner on top of their parents.  Needs matplotlib (imported here, lazily).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lo, hi = window
    unit, scale = ("ms", 1e6) if hi - lo > 10_000_000 else ("us", 1e3)
    chosen = [s for s in trace.slices
              if s.category in ("kernel", "task") and s.start >= lo and s.end <= hi]
    top = [r.name for r in aggregate(chosen)[:8]]
    colours = {name: plt.get_cmap("tab10")(i) for i, name in enumerate(top)}
    rows = {tid: i for i, (tid, _) in enumerate(trace.threads)}
    fig, ax = plt.subplots(figsize=(12, max(3.0, 1.2 + 0.7 * len(rows))))
    # One bar collection per (thread, depth, colour): fast even for 100k slices.
    groups: dict[tuple[int, int, str], list[tuple[float, float]]] = defaultdict(list)
    for s in chosen:
        key = s.name if s.name in colours else ""
        groups[(s.tid, min(s.depth, 4), key)].append(
            ((s.start - lo) / scale, max(s.duration / scale, 1e-6))
        )
    grey = (0.6, 0.6, 0.6, 1.0)
    for (tid, depth, key), bars in sorted(groups.items(), key=lambda g: g[0][1]):
        height = 0.8 - 0.15 * depth
        ax.broken_barh(bars, (rows[tid] - height / 2, height),
                       facecolors=colours.get(key, grey), edgecolors="none")
    ax.set_yticks(list(rows.values()), [name for _, name in trace.threads])
    ax.set_xlabel(f"time since the start of the run ({unit})")
    ax.set_xlim(0, (hi - lo) / scale)
    ax.set_title(f"timeline of one run: {title}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    if handles:
        ax.legend(handles, list(colours), loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """Run the profile (see the module docstring); returns the exit status."""
    from pytfrt.executor import LoadError, load_program
    from pytfrt.host import ExecutionContext, HostContext, ResourceContext
    from pytfrt.host.kernel_libraries import load_kernels
    from pytfrt.host.registry import RegistryError
    from pytfrt.host.tracing import Tracer
    from pytfrt.kernel_libraries import builtin_registry
    from pytfrt.tools.bef_executor import UsageError, read_program

    if args.runs < 1 or args.warmup < 0:
        return _fail("--runs must be at least 1 and --warmup at least 0")
    try:
        program = read_program(args.program)
    except UsageError as exc:
        return _fail(str(exc).removeprefix("bef_executor: "))
    try:
        host = HostContext(args.work_queue_type, builtin_registry(), _print_diagnostic)
    except (ValueError, RegistryError) as exc:
        return _fail(str(exc))
    try:
        for spec in args.kernels:
            load_kernels(host.registry, spec)
        bef = load_program(program, host)
        fn = _choose_function(bef, args.function)
        if isinstance(fn, str):
            return _fail(fn)

        def once() -> None:
            ctx = ExecutionContext(host.new_request(ResourceContext()))
            results = fn.execute(ctx, [])
            host.await_values(results)
            host.quiesce()
            for r in results:
                r.drop_ref()

        for _ in range(args.warmup):
            once()
        tracer = Tracer("debug", trace_kernels=True, capture_shapes=False,
                        process_name=f"pytfrt profile {fn.name}")
        host.tracer = tracer
        windows: list[tuple[int, int]] = []
        for i in range(args.runs):
            start = perf_counter_ns()
            with tracer.scope(f"Run {i}"):
                once()
            windows.append((start - tracer.origin_ns, perf_counter_ns() - tracer.origin_ns))
        host.tracer = None
    except (LoadError, RegistryError) as exc:
        return _fail(str(exc) or "the program could not be loaded")
    finally:
        host.shutdown()
    trace = tracer.snapshot()
    wall = sum(b - a for a, b in windows)
    rows = aggregate(trace.slices)
    print(f"profile of '{fn.name}' in {args.program}: {args.runs} runs on the "
          f"'{args.work_queue_type}' queue, {wall / 1e6 / args.runs:.3f} ms per run "
          f"(min {min(b - a for a, b in windows) / 1e6:.3f} ms)")
    print()
    for line in format_table(rows, wall, args.top):
        print(line)
    print()
    for line in thread_summary(trace, wall):
        print(line)
    if args.trace_file:
        from pytfrt.host.trace_events import write_chrome_trace

        write_chrome_trace(trace, args.trace_file)
        print(f"trace written to {args.trace_file}")
    if args.plot:
        plot_timeline(trace, windows[-1], args.plot, f"{fn.name} ({args.work_queue_type})")
        print(f"timeline written to {args.plot}")
    return 0


def _choose_function(bef: Any, name: str | None) -> Any:
    """The function to run, or an error message."""
    if name is not None:
        fn = bef.get_function(name)
        if fn is None:
            return f"couldn't find function {name}"
        if fn.num_arguments:
            return f"function '{name}' takes arguments; only zero-argument functions run"
        return fn
    candidates = [f for f in bef.functions if f.name and not f.num_arguments]
    if len(candidates) != 1:
        names = ", ".join(f.name for f in candidates) or "none"
        return f"choose a function with --function (zero-argument functions: {names})"
    return candidates[0]


def _print_diagnostic(diag: Any) -> None:
    print(f"{diag.location}: runtime error: {diag.message}", file=sys.stderr)


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 1
