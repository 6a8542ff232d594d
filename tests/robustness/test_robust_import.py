"""Damaged or too-new source models: the compiler's front ends say which file, which part and
what to do, instead of compiling silently or failing deep inside onnx, Keras or TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import pytfrt  # noqa: E402
from pytfrt.compiler.frontends.onnx import OnnxImportError, import_onnx  # noqa: E402


def _relu_model(opset: int, initializer: TensorProto | None = None) -> onnx.ModelProto:
    inits = [initializer] if initializer is not None else []
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_an_opset_newer_than_the_importer_knows_is_refused() -> None:
    newest = onnx.defs.onnx_opset_version()
    with pytest.raises(OnnxImportError, match=f"opset 99 is newer than this importer knows .*"
                                              f"up to {newest}"):
        import_onnx(_relu_model(99))
    # the newest known opset imports, and computes relu (NumPy is the oracle)
    model = pytfrt.compile(_relu_model(newest))
    x = np.array([-1.5, 2.0], np.float32)
    np.testing.assert_array_equal(model(x), np.maximum(x, 0))


@pytest.mark.parametrize("dims", [[2**40], [1 << 20, 1 << 20], [-1]])
def test_a_huge_declared_initializer_names_itself(dims: list[int]) -> None:
    init = TensorProto(name="w_huge", data_type=TensorProto.FLOAT, dims=dims)
    with pytest.raises(OnnxImportError, match="initializer 'w_huge' declares shape"):
        import_onnx(_relu_model(13, init))


def test_an_initializer_with_missing_data_names_itself() -> None:
    init = TensorProto(name="w_short", data_type=TensorProto.FLOAT, dims=[4],
                       raw_data=b"\0" * 6)
    with pytest.raises(OnnxImportError, match="initializer 'w_short' .* cannot be read"):
        import_onnx(_relu_model(13, init))


def _two_node_model(second_output: str, initializer: str | None = None) -> onnx.ModelProto:
    """``c = Relu(x)``, then ``Neg(x)`` into ``second_output``, graph output ``c``."""
    nodes = [helper.make_node("Relu", ["x"], ["c"], name="first"),
             helper.make_node("Neg", ["x"], [second_output], name="second")]
    inits = [] if initializer is None else [
        helper.make_tensor(initializer, TensorProto.FLOAT, [2], [1.0, 2.0])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [2])],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("second, initializer", [("c", None), ("x", None), ("w", "w")])
def test_a_value_defined_twice_is_refused_as_onnx_refuses_it(second: str,
                                                             initializer: str | None) -> None:
    """A node output that redefines a value (another node's output, a graph input, an
    initializer) breaks ONNX's single assignment: ONNX's checker and ONNX Runtime refuse the
    model, and so does the importer, naming the value and the node, instead of letting one
    definition shadow the other."""
    ort = pytest.importorskip("onnxruntime")
    model = _two_node_model(second, initializer)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model, full_check=True)
    with pytest.raises(Exception):  # noqa: B017 - ONNX Runtime's own error class
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(OnnxImportError, match=f"value '{second}' is defined twice .*'second'"):
        import_onnx(model)
    # a distinct name imports and computes relu (NumPy is the oracle)
    x = np.array([-1.5, 2.0], np.float32)
    np.testing.assert_array_equal(pytfrt.compile(_two_node_model("d"))(x), np.maximum(x, 0))


@pytest.mark.timeout(900)  # importing TensorFlow on a loaded machine
def test_a_corrupt_keras_file_says_it_is_damaged(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    path = tmp_path / "model.keras"
    path.write_bytes(b"PK\x03\x04 this is not a zip archive")
    with pytest.raises(ValueError, match="model.keras: Keras cannot load this file .* damaged"):
        pytfrt.compile(str(path))
