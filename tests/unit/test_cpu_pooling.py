"""pytfrt.backends.cpu.pooling against direct loops and torch.nn.functional (incl. gradients)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from pytfrt.backends.cpu import pooling
from pytfrt.backends.cpu.ops import OpError


def direct_pool_nchw(x, k, s, d, pads, ceil_mode, kind, include_pad):
    """Reference: explicit window loops with bounds checks (no padded copy)."""
    n, c, h, w = x.shape
    pt, pb, pl, pr = pads

    def size(length, kk, ss, dd, p0, p1):
        span = length + p0 + p1 - dd * (kk - 1) - 1
        o = (-(-span // ss) if ceil_mode else span // ss) + 1
        if ceil_mode and (o - 1) * ss >= length + p0:
            o -= 1
        return o

    oh, ow = size(h, k[0], s[0], d[0], pt, pb), size(w, k[1], s[1], d[1], pl, pr)
    y = np.zeros((n, c, oh, ow))
    for a in range(oh):
        for b in range(ow):
            vals, count = [], 0
            for i in range(k[0]):
                r = a * s[0] + i * d[0] - pt
                for j in range(k[1]):
                    q = b * s[1] + j * d[1] - pl
                    if 0 <= r < h and 0 <= q < w:
                        vals.append(x[:, :, r, q])
                        count += 1
                    elif include_pad and -pt <= r < h + pb and -pl <= q < w + pr:
                        count += 1
            stack = np.stack(vals)
            y[:, :, a, b] = stack.max(0) if kind == "max" else stack.sum(0) / count
    return y


@st.composite
def pool_cases(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = (
        draw(st.integers(0, dh * (kh - 1))),
        draw(st.integers(0, dh * (kh - 1))),
        draw(st.integers(0, dw * (kw - 1))),
        draw(st.integers(0, dw * (kw - 1))),
    )
    return dict(
        k=(kh, kw),
        s=(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        d=(dh, dw),
        pads=pads,
        ceil=draw(st.booleans()),
        include_pad=draw(st.booleans()),
        layout=draw(st.sampled_from(["NHWC", "NCHW"])),
        h=draw(st.integers(dh * (kh - 1) + 1, 9)),
        w=draw(st.integers(dw * (kw - 1) + 1, 9)),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def _to(layout, a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if layout == "NHWC" else a


def _from(layout, a):
    return a.transpose(0, 3, 1, 2) if layout == "NHWC" else a


@given(pool_cases())
def test_pooling_matches_direct_loops(case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((2, 3, case["h"], case["w"])).astype(np.float32)
    attrs = dict(
        layout=case["layout"],
        ksize=case["k"],
        strides=case["s"],
        dilations=case["d"],
        pads=case["pads"],
        ceil_mode=case["ceil"],
    )
    args = (case["k"], case["s"], case["d"], case["pads"], case["ceil"])
    ymax = pooling.max_pool2d(_to(case["layout"], x), **attrs)
    np.testing.assert_array_equal(
        _from(case["layout"], ymax), direct_pool_nchw(x, *args, "max", False)
    )
    yavg = pooling.avg_pool2d(
        _to(case["layout"], x), count_include_pad=case["include_pad"], **attrs
    )
    np.testing.assert_allclose(
        _from(case["layout"], yavg),
        direct_pool_nchw(x, *args, "avg", case["include_pad"]),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize(
    ("k", "s", "p", "ceil", "include_pad"),
    [
        (3, 2, 1, False, False),
        (3, 2, 1, True, True),
        (2, 2, 0, False, True),
        (3, 1, 1, True, False),
        (5, 3, 2, True, True),
    ],
)
def test_pooling_and_gradients_match_torch(layout, k, s, p, ceil, include_pad):
    rng = np.random.default_rng(7)
    # Distinct values so max positions are unique and the max gradient is well defined.
    x = rng.permutation(2 * 3 * 11 * 10).reshape(2, 3, 11, 10).astype(np.float64)
    xt = torch.tensor(x, requires_grad=True)
    attrs = dict(layout=layout, ksize=(k, k), strides=(s, s), pads=(p,) * 4, ceil_mode=ceil)
    ymax_t = F.max_pool2d(xt, k, s, p, ceil_mode=ceil)
    dy = rng.standard_normal(tuple(ymax_t.shape))
    ymax_t.backward(torch.from_numpy(dy))
    ymax = pooling.max_pool2d(_to(layout, x), **attrs)
    np.testing.assert_array_equal(_from(layout, ymax), ymax_t.detach().numpy())
    dx = pooling.max_pool2d_grad(_to(layout, x), ymax, _to(layout, dy), **attrs)
    np.testing.assert_allclose(_from(layout, dx), xt.grad.numpy(), rtol=1e-12, atol=1e-12)

    xt.grad = None
    yavg_t = F.avg_pool2d(xt, k, s, p, ceil_mode=ceil, count_include_pad=include_pad)
    yavg_t.backward(torch.from_numpy(dy))
    yavg = pooling.avg_pool2d(_to(layout, x), count_include_pad=include_pad, **attrs)
    np.testing.assert_allclose(_from(layout, yavg), yavg_t.detach().numpy(), rtol=1e-12)
    dx = pooling.avg_pool2d_grad(
        _to(layout, x).shape, _to(layout, dy), count_include_pad=include_pad, **attrs
    )
    np.testing.assert_allclose(_from(layout, dx), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_max_pool_grad_routes_ties_to_the_first_maximum():
    x = np.ones((1, 1, 2, 2), np.float32)
    y = pooling.max_pool2d(x, layout="NCHW", ksize=(2, 2), strides=(2, 2))
    dx = pooling.max_pool2d_grad(
        x, y, np.full_like(y, 5.0), layout="NCHW", ksize=(2, 2), strides=(2, 2)
    )
    np.testing.assert_array_equal(dx, [[[[5.0, 0.0], [0.0, 0.0]]]])


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_global_pools(layout):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 7, 5)).astype(np.float32)
    xl = _to(layout, x.transpose(0, 3, 1, 2))
    ax = (1, 2) if layout == "NHWC" else (2, 3)
    out = np.empty_like(xl.mean(axis=ax, keepdims=True))
    assert pooling.global_avg_pool(xl, layout=layout, out=out) is out
    np.testing.assert_allclose(out, xl.astype(np.float64).mean(axis=ax, keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(
        pooling.global_max_pool(xl, layout=layout), xl.max(axis=ax, keepdims=True)
    )


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_global_avg_pool_strided_input_and_output(layout, dtype):
    # the compiled loop (float32/float64) and NumPy (float16) on a strided view, into a
    # strided out= and into a new array, against a float64 mean
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 9, 11, 6)).astype(dtype)[:, ::2, 1:, ::-1]
    xl = _to(layout, x.transpose(0, 3, 1, 2))
    ax = (1, 2) if layout == "NHWC" else (2, 3)
    want = xl.astype(np.float64).mean(axis=ax, keepdims=True)
    tol = 1e-3 if dtype == np.float16 else 1e-6
    y = pooling.global_avg_pool(xl, layout=layout)
    assert y.dtype == dtype and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)
    big = np.zeros((2 * want.shape[0], *want.shape[1:]), dtype)
    out = big[::2]
    assert pooling.global_avg_pool(xl, layout=layout, out=out) is out
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    assert not big[1::2].any()


def test_integer_max_pool_pads_with_the_minimum():
    x = np.full((1, 2, 2, 1), -7, np.int32)
    y = pooling.max_pool2d(x, layout="NHWC", ksize=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1))
    np.testing.assert_array_equal(y, x)


def test_errors():
    x = np.ones((1, 4, 4, 2), np.float32)
    with pytest.raises(OpError, match="ksize"):
        pooling.max_pool2d(x, layout="NHWC", ksize=(0, 2))
    with pytest.raises(OpError, match="smaller than"):
        pooling.max_pool2d(x, layout="NHWC", ksize=(5, 5))
    with pytest.raises(OpError, match="pads"):
        pooling.avg_pool2d(x, layout="NHWC", ksize=(2, 2), pads=(2, 0, 0, 0))
    with pytest.raises(OpError, match="layout"):
        pooling.avg_pool2d(x, layout="HWCN", ksize=(2, 2))
    with pytest.raises(OpError, match="float"):
        pooling.avg_pool2d(x.astype(np.int64), layout="NHWC", ksize=(2, 2))
    with pytest.raises(OpError, match="rank-4"):
        pooling.global_avg_pool(x[0], layout="NHWC")
    with pytest.raises(OpError, match="out"):
        pooling.max_pool2d(x, layout="NHWC", ksize=(2, 2), out=np.empty((1, 2, 2, 2), np.float32))
    with pytest.raises(OpError, match="dy"):
        pooling.avg_pool2d_grad(
            (1, 4, 4, 2), np.ones((1, 2, 2, 2), np.float32), layout="NHWC", ksize=(2, 2)
        )
