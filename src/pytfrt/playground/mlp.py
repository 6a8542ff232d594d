"""Kernels of the XOR MLP experiment, plus the two the training program needs.

The playground's own kernels, as the original defined them:

* ``sigmoid_inplace.f32(A, ch) -> ch``: ``A = 1 / (1 + exp(-A))`` element-wise, in place.
* ``sigmoid_grad_inplace.f32(activation, gradient, ch) -> ch``: ``gradient = a - a*a``, the
  *local* derivative of the sigmoid expressed through its output; the previous contents of
  ``gradient`` are ignored (so it is not a chain-rule step on its own).  Shapes must match, else
  ``tensor shape mismatch: [..] vs. [..]``.

Added by pytfrt so that training can apply the chain rule in MLIR (TFRT has no element-wise
product kernel for host tensors):

* ``mlp.multiply_inplace.f32(A, B, ch) -> ch``: ``B = A * B`` element-wise (shapes must match).
* ``mlp.mse_loss.f32(prediction, target, ch) -> f32``: ``mean((prediction - target)**2)`` as an
  f32 scalar.
* ``mlp.print_progress(step: i32, loss: f32, ch) -> ch``: prints ``step <n>: loss = <%f>``.
* ``mlp.print_accuracy.f32(prediction, target, ch) -> ch``: prints
  ``correct: <k>/<n>``, counting the rows where ``prediction > 0.5`` equals ``target > 0.5``.

All computations are float32 (NumPy), in place where the name says so.  Errors are kernel errors
reported at the op's location.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu.ops import sigmoid_inplace
from pytfrt.host import CHAIN, Chain, KernelError, KernelRegistry, kernel
from pytfrt.playground.progress import print_progress
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import F32


def _shape(t: DenseHostTensor) -> str:
    return "[" + ", ".join(str(d) for d in t.array.shape) + "]"


def _check_f32(t: DenseHostTensor, what: str) -> np.ndarray:
    if t.dtype is not F32:
        raise KernelError(f"{what} expects an f32 tensor, got {t.dtype.name}")
    return t.array


def _check_same_shape(a: DenseHostTensor, b: DenseHostTensor) -> None:
    if a.array.shape != b.array.shape:
        raise KernelError(f"tensor shape mismatch: {_shape(a)} vs. {_shape(b)}")


@kernel("sigmoid_inplace.f32")
def sigmoid_inplace_f32(a: DenseHostTensor) -> Chain:
    """``A = 1 / (1 + exp(-A))`` in place."""
    sigmoid_inplace(_check_f32(a, "sigmoid_inplace.f32"))
    return CHAIN


@kernel("sigmoid_grad_inplace.f32")
def sigmoid_grad_inplace_f32(activation: DenseHostTensor, gradient: DenseHostTensor) -> Chain:
    """``gradient = activation - activation**2`` (the local sigmoid derivative)."""
    _check_same_shape(activation, gradient)
    a = _check_f32(activation, "sigmoid_grad_inplace.f32")
    g = _check_f32(gradient, "sigmoid_grad_inplace.f32")
    np.multiply(a, a, out=g)
    np.subtract(a, g, out=g)
    return CHAIN


@kernel("mlp.multiply_inplace.f32")
def multiply_inplace_f32(a: DenseHostTensor, b: DenseHostTensor) -> Chain:
    """``B = A * B`` element-wise."""
    _check_same_shape(a, b)
    out = _check_f32(b, "mlp.multiply_inplace.f32")
    np.multiply(_check_f32(a, "mlp.multiply_inplace.f32"), out, out=out)
    return CHAIN


@kernel("mlp.mse_loss.f32")
def mse_loss_f32(prediction: DenseHostTensor, target: DenseHostTensor) -> float:
    """``mean((prediction - target)**2)`` as a float32 scalar."""
    _check_same_shape(prediction, target)
    p = _check_f32(prediction, "mlp.mse_loss.f32")
    t = _check_f32(target, "mlp.mse_loss.f32")
    diff = p - t
    np.multiply(diff, diff, out=diff)
    n = diff.size
    if n == 0:  # np.mean's "Mean of empty slice" warning and NaN
        return float(np.float32(np.mean(diff, dtype=np.float32)))
    # np.mean's own steps without its Python-level dispatch, with the same roundings: the
    # float32 sum, divided by the element count in float64, rounded to float32.
    return float(np.float32(float(np.add.reduce(diff, None, np.float32)) / n))


@kernel("mlp.print_accuracy.f32")
def print_accuracy_f32(prediction: DenseHostTensor, target: DenseHostTensor) -> Chain:
    """Print ``correct: <k>/<n>`` for thresholded predictions against the targets."""
    _check_same_shape(prediction, target)
    p = _check_f32(prediction, "mlp.print_accuracy.f32") > 0.5
    t = _check_f32(target, "mlp.print_accuracy.f32") > 0.5
    rows_ok = np.all((p == t).reshape(p.shape[0], -1), axis=1) if p.ndim else p == t
    print(f"correct: {int(np.sum(rows_ok))}/{rows_ok.size}", flush=True)
    return CHAIN


def register(registry: KernelRegistry) -> None:
    """Register the MLP playground kernels."""
    registry.add(
        sigmoid_inplace_f32,
        sigmoid_grad_inplace_f32,
        multiply_inplace_f32,
        mse_loss_f32,
        print_progress,
        print_accuracy_f32,
    )
