"""Run ``driver_program.mlir`` on this process's HostContext against a 2-worker Ray cluster.

Run:   python examples/distributed/run_driver_program.py

The workers load ``worker_program.mlir``; the driver program reaches them through the
``tfrt_dist.*`` kernels once the cluster is attached to the driver's HostContext.  Prints the
fetched tensor, ``2 * (x0 + x1)``, and checks it against NumPy.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def run(cluster: Any, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """Load the worker program on ``cluster`` and run the driver program on ``x0``, ``x1``."""
    from pytfrt.executor import load_program
    from pytfrt.host import ExecutionContext, HostContext, make_available
    from pytfrt.kernel_libraries import builtin_registry
    from pytfrt.mlir import compile_mlir
    from pytfrt.tensor import DenseHostTensor

    handle = cluster.load(HERE / "worker_program.mlir")
    try:
        with HostContext("mstd:1", builtin_registry()) as host:
            cluster.attach(host)
            source = HERE / "driver_program.mlir"
            bef = load_program(compile_mlir(source.read_text(), str(source)), host)
            main_fn = bef.get_function("main")
            assert main_fn is not None
            args = [make_available(DenseHostTensor.from_numpy(a)) for a in (x0, x1)]
            (result,) = main_fn.execute(ExecutionContext(host.new_request()), args)
            host.await_values([result])
            host.quiesce()
            if result.is_error():
                raise RuntimeError(result.error.message)
            return np.asarray(result.get().array)
    finally:
        cluster.unload(handle)


def main() -> int:
    from pytfrt.distributed import Cluster

    x0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    x1 = np.full((2, 3), 10.0, np.float32)
    with Cluster(num_workers=2) as cluster:
        got = run(cluster, x0, x1)
    ok = bool(np.array_equal(got, 2 * (x0 + x1)))
    print("matches NumPy:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
