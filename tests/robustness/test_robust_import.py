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


@pytest.mark.timeout(900)  # importing TensorFlow on a loaded machine
def test_a_corrupt_keras_file_says_it_is_damaged(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    path = tmp_path / "model.keras"
    path.write_bytes(b"PK\x03\x04 this is not a zip archive")
    with pytest.raises(ValueError, match="model.keras: Keras cannot load this file .* damaged"):
        pytfrt.compile(str(path))
