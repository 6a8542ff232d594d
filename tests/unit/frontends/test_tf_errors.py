"""Unsupported TF ops and bad sources fail at compile time with a clear error, not a traceback."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import pytfrt
from pytfrt.compiler.errors import UnsupportedOpError
from pytfrt.compiler.frontends.tf import import_tf


def test_unsupported_op_names_type_node_and_frame(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((4,), tf.float32)])
    def f(x: Any) -> Any:
        return tf.math.igamma(x, x, name="reinterpret")

    with pytest.raises(UnsupportedOpError) as info:
        pytfrt.compile(f)
    err = info.value
    assert err.op_type == "Igamma"
    assert err.node == "reinterpret"
    assert err.where.startswith(__file__ + ":")
    assert "unsupported op 'Igamma' (node 'reinterpret')" in str(err)


def test_unsupported_op_in_a_loop_body_names_the_function(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((), tf.int32), tf.TensorSpec((3,), tf.float32)])
    def f(n: Any, x: Any) -> Any:
        return tf.while_loop(
            lambda i, v: i < n,
            lambda i, v: (i + 1, tf.math.igamma(v, v)),
            (0, x),
        )[1]

    with pytest.raises(UnsupportedOpError, match="Igamma") as info:
        import_tf(f)
    assert "function 'while_body" in info.value.where


def test_unsupported_attribute_is_reported(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((1, None, 4, 1), tf.float32)])
    def f(x: Any) -> Any:  # SYMMETRIC padding of a dynamic axis
        return tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="SYMMETRIC")

    with pytest.raises(UnsupportedOpError, match="MirrorPad.*SYMMETRIC"):
        import_tf(f)


def test_dead_unsupported_node_is_ignored(tf: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec((4,), tf.float32)])
    def f(x: Any) -> Any:
        tf.math.igamma(x, x)  # unused: pruned before translation
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


def test_print_runs_not_dropped(tf: Any, capfd: Any) -> None:
    """``tf.print`` is a side effect nothing depends on: it must run or fail, never vanish
    (what it prints is checked against TF in ``test_tf_strings.py``)."""

    @tf.function(input_signature=[tf.TensorSpec((3,), tf.float32)])
    def f(x: Any) -> Any:
        tf.print("x is", x)
        return x * 2.0

    compiled = pytfrt.compile(f)
    capfd.readouterr()
    compiled(np.array([1.0, 2.0, 3.0], np.float32))
    assert capfd.readouterr().err == "x is [1 2 3]\n"


def test_run_time_assert_runs_and_a_static_one_is_dropped(tf: Any) -> None:
    """A run-time assertion is checked by the program (its message against TF's:
    ``test_tf_strings.py``); one true at import time costs nothing."""

    @tf.function(input_signature=[tf.TensorSpec((3,), tf.float32)])
    def checked(x: Any) -> Any:
        tf.debugging.assert_positive(x)
        return x + 1.0

    compiled = pytfrt.compile(checked)
    np.testing.assert_array_equal(compiled(np.ones(3, np.float32)), [2.0, 2.0, 2.0])
    with pytest.raises(pytfrt.model.ModelError, match="assertion failed"):
        compiled(np.array([1.0, -1.0, 1.0], np.float32))

    @tf.function(input_signature=[tf.TensorSpec((3,), tf.float32)])
    def static(x: Any) -> Any:
        tf.debugging.Assert(tf.constant(True), ["never"])
        return x + 1.0

    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(pytfrt.compile(static)(x), static(x).numpy())


@pytest.mark.parametrize(
    "op", ["ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterUpdate"]
)
def test_scatter_into_a_variable_is_not_dropped(tf: Any, op: str) -> None:
    """Row updates of a variable (an ``Embedding`` gradient step) with a repeated index."""
    start = np.arange(12, dtype=np.float32).reshape(4, 3)
    v = tf.Variable(start)
    idx = np.array([2, 0, 2], np.int32) if op != "ResourceScatterUpdate" else np.array([3, 1])
    upd = np.ones((idx.size, 3), np.float32) * np.arange(1, idx.size + 1, dtype=np.float32)[:, None]

    @tf.function(input_signature=[tf.TensorSpec(upd.shape, tf.float32)])
    def f(u: Any) -> Any:
        getattr(tf.raw_ops, op)(resource=v.handle, indices=idx, updates=u)
        return tf.reduce_sum(u)

    compiled = pytfrt.compile(f)
    compiled(upd)
    f(upd)
    (name,) = compiled.variables
    np.testing.assert_allclose(compiled.variables[name], v.numpy(), rtol=1e-6)
    assert not np.array_equal(v.numpy(), start)


def test_an_unsupported_op_names_the_keras_layer_that_made_it(tf: Any) -> None:
    keras = tf.keras
    inp = keras.Input((3,), name="x")
    out = keras.layers.Lambda(lambda t: tf.math.igamma(t, t), name="gamma_part")(inp)
    model = keras.Model(inp, out)
    with pytest.raises(pytfrt.UnsupportedOpError) as info:
        pytfrt.compile(model)
    message = str(info.value)
    assert "unsupported op 'Igamma'" in message
    assert "made by Keras layer 'gamma_part' (Lambda)" in message
    assert "docs/ops.md" in message and "--backend=tensorflow" in message


def _conv3d_block(keras: Any, inp: Any) -> Any:
    """A functional model's layers built in a helper, the way model code is often split."""
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    conv = keras.layers.Conv3D(2, 3, name="volume_conv")
    return conv(keras.layers.Dense(1)(inp)), line


def test_an_unsupported_op_of_a_built_in_layer_names_the_line_that_created_it(
    tf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A built-in layer's ops are traced inside pytfrt.compile, so their first user frame is the
    compile call; the error names the line that created the layer instead (Conv3D made
    unsupported here by removing its converter)."""
    from pytfrt.compiler.frontends.tf_registry import TF_OPS, load_all

    load_all()
    monkeypatch.delitem(TF_OPS, "Conv3D")
    keras = tf.keras
    inp = keras.Input((4, 4, 4, 1))
    out, built = _conv3d_block(keras, inp)
    model = keras.Model(inp, out)
    with pytest.raises(pytfrt.UnsupportedOpError) as info:
        pytfrt.compile(model)
    message = str(info.value)
    assert info.value.where == f"{__file__}:{built}"
    assert f"in {__file__}:{built}: made by Keras layer 'volume_conv' (Conv3D)" in message
    assert "docs/ops.md" in message and "--backend=tensorflow" in message

    # Two layers of the class, neither named: the line is ambiguous, so the error keeps the
    # compile call's line rather than guess.
    convs = [keras.layers.Conv3D(1, 1), keras.layers.Conv3D(1, 1)]
    seq = keras.Sequential([keras.Input((4, 4, 4, 1)), *convs])
    compile_line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
    with pytest.raises(pytfrt.UnsupportedOpError) as info:
        pytfrt.compile(seq)
    assert info.value.where == f"{__file__}:{compile_line}"
    assert "created" not in str(info.value)


def test_an_unsupported_op_in_pytfrt_keras_fit_names_the_layer_and_keras_fit(
    tf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The train step is traced inside pytfrt.keras.fit: the error names the user's layer line,
    not pytfrt's own code, and says that Keras's model.fit can train the model meanwhile."""
    import pytfrt.keras
    from pytfrt.compiler.frontends.tf_registry import TF_OPS, load_all

    load_all()
    monkeypatch.delitem(TF_OPS, "Conv3D")
    keras = tf.keras
    built = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    conv = keras.layers.Conv3D(1, 3, name="fit_conv")
    model = keras.Sequential([keras.Input((4, 4, 4, 1)), conv, keras.layers.Flatten()])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.zeros((4, 4, 4, 4, 1), np.float32), np.zeros((4, 8), np.float32)
    with pytest.raises(pytfrt.UnsupportedOpError) as info:
        pytfrt.keras.fit(model, x, y, verbose=False)
    assert info.value.where == f"{__file__}:{built}"
    message = str(info.value)
    assert "made by Keras layer 'fit_conv' (Conv3D), created on that line" in message
    assert "model.fit trains it" in message and "pytfrt/keras.py" not in message
