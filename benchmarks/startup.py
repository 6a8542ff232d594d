"""Start-up: ``bef_executor`` on a trivial program (a ``.bef`` and a ``.mlir``), fresh processes.

The program (``tfrt.*`` kernels only: a constant and a print) needs no tensor, no NumPy and no
Numba, so the run measures what every invocation pays: the interpreter, pytfrt's runtime
imports, the kernel registry (with the entry-point scan), loading and running.  The ``.mlir``
form adds the MLIR front end (xDSL) and the translation to BEF.  Targets: ``.bef`` <= 0.3 s,
``.mlir`` <= 0.6 s of wall time on a quiet machine.

Reference rows, in the same run: the bare interpreter (``python -c pass``) and the imports a
program without tensors must not pay (``import numpy``, ``import numba``).

The children run with byte-code caching on (``PYTHONDONTWRITEBYTECODE`` removed; a warm-up run
writes the ``.pyc`` files), as an installed package runs.  Each row: the median over
``--repeats`` runs (interleaved) of the wall time and of the child's CPU time (user + system,
from ``wait4``: not inflated when other processes hold the cores, so it is the figure to
compare with the targets on a loaded machine).  Prints a table and the load
average; writes ``benchmarks/results/startup.json`` and ``.png``.

Usage: ``python benchmarks/startup.py [--repeats 7]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytfrt.tools.bench import format_table, machine_info, pyplot, save_results

TRIVIAL = (Path(__file__).resolve().parents[1] / "examples" / "trivial" / "trivial.mlir"
           ).read_text()
"""The program (``examples/trivial/trivial.mlir``)."""
TARGETS = {"bef_executor trivial.bef": 0.3, "bef_executor trivial.mlir": 0.6}
# As installed: the children may write and then use .pyc files (the warm-up run writes them),
# even when the caller's environment says PYTHONDONTWRITEBYTECODE.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def tool(name: str) -> list[str]:
    """The console script of this environment, else ``python -m``."""
    script = Path(sys.executable).with_name(name)
    if script.exists():
        return [str(script)]
    found = shutil.which(name)
    return [found] if found else [sys.executable, "-m", f"pytfrt.tools.{name}"]


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """``(wall seconds, child CPU seconds, stdout)`` of one run of ``cmd`` (which must
    succeed); ``env`` defaults to :data:`ENV`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=ENV if env is None else env)
    out = proc.stdout.read().decode() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        mlir = Path(tmp) / "trivial.mlir"
        mlir.write_text(TRIVIAL)
        bef = Path(tmp) / "trivial.bef"
        subprocess.run([*tool("tfrt_translate"), "--mlir-to-bef", str(mlir), "-o", str(bef)],
                       check=True)
        variants = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
            "python -c 'import numba'": [sys.executable, "-c", "import numba"],
            "bef_executor trivial.bef": [*tool("bef_executor"), str(bef)],
            "bef_executor trivial.mlir": [*tool("bef_executor"), str(mlir)],
        }
        load_before = os.getloadavg()
        for cmd in variants.values():
            timed(cmd)  # warm the file cache and .pyc files
        walls: dict[str, list[float]] = {k: [] for k in variants}
        cpus: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.repeats):
            for name, cmd in variants.items():
                wall, cpu, _ = timed(cmd)
                walls[name].append(wall)
                cpus[name].append(cpu)
        load_after = os.getloadavg()

    rows: list[dict[str, Any]] = []
    for name in variants:
        target = TARGETS.get(name)
        wall = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        rows.append({"variant": name, "wall_s": wall, "best_wall_s": min(walls[name]),
                     "cpu_s": cpu, "target_s": target,
                     "cpu_meets_target": None if target is None else cpu <= target,
                     "wall_meets_target": None if target is None else wall <= target})
    print(f"start-up, median of {args.repeats} fresh processes (interleaved); load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(format_table(
        ["variant", "wall s", "best wall s", "cpu s", "target s", "cpu ok", "wall ok"],
        [[r["variant"], f"{r['wall_s']:.3f}", f"{r['best_wall_s']:.3f}", f"{r['cpu_s']:.3f}",
          "" if r["target_s"] is None else f"{r['target_s']:.1f}",
          "" if r["cpu_meets_target"] is None else ("yes" if r["cpu_meets_target"] else "NO"),
          "" if r["wall_meets_target"] is None else ("yes" if r["wall_meets_target"] else "NO")]
         for r in rows]))
    record = {"meta": {**machine_info(), "repeats": args.repeats,
                       "loadavg_before": load_before, "loadavg_after": load_after},
              "rows": rows}

    def plot(path: Path) -> None:
        plt = pyplot()
        if plt is None:
            return
        fig, ax = plt.subplots(figsize=(8, 3.5))
        names = [r["variant"] for r in rows]
        y = range(len(rows))
        ax.barh([i + 0.2 for i in y], [r["wall_s"] for r in rows], 0.4, label="wall")
        ax.barh([i - 0.2 for i in y], [r["cpu_s"] for r in rows], 0.4, label="CPU (user+sys)")
        for i, r in enumerate(rows):
            if r["target_s"] is not None:
                ax.plot([r["target_s"]] * 2, [i - 0.45, i + 0.45], "k--")
        ax.set_yticks(list(y), names)
        ax.invert_yaxis()
        ax.set_xlabel("seconds (dashed: target)")
        ax.set_title(f"start-up (load avg {load_before[0]:.1f})")
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)

    save_results("startup", record, plot)


if __name__ == "__main__":
    main()
