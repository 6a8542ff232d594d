"""The pause a training loop sees while a small graph's Numba kernel compiles.

A ``@pytfrt.function`` train step of a small logistic regression (NumPy code, traced; its
forward, gradient and update form one ``tg.fused_graph`` region) runs for ``--seconds`` in a
fresh process with an empty cache directory (so the region really compiles), and the step
times are reported: the first step (tracing and compiling to BEF), the slowest later step
(before the background compile it was step 3, which compiled), and the step from which the
compiled kernel runs (200 steps in a row under 20 µs).  ``--src DIR`` runs another checkout's
``src`` for a before/after on one machine.

Usage: python benchmarks/compile_pause.py [--seconds 20] [--repeats 2] [--src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, sys, time
import numpy as np
import pytfrt

def loss(w, x, y):
    p = 1 / (1 + np.exp(-(x @ w)))
    return np.mean((p - y) ** 2)

@pytfrt.function
def train_step(w, x, y):
    value, grad = pytfrt.value_and_grad(loss)(w, x, y)
    return value, w - 0.5 * grad

rng = np.random.default_rng(2)
xs = rng.standard_normal((16, 3)).astype(np.float32)
ys = (xs.sum(axis=1, keepdims=True) > 0).astype(np.float32)
w = np.zeros((3, 1), np.float32)
t, start = [], time.perf_counter()
while time.perf_counter() - start < float(sys.argv[1]):
    s = time.perf_counter()
    v, w = train_step(w, xs, ys)
    float(v)
    t.append(time.perf_counter() - s)
t = np.array(t)
fast = np.convolve(t < 20e-6, np.ones(200), "valid") == 200
i = int(np.argmax(fast)) if fast.any() else None
print(json.dumps({
    "steps": len(t), "first_s": t[0], "worst_later_s": float(t[1:].max()),
    "worst_later_step": int(t[1:].argmax()) + 2,
    "compiled_from_step": None if i is None else i + 1,
    "compiled_at_s": None if i is None else float(t[:i].sum()),
}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    args = parser.parse_args()
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, PYTFRT_CACHE_DIR=cache, PYTHONPATH=args.src)
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.seconds)], env=env,
                                 capture_output=True, text=True, check=True)
        print(json.dumps({"src": args.src, **json.loads(out.stdout.strip().splitlines()[-1])}))
    print("load average:", " ".join(f"{v:.1f}" for v in os.getloadavg()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
