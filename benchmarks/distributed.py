# ruff: noqa: E501  (MLIR text: one op per line)
"""pytfrt.distributed on a local Ray cluster, against bare Ray and driver-side NumPy peers.

Three measurements, each against peers measured in the same run (interleaved repetitions,
medians):

* **round trip** of ``Cluster.remote_execute(...).result()`` on a 16-float tensor program
  (``x + x``), against a bare Ray task and a bare Ray actor method doing ``x + x`` in NumPy;
  plus the same call completed through the AsyncValue bridge (``future.async_value``);
* **all-reduce** (sum) of one float32 array per worker (1, 10, 100 MB, 2 workers; the arrays are
  held in the cluster) with ``Cluster.all_reduce`` -- until the reduced chunks exist in the
  cluster, and until the result is on the driver -- against gathering the arrays to the driver
  through Ray and summing them with NumPy, and (if torch is installed) ``ray.util.collective``'s
  gloo all-reduce between two actors holding the arrays;
* **data-parallel step** of the MNIST-sized MLP (784-128-10, batch 256) with 1 and 2 workers,
  against the same compiled train step plus the NumPy SGD update in one process (run in a fresh
  process, with BLAS's default thread count and with one thread, as Ray workers have).

Run: ``.venv/bin/python benchmarks/distributed.py [--repeat 5] [--rounds 200] [--quick]``.
Prints a table, writes ``benchmarks/results/distributed.json`` and ``distributed.png``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "examples" / "distributed"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from executor import cpu_model  # noqa: E402 - the benchmarks' shared machine description

from pytfrt.tools.bench import pyplot, save_results  # noqa: E402

ECHO = """
func.func @scale(%x: !t.tensor) -> (!tfrt.chain, !t.tensor) {
  %ch0 = tfrt.new.chain
  %ch1 = "tfrt_test.add_inplace.f32"(%x, %x, %ch0) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1, %x : !tfrt.chain, !t.tensor
}
"""


def timed(fn: Callable[[], Any], n: int = 1) -> float:
    """Seconds per call of ``fn`` over ``n`` calls."""
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def interleave(variants: dict[str, Callable[[], float]], repeat: int) -> dict[str, list[float]]:
    """Run every variant once per repetition, rotating the order; the samples by name."""
    names = list(variants)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeat):
        for n in names[r % len(names):] + names[:r % len(names)]:
            samples[n].append(variants[n]())
    return samples


# -- round trip --------------------------------------------------------------------------------


def bench_round_trip(cluster: Any, rounds: int, repeat: int) -> dict[str, list[float]]:
    import ray

    path = Path(tempfile.mkdtemp()) / "echo.mlir"
    path.write_text(ECHO)
    handle = cluster.load(path)
    x = np.arange(16, dtype=np.float32)

    @ray.remote(num_cpus=0)
    def echo(v: np.ndarray) -> np.ndarray:
        return v + v

    @ray.remote(num_cpus=0)
    class Echo:
        def scale(self, v: np.ndarray) -> np.ndarray:
            return v + v

    actor = Echo.remote()  # type: ignore[attr-defined]
    ray.get(actor.scale.remote(x))
    ray.get(echo.remote(x))

    def via_async_value() -> None:
        av = cluster.remote_execute(0, handle, x, function="scale").async_value
        done = threading.Event()
        av.and_then(done.set)
        done.wait()
        av.get()

    variants = {
        "bare Ray task": lambda: timed(lambda: ray.get(echo.remote(x)), rounds),
        "bare Ray actor call": lambda: timed(lambda: ray.get(actor.scale.remote(x)), rounds),
        "remote_execute().result()": lambda: timed(
            lambda: cluster.remote_execute(0, handle, x, function="scale").result(), rounds),
        "remote_execute().async_value": lambda: timed(via_async_value, rounds),
    }
    for v in variants.values():  # warm up
        v()
    out = interleave(variants, repeat)
    ray.kill(actor)
    return out


# -- all-reduce --------------------------------------------------------------------------------


def _gloo_peers(n: int) -> list[Any] | None:
    """Two actors in a ``ray.util.collective`` gloo group (needs torch), or None."""
    import ray

    try:
        import torch  # noqa: F401
        from ray.util import collective as col
    except ImportError:
        return None

    @ray.remote(num_cpus=0)
    class GlooPeer:
        def __init__(self) -> None:
            self.array: np.ndarray | None = None

        def setup(self, world: int, rank: int, group: str) -> bool:
            from ray.util import collective

            collective.init_collective_group(world, rank, backend="gloo",  # type: ignore[arg-type]
                                             group_name=group)
            return True

        def hold(self, array: np.ndarray) -> int:
            self.array = np.array(array, copy=True)
            return int(self.array.nbytes)

        def allreduce(self, group: str) -> int:
            from ray.util import collective

            assert self.array is not None
            collective.allreduce(self.array, group_name=group)
            return int(self.array.nbytes)

        def value(self) -> np.ndarray:
            assert self.array is not None
            return self.array

    peers = [GlooPeer.remote() for _ in range(n)]  # type: ignore[attr-defined]
    try:
        ray.get([p.setup.remote(n, i, "bench") for i, p in enumerate(peers)], timeout=120)
    except Exception as exc:  # noqa: BLE001 - the benchmark reports gloo as unavailable
        print(f"gloo unavailable: {exc}", file=sys.stderr)
        for p in peers:
            ray.kill(p)
        return None
    del col
    return peers


def _all_reduce_variants(cluster: Any, held: list[Any], peers: list[Any] | None
                         ) -> dict[str, Callable[[], float]]:
    """The all-reduce variants for arrays ``held`` in the cluster (seconds per call)."""
    import ray

    def in_cluster() -> float:
        start = time.perf_counter()
        fut = cluster.all_reduce(held)
        ray.wait(list(fut.refs), num_returns=len(fut.refs), fetch_local=False)
        return time.perf_counter() - start

    def to_driver() -> float:
        start = time.perf_counter()
        cluster.all_reduce(held).result()
        return time.perf_counter() - start

    def driver_numpy() -> float:
        start = time.perf_counter()
        values = ray.get([h.refs[0] for h in held])
        total = values[0].copy()
        for v in values[1:]:
            total += v
        return time.perf_counter() - start

    variants: dict[str, Callable[[], float]] = {
        "all_reduce (reduced in cluster)": in_cluster,
        "all_reduce (.result() on driver)": to_driver,
        "gather to driver + NumPy sum": driver_numpy,
    }
    if peers is not None:
        variants["ray.util.collective gloo (torch)"] = lambda: timed(
            lambda: ray.get([p.allreduce.remote("bench") for p in peers]))
    return variants


def bench_all_reduce(cluster: Any, sizes_mb: list[int], repeat: int
                     ) -> dict[int, dict[str, list[float]]]:
    import ray

    n = cluster.num_workers
    peers = _gloo_peers(n)
    results: dict[int, dict[str, list[float]]] = {}
    rng = np.random.default_rng(0)
    for mb in sizes_mb:
        count = mb * 1024 * 1024 // 4
        arrays = [rng.standard_normal(count, dtype=np.float32) for _ in range(n)]
        held = [cluster.put(i, a) for i, a in enumerate(arrays)]
        np.testing.assert_allclose(cluster.all_reduce(held).result(), arrays[0] + arrays[1],
                                   rtol=1e-6)
        if peers is not None:
            ray.get([p.hold.remote(a) for p, a in zip(peers, arrays, strict=True)])
        variants = _all_reduce_variants(cluster, held, peers)
        for v in variants.values():
            v()
        results[mb] = interleave(variants, repeat)
        del held, arrays, variants
    if peers is not None:
        for p in peers:
            ray.kill(p)
    return results


# -- data-parallel step ------------------------------------------------------------------------


def local_step_times(steps: int, batch: int, repeat: int) -> list[float]:
    """Seconds per step of the compiled train step + NumPy SGD update in this process."""
    import mlp_train_step as mlp

    from pytfrt.compiler.api import compile_module

    train_step = compile_module(mlp.build_train_step())
    local = mlp.init_params(seed=0)
    x, y = mlp.synthetic_mnist(batch, seed=1)
    lr = np.float32(0.01)

    def local_step() -> None:
        _, *grads = train_step(local["w1"], local["b1"], local["w2"], local["b2"], x, y)
        for k, g in zip(("w1", "b1", "w2", "b2"), grads, strict=True):
            local[k] -= lr * g

    local_step()
    return [timed(local_step, steps) for _ in range(repeat)]


def _local_peer(steps: int, batch: int, repeat: int, threads: int | None) -> list[float]:
    """:func:`local_step_times` in a fresh process (BLAS threads fixed by the environment)."""
    import subprocess

    env = dict(os.environ)
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads)
    out = subprocess.run(
        [sys.executable, __file__, "--local-peer", str(steps), str(batch), str(repeat)],
        env=env, capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def bench_data_parallel(workers: list[int], steps: int, batch: int, repeat: int
                        ) -> dict[str, list[float]]:
    import mlp_train_step as mlp

    from pytfrt.compiler.api import compile_module
    from pytfrt.distributed import Cluster, DataParallel

    train_step = compile_module(mlp.build_train_step())
    params = mlp.init_params(seed=0)
    x, y = mlp.synthetic_mnist(batch, seed=1)
    lr = 0.01
    out: dict[str, list[float]] = {
        "single process, BLAS default threads": _local_peer(steps, batch, repeat, None),
        "single process, BLAS 1 thread": _local_peer(steps, batch, repeat, 1),
    }
    for n in workers:
        with Cluster(num_workers=n) as cluster:
            dp = DataParallel(train_step, cluster, params, learning_rate=lr)
            dp.step(x, y)
            step = functools.partial(dp.step, x, y)
            out[f"DataParallel, {n} worker(s)"] = [timed(step, steps) for _ in range(repeat)]
    return out


# -- report ------------------------------------------------------------------------------------


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--sizes", default="1,10,100", help="all-reduce sizes in MB")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--local-peer", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.local_peer:
        print(json.dumps(local_step_times(*args.local_peer)))
        return 0
    if args.quick:
        args.repeat, args.rounds, args.sizes, args.steps = 2, 30, "1", 3
    sizes = [int(s) for s in args.sizes.split(",")]

    from pytfrt.distributed import Cluster

    store = max(400, 5 * max(sizes) + 100) * 1024 * 1024
    with Cluster(num_workers=2, object_store_memory=store) as cluster:
        rt = bench_round_trip(cluster, args.rounds, args.repeat)
        ar = bench_all_reduce(cluster, sizes, args.repeat)
    dp = bench_data_parallel([1, 2], args.steps, args.batch, args.repeat)

    print(f"\nround trip (16 floats, {args.rounds} calls x {args.repeat}; medians)")
    base = med(rt["bare Ray task"])
    print(f"{'variant':34s} {'us/call':>10s} {'x bare task':>12s}")
    for name, xs in rt.items():
        print(f"{name:34s} {1e6 * med(xs):10.1f} {med(xs) / base:12.2f}")
    print("\nall-reduce, sum over 2 workers (ms; medians)")
    for mb, variants in ar.items():
        peer = med(variants["gather to driver + NumPy sum"])
        for name, xs in variants.items():
            print(f"{mb:4d} MB  {name:34s} {1e3 * med(xs):9.1f}  x{med(xs) / peer:5.2f} "
                  "of gather+sum")
    print(f"\ndata-parallel step, MLP 784-128-10, batch {args.batch} (ms/step; medians)")
    peer = med(dp["single process, BLAS 1 thread"])
    for name, xs in dp.items():
        print(f"{name:48s} {1e3 * med(xs):8.2f}  x{med(xs) / peer:5.2f}")

    record = {
        "command": "benchmarks/distributed.py " + " ".join(argv if argv is not None
                                                          else sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "cpu": cpu_model(),
                    "python": platform.python_version()},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": os.getloadavg(),
        "round_trip_s": rt,
        "all_reduce_s": {str(k): v for k, v in ar.items()},
        "data_parallel_step_s": dp,
    }
    save_results("distributed", record, lambda path: _plot(rt, ar, dp, path), indent=1,
                 newline=False, results_dir=RESULTS)
    return 0


def _plot(rt: dict[str, list[float]], ar: dict[int, dict[str, list[float]]],
          dp: dict[str, list[float]], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    names = list(rt)
    axes[0].barh(names, [1e6 * med(rt[n]) for n in names])
    axes[0].set_xlabel("µs per round trip")
    axes[0].set_title("round trip (16 floats)")
    sizes = list(ar)
    for name in next(iter(ar.values())):
        axes[1].plot(sizes, [1e3 * med(ar[s][name]) for s in sizes], marker="o", label=name)
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("MB per worker")
    axes[1].set_ylabel("ms")
    axes[1].set_title("all-reduce (sum, 2 workers)")
    axes[1].legend(fontsize=7)
    names = list(dp)
    axes[2].barh(names, [1e3 * med(dp[n]) for n in names])
    axes[2].set_xlabel("ms per step")
    axes[2].set_title("MLP data-parallel step")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
