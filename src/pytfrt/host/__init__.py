"""Host runtime: AsyncValue, Chain, work queues, HostContext, contexts, diagnostics, registry.

Everything a kernel runs on.  Depends only on :mod:`pytfrt.support`.
"""

from pytfrt.host.async_value import CHAIN as CHAIN
from pytfrt.host.async_value import AsyncValue as AsyncValue
from pytfrt.host.async_value import AsyncValueError as AsyncValueError
from pytfrt.host.async_value import Chain as Chain
from pytfrt.host.async_value import IndirectAsyncValue as IndirectAsyncValue
from pytfrt.host.async_value import make_available as make_available
from pytfrt.host.async_value import make_constructed as make_constructed
from pytfrt.host.async_value import make_error as make_error
from pytfrt.host.async_value import make_indirect as make_indirect
from pytfrt.host.async_value import make_ready_chain as make_ready_chain
from pytfrt.host.async_value import make_unconstructed as make_unconstructed
from pytfrt.host.async_value import run_when_ready as run_when_ready
from pytfrt.host.diagnostics import Diagnostic as Diagnostic
from pytfrt.host.diagnostics import DiagnosticCollector as DiagnosticCollector
from pytfrt.host.execution_context import ExecutionContext as ExecutionContext
from pytfrt.host.execution_context import RequestContext as RequestContext
from pytfrt.host.execution_context import ResourceContext as ResourceContext
from pytfrt.host.function import Function as Function
from pytfrt.host.function import FunctionKind as FunctionKind
from pytfrt.host.host_context import HostContext as HostContext
from pytfrt.host.registry import Attr as Attr
from pytfrt.host.registry import KernelEntry as KernelEntry
from pytfrt.host.registry import KernelError as KernelError
from pytfrt.host.registry import KernelFrame as KernelFrame
from pytfrt.host.registry import KernelKind as KernelKind
from pytfrt.host.registry import KernelRegistry as KernelRegistry
from pytfrt.host.registry import RegistryError as RegistryError
from pytfrt.host.registry import RemainingAttrs as RemainingAttrs
from pytfrt.host.registry import RemainingFunctions as RemainingFunctions
from pytfrt.host.registry import TypedAttr as TypedAttr
from pytfrt.host.registry import kernel as kernel
from pytfrt.host.work_queue import MultiThreadedWorkQueue as MultiThreadedWorkQueue
from pytfrt.host.work_queue import SingleThreadedWorkQueue as SingleThreadedWorkQueue
from pytfrt.host.work_queue import WorkQueue as WorkQueue
from pytfrt.host.work_queue import WorkQueueError as WorkQueueError
from pytfrt.host.work_queue import create_work_queue as create_work_queue

__all__ = [
    "CHAIN",
    "AsyncValue",
    "AsyncValueError",
    "Attr",
    "Chain",
    "Diagnostic",
    "DiagnosticCollector",
    "ExecutionContext",
    "Function",
    "FunctionKind",
    "HostContext",
    "IndirectAsyncValue",
    "KernelEntry",
    "KernelError",
    "KernelFrame",
    "KernelKind",
    "KernelRegistry",
    "MultiThreadedWorkQueue",
    "RegistryError",
    "RemainingAttrs",
    "RemainingFunctions",
    "RequestContext",
    "ResourceContext",
    "SingleThreadedWorkQueue",
    "TypedAttr",
    "WorkQueue",
    "WorkQueueError",
    "create_work_queue",
    "kernel",
    "make_available",
    "make_constructed",
    "make_error",
    "make_indirect",
    "make_ready_chain",
    "make_unconstructed",
    "run_when_ready",
]
