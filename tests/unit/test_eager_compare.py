"""Tensor ``== != < <= > >=``: elementwise bool tensors (NumPy's values, TF2's rules for
``None``, non-broadcasting shapes and hashing), eagerly and traced."""

from __future__ import annotations

import operator
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pytfrt
from pytfrt import eager
from pytfrt.eager import TensorRef

OPS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.fixture(scope="session")
def tf():
    """TensorFlow, imported once per session (the oracle for TF2's rules)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return pytest.importorskip("tensorflow")


@given(hnp.arrays(np.float32, hnp.array_shapes(max_dims=2, max_side=4),
                  elements=st.sampled_from([-1.0, 0.0, 0.5, 2.0])),
       st.sampled_from([-1.0, 0.0, 0.5]))
def test_elementwise_like_numpy(a, s):
    b = np.roll(a, 1)
    for op in OPS:
        for x, y in ((eager.constant(a), eager.constant(b)), (eager.constant(a), b),
                     (a, eager.constant(b)), (eager.constant(a), s), (s, eager.constant(a))):
            r = op(x, y)
            assert isinstance(r, eager.Tensor) or isinstance(r, np.ndarray)
            np.testing.assert_array_equal(np.asarray(r), op(np.asarray(x), np.asarray(y)))
            assert np.asarray(r).dtype == np.bool_


def test_broadcasting_promotion_and_ints():
    x = eager.constant(np.array([[1, 2, 3]], np.int32))
    np.testing.assert_array_equal((x == np.array([[1], [2]], np.int32)).numpy(),
                                  [[True, False, False], [False, True, False]])
    np.testing.assert_array_equal((x != 2).numpy(), [[True, False, True]])
    np.testing.assert_array_equal((x == 2.0).numpy(), [[False, True, False]])


def test_tf2_rules(tf):
    a, b = [1.0, 2.0], [1.0, 3.0, 4.0]
    x, y = eager.constant(a), eager.constant(b)
    ta, tb = tf.constant(a), tf.constant(b)
    # None: a Python bool, as TF2
    assert (x == None) is (ta == None) is False  # noqa: E711
    assert (x != None) is (ta != None) is True  # noqa: E711
    # shapes that do not broadcast: unequal, a bool scalar, as TF2
    for op in (operator.eq, operator.ne):
        r, tr = op(x, y), op(ta, tb)
        assert r.shape == tuple(tr.shape) == () and r.numpy() == tr.numpy()
    # unhashable with TF2's message; ref() is the key
    with pytest.raises(TypeError) as ours:
        hash(x)
    with pytest.raises(TypeError) as theirs:
        hash(ta)
    assert str(ours.value) == str(theirs.value)
    assert x.ref() == x.ref() and x.ref() != y.ref() and x.ref().deref() is x
    assert {x.ref(): 1}[x.ref()] == 1 and isinstance(x.ref(), TensorRef)
    # membership: identity first, then the elementwise result's truth value
    assert x in [x] and (x in [y]) is (ta in [tb]) is False
    with pytest.raises(ValueError, match="ambiguous"):
        _ = x in [eager.constant([5.0, 6.0])]
    with pytest.raises(eager.EagerOpError, match="cannot use str"):
        _ = x == "x"


def test_traced_comparisons_build_graph_ops():
    @pytfrt.function
    def f(x, y):
        return x == y, x != y, y == x * 0 + 2.0, eager.constant([1.0, 9.0]) == x

    a, b = np.array([1.0, 2.0], np.float32), np.array([1.0, 3.0], np.float32)
    r = f(a, b)
    for got, want in zip(r, (a == b, a != b, b == 2.0, np.array([1.0, 9.0]) == a),
                         strict=True):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)
    mlir = f.get_mlir(a, b)
    assert mlir.count('"tg.equal"') == 3 and mlir.count('"tg.not_equal"') == 1

    @pytfrt.function
    def g(x):
        with pytest.raises(TypeError, match="unhashable"):
            hash(x)
        assert {x.ref(): 0}[x.ref()] == 0
        assert (x == None) is False and (x != None) is True  # noqa: E711
        return x[..., eager.constant(0)]  # a Tensor in an index is not compared with ...

    np.testing.assert_array_equal(g(np.arange(6, dtype=np.float32).reshape(3, 2)), [0, 2, 4])
