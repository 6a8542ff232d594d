"""Two user kernels, loaded with ``bef_executor --kernels examples/custom_kernel/my_kernels.py``.

No rebuild, no registration call: ``--kernels`` imports this file and registers every function
marked with ``@kernel`` (or calls ``register(registry)`` if the file defines one).
"""

from __future__ import annotations

import numpy as np

from pytfrt.host import CHAIN, Attr, Chain, KernelError, kernel
from pytfrt.tensor.dense_host_tensor import DenseHostTensor


@kernel("my.scale.i32")
def scale_i32(x: int, factor: Attr[int]) -> int:
    """``x * factor`` (the attribute comes from ``{factor = 3 : i32}``)."""
    return x * factor


@kernel("my.leaky_relu_inplace.f32")
def leaky_relu_inplace_f32(t: DenseHostTensor, alpha: Attr[float]) -> Chain:
    """``t = where(t > 0, t, alpha * t)`` in place; the op's trailing chain is ignored."""
    if t.array.dtype != np.float32:
        raise KernelError(f"my.leaky_relu_inplace.f32 expects f32, got {t.dtype.name}")
    np.multiply(t.array, np.where(t.array > 0, np.float32(1), np.float32(alpha)), out=t.array)
    return CHAIN
