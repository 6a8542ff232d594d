"""``-tg-fold-pad`` end to end: compiled models with the pad folded compute what NumPy computes
for the explicit zero pad followed by the conv / max pool (and the pad is gone)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.compiler import GraphBuilder
from pytfrt.compiler.api import compile_module
from pytfrt.compiler.passes import default_pipeline


def _conv_ref(xp: np.ndarray, w: np.ndarray, stride: int) -> np.ndarray:
    kh, kw, _, cout = w.shape
    n, hp, wp, _ = xp.shape
    oh, ow = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    y = np.zeros((n, oh, ow, cout))
    for i in range(kh):
        for j in range(kw):
            y += xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :] @ w[i, j]
    return y


def _pool_ref(xp: np.ndarray, k: int, stride: int) -> np.ndarray:
    n, hp, wp, c = xp.shape
    oh, ow = (hp - k) // stride + 1, (wp - k) // stride + 1
    y = np.full((n, oh, ow, c), -np.inf)
    for i in range(k):
        for j in range(k):
            y = np.maximum(y, xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :])
    return y


@settings(max_examples=15, deadline=None)
@given(h=st.integers(3, 9), w=st.integers(3, 9), pads=st.lists(st.integers(0, 3), min_size=4,
       max_size=4), k=st.integers(1, 3), stride=st.integers(1, 2), seed=st.integers(0, 2**31))
def test_pad_then_conv_and_relu_pool(h, w, pads, k, stride, seed):
    rng = np.random.default_rng(seed)
    cin, cout = 3, 4
    x = rng.standard_normal((2, h, w, cin)).astype(np.float32)
    wt = rng.standard_normal((k, k, cin, cout)).astype(np.float32)
    pt, pb, pl, pr = pads
    all_pads = [0, pt, pl, 0, 0, pb, pr, 0]

    def build():
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (None, h, w, cin), "f32")])
        (xv,) = fn.arguments
        p = fn.op("pad", [xv], pads=all_pads)
        y = fn.op("conv2d", [p, fn.constant(wt, name="w")], layout="NHWC",
                  strides=[stride, stride])
        r = fn.op("relu", [y])
        q = fn.op("pad", [r], pads=[0, 1, 1, 0, 0, 1, 1, 0])
        z = fn.op("max_pool2d", [q], layout="NHWC", ksize=[2, 2], strides=[1, 1])
        fn.returns([y, z])
        return gb.finish()

    gm = default_pipeline(build())
    names = [op.name for f in gm.module.body.block.ops for op in f.body.block.ops]
    assert "tg.pad" not in names
    y, z = compile_module(build())(x)
    xp = np.pad(x.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    y_ref = _conv_ref(xp, wt.astype(np.float64), stride)
    z_ref = _pool_ref(np.pad(np.maximum(y_ref, 0), ((0, 0), (1, 1), (1, 1), (0, 0))), 2, 1)
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(z, z_ref, rtol=1e-4, atol=1e-4)
