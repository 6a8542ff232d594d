"""``fused.run`` with inputs broadcast along the output's trailing dimensions (per-channel
vectors of batch-norm arithmetic on NHWC tensors): the row-by-row flat loop, also split into
parallel shards of whole rows, against NumPy's broadcasting; shapes it must not take go to the
broadcasting ufunc and still agree."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import fused

# (x - mean) * scale + shift, then relu: 4 inputs
PROGRAM = json.dumps({"n": 4, "ops": [["sub", [0, 1], {}], ["mul", [4, 2], {}],
                                      ["add", [5, 3], {}], ["relu", [6], {}]]})


def _ref(x, m, s, b):
    return np.maximum((x - m) * s + b, 0)


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    trail=st.lists(st.integers(0, 4), min_size=3, max_size=3),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**31 - 1),
)
def test_trailing_broadcast_matches_numpy(shape, trail, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    operands = []
    for t in trail:  # each operand: the last t dims of x (fewer dims, or leading 1s kept)
        t = min(t, len(shape))
        dims = tuple(shape[len(shape) - t:])
        if t and rng.integers(2):
            dims = (1,) * (len(shape) - t) + dims
        operands.append(rng.standard_normal(dims).astype(dtype))
    got = fused.run(PROGRAM, x, *operands)
    np.testing.assert_allclose(got, _ref(x, *operands), rtol=1e-6, atol=1e-6)


def test_rows_are_sharded_in_whole_rows():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 32, 32, 16)).astype(np.float32)
    m, s, b = (rng.standard_normal((1, 1, 1, 16)).astype(np.float32) for _ in range(3))
    assert x.size >= fused.PARALLEL_MIN
    out = np.empty_like(x)
    got = fused.run(PROGRAM, x, m, s, b, out=out)
    assert got is out
    np.testing.assert_allclose(got, _ref(x, m, s, b), rtol=1e-6, atol=1e-6)
    plan = fused._PLANS[next(k for k in fused._PLANS if k[0] == PROGRAM and k[1] is not None)]
    assert plan[1] == (fused.FULL, fused.ROW, fused.ROW, fused.ROW)


def test_middle_broadcast_is_not_a_row():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    m = rng.standard_normal((4, 1, 6)).astype(np.float32)  # not trailing: the ufunc path
    s, b = np.float32(2.0) * np.ones((6,), np.float32), np.ones((5, 6), np.float32)
    np.testing.assert_allclose(fused.run(PROGRAM, x, m, s, b), _ref(x, m, s, b), rtol=1e-6)
    assert fused._row_length(m, x.shape) == 0
    assert fused._row_length(b, x.shape) == 30


def test_relu_grads_compiled_loop_matches_numpy_select():
    """``relu_grad``/``relu6_grad`` on large arrays (the compiled loop, sharded) keep the
    select's semantics: 0 where the mask is false even for a NaN or infinite ``dy``."""
    from pytfrt.backends.cpu.grad_ops import _FLAT_GRAD_MIN, relu6_grad, relu_grad

    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal(4 * _FLAT_GRAD_MIN) * 5).astype(dtype)
        dy = rng.standard_normal(x.shape).astype(dtype)
        x[:4] = [0.0, -0.0, 6.0, np.nan]
        dy[4:8] = [np.nan, np.inf, -np.inf, np.nan]
        x[4:8] = [-1.0, -2.0, 7.0, 1.0]
        np.testing.assert_array_equal(relu_grad(dy, x), np.where(x > 0, dy, 0))
        np.testing.assert_array_equal(relu6_grad(dy, x), np.where((x > 0) & (x < 6), dy, 0))


@settings(max_examples=30, deadline=None)
@given(
    lead=st.lists(st.integers(1, 40), min_size=1, max_size=3),
    kept=st.lists(st.integers(1, 20), min_size=1, max_size=2),
    keepdims=st.booleans(),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**31 - 1),
    batch=st.sampled_from([0, 1, 3]),
)
def test_leading_axis_reductions_match_float64_numpy(lead, kept, keepdims, dtype, seed, batch):
    """reduce_sum/reduce_mean over the leading axes, or over the axes after a kept batch axis
    (a global average pool; ``batch`` items, 0: no batch axis) -- the blocked path for large
    arrays, plain NumPy for small ones -- against the float64 sum."""
    from pytfrt.backends.cpu.array_ops import reduce_mean, reduce_sum

    front = (batch,) if batch else ()
    x = np.random.default_rng(seed).standard_normal((*front, *lead, *kept)).astype(dtype)
    axes = tuple(range(len(front), len(front) + len(lead)))
    ref = x.astype(np.float64).sum(axis=axes, keepdims=keepdims)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    got = reduce_sum(x, axes=axes, keepdims=keepdims)
    assert got.dtype == dtype and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.sqrt(x.size))
    mean = reduce_mean(x, axes=tuple(a - len(x.shape) for a in axes), keepdims=keepdims)
    assert mean.dtype == dtype and mean.shape == ref.shape
    n = x.size // max(ref.size, 1)
    np.testing.assert_allclose(mean, ref / n, rtol=tol, atol=tol * np.sqrt(x.size) / n)


def test_blocked_reduction_is_taken_for_batch_norm_statistics():
    from pytfrt.backends.cpu.array_ops import _leading_sum

    x = np.ones((32, 32, 32, 16), np.float32)
    got = _leading_sum(x, (0, 1, 2), True)
    assert got is not None and got.shape == (1, 1, 1, 16)
    np.testing.assert_array_equal(got, np.full((1, 1, 1, 16), 32768.0, np.float32))
    pooled = _leading_sum(x, (1, 2), False)  # a global average pool's sum, per batch item
    assert pooled is not None and pooled.shape == (32, 16)
    np.testing.assert_array_equal(pooled, np.full((32, 16), 1024.0, np.float32))
    assert _leading_sum(x, (2, 3), True) is None  # neither the leading axes nor 1..k
    assert _leading_sum(x, (0, 2), True) is None
    assert _leading_sum(x.astype(np.int32), (0, 1, 2), True) is None


def test_bias_add_grad_sums_per_channel():
    """A conv's bias gradient (NHWC: the sum over N, H, W: float64 sums on the helper
    threads, a strided view through reduce_sum's blocked path) against the float64 sum; a
    vector is returned as it is, NCHW sums axes 0, 2, 3."""
    from pytfrt.backends.cpu.grad_ops import bias_add_grad

    dy = np.random.default_rng(3).standard_normal((16, 24, 24, 32)).astype(np.float32)
    got = bias_add_grad(dy, layout="NHWC")
    want = dy.astype(np.float64).sum(axis=(0, 1, 2))
    assert got.dtype == np.float32 and got.shape == (32,)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
    strided = bias_add_grad(dy[:, ::2], layout="NHWC")
    np.testing.assert_allclose(strided, dy[:, ::2].astype(np.float64).sum(axis=(0, 1, 2)),
                               rtol=1e-5, atol=1e-3)
    nchw = np.ascontiguousarray(dy.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(bias_add_grad(nchw, layout="NCHW"), got, rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(bias_add_grad(dy[0, 0, 0], layout="NHWC"), dy[0, 0, 0])
