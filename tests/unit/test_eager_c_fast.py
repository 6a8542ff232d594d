"""The C fast path of pytfrt.eager (``pytfrt._eager_fast``) against NumPy and the Python path.

Every op the C extension serves (``add subtract multiply maximum minimum exp log tanh sqrt
sigmoid relu`` and ``Tensor``'s ``+ - *``, reflected too) runs under both paths (the ``path``
fixture): results are checked against NumPy, and C and Python results, dtypes, warnings and
errors against each other.  Reference counts, memory, threads, tracing and the build (a clean
``PYTFRT_NO_C_EAGER=1`` process) are checked too.
"""

from __future__ import annotations

import copy
import gc
import inspect
import os
import pickle
import subprocess
import sys
import threading
import tracemalloc
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pytfrt
from pytfrt import config
from pytfrt import eager as te

HAVE_C = bool(te._C_OPS)

BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
    "maximum": np.maximum, "minimum": np.minimum,
}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


UNARY: dict[str, Callable[[Any], Any]] = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sqrt": np.sqrt, "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0),
}
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
}
OPERATOR_UFUNC = {"+": np.add, "-": np.subtract, "*": np.multiply}


@pytest.fixture(params=["c", "python"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with the C ops in place, then with the pure-Python ops."""
    want_c = request.param == "c"
    if want_c and not HAVE_C:
        pytest.skip("pytfrt._eager_fast is not built or PYTFRT_NO_C_EAGER is set")
    before = te.c_fast_path_enabled()
    assert te.use_c_fast_path(want_c) is want_c
    try:
        yield request.param
    finally:
        te.use_c_fast_path(before)


def _py(name: str) -> Callable[..., Any]:
    """The pure-Python op function of ``name`` (what the C object falls back to)."""
    return te._C_CANDIDATES[name][0]


def _c(name: str) -> Any:
    """The C op object of ``name`` (an op name or a Tensor dunder)."""
    if not HAVE_C:
        pytest.skip("pytfrt._eager_fast is not built or PYTFRT_NO_C_EAGER is set")
    return te._C_OPS[name]


def _rng_array(shape: tuple[int, ...], dtype: Any, positive: bool = False) -> np.ndarray:
    a = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    return np.asarray(np.abs(a) + np.asarray(0.5, dtype)) if positive else a


def _same(r: Any, expected: np.ndarray) -> None:
    assert type(r) is te.Tensor
    got = r.numpy()
    assert type(got) is np.ndarray
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


# -- routing -----------------------------------------------------------------------------------


def test_extension_is_built_and_enabled_by_default() -> None:
    """In a development install (``pip install -e .`` with a C compiler) the extension exists
    and is the default; ``use_c_fast_path`` switches both ways."""
    if config.flag("PYTFRT_NO_C_EAGER"):
        pytest.skip("PYTFRT_NO_C_EAGER is set")
    import pytfrt._eager_fast as ext

    assert te.c_fast_path_enabled()
    assert te._c_reads_array_struct  # NumPy's array layout was recognised
    assert type(te.add) is ext.op and type(te.exp) is ext.op
    assert _c("add").nargs == 2 and _c("exp").nargs == 1
    assert te.Tensor.__dict__["__radd__"].swapped == 1
    try:
        assert te.use_c_fast_path(False) is False
        assert inspect.isfunction(te.add) and inspect.isfunction(te.Tensor.__dict__["__add__"])
    finally:
        te.use_c_fast_path(True)
    assert type(te.add) is ext.op


@pytest.mark.parametrize("name", [*BINARY, *UNARY])
def test_c_op_looks_like_the_python_function(name: str) -> None:
    c, py = _c(name), _py(name)
    assert c.__name__ == py.__name__ == name
    assert c.__doc__ == py.__doc__ and c.__doc__
    assert c.__wrapped__ is py and c.fallback is py
    assert inspect.signature(c) == inspect.signature(py)


def test_ops_pickle_and_copy_by_reference(path: str) -> None:
    """As Python functions do (Ray and multiprocessing ship functions that use them)."""
    for op in (te.add, te.exp, te.Tensor.__dict__["__rmul__"]):
        assert pickle.loads(pickle.dumps(op)) is op
        assert copy.copy(op) is op and copy.deepcopy(op) is op


def test_operators_bind_as_methods(path: str) -> None:
    a, b = _rng_array((4, 2), np.float32), _rng_array((4, 2), np.float32)
    ta, tb = te.constant(a), te.constant(b)
    bound = ta.__add__
    _same(bound(tb), a + b)
    _same(ta.__rsub__(tb), b - a)
    _same(te.Tensor.__mul__(ta, tb), a * b)


def test_env_var_disables_the_extension() -> None:
    code = ("import numpy as np; from pytfrt import eager as te; "
            "assert not te.c_fast_path_enabled(); assert not te.use_c_fast_path(True); "
            "r = te.add(te.constant(np.ones(2, np.float32)), 1.5); "
            "assert r.numpy().tolist() == [2.5, 2.5]; print(type(te.add).__name__)")
    env = dict(os.environ, PYTFRT_NO_C_EAGER="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "function"


def test_missing_extension_leaves_the_python_path() -> None:
    """An install without a C compiler has no ``_eager_fast``: the import fails quietly."""
    code = ("import sys; sys.modules['pytfrt._eager_fast'] = None; import numpy as np; "
            "from pytfrt import eager as te; assert not te.c_fast_path_enabled(); "
            "t = te.constant(np.arange(3, dtype=np.float32)); "
            "assert (t * 2.0 + t).numpy().tolist() == [0.0, 3.0, 6.0]; "
            "assert te.fast_path_counts.fast == 2; print(type(te.Tensor.__add__).__name__)")
    env = {k: v for k, v in os.environ.items() if k != "PYTFRT_NO_C_EAGER"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "function"


# -- oracle: NumPy -----------------------------------------------------------------------------

SHAPES = [((4, 2), (4, 2)), ((4, 2), (2,)), ((3, 1), (1, 5)), ((), ()), ((2, 3), ()),
          ((0, 3), (3,))]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_matches_numpy(path: str, name: str, dtype: Any,
                              shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    op, ufunc = getattr(te, name), BINARY[name]
    a, b = _rng_array(shapes[0], dtype), _rng_array(shapes[1], dtype)
    expected = np.asarray(ufunc(a, b))
    te.fast_path_counts.reset()
    for x in (a, te.constant(a)):
        for y in (b, te.constant(b)):
            _same(op(x, y), expected)
    assert te.fast_path_counts.fast == 4 and te.fast_path_counts.general == 0


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scalar", [2.5, -3, 0, 1e-40, True])
def test_binary_with_python_scalar_matches_numpy(path: str, name: str, dtype: Any,
                                                 scalar: Any) -> None:
    """A Python float/int takes the array's dtype (a weak scalar), on either side."""
    op, ufunc = getattr(te, name), BINARY[name]
    a = _rng_array((4, 2), dtype)
    s = np.dtype(dtype).type(scalar)
    te.fast_path_counts.reset()
    _same(op(te.constant(a), scalar), ufunc(a, s))
    _same(op(scalar, a), ufunc(s, a))
    assert te.fast_path_counts.fast == 2


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 2), (), (0,), (3, 1, 2)])
def test_unary_matches_numpy(path: str, name: str, dtype: Any, shape: tuple[int, ...]) -> None:
    op = getattr(te, name)
    a = _rng_array(shape, dtype, positive=name in ("log", "sqrt"))
    expected = np.asarray(UNARY[name](a))
    te.fast_path_counts.reset()
    for x in (a, te.constant(a)):
        r = op(x)
        assert type(r) is te.Tensor and r.dtype == dtype and r.shape == shape
        np.testing.assert_allclose(r.numpy(), expected, rtol=1e-6 if dtype == np.float32
                                   else 1e-14, atol=0)
    assert te.fast_path_counts.fast == 2 and te.fast_path_counts.general == 0


@pytest.mark.parametrize("sym", OPERATORS)
@pytest.mark.parametrize("other", ["tensor", "array", 2.0, 3])
def test_operators_match_numpy(path: str, sym: str, other: Any) -> None:
    a = _rng_array((4, 2), np.float32)
    b = _rng_array((2,), np.float32)
    o: Any = te.constant(b) if other == "tensor" else b if other == "array" else other
    ob = b if isinstance(other, str) else np.float32(other)
    ta, fn, ufunc = te.constant(a), OPERATORS[sym], OPERATOR_UFUNC[sym]
    _same(fn(ta, o), ufunc(a, ob))
    if other != "array":  # ndarray op Tensor is NumPy's own operator
        _same(fn(o, ta), ufunc(ob, a))


def test_results_are_new_available_tensors(path: str) -> None:
    a = _rng_array((4, 2), np.float32)
    ta = te.constant(a)
    r = te.add(ta, ta)
    assert r.is_available() and r._av is None and r._md is None
    assert r._device == "CPU:0" and r.error is None
    assert r.numpy() is not a and not np.shares_memory(r.numpy(), a)
    z = te.exp(np.float64(1.0) * np.ones((), np.float64))  # a 0-d array: ufunc gives a scalar
    assert type(z.numpy()) is np.ndarray and z.shape == () and z.numpy() == np.exp(1.0)


# -- oracle: the Python path (declined cases, errors, warnings) -----------------------------------

DECLINED = [
    (np.ones(3, np.int32), np.ones(3, np.int32)),          # not float32/float64
    (np.ones(3, np.float16), np.ones(3, np.float16)),
    (np.ones(3, np.float32), np.ones(3, np.float64)),      # dtypes differ: TypeError-based error
    (np.ones(3, np.int32), 2.5),                           # weak float meets int: float32
    (np.ones(3, np.int8), 1000),                           # does not fit: the general path
    (np.ma.masked_array(np.ones(3, np.float32)), np.ones(3, np.float32)),  # a subclass
    (np.ones(3, np.float32).astype(">f4"), np.ones(3, np.float32)),  # byte-swapped dtype
    ([1.0, 2.0, 3.0], np.ones(3, np.float32)),              # a list
    (np.float32(2.0), np.ones(3, np.float32)),             # a NumPy scalar
    (np.ones((2, 3), np.float32), np.ones((4,), np.float32)),  # shapes do not broadcast
    (np.ones(3, np.float32), 10**40),                      # int too big for float32
    (np.ones(3, np.float32), 1e300),                       # float overflows float32 (inf)
    (None, np.ones(3, np.float32)),
    ("abc", np.ones(3, np.float32)),
]


def _outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """What a call gives: ("ok", type, dtype, shape, bytes) or ("error", type, message), plus the
    warnings it emitted.  One line makes every call, so error messages name the same site."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = fn(*args, **kwargs)
            a = r.numpy()
            result: tuple[Any, ...] = ("ok", type(r).__name__, a.dtype, a.shape, a.tobytes())
        except Exception as exc:  # noqa: BLE001 - compared between the paths
            result = ("error", type(exc), str(exc))
    return (*result, [(w.category, str(w.message)) for w in caught])


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("case", range(len(DECLINED)))
def test_declined_cases_behave_as_the_python_path(name: str, case: int) -> None:
    x, y = DECLINED[case]
    for args in ((x, y), (y, x)):
        targs = tuple(te.constant(v) if isinstance(v, np.ndarray) and type(v) is np.ndarray
                      and v.dtype.kind == "f" else v for v in args)
        for call_args in (args, targs):
            assert _outcome(_c(name), *call_args) == _outcome(_py(name), *call_args)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("value", [np.ones(3, np.int32), np.ones(3, np.float16), [1.0, 4.0],
                                   None, "x", np.float64(4.0), -np.ones(2, np.float32)])
def test_unary_declined_and_error_cases_behave_as_the_python_path(name: str, value: Any) -> None:
    assert _outcome(_c(name), value) == _outcome(_py(name), value)


def test_wrong_arity_and_keywords_behave_as_the_python_path() -> None:
    a = np.ones(2, np.float32)
    for name in ("add", "exp"):
        c, py = _c(name), _py(name)
        assert _outcome(c) == _outcome(py)
        assert _outcome(c, a, a, a) == _outcome(py, a, a, a)
        assert _outcome(c, x=a) == _outcome(py, x=a)
    assert _outcome(_c("add"), a, y=a) == _outcome(_py("add"), a, y=a)
    assert _outcome(_c("__radd__"), te.constant(a)) == _outcome(te._PY_OPERATORS["__radd__"],
                                                                te.constant(a))


def test_floating_point_errors_behave_as_the_python_path() -> None:
    a = np.full(3, 3e38, np.float32)
    for call in ((a, a), (a, 10.0)):
        with np.errstate(over="raise"):
            c, py = _outcome(_c("multiply"), *call), _outcome(_py("multiply"), *call)
        assert c == py and c[0] == "error" and c[1] is FloatingPointError
        with np.errstate(over="warn"):
            c, py = _outcome(_c("multiply"), *call), _outcome(_py("multiply"), *call)
        assert c == py and c[0] == "ok" and c[-1] and c[-1][0][0] is RuntimeWarning


_dtypes = st.sampled_from([np.float32, np.float64, np.int32, np.float16])
_scalars = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                     st.integers(-2**40, 2**40), st.booleans())


@given(data=st.data(), dtype=_dtypes, name=st.sampled_from(sorted(BINARY)))
def test_hypothesis_binary_c_equals_python_and_numpy(data: st.DataObject, dtype: Any,
                                                     name: str) -> None:
    shape_a, shape_b = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3,
                                                                   max_side=4)).input_shapes
    a = data.draw(hnp.arrays(dtype, shape_a, elements={"allow_nan": False, "min_value": -100,
                                                       "max_value": 100}))
    b = data.draw(st.one_of(hnp.arrays(dtype, shape_b, elements={"allow_nan": False,
                                                                 "min_value": -100,
                                                                 "max_value": 100}),
                            _scalars))
    wrap_a, wrap_b = data.draw(st.booleans()), data.draw(st.booleans())
    x = te.constant(a) if wrap_a else a
    y = te.constant(b) if wrap_b and isinstance(b, np.ndarray) else b
    if data.draw(st.booleans()):
        x, y = y, x
    c, py = _outcome(_c(name), x, y), _outcome(_py(name), x, y)
    assert c == py
    if c[0] == "ok" and isinstance(b, np.ndarray) and dtype in (np.float32, np.float64):
        xa = x.numpy() if isinstance(x, te.Tensor) else x
        ya = y.numpy() if isinstance(y, te.Tensor) else y
        expected = np.asarray(BINARY[name](xa, ya))
        assert c[2:4] == (expected.dtype, expected.shape) and c[4] == expected.tobytes()


@given(a=hnp.arrays(st.sampled_from([np.float32, np.float64]),
                    hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                    elements={"allow_nan": False, "min_value": 0.25, "max_value": 50}),
       name=st.sampled_from(sorted(UNARY)), wrap=st.booleans())
def test_hypothesis_unary_c_equals_python(a: np.ndarray, name: str, wrap: bool) -> None:
    x = te.constant(a) if wrap else a
    c, py = _outcome(_c(name), x), _outcome(_py(name), x)
    assert c == py
    np.testing.assert_allclose(np.frombuffer(c[4], a.dtype).reshape(a.shape), UNARY[name](a),
                               rtol=1e-6 if a.dtype == np.float32 else 1e-14)


@pytest.mark.parametrize("weak_floats", [False, True])
@pytest.mark.parametrize("read_struct", [False, True])
def test_extension_settings_give_the_same_results(weak_floats: bool, read_struct: bool) -> None:
    """Python floats converted by ``np.float32(v)`` or by the ufunc, the dtype read from the
    array struct or as the attribute: the same results and warnings as the Python path."""
    import pytfrt._eager_fast as ext

    _c("add")
    a = _rng_array((4, 2), np.float32)
    big = np.full(2, 3e38, np.float32)
    try:
        te._configure_c(ext, weak_floats, read_struct)
        assert te._c_reads_array_struct is read_struct
        te.fast_path_counts.reset()
        for name in BINARY:
            for args in ((a, a), (te.constant(a), 0.1), (1e-3, a), (big, 1e300), (a, 7),
                         (a, a.astype(np.float64)), (a.astype(np.float64), 0.1)):
                assert _outcome(_c(name), *args) == _outcome(_py(name), *args)
        for name in UNARY:
            assert _outcome(_c(name), te.constant(a)) == _outcome(_py(name), te.constant(a))
        assert te.fast_path_counts.fast > 0
    finally:
        te._configure_c(ext)
    assert te._c_reads_array_struct


# -- reference counts, memory, threads ----------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_reference_counts_and_memory_stay_constant() -> None:
    """A million C-path calls leak no reference (inputs' counts unchanged, results owned once)
    and no memory (RSS flat); the declined and error paths are exercised too."""
    _c("add")
    a = _rng_array((4, 2), np.float32)
    b = _rng_array((4, 2), np.float32)
    ta, tb = te.constant(a), te.constant(b)
    f, i, bad = 2.5, 3, np.ones((3,), np.float32)
    z = te.constant(np.ones((), np.float64))  # 0-d: the ufunc returns a NumPy scalar
    ops = [lambda: te.add(ta, tb), lambda: te.multiply(a, tb), lambda: ta * f,
           lambda: i - ta, lambda: te.exp(ta), lambda: te.sigmoid(a), lambda: te.relu(ta),
           lambda: te.maximum(ta, np.ones(2, np.int32).astype(np.float32)),
           lambda: te.add(z, z), lambda: te.tanh(z)]
    watched = [a, b, ta, tb, f, i, bad, ta._t, ta._device, te.fast_path_counts, te.add, te.Tensor]

    def run(n: int) -> None:
        for op in ops:
            for _ in range(n):
                op()
        for _ in range(n // 200):
            try:
                te.add(ta, bad)
            except te.EagerOpError:
                pass

    run(2000)  # warm-up: caches, lazily created objects
    gc.collect()
    counts = [sys.getrefcount(o) for o in watched]
    rss = _rss_bytes()
    run(100_000)  # 1,000,000 fast calls, 500 error calls
    gc.collect()
    assert [sys.getrefcount(o) for o in watched] == counts
    grown = _rss_bytes() - rss
    assert grown < 8 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over a million ops"
    tracemalloc.start()  # the Python (and NumPy) heap, object by object: 20,000 calls per op
    try:
        run(200)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        run(20_000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000, f"the heap grew by {grown} bytes over 200,000 ops"
    r = te.add(ta, tb)
    # r: the local and the argument; r._t: the slot, the evaluated temporary and the argument
    assert sys.getrefcount(r) == 2 and sys.getrefcount(r._t) == 3


def test_threads_share_the_c_path(path: str) -> None:
    """Four threads run C-path ops on shared tensors: every result is right (the fast counter
    may be approximate, nothing else)."""
    a = _rng_array((16, 8), np.float32)
    ta = te.constant(a)
    expected = (a + a) * 2.0 - a
    errors: list[BaseException] = []
    te.fast_path_counts.reset()

    def work() -> None:
        try:
            for _ in range(3000):
                r = te.subtract(te.add(ta, ta) * 2.0, a)
                if not np.array_equal(r.numpy(), expected):
                    raise AssertionError("wrong result under threads")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert 0 < te.fast_path_counts.fast <= 4 * 3000 * 3


# -- tracing -------------------------------------------------------------------------------------


def test_traced_values_take_the_python_path(path: str) -> None:
    @pytfrt.function
    def f(x: Any, y: Any) -> Any:
        return te.exp(te.add(x, y) * 2.0 - 1) + te.maximum(x, y)

    a, b = _rng_array((4, 2), np.float32), _rng_array((4, 2), np.float32)
    expected = np.exp((a + b) * np.float32(2) - np.float32(1)) + np.maximum(a, b)
    np.testing.assert_allclose(np.asarray(f(a, b)), expected, rtol=1e-6)
