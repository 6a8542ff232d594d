"""Kernels of the two original playground experiments (examples/mlp_xor/README.md).

* :mod:`pytfrt.playground.mlp` -- ``sigmoid_inplace.f32`` and ``sigmoid_grad_inplace.f32``
  used by the XOR MLP programs.
* :mod:`pytfrt.playground.nqueens` -- ``nqueens.i32``, the thread-scheduling benchmark kernel.

May import :mod:`pytfrt.host` and :mod:`pytfrt.tensor`.
"""

from __future__ import annotations

import importlib
import importlib.util

from pytfrt.backends.cpu import provide_fused_segment_kernels
from pytfrt.host.registry import KernelRegistry

_MODULES = ("pytfrt.playground.mlp", "pytfrt.playground.nqueens")


def register(registry: KernelRegistry) -> None:
    """Register every playground kernel module that is present (their tensor kernels can run
    in fused segments: the CPU backend's Numba kernels are offered to the executor)."""
    provide_fused_segment_kernels()
    for name in _MODULES:
        if importlib.util.find_spec(name) is not None:
            registry.add_module(importlib.import_module(name))
