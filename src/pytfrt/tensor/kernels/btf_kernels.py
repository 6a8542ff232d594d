"""``btf.read_dense_tensor.T.R`` kernels: read a tensor from a BTF file (docs/conformance.md).

The read runs as blocking work (``HostContext.enqueue_blocking_work``); the result is an
unavailable value filled when the read finishes.  Errors (``failed to open file <path> for
reading``, bad index, dtype, rank or layout) are **emitted** as diagnostics at the kernel's
location and become the result's error.  Files are read only under the host's data
directories (``HostContext.data_dirs``, ``bef_executor --data_dir``; docs/security.md).
T in i8 i16 i32 i64 f32 f64 ui8 ui16 ui32 ui64, R in 0..5.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import KernelFrame, KernelRegistry
from pytfrt.tensor.btf import BTF_DTYPES, BtfError, read_dense_tensor
from pytfrt.tensor.dense_host_tensor import AllocationError, wrap_result
from pytfrt.tensor.dtype import DType


def _read(dtype: DType, rank: int) -> Callable[..., Any]:
    def read_dense_tensor_kernel(
        path: Any, index: int, exec_ctx: ExecutionContext, frame: KernelFrame
    ) -> None:
        result = frame.allocate_result(0)
        file = path.decode() if isinstance(path, bytes) else str(path)

        def work() -> None:
            try:
                t = read_dense_tensor(file, int(index), dtype, rank, exec_ctx.host.data_dirs)
                t = wrap_result(exec_ctx, t.dtype, t.array)
            except (BtfError, AllocationError) as exc:
                frame.report_error(str(exc))
                return
            result.emplace(t)

        done = exec_ctx.host.enqueue_blocking_work(work)
        if done.is_error() and result.is_unavailable():
            frame.report_error(done.error.message)

    return read_dense_tensor_kernel


def register(registry: KernelRegistry) -> None:
    """Register every ``btf.read_dense_tensor.T.R`` kernel."""
    for dtype in BTF_DTYPES:
        for rank in range(0, 6):
            registry.add_kernel(
                f"btf.read_dense_tensor.{dtype.mlir_name}.{rank}", _read(dtype, rank)
            )
