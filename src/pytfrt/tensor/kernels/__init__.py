"""Tensor kernel libraries: ``ts.*``, ``tfrt_dht.*``, ``coo.*``, ``tfrt_sht.*``, ``btf.*``.

:func:`register` adds all of them to a registry; the built-in registry loads this module
lazily for those name prefixes (``pytfrt.kernel_libraries.BUILTIN_LIBRARIES``).  The CPU
``tfrt_test.*`` tensor kernels live in :mod:`pytfrt.backends.cpu.kernels`.
"""

from __future__ import annotations

from pytfrt.host.registry import KernelRegistry


def register(registry: KernelRegistry) -> None:
    """Register every tensor kernel.  (The modules are imported here, not with the package, so
    that a NumPy-free process can use :mod:`.util` and :mod:`.shape_kernels` alone.)"""
    from pytfrt.tensor.kernels import (
        btf_kernels,
        coo_kernels,
        dht_kernels,
        shape_kernels,
        sht_kernels,
    )

    shape_kernels.register(registry)
    dht_kernels.register(registry)
    coo_kernels.register(registry)
    sht_kernels.register(registry)
    btf_kernels.register(registry)
