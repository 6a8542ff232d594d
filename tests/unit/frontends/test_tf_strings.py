"""TF's string ops and ``tf.print``, compiled, against TensorFlow.

FarmHash's ``Fingerprint64`` (``StringToHashBucketFast``, Keras' ``Hashing``) bit for bit;
``AsString`` with its printf attributes; ``StringFormat``'s summaries (Hypothesis over shapes,
dtypes and ``summarize``, against ``tf.strings.format``); and ``tf.print``: the compiled
program writes exactly what TF writes, to the same stream, in program order (variables and
control flow included). A stream pytfrt cannot write to is refused, never dropped.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytfrt
from pytfrt.backends.cpu.strings import fingerprint64, summary_text
from pytfrt.compiler.errors import UnsupportedOpError


def test_fingerprint64_is_tfs_bit_for_bit(tf: Any) -> None:
    """The hash modulo 2**62 and 2**63 - 1 (coprime: together they fix all 64 bits)."""
    rng = np.random.default_rng(0)
    lengths = [*range(0, 140), 191, 192, 193, 255, 256, 257, 1000]
    data = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in lengths]
    for m in (2**62, 2**63 - 1):
        ref = tf.strings.to_hash_bucket_fast(tf.constant(data), m).numpy()
        ours = np.array([fingerprint64(s) % m for s in data], np.int64)
        np.testing.assert_array_equal(ours, ref)


def test_as_string_and_hash_buckets_compile(tf: Any) -> None:
    @tf.function(
        input_signature=[tf.TensorSpec((None,), tf.float32), tf.TensorSpec((None,), tf.int64)]
    )
    def f(x: Any, i: Any) -> Any:
        return (
            tf.strings.as_string(x, precision=3, width=9, fill="0"),
            tf.strings.as_string(i, width=5),
            tf.strings.as_string(x, shortest=True),
            tf.strings.as_string(x, scientific=True, precision=2),
            tf.strings.as_string(x > 0),
            tf.strings.to_hash_bucket_fast(tf.strings.as_string(i), 7),
        )

    args = (np.array([1.5, -2.25, 1e10, 0.1], np.float32), np.array([3, -42, 7, 0], np.int64))
    ours = pytfrt.compile(f)(*args)
    for got, ref in zip(ours, f(*args), strict=True):
        ref = ref.numpy()
        if ref.dtype == object:
            ref = np.array([s.decode() for s in ref], dtype=object)
        np.testing.assert_array_equal(got, ref)


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(0, 7), min_size=0, max_size=3),
    dtype=st.sampled_from(["float32", "float64", "int32", "bool", "float16"]),
    summarize=st.integers(-1, 4),
    seed=st.integers(0, 2**16),
)
def test_summaries_are_tfs(tf: Any, shape: list[int], dtype: str, summarize: int,
                           seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape)
    with np.errstate(over="ignore"):  # float16: large values become infinities
        x = (x > 0) if dtype == "bool" else x.astype(dtype)
    ref = tf.strings.format("{}", tf.constant(x), summarize=summarize).numpy().decode()
    assert summary_text(x, summarize) == ref


def test_special_values_are_summarised_as_tf(tf: Any) -> None:
    nan = np.float32(np.nan)
    x = np.array([nan, -nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-40, 3.4e38], np.float32)
    for v in (x, x.astype(np.float64), np.array([5e-324, -1e-310, 2.3e-308])):
        assert summary_text(v, -1) == tf.strings.format("{}", tf.constant(v),
                                                        summarize=-1).numpy().decode()


def _printing(tf: Any) -> tuple[Any, tuple[np.ndarray, ...]]:
    @tf.function(
        input_signature=[
            tf.TensorSpec((None, 3), tf.float32),
            tf.TensorSpec((2,), tf.string),
            tf.TensorSpec((2,), tf.bool),
        ]
    )
    def f(x: Any, s: Any, b: Any) -> Any:
        tf.print("loss:", x, s, b, tf.constant(1.0 / 3, tf.float64), output_stream=sys.stdout,
                 summarize=1)
        tf.print(tf.zeros((2, 0)), x * 1e20, x * 1e-7, np.float16(0.1), end="!\n")
        tf.print({"a": x[0, 0]}, [x[0, 0], 2], "plain {}")
        return x * 2.0

    args = (
        np.array([[1.5, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], np.float32),
        np.array([b"a\n", "b'\"\xe9".encode()], dtype=object),
        np.array([True, False]),
    )
    return f, args


def test_print_writes_what_tf_writes(tf: Any, capfd: Any) -> None:
    f, args = _printing(tf)
    f(*args)
    theirs = capfd.readouterr()
    compiled = pytfrt.compile(f)
    capfd.readouterr()
    out = compiled(*args)
    ours = capfd.readouterr()
    np.testing.assert_array_equal(out, args[0] * 2.0)
    assert "loss: [[1.5 ... 3]" in theirs.out  # the check compares something
    assert ours.out == theirs.out
    assert ours.err == theirs.err


def test_print_keeps_program_order_with_variables_and_branches(tf: Any, capfd: Any) -> None:
    v = tf.Variable([1.0, 2.0])

    @tf.function(input_signature=[tf.TensorSpec((2,), tf.float32)])
    def f(x: Any) -> Any:
        tf.print("before", v)
        v.assign_add(x)
        tf.print("after", v)
        if tf.reduce_sum(x) > 0:
            tf.print("positive", x)
        else:
            tf.print("negative", x)
        return v.read_value()

    x = np.array([1.0, 2.0], np.float32)
    f(x)
    f(-x)
    theirs = capfd.readouterr().err
    v.assign([1.0, 2.0])
    compiled = pytfrt.compile(f)
    capfd.readouterr()
    np.testing.assert_array_equal(compiled(x), [2.0, 4.0])
    np.testing.assert_array_equal(compiled(-x), [1.0, 2.0])
    assert capfd.readouterr().err == theirs
    assert theirs.count("\n") == 6


def test_print_to_a_logging_stream_is_refused(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((3,), tf.float32)])
    def f(x: Any) -> Any:
        tf.print("x is", x, output_stream=tf.compat.v1.logging.info)
        return x * 2.0

    with pytest.raises(UnsupportedOpError, match="output stream 'log\\(info\\)'") as info:
        pytfrt.compile(f)
    assert info.value.op_type == "PrintV2"


def _tf_message(tf: Any, f: Any, *args: Any) -> str:
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        f(*args)
    return str(info.value.message).split("\n\t [[")[0].rsplit("\n\n", 1)[-1]


@pytest.mark.parametrize("summarize", [3, 1, -1])
def test_asserts_run_and_fail_with_tfs_message(tf: Any, summarize: int) -> None:
    """``tf.debugging.Assert`` checked at run time (also inside the guard ``cond`` TF wraps
    around it): a true condition passes, a false one fails the call with TF's message."""

    @tf.function(input_signature=[tf.TensorSpec((None, None, 2), tf.float32),
                                  tf.TensorSpec((2,), tf.string)])
    def f(x: Any, s: Any) -> Any:
        tf.debugging.Assert(tf.reduce_all(x > 0), ["x:", x, s, x > 1], summarize=summarize)
        return x * 2.0

    compiled = pytfrt.compile(f)
    s = np.array([b"a", b"b'"], dtype=object)
    good = np.ones((2, 3, 2), np.float32)
    np.testing.assert_array_equal(compiled(good, s), good * 2.0)
    for bad in (np.full((1, 1, 2), -1.0, np.float32),
                np.arange(-6.0, 6.0, dtype=np.float32).reshape(2, 3, 2),
                np.arange(-3.0, 3.0, dtype=np.float32).reshape(1, 3, 2) / 7):
        expected = _tf_message(tf, f, bad, s)
        assert expected.startswith("assertion failed: [x:]")
        with pytest.raises(pytfrt.model.ModelError) as info:
            compiled(bad, s)
        assert expected in str(info.value)


def test_assert_positive_compiles(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((3,), tf.float32)])
    def checked(x: Any) -> Any:
        tf.debugging.assert_positive(x, message="x must be positive")
        return x + 1.0

    compiled = pytfrt.compile(checked)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(compiled(x), checked(x).numpy())
    bad = np.array([1.0, -2.0, 3.0], np.float32)
    expected = _tf_message(tf, checked, bad)
    with pytest.raises(pytfrt.model.ModelError) as info:
        compiled(bad)
    assert "x must be positive" in expected and expected in str(info.value)


@pytest.mark.parametrize("num_buckets", [0, 7])
def test_hashed_crosses_of_dense_columns_are_tfs_bit_for_bit(tf: Any, num_buckets: int) -> None:
    """Integer and string columns of several features each (every combination, the last
    column fastest), with and without buckets, against ``tf.sparse.cross_hashed``."""
    spec_i = tf.TensorSpec((None, None), tf.int64)
    spec_s = tf.TensorSpec((None, 2), tf.string)

    @tf.function(input_signature=[spec_i, spec_i, spec_s, spec_s])
    def f(a: Any, b: Any, s: Any, t: Any) -> Any:
        return (
            tf.sparse.to_dense(tf.sparse.cross_hashed([a, b, a], num_buckets, hash_key=12345)),
            tf.sparse.to_dense(tf.sparse.cross_hashed([s, t], num_buckets)),
        )

    rng = np.random.default_rng(1)
    a = rng.integers(-(2**62), 2**62, (3, 2)).astype(np.int64)
    b = rng.integers(-5, 5, (3, 3)).astype(np.int64)
    words = np.array([b"", b"x", b"longer than sixteen bytes", "\u00e9t\u00e9".encode()], object)
    s, t = rng.choice(words, (3, 2)), rng.choice(words, (3, 2))
    for got, ref in zip(pytfrt.compile(f)(a, b, s, t), f(a, b, s, t), strict=True):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, ref.numpy())


def test_a_sparse_cross_of_sparse_columns_is_refused(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((None, 2), tf.int64)])
    def f(a: Any) -> Any:
        sparse = tf.sparse.from_dense(a)
        return tf.sparse.to_dense(tf.sparse.cross_hashed([sparse, a], 5))

    with pytest.raises(UnsupportedOpError, match="SparseCross"):
        pytfrt.compile(f)


def test_standardize_split_and_pad_as_tf(tf: Any) -> None:
    """TextVectorization's string ops: lower-casing (ASCII and UTF-8), regex replacement (all
    matches or the first, with groups), splits (whitespace, a separator, maxsplit) and the
    ragged result padded or cut to a width, against TF."""

    @tf.function(input_signature=[tf.TensorSpec((None,), tf.string)])
    def f(s: Any) -> Any:
        low = tf.strings.lower(s)
        utf = tf.strings.lower(s, encoding="utf-8")
        punct = tf.strings.regex_replace(low, r"[!,.?]", "")
        first = tf.strings.regex_replace(s, r"(a+)(b)", r"<\2\1>", replace_global=False)
        words = tf.strings.split(punct)
        parts = tf.strings.split(s, sep=",", maxsplit=1)
        return (low, utf, punct, first, words.to_tensor(default_value="_", shape=[None, 3]),
                words.to_tensor(default_value="?"), parts.to_tensor())

    s = np.array([b"Hello, World! aab aab", "\u00c9T\u00c9 x,y,z".encode(), b"", b"  a\tb  ",
                  b"one,two,,three"], dtype=object)
    for got, ref in zip(pytfrt.compile(f)(s), f(s), strict=True):
        ref = np.vectorize(lambda b: b.decode(), otypes=[object])(ref.numpy())
        assert got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
