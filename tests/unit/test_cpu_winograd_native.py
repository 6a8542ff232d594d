"""The native Winograd convolution (:mod:`pytfrt.backends.cpu._winograd_native`) against
PyTorch's float64 convolution: random shapes (images not multiples of the tile, odd channel
counts, pads of any size), bias, residual in place, activations, F(4x4) and F(2x2), on the
spin pool's threads and on one thread, through :func:`conv.conv2d` and the runner's short path
(``auto`` and forced), the fallback without the C module, concurrent callers, and a compiled
ONNX model against ONNX Runtime."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _parallel, _spin_pool, conv
from pytfrt.backends.cpu import _winograd_native as wn

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.skipif(not wn.available(), reason="no C compiler or no AVX2/AVX-512F")
ISAS = [pytest.param(i, id=name) for i, name in enumerate(("avx512", "avx2"))]


@pytest.fixture(params=ISAS)
def isa(request, monkeypatch):
    """Each kernel version this CPU runs (the AVX2 one through ``wn.ISA`` on an AVX-512 CPU)."""
    if not wn.part_addresses()[request.param]:
        pytest.skip("the CPU lacks this instruction set")
    monkeypatch.setattr(wn, "ISA", "avx2" if request.param else None)
    assert wn._part_address() == wn.part_addresses()[request.param]
    return request.param


ACTS = {"none": 0, "relu": 1, "relu6": 2, "leaky_relu": 3}
REL = {4: 2e-5, 2: 2e-6}
"""Largest error allowed relative to the reference's largest magnitude (float32 rounding of
the transforms: F(4x4) measured ~7e-6 with 128 channels, F(2x2) ~4e-7)."""


def _reference(x, w, b, pads, act, alpha, residual):
    """``act(conv(x, w) + b + residual)`` in float64 PyTorch (NHWC, HWIO, pads t, b, l, r)."""
    xt = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2)
    xt = F.pad(xt, (pads[2], pads[3], pads[0], pads[1]))
    wt = torch.from_numpy(w.astype(np.float64)).permute(3, 2, 0, 1)
    y = F.conv2d(xt, wt, None if b is None else torch.from_numpy(b.astype(np.float64)))
    y = y.permute(0, 2, 3, 1)
    if residual is not None:
        y = y + torch.from_numpy(residual.astype(np.float64))
    y = {"none": lambda t: t, "relu": F.relu, "relu6": F.relu6,
         "leaky_relu": lambda t: F.leaky_relu(t, alpha)}[act](y)
    return y.numpy()


def _case(rng, n, h, w, cin, cout, bias):
    x = rng.standard_normal((n, h, w, cin)).astype(np.float32)
    f = (rng.standard_normal((3, 3, cin, cout)) / (3 * cin ** 0.5)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    return x, f, b


def _close(got, want, tile):
    scale = max(float(np.max(np.abs(want))), 1.0)
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    assert err <= REL[tile] * scale, (err, scale)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), h=st.integers(1, 19), w=st.integers(1, 19),
       cin=st.integers(1, 40), cout=st.integers(1, 70), bias=st.booleans(),
       res=st.booleans(), act=st.sampled_from(list(ACTS)), tile=st.sampled_from([4, 2]),
       pads=st.tuples(*[st.integers(0, 2)] * 4), threads=st.sampled_from([1, 2]),
       avx2=st.booleans(), seed=st.integers(0, 2**16))
def test_launcher_against_torch(n, h, w, cin, cout, bias, res, act, tile, pads, threads, avx2,
                                seed):
    oh, ow = h + pads[0] + pads[1] - 2, w + pads[2] + pads[3] - 2
    if oh < 1 or ow < 1:
        return
    rng = np.random.default_rng(seed)
    x, f, b = _case(rng, n, h, w, cin, cout, bias)
    alpha = 0.1
    wc = wn.WinoConv(f, b, pads, ACTS[act], alpha, tile)
    y = rng.standard_normal((n, oh, ow, cout)).astype(np.float32)
    r = y.copy() if res else None
    if avx2 and not wn.part_addresses()[1]:
        return
    old, old_isa = _parallel.num_threads, wn.ISA
    try:
        _parallel.num_threads = lambda: threads  # type: ignore[assignment]
        wn.ISA = "avx2" if avx2 else None
        go = wc.launcher(x.shape, y.shape, res)
    finally:
        _parallel.num_threads, wn.ISA = old, old_isa  # type: ignore[assignment]
    go(x, y)
    _close(y, _reference(x, f, b, pads, act, alpha, r), tile)
    if not res:  # again into the same buffer (nothing of the last call left)
        go(x, y)
        _close(y, _reference(x, f, b, pads, act, alpha, None), tile)


@pytest.mark.parametrize("tile", [4, 2])
@pytest.mark.parametrize("shape", [(1, 56, 56, 64, 64), (2, 28, 28, 128, 128),
                                   (1, 30, 29, 48, 80), (1, 9, 7, 256, 272)])
def test_network_layers_in_parts(monkeypatch, tile, shape, isa):
    """ResNet-like layers (many tile blocks: several parts) with bias, ReLU and the residual
    in place, on the spin pool when there are two threads (its trace shows the job's parts),
    and on one thread."""
    n, h, w, cin, cout = shape
    rng = np.random.default_rng(h)
    x, f, b = _case(rng, n, h, w, cin, cout, True)
    r = rng.standard_normal((n, h, w, cout)).astype(np.float32)
    want = _reference(x, f, b, (1, 1, 1, 1), "relu", 0.0, r)
    for threads in (2, 1):
        monkeypatch.setattr(_parallel, "num_threads", lambda t=threads: t)
        wc = wn.WinoConv(f, b, (1, 1, 1, 1), 1, 0.0, tile)
        go = wc.launcher(x.shape, r.shape, True)
        ctx = wc.context(x.shape, r.shape, True, threads)
        nparts = int(ctx[wn.C_NPARTS])
        assert nparts > 1 or threads == 1
        go(x, r.copy())  # the first call may make the pool
        _spin_pool.trace(np.zeros(1 << 14, np.int64))
        for _ in range(4):  # (a call finding the pool's slots taken runs on this thread)
            y = r.copy()
            go(x, y)
            _close(y, want, tile)
        records = _spin_pool.trace(None)
        if threads == 2 and records is not None and _spin_pool._pool is not None:
            jobs = records[records[:, 0] == -1]
            assert len(jobs) >= 1 and (jobs[:, 1] == nparts).all()  # jobs of call parts
            parts = records[records[:, 0] >= 0, 1]  # each job ran every part once
            assert sorted(parts) == sorted(list(range(nparts)) * len(jobs))


def test_concurrent_callers_of_one_launcher():
    """Two threads calling the same launcher at once: the second runs on its own thread with
    its own context copy; every result is right."""
    rng = np.random.default_rng(3)
    x, f, b = _case(rng, 2, 40, 40, 32, 32, True)
    wc = wn.WinoConv(f, b, (1, 1, 1, 1), 1, 0.0, 4)
    go = wc.launcher(x.shape, x.shape[:3] + (32,), False)
    xs = [rng.standard_normal(x.shape).astype(np.float32) for _ in range(2)]
    wants = [_reference(xi, f, b, (1, 1, 1, 1), "relu", 0.0, None) for xi in xs]
    errors = []

    def work(k):
        y = np.empty(xs[k].shape[:3] + (32,), np.float32)
        for _ in range(20):
            go(xs[k], y)
            try:
                _close(y, wants[k], 4)
            except AssertionError as exc:  # pragma: no cover - reported below
                errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize("algorithm", ["auto", "winograd_native"])
@pytest.mark.parametrize("mode", ["none", "operand", "in place"])
def test_plans_and_runner(algorithm, mode):
    """``auto`` picks the native Winograd for a 28x28 64-channel layer (oneDNN for a 6x6
    one), ``winograd_native`` forces it; :func:`conv.conv2d` and the runner's short path give
    the reference's result with each residual mode."""
    rng = np.random.default_rng(5)
    x, f, b = _case(rng, 1, 28, 28, 64, 64, True)
    plan = conv.plan_conv2d(f, layout="NHWC", pads=(1, 1, 1, 1), bias=b, activation="relu",
                            algorithm=algorithm)
    assert plan.wino_native
    assert plan.algorithm_for((1, 28, 28, 64)) == "winograd_native"
    assert plan.algorithm_for((1, 6, 6, 64)) == (
        "winograd_native" if algorithm == "winograd_native" or plan.dnnl is None else "dnnl")
    r = rng.standard_normal((1, 28, 28, 64)).astype(np.float32)
    want = _reference(x, f, b, (1, 1, 1, 1), "relu", 0.0, None if mode == "none" else r)
    if mode == "none":
        got = conv.conv2d(plan, x)
    elif mode == "operand":
        got = conv.conv2d(plan, x, r)
    else:
        got = r.copy()
        conv.conv2d(plan, x, got, out=got)
    _close(got, want, 4)
    run = conv.runner(plan)
    for _ in range(3):  # the first call fills the short path's table, the next ones use it
        out = r.copy()
        y = run(x, None if mode == "none" else (r if mode == "operand" else out), out=out)
        assert y is out
        _close(out, want, 4)


def test_fallback_without_the_module(monkeypatch):
    """Without the C module (no compiler): ``auto`` keeps oneDNN or the built-in algorithms,
    a forced ``winograd_native`` runs the Numba Winograd; results still right."""
    monkeypatch.setattr(wn.module, "enabled", False)
    assert not wn.available()
    rng = np.random.default_rng(7)
    x, f, b = _case(rng, 1, 30, 30, 16, 24, True)
    want = _reference(x, f, b, (1, 1, 1, 1), "relu", 0.0, None)
    for algorithm in ("auto", "winograd_native"):
        plan = conv.plan_conv2d(f, layout="NHWC", pads=(1, 1, 1, 1), bias=b,
                                activation="relu", algorithm=algorithm)
        assert not plan.wino_native
        assert plan.algorithm_for((1, 30, 30, 24)) != "winograd_native"
        _close(conv.conv2d(plan, x), want, 4)


def test_switch_off_and_other_activations():
    """``_winograd_native.ENABLED`` off, or an activation the kernel does not apply
    (sigmoid): ``auto`` plans do not take it."""
    rng = np.random.default_rng(9)
    _, f, b = _case(rng, 1, 28, 28, 32, 32, True)
    assert not conv.plan_conv2d(f, layout="NHWC", pads=(1, 1, 1, 1), bias=b,
                                activation="sigmoid").wino_native
    plan = conv.plan_conv2d(f, layout="NHWC", pads=(1, 1, 1, 1), bias=b)
    assert plan.wino_native and plan.algorithm_for((1, 28, 28, 32)) == "winograd_native"
    old = wn.ENABLED
    try:
        wn.ENABLED = False
        assert plan.algorithm_for((1, 28, 28, 32)) != "winograd_native"
    finally:
        wn.ENABLED = old


def _onnx_model(c):
    """Two 3x3 convolutions on a 32x32 image (c channels): ReLU, then the input added back and
    ReLU (a residual block)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes = [], []
    for name in ("a", "b"):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((c, c, 3, 3)) / (3 * c ** 0.5)).astype(np.float32), name + "_w"))
        inits.append(numpy_helper.from_array(
            (0.1 * rng.standard_normal(c)).astype(np.float32), name + "_b"))
    nodes.append(helper.make_node("Conv", ["x", "a_w", "a_b"], ["a_c"], pads=[1] * 4,
                                  kernel_shape=[3, 3]))
    nodes.append(helper.make_node("Relu", ["a_c"], ["a"]))
    nodes.append(helper.make_node("Conv", ["a", "b_w", "b_b"], ["b_c"], pads=[1] * 4,
                                  kernel_shape=[3, 3]))
    nodes.append(helper.make_node("Add", ["b_c", "x"], ["s"]))
    nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    graph = helper.make_graph(
        nodes, "wino", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_compiled_onnx_model_matches_onnxruntime(tmp_path, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    import onnx

    import pytfrt

    ran = []
    launcher = wn.WinoConv.launcher

    def counting(self, *args):
        ran.append(args[0])
        return launcher(self, *args)

    monkeypatch.setattr(wn.WinoConv, "launcher", counting)
    path = tmp_path / "wino.onnx"
    onnx.save(_onnx_model(48), str(path))
    model = pytfrt.compile(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (1, 2, 1):
        x = np.random.default_rng(n).standard_normal((n, 48, 32, 32)).astype(np.float32)
        want = sess.run(None, {"x": x})[0]
        got = np.asarray(model(x=x))  # the single output
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * np.abs(want).max())
    assert ran  # both convolutions ran the native Winograd


def _blocked(x):
    """NHWC -> (N, C/16, H, W, 16) by index arithmetic (independent of the kernels)."""
    n, h, w, c = x.shape
    out = np.empty((n, c // 16, h, w, 16), x.dtype)
    for k in range(c):
        out[:, k // 16, :, :, k % 16] = x[:, :, :, k]
    return out


@pytest.mark.parametrize("shape", [(1, 14, 14, 64, 32), (2, 7, 7, 32, 48), (8, 7, 7, 32, 32)])
@pytest.mark.parametrize("res", [False, True])
def test_blocked_layout(shape, res, isa):
    """``NCHW16c`` images (:class:`_dnnl_blocked.BlockedConv`'s) with bias, ReLU and the
    residual in place; F(4x4) or F(2x2) by the number of tiles."""
    from pytfrt.backends.cpu._dnnl_blocked import BlockedConv

    n, h, w, cin, cout = shape
    rng = np.random.default_rng(cin)
    x, f, b = _case(rng, n, h, w, cin, cout, True)
    r = rng.standard_normal((n, h, w, cout)).astype(np.float32)
    want = _blocked(_reference(x, f, b, (1, 1, 1, 1), "relu", 0.0, r if res else None))
    wc = wn.WinoConv(f, b, (1, 1, 1, 1), 1, 0.0, blocked=True)
    y = _blocked(r)
    wc.launcher(_blocked(x).shape, y.shape, res)(_blocked(x), y)
    _close(y, want, wn.tile_for(n, h, w))
    conv_ = BlockedConv(f, b, strides=(1, 1), dilations=(1, 1), pads=(1, 1, 1, 1), groups=1,
                        activation="relu", alpha=0.0)
    assert conv_._wino_runs(y.shape)
    run = conv_.runner()
    for _ in range(3):  # the first call fills the short path's table
        out = _blocked(r)
        assert run(_blocked(x), out if res else None, out) is out
        _close(out, want, wn.tile_for(n, h, w))


@pytest.mark.parametrize("width", [64, 16])
@pytest.mark.parametrize("tile", [4, 2])
@pytest.mark.parametrize("cin,cout", [(17, 33), (64, 200), (3, 16)])
def test_packed_filter_is_the_transformed_filter_reordered(tile, cin, cout, width):
    """The C packing against ``_winograd.filter_transform`` (NumPy, float64) laid out by hand:
    per position, per block of ``width`` columns (zero-padded to a multiple of 16), rows of the
    block."""
    from pytfrt.backends.cpu import _winograd

    f = np.random.default_rng(cout).standard_normal((3, 3, cin, cout)).astype(np.float32)
    u = _winograd.filter_transform(f, tile)
    ne, coutp = u.shape[0], -(-cout // 16) * 16
    up = np.zeros((ne, cin, coutp), np.float32)
    up[:, :, :cout] = u
    want = np.concatenate([up[:, :, j:j + width].reshape(ne, -1)
                           for j in range(0, coutp, width)], axis=1).ravel()
    np.testing.assert_allclose(wn.pack_filter(f, tile, width), want, rtol=1e-6, atol=1e-7)
