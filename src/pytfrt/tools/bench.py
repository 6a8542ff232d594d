"""``pytfrt bench <name>``: benchmark harnesses, one subcommand per benchmark.

Each benchmark lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; :data:`BENCHMARKS` maps its name to that module (imported only to build
the chosen command line), so adding a benchmark is one line here plus one module.  The helpers
below are shared by the harnesses: machine description, medians, an aligned text table, and
writing the JSON record.

Conventions every harness follows (``docs/benchmarks.md``): compare against peers measured in
the same run, report medians over repetitions, print a table, save JSON + a PNG plot under
``benchmarks/results/``, and show progress on stderr (lines, and :func:`progress_bar`).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytfrt import config

BENCHMARKS: dict[str, tuple[str, str]] = {
    "nqueens": (
        "pytfrt.tools.bench_nqueens",
        "N-Queens task scheduling: AsyncValue runtime vs task-queue pool, ThreadPoolExecutor, "
        "dask, C++",
    ),
    "models": (
        "pytfrt.tools.bench_models",
        "Model zoo (ResNet-50, MobileNetV3, EfficientNet-B0, Transformer, Keras ResNet50): "
        "pytfrt vs ONNX Runtime, tf.function, TF eager, PyTorch eager",
    ),
    "serve": (
        "pytfrt.tools.bench_serve",
        "pytfrt serve under closed-loop HTTP load: pytfrt vs TensorFlow and ONNX Runtime "
        "backends (ResNet-50, MLP), soak with memory",
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-parser per benchmark, filled by that benchmark's module."""
    sub = parser.add_subparsers(dest="benchmark", metavar="NAME", required=True)
    for name, (module_name, help_text) in BENCHMARKS.items():
        bench_parser = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module_name).add_arguments(bench_parser)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark chosen on the command line; returns the exit status."""
    module_name, _ = BENCHMARKS[args.benchmark]
    return int(importlib.import_module(module_name).run(args))


# -- helpers shared by the harnesses ---------------------------------------------------------


class KernelTimers:
    """Wall and process-CPU time per kernel of the CPU runtime's table, for a profile.

    :meth:`install` wraps every compute function of
    :func:`pytfrt.backends.cpu.graph_kernels.graph_ops` (and the versions a kernel binds to
    a model's constants) with timers; it must run before the first compile (the ``tg.*``
    kernels are made from the table when their library loads).  ``totals``, ``cpu`` and
    ``counts`` are keyed by op name; :meth:`clear` starts over (after a warm-up call), and
    :meth:`report` gives the per-op figures per call.  Not thread-safe: one profile per
    process.
    """

    def __init__(self) -> None:
        from collections import defaultdict

        self.totals: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def install(self) -> None:
        from pytfrt.backends.cpu.graph_kernels import graph_ops

        table = graph_ops()
        for key, fn in list(table.items()):
            table[key] = self._wrap(key, fn)

    def _wrap(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        import functools
        import time

        clock, cpu_clock = time.perf_counter, time.process_time

        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            c0 = cpu_clock()
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                self.totals[key] += clock() - t0
                self.cpu[key] += cpu_clock() - c0
                self.counts[key] += 1

        specialize = getattr(fn, "specialize", None)
        if specialize is not None:  # the versions bound to constants (conv plans, dense weights)
            def timed_specialize(*a: Any, **k: Any) -> Any:
                bound = specialize(*a, **k)
                return None if bound is None else self._wrap(key, bound)

            timed.specialize = timed_specialize  # type: ignore[attr-defined]
        return timed

    def clear(self) -> None:
        self.totals.clear()
        self.cpu.clear()
        self.counts.clear()

    def report(self, calls: int) -> dict[str, Any]:
        """Per call over ``calls`` calls: ``in_ops_ms``, ``in_ops_cpu_ms``, ``kernels`` (kernel
        calls) and ``per_op`` (``ms_per_call``, ``cpu_ms_per_call``, ``calls_per_call``,
        largest CPU first)."""
        n = max(calls, 1)
        return {
            "in_ops_ms": sum(self.totals.values()) / n * 1e3,
            "in_ops_cpu_ms": sum(self.cpu.values()) / n * 1e3,
            "kernels": sum(self.counts.values()) / n,
            "per_op": {
                k: {
                    "ms_per_call": self.totals[k] / n * 1e3,
                    "cpu_ms_per_call": self.cpu[k] / n * 1e3,
                    "calls_per_call": self.counts[k] / n,
                }
                for k in sorted(self.cpu, key=lambda k: -self.cpu[k])
            },
        }


def machine_info() -> dict[str, Any]:
    """CPU count and model, Python and platform, and the date: the context of a figure."""
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def median(values: Sequence[float]) -> float:
    """The median of a non-empty sequence."""
    return float(statistics.median(values))


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned plain-text table (numbers right-aligned, text left-aligned)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [
        all(_is_number(r[i]) for r in rows if r[i] not in (None, "", "-"))
        for i in range(len(headers))
    ]

    def line(row: Sequence[str]) -> str:
        parts = [
            cell.rjust(w) if num else cell.ljust(w)
            for cell, w, num in zip(row, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out.extend(line(row) for row in cells[1:])
    return "\n".join(out)


def _is_number(value: Any) -> bool:
    if isinstance(value, int | float):
        return True
    try:
        float(str(value).rstrip("x"))
    except ValueError:
        return False
    return True


def write_json(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` as indented JSON, creating the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


RESULTS_DIR = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
"""Where the benchmark scripts save their JSON and PNG files (``benchmarks/results``)."""


def save_results(stem: str | Path, record: Any, plot: Callable[[Path], Any] | None = None, *,
                 indent: int | None = 2, newline: bool = True,
                 results_dir: Path = RESULTS_DIR, quiet: bool = False) -> Path:
    """The shared ending of a benchmark script: write ``<stem>.json``, plot ``<stem>.png``.

    Args:
        stem: the file name without extension, relative to ``results_dir`` (or absolute).
        record: the JSON record (written with ``json.dumps(record, indent=indent)``, plus a
            final newline if ``newline``, so existing result files keep their exact form).
        plot: called with the PNG path to draw the figure (skipped when ``None``).
        results_dir: the directory, created if missing.
        quiet: do not print the ``wrote ...`` line.

    Returns:
        The JSON path.  Errors writing the files propagate (``OSError``).
    """
    base = results_dir / stem
    base.parent.mkdir(parents=True, exist_ok=True)
    json_path = base.parent / (base.name + ".json")
    json_path.write_text(json.dumps(record, indent=indent) + ("\n" if newline else ""),
                         encoding="utf-8")
    written = [str(json_path)]
    if plot is not None:
        png_path = base.parent / (base.name + ".png")
        before = png_path.stat().st_mtime_ns if png_path.exists() else None
        plot(png_path)
        if png_path.exists() and png_path.stat().st_mtime_ns != before:
            written.append(str(png_path))  # only if the plot wrote it (matplotlib present)
    if not quiet:
        print("wrote " + " and ".join(written))
    return json_path


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or ``None`` (with a hint on
    stderr) when matplotlib is not installed -- the benchmarks then save JSON only."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no PNG (pip install -e '.[bench]')", file=sys.stderr)
        return None
    return plt


def barh_plot(labels: Sequence[str], values: Sequence[float], xlabel: str,
              size: tuple[float, float] = (7, 3.5),
              line: float | None = None) -> Callable[[Path], None]:
    """A ``plot(path)`` for :func:`save_results`: horizontal bars of ``values``, the first
    label on top (``line``: a vertical reference line there, e.g. a ratio of 1)."""

    def plot(path: Path) -> None:
        plt = pyplot()
        if plt is None:
            return
        fig, ax = plt.subplots(figsize=size)
        ax.barh(list(labels), list(values))
        if line is not None:
            ax.axvline(line, color="gray", linewidth=0.8)
        ax.set_xlabel(xlabel)
        ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)

    return plot


def progress(message: str, quiet: bool = False) -> None:
    """Print a progress line to stderr (flushed) unless ``quiet`` (above any progress bar)."""
    if quiet:
        return
    tqdm = sys.modules.get("tqdm")
    if tqdm is not None and getattr(tqdm.tqdm, "_instances", None):
        tqdm.tqdm.write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr, flush=True)


def show_bars() -> bool:
    """Whether :func:`progress_bar` draws: standard error is a terminal, or
    ``PYTFRT_PROGRESS=1`` (``0`` turns the bars off on a terminal too)."""
    setting = config.choice("PYTFRT_PROGRESS")
    return setting == "1" or (setting == "auto" and sys.stderr.isatty())


def progress_bar(items: Any, desc: str, quiet: bool = False, total: int | None = None,
                 unit: str = "it") -> Any:
    """``items``, iterated under a tqdm progress bar on stderr (``desc``, count, rate, time
    left) when :func:`show_bars` and not ``quiet``; otherwise ``items`` itself.

    The bar never goes to standard output (where harnesses print tables and JSON) and is
    erased when the loop ends; :func:`progress` lines print above it.  Without tqdm (the
    ``bench`` extra) there is no bar."""
    if quiet or not show_bars():
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    tqdm.monitor_interval = 0  # no monitor thread next to what is being timed
    return tqdm(items, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False,
                dynamic_ncols=True)


def load_harness(filename: str) -> Any:
    """The module ``benchmarks/<filename>`` of the source tree, or ``None`` outside a checkout.

    Harnesses live in ``benchmarks/`` (not part of the installed package); their ``pytfrt
    bench`` subcommands load them by path with this function (cached in ``sys.modules``).
    """
    import importlib.util

    name = "pytfrt_bench_" + Path(filename).stem
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[3] / "benchmarks" / filename
    spec = importlib.util.spec_from_file_location(name, path) if path.is_file() else None
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def add_harness_arguments(filename: str, parser: argparse.ArgumentParser) -> None:
    """Let the harness ``benchmarks/<filename>`` fill ``parser`` (nothing outside a checkout)."""
    harness = load_harness(filename)
    if harness is not None:
        harness.add_arguments(parser)


def run_harness(command: str, filename: str, args: argparse.Namespace) -> int:
    """Run ``benchmarks/<filename>``; outside a source checkout say so and return 2.

    The ``pytfrt bench <command>`` modules are thin shims over these two functions.
    """
    harness = load_harness(filename)
    if harness is None:
        print(
            f"pytfrt bench {command}: benchmarks/{filename} not found -- the benchmarks run from "
            "a pytfrt source checkout",
            file=sys.stderr,
        )
        return 2
    return int(harness.run(args))
