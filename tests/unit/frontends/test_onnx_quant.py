"""Quantized ONNX models as ONNX Runtime's ``quantize_static`` writes them (QDQ and QOperator,
per-channel s8 weights, u8 activations, a fixed-seed calibration reader) import, compile to
integer ops
(``qconv2d``/``qmatmul``, no float convolution left) and match ONNX Runtime's own run of the
same int8 model within one quantization step of the output; so do models with u8 weights
(``weight_type=QUInt8``: non-zero weight zero points), which run the float fallback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")


def _float_cnn() -> Any:
    """conv-relu-maxpool, conv-relu, 1x1 conv + residual add + relu, global pool, Gemm."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)

    def w(name: str, *shape: int) -> Any:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32),
                                       name)

    inits = [w("w1", 16, 3, 3, 3), w("b1", 16), w("w2", 16, 16, 3, 3), w("b2", 16),
             w("w3", 16, 16, 1, 1), w("b3", 16), w("dw", 16, 1, 3, 3), w("fc", 10, 16),
             w("fcb", 10)]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"]),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c2"], ["r2"]),
        n("Conv", ["r2", "dw"], ["d2"], pads=[1, 1, 1, 1], group=16),
        n("Conv", ["d2", "w3", "b3"], ["c3"]),
        n("Add", ["c3", "r2"], ["a3"]),
        n("Relu", ["a3"], ["r3"]),
        n("GlobalAveragePool", ["r3"], ["g"]),
        n("Flatten", ["g"], ["f"]),
        n("Gemm", ["f", "fc", "fcb"], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", 1, [None, 3, 16,
                                                                                    16])],
                              [helper.make_tensor_value_info("y", 1, [None, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


class _Reader(quantization.CalibrationDataReader):  # type: ignore[misc]
    def __init__(self) -> None:
        self.batches = iter(
            {"x": np.random.default_rng(i).standard_normal((1, 3, 16, 16)).astype(np.float32)}
            for i in range(8))

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.batches, None)


@pytest.fixture(scope="module", params=["QDQ", "QOperator", "QDQ-QUInt8"])
def qdq_model(request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The float CNN and its quantization in ONNX Runtime's QDQ or QOperator format (the
    latter with its com.microsoft QLinearAdd, QLinearGlobalAveragePool and QGemm); QDQ-QUInt8:
    QDQ with u8 weights (asymmetric: non-zero weight zero points)."""
    d = tmp_path_factory.mktemp("quant")
    fmt, _, wtype = request.param.partition("-")
    f, q = d / "float.onnx", d / f"{request.param}.onnx"
    onnx.save(_float_cnn(), f)
    quantization.quantize_static(
        str(f), str(q), _Reader(), quant_format=getattr(quantization.QuantFormat, fmt),
        per_channel=True, weight_type=getattr(quantization.QuantType, wtype or "QInt8"),
        activation_type=quantization.QuantType.QUInt8)
    return f, q


def _output_step(model: Any) -> float:
    """The scale of the last DequantizeLinear (the quantization step of the output)."""
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    last = [n for n in model.graph.node if n.op_type == "DequantizeLinear"][-1]
    return float(inits[last.input[1]])


def test_qdq_model_runs_as_int8_and_matches_onnxruntime(qdq_model: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    import pytfrt
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.passes import default_pipeline

    fpath, qpath = qdq_model
    model = onnx.load(str(qpath))
    gm = default_pipeline(to_graph(model))
    text = str(gm)
    if "QUInt8" in qpath.name:  # u8 weights: no int8 kernel takes them, the float ops run
        assert '"tg.qconv2d"' not in text and '"tg.conv2d"' in text
    else:
        assert text.count('"tg.qconv2d"') == 4 and '"tg.qmatmul"' in text
        assert '"tg.conv2d"' not in text and '"tg.matmul"' not in text
        # the head: pool and flatten on the codes, no float tensor before the int8 matmul
        assert '"tg.qglobal_avg_pool"' in text and '"tg.global_avg_pool"' not in text
    compiled = pytfrt.compile(model)
    x = np.random.default_rng(99).standard_normal((4, 3, 16, 16)).astype(np.float32)
    ref = ort.InferenceSession(str(qpath), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    got = compiled(x)
    step = _output_step(model)
    assert np.abs(got - ref).max() <= step * 1.001
    # saved and loaded (int8 weights in the BTF file, plans rebuilt at load): same results
    compiled.save(str(tmp_path / "m"))
    np.testing.assert_array_equal(pytfrt.load(str(tmp_path / "m"))(x), got)
    # and the int8 model is close to the float one (sanity of the quantization itself)
    fl = ort.InferenceSession(str(fpath), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    cos = float(np.sum(got * fl) / np.linalg.norm(got) / np.linalg.norm(fl))
    assert cos > 0.99


def test_qlinear_conv_and_matmul_fold_to_integer_ops() -> None:
    """QOperator nodes with constant s8 weights (QLinearConv -> QLinearMatMul) become
    qconv2d/qmatmul and match ONNX Runtime within one output step."""
    from onnx import helper, numpy_helper

    import pytfrt
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.passes import default_pipeline

    rng = np.random.default_rng(4)

    def c(name: str, arr: Any) -> Any:
        return numpy_helper.from_array(np.asarray(arr), name)

    f32, u8 = np.float32, np.uint8
    inits = [
        c("xs", f32(0.05)), c("xz", u8(120)), c("w", rng.integers(-127, 128, (8, 4, 3, 3),
                                                               dtype=np.int8)),
        c("ws", rng.uniform(0.002, 0.01, 8).astype(f32)), c("wz", np.zeros(8, np.int8)),
        c("ys", f32(0.1)), c("yz", u8(100)), c("b", rng.integers(-500, 500, 8).astype(np.int32)),
        c("m", rng.integers(-127, 128, (6, 5), dtype=np.int8)), c("ms", f32(0.01)),
        c("mz", np.int8(0)), c("zs", f32(0.2)), c("zz", u8(90)),
    ]
    n = helper.make_node
    nodes = [n("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
               pads=[1, 1, 1, 1], strides=[2, 2]),
             n("QLinearMatMul", ["y", "ys", "yz", "m", "ms", "mz", "zs", "zz"], ["z"])]
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", 2, [2, 4, 12, 12])],
                              [helper.make_tensor_value_info("z", 2, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    text = str(default_pipeline(to_graph(model)))
    assert '"tg.qconv2d"' in text and '"tg.qmatmul"' in text and '"tg.conv2d"' not in text
    x = rng.integers(0, 256, (2, 4, 12, 12), dtype=np.uint8)
    ref = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = pytfrt.compile(model)(x)
    assert got.dtype == np.uint8 and got.shape == ref.shape == (2, 8, 6, 5)
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= 1
