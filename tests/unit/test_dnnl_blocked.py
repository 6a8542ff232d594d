"""Channel-blocked (``NCHW16c``) convolutions, reorders and global pooling
(:mod:`pytfrt.backends.cpu._dnnl_blocked`) against PyTorch and NumPy, and ``-tg-dnnl-blocked``
in a compiled ONNX model against ONNX Runtime (channel counts that are not multiples of 16
stay NHWC)."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu import _dnnl_blocked as bl
from pytfrt.backends.cpu import _dnnl_conv
from pytfrt.backends.cpu.ops import OpError

torch = pytest.importorskip("torch")

TOL = dict(rtol=1e-4, atol=1e-4)


def _blocked(x: np.ndarray) -> np.ndarray:
    """NHWC -> (N, C/16, H, W, 16) by index arithmetic (independent of the kernels)."""
    n, h, w, c = x.shape
    out = np.empty((n, c // 16, h, w, 16), x.dtype)
    for k in range(c):
        out[:, k // 16, :, :, k % 16] = x[:, :, :, k]
    return out


def _reference(x, w, b, stride, pad, residual):
    y = torch.nn.functional.conv2d(
        torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(w).permute(3, 2, 0, 1),
        torch.from_numpy(b), stride=stride, padding=pad,
    ).permute(0, 2, 3, 1).numpy()
    if residual is not None:
        y = y + residual
    return np.maximum(y, 0.0)


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("shape", [(1, 5, 3, 48), (3, 5, 3, 48), (1, 14, 14, 96),
                                   (2, 14, 14, 64)])
def test_reorder_both_ways(monkeypatch, fallback, shape):
    """Small images on the calling thread, larger ones in parts (channel blocks at batch 1,
    batch items else) on both threads, and NumPy's copy without oneDNN."""
    if fallback:
        monkeypatch.setattr(bl, "_reorder_launcher", lambda *a: None)
    n, h, w, c = shape
    x = np.random.default_rng(n * h).standard_normal(shape).astype(np.float32)
    y = bl.reorder(x, "NHWC", "NCHW16c")
    assert y.shape == (n, c // 16, h, w, 16)
    np.testing.assert_array_equal(y, _blocked(x))
    out = np.empty_like(x)
    assert bl.reorder(y, "NCHW16c", "NHWC", out=out) is out
    np.testing.assert_array_equal(out, x)
    with pytest.raises(OpError, match="multiple of 16"):
        bl.reorder(x[..., :40], "NHWC", "NCHW16c")
    assert bl.reorder(x, "NHWC", "NCHW16c", out=y) is y  # again: the kept primitives
    np.testing.assert_array_equal(y, _blocked(x))
    with pytest.raises(OpError, match="not supported"):
        bl.reorder(x, "NHWC", "NCHW")


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("shape,strides", [((1, 28, 28, 512), (2, 2)), ((1, 15, 13, 48), (2, 2)),
                                           ((2, 9, 10, 32), (3, 2)), ((1, 5, 7, 16), (1, 3))])
def test_reorder_subsampled(monkeypatch, fallback, shape, strides):
    """NHWC -> NCHW16c of every sh-th row and sw-th column (odd sizes: the last row or column
    read is the last one that a 1x1 convolution of those strides reads), against index
    arithmetic on NumPy's strided view; on both threads for the large image."""
    if fallback:
        monkeypatch.setattr(bl, "_reorder_launcher", lambda *a: None)
    sh, sw = strides
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    want = _blocked(np.ascontiguousarray(x[:, ::sh, ::sw, :]))
    out = np.full(want.shape, np.nan, np.float32)
    for _ in range(2):  # the kept primitives the second time
        assert bl.reorder(x, "NHWC", "NCHW16c", out, strides=strides) is out
        np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(bl.reorder(x, "NHWC", "NCHW16c", strides=strides), want)


def test_reorder_subsampled_rejects_bad_strides():
    x = np.zeros((1, 4, 4, 16), np.float32)
    with pytest.raises(OpError, match="NHWC -> NCHW16c only"):
        bl.reorder(_blocked(x), "NCHW16c", "NHWC", strides=(2, 2))
    with pytest.raises(OpError, match="two positive integers"):
        bl.reorder(x, "NHWC", "NCHW16c", strides=(0, 2))
    with pytest.raises(OpError, match="two positive integers"):
        bl.reorder(x, "NHWC", "NCHW16c", strides=(2,))


def test_global_avg_pool_blocked():
    x = np.random.default_rng(0).standard_normal((2, 7, 7, 64)).astype(np.float32)
    y = bl.global_avg_pool(_blocked(x))
    assert y.shape == (2, 4, 1, 1, 16)
    np.testing.assert_allclose(y.reshape(2, 64), x.mean(axis=(1, 2)), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not _dnnl_conv.available(), reason="needs oneDNN")
@pytest.mark.parametrize("k,stride,cin,cout,n", [
    (1, 1, 64, 256, 1), (3, 1, 32, 48, 1), (3, 2, 48, 32, 1), (1, 2, 32, 64, 2),
    (3, 1, 256, 256, 1)])
def test_blocked_conv_matches_torch(k, stride, cin, cout, n):
    rng = np.random.default_rng(k * cin + cout)
    w = (rng.standard_normal((k, k, cin, cout)) * 0.05).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    pad = k // 2
    conv = bl.BlockedConv(w, b, strides=(stride, stride), dilations=(1, 1), pads=(pad,) * 4,
                          groups=1, activation="relu", alpha=0.0)
    assert conv.dnnl is not None
    x = rng.standard_normal((n, 14, 14, cin)).astype(np.float32)
    xb = _blocked(x)
    ref = _reference(x, w, b, stride, pad, None)
    run = conv.runner()
    for _ in range(2):  # the first call makes the primitives, the second takes the short path
        out = np.empty(conv.output_shape(xb.shape), np.float32)
        assert run(xb, None, out) is out
        np.testing.assert_allclose(out, _blocked(ref), **TOL)
    assert conv.dnnl.impl(xb.shape).startswith(("jit", "brg"))
    r = rng.standard_normal(ref.shape).astype(np.float32)
    ref_r = _blocked(_reference(x, w, b, stride, pad, r))
    for _ in range(2):  # the residual in the output buffer (the planner's in-place residual)
        out = _blocked(r)
        assert run(xb, out, out) is out
        np.testing.assert_allclose(out, ref_r, **TOL)
    np.testing.assert_allclose(conv(xb, _blocked(r)), ref_r, **TOL)  # a separate residual
    assert np.array_equal(conv.filter(), w)  # read back from oneDNN's copy


def test_blocked_conv_without_onednn(monkeypatch):
    """No oneDNN primitive (nor the native Winograd): the NHWC plan on reordered operands."""
    from pytfrt.backends.cpu import _winograd_native

    monkeypatch.setattr(bl.dc, "make", lambda *a: None)
    monkeypatch.setattr(_winograd_native.module, "enabled", False)
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((3, 3, 16, 32)) * 0.1).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    conv = bl.BlockedConv(w, b, strides=(1, 1), dilations=(1, 1), pads=(1, 1, 1, 1),
                          groups=1, activation="relu", alpha=0.0)
    assert conv.dnnl is None and conv.runner() is conv
    x = rng.standard_normal((2, 6, 6, 16)).astype(np.float32)
    r = rng.standard_normal((2, 6, 6, 32)).astype(np.float32)
    np.testing.assert_allclose(conv(_blocked(x), _blocked(r)),
                               _blocked(_reference(x, w, b, 1, 1, r)), **TOL)


def test_blocked_conv_rejects_bad_operands():
    w = np.zeros((1, 1, 16, 24), np.float32)
    with pytest.raises(OpError, match="multiples of 16"):
        bl.BlockedConv(w, None, strides=(1, 1), dilations=(1, 1), pads=(0,) * 4, groups=1,
                       activation="none", alpha=0.0)
    conv = bl.BlockedConv(np.zeros((1, 1, 16, 16), np.float32), None, strides=(1, 1),
                          dilations=(1, 1), pads=(0,) * 4, groups=1, activation="none",
                          alpha=0.0)
    with pytest.raises(OpError, match="input of 16 channels"):
        conv(np.zeros((1, 2, 4, 4, 16), np.float32))
    with pytest.raises(OpError, match="residual"):
        conv(np.zeros((1, 1, 4, 4, 16), np.float32), np.zeros((1, 1, 2, 2, 16), np.float32))


def _onnx_model():
    """A bottleneck block on 8x8 (32 -> 48 -> 48 -> 32 channels, the input as residual, the
    middle one a 3x3 window), a
    1x1 convolution and the global pool; the block's output also feeds a 1x1 convolution to 40
    channels (not a multiple of 16: NHWC) and one 40 -> 40 after it."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def conv(name, x, cin, cout, k, relu=True):
        w = (rng.standard_normal((cout, cin, k, k)) * (1.0 / (k * k * cin) ** 0.5))
        inits.append(numpy_helper.from_array(w.astype(np.float32), name + "_w"))
        inits.append(numpy_helper.from_array(
            rng.standard_normal(cout).astype(np.float32) * 0.1, name + "_b"))
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"],
                                      [name + ("_c" if relu else "")],
                                      pads=[k // 2] * 4, kernel_shape=[k, k]))
        if relu:
            nodes.append(helper.make_node("Relu", [name + "_c"], [name]))
        return name

    a = conv("a", "x", 32, 48, 1)
    b = conv("b", a, 48, 48, 3)
    c = conv("c", b, 48, 32, 1, relu=False)
    nodes.append(helper.make_node("Add", [c, "x"], ["s"]))
    nodes.append(helper.make_node("Relu", ["s"], ["r"]))
    d = conv("d", "r", 32, 32, 1)
    nodes.append(helper.make_node("GlobalAveragePool", [d], ["pooled"]))
    e = conv("e", "r", 32, 40, 1)
    f = conv("f", e, 40, 40, 3)
    graph = helper.make_graph(
        nodes, "blocked", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         ["N", 32, 8, 8])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, None),
         helper.make_tensor_value_info(f, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.skipif(not _dnnl_conv.available(), reason="needs oneDNN")
def test_compiled_model_matches_onnxruntime(tmp_path, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    import onnx

    import pytfrt
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.passes import DEFAULT_PIPELINE, run_passes

    path = tmp_path / "blocked.onnx"
    onnx.save(_onnx_model(), str(path))
    # too few multiply-adds for what its four reorders copy: the run stays NHWC
    assert "NCHW16c" not in str(run_passes(to_graph(str(path)), DEFAULT_PIPELINE).module)
    monkeypatch.setattr(bl, "BLOCKED_MIN_MACS_PER_MOVED", 0)
    gm = run_passes(to_graph(str(path)), DEFAULT_PIPELINE)
    text = str(gm.module)
    convs = [line for line in text.splitlines() if '"tg.conv2d"' in line]
    blocked = [line for line in convs if 'layout = "NCHW16c"' in line]
    # a, c, d blocked; b (a 3x3 window on 64 pixels) NHWC between two reorders; e and f (40
    # channels) NHWC
    assert len(convs) == 6 and len(blocked) == 3
    assert sum("x40xf32>" in line for line in convs if line not in blocked) == 2
    assert text.count('"tg.reorder_layout"') == 4  # into the block, around b, back for e
    pools = [line for line in text.splitlines() if '"tg.global_avg_pool"' in line]
    assert len(pools) == 1 and 'layout = "NCHW16c"' in pools[0]
    model = pytfrt.compile(str(path))  # (still without the multiply-add rule)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (1, 2, 1):
        x = np.random.default_rng(n).standard_normal((n, 32, 8, 8)).astype(np.float32)
        want = sess.run(None, {"x": x})
        got = model(x=x)
        got = list(got.values()) if isinstance(got, dict) else list(got)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-5)


def _strided_entry_model():
    """A 1x1 stride-2 projection 16x16x64 -> 8x8x256 (the strided entry; 256 input pixels,
    more than the blocked layout's 196), a 3x3 stride-2 convolution from the same image
    (NHWC: not 1x1), a 1x1 widening of its result with the projection as residual, a
    narrowing 1x1, and the global pool -- the shape of ResNet-50's stage-3 entry, small."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    inits, nodes = [], []

    def conv(name, x, cin, cout, k, stride=1, relu=True):
        w = (rng.standard_normal((cout, cin, k, k)) * (1.0 / (k * k * cin) ** 0.5))
        inits.append(numpy_helper.from_array(w.astype(np.float32), name + "_w"))
        inits.append(numpy_helper.from_array(
            rng.standard_normal(cout).astype(np.float32) * 0.1, name + "_b"))
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"],
                                      [name + ("_c" if relu else "")], pads=[k // 2] * 4,
                                      kernel_shape=[k, k], strides=[stride, stride]))
        if relu:
            nodes.append(helper.make_node("Relu", [name + "_c"], [name]))
        return name

    p = conv("p", "x", 64, 256, 1, stride=2, relu=False)
    a = conv("a", "x", 64, 64, 3, stride=2)
    b = conv("b", a, 64, 256, 1, relu=False)
    nodes.append(helper.make_node("Add", [b, p], ["s"]))
    nodes.append(helper.make_node("Relu", ["s"], ["r"]))
    c = conv("c", "r", 256, 64, 1)
    d = conv("d", c, 64, 256, 1, relu=False)
    nodes.append(helper.make_node("Add", [d, "r"], ["t"]))
    nodes.append(helper.make_node("GlobalAveragePool", ["t"], ["pooled"]))
    graph = helper.make_graph(
        nodes, "entry", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                       ["N", 64, 15, 16])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.skipif(not _dnnl_conv.available(), reason="needs oneDNN")
@pytest.mark.parametrize("entry", [True, False])
def test_strided_entry_matches_onnxruntime(tmp_path, monkeypatch, entry):
    """The strided 1x1 projection reads a subsampling reorder and runs blocked at stride 1
    (an odd input height: 15 rows -> 8); with the entry off it stays NHWC."""
    ort = pytest.importorskip("onnxruntime")
    import onnx

    import pytfrt
    from pytfrt.compiler.api import to_graph
    from pytfrt.compiler.passes import DEFAULT_PIPELINE, run_passes

    path = tmp_path / "entry.onnx"
    onnx.save(_strided_entry_model(), str(path))
    monkeypatch.setattr(bl, "BLOCKED_STRIDED_ENTRY", entry)
    monkeypatch.setattr(bl, "BLOCKED_MIN_MACS_PER_MOVED", 0)
    text = str(run_passes(to_graph(str(path)), DEFAULT_PIPELINE).module)
    reorders = [line for line in text.splitlines() if '"tg.reorder_layout"' in line]
    convs = [line for line in text.splitlines() if '"tg.conv2d"' in line]
    blocked = [line for line in convs if 'layout = "NCHW16c"' in line]
    if entry:  # the projection's subsampled input, the 3x3 layer's output
        assert len(reorders) == 2 and sum("strides = [2" in r for r in reorders) == 1
        assert "x15x16x64xf32>) -> tensor<?x4x8x8x16xf32>" in reorders[0] + reorders[1]
        assert len(blocked) == 4
    else:  # the projection on NHWC (here the run, two convolutions, is too short to keep)
        assert not any("strides = [" in r for r in reorders) and len(blocked) < 4
    model = pytfrt.compile(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (1, 2, 1):
        x = np.random.default_rng(n).standard_normal((n, 64, 15, 16)).astype(np.float32)
        want = sess.run(None, {"x": x})[0]
        got = model(x=x)
        if isinstance(got, dict):
            (got,) = got.values()
        elif isinstance(got, (list, tuple)):
            (got,) = got
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_specialized_reorder_layout(strides):
    """The compiled models' bound ``reorder_layout``: the prepared native reorder for kept
    shapes into a fitting ``out``; a new shape, no ``out``, a strided ``out`` or input, and
    the way back all give the general function's result (against index arithmetic)."""
    from pytfrt.backends.cpu.graph_nn import reorder_layout

    sh, sw = strides
    to = reorder_layout.specialize({}, src_layout="NHWC", dst_layout="NCHW16c",
                                   strides=strides)
    back = reorder_layout.specialize({}, src_layout="NCHW16c", dst_layout="NHWC")
    rng = np.random.default_rng(3)
    for shape in [(1, 14, 14, 64), (1, 14, 14, 64), (2, 5, 7, 32), (1, 28, 28, 512)]:
        x = rng.standard_normal(shape).astype(np.float32)
        want = _blocked(np.ascontiguousarray(x[:, ::sh, ::sw, :]))
        out = np.full(want.shape, np.nan, np.float32)
        assert to(x, out) is out
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(to(x), want)  # no out: a new array
        wide = np.full(want.shape[:-1] + (32,), np.nan, np.float32)
        assert to(x, wide[..., :16]) is not None  # a strided out: through the general path
        np.testing.assert_array_equal(wide[..., :16], want)
        if strides == (1, 1):
            plain = np.full(x.shape, np.nan, np.float32)
            assert back(want, plain) is plain
            np.testing.assert_array_equal(plain, x)
    strided = rng.standard_normal((1, 6, 6, 64)).astype(np.float32)[:, :, :, :32]
    np.testing.assert_array_equal(to(strided), _blocked(np.ascontiguousarray(
        strided[:, ::sh, ::sw, :])))
    with pytest.raises(OpError, match="float32"):
        to(np.zeros((1, 4, 4, 16)))  # float64: the general path's error


@pytest.mark.parametrize("shape", [(1, 7, 7, 2048), (1, 9, 5, 496), (1, 2, 2, 32)])
def test_global_avg_pool_blocked_split(shape):
    """One large batch-1 image: oneDNN average poolings of channel-block runs on both threads
    (odd block counts and windows), through the general function and the compiled models'
    bound one (which also takes a strided ``out`` and a float64 input to the general path);
    a small image on the calling thread.  Against NumPy's float64 mean."""
    from pytfrt.backends.cpu.graph_nn import global_avg_pool

    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    n, h, w, c = shape
    want = x.astype(np.float64).mean(axis=(1, 2)).reshape(n, c // 16, 1, 1, 16)
    xb = _blocked(x)
    bound = global_avg_pool.specialize({}, layout="NCHW16c")
    for run in (bl.global_avg_pool, bound, bound):  # the bound one keeps its launcher
        out = np.full(want.shape, np.nan, np.float32)
        assert run(xb, out) is out
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    wide = np.full(want.shape[:-1] + (32,), np.nan, np.float32)
    bound(xb, wide[..., :16])
    np.testing.assert_allclose(wide[..., :16], want, rtol=1e-5, atol=1e-6)
    with pytest.raises(OpError, match="float32"):
        bound(xb.astype(np.float64), None)
    if _dnnl_conv.available() and x.size >= bl.POOL_SPLIT_MIN_ELEMENTS:
        assert bl.pool_launcher(xb.shape) is not None
