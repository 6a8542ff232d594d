# ruff: noqa: E501  (MLIR text: one op per line)
"""MLIR programs the distributed tests ship to workers, and their NumPy oracles.

``linear_train_step(rows, features, outputs)`` is the train step of a linear model with a mean
squared error, written with the runtime's tensor kernels for a fixed shard size: it returns
``(loss, dloss/dw, dloss/db)`` for ``w [features, outputs]``, ``b [1, outputs]``,
``x [rows, features]``, ``y [rows, outputs]``.  :func:`numpy_linear_sgd` is the full-batch
single-process reference, written from the maths.
"""

from __future__ import annotations

import numpy as np

BASIC = """
func.func @scale(%x: !t.tensor) -> (!tfrt.chain, !t.tensor) {
  %ch0 = tfrt.new.chain
  %ch1 = "tfrt_test.add_inplace.f32"(%x, %x, %ch0) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1, %x : !tfrt.chain, !t.tensor
}

func.func @add(%a: !t.tensor, %b: !t.tensor) -> (!tfrt.chain, !t.tensor) {
  %ch0 = tfrt.new.chain
  %ch1 = "tfrt_test.add_inplace.f32"(%a, %b, %ch0) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  tfrt.return %ch1, %b : !tfrt.chain, !t.tensor
}

func.func @sum_and_first(%a: i32, %b: i32) -> (i32, i32) {
  %s = tfrt.add.i32 %a, %b
  tfrt.return %s, %a : i32, i32
}

func.func @sleep_then(%us: i32, %v: i32) -> (!tfrt.chain, i32) {
  %ch = "tfrt_test.blocking.usleep"(%us) : (i32) -> !tfrt.chain
  tfrt.return %ch, %v : !tfrt.chain, i32
}

func.func @fail() -> i32 {
  %x = "tfrt_test.fail"() : () -> i32
  tfrt.return %x : i32
}
"""

UNKNOWN_KERNEL = """
func.func @main() -> i32 {
  %x = "no_such.kernel"() : () -> i32
  tfrt.return %x : i32
}
"""


def linear_train_step(rows: int, features: int, outputs: int) -> str:
    """The MSE train step of a linear model for shards of ``rows`` examples (see module)."""
    n = rows * outputs
    return f"""
func.func @train_step(%w: !t.tensor, %b: !t.tensor, %x: !t.tensor, %y: !t.tensor)
    -> (!tfrt.chain, f32, !t.tensor, !t.tensor) {{
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.f32 1.0
  %zero = tfrt.constant.f32 0.0
  %scale = tfrt.constant.f32 {2.0 / n!r}
  // r = x @ w + b - y
  %shape = ts.build_shape [{rows} : i64, {outputs} : i64]
  %r = "tfrt_test.broadcast.f32.2"(%b, %shape, %ch0) : (!t.tensor, !ts.shape, !tfrt.chain) -> !t.tensor
  %ch1 = "eigen.matmul.f32"(%one, %x, %w, %one, %r, %ch0)
      : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %ch2 = "tfrt_test.subtract_inplace.f32"(%y, %r, %ch1) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  // loss = mean(r * r)
  %zeros = tfrt_dht.create_uninitialized_tensor.f32.2 [{rows} : i64, {outputs} : i64]
  %ch3 = tfrt_dht.fill_tensor_with_constant.f32 %zeros, %ch2 0.0 : f32
  %loss = "mlp.mse_loss.f32"(%r, %zeros, %ch3) : (!t.tensor, !t.tensor, !tfrt.chain) -> f32
  // dw = 2/n x^T r ; db = 2/n ones^T r
  %xt = tfrt_dht.create_uninitialized_tensor.f32.2 [{features} : i64, {rows} : i64]
  %ch4 = "tfrt_test.tensor_transpose.f32"(%x, %xt, %ch0) : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %dw = tfrt_dht.create_uninitialized_tensor.f32.2 [{features} : i64, {outputs} : i64]
  %ch5 = tfrt.merge.chains %ch2, %ch4 : !tfrt.chain, !tfrt.chain
  %ch6 = "eigen.matmul.f32"(%scale, %xt, %r, %zero, %dw, %ch5)
      : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %ones = tfrt_dht.create_uninitialized_tensor.f32.2 [1 : i64, {rows} : i64]
  %ch7 = tfrt_dht.fill_tensor_with_constant.f32 %ones, %ch0 1.0 : f32
  %db = tfrt_dht.create_uninitialized_tensor.f32.2 [1 : i64, {outputs} : i64]
  %ch8 = tfrt.merge.chains %ch2, %ch7 : !tfrt.chain, !tfrt.chain
  %ch9 = "eigen.matmul.f32"(%scale, %ones, %r, %zero, %db, %ch8)
      : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %done = tfrt.merge.chains %ch6, %ch9 : !tfrt.chain, !tfrt.chain
  tfrt.return %done, %loss, %dw, %db : !tfrt.chain, f32, !t.tensor, !t.tensor
}}
"""


def numpy_linear_sgd(
    w: np.ndarray, b: np.ndarray, batches: list[tuple[np.ndarray, np.ndarray]], lr: float
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Full-batch SGD on ``mean((x @ w + b - y)**2)`` in float64 (the reference)."""
    w = w.astype(np.float64)
    b = b.astype(np.float64)
    losses = []
    for x, y in batches:
        r = x @ w + b - y
        losses.append(float(np.mean(r * r)))
        g = 2.0 * r / r.size
        w = w - lr * (x.T @ g)
        b = b - lr * g.sum(axis=0, keepdims=True)
    return w, b, losses
