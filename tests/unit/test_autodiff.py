"""pytfrt.grad / value_and_grad: the rules of pytfrt.compiler.autodiff against JAX and finite
differences (float64 central differences of the same function run by NumPy).  That every rule of
the catalogue is checked (here or in the other ``test_autodiff*.py``) is
``test_autodiff_catalogue.py::test_every_catalogue_op_is_classified``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytfrt
from pytfrt import eager
from pytfrt.compiler.autodiff import AutodiffError

jax = pytest.importorskip("jax")
jnp = jax.numpy

RNG = np.random.default_rng(0)


def _pos(*shape: int) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape).astype(np.float32)


def _any(*shape: int) -> np.ndarray:
    return RNG.uniform(-2.0, 2.0, shape).astype(np.float32)


def _away_from_zero(*shape: int) -> np.ndarray:
    x = _any(*shape)
    return np.where(np.abs(x) < 0.2, 0.5, x).astype(np.float32)


def _tg(op: str, **attrs: object):  # one catalogue op, traced directly
    from pytfrt.compiler.frontends import trace

    return lambda *xs: trace.tracer_for(*xs).emit(op, list(xs), **attrs)


# (name, pytfrt function, jax function, NumPy function for finite differences, inputs)
UNARY = [
    ("neg", lambda x: -x, lambda x: -x, _any),
    ("exp", eager.exp, jnp.exp, _any),
    ("expm1", _tg("expm1"), jnp.expm1, _any),
    ("log", eager.log, jnp.log, _pos),
    ("log1p", _tg("log1p"), jnp.log1p, _pos),
    ("sqrt", eager.sqrt, jnp.sqrt, _pos),
    ("rsqrt", _tg("rsqrt"), jax.lax.rsqrt, _pos),
    ("square", eager.square, jnp.square, _any),
    ("reciprocal", _tg("reciprocal"), lambda x: 1 / x, _pos),
    ("abs", eager.abs, jnp.abs, _away_from_zero),
    ("tanh", eager.tanh, jnp.tanh, _any),
    ("sigmoid", eager.sigmoid, jax.nn.sigmoid, _any),
    ("relu", eager.relu, jax.nn.relu, _away_from_zero),
    ("relu6", _tg("relu6"), jax.nn.relu6, lambda *s: _away_from_zero(*s) * 4),
    ("gelu", _tg("gelu", approximate=False), lambda x: jax.nn.gelu(x, approximate=False), _any),
    ("gelu_tanh", _tg("gelu", approximate=True), lambda x: jax.nn.gelu(x, approximate=True),
     _any),
    ("sin", _tg("sin"), jnp.sin, _any),
    ("cos", _tg("cos"), jnp.cos, _any),
    ("softplus", _tg("softplus"), jax.nn.softplus, _any),
    ("erf", _tg("erf"), jax.scipy.special.erf, _any),
    ("silu", _tg("silu"), jax.nn.silu, _any),
    ("clip", _tg("clip", min=-1.0, max=1.0), lambda x: jnp.clip(x, -1.0, 1.0), _away_from_zero),
    ("identity", _tg("identity"), lambda x: x, _any),
    ("softmax", eager.softmax, jax.nn.softmax, _any),
    ("log_softmax", _tg("log_softmax", axis=-1), jax.nn.log_softmax, _any),
    ("reduce_sum", lambda x: eager.reduce_sum(x, axis=1), lambda x: jnp.sum(x, axis=1), _any),
    ("reduce_mean", lambda x: eager.reduce_mean(x, axis=0, keepdims=True),
     lambda x: jnp.mean(x, axis=0, keepdims=True), _any),
    ("reduce_max", lambda x: eager.reduce_max(x, axis=1), lambda x: jnp.max(x, axis=1), _any),
    ("reduce_min", lambda x: eager.reduce_min(x), jnp.min, _any),
    ("reshape", lambda x: eager.reshape(x, [-1]), lambda x: x.reshape(-1), _any),
    ("transpose", eager.transpose, jnp.transpose, _any),
    ("expand_dims", lambda x: eager.expand_dims(x, 1), lambda x: jnp.expand_dims(x, 1), _any),
    ("squeeze", lambda x: eager.squeeze(eager.expand_dims(x, 0)), lambda x: x, _any),
    ("broadcast_to", lambda x: eager.broadcast_to(eager.reshape(x, [1, 3, 4]), [2, 3, 4]),
     lambda x: jnp.broadcast_to(x.reshape(1, 3, 4), (2, 3, 4)), _any),
    ("slice", lambda x: x[1:, ::1][:, 1:3], lambda x: x[1:, 1:3], _any),
    ("index", lambda x: x[-1], lambda x: x[-1], _any),
    ("cast", lambda x: eager.cast(eager.cast(x, np.float64), "f32"), lambda x: x, _any),
    ("concat", lambda x: eager.concat([x, x * 2], axis=1),
     lambda x: jnp.concatenate([x, x * 2], axis=1), _any),
]

BINARY = [
    ("add", lambda a, b: a + b, lambda a, b: a + b, _any, _any),
    ("sub", lambda a, b: a - b, lambda a, b: a - b, _any, _any),
    ("mul", lambda a, b: a * b, lambda a, b: a * b, _any, _any),
    ("div", lambda a, b: a / b, lambda a, b: a / b, _any, _pos),
    ("pow", lambda a, b: a ** b, lambda a, b: a ** b, _pos, _any),
    ("maximum", eager.maximum, jnp.maximum, _any, _any),
    ("minimum", eager.minimum, jnp.minimum, _any, _any),
    ("squared_difference", _tg("squared_difference"), lambda a, b: (a - b) ** 2, _any, _any),
    ("select", lambda a, b: _tg("select")(a > 0, a, b), lambda a, b: jnp.where(a > 0, a, b),
     _away_from_zero, _any),
]


def _scalarize(f, weights):
    """``sum(f(*args) * weights)``: a scalar whose gradient checks the whole VJP."""
    return lambda *args: (f(*args) * weights).sum()


def _check(f_pt, f_jax, inputs, argnums):
    out = np.asarray(f_jax(*inputs))
    w = RNG.uniform(-1, 1, out.shape).astype(np.float32)
    val, grads = pytfrt.value_and_grad(_scalarize(f_pt, w), argnums=argnums)(*inputs)
    jval, jgrads = jax.value_and_grad(lambda *a: jnp.sum(f_jax(*a) * w), argnums=argnums)(
        *inputs)
    np.testing.assert_allclose(val, jval, rtol=1e-5, atol=1e-5)
    for g, jg in zip(grads, jgrads, strict=True):
        assert g.shape == jg.shape and g.dtype == jg.dtype
        np.testing.assert_allclose(g, jg, rtol=2e-4, atol=2e-5)
    # central finite differences of pytfrt's own forward function, run in float64
    w64 = w.astype(np.float64)
    f64 = pytfrt.function(lambda *a: (eager.cast(f_pt(*a), np.float64) * w64).sum(),
                          optimize=False)
    for k, i in enumerate(argnums):
        x = inputs[i].astype(np.float64)
        for idx in list(np.ndindex(x.shape))[:4]:
            e = np.zeros_like(x)
            e[idx] = 1e-3
            args_p = [a.astype(np.float64) for a in inputs]
            args_m = [a.astype(np.float64) for a in inputs]
            args_p[i] = x + e
            args_m[i] = x - e
            fd = (float(f64(*args_p)) - float(f64(*args_m))) / 2e-3
            assert abs(fd - float(grads[k][idx])) <= 1e-3 * max(1.0, abs(fd)), (idx, fd)


@pytest.mark.parametrize("case", UNARY, ids=[c[0] for c in UNARY])
def test_unary_rules(case):
    _, f_pt, f_jax, gen = case
    _check(f_pt, f_jax, [gen(3, 4)], (0,))


@pytest.mark.parametrize("case", BINARY, ids=[c[0] for c in BINARY])
def test_binary_rules(case):
    _, f_pt, f_jax, gen_a, gen_b = case
    _check(f_pt, f_jax, [gen_a(3, 4), gen_b(3, 4)], (0, 1))


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_rule(ta, tb):
    a = _any(2, 4, 3) if ta else _any(2, 3, 4)
    b = _any(5, 4) if tb else _any(4, 5)

    def jf(x, y):
        x = jnp.swapaxes(x, -1, -2) if ta else x
        y = jnp.swapaxes(y, -1, -2) if tb else y
        return x @ y

    _check(lambda x, y: eager.matmul(x, y, transpose_a=ta, transpose_b=tb), jf, [a, b], (0, 1))


_dims = st.lists(st.integers(1, 3), min_size=0, max_size=3)


@settings(max_examples=15, deadline=None)
@given(_dims, st.data())
def test_broadcasting_binary_ops(shape, data):
    """Broadcast operands (size-1 and missing dims) get gradients of their own shape."""
    b_shape = [data.draw(st.sampled_from([1, d])) for d in shape][
        data.draw(st.integers(0, len(shape))):]
    a, b = _any(*shape), _pos(*b_shape)
    op = data.draw(st.sampled_from(["add", "sub", "mul", "div"]))
    fs = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y}
    _check(fs[op], fs[op], [a, b], (0, 1))


def test_pytrees_argnums_and_has_aux():
    params = {"w": _any(3, 2), "b": [_any(2)]}
    x = _any(4, 3)

    def loss(p, x):
        y = x @ p["w"] + p["b"][0]
        return eager.reduce_mean(y * y), y

    (val, aux), g = pytfrt.value_and_grad(loss, has_aux=True)(params, x)
    jl = lambda p, x: jnp.mean((x @ p["w"] + p["b"][0]) ** 2)  # noqa: E731
    jg = jax.grad(jl)(params, x)
    np.testing.assert_allclose(g["w"], jg["w"], rtol=1e-5)
    np.testing.assert_allclose(g["b"][0], jg["b"][0], rtol=1e-5)
    np.testing.assert_allclose(aux, x @ params["w"] + params["b"][0], rtol=1e-5)
    gx, aux2 = pytfrt.grad(loss, argnums=1, has_aux=True)(params, x)
    np.testing.assert_allclose(gx, jax.grad(jl, argnums=1)(params, x), rtol=1e-5)
    # the same array twice gets two gradients
    ga, gb = pytfrt.grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, x)
    np.testing.assert_allclose(ga, x)
    np.testing.assert_allclose(gb, x)
    # unused argument: zeros
    assert not pytfrt.grad(lambda a, b: a.sum(), argnums=1)(x, x).any()
    # Python float argument
    assert float(pytfrt.grad(lambda s: s * s * 3.0)(2.0)) == pytest.approx(12.0)


def test_grad_inside_function_and_of_function():
    @pytfrt.function
    def step(w, x):
        loss, g = pytfrt.value_and_grad(lambda w: eager.reduce_sum(eager.tanh(x @ w)))(w)
        return loss, w - 0.5 * g

    w, x = _any(3, 2), _any(4, 3)
    loss, w2 = step(w, x)
    jg = jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)
    np.testing.assert_allclose(w2, w - 0.5 * jg, rtol=1e-5, atol=1e-6)
    assert "tg.tanh_grad" in step.get_mlir(w, x)
    # second-order: grad of grad (the rules' ops are differentiable too)
    d2 = pytfrt.grad(lambda s: pytfrt.grad(lambda t: t * t * t)(s))(np.float32(2.0))
    assert float(d2) == pytest.approx(12.0)


def test_errors():
    with pytest.raises(TypeError, match="scalar"):
        pytfrt.grad(lambda x: x * 2)(_any(3))
    with pytest.raises(TypeError, match="floating-point"):
        pytfrt.grad(lambda x: x.sum())(np.arange(3, dtype=np.int32))
    with pytest.raises(AutodiffError, match=r"tg.pad: negative pads have no gradient rule \(at "
                       r".*test_autodiff.py:\d+\)"):
        pytfrt.grad(lambda x: _tg("pad", pads=[1, -1], mode="edge")(x).sum())(_any(3))
