"""``tg.moments`` and ``tg.sum_and_dot`` against NumPy float64, and ``-tg-fuse-batch-stats`` on
compiled graphs against the same graphs compiled without the passes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu.batch_stats import moments, relu_grad_sums, relu_grad_sums2, sum_and_dot
from pytfrt.backends.cpu.ops import OpError
from pytfrt.compiler.api import compile_module, parse_graph

shapes = st.lists(st.integers(1, 9), min_size=2, max_size=4).map(tuple)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, lead=st.integers(1, 3), keepdims=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_moments_match_numpy(shape, lead, keepdims, dtype, seed):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 5).astype(dtype)  # an offset: cancellation matters
    axes = tuple(range(min(lead, len(shape) - 1)))
    mean, var = moments(x, axes=axes, keepdims=keepdims)
    xd = x.astype(np.float64)
    want_m = xd.mean(axis=axes, keepdims=keepdims)
    want_v = xd.var(axis=axes, keepdims=keepdims)
    assert mean.dtype == dtype and var.dtype == dtype
    tol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(mean, want_m, rtol=tol, atol=tol * 5)
    np.testing.assert_allclose(var, want_v, rtol=tol * 10, atol=tol * 10)


def test_moments_other_axes_and_large_rows() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 33, 17, 24)).astype(np.float32)  # sharded over threads
    m, v = moments(x, axes=[0, 1, 2])
    np.testing.assert_allclose(m.reshape(-1), x.astype(np.float64).mean(axis=(0, 1, 2)),
                               atol=1e-6)
    np.testing.assert_allclose(v.reshape(-1), x.astype(np.float64).var(axis=(0, 1, 2)),
                               rtol=1e-5)
    nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    m2, v2 = moments(nchw, axes=[0, -2, -1], keepdims=False)  # not leading: the NumPy path
    np.testing.assert_allclose(m2, m.reshape(-1), atol=1e-6)
    np.testing.assert_allclose(v2, v.reshape(-1), rtol=1e-5)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, lead=st.integers(1, 3), keepdims=st.booleans(), seed=st.integers(0, 2**16))
def test_sum_and_dot_match_numpy(shape, lead, keepdims, seed):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    axes = tuple(range(min(lead, len(shape) - 1)))
    s, t = sum_and_dot(a, b, axes=axes, keepdims=keepdims)
    ad, bd = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(s, ad.sum(axis=axes, keepdims=keepdims), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t, (ad * bd).sum(axis=axes, keepdims=keepdims), rtol=1e-5,
                               atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, lead=st.integers(1, 3), seed=st.integers(0, 2**16),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_relu_grad_sums_match_numpy(shape, lead, seed, dtype):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    dy, y, b = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    y[..., 0] = 0.0  # ReLU's gradient at 0 is 0, as TF's ReluGrad
    axes = tuple(range(min(lead, len(shape) - 1)))
    g, s, t = relu_grad_sums(dy, y, b, axes=axes)
    want = np.where(y > 0, dy, 0).astype(np.float64)
    np.testing.assert_array_equal(g, want.astype(dtype))
    np.testing.assert_allclose(s, want.sum(axis=axes, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t, (want * b).sum(axis=axes, keepdims=True), rtol=1e-5,
                               atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, lead=st.integers(1, 3), keepdims=st.booleans(), pad=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_per_channel_b_matches_numpy(shape, lead, keepdims, pad, dtype,  # type: ignore[no-untyped-def]
                                     seed):
    """A ``b`` that broadcasts over the reduced axes only (a per-channel vector, with or
    without its leading 1s) takes ``sum(a) * b``: the same values as the product's sum."""
    rng = np.random.default_rng(seed)
    k = min(lead, len(shape) - 1)
    axes = tuple(range(k))
    a, y = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    b = rng.standard_normal(((1,) * k if pad else ()) + shape[k:]).astype(dtype)
    ad, bd = a.astype(np.float64), b.astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    s, t = sum_and_dot(a, b, axes=axes, keepdims=keepdims)
    assert s.dtype == t.dtype == dtype
    np.testing.assert_allclose(s, ad.sum(axis=axes, keepdims=keepdims), rtol=tol, atol=tol)
    np.testing.assert_allclose(t, (ad * bd).sum(axis=axes, keepdims=keepdims), rtol=tol,
                               atol=tol)
    g, s2, t2 = relu_grad_sums(a, y, b, axes=axes, keepdims=keepdims)
    want = np.where(y > 0, a, 0).astype(np.float64)
    np.testing.assert_array_equal(g, want.astype(dtype))
    np.testing.assert_allclose(s2, want.sum(axis=axes, keepdims=keepdims), rtol=tol, atol=tol)
    np.testing.assert_allclose(t2, (want * bd).sum(axis=axes, keepdims=keepdims), rtol=tol,
                               atol=tol)


def test_per_channel_b_large() -> None:
    """Sharded over the helper threads (more rows than one shard)."""
    rng = np.random.default_rng(7)
    a, y = (rng.standard_normal((16, 20, 20, 32)).astype(np.float32) for _ in range(2))
    b = rng.standard_normal((1, 1, 1, 32)).astype(np.float32)
    s, t = sum_and_dot(a, b, axes=[0, 1, 2], keepdims=False)
    np.testing.assert_allclose(t, (a.astype(np.float64) * b).sum(axis=(0, 1, 2)).reshape(-1),
                               rtol=1e-5, atol=1e-4)
    g, s2, t2 = relu_grad_sums(a, y, b, axes=[0, 1, 2], keepdims=False)
    want = np.where(y > 0, a, 0).astype(np.float64)
    np.testing.assert_allclose(t2, (want * b).sum(axis=(0, 1, 2)).reshape(-1), rtol=1e-5,
                               atol=1e-4)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 5), hw=st.lists(st.integers(1, 9), min_size=1, max_size=2),
       c=st.integers(1, 20), one=st.booleans(), seed=st.integers(0, 2**16),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_relu_grad_sums_with_a_pooled_dy(n, hw, c, one, seed,  # type: ignore[no-untyped-def]
                                         dtype):
    """``dy`` one row per batch item (a global average pool's gradient, or one row for all
    with ``one``) against NumPy's broadcast ``relu_grad`` and float64 sums."""
    rng = np.random.default_rng(seed)
    shape = (n, *hw, c)
    y, b = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    dy = rng.standard_normal((1 if one else n, *([1] * len(hw)), c)).astype(dtype)
    axes = tuple(range(len(shape) - 1))
    g, s, t = relu_grad_sums(dy, y, b, axes=axes, keepdims=False)
    want = np.where(y > 0, np.broadcast_to(dy, shape), 0).astype(np.float64)
    np.testing.assert_array_equal(g, want.astype(dtype))
    np.testing.assert_allclose(s, want.sum(axis=axes), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t, (want * b).sum(axis=axes), rtol=1e-5, atol=1e-5)


def test_relu_grad_sums_large_and_errors() -> None:
    rng = np.random.default_rng(5)
    dy, y, b = (rng.standard_normal((32, 16, 16, 8)).astype(np.float32) for _ in range(3))
    g, s, t = relu_grad_sums(dy, y, b, axes=[0, 1, 2], keepdims=False)
    want = np.where(y > 0, dy, 0).astype(np.float64)
    np.testing.assert_array_equal(g, want.astype(np.float32))
    np.testing.assert_allclose(t, (want * b).sum(axis=(0, 1, 2)), rtol=1e-5, atol=1e-4)
    g2, s2, _ = relu_grad_sums(dy, y, b[:1, :1, :1], axes=[0, 1, 2])  # per-channel b
    np.testing.assert_array_equal(g2, g)
    np.testing.assert_allclose(s2.reshape(-1), s, rtol=1e-5, atol=1e-4)
    with pytest.raises(OpError, match="does not broadcast"):
        relu_grad_sums(dy, y[:1], b, axes=[0])
    with pytest.raises(OpError, match="does not broadcast"):
        relu_grad_sums(dy[:, :1, :1, :1].reshape(32, 1, 1), y, b, axes=[0, 1, 2])
    pooled = rng.standard_normal((32, 1, 1, 8)).astype(np.float32)  # sharded rows per item
    g3, _, t3 = relu_grad_sums(pooled, y, b, axes=[0, 1, 2], keepdims=False)
    want3 = np.where(y > 0, np.broadcast_to(pooled, y.shape), 0).astype(np.float64)
    np.testing.assert_array_equal(g3, want3.astype(np.float32))
    np.testing.assert_allclose(t3, (want3 * b).sum(axis=(0, 1, 2)), rtol=1e-5, atol=1e-4)


def test_sum_and_dot_broadcast_and_errors() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    s, t = sum_and_dot(a, b, axes=[0, 1])
    np.testing.assert_allclose(t.reshape(-1), (a * b).sum(axis=(0, 1)), rtol=1e-5)
    with pytest.raises(OpError, match="broadcast to a's shape"):
        sum_and_dot(b, a, axes=[0])
    with pytest.raises(OpError, match="do not broadcast"):
        sum_and_dot(a, np.ones((2,), np.float32), axes=[0])
    with pytest.raises(OpError, match="float32 or float64"):
        sum_and_dot(a.astype(np.int32), a.astype(np.int32), axes=[0])
    with pytest.raises(OpError, match="share one dtype"):
        sum_and_dot(a, a.astype(np.float64), axes=[0])
    with pytest.raises(OpError, match="out of range"):
        moments(a, axes=[3])


# A batch norm's training forward and the gradient sums as TensorFlow's graph has them (the
# per-channel vectors broadcast to the activation's shape, as TF's Mean gradient does).
_GRAPH = """
func.func @main(%x: tensor<?x6x5x4xf32>, %dy: tensor<?x6x5x4xf32>) -> (tensor<?x6x5x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<?x6x5x4xf32>) {
  %m = "tg.reduce_mean"(%x) {axes = [0, 1, 2], keepdims = true} : (tensor<?x6x5x4xf32>) -> tensor<1x1x1x4xf32>
  %d = "tg.squared_difference"(%x, %m) : (tensor<?x6x5x4xf32>, tensor<1x1x1x4xf32>) -> tensor<?x6x5x4xf32>
  %v = "tg.reduce_mean"(%d) {axes = [0, 1, 2], keepdims = true} : (tensor<?x6x5x4xf32>) -> tensor<1x1x1x4xf32>
  %eps = "tg.constant"() {value = dense<1.0e-3> : tensor<f32>} : () -> tensor<f32>
  %ve = "tg.add"(%v, %eps) : (tensor<1x1x1x4xf32>, tensor<f32>) -> tensor<1x1x1x4xf32>
  %r = "tg.rsqrt"(%ve) : (tensor<1x1x1x4xf32>) -> tensor<1x1x1x4xf32>
  %c = "tg.sub"(%x, %m) : (tensor<?x6x5x4xf32>, tensor<1x1x1x4xf32>) -> tensor<?x6x5x4xf32>
  %y = "tg.mul"(%c, %r) : (tensor<?x6x5x4xf32>, tensor<1x1x1x4xf32>) -> tensor<?x6x5x4xf32>
  %z = "tg.relu"(%y) : (tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %g = "tg.relu_grad"(%dy, %z) : (tensor<?x6x5x4xf32>, tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %s = "tg.reduce_sum"(%g) {axes = [0, 1, 2], keepdims = true} : (tensor<?x6x5x4xf32>) -> tensor<1x1x1x4xf32>
  %p = "tg.mul"(%x, %g) : (tensor<?x6x5x4xf32>, tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %t = "tg.reduce_sum"(%p) {axes = [0, 1, 2], keepdims = true} : (tensor<?x6x5x4xf32>) -> tensor<1x1x1x4xf32>
  %sh = "tg.shape"(%d) {out_type = "i32"} : (tensor<?x6x5x4xf32>) -> tensor<4xi32>
  %sh64 = "tg.cast"(%sh) {to = "i64"} : (tensor<4xi32>) -> tensor<4xi64>
  %b = "tg.broadcast_to"(%t, %sh64) : (tensor<1x1x1x4xf32>, tensor<4xi64>) -> tensor<?x?x?x4xf32>
  %n = "tg.constant"() {value = dense<30.0> : tensor<f32>} : () -> tensor<f32>
  %q = "tg.div"(%b, %n) : (tensor<?x?x?x4xf32>, tensor<f32>) -> tensor<?x?x?x4xf32>
  %two = "tg.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %q2 = "tg.mul"(%two, %q) : (tensor<f32>, tensor<?x?x?x4xf32>) -> tensor<?x?x?x4xf32>
  %w = "tg.mul"(%q2, %c) : (tensor<?x?x?x4xf32>, tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %dx = "tg.add"(%g, %w) : (tensor<?x6x5x4xf32>, tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  func.return %z, %v, %s, %dx : tensor<?x6x5x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<?x6x5x4xf32>
}
"""  # noqa: E501


@pytest.mark.parametrize("batch", [1, 7])
def test_pass_keeps_results(batch: int) -> None:
    from pytfrt.compiler.passes import default_pipeline

    gm = default_pipeline(parse_graph(_GRAPH))
    names = [op.name for op in gm.function("main").body.block.ops]
    assert "tg.moments" in names and "tg.relu_grad_sums" in names
    assert "tg.broadcast_to" not in names
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 6, 5, 4)).astype(np.float32) + 2
    dy = rng.standard_normal((batch, 6, 5, 4)).astype(np.float32)
    fast = compile_module(gm, optimize=False)(x, dy)
    plain = compile_module(parse_graph(_GRAPH), optimize=False)(x, dy)
    for a, b in zip(fast, plain, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)


_POOLED = """
func.func @main(%y: tensor<?x4x4x3xf32>, %p: tensor<?x3xf32>) -> (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>) {
  %r = "tg.reshape"(%p) {shape = [-1, 1, 1, 3]} : (tensor<?x3xf32>) -> tensor<?x1x1x3xf32>
  %s = "tg.shape"(%y) {out_type = "i32"} : (tensor<?x4x4x3xf32>) -> tensor<4xi32>
  %s64 = "tg.cast"(%s) {to = "i64"} : (tensor<4xi32>) -> tensor<4xi64>
  %n = "tg.constant"() {value = dense<16.0> : tensor<f32>} : () -> tensor<f32>
  %b = "tg.broadcast_to"(%r, %s64) : (tensor<?x1x1x3xf32>, tensor<4xi64>) -> tensor<?x?x?x3xf32>
  %q = "tg.div"(%b, %n) : (tensor<?x?x?x3xf32>, tensor<f32>) -> tensor<?x?x?x3xf32>
  %g = "tg.relu_grad"(%q, %y) : (tensor<?x?x?x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %g2 = "tg.reshape"(%g) {shape = [-1, 4, 4, 3]} : (tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %sum = "tg.reduce_sum"(%g2) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %m = "tg.mul"(%g2, %y) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %dot = "tg.reduce_sum"(%m) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  func.return %sum, %dot, %g2 : tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>
}
"""  # noqa: E501


@pytest.mark.parametrize("batch", [1, 5])
def test_pooled_gradient_pass_keeps_results(batch: int) -> None:
    """A global average pool's gradient behind a ReLU: compiled with the pass (one
    relu_grad_sums reading the pooled rows) and without, the same results."""
    from pytfrt.compiler.passes import default_pipeline

    gm = default_pipeline(parse_graph(_POOLED))
    names = [op.name for op in gm.function("main").body.block.ops]
    assert "tg.relu_grad_sums" in names and "tg.broadcast_to" not in names
    rng = np.random.default_rng(batch)
    y = rng.standard_normal((batch, 4, 4, 3)).astype(np.float32)
    p = rng.standard_normal((batch, 3)).astype(np.float32)
    fast = compile_module(gm, optimize=False)(y, p)
    plain = compile_module(parse_graph(_POOLED), optimize=False)(y, p)
    for a, b in zip(fast, plain, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, lead=st.integers(1, 3), per_channel=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_relu_grad_sums_of_two_gradients(shape, lead, per_channel, dtype,  # type: ignore[no-untyped-def]
                                         seed):
    """``relu_grad_sums(dy, y, b, dy2)`` (a residual block input's two gradients) is
    ``relu_grad_sums(dy + dy2, y, b)``: ``g`` bit for bit (one float add per element, as the
    ``add`` it replaces), the sums against float64 NumPy."""
    rng = np.random.default_rng(seed)
    k = min(lead, len(shape) - 1)
    axes = tuple(range(k))
    dy, dy2, y = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    y[..., 0] = 0.0
    b = rng.standard_normal(shape[k:] if per_channel else shape).astype(dtype)
    g, s, t = relu_grad_sums(dy, y, b, dy2, axes=axes, keepdims=False)
    total = dy + dy2
    want = np.where(y > 0, total, 0)
    np.testing.assert_array_equal(g, want)
    wd = want.astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(s, wd.sum(axis=axes), rtol=tol, atol=tol)
    np.testing.assert_allclose(t, (wd * b).sum(axis=axes), rtol=tol, atol=tol)


def test_relu_grad_sums_of_two_gradients_large_broadcast_and_errors() -> None:
    """Sharded rows (more than one shard); a ``dy2`` that broadcasts (batch 1) is added as
    ``add`` would first; operands that do not broadcast raise."""
    rng = np.random.default_rng(11)
    dy, dy2, y, b = (rng.standard_normal((8, 14, 14, 64)).astype(np.float32) for _ in range(4))
    g, s, t = relu_grad_sums(dy, y, b, dy2, axes=[0, 1, 2], keepdims=True)
    want = np.where(y > 0, dy + dy2, 0)
    np.testing.assert_array_equal(g, want)
    np.testing.assert_allclose(t, (want.astype(np.float64) * b).sum(axis=(0, 1, 2),
                                                                   keepdims=True),
                               rtol=1e-5, atol=1e-4)
    g1, s1, _ = relu_grad_sums(dy, y, b, dy2[:1], axes=[0, 1, 2])
    want1 = np.where(y > 0, dy + dy2[:1], 0)
    np.testing.assert_array_equal(g1, want1)
    np.testing.assert_allclose(s1, want1.astype(np.float64).sum(axis=(0, 1, 2), keepdims=True),
                               rtol=1e-5, atol=1e-4)
    with pytest.raises(OpError, match="do not broadcast"):
        relu_grad_sums(dy, y, b, dy2[:, :3], axes=[0, 1, 2])
    with pytest.raises(OpError, match="share one dtype"):
        relu_grad_sums(dy, y, b, dy2.astype(np.float64), axes=[0, 1, 2])


_TWO = """
func.func @main(%x: tensor<?x4x4x3xf32>, %d1: tensor<?x4x4x3xf32>, %d2: tensor<?x4x4x3xf32>) -> (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>) {
  %y = "tg.relu"(%x) : (tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %dy = "tg.add"(%d1, %d2) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %g = "tg.relu_grad"(%dy, %y) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %p = "tg.mul"(%x, %g) : (tensor<?x4x4x3xf32>, tensor<?x4x4x3xf32>) -> tensor<?x4x4x3xf32>
  %t = "tg.reduce_sum"(%p) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %s = "tg.reduce_sum"(%g) {axes = [0, 1, 2], keepdims = true} : (tensor<?x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  func.return %s, %t, %g : tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>, tensor<?x4x4x3xf32>
}
"""  # noqa: E501


@pytest.mark.parametrize(("batch", "batch2"), [(5, 5), (5, 1)])
def test_two_gradient_pass_keeps_results(batch: int, batch2: int) -> None:
    """The residual input's add joined to relu_grad_sums: compiled with the pass and without,
    the same results -- also when the second gradient broadcasts at run time (batch 1)."""
    from pytfrt.compiler.passes import default_pipeline

    gm = default_pipeline(parse_graph(_TWO))
    ops = [op for op in gm.function("main").body.block.ops if op.name == "tg.relu_grad_sums"]
    assert len(ops) == 1 and len(ops[0].operands) == 4
    rng = np.random.default_rng(batch2)
    x, d1 = (rng.standard_normal((batch, 4, 4, 3)).astype(np.float32) for _ in range(2))
    d2 = rng.standard_normal((batch2, 4, 4, 3)).astype(np.float32)
    fast = compile_module(gm, optimize=False)(x, d1, d2)
    plain = compile_module(parse_graph(_TWO), optimize=False)(x, d1, d2)
    for a, b in zip(fast, plain, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, lead=st.integers(1, 3), two=st.booleans(), per_channel=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_relu_grad_sums2_match_numpy(shape, lead, two, per_channel, dtype,  # type: ignore[no-untyped-def]
                                     seed):
    """``relu_grad_sums2(dy, y, b, b2[, dy2])``: ``g`` bit for bit as TF's ReluGrad of
    ``dy [+ dy2]``, its three sums against float64 NumPy (one pass, or the two-op fallback
    when ``b2`` is a per-channel vector)."""
    rng = np.random.default_rng(seed)
    k = min(lead, len(shape) - 1)
    axes = tuple(range(k))
    dy, dy2, y, b = (rng.standard_normal(shape).astype(dtype) for _ in range(4))
    y[..., 0] = 0.0
    b2 = rng.standard_normal(shape[k:] if per_channel else shape).astype(dtype)
    g, s, t, t2 = relu_grad_sums2(dy, y, b, b2, dy2 if two else None, axes=axes,
                                  keepdims=False)
    want = np.where(y > 0, dy + dy2 if two else dy, 0)
    np.testing.assert_array_equal(g, want)
    wd = want.astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert s.dtype == t.dtype == t2.dtype == dtype
    np.testing.assert_allclose(s, wd.sum(axis=axes), rtol=tol, atol=tol)
    np.testing.assert_allclose(t, (wd * b).sum(axis=axes), rtol=tol, atol=tol)
    np.testing.assert_allclose(t2, (wd * b2).sum(axis=axes), rtol=tol, atol=tol)


def test_relu_grad_sums2_large_and_errors() -> None:
    """Sharded rows (more than one shard); operands that do not broadcast raise."""
    rng = np.random.default_rng(12)
    dy, dy2, y, b, b2 = (rng.standard_normal((8, 14, 14, 64)).astype(np.float32)
                         for _ in range(5))
    g, s, t, t2 = relu_grad_sums2(dy, y, b, b2, dy2, axes=[0, 1, 2], keepdims=True)
    want = np.where(y > 0, dy + dy2, 0)
    np.testing.assert_array_equal(g, want)
    wd = want.astype(np.float64)
    for got, other in ((t, b), (t2, b2)):
        np.testing.assert_allclose(got, (wd * other).sum(axis=(0, 1, 2), keepdims=True),
                                   rtol=1e-5, atol=1e-4)
    with pytest.raises(OpError, match="broadcast"):
        relu_grad_sums2(dy, y, b, b2[:, :3], axes=[0, 1, 2])
    with pytest.raises(OpError, match="share one dtype"):
        relu_grad_sums2(dy, y, b, b2.astype(np.float64), axes=[0, 1, 2])


# A residual stage's first block backward as TF's graph has it after differentiation: the block
# input's two gradients added, the ReLU's gradient, and two batch norms' sums of it (the main
# branch's, the projection shortcut's, which reads it through a reshape to its own shape).
_TWO_NORMS = """
func.func @main(%x: tensor<?x6x5x4xf32>, %d1: tensor<?x6x5x4xf32>, %d2: tensor<?x6x5x4xf32>) -> (tensor<?x6x5x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>) {
  %y = "tg.relu"(%x) : (tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %x2 = "tg.sigmoid"(%x) : (tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %dy = "tg.add"(%d1, %d2) : (tensor<?x6x5x4xf32>, tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %g = "tg.relu_grad"(%dy, %y) : (tensor<?x6x5x4xf32>, tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %s = "tg.reduce_sum"(%g) {axes = [0, 1, 2], keepdims = true} : (tensor<?x6x5x4xf32>) -> tensor<1x1x1x4xf32>
  %p = "tg.mul"(%x, %g) : (tensor<?x6x5x4xf32>, tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %t = "tg.reduce_sum"(%p) {axes = [0, 1, 2], keepdims = true} : (tensor<?x6x5x4xf32>) -> tensor<1x1x1x4xf32>
  %gr = "tg.reshape"(%g) {shape = [-1, 6, 5, 4]} : (tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %p2 = "tg.mul"(%gr, %x2) : (tensor<?x6x5x4xf32>, tensor<?x6x5x4xf32>) -> tensor<?x6x5x4xf32>
  %t2 = "tg.reduce_sum"(%p2) {axes = [0, 1, 2], keepdims = true} : (tensor<?x6x5x4xf32>) -> tensor<1x1x1x4xf32>
  func.return %g, %s, %t, %t2 : tensor<?x6x5x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>
}
"""  # noqa: E501


@pytest.mark.parametrize("batch", [1, 9])
def test_second_dot_pass_keeps_results(batch: int) -> None:
    """Compiled with the passes (one ``relu_grad_sums2``) and without: the same results."""
    from pytfrt.compiler.passes import default_pipeline

    gm = default_pipeline(parse_graph(_TWO_NORMS))
    names = [op.name for op in gm.function("main").body.block.ops]
    assert "tg.relu_grad_sums2" in names and "tg.reduce_sum" not in names
    rng = np.random.default_rng(batch)
    x, d1, d2 = (rng.standard_normal((batch, 6, 5, 4)).astype(np.float32) for _ in range(3))
    fast = compile_module(gm, optimize=False)(x, d1, d2)
    plain = compile_module(parse_graph(_TWO_NORMS), optimize=False)(x, d1, d2)
    for a, b in zip(fast, plain, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)
