"""How oneDNN convolutions are split into parts: output-channel parts at batch 1 on small
images (each part's filter slice and bias slice, the residual through the part's buffer),
checked against PyTorch's convolution, and the filter read back exactly after the user's copy
is released (also when the first primitives were channel parts)."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu import _dnnl_conv, _parallel, conv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(
    not _dnnl_conv.available() or _parallel.num_threads() < 2,
    reason="needs oneDNN and two threads",
)


def _reference(x, w, b, pad, residual):
    y = torch.nn.functional.conv2d(
        torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(w).permute(3, 2, 0, 1),
        torch.from_numpy(b), padding=pad,
    ).permute(0, 2, 3, 1).numpy()
    if residual is not None:
        y = y + residual
    return np.clip(y, 0.0, 6.0)


@pytest.mark.parametrize("k,cin,cout", [(3, 256, 256), (1, 512, 1024), (3, 160, 96)])
def test_channel_parts_match_torch(k, cin, cout):
    rng = np.random.default_rng(k + cin)
    w = (rng.standard_normal((k, k, cin, cout)) * 0.05).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    pad = k // 2
    plan = conv.plan_conv2d(w, layout="NHWC", pads=(pad,) * 4, bias=b, activation="relu6",
                            algorithm="dnnl")
    assert plan.dnnl is not None
    x = rng.standard_normal((1, 7, 7, cin)).astype(np.float32)
    r = rng.standard_normal((1, 7, 7, cout)).astype(np.float32)
    prims = plan.dnnl._get(x.shape, _dnnl_conv.NO_RESIDUAL)
    assert prims is not None and [p.channels for p in prims] == [
        (0, cout // 2), (cout // 2, cout)]
    tol = dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(conv.conv2d(plan, x), _reference(x, w, b, pad, None), **tol)
    # a residual operand is copied into the output (channel parts read it from there)
    assert not plan.dnnl.ready(x.shape, _dnnl_conv.RESIDUAL_OPERAND)
    np.testing.assert_allclose(conv.conv2d(plan, x, r), _reference(x, w, b, pad, r), **tol)
    out = r.copy()
    conv.conv2d(plan, x, out, out=out)  # in place: the sum post-op on each part's buffer
    np.testing.assert_allclose(out, _reference(x, w, b, pad, r), **tol)
    # the user's filter is released; it reads back exactly from the two halves, and a
    # batch-split primitive made afterwards (from the read-back filter) agrees too
    assert plan.dnnl._w is None
    assert np.array_equal(plan.filter(), w)
    x4 = rng.standard_normal((4, 7, 7, cin)).astype(np.float32)
    assert plan.dnnl.parts(x4.shape) == len(_dnnl_conv.batch_bounds(4, 2)) - 1
    assert plan.dnnl._get(x4.shape, _dnnl_conv.NO_RESIDUAL)[0].channels is None
    np.testing.assert_allclose(conv.conv2d(plan, x4), _reference(x4, w, b, pad, None), **tol)
    assert np.array_equal(plan.filter(), w)


def test_large_images_split_by_rows_and_odd_channel_counts_at_block_bounds():
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((3, 3, 256, 100)) * 0.05).astype(np.float32)
    b = rng.standard_normal(100).astype(np.float32)
    plan = conv.plan_conv2d(w, layout="NHWC", pads=(1,) * 4, bias=b, activation="relu6",
                            algorithm="dnnl")
    # 28x28: too many pixels for channel parts (rows); 7x7 x 100 channels: 48 + 52
    for h, channels in ((28, [None, None]), (7, [(0, 48), (48, 100)])):
        x = rng.standard_normal((1, h, h, 256)).astype(np.float32)
        prims = plan.dnnl._get(x.shape, _dnnl_conv.NO_RESIDUAL)
        assert prims is not None and [p.channels for p in prims] == channels
        np.testing.assert_allclose(conv.conv2d(plan, x), _reference(x, w, b, 1, None),
                                   rtol=1e-4, atol=1e-4)


def test_channel_bounds_are_16_channel_blocks_but_the_last():
    assert _dnnl_conv.channel_bounds(1000, 2) == [0, 496, 1000]
    assert _dnnl_conv.channel_bounds(96, 2) == [0, 48, 96]
    assert _dnnl_conv.channel_bounds(32, 2) == [0, 16, 32]
    for cout in range(48, 300, 7):
        for k in (2, 3):
            b = _dnnl_conv.channel_bounds(cout, k)
            assert b[0] == 0 and b[-1] == cout and all(x % 16 == 0 for x in b[:-1])
            assert all(hi > lo for lo, hi in zip(b, b[1:], strict=False))


@pytest.mark.parametrize("k,n,activation,transposed", [
    (576, 1024, "hard_swish", True),  # MobileNetV3's first classifier layer (ONNX Gemm)
    (1024, 1000, "none", False),
    (1280, 1000, "relu", True),
])
def test_dense_runner_matches_numpy(k, n, activation, transposed):
    act = {"none": lambda v: v, "relu": lambda v: np.maximum(v, 0),
           "hard_swish": lambda v: v * np.clip(v + 3, 0, 6) / 6}[activation]
    rng = np.random.default_rng(k)
    stored = rng.standard_normal((n, k) if transposed else (k, n)).astype(np.float32)
    w = stored.T if transposed else stored
    b = rng.standard_normal(n).astype(np.float32)
    run = conv.dense_runner(w, b, activation, 0.0)
    assert run is not None
    for m in (1, 3, 8):
        x = rng.standard_normal((m, k)).astype(np.float32)
        ref = act(x.astype(np.float64) @ w.astype(np.float64) + b)
        y = run(x, None)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
        out = np.full((m, n), np.nan, np.float32)
        assert run(x, out) is out
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # outside its case it computes nothing: the caller's general path runs
    assert run(rng.standard_normal((9, k)).astype(np.float32), None) is None
    assert run(rng.standard_normal((1, k)), None) is None  # float64
    assert run(x, np.empty((m, n + 1), np.float32)) is None
    assert conv.dense_runner(w[:, :16], b[:16], activation, 0.0) is None  # small weight
    assert conv.dense_runner(w.astype(np.float64), None, activation, 0.0) is None
