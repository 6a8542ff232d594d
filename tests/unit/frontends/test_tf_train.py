"""Compiled Keras train steps (``GradientTape`` + optimizer update) against TensorFlow.

The same model is trained twice from identical weights, 20 steps on identical batches: once by
TF (the ``tf.function`` itself), once by the pytfrt model compiled from it. Losses must agree
within 1e-4 relative at every step, and the final weights too (``CompiledModel.variables``).
The source model's weights (and its dropout seed state) are restored before TF trains, so
both start from the same point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytfrt

STEPS = 20


def _train_both(
    tf: Any, model: Any, step: Any, batches: list[tuple[np.ndarray, np.ndarray]]
) -> tuple[Any, list[float], list[float]]:
    initial = [v.numpy().copy() for v in model.variables]
    compiled = pytfrt.compile(step)
    ours = [float(compiled(x, y)) for x, y in batches]
    for v, value in zip(model.variables, initial, strict=True):
        v.assign(value)
    theirs = [float(step(x, y)) for x, y in batches]
    return compiled, ours, theirs


def _close(ours: list[float], theirs: list[float], tol: float = 1e-4) -> None:
    errs = [abs(a - b) / abs(b) for a, b in zip(ours, theirs, strict=True)]
    assert max(errs) <= tol, f"losses differ: {list(zip(ours, theirs, strict=True))}"


def _check_variables(compiled: Any, model: Any) -> None:
    """Trained weights agree; each relative to the largest weight of the model (a conv bias
    feeding a batch norm has a zero gradient and stays at rounding noise around 0)."""
    trained = compiled.variables
    scale = max(float(np.max(np.abs(v.numpy()))) for v in model.trainable_variables)
    for v in model.trainable_variables:
        name = v.path
        assert name in trained, f"variable {name} missing from {sorted(trained)}"
        err = np.max(np.abs(trained[name] - v.numpy())) / scale
        assert err <= 1e-4, f"{name}: relative error {err:.3g}"


def test_mlp_adam(tf: Any, tf_models: Any) -> None:
    keras = tf.keras
    model = tf_models.mlp(inputs=32, hidden=(24, 16), classes=5, seed=11)
    step = tf_models.train_step(
        model,
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.TensorSpec((None,), tf.int32),
    )
    rng = np.random.default_rng(0)
    batches = [
        (rng.normal(size=(16, 32)).astype(np.float32), rng.integers(0, 5, 16).astype(np.int32))
        for _ in range(STEPS)
    ]
    compiled, ours, theirs = _train_both(tf, model, step, batches)
    _close(ours, theirs)
    assert theirs[-1] < theirs[0]
    _check_variables(compiled, model)


def test_cnn_sgd_with_dropout(tf: Any, tf_models: Any) -> None:
    """Conv2D, BatchNorm (batch statistics, moving averages), MaxPool, Dropout (TF's Philox
    masks, reproduced bit for bit), Dense; SGD with momentum."""
    keras = tf.keras
    model = tf_models.cnn(size=12, dropout=0.3, classes=4, seed=12)
    step = tf_models.train_step(
        model,
        keras.optimizers.SGD(0.05, momentum=0.9),
        keras.losses.CategoricalCrossentropy(from_logits=True),
        tf.TensorSpec((None, 4), tf.float32),
    )
    rng = np.random.default_rng(1)
    batches = [
        (
            rng.normal(size=(8, 12, 12, 1)).astype(np.float32),
            np.eye(4, dtype=np.float32)[rng.integers(0, 4, 8)],
        )
        for _ in range(STEPS)
    ]
    compiled, ours, theirs = _train_both(tf, model, step, batches)
    _close(ours, theirs)
    _check_variables(compiled, model)


def test_residual_cnn_sgd_momentum(tf: Any, tf_models: Any) -> None:
    """Conv2D+BatchNorm+ReLU, a residual Add, GlobalAveragePooling2D (its gradient stitches
    the kept-dims shape with ``DynamicStitch``), Dense; SGD with momentum; batch 32 of
    32x32x3."""
    keras = tf.keras
    model = tf_models.residual_cnn(seed=14)
    # a rate at which 20 steps stay out of the chaotic regime: at 0.05 the two runs' float32
    # rounding (1e-7 after one step) grows past 1e-4 in the weights by step 20
    step = tf_models.train_step(
        model,
        keras.optimizers.SGD(0.01, momentum=0.9),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.TensorSpec((None,), tf.int32),
    )
    rng = np.random.default_rng(3)
    batches = [
        (
            rng.normal(size=(32, 32, 32, 3)).astype(np.float32),
            rng.integers(0, 10, 32).astype(np.int32),
        )
        for _ in range(STEPS)
    ]
    compiled, ours, theirs = _train_both(tf, model, step, batches)
    _close(ours, theirs)
    _check_variables(compiled, model)
    for v in model.non_trainable_variables:  # the batch norms' moving statistics
        np.testing.assert_allclose(compiled.variables[v.path], v.numpy(), rtol=1e-4, atol=1e-5)


def test_bottleneck_cnn_sgd_momentum(tf: Any, tf_models: Any) -> None:
    """ResNet-50's layer types (the 7x7/2 stem with bias and ZeroPadding2D, the padded 3x3/2 max
    pool, bottleneck blocks with projection shortcuts, stride 2, epsilon 1.001e-5) train as TF
    does: the full ResNet-50 at small images departs from TF after a step only through float32
    rounding deciding a ReLU on a batch norm over 8 values (docs/benchmarks.md)."""
    keras = tf.keras
    model = tf_models.bottleneck_cnn(seed=15)
    step = tf_models.train_step(
        model,
        keras.optimizers.SGD(0.01, momentum=0.9),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.TensorSpec((None,), tf.int32),
    )
    rng = np.random.default_rng(15)
    batches = [
        (
            rng.normal(size=(16, 16, 16, 3)).astype(np.float32),
            rng.integers(0, 10, 16).astype(np.int32),
        )
        for _ in range(STEPS)
    ]
    compiled, ours, theirs = _train_both(tf, model, step, batches)
    _close(ours, theirs)
    assert theirs[-1] < theirs[0]
    _check_variables(compiled, model)


def _weight_departure(trained: list[np.ndarray], reference: list[np.ndarray]) -> float:
    """The largest weight difference relative to the reference's largest weight (as
    :func:`_check_variables` measures)."""
    scale = max(float(np.max(np.abs(v))) for v in reference)
    return max(float(np.max(np.abs(a - b))) for a, b in zip(trained, reference, strict=True)
               ) / scale


def test_degenerate_batch_norm_departs_from_tf_as_tf_does(tf: Any, tf_models: Any) -> None:
    """Where 20 steps cannot agree with TF within 1e-4, TF cannot agree with itself either.

    ResNet-50's layer types at 8x8 images and batch 4: the last block's batch norms normalise
    each channel over 4 values (1x1 pixels, as ResNet-50's stage 5 over 8 at 32x32 images and
    batch 8), so a float32 rounding difference flips ReLUs and the steps amplify it.  TF with
    XLA (``jit_compile``: the same graph, other kernels and summation orders) departs from TF
    by more than the train tests' 1e-4; pytfrt departs by the same order, not more
    (``benchmarks/train_agreement.py`` measures ResNet-50 itself: docs/benchmarks.md)."""
    keras = tf.keras
    model = tf_models.bottleneck_cnn(size=8, seed=15)
    initial = [v.numpy().copy() for v in model.variables]

    def step(jit: bool) -> Any:
        return tf_models.train_step(
            model, keras.optimizers.SGD(0.01, momentum=0.9),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            tf.TensorSpec((None,), tf.int32), jit_compile=jit)

    rng = np.random.default_rng(15)
    batches = [(rng.normal(size=(4, 8, 8, 3)).astype(np.float32),
                rng.integers(0, 10, 4).astype(np.int32)) for _ in range(STEPS)]
    compiled, ours, theirs = _train_both(tf, model, step(False), batches)
    reference = [v.numpy() for v in model.trainable_variables]
    trained = compiled.variables
    our_departure = _weight_departure([trained[v.path] for v in model.trainable_variables],
                                      reference)
    for v, value in zip(model.variables, initial, strict=True):
        v.assign(value)
    xla_step = step(True)
    xla = [float(xla_step(x, y)) for x, y in batches]
    xla_departure = _weight_departure([v.numpy() for v in model.trainable_variables], reference)

    def loss_departure(losses: list[float]) -> float:
        return max(abs(a - b) / abs(b) for a, b in zip(losses, theirs, strict=True))

    assert abs(ours[0] - theirs[0]) / abs(theirs[0]) < 1e-5  # the forward before any update
    assert loss_departure(xla) > 1e-3 and xla_departure > 1e-3  # TF against TF: past 1e-4
    assert loss_departure(ours) < 5 * loss_departure(xla)
    assert our_departure < 5 * xla_departure


def test_transformer_block_adam(tf: Any, tf_models: Any) -> None:
    """Embedding (its gradient reaches Adam as slices: ``UnsortedSegmentSum`` over run-time
    ids, whose row width is only known through ``concat([Size(ids)], [32])``), multi-head
    attention, LayerNorm, GELU MLP; mean squared error."""
    keras = tf.keras
    model = tf_models.transformer_block(seed=15)
    step = tf_models.train_step(
        model, keras.optimizers.Adam(1e-3), keras.losses.MeanSquaredError(),
        tf.TensorSpec((None, 16, 32), tf.float32),
    )
    rng = np.random.default_rng(4)
    batches = [
        (rng.integers(0, 100, (8, 16)).astype(np.int32),
         rng.normal(size=(8, 16, 32)).astype(np.float32))
        for _ in range(STEPS)
    ]
    compiled, ours, theirs = _train_both(tf, model, step, batches)
    _close(ours, theirs)
    assert theirs[-1] < theirs[0]
    _check_variables(compiled, model)


def test_each_call_updates_the_weights(tf: Any, tf_models: Any, tmp_path: Path) -> None:
    keras = tf.keras
    model = tf_models.mlp(inputs=6, hidden=(4,), classes=3, seed=13)
    step = tf_models.train_step(
        model,
        keras.optimizers.SGD(0.1),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.TensorSpec((None,), tf.int32),
    )
    compiled = pytfrt.compile(step)
    x = np.random.default_rng(2).normal(size=(4, 6)).astype(np.float32)
    y = np.array([0, 1, 2, 1], np.int32)
    before = compiled.variables
    losses = [float(compiled(x, y)) for _ in range(3)]
    after = compiled.variables
    assert losses[0] > losses[1] > losses[2]
    kernel = model.trainable_variables[0].path
    assert not np.array_equal(before[kernel], after[kernel])
    # save + load keeps the trained weights; both copies then take the same next step
    compiled.save(tmp_path / "step")
    loaded = pytfrt.load(tmp_path / "step")
    for name, value in after.items():
        np.testing.assert_array_equal(loaded.variables[name], value)
    np.testing.assert_array_equal(loaded(x, y), compiled(x, y))


@pytest.mark.parametrize(
    "optimizer", ["ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyAdam"]
)
def test_raw_optimizer_ops(tf: Any, optimizer: str) -> None:
    w = tf.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    m = tf.Variable(np.zeros((2, 3), np.float32))
    v = tf.Variable(np.zeros((2, 3), np.float32))

    @tf.function(input_signature=[tf.TensorSpec((2, 3), tf.float32)])
    def update(g: Any) -> Any:
        if optimizer == "ResourceApplyGradientDescent":
            tf.raw_ops.ResourceApplyGradientDescent(var=w.handle, alpha=0.1, delta=g)
        elif optimizer == "ResourceApplyMomentum":
            tf.raw_ops.ResourceApplyMomentum(
                var=w.handle, accum=m.handle, lr=0.1, grad=g, momentum=0.9, use_nesterov=True
            )
        else:
            tf.raw_ops.ResourceApplyAdam(
                var=w.handle,
                m=m.handle,
                v=v.handle,
                beta1_power=0.9,
                beta2_power=0.999,
                lr=0.01,
                beta1=0.9,
                beta2=0.999,
                epsilon=1e-7,
                grad=g,
            )
        return w.read_value()

    initial = [t.numpy().copy() for t in (w, m, v)]
    compiled = pytfrt.compile(update)
    grads = [np.random.default_rng(i).normal(size=(2, 3)).astype(np.float32) for i in range(3)]
    ours = [compiled(g) for g in grads]
    for t, value in zip((w, m, v), initial, strict=True):
        t.assign(value)
    theirs = [update(g).numpy() for g in grads]
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
