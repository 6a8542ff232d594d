"""pytfrt.backends.cpu.conv against a direct-loop reference and torch.nn.functional."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from cpu_refs import activation_refs
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import conv
from pytfrt.backends.cpu.ops import OpError

torch.set_num_threads(1)

ACTS = activation_refs(0.2)


def direct_conv_nhwc(x, w_hwio, strides, dilations, pads, groups):
    """Reference: one dot product per output element, bounds checked (no padded copy)."""
    n, h, wd, cin = x.shape
    kh, kw, cig, cout = w_hwio.shape
    sh, sw = strides
    dh, dw = dilations
    pt, pb, pl, pr = pads
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    kg = cout // groups
    y = np.zeros((n, oh, ow, cout), np.float64)
    for a in range(oh):
        for b in range(ow):
            for i in range(kh):
                r = a * sh + i * dh - pt
                if not 0 <= r < h:
                    continue
                for j in range(kw):
                    c = b * sw + j * dw - pl
                    if not 0 <= c < wd:
                        continue
                    for g in range(groups):
                        xs = x[:, r, c, g * cig : (g + 1) * cig].astype(np.float64)
                        y[:, a, b, g * kg : (g + 1) * kg] += (
                            xs @ w_hwio[i, j, :, g * kg : (g + 1) * kg]
                        )
    return y


def torch_conv_nchw(x, w_oihw, strides, dilations, pads, groups, bias=None):
    pt, pb, pl, pr = pads
    xt = F.pad(torch.from_numpy(x), (pl, pr, pt, pb))
    bt = None if bias is None else torch.from_numpy(bias)
    return F.conv2d(
        xt, torch.from_numpy(w_oihw), bt, stride=strides, dilation=dilations, groups=groups
    )


@st.composite
def conv_cases(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    depthwise = draw(st.booleans())
    cig = 1 if depthwise else draw(st.integers(1, 4))
    if depthwise:
        groups = draw(st.integers(2, 6))
    kg = draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - pads[0] - pads[1]), 9))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - pads[2] - pads[3]), 9))
    n = draw(st.integers(1, 2))
    layout = draw(st.sampled_from(["NHWC", "NCHW"]))
    act = draw(st.sampled_from(sorted(ACTS)))
    use_bias = draw(st.booleans())
    use_res = draw(st.booleans())
    seed = draw(st.integers(0, 2**31 - 1))
    algorithms = ["auto", "gemm"]
    if kh == kw == 3 and (sh, sw) == (dh, dw) == (1, 1) and groups == 1:
        algorithms += ["winograd", "winograd2", "winograd4"]
    if depthwise:
        algorithms.append("depthwise")
    algorithm = draw(st.sampled_from(algorithms))
    return dict(
        algorithm=algorithm,
        n=n,
        h=h,
        w=w,
        cin=cig * groups,
        cout=kg * groups,
        kh=kh,
        kw=kw,
        strides=(sh, sw),
        dilations=(dh, dw),
        pads=pads,
        groups=groups,
        layout=layout,
        act=act,
        use_bias=use_bias,
        use_res=use_res,
        seed=seed,
    )


@given(conv_cases())
def test_conv2d_matches_torch_and_direct_loops(case):
    rng = np.random.default_rng(case["seed"])
    g = case["groups"]
    x_nhwc = rng.standard_normal((case["n"], case["h"], case["w"], case["cin"])).astype(np.float32)
    w_hwio = rng.standard_normal((case["kh"], case["kw"], case["cin"] // g, case["cout"])).astype(
        np.float32
    )
    bias = rng.standard_normal(case["cout"]).astype(np.float32) if case["use_bias"] else None
    ref = direct_conv_nhwc(x_nhwc, w_hwio, case["strides"], case["dilations"], case["pads"], g)
    ref_t = (
        torch_conv_nchw(
            np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)),
            np.ascontiguousarray(w_hwio.transpose(3, 2, 0, 1)),
            case["strides"],
            case["dilations"],
            case["pads"],
            g,
        )
        .numpy()
        .transpose(0, 2, 3, 1)
    )
    np.testing.assert_allclose(ref, ref_t, rtol=1e-4, atol=1e-4)
    res = rng.standard_normal(ref.shape).astype(np.float32) if case["use_res"] else None
    expected = ref + (0 if bias is None else bias) + (0 if res is None else res)
    expected = ACTS[case["act"]](torch.from_numpy(expected)).numpy()
    nchw = case["layout"] == "NCHW"
    x = np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)) if nchw else x_nhwc
    w = np.ascontiguousarray(w_hwio.transpose(3, 2, 0, 1)) if nchw else w_hwio
    r = None if res is None else (np.ascontiguousarray(res.transpose(0, 3, 1, 2)) if nchw else res)
    plan = conv.plan_conv2d(
        w,
        layout=case["layout"],
        strides=case["strides"],
        dilations=case["dilations"],
        pads=case["pads"],
        groups=g,
        bias=bias,
        activation=case["act"],
        alpha=0.2,
        algorithm=case["algorithm"],
    )
    y = conv.conv2d(plan, x, residual=r)
    got = y.transpose(0, 2, 3, 1) if nchw else y
    assert y.dtype == np.float32
    assert y.shape == conv.conv2d_output_shape(
        x.shape,
        w.shape,
        layout=case["layout"],
        strides=case["strides"],
        dilations=case["dilations"],
        pads=case["pads"],
    )
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    out = np.full(y.shape, np.nan, np.float32)
    assert conv.conv2d(plan, x, residual=r, out=out) is out
    np.testing.assert_array_equal(out, y)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize(
    ("shape", "k", "stride", "pads"),
    [
        ((1, 56, 56, 64), (1, 64, 256), 1, (0, 0, 0, 0)),  # ResNet bottleneck 1x1
        ((1, 28, 28, 32), (3, 32, 32), 1, (1, 1, 1, 1)),  # 3x3 stride 1
        ((1, 28, 28, 16), (3, 16, 24), 2, (0, 1, 0, 1)),  # 3x3 stride 2, TF SAME
        ((2, 30, 30, 3), (7, 3, 16), 2, (2, 3, 2, 3)),  # the stem
        ((1, 14, 14, 32), (1, 32, 48), 2, (0, 0, 0, 0)),  # strided 1x1 shortcut
    ],
)
def test_resnet_like_shapes_match_torch(layout, shape, k, stride, pads):
    rng = np.random.default_rng(1)
    ksz, cin, cout = k
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((ksz, ksz, cin, cout)) / np.sqrt(ksz * ksz * cin)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    ref = F.relu(
        torch_conv_nchw(
            np.ascontiguousarray(x.transpose(0, 3, 1, 2)),
            np.ascontiguousarray(w.transpose(3, 2, 0, 1)),
            (stride, stride),
            (1, 1),
            pads,
            1,
            b,
        )
    ).numpy()
    if layout == "NHWC":
        plan = conv.plan_conv2d(
            w, layout="NHWC", strides=(stride, stride), pads=pads, bias=b, activation="relu"
        )
        got = conv.conv2d(plan, x).transpose(0, 3, 1, 2)
    else:
        plan = conv.plan_conv2d(
            np.ascontiguousarray(w.transpose(3, 2, 0, 1)),
            layout="NCHW",
            strides=(stride, stride),
            pads=pads,
            bias=b,
            activation="relu",
        )
        got = conv.conv2d(plan, np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_float64_and_float16():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 6, 6, 4))
    w = rng.standard_normal((3, 3, 4, 5))
    ref = direct_conv_nhwc(x, w, (1, 1), (1, 1), (1, 1, 1, 1), 1)
    y = conv.conv2d(conv.plan_conv2d(w, layout="NHWC", pads=(1, 1, 1, 1)), x)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)
    p16 = conv.plan_conv2d(
        w.astype(np.float16), layout="NHWC", pads=(1, 1, 1, 1), activation="relu"
    )
    y16 = conv.conv2d(p16, x.astype(np.float16))
    assert y16.dtype == np.float16
    np.testing.assert_allclose(y16, np.maximum(ref, 0), rtol=2e-2, atol=5e-2)


def test_output_shape_with_unknown_dims_and_same_pads():
    shape = conv.conv2d_output_shape(
        (None, 224, None, 3), (7, 7, 3, 64), layout="NHWC", strides=(2, 2), pads=(2, 3, 2, 3)
    )
    assert shape == (None, 112, None, 64)
    assert conv.conv2d_output_shape(
        (8, 3, 224, 224), (64, 3, 7, 7), layout="NCHW", strides=(2, 2), pads=(3, 3, 3, 3)
    ) == (8, 64, 112, 112)
    # TensorFlow SAME: 224 -> 112 with a 7x7 stride-2 window pads 2 before and 3 after.
    assert conv.same_pads((1, 224, 224, 3), (7, 7, 3, 64), layout="NHWC", strides=(2, 2)) == (
        2,
        3,
        2,
        3,
    )
    assert conv.same_pads((1, 3, 5, 5), (4, 3, 3, 3), layout="NCHW", dilations=(2, 2)) == (
        2,
        2,
        2,
        2,
    )


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@settings(max_examples=25)
@given(case=conv_cases())
def test_gradients_match_torch_autograd(layout, case):
    rng = np.random.default_rng(case["seed"])
    g = case["groups"]
    xt = torch.tensor(
        rng.standard_normal((case["n"], case["cin"], case["h"], case["w"])),
        dtype=torch.float64,
        requires_grad=True,
    )
    wt = torch.tensor(
        rng.standard_normal((case["cout"], case["cin"] // g, case["kh"], case["kw"])),
        dtype=torch.float64,
        requires_grad=True,
    )
    pt, pb, pl, pr = case["pads"]
    yt = F.conv2d(
        F.pad(xt, (pl, pr, pt, pb)),
        wt,
        stride=case["strides"],
        dilation=case["dilations"],
        groups=g,
    )
    dyt = torch.tensor(rng.standard_normal(tuple(yt.shape)), dtype=torch.float64)
    yt.backward(dyt)
    x, w, dy = xt.detach().numpy(), wt.detach().numpy(), dyt.numpy()
    dx_ref, dw_ref = xt.grad.numpy(), wt.grad.numpy()
    if layout == "NHWC":
        x, dy, dx_ref = (a.transpose(0, 2, 3, 1) for a in (x, dy, dx_ref))
        w, dw_ref = w.transpose(2, 3, 1, 0), dw_ref.transpose(2, 3, 1, 0)
    attrs = dict(
        layout=layout,
        strides=case["strides"],
        dilations=case["dilations"],
        pads=case["pads"],
        groups=g,
    )
    dx = conv.conv2d_backprop_input(np.array(x.shape), w, dy, **attrs)
    dw = conv.conv2d_backprop_filter(x, w.shape, dy, **attrs)
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dw, dw_ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize(
    ("stride", "dilation", "pad", "output_padding", "groups"),
    [(1, 1, 0, 0, 1), (2, 1, 1, 1, 1), (3, 2, 2, 2, 1), (2, 1, 0, 1, 2), (2, 1, 1, 0, 4)],
)
def test_conv2d_transpose_matches_torch(layout, stride, dilation, pad, output_padding, groups):
    rng = np.random.default_rng(3)
    cin, cout_g = 4, 3
    x = rng.standard_normal((2, cin, 5, 4)).astype(np.float32)
    w_iohw = rng.standard_normal((cin, cout_g, 3, 3)).astype(np.float32)
    b = rng.standard_normal(cout_g * groups).astype(np.float32)
    ref = F.conv_transpose2d(
        torch.from_numpy(x),
        torch.from_numpy(w_iohw),
        torch.from_numpy(b),
        stride=stride,
        padding=pad,
        output_padding=output_padding,
        groups=groups,
        dilation=dilation,
    ).numpy()
    attrs = dict(
        strides=(stride, stride),
        dilations=(dilation, dilation),
        pads=(pad,) * 4,
        groups=groups,
        output_padding=(output_padding,) * 2,
        bias=b,
    )
    if layout == "NCHW":
        got = conv.conv2d_transpose(x, w_iohw, layout="NCHW", **attrs)
    else:
        got = conv.conv2d_transpose(
            np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
            np.ascontiguousarray(w_iohw.transpose(2, 3, 1, 0)),
            layout="NHWC",
            **attrs,
        ).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_errors_are_op_errors():
    w = np.ones((3, 3, 4, 8), np.float32)
    with pytest.raises(OpError, match="layout"):
        conv.plan_conv2d(w, layout="NHCW")
    with pytest.raises(OpError, match="groups"):
        conv.plan_conv2d(w, layout="NHWC", groups=3)
    with pytest.raises(OpError, match="strides"):
        conv.plan_conv2d(w, layout="NHWC", strides=(0, 1))
    with pytest.raises(OpError, match="pads"):
        conv.plan_conv2d(w, layout="NHWC", pads=(1, 1))
    with pytest.raises(OpError, match="bias"):
        conv.plan_conv2d(w, layout="NHWC", bias=np.ones(4, np.float32))
    with pytest.raises(OpError, match="activation"):
        conv.plan_conv2d(w, layout="NHWC", activation="swish2")
    with pytest.raises(OpError, match="dtype"):
        conv.plan_conv2d(w.astype(np.int32), layout="NHWC")
    plan = conv.plan_conv2d(w, layout="NHWC")
    with pytest.raises(OpError, match="channels"):
        conv.conv2d(plan, np.ones((1, 5, 5, 3), np.float32))
    with pytest.raises(OpError, match="smaller than"):
        conv.conv2d(plan, np.ones((1, 2, 5, 4), np.float32))
    with pytest.raises(OpError, match="rank-4"):
        conv.conv2d(plan, np.ones((5, 5, 4), np.float32))
    with pytest.raises(OpError, match="dtype"):
        conv.conv2d(plan, np.ones((1, 5, 5, 4), np.float64))
    with pytest.raises(OpError, match="out"):
        conv.conv2d(plan, np.ones((1, 5, 5, 4), np.float32), out=np.empty((1, 3, 3, 7), np.float32))
    with pytest.raises(OpError, match="residual"):
        conv.conv2d(
            plan, np.ones((1, 5, 5, 4), np.float32), residual=np.empty((1, 3, 3, 7), np.float32)
        )
    with pytest.raises(OpError, match="dy"):
        conv.conv2d_backprop_input(
            (1, 5, 5, 4), w, np.ones((1, 4, 3, 8), np.float32), layout="NHWC"
        )
    with pytest.raises(OpError, match="output_padding"):
        conv.conv2d_transpose(
            np.ones((1, 3, 3, 8), np.float32), w, layout="NHWC", output_padding=(1, 1)
        )


def test_plan_copies_the_filter_and_is_reusable_across_threads():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(4)
    w = rng.standard_normal((3, 3, 8, 8)).astype(np.float32)
    plan = conv.plan_conv2d(w, layout="NHWC", pads=(1, 1, 1, 1), activation="relu")
    w_orig = w.copy()
    w[...] = 0
    xs = [rng.standard_normal((1, 10, 10, 8)).astype(np.float32) for _ in range(8)]
    refs = [np.maximum(direct_conv_nhwc(x, w_orig, (1, 1), (1, 1), (1, 1, 1, 1), 1), 0) for x in xs]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda x: conv.conv2d(plan, x), xs))
    for got, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize(
    ("k", "stride", "pads", "groups", "algorithm"),
    [
        (1, 1, (0, 0, 0, 0), 1, "gemm"),
        (1, 2, (0, 0, 0, 0), 1, "gemm"),
        (3, 1, (1, 1, 1, 1), 1, "winograd"),
        (3, 2, (0, 1, 0, 1), 2, "gemm"),
        (3, 1, (1, 1, 1, 1), 16, "depthwise"),
    ],
)
def test_numpy_gemm_fallback_matches(monkeypatch, layout, k, stride, pads, groups, algorithm):
    """Without oneDNN the same kernels run on NumPy's BLAS, serially, with the same results."""
    from pytfrt.backends.cpu import _blas

    monkeypatch.setattr(_blas, "_load", lambda: None)
    assert _blas.backend() == "numpy"
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 9, 10, 16)).astype(np.float32)
    w = rng.standard_normal((k, k, 16 // groups, 16)).astype(np.float32)
    res = direct_conv_nhwc(x, w, (stride, stride), (1, 1), pads, groups)
    ref = np.maximum(res + 1.0, 0)
    if layout == "NCHW":
        x, w = x.transpose(0, 3, 1, 2).copy(), w.transpose(3, 2, 0, 1).copy()
    plan = conv.plan_conv2d(
        w,
        layout=layout,
        strides=(stride, stride),
        pads=pads,
        groups=groups,
        bias=np.ones(16, np.float32),
        activation="relu",
        algorithm=algorithm,
    )
    y = conv.conv2d(plan, x)
    if layout == "NCHW":
        y = y.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_auto_algorithm_choice():
    # The built-in cost model (oneDNN's primitive, when installed, runs before it).
    w3 = np.ones((3, 3, 512, 512), np.float32)
    plan = conv.plan_conv2d(w3, layout="NHWC", pads=(1, 1, 1, 1))
    # Batch 1 on 7x7: F(4x4)'s transformed filter (4x the filter) costs more than it saves.
    assert plan.builtin_algorithm_for((1, 7, 7, 512)) == "winograd2"
    assert plan.builtin_algorithm_for((8, 7, 7, 512)) == "winograd4"
    assert (
        conv.plan_conv2d(
            w3, layout="NHWC", pads=(1, 1, 1, 1), algorithm="winograd"
        ).builtin_algorithm_for((8, 7, 7, 512))
        == "winograd4"
    )
    assert conv.plan_conv2d(w3, layout="NHWC", strides=(2, 2)).builtin_algorithm_for(
        (1, 8, 8, 512)
    ) == ("gemm")
    small = conv.plan_conv2d(np.ones((3, 3, 4, 4), np.float32), layout="NHWC")
    assert small.builtin_algorithm_for((1, 56, 56, 4)) == "gemm"  # too few channels to transform
    dw = conv.plan_conv2d(np.ones((3, 3, 1, 8), np.float32), layout="NHWC", groups=8)
    assert dw.builtin_algorithm_for((1, 4, 4, 8)) == "depthwise"
    ms = {a: conv.estimate_ms(plan, (1, 56, 56, 512), a) for a in ("gemm", "winograd4")}
    assert ms["winograd4"] < ms["gemm"]
    with pytest.raises(OpError, match="winograd"):
        conv.plan_conv2d(w3, layout="NHWC", strides=(2, 2), algorithm="winograd")
    with pytest.raises(OpError, match="depthwise"):
        conv.plan_conv2d(w3, layout="NHWC", algorithm="depthwise")
    with pytest.raises(OpError, match="algorithm"):
        conv.plan_conv2d(w3, layout="NHWC", algorithm="fft")


def test_parallel_for_runs_every_shard_once_and_reraises():
    import threading

    from pytfrt.backends.cpu._parallel import chunks, parallel_for

    seen: list[int] = []
    lock = threading.Lock()

    def record(i: int) -> None:
        with lock:
            seen.append(i)

    parallel_for(record, 50)
    assert sorted(seen) == list(range(50))

    def fail(i: int) -> None:
        if i == 3:
            raise ValueError("shard 3")

    with pytest.raises(ValueError, match="shard 3"):
        parallel_for(fail, 8)
    # Several callers at once share the helpers and each gets all its shards.
    totals = [0] * 6

    def caller(c: int) -> None:
        parts = [0] * 40
        parallel_for(lambda i: parts.__setitem__(i, i), 40)
        totals[c] = sum(parts)

    threads = [threading.Thread(target=caller, args=(c,)) for c in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert totals == [sum(range(40))] * 6
    covered = [i for a, b in chunks(103, 4, 10) for i in range(a, b)]
    assert covered == list(range(103)) and all(b - a <= 10 for a, b in chunks(103, 4, 10))


def test_scratch_is_reused_per_thread_and_role():
    from pytfrt.backends.cpu._scratch import scratch

    a = scratch("test-role", (4, 8), np.float32)
    b = scratch("test-role", (2, 8), np.float32)
    assert np.shares_memory(a, b) and b.ctypes.data % 64 == 0
    c = scratch("test-role-2", (4, 8), np.float32)
    assert not np.shares_memory(a, c)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize(
    ("k", "groups", "algorithm"),
    [(1, 1, "gemm"), (3, 1, "gemm"), (3, 1, "winograd"), (3, 8, "depthwise")],
)
def test_out_may_be_the_residual(layout, k, groups, algorithm):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 6, 7, 8)).astype(np.float32)
    w = rng.standard_normal((k, k, 8 // groups, 8)).astype(np.float32)
    res = rng.standard_normal((1, 6, 7, 8)).astype(np.float32)
    pads = (k // 2,) * 4
    ref = np.maximum(direct_conv_nhwc(x, w, (1, 1), (1, 1), pads, groups) + res, 0)
    if layout == "NCHW":
        x, res = (a.transpose(0, 3, 1, 2).copy() for a in (x, res))
        w = w.transpose(3, 2, 0, 1).copy()
    plan = conv.plan_conv2d(
        w, layout=layout, pads=pads, groups=groups, activation="relu", algorithm=algorithm
    )
    assert conv.conv2d(plan, x, residual=res, out=res) is res
    got = res.transpose(0, 2, 3, 1) if layout == "NCHW" else res
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_out_overlapping_the_input_is_an_error():
    plan = conv.plan_conv2d(np.ones((1, 1, 4, 4), np.float32), layout="NHWC")
    x = np.ones((1, 3, 3, 4), np.float32)
    with pytest.raises(OpError, match="overlap"):
        conv.conv2d(plan, x, out=x)
