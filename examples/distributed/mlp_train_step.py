"""The MNIST-sized MLP (784-128-10) train step, built with the compiler's GraphBuilder.

``build_train_step()`` returns a graph module whose ``main`` takes the parameters and a batch,
``(w1 [784,128], b1 [128], w2 [128,10], b2 [10], x [B,784], y [B,10] one-hot)``, and returns
``(loss, dw1, db1, dw2, db2)``: the mean softmax cross-entropy over the batch and its gradients,
forward and backward pass written out with the graph dialect's ops (``relu_grad``,
``softmax_cross_entropy``).  ``numpy_train_step`` is the same maths in NumPy (the reference).
"""

from __future__ import annotations

from typing import Any

import numpy as np

IN, HIDDEN, OUT = 784, 128, 10


def build_train_step(hidden: int = HIDDEN) -> Any:
    """The train step as a ``GraphModule`` (compile it with ``pytfrt.compiler.api.compile``)."""
    from pytfrt.compiler.builder import GraphBuilder

    gb = GraphBuilder()
    fn = gb.function("main", inputs=[
        ("w1", (IN, hidden), "f32"), ("b1", (hidden,), "f32"),
        ("w2", (hidden, OUT), "f32"), ("b2", (OUT,), "f32"),
        ("x", (None, IN), "f32"), ("y", (None, OUT), "f32"),
    ])
    w1, b1, w2, b2, x, y = fn.arguments
    h_pre = fn.op("add", [fn.op("matmul", [x, w1]), b1])
    h = fn.op("relu", [h_pre])
    logits = fn.op("add", [fn.op("matmul", [h, w2]), b2])
    rows, dlogits = fn.op("softmax_cross_entropy", [logits, y], n_results=2)
    loss = fn.op("reduce_mean", [rows], axes=[], keepdims=False)
    # d(mean loss)/dlogits = dlogits / batch size (a run-time value: the batch is dynamic).
    batch = fn.op("cast", [fn.op("slice", [fn.op("shape", [x])], starts=[0], ends=[1], axes=[0],
                                 steps=[1])], to="f32")
    dl = fn.op("div", [dlogits, batch])
    dw2 = fn.op("matmul", [h, dl], transpose_a=True)
    db2 = fn.op("reduce_sum", [dl], axes=[0], keepdims=False)
    dh = fn.op("matmul", [dl, w2], transpose_b=True)
    dh_pre = fn.op("relu_grad", [dh, h_pre])
    dw1 = fn.op("matmul", [x, dh_pre], transpose_a=True)
    db1 = fn.op("reduce_sum", [dh_pre], axes=[0], keepdims=False)
    fn.returns([loss, dw1, db1, dw2, db2], names=["loss", "dw1", "db1", "dw2", "db2"])
    return gb.finish()


def init_params(seed: int = 0, hidden: int = HIDDEN) -> dict[str, np.ndarray]:
    """Glorot-uniform weights, zero biases (float32)."""
    rng = np.random.default_rng(seed)

    def glorot(n_in: int, n_out: int) -> np.ndarray:
        limit = np.sqrt(6.0 / (n_in + n_out))
        return rng.uniform(-limit, limit, size=(n_in, n_out)).astype(np.float32)

    return {"w1": glorot(IN, hidden), "b1": np.zeros(hidden, np.float32),
            "w2": glorot(hidden, OUT), "b2": np.zeros(OUT, np.float32)}


def synthetic_mnist(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``n`` synthetic 28x28 "digits": 10 noisy class prototypes; one-hot labels."""
    rng = np.random.default_rng(seed)
    prototypes = rng.uniform(0, 1, size=(OUT, IN)).astype(np.float32)
    labels = rng.integers(0, OUT, size=n)
    x = prototypes[labels] + 0.3 * rng.normal(size=(n, IN)).astype(np.float32)
    y = np.eye(OUT, dtype=np.float32)[labels]
    return x.astype(np.float32), y


def numpy_train_step(params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray
                     ) -> tuple[float, dict[str, np.ndarray]]:
    """Loss and gradients of the same MLP in float64 NumPy (the reference)."""
    w1, b1, w2, b2 = (params[k].astype(np.float64) for k in ("w1", "b1", "w2", "b2"))
    h_pre = x @ w1 + b1
    h = np.maximum(h_pre, 0)
    logits = h @ w2 + b2
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    loss = float(np.mean(-(y * np.log(p)).sum(axis=1)))
    dl = (p - y) / len(x)
    dh_pre = (dl @ w2.T) * (h_pre > 0)
    return loss, {"w1": x.T @ dh_pre, "b1": dh_pre.sum(0), "w2": h.T @ dl, "b2": dl.sum(0)}
