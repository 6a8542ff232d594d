"""One attention kernel (``tg.attention``'s compute function) timed alone and right after a dense
layer, as in a Transformer: does the second thread help it?

The q/k/v operands are column views of one merged ``[1, S, 3 * H * D]`` projection (how a
compiled BERT or GPT-2 passes them), the mask ``[1, 1, 1, S]`` of zeros.  "After a dense
layer": each timed call follows a ``S x 768 x 768`` product on pre-packed weights
(:mod:`pytfrt.backends.cpu._dnnl_matmul`, the spin pool's threads), only the attention timed.
Threads: ``PYTFRT_NUM_THREADS``.  Prints median and best microseconds of ``--calls`` calls.

Usage: ``PYTFRT_NUM_THREADS=2 chrt -f 10 python benchmarks/attention_bench.py --seq 128``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--depth", type=int, default=64)
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args(argv)

    from pytfrt.backends.cpu import _dnnl_matmul
    from pytfrt.backends.cpu.attention import attention

    rng = np.random.default_rng(0)
    s, h, d = args.seq, args.heads, args.depth
    qkv = rng.standard_normal((1, s, 3 * h * d), dtype=np.float32)
    q, k, v = (qkv[..., i * h * d:(i + 1) * h * d].reshape(1, s, h, d) for i in range(3))
    mask = np.zeros((1, 1, 1, s), np.float32)
    y = np.empty((1, s, h, d), np.float32)
    dense = _dnnl_matmul.make(rng.standard_normal((768, 768), dtype=np.float32), None, "none",
                              0.0, False)
    x = rng.standard_normal((s, 768), dtype=np.float32)
    xd = np.empty((s, 768), np.float32)
    if dense is not None and not dense.ready(x.shape):
        dense = None

    def timed(before: bool) -> list[float]:
        ts = []
        for _ in range(args.calls):
            if before and dense is not None:
                dense.run(x, xd)
            t = time.perf_counter()
            attention(q, k, v, mask, scale=0.125, has_mask=True, out=y)
            ts.append(time.perf_counter() - t)
        return ts

    timed(False)  # warm-up: compiles the kernel
    threads = os.environ.get("PYTFRT_NUM_THREADS", "default")
    for label, before in (("alone", False), ("after a dense layer", True)):
        if before and dense is None:
            print("no oneDNN dense layer: 'after a dense layer' skipped")
            continue
        ts = timed(before)
        print(f"threads {threads}, S {s}, {label}: median {1e6 * np.median(ts):.0f} us, "
              f"best {1e6 * min(ts):.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
