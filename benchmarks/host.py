"""Host runtime benchmark: AsyncValue and work-queue round trips next to their stdlib peers.

Measured in one run, each as the median over several repetitions (the machine is noisy):

* ``AsyncValue`` round trip -- create, ``and_then``, ``emplace``, ``get``;
  peers: ``concurrent.futures.Future`` (create, ``add_done_callback``, ``set_result``,
  ``result``) and an ``asyncio`` future resolved through ``call_soon`` and awaited.
* ``enqueue_work`` round trip (enqueue + ``await_values`` + ``get``) on the ``s`` and
  ``mstd:2`` queues; peer: ``ThreadPoolExecutor(2).submit(f).result()``.
* Batches of 1000 tasks (enqueue all, then wait for all) on ``s``, ``mstd:2`` and the pool.

Prints a table (us/op and the ratio to the AsyncValue round trip), saves
``benchmarks/results/host.json`` and ``host.png``.  Run: ``python benchmarks/host.py``
(``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytfrt.host import AsyncValue, HostContext
from pytfrt.tools.bench import pyplot, save_results

RESULTS = Path(__file__).resolve().parent / "results"


def _noop() -> None:
    pass


def _one() -> int:
    return 1


# -- the measured loops: each returns the seconds for n operations ------------------------------


def asyncvalue_round_trip(n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        av: AsyncValue[int] = AsyncValue()
        av.and_then(_noop)
        av.emplace(i)
        av.get()
    return time.perf_counter() - start


def future_round_trip(n: int) -> float:
    future_cls = concurrent.futures.Future

    def callback(_: concurrent.futures.Future[int]) -> None:
        pass

    start = time.perf_counter()
    for i in range(n):
        f: concurrent.futures.Future[int] = future_cls()
        f.add_done_callback(callback)
        f.set_result(i)
        f.result()
    return time.perf_counter() - start


def asyncio_round_trip(n: int) -> float:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        for i in range(n):
            fut = loop.create_future()
            loop.call_soon(fut.set_result, i)
            await fut
        return time.perf_counter() - start

    return asyncio.run(main())


def enqueue_round_trip(host: HostContext) -> Callable[[int], float]:
    def run(n: int) -> float:
        enqueue, wait = host.enqueue_work, host.await_values
        start = time.perf_counter()
        for _ in range(n):
            av = enqueue(_one)
            wait([av])
            av.get()
        return time.perf_counter() - start

    return run


def pool_round_trip(pool: concurrent.futures.ThreadPoolExecutor) -> Callable[[int], float]:
    def run(n: int) -> float:
        submit = pool.submit
        start = time.perf_counter()
        for _ in range(n):
            submit(_one).result()
        return time.perf_counter() - start

    return run


BATCH = 1000


def enqueue_batch(host: HostContext) -> Callable[[int], float]:
    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n // BATCH):
            values = [host.enqueue_work(_one) for _ in range(BATCH)]
            host.await_values(values)
        return time.perf_counter() - start

    return run


def pool_batch(pool: concurrent.futures.ThreadPoolExecutor) -> Callable[[int], float]:
    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n // BATCH):
            futures = [pool.submit(_one) for _ in range(BATCH)]
            concurrent.futures.wait(futures)
        return time.perf_counter() - start

    return run


# -- driver -------------------------------------------------------------------------------------


def summarize(per_op: list[float], n: int) -> dict[str, Any]:
    """Median and spread of per-operation times (us)."""
    return {
        "n": n,
        "repeat": len(per_op),
        "median_us": statistics.median(per_op),
        "min_us": min(per_op),
        "max_us": max(per_op),
        "samples_us": per_op,
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_all(quick: bool, repeat: int) -> list[dict[str, Any]]:
    scale = 10 if quick else 1
    cheap, handoff, batch = 50_000 // scale, 3_000 // scale, 20_000 // scale
    s_host = HostContext("s")
    m_host = HostContext("mstd:2")
    pool = concurrent.futures.ThreadPoolExecutor(2)
    cases: list[tuple[str, str, Callable[[int], float], int]] = [
        ("round trip", "AsyncValue (create, and_then, emplace, get)", asyncvalue_round_trip, cheap),
        ("round trip", "concurrent.futures.Future (create, callback, set, result)",
         future_round_trip, cheap),
        ("round trip", "asyncio future + call_soon + await", asyncio_round_trip, cheap),
        ("enqueue + await", "HostContext('s').enqueue_work", enqueue_round_trip(s_host), cheap),
        ("enqueue + await", "HostContext('mstd:2').enqueue_work", enqueue_round_trip(m_host),
         handoff),
        ("enqueue + await", "ThreadPoolExecutor(2).submit().result()", pool_round_trip(pool),
         handoff),
        ("batch of 1000", "HostContext('s'): enqueue all, await all", enqueue_batch(s_host), batch),
        ("batch of 1000", "HostContext('mstd:2'): enqueue all, await all", enqueue_batch(m_host),
         batch),
        ("batch of 1000", "ThreadPoolExecutor(2): submit all, wait all", pool_batch(pool), batch),
    ]
    # Round-robin: every repetition measures every case once, so slow phases of a noisy
    # machine hit all cases alike; ratios are medians of same-repetition pairs.
    samples: list[list[float]] = [[] for _ in cases]
    try:
        for _, _, fn, n in cases:
            fn(max(BATCH, n // 10))  # warm-up
        for rep in range(repeat):
            for i, (_, _, fn, n) in enumerate(cases):
                gc.collect()
                samples[i].append(fn(n) / n * 1e6)
            print(f"  repetition {rep + 1}/{repeat} done", file=sys.stderr)
    finally:
        s_host.shutdown()
        m_host.shutdown()
        pool.shutdown()
    rows = []
    for (group, name, _, n), per_op in zip(cases, samples, strict=True):
        row = {"group": group, "name": name, **summarize(per_op, n)}
        row["ratio_vs_asyncvalue"] = statistics.median(
            x / base for x, base in zip(per_op, samples[0], strict=True)
        )
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'group':<16} {'what':<58} {'us/op':>9} {'min':>8} {'max':>8} {'x AV':>8}")
    print("(us/op: median of the repetitions; x AV: median ratio to the AsyncValue round trip "
          "measured in the same repetition)")
    for r in rows:
        print(
            f"{r['group']:<16} {r['name']:<58} {r['median_us']:9.3f} {r['min_us']:8.3f} "
            f"{r['max_us']:8.3f} {r['ratio_vs_asyncvalue']:8.1f}"
        )
    print(f"\nAsyncValue round trip is {rows[1]['ratio_vs_asyncvalue']:.1f}x cheaper than a "
          "concurrent.futures.Future round trip (goal >= 5x)")


def save(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    meta = {
        "command": "python benchmarks/host.py" + (" --quick" if args.quick else ""),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
    }

    def draw(path: Path) -> None:
        plt = pyplot()
        if plt is None:
            return
        fig, ax = plt.subplots(figsize=(10, 5))
        colors = ["tab:blue" if r["name"].startswith(("AsyncValue", "HostContext")) else "tab:gray"
                  for r in rows]
        ax.barh([r["name"] for r in rows], [r["median_us"] for r in rows], color=colors)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_xlabel("microseconds per operation (median, log scale)")
        ax.set_title(f"pytfrt host runtime vs stdlib peers ({meta['nproc']} cores, {meta['cpu']})")
        for i, r in enumerate(rows):
            ax.text(r["median_us"], i, f" {r['median_us']:.2f}", va="center", fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)

    save_results("host", {"meta": meta, "rows": rows}, draw, results_dir=RESULTS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer operations (smoke run)")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions per case (median)")
    args = parser.parse_args(argv)
    rows = run_all(args.quick, args.repeat)
    print_table(rows)
    save(rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
