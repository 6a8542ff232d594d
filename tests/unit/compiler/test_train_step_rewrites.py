"""The train-step rewrites of a Transformer block: ``unsorted_segment_sum`` (an embedding's
gradient), ``-tg-flatten-weight-grads`` and ``-tg-fold-reshapes``, checked on compiled programs
against NumPy (``np.add.at``, ``einsum``) for random batches, ids and shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu.graph_kernels import graph_ops
from pytfrt.backends.cpu.ops import OpError
from pytfrt.compiler.api import compile_module, parse_graph
from pytfrt.compiler.errors import GraphError

# ruff: noqa: E501 (the MLIR modules below keep one op a line)

SEGMENTS = """
func.func @main(%d: tensor<?x3xf32>, %i: tensor<?xi32>) -> tensor<5x3xf32> {
  %s = "tg.unsorted_segment_sum"(%d, %i) {num_segments = 5} : (tensor<?x3xf32>, tensor<?xi32>) -> tensor<5x3xf32>
  func.return %s : tensor<5x3xf32>
}
"""

# A Dense layer's weight gradient as TF writes it (batched x^T dy, summed over the batch),
# with the identity reshapes its gradients carry; the rewrites make it one 2-D product.
WEIGHT_GRAD = """
func.func @main(%x: tensor<?x4x3xf32>, %dy: tensor<?x4x5xf32>) -> (tensor<3x5xf32>, tensor<?x4x5xf32>) {
  %r = "tg.reshape"(%dy) {shape = [-1, 4, 5]} : (tensor<?x4x5xf32>) -> tensor<?x4x5xf32>
  %p = "tg.matmul"(%x, %r) {transpose_a = true} : (tensor<?x4x3xf32>, tensor<?x4x5xf32>) -> tensor<?x3x5xf32>
  %g = "tg.reduce_sum"(%p) {axes = [0], keepdims = false} : (tensor<?x3x5xf32>) -> tensor<3x5xf32>
  %m = "tg.mul"(%r, %r) : (tensor<?x4x5xf32>, tensor<?x4x5xf32>) -> tensor<?x4x5xf32>
  %f = "tg.reshape"(%m) {shape = [-1, 20]} : (tensor<?x4x5xf32>) -> tensor<?x20xf32>
  %b = "tg.reshape"(%f) {shape = [-1, 4, 5]} : (tensor<?x20xf32>) -> tensor<?x4x5xf32>
  func.return %g, %b : tensor<3x5xf32>, tensor<?x4x5xf32>
}
"""


@pytest.fixture(scope="module")
def segments():  # type: ignore[no-untyped-def]
    return compile_module(parse_graph(SEGMENTS))


@pytest.fixture(scope="module")
def weight_grad():  # type: ignore[no-untyped-def]
    gm = parse_graph(WEIGHT_GRAD)
    return gm, compile_module(gm)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(0, 40), seed=st.integers(0, 2**31 - 1))
def test_segment_sum_matches_numpy(segments, n: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(n, 3)).astype(np.float32)
    ids = rng.integers(-2, 7, n).astype(np.int32)  # duplicates and ids out of [0, 5)
    want = np.zeros((5, 3), np.float32)
    ok = (ids >= 0) & (ids < 5)
    np.add.at(want, ids[ok], data[ok])
    got = np.asarray(segments(data, ids))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_segment_sum_kernel_dtypes_and_errors() -> None:
    kernel = graph_ops()["unsorted_segment_sum"]
    data = np.arange(12, dtype=np.float64).reshape(4, 3)
    ids = np.array([1, 1, 0, 9], np.int64)
    got = kernel(data, ids, num_segments=2)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [[6, 7, 8], [3, 5, 7]])
    half = kernel(data.astype(np.float16), ids, num_segments=2)  # NumPy's path
    np.testing.assert_array_equal(half, got.astype(np.float16))
    with pytest.raises(OpError, match="data \\[n, w\\] and ids \\[n\\]"):
        kernel(data, ids[:3], num_segments=2)
    with pytest.raises(OpError, match="ids must be integers"):
        kernel(data, ids.astype(np.float32), num_segments=2)
    with pytest.raises(GraphError, match="integer ids"):
        compile_module(parse_graph(SEGMENTS.replace("tensor<?xi32>", "tensor<?xf32>")))


def test_weight_grad_becomes_one_product(weight_grad) -> None:  # type: ignore[no-untyped-def]
    gm, _ = weight_grad
    names = [op.name for op in gm.function("main").body.block.ops]
    assert "tg.reduce_sum" not in names
    assert names.count("tg.matmul") == 1


@settings(max_examples=8, deadline=None)
@given(batch=st.integers(1, 9), seed=st.integers(0, 2**31 - 1))
def test_weight_grad_matches_einsum(weight_grad, batch: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    _, model = weight_grad
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, 4, 3)).astype(np.float32)
    dy = rng.normal(size=(batch, 4, 5)).astype(np.float32)
    g, b = (np.asarray(v) for v in model(x, dy))
    np.testing.assert_allclose(g, np.einsum("bmk,bmn->kn", x, dy), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, dy * dy, rtol=1e-6)


# An attention softmax and its gradient as TF imports it (fused by -tg-fuse-softmax-grad).
SOFTMAX_GRAD = """
func.func @main(%x: tensor<?x2x5x7xf32>, %dy: tensor<?x2x5x7xf32>) -> (tensor<?x2x5x7xf32>, tensor<?x2x5x7xf32>) {
  %y = "tg.softmax"(%x) {axis = 3} : (tensor<?x2x5x7xf32>) -> tensor<?x2x5x7xf32>
  %p = "tg.mul"(%dy, %y) : (tensor<?x2x5x7xf32>, tensor<?x2x5x7xf32>) -> tensor<?x2x5x7xf32>
  %s = "tg.reduce_sum"(%p) {axes = [3], keepdims = true} : (tensor<?x2x5x7xf32>) -> tensor<?x2x5x1xf32>
  %d = "tg.sub"(%dy, %s) : (tensor<?x2x5x7xf32>, tensor<?x2x5x1xf32>) -> tensor<?x2x5x7xf32>
  %r = "tg.mul"(%d, %y) : (tensor<?x2x5x7xf32>, tensor<?x2x5x7xf32>) -> tensor<?x2x5x7xf32>
  func.return %y, %r : tensor<?x2x5x7xf32>, tensor<?x2x5x7xf32>
}
"""


def _softmax64(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def softmax_grad():  # type: ignore[no-untyped-def]
    gm = parse_graph(SOFTMAX_GRAD)
    return gm, compile_module(gm)


def test_softmax_grad_is_one_op(softmax_grad) -> None:  # type: ignore[no-untyped-def]
    gm, _ = softmax_grad
    names = [op.name for op in gm.function("main").body.block.ops]
    assert "tg.softmax_grad" in names and "tg.reduce_sum" not in names


@settings(max_examples=5, deadline=None)
@given(batch=st.integers(1, 2), scale=st.floats(0.1, 30.0), seed=st.integers(0, 2**31 - 1))
def test_softmax_and_grad_match_finite_differences(softmax_grad, batch: int, scale: float,  # type: ignore[no-untyped-def]
                                                   seed: int) -> None:
    _, model = softmax_grad
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(batch, 2, 5, 7)) * scale).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(np.float32)
    y, g = (np.asarray(v) for v in model(x, dy))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, _softmax64(x64), rtol=2e-6, atol=1e-7)
    # d/dx of sum(dy * softmax(x)) by central differences in float64, one element a row
    eps = 1e-6
    want = np.zeros_like(x64)
    for idx in np.ndindex(*x.shape):
        xp, xm = x64.copy(), x64.copy()
        xp[idx] += eps
        xm[idx] -= eps
        want[idx] = (np.sum(dy * _softmax64(xp)) - np.sum(dy * _softmax64(xm))) / (2 * eps)
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def test_softmax_grad_kernel_numpy_paths() -> None:
    kernel = graph_ops()["softmax_grad"]
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 4, 5))
    dy = rng.normal(size=(3, 4, 5))
    for axis in (0, 1, -1):  # float64 and inner axes: NumPy's formula
        y = _softmax64(x, axis)
        want = (dy - np.sum(dy * y, axis=axis, keepdims=True)) * y
        np.testing.assert_allclose(kernel(y, dy, axis=axis), want, rtol=1e-12)
    y32 = _softmax64(x).astype(np.float32)
    row = dy[:1].astype(np.float32)  # a broadcast dy: NumPy's path too
    want32 = (row - np.sum(row * y32, axis=-1, keepdims=True)) * y32
    np.testing.assert_allclose(kernel(y32, row, axis=-1), want32, rtol=1e-6)
    with pytest.raises(OpError, match="softmax_grad"):
        kernel(y32, dy[:, :2].astype(np.float32), axis=-1)


@pytest.mark.parametrize("shape", [(3, 2, 16, 16), (5, 7), (2, 64), (2, 65), (4, 1)])
def test_softmax_kernel_short_rows(shape: tuple[int, ...]) -> None:
    """The ``tg.softmax`` kernel's transposed path (rows <= 64) and its NumPy path, with and
    without ``out`` (``x`` itself included), against float64."""
    kernel = graph_ops()["softmax"]
    x = (np.random.default_rng(len(shape)).normal(size=shape) * 8).astype(np.float32)
    want = _softmax64(x.astype(np.float64))
    np.testing.assert_allclose(kernel(x, axis=-1), want, rtol=2e-6, atol=1e-7)
    out = np.empty_like(x)
    assert kernel(x, axis=len(shape) - 1, out=out) is out
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-7)
    inplace = x.copy()
    kernel(inplace, axis=-1, out=inplace)
    np.testing.assert_allclose(inplace, want, rtol=2e-6, atol=1e-7)
