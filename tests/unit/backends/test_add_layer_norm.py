"""``-tg-fuse-add-layer-norm`` and ``tg.add_layer_norm``: a pre-norm Transformer block's running
sum built in ONNX (residual adds feeding layer norms, the sum returned too) compiled by pytfrt,
against ONNX Runtime with the batch and sequence changing between calls of one compiled model;
the kernel against a float64 NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu.norm import add_layer_norm
from pytfrt.backends.cpu.ops import OpError

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

D = 24


def _reference(a: np.ndarray, b: np.ndarray, gamma: np.ndarray | None,
               beta: np.ndarray | None, eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
    s = a.astype(np.float64) + b
    y = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return s, y


@pytest.mark.parametrize("rows", [1, 7, 33])
@pytest.mark.parametrize("d", [768, 13])
@pytest.mark.parametrize("params", ["both", "gamma", "beta", "none"])
def test_kernel_matches_numpy(rows: int, d: int, params: str) -> None:
    """Odd row counts and widths, read-only operands, each parameter present or not; the
    rows carry an offset (the statistics are centred)."""
    from pytfrt.backends.cpu.graph_kernels import graph_ops

    rng = np.random.default_rng(rows * 1000 + d)
    a = (rng.standard_normal((1, rows, d)) * 3 + 20).astype(np.float32)
    b = rng.standard_normal((1, rows, d)).astype(np.float32)
    g = rng.standard_normal(d).astype(np.float32)
    bt = rng.standard_normal(d).astype(np.float32)
    for v in (a, b, g, bt):
        v.setflags(write=False)
    gamma = g if params in ("both", "gamma") else None
    beta = bt if params in ("both", "beta") else None
    extra = [p for p in (gamma, beta) if p is not None]
    s, y = graph_ops()["add_layer_norm"](a, b, *extra, axis=-1, epsilon=1e-5,
                                         has_gamma=gamma is not None,
                                         has_beta=beta is not None)
    ws, wy = _reference(a, b, gamma, beta)
    np.testing.assert_array_equal(s, a + b)  # the sum is NumPy's float32 a + b exactly
    np.testing.assert_allclose(y, wy, rtol=1e-5, atol=2e-5 * np.abs(wy).max())
    assert s.dtype == y.dtype == np.float32 and not np.shares_memory(s, y)


def test_kernel_general_path() -> None:
    """Broadcast operands, float64, a strided operand and a normalised axis other than the
    last go through NumPy's add and ``layer_norm``."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 5, 6))
    b = rng.standard_normal((1, 5, 6))
    s, y = add_layer_norm(a, b, None, None, axis=-1, epsilon=1e-3)
    ws, wy = _reference(a, b, None, None, 1e-3)
    np.testing.assert_allclose(s, ws)
    np.testing.assert_allclose(y, wy, rtol=1e-12, atol=1e-12)
    a32 = a.astype(np.float32)[:, :, ::2]
    b32 = np.ascontiguousarray(a32) * 2
    s, y = add_layer_norm(a32, b32, None, None)
    np.testing.assert_allclose(y, _reference(a32, b32, None, None)[1], rtol=1e-5, atol=1e-5)
    s, y = add_layer_norm(a32, b32, None, None, axis=1)  # over dims 1..2
    flat = (a32 + b32).reshape(2, -1).astype(np.float64)
    want = (flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y.reshape(2, -1), want, rtol=1e-5, atol=1e-5)


def test_kernel_errors() -> None:
    a = np.zeros((2, 4), np.float32)
    with pytest.raises(OpError, match="do not broadcast"):
        add_layer_norm(a, np.zeros((3, 4), np.float32), None, None)
    with pytest.raises(OpError, match="share one float dtype"):
        add_layer_norm(a, np.zeros((2, 4)), None, None)
    with pytest.raises(OpError, match="float array"):
        add_layer_norm(a.astype(np.int32), a.astype(np.int32), None, None)
    with pytest.raises(OpError, match="normalised dims"):
        add_layer_norm(a, a, np.ones(3, np.float32), None)
    with pytest.raises(OpError, match="out of range"):
        add_layer_norm(a, a, None, None, axis=2)


def _pre_norm_blocks(seed: int) -> onnx.ModelProto:
    """``h0 = x + pos``; two blocks ``h += ln(h) W`` (the product on the flattened rows, as
    GPT-2's export has it: the reshape back keeps the add out of the GEMM's epilogue);
    ``ln_f(h)`` and ``h`` returned."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(np.array([-1, D], np.int64), "rows")]
    nodes = [helper.make_node("Add", ["x", "pos"], ["h0"])]
    for i in range(3):
        inits += [numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), f"g{i}"),
                  numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), f"b{i}")]
    for i in range(2):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("LayerNormalization", [f"h{i}", f"g{i}", f"b{i}"],
                                   [f"n{i}"], axis=-1, epsilon=1e-5),
                  helper.make_node("Reshape", [f"n{i}", "rows"], [f"r{i}"]),
                  helper.make_node("MatMul", [f"r{i}", f"w{i}"], [f"m{i}"]),
                  helper.make_node("Shape", [f"h{i}"], [f"shape{i}"]),
                  helper.make_node("Reshape", [f"m{i}", f"shape{i}"], [f"f{i}"]),
                  helper.make_node("Add", [f"h{i}", f"f{i}"], [f"h{i + 1}"])]
    nodes += [helper.make_node("LayerNormalization", ["h2", "g2", "b2"], ["y"], axis=-1,
                               epsilon=1e-5),
              helper.make_node("Identity", ["h2"], ["h"])]
    graph = helper.make_graph(
        nodes, "pre_norm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", D]),
         helper.make_tensor_value_info("pos", TensorProto.FLOAT, [1, "s", D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", D]),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, ["b", "s", D])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _check(sess: object, compiled: object, feeds: dict[str, np.ndarray]) -> None:
    """pytfrt's outputs ``y`` and ``h`` within 1e-4 relative of ONNX Runtime's."""
    want = sess.run(None, feeds)  # type: ignore[attr-defined]
    got = compiled(**feeds)  # type: ignore[operator]
    got = [got[k] for k in ("y", "h")] if isinstance(got, dict) else list(got)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return _pre_norm_blocks(11)


def test_adds_and_norms_fused(model: onnx.ModelProto) -> None:
    from pytfrt.compiler.frontends.onnx import import_onnx
    from pytfrt.compiler.passes import default_pipeline

    names = [op.name for op in default_pipeline(import_onnx(model)).function("main").body.block.ops]
    assert names.count("tg.add_layer_norm") == 3
    assert "tg.layer_norm" not in names and "tg.add" not in names


def test_matches_onnxruntime(model: onnx.ModelProto) -> None:
    """One compiled model, the batch and the sequence changing between calls (batch 2: the
    broadcast position row takes the general path)."""
    import onnxruntime as ort

    import pytfrt

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = pytfrt.compile(model)
    for batch, seq in ((1, 5), (2, 9), (1, 7), (1, 5)):
        rng = np.random.default_rng(batch * 100 + seq)
        x = rng.standard_normal((batch, seq, D)).astype(np.float32)
        pos = rng.standard_normal((1, seq, D)).astype(np.float32)
        _check(sess, compiled, {"x": x, "pos": pos})


def _written_out(pow_form: bool) -> onnx.ModelProto:
    """An opset-13 layer norm (no ``LayerNormalization``): ReduceMean, Sub, Pow 2 (or the
    product with itself), ReduceMean, Add eps, Sqrt, Div, Mul gamma, Add beta; the sum with a
    residual before it, as a pre-norm block has it."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "g"),
             numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    nodes = [helper.make_node("Add", ["x", "r"], ["h"]),
             helper.make_node("ReduceMean", ["h"], ["m"], axes=[-1], keepdims=1),
             helper.make_node("Sub", ["h", "m"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["p"]) if pow_form
             else helper.make_node("Mul", ["d", "d"], ["p"]),
             helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["v", "eps"], ["e"]),
             helper.make_node("Sqrt", ["e"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]),
             helper.make_node("Mul", ["n", "g"], ["ng"]),
             helper.make_node("Add", ["ng", "b"], ["y"])]
    graph = helper.make_graph(
        nodes, "written_out",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", D]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, ["b", "s", D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", D]),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, ["b", "s", D])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("pow_form", [True, False], ids=["pow", "mul"])
def test_written_out_layer_norm(pow_form: bool) -> None:
    """``-tg-fuse-layer-norm`` makes it one ``layer_norm``, which ``-tg-fuse-add-layer-norm``
    joins to the residual sum; against ONNX Runtime, rows with a large offset."""
    import onnxruntime as ort

    import pytfrt
    from pytfrt.compiler.frontends.onnx import import_onnx
    from pytfrt.compiler.passes import default_pipeline

    model = _written_out(pow_form)
    names = [op.name for op in default_pipeline(import_onnx(model)).function("main").body.block.ops]
    assert names.count("tg.add_layer_norm") == 1
    assert not {"tg.reduce_mean", "tg.sqrt", "tg.div", "tg.fused_elementwise"} & set(names)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = pytfrt.compile(model)
    for batch, seq in ((1, 7), (3, 2)):
        rng = np.random.default_rng(seq)
        x = (rng.standard_normal((batch, seq, D)) * 4 + 10).astype(np.float32)
        r = rng.standard_normal((batch, seq, D)).astype(np.float32)
        _check(sess, compiled, {"x": x, "r": r})
