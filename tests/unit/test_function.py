"""@pytfrt.function: tracing over pytfrt.eager, retracing, pytrees, control flow, errors; the XOR
example against an independent NumPy loop; the DataParallel adapter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytfrt
from pytfrt import eager
from pytfrt.compiler.frontends.trace import TraceError

REPO = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(1)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_eager_ops_and_operators_match_numpy():
    @pytfrt.function
    def f(x, w, b):
        h = eager.relu(eager.matmul(x, w) + b)
        y = 1.0 - h * 2 / (1 + abs(h)) ** 2
        return eager.reduce_sum(y, axis=1), eager.softmax(h), h.T, (h > 0.5), -y[1:, ::2]

    x, w, b = f32(4, 3), f32(3, 5), f32(5)
    h = np.maximum(x @ w + b, 0)
    y = 1.0 - h * 2 / (1 + abs(h)) ** 2
    e = np.exp(h - h.max(-1, keepdims=True))
    want = (y.sum(1), e / e.sum(-1, keepdims=True), h.T, h > 0.5, -y[1:, ::2])
    got = f(x, w, b)
    assert isinstance(got, tuple) and len(got) == 5
    for g, wnt in zip(got, want, strict=True):
        assert g.dtype == wnt.dtype and g.shape == wnt.shape
        np.testing.assert_allclose(g, wnt, rtol=1e-5, atol=1e-6)


def test_pytrees_and_python_values():
    @pytfrt.function
    def f(tree, scale, name=None):
        out = {"sum": tree["a"] + tree["b"][0], "scaled": [t * scale for t in tree["b"]]}
        return out, name, 3

    a, b0, b1 = f32(2), f32(2), f32(2)
    out, name, three = f({"b": [b0, b1], "a": a}, 2.0, name="n")
    assert name == "n" and three == 3
    np.testing.assert_allclose(out["sum"], a + b0)
    np.testing.assert_allclose(out["scaled"][1], b1 * 2)
    assert isinstance(out["scaled"], list)


def test_retraces_per_signature_and_caches():
    traces = []

    @pytfrt.function
    def f(x, k):
        traces.append((x.shape, x.dtype, k))
        return x * k

    x = f32(3)
    f(x, 2)
    f(f32(3), 2)                      # same signature: cached
    assert len(traces) == 1
    f(x, 3)                           # new Python value
    f(f32(4), 3)                      # new shape
    f(x.astype(np.float64), 3)        # new dtype
    assert len(traces) == 4
    np.testing.assert_allclose(f(x, 3), x * 3)
    assert f(x.astype(np.float64), 3).dtype == np.float64
    f(eager.constant(x), 3)           # an eager Tensor is an array leaf
    assert len(traces) == 4


def test_python_scalar_promotion():
    @pytfrt.function
    def f(i):
        return i * 0.5, i * 2, i + True

    half, double, plus = f(np.array([1, 3], np.int32))
    assert half.dtype == np.float32 and half.tolist() == [0.5, 1.5]
    assert double.dtype == np.int32 and plus.dtype == np.int32


def test_cond_builds_tg_if_with_captures():
    @pytfrt.function
    def f(x, y):
        return pytfrt.cond(x.sum() > 0, lambda a: a * y, lambda a: a - y, x)

    x, y = np.abs(f32(3)), f32(3)
    np.testing.assert_allclose(f(x, y), x * y)
    np.testing.assert_allclose(f(-x, y), -x - y)
    text = f.get_mlir(x, y)
    assert '"tg.if"' in text and "capture" in text
    # a Python predicate is a Python if
    assert pytfrt.cond(True, lambda: 1, lambda: 2) == 1


def test_while_loop_builds_tg_while():
    @pytfrt.function
    def power(x, n):
        i, acc = pytfrt.while_loop(lambda i, acc: i < n, lambda i, acc: (i + 1, acc * x),
                                   (0, x * 0 + 1))
        return i, acc

    x = f32(3)
    i, acc = power(x, np.int32(5))
    assert int(i) == 5
    np.testing.assert_allclose(acc, x ** 5, rtol=1e-5)
    assert '"tg.while"' in power.get_mlir(x, np.int32(5))
    assert pytfrt.while_loop(lambda i: i < 3, lambda i: i + 1, 0) == 3


def test_nested_function_is_inlined():
    inner = pytfrt.function(lambda x: eager.tanh(x) * 2)

    @pytfrt.function
    def outer(x):
        return inner(x) + 1

    x = f32(4)
    np.testing.assert_allclose(outer(x), np.tanh(x) * 2 + 1, rtol=1e-6)
    assert outer.get_mlir(x).count("func.func") == 1


def test_trace_errors_name_the_user_line():
    @pytfrt.function
    def bad_bool(x):
        if x.sum() > 0:  # data-dependent Python control flow
            return x
        return -x

    with pytest.raises(TraceError, match=r"test_function\.py:\d+.*pytfrt.cond"):
        bad_bool(f32(2))

    @pytfrt.function
    def bad_shapes(x, y):
        return x @ y

    with pytest.raises(TraceError, match=r"tg.matmul.*test_function\.py:\d+"):
        bad_shapes(f32(2, 3), f32(2, 3))

    @pytfrt.function
    def bad_operand(x):
        return x + None

    with pytest.raises(TraceError, match="NoneType"):
        bad_operand(f32(2))
    with pytest.raises(TypeError, match="cannot use an argument"):
        pytfrt.function(lambda x: x)(object.__new__(type("Odd", (), {"__hash__": None})))


def test_wrong_input_after_compile_is_retraced_not_misread():
    f = pytfrt.function(lambda x: x + 1)
    np.testing.assert_allclose(f(np.zeros(2, np.float32)), [1, 1])
    np.testing.assert_allclose(f(np.zeros((2, 2), np.float32)), np.ones((2, 2)))


def _numpy_xor(steps):
    """An independent NumPy loop of the MLIR program's maths (benchmarks/xor.py's loop)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import xor as bench
    finally:
        sys.path.pop(0)
    wh, wo = bench.WH.copy(), bench.WO.copy()
    bh, bo = np.zeros(2, np.float32), np.zeros(1, np.float32)
    lr, losses = np.float32(8.0), []
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for _ in range(steps):
        h = sig(bench.X @ wh + bh)
        o = sig(h @ wo + bo)
        losses.append(float(np.mean((o - bench.Y) ** 2)))
        dz_o = (o - bench.Y) * o * (1 - o)
        dh = dz_o @ wo.T
        wo -= lr / 4 * (h.T @ dz_o)
        bo -= lr * dz_o.mean(axis=0)
        dz_h = dh * h * (1 - h)
        wh -= lr / 4 * (bench.X.T @ dz_h)
        bh -= lr * dz_h.mean(axis=0)
    return losses


def test_xor_example_matches_numpy_loop_and_converges():
    sys.path.insert(0, str(REPO / "examples" / "mlp_xor"))
    try:
        import xor_training
    finally:
        sys.path.pop(0)
    params, losses = xor_training.train(steps=2000, verbose=False)
    want = _numpy_xor(2000)
    np.testing.assert_allclose(losses, want, rtol=2e-3, atol=1e-6)
    out = xor_training.predict(params, xor_training.X)
    assert ((out > 0.5) == (xor_training.Y > 0.5)).all()


def test_value_and_grad_adapts_to_data_parallel_in_one_line():
    """DataParallel calls the step as f(*params, *batch) -> (loss, *grads)."""
    jax = pytest.importorskip("jax")

    def loss(w, b, x, y):
        return eager.reduce_mean((x @ w + b - y) ** 2)

    vg = pytfrt.value_and_grad(loss, argnums=(0, 1))
    step = pytfrt.function(lambda *a: (lambda v, g: (v, *g))(*vg(*a)))  # the documented line
    w, b, x, y = f32(3, 1), f32(1), f32(8, 3), f32(8, 1)
    model = step.compiled(w, b, x, y)
    out = model(w, b, x, y)
    assert isinstance(out, tuple) and len(out) == 3
    jl = lambda w, b: jax.numpy.mean((x @ w + b - y) ** 2)  # noqa: E731
    jv, (jw, jb) = jax.value_and_grad(jl, argnums=(0, 1))(w, b)
    np.testing.assert_allclose(out[0], jv, rtol=1e-5)
    np.testing.assert_allclose(out[1], jw, rtol=1e-5)
    np.testing.assert_allclose(out[2], jb, rtol=1e-5)


@pytest.mark.parametrize("key", [
    (slice(None, None, -1),), (slice(3, 0, -2), slice(None, None, -2)), (-1, slice(1, -1)),
    (Ellipsis, None, 2), (1,), (slice(-3, None), 0),
], ids=str)
def test_indexing_matches_numpy(key):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    f = pytfrt.function(lambda x: x[key])
    np.testing.assert_array_equal(f(a), a[key])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 4), start=st.none() | st.integers(-7, 7),
       stop=st.none() | st.integers(-7, 7), step=st.sampled_from([None, 1, 2, -1, -3]))
def test_basic_slices_match_numpy(n: int, start: int | None, stop: int | None,
                                  step: int | None) -> None:
    """NumPy's clamping of out-of-range bounds, also for negative steps (where ``tg.slice``,
    ONNX's, differs: a start before the first element selects nothing in NumPy)."""
    key = slice(start, stop, step)
    x = np.arange(n, dtype=np.float32)

    @pytfrt.function
    def f(t):
        return t[key]

    got = f(x)
    assert got.shape == x[key].shape
    np.testing.assert_array_equal(got, x[key])
