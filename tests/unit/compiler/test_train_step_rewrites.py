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


@settings(max_examples=25, deadline=None)
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


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 9), seed=st.integers(0, 2**31 - 1))
def test_weight_grad_matches_einsum(weight_grad, batch: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    _, model = weight_grad
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, 4, 3)).astype(np.float32)
    dy = rng.normal(size=(batch, 4, 5)).astype(np.float32)
    g, b = (np.asarray(v) for v in model(x, dy))
    np.testing.assert_allclose(g, np.einsum("bmk,bmn->kn", x, dy), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, dy * dy, rtol=1e-6)
