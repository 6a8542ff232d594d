"""Regenerate the small BTF inputs of the TFRT-conformance CPU tests (mnist/, resnet/).

TFRT keeps these files under ``backends/cpu/mlir_tests/*/test_data``; here they are written by
pytfrt's own BTF writer from NumPy data, with the expected outputs computed by NumPy.
Run from the repository root: ``.venv/bin/python tests/lit/tfrt/mnist/Inputs/make_inputs.py``.
"""

from pathlib import Path

import numpy as np

from pytfrt.tensor.btf import write_btf

MNIST = Path(__file__).resolve().parent
RESNET = MNIST.parent.parent / "resnet" / "Inputs"


def max_pool_nhwc(x: np.ndarray, k: int, stride: int, padding: str) -> np.ndarray:
    """TensorFlow-style max pooling; the accumulator starts at the smallest positive float."""
    n, h, w, c = x.shape
    if padding == "valid":
        oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
        top = left = 0
    else:
        oh, ow = -(-h // stride), -(-w // stride)
        top = max((oh - 1) * stride + k - h, 0) // 2
        left = max((ow - 1) * stride + k - w, 0) // 2
    out = np.full((n, oh, ow, c), np.finfo(np.float32).tiny, np.float32)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * stride - top, j * stride - left
            win = x[:, max(r0, 0):r0 + k, max(c0, 0):c0 + k, :]
            out[:, i, j, :] = np.maximum(out[:, i, j, :], win.max(axis=(1, 2)))
    return out


def main() -> None:
    rng = np.random.default_rng(2020)
    write_btf(
        MNIST / "test_tensor.btf",
        [np.array([[1, 2], [3, 4]], np.int32), np.zeros(0, np.int32)],
    )
    a = rng.integers(-5, 6, size=(2, 3)).astype(np.int32)
    b = rng.integers(-5, 6, size=(3, 2)).astype(np.int32)
    fa = rng.uniform(-1, 1, size=(2, 3)).astype(np.float32)
    fb = rng.uniform(-1, 1, size=(3, 2)).astype(np.float32)
    write_btf(MNIST / "matmul.btf", [a, b, a @ b, fa, fb, (fa @ fb).astype(np.float32)])
    x = rng.uniform(-1, 1, size=(1, 6, 6, 2)).astype(np.float32)
    write_btf(
        RESNET / "max_pool.btf",
        [x, max_pool_nhwc(x, 3, 3, "valid"), max_pool_nhwc(x, 3, 2, "same")],
    )


if __name__ == "__main__":
    main()
