"""The BEF executor: loads a Program and runs its functions (docs/executor.md).

* :func:`load_program` -> :class:`BEFFile` (resolves kernels and natives before anything runs).
* :class:`BEFFunction` -- async dataflow execution with TFRT's exact scheduling order.
* :class:`SyncBEFFunction` -- ``tfrt.sync`` functions, a straight-line interpreter.
* :class:`NativeFunction` / :class:`NativeRegistry` -- ``tfrt.native`` declarations.

Tracing hook: if the HostContext has a ``tracer`` attribute that is not ``None``, each call
asks it for a per-call tracer (``tracer.bind_invocation(info)``, see
:mod:`pytfrt.host.tracing`) and, when that is not ``None``, calls ``begin_kernel(k, args)`` /
``end_kernel(results)`` around every kernel, ``skip_kernel(k, error)`` for kernels that
forward an error, ``value_ready(reg)`` when an async value arrives.  One attribute check per
invocation, one ``is None`` test per kernel when tracing is off.

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
