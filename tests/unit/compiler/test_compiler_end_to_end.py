"""End-to-end: GraphBuilder models compiled and run against NumPy references.

The oracle is a plain NumPy forward pass written independently of the compute layer
(convolution by explicit loops over the kernel window, pooling by slicing).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytfrt.compiler import GraphBuilder, GraphError
from pytfrt.compiler.api import compile_module
from pytfrt.model import InputError

RNG = np.random.default_rng(1234)


def _mlp_weights() -> tuple[list[np.ndarray], list[np.ndarray]]:
    ws = [RNG.standard_normal((a, b)).astype(np.float32) * 0.05
          for a, b in [(784, 512), (512, 512), (512, 10)]]
    bs = [RNG.standard_normal(b).astype(np.float32) for b in (512, 512, 10)]
    return ws, bs


def _mlp(ws: list[np.ndarray], bs: list[np.ndarray]):  # type: ignore[no-untyped-def]
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 784), "f32")])
    (h,) = fn.arguments
    for i in range(3):
        w = fn.constant(ws[i], name=f"dense{i}/kernel")
        b = fn.constant(bs[i], name=f"dense{i}/bias")
        h = fn.op("add", [fn.op("matmul", [h, w]), b])
        if i < 2:
            h = fn.op("relu", [h])
    fn.returns([h], names=["logits"])
    return gb.finish()


def _mlp_ref(x: np.ndarray, ws: list[np.ndarray], bs: list[np.ndarray]) -> np.ndarray:
    h = x.astype(np.float64)
    for i in range(3):
        h = h @ ws[i].astype(np.float64) + bs[i]
        if i < 2:
            h = np.maximum(h, 0)
    return h


def test_mlp_matches_numpy() -> None:
    ws, bs = _mlp_weights()
    gm = _mlp(ws, bs)
    assert gm.signature.inputs[0].shape == (None, 784)
    assert gm.signature.outputs[0].shape == (None, 10)
    model = compile_module(gm)
    for batch in (1, 3):
        x = RNG.standard_normal((batch, 784)).astype(np.float32)
        y = model(x)
        assert y.dtype == np.float32 and y.shape == (batch, 10)
        np.testing.assert_allclose(y, _mlp_ref(x, ws, bs), rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(model(x=x), y)


def test_call_async_returns_the_same_result() -> None:
    ws, bs = _mlp_weights()
    model = compile_module(_mlp(ws, bs))
    x = RNG.standard_normal((2, 784)).astype(np.float32)
    av = model.call_async(x)
    model.host.await_values([av])
    np.testing.assert_array_equal(av.get(), model(x))


def test_bad_inputs_are_rejected_with_the_input_named() -> None:
    ws, bs = _mlp_weights()
    model = compile_module(_mlp(ws, bs))
    with pytest.raises(InputError, match=r"'x'\) must have dtype float32"):
        model(np.zeros((1, 784), np.float64))
    with pytest.raises(InputError, match=r"'x'\) must have shape \[\?, 784\]"):
        model(np.zeros((1, 783), np.float32))
    with pytest.raises(InputError, match="takes 1 inputs"):
        model()
    with pytest.raises(InputError, match="unknown input name 'y'"):
        model(y=np.zeros((1, 784), np.float32))


def _conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pads: tuple[int, int, int, int]
              ) -> np.ndarray:
    """NHWC x HWIO convolution by explicit accumulation over the window (float64)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (pads[0], pads[1]), (pads[2], pads[3]), (0, 0)))
    kh, kw, _, cout = w.shape
    n, h, wd, _ = x.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, oh, ow, cout))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :]
            out += patch @ w[i, j].astype(np.float64)
    return out


def test_cnn_matches_numpy() -> None:
    w1 = RNG.standard_normal((3, 3, 3, 8)).astype(np.float32) * 0.2
    b1 = RNG.standard_normal(8).astype(np.float32)
    w2 = RNG.standard_normal((3, 3, 8, 16)).astype(np.float32) * 0.2
    wd = RNG.standard_normal((16, 5)).astype(np.float32)
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("image", (None, 12, 12, 3), "f32")])
    (x,) = fn.arguments
    c1 = fn.op("conv2d", [x, fn.constant(w1, name="c1/w")], layout="NHWC", strides=[1, 1],
               pads=[1, 1, 1, 1])
    assert c1.shape == (None, 12, 12, 8)
    h = fn.op("relu", [fn.op("add", [c1, fn.constant(b1, name="c1/b")])])
    h = fn.op("max_pool2d", [h], layout="NHWC", ksize=[2, 2], strides=[2, 2])
    assert h.shape == (None, 6, 6, 8)
    h = fn.op("conv2d", [h, fn.constant(w2, name="c2/w")], layout="NHWC", strides=[2, 2],
              pads=[0, 1, 0, 1])
    assert h.shape == (None, 3, 3, 16)
    h = fn.op("global_avg_pool", [fn.op("relu", [h])], layout="NHWC")
    h = fn.op("reshape", [h], shape=[-1, 16])
    logits = fn.op("matmul", [h, fn.constant(wd, name="dense/w")])
    probs = fn.op("softmax", [logits], axis=-1)
    fn.returns([logits, probs], names=["logits", "probs"], structure="dict")
    model = compile_module(gb.finish())

    x = RNG.standard_normal((2, 12, 12, 3)).astype(np.float32)
    r = np.maximum(_conv_ref(x, w1, 1, (1, 1, 1, 1)) + b1, 0)
    r = r.reshape(2, 6, 2, 6, 2, 8).max(axis=(2, 4))
    r = np.maximum(_conv_ref(r, w2, 2, (0, 1, 0, 1)), 0).mean(axis=(1, 2))
    ref_logits = r @ wd
    e = np.exp(ref_logits - ref_logits.max(axis=1, keepdims=True))
    out = model(x)
    assert set(out) == {"logits", "probs"}
    np.testing.assert_allclose(out["logits"], ref_logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["probs"], e / e.sum(axis=1, keepdims=True), rtol=1e-4,
                               atol=1e-5)


def test_builder_rejects_bad_ops() -> None:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (2, 3), "f32"), ("y", (4, 3), "f32")])
    x, y = fn.arguments
    with pytest.raises(GraphError, match="tg.add: operand shapes"):
        fn.op("add", [x, y])
    with pytest.raises(GraphError, match="tg.matmul: contraction dimensions differ: 3 and 4"):
        fn.op("matmul", [x, y])
    with pytest.raises(GraphError, match="unknown attribute 'axes'"):
        fn.op("softmax", [x], axes=[1])
    with pytest.raises(GraphError, match="unknown op 'tg.frobnicate'"):
        fn.op("frobnicate", [x])
    with pytest.raises(GraphError, match="missing required attribute 'perm'"):
        fn.op("transpose", [x])


def test_a_missing_weight_is_an_error_unless_the_module_came_from_text(tmp_path: Path) -> None:
    from pytfrt.compiler.api import compile as compile_any

    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (2,), "f32")])
    fn.returns([fn.op("add", [fn.arguments[0], fn.constant(np.ones(2, np.float32), name="w")])])
    gm = gb.finish()
    text = str(gm)
    assert 'weight = "w"' in text
    gm.weights.clear()
    with pytest.raises(GraphError, match="weight 'w' is not in the module's weights"):
        compile_module(gm)
    (tmp_path / "m.mlir").write_text(text)  # a .mlir file holds no weights: zeros
    np.testing.assert_array_equal(compile_any(tmp_path / "m.mlir")(np.ones(2, np.float32)),
                                  [1, 1])


def test_a_kernel_failure_is_a_model_error_naming_the_op() -> None:
    from pytfrt.model import ModelError

    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 4), "f32"), ("shape", (2,), "i64")])
    x, shape = fn.arguments
    fn.returns([fn.op("reshape", [x, shape])])
    model = compile_module(gb.finish())
    np.testing.assert_array_equal(model(np.ones((2, 4), np.float32), np.array([4, 2])),
                                  np.ones((4, 2)))
    with pytest.raises(ModelError, match=r"reshape: cannot reshape \[3, 4\] to \[5, -1\]"):
        model(np.ones((3, 4), np.float32), np.array([5, -1]))
    av = model.call_async(np.ones((3, 4), np.float32), np.array([5, -1]))
    model.host.await_values([av])
    assert av.is_error() and "cannot reshape" in av.error.message


def test_same_padding_with_dynamic_spatial_dims() -> None:
    w = RNG.standard_normal((3, 3, 2, 4)).astype(np.float32)
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, None, None, 2), "f32")])
    (x,) = fn.arguments
    y = fn.op("conv2d", [x, fn.constant(w, name="w")], layout="NHWC", strides=[2, 2],
              padding="SAME")
    assert y.shape == (None, None, None, 4)
    p = fn.op("max_pool2d", [y], layout="NHWC", ksize=[2, 2], strides=[2, 2], padding="SAME")
    fn.returns([y, p])
    model = compile_module(gb.finish())
    for h, wd in ((7, 5), (8, 8)):
        xv = RNG.standard_normal((1, h, wd, 2)).astype(np.float32)
        # TF's SAME: output ceil(in / stride); total padding split with the extra at the end
        oh, ow = -(-h // 2), -(-wd // 2)
        ph, pw = max((oh - 1) * 2 + 3 - h, 0), max((ow - 1) * 2 + 3 - wd, 0)
        ref = _conv_ref(xv, w, 2, (ph // 2, ph - ph // 2, pw // 2, pw - pw // 2))
        got, pooled = model(xv)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        ph2, pw2 = oh % 2, ow % 2  # SAME pooling pads the end with -inf (ignored)
        padded = np.pad(ref, ((0, 0), (0, ph2), (0, pw2), (0, 0)), constant_values=-np.inf)
        n2h, n2w = padded.shape[1] // 2, padded.shape[2] // 2
        want = padded.reshape(1, n2h, 2, n2w, 2, 4).max(axis=(2, 4))
        np.testing.assert_allclose(pooled, want, rtol=1e-4, atol=1e-4)
