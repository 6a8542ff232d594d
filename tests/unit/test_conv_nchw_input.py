"""``conv2d {layout = "NCHW>NHWC"}`` (:class:`pytfrt.backends.cpu.conv.StemConv`) against NumPy
(the NHWC convolution of the transposed image, computed here by explicit sums), and
``-tg-conv-nchw-input`` in a compiled ONNX model against ONNX Runtime, on one thread (where the
pass rewrites) and on two (where it does not)."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu import _dnnl_conv, _parallel
from pytfrt.backends.cpu.conv import StemConv
from pytfrt.backends.cpu.ops import OpError

TOL = dict(rtol=1e-4, atol=1e-5)


def _reference(x, w, b, stride, pad):
    """hard_swish(conv(x, w) + b): NCHW ``x``, HWIO ``w``, NHWC result, by sums over taps."""
    n, c, h, wd = x.shape
    kh, kw, _, cout = w.shape
    xp = np.pad(x.transpose(0, 2, 3, 1).astype(np.float64),
                ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, oh, ow, cout))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :]
            y += patch @ w[i, j].astype(np.float64)
    y += b
    return (y * np.clip(y + 3.0, 0.0, 6.0) / 6.0).astype(np.float32)


def _stem(w, b, stride, pad):
    return StemConv(w, b, strides=(stride, stride), dilations=(1, 1), pads=(pad,) * 4,
                    groups=1, activation="hard_swish", alpha=0.0)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,cout,k,stride,pad", [
    ((1, 3, 224, 224), 16, 3, 2, 1),  # MobileNetV3's stem
    ((2, 3, 17, 23), 16, 3, 2, 1),    # odd sizes, two images
    ((1, 3, 9, 8), 16, 5, 1, 2),
    ((1, 4, 11, 7), 32, 3, 1, 1),     # 32 channels: no oneDNN kernel from NCHW, the fallback
])
def test_stem_conv_matches_numpy(monkeypatch, threads, shape, cout, k, stride, pad):
    monkeypatch.setattr(_parallel, "num_threads", lambda: threads)
    rng = np.random.default_rng(sum(shape) + cout)
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((k, k, shape[1], cout)) * 0.3).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    stem = _stem(w, b, stride, pad)
    direct = threads == 1 and cout == 16 and _dnnl_conv.available()
    assert (stem.dnnl is not None) == direct
    want = _reference(x, w, b, stride, pad)
    run = stem.runner()
    for _ in range(2):  # the second call: the launcher's short path
        out = np.full(want.shape, np.nan, np.float32)
        assert run(x, None, out) is out
        np.testing.assert_allclose(out, want, **TOL)
    np.testing.assert_allclose(stem(x), want, **TOL)
    if direct:
        assert stem.dnnl.impl(x.shape).startswith("jit")  # never oneDNN's reference kernel
    # a strided view of the image, and a non-contiguous out
    xs = np.asfortranarray(x)
    out2 = np.zeros((*want.shape[:-1], 2 * cout), np.float32)[..., ::2]
    np.testing.assert_allclose(stem(xs, out=out2), want, **TOL)
    x_before = x.copy()
    run(x, None, None)
    np.testing.assert_array_equal(x, x_before)  # the input is never written


def test_stem_conv_rejects_bad_operands(monkeypatch):
    monkeypatch.setattr(_parallel, "num_threads", lambda: 1)
    w = np.ones((3, 3, 3, 16), np.float32)
    stem = _stem(w, None, 2, 1)
    with pytest.raises(OpError, match="rank-4"):
        stem(np.ones((3, 8, 8), np.float32))
    with pytest.raises(OpError, match="channels"):
        stem(np.ones((1, 4, 8, 8), np.float32))
    with pytest.raises(OpError, match="out"):
        stem(np.ones((1, 3, 8, 8), np.float32), out=np.empty((1, 3, 3, 16), np.float32))
    with pytest.raises(OpError, match="no residual"):
        stem.runner()(np.ones((1, 3, 8, 8), np.float32), np.ones((1, 4, 4, 16), np.float32))
    buf = np.ones(512, np.float32)
    with pytest.raises(OpError, match="overlap"):
        stem(buf[:192].reshape(1, 3, 8, 8), out=buf[128:384].reshape(1, 4, 4, 16))


def _onnx_stem_model(cout: int):
    """Conv 3 -> cout (3x3, stride 2, pad 1) + HardSwish, then a 1x1 conv to 8 channels."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(cout)
    inits = [
        numpy_helper.from_array((rng.standard_normal((cout, 3, 3, 3)) * 0.3).astype(np.float32),
                                "w0"),
        numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b0"),
        numpy_helper.from_array((rng.standard_normal((8, cout, 1, 1)) * 0.3).astype(np.float32),
                                "w1"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1] * 4, strides=[2, 2],
                         kernel_shape=[3, 3]),
        helper.make_node("HardSwish", ["c0"], ["h0"]),
        helper.make_node("Conv", ["h0", "w1"], ["y"], kernel_shape=[1, 1]),
    ]
    graph = helper.make_graph(
        nodes, "stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 19, 21])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.skipif(not _dnnl_conv.available(), reason="needs oneDNN")
@pytest.mark.parametrize("threads,cout,rewritten", [(1, 16, True), (2, 16, False),
                                                    (1, 24, False)])
def test_compiled_model_matches_onnxruntime(tmp_path, monkeypatch, threads, cout, rewritten):
    ort = pytest.importorskip("onnxruntime")
    import onnx

    import pytfrt
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.passes import DEFAULT_PIPELINE, run_passes

    monkeypatch.setattr(_parallel, "num_threads", lambda: threads)
    path = tmp_path / "stem.onnx"
    onnx.save(_onnx_stem_model(cout), str(path))
    text = str(run_passes(to_graph(str(path)), DEFAULT_PIPELINE).module)
    assert ('layout = "NCHW>NHWC"' in text) == rewritten
    # the input's transpose goes; the result's back to NCHW stays
    assert text.count('"tg.transpose"') == (1 if rewritten else 2)
    model = pytfrt.compile(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (1, 2, 1):
        x = np.random.default_rng(n).standard_normal((n, 3, 19, 21)).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        got = model(x=x)
        got = list(got.values())[0] if isinstance(got, dict) else got
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
