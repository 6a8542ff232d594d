"""oneDNN convolutions read a separate residual through a binary-add post-op (no copy into the
output first); checked against NumPy, with the convolution split into parts, and against the
sum post-op path (residual in place)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _dnnl_conv
from pytfrt.backends.cpu.conv import conv2d, plan_conv2d

pytestmark = pytest.mark.skipif(not _dnnl_conv.available(), reason="oneDNN not installed")


def _ref(x: np.ndarray, w: np.ndarray, pad: int, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    kh, kw, _, cout = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    n, hp, wp, _ = xp.shape
    oh, ow = hp - kh + 1, wp - kw + 1
    y = np.zeros((n, oh, ow, cout))
    for i in range(kh):
        for j in range(kw):
            y += xp[:, i:i + oh, j:j + ow, :] @ w[i, j].astype(np.float64)
    return np.maximum(y + b + r, 0)


def _assert_close(got: np.ndarray, ref: np.ndarray) -> None:
    """Within 1e-4 relative, and the absolute error within 2e-5 of the result's largest
    magnitude: a 3x3 convolution of 32-512 channels on a 7x7 or larger output may take the
    Winograd F(4x4) path, whose float32 transforms err by up to that much of the output's scale
    (tests/unit/test_cpu_winograd_native.py), more than 1e-4 on its small elements."""
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=max(1e-4, 2e-5 * np.abs(ref).max()))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 2), h=st.integers(1, 30), cin=st.sampled_from([8, 16, 64]),
       cout=st.sampled_from([16, 64, 96]), k=st.sampled_from([1, 3]),
       seed=st.integers(0, 2**31))
@example(n=2, h=13, cin=64, cout=64, k=3, seed=0)  # the Winograd F(4x4) path
def test_separate_residual_matches_numpy_and_the_in_place_path(n, h, cin, cout, k, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, k, cin, cout)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    pad = k // 2
    plan = plan_conv2d(w, layout="NHWC", pads=(pad,) * 4, bias=b, activation="relu")
    x = rng.standard_normal((n, h, h + 3, cin)).astype(np.float32)
    r = rng.standard_normal((n, h, h + 3, cout)).astype(np.float32)
    r_before = r.copy()
    ref = _ref(x, w, pad, b, r)
    y = conv2d(plan, x, r)
    _assert_close(y, ref)
    np.testing.assert_array_equal(r, r_before)  # the residual is read, never written
    assert plan.dnnl is not None
    impl = plan.dnnl.impl(x.shape)
    prims = plan.dnnl._get(x.shape, _dnnl_conv.NO_RESIDUAL)
    if (impl is not None and impl.startswith(_dnnl_conv.BINARY_RESIDUAL_IMPLS)
            and prims[0].channels is None):  # channel parts take the residual in place
        assert plan.dnnl.ready(x.shape, _dnnl_conv.RESIDUAL_OPERAND)
    inplace = r.copy()
    _assert_close(conv2d(plan, x, inplace, out=inplace), ref)


def test_resnet_block_tail_is_split_and_reads_the_residual_in_place():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((1, 1, 64, 256)).astype(np.float32) * 0.1
    b = np.zeros(256, np.float32)
    plan = plan_conv2d(w, layout="NHWC", bias=b, activation="relu")
    x = rng.standard_normal((1, 56, 56, 64)).astype(np.float32)
    r = rng.standard_normal((1, 56, 56, 256)).astype(np.float32)
    assert plan.dnnl is not None
    assert plan.dnnl.ready(x.shape, _dnnl_conv.RESIDUAL_OPERAND)
    out = np.empty_like(r)
    np.testing.assert_allclose(conv2d(plan, x, r, out=out), _ref(x, w, 0, b, r), rtol=1e-4,
                               atol=1e-4)
