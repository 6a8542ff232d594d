"""The quantisation ops (``quantize_linear``, ``dequantize_linear``, ``dynamic_quantize_linear``)
against ONNX Runtime's kernels on random data and parameters (per tensor, per axis, blocked;
u8, i8, u16, i16), their type inference and errors, a float graph with quantize/dequantize pairs
compiled and run against NumPy; the integer ops (``qconv2d``, ``qmatmul``): oneDNN against the
NumPy reference, the reference against ONNX Runtime's ``QLinearConv`` and float arithmetic; and
``-tg-fold-quant`` on random QDQ convolutions against the unfolded graph (Hypothesis)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import quant
from pytfrt.compiler.errors import GraphError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

_NP = {"ui8": np.uint8, "i8": np.int8, "ui16": np.uint16, "i16": np.int16}


def _ort_run(op: str, inputs: dict[str, np.ndarray], outs: dict[str, Any],
             **attrs: Any) -> list[Any]:
    def vi(name: str, arr: np.ndarray) -> Any:
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr.dtype),
                                             list(arr.shape))

    node = helper.make_node(op, list(inputs), outs, **attrs)
    graph = helper.make_graph([node], "g", [vi(k, v) for k, v in inputs.items()],
                              [helper.make_tensor_value_info(
                                  o, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None)
                               for o, t in outs.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(sess.run(None, inputs))


@st.composite
def _case(draw: Any) -> tuple[Any, ...]:
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    axis = draw(st.integers(-rank, rank - 1))
    mode = draw(st.sampled_from(["tensor", "axis", "block"]))
    dtype = draw(st.sampled_from(sorted(_NP)))
    seed = draw(st.integers(0, 2**31 - 1))
    block = draw(st.integers(1, 3)) if mode == "block" else 0
    if mode == "block" and shape[axis] <= block and all(d == 1 for i, d in enumerate(shape)
                                                         if i != axis % rank):
        mode, block = "tensor", 0  # one block covering everything: ONNX's per-tensor form
    return shape, axis, mode, dtype, seed, block


def _params(shape: tuple[int, ...], axis: int, mode: str, dtype: str, block: int,
            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if mode == "tensor":
        pshape: tuple[int, ...] = ()
    elif mode == "axis":
        pshape = (shape[axis],)
    else:
        ps = list(shape)
        ps[axis] = -(-shape[axis] // block)
        pshape = tuple(ps)
    scale = rng.uniform(0.01, 0.5, pshape).astype(np.float32)
    info = np.iinfo(_NP[dtype])
    lo, hi = max(info.min, -200), min(info.max, 200)
    zp = rng.integers(lo, hi + 1, pshape).astype(_NP[dtype])
    return scale, zp


@settings(max_examples=40, deadline=None)
@given(_case())
def test_quantize_dequantize_match_onnxruntime(case: tuple[Any, ...]) -> None:
    shape, axis, mode, dtype, seed, block = case
    rng = np.random.default_rng(seed)
    scale, zp = _params(shape, axis, mode, dtype, block, rng)
    x = (rng.standard_normal(shape) * 40).astype(np.float32)
    # exact ties (x / scale = k + 0.5) exercise the round-half-to-even rule
    x.flat[0] = np.float32(2.5) * scale.flat[0]
    attrs = {"axis": axis, **({"block_size": block} if block else {})}
    (ref_q,) = _ort_run("QuantizeLinear", {"x": x, "s": scale, "z": zp}, {"y": zp.dtype},
                        **attrs)
    q = quant.quantize_linear(x, scale, zp, axis=axis, block_size=block, dtype=dtype)
    assert q.dtype == ref_q.dtype
    np.testing.assert_array_equal(q, ref_q)
    (ref_x,) = _ort_run("DequantizeLinear", {"q": q, "s": scale, "z": zp}, {"y": np.float32},
                        **attrs)
    d = quant.dequantize_linear(q, scale, zp, axis=axis, block_size=block)
    assert d.dtype == np.float32
    np.testing.assert_allclose(d, ref_x, rtol=1e-6, atol=0)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["mixed", "positive", "negative", "zero"]))
def test_dynamic_quantize_linear_matches_onnxruntime(seed: int, kind: str) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((3, 7)) * 5).astype(np.float32)
    x = {"mixed": x, "positive": np.abs(x), "negative": -np.abs(x), "zero": 0 * x}[kind]
    ref = _ort_run("DynamicQuantizeLinear", {"x": x},
                   {"y": np.uint8, "s": np.float32, "z": np.uint8})
    got = quant.dynamic_quantize_linear(x)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype and g.shape == r.shape
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[2], ref[2])
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-7)


def test_dynamic_quantize_linear_rejects_nan() -> None:
    from pytfrt.backends.cpu.ops import OpError

    with pytest.raises(OpError, match="NaN or infinity"):
        quant.dynamic_quantize_linear(np.array([1.0, np.nan], np.float32))


def _builder() -> Any:
    from pytfrt.compiler.builder import GraphBuilder

    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (2, 3, 4), "f32")])
    return gb, fn


def test_inference_types_and_errors() -> None:
    gb, fn = _builder()
    (x,) = fn.arguments
    s = fn.constant(np.full((3,), 0.1, np.float32))
    z = fn.constant(np.zeros((3,), np.int8))
    q = fn.op("quantize_linear", [x, s, z], axis=1, dtype="i8")
    assert (q.dtype, q.shape) == ("i8", (2, 3, 4))
    d = fn.op("dequantize_linear", [q, s, z], axis=1)
    assert (d.dtype, d.shape) == ("f32", (2, 3, 4))
    y, ys, yz = fn.op("dynamic_quantize_linear", [x], n_results=3)
    assert (y.dtype, ys.shape, yz.dtype) == ("ui8", (), "ui8")
    with pytest.raises(GraphError, match="zero point is i8, the result ui8"):
        fn.op("quantize_linear", [x, s, z], axis=1, dtype="ui8")
    with pytest.raises(GraphError, match="neither per tensor nor per axis"):
        fn.op("quantize_linear", [x, s, z], axis=2, dtype="i8")
    with pytest.raises(GraphError, match="cannot quantise to i32"):
        fn.op("quantize_linear", [x, s], dtype="i32")
    with pytest.raises(GraphError, match="cannot dequantise f32"):
        fn.op("dequantize_linear", [x, s])


def test_qdq_graph_compiles_and_runs() -> None:
    """A float graph with a quantize/dequantize pair on its input and a per-channel one on a
    weight runs as NumPy computes it (the pairs are ordinary kernels)."""
    from pytfrt.compiler.api import compile_module
    from pytfrt.compiler.builder import GraphBuilder

    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    ws = (np.abs(w).max(axis=0) / 127).astype(np.float32)
    wq = np.clip(np.rint(w / ws), -127, 127).astype(np.int8)
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 8), "f32")])
    (x,) = fn.arguments
    xs = fn.constant(np.asarray(0.02, np.float32))
    xz = fn.constant(np.asarray(128, np.uint8))
    xq = fn.op("quantize_linear", [x, xs, xz], dtype="ui8")
    xd = fn.op("dequantize_linear", [xq, xs, xz])
    wd = fn.op("dequantize_linear", [fn.constant(wq, name="wq"), fn.constant(ws, name="ws")],
               axis=1)
    fn.returns([fn.op("matmul", [xd, wd], transpose_a=False, transpose_b=False)])
    model = compile_module(gb.finish())
    xin = rng.standard_normal((3, 8)).astype(np.float32)
    xq_ref = np.clip(np.rint(xin / np.float32(0.02)) + 128, 0, 255)
    ref = ((xq_ref - 128) * np.float32(0.02)).astype(np.float32) @ (wq * ws)
    np.testing.assert_allclose(model(xin), ref, rtol=1e-5, atol=1e-5)


def _qconv_case(rng: np.random.Generator, *, groups: int = 1, stride: int = 1,
                dtype: str = "ui8", act: str = "none", residual: bool = False,
                n: int = 1, hw: int = 9, cin: int = 16, cout: int = 32,
                inner: bool = False) -> tuple[Any, ...]:
    x = rng.integers(0, 256, (n, hw, hw, cin)).astype(np.uint8)
    w = rng.integers(-127, 128, (3, 3, cin // groups, cout)).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, cout).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32)
    attrs = dict(layout="NHWC", strides=(stride, stride), pads=(1, 1, 1, 1), dilations=(1, 1),
                 groups=groups, x_scale=0.02, x_zero_point=128, x_dtype="ui8", y_scale=0.05,
                 y_zero_point=5 if dtype == "ui8" else 0, dtype=dtype, activation=act,
                 alpha=0.0, residual_scale=0.03, residual_zero_point=7,
                 epilogue_operands=(1, int(residual)))
    if inner:  # the product requantized (scale 0.04, zero point 9) before the residual add
        attrs.update(inner_scale=0.04, inner_zero_point=9)
    return x, w, ws, bias, attrs


def test_qconv2d_reference_matches_onnxruntime_qlinearconv() -> None:
    """The NumPy reference against ONNX Runtime's QLinearConv (int32 bias = float bias /
    (x_scale * w_scale)); u8 results equal or one step apart (requantisation rounding)."""
    rng = np.random.default_rng(1)
    x, w, ws, _, attrs = _qconv_case(rng)
    b32 = rng.integers(-2000, 2000, w.shape[3]).astype(np.int32)
    bias = (b32 * (np.float32(0.02) * ws)).astype(np.float32)
    plan = quant.qconv2d_prepare(w, ws, bias, **attrs)
    plan.dnnl = None
    got = quant.qconv2d(x, plan).transpose(0, 3, 1, 2)
    f32, u8 = np.float32, np.uint8
    (ref,) = _ort_run("QLinearConv", {
        "x": np.ascontiguousarray(x.transpose(0, 3, 1, 2)), "xs": np.asarray(0.02, f32),
        "xz": np.asarray(128, u8), "w": np.ascontiguousarray(w.transpose(3, 2, 0, 1)),
        "ws": ws, "wz": np.zeros(w.shape[3], np.int8), "ys": np.asarray(0.05, f32),
        "yz": np.asarray(5, u8), "b": b32}, {"y": u8}, pads=[1, 1, 1, 1])
    diff = np.abs(got.astype(np.int32) - ref.astype(np.int32))
    assert diff.max() <= 1 and np.mean(diff) < 0.01


@pytest.mark.parametrize("kw", [
    {}, {"stride": 2, "act": "relu"}, {"residual": True, "n": 2}, {"groups": 16, "cout": 16},
    {"dtype": "f32"}, {"dtype": "i8"}, {"residual": True, "act": "relu", "hw": 28, "cin": 32},
    {"residual": True, "act": "relu", "inner": True},
    {"residual": True, "inner": True, "hw": 28, "cin": 64, "cout": 64},  # output-row parts
    {"n": 2, "hw": 24, "cin": 64, "cout": 64, "stride": 2},  # batch parts
    {"residual": True, "act": "relu", "inner": True, "hw": 7, "cin": 256, "cout": 128},  # channels
    {"hw": 7, "cin": 256, "cout": 80},  # 7x7, channels not in whole 16-blocks per part: rows
])
def test_qconv2d_onednn_matches_reference(kw: dict[str, Any]) -> None:
    """oneDNN's int8 convolution (bias, relu, residual with its own zero point, grouped,
    batch/row parts) against the NumPy reference."""
    from pytfrt.backends.cpu import _dnnl_int8, _parallel

    if _dnnl_int8.library() is None:
        pytest.skip("oneDNN is not installed")
    rng = np.random.default_rng(2)
    x, w, ws, bias, attrs = _qconv_case(rng, **kw)
    plan = quant.qconv2d_prepare(w, ws, bias, **attrs)
    assert plan.dnnl is not None and plan.dnnl.ready(x.shape)
    ref_plan = quant.qconv2d_prepare(w, ws, bias, **attrs)
    ref_plan.dnnl = None
    extra = []
    if kw.get("residual"):
        shape = quant.qconv2d(x, ref_plan).shape  # (no residual operand: shape only)
        extra = [rng.integers(0, 256, shape).astype(np.uint8)]
        ref = quant.qconv2d(x, ref_plan, *extra)
    else:
        ref = quant.qconv2d(x, ref_plan)
    got = quant.qconv2d(x, plan, *extra)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    parts = plan.dnnl._prims[x.shape]
    if kw.get("cin", 16) >= 64 and _parallel.num_threads() > 1:
        assert len(parts) > 1  # split into parts run in parallel
        assert (parts[0].channels is not None) == (kw.get("cout") == 128)
        # the row parts share one reordered filter
        assert len({p.weights.value for p in parts}) == (len(parts) if parts[0].channels
                                                          else 1)
    if got.dtype == np.float32:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    else:
        diff = np.abs(got.astype(np.int32) - ref.astype(np.int32))
        assert diff.max() <= 1 and np.mean(diff) < 0.01
    if extra:  # the result in the residual's own buffer (as the buffer plan may place it)
        r = extra[0].copy()
        assert quant.qconv2d(x, plan, r, out=r) is r
        np.testing.assert_array_equal(r, got)


@pytest.mark.parametrize("dtype,rows,k,n", [("ui8", 5, 64, 24), ("f32", 5, 64, 24),
                                             ("ui8", 64, 256, 128)])
def test_qmatmul_onednn_matches_reference(dtype: str, rows: int, k: int, n: int) -> None:
    """oneDNN's int8 matmul (the last case is split into row bands) against the NumPy
    reference, and the reference against float arithmetic on the dequantized operands."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2, rows, k)).astype(np.uint8)
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    attrs = dict(x_scale=0.02, x_zero_point=100, x_dtype="ui8", y_scale=0.1, y_zero_point=3,
                 dtype=dtype, activation="relu", alpha=0.0, residual_scale=0.0,
                 residual_zero_point=0, epilogue_operands=(1, 0))
    plan = quant.qmatmul_prepare(w, ws, bias, **attrs)
    ref_plan = quant.qmatmul_prepare(w, ws, bias, **attrs)
    ref_plan.dnnl = None
    got, ref = quant.qmatmul(x, plan), quant.qmatmul(x, ref_plan)
    assert got.shape == (2, rows, n) and got.dtype == ref.dtype
    # the reference against plain float arithmetic on the dequantized operands
    real = np.maximum(((x.astype(np.float64) - 100) * 0.02) @ (w * ws.astype(np.float64))
                      + bias, 0)
    if dtype == "f32":
        np.testing.assert_allclose(ref, real, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    else:
        want = np.clip(np.rint(real / 0.1) + 3, 0, 255)
        assert np.abs(ref.astype(np.int32) - want).max() <= 1
        assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= 1


@st.composite
def _qdq_conv(draw: Any) -> dict[str, Any]:
    c = draw(st.integers(1, 6))
    depthwise = draw(st.booleans()) and c > 1
    groups = c if depthwise else 1
    cout = c * draw(st.integers(1, 2)) if depthwise else draw(st.integers(1, 8))
    k = draw(st.integers(1, 3))
    pads = tuple(draw(st.lists(st.integers(0, k - 1), min_size=4, max_size=4)))
    return {"n": draw(st.integers(1, 2)), "c": c, "hw": draw(st.integers(k + 1, 9)),
            "cout": cout, "k": k, "stride": draw(st.integers(1, 2)), "pads": pads,
            "groups": groups, "bias": draw(st.booleans()), "relu": draw(st.booleans()),
            "x_dtype": draw(st.sampled_from(["ui8", "i8"])),
            "y_dtype": draw(st.sampled_from(["ui8", "i8"])), "seed": draw(st.integers(0, 999)),
            "head": draw(st.booleans())}


@settings(max_examples=12, deadline=None)
@given(_qdq_conv())
def test_fold_quant_matches_the_unfolded_graph(case: dict[str, Any]) -> None:
    """Random QDQ convolutions (shapes, strides, pads, depthwise, bias, relu, u8/s8, and with
    ``head`` a quantized global average pool and flatten after it): the default pipeline
    (folded into qconv2d, qglobal_avg_pool and a reshape of the codes) against the same graph
    compiled without passes (float ops between NumPy quantize/dequantize kernels): within one
    output step."""
    from pytfrt.compiler.api import compile_module
    from pytfrt.compiler.builder import GraphBuilder

    rng = np.random.default_rng(case["seed"])
    c, cout, k, g = case["c"], case["cout"], case["k"], case["groups"]
    np_x, np_y = _NP[case["x_dtype"]], _NP[case["y_dtype"]]

    def build() -> Any:
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (None, c, case["hw"], case["hw"]), "f32")])
        (x,) = fn.arguments
        const = fn.constant
        xs, xz = const(np.float32(0.05)), const(np_x(10 if np_x is np.uint8 else -3))
        xd = fn.op("dequantize_linear", [fn.op("quantize_linear", [x, xs, xz],
                                               dtype=case["x_dtype"]), xs, xz])
        wq = np.random.default_rng(case["seed"]).integers(-127, 128, (cout, c // g, k, k))
        ws = np.random.default_rng(case["seed"] + 1).uniform(0.005, 0.02, cout)
        wd = fn.op("dequantize_linear", [const(wq.astype(np.int8), name="wq"),
                                         const(ws.astype(np.float32), name="ws")], axis=0)
        y = fn.op("conv2d", [xd, wd], layout="NCHW", strides=[case["stride"]] * 2,
                  pads=list(case["pads"]), groups=g)
        if case["bias"]:
            b = np.random.default_rng(case["seed"] + 2).standard_normal((cout, 1, 1))
            y = fn.op("add", [y, const(b.astype(np.float32), name="b")])
        if case["relu"]:
            y = fn.op("relu", [y])
        ys, yz = const(np.float32(0.1)), const(np_y(5 if np_y is np.uint8 else 0))
        y = fn.op("dequantize_linear", [fn.op("quantize_linear", [y, ys, yz],
                                              dtype=case["y_dtype"]), ys, yz])
        if case["head"]:
            # (a pool step larger than the convolution's: a one-step difference there moves
            # the mean by less than one step here)
            ps, pz = const(np.float32(0.2)), const(np_y(3 if np_y is np.uint8 else -2))

            def qdq(v: Any) -> Any:
                return fn.op("dequantize_linear", [fn.op("quantize_linear", [v, ps, pz],
                                                         dtype=case["y_dtype"]), ps, pz])

            y = qdq(fn.op("reshape", [qdq(fn.op("global_avg_pool", [y], layout="NCHW"))],
                          shape=[-1, cout]))
        fn.returns([y])
        return gb.finish()

    folded = build()
    from pytfrt.compiler.passes import default_pipeline

    text = str(default_pipeline(folded))
    assert '"tg.qconv2d"' in text
    if case["head"]:
        assert '"tg.qglobal_avg_pool"' in text and '"tg.global_avg_pool"' not in text
    x = (rng.standard_normal((case["n"], c, case["hw"], case["hw"])) * 3).astype(np.float32)
    got = compile_module(folded, optimize=False)(x)
    ref = compile_module(build(), optimize=False)(x)
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= (0.2 if case["head"] else 0.1) * 1.001


_AVX2_CHILD = """
import numpy as np
from pytfrt.backends.cpu import quant
rng = np.random.default_rng(0)
x = rng.integers(0, 256, (1, 9, 9, 16)).astype(np.uint8)
attrs = dict(layout="NHWC", strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), groups=1,
             x_scale=0.02, x_zero_point=128, x_dtype="ui8", y_scale=0.05, y_zero_point=5,
             dtype="ui8", activation="relu", alpha=0.0, residual_scale=0.0,
             residual_zero_point=0, epilogue_operands=(0, 0))
for bound in (63, 127):
    w = rng.integers(-bound - 1 if bound == 63 else -bound, bound + 1, (3, 3, 16, 32))
    plan = quant.qconv2d_prepare(w.astype(np.int8), np.full(32, 0.004, np.float32), **attrs)
    got = quant.qconv2d(x, plan)
    impl = plan.dnnl.impl(x.shape)
    plan.dnnl = None
    ref = quant.qconv2d(x, plan)
    print(bound, str(impl).split(":")[-1], int(np.abs(got.astype(int) - ref).max()))
"""


def test_int8_kernels_without_vnni_stay_exact() -> None:
    """oneDNN restricted to AVX2 (no VNNI: saturating 16-bit pair sums): 7-bit weights run on
    its AVX2 kernel, full-range weights fall back to the reference; both exact."""
    import os
    import subprocess
    import sys

    from pytfrt.backends.cpu import _dnnl_int8

    if _dnnl_int8.library() is None:
        pytest.skip("oneDNN is not installed")
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2")
    out = subprocess.run([sys.executable, "-c", _AVX2_CHILD], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert out == ["63", "avx2", "0", "127", "None", "0"]
    assert _dnnl_int8.saturation_safe("brgconv:avx512_core_amx")
    assert not _dnnl_int8.saturation_safe("jit_uni_int8:avx2")


@pytest.mark.parametrize("layout,dtype", [("NHWC", np.uint8), ("NCHW", np.uint8),
                                          ("NHWC", np.int8)])
def test_qglobal_avg_pool_matches_onnxruntime(layout: str, dtype: Any) -> None:
    """``qglobal_avg_pool`` against ONNX Runtime's ``QLinearGlobalAveragePool`` (its contrib
    op) and the float composition dequantize -> mean -> quantize: at most one step apart."""
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    shape = (2, 7, 7, 96) if layout == "NHWC" else (2, 96, 7, 7)
    x = rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    xs, xz, ys, yz = 0.05, int(info.min) + 20, 0.02, int(info.min) + 3
    got = quant.qglobal_avg_pool(x, layout=layout, x_scale=xs, x_zero_point=xz, y_scale=ys,
                                 y_zero_point=yz, dtype="ui8" if dtype == np.uint8 else "i8")
    axes = (1, 2) if layout == "NHWC" else (2, 3)
    real = ((x.astype(np.float64) - xz) * xs).mean(axis=axes, keepdims=True)
    want = np.clip(np.rint(real / ys) + yz, info.min, info.max)
    assert got.dtype == dtype and got.shape == want.shape
    assert np.abs(got.astype(np.int32) - want).max() <= 1
    f32 = np.float32
    names = ["x", "xs", "xz", "ys", "yz"]
    vals = [x, np.asarray(xs, f32), np.asarray(xz, dtype), np.asarray(ys, f32),
            np.asarray(yz, dtype)]
    node = helper.make_node("QLinearGlobalAveragePool", names, ["y"], domain="com.microsoft",
                            channels_last=int(layout == "NHWC"))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                       list(v.shape)) for n, v in zip(names, vals, strict=True)],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                       None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (ref,) = sess.run(None, dict(zip(names, vals, strict=True)))
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= 1
    with pytest.raises(quant.OpError, match="rank-4 u8/s8"):
        quant.qglobal_avg_pool(x.astype(np.float32), layout=layout, x_scale=xs,
                               x_zero_point=xz, y_scale=ys, y_zero_point=yz, dtype="ui8")
