"""``tg.squeeze_excite``: the kernel against a NumPy float64 oracle, and
``-tg-fuse-squeeze-excite`` on built graphs against the unoptimised graph."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu.ops import OpError
from pytfrt.backends.cpu.squeeze_excite import squeeze_excite
from pytfrt.compiler import GraphBuilder, GraphModule
from pytfrt.compiler.api import compile_module
from pytfrt.compiler.passes import default_pipeline


def _oracle(x, w1, b1, w2, b2, layout, activation, gate, ga=1 / 6, gb=0.5):  # type: ignore[no-untyped-def]
    ax = (1, 2) if layout == "NHWC" else (2, 3)
    s = x.astype(np.float64).mean(axis=ax)
    h = s @ w1.astype(np.float64) + b1
    h = {"relu": np.maximum(h, 0), "silu": h / (1 + np.exp(-h)), "none": h}[activation]
    g = h @ w2.astype(np.float64) + b2
    g = 1 / (1 + np.exp(-g)) if gate == "sigmoid" else np.clip(ga * g + gb, 0, 1)
    g = g[:, None, None, :] if layout == "NHWC" else g[:, :, None, None]
    return x.astype(np.float64) * g


def _weights(rng, c, r, dtype):  # type: ignore[no-untyped-def]
    return [rng.standard_normal(s).astype(dtype) * 0.5 for s in ((c, r), (r,), (r, c), (c,))]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("activation,gate", [("relu", "hard_sigmoid"), ("silu", "sigmoid"),
                                             ("none", "sigmoid")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_matches_numpy(layout, activation, gate, dtype):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    c, r = 24, 6
    shape = (3, 5, 7, c) if layout == "NHWC" else (3, c, 5, 7)
    x = rng.standard_normal(shape).astype(dtype) + 0.3
    ws = _weights(rng, c, r, dtype)
    want = _oracle(x, *ws, layout, activation, gate)
    tol = 2e-6 if dtype == np.float32 else 1e-12
    y = squeeze_excite(x, *ws, layout=layout, activation=activation, gate=gate)
    assert y.dtype == dtype and y.shape == shape
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)
    # in place (out is x) and into a strided out=
    xi = x.copy()
    assert squeeze_excite(xi, *ws, layout=layout, activation=activation, gate=gate, out=xi) is xi
    np.testing.assert_allclose(xi, want, rtol=tol, atol=tol)
    big = np.zeros((2 * shape[0], *shape[1:]), dtype)
    out = big[::2]
    squeeze_excite(x, *ws, layout=layout, activation=activation, gate=gate, out=out)
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    assert not big[1::2].any()


@pytest.mark.parametrize("c,r,pixels", [(5, 3, (3, 3)), (16, 4, (7, 5)), (37, 70, (2, 9)),
                                         (63, 8, (4, 4)), (130, 64, (3, 1)), (144, 48, (3, 5)),
                                         (81, 20, (13, 1)), (200, 33, (2, 2)),
                                         (300, 16, (3, 3))])
def test_the_c_kernel_at_block_edges(c, r, pixels):  # type: ignore[no-untyped-def]
    """The C kernel's blocked loops against the float64 oracle: channel sums of fewer than
    64 channels (blocks of 16 channels, four interleaved pixel sums: odd pixel counts and
    channels past the last block), of more (groups of eight pixels, blocks of 64 then 16
    channels, then single channels), the fully connected layers' blocks of 64, 48, 32 and 16
    outputs (with outputs past the last block), the input left unchanged, and in place."""
    from pytfrt.backends.cpu import _se_native

    mod = _se_native.module()
    if mod is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(c)
    x = (rng.standard_normal((1, *pixels, c)) + 0.3).astype(np.float32)
    ws = _weights(rng, c, r, np.float32)
    want = _oracle(x, *ws, "NHWC", "silu", "sigmoid")
    x3 = x.reshape(1, -1, c)
    y = np.full_like(x3, np.nan)
    x.flags.writeable = False
    mod.se(x3, *ws, 6, 0.0, 0, 0.0, 0.0, True, y)
    np.testing.assert_allclose(y.reshape(x.shape), want, rtol=2e-6, atol=2e-6)
    xi = x3.copy()
    mod.se(xi, *ws, 6, 0.0, 0, 0.0, 0.0, True, xi)
    np.testing.assert_array_equal(xi, y)


@pytest.mark.parametrize("act", [0, 6])
def test_the_c_kernels_sigmoid_over_floats_range(act):  # type: ignore[no-untyped-def]
    """The C gate's float32 sigmoid (``act`` 0) and the hidden layer's SiLU (``act`` 6) against
    float64 from -87 to 88 and past it (the gate is the second layer's bias: zero weights),
    and at the edges: NaN stays NaN, inf gives 1, -inf (nearly) 0."""
    from pytfrt.backends.cpu import _se_native

    mod = _se_native.module()
    if mod is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(act)
    v = np.concatenate([np.linspace(-87, 88, 4001), rng.standard_normal(999) * 8,
                        [0.0, -0.0, 1e-30, -1e-30, -87.0, 88.0]]).astype(np.float32)
    n = v.size
    h, g = np.empty(n, np.float32), np.empty(n, np.float32)
    z = np.zeros(n, np.float32)
    want = 1 / (1 + np.exp(-v.astype(np.float64)))
    if act == 0:
        mod.excite(z, np.zeros((n, 1), np.float32), z[:1], np.zeros((1, n), np.float32), v,
                   0, 0.0, 0, 0.0, 0.0, h[:1], g)
        got = g
    else:  # the hidden layer of an identity first layer: its SiLU
        eye = np.eye(n, dtype=np.float32)
        mod.excite(v, eye, z, eye, z, 6, 0.0, 0, 0.0, 0.0, h, g)
        got, want = h, v * want
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=1e-37)
    edges = np.float32([np.nan, np.inf, -np.inf, -100.0, 100.0])
    mod.excite(np.zeros(5, np.float32), np.zeros((5, 1), np.float32), z[:1],
               np.zeros((1, 5), np.float32), edges, 0, 0.0, 0, 0.0, 0.0, h[:1], g[:5])
    assert np.isnan(g[0]) and g[1] == 1.0 and g[4] == 1.0
    assert 0.0 <= g[2] < 1e-37 and 0.0 <= g[3] < 1e-37


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_float32_without_the_c_kernels(monkeypatch, layout):  # type: ignore[no-untyped-def]
    # no C compiler: the Numba kernels (and the C ones, the default) meet the same oracle
    from pytfrt.backends.cpu import _se_native, pooling

    monkeypatch.setattr(_se_native.module, "enabled", False)
    rng = np.random.default_rng(3)
    c, r = 40, 10
    shape = (1, 9, 11, c) if layout == "NHWC" else (1, c, 9, 11)
    x = rng.standard_normal(shape).astype(np.float32)
    ws = _weights(rng, c, r, np.float32)
    y = squeeze_excite(x, *ws, layout=layout, activation="relu", gate="hard_sigmoid")
    np.testing.assert_allclose(y, _oracle(x, *ws, layout, "relu", "hard_sigmoid"), rtol=2e-6,
                               atol=2e-6)
    means = pooling.global_avg_pool(x, layout=layout)
    np.testing.assert_allclose(means, x.astype(np.float64).mean(
        axis=(1, 2) if layout == "NHWC" else (2, 3), keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("n,h,w", [(1, 33, 32), (1, 2, 520), (1, 34, 31), (3, 12, 30)])
@pytest.mark.parametrize("one_image", [False, True])
def test_large_inputs_split_over_the_threads(monkeypatch, n, h, w, one_image):  # type: ignore[no-untyped-def]
    """NHWC float32 of at least ``_dnnl_se.SPLIT_MIN_ELEMENTS``: batch bands on both threads,
    and row bands of one image with ``ONE_IMAGE`` (oneDNN pooling and binary primitives,
    folds 4, 4, 31, 5) when available; one image on the calling thread by default.  The same
    results either way."""
    from pytfrt.backends.cpu import _dnnl_se, _parallel

    monkeypatch.setattr(_dnnl_se, "ONE_IMAGE", one_image)
    if n == 1 and not one_image:
        c = 64
        assert not _dnnl_se.run(np.zeros((1, h, w, c), np.float32),
                                np.zeros((1, h, w, c), np.float32), lambda m, g: None)
    rng = np.random.default_rng(h)
    c, r = 64, 8
    x = rng.standard_normal((n, h, w, c)).astype(np.float32) + 0.3
    assert x.size >= _dnnl_se.SPLIT_MIN_ELEMENTS
    ws = _weights(rng, c, r, np.float32)
    want = _oracle(x, *ws, "NHWC", "silu", "sigmoid")
    y = squeeze_excite(x, *ws, activation="silu", gate="sigmoid")
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=2e-6)
    xi = x.copy()  # in place
    assert squeeze_excite(xi, *ws, activation="silu", gate="sigmoid", out=xi) is xi
    np.testing.assert_allclose(xi, want, rtol=2e-6, atol=2e-6)
    if _dnnl_se.dc.available() and _parallel.num_threads() >= 2 and (n > 1 or one_image):
        assert _dnnl_se._plans.get((n, h, w, c)) is not None  # the split path ran


def test_a_strided_input_and_gate_parameters():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 9, 8, 10)).astype(np.float32)[:, ::2, 1:]
    ws = _weights(rng, 10, 3, np.float32)
    y = squeeze_excite(x, *ws, layout="NHWC", gate="hard_sigmoid", gate_alpha=0.2,
                       gate_beta=0.4)
    np.testing.assert_allclose(y, _oracle(x, *ws, "NHWC", "relu", "hard_sigmoid", 0.2, 0.4),
                               rtol=2e-6, atol=2e-6)


def test_errors():
    rng = np.random.default_rng(2)
    x = np.ones((1, 2, 2, 4), np.float32)
    w1, b1, w2, b2 = _weights(rng, 4, 2, np.float32)
    with pytest.raises(OpError, match="w1 \\[C, R\\]"):
        squeeze_excite(x, w1.T, b1, w2, b2)
    with pytest.raises(OpError, match="float32 or all float64"):
        squeeze_excite(x.astype(np.float64), w1, b1, w2, b2)
    with pytest.raises(OpError, match="unknown gate"):
        squeeze_excite(x, w1, b1, w2, b2, gate="tanh")
    with pytest.raises(OpError, match="unknown activation"):
        squeeze_excite(x, w1, b1, w2, b2, activation="swish2")
    with pytest.raises(OpError, match="rank-4"):
        squeeze_excite(x[0], w1, b1, w2, b2)
    with pytest.raises(OpError, match="out must be"):
        squeeze_excite(x, w1, b1, w2, b2, out=np.empty((1, 2, 2, 3), np.float32))
    with pytest.raises(OpError, match="overlap"):
        big = np.ones((1, 2, 2, 8), np.float32)
        squeeze_excite(big[..., :4], w1, b1, w2, b2, out=big[..., 4:])


def _se_graph(gate: str, bias1: bool, second_user: bool = False) -> GraphModule:
    """NCHW conv -> SE block (torch's export shape) -> conv."""
    rng = np.random.default_rng(3)
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 3, 6, 6), "f32")])
    (x,) = fn.arguments

    def const(*shape: int) -> object:
        return fn.constant(rng.uniform(-1, 1, shape).astype(np.float32))

    y = fn.op("conv2d", [x, const(8, 3, 3, 3)], layout="NCHW", pads=[1, 1, 1, 1])
    p = fn.op("global_avg_pool", [y], layout="NCHW")
    h = fn.op("conv2d", [p, const(2, 8, 1, 1)], layout="NCHW")
    if bias1:
        h = fn.op("add", [h, const(1, 2, 1, 1)])
    h = fn.op("relu" if gate == "hard_sigmoid" else "silu", [h])
    g = fn.op("add", [fn.op("conv2d", [h, const(8, 2, 1, 1)], layout="NCHW"), const(8, 1, 1)])
    g = (fn.op("hard_sigmoid", [g], alpha=1 / 6, beta=0.5) if gate == "hard_sigmoid"
         else fn.op("sigmoid", [g]))
    s = fn.op("mul", [y, g] if gate == "sigmoid" else [g, y])
    out = fn.op("conv2d", [s, const(4, 8, 1, 1)], layout="NCHW")
    fn.returns([out, h] if second_user else [out])
    return gb.finish()


@pytest.mark.parametrize("gate,bias1", [("hard_sigmoid", True), ("sigmoid", False)])
def test_the_pass_fuses_the_block_and_keeps_the_result(gate, bias1):  # type: ignore[no-untyped-def]
    x = np.random.default_rng(4).standard_normal((2, 3, 6, 6)).astype(np.float32)
    want = compile_module(_se_graph(gate, bias1), optimize=False)(x)
    gm = default_pipeline(_se_graph(gate, bias1))
    names = [op.name for op in gm.function().body.block.ops]
    assert names.count("tg.squeeze_excite") == 1
    assert "tg.global_avg_pool" not in names and "tg.mul" not in names
    got = compile_module(gm, optimize=False)(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_block_whose_hidden_value_is_used_elsewhere_is_not_fused():
    gm = default_pipeline(_se_graph("sigmoid", True, second_user=True))
    assert "tg.squeeze_excite" not in [op.name for op in gm.function().body.block.ops]


def test_a_keras_efficientnet_block_through_the_tf_front_end():
    # TensorFlow's graph of Keras' swish (y * sigmoid(1 * y)) and GlobalAveragePooling2D
    # (reduce_mean + reshape): every swish fused into its conv, the block one op; results
    # against Keras itself
    pytest.importorskip("tensorflow")
    import keras

    import pytfrt
    from pytfrt.compiler.api import to_graph

    keras.utils.set_random_seed(0)
    inp = keras.Input((8, 8, 3))
    y = keras.layers.Conv2D(8, 3, padding="same", activation="swish")(inp)
    s = keras.layers.GlobalAveragePooling2D()(y)
    s = keras.layers.Reshape((1, 1, 8))(s)
    s = keras.layers.Conv2D(2, 1, activation="swish")(s)
    s = keras.layers.Conv2D(8, 1, activation="sigmoid")(s)
    out = keras.layers.Conv2D(4, 1)(keras.layers.multiply([y, s]))
    model = keras.Model(inp, out)
    names = [op.name for op in default_pipeline(to_graph(model)).function().body.block.ops]
    assert names.count("tg.squeeze_excite") == 1
    assert not {"tg.sigmoid", "tg.mul", "tg.reduce_mean", "tg.fused_elementwise"} & set(names)
    x = np.random.default_rng(5).standard_normal((2, 8, 8, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(pytfrt.compile(model)(x)), model(x).numpy(),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("shape", [(5, 7), (40, 40)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("one_image", [False, True])
def test_the_specialised_kernel_matches_numpy(monkeypatch, layout, shape, dtype, one_image):  # type: ignore[no-untyped-def]
    """The compiled model's version (weights and attributes bound once): one image straight
    to the kernel (with ``_dnnl_se.ONE_IMAGE`` the 40x40 NHWC float32 one split over the
    threads), in place, into an ``out``; other calls (a batch, a strided input) and errors
    through the general path."""
    from pytfrt.backends.cpu import _dnnl_se

    monkeypatch.setattr(_dnnl_se, "ONE_IMAGE", one_image)
    rng = np.random.default_rng(6)
    c, r = 64, 8
    ws = _weights(rng, c, r, dtype)
    se = squeeze_excite.specialize(dict(enumerate(ws, 1)), layout=layout,  # type: ignore[attr-defined]
                                   activation="silu", gate="hard_sigmoid", gate_alpha=0.2)
    tol = 2e-6 if dtype == np.float32 else 1e-12
    for n in (1, 2):
        dims = (n, *shape, c) if layout == "NHWC" else (n, c, *shape)
        x = rng.standard_normal(dims).astype(dtype) + 0.3
        want = _oracle(x, *ws, layout, "silu", "hard_sigmoid", 0.2)
        np.testing.assert_allclose(se(x, *ws), want, rtol=tol, atol=tol)
        x.flags.writeable = False  # never written unless it is out
        out = np.full(dims, np.nan, dtype)
        assert se(x, *ws, out=out) is out
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
        xi = x.copy()
        assert se(xi, *ws, out=xi) is xi
        np.testing.assert_allclose(xi, want, rtol=tol, atol=tol)
        strided = np.repeat(x, 2, axis=2)[:, :, ::2]
        np.testing.assert_allclose(se(strided, *ws), want, rtol=tol, atol=tol)
    with pytest.raises(OpError, match="w1"):
        se(np.ones((1, 3, 3, 3), dtype), *ws)  # 3 channels, not 64
    dims = (1, *shape, c) if layout == "NHWC" else (1, c, *shape)
    size = int(np.prod(dims))
    buf = np.ones(size + 1, dtype)
    with pytest.raises(OpError, match="overlap"):  # out shifted by one element from x
        se(buf[:size].reshape(dims), *ws, out=buf[1:].reshape(dims))
    assert squeeze_excite.specialize({1: ws[0]}) is None  # type: ignore[attr-defined]
