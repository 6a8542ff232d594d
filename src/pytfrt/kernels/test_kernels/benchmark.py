"""``tfrt_test.benchmark`` and ``tfrt_test.sync_benchmark``: run a function repeatedly and print
TFRT's benchmark report (docs/conformance.md, docs/benchmarks.md).

The report is eleven lines prefixed ``BM:<name>:`` -- ``Duration(ns)`` (total wall time of the
measured runs), ``Count``, ``Time Min/50%/95%/99%(ns)``, ``CPU Min/50%/95%/99%(ns)`` and
``CPU utilization(percent)`` (``%e``).  Percentile ``p`` is element ``floor(n * p)`` of the sorted
run times.  Runs continue while fewer than ``max_count + num_warmup_runs`` have started and the
measured wall time is below ``duration_secs``; warm-up runs are not measured.  CPU time is the
process CPU time (C's ``clock()``), wall time a monotonic clock.

The async benchmark runs each execution in a task and starts the next one when the previous
result is available, so executions never overlap; its chain result is available after the
report.  A run that fails (an error result, or any diagnostic emitted while it ran) stops the
benchmark: the failure is reported once, with one more diagnostic naming the benchmark, and the
report covers the runs made so far.  The sync benchmark loops in place inside a ``tfrt.sync``
function.
"""

from __future__ import annotations

import time
from typing import Any

from pytfrt.host.async_value import CHAIN, AsyncValue
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.registry import KernelError, KernelFrame, KernelRegistry, RemainingAttrs, kernel
from pytfrt.kernels.common import print_line
from pytfrt.support.function_kind import FunctionKind

ONE_RESULT_REQUIRED = "Benchmark op requires the input function have exactly one return value"


class BenchmarkStats:
    """Run counting and timing of one benchmark (not thread-safe: runs are serial)."""

    def __init__(self, name: str, num_warmup_runs: int, max_count: int, duration_secs: int):
        self.name = name
        self.num_warmup_runs = num_warmup_runs
        self.max_count = max_count
        self.duration_ns = duration_secs * 1_000_000_000
        self.count = 0
        self.total_wall_ns = 0
        self.total_cpu_ns = 0
        self.wall_times: list[int] = []
        self.cpu_times: list[int] = []
        self._start_wall = 0
        self._start_cpu = 0

    def start_run(self) -> None:
        """Start timing one run."""
        self.count += 1
        self._start_cpu = time.process_time_ns()
        self._start_wall = time.perf_counter_ns()

    def stop_run(self) -> None:
        """Stop timing; warm-up runs are not recorded."""
        if self.count <= self.num_warmup_runs:
            return
        wall = time.perf_counter_ns() - self._start_wall
        cpu = time.process_time_ns() - self._start_cpu
        self.wall_times.append(wall)
        self.cpu_times.append(cpu)
        self.total_wall_ns += wall
        self.total_cpu_ns += cpu

    def more_runs(self) -> bool:
        """Whether another run should start."""
        return (
            self.count < self.max_count + self.num_warmup_runs
            and self.total_wall_ns < self.duration_ns
        )

    def report_lines(self) -> list[str]:
        """The eleven report lines."""
        wall = sorted(self.wall_times)
        cpu = sorted(self.cpu_times)

        def pct(p: float, times: list[int]) -> int:
            return times[int(len(times) * p)] if times else 0

        utilization = self.total_cpu_ns * 100.0 / self.total_wall_ns if self.total_wall_ns else 0.0
        prefix = f"BM:{self.name}:"
        return [
            f"{prefix}Duration(ns): {self.total_wall_ns}",
            f"{prefix}Count: {len(wall)}",
            f"{prefix}Time Min(ns): {wall[0] if wall else 0}",
            f"{prefix}Time 50%(ns): {pct(0.5, wall)}",
            f"{prefix}Time 95%(ns): {pct(0.95, wall)}",
            f"{prefix}Time 99%(ns): {pct(0.99, wall)}",
            f"{prefix}CPU Min(ns): {cpu[0] if cpu else 0}",
            f"{prefix}CPU 50%(ns): {pct(0.5, cpu)}",
            f"{prefix}CPU 95%(ns): {pct(0.95, cpu)}",
            f"{prefix}CPU 99%(ns): {pct(0.99, cpu)}",
            f"{prefix}CPU utilization(percent): {utilization:e}",
        ]

    def summarize(self) -> None:
        """Print the report."""
        for line in self.report_lines():
            print_line(line)


@kernel("tfrt_test.benchmark")
def benchmark(
    frame: KernelFrame, fn: Function, attrs: RemainingAttrs, *args: AsyncValue[Any]
) -> AsyncValue[Any]:
    """Benchmarks ``fn`` (the region); attributes in name order: ``duration_secs``,
    ``max_count``, ``name``, ``num_warmup_runs`` (default 1)."""
    if len(fn.result_types) != 1:
        raise KernelError(ONE_RESULT_REQUIRED)
    if len(attrs) < 3:
        raise KernelError(
            "tfrt_test.benchmark needs duration_secs, max_count and name attributes"
        )
    warmup = int(attrs[3]) if len(attrs) > 3 else 1
    stats = BenchmarkStats(str(attrs[2]), warmup, int(attrs[1]), int(attrs[0]))
    exec_ctx = frame.exec_ctx
    kept = [a.add_ref() for a in args]
    done: AsyncValue[Any] = AsyncValue()

    host = exec_ctx.host

    def start_run() -> None:
        stats.start_run()
        exec_ctx.queue.add_task(run)

    def run() -> None:
        errors_before = host.errors_emitted
        result = fn.execute(exec_ctx, kept)[0]

        def finished() -> None:
            stats.stop_run()
            failed = result.is_error() or host.errors_emitted != errors_before
            result.drop_ref()
            if failed:
                # A failing body fails every run the same way: report it once, not per run.
                frame.emit_error(
                    f"benchmark '{stats.name}' stopped after run {stats.count}: the benchmarked "
                    "function failed"
                )
            elif stats.more_runs():
                start_run()
                return
            stats.summarize()
            for a in kept:
                a.drop_ref()
            done.emplace(CHAIN)

        result.and_then(finished)

    start_run()
    return done


@kernel("tfrt_test.sync_benchmark", sync=True)
def sync_benchmark(
    exec_ctx: ExecutionContext, fn: Function, attrs: RemainingAttrs, *args: Any
) -> None:
    """Benchmarks the sync function ``fn`` (zero results) on ``args``; attributes in name
    order: ``duration_secs``, ``max_count``, ``num_warmup_runs`` (default 1)."""
    if fn.kind is not FunctionKind.SYNC:
        raise KernelError("SyncBenchmark op requires the input function be a sync function")
    if len(fn.result_types) != 0:
        raise KernelError("SyncBenchmark op requires the input function have zero return value")
    if len(fn.argument_types) != len(args):
        raise KernelError(
            "Incorrect number of arguments for the target function for the SyncBenchmark op"
        )
    if len(attrs) < 2:
        raise KernelError("tfrt_test.sync_benchmark needs duration_secs and max_count attributes")
    warmup = int(attrs[2]) if len(attrs) > 2 else 1
    stats = BenchmarkStats(fn.name, warmup, int(attrs[1]), int(attrs[0]))
    values = list(args)
    while stats.more_runs():
        stats.start_run()
        fn.execute_sync(exec_ctx, values)
        stats.stop_run()
    stats.summarize()


def register(registry: KernelRegistry) -> None:
    """Register the benchmark kernels."""
    registry.add(benchmark, sync_benchmark)
