"""oneDNN's convolution backward-data and backward-weights primitives (``_dnnl_conv_bwd``, the
float32 path of the ``conv2d_backprop_input``/``conv2d_backprop_filter`` graph ops) against
PyTorch autograd in float64: random geometries (strides, dilations, asymmetric pads, groups,
both layouts), a batch split into parallel parts (whose filter gradients are summed), the
pair kernels ``conv2d_grads``/``conv2d_bias_grads`` (both gradients at once, one per thread)
on the same random geometries, the GEMM paths, and the fallback to the built-in path for what
oneDNN is not given."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _dnnl_conv, _dnnl_conv_bwd, _parallel
from pytfrt.backends.cpu.grad_ops import GRAPH_OPS
from pytfrt.backends.cpu.ops import OpError

pytestmark = pytest.mark.skipif(not _dnnl_conv.available(), reason="oneDNN not installed")


def _torch_grads(x_nchw, w_oihw, strides, dilations, pads, groups, seed):
    xt = torch.tensor(x_nchw, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w_oihw, dtype=torch.float64, requires_grad=True)
    pt, pb, pl, pr = pads
    yt = F.conv2d(F.pad(xt, (pl, pr, pt, pb)), wt, stride=strides, dilation=dilations,
                  groups=groups)
    dy = np.random.default_rng(seed).standard_normal(tuple(yt.shape))
    yt.backward(torch.from_numpy(dy))
    return dy, xt.grad.numpy(), wt.grad.numpy()


def _check(layout, n, h, w, cin, cout, k, strides, dilations, pads, groups, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, h, w)).astype(np.float32)
    wt = rng.standard_normal((cout, cin // groups, k, k)).astype(np.float32)
    dy, dx_ref, dw_ref = _torch_grads(x, wt, strides, dilations, pads, groups, seed)
    dy = dy.astype(np.float32)
    if layout == "NHWC":
        x, dy, dx_ref = (a.transpose(0, 2, 3, 1) for a in (x, dy, dx_ref))
        wt, dw_ref = wt.transpose(2, 3, 1, 0), dw_ref.transpose(2, 3, 1, 0)
    x, wt, dy = (np.ascontiguousarray(a) for a in (x, wt, dy))
    attrs = dict(layout=layout, strides=strides, dilations=dilations, pads=pads, groups=groups)
    dx = _dnnl_conv_bwd.backprop_input(x.shape, wt, dy, **attrs)
    dw = _dnnl_conv_bwd.backprop_filter(x, wt.shape, dy, **attrs)
    assert dx is not None and dw is not None, "oneDNN did not take the call"
    assert dx.shape == dx_ref.shape and dw.shape == dw_ref.shape
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-4, atol=1e-4 * max(1, np.abs(dx_ref).max()))
    np.testing.assert_allclose(dw, dw_ref, rtol=1e-4, atol=1e-4 * max(1, np.abs(dw_ref).max()))
    # the pair kernel (both at once, the bias gradient in the middle) on the same geometry
    px, pw, pb = GRAPH_OPS["conv2d_bias_grads"](x, wt, dy, **attrs)
    db_ref = dy.astype(np.float64).sum(axis=(0, 1, 2) if layout == "NHWC" else (0, 2, 3))
    for got, want in ((px, dx_ref), (pw, dw_ref), (pb, db_ref)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1, np.abs(want).max()))


@settings(max_examples=20, deadline=None)
@given(
    layout=st.sampled_from(["NHWC", "NCHW"]),
    n=st.integers(1, 3),
    hw=st.tuples(st.integers(5, 11), st.integers(5, 11)),
    cig=st.integers(1, 5),
    cog=st.integers(1, 6),
    groups=st.sampled_from([1, 1, 2, 3]),
    k=st.integers(1, 3),
    strides=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    dilations=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.tuples(*(st.integers(0, 2) for _ in range(4))),
    seed=st.integers(0, 2**31 - 1),
)
def test_gradients_match_torch(layout, n, hw, cig, cog, groups, k, strides, dilations, pads,
                               seed):
    _check(layout, n, hw[0], hw[1], cig * groups, cog * groups, k, strides, dilations, pads,
           groups, seed)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_batch_split_into_parts_sums_filter_gradients(layout):
    geo = _dnnl_conv_bwd._Geometry(layout, (4, 16, 16, 16) if layout == "NHWC" else
                                   (4, 16, 16, 16), (3, 3, 16, 32) if layout == "NHWC" else
                                   (32, 16, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1)
    _check(layout, 4, 16, 16, 16, 32, 3, (1, 1), (1, 1), (1, 1, 1, 1), 1, 7)
    plan = _dnnl_conv_bwd._plan("weights", geo)
    assert plan is not None
    assert len(plan.parts) == min(_parallel.num_threads(), 4)


def test_depthwise_through_the_graph_op():
    """The registered op takes the oneDNN path (same numbers as torch) for a depthwise filter."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 8, 8, 6)).astype(np.float32)
    w = rng.standard_normal((3, 3, 1, 6)).astype(np.float32)
    dy, dx_ref, dw_ref = _torch_grads(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (1, 1),
                                      (1, 1), (1, 1, 1, 1), 6, 2)
    dy = np.ascontiguousarray(dy.astype(np.float32).transpose(0, 2, 3, 1))
    attrs = dict(layout="NHWC", strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], groups=6,
                 static_shape=None)
    dx = GRAPH_OPS["conv2d_backprop_input"](np.array(x.shape), w, dy, **attrs)
    dw = GRAPH_OPS["conv2d_backprop_filter"](x, np.array(w.shape), dy, **attrs)
    np.testing.assert_allclose(dx, dx_ref.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw, dw_ref.transpose(2, 3, 1, 0), rtol=1e-4, atol=1e-4)


def test_what_onednn_is_not_given_goes_to_the_builtin_path():
    w = np.ones((3, 3, 4, 8), np.float32)
    bad_dy = np.ones((1, 4, 3, 8), np.float32)
    attrs = dict(layout="NHWC", strides=[1, 1], dilations=[1, 1], pads=[0, 0, 0, 0], groups=1)
    assert _dnnl_conv_bwd.backprop_input((1, 5, 5, 4), w, bad_dy, **attrs) is None
    assert _dnnl_conv_bwd.backprop_input((1, 5, 5, 4), w.astype(np.float64),
                                         bad_dy.astype(np.float64), **attrs) is None
    assert _dnnl_conv_bwd.backprop_input((1, 5, 5, 4), w, bad_dy,
                                         **{**attrs, "strides": [1]}) is None
    with pytest.raises(OpError, match="dy"):
        GRAPH_OPS["conv2d_backprop_input"]((1, 5, 5, 4), w, bad_dy, static_shape=None, **attrs)
    x64 = np.ones((1, 5, 5, 4))
    dw = GRAPH_OPS["conv2d_backprop_filter"](x64, (3, 3, 4, 8), np.ones((1, 3, 3, 8)),
                                             static_shape=None, **attrs)
    np.testing.assert_allclose(dw, np.full((3, 3, 4, 8), 9.0))


@settings(max_examples=12, deadline=None)
@given(layout=st.sampled_from(["NHWC", "NCHW"]), n=st.integers(1, 6), hw=st.integers(3, 11),
       cin=st.integers(1, 9), cout=st.integers(1, 9), k=st.sampled_from([1, 3, 5]),
       stride=st.integers(1, 2), seed=st.integers(0, 2**16), with_bias=st.booleans())
def test_forward_with_a_per_call_filter_matches_torch(layout, n, hw, cin, cout, k,  # type: ignore[no-untyped-def]
                                                      stride, seed, with_bias):
    """A training step's forward convolution (``_dnnl_conv_bwd.forward``: primitives kept per
    geometry, the filter reordered per call) against PyTorch in float64, three filters in a
    row through one set of primitives; with a bias, the primitive adds it."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, hw, hw)).astype(np.float32)
    pads = (k // 2, k // 2, k // 2, k // 2)
    for _ in range(3):
        w = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
        bias = rng.standard_normal(cout).astype(np.float32) if with_bias else None
        want = F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                        None if bias is None else torch.from_numpy(bias).double(),
                        stride=stride, padding=k // 2).numpy()
        if layout == "NHWC":
            got = _dnnl_conv_bwd.forward(np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
                                         np.ascontiguousarray(w.transpose(2, 3, 1, 0)),
                                         layout=layout, strides=(stride, stride),
                                         dilations=(1, 1), pads=pads, groups=1, bias=bias)
            assert got is not None
            got = got.transpose(0, 3, 1, 2)
        else:
            got = _dnnl_conv_bwd.forward(x, w, layout=layout, strides=(stride, stride),
                                         dilations=(1, 1), pads=pads, groups=1, bias=bias)
            assert got is not None
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(cin * k * k))


def test_training_convs_take_the_per_call_filter_path() -> None:
    """A deferred (SAME) conv prepared anew on every call with a new filter -- a training
    step's -- runs from its second call on through the kept primitives; a conv prepared once
    (a constant filter) keeps its own plan; results equal the planned path's either way."""
    from pytfrt.backends.cpu import graph_nn
    from pytfrt.backends.cpu.conv import conv2d, plan_conv2d

    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 13, 13, 6)).astype(np.float32)
    attrs = dict(layout="NHWC", strides=(1, 1), pads=(0, 0, 0, 0), padding="SAME",
                 dilations=(1, 1), groups=1, activation="none", alpha=0.0,
                 epilogue_operands=(0,))
    taken = []
    for _ in range(3):
        w = rng.standard_normal((3, 3, 6, 7)).astype(np.float32)
        plan = graph_nn.conv2d_prepare(w, **attrs)
        y = graph_nn.conv2d(x, plan)
        taken.append(not plan.plans)  # the planned path fills plans
        reference = conv2d(plan_conv2d(w, layout="NHWC", pads=(1, 1, 1, 1)), x)
        np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-5)
    assert taken[1:] == [True, True]
    constant = graph_nn.conv2d_prepare(w, **attrs)
    graph_nn.conv2d(x, constant)
    out = np.empty_like(y)
    assert graph_nn.conv2d(x, constant, out=out) is out and constant.plans
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)


def test_explicit_pad_training_convs_take_the_per_call_filter_path(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The same for a conv with explicit pads (a static image size: the plan is made in
    ``conv2d.prepare``): from its second step the kept primitives run it, a constant plan
    serving several calls keeps its own path, a bias is added by the kept primitive, an
    activation epilogue keeps the plan; results agree with the plan's own path."""
    from pytfrt.backends.cpu import _dnnl_conv_bwd as bwd
    from pytfrt.backends.cpu import graph_nn
    from pytfrt.backends.cpu.conv import conv2d, plan_conv2d

    calls = []
    forward = bwd.forward
    monkeypatch.setattr(bwd, "forward", lambda *a, **k: calls.append(1) or forward(*a, **k))
    rng = np.random.default_rng(10)
    x = rng.standard_normal((4, 11, 11, 5)).astype(np.float32)
    attrs = dict(layout="NHWC", strides=(1, 1), pads=(1, 1, 0, 2), padding="EXPLICIT",
                 dilations=(1, 1), groups=1, activation="none", alpha=0.0,
                 epilogue_operands=(0,))
    taken = []
    for _ in range(3):
        w = rng.standard_normal((3, 3, 5, 6)).astype(np.float32)
        n = len(calls)
        y = graph_nn.conv2d(x, graph_nn.conv2d_prepare(w, **attrs))
        taken.append(len(calls) > n)
        reference = conv2d(plan_conv2d(w, layout="NHWC", pads=(1, 1, 0, 2)), x)
        np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-5)
    assert taken[1:] == [True, True]
    constant = graph_nn.conv2d_prepare(w, **attrs)
    n = len(calls)
    for _ in range(3):
        np.testing.assert_allclose(graph_nn.conv2d(x, constant), reference, rtol=1e-5,
                                   atol=1e-5)
    assert len(calls) - n <= 1  # at most its first call, after a one-call plan
    bias = rng.standard_normal(6).astype(np.float32)
    taken = []
    for _ in range(3):  # with a bias (Keras' Conv2D default): the primitive adds it
        w = rng.standard_normal((3, 3, 5, 6)).astype(np.float32)
        n = len(calls)
        y = graph_nn.conv2d(x, graph_nn.conv2d_prepare(w, bias, **{**attrs,
                                                                  "epilogue_operands": (1,)}))
        taken.append(len(calls) > n)
        reference = conv2d(plan_conv2d(w, layout="NHWC", pads=(1, 1, 0, 2)), x) + bias
        np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-5)
    assert taken[1:] == [True, True]
    n = len(calls)
    relu = {**attrs, "epilogue_operands": (1,), "activation": "relu"}
    for _ in range(2):  # an epilogue keeps the plan
        w = rng.standard_normal((3, 3, 5, 6)).astype(np.float32)
        y = graph_nn.conv2d(x, graph_nn.conv2d_prepare(w, bias, **relu))
        reference = np.maximum(conv2d(plan_conv2d(w, layout="NHWC", pads=(1, 1, 0, 2)), x)
                               + bias, 0)
        np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-5)
    assert len(calls) == n


@pytest.mark.parametrize(("n", "hw", "cin", "cout", "stride"), [
    (8, 7, 128, 256, 1),   # rows < 3 * cout: split by output channels
    (8, 7, 256, 128, 1),   # more input channels, few rows: split by output channels
    (8, 20, 192, 128, 1),  # more input channels, many rows: (dy.T @ x).T, split by rows
    (4, 12, 128, 160, 1),  # split by rows, partials summed
    (3, 9, 192, 128, 2),   # stride 2: every other row and column of x
    (1, 2, 128, 128, 1),   # too small to split
])
def test_pointwise_filter_gradient_is_one_gemm(n, hw, cin, cout, stride):  # type: ignore[no-untyped-def]
    """A 1x1 NHWC convolution's filter gradient (ResNet-50's bottleneck convolutions) takes
    the GEMM path: against PyTorch autograd in float64, through the graph op too."""
    rng = np.random.default_rng(cin + cout + hw)
    x = rng.standard_normal((n, cin, hw, hw)).astype(np.float32)
    wt = rng.standard_normal((cout, cin, 1, 1)).astype(np.float32)
    dy, _, dw_ref = _torch_grads(x, wt, (stride, stride), (1, 1), (0, 0, 0, 0), 1, 7)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    dyh = np.ascontiguousarray(dy.astype(np.float32).transpose(0, 2, 3, 1))
    kw = dict(layout="NHWC", strides=(stride, stride), dilations=(1, 1), pads=(0, 0, 0, 0),
              groups=1)
    fshape = (1, 1, cin, cout)
    gemm = _dnnl_conv_bwd._pointwise_filter(xh, fshape, dyh, "NHWC", (stride, stride),
                                            (0, 0, 0, 0), 1)
    assert gemm is not None
    want = dw_ref.transpose(2, 3, 1, 0)
    scale = np.abs(want).max()
    np.testing.assert_allclose(gemm, want, rtol=0, atol=2e-6 * scale)
    got = GRAPH_OPS["conv2d_backprop_filter"](xh, np.array(fshape), dyh, static_shape=None,
                                              **kw)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * scale)
    assert _dnnl_conv_bwd._pointwise_filter(xh, fshape, dyh, "NHWC", (stride, stride),
                                            (0, 1, 0, 1), 1) is None  # padded: oneDNN's


@pytest.mark.parametrize(("n", "hw", "cin", "cout", "strides"), [
    (8, 14, 256, 128, (2, 2)),  # ResNet-50's 14x14 -> 7x7 projection, split by images
    (3, 9, 128, 192, (2, 2)),   # odd size: the last row and column are read
    (2, 10, 128, 160, (3, 2)),  # unequal strides, rows the convolution never reads
    (1, 4, 128, 128, (2, 2)),   # too small to split
])
def test_strided_pointwise_input_gradient_is_one_gemm(n, hw, cin, cout, strides):  # type: ignore[no-untyped-def]
    """A strided 1x1 NHWC convolution's input gradient (ResNet-50's projections) takes the
    GEMM-and-scatter path: against PyTorch autograd in float64, through the graph op too;
    every pixel the convolution did not read is zero."""
    rng = np.random.default_rng(cin + cout + hw)
    x = rng.standard_normal((n, cin, hw, hw)).astype(np.float32)
    wt = rng.standard_normal((cout, cin, 1, 1)).astype(np.float32)
    dy, dx_ref, _ = _torch_grads(x, wt, strides, (1, 1), (0, 0, 0, 0), 1, 3)
    wh = np.ascontiguousarray(wt.transpose(2, 3, 1, 0))
    dyh = np.ascontiguousarray(dy.astype(np.float32).transpose(0, 2, 3, 1))
    want = dx_ref.transpose(0, 2, 3, 1)
    xshape = (n, hw, hw, cin)
    gemm = _dnnl_conv_bwd._strided_pointwise_input(xshape, wh, dyh, "NHWC", strides,
                                                   (0, 0, 0, 0), 1)
    assert gemm is not None
    scale = np.abs(want).max()
    np.testing.assert_allclose(gemm, want, rtol=0, atol=2e-6 * scale)
    kw = dict(layout="NHWC", strides=strides, dilations=(1, 1), pads=(0, 0, 0, 0), groups=1)
    got = GRAPH_OPS["conv2d_backprop_input"](np.array(xshape), wh, dyh, static_shape=None, **kw)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * scale)
    for pads, st_ in (((0, 1, 0, 1), strides), ((0, 0, 0, 0), (1, 1))):  # oneDNN's
        assert _dnnl_conv_bwd._strided_pointwise_input(xshape, wh, dyh, "NHWC", st_, pads,
                                                       1) is None


@pytest.mark.parametrize(("n", "hw", "cin", "cout", "k", "stride", "pad", "groups"), [
    (4, 9, 16, 24, 3, 1, 1, 1),     # oneDNN's kernels for both, one per thread
    (8, 14, 256, 128, 1, 2, 0, 1),  # both GEMMs: strided input gradient, pointwise filter
    (3, 8, 128, 128, 1, 1, 0, 1),   # oneDNN's input gradient beside the filter GEMM
    (2, 7, 12, 18, 3, 2, 1, 3),     # grouped, strided
    (2, 5, 256, 32, 3, 1, 1, 1),    # a small image: the filter gradient by im2col and a GEMM
    (2, 6, 256, 16, 3, 1, 0, 1),    # the same, unpadded (4x4 outputs)
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_grads_gives_both_gradients(n, hw, cin, cout, k, stride, pad, groups, dtype,  # type: ignore[no-untyped-def]
                                           monkeypatch):
    """``conv2d_grads`` (both gradients at once, one per thread; float64 and a one-thread
    process the two ops' kernels one after the other) and ``conv2d_bias_grads`` (also the
    bias gradient, on the thread done first) against PyTorch autograd in float64."""
    rng = np.random.default_rng(n + hw + cin)
    x = rng.standard_normal((n, cin, hw, hw)).astype(dtype)
    wt = rng.standard_normal((cout, cin // groups, k, k)).astype(dtype)
    pads = (pad,) * 4
    dy, dx_ref, dw_ref = _torch_grads(x, wt, (stride, stride), (1, 1), pads, groups, 5)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    wh = np.ascontiguousarray(wt.transpose(2, 3, 1, 0))
    dyh = np.ascontiguousarray(dy.astype(dtype).transpose(0, 2, 3, 1))
    kw = dict(layout="NHWC", strides=(stride, stride), dilations=(1, 1), pads=pads,
              groups=groups)
    want_dx, want_dw = dx_ref.transpose(0, 2, 3, 1), dw_ref.transpose(2, 3, 1, 0)
    im2col = _dnnl_conv_bwd._im2col_filter(xh, wh.shape, dyh, "NHWC", (stride, stride),
                                           (1, 1), pads, groups)
    assert (im2col is not None) == (dtype == np.float32 and cin == 256 and k == 3)
    if im2col is not None:
        np.testing.assert_allclose(im2col, want_dw, rtol=0, atol=2e-5 * np.abs(want_dw).max())
    for threads in (_parallel.num_threads(), 1):
        monkeypatch.setattr(_parallel, "num_threads", lambda t=threads: t)
        dx, dw = GRAPH_OPS["conv2d_grads"](xh, wh, dyh, **kw)
        assert dx.dtype == dw.dtype == dtype
        bx, bw, db = GRAPH_OPS["conv2d_bias_grads"](xh, wh, dyh, **kw)
        assert db.dtype == dtype and db.shape == (cout,)
        want_db = dy.sum(axis=(0, 2, 3))  # float64
        for got, want in ((dx, want_dx), (dw, want_dw), (bx, want_dx), (bw, want_dw),
                          (db, want_db)):
            np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())
