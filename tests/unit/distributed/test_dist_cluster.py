"""Cluster.load / remote_execute / RemoteFuture against NumPy, on the shared 2-worker cluster."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytfrt.distributed import ClusterError, RemoteError, RemoteFuture
from pytfrt.support.errors import ErrorCode

FLOATS = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
    elements=st.floats(-1e3, 1e3, width=32),
)


@settings(max_examples=15)
@given(x=FLOATS, worker=st.integers(0, 1))
def test_remote_execute_matches_numpy(cluster: Any, basic: Any, x: np.ndarray,
                                      worker: int) -> None:
    fut = cluster.remote_execute(worker, basic, x, function="scale")
    assert isinstance(fut, RemoteFuture) and fut.worker == worker
    np.testing.assert_array_equal(fut.result(timeout=30), x + x)
    assert fut.done()


def test_scalars_and_several_results(cluster: Any, basic: Any) -> None:
    fut = cluster.remote_execute(1, basic, 40, 2, function="sum_and_first")
    assert fut.result(timeout=30) == (42, 40)
    assert len(fut) == 2
    assert fut[0].result(timeout=30) == 42 and fut[1].result(timeout=30) == 40


def test_a_result_feeds_another_worker(cluster: Any, basic: Any) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.full((3, 4), 0.5, np.float32)
    first = cluster.remote_execute(0, basic, x, function="scale")
    second = cluster.remote_execute(1, basic, first, y, function="add")  # object store, 0 -> 1
    np.testing.assert_array_equal(second.result(timeout=30), x + x + y)
    # A multi-result future is indexed to pass one of its results.
    pair = cluster.remote_execute(0, basic, 3, 4, function="sum_and_first")
    with pytest.raises(ClusterError, match="index it"):
        cluster.remote_execute(1, basic, pair, 1, function="sum_and_first")
    assert cluster.call(1, basic, pair[0], 1, function="sum_and_first") == (8, 7)


def test_the_driver_array_is_not_modified(cluster: Any, basic: Any) -> None:
    x = np.ones(5, np.float32)
    cluster.call(0, basic, x, function="scale")  # the kernel works in place on the worker
    np.testing.assert_array_equal(x, np.ones(5, np.float32))


def test_async_value_feeds_local_dataflow(cluster: Any, basic: Any) -> None:
    x = np.arange(4, dtype=np.float32)
    fut = cluster.remote_execute(0, basic, x, function="scale")
    av = fut.async_value
    assert av is fut.async_value
    seen: list[np.ndarray] = []
    ready = threading.Event()
    av.and_then(lambda: (seen.append(av.get()), ready.set()))
    assert ready.wait(30)
    np.testing.assert_array_equal(seen[0], x + x)


def test_many_async_values_complete_without_a_thread_each(cluster: Any, basic: Any) -> None:
    threads_before = threading.active_count()
    futs = [cluster.remote_execute(i % 2, basic, i, 1, function="sum_and_first")
            for i in range(40)]
    avs = [f.async_value for f in futs]
    assert threading.active_count() <= threads_before + 2
    for f in futs:
        f.result(timeout=30)
    done = threading.Event()
    remaining = [len(avs)]
    lock = threading.Lock()

    def one() -> None:
        with lock:
            remaining[0] -= 1
            if not remaining[0]:
                done.set()

    for av in avs:
        av.and_then(one)
    assert done.wait(30)
    assert [av.get() for av in avs] == [(i + 1, i) for i in range(40)]


def test_futures_are_awaitable(cluster: Any, basic: Any) -> None:
    async def main() -> list[Any]:
        futs = [cluster.remote_execute(w, basic, w, 10, function="sum_and_first")
                for w in (0, 1)]
        return list(await asyncio.gather(*futs))

    assert asyncio.run(main()) == [(10, 0), (11, 1)]


def test_done_is_false_while_the_worker_works(cluster: Any, basic: Any) -> None:
    fut = cluster.remote_execute(0, basic, 300_000, 7, function="sleep_then")
    assert not fut.done()
    with pytest.raises(TimeoutError, match="worker"):
        fut.result(timeout=0.01)
    assert fut.result(timeout=30) == 7
    assert fut.done()


def test_remote_failure_is_a_remote_error(cluster: Any, basic: Any) -> None:
    fut = cluster.remote_execute(1, basic, function="fail")
    with pytest.raises(RemoteError, match="worker 1: 'fail' failed: .*") as info:
        fut.result(timeout=30)
    assert info.value.index == 1
    av = fut.async_value
    ready = threading.Event()
    av.and_then(ready.set)
    assert ready.wait(30)
    assert av.is_error() and av.error.code is ErrorCode.INTERNAL
    assert "worker 1" in av.error.message


def test_bad_calls_fail_at_once_with_the_reason(cluster: Any, basic: Any,
                                                program_dir: Path) -> None:
    with pytest.raises(ClusterError, match="out of range"):
        cluster.remote_execute(2, basic, 1, 2, function="sum_and_first")
    with pytest.raises(ClusterError, match="no function 'nope'.*sum_and_first"):
        cluster.remote_execute(0, basic, function="nope")
    with pytest.raises(ClusterError, match="several functions"):
        cluster.remote_execute(0, basic, 1)
    with pytest.raises(RemoteError, match="'sum_and_first' takes 2 argument"):
        cluster.call(0, basic, 1, function="sum_and_first")
    with pytest.raises(ClusterError, match="no such file"):
        cluster.load(program_dir / "missing.mlir")
    with pytest.raises(RemoteError, match="unknown kernel name 'no_such.kernel'"):
        cluster.load(program_dir / "unknown_kernel.mlir")
    with pytest.raises(ClusterError, match="cannot load a int"):
        cluster.load(3)


def test_load_accepts_bef_files_and_programs(cluster: Any, program_dir: Path) -> None:
    from pytfrt.bef.writer import write_bef
    from pytfrt.mlir import compile_mlir

    program = compile_mlir((program_dir / "basic.mlir").read_text(), "basic.mlir")
    bef = program_dir / "basic.bef"
    bef.write_bytes(write_bef(program))
    for source in (bef, program):
        handle = cluster.load(source, name="again")
        assert cluster.call(0, handle, 1, 2, function="sum_and_first") == (3, 1)
        assert cluster.handle("again") is handle
        cluster.unload(handle)


@pytest.mark.slow
def test_another_process_joins_the_running_cluster(cluster: Any, basic: Any,
                                                   program_dir: Path) -> None:
    import subprocess
    import sys

    import ray

    address = ray.get_runtime_context().gcs_address
    code = (
        "from pytfrt.distributed import Cluster\n"
        f"with Cluster(num_workers=1, address={address!r}) as joined:\n"
        f"    h = joined.load({str(program_dir / 'basic.mlir')!r})\n"
        "    print(joined.call(0, h, 20, 22, function='sum_and_first'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=180, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "(42, 20)"
    # Leaving did not stop the cluster this process started (handles by name work too).
    assert cluster.call(0, basic.name, 1, 2, function="sum_and_first") == (3, 1)
