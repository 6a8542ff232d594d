"""BEF load-time and size micro benchmark (``python benchmarks/bef.py``).

Workload: one function of N kernels (N = 1k, 10k) shaped like real programs: a chain of
``tfrt.add.i32`` kernels fed by constants carrying an ``i32`` attribute, with a print chain,
every op with a FileLineCol location.  Measured: ``write_bef`` time, ``read_bef`` time (full
validation), file size; peer: the same Program through ``pickle`` (dumps/loads, no
validation), in the same run.  Prints a table and saves JSON + PNG under
``benchmarks/results/``.
"""

from __future__ import annotations

import pickle
import platform
import statistics
import time
from pathlib import Path

from pytfrt.bef import Program, read_bef, write_bef
from pytfrt.bef.builder import CHAIN, build_function
from pytfrt.support.attributes import IntAttr
from pytfrt.support.location import FileLineColLoc
from pytfrt.tools.bench import pyplot, save_results

RESULTS = Path(__file__).resolve().parent / "results"


def make_program(n: int) -> Program:
    """A function with about ``n`` kernels."""
    ops = [("tfrt.new.chain", [], ["ch0"])]
    types = {"ch0": CHAIN}
    acc = None
    line = 2
    while len(ops) < n:
        i = len(ops)
        ops.append(
            (
                "tfrt.constant.i32",
                [],
                [f"c{i}"],
                {
                    "attributes": [("value", IntAttr(i % 1000, "i32"))],
                    "location": FileLineColLoc("bench.mlir", line, 3),
                },
            )
        )
        if acc is None:
            acc = f"c{i}"
        else:
            ops.append(
                (
                    "tfrt.add.i32",
                    [acc, f"c{i}"],
                    [f"s{i}"],
                    {"location": FileLineColLoc("bench.mlir", line + 1, 3)},
                )
            )
            acc = f"s{i}"
        line += 2
    ops.append(("tfrt.print.i32", [acc, "ch0"], ["ch1"]))
    types["ch1"] = CHAIN
    fn = build_function("main", [], ops, ["ch1"], types=types)
    return Program([fn])


def best_of(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rows = []
    for n in (1000, 10000):
        program = make_program(n)
        data = write_bef(program)
        pickled = pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL)
        row = {
            "kernels": len(program.functions[0].kernels),
            "bef_bytes": len(data),
            "pickle_bytes": len(pickled),
            "write_s": best_of(lambda p=program: write_bef(p)),
            "read_s": best_of(lambda d=data: read_bef(d)),
            "pickle_loads_s": best_of(lambda b=pickled: pickle.loads(b)),
            "pickle_dumps_s": best_of(lambda p=program: pickle.dumps(p)),
        }
        row["bytes_per_kernel"] = row["bef_bytes"] / row["kernels"]
        row["read_vs_pickle"] = row["read_s"] / row["pickle_loads_s"]
        rows.append(row)
    header = (
        f"{'kernels':>8} {'BEF bytes':>10} {'B/kernel':>9} {'pickle B':>9} "
        f"{'write ms':>9} {'read ms':>8} {'unpickle ms':>11} {'read/unpickle':>13}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['kernels']:>8} {r['bef_bytes']:>10} {r['bytes_per_kernel']:>9.1f} "
            f"{r['pickle_bytes']:>9} {r['write_s'] * 1e3:>9.1f} {r['read_s'] * 1e3:>8.1f} "
            f"{r['pickle_loads_s'] * 1e3:>11.1f} {r['read_vs_pickle']:>13.2f}"
        )
    meta = {"python": platform.python_version(), "machine": platform.machine()}

    def draw(path: Path) -> None:
        plt = pyplot()
        if plt is None:
            return
        fig, ax = plt.subplots(figsize=(6, 4))
        labels = [str(r["kernels"]) for r in rows]
        x = range(len(rows))
        width = 0.27
        for k, (key, name) in enumerate(
            [("write_s", "write_bef"), ("read_s", "read_bef"), ("pickle_loads_s", "pickle.loads")]
        ):
            ax.bar([i + (k - 1) * width for i in x], [r[key] * 1e3 for r in rows], width,
                   label=name)
        ax.set_xticks(list(x), labels)
        ax.set_xlabel("kernels in the function")
        ax.set_ylabel("milliseconds (best of 5)")
        ax.set_yscale("log")
        ax.set_title("BEF write/read vs pickle")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=100)

    save_results("bef", {"meta": meta, "rows": rows}, draw, newline=False, results_dir=RESULTS)
    _ = statistics  # the best-of-N minimum is the reported statistic


if __name__ == "__main__":
    main()
