"""The ``tfrt`` dialect's kernels (TFRT's ``lib/basic_kernels``): constants, integer and float
arithmetic, prints, chains, devices, function calls, control flow and parallel loops.

``register(registry)`` registers every ``tfrt.*`` kernel; the registry calls it lazily.
"""

from __future__ import annotations

from pytfrt.host.registry import KernelRegistry
from pytfrt.kernels.basic import chain, control_flow, integer, parallel
from pytfrt.kernels.basic import float as float_kernels

__all__ = ["register"]


def register(registry: KernelRegistry) -> None:
    """Register every ``tfrt.*`` kernel in ``registry``."""
    for module in (integer, float_kernels, chain, control_flow, parallel):
        module.register(registry)
