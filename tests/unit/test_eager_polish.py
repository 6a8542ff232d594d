"""pytfrt.eager: NumPy/Python inputs and promotion, odd inputs, operators, indexing, factories,
batched matmul, repr, and per-thread requests (NumPy is the oracle)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt import eager as te


def test_python_scalars_promote_as_numpy_with_tf_float_default():
    i = te.constant(np.array([1, 3], np.int32))
    assert (i * 0.5).numpy().tolist() == [0.5, 1.5] and (i * 0.5).dtype == np.float32
    assert (i * 2).dtype == np.int32 and (i + True).dtype == np.int32
    h = te.constant(np.ones(2, np.float16))
    assert (h * 0.5).dtype == np.float16
    assert (2.0 - te.constant(np.ones(2, np.float32))).numpy().tolist() == [1.0, 1.0]
    assert (1 / te.constant(np.array([2.0, 4.0], np.float32))).numpy().tolist() == [0.5, 0.25]


def test_numpy_inputs_and_reversed_operators():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = te.constant(a)
    np.testing.assert_array_equal(te.add(a, a).numpy(), a + a)
    np.testing.assert_array_equal((a + x).numpy() if isinstance(a + x, te.Tensor) else a + a,
                                  a + a)
    np.testing.assert_array_equal((3 - x).numpy(), 3 - a)
    np.testing.assert_array_equal((x ** 2).numpy(), a ** 2)
    np.testing.assert_array_equal((2 ** x).numpy(), 2 ** a)
    np.testing.assert_array_equal(te.relu(a - 2).numpy(), np.maximum(a - 2, 0))
    np.testing.assert_array_equal(te.matmul(a, a.T).numpy(), a @ a.T)


def test_odd_inputs_raise():
    x = te.constant(np.ones(2, np.float32))
    for bad in (None, "3", {"a": 1}, b"x", 1j, object()):
        with pytest.raises(te.EagerOpError, match="as a tensor|dtypes"):
            te.add(x, bad)
    with pytest.raises(te.EagerOpError, match="different dtypes"):
        te.add(x, np.ones(2, np.float64))
    with pytest.raises(te.EagerOpError):
        te.add(te.constant(np.ones(2, np.int8)), 1000)  # does not fit


def test_comparisons_len_float_t_reshape_getitem():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = te.constant(a)
    assert (x > 5).dtype == np.bool_
    np.testing.assert_array_equal((x > 5).numpy(), a > 5)
    np.testing.assert_array_equal((x <= 5).numpy(), a <= 5)
    np.testing.assert_array_equal(te.not_equal(x, 3).numpy(), a != 3)
    assert len(x) == 3 and float(x[1, 2]) == 6.0
    np.testing.assert_array_equal(x.T.numpy(), a.T)
    np.testing.assert_array_equal(x.reshape(4, 3).numpy(), a.reshape(4, 3))
    np.testing.assert_array_equal(x[1:, ::2].numpy(), a[1:, ::2])
    np.testing.assert_array_equal(x[..., -1].numpy(), a[..., -1])
    np.testing.assert_array_equal(x[te.constant(np.array([2, 0]))].numpy(), a[[2, 0]])
    assert [float(r[0]) for r in x] == [0.0, 4.0, 8.0]
    with pytest.raises(te.EagerOpError, match="indexing"):
        x[5]


def test_factories_and_cast():
    assert te.zeros((2, 3)).numpy().dtype == np.float32 and not te.zeros((2, 3)).numpy().any()
    assert te.ones(4, np.int32).numpy().tolist() == [1, 1, 1, 1]
    assert te.arange(5).dtype == np.int32 and te.arange(0.0, 1.0, 0.5).dtype == np.float32
    u = te.random_uniform((100,), -1, 1, seed=3).numpy()
    assert u.dtype == np.float32 and u.min() >= -1 and u.max() < 1
    np.testing.assert_array_equal(u, te.random_uniform((100,), -1, 1, seed=3).numpy())
    n = te.random_normal((2000,), seed=1).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    assert te.cast(te.ones(2), np.float64).dtype == np.float64
    assert te.cast(te.ones(2), "float16").dtype == np.float16
    assert te.cast(te.ones(2), "bf16").numpy().dtype.name == "bfloat16"


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=2), st.integers(1, 4),
       st.integers(1, 4), st.integers(1, 4))
def test_batched_matmul_matches_numpy(batch, m, k, n):
    rng = np.random.default_rng(len(batch) + m * 7 + k * 11 + n)
    a = rng.standard_normal((*batch, m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(te.matmul(a, b).numpy(), a @ b, rtol=1e-5, atol=1e-6)
    at = np.swapaxes(a, -1, -2).copy()
    np.testing.assert_allclose(te.matmul(at, b, transpose_a=True).numpy(), a @ b, rtol=1e-5,
                               atol=1e-6)


def test_repr_like_tf():
    r = repr(te.constant(np.array([1.0, 2.0], np.float32)))
    assert r.startswith("<pytfrt.eager.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.]")


def test_requests_are_per_thread():
    """Eight threads each run ops in their own request; cancelling one cancels only its ops,
    and the default request is never left cancelled."""
    x = te.constant(np.ones(3, np.float32))
    results: dict[int, object] = {}
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            with te.request() as req:
                barrier.wait()
                if i % 2 == 0:
                    req.cancel()
                barrier.wait()
                y = te.async_copy(x)
                try:
                    results[i] = float(y.numpy().sum())
                except te.EagerRuntimeError as exc:
                    results[i] = str(exc)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    for i in range(8):
        if i % 2 == 0:
            assert "ancel" in str(results[i]), results[i]
        else:
            assert results[i] == 3.0, results[i]
    assert float(te.async_copy(x).numpy().sum()) == 3.0  # the default is not cancelled
