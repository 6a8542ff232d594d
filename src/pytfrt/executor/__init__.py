"""The BEF executor: loads a Program and runs its functions (spec 2).

* :func:`load_program` -> :class:`BEFFile` (resolves kernels and natives before anything runs).
* :class:`BEFFunction` -- async dataflow execution with TFRT's exact scheduling order.
* :class:`SyncBEFFunction` -- ``tfrt.sync`` functions, a straight-line interpreter.
* :class:`NativeFunction` / :class:`NativeRegistry` -- ``tfrt.native`` declarations.

Tracing hook: if the HostContext has a ``tracer`` attribute that is not ``None``, the async
executor calls ``tracer.begin_scope(kernel_name, level)`` / ``tracer.end_scope()`` around every
kernel (``level`` 2 = debug).  One attribute check per invocation, one ``is None`` test per
kernel when tracing is off.

Depends on :mod:`pytfrt.host` and :mod:`pytfrt.bef` only.
"""

from pytfrt.executor.async_executor import BEFFunction as BEFFunction
from pytfrt.executor.loader import BEFFile as BEFFile
from pytfrt.executor.loader import LoadError as LoadError
from pytfrt.executor.loader import load_program as load_program
from pytfrt.executor.native import NativeFunction as NativeFunction
from pytfrt.executor.native import NativeRegistry as NativeRegistry
from pytfrt.executor.native import test_native_registry as test_native_registry
from pytfrt.executor.sync_executor import SyncBEFFunction as SyncBEFFunction

__all__ = [
    "BEFFile",
    "BEFFunction",
    "LoadError",
    "NativeFunction",
    "NativeRegistry",
    "SyncBEFFunction",
    "load_program",
    "test_native_registry",
]
