"""max_pool2d through oneDNN's pooling primitive against a NumPy window-loop reference:
layouts, kernel sizes, strides, asymmetric pads, dilations, ceil mode, threads, float32 and
the u8/s8 codes of int8 models."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _dnnl_conv, _dnnl_pool, _parallel, pooling

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


WINDOWS = dict(
    c=st.integers(1, 20),
    k=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    raw_pads=st.tuples(*(st.integers(0, 3) for _ in range(4))),
    ceil=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
"""Random pooling windows (channels, kernel, strides, dilations, pads, ceil mode, seed)."""


@settings(max_examples=60, deadline=None)
@given(
    layout=st.sampled_from(["NHWC", "NCHW"]),
    n=st.integers(1, 2),
    hw=st.tuples(st.integers(4, 13), st.integers(4, 13)),
    dtype=st.sampled_from([np.float32, np.uint8, np.int8]),
    **WINDOWS,
)
def test_max_pool_matches_reference(layout, n, c, k, s, d, raw_pads, hw, ceil, seed, dtype):
    ext = (d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1)
    pads = tuple(min(p, ext[i // 2] - 1) for i, p in enumerate(raw_pads))
    h, w = max(hw[0], ext[0]), max(hw[1], ext[1])
    rng = np.random.default_rng(seed)
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    if dtype == np.float32:
        x = rng.standard_normal(shape).astype(np.float32)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    y = pooling.max_pool2d(
        x, layout=layout, ksize=k, strides=s, pads=pads, dilations=d, ceil_mode=ceil
    )
    assert y.dtype == dtype
    oh, ow = (y.shape[1], y.shape[2]) if layout == "NHWC" else (y.shape[2], y.shape[3])
    ref = reference(x.astype(np.float32), layout, k, s, d, pads, oh, ow)
    np.testing.assert_array_equal(y.astype(np.float32), ref)


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


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_int8_pool_runs_in_onednn_split_by_batch(dtype, monkeypatch):
    """The codes of an int8 model: oneDNN's integer kernel, whole and split by batch (the
    parts' byte offsets count one byte per element)."""
    monkeypatch.setattr(_dnnl_pool, "SPLIT_MIN_BYTES", 1)
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    for n in (1, 3):
        x = rng.integers(info.min, info.max, (n, 15, 15, 24), endpoint=True).astype(dtype)
        y = pooling.max_pool2d(x, layout="NHWC", ksize=(3, 3), strides=(2, 2),
                               pads=(1, 1, 1, 1))
        ref = reference(x.astype(np.float32), "NHWC", (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 8, 8)
        np.testing.assert_array_equal(y.astype(np.float32), ref)
    impls = [p.impl for k, p in _dnnl_pool._prims.items()
             if p is not None and k[-1] == np.dtype(dtype).str]
    assert impls and not any(i.startswith("ref") for i in impls)
    if _parallel.num_threads() >= 2:
        assert any(k[-1] == np.dtype(dtype).str and j is not None
                   for k, j in _dnnl_pool._jobs.items())


@settings(max_examples=40, deadline=None)
@given(hw=st.tuples(st.integers(4, 17), st.integers(4, 13)),
       dtype=st.sampled_from([np.float32, np.uint8]), **WINDOWS)
def test_one_image_split_in_row_bands(c, k, s, d, raw_pads, hw, ceil, seed, dtype):
    """One NHWC image pooled in one band of output rows per thread (each band's input rows
    and the top/bottom padding of its windows): the reference's values exactly."""
    ext = (d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1)
    pads = tuple(min(p, ext[i // 2] - 1) for i, p in enumerate(raw_pads))
    h, w = max(hw[0], ext[0]), max(hw[1], ext[1])
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 255, (1, h, w, c)).astype(dtype)
    if dtype == np.float32:
        x = rng.standard_normal((1, h, w, c)).astype(np.float32)
    x.flags.writeable = False
    old = _dnnl_pool.ROW_SPLIT_MIN_BYTES
    _dnnl_pool.ROW_SPLIT_MIN_BYTES = 1  # (hypothesis: no function-scoped monkeypatch)
    try:
        y = pooling.max_pool2d(x, layout="NHWC", ksize=k, strides=s, pads=pads, dilations=d,
                               ceil_mode=ceil)
    finally:
        _dnnl_pool.ROW_SPLIT_MIN_BYTES = old
    ref = reference(x.astype(np.float32), "NHWC", k, s, d, pads, y.shape[1], y.shape[2])
    np.testing.assert_array_equal(y.astype(np.float32), ref)
    if _parallel.num_threads() >= 2 and y.shape[1] >= 2:  # oneDNN ran it: split
        keys = [key for key, p in _dnnl_pool._prims.items() if p is not None and key[0] == "NHWC"
                and key[1:3] == ((1, c, h, w), (1, c, *y.shape[1:3]))
                and key[3:6] == (k, s, (d[0] - 1, d[1] - 1))
                and key[6] == (pads[0], pads[2]) and key[-1] == np.dtype(dtype).str]
        assert all(key in _dnnl_pool._jobs for key in keys)
