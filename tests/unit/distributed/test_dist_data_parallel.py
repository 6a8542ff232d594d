"""DataParallel on 2 workers against single-process full-batch SGD in NumPy (float64).

The train step is the linear-model MSE program of dist_programs.py (runtime tensor kernels,
float32); two workers on shards of 8 rows must follow the full-batch trajectory on 16 rows.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import dist_programs as programs
import numpy as np
import pytest

from pytfrt.distributed import ClusterError, DataParallel, WorkerLost

ROWS, FEATURES, OUTPUTS, LR, STEPS = 8, 5, 3, 0.05, 20


@pytest.fixture(scope="module")
def train_step(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = Path(tmp_path_factory.mktemp("dp")) / "linear_step.mlir"
    path.write_text(programs.linear_train_step(ROWS, FEATURES, OUTPUTS))
    return cluster.load(path, name="linear_step")


def _problem(seed: int) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    rng = np.random.default_rng(seed)
    w0 = rng.normal(size=(FEATURES, OUTPUTS)).astype(np.float32)
    b0 = rng.normal(size=(1, OUTPUTS)).astype(np.float32)
    true_w = rng.normal(size=(FEATURES, OUTPUTS))
    batches = []
    for _ in range(STEPS):
        x = rng.normal(size=(2 * ROWS, FEATURES)).astype(np.float32)
        y = (x @ true_w + 0.1 * rng.normal(size=(2 * ROWS, OUTPUTS))).astype(np.float32)
        batches.append((x, y))
    return w0, b0, batches


def _assert_rel_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5) -> None:
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert err <= rtol, f"relative error {err:.2e} > {rtol:.0e}"


def test_two_workers_follow_full_batch_sgd(cluster: Any, train_step: Any) -> None:
    w0, b0, batches = _problem(0)
    dp = DataParallel(train_step, cluster, {"w": w0, "b": b0}, learning_rate=LR)
    losses = [dp.step(x, y) for x, y in batches]
    w, b, ref_losses = programs.numpy_linear_sgd(w0, b0, batches, LR)
    weights = dp.variables
    assert list(weights) == ["w", "b"] and dp.steps_done == STEPS
    _assert_rel_close(weights["w"], w)
    _assert_rel_close(weights["b"], b)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    assert losses[-1] < losses[0]


def test_bad_inputs_are_reported(cluster: Any, train_step: Any) -> None:
    w0, b0, _ = _problem(1)
    with pytest.raises(ClusterError, match="expects the loss and one gradient per parameter"):
        DataParallel(train_step, cluster, [w0], learning_rate=LR)
    with pytest.raises(ClusterError, match="not a float array"):
        DataParallel(train_step, cluster, [w0.astype(np.int32), b0])
    dp = DataParallel(train_step, cluster, [w0, b0])
    with pytest.raises(ValueError, match="same first dimension"):
        dp.step(np.zeros((16, FEATURES), np.float32), np.zeros((15, OUTPUTS), np.float32))
    with pytest.raises(ValueError, match="cannot be split over 2 workers"):
        dp.step(np.zeros((1, FEATURES), np.float32), np.zeros((1, OUTPUTS), np.float32))


@pytest.mark.usefixtures("restore_workers")
@pytest.mark.parametrize("how", ["kill_worker", "sigkill"])
def test_resume_after_a_lost_worker(cluster: Any, train_step: Any, how: str) -> None:
    w0, b0, batches = _problem(2)
    dp = DataParallel(train_step, cluster, {"w": w0, "b": b0}, learning_rate=LR)
    for x, y in batches[:5]:
        dp.step(x, y)
    if how == "kill_worker":
        cluster.kill_worker(1)
    else:
        os.kill(cluster.worker_pid(1), signal.SIGKILL)
    with pytest.raises(WorkerLost, match="worker 1"):
        dp.step(*batches[5], timeout=30)
    with pytest.raises(ClusterError, match="call resume"):
        dp.step(*batches[5])
    assert dp.resume() == 5
    assert cluster.alive(1)
    for x, y in batches[5:]:
        dp.step(x, y)
    w, b, _ = programs.numpy_linear_sgd(w0, b0, batches, LR)
    _assert_rel_close(dp.variables["w"], w)
    _assert_rel_close(dp.variables["b"], b)


@pytest.mark.usefixtures("restore_workers")
def test_resume_from_the_checkpoint_when_every_replica_is_lost(cluster: Any,
                                                               train_step: Any) -> None:
    w0, b0, batches = _problem(3)
    dp = DataParallel(train_step, cluster, {"w": w0, "b": b0}, learning_rate=LR)
    for x, y in batches[:4]:
        dp.step(x, y)
    dp.checkpoint()
    for x, y in batches[4:7]:
        dp.step(x, y)
    cluster.kill_worker(0)
    cluster.kill_worker(1)
    with pytest.raises(WorkerLost):
        dp.step(*batches[7], timeout=30)
    assert dp.resume() == 4
    for x, y in batches[4:]:
        dp.step(x, y)
    w, b, _ = programs.numpy_linear_sgd(w0, b0, batches, LR)
    _assert_rel_close(dp.variables["w"], w)
    _assert_rel_close(dp.variables["b"], b)
