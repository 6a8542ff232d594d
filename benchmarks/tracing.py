"""What tracing costs: the executor with tracing off vs. no tracing code at all, and tracing on.

Workload: one BEF function of N trivial ``tfrt.add.i32`` kernels, as a serial chain
(``c{i+1} = add(c{i}, a)``) and as a fan-out (N independent adds), on the ``s`` queue.

Variants (the same program, the same host):

* ``no tracing code`` -- the async executor's ``_process`` loop recompiled from its own source
  with the per-kernel tracer test removed (a build without the tracing layer);
* ``tracing off``     -- the shipped executor, ``host.tracer = None`` (the default);
* ``default level``   -- a tracer at ``default`` level: functions are traced, kernels are not
  (``bind_invocation`` returns ``None``);
* ``debug, no shapes`` -- every kernel recorded (what ``pytfrt profile`` uses);
* ``debug + shapes``  -- every kernel recorded with argument descriptions (``--trace_file``).

Runs are interleaved (variant after variant inside each repetition, in a rotating order,
each after an untimed untraced run, garbage collection off while timing); the best and median
of ``--repeat`` are kept, so machine noise hits every variant alike; ratios use the medians.

Run: ``.venv/bin/python benchmarks/tracing.py [--n 10000] [--repeat 15]``.  Prints a table
(us/kernel, ratio to ``no tracing code``), writes ``benchmarks/results/tracing.json`` and
``.png``.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import os
import platform
import statistics
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytfrt.bef.program import Function, Kernel, Program
from pytfrt.executor import async_executor, load_program
from pytfrt.host import ExecutionContext, HostContext
from pytfrt.host.tracing import Tracer
from pytfrt.kernel_libraries import builtin_registry
from pytfrt.support.attributes import IntAttr
from pytfrt.support.function_kind import FunctionKind
from pytfrt.tools.bench import save_results

RESULTS = Path(__file__).resolve().parent / "results"

# How the per-kernel tracer test is removed from the executor's hot loop.  If the executor's
# source changes so that a pattern no longer matches, the benchmark stops with a clear error.
STRIP = [
    ("slow = self.tracer is not None", "slow = False"),
    ("if call is None or slow or ", "if call is None or "),
]


def build(shape: str, n: int) -> Program:
    """One function ``f``: two constants then ``n`` adds (serial chain or fan-out)."""
    fn = Function("f", FunctionKind.BEF)
    fn.kernels.append(Kernel("tfrt.constant.i32", [], [0], [("value", IntAttr(1, "i32"))]))
    fn.kernels.append(Kernel("tfrt.constant.i32", [], [1], [("value", IntAttr(1, "i32"))]))
    for i in range(n):
        src = i + 1 if shape == "serial" else 1
        fn.kernels.append(Kernel("tfrt.add.i32", [src, 0], [i + 2]))
    fn.register_types = ["i32"] * (n + 2)
    fn.return_registers = [n + 1]
    fn.result_types = ["i32"]
    program = Program([fn]).finalize()
    from pytfrt.bef.streams import assign_stream_ids

    assign_stream_ids(program)
    return program


def stripped_process() -> Callable[..., Any]:
    """``_Invocation._process`` recompiled without the tracer test (see ``STRIP``)."""
    source = textwrap.dedent(inspect.getsource(async_executor._Invocation._process))
    for old, new in STRIP:
        if old not in source:
            raise SystemExit(f"benchmarks/tracing.py: the executor changed; '{old}' is not in "
                             "_Invocation._process any more (update STRIP)")
        source = source.replace(old, new)
    namespace: dict[str, Any] = {}
    exec(compile(source, "<_process without tracing>", "exec"),  # noqa: S102
         vars(async_executor), namespace)
    return namespace["_process"]  # type: ignore[no-any-return]


@contextmanager
def patched_process(fn: Callable[..., Any] | None) -> Iterator[None]:
    original = async_executor._Invocation._process
    if fn is not None:
        async_executor._Invocation._process = fn  # type: ignore[method-assign]
    try:
        yield
    finally:
        async_executor._Invocation._process = original  # type: ignore[method-assign]


def run_once(host: HostContext, fn: Any, expected: int) -> float:
    gc.collect()
    gc.disable()  # a collection inside one variant's run would be charged to it alone
    try:
        start = time.perf_counter()
        results = fn.execute(ExecutionContext(host.new_request()), [])
        host.await_values(results)
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    assert results[0].get() == expected
    for r in results:
        r.drop_ref()
    return elapsed


VARIANTS: list[tuple[str, Callable[[], Tracer | None], bool]] = [
    ("no tracing code", lambda: None, True),
    ("tracing off", lambda: None, False),
    ("default level", lambda: Tracer("default"), False),
    ("debug, no shapes", lambda: Tracer("debug", capture_shapes=False), False),
    ("debug + shapes", lambda: Tracer("debug", capture_shapes=True), False),
]


def measure(shape: str, n: int, repeat: int) -> dict[str, dict[str, float]]:
    """Per variant: ``best`` and ``median`` microseconds per kernel."""
    program = build(shape, n)
    expected = n + 1 if shape == "serial" else 2
    host = HostContext("s", builtin_registry())
    times: dict[str, list[float]] = {name: [] for name, _, _ in VARIANTS}
    stripped = stripped_process()
    try:
        fn = load_program(program, host).get_function("f")
        run_once(host, fn, expected)  # warm-up
        for rep in range(repeat):
            order = VARIANTS[rep % len(VARIANTS):] + VARIANTS[:rep % len(VARIANTS)]
            for name, make_tracer, strip in order:
                # An untimed untraced run first: the run after a big traced run would otherwise
                # pay for re-growing the heap the tracer's records released.
                run_once(host, fn, expected)
                host.tracer = make_tracer()
                with patched_process(stripped if strip else None):
                    times[name].append(run_once(host, fn, expected))
                host.tracer = None
    finally:
        host.shutdown()
    return {
        name: {"best": min(ts) / n * 1e6, "median": statistics.median(ts) / n * 1e6}
        for name, ts in times.items()
    }


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def plot(results: dict[str, dict[str, dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name, _, _ in VARIANTS]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(results)
    for i, (shape, row) in enumerate(results.items()):
        xs = [j + i * width for j in range(len(names))]
        ax.bar(xs, [row[nm]["median"] for nm in names], width, label=shape)
    ax.set_xticks([j + width * (len(results) - 1) / 2 for j in range(len(names))], names,
                  rotation=15)
    ax.set_ylabel("us per kernel (median of runs)")
    ax.set_title("executor cost per kernel with and without tracing")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    results = {shape: measure(shape, args.n, args.repeat) for shape in ("serial", "fanout")}
    base_name = VARIANTS[0][0]
    print(f"tracing overhead, N = {args.n} kernels, best of {args.repeat} "
          f"({os.cpu_count()} CPUs, {cpu_model()})")
    print("us per kernel (best / median of the repetitions); ratio of medians to "
          f"'{base_name}'")
    print(f"{'variant':<18}" + "".join(f"{s + ' best':>13}{'median':>9}{'ratio':>8}"
                                       for s in results))
    for name, _, _ in VARIANTS:
        cells = "".join(
            f"{row[name]['best']:>13.3f}{row[name]['median']:>9.3f}"
            f"{row[name]['median'] / row[base_name]['median']:>8.3f}"
            for row in results.values()
        )
        print(f"{name:<18}{cells}")
    save_results("tracing", {
        "n": args.n, "repeat": args.repeat, "cpus": os.cpu_count(), "cpu": cpu_model(),
        "date": time.strftime("%Y-%m-%d"), "us_per_kernel": results,
    }, lambda path: plot(results, path), results_dir=RESULTS)


if __name__ == "__main__":
    main()
