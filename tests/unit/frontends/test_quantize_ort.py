"""``pytfrt.quantize`` against ONNX Runtime's own static quantization of the same ONNX model.

A small CNN (conv + bias + ReLU twice, global average pool, dense) is quantized twice with the
same calibration batches: by ``pytfrt.quantize`` (min/max) and by ONNX Runtime's
``quantize_static`` (QDQ, per-channel s8 weights, u8 activations, min/max; the helper of
``pytfrt bench models --int8``), whose model ONNX Runtime runs.  Both compute the same
quantization, so the outputs must agree within one step of the output's quantization, and
both must be close to float32.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytfrt

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def models_int8() -> Any:
    name = "pytfrt_bench_models_int8"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / "models_int8.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def small_cnn(path: Path) -> None:
    """x [N, 3, 12, 12] -> conv 3x3 (8) + relu -> conv 3x3 /2 (16) + relu -> GAP -> Gemm 10."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)

    def init(name: str, arr: np.ndarray) -> Any:
        return numpy_helper.from_array(arr.astype(np.float32), name)

    inits = [
        init("w1", rng.normal(0, 0.3, (8, 3, 3, 3))), init("b1", rng.normal(0, 0.1, 8)),
        init("w2", rng.normal(0, 0.15, (16, 8, 3, 3))), init("b2", rng.normal(0, 0.1, 16)),
        init("w3", rng.normal(0, 0.3, (10, 16))), init("b3", rng.normal(0, 0.1, 10)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1],
                         strides=[2, 2], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_static_int8_agrees_with_onnxruntime_quantize_static(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "cnn.onnx"
    small_cnn(path)
    rng = np.random.default_rng(11)
    batches = [{"x": rng.uniform(0, 1, (2, 3, 12, 12)).astype(np.float32)} for _ in range(8)]
    qpath = models_int8().ort_int8(path, batches, False, tmp_path)
    sess = ort.InferenceSession(str(qpath), providers=["CPUExecutionProvider"])
    kinds = {n.op_type for n in __import__("onnx").load(str(qpath)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= kinds  # ORT wrote a QDQ model

    qmodel = pytfrt.quantize(path, batches)
    fmodel = pytfrt.compile(path)
    x = rng.uniform(0, 1, (4, 3, 12, 12)).astype(np.float32)
    ours, theirs, ref = qmodel(x), sess.run(None, {"x": x})[0], fmodel(x)
    calib = np.concatenate([fmodel(**b) for b in batches])
    step = (max(float(calib.max()), 0.0) - min(float(calib.min()), 0.0)) / 255
    assert np.max(np.abs(ours - theirs)) <= step  # the same arithmetic: at most a tie rounded
    assert np.max(np.abs(ours - ref)) <= 4 * step
    assert not np.array_equal(ours, ref)
    assert models_int8().cosine([ours], [ref]) > 0.999
