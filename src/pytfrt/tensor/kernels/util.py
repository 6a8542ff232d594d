"""Helpers shared by the tensor kernel modules (printing, attribute and dtype checks)."""

from __future__ import annotations

import sys
from typing import Any

from pytfrt.host.registry import KernelError
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import DType


def print_line(text: str) -> None:
    """Write ``text`` and a newline to stdout and flush (TFRT flushes after each print)."""
    out = sys.stdout
    out.write(text + "\n")
    out.flush()


def dims_of(value: Any) -> tuple[int, ...]:
    """Dimensions from a shape attribute value: a tuple of ints, or a ``ShapeAttr``.

    Raises:
        KernelError: for an unranked shape attribute or a non-integer element.
    """
    if value.__class__ is tuple:  # the common case: a tuple of ints, returned as it is
        for d in value:
            if d.__class__ is not int:
                break
        else:
            return value
    if hasattr(value, "dims"):
        dims = value.dims
        if dims is None:
            raise KernelError("expected a ranked shape attribute")
        return tuple(int(d) for d in dims)
    if isinstance(value, int):
        return (int(value),)
    try:
        return tuple(int(d) for d in value)
    except (TypeError, ValueError):
        raise KernelError(f"expected a shape attribute, got {value!r}") from None


def check_dht(t: Any, dtype: DType, what: str = "tensor") -> DenseHostTensor:
    """``t`` if it is a DenseHostTensor of ``dtype``.

    Raises:
        KernelError: naming the expected and actual types.
    """
    if not isinstance(t, DenseHostTensor):
        raise KernelError(f"expected a DenseHostTensor {what}, got {type(t).__name__}")
    if t.dtype is not dtype:
        raise KernelError(
            f"{what} has dtype {t.dtype.name} but the kernel expects {dtype.name}"
        )
    return t


def suffixes(dtype: DType) -> tuple[str, ...]:
    """Kernel-name suffixes of ``dtype`` (``i1`` is also spelled ``bool``)."""
    return (dtype.mlir_name, "bool") if dtype.mlir_name == "i1" else (dtype.mlir_name,)
