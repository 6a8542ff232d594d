"""CompiledModels on the cluster: remote calls against the local model; data-parallel training
of the MNIST-sized MLP (examples/distributed) against single-process NumPy SGD, and of a
TF-imported gradient function against TensorFlow's own SGD."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from pytfrt.distributed import DataParallel, RemoteError

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "distributed" / "mlp_train_step.py"
STEPS, LR = 20, 0.1


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dist_mlp_train_step", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mlp() -> ModuleType:
    return _load_example()


@pytest.fixture(scope="module")
def train_step(mlp: ModuleType) -> Any:
    from pytfrt.compiler.api import compile_module

    return compile_module(mlp.build_train_step())


def test_a_compiled_model_runs_remotely(cluster: Any, mlp: ModuleType, train_step: Any,
                                        tmp_path: Path) -> None:
    params = mlp.init_params(seed=3)
    x, y = mlp.synthetic_mnist(16, seed=4)
    args = [params[k] for k in ("w1", "b1", "w2", "b2")] + [x, y]
    local = train_step(*args)
    train_step.save(tmp_path / "saved")
    for source in (train_step, tmp_path / "saved"):
        handle = cluster.load(source, name="mlp_step")
        assert handle.functions == {"main": 5}
        remote = cluster.remote_execute(1, handle, *args).result(timeout=60)
        assert len(remote) == 5
        for got, want in zip(remote, local, strict=True):
            # Ray workers run BLAS single-threaded (OMP_NUM_THREADS): summation order differs.
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        with pytest.raises(RemoteError, match="worker 0: model call failed: InputError"):
            cluster.call(0, handle, *args[:-1])
        cluster.unload(handle)


def test_data_parallel_mlp_matches_single_process(cluster: Any, mlp: ModuleType,
                                                  train_step: Any) -> None:
    params = mlp.init_params(seed=0)
    x_all, y_all = mlp.synthetic_mnist(4 * 48, seed=1)
    batches = [(x_all[i:i + 48], y_all[i:i + 48]) for i in range(0, len(x_all), 48)]
    dp = DataParallel(train_step, cluster, params, learning_rate=LR)
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    for step in range(STEPS):
        x, y = batches[step % len(batches)]
        loss = dp.step(x, y)
        ref_loss, grads = mlp.numpy_train_step(ref, x, y)
        assert loss == pytest.approx(ref_loss, rel=1e-5)
        ref = {k: ref[k] - LR * grads[k] for k in ref}
    weights = dp.variables
    for k in ref:
        err = np.linalg.norm(weights[k] - ref[k]) / np.linalg.norm(ref[k])
        assert err <= 1e-5, f"{k}: relative error {err:.2e}"


def test_data_parallel_tf_gradient_step_matches_tensorflow(cluster: Any) -> None:
    """A tf.function returning (loss, *gradients), imported by the TF front end, trained on 2
    workers; TensorFlow's own full-batch SGD is the oracle."""
    tf = pytest.importorskip("tensorflow")
    from pytfrt.compiler.api import compile as pytfrt_compile

    @tf.function
    def step(w: Any, b: Any, x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([w, b])
            logits = tf.nn.relu(tf.matmul(x, w) + b)
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        gw, gb = tape.gradient(loss, [w, b])
        return loss, gw, gb

    sig = [tf.TensorSpec((20, 5), tf.float32), tf.TensorSpec((5,), tf.float32),
           tf.TensorSpec((None, 20), tf.float32), tf.TensorSpec((None, 5), tf.float32)]
    model = pytfrt_compile(step, sig)
    rng = np.random.default_rng(5)
    w = rng.normal(size=(20, 5)).astype(np.float32)
    b = np.full(5, 0.1, np.float32)
    dp = DataParallel(model, cluster, {"w": w, "b": b}, learning_rate=LR)
    tw, tb = tf.Variable(w), tf.Variable(b)
    for _ in range(STEPS):
        x = rng.normal(size=(12, 20)).astype(np.float32)
        y = np.eye(5, dtype=np.float32)[rng.integers(0, 5, 12)]
        loss = dp.step(x, y)
        ref_loss, gw, gb = step(tw, tb, x, y)
        assert loss == pytest.approx(float(ref_loss), rel=1e-5)
        tw.assign_sub(LR * gw)
        tb.assign_sub(LR * gb)
    weights = dp.variables
    for got, want in ((weights["w"], tw.numpy()), (weights["b"], tb.numpy())):
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert err <= 1e-5, f"relative error {err:.2e}"
