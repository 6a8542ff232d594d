"""The eager ops made from the op definitions, and NumPy's protocols on tensors.

``where``, ``clip``/``clip_by_value``, ``log1p``, ``softplus``, ``log_softmax``, ``one_hot``,
``gather``, ``zeros_like``/``ones_like``, ``stop_gradient`` and the elementwise records' other
eager functions are checked against NumPy (eagerly), against the same function under
``@pytfrt.function``, and their gradients against JAX (and float64 finite differences where a
gradient is not stopped).  ``np.tanh(t)``, ``np.sum(...)``, ``np.where(...)`` run on eager
tensors and under ``@pytfrt.function`` + ``grad``; an unsupported NumPy function on a traced
value names itself and the nearest eager op.
"""

from __future__ import annotations

import numpy as np
import pytest

import pytfrt
from pytfrt import eager as te

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", False)

RNG = np.random.default_rng(30)
X = RNG.uniform(-3, 3, (3, 4)).astype(np.float32)
IDX = np.array([2, 0, 3], np.int64)


def _fd(f, x: np.ndarray, n: int = 4, eps: float = 1e-3) -> np.ndarray:
    """Central differences of scalar ``f`` at the first ``n`` elements of ``x`` (float64)."""
    out = []
    for idx in list(np.ndindex(x.shape))[:n]:
        e = np.zeros_like(x, np.float64)
        e[idx] = eps
        out.append((f(x.astype(np.float64) + e) - f(x.astype(np.float64) - e)) / (2 * eps))
    return np.array(out)


CASES = [
    # name, eager/traced function, NumPy (eager oracle), JAX (gradient oracle)
    ("where", lambda x: te.where(x > 0, x, 0.5 * x), lambda x: np.where(x > 0, x, 0.5 * x),
     lambda x: jnp.where(x > 0, x, 0.5 * x)),
    ("clip", lambda x: te.clip(x, -1.0, 2.0), lambda x: np.clip(x, -1.0, 2.0),
     lambda x: jnp.clip(x, -1.0, 2.0)),
    ("clip_by_value", lambda x: te.clip_by_value(x, -1.5, 1.0), lambda x: np.clip(x, -1.5, 1.0),
     lambda x: jnp.clip(x, -1.5, 1.0)),
    ("log1p", lambda x: te.log1p(te.abs(x)), lambda x: np.log1p(np.abs(x)),
     lambda x: jnp.log1p(jnp.abs(x))),
    ("softplus", te.softplus, lambda x: np.logaddexp(0, x), jax.nn.softplus),
    ("log_softmax", lambda x: te.log_softmax(x, axis=1),
     lambda x: x - np.log(np.exp(x).sum(1, keepdims=True)),
     lambda x: jax.nn.log_softmax(x, axis=1)),
    ("gather", lambda x: te.gather(x, IDX, axis=1), lambda x: np.take(x, IDX, axis=1),
     lambda x: jnp.take(x, IDX, axis=1)),
    ("zeros_like", lambda x: x * 2.0 + te.zeros_like(x), lambda x: x * 2.0,
     lambda x: x * 2.0 + jnp.zeros_like(x)),
    ("ones_like", lambda x: x * te.ones_like(x), lambda x: x, lambda x: x * jnp.ones_like(x)),
    ("silu", te.silu, lambda x: x / (1 + np.exp(-x)), jax.nn.silu),
    ("elu", te.elu, lambda x: np.where(x > 0, x, np.expm1(x)), jax.nn.elu),
    ("softsign", te.softsign, lambda x: x / (1 + np.abs(x)), jax.nn.soft_sign),
    ("erf", te.erf, None, jax.scipy.special.erf),
    ("sin_cos", lambda x: te.sin(x) * te.cos(x), lambda x: np.sin(x) * np.cos(x),
     lambda x: jnp.sin(x) * jnp.cos(x)),
    ("atan2", lambda x: te.atan2(x, 1.5 - x), lambda x: np.arctan2(x, 1.5 - x),
     lambda x: jnp.arctan2(x, 1.5 - x)),
    ("leaky_relu", lambda x: te.leaky_relu(x, alpha=0.1),
     lambda x: np.where(x >= 0, x, 0.1 * x), lambda x: jax.nn.leaky_relu(x, 0.1)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_eager_traced_and_gradient(case):
    name, f, f_np, f_jax = case
    want = np.asarray(f_jax(X)) if f_np is None else f_np(X)
    got = f(X).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    assert got.dtype == np.float32
    traced = pytfrt.function(f)(X)
    np.testing.assert_allclose(traced, want, rtol=2e-6, atol=1e-6)
    w = RNG.uniform(-1, 1, X.shape[:1] + np.shape(want)[1:]).astype(np.float32)
    val, g = pytfrt.value_and_grad(lambda x: te.reduce_sum(f(x) * w))(X)
    jval, jg = jax.value_and_grad(lambda x: jnp.sum(f_jax(x) * w))(X)
    np.testing.assert_allclose(val, jval, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g, jg, rtol=2e-4, atol=2e-5)
    f64 = pytfrt.function(lambda x: te.reduce_sum(te.cast(f(x), np.float64) * w.astype(
        np.float64)), optimize=False)
    fd = _fd(lambda x: float(f64(x)), X)
    np.testing.assert_allclose(g.reshape(-1)[:4], fd, rtol=1e-3, atol=1e-3)


def test_one_hot_against_numpy_and_traced():
    idx = np.array([0, 2, 5, -1], np.int64)  # out-of-range rows are all off_value, as TF
    want = np.where(idx[:, None] == np.arange(4)[None], 3.0, -1.0).astype(np.float32)
    got = te.one_hot(idx, 4, on_value=3.0, off_value=-1.0).numpy()
    np.testing.assert_array_equal(got, want)
    traced = pytfrt.function(lambda i: te.one_hot(i, 4, 3.0, -1.0))(idx)
    np.testing.assert_array_equal(traced, want)
    np.testing.assert_array_equal(te.one_hot(idx, 4, axis=0).numpy(), (want > 0).T)


def test_stop_gradient_and_grads_against_jax():
    def f(x):
        return te.reduce_sum(x * te.stop_gradient(x * x) + te.tanh(x))

    def fj(x):
        return jnp.sum(x * jax.lax.stop_gradient(x * x) + jnp.tanh(x))

    np.testing.assert_array_equal(te.stop_gradient(X).numpy(), X)
    val, g = pytfrt.value_and_grad(f)(X)
    jval, jg = jax.value_and_grad(fj)(X)
    np.testing.assert_allclose(val, jval, rtol=1e-5)
    np.testing.assert_allclose(g, jg, rtol=1e-5, atol=1e-6)


def test_float_only_ops_reject_integers_and_bad_arguments():
    with pytest.raises(te.EagerOpError, match="softplus requires a floating-point tensor"):
        te.softplus(np.array([1, 2], np.int32))
    with pytest.raises(te.EagerOpError, match="unknown argument 'beta'"):
        te.leaky_relu(X, beta=1.0)
    with pytest.raises(te.EagerOpError, match="gather"):
        te.gather(X, np.array([7]), axis=1)


def test_float16_is_computed_wide_and_rounded_once():
    x = np.array([-100.0, -20.0, 0.5, 11.0], np.float16)
    want = np.logaddexp(0.0, x.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(te.softplus(x).numpy(), want)


# -- NumPy's protocols ---------------------------------------------------------------------------


def _numpy_fn(x):
    y = np.tanh(x) * np.exp(-np.abs(x)) + np.where(x > 0, x, 0.0)
    return np.sum(np.square(y)) + np.mean(np.clip(x, -1.0, 1.0)) + np.sum(np.maximum(x, 0.5))


def _jax_fn(x):
    y = jnp.tanh(x) * jnp.exp(-jnp.abs(x)) + jnp.where(x > 0, x, 0.0)
    return jnp.sum(jnp.square(y)) + jnp.mean(jnp.clip(x, -1.0, 1.0)) + jnp.sum(
        jnp.maximum(x, 0.5))


def test_numpy_code_runs_eagerly_traced_and_differentiated():
    want = _numpy_fn(X.astype(np.float64))
    t = te.constant(X)
    eager_out = _numpy_fn(t)
    assert isinstance(eager_out, te.Tensor)
    np.testing.assert_allclose(eager_out.numpy(), want, rtol=1e-5)
    assert isinstance(np.tanh(t), te.Tensor) and isinstance(X + t, te.Tensor)
    np.testing.assert_allclose(pytfrt.function(_numpy_fn)(X), want, rtol=1e-5)
    val, g = pytfrt.value_and_grad(_numpy_fn)(X)
    jval, jg = jax.value_and_grad(_jax_fn)(X)
    np.testing.assert_allclose(val, jval, rtol=1e-5)
    np.testing.assert_allclose(g, jg, rtol=1e-4, atol=1e-5)


def test_numpy_shape_functions_on_traced_values():
    def f(x):
        y = np.reshape(np.transpose(x), (2, 6))
        z = np.concatenate([y, np.expand_dims(np.sum(y, axis=0), 0)], axis=0)
        return np.squeeze(np.take(z, np.array([1]), axis=0)) + np.ones_like(y[0])

    np.testing.assert_allclose(pytfrt.function(f)(X), f(X), rtol=1e-6)


def test_unsupported_numpy_function_names_itself_and_the_nearest_op():
    t = te.constant(X)
    np.testing.assert_allclose(np.cumsum(t), np.cumsum(X))  # eager: NumPy on the values
    with pytest.raises(te.EagerOpError, match=r"numpy\.arctanh .*nearest pytfrt\.eager op is "
                                              r"eager\.tanh"):
        pytfrt.function(lambda x: np.arctanh(x))(X)
    with pytest.raises(te.EagerOpError, match=r"numpy\.cumsum is not supported on traced"):
        pytfrt.function(lambda x: np.cumsum(x))(X)
    with pytest.raises(te.EagerOpError, match=r"numpy\.linalg\.det is not supported on traced"):
        pytfrt.function(lambda x: np.linalg.det(x))(np.eye(3))
