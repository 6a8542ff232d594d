"""Test kernels that turn a ``dense<...>`` attribute into a host tensor.

``"tfrt_test.const_dense_attr"() {value = dense<[[1, 1], [2, 2]]> : tensor<2x2xi32>}`` returns a
``DenseHostTensor`` holding the attribute's elements (a splat fills every element), and
``tfrt_test.sync.const_dense_attr`` is its twin for ``tfrt.sync`` functions, as in TFRT's
``tensor/mlir_tests/dense_host_tensor.mlir`` (docs/conformance.md, "What the kernel libraries
promise").  Each call returns a fresh, writable tensor; an attribute that is not ``dense<...>``
is a kernel error.
"""

from __future__ import annotations

from typing import Any

from pytfrt.host.registry import KernelError, KernelRegistry, TypedAttr, kernel


def _dense_to_dht(value: Any) -> Any:
    from pytfrt.core_runtime.kernel_attrs import dense_attr_to_array, plain
    from pytfrt.support.attributes import DenseAttr
    from pytfrt.tensor.dense_host_tensor import DenseHostTensor
    from pytfrt.tensor.dtype import dtype_from_name

    dense = plain(value)
    if not isinstance(dense, DenseAttr):
        raise KernelError(f"expected a dense<...> attribute, got {type(dense).__name__}")
    return DenseHostTensor(dtype_from_name(dense.dtype), dense_attr_to_array(dense))


@kernel("tfrt_test.const_dense_attr")
def const_dense_attr(value: TypedAttr) -> Any:
    """A ``DenseHostTensor`` of the ``value`` attribute."""
    return _dense_to_dht(value)


@kernel("tfrt_test.sync.const_dense_attr", sync=True)
def sync_const_dense_attr(value: TypedAttr) -> Any:
    """Sync twin of ``tfrt_test.const_dense_attr``."""
    return _dense_to_dht(value)


def register(registry: KernelRegistry) -> None:
    """Register the dense-attribute test kernels."""
    registry.add(const_dense_attr, sync_const_dense_attr)
