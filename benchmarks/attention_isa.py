"""``tg.attention``'s versions side by side in one process: the C function for AVX-512, for
AVX2 with FMA (what a CPU without AVX-512 runs) and in portable C, and the NumPy path (no C
compiler), at BERT-base's and GPT-2 small's attention sizes.

The operands are as a compiled model passes them: q/k/v column views of one merged
``[B, S, 3 * H * D]`` projection (12 heads of 64), BERT with a padding mask ``[B, 1, 1, S]``
(the last quarter of the keys masked), GPT-2 with a causal mask ``[1, 1, S, S]`` of torch's
``-3.4e38``.  Calls rotate between the C versions (``_attention_native.ISA`` set before
each), so all see the same machine load; the NumPy path (``ENABLED`` false) runs after them
(its BLAS's threads keep spinning after a call and slowed the next); each version's result is
checked against the AVX-512 one.  Threads: ``PYTFRT_NUM_THREADS`` (two: the spin pool's call
parts; one: ``parallel_for``'s ctypes call on the caller).  Prints median and best
microseconds per call and each version's ratio to AVX-512; writes
``benchmarks/results/<name>.json`` and ``.png``.

Usage: ``PYTFRT_NUM_THREADS=2 python benchmarks/attention_isa.py [--calls 200] [--batch 1]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

from pytfrt.tools.bench import barh_plot, format_table, machine_info, save_results

VERSIONS = ("avx512", "avx2", "generic", "numpy")
NEG = np.float32(-3.4028235e38)


def _operands(model: str, batch: int, rng: np.random.Generator) -> tuple[Any, ...]:
    s = 128 if model == "bert" else 64
    h, d = 12, 64
    qkv = rng.standard_normal((batch, s, 3 * h * d), dtype=np.float32)
    q, k, v = (qkv[..., i * h * d:(i + 1) * h * d].reshape(batch, s, h, d) for i in range(3))
    if model == "bert":
        mask = np.zeros((batch, 1, 1, s), np.float32)
        mask[..., 3 * s // 4:] = NEG
    else:
        mask = np.where(np.tril(np.ones((s, s), bool)), 0, NEG).astype(np.float32)[None, None]
    return q, k, v, mask, np.empty((batch, s, h, d), np.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per version")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--name", default="attention_isa", help="result file stem")
    args = parser.parse_args(argv)

    from pytfrt.backends.cpu import _attention_native as nat
    from pytfrt.backends.cpu.attention import attention

    def use(version: str) -> None:
        nat.ENABLED = version != "numpy"
        nat.ISA = None if version == "numpy" else version

    versions = [v for v in VERSIONS if v == "numpy" or nat.softmax_rows_address(v)]
    rng = np.random.default_rng(0)
    rows, record_rows = [], []
    for model in ("bert", "gpt2"):
        q, k, v, mask, y = _operands(model, args.batch, rng)
        times: dict[str, list[float]] = {name: [] for name in versions}
        results = {}
        for name in versions:  # warm-up (compiles the C module once)
            use(name)
            results[name] = attention(q, k, v, mask, scale=0.125, has_mask=True).copy()
        native = [name for name in versions if name != "numpy"]
        for group in (native, ["numpy"]):  # NumPy's BLAS threads spin after a call: apart
            for _ in range(args.calls):
                for name in group:
                    use(name)
                    t = time.perf_counter()
                    attention(q, k, v, mask, scale=0.125, has_mask=True, out=y)
                    times[name].append(time.perf_counter() - t)
        ref = results[versions[0]]
        for name in versions:
            med, best = 1e6 * float(np.median(times[name])), 1e6 * min(times[name])
            err = float(np.abs(results[name] - ref).max() / np.abs(ref).max())
            ratio = med / (1e6 * float(np.median(times[versions[0]])))
            rows.append([model, name, f"{med:.0f}", f"{best:.0f}", f"{ratio:.2f}x", f"{err:.1e}"])
            record_rows.append({"model": model, "version": name, "median_us": med,
                                "best_us": best, "x_first": ratio, "rel_err": err})
    use("avx512")
    nat.ISA = None
    headers = ["model", "version", "median us", "best us", f"x {versions[0]}", "rel err"]
    print(format_table(headers, rows))
    load = os.getloadavg()
    print(f"threads {os.environ.get('PYTFRT_NUM_THREADS', 'default')}, batch {args.batch}, "
          f"load average {load[0]:.2f}")
    record = {"command": " ".join(["benchmarks/attention_isa.py", *sys.argv[1:]]),
              "threads": os.environ.get("PYTFRT_NUM_THREADS"), "batch": args.batch,
              "calls": args.calls, "load_average": load, "machine": machine_info(),
              "rows": record_rows}

    plot = barh_plot([f"{r['model']} {r['version']}" for r in record_rows],
                     [r["median_us"] for r in record_rows], "median us per attention call")
    save_results(args.name, record, plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
