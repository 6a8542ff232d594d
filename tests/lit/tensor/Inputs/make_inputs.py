"""Regenerate the small BTF inputs of the tensor and CPU lit tests with pytfrt's own writer.

Run from the repository root: ``.venv/bin/python tests/lit/tensor/Inputs/make_inputs.py``.
"""

from pathlib import Path

import numpy as np

from pytfrt.tensor.btf import write_btf

HERE = Path(__file__).resolve().parent
CPU = HERE.parent.parent / "cpu" / "Inputs"


def main() -> None:
    write_btf(
        HERE / "test_tensor.btf",
        [
            np.array([[1, 2], [3, 4]], np.int32),
            np.arange(5, dtype=np.int32),
            np.zeros(0, np.int32),
        ],
    )
    rng = np.random.default_rng(0)
    a = rng.integers(-5, 6, size=(4, 3)).astype(np.int32)
    b = rng.integers(-5, 6, size=(3, 5)).astype(np.int32)
    fa = rng.uniform(-1, 1, size=(4, 3)).astype(np.float32)
    fb = rng.uniform(-1, 1, size=(3, 5)).astype(np.float32)
    x = rng.uniform(-1, 1, size=(1, 6, 6, 2)).astype(np.float32)
    pooled = x.reshape(1, 2, 3, 2, 3, 2).max(axis=(2, 4))
    write_btf(CPU / "matmul.btf", [a, b, a @ b, fa, fb, (fa @ fb).astype(np.float32)])
    write_btf(CPU / "max_pool.btf", [x, np.maximum(pooled, np.finfo(np.float32).tiny)])


if __name__ == "__main__":
    main()
