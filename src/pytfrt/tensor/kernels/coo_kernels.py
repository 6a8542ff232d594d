"""``coo.*`` kernels: COO sparse host tensors (docs/conformance.md).

``coo.convert_dht_to_coo.T.R`` (non-zero elements, TFRT's quirky index rows),
``coo.convert_coo_to_dht.T.R`` (a new zero-filled tensor with the values scattered) and
``coo.tensor_equal.T.R``, for T in f32, f64, i32, i64 and R in 0..4.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import KernelError, KernelRegistry
from pytfrt.tensor import dtype as dt
from pytfrt.tensor.coo_host_tensor import CooHostTensor, coo_to_dense, dense_to_coo
from pytfrt.tensor.dense_host_tensor import AllocationError, DenseHostTensor, allocate_dense
from pytfrt.tensor.dtype import DType
from pytfrt.tensor.kernels.util import check_dht
from pytfrt.tensor.shape import ShapeError

COO_DTYPES: tuple[DType, ...] = (dt.F32, dt.F64, dt.I32, dt.I64)


def _check_coo(s: Any, dtype: DType) -> CooHostTensor:
    if not isinstance(s, CooHostTensor):
        raise KernelError(f"expected a CooHostTensor, got {type(s).__name__}")
    if s.dtype is not dtype:
        raise KernelError(f"tensor has dtype {s.dtype.name} but the kernel expects {dtype.name}")
    return s


def _to_coo(dtype: DType) -> Callable[..., Any]:
    def convert_dht_to_coo(t: DenseHostTensor) -> tuple[CooHostTensor, Chain]:
        check_dht(t, dtype)
        return dense_to_coo(t), CHAIN

    return convert_dht_to_coo


def _to_dht(dtype: DType) -> Callable[..., Any]:
    def convert_coo_to_dht(
        s: CooHostTensor, exec_ctx: ExecutionContext
    ) -> tuple[DenseHostTensor, Chain]:
        _check_coo(s, dtype)
        try:
            out = allocate_dense(exec_ctx, dtype, s.dims)
            return coo_to_dense(s, out), CHAIN
        except (AllocationError, ShapeError) as exc:
            raise KernelError(str(exc)) from None

    return convert_coo_to_dht


def _equal(dtype: DType) -> Callable[..., Any]:
    def tensor_equal(a: CooHostTensor, b: CooHostTensor) -> tuple[bool, Chain]:
        _check_coo(a, dtype)
        _check_coo(b, dtype)
        return a.approx_equal(b), CHAIN

    return tensor_equal


def register(registry: KernelRegistry) -> None:
    """Register every ``coo.*`` kernel."""
    for dtype in COO_DTYPES:
        to_coo, to_dht, equal = _to_coo(dtype), _to_dht(dtype), _equal(dtype)
        for rank in range(0, 5):
            sfx = f"{dtype.mlir_name}.{rank}"
            registry.add_kernel(f"coo.convert_dht_to_coo.{sfx}", to_coo)
            registry.add_kernel(f"coo.convert_coo_to_dht.{sfx}", to_dht)
            registry.add_kernel(f"coo.tensor_equal.{sfx}", equal)
