"""``-tg-fuse-attention-grad`` and the ``attention_grad`` / ``attention_probs`` kernels: scaled
dot-product attention's backward and forward as TensorFlow writes them (``[B, S, H, D]`` heads
moved to the front by transposes around batched matmuls) become one op each; the compiled
results are checked against a float64 NumPy forward and the gradients against its central
finite differences, for random shapes, batches and values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu.graph_kernels import graph_ops
from pytfrt.backends.cpu.ops import OpError
from pytfrt.compiler.api import compile_module, parse_graph

# ruff: noqa: E501 (the MLIR modules below keep one op a line)


def _module(sq: int, sk: int, h: int, d: int, flags: bool) -> str:
    """The forward ``o = softmax(0.5 * Q K^T) V`` and, for ``dy``, its backward as TF imports it
    (the softmax gradient written out, as ``-tg-fuse-softmax-grad`` expects it).  ``flags``: the
    products' other forms (matmul transpose flags, results transposed the other way, no scale)."""
    q, k, sc = f"?x{sq}x{h}x{d}xf32", f"?x{sk}x{h}x{d}xf32", f"?x{h}x{sq}x{sk}xf32"
    qh, kh, kht, qht = f"?x{h}x{sq}x{d}xf32", f"?x{h}x{sk}x{d}xf32", f"?x{h}x{d}x{sk}xf32", f"?x{h}x{d}x{sq}xf32"
    head = f"""func.func @main(%q: tensor<{q}>, %k: tensor<{k}>, %v: tensor<{k}>, %dy: tensor<{q}>) -> (tensor<{q}>, tensor<{q}>, tensor<{k}>, tensor<{k}>) {{
  %c = "tg.constant"() {{value = dense<{1.0 if flags else 0.5}> : tensor<f32>}} : () -> tensor<f32>
  %qt = "tg.transpose"(%q) {{perm = [0, 2, 1, 3]}} : (tensor<{q}>) -> tensor<{qh}>
  %kt = "tg.transpose"(%k) {{perm = [0, 2, 3, 1]}} : (tensor<{k}>) -> tensor<{kht}>
  %s = "tg.matmul"(%qt, %kt) : (tensor<{qh}>, tensor<{kht}>) -> tensor<{sc}>
  %ss = "tg.mul"(%s, %c) : (tensor<{sc}>, tensor<f32>) -> tensor<{sc}>
  %p = "tg.softmax"(%ss) {{axis = 3}} : (tensor<{sc}>) -> tensor<{sc}>
  %vt = "tg.transpose"(%v) {{perm = [0, 2, 1, 3]}} : (tensor<{k}>) -> tensor<{kh}>
  %o = "tg.matmul"(%p, %vt) : (tensor<{sc}>, tensor<{kh}>) -> tensor<{qh}>
  %o4 = "tg.transpose"(%o) {{perm = [0, 2, 1, 3]}} : (tensor<{qh}>) -> tensor<{q}>
  %dyt = "tg.transpose"(%dy) {{perm = [0, 2, 1, 3]}} : (tensor<{q}>) -> tensor<{qh}>
  %vT = "tg.transpose"(%v) {{perm = [0, 2, 3, 1]}} : (tensor<{k}>) -> tensor<{kht}>
  %dp = "tg.matmul"(%dyt, %vT) : (tensor<{qh}>, tensor<{kht}>) -> tensor<{sc}>
  %m = "tg.mul"(%dp, %p) : (tensor<{sc}>, tensor<{sc}>) -> tensor<{sc}>
  %r = "tg.reduce_sum"(%m) {{axes = [3], keepdims = true}} : (tensor<{sc}>) -> tensor<?x{h}x{sq}x1xf32>
  %b = "tg.sub"(%dp, %r) : (tensor<{sc}>, tensor<?x{h}x{sq}x1xf32>) -> tensor<{sc}>
  %g = "tg.mul"(%b, %p) : (tensor<{sc}>, tensor<{sc}>) -> tensor<{sc}>
"""
    if not flags:
        body = f"""  %dyT = "tg.transpose"(%dy) {{perm = [0, 2, 3, 1]}} : (tensor<{q}>) -> tensor<{qht}>
  %dvt = "tg.matmul"(%dyT, %p) : (tensor<{qht}>, tensor<{sc}>) -> tensor<{kht}>
  %dv = "tg.transpose"(%dvt) {{perm = [0, 3, 1, 2]}} : (tensor<{kht}>) -> tensor<{k}>
  %ds = "tg.mul"(%g, %c) : (tensor<{sc}>, tensor<f32>) -> tensor<{sc}>
  %kk = "tg.transpose"(%k) {{perm = [0, 2, 1, 3]}} : (tensor<{k}>) -> tensor<{kh}>
  %dqt = "tg.matmul"(%ds, %kk) : (tensor<{sc}>, tensor<{kh}>) -> tensor<{qh}>
  %dq = "tg.transpose"(%dqt) {{perm = [0, 2, 1, 3]}} : (tensor<{qh}>) -> tensor<{q}>
  %dsT = "tg.transpose"(%ds) {{perm = [0, 1, 3, 2]}} : (tensor<{sc}>) -> tensor<?x{h}x{sk}x{sq}xf32>
  %dkt = "tg.matmul"(%dsT, %qt) : (tensor<?x{h}x{sk}x{sq}xf32>, tensor<{qh}>) -> tensor<{kh}>
  %dk = "tg.transpose"(%dkt) {{perm = [0, 2, 1, 3]}} : (tensor<{kh}>) -> tensor<{k}>
"""
    else:
        body = f"""  %dvt = "tg.matmul"(%p, %dyt) {{transpose_a = true}} : (tensor<{sc}>, tensor<{qh}>) -> tensor<{kh}>
  %dv = "tg.transpose"(%dvt) {{perm = [0, 2, 1, 3]}} : (tensor<{kh}>) -> tensor<{k}>
  %dqt = "tg.matmul"(%kt, %g) {{transpose_b = true}} : (tensor<{kht}>, tensor<{sc}>) -> tensor<{qht}>
  %dq = "tg.transpose"(%dqt) {{perm = [0, 3, 1, 2]}} : (tensor<{qht}>) -> tensor<{q}>
  %dkt = "tg.matmul"(%g, %qt) {{transpose_a = true}} : (tensor<{sc}>, tensor<{qh}>) -> tensor<{kh}>
  %dk = "tg.transpose"(%dkt) {{perm = [0, 2, 1, 3]}} : (tensor<{kh}>) -> tensor<{k}>
"""
    tail = f"""  func.return %o4, %dq, %dk, %dv : tensor<{q}>, tensor<{q}>, tensor<{k}>, tensor<{k}>
}}
"""
    return head + body + tail


SHAPES = [(3, 5, 2, 4, False), (4, 4, 3, 2, True)]


@pytest.fixture(scope="module")
def modules():  # type: ignore[no-untyped-def]
    out = {}
    for shape in SHAPES:
        gm = parse_graph(_module(*shape))
        out[shape] = (gm, compile_module(gm))
    return out


def _forward64(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    qh, kh, vh = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
    s = scale * qh @ kh.swapaxes(-1, -2)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((e / e.sum(axis=-1, keepdims=True)) @ vh).transpose(0, 2, 1, 3)  # type: ignore[no-any-return]


def _finite_differences(q: np.ndarray, k: np.ndarray, v: np.ndarray, dy: np.ndarray,
                        scale: float) -> list[np.ndarray]:
    """d/d(q, k, v) of sum(dy * o) by central differences in float64."""
    args = [x.astype(np.float64) for x in (q, k, v)]
    eps = 1e-6
    grads = []
    for i, a in enumerate(args):
        g = np.zeros_like(a)
        for idx in np.ndindex(*a.shape):
            plus, minus = [x.copy() for x in args], [x.copy() for x in args]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            g[idx] = (np.sum(dy * _forward64(plus[0], plus[1], plus[2], scale))
                      - np.sum(dy * _forward64(minus[0], minus[1], minus[2], scale))) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("shape", SHAPES)
def test_backward_is_one_op(modules, shape) -> None:  # type: ignore[no-untyped-def]
    gm, _ = modules[shape]
    names = [op.name for op in gm.function("main").body.block.ops]
    assert names.count("tg.attention_grad") == 1 and names.count("tg.attention_probs") == 1
    for gone in ("tg.softmax_grad", "tg.reduce_sum", "tg.softmax", "tg.matmul", "tg.transpose"):
        assert gone not in names


@settings(max_examples=6, deadline=None)
@given(which=st.sampled_from(SHAPES), batch=st.integers(1, 2), spread=st.floats(0.1, 3.0),
       seed=st.integers(0, 2**31 - 1))
def test_gradients_match_finite_differences(modules, which, batch: int, spread: float,  # type: ignore[no-untyped-def]
                                            seed: int) -> None:
    _, model = modules[which]
    sq, sk, h, d, flags = which
    rng = np.random.default_rng(seed)
    q = (rng.normal(size=(batch, sq, h, d)) * spread).astype(np.float32)
    k, v = ((rng.normal(size=(batch, sk, h, d)) * spread).astype(np.float32) for _ in range(2))
    dy = rng.normal(size=q.shape).astype(np.float32)
    scale = 1.0 if flags else 0.5
    o, dq, dk, dv = (np.asarray(x) for x in model(q, k, v, dy))
    np.testing.assert_allclose(o, _forward64(q, k, v, scale), rtol=1e-5, atol=1e-5)
    for got, want in zip((dq, dk, dv), _finite_differences(q, k, v, dy, scale), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def test_kernels_float64_and_errors() -> None:
    """The NumPy paths (float64) agree with the compiled float32 ones; bad operands raise."""
    kernel, forward = graph_ops()["attention_grad"], graph_ops()["attention_probs"]
    rng = np.random.default_rng(5)
    q = rng.normal(size=(2, 3, 2, 4))
    k, v = (rng.normal(size=(2, 5, 2, 4)) for _ in range(2))
    dy = rng.normal(size=q.shape)
    s = np.einsum("bihd,bjhd->bhij", q, k) * 0.3
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    y, p64 = forward(q, k, v, scale=0.3)
    np.testing.assert_allclose(p64, p, rtol=1e-12)
    np.testing.assert_allclose(y, np.einsum("bhij,bjhd->bihd", p, v), rtol=1e-12)
    y32, p32 = forward(*(x.astype(np.float32) for x in (q, k, v)), scale=0.3)
    assert y32.dtype == p32.dtype == np.float32
    np.testing.assert_allclose(p32, p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y32, y, rtol=1e-5, atol=1e-5)
    with pytest.raises(OpError, match="attention_probs"):
        forward(q, k[:, :, :1], v, scale=1.0)
    want = kernel(q, k, v, p, dy, scale=0.3)
    got = kernel(*(x.astype(np.float32) for x in (q, k, v, p, dy)), scale=0.3)
    for g, w, x in zip(got, want, (q, k, v), strict=True):
        assert g.dtype == np.float32 and w.dtype == np.float64 and w.shape == x.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    with pytest.raises(OpError, match="attention_grad"):
        kernel(q, k, v, p[:, :, :2], dy, scale=1.0)
    with pytest.raises(OpError, match="attention_grad"):
        kernel(q.astype(np.float32), k, v, p, dy, scale=1.0)
    with pytest.raises(OpError, match="attention_grad"):
        kernel(q[0], k, v, p, dy, scale=1.0)
