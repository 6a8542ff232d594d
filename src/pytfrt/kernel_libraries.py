"""pytfrt's own kernel libraries, and a registry with all of them (plus entry-point plugins).

* :data:`BUILTIN_LIBRARIES` -- each library by module path and kernel-name prefixes.
* :func:`builtin_registry` -- a :class:`~pytfrt.host.registry.KernelRegistry` that registers
  them *lazily* (a library is imported the first time one of its names is looked up), so a run
  imports only what its program uses.

The list names modules of every runtime layer (kernels, tensor, backends, core_runtime,
playground, distributed), so it lives here, above them, and not in :mod:`pytfrt.host`: the
host provides the lazy-library mechanism (``KernelRegistry.add_lazy_library``) and the plugin
loaders (:mod:`pytfrt.host.kernel_libraries`).  Thread-safety: as the registry.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from pytfrt.host.kernel_libraries import load_entry_point_kernels
from pytfrt.host.registry import KernelRegistry

__all__ = ["BUILTIN_LIBRARIES", "builtin_registry"]

# The built-in kernel libraries, by module path and kernel-name prefixes.  Modules are named
# as strings so this layer imports none of them; each exposes ``register(registry)``.
BUILTIN_LIBRARIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pytfrt.kernels.basic", ("tfrt.",)),
    ("pytfrt.kernels.test_kernels", ("tfrt_test.", "vt.", "tfrt_tutorial.")),
    (
        "pytfrt.tensor.kernels",
        ("ts.", "tfrt_dht.", "tfrt_dht_sync.", "coo.", "tfrt_sht.", "tfrt_sht_sync.", "btf."),
    ),
    ("pytfrt.backends.cpu.kernels", ("eigen.", "tfrt_test.", "cpu.")),
    # Its few tfrt_test.* kernels by name, so that a program of tensor kernels (tfrt_test.*)
    # does not load the eager core runtime.
    (
        "pytfrt.core_runtime.kernels",
        (
            "corert.", "corert_sync.", "tfrt_test.corert.", "tfrt_test.const_dense_attr",
            "tfrt_test.sync.const_dense_attr", "tfrt_test.error_tensorhandle",
        ),
    ),
    ("pytfrt.playground", ("sigmoid_inplace.", "sigmoid_grad_inplace.", "nqueens.", "mlp.")),
    ("pytfrt.backends.cpu.graph_kernels", ("tg.",)),
    ("pytfrt.distributed.kernels", ("tfrt_dist.",)),
)


NUMPY_FREE_LIBRARY = "pytfrt.playground.buffer_kernels"
"""The kernels of a NumPy-free process (:mod:`pytfrt.host.numpy_free`): registered first, and
eagerly, by ``builtin_registry(numpy_free=True)``, so that their names never load the NumPy
libraries that define the same names."""


def builtin_registry(entry_points: bool = True, numpy_free: bool = False) -> KernelRegistry:
    """A registry with every built-in library registered lazily (plus entry-point plugins);
    with ``numpy_free``, :data:`NUMPY_FREE_LIBRARY` registered before them.

    Libraries whose module does not exist (not built yet) are skipped.
    """
    registry = KernelRegistry()
    if numpy_free:
        registry.add_module(importlib.import_module(NUMPY_FREE_LIBRARY))
    for module_name, prefixes in BUILTIN_LIBRARIES:
        if _module_exists(module_name):
            registry.add_lazy_library(module_name, prefixes)
    if entry_points:
        load_entry_point_kernels(registry)
    return registry


def _module_exists(module_name: str) -> bool:
    """Whether a ``pytfrt.*`` module exists, without importing its parent packages.

    (``importlib.util.find_spec`` imports the parents, which would load NumPy at start-up.)
    """
    parts = module_name.split(".")
    if parts[0] != "pytfrt":
        return importlib.util.find_spec(module_name) is not None
    base = Path(__file__).resolve().parent.joinpath(*parts[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
