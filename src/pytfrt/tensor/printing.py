"""TFRT's exact print formats for host tensors (docs/conformance.md).

* DenseHostTensor: ``DenseHostTensor dtype = f32, shape = [2, 2], values = [1.000000e+00, ...]``
  -- at most the first 16 values, then ``, ... `` before ``]`` when there are more.
* CooHostTensor: ``CooHostTensor dtype = i32, shape = [3, 2], indices = [0, 0, ...],
  values = [4, ...]`` (nothing truncated; the printer itself ends with a newline).
* StringHostTensor: ``StringHostTensor shape = [2], values = ["a", "b"]`` -- the first 16
  strings, and ``, ... `` only when there are more than 32 (TFRT's quirk).
* ScalarHostTensor: ``ScalarHostTensor dtype = i32, shape = [2, 2], value = 1``.

Element formats: integers in decimal (i8/u8 as numbers), i1 as 0/1, f32/f64 as C ``%e``
(``INF``/``-INF``/``nan`` for non-finite values), f16 ``fp16(<bits>)``, bf16 ``bf16(<bits>)``,
complex ``(<re %e>,<im %e>)``, strings quoted.  Pure functions; thread-safe.  The value
arguments are NumPy arrays or any flat sequence with ``tolist`` (the NumPy-free storage's
memoryview); NumPy is imported only to print f16/bf16 elements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np

from pytfrt.tensor.dtype import BF16, F16, DType
from pytfrt.tensor.shape import format_dims

MAX_DENSE_VALUES: Final = 16
"""DenseHostTensor prints at most this many values."""


def format_float(v: float) -> str:
    """C ``%e`` with TFRT's spellings of non-finite values (``INF``, ``-INF``, ``nan``)."""
    if math.isfinite(v):
        return f"{v:e}"
    if math.isnan(v):
        return "nan"
    return "INF" if v > 0 else "-INF"


def format_element(dtype: DType, value: Any) -> str:
    """One element of ``dtype`` as TFRT prints it inside a tensor."""
    kind = dtype.kind
    if kind in ("int", "uint", "quant"):
        return str(int(value))
    if kind == "bool":
        return "1" if value else "0"
    if kind == "float":
        import numpy as np

        if dtype is F16:
            return f"fp16({int(np.asarray(value, np.float16).view(np.uint16))})"
        if dtype is BF16:
            return f"bf16({int(np.asarray(value, dtype.np_dtype).view(np.uint16))})"
        return format_float(float(value))
    if kind == "complex":
        c = complex(value)
        return f"({format_float(c.real)},{format_float(c.imag)})"
    if kind == "string":
        return f'"{value}"'
    return str(value)


def format_values(dtype: DType, flat: Any, limit: int | None = MAX_DENSE_VALUES) -> str:
    """``[v0, v1, ...]`` for a flat array; ``, ... `` before ``]`` if truncated at ``limit``."""
    n = flat.shape[0]
    shown = flat if limit is None or n <= limit else flat[:limit]
    if dtype.kind == "float" and dtype is not F16 and dtype is not BF16:
        parts = [format_float(v) for v in shown.tolist()]
    elif dtype.kind in ("int", "uint", "quant"):
        parts = [str(v) for v in shown.tolist()]
    elif dtype.kind == "bool":
        parts = ["1" if v else "0" for v in shown.tolist()]
    else:
        parts = [format_element(dtype, v) for v in shown]
    body = ", ".join(parts)
    if limit is not None and n > limit:
        body += ", ... "
    return f"[{body}]"


def format_dense(dtype: DType, dims: Sequence[int], array: Any) -> str:
    """The DenseHostTensor line (without newline); ``array`` is an ndarray or a flat
    memoryview of the elements."""
    flat = array if array.__class__ is memoryview else array.reshape(-1)
    return (
        f"DenseHostTensor dtype = {dtype.name}, shape = {format_dims(dims)}, "
        f"values = {format_values(dtype, flat)}"
    )


def format_coo(
    dtype: DType, dims: Sequence[int], indices: np.ndarray, values: np.ndarray
) -> str:
    """The CooHostTensor text, including TFRT's trailing newline."""
    idx = ", ".join(str(i) for i in indices.reshape(-1).tolist())
    return (
        f"CooHostTensor dtype = {dtype.name}, shape = {format_dims(dims)}, "
        f"indices = [{idx}], values = {format_values(dtype, values.reshape(-1), None)}\n"
    )


def format_strings(dims: Sequence[int], strings: Sequence[str]) -> str:
    """The StringHostTensor line (first 16 strings; ``, ... `` only beyond 32)."""
    shown = ", ".join(f'"{s}"' for s in strings[:MAX_DENSE_VALUES])
    if len(strings) > 2 * MAX_DENSE_VALUES:
        shown += ", ... "
    return f"StringHostTensor shape = {format_dims(dims)}, values = [{shown}]"


def format_scalar(dtype: DType, dims: Sequence[int], value: Any) -> str:
    """The ScalarHostTensor line."""
    return (
        f"ScalarHostTensor dtype = {dtype.name}, shape = {format_dims(dims)}, "
        f"value = {format_element(dtype, value)}"
    )
