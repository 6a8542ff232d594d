"""TF's gradient ops through pytfrt (the ``grad`` catalogue family) against TensorFlow.

Each raw gradient op is wrapped in a ``tf.function`` whose tensors are inputs, compiled, and
compared with TF running the same function. Whole-model gradients (``GradientTape`` w.r.t. the
weights of the MLP and the CNN, returned rather than applied) check the gradient graphs TF
emits. The compute functions TF never emits (``gelu_grad``, ``layer_norm_grad``) are checked
against TF's autodiff of the forward op.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pytfrt
from pytfrt.backends.cpu import grad_ops, graph_kernels


def _compile_and_compare(
    tf: Any, fn: Callable[..., Any], args: list[np.ndarray], assert_matches: Any
) -> None:
    specs = [tf.TensorSpec(a.shape, a.dtype) for a in args]
    f = tf.function(fn, input_signature=specs)
    ref = f(*args)
    ref = tuple(r.numpy() for r in ref) if isinstance(ref, tuple | list) else ref.numpy()
    assert_matches(pytfrt.compile(f)(*args), ref)


def _r(*shape: int, seed: int = 0, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float32)


ELEMENTWISE = [
    ("ReluGrad", lambda tf, a, b: tf.raw_ops.ReluGrad(gradients=a, features=b)),
    ("Relu6Grad", lambda tf, a, b: tf.raw_ops.Relu6Grad(gradients=a, features=b * 4)),
    ("SigmoidGrad", lambda tf, a, b: tf.raw_ops.SigmoidGrad(y=tf.sigmoid(a), dy=b)),
    ("TanhGrad", lambda tf, a, b: tf.raw_ops.TanhGrad(y=tf.tanh(a), dy=b)),
    ("RsqrtGrad", lambda tf, a, b: tf.raw_ops.RsqrtGrad(y=tf.math.rsqrt(tf.abs(a) + 0.5), dy=b)),
    ("SqrtGrad", lambda tf, a, b: tf.raw_ops.SqrtGrad(y=tf.sqrt(tf.abs(a) + 0.5), dy=b)),
    ("ReciprocalGrad", lambda tf, a, b: tf.raw_ops.ReciprocalGrad(y=1 / (tf.abs(a) + 0.5), dy=b)),
    ("EluGrad", lambda tf, a, b: tf.raw_ops.EluGrad(gradients=b, outputs=tf.nn.elu(a))),
    ("SeluGrad", lambda tf, a, b: tf.raw_ops.SeluGrad(gradients=b, outputs=tf.nn.selu(a))),
    ("SoftplusGrad", lambda tf, a, b: tf.raw_ops.SoftplusGrad(gradients=b, features=a)),
    ("SoftsignGrad", lambda tf, a, b: tf.raw_ops.SoftsignGrad(gradients=b, features=a)),
    (
        "LeakyReluGrad",
        lambda tf, a, b: tf.raw_ops.LeakyReluGrad(gradients=b, features=a, alpha=0.3),
    ),
]


@pytest.mark.parametrize("name,fn", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise_grads(tf: Any, assert_matches: Any, name: str, fn: Any) -> None:
    _compile_and_compare(
        tf, lambda a, b: fn(tf, a, b), [_r(3, 7, seed=1), _r(3, 7, seed=2)], assert_matches
    )


def test_bias_add_grad_and_cross_entropy(tf: Any, assert_matches: Any) -> None:
    logits, labels = (
        _r(5, 6, seed=3),
        np.random.default_rng(4).dirichlet(np.ones(6), 5).astype(np.float32),
    )
    ids = np.array([0, 5, 2, 2, 1], np.int32)

    def f(logits: Any, labels: Any, ids: Any) -> Any:
        loss, back = tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=logits, labels=labels)
        sloss, sback = tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=ids)
        return (
            loss,
            back,
            sloss,
            sback,
            tf.raw_ops.BiasAddGrad(out_backprop=tf.reshape(logits, [5, 3, 2])),
        )

    _compile_and_compare(tf, f, [logits, labels, ids], assert_matches)


@pytest.mark.parametrize("padding,stride", [("SAME", 1), ("SAME", 2), ("VALID", 2)])
def test_conv_and_pool_grads(tf: Any, assert_matches: Any, padding: str, stride: int) -> None:
    x, w, dw_filter = _r(2, 9, 9, 4, seed=5), _r(3, 3, 4, 6, seed=6), _r(3, 3, 4, 2, seed=7)
    s = [1, stride, stride, 1]

    def f(x: Any, w: Any, dwf: Any) -> Any:
        y = tf.nn.conv2d(x, w, s, padding)
        dy = tf.sin(y)
        dx = tf.raw_ops.Conv2DBackpropInput(
            input_sizes=tf.shape(x), filter=w, out_backprop=dy, strides=s, padding=padding
        )
        dfil = tf.raw_ops.Conv2DBackpropFilter(
            input=x, filter_sizes=tf.shape(w), out_backprop=dy, strides=s, padding=padding
        )
        yd = tf.nn.depthwise_conv2d(x, dwf, s, padding)
        dyd = tf.cos(yd)
        ddx = tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
            input_sizes=tf.shape(x), filter=dwf, out_backprop=dyd, strides=s, padding=padding
        )
        ddf = tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
            input=x, filter_sizes=tf.shape(dwf), out_backprop=dyd, strides=s, padding=padding
        )
        p = tf.nn.max_pool2d(x, 3, stride, padding)
        mp = tf.raw_ops.MaxPoolGrad(
            orig_input=x,
            orig_output=p,
            grad=tf.sin(p),
            ksize=[1, 3, 3, 1],
            strides=s,
            padding=padding,
        )
        a = tf.nn.avg_pool2d(x, 3, stride, padding)
        ap = tf.raw_ops.AvgPoolGrad(
            orig_input_shape=tf.shape(x),
            grad=tf.sin(a),
            ksize=[1, 3, 3, 1],
            strides=s,
            padding=padding,
        )
        return dx, dfil, ddx, ddf, mp, ap

    _compile_and_compare(tf, f, [x, w, dw_filter], assert_matches)


def test_fused_batch_norm_grad(tf: Any, assert_matches: Any) -> None:
    x, scale, dy = _r(4, 5, 5, 3, seed=8), _r(3, seed=9, low=0.5), _r(4, 5, 5, 3, seed=10)

    def f(x: Any, scale: Any, dy: Any) -> Any:
        y, mean, var, r1, r2, r3 = tf.raw_ops.FusedBatchNormV3(
            x=x,
            scale=scale,
            offset=tf.zeros([3]),
            mean=tf.zeros([0]),
            variance=tf.zeros([0]),
            epsilon=1e-3,
            is_training=True,
        )
        dx, dscale, doffset, _, _ = tf.raw_ops.FusedBatchNormGradV3(
            y_backprop=dy,
            x=x,
            scale=scale,
            reserve_space_1=r1,
            reserve_space_2=r2,
            reserve_space_3=r3,
            epsilon=1e-3,
        )
        return y, mean, var, dx, dscale, doffset

    _compile_and_compare(tf, f, [x, scale, dy], assert_matches)


@pytest.mark.parametrize("which", ["mlp", "cnn"])
def test_model_weight_gradients(tf: Any, tf_models: Any, assert_matches: Any, which: str) -> None:
    if which == "mlp":
        model = tf_models.mlp(inputs=20, hidden=(16, 8), classes=5, seed=2)
        x = _r(6, 20, seed=11)
    else:
        model = tf_models.cnn(size=12, dropout=0.0, classes=5, seed=2)
        x = _r(6, 12, 12, 1, seed=11)
    y = np.array([0, 1, 4, 3, 3, 2], np.int32)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(
        input_signature=[tf.TensorSpec((None, *x.shape[1:])), tf.TensorSpec((None,), tf.int32)]
    )
    def grads(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return (loss, *tape.gradient(loss, model.trainable_variables))

    ref = [g.numpy() for g in grads(x, y)]
    out = pytfrt.compile(grads)(x, y)
    assert isinstance(out, tuple) and len(out) == len(ref)
    # The conv bias feeds a batch norm: its gradient is 0 up to rounding, so every gradient is
    # measured against the largest one (a relative error of each would compare noise).
    scale = max(float(np.max(np.abs(r))) for r in ref)
    for o, r in zip(out, ref, strict=True):
        assert o.shape == r.shape
        assert np.max(np.abs(o - r)) <= 1e-4 * scale


def test_gelu_grad_against_tf(tf: Any) -> None:
    x = _r(50, seed=12, low=-5, high=5).astype(np.float64)
    dy = _r(50, seed=13).astype(np.float64)
    for approximate in (False, True):
        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = tf.nn.gelu(xt, approximate=approximate)
        ref = tape.gradient(y, xt, output_gradients=tf.constant(dy)).numpy()
        # TF rounds some of its float64 GELU constants to float32: agree to ~1e-8 only.
        np.testing.assert_allclose(
            grad_ops.gelu_grad(dy, x, approximate=approximate), ref, rtol=1e-6, atol=1e-9
        )
    exact = [
        0.5 * (1 + math.erf(v / math.sqrt(2))) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
        for v in x
    ]
    np.testing.assert_allclose(
        grad_ops.gelu_grad(dy, x, approximate=False), dy * np.array(exact), rtol=1e-12
    )


def test_layer_norm_grad_against_tf(tf: Any) -> None:
    x, gamma, dy = (
        _r(3, 4, 6, seed=14).astype(np.float64),
        _r(6, seed=15).astype(np.float64),
        _r(3, 4, 6, seed=16).astype(np.float64),
    )
    xt, gt = tf.constant(x), tf.constant(gamma)
    with tf.GradientTape() as tape:
        tape.watch([xt, gt])
        mean, var = tf.nn.moments(xt, axes=[2], keepdims=True)
        y = (xt - mean) * tf.math.rsqrt(var + 1e-5) * gt
    ref = tape.gradient(y, [xt, gt], output_gradients=tf.constant(dy))
    dx, dgamma, dbeta = grad_ops.layer_norm_grad(dy, x, gamma, axis=2, epsilon=1e-5)
    np.testing.assert_allclose(dx, ref[0].numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dgamma, ref[1].numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dbeta, dy.sum(axis=(0, 1)), rtol=1e-12)


@pytest.mark.parametrize("width", [1, 7, 33])
def test_layer_norm_grad_float32_rows_against_tf(tf: Any, width: int) -> None:
    """The one-pass float32 path (rows along the last axis) against TF's float64 autodiff."""
    x, gamma, dy = _r(5, 3, width, seed=24), _r(width, seed=25), _r(5, 3, width, seed=26)
    xt, gt = tf.constant(x.astype(np.float64)), tf.constant(gamma.astype(np.float64))
    with tf.GradientTape() as tape:
        tape.watch([xt, gt])
        mean, var = tf.nn.moments(xt, axes=[2], keepdims=True)
        y = (xt - mean) * tf.math.rsqrt(var + 1e-3) * gt
    ref = tape.gradient(y, [xt, gt], output_gradients=tf.constant(dy.astype(np.float64)))
    dx, dgamma, dbeta = grad_ops.layer_norm_grad(dy, x, gamma, axis=-1, epsilon=1e-3)
    assert dx.dtype == dgamma.dtype == dbeta.dtype == np.float32
    np.testing.assert_allclose(dx, ref[0].numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dgamma, ref[1].numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dbeta, dy.astype(np.float64).sum(axis=(0, 1)), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("width", [7, 33])
def test_keras_layer_norm_gradient_is_one_op(tf: Any, width: int) -> None:
    """Keras' LayerNormalization under a GradientTape: its gradient's ~20 ops become one
    ``layer_norm_grad`` (``-tg-fuse-layer-norm-grad``), and the compiled gradients match TF's."""
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.passes import default_pipeline

    norm = tf.keras.layers.LayerNormalization(epsilon=1e-4)
    norm.build((None, 3, width))
    norm.gamma.assign(_r(width, seed=27))
    norm.beta.assign(_r(width, seed=28))

    @tf.function(input_signature=[tf.TensorSpec((None, 3, width), tf.float32)] * 2)
    def grads(x: Any, w: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(norm(x) * w)
        return tape.gradient(loss, [x, norm.gamma, norm.beta])

    x, w = _r(4, 3, width, seed=29), _r(4, 3, width, seed=30)
    names = [op.name for f in default_pipeline(to_graph(grads)).module.ops
             for op in f.walk()]
    assert names.count("tg.layer_norm_grad") == 1 and "tg.broadcast_to" not in names
    got = pytfrt.compile(grads)(x, w)
    for g, r in zip(got, grads(x, w), strict=True):
        np.testing.assert_allclose(g, r.numpy(), rtol=1e-4, atol=1e-5)


def test_broadcast_gradient_args_compute(tf: Any) -> None:
    # through the runtime table, as a compiled program calls it (read-only operands in the suite)
    kernel = graph_kernels.graph_ops()["broadcast_gradient_args"]
    for s0, s1 in [([2, 3, 4], [4]), ([1, 3], [5, 1]), ([2, 1, 4], [2, 3, 1]), ([], [3])]:
        ref = tf.raw_ops.BroadcastGradientArgs(
            s0=tf.constant(s0, tf.int32), s1=tf.constant(s1, tf.int32)
        )
        got = kernel(np.array(s0, np.int32), np.array(s1, np.int32))
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_array_equal(np.sort(g), np.sort(r.numpy()))


def test_stateless_random_uniform_is_tf_bit_for_bit(tf: Any) -> None:
    @tf.function(
        input_signature=[tf.TensorSpec((2,), tf.int64), tf.TensorSpec((None, 3), tf.float32)]
    )
    def f(seed: Any, x: Any) -> Any:
        u = tf.random.stateless_uniform(tf.shape(x), seed)
        v = tf.raw_ops.StatelessRandomUniform(shape=[5, 7], seed=seed)
        return u, v

    compiled = pytfrt.compile(f)
    for seed in ([1, 2], [-5, 2**40], [0, 0]):
        s = np.array(seed, np.int64)
        x = np.zeros((9, 3), np.float32)
        for o, r in zip(compiled(s, x), f(s, x), strict=True):
            np.testing.assert_array_equal(o, r.numpy())


def test_stateless_random_gamma_is_tf_bit_for_bit(tf: Any) -> None:
    """TF's Marsaglia-Tsang sampler (``StatelessRandomGammaV3``): alphas below, at and above 1
    (each its own branch), a run-time batch, f32 and f64, a broadcast ``beta``
    (``BroadcastArgs``)."""

    @tf.function(
        input_signature=[tf.TensorSpec((2,), tf.int64), tf.TensorSpec((None, 4), tf.float32)]
    )
    def f(seed: Any, x: Any) -> Any:
        alpha = tf.constant([0.3, 1.0, 2.5, 0.01])
        a = tf.random.stateless_gamma(tf.shape(x), seed, alpha=alpha)
        b = tf.random.stateless_gamma([3, 2, 2], seed, alpha=[[7.0], [0.9]], beta=[2.0, 0.5],
                                      dtype=tf.float64)
        return a, b

    compiled = pytfrt.compile(f)
    for seed in ([1, 2], [-5, 2**40], [0, 0], [17, 3]):
        s = np.array(seed, np.int64)
        x = np.zeros((40, 4), np.float32)
        for o, r in zip(compiled(s, x), f(s, x), strict=True):
            assert o.dtype == r.numpy().dtype
            np.testing.assert_array_equal(o, r.numpy())


def test_broadcast_args_of_run_time_shapes(tf: Any) -> None:
    """``BroadcastArgs`` (the gamma sampler's shape) when the shapes are known only at run
    time: computed by the program, as TF."""

    @tf.function(
        input_signature=[tf.TensorSpec((None,), tf.int32), tf.TensorSpec((None,), tf.int32)]
    )
    def f(a: Any, b: Any) -> Any:
        return tf.raw_ops.BroadcastArgs(s0=a, s1=b)

    compiled = pytfrt.compile(f)
    for a, b in (([2, 1, 3], [4, 1]), ([1], [5, 6]), ([], [3])):
        x, y = np.array(a, np.int32), np.array(b, np.int32)
        np.testing.assert_array_equal(compiled(x, y), f(x, y).numpy())


def test_stateless_random_uniform_int_is_tf_bit_for_bit(tf: Any) -> None:
    @tf.function(
        input_signature=[tf.TensorSpec((2,), tf.int64), tf.TensorSpec((None, 3), tf.float32)]
    )
    def f(seed: Any, x: Any) -> Any:
        a = tf.random.stateless_uniform(tf.shape(x), seed, minval=-7, maxval=1000, dtype=tf.int32)
        b = tf.random.stateless_uniform([4, 5], seed, minval=-(2**40), maxval=3, dtype=tf.int64)
        return a, b

    compiled = pytfrt.compile(f)
    for seed in ([1, 2], [-5, 2**40]):
        s = np.array(seed, np.int64)
        x = np.zeros((9, 3), np.float32)
        for o, r in zip(compiled(s, x), f(s, x), strict=True):
            np.testing.assert_array_equal(o, r.numpy())
