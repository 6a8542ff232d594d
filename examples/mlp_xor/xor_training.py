"""XOR training in Python: the 2-2-1 sigmoid MLP of ``xor_training.mlir``, compiled.

The same network, data, initial weights and learning rate as ``xor_training.mlir``, written as a
Python training step over ``pytfrt.eager`` with ``@pytfrt.function`` (traced once into the graph
dialect and compiled to BEF) and ``pytfrt.value_and_grad`` (reverse-mode differentiation of the
traced loss).  Run: ``python examples/mlp_xor/xor_training.py``.
"""

from __future__ import annotations

import numpy as np

import pytfrt
from pytfrt import eager

X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
Y = np.array([[0], [1], [1], [0]], np.float32)
# Weights drawn once from U(-1, 1) (NumPy seed 0, rounded), biases zero: as xor_training.mlir.
INITIAL_PARAMS = (
    np.array([[0.27, -0.46], [-0.92, -0.97]], np.float32),  # wh
    np.zeros(2, np.float32),                                 # bh
    np.array([[0.63], [0.83]], np.float32),                  # wo
    np.zeros(1, np.float32),                                 # bo
)
LEARNING_RATE = 8.0
"""xor_training.mlir's rate; it applies to the gradient of the MSE without its factor 2, so the
update below is ``p -= LEARNING_RATE / 2 * dMSE/dp``."""
STEPS = 2000


def forward(params: tuple, x: np.ndarray) -> eager.Tensor:
    """``sigmoid(sigmoid(x @ wh + bh) @ wo + bo)``."""
    wh, bh, wo, bo = params
    h = eager.sigmoid(x @ wh + bh)
    return eager.sigmoid(h @ wo + bo)


def mse(params: tuple, x: np.ndarray, y: np.ndarray) -> eager.Tensor:
    """Mean squared error of the network on ``(x, y)``."""
    return eager.reduce_mean((forward(params, x) - y) ** 2)


@pytfrt.function
def train_step(params: tuple, x: np.ndarray, y: np.ndarray) -> tuple:
    """One full-batch SGD step: returns the loss before the step and the new parameters."""
    loss, grads = pytfrt.value_and_grad(mse)(params, x, y)
    return loss, tuple(p - LEARNING_RATE / 2 * g for p, g in zip(params, grads, strict=True))


predict = pytfrt.function(forward)


def train(steps: int = STEPS, report_every: int = 200, verbose: bool = True
          ) -> tuple[tuple, list[float]]:
    """Train from :data:`INITIAL_PARAMS`; returns the parameters and the loss of every step."""
    params = INITIAL_PARAMS
    losses = []
    for step in range(1, steps + 1):
        loss, params = train_step(params, X, Y)
        losses.append(float(loss))
        if verbose and step % report_every == 0:
            print(f"step {step}: loss = {float(loss):f}")
    return params, losses


def main() -> None:
    """Train, then print the predictions and how many of the four are right."""
    params, _ = train()
    out = predict(params, X)
    print("predictions:", np.round(out.reshape(-1), 6).tolist())
    correct = int(((out > 0.5) == (Y > 0.5)).sum())
    print(f"correct: {correct}/4")


if __name__ == "__main__":
    main()
