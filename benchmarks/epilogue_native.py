"""The C epilogue and dense-layer kernels against the Numba kernels they replace, in one process.

The fused epilogue ``y = act(y + bias)`` (``_epilogue.epilogue_2d``: ``_epilogue_native``'s C
function against the Numba kernels, ``ENABLED`` switched between calls) on float32 outputs of
Transformer and CNN sizes and activations, and the small-batch dense layer
``relu(x @ w + bias)`` (``gemm.dense_rows``: ``_gemm_native`` against Numba) at an MLP's and a
classifier's sizes.  Calls alternate between the two versions (so both see the same machine
load), after a warm-up that compiles or loads both; each C result is checked against the Numba
one.  Prints median and best microseconds per call and the C/Numba ratio of the medians;
writes ``benchmarks/results/<name>.json`` and ``.png``.  An epilogue call's time is that of
copying the input into the output and running the epilogue there, less the median time of the
copy alone (timed in the same rotation).

Usage: ``python benchmarks/epilogue_native.py [--calls 300] [--isa avx2]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.tools.bench import barh_plot, format_table, machine_info, save_results

EPILOGUES = (((64, 768), "gelu"), ((64, 3072), "gelu"), ((128, 3072), "gelu_tanh"),
             ((64, 768), "none"), ((256, 1024), "relu"), ((64, 3072), "silu"),
             ((1, 512), "relu"))
"""(output shape, activation) of the epilogue cases, each with a bias along the columns."""
DENSE = ((1, 784, 512), (1, 512, 512), (1, 512, 10), (4, 784, 512), (2, 256, 1000))
"""(rows, k, n) of the dense-layer cases (bias and ReLU)."""


def _time(calls: int, versions: dict[str, Callable[[], Any]]) -> dict[str, list[float]]:
    """Seconds per call of each version, the versions alternating call by call."""
    times: dict[str, list[float]] = {name: [] for name in versions}
    for _ in range(calls):
        for name, fn in versions.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per version")
    parser.add_argument("--name", default="epilogue_native", help="result file stem")
    parser.add_argument("--isa", choices=("avx512", "avx2", "generic"),
                        help="the C functions compiled for this instruction set (default: the "
                        "widest the CPU has; the Numba kernels are LLVM's for the CPU)")
    args = parser.parse_args(argv)

    from pytfrt.backends.cpu import _epilogue_native, _gemm_native, gemm
    from pytfrt.backends.cpu._epilogue import ACTIVATION_CODES, epilogue_2d

    if _epilogue_native.module() is None or _gemm_native.module() is None:
        raise SystemExit("no C compiler: nothing to compare")
    if args.isa and not (_epilogue_native.use(args.isa) and _gemm_native.use(args.isa)):
        raise SystemExit(f"this CPU cannot run the {args.isa} functions")
    rng = np.random.default_rng(0)
    rows, record_rows = [], []

    def report(case: str, times: dict[str, list[float]], err: float) -> None:
        med = {k: 1e6 * float(np.median(v)) for k, v in times.items()}
        best = {k: 1e6 * min(v) for k, v in times.items()}
        ratio = med["C"] / med["Numba"]
        rows.append([case, f"{med['C']:.1f}", f"{best['C']:.1f}", f"{med['Numba']:.1f}",
                     f"{best['Numba']:.1f}", f"{ratio:.2f}x", f"{err:.1e}"])
        record_rows.append({"case": case, "c_median_us": med["C"], "c_best_us": best["C"],
                            "numba_median_us": med["Numba"], "numba_best_us": best["Numba"],
                            "c_over_numba": ratio, "max_rel_diff": err})

    for shape, act in EPILOGUES:
        y0 = rng.standard_normal(shape, dtype=np.float32)
        bias = rng.standard_normal(shape[1], dtype=np.float32)
        code = ACTIVATION_CODES[act]
        out: dict[str, np.ndarray] = {}
        work = {"C": y0.copy(), "Numba": y0.copy()}

        def run(name: str, code: int = code, bias: np.ndarray = bias, y0: np.ndarray = y0,
                work: dict[str, np.ndarray] = work) -> None:
            # the same input every call (an activation applied over and over would drift)
            np.copyto(work[name], y0)
            if name != "copy":
                _epilogue_native.ENABLED = name == "C"
                epilogue_2d(work[name], bias, None, code, 0.0)

        for name in ("C", "Numba"):  # warm-up, and the results compared
            run(name)
            out[name] = work[name].copy()
        work["copy"] = y0.copy()
        times = _time(args.calls, {name: (lambda n=name: run(n)) for name in work})
        copy = float(np.median(times.pop("copy")))  # less the copy's time
        times = {k: [t - copy for t in v] for k, v in times.items()}
        err = float(np.abs(out["C"] - out["Numba"]).max() / max(np.abs(out["Numba"]).max(), 1e-30))
        report(f"epilogue {shape[0]}x{shape[1]} bias+{act}", times, err)
    _epilogue_native.ENABLED = True

    for m, k, n in DENSE:
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        ys = {"C": np.empty((m, n), np.float32), "Numba": np.empty((m, n), np.float32)}

        def dense(name: str, x: np.ndarray = x, w: np.ndarray = w, b: np.ndarray = b,
                  ys: dict[str, np.ndarray] = ys) -> None:
            _gemm_native.ENABLED = name == "C"
            gemm.dense_rows(x, w, b, True, ys[name])

        for name in ys:
            dense(name)
        times = _time(args.calls, {name: (lambda n=name: dense(n)) for name in ys})
        err = float(np.abs(ys["C"] - ys["Numba"]).max() / max(np.abs(ys["Numba"]).max(), 1e-30))
        report(f"dense_rows {m}x{k}x{n} bias+relu", times, err)
    _gemm_native.ENABLED = True

    headers = ["case", "C median us", "C best", "Numba median us", "Numba best", "C / Numba",
               "max rel diff"]
    print(format_table(headers, rows))
    load = os.getloadavg()
    print(f"C version {_epilogue_native.module().version()}, load average {load[0]:.2f}")
    record = {"command": " ".join(["benchmarks/epilogue_native.py", *sys.argv[1:]]),
              "calls": args.calls, "load_average": load, "machine": machine_info(),
              "c_version": _epilogue_native.module().version(), "rows": record_rows}

    plot = barh_plot([r["case"] for r in record_rows], [r["c_over_numba"] for r in record_rows],
                     "C / Numba (median time per call)", size=(7, 4), line=1.0)
    save_results(args.name, record, plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
