"""``-tg-merge-matmuls`` and ``tg.columns``: a BERT self-attention layer built in ONNX (three
projections with biases, heads, scaled scores, a padding mask, softmax) compiled by pytfrt with
its projections packed into one GEMM, against ONNX Runtime; the view kernel against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu.attention import columns
from pytfrt.backends.cpu.ops import OpError

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

HEADS, DEPTH = 3, 4
D = HEADS * DEPTH


def _bert_layer(seed: int, packed: bool = False) -> onnx.ModelProto:
    """``out = attention(x Wq + bq, x Wk + bk, x Wv + bv, mask) Wo`` as torch exports BERT's;
    ``packed``: one product split into q, k, v along the last axis, as GPT-2's."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(np.array([0, 0, HEADS, DEPTH], np.int64), "heads"),
             numpy_helper.from_array(np.array([0, 0, D], np.int64), "flat"),
             numpy_helper.from_array(np.array(np.sqrt(DEPTH), np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal((D, D)).astype(np.float32), "wo")]
    nodes = []
    if packed:
        inits += [numpy_helper.from_array(rng.standard_normal((D, 3 * D)).astype(np.float32),
                                          "w"),
                  numpy_helper.from_array(rng.standard_normal(3 * D).astype(np.float32), "b")]
        nodes += [helper.make_node("MatMul", ["x", "w"], ["z0"]),
                  helper.make_node("Add", ["z0", "b"], ["z"]),
                  helper.make_node("Split", ["z"], ["q1", "k1", "v1"], axis=-1, num_outputs=3)]
    for p in "qkv":
        if not packed:
            inits += [
                numpy_helper.from_array(rng.standard_normal((D, D)).astype(np.float32), f"w{p}"),
                numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), f"b{p}")]
            nodes += [helper.make_node("MatMul", ["x", f"w{p}"], [f"{p}0"]),
                      helper.make_node("Add", [f"b{p}", f"{p}0"], [f"{p}1"])]
        nodes += [helper.make_node("Reshape", [f"{p}1", "heads"], [f"{p}2"]),
                  helper.make_node("Transpose", [f"{p}2"], [f"{p}t"],
                                   perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", ["qt", "kt"], ["s"]),
              helper.make_node("Div", ["s", "scale"], ["s1"]),
              helper.make_node("Add", ["s1", "mask"], ["s2"]),
              helper.make_node("Softmax", ["s2"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vt"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ot", "flat"], ["of"]),
              helper.make_node("MatMul", ["of", "wo"], ["y"])]
    graph = helper.make_graph(
        nodes, "bert_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", D]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["b", 1, 1, "s"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", D])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.fixture(scope="module", params=[False, True], ids=["separate", "split"])
def model(request: pytest.FixtureRequest) -> onnx.ModelProto:
    return _bert_layer(7, packed=request.param)


def test_projections_become_one_gemm(model: onnx.ModelProto) -> None:
    from pytfrt.compiler.frontends.onnx import import_onnx
    from pytfrt.compiler.passes import default_pipeline

    gm = default_pipeline(import_onnx(model))
    names = [op.name for op in gm.function("main").body.block.ops]
    assert names.count("tg.columns") == 3
    assert "tg.split" not in names
    assert names.count("tg.matmul") == 2  # the packed projections and the output's
    assert names.count("tg.attention") == 1


@pytest.mark.parametrize(("batch", "seq"), [(1, 5), (2, 9)])
def test_matches_onnxruntime(model: onnx.ModelProto, batch: int, seq: int) -> None:
    """Batch and sequence dynamic, a padding mask; the same model in ONNX Runtime is the
    oracle."""
    import onnxruntime as ort

    import pytfrt

    rng = np.random.default_rng(batch * 100 + seq)
    x = rng.standard_normal((batch, seq, D)).astype(np.float32)
    mask = np.zeros((batch, 1, 1, seq), np.float32)
    mask[-1, ..., seq - 2:] = np.float32(-3.4028235e38)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x, "mask": mask})[0]
    got = np.asarray(pytfrt.compile(model)(x=x, mask=mask))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_columns_is_a_view() -> None:
    x = np.arange(2 * 3 * 12, dtype=np.float32).reshape(2, 3, 12)
    x.setflags(write=False)
    y = columns(x, start=4, size=5)
    np.testing.assert_array_equal(y, x[..., 4:9])
    assert np.shares_memory(y, x) and y.strides == x.strides
    with pytest.raises(OpError, match="outside the last axis"):
        columns(x, start=8, size=5)
    with pytest.raises(OpError, match="rank >= 1"):
        columns(np.float32(1.0), start=0, size=1)
