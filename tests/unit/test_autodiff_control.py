"""pytfrt.grad through pytfrt.cond and pytfrt.while_loop (pytfrt.compiler.autodiff_control).

Oracles: JAX (``lax.cond``, ``lax.fori_loop`` with the trip count pytfrt's loop runs, computed
independently in NumPy for data-dependent loops) and float64 central finite differences of the
forward function.
"""

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

RNG = np.random.default_rng(1)


def _any(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.5, 1.5, shape).astype(np.float32)


def _fd(f, args, i, n=4, h=1e-3):
    """Central differences of ``f`` (float64 inputs) in argument ``i``, first ``n`` entries."""
    x = np.asarray(args[i], np.float64)
    out = {}
    for idx in list(np.ndindex(x.shape))[:n]:
        e = np.zeros_like(x)
        e[idx] = h
        ap = [np.asarray(a, np.float64) for a in args]
        am = [np.asarray(a, np.float64) for a in args]
        ap[i] = x + e
        am[i] = x - e
        out[idx] = (float(f(*ap)) - float(f(*am))) / (2 * h)
    return out


def _check(f_pt, f_jax, args, argnums=(0,), fd=True):
    val, grads = pytfrt.value_and_grad(f_pt, argnums=argnums)(*args)
    jval, jgrads = jax.value_and_grad(f_jax, argnums=argnums)(*args)
    np.testing.assert_allclose(val, jval, rtol=1e-4, atol=1e-5)
    for g, jg, a in zip(grads, jgrads, [args[i] for i in argnums], strict=True):
        assert np.shape(g) == np.shape(a) and np.asarray(g).dtype == np.float32
        np.testing.assert_allclose(g, jg, rtol=2e-4, atol=1e-5)
    if fd:
        f64 = pytfrt.function(f_pt, optimize=False)
        for k, i in enumerate(argnums):
            for idx, d in _fd(f64, args, i).items():
                assert abs(d - float(np.asarray(grads[k])[idx])) <= 2e-3 * max(1.0, abs(d)), \
                    (i, idx, d)
    return grads


# -- cond --------------------------------------------------------------------------------------


def _cond_pt(x, y):
    return pytfrt.cond(eager.reduce_sum(x) > 0,
                       lambda a: eager.reduce_sum(eager.exp(a) * y),
                       lambda a: eager.reduce_sum(eager.tanh(a * a) - y * 3.0), x)


def _cond_jax(x, y):
    return jax.lax.cond(jnp.sum(x) > 0, lambda a: jnp.sum(jnp.exp(a) * y),
                        lambda a: jnp.sum(jnp.tanh(a * a) - y * 3.0), x)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_cond_different_ops_per_branch_argnums_tuple(sign):
    x = np.abs(_any(3)) * sign
    y = np.float32(0.7)
    _check(_cond_pt, _cond_jax, [x, y], argnums=(0, 1))


def test_cond_inside_function_gradient_graph_is_an_if_on_the_same_predicate():
    @pytfrt.function
    def step(x, y):
        return pytfrt.value_and_grad(_cond_pt)(x, y)

    x, y = np.abs(_any(3)), np.float32(0.3)
    v, g = step(x, y)
    np.testing.assert_allclose(g, jax.grad(_cond_jax)(x, y), rtol=1e-5)
    np.testing.assert_allclose(step(-x, y)[1], jax.grad(_cond_jax)(-x, y), rtol=1e-5)
    # the structure (saving forward if, gradient if): tests/lit/autodiff/control_flow.test
    mlir = step.get_mlir(x, y)
    assert "@cond_true_" in mlir and "_saving_1" in mlir and "_grad_1" in mlir


def test_cond_integer_operand_and_unused_result():
    # an integer operand gets no gradient; a result the loss does not use gets no seed
    def f(x, n):
        a, b = pytfrt.cond(n > 1, lambda u, m: (u * 2.0, eager.cast(m, np.float32) * u),
                           lambda u, m: (u * u, u), x, n)
        return eager.reduce_sum(b)

    x = _any(4)
    for n in (0, 3):
        g = pytfrt.grad(f)(x, np.int32(n))
        np.testing.assert_allclose(g, np.full(4, 3.0, np.float32) if n > 1 else np.ones(4),
                                   rtol=1e-6)


# -- while_loop --------------------------------------------------------------------------------


def _loop_pt(x, w):
    def body(i, a, b):
        return i + 1, eager.tanh(a * w + b), b + a * 0.5

    _, a, b = pytfrt.while_loop(lambda i, a, b: i < 4, body, (0, x, x * 0.1))
    return eager.reduce_sum(a * b)


def _loop_jax(x, w):
    def body(i, ab):
        a, b = ab
        return jnp.tanh(a * w + b), b + a * 0.5

    a, b = jax.lax.fori_loop(0, 4, body, (x, x * 0.1))
    return jnp.sum(a * b)


def test_while_multiple_loop_carried_values_and_captures():
    _check(_loop_pt, _loop_jax, [_any(3), _any(3)], argnums=(0, 1))


def test_while_data_dependent_trip_count():
    # the trip count depends on x: compare with fori_loop run for the count NumPy finds
    def f(x):
        def body(a, s):
            return a * 1.5 + 0.1, s + eager.reduce_sum(a * a)

        a, s = pytfrt.while_loop(lambda a, s: eager.reduce_sum(a) < 20.0, body,
                                 (x, np.float32(0.0)))
        return s + eager.reduce_sum(a)

    x = np.abs(_any(3)) + 0.5
    a, n = x.astype(np.float64), 0
    while a.sum() < 20.0:
        a, n = a * 1.5 + 0.1, n + 1
    assert n > 2

    def fj(x):
        a, s = jax.lax.fori_loop(0, n, lambda _, c: (c[0] * 1.5 + 0.1,
                                                      c[1] + jnp.sum(c[0] * c[0])),
                                 (x, 0.0))
        return s + jnp.sum(a)

    _check(f, fj, [x], fd=False)  # a step can change the trip count: no finite differences


def test_while_zero_iterations_is_the_identity():
    f = lambda x: eager.reduce_sum(pytfrt.while_loop(  # noqa: E731
        lambda a: eager.reduce_sum(a) > 100.0, lambda a: a * a, x) * 2.0)
    np.testing.assert_allclose(pytfrt.grad(f)(_any(3)), np.full(3, 2.0))


def test_nested_cond_in_loop_loop_in_cond_loop_in_loop_cond_in_cond():
    def cond_in_loop(x):
        def body(i, a):
            return i + 1, pytfrt.cond(eager.reduce_sum(a) > 0, lambda u: u * eager.exp(u * 0.3),
                                      lambda u: u * u - 1.0, a)
        return eager.reduce_sum(pytfrt.while_loop(lambda i, a: i < 3, body, (0, x))[1])

    def cond_in_loop_j(x):
        return jnp.sum(jax.lax.fori_loop(0, 3, lambda i, a: jax.lax.cond(
            jnp.sum(a) > 0, lambda u: u * jnp.exp(u * 0.3), lambda u: u * u - 1.0, a), x))

    def loop_in_cond(x, y):
        def looped(a):
            return pytfrt.while_loop(lambda i, b: i < 3, lambda i, b: (i + 1, b * y + a),
                                     (0, a))[1]
        return eager.reduce_sum(pytfrt.cond(eager.reduce_sum(x) > 0, looped,
                                            lambda a: a * y, x))

    def loop_in_cond_j(x, y):
        looped = lambda a: jax.lax.fori_loop(0, 3, lambda i, b: b * y + a, a)  # noqa: E731
        return jnp.sum(jax.lax.cond(jnp.sum(x) > 0, looped, lambda a: a * y, x))

    def loop_in_loop(x):
        def inner(a):
            return pytfrt.while_loop(lambda j, b: j < 2, lambda j, b: (j + 1, eager.sigmoid(b)
                                                                        + a), (0, a))[1]
        return eager.reduce_sum(pytfrt.while_loop(lambda i, a: i < 3,
                                                  lambda i, a: (i + 1, inner(a) * 0.5),
                                                  (0, x))[1])

    def loop_in_loop_j(x):
        inner = lambda a: jax.lax.fori_loop(  # noqa: E731
            0, 2, lambda j, b: jax.nn.sigmoid(b) + a, a)
        return jnp.sum(jax.lax.fori_loop(0, 3, lambda i, a: inner(a) * 0.5, x))

    def cond_in_cond(x, y):
        inner = lambda a: pytfrt.cond(  # noqa: E731
            eager.reduce_sum(a * y) > 0, lambda b: eager.exp(b) * y, lambda b: b * b, a)
        return eager.reduce_sum(pytfrt.cond(eager.reduce_sum(x) > 0, inner,
                                            lambda a: eager.tanh(a) * y, x))

    def cond_in_cond_j(x, y):
        inner = lambda a: jax.lax.cond(  # noqa: E731
            jnp.sum(a * y) > 0, lambda b: jnp.exp(b) * y, lambda b: b * b, a)
        return jnp.sum(jax.lax.cond(jnp.sum(x) > 0, inner, lambda a: jnp.tanh(a) * y, x))

    x = _any(3)
    for s in (1.0, -1.0):
        for y in (0.7, -0.7):  # all three leaves
            _check(cond_in_cond, cond_in_cond_j, [np.abs(x) * s, np.float32(y)], argnums=(0, 1),
                   fd=False)
        _check(cond_in_loop, cond_in_loop_j, [np.abs(x) * s])
        _check(loop_in_cond, loop_in_cond_j, [np.abs(x) * s, np.float32(0.6)], argnums=(0, 1))
    _check(loop_in_loop, loop_in_loop_j, [x])


def test_pytree_params_inside_function():
    def loss(p, x):
        def body(i, h):
            return i + 1, eager.tanh(h @ p["w"] + p["b"])
        h = pytfrt.while_loop(lambda i, h: i < 3, body, (0, x))[1]
        return eager.reduce_mean(h * h)

    def loss_j(p, x):
        h = jax.lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ p["w"] + p["b"]), x)
        return jnp.mean(h * h)

    @pytfrt.function
    def step(p, x):
        v, g = pytfrt.value_and_grad(loss)(p, x)
        return v, {k: p[k] - 0.1 * g[k] for k in p}

    p = {"w": _any(3, 3), "b": _any(3)}
    x = _any(2, 3)
    v, p2 = step(p, x)
    jv, jg = jax.value_and_grad(loss_j)(p, x)
    np.testing.assert_allclose(v, jv, rtol=1e-5)
    for k in p:
        np.testing.assert_allclose(p2[k], p[k] - 0.1 * jg[k], rtol=1e-5, atol=1e-6)
    # the eager call (no @pytfrt.function) gives the same gradients
    g = pytfrt.grad(loss)(p, x)
    for k in p:
        np.testing.assert_allclose(g[k], jg[k], rtol=1e-4, atol=1e-6)


_LOOP_GRAD = pytfrt.grad(_loop_pt, argnums=(0, 1))  # traced and compiled once for all examples
_COND_GRAD = pytfrt.grad(_cond_pt)
_LOOP_JGRAD = jax.jit(jax.grad(_loop_jax, argnums=(0, 1)))  # the oracle, compiled once too
_COND_JGRAD = jax.jit(jax.grad(_cond_jax))


# No subnormal inputs: XLA's CPU code flushes them to zero, so JAX takes the other branch of
# `sum(x) > 0` for x = [0, 0, 1.4e-45] while pytfrt (like NumPy) keeps IEEE subnormals.
@settings(max_examples=25)
@given(st.lists(st.floats(-2.0, 2.0, width=32, allow_subnormal=False), min_size=3, max_size=3),
       st.floats(0.125, 0.875, width=32))
def test_hypothesis_cond_and_loop(xs, w):
    x = np.asarray(xs, np.float32)
    g = _LOOP_GRAD(x, np.full(3, w, np.float32))
    jg = _LOOP_JGRAD(x, np.full(3, w, np.float32))
    for a, b in zip(g, jg, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    gc = _COND_GRAD(x, np.float32(w))
    np.testing.assert_allclose(gc, _COND_JGRAD(x, np.float32(w)),
                               rtol=1e-3, atol=1e-4)


def test_second_order_through_cond_and_the_while_limit():
    f = lambda s: pytfrt.cond(s > 0, lambda t: t * t * t, lambda t: -t * t, s)  # noqa: E731
    d2 = pytfrt.grad(pytfrt.grad(f))
    assert float(d2(np.float32(2.0))) == pytest.approx(12.0)
    assert float(d2(np.float32(-2.0))) == pytest.approx(-2.0)
    loop = lambda s: pytfrt.while_loop(lambda i, t: i < 2,  # noqa: E731
                                       lambda i, t: (i + 1, t * s), (0, s))[1]
    assert float(pytfrt.grad(loop)(np.float32(2.0))) == pytest.approx(12.0)
    # the adjoint loop carries the stacks (dynamic first dimension): a clear error
    with pytest.raises(AutodiffError, match=r"tg.while \(at .*test_autodiff_control.py:\d+\)"
                       r".*dynamic type.*gradient of a while loop's gradient"):
        pytfrt.grad(pytfrt.grad(loop))(np.float32(2.0))


@pytest.mark.parametrize(("trips", "chunk"), [(197, 64), (128, 64), (90, 2)],
                         ids=["across-chunks", "chunk-multiple", "sqrt-sized-chunks"])
def test_while_many_iterations_across_stack_chunks(monkeypatch, trips, chunk):
    # the forward loop stacks its iterations in chunks of max(CHUNK, sqrt(trips so far)):
    # crossing chunk boundaries (and, with CHUNK = 2, growing chunks) must not change the result
    from pytfrt.compiler import autodiff_control

    monkeypatch.setattr(autodiff_control, "CHUNK", chunk)

    # every iteration's state differs (the i term), so a stack read out of order shows
    def f(x, w):
        def body(i, a):
            return i + 1, eager.tanh(a * w + x + eager.cast(i, np.float32) * 0.02)
        return eager.reduce_sum(pytfrt.while_loop(lambda i, a: i < trips, body, (0, x))[1])

    def fj(x, w):
        return jnp.sum(jax.lax.fori_loop(0, trips, lambda i, a: jnp.tanh(a * w + x + i * 0.02),
                                         x))

    _check(f, fj, [_any(3), np.full(3, 0.5, np.float32)], argnums=(0, 1), fd=False)
