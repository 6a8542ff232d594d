"""Data-parallel training of the MNIST-sized MLP (784-128-10) on a local Ray cluster.

Run:   python examples/distributed/train_mnist_mlp.py [--workers 2] [--steps 50] [--batch 256]

The train step (forward + backward, ``mlp_train_step.build_train_step``) is compiled once with
``pytfrt.compiler``, shipped to every worker, and driven by ``pytfrt.distributed.DataParallel``:
each step shards the batch over the workers, all-reduces the gradients through Ray's object
store and applies the SGD update on every replica.  The data are synthetic "digits" (noisy class
prototypes).  At the end the weights are compared with single-process full-batch SGD in NumPy.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mlp_train_step as mlp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--every", type=int, default=10, help="print the loss every N steps")
    args = parser.parse_args(argv)

    from pytfrt.compiler.api import compile_module
    from pytfrt.distributed import Cluster, DataParallel

    train_step = compile_module(mlp.build_train_step())
    params = mlp.init_params(seed=0)
    x_all, y_all = mlp.synthetic_mnist(args.batch * 8, seed=1)
    batches = [(x_all[i:i + args.batch], y_all[i:i + args.batch])
               for i in range(0, len(x_all), args.batch)]

    with Cluster(num_workers=args.workers) as cluster:
        dp = DataParallel(train_step, cluster, params, learning_rate=args.lr)
        start = time.perf_counter()
        for step in range(1, args.steps + 1):
            x, y = batches[(step - 1) % len(batches)]
            loss = dp.step(x, y)
            if step % args.every == 0 or step == args.steps:
                print(f"step {step}: loss = {loss:.6f}", flush=True)
        elapsed = time.perf_counter() - start
        weights = dp.variables

    ref = {k: v.astype(np.float64) for k, v in params.items()}
    for step in range(args.steps):
        x, y = batches[step % len(batches)]
        _, grads = mlp.numpy_train_step(ref, x, y)
        ref = {k: ref[k] - args.lr * grads[k] for k in ref}
    worst = max(float(np.linalg.norm(weights[k] - ref[k]) / np.linalg.norm(ref[k])) for k in ref)
    x, y = batches[0]
    accuracy = float(np.mean(
        np.argmax(np.maximum(x @ weights["w1"] + weights["b1"], 0) @ weights["w2"]
                  + weights["b2"], axis=1) == np.argmax(y, axis=1)))
    print(f"{args.workers} workers, {args.steps} steps of {args.batch}: "
          f"{1e3 * elapsed / args.steps:.1f} ms/step")
    print(f"max relative difference from single-process NumPy SGD: {worst:.2e}")
    print(f"training accuracy (first batch): {accuracy:.3f}")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
