"""Worker loss: pending futures fail with WorkerLost naming the worker, nothing hangs, and
restart_worker brings the worker back with its programs reloaded."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest

from pytfrt.distributed import WorkerLost
from pytfrt.support.errors import ErrorCode

pytestmark = pytest.mark.usefixtures("restore_workers")


def test_killed_worker_fails_its_pending_future(cluster: Any, basic: Any) -> None:
    pending = cluster.remote_execute(1, basic, 20_000_000, 1, function="sleep_then")  # 20 s
    av = pending.async_value
    time.sleep(0.3)
    start = time.monotonic()
    cluster.kill_worker(1)
    with pytest.raises(WorkerLost, match="worker 1 was lost: killed by Cluster.kill_worker") as e:
        pending.result(timeout=15)
    assert e.value.index == 1
    assert time.monotonic() - start < 10
    ready = threading.Event()
    av.and_then(ready.set)
    assert ready.wait(15)
    assert av.is_error() and av.error.code is ErrorCode.UNAVAILABLE
    assert "worker 1" in av.error.message
    # New calls to the lost worker fail at once; the other worker is unaffected.
    with pytest.raises(WorkerLost, match="worker 1"):
        cluster.remote_execute(1, basic, 1, 2, function="sum_and_first").result(timeout=1)
    assert cluster.call(0, basic, 1, 2, function="sum_and_first") == (3, 1)
    # A collective that needs the lost worker fails too, at once.
    with pytest.raises(WorkerLost, match="worker 1"):
        cluster.all_reduce([np.ones(2), np.ones(2)]).result(timeout=5)


def test_a_process_that_dies_is_noticed(cluster: Any, basic: Any) -> None:
    pid = cluster.worker_pid(0)
    pending = cluster.remote_execute(0, basic, 20_000_000, 1, function="sleep_then")
    time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)  # the process goes away; the cluster was not told
    with pytest.raises(WorkerLost, match="worker 0 was lost") as e:
        pending.result(timeout=20)
    assert e.value.index == 0
    assert not cluster.alive(0)


def test_results_depending_on_a_lost_worker_fail(cluster: Any, basic: Any) -> None:
    slow = cluster.remote_execute(1, basic, 20_000_000, 1, function="sleep_then")
    downstream = cluster.remote_execute(0, basic, slow, 1, function="sum_and_first")
    time.sleep(0.3)
    os.kill(cluster.worker_pid(1), signal.SIGKILL)  # ping is answered while worker 1 sleeps
    with pytest.raises(WorkerLost, match="worker 1"):
        downstream.result(timeout=20)


def test_timeout_on_a_live_worker_is_a_timeout(cluster: Any, basic: Any) -> None:
    fut = cluster.remote_execute(0, basic, 1_000_000, 5, function="sleep_then")
    with pytest.raises(TimeoutError, match="within 0.2 s"):
        fut.result(timeout=0.2)
    assert fut.result(timeout=30) == 5


def test_restart_reloads_programs(cluster: Any, basic: Any) -> None:
    old_pid = cluster.worker_pid(1)
    cluster.kill_worker(1)
    cluster.restart_worker(1)
    assert cluster.alive(1)
    assert cluster.worker_pid(1) != old_pid
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(cluster.call(1, basic, x, function="scale"), 2 * x)
