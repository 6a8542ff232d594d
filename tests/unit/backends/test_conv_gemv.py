"""1x1 convolutions of 1x1 images (squeeze-and-excite) take the small-product path of
``conv.conv2d``; checked against NumPy for random shapes, layouts, epilogues and aliasing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu.conv import conv2d, plan_conv2d
from pytfrt.backends.cpu.ops import OpError

ACTS = {
    "none": lambda v: v,
    "relu": lambda v: np.maximum(v, 0),
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "hard_swish": lambda v: v * np.clip(v + 3, 0, 6) / 6,
}


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 4), cin=st.integers(1, 300), cout=st.integers(1, 300),
       nchw=st.booleans(), act=st.sampled_from(sorted(ACTS)), bias=st.booleans(),
       res=st.sampled_from(["none", "separate", "in_place"]),
       f64=st.booleans(), seed=st.integers(0, 2**31))
def test_squeeze_excite_conv_matches_numpy(n, cin, cout, nchw, act, bias, res, f64, seed):
    rng = np.random.default_rng(seed)
    dt = np.float64 if f64 else np.float32
    layout = "NCHW" if nchw else "NHWC"
    w2 = rng.standard_normal((cin, cout)).astype(dt)  # (cin, cout)
    w = w2.reshape(1, 1, cin, cout) if not nchw else np.ascontiguousarray(
        w2.T.reshape(cout, cin, 1, 1))
    b = rng.standard_normal(cout).astype(dt) if bias else None
    plan = plan_conv2d(w, layout=layout, bias=b, activation=act)
    assert plan.gemv_ok
    shape_in = (n, 1, 1, cin) if not nchw else (n, cin, 1, 1)
    shape_out = (n, 1, 1, cout) if not nchw else (n, cout, 1, 1)
    x = rng.standard_normal(shape_in).astype(dt)
    r = rng.standard_normal(shape_out).astype(dt) if res != "none" else None
    ref = x.reshape(n, cin).astype(np.float64) @ w2.astype(np.float64)
    if b is not None:
        ref = ref + b
    if r is not None:
        ref = ref + r.reshape(n, cout)
    ref = ACTS[act](ref).reshape(shape_out)
    if res == "in_place":
        assert r is not None
        y = conv2d(plan, x, r, out=r)
        assert y is r
    else:
        y = conv2d(plan, x, r)
    tol = 1e-10 if f64 else 2e-4
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * max(1.0, np.sqrt(cin)))


def test_errors_still_come_from_the_general_path():
    plan = plan_conv2d(np.ones((1, 1, 4, 2), np.float32), layout="NHWC")
    with pytest.raises(OpError, match="channels"):
        conv2d(plan, np.ones((1, 1, 1, 3), np.float32))
    with pytest.raises(OpError, match="residual"):
        conv2d(plan, np.ones((1, 1, 1, 4), np.float32), np.ones((1, 1, 1, 3), np.float32))
    with pytest.raises(OpError, match="out"):
        conv2d(plan, np.ones((1, 1, 1, 4), np.float32), out=np.ones((1, 1, 1, 3), np.float32))


def test_a_bigger_image_still_uses_the_convolution():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((1, 1, 8, 5)).astype(np.float32)
    plan = plan_conv2d(w, layout="NHWC")
    x = rng.standard_normal((2, 3, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(conv2d(plan, x), x @ w[0, 0], rtol=1e-5, atol=1e-5)
    x1 = x[:, :1, :1, :]  # a 1x1 strided view of the same input
    np.testing.assert_allclose(conv2d(plan, x1), x1 @ w[0, 0], rtol=1e-5, atol=1e-5)
