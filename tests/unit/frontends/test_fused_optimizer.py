"""Fused optimizer updates (``-tg-fuse-optimizer``, ``tg.apply_adam``/``tg.apply_momentum``).

Keras train steps compiled with the default pipeline carry one fused update of every
trainable variable; their losses and weights follow TensorFlow's (the oracle) step by step
within float32 rounding of the gradients (the fused kernel does the pattern's arithmetic op by
op in float32, as TF does).  The kernels themselves are checked bit for bit against NumPy on
random shapes, including a densified sparse gradient's separate square.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.compiler.api import compile_module, to_graph
from pytfrt.compiler.passes import DEFAULT_PIPELINE, run_passes
from pytfrt.compiler.passes.common import ops_named

STEPS = 6


def _compile(step: Any) -> tuple[Any, list[Any]]:
    gm = to_graph(step)
    run_passes(gm, DEFAULT_PIPELINE)
    fused = ops_named(gm, "tg.apply_adam") + ops_named(gm, "tg.apply_momentum")
    return compile_module(gm, optimize=False), fused


def _optimizer(keras: Any, name: str) -> Any:
    if name == "adam":
        return keras.optimizers.Adam(1e-2)
    if name == "adamw":
        return keras.optimizers.AdamW(1e-2, weight_decay=0.05)
    return keras.optimizers.SGD(0.05, momentum=0.9)


@pytest.mark.parametrize("name", ["adam", "adamw", "sgd_momentum"])
def test_fused_step_matches_tf_and_unfused(tf: Any, tf_models: Any, name: str) -> None:
    keras = tf.keras
    model = tf_models.mlp(inputs=12, hidden=(10, 8), classes=4, seed=21)
    step = tf_models.train_step(
        model, _optimizer(keras, name),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.TensorSpec((None,), tf.int32))
    rng = np.random.default_rng(5)
    batches = [(rng.normal(size=(6, 12)).astype(np.float32),
                rng.integers(0, 4, 6).astype(np.int32)) for _ in range(STEPS)]
    initial = [v.numpy().copy() for v in model.variables]
    fused, ops = _compile(step)
    assert len(ops) == 1
    kind = "tg.apply_momentum" if name == "sgd_momentum" else "tg.apply_adam"
    assert ops[0].name == kind
    weights = [v.path for v in model.trainable_variables]
    assert ops[0].attributes["variables"].data.split(",") == weights  # type: ignore[attr-defined]
    ours = [float(fused(x, y)) for x, y in batches]
    for v, value in zip(model.variables, initial, strict=True):
        v.assign(value)
    theirs = [float(step(x, y)) for x, y in batches]
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    trained = fused.variables
    for v in model.variables:  # weights, slots, the iteration count
        np.testing.assert_allclose(trained[v.path], v.numpy(), rtol=0, atol=2e-7,
                                   err_msg=v.path)


def _adam_reference(w: np.ndarray, m: np.ndarray, v: np.ndarray, g: np.ndarray,
                    s: np.ndarray, alpha: np.float32) -> tuple[np.ndarray, ...]:
    f = np.float32
    m2 = m + (g - m) * f(0.1)
    v2 = v + (s - v) * f(0.001)
    return w - (m2 * alpha) / (np.sqrt(v2) + f(1e-7)), m2, v2


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=0, max_size=3), sparse=st.booleans(),
       seed=st.integers(0, 2**16))
def test_adam_kernel_against_numpy(shape: list[int], sparse: bool, seed: int) -> None:
    _check_adam(shape, sparse, seed)


def test_large_variables_in_shards() -> None:
    """A variable of PARALLEL_MIN elements or more is updated in shards on the helper
    threads: the same bits."""
    from pytfrt.backends.cpu.optimizers import PARALLEL_MIN

    _check_adam([3, PARALLEL_MIN // 2 + 5], False, 1)
    _check_adam([PARALLEL_MIN + 7], True, 2)
    from pytfrt.backends.cpu.graph_state import Variable
    from pytfrt.backends.cpu.optimizers import apply_momentum
    from pytfrt.host.execution_context import ExecutionContext, RequestContext, ResourceContext
    from pytfrt.model import default_host

    rng = np.random.default_rng(3)
    w, m, g = (rng.normal(size=(PARALLEL_MIN + 3, 2)).astype(np.float32) for _ in range(3))
    rc = ResourceContext()
    rc.create_resource("tg.variable/w", Variable("w", w.copy()))
    rc.create_resource("tg.variable/m", Variable("m", m.copy()))
    ctx = ExecutionContext(RequestContext(default_host(), rc))
    lr, mu = np.float32(0.05), np.float32(0.9)
    apply_momentum(ctx, ["m", float(mu), "w"], np.array(lr), g, None)
    m2 = m * mu - g * lr
    for name, ref in (("m", m2), ("w", w + m2)):
        var = rc.get_resource("tg.variable/" + name)
        assert var is not None
        np.testing.assert_array_equal(var.array, ref, err_msg=name)


def _check_adam(shape: list[int], sparse: bool, seed: int) -> None:
    from pytfrt.backends.cpu.graph_state import Variable
    from pytfrt.backends.cpu.optimizers import apply_adam
    from pytfrt.host.execution_context import ExecutionContext, RequestContext, ResourceContext
    from pytfrt.model import default_host

    rng = np.random.default_rng(seed)
    w, m, v, g, s = (rng.normal(size=shape).astype(np.float32) for _ in range(5))
    v, s = np.abs(v), np.abs(s)
    rc = ResourceContext()
    for name, arr in (("w", w), ("m", m), ("v", v)):
        rc.create_resource("tg.variable/" + name, Variable(name, arr.copy()))
    ctx = ExecutionContext(RequestContext(default_host(), rc))
    alpha = np.float32(0.01)
    g_view = g.T if g.ndim > 1 else g  # a strided operand is read as the variable's layout
    operands = [np.array(alpha), np.ascontiguousarray(g_view).T] + ([s] if sparse else [])
    g_in = operands[1]
    apply_adam(ctx, [1e-7, "m", float(np.float32(0.1)), float(np.float32(0.001)),
                     [2 if sparse else -1], "w", "v"], *operands, None)
    want = _adam_reference(w, m, v, g_in, s if sparse else g_in * g_in, alpha)
    for name, ref in zip("wmv", want, strict=True):
        var = rc.get_resource("tg.variable/" + name)
        assert var is not None
        got = var.array
        np.testing.assert_array_equal(got, ref.reshape(got.shape), err_msg=name)


def test_adam_kernel_rejects_a_wrong_gradient() -> None:
    from pytfrt.backends.cpu.graph_state import Variable
    from pytfrt.backends.cpu.optimizers import apply_momentum
    from pytfrt.host.execution_context import ExecutionContext, RequestContext, ResourceContext
    from pytfrt.host.registry import KernelError
    from pytfrt.model import default_host

    rc = ResourceContext()
    for name in ("k", "m"):
        rc.create_resource("tg.variable/" + name, Variable(name, np.zeros(4, np.float32)))
    ctx = ExecutionContext(RequestContext(default_host(), rc))
    with pytest.raises(KernelError, match="gradient of variable 'k' is float32"):
        apply_momentum(ctx, ["m", 0.9, "k"], np.array(np.float32(0.1)),
                       np.zeros(5, np.float32), None)
    with pytest.raises(KernelError, match="does not exist"):
        apply_momentum(ctx, ["nope", 0.9, "k"], np.array(np.float32(0.1)),
                       np.zeros(4, np.float32), None)
