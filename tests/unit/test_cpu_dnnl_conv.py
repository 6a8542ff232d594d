"""oneDNN's convolution primitive under pytfrt's conv kernel, against torch.nn.functional and
the direct-loop reference: layouts, strides, pads, dilations, groups, every fused activation,
the residual, the parallel parts, threads, the fallback and ``PYTFRT_CONV=builtin``."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from cpu_refs import activation_refs
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _dnnl_conv, _parallel, conv
from pytfrt.backends.cpu.ops import OpError

pytestmark = pytest.mark.skipif(
    not _dnnl_conv.available(), reason="oneDNN library absent (or PYTFRT_CONV=builtin)"
)

torch.set_num_threads(1)
ACTS = activation_refs(0.2)


def torch_ref(x, w, layout, strides, dilations, pads, groups, bias, residual, act):
    """``act(conv(x, w) + bias + residual)`` by torch (float64), in ``layout``."""
    if layout == "NHWC":
        x, w = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1)
        residual = None if residual is None else residual.transpose(0, 3, 1, 2)
    pt, pb, pl, pr = pads
    xt = F.pad(torch.from_numpy(np.ascontiguousarray(x, np.float64)), (pl, pr, pt, pb))
    y = F.conv2d(
        xt,
        torch.from_numpy(np.ascontiguousarray(w, np.float64)),
        None if bias is None else torch.from_numpy(bias.astype(np.float64)),
        stride=strides,
        dilation=dilations,
        groups=groups,
    )
    if residual is not None:
        y = y + torch.from_numpy(residual.astype(np.float64))
    y = ACTS[act](y).numpy()
    return y.transpose(0, 2, 3, 1) if layout == "NHWC" else y


def make_case(rng, layout, n, h, w, cin, cout, k, groups, dtype=np.float32):
    x = rng.standard_normal((n, h, w, cin) if layout == "NHWC" else (n, cin, h, w))
    wshape = (k, k, cin // groups, cout) if layout == "NHWC" else (cout, cin // groups, k, k)
    wt = rng.standard_normal(wshape) / np.sqrt(k * k * cin / groups)
    return x.astype(dtype), wt.astype(dtype), rng.uniform(-0.5, 0.5, cout).astype(dtype)


@st.composite
def cases(draw):
    depthwise = draw(st.booleans())
    if depthwise:
        groups = draw(st.integers(2, 20))
        cig, kg = 1, draw(st.sampled_from([1, 1, 2]))
    else:
        groups = draw(st.sampled_from([1, 1, 1, 2, 4]))
        cig, kg = draw(st.integers(1, 9)), draw(st.integers(1, 20))
    kh = draw(st.integers(1, 5))
    s = draw(st.integers(1, 3))
    d = draw(st.integers(1, 2))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    lo = max(1, d * (kh - 1) + 1 - min(pads[0] + pads[1], pads[2] + pads[3]))
    h, w = draw(st.integers(lo, 12)), draw(st.integers(lo, 12))
    return dict(
        layout=draw(st.sampled_from(["NHWC", "NCHW"])),
        n=draw(st.integers(1, 3)),
        h=h,
        w=w,
        cin=cig * groups,
        cout=kg * groups,
        k=kh,
        groups=groups,
        strides=(s, s),
        dilations=(d, d),
        pads=pads,
        act=draw(st.sampled_from(sorted(ACTS))),
        residual=draw(st.booleans()),
        bias=draw(st.booleans()),
    )


@settings(max_examples=60, deadline=None)
@given(cases(), st.integers(0, 2**31 - 1))
def test_dnnl_matches_torch(case, seed):
    rng = np.random.default_rng(seed)
    x, w, b = make_case(
        rng,
        case["layout"],
        case["n"],
        case["h"],
        case["w"],
        case["cin"],
        case["cout"],
        case["k"],
        case["groups"],
    )
    bias = b if case["bias"] else None
    plan = conv.plan_conv2d(
        w,
        layout=case["layout"],
        strides=case["strides"],
        dilations=case["dilations"],
        pads=case["pads"],
        groups=case["groups"],
        bias=bias,
        activation=case["act"],
        alpha=0.2,
        algorithm="dnnl",
    )
    shape = plan.output_shape(x.shape)
    res = rng.standard_normal(shape).astype(np.float32) if case["residual"] else None
    got = conv.conv2d(plan, x, res)
    ref = torch_ref(
        x,
        w,
        case["layout"],
        case["strides"],
        case["dilations"],
        case["pads"],
        case["groups"],
        bias,
        res,
        case["act"],
    )
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


# (layout, n, h, cin, cout, k, stride, dilation, pads, groups): big enough to be split in parts.
LARGE = [
    ("NHWC", 1, 30, 64, 64, 3, 1, 1, (1, 1, 1, 1), 1),  # rows, padded
    ("NHWC", 1, 31, 32, 96, 3, 2, 1, (0, 1, 0, 1), 1),  # rows, strided, uneven
    ("NHWC", 1, 29, 48, 64, 3, 1, 2, (2, 2, 2, 2), 1),  # rows, dilated
    ("NHWC", 1, 32, 64, 64, 1, 1, 1, (0, 0, 0, 0), 1),  # rows, 1x1
    ("NHWC", 1, 80, 96, 96, 3, 1, 1, (1, 1, 1, 1), 96),  # rows, depthwise
    ("NHWC", 2, 20, 64, 64, 3, 1, 1, (1, 1, 1, 1), 1),  # batch
    ("NCHW", 3, 20, 64, 64, 3, 1, 1, (1, 1, 1, 1), 2),  # batch, grouped
    ("NCHW", 1, 28, 64, 64, 3, 1, 1, (1, 1, 1, 1), 1),  # one part
]


@pytest.mark.parametrize("spec", LARGE, ids=[f"{s[0]}-n{s[1]}-h{s[2]}-g{s[9]}" for s in LARGE])
@pytest.mark.parametrize("residual", [False, True])
def test_parts_match_the_reference(spec, residual):
    layout, n, h, cin, cout, k, s, d, pads, groups = spec
    rng = np.random.default_rng(7)
    x, w, b = make_case(rng, layout, n, h, h, cin, cout, k, groups)
    plan = conv.plan_conv2d(
        w,
        layout=layout,
        strides=(s, s),
        dilations=(d, d),
        pads=pads,
        groups=groups,
        bias=b,
        activation="relu6",
        algorithm="dnnl",
    )
    shape = plan.output_shape(x.shape)
    res = rng.standard_normal(shape).astype(np.float32) if residual else None
    assert plan.dnnl is not None
    impl = plan.dnnl.impl(x.shape, residual)
    assert impl is not None and not impl.startswith("ref"), impl
    parts = plan.dnnl.parts(x.shape, residual)
    expect_split = _parallel.num_threads() > 1 and (n > 1 or layout == "NHWC")
    assert (parts > 1) == expect_split
    y = conv.conv2d(plan, x, res)
    ref = torch_ref(x, w, layout, (s, s), (d, d), pads, groups, b, res, "relu6")
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    # the residual in place: out is the residual
    if res is not None:
        out = res.copy()
        conv.conv2d(plan, x, out, out=out)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_auto_uses_dnnl_and_agrees_with_builtin():
    rng = np.random.default_rng(1)
    x, w, b = make_case(rng, "NHWC", 1, 14, 14, 32, 48, 3, 1)
    kw = dict(layout="NHWC", strides=(2, 2), pads=(1, 1, 1, 1), bias=b, activation="silu")
    auto = conv.plan_conv2d(w, **kw)
    gemm = conv.plan_conv2d(w, **kw, algorithm="gemm")
    assert auto.algorithm_for((1, 7, 7, 48)) == "dnnl"
    assert gemm.algorithm_for((1, 7, 7, 48)) == "gemm" and gemm.dnnl is None
    np.testing.assert_allclose(conv.conv2d(auto, x), conv.conv2d(gemm, x), rtol=1e-4, atol=1e-4)
    # also where the built-in cost model would pick Winograd
    w3 = rng.standard_normal((3, 3, 64, 64)).astype(np.float32)
    p3 = conv.plan_conv2d(w3, layout="NHWC", pads=(1, 1, 1, 1))
    assert p3.builtin_algorithm_for((1, 56, 56, 64)).startswith("winograd")
    # (the native Winograd where it runs: large images, test_cpu_winograd_native.py)
    assert p3.algorithm_for((1, 56, 56, 64)) == ("winograd_native" if p3.wino_native else "dnnl")
    assert p3.algorithm_for((1, 6, 6, 64)) == "dnnl"


@pytest.mark.parametrize("h,c,k,s", [(28, 32, 3, 1), (14, 64, 5, 2), (14, 48, 3, 1)])
def test_depthwise_kernel_choice(h, c, k, s, monkeypatch):
    """EfficientNet-like depthwise convolutions (bias, SiLU, two row bands): 5x5 filters and
    few channels run ``jit_dw`` rather than ``brdgmm_dw`` when oneDNN offers it, the others
    oneDNN's first choice; both kernels agree with torch."""
    rng = np.random.default_rng(k * c)
    x, w, b = make_case(rng, "NHWC", 1, h, h, c, c, k, c)
    p = k // 2
    kw = dict(layout="NHWC", strides=(s, s), pads=(p,) * 4, groups=c, bias=b, activation="silu")
    want = torch_ref(x, w, "NHWC", (s, s), (1, 1), (p,) * 4, c, b, None, "silu")
    impls = []
    for first_choice in (False, True):
        if first_choice:
            monkeypatch.setattr(_dnnl_conv, "JIT_DW_MIN_TAPS", 10**9)
            monkeypatch.setattr(_dnnl_conv, "JIT_DW_MAX_CHANNELS", 0)
        plan = conv.plan_conv2d(w, **kw)
        run = conv.runner(plan)
        out = np.empty(want.shape, np.float32)
        for _ in range(2):  # the first call and the runner's short path
            assert run(x, out=out) is out
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        impls.append(plan.dnnl.impl(x.shape))
    chosen, first = impls
    if first.startswith("brdgmm_dw") and (k * k >= 25 or c <= 32):
        assert chosen.startswith("jit_dw"), impls
    else:
        assert chosen == first, impls


def test_float16_and_float64_plans():
    rng = np.random.default_rng(2)
    x, w, b = make_case(rng, "NHWC", 1, 9, 9, 8, 16, 3, 1)
    p16 = conv.plan_conv2d(w.astype(np.float16), layout="NHWC", bias=b.astype(np.float16))
    assert p16.compute is not None and p16.compute.dnnl is not None  # float32 inside
    ref = torch_ref(
        x.astype(np.float16),
        w.astype(np.float16),
        "NHWC",
        (1, 1),
        (1, 1),
        (0, 0, 0, 0),
        1,
        b.astype(np.float16),
        None,
        "none",
    )
    np.testing.assert_allclose(
        conv.conv2d(p16, x.astype(np.float16)).astype(np.float64), ref, rtol=1e-2, atol=1e-2
    )
    p64 = conv.plan_conv2d(w.astype(np.float64), layout="NHWC")
    assert p64.dnnl is None  # oneDNN is float32 only here: the built-in kernels run
    with pytest.raises(OpError, match="dnnl"):
        conv.plan_conv2d(w.astype(np.float64), layout="NHWC", algorithm="dnnl")


def test_fallback_when_no_primitive(monkeypatch):
    rng = np.random.default_rng(3)
    x, w, b = make_case(rng, "NCHW", 2, 10, 10, 6, 8, 3, 2)
    plan = conv.plan_conv2d(w, layout="NCHW", groups=2, bias=b, activation="tanh", algorithm="dnnl")
    assert plan.dnnl is not None
    assert conv.plan_conv2d(w, layout="NCHW", groups=2).dnnl is None  # auto: built-in for NCHW
    monkeypatch.setattr(plan.dnnl, "ready", lambda shape, residual: False)
    res = rng.standard_normal(plan.output_shape(x.shape)).astype(np.float32)
    ref = torch_ref(x, w, "NCHW", (1, 1), (1, 1), (0, 0, 0, 0), 2, b, res, "tanh")
    np.testing.assert_allclose(conv.conv2d(plan, x, res), ref, rtol=1e-4, atol=1e-4)


def test_one_plan_from_many_threads():
    rng = np.random.default_rng(4)
    _, w, b = make_case(rng, "NHWC", 1, 1, 1, 32, 64, 3, 1)
    plan = conv.plan_conv2d(w, layout="NHWC", pads=(1, 1, 1, 1), bias=b, activation="relu")
    w_orig = w.copy()
    w[...] = 0  # the plan holds its own copy
    shapes = [(1, 28, 28, 32), (2, 12, 12, 32), (1, 7, 9, 32)] * 4
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    with ThreadPoolExecutor(6) as pool:
        outs = list(pool.map(lambda x: conv.conv2d(plan, x), xs))
    for x, got in zip(xs, outs, strict=True):
        ref = torch_ref(x, w_orig, "NHWC", (1, 1), (1, 1), (1, 1, 1, 1), 1, b, None, "relu")
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_builtin_env_disables_dnnl():
    code = (
        "import numpy as np\n"
        "from pytfrt.backends.cpu import conv\n"
        "p = conv.plan_conv2d(np.ones((3, 3, 4, 8), np.float32), layout='NHWC')\n"
        "print(p.dnnl is None, p.algorithm_for((1, 5, 5, 8)))\n"
    )
    env = dict(os.environ, PYTFRT_CONV="builtin")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "gemm"]
