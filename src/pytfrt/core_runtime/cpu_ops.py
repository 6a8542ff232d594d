"""The built-in CPU op table: every ``tfrt_test.*`` op the CPU op handler runs (docs/eager.md).

:func:`cpu_op_registry` returns the shared, fully populated :class:`~.op_registry.OpRegistry`
(built once, then read-only).  The ops live in :mod:`.ops_math`, :mod:`.ops_shape` and
:mod:`.ops_test`; :func:`new_cpu_op_registry` builds a fresh table to extend privately.
"""

from __future__ import annotations

import threading

from pytfrt.core_runtime import ops_math, ops_shape, ops_test
from pytfrt.core_runtime.op_registry import OpRegistry

_lock = threading.Lock()
_shared: OpRegistry | None = None


def new_cpu_op_registry() -> OpRegistry:
    """A new registry holding every built-in CPU op."""
    ops = OpRegistry()
    ops_math.register(ops)
    ops_shape.register(ops)
    ops_test.register(ops)
    return ops


def cpu_op_registry() -> OpRegistry:
    """The shared built-in CPU op registry (immutable after construction; thread-safe)."""
    global _shared
    if _shared is None:
        with _lock:
            if _shared is None:
                _shared = new_cpu_op_registry()
    return _shared
