"""``tfrt_sht.*`` kernels: string host tensors, and their ``tfrt_sht_sync`` twins.

``tfrt_sht.create_tensor {shape = [2], values = ["a", "b"]}`` and
``tfrt_sht.create_uninitialized_tensor {shape = [2]}`` (empty strings).
"""

from __future__ import annotations

from typing import Any

from pytfrt.host.registry import Attr, KernelError, KernelRegistry
from pytfrt.tensor.kernels.util import dims_of
from pytfrt.tensor.shape import ShapeError
from pytfrt.tensor.string_host_tensor import StringHostTensor


def create_tensor(shape: Attr[Any], values: Attr[Any]) -> StringHostTensor:
    """A string tensor of ``shape`` holding ``values`` (attributes name-sorted: shape, values)."""
    if isinstance(values, (str, bytes)):
        values = (values,)
    try:
        return StringHostTensor.create(dims_of(shape), list(values))
    except ShapeError as exc:
        raise KernelError(str(exc)) from None


def create_uninitialized_tensor(shape: Attr[Any]) -> StringHostTensor:
    """A string tensor of ``shape`` holding empty strings."""
    try:
        return StringHostTensor.create(dims_of(shape))
    except ShapeError as exc:
        raise KernelError(str(exc)) from None


def register(registry: KernelRegistry) -> None:
    """Register every ``tfrt_sht.*`` and ``tfrt_sht_sync.*`` kernel."""
    registry.add_kernel("tfrt_sht.create_tensor", create_tensor)
    registry.add_kernel("tfrt_sht.create_uninitialized_tensor", create_uninitialized_tensor)
    registry.add_sync_kernel("tfrt_sht_sync.create_tensor", create_tensor)
    registry.add_sync_kernel(
        "tfrt_sht_sync.create_uninitialized_tensor", create_uninitialized_tensor
    )
