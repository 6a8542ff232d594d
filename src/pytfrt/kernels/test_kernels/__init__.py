"""Test kernels (TFRT's ``lib/test_kernels``): ``tfrt_test.*``, ``vt.*`` and ``tfrt_tutorial.*``.

``register(registry)`` registers all of them; the registry calls it lazily.  The tensor, CPU
and core-runtime ``tfrt_test.*`` kernels live with those libraries.
"""

from __future__ import annotations

from pytfrt.host.registry import KernelRegistry
from pytfrt.kernels.test_kernels import (
    async_kernels,
    benchmark,
    errors,
    simple,
    sync,
    tutorial,
    value_tracking,
)

__all__ = ["register"]


def register(registry: KernelRegistry) -> None:
    """Register every test kernel in ``registry``."""
    for module in (errors, simple, async_kernels, sync, benchmark, value_tracking, tutorial):
        module.register(registry)
