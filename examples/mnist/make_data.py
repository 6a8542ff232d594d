"""Write the BTF data of TFRT's MNIST programs: random but well-formed stand-ins.

TFRT's ``integrationtest/mnist`` programs read ``mnist_tensors.btf`` (trained weights and 100
test images) and ``mnist_metadata.btf`` (one training image, its label, initial weights and the
softmax expected after ten training steps).  Those files are not downloadable, so this script
makes files with the same tensors, shapes and dtypes, and with expected values computed here by
NumPy, so that the programs check what they were written to check:

``mnist_tensors.btf`` (read by ``mnist.mlir``): 0 ``W1 [784, 512]``, 1 ``b1 [512]``,
2 ``W2 [512, 10]``, 3 ``b2 [10]`` (f32), 4 ``features [100, 784]`` (f32 in ``[0, 1)``),
5 ``labels [100]`` (i32).  The labels are the model's own predictions except for two rows,
so the program's accuracy is exactly ``0.98`` as in TFRT's file.  Rows whose two best logits
are close are re-drawn, so a different (but correct) summation order cannot change a prediction.

``mnist_metadata.btf`` (read by ``mnist_training.mlir``): 0 ``image [1, 784]``, 1 ``one-hot
label [1, 10]``, 2 ``W0 [784, 512]``, 3 ``b0 [512]``, 4 ``W1 [512, 10]``, 5 ``b1 [10]``,
6 ``softmax after 10 SGD steps [1, 10]`` -- the program's forward pass, loss gradient and
updates replayed in float32 by :func:`train_steps` (learning rate 0.01).

Usage: ``python examples/mnist/make_data.py [OUT_DIR]`` (default ``examples/mnist/test_data``).
TFRT's programs name their data ``integrationtest/mnist/test_data/...`` relative to the working
directory, so to run them unchanged write the files there (see ``examples/mnist/README.md``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pytfrt.tensor.btf import write_btf

HERE = Path(__file__).resolve().parent
LEARNING_RATE = np.float32(0.01)


def max_pool_nhwc(
    x: np.ndarray, k: int, stride: int, padding: str, floor: float | None = None
) -> np.ndarray:
    """TensorFlow-style NHWC max pooling (``valid`` or ``same``), the test oracle.

    ``floor``: the smallest value an output may take (TFRT's ``tfrt_test.max_pooling_2d``
    starts from the smallest positive float, so all-negative windows give that).
    """
    n, h, w, c = x.shape
    if padding == "valid":
        oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
        top = left = 0
    else:
        oh, ow = -(-h // stride), -(-w // stride)
        top = max((oh - 1) * stride + k - h, 0) // 2
        left = max((ow - 1) * stride + k - w, 0) // 2
    out = np.full((n, oh, ow, c), -np.inf, np.float32)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * stride - top, j * stride - left
            win = x[:, max(r0, 0):r0 + k, max(c0, 0):c0 + k, :]
            out[:, i, j, :] = np.maximum(out[:, i, j, :], win.max(axis=(1, 2)))
    if floor is not None:
        np.maximum(out, np.float32(floor), out=out)
    return out


def _dense(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    limit = np.sqrt(6.0 / (fan_in + fan_out))  # Glorot uniform, as Keras initialises Dense
    return rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32)


def inference_tensors(seed: int = 7) -> list[np.ndarray]:
    """The six tensors of ``mnist_tensors.btf`` (accuracy of the model on them: 0.98)."""
    rng = np.random.default_rng(seed)
    w1, w2 = _dense(rng, 784, 512), _dense(rng, 512, 10)
    b1 = rng.uniform(-0.1, 0.1, 512).astype(np.float32)
    b2 = rng.uniform(-0.1, 0.1, 10).astype(np.float32)
    features = np.empty((100, 784), np.float32)
    predictions = np.empty(100, np.int32)
    row = 0
    while row < 100:
        x = rng.random((1, 784), dtype=np.float32)
        logits = (np.maximum(x @ w1 + b1, 0) @ w2 + b2)[0]
        top2 = np.sort(logits)[-2:]
        if top2[1] - top2[0] < 1e-2:  # ambiguous: a rounding difference could flip it
            continue
        features[row], predictions[row] = x[0], int(np.argmax(logits))
        row += 1
    labels = predictions.copy()
    labels[[17, 62]] = (labels[[17, 62]] + 1) % 10  # two misclassified images
    return [w1, b1, w2, b2, features, labels]


def train_steps(image: np.ndarray, onehot: np.ndarray, w0: np.ndarray, b0: np.ndarray,
                w1: np.ndarray, b1: np.ndarray, steps: int) -> np.ndarray:
    """Replay ``mnist_training.mlir``: ``steps`` SGD updates, then the next forward softmax."""
    w0, b0, w1, b1 = w0.copy(), b0.copy(), w1.copy(), b1.copy()
    for step in range(steps + 1):
        a0 = np.maximum(image @ w0 + b0, 0).astype(np.float32)
        z1 = a0 @ w1 + b1
        softmax = (np.exp(z1) / np.exp(z1).sum(axis=-1, keepdims=True)).astype(np.float32)
        if step == steps:
            return softmax
        grad = softmax - onehot
        b1 -= grad.mean(axis=0) * LEARNING_RATE
        w1_t = w1.T.copy()
        w1 += np.float32(-0.01) * (a0.T @ grad)
        grad_a0 = (grad @ w1_t) * (a0 > 0)
        b0 -= grad_a0.mean(axis=0) * LEARNING_RATE
        w0 += np.float32(-0.01) * (image.T @ grad_a0)
    raise AssertionError("unreachable")


def training_tensors(seed: int = 11) -> list[np.ndarray]:
    """The seven tensors of ``mnist_metadata.btf``."""
    rng = np.random.default_rng(seed)
    image = rng.random((1, 784), dtype=np.float32)
    onehot = np.zeros((1, 10), np.float32)
    onehot[0, 5] = 1.0
    w0, w1 = _dense(rng, 784, 512), _dense(rng, 512, 10)
    b0, b1 = np.zeros(512, np.float32), np.zeros(10, np.float32)
    expected = train_steps(image, onehot, w0, b0, w1, b1, steps=10)
    return [image, onehot, w0, b0, w1, b1, expected]


def write_all(out_dir: Path) -> None:
    """Write ``mnist_tensors.btf`` and ``mnist_metadata.btf`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_btf(out_dir / "mnist_tensors.btf", inference_tensors())
    write_btf(out_dir / "mnist_metadata.btf", training_tensors())


if __name__ == "__main__":
    write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "test_data")
