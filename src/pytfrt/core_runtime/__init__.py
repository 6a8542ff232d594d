"""Core runtime: eager, op-by-op execution with asynchronous TensorHandles (docs/eager.md).

Layout, in dispatch order:

* :mod:`.op_attrs` -- OpAttrs / OpAttrsRef (typed, frozen attribute maps and their print).
* :mod:`.tensor_handle` -- TensorHandle (tensor AsyncValue + metadata + device).
* :mod:`.op_registry` -- OpRecord (metadata fn + dispatch fn + flags) and OpRegistry.
* :mod:`.op_handler` -- OpHandler / CoreRuntimeOp interfaces, null and logging handlers.
* :mod:`.cpu_op_handler` -- the CPU handler and its dispatch steps.
* :mod:`.cpu_ops` (``ops_math``, ``ops_shape``, ``ops_test``) -- the ``tfrt_test.*`` CPU ops.
* :mod:`.core_runtime` -- CoreRuntime: named handlers, ``execute``, composite ops.
* :mod:`.kernels` -- the ``corert.*`` BEF kernels (registered lazily by the kernel registry).

The eager Python API over this package is :mod:`pytfrt.eager`.
"""

from pytfrt.core_runtime.core_runtime import CompositeOp as CompositeOp
from pytfrt.core_runtime.core_runtime import CoreRuntime as CoreRuntime
from pytfrt.core_runtime.core_runtime import OpHandlerNotFoundError as OpHandlerNotFoundError
from pytfrt.core_runtime.cpu_op_handler import CpuOpHandler as CpuOpHandler
from pytfrt.core_runtime.cpu_ops import cpu_op_registry as cpu_op_registry
from pytfrt.core_runtime.op_attrs import EMPTY_ATTRS as EMPTY_ATTRS
from pytfrt.core_runtime.op_attrs import OpAttrs as OpAttrs
from pytfrt.core_runtime.op_attrs import OpAttrsError as OpAttrsError
from pytfrt.core_runtime.op_attrs import OpAttrsRef as OpAttrsRef
from pytfrt.core_runtime.op_attrs import OpAttrType as OpAttrType
from pytfrt.core_runtime.op_handler import CoreRuntimeOp as CoreRuntimeOp
from pytfrt.core_runtime.op_handler import LoggingOpHandler as LoggingOpHandler
from pytfrt.core_runtime.op_handler import NullOpHandler as NullOpHandler
from pytfrt.core_runtime.op_handler import OpHandler as OpHandler
from pytfrt.core_runtime.op_handler import OpNotSupportedError as OpNotSupportedError
from pytfrt.core_runtime.op_registry import OpError as OpError
from pytfrt.core_runtime.op_registry import OpFlags as OpFlags
from pytfrt.core_runtime.op_registry import OpRecord as OpRecord
from pytfrt.core_runtime.op_registry import OpRegistry as OpRegistry
from pytfrt.core_runtime.tensor_handle import TensorHandle as TensorHandle
from pytfrt.core_runtime.tensor_handle import TensorHandleError as TensorHandleError

__all__ = [
    "EMPTY_ATTRS",
    "CompositeOp",
    "CoreRuntime",
    "CoreRuntimeOp",
    "CpuOpHandler",
    "LoggingOpHandler",
    "NullOpHandler",
    "OpAttrType",
    "OpAttrs",
    "OpAttrsError",
    "OpAttrsRef",
    "OpError",
    "OpFlags",
    "OpHandler",
    "OpHandlerNotFoundError",
    "OpNotSupportedError",
    "OpRecord",
    "OpRegistry",
    "TensorHandle",
    "TensorHandleError",
    "cpu_op_registry",
]
