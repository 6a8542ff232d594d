"""``tf.cond``, ``tf.while_loop`` and ``tf.switch_case`` compiled by pytfrt against TensorFlow.

Conditions and loop counts are runtime inputs, so the functional ops (``tg.if``, ``tg.while``,
``tg.case``) really run; a condition known at import time is checked to inline its branch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt
from pytfrt.compiler.frontends.tf import import_tf


@pytest.fixture(scope="module")
def control_fn(tf: Any) -> Any:
    w = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)

    @tf.function(
        input_signature=[tf.TensorSpec((None, 3), tf.float32), tf.TensorSpec((), tf.int32)]
    )
    def f(x: Any, n: Any) -> Any:
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.matmul(x, w), lambda: x - 1.0)

        def body(i: Any, acc: Any) -> Any:
            return i + 1, tf.tanh(acc * 1.5) + tf.cast(i, tf.float32)

        _, y = tf.while_loop(lambda i, acc: i < n, body, (tf.constant(0), y))
        z = tf.switch_case(n, [lambda: y + 1.0, lambda: y * 3.0, lambda: tf.nn.relu(-y)])
        return {"y": y, "z": z}

    return f


@pytest.fixture(scope="module")
def compiled_control(control_fn: Any) -> Any:
    return pytfrt.compile(control_fn)


@pytest.mark.parametrize("n", [0, 1, 2, 4, 7, -1])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_while_switch(
    compiled_control: Any, control_fn: Any, assert_matches: Any, n: int, sign: float
) -> None:
    x = sign * np.abs(np.random.default_rng(n + 10).normal(size=(4, 3))).astype(np.float32)
    ref = {k: v.numpy() for k, v in control_fn(x, np.int32(n)).items()}
    assert_matches(compiled_control(x, np.int32(n)), ref)


def test_functional_ops_in_ir(control_fn: Any) -> None:
    text = str(import_tf(control_fn))
    for op in ('"tg.if"', '"tg.while"', '"tg.case"'):
        assert op in text


def test_constant_condition_inlines_branch(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((2,), tf.float32)])
    def f(x: Any) -> Any:
        return tf.cond(tf.constant(True), lambda: x * 2.0, lambda: x - 1.0)

    text = str(import_tf(f))
    assert '"tg.if"' not in text and '"tg.mul"' in text
    np.testing.assert_allclose(pytfrt.compile(f)(np.array([1, 2], np.float32)), [2, 4])


def test_while_with_growing_shape(tf: Any, assert_matches: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((), tf.int32)])
    def f(n: Any) -> Any:
        _, v = tf.while_loop(
            lambda i, v: i < n,
            lambda i, v: (i + 1, tf.concat([v, tf.cast(tf.reshape(i, [1]), tf.float32)], 0)),
            (tf.constant(0), tf.zeros([0])),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None])),
        )
        return tf.reduce_sum(v) + tf.cast(tf.size(v), tf.float32)

    compiled = pytfrt.compile(f)
    for n in (0, 3, 6):
        assert_matches(compiled(np.int32(n)), f(np.int32(n)).numpy())


def test_tensor_array_in_a_loop(tf: Any, assert_matches: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((None, 4), tf.float32)])
    def f(x: Any) -> Any:
        steps = tf.TensorArray(tf.float32, size=5, element_shape=tf.TensorShape([None, 4]))
        inputs = tf.TensorArray(tf.float32, size=5).unstack(
            tf.stack([x * float(k) for k in range(5)])
        )

        def body(i: Any, h: Any, out: Any) -> Any:
            h = tf.tanh(h + inputs.read(i))
            return i + 1, h, out.write(i, h)

        _, h, out = tf.while_loop(lambda i, h, out: i < 5, body, (0, tf.zeros_like(x), steps))
        return out.stack(), h

    compiled = pytfrt.compile(f)
    for batch in (1, 3):
        x = np.random.default_rng(batch).normal(size=(batch, 4)).astype(np.float32)
        assert_matches(compiled(x), tuple(t.numpy() for t in f(x)))


def test_variable_writes_after_a_loop_finish_before_the_call_returns(tf: Any) -> None:
    """The output is ready before the loop runs; the write that follows the loop must still
    be done when the call returns (an async @main returns no chain to wait on)."""
    v = tf.Variable(0.0)

    @tf.function(input_signature=[tf.TensorSpec((), tf.int32)])
    def f(n: Any) -> Any:
        _, s = tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + 1.5), (0, 0.0))
        v.assign_add(s)
        return tf.constant(1.0)

    compiled = pytfrt.compile(f)
    compiled(np.int32(4))
    assert compiled.variables[v.name.rsplit(":", 1)[0]] == 6.0
    compiled(np.int32(2))
    assert compiled.variables[v.name.rsplit(":", 1)[0]] == 9.0
