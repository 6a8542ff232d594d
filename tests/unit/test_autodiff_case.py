"""pytfrt.grad through pytfrt.switch_case (``tg.case``; the rule in
pytfrt.compiler.autodiff_control).

Oracles: JAX's ``lax.switch`` on the branch TF's rule selects (an index out of range, negative
included, runs the last branch; JAX would clamp instead, so the index given to JAX is mapped
first), and float64 central finite differences of the forward function.  The same gradients
against TensorFlow's ``tf.GradientTape`` over ``tf.switch_case``:
``tests/unit/frontends/test_autodiff_case_tf.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_autodiff_control import _check  # the JAX + finite-difference check of control flow

import pytfrt
from pytfrt import eager
from pytfrt.compiler.frontends.trace import TraceError

jax = pytest.importorskip("jax")
jnp = jax.numpy

RNG = np.random.default_rng(2)
N_BRANCHES = 3


def _any(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.5, 1.5, shape).astype(np.float32)


def _tf_rule(i: int, n: int = N_BRANCHES) -> int:
    """The branch TF's ``Case`` runs for index ``i``."""
    return i if 0 <= i < n else n - 1


def _case_pt(x, y, i):
    # i arrives as an integer (or, for finite differences, a float64 holding one)
    return eager.reduce_sum(pytfrt.switch_case(
        eager.cast(i, np.int32),
        [lambda a: eager.exp(a) * y,
         lambda a: eager.tanh(a * a) - y * 3.0,
         lambda a: a * a * a * y + eager.sigmoid(a)], x))


def _case_jax(x, y, i):
    return jnp.sum(jax.lax.switch(
        _tf_rule(int(i)),
        [lambda a: jnp.exp(a) * y,
         lambda a: jnp.tanh(a * a) - y * 3.0,
         lambda a: a * a * a * y + jax.nn.sigmoid(a)], x))


@pytest.mark.parametrize("i", [0, 1, 2, -1, -7, 3, 100])
def test_case_every_branch_and_out_of_range(i):
    """In range: the branch; out of range (negative too): the last branch, as TF."""
    _check(_case_pt, _case_jax, [_any(4), np.float32(0.7), np.int32(i)], argnums=(0, 1))


def test_case_int64_index_and_python_index():
    x = _any(3)
    g = pytfrt.grad(_case_pt)(x, np.float32(0.4), np.int64(1))
    np.testing.assert_allclose(g, jax.grad(_case_jax)(x, np.float32(0.4), 1), rtol=1e-5)
    # an index known at trace time selects its branch in Python (no tg.case), same rule
    fns = [lambda a: a * 2.0, lambda a: a * a]
    for i in (0, 1, 5, -1):
        got = pytfrt.grad(lambda a, k=i: eager.reduce_sum(pytfrt.switch_case(k, fns, a)))(x)
        np.testing.assert_allclose(got, np.full(3, 2.0) if _tf_rule(i, 2) == 0 else 2.0 * x,
                                   rtol=1e-6)


def test_case_inside_function_one_program_for_every_index():
    @pytfrt.function
    def step(x, y, i):
        return pytfrt.value_and_grad(_case_pt, argnums=(0, 1))(x, y, i)

    x, y = _any(3), np.float32(-0.6)
    for i in (0, 1, 2, 5, -2):
        v, (gx, gy) = step(x, y, np.int32(i))
        jv, (jx, jy) = jax.value_and_grad(_case_jax, argnums=(0, 1))(x, y, i)
        np.testing.assert_allclose(v, jv, rtol=1e-5)
        np.testing.assert_allclose(gx, jx, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gy, jy, rtol=1e-5, atol=1e-6)
    # the forward case is rebuilt to save intermediates; the gradient is a case on the same
    # index over one gradient function per branch
    mlir = step.get_mlir(x, y, np.int32(0))
    assert mlir.count('"tg.case"') >= 2
    assert mlir.count("_saving_") >= N_BRANCHES and mlir.count("_grad_") >= N_BRANCHES


def test_case_integer_operand_unused_result_and_constant_branch():
    # an integer operand gets no gradient, an unused result no seed, a branch that ignores x
    # gives zeros
    def f(x, n, i):
        a, b = pytfrt.switch_case(i, [
            lambda u, m: (u * 2.0, eager.cast(m, np.float32) * u),
            lambda u, m: (u * u, u * 0.0 + 5.0),
            lambda u, m: (u, eager.exp(u))], x, n)
        return eager.reduce_sum(b)

    x = _any(4)
    want = {0: np.full(4, 3.0), 1: np.zeros(4), 2: np.exp(x), 9: np.exp(x)}
    for i, w in want.items():
        g = pytfrt.grad(f)(x, np.int32(3), np.int32(i))
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_single_branch_case():
    f = lambda x, i: eager.reduce_sum(pytfrt.switch_case(  # noqa: E731
        i, [lambda a: eager.exp(a) * a], x))
    x = _any(3)
    for i in (0, 4, -1):
        np.testing.assert_allclose(pytfrt.grad(f)(x, np.int32(i)), np.exp(x) * (x + 1.0),
                                   rtol=1e-5)


def test_nested_case_in_loop_and_cond_in_case():
    def case_in_loop(x):
        def body(i, a):
            return i + 1, pytfrt.switch_case(i, [lambda u: u * eager.exp(u * 0.3),
                                                 lambda u: u * u - 1.0,
                                                 lambda u: eager.tanh(u)], a)
        return eager.reduce_sum(pytfrt.while_loop(lambda i, a: i < 4, body, (0, x))[1])

    def case_in_loop_j(x):
        return jnp.sum(jax.lax.fori_loop(0, 4, lambda i, a: jax.lax.switch(
            jnp.minimum(i, 2), [lambda u: u * jnp.exp(u * 0.3), lambda u: u * u - 1.0,
                                jnp.tanh], a), x))

    def cond_in_case(x, i):
        inner = lambda a: pytfrt.cond(eager.reduce_sum(a) > 0,  # noqa: E731
                                      lambda b: eager.exp(b), lambda b: b * b, a)
        return eager.reduce_sum(pytfrt.switch_case(i, [inner, lambda a: a * 3.0], x))

    def cond_in_case_j(x, i):
        inner = lambda a: jax.lax.cond(jnp.sum(a) > 0, jnp.exp,  # noqa: E731
                                       lambda b: b * b, a)
        return jnp.sum(jax.lax.switch(_tf_rule(int(i), 2), [inner, lambda a: a * 3.0], x))

    x = _any(3)
    _check(case_in_loop, case_in_loop_j, [x * 0.5])
    for s in (1.0, -1.0):
        for i in (0, 1, 2):
            _check(cond_in_case, cond_in_case_j, [np.abs(x) * s, np.int32(i)], fd=False)


def test_second_order_through_case():
    f = lambda s, i: pytfrt.switch_case(  # noqa: E731
        i, [lambda t: t * t * t, lambda t: -t * t, lambda t: eager.exp(t)], s)
    d2 = pytfrt.grad(pytfrt.grad(f))
    s = np.float32(0.8)
    for i, want in ((0, 6 * 0.8), (1, -2.0), (2, np.exp(0.8)), (3, np.exp(0.8))):
        assert float(d2(s, np.int32(i))) == pytest.approx(want, rel=1e-5)


def test_switch_case_errors():
    x = _any(3)
    with pytest.raises(TypeError, match="non-empty sequence of callables"):
        pytfrt.switch_case(0, [], x)
    with pytest.raises(TypeError, match="one integer"):
        pytfrt.switch_case(0.5, [lambda a: a], x)
    with pytest.raises(TypeError, match="i32/i64 scalar.*test_autodiff_case.py"):
        pytfrt.grad(lambda a, f: eager.reduce_sum(pytfrt.switch_case(
            f, [lambda u: u], a)))(x, np.float32(1.0))
    with pytest.raises(TraceError, match="must be a scalar"):
        pytfrt.grad(lambda a, i: eager.reduce_sum(pytfrt.switch_case(
            i, [lambda u: u], a)))(x, np.zeros(2, np.int32))
    with pytest.raises(TraceError, match="different numbers of values"):
        pytfrt.grad(lambda a, i: eager.reduce_sum(pytfrt.switch_case(
            i, [lambda u: u, lambda u: (u, u)], a)))(x, np.int32(0))


_CASE_GRAD = pytfrt.grad(_case_pt, argnums=(0, 1))  # traced and compiled once for all examples
_CASE_JGRAD = jax.jit(jax.grad(_case_jax, argnums=(0, 1)), static_argnums=2)


@settings(max_examples=25)
@given(st.lists(st.floats(-2.0, 2.0, width=32), min_size=3, max_size=3),
       st.floats(-1.0, 1.0, width=32), st.integers(-3, 5))
def test_hypothesis_case(xs, y, i):
    x = np.asarray(xs, np.float32)
    g = _CASE_GRAD(x, np.float32(y), np.int32(i))
    jg = _CASE_JGRAD(x, np.float32(y), i)
    for a, b in zip(g, jg, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
