"""Activation functions applied in place, the ones the fused conv/matmul epilogues support.

``apply_activation(x, activation, alpha)`` overwrites a float array with ``act(x)`` for

* ``none``, ``relu``, ``relu6`` (``min(max(x, 0), 6)``), ``leaky_relu`` (``x`` if ``x >= 0``
  else ``alpha * x``), ``sigmoid``, ``tanh``, ``silu`` (``x * sigmoid(x)``),
* ``gelu`` (exact: ``x/2 * (1 + erf(x / sqrt 2))``), ``gelu_tanh`` (the tanh approximation
  ``x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``),
* ``hard_swish`` (``x * relu6(x + 3) / 6``).

One compiled Numba pass (the same kernel as the conv/matmul epilogue), GIL released; the
arithmetic is done in float64 and rounded once to the array's dtype.  Thread-safety: writes
only ``x``; callers order writers of the same array.
"""

from __future__ import annotations

import numpy as np

from pytfrt.backends.cpu._epilogue import ACTIVATION_CODES, activation_code, epilogue_2d
from pytfrt.backends.cpu.ops import OpError

ACTIVATIONS: tuple[str, ...] = tuple(ACTIVATION_CODES)
"""The activation names accepted here and by the fused epilogues."""

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_activation(op: str, activation: str, dtype: np.dtype | None = None) -> int:
    """Validate an activation name (and, unless ``none``, a float32/float64 ``dtype``).

    Returns:
        The kernel code for the epilogue.

    Raises:
        OpError: unknown name, or an activation on a non-float dtype.
    """
    code = activation_code(op, activation)
    if code and dtype is not None and np.dtype(dtype) not in FLOAT_DTYPES:
        raise OpError(f"{op}: activation {activation!r} needs float32 or float64, got {dtype}")
    return code


def apply_activation(x: np.ndarray, activation: str, alpha: float = 0.0) -> np.ndarray:
    """Overwrite ``x`` with ``activation(x)`` and return it.

    Args:
        x: a writable float32/float64 array (any shape and strides).
        activation: one of :data:`ACTIVATIONS`.
        alpha: the negative slope of ``leaky_relu`` (ignored otherwise).

    Raises:
        OpError: unknown activation, non-float or read-only ``x``.
    """
    code = check_activation("apply_activation", activation, getattr(x, "dtype", None))
    if not isinstance(x, np.ndarray):
        raise OpError(f"apply_activation: expected an ndarray, got {type(x).__name__}")
    if code == 0 or x.size == 0:
        return x
    if not x.flags.writeable:
        raise OpError("apply_activation: the array is read-only")
    if x.flags.c_contiguous:
        epilogue_2d(x.reshape(1, -1), None, None, code, alpha)
    else:
        tmp = np.ascontiguousarray(x)
        epilogue_2d(tmp.reshape(1, -1), None, None, code, alpha)
        x[...] = tmp
    return x
