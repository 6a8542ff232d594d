"""pytfrt.eager against NumPy: one op-record table driven by Hypothesis over shapes and dtypes.

Each record names the eager function, a NumPy reference, the argument count, the dtypes to
try and a tolerance.  Every op is checked on the fast path (ready dense inputs) and on the
general path (inputs that are future tensors), which must agree with the reference and with
each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytfrt import eager as te


@dataclass
class Rec:
    name: str
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    nargs: int
    dtypes: tuple[Any, ...] = (np.float32, np.float64)
    tol: float = 1e-6
    positive: bool = False
    kwargs: dict[str, Any] = field(default_factory=dict)


def _ref_sigmoid(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


def _ref_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)


FLOATS = (np.float32, np.float64)
NUMERIC = (np.float32, np.float64, np.int32, np.int64)

RECORDS = [
    Rec("add", te.add, np.add, 2, NUMERIC),
    Rec("subtract", te.subtract, np.subtract, 2, NUMERIC),
    Rec("multiply", te.multiply, np.multiply, 2, NUMERIC),
    Rec("maximum", te.maximum, np.maximum, 2, NUMERIC),
    Rec("minimum", te.minimum, np.minimum, 2, NUMERIC),
    Rec("divide", te.divide, np.divide, 2, FLOATS, positive=True),
    Rec("equal", te.equal, lambda a, b: (a == b).astype(a.dtype), 2, NUMERIC),
    Rec("relu", te.relu, lambda a: np.maximum(a, 0), 1, NUMERIC),
    Rec("sigmoid", te.sigmoid, _ref_sigmoid, 1, FLOATS, tol=1e-6),
    Rec("tanh", te.tanh, np.tanh, 1, FLOATS),
    Rec("exp", te.exp, np.exp, 1, FLOATS, tol=1e-6),
    Rec("log", te.log, np.log, 1, FLOATS, positive=True),
    Rec("sqrt", te.sqrt, np.sqrt, 1, FLOATS, positive=True),
    Rec("neg", te.neg, np.negative, 1, NUMERIC),
    Rec("abs", te.abs, np.abs, 1, NUMERIC),
    Rec("square", te.square, np.square, 1, NUMERIC),
    Rec("softmax", te.softmax, _ref_softmax, 1, FLOATS, tol=1e-6),
    Rec("reduce_sum_all", te.reduce_sum, lambda a: np.asarray(a.sum(dtype=a.dtype)), 1,
        NUMERIC, tol=1e-5),
    Rec("reduce_max0", lambda a: te.reduce_max(a, axis=0), lambda a: a.max(axis=0), 1, NUMERIC),
    Rec("reduce_min_keep", lambda a: te.reduce_min(a, axis=-1, keepdims=True),
        lambda a: a.min(axis=-1, keepdims=True), 1, NUMERIC),
    Rec("reduce_mean0", lambda a: te.reduce_mean(a, axis=0), lambda a: a.mean(axis=0), 1,
        FLOATS, tol=1e-5),
    Rec("transpose", te.transpose, np.transpose, 1, NUMERIC),
    Rec("reshape_flat", lambda a: te.reshape(a, [-1]), lambda a: a.reshape(-1), 1, NUMERIC),
    Rec("expand_dims", lambda a: te.expand_dims(a, 0), lambda a: a[None], 1, NUMERIC),
    Rec("cast_f16", lambda a: te.cast(a, "f16"), lambda a: a.astype(np.float16), 1, FLOATS,
        tol=1e-3),
    Rec("cast_bf16", lambda a: te.cast(a, "bf16"), lambda a: a.astype(ml_dtypes.bfloat16), 1,
        FLOATS, tol=1e-2),
]


def _shape_for(rec: Rec, draw: Any) -> tuple[int, ...]:
    min_dims = 1 if rec.name.startswith(("softmax", "reduce_max", "reduce_min", "reduce_mean")) \
        else 0
    return draw(st.lists(st.integers(1, 5), min_size=min_dims, max_size=3).map(tuple))


@st.composite
def _inputs(draw: Any, rec: Rec) -> tuple[Any, list[np.ndarray]]:
    dtype = draw(st.sampled_from(rec.dtypes))
    shape = _shape_for(rec, draw)
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    args = []
    for _ in range(rec.nargs):
        if np.dtype(dtype).kind == "f":
            x = rng.uniform(0.1 if rec.positive else -4, 4, size=shape)
        else:
            x = rng.integers(-20, 20, size=shape)
        args.append(np.asarray(x, dtype=dtype))
    return dtype, args


def _close(got: np.ndarray, want: np.ndarray, tol: float) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    if want.dtype.kind in "fV":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.name)
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_op_matches_numpy(rec: Rec, data: Any) -> None:
    _, args = data.draw(_inputs(rec))
    want = np.asarray(rec.ref(*args))
    fast = rec.fn(*[te.constant(a) for a in args]).numpy()
    _close(fast, want, rec.tol)
    # General path: the same op on future inputs (copies made by a queued task).
    slow = rec.fn(*[te.async_copy(te.constant(a)) for a in args])
    _close(slow.numpy(), want, rec.tol)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(m=st.integers(1, 6), k=st.integers(1, 6), n=st.integers(1, 6),
       ta=st.booleans(), tb=st.booleans(), dtype=st.sampled_from(NUMERIC))
def test_matmul_matches_numpy(m: int, k: int, n: int, ta: bool, tb: bool, dtype: Any) -> None:
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a = rng.integers(-5, 5, size=(k, m) if ta else (m, k)).astype(dtype)
    b = rng.integers(-5, 5, size=(n, k) if tb else (k, n)).astype(dtype)
    want = (a.T if ta else a) @ (b.T if tb else b)
    got = te.matmul(te.constant(a), te.constant(b), transpose_a=ta, transpose_b=tb).numpy()
    _close(got, want.astype(dtype), 1e-5)
    slow = te.matmul(te.async_copy(te.constant(a)), te.constant(b), transpose_a=ta,
                     transpose_b=tb)
    _close(slow.numpy(), want.astype(dtype), 1e-5)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(a=st.lists(st.integers(1, 4), min_size=0, max_size=3),
       b=st.lists(st.integers(1, 4), min_size=0, max_size=3))
def test_broadcasting_errors_match_numpy(a: list[int], b: list[int]) -> None:
    x = np.ones(a, np.float32)
    y = np.ones(b, np.float32)
    try:
        want = x + y
    except ValueError:
        with pytest.raises(te.EagerOpError, match="incompatible shapes"):
            te.add(te.constant(x), te.constant(y))
        return
    _close(te.add(te.constant(x), te.constant(y)).numpy(), want, 0)


def test_f16_and_bf16_ops_keep_their_dtype() -> None:
    for dt in (np.float16, ml_dtypes.bfloat16):
        x = te.constant(np.array([[-1.5, 0.5], [2.0, -3.0]], dtype=dt))
        for out in (te.relu(x), te.add(x, x), te.sigmoid(x), te.softmax(x),
                    te.matmul(x, x), te.reduce_mean(x, axis=0)):
            assert out.numpy().dtype == np.dtype(dt)
        np.testing.assert_allclose(te.relu(x).numpy().astype(np.float32),
                                   [[0, 0.5], [2.0, 0]])


def test_numpy_is_zero_copy_and_array_protocol() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = te.constant(a)
    assert t.numpy() is a
    r = te.reshape(t, [3, 2])
    assert np.shares_memory(r.numpy(), a)
    assert np.asarray(te.relu(t)).shape == (2, 3)
    assert t.shape == (2, 3) and t.ndim == 2


def test_metadata_error_raised_at_call_site_with_location() -> None:
    a = te.constant(np.ones((4, 2), np.float32))
    with pytest.raises(te.EagerOpError) as info:
        te.matmul(a, a)  # the line number must appear in the message
    msg = str(info.value)
    assert "tfrt_test.matmul" in msg and "incompatible shapes" in msg
    assert "test_eager.py:" in msg
    with pytest.raises(te.EagerOpError, match="different dtypes"):
        te.add(a, te.constant(np.ones((4, 2), np.int32)))
    with pytest.raises(te.EagerOpError, match="floating-point"):
        te.sigmoid(te.constant(np.ones(3, np.int32)))
    with pytest.raises(te.EagerOpError, match="reshape"):
        te.reshape(a, [3, 3])


def test_runtime_error_raised_at_numpy_and_propagates() -> None:
    x = te.constant(np.array([1, 2], np.int32))
    bad = te.divide(x, te.constant(np.array([1, 0], np.int32)))  # no exception here
    chained = te.add(te.relu(bad), x)  # runs on an error input: propagates, no exception
    with pytest.raises(te.EagerRuntimeError, match="division by zero") as info:
        chained.numpy()
    assert "tfrt_test.divide" in str(info.value)  # names the op that failed...
    assert "test_eager.py:" in str(info.value)  # ...and where it was called


def test_chained_ops_on_future_handles() -> None:
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    fut = te.async_copy(te.constant(a))
    assert not fut.is_available()
    y = te.sigmoid(te.matmul(fut, te.constant(np.eye(2, dtype=np.float32))))
    assert not y.is_available()  # chained on a not-yet-ready handle
    assert y.shape == (4, 2)  # metadata known before the value
    np.testing.assert_allclose(y.numpy(), _ref_sigmoid(a), rtol=1e-6)


def test_errors_in_future_chains_propagate() -> None:
    fut = te.async_copy(te.constant(np.ones(3, np.float32)))
    err = te.execute("tfrt_test.error.tensor", fut)
    out = te.exp(te.add(err, fut))
    with pytest.raises(te.EagerRuntimeError, match="error from test.error.tensor"):
        out.numpy()


def test_cancellation_cancels_pending_ops() -> None:
    with te.request() as req:
        fut = te.async_copy(te.constant(np.ones(3, np.float32)))
        y = te.relu(fut)
        req.cancel()
    with pytest.raises(te.EagerRuntimeError, match="Cancelled"):
        y.numpy()


def test_string_tensors() -> None:
    s = te.constant(["a", "bc"])
    assert "StringHostTensor shape = [2]" in s.format()
    assert list(s.numpy()) == ["a", "bc"]
    with pytest.raises(te.EagerOpError, match="does not support dtype str"):
        te.relu(s)


def test_python_scalars_and_arrays_as_inputs() -> None:
    x = te.constant(np.array([1.0, 2.0], np.float32))
    np.testing.assert_allclose(te.add(x, 1).numpy(), [2.0, 3.0])
    np.testing.assert_allclose(te.multiply(np.float32(2), x).numpy(), [2.0, 4.0])
    np.testing.assert_allclose((x + x).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(te.concat([x, x]).numpy(), [1, 2, 1, 2])


def test_argmax_and_squeeze() -> None:
    a = np.array([[1, 5, 2], [7, 0, 3]], np.float32)
    assert te.argmax(te.constant(a), axis=1).numpy().tolist() == [1, 0]
    assert te.squeeze(te.constant(a[None])).shape == (2, 3)


# -- the fast path is taken where it should be (a silently disabled fast path fails here) ------

_FAST_CASES: list[tuple[str, Callable[..., Any], int]] = [
    ("add", te.add, 2), ("subtract", te.subtract, 2), ("multiply", te.multiply, 2),
    ("maximum", te.maximum, 2), ("minimum", te.minimum, 2), ("relu", te.relu, 1),
    ("sigmoid", te.sigmoid, 1), ("tanh", te.tanh, 1), ("exp", te.exp, 1),
    ("softmax", te.softmax, 1), ("matmul", te.matmul, 2),
]


@pytest.mark.parametrize("name,fn,arity", _FAST_CASES, ids=[c[0] for c in _FAST_CASES])
def test_fast_path_taken_for_available_dense_float_inputs(
    name: str, fn: Callable[..., Any], arity: int
) -> None:
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((3, 3)).astype(np.float32) for _ in range(arity)]
    te.fast_path_counts.reset()
    out = fn(*[te.constant(x) for x in xs]).numpy()
    assert (te.fast_path_counts.fast, te.fast_path_counts.general) == (1, 0), name
    reference = {
        "add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
        "multiply": lambda a, b: a * b, "maximum": np.maximum, "minimum": np.minimum,
        "relu": lambda a: np.maximum(a, 0), "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
        "tanh": np.tanh, "exp": np.exp, "matmul": lambda a, b: a @ b,
        "softmax": lambda a: np.exp(a - a.max(-1, keepdims=True))
        / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True),
    }[name]
    np.testing.assert_allclose(out, reference(*xs), rtol=1e-5, atol=1e-6)


def test_general_path_taken_for_futures_and_bad_shapes() -> None:
    x = te.constant(np.ones((2, 3), np.float32))
    te.fast_path_counts.reset()
    te.add(te.async_copy(x), x).numpy()  # a future input: the general path (twice: copy, add)
    with pytest.raises(te.EagerOpError, match="add"):
        te.add(x, te.constant(np.ones((4, 5), np.float32)))  # shapes that do not broadcast
    assert te.fast_path_counts.fast == 0
    assert te.fast_path_counts.general == 3
    te.add(x, 1.0).numpy()  # a Python scalar input: converted, then the fast path
    te.add(x, np.ones(3, np.float32)).numpy()  # a NumPy input: the fast path
    assert te.fast_path_counts.fast == 2 and te.fast_path_counts.general == 3
