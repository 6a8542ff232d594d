"""The generated call's whole-call steady state (``pytfrt.model``, ``Arena.steady``): once a
call with some input shapes kept no new buffer, the next call with the same input shapes skips
the buffer tests of kernels whose operands' shapes follow from the inputs', and keeps them for
kernels reading anything else.  Checked against NumPy: a shape that changes between calls with
the same input shapes (a ``Reshape`` to a shape given as an input value) between planned
kernels, a batch size that changes, and what the arena records after each call."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import pytfrt  # noqa: E402


def _compile(tmp_path, nodes, inputs, name: str):
    graph = helper.make_graph(nodes, name, inputs,
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return pytfrt.compile(str(path))


def test_a_shape_from_an_input_value_between_planned_kernels(tmp_path):
    model = _compile(tmp_path, [
        helper.make_node("Relu", ["x"], ["h"]),
        helper.make_node("Reshape", ["h", "s"], ["v"]),  # its shape: the value of s
        helper.make_node("Mul", ["v", "v"], ["y"]),
        helper.make_node("Add", ["y", "y"], ["z"]),
    ], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8]),
        helper.make_tensor_value_info("s", TensorProto.INT64, [2])], "reshape_value")
    src = model.call_source
    assert "D = A.steady != Q" in src and "if D:" in src  # the relu may skip its test
    assert src.count("if D:") == 1  # the mul reads the reshape's view: it always tests
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    steady = []
    for s in ([4, 8], [4, 8], [4, 8], [8, 4], [8, 4], [2, 16], [4, 8], [4, 8]):
        got = model(x=x, s=np.array(s, np.int64))
        np.testing.assert_allclose(got, 2 * np.maximum(x, 0).reshape(s) ** 2, rtol=1e-6)
        steady.append(model._arenas[0].steady is not None)
    # a call that kept a new buffer (first call, a new reshape) leaves the arena unsteady
    assert steady == [False, True, True, False, True, False, False, True]


def test_a_batch_size_that_changes(tmp_path):
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
    model = _compile(tmp_path, [
        helper.make_node("Constant", [], ["w"], value=onnx.numpy_helper.from_array(w, "w")),
        helper.make_node("MatMul", ["x", "w"], ["a"]),
        helper.make_node("Tanh", ["a"], ["b"]),
        helper.make_node("MatMul", ["b", "w"], ["c"]),
        helper.make_node("Sigmoid", ["c"], ["d"]),
        helper.make_node("Mul", ["d", "b"], ["z"]),
    ], [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])], "batch")
    assert "if D:" in model.call_source

    def reference(x: np.ndarray) -> np.ndarray:
        b = np.tanh(x.astype(np.float64) @ w)
        return 1 / (1 + np.exp(-(b @ w))) * b

    for n in (1, 1, 1, 3, 3, 1, 2, 2, 2, 1):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        got = model(x)
        assert got.shape == (n, 8)
        np.testing.assert_allclose(got, reference(x), rtol=1e-5, atol=1e-6)
        assert model._arenas[0].steady in (None, ((n, 8),))
    assert model._arenas[0].steady is None  # the last call (batch 1 after 2) kept buffers
    model(x)
    assert model._arenas[0].steady == ((1, 8),)
