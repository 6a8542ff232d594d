"""The ONNX front end, op by op: one-node models imported by pytfrt vs ONNX Runtime.

Each case builds a model of one node with ``onnx.helper`` and checks that ``pytfrt.compile``
gives ONNX Runtime's result (same shape and dtype, values to a relative 1e-5, 1e-4 for the
transcendental ones).  Also: dynamic shape subgraphs at two input sizes, Hypothesis over
broadcasting and reductions, the errors (unsupported op, bad file), and that ``docs/ops.md``'s
ONNX section is the mapping table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_zoo import (
    feeds_of,
    max_rel_error,
    one_node_model,
    run_ort,
    run_pytfrt,
)

RNG = np.random.default_rng(1234)


def f32(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def i64(*v: int) -> np.ndarray:
    return np.asarray(v, dtype=np.int64)


def check(
    op_type: str,
    inputs: dict[str, Any],
    *,
    consts: dict[str, np.ndarray] | None = None,
    n_outputs: int = 1,
    dynamic: tuple[str, ...] = (),
    opset: int = 17,
    tol: float = 1e-5,
    **attrs: Any,
) -> None:
    """Compare pytfrt with ONNX Runtime on a one-node model (consts become initializers)."""
    consts = dict(consts or {})
    all_inputs = {k: None if v is None else np.asarray(v) for k, v in inputs.items()}
    for k, v in consts.items():
        all_inputs.setdefault(k, v)
    model = one_node_model(
        op_type, all_inputs, n_outputs, initializers=consts, dynamic=dynamic, opset=opset, **attrs
    )
    feeds = feeds_of(model, all_inputs)
    want = run_ort(model, feeds)
    got = run_pytfrt(model, feeds)
    err = max_rel_error(got, want)
    assert err <= tol, f"{op_type}: relative error {err:.3g} > {tol}"


UNARY = [
    "Neg", "Abs", "Exp", "Sign", "Floor", "Ceil", "Round", "Tanh", "Sigmoid", "Relu",
    "Softplus", "Softsign", "Erf", "Sin", "Cos", "Tan", "HardSwish",
]  # fmt: skip


@pytest.mark.parametrize("op", UNARY)
def test_unary(op: str) -> None:
    check(op, {"x": f32(3, 4)}, tol=1e-4)


@pytest.mark.parametrize("op", ["Log", "Sqrt", "Reciprocal"])
def test_unary_positive(op: str) -> None:
    check(op, {"x": f32(3, 4, lo=0.1, hi=3.0)}, tol=1e-4)


def test_isnan_isinf_not() -> None:
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    check("IsNaN", {"x": x})
    check("IsInf", {"x": x})
    check("IsInf", {"x": x}, detect_negative=0)
    check("IsInf", {"x": x}, detect_positive=0)
    check("Not", {"x": np.array([True, False, True])})


@pytest.mark.parametrize(
    "op", ["Add", "Sub", "Mul", "Div", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]
)
def test_binary_broadcast(op: str) -> None:
    check(op, {"a": f32(2, 3, 4), "b": f32(3, 1, lo=0.5, hi=2.0)})


def test_pow_and_logical() -> None:
    check("Pow", {"a": f32(2, 3, lo=0.5, hi=2.0), "b": f32(3)}, tol=1e-4)
    a, b = RNG.random((3, 4)) > 0.5, RNG.random((4,)) > 0.5
    for op in ("And", "Or", "Xor"):
        check(op, {"a": a, "b": b})
    ia, ib = RNG.integers(0, 100, (3, 4), dtype=np.int32), RNG.integers(0, 100, (4,), np.int32)
    check("BitwiseAnd", {"a": ia, "b": ib}, opset=18)
    check("BitwiseOr", {"a": ia, "b": ib}, opset=18)


def test_integer_div_and_mod() -> None:
    a = np.array([7, -7, 7, -7, 0, 9], np.int64)
    b = np.array([2, 2, -2, -2, 3, 4], np.int64)
    check("Div", {"a": a, "b": b})
    check("Mod", {"a": a, "b": b})


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic(op: str) -> None:
    check(op, {"a": f32(2, 3), "b": f32(3), "c": f32(1, 3)})
    check(op, {"a": f32(2, 3)})


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("LeakyRelu", {"alpha": 0.1}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("Elu", {}),
        ("Elu", {"alpha": 0.5}),
        ("Selu", {}),
        ("Selu", {"alpha": 1.5, "gamma": 1.1}),
        ("Celu", {"alpha": 0.7}),
        ("ThresholdedRelu", {"alpha": 0.5}),
        ("Mish", {}),
    ],
)
def test_activations(op: str, attrs: dict[str, Any]) -> None:
    check(op, {"x": f32(4, 5)}, opset=18, tol=1e-4, **attrs)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate: str) -> None:
    check("Gelu", {"x": f32(4, 5)}, opset=20, tol=1e-4, approximate=approximate)


def test_prelu() -> None:
    check("PRelu", {"x": f32(2, 3, 4, 4), "s": f32(3, 1, 1)}, consts={"s": f32(3, 1, 1)})


@pytest.mark.parametrize(
    "bounds", [(0.0, None), (0.0, 6.0), (-0.5, 0.5), (None, 1.0), (None, None)]
)
def test_clip(bounds: tuple[float | None, float | None]) -> None:
    lo, hi = bounds
    consts = {}
    inputs: dict[str, Any] = {"x": f32(3, 4, lo=-8, hi=8)}
    inputs["lo"] = None if lo is None else np.float32(lo)
    inputs["hi"] = None if hi is None else np.float32(hi)
    for k in ("lo", "hi"):
        if inputs[k] is not None:
            consts[k] = np.asarray(inputs[k], np.float32)
    check("Clip", inputs, consts=consts)


def test_clip_dynamic_bounds_and_integers() -> None:
    check("Clip", {"x": f32(3, 4), "lo": np.float32(-0.5), "hi": np.float32(0.7)})
    x = np.arange(-5, 5, dtype=np.int64)
    check(
        "Clip",
        {"x": x, "lo": np.int64(-2), "hi": np.int64(3)},
        consts={"lo": np.asarray(-2, np.int64), "hi": np.asarray(3, np.int64)},
    )


def test_cast_where() -> None:
    check("Cast", {"x": f32(3, 4, lo=-100, hi=100)}, to=7)
    check("Cast", {"x": np.arange(6, dtype=np.int64)}, to=1)
    check("CastLike", {"x": np.arange(6, dtype=np.int32), "like": f32(1)})
    check("Where", {"c": RNG.random((3, 4)) > 0.5, "a": f32(3, 4), "b": f32(4)})


def test_matmul_gemm() -> None:
    check("MatMul", {"a": f32(2, 1, 3, 4), "b": f32(3, 4, 5)})
    check("MatMul", {"a": f32(4), "b": f32(4, 5)})
    w = f32(6, 4)
    check("Gemm", {"a": f32(3, 4), "w": w, "c": f32(6)}, consts={"w": w, "c": f32(6)}, transB=1)
    check("Gemm", {"a": f32(4, 3), "b": f32(4, 5), "c": f32(3, 5)}, transA=1, alpha=0.5, beta=2.0)
    check("Gemm", {"a": f32(3, 4), "b": f32(4, 5)})


@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"pads": [1, 1, 1, 1]},
        {"pads": [0, 1, 2, 1], "strides": [2, 1]},
        {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
        {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
        {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
        {"auto_pad": "VALID"},
    ],
)
def test_conv(attrs: dict[str, Any]) -> None:
    w, b = f32(6, 4, 3, 3), f32(6)
    check(
        "Conv", {"x": f32(2, 4, 9, 8), "w": w, "b": b}, consts={"w": w, "b": b}, tol=1e-4, **attrs
    )


def test_conv_groups_depthwise_1d_dynamic_batch() -> None:
    w = f32(6, 2, 3, 3)
    check(
        "Conv",
        {"x": f32(2, 4, 7, 7), "w": w},
        consts={"w": w},
        group=2,
        pads=[1, 1, 1, 1],
        tol=1e-4,
    )
    w = f32(4, 1, 5, 5)
    check(
        "Conv",
        {"x": f32(1, 4, 9, 9), "w": w},
        consts={"w": w},
        group=4,
        pads=[2, 2, 2, 2],
        strides=[2, 2],
        tol=1e-4,
    )
    w = f32(5, 3, 3)
    check(
        "Conv",
        {"x": f32(2, 3, 10), "w": w, "b": f32(5)},
        consts={"w": w, "b": f32(5)},
        pads=[1, 0],
        strides=[2],
        tol=1e-4,
    )
    w = f32(4, 3, 3, 3)
    check("Conv", {"x": f32(3, 3, 6, 6), "w": w}, consts={"w": w}, dynamic=("x",), tol=1e-4)


def test_conv_transpose() -> None:
    w = f32(4, 3, 3, 3)
    check(
        "ConvTranspose",
        {"x": f32(2, 4, 5, 5), "w": w, "b": f32(3)},
        consts={"w": w, "b": f32(3)},
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        output_padding=[1, 1],
        tol=1e-4,
    )


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
        ("AveragePool", {"kernel_shape": [2, 3], "strides": [2, 1], "auto_pad": "SAME_UPPER"}),
    ],
)
def test_pools(op: str, attrs: dict[str, Any]) -> None:
    check(op, {"x": f32(2, 3, 7, 9)}, **attrs)


def test_pool_1d_and_global() -> None:
    check("MaxPool", {"x": f32(2, 3, 11)}, kernel_shape=[3], strides=[2])
    check("GlobalAveragePool", {"x": f32(2, 3, 5, 6)})
    check("GlobalMaxPool", {"x": f32(2, 3, 5, 6)})
    check("GlobalAveragePool", {"x": f32(2, 3, 7)})


def test_normalisations() -> None:
    c = 5
    bn = {"s": f32(c, lo=0.5), "b": f32(c), "m": f32(c), "v": f32(c, lo=0.5, hi=2.0)}
    check("BatchNormalization", {"x": f32(2, c, 4, 4), **bn}, consts=bn, epsilon=1e-3, tol=1e-4)


@pytest.mark.parametrize("shape", [(4, 5), (2, 5, 7), (2, 5, 3, 4), (2, 5, 2, 3, 2)])
def test_batch_norm_training_mode(shape: tuple[int, ...]) -> None:
    """``training_mode = 1``: normalised with the batch statistics, and the running mean and
    variance outputs (statistics as graph inputs or as constants)."""
    c = shape[1]
    bn = {"s": f32(c, lo=0.5), "b": f32(c), "m": f32(c), "v": f32(c, lo=0.5, hi=2.0)}
    for consts in ({}, bn):
        check("BatchNormalization", {"x": f32(*shape), **bn}, consts=consts, n_outputs=3,
              opset=15, training_mode=1, momentum=0.8, epsilon=1e-3, tol=1e-4)
    g, b = f32(6), f32(6)
    check(
        "LayerNormalization", {"x": f32(2, 3, 6), "g": g, "b": b}, consts={"g": g, "b": b}, tol=1e-4
    )
    g2 = f32(3, 6)
    check("LayerNormalization", {"x": f32(2, 3, 6), "g": g2}, consts={"g": g2}, axis=-2, tol=1e-4)
    s, b = f32(3), f32(3)
    check(
        "InstanceNormalization",
        {"x": f32(2, 3, 4, 5), "s": s, "b": b},
        consts={"s": s, "b": b},
        tol=1e-4,
    )


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax(op: str, axis: int) -> None:
    check(op, {"x": f32(3, 4, 5)}, axis=axis, tol=1e-4)


REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]  # fmt: skip


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions(op: str, keepdims: int) -> None:
    x = f32(3, 4, 5, lo=0.5, hi=1.5)
    axes = i64(0, -1)
    check(op, {"x": x, "axes": axes}, consts={"axes": axes}, keepdims=keepdims, opset=18, tol=1e-4)
    check(op, {"x": x}, keepdims=keepdims, opset=18, tol=1e-4)


def test_reduce_opset13_attribute_axes_and_noop() -> None:
    x = f32(3, 4, 5)
    check("ReduceMean", {"x": x}, axes=[1], keepdims=1, opset=13)
    check("ReduceSum", {"x": x}, noop_with_empty_axes=1, opset=13)


def test_arg_cumsum() -> None:
    x = f32(3, 4, 5)
    check("ArgMax", {"x": x}, axis=1, keepdims=0)
    check("ArgMin", {"x": x}, axis=-1)
    ax = np.asarray(1, np.int64)
    check("CumSum", {"x": x, "ax": ax}, consts={"ax": ax})
    check("CumSum", {"x": x, "ax": ax}, consts={"ax": ax}, exclusive=1, reverse=1)


def test_shape_ops_static() -> None:
    x = f32(2, 3, 4)
    for shape in (i64(0, -1), i64(4, 0, 2), i64(-1), i64(2, 12)):
        check("Reshape", {"x": x, "s": shape}, consts={"s": shape})
    check("Flatten", {"x": x}, axis=2)
    check("Flatten", {"x": x}, axis=0)
    check("Transpose", {"x": x}, perm=[2, 0, 1])
    check("Transpose", {"x": x})
    check("Concat", {"a": x, "b": f32(2, 1, 4)}, axis=-2)
    sp = i64(1, 3)
    check("Split", {"x": x, "sp": sp}, consts={"sp": sp}, n_outputs=2, axis=2)
    check("Split", {"x": f32(2, 7)}, n_outputs=3, axis=1, num_outputs=3, opset=18)
    check("Unsqueeze", {"x": x, "a": i64(0, -1)}, consts={"a": i64(0, -1)})
    check("Squeeze", {"x": f32(2, 1, 3, 1), "a": i64(-1)}, consts={"a": i64(-1)})
    check("Squeeze", {"x": f32(2, 1, 3, 1)})
    check("Tile", {"x": x, "r": i64(1, 2, 3)}, consts={"r": i64(1, 2, 3)})
    check("Expand", {"x": f32(3, 1), "s": i64(2, 1, 4)}, consts={"s": i64(2, 1, 4)})
    check("Shape", {"x": x}, start=1)
    check("Size", {"x": x})


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [
        ((1,), (3,), (1,), None),
        ((0, -3), (2, 100), (0, 2), None),
        ((-1,), (-100,), (2,), (-2,)),
        ((0, 1), (10, 4), None, (2, 1)),
    ],
)
def test_slice(starts: Any, ends: Any, axes: Any, steps: Any) -> None:
    x = f32(4, 5, 6)
    consts = {"s": i64(*starts), "e": i64(*ends)}
    inputs: dict[str, Any] = {"x": x, "s": consts["s"], "e": consts["e"]}
    if axes is not None:
        consts["a"] = i64(*axes)
        inputs["a"] = consts["a"]
    if steps is not None:
        if axes is None:
            inputs["a"] = None
        consts["st"] = i64(*steps)
        inputs["st"] = consts["st"]
    check("Slice", inputs, consts=consts)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad(mode: str) -> None:
    p = i64(0, 1, 2, 0, 2, 1)
    inputs: dict[str, Any] = {"x": f32(2, 4, 5), "p": p}
    consts: dict[str, np.ndarray] = {"p": p}
    if mode == "constant":
        inputs["v"] = consts["v"] = np.asarray(1.5, np.float32)
    check("Pad", inputs, consts=consts, mode=mode)


def test_gather_family() -> None:
    x = f32(5, 4, 3)
    idx = np.array([[0, -1], [2, 4]], np.int64)
    check("Gather", {"x": x, "i": idx}, consts={"i": idx}, axis=0)
    check("Gather", {"x": x, "i": np.array([2, 0], np.int64)}, axis=1)
    nd = np.array([[0, 1], [4, 3]], np.int64)
    check("GatherND", {"x": x, "i": nd})


def test_generators() -> None:
    check("Range", {"a": np.float32(1.0), "b": np.float32(7.0), "c": np.float32(1.5)})
    check("Range", {"a": np.int64(10), "b": np.int64(0), "c": np.int64(-3)})
    v = np.array([0.0, 2.0], np.float32)
    check(
        "OneHot",
        {"i": np.array([[1, 4], [0, 2]], np.int64), "d": np.int64(5), "v": v},
        consts={"v": v},
        axis=1,
    )
    check("NonZero", {"x": np.array([[1, 0, 2], [0, 3, 0]], np.float32)})


@pytest.mark.parametrize(("axis", "largest"), [(-1, 1), (0, 1), (1, 0)])
def test_top_k(axis: int, largest: int) -> None:
    x = RNG.permutation(60).reshape(3, 4, 5).astype(np.float32)
    check("TopK", {"x": x, "k": i64(2)}, n_outputs=2, axis=axis, largest=largest)


def test_space_depth_lrn_dropout_identity() -> None:
    check("DepthToSpace", {"x": f32(1, 8, 2, 3)}, blocksize=2)
    check("DepthToSpace", {"x": f32(1, 8, 2, 3)}, blocksize=2, mode="CRD")
    check("SpaceToDepth", {"x": f32(1, 2, 4, 6)}, blocksize=2)
    check("LRN", {"x": f32(2, 6, 3, 3)}, size=3, alpha=0.01, beta=0.75, bias=1.5, tol=1e-4)
    check("Dropout", {"x": f32(3, 4)})
    check("Identity", {"x": f32(3, 4)})


# -- shape subgraphs: static (folded at import) and dynamic (run at run time) -------------


def _flatten_heads_model() -> Any:
    """``x [batch, seq, 8] -> reshape to [batch, seq, 2, 4]`` via a Shape/Gather/Concat subgraph,
    then ``ConstantOfShape(Shape(x))`` added, then ``Expand`` to the input's shape."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        helper.make_node("Unsqueeze", ["t", "ax0"], ["t1"]),
        helper.make_node("Concat", ["b1", "t1", "heads"], ["shape4"], axis=0),
        helper.make_node("Reshape", ["x", "shape4"], ["y"]),
        helper.make_node("Shape", ["y"], ["ys"]),
        helper.make_node(
            "ConstantOfShape",
            ["ys"],
            ["ones"],
            value=numpy_helper.from_array(np.array([1.0], np.float32)),
        ),
        helper.make_node("Add", ["y", "ones"], ["z"]),
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Slice", ["xs", "zero1", "two1"], ["bt"]),
        helper.make_node("Concat", ["bt", "eight"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["z", "flat_shape"], ["w"]),
    ]
    inits = {
        "i0": np.asarray(0, np.int64), "i1": np.asarray(1, np.int64), "ax0": i64(0),
        "heads": i64(2, 4), "zero1": i64(0), "two1": i64(2), "eight": i64(8),
    }  # fmt: skip
    graph = helper.make_graph(
        nodes, "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
        [helper.make_tensor_value_info("w", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_dynamic_shape_subgraph_runs_at_run_time() -> None:
    import pytfrt
    from pytfrt.compiler.frontends.onnx import import_onnx

    model = _flatten_heads_model()
    text = str(import_onnx(model))
    assert "tg.shape" in text  # the subgraph is kept for run time
    compiled = pytfrt.compile(model)
    for shape in ((1, 3, 8), (4, 7, 8)):
        x = f32(*shape)
        (want,) = run_ort(model, {"x": x})
        got = np.asarray(compiled(x=x))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_static_shape_subgraph_is_folded_at_import() -> None:
    from pytfrt.compiler.frontends.onnx import import_onnx

    model = _flatten_heads_model()
    module = import_onnx(model, {"x": (2, 5, 8)})
    text = str(module)
    assert "tg.shape" not in text and "tg.concat" not in text
    import pytfrt

    x = f32(2, 5, 8)
    (want,) = run_ort(model, {"x": x})
    got = np.asarray(pytfrt.compile(module)(x=x))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_reshape_with_computed_shape_and_copied_zero() -> None:
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "z", "one"], ["b"]),
        helper.make_node("Concat", ["zero_dim", "minus1"], ["tgt"], axis=0),
        helper.make_node("Reshape", ["x", "tgt"], ["y"]),
    ]
    inits = {"z": i64(0), "one": i64(1), "zero_dim": i64(0), "minus1": i64(-1)}
    graph = helper.make_graph(
        nodes, "z",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("b", TensorProto.INT64, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = f32(3, 4, 3)
    assert max_rel_error(run_pytfrt(model, {"x": x}), run_ort(model, {"x": x})) == 0.0


# -- Hypothesis ----------------------------------------------------------------------------

_dims = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None)
@given(
    shape=_dims,
    mask=st.lists(st.booleans(), min_size=4, max_size=4),
    op=st.sampled_from(["Add", "Mul", "Sub", "Max"]),
    seed=st.integers(0, 2**16),
)
def test_broadcasting_binary_matches_ort(
    shape: list[int], mask: list[bool], op: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    other = [1 if m else d for d, m in zip(shape, mask, strict=False)]
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(other[rng.integers(0, len(other)) :]).astype(np.float32)
    check(op, {"a": a, "b": b})


@settings(max_examples=25, deadline=None)
@given(
    shape=_dims,
    data=st.data(),
    op=st.sampled_from(["ReduceSum", "ReduceMax", "ReduceMean", "ReduceMin"]),
    keepdims=st.integers(0, 1),
)
def test_reductions_random_axes_match_ort(
    shape: list[int], data: Any, op: str, keepdims: int
) -> None:
    axes = data.draw(
        st.lists(
            st.integers(-len(shape), len(shape) - 1),
            unique_by=lambda a: a % len(shape),
            max_size=len(shape),
        )
    )
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    if axes:
        a = i64(*axes)
        check(op, {"x": x, "axes": a}, consts={"axes": a}, keepdims=keepdims, opset=18, tol=1e-5)
    else:
        check(op, {"x": x}, keepdims=keepdims, opset=18, tol=1e-5)


# -- errors and docs -----------------------------------------------------------------------


def test_unsupported_op_names_type_node_and_file(tmp_path: Path) -> None:
    import onnx

    from pytfrt.compiler.errors import UnsupportedOpError
    from pytfrt.compiler.frontends.onnx import import_onnx

    model = one_node_model("ImageDecoder", {"a": np.zeros(16, np.uint8)}, opset=20)
    path = tmp_path / "decoder_model.onnx"
    onnx.save(model, str(path))
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(path)
    msg = str(info.value)
    assert "ImageDecoder" in msg and "the_imagedecoder" in msg and "decoder_model.onnx" in msg
    assert info.value.op_type == "ImageDecoder"


def test_custom_domain_is_unsupported() -> None:
    from onnx import TensorProto, helper

    from pytfrt.compiler.errors import UnsupportedOpError
    from pytfrt.compiler.frontends.onnx import import_onnx

    node = helper.make_node("FusedThing", ["x"], ["y"], name="n1", domain="com.example")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    )
    with pytest.raises(UnsupportedOpError, match="com.example"):
        import_onnx(model)


def test_bad_inputs(tmp_path: Path) -> None:
    from pytfrt.compiler.frontends.onnx import OnnxImportError, import_onnx

    with pytest.raises(OnnxImportError, match="no such ONNX file"):
        import_onnx(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00not a protobuf at all\xff" * 10)
    with pytest.raises(OnnxImportError, match="bad.onnx"):
        import_onnx(bad)
    with pytest.raises(TypeError, match="onnx.ModelProto"):
        import_onnx(42)
    model = one_node_model("Relu", {"x": f32(2, 3)})
    with pytest.raises(OnnxImportError, match="rank"):
        import_onnx(model, {"x": (2, 3, 4)})
    with pytest.raises(OnnxImportError, match="unknown inputs"):
        import_onnx(model, {"nope": (2, 3)})


def test_old_opset_is_upgraded() -> None:
    x = f32(2, 3)
    check("Relu", {"x": x}, opset=11)
    check("Softmax", {"x": f32(2, 3, 4)}, opset=11, axis=1, tol=1e-4)


def test_docs_ops_md_onnx_section_is_the_mapping_table() -> None:
    from pytfrt.compiler.frontends.onnx_mapping import ops_markdown

    text = (Path(__file__).resolve().parents[3] / "docs" / "ops.md").read_text(encoding="utf-8")
    start = text.index("## ONNX\n")
    rest = text[start + len("## ONNX\n") :]
    end = rest.find("\n## ")
    section = text[start:] if end < 0 else text[start : start + len("## ONNX\n") + end + 1]
    assert section == ops_markdown()


def test_onnx_family_ops() -> None:
    x = f32(3, 4)
    idx = np.array([[0, 2, -1, 1], [2, 0, 0, 1], [1, 1, 2, -3]], np.int64)
    check("GatherElements", {"x": x, "i": idx}, axis=0)
    check("GatherElements", {"x": x, "i": idx[:, :3] % 4}, axis=1)
    upd = f32(2, 4)
    si = np.array([[0, 1, 2, 0], [2, 0, 1, 1]], np.int64)
    check("ScatterElements", {"d": x, "i": si, "u": upd}, axis=0)
    check("ScatterElements", {"d": x, "i": si, "u": upd}, axis=0, reduction="add", opset=18)
    nd = np.array([[1], [0]], np.int64)
    check("ScatterND", {"d": x, "i": nd, "u": f32(2, 4)})
    check("Einsum", {"a": f32(2, 3, 4), "b": f32(2, 4, 5)}, equation="bij,bjk->bik", tol=1e-5)
    check("Einsum", {"a": f32(3, 3)}, equation="ii->i")
    check("Einsum", {"a": f32(2, 3), "b": f32(3)}, equation="ij,j")
    k = np.asarray(1, np.int64)
    check("Trilu", {"x": f32(2, 4, 5), "k": k}, consts={"k": k})
    check("Trilu", {"x": f32(4, 5)}, upper=0)


# -- control flow --------------------------------------------------------------------------


def _if_model() -> Any:
    """``y = x * 2 if sum(x) > 0 else x - outer`` with ``outer = x * x`` computed outside."""
    from onnx import TensorProto, helper, numpy_helper

    f = TensorProto.FLOAT
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t_out"])],
        "then",
        [],
        [helper.make_tensor_value_info("t_out", f, None)],
    )
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "outer"], ["e_out"])],
        "else",
        [],
        [helper.make_tensor_value_info("e_out", f, None)],
    )
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["outer"]),
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="branch"),
    ]
    graph = helper.make_graph(
        nodes,
        "if_model",
        [helper.make_tensor_value_info("x", f, ["n", 3])],
        [helper.make_tensor_value_info("y", f, None)],
        initializer=[
            numpy_helper.from_array(np.float32(2.0), "two"),
            numpy_helper.from_array(np.float32(0.0), "zero"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_if_both_branches_match_ort() -> None:
    import pytfrt

    model = _if_model()
    compiled = pytfrt.compile(model)
    for x in (np.abs(f32(2, 3)), -np.abs(f32(4, 3))):
        (want,) = run_ort(model, {"x": x})
        np.testing.assert_allclose(np.asarray(compiled(x=x)), want, rtol=1e-6)


def test_if_with_known_condition_is_inlined() -> None:
    from onnx import TensorProto, helper

    from pytfrt.compiler.frontends.onnx import import_onnx

    model = _if_model()
    # Replace the computed condition by a constant False: the else branch is imported inline.
    model.graph.node[2].CopyFrom(
        helper.make_node(
            "Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.BOOL, [], [False])
        )
    )
    text = str(import_onnx(model))
    assert "tg.if" not in text and "tg.sub" in text
    x = f32(2, 3)
    assert max_rel_error(run_pytfrt(model, {"x": x}), run_ort(model, {"x": x})) == 0.0


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_loop_matches_ort(trips: int) -> None:
    """``for i < M while acc_sum < limit: acc = acc * decay + x * i`` (outer ``x``)."""
    from onnx import TensorProto, helper, numpy_helper

    f = TensorProto.FLOAT
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=f),
            helper.make_node("Mul", ["x", "fi"], ["xi"]),
            helper.make_node("Mul", ["acc_in", "decay"], ["d"]),
            helper.make_node("Add", ["d", "xi"], ["acc_out"]),
            helper.make_node("ReduceSum", ["acc_out"], ["tot"], keepdims=0),
            helper.make_node("Less", ["tot", "limit"], ["cond_out"]),
        ],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", f, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", f, None)],
    )  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "c0", "acc0"], ["acc"], body=body, name="loop")],
        "loop_model",
        [helper.make_tensor_value_info("x", f, ["n"]),
         helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("acc0", f, ["n"])],
        [helper.make_tensor_value_info("acc", f, None)],
        initializer=[numpy_helper.from_array(np.array(True), "c0"),
                     numpy_helper.from_array(np.float32(0.5), "decay"),
                     numpy_helper.from_array(np.float32(40.0), "limit")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    feeds = {"x": np.abs(f32(4)), "M": np.asarray(trips, np.int64), "acc0": f32(4)}
    assert max_rel_error(run_pytfrt(model, feeds), run_ort(model, feeds)) <= 1e-6
    big = {**feeds, "x": np.full(4, 5.0, np.float32), "M": np.asarray(100, np.int64)}
    assert max_rel_error(run_pytfrt(model, big), run_ort(model, big)) <= 1e-6


# -- patterns ------------------------------------------------------------------------------


def _gelu_model(variant: str, extra_use: bool = False) -> Any:
    """Exporter-style GELU: ``torch`` = (x * (1 + erf(x / sqrt2))) * 0.5,
    ``half_first`` = (0.5 * x) * (1 + erf(x * 1/sqrt2)); ``extra_use`` also outputs erf."""
    from onnx import TensorProto, helper, numpy_helper

    c = {"sqrt2": np.float32(np.sqrt(2)), "rsqrt2": np.float32(1 / np.sqrt(2)),
         "one": np.float32(1), "half": np.float32(0.5)}  # fmt: skip
    if variant == "torch":
        nodes = [
            helper.make_node("Div", ["x", "sqrt2"], ["d"]),
            helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["a"]),
            helper.make_node("Mul", ["x", "a"], ["m"]),
            helper.make_node("Mul", ["m", "half"], ["y"]),
        ]
    else:
        nodes = [
            helper.make_node("Mul", ["half", "x"], ["h"]),
            helper.make_node("Mul", ["rsqrt2", "x"], ["d"]),
            helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["one", "e"], ["a"]),
            helper.make_node("Mul", ["h", "a"], ["y"]),
        ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_use:
        outputs.append(helper.make_tensor_value_info("e", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes,
        "gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
        outputs,
        initializer=[numpy_helper.from_array(v, k) for k, v in c.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("variant", ["torch", "half_first"])
def test_erf_gelu_chain_becomes_one_gelu(variant: str) -> None:
    from pytfrt.compiler.frontends.onnx import import_onnx

    model = _gelu_model(variant)
    text = str(import_onnx(model))
    assert "tg.gelu" in text and "tg.erf" not in text and "tg.mul" not in text
    x = f32(3, 5, lo=-4, hi=4)
    assert max_rel_error(run_pytfrt(model, {"x": x}), run_ort(model, {"x": x})) <= 1e-5


def test_gelu_chain_with_a_shared_intermediate_is_kept() -> None:
    from pytfrt.compiler.frontends.onnx import import_onnx

    model = _gelu_model("torch", extra_use=True)
    text = str(import_onnx(model))
    assert "tg.gelu" not in text and "tg.erf" in text
    x = f32(3, 5)
    assert max_rel_error(run_pytfrt(model, {"x": x}), run_ort(model, {"x": x})) <= 1e-5


@pytest.mark.parametrize("variant", ["torch_tanh", "gpt2"])
def test_tanh_gelu_chain_becomes_one_gelu(variant: str) -> None:
    """PyTorch's ``nn.GELU(approximate="tanh")`` and GPT-2's ``gelu_new`` (with ``Pow``), as
    the TorchScript exporter writes them at opset 17: one ``tg.gelu`` with ``approximate``."""
    import torch

    from pytfrt.compiler.frontends.onnx import import_onnx

    class GeluNew(torch.nn.Module):  # transformers' gelu_new
        def forward(self, x: Any) -> Any:
            c = float(np.sqrt(2.0 / np.pi))
            return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * torch.pow(x, 3.0))))

    module = torch.nn.GELU(approximate="tanh") if variant == "torch_tanh" else GeluNew()
    model = _torch_to_onnx(module, torch.zeros(3, 5))
    text = str(import_onnx(model))
    assert "tg.gelu" in text and "approximate = true" in text
    assert "tg.tanh" not in text and "tg.mul" not in text and "tg.pow" not in text
    x = f32(3, 5, lo=-5, hi=5)
    assert max_rel_error(run_pytfrt(model, {"x": x}), run_ort(model, {"x": x})) <= 1e-5


def _torch_to_onnx(module: Any, example: Any) -> Any:
    import io
    import warnings

    import onnx
    import torch

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), buf, dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"])
    return onnx.load_from_string(buf.getvalue())


@pytest.mark.parametrize(("order", "shared"), [(0, False), (1, False), (0, True)])
def test_mul_sigmoid_is_silu(order: int, shared: bool) -> None:
    from onnx import TensorProto, helper

    from pytfrt.compiler.frontends.onnx import import_onnx

    mul_in = ["x", "s"] if order == 0 else ["s", "x"]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if shared:  # the sigmoid is also an output: not fused
        outputs.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", mul_in, ["y"])],
        "silu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        outputs,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    text = str(import_onnx(model))
    assert ("tg.silu" in text) is not shared and ("tg.sigmoid" in text) is shared
    x = f32(2, 6, lo=-5, hi=5)
    assert max_rel_error(run_pytfrt(model, {"x": x}), run_ort(model, {"x": x})) <= 1e-5


@pytest.mark.parametrize(
    ("attrs", "scales", "sizes"),
    [
        ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
          "nearest_mode": "floor"}, [1, 1, 2, 2], None),
        ({"mode": "linear"}, [1, 1, 2, 3], None),
        ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None,
         [2, 3, 7, 5]),
        ({"mode": "nearest"}, None, [2, 3, 3, 4]),
        ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
         [1, 1, 0.5, 0.5], None),
    ],
)  # fmt: skip
def test_resize(attrs: dict[str, Any], scales: Any, sizes: Any) -> None:
    x = f32(2, 3, 6, 8) if scales == [1, 1, 0.5, 0.5] else f32(2, 3, 4, 5)
    inputs: dict[str, Any] = {"x": x, "roi": None}
    consts: dict[str, np.ndarray] = {}
    if scales is not None:
        inputs["scales"] = consts["scales"] = np.asarray(scales, np.float32)
    else:
        inputs["scales"] = None
        inputs["sizes"] = consts["sizes"] = np.asarray(sizes, np.int64)
    check("Resize", inputs, consts=consts, tol=1e-5, **attrs)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 2, 3, 4, 2)])
def test_affine_grid_size_known_at_run_time(size: tuple[int, ...]) -> None:
    """``AffineGrid`` (imported as its function body) with ``size`` a graph input: the model is
    specialised on ``size`` alone -- the integer input that fixes the ranks -- not on
    ``theta``, so new ``theta`` values reuse the compiled model."""
    from pytfrt.compiler.frontends.onnx_specialize import SpecializingModel

    nd = len(size) - 2
    rng = np.random.default_rng(len(size))
    size_a = np.asarray(size, np.int64)
    theta = rng.standard_normal((size[0], nd, nd + 1)).astype(np.float32)
    model = one_node_model("AffineGrid", {"theta": theta, "size": size_a}, opset=20,
                           align_corners=1)
    runner = SpecializingModel(model)
    for k in range(2):
        th = theta + k
        (got,) = runner([th, size_a])
        (want,) = run_ort(model, {"theta": th, "size": size_a})
        assert got.shape == want.shape == (*size[:1], *size[2:], nd)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert runner._specialised == {"size"}
    assert len(runner._cache) == 1


def test_optional_graph_inputs_and_outputs() -> None:
    """Optional-typed graph inputs and outputs through ``pytfrt.onnx_backend``: ``None`` is an
    empty optional (imported as such: no argument), a value is its element; an empty optional
    output comes back as ``None``.  Known answers (ONNX Runtime's CPU provider lacks the
    optional ops at these opsets; ONNX's reference evaluator cannot run ``Identity`` on an
    empty optional)."""
    from onnx import TensorProto, helper

    from pytfrt import onnx_backend

    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))
    then_g = helper.make_graph(
        [helper.make_node("OptionalGetElement", ["x"], ["t"]),
         helper.make_node("Add", ["t", "t"], ["t2"]),
         helper.make_node("Optional", ["t2"], ["r_then"])], "then", [],
        [helper.make_value_info("r_then", opt)])
    else_g = helper.make_graph(
        [helper.make_node("Optional", [], ["r_else"],
                          type=helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))],
        "else", [], [helper.make_value_info("r_else", opt)])
    graph = helper.make_graph(
        [helper.make_node("OptionalHasElement", ["x"], ["has"]),
         helper.make_node("If", ["has"], ["y"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["x"], ["same"])],
        "optionals", [helper.make_value_info("x", opt)],
        [helper.make_value_info("has", helper.make_tensor_type_proto(TensorProto.BOOL, [])),
         helper.make_value_info("y", opt), helper.make_value_info("same", opt)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    rep = onnx_backend.prepare(model)
    for x in (np.asarray([1.0, -2.0, 3.5], np.float32), None):
        got = rep.run([x])
        assert bool(got[0]) == (x is not None)
        for g, want in zip(got[1:], (None if x is None else x + x, x), strict=True):
            assert (g is None) == (want is None)
            if want is not None:
                np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("op, per, attrs", [
    ("Adagrad", 3, {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.01}),
    ("Adam", 4, {"alpha": 0.8, "beta": 0.95, "epsilon": 1e-5, "norm_coefficient": 0.02,
                 "norm_coefficient_post": 0.03}),
    ("Momentum", 3, {"alpha": 0.9, "beta": 0.5, "norm_coefficient": 0.01, "mode": "standard"}),
    ("Momentum", 3, {"alpha": 0.9, "beta": 0.5, "norm_coefficient": 0.01, "mode": "nesterov"}),
])
def test_training_optimizers_match_onnx_reference(op: str, per: int, attrs: dict[str, Any]
                                                  ) -> None:
    """``ai.onnx.preview.training`` optimizers on two tensor groups, the update count ``T``
    a run-time input (0, the first step, and later), against ONNX's reference evaluator
    (ONNX Runtime has no kernels for that domain)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from pytfrt import onnx_backend

    rng = np.random.default_rng(per)
    shapes = [(3, 4), (5,)]
    names = [f"{k}{i}" for k in "xgvh"[:per] for i in range(2)]
    outs = [f"{k}{i}_new" for k in ("x", *"vh"[:per - 2]) for i in range(2)]
    if op == "Adagrad":
        outs = [f"{k}{i}_new" for k in "xh" for i in range(2)]
    node = helper.make_node(op, ["r", "t", *names], outs, domain="ai.onnx.preview.training",
                            **attrs)
    ins = [helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
           helper.make_tensor_value_info("t", TensorProto.INT64, [])]
    ins += [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[int(n[-1])])
            for n in names]
    graph = helper.make_graph([node], "opt", ins,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT,
                                                             shapes[int(o[1])])
                               for o in outs])
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.preview.training", 1)])
    model.ir_version = 8
    rep = onnx_backend.prepare(model)
    ref = ReferenceEvaluator(model)
    for t in (0, 1, 7):
        feeds = {"r": np.asarray(0.1, np.float32), "t": np.asarray(t, np.int64)}
        for n in names:
            arr = rng.standard_normal(shapes[int(n[-1])]).astype(np.float32)
            feeds[n] = np.abs(arr) if n[0] == "h" else arr  # squared-gradient states
        got = rep.run([feeds[i.name] for i in ins])
        want = ref.run(None, feeds)
        assert max_rel_error([np.asarray(g) for g in got],
                             [np.asarray(w, np.float32) for w in want]) < 1e-5, t
