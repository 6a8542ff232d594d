"""pytfrt.grad through ``pytfrt.switch_case`` (``tg.case``) against TensorFlow's
``tf.GradientTape`` over ``tf.switch_case`` (the same branches written in TF).

TF is the oracle for the index rule too: an index out of range, negative included, runs (and
differentiates) the last branch.  Both sides run eagerly and compiled (``@pytfrt.function`` /
``tf.function``).  (pytfrt has no reverse mode over a graph imported from TF: ``pytfrt.compile``
output is run, not differentiated, for ``tf.cond`` as for ``tf.switch_case``.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt
from pytfrt import eager

INDICES = [-5, -1, 0, 1, 2, 3, 9]
RNG = np.random.default_rng(3)


def _pt_branches(y: Any) -> list[Any]:
    return [lambda a: eager.exp(a) * y,
            lambda a: eager.tanh(a * a) - y * 3.0,
            lambda a: a * a * a * y + eager.sigmoid(a)]


def _tf_branches(tf: Any, x: Any, y: Any) -> list[Any]:
    return [lambda: tf.exp(x) * y,
            lambda: tf.tanh(x * x) - y * 3.0,
            lambda: x * x * x * y + tf.sigmoid(x)]


def _pt_loss(x: Any, y: Any, i: Any) -> Any:
    return eager.reduce_sum(pytfrt.switch_case(i, _pt_branches(y), x))


@pytest.fixture(scope="module")
def tf_grad(tf: Any) -> Any:
    def grads(x: Any, y: Any, i: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([x, y])
            loss = tf.reduce_sum(tf.switch_case(i, _tf_branches(tf, x, y)))
        gx, gy = tape.gradient(loss, [x, y])
        return loss, gx, gy

    return grads


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "function"])
def test_switch_case_gradient_matches_tf(tf: Any, tf_grad: Any, compiled: bool) -> None:
    x = RNG.uniform(-1.5, 1.5, (2, 3)).astype(np.float32)
    y = np.float32(0.6)
    vg = pytfrt.value_and_grad(_pt_loss, argnums=(0, 1))
    pt = pytfrt.function(lambda *a: vg(*a)) if compiled else vg
    ref = tf.function(tf_grad) if compiled else tf_grad
    for i in INDICES:
        v, (gx, gy) = pt(x, y, np.int32(i))
        tv, tgx, tgy = ref(tf.constant(x), tf.constant(y), tf.constant(i, tf.int32))
        np.testing.assert_allclose(v, tv.numpy(), rtol=1e-5, err_msg=f"index {i}")
        np.testing.assert_allclose(gx, tgx.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"index {i}")
        np.testing.assert_allclose(gy, tgy.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"index {i}")
