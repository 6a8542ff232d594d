"""max_pool2d through oneDNN's pooling primitive against a NumPy window-loop reference:
layouts, kernel sizes, strides, asymmetric pads, dilations, ceil mode, threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _dnnl_conv, _dnnl_pool, pooling

pytestmark = pytest.mark.skipif(
    not _dnnl_conv.available(), reason="oneDNN library absent (or PYTFRT_CONV=builtin)"
)


def reference(x, layout, k, s, d, pads, oh, ow):
    """Max over each window's in-bounds taps, one output element at a time (NHWC inside)."""
    xn = x if layout == "NHWC" else x.transpose(0, 2, 3, 1)
    n, h, w, c = xn.shape
    y = np.full((n, oh, ow, c), -np.inf, np.float32)
    for a in range(oh):
        for b in range(ow):
            for i in range(k[0]):
                r = a * s[0] + i * d[0] - pads[0]
                for j in range(k[1]):
                    q = b * s[1] + j * d[1] - pads[2]
                    if 0 <= r < h and 0 <= q < w:
                        y[:, a, b] = np.maximum(y[:, a, b], xn[:, r, q])
    return y if layout == "NHWC" else y.transpose(0, 3, 1, 2)


@settings(max_examples=60, deadline=None)
@given(
    layout=st.sampled_from(["NHWC", "NCHW"]),
    n=st.integers(1, 2),
    c=st.integers(1, 20),
    k=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    raw_pads=st.tuples(*(st.integers(0, 3) for _ in range(4))),
    hw=st.tuples(st.integers(4, 13), st.integers(4, 13)),
    ceil=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_max_pool_matches_reference(layout, n, c, k, s, d, raw_pads, hw, ceil, seed):
    ext = (d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1)
    pads = tuple(min(p, ext[i // 2] - 1) for i, p in enumerate(raw_pads))
    h, w = max(hw[0], ext[0]), max(hw[1], ext[1])
    rng = np.random.default_rng(seed)
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    x = rng.standard_normal(shape).astype(np.float32)
    y = pooling.max_pool2d(
        x, layout=layout, ksize=k, strides=s, pads=pads, dilations=d, ceil_mode=ceil
    )
    oh, ow = (y.shape[1], y.shape[2]) if layout == "NHWC" else (y.shape[2], y.shape[3])
    np.testing.assert_array_equal(y, reference(x, layout, k, s, d, pads, oh, ow))


def test_resnet_pool_runs_in_onednn_from_threads():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, 112, 112, 64)).astype(np.float32) for _ in range(6)]
    before = sum(p is not None for p in _dnnl_pool._prims.values())

    def run(x):
        out = np.empty((1, 56, 56, 64), np.float32)
        return pooling.max_pool2d(
            x, layout="NHWC", ksize=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), out=out
        )

    with ThreadPoolExecutor(3) as pool:
        outs = list(pool.map(run, xs))
    assert sum(p is not None for p in _dnnl_pool._prims.values()) >= max(before, 1)
    for x, y in zip(xs, outs, strict=True):
        ref = reference(x, "NHWC", (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 56, 56)
        np.testing.assert_array_equal(y, ref)
