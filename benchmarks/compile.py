"""Compile benchmark: MLIR -> BEF (parse, verify, lower, write) and BEF load, by function size.

Run: ``.venv/bin/python benchmarks/compile.py`` (prints a table, writes
``benchmarks/results/compile.json`` and ``compile.png``).  Workloads: one generated function
of N ``tfrt.add.i32`` kernels in custom syntax and in generic syntax.  Also measures the
whole-process start-up of ``tfrt_translate --mlir-to-bef`` on a small file.  Peer: xDSL's
own parser on the same generic text (what the front end would cost without its fast paths).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytfrt.tools.bench import pyplot, save_results

RESULTS = Path(__file__).parent / "results"


def make_text(n: int, generic: bool) -> str:
    lines = ["func.func @f() -> i32 {", "  %c0 = tfrt.constant.i32 1"]
    for i in range(1, n):
        if generic:
            lines.append(f'  %c{i} = "tfrt.add.i32"(%c{i - 1}, %c0) : (i32, i32) -> i32')
        else:
            lines.append(f"  %c{i} = tfrt.add.i32 %c{i - 1}, %c0")
    lines += [f"  tfrt.return %c{n - 1} : i32", "}", ""]
    return "\n".join(lines)


def best(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_size(n: int, generic: bool) -> dict[str, float]:
    from xdsl.parser import Parser

    from pytfrt.bef.reader import read_bef
    from pytfrt.bef.writer import write_bef
    from pytfrt.mlir.api import lower, parse_source, verify_module
    from pytfrt.mlir.context import make_context

    text = make_text(n, generic)
    out: dict[str, float] = {"kernels": n, "mlir_bytes": len(text.encode())}
    parsed = None

    def parse() -> None:
        nonlocal parsed
        parsed = parse_source(text, "bench.mlir")

    out["parse_s"] = best(parse)
    out["verify_s"] = best(lambda: verify_module(parsed))  # type: ignore[arg-type]
    program = None

    def do_lower() -> None:
        nonlocal program
        program = lower(parsed)  # type: ignore[arg-type]

    out["lower_s"] = best(do_lower)
    data = b""

    def write() -> None:
        nonlocal data
        data = write_bef(program)  # type: ignore[arg-type]

    out["write_s"] = best(write)
    out["total_s"] = out["parse_s"] + out["verify_s"] + out["lower_s"] + out["write_s"]
    out["bef_bytes"] = len(data)
    out["read_bef_s"] = best(lambda: read_bef(data))
    ctx = make_context()
    out["xdsl_plain_parse_s"] = best(lambda: Parser(ctx, text, "b").parse_module(), 1)
    return out


def startup() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "small.mlir"
        src.write_text(make_text(10, False))
        exe = Path(sys.executable).parent / "tfrt_translate"
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run([str(exe), "--mlir-to-bef", str(src), "-o", os.devnull], check=True)
            times.append(time.perf_counter() - t0)
        return min(times)


def main() -> None:
    rows = []
    for generic in (False, True):
        for n in (1000, 10000):
            r = bench_size(n, generic)
            r["syntax"] = "generic" if generic else "custom"  # type: ignore[assignment]
            rows.append(r)
    start = startup()
    print(
        f"{'syntax':8} {'kernels':>7} {'parse':>7} {'verify':>7} {'lower':>7} {'write':>7} "
        f"{'total':>7} {'read':>7} {'xdsl':>7} {'mlir B':>9} {'bef B':>8}"
    )
    for r in rows:
        print(
            f"{r['syntax']:8} {r['kernels']:7d} {r['parse_s']:7.3f} {r['verify_s']:7.3f} "
            f"{r['lower_s']:7.3f} {r['write_s']:7.3f} {r['total_s']:7.3f} {r['read_bef_s']:7.3f} "
            f"{r['xdsl_plain_parse_s']:7.3f} {r['mlir_bytes']:9d} {r['bef_bytes']:8d}"
        )
    print(f"tfrt_translate --mlir-to-bef start-up (10 kernels, whole process): {start:.3f} s")
    for r in rows:
        ratio = r["xdsl_plain_parse_s"] / r["parse_s"]
        print(
            f"  {r['syntax']} {r['kernels']}: plain xDSL parse / our parse = {ratio:.2f}x, "
            f"BEF/MLIR size = {r['bef_bytes'] / r['mlir_bytes']:.2f}"
        )
    def draw(path: Path) -> None:
        plt = pyplot()
        if plt is None:
            return
        fig, ax = plt.subplots(figsize=(7, 4))
        labels = [f"{r['syntax']}\n{r['kernels']}" for r in rows]
        bottom = [0.0] * len(rows)
        for key in ("parse_s", "verify_s", "lower_s", "write_s"):
            vals = [r[key] for r in rows]
            ax.bar(labels, vals, bottom=bottom, label=key[:-2])
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.plot(labels, [r["xdsl_plain_parse_s"] for r in rows], "k^", label="plain xDSL parse")
        ax.axhline(2.0, color="red", linestyle="--", label="goal (10k)")
        ax.set_ylabel("seconds")
        ax.set_title("MLIR -> BEF compile time")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path)

    save_results("compile", {"rows": rows, "startup_s": start}, draw, newline=False,
                 results_dir=RESULTS)


if __name__ == "__main__":
    main()
