"""Unsupported TF ops and bad sources fail at compile time with a clear error, not a traceback."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytfrt
from pytfrt.compiler.errors import UnsupportedOpError
from pytfrt.compiler.frontends.tf import import_tf


def test_unsupported_op_names_type_node_and_frame(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((4,), tf.float32)])
    def f(x: Any) -> Any:
        return tf.bitcast(x, tf.int32, name="reinterpret")

    with pytest.raises(UnsupportedOpError) as info:
        pytfrt.compile(f)
    err = info.value
    assert err.op_type == "Bitcast"
    assert err.node == "reinterpret"
    assert err.where.startswith(__file__ + ":")
    assert "unsupported op 'Bitcast' (node 'reinterpret')" in str(err)


def test_unsupported_op_in_a_loop_body_names_the_function(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((), tf.int32), tf.TensorSpec((3,), tf.float32)])
    def f(n: Any, x: Any) -> Any:
        return tf.while_loop(
            lambda i, v: i < n,
            lambda i, v: (i + 1, tf.bitcast(tf.bitcast(v, tf.int32), tf.float32)),
            (0, x),
        )[1]

    with pytest.raises(UnsupportedOpError, match="Bitcast") as info:
        import_tf(f)
    assert "function 'while_body" in info.value.where


def test_unsupported_attribute_is_reported(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((1, 4, 4, 1), tf.float32)])
    def f(x: Any) -> Any:
        return tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="SYMMETRIC")

    with pytest.raises(UnsupportedOpError, match="MirrorPad.*SYMMETRIC"):
        import_tf(f)


def test_dead_unsupported_node_is_ignored(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((4,), tf.float32)])
    def f(x: Any) -> Any:
        tf.bitcast(x, tf.int32)  # unused: pruned before translation
        return x + 1.0

    np.testing.assert_array_equal(pytfrt.compile(f)(np.zeros(4, np.float32)), np.ones(4))


def test_tf_function_without_signature(tf: Any) -> None:
    @tf.function
    def f(x: Any) -> Any:
        return x

    with pytest.raises(ValueError, match="has no input_signature"):
        import_tf(f)
    out = pytfrt.compile(f, input_signature=[tf.TensorSpec((None,), tf.float32)])(
        np.ones(3, np.float32)
    )
    np.testing.assert_array_equal(out, np.ones(3))


def test_not_a_tf_object(tf: Any) -> None:
    with pytest.raises(ValueError, match="cannot import a int"):
        import_tf(42)
