"""How a compiled model takes its inputs: the source framework's dtype rule (Keras converts,
ONNX Runtime takes exact dtypes), a dict passed positionally, and errors that name the input.

The oracle for the arithmetic is NumPy on the same (converted) values.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pytfrt.compiler.api import compile_module, parse_graph
from pytfrt.model import CompiledModel, InputError, ModelError, load

TWO_INPUTS = """
module {
  func.func @main(%a: tensor<?x3xf32>, %b: tensor<?x3xf32>) -> tensor<?x6xf32>
      attributes {tg.input_names = ["a", "b"], tg.output_names = ["y"]} {
    %y = "tg.concat"(%a, %b) {axis = 1} : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x6xf32>
    func.return %y : tensor<?x6xf32>
  }
}
"""


def _model(casting: str) -> CompiledModel:
    gm = parse_graph(TWO_INPUTS)
    gm.signature = dataclasses.replace(gm.signature, casting=casting)
    return compile_module(gm)


@pytest.fixture(scope="module")
def keras_rule() -> CompiledModel:
    return _model("cast")


@pytest.fixture(scope="module")
def onnx_rule() -> CompiledModel:
    return _model("exact")


A = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
B = -np.arange(6, dtype=np.float64).reshape(2, 3) / 3


def test_cast_rule_converts_float64_ints_scalars_and_lists(keras_rule: CompiledModel) -> None:
    want = np.concatenate([A.astype(np.float32), B.astype(np.float32)], axis=1)
    out = keras_rule(A, B)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(keras_rule(A.tolist(), B.astype(np.float32)), want)
    ints = np.arange(6, dtype=np.int64).reshape(2, 3)
    np.testing.assert_array_equal(keras_rule(ints, ints.astype(bool)),
                                  np.concatenate([ints, ints.astype(bool)], 1).astype(np.float32))


def test_cast_rule_refuses_what_loses_meaning(keras_rule: CompiledModel) -> None:
    with pytest.raises(InputError, match=r"input 0 \('a'\) must have dtype float32, got <U1"):
        keras_rule(np.full((2, 3), "x"), B)


def test_exact_rule_names_the_conversion(onnx_rule: CompiledModel) -> None:
    with pytest.raises(InputError, match=r"input 1 \('b'\) must have dtype float32, got float64 "
                                         r"\(this model takes exact input dtypes, as ONNX "
                                         r"Runtime does\): pass x.astype\(np.float32\)"):
        onnx_rule(A.astype(np.float32), B)


def test_the_rule_is_saved_with_the_model(keras_rule: CompiledModel, tmp_path) -> None:
    keras_rule.save(tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert loaded.signature.casting == "cast"
    np.testing.assert_array_equal(loaded(A, B), keras_rule(A, B))


def test_a_dict_passed_positionally_binds_by_name(onnx_rule: CompiledModel) -> None:
    a, b = A.astype(np.float32), B.astype(np.float32)
    np.testing.assert_array_equal(onnx_rule({"b": b, "a": a}), np.concatenate([a, b], 1))
    with pytest.raises(InputError, match="missing inputs: b"):
        onnx_rule({"a": a})
    with pytest.raises(InputError, match=r"unknown input name 'c' \(inputs: a, b\)"):
        onnx_rule({"a": a, "b": b, "c": b})


def test_wrong_count_says_how_to_pass_inputs(onnx_rule: CompiledModel) -> None:
    with pytest.raises(InputError, match=r"the model takes 2 inputs \(a, b\), got 1: pass them "
                                         r"in that order, by name \(model\(\*\*inputs\)\) or "
                                         r"as one dict"):
        onnx_rule(A.astype(np.float32))


def test_different_batch_sizes_name_the_inputs(onnx_rule: CompiledModel) -> None:
    a = np.zeros((2, 3), np.float32)
    b = np.zeros((3, 3), np.float32)
    with pytest.raises(ModelError, match=r"^the inputs have different batch sizes \('a' has 2, "
                                         r"'b' has 3\)"):
        onnx_rule(a, b)


def test_call_async_takes_a_dict_too(onnx_rule: CompiledModel) -> None:
    a, b = A.astype(np.float32), B.astype(np.float32)
    av = onnx_rule.call_async({"a": a, "b": b})
    onnx_rule.host.await_values([av])
    np.testing.assert_array_equal(av.get(), np.concatenate([a, b], 1))
