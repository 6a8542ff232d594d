"""Where kernels come from: the built-in libraries, entry-point plugins and ``--kernels`` files.

* :data:`BUILTIN_LIBRARIES` -- pytfrt's own kernel libraries, by module path and kernel-name
  prefixes; :func:`builtin_registry` registers them *lazily* (a library is imported the first
  time one of its names is looked up), so a run imports only what its program uses.
* :func:`load_entry_point_kernels` -- third-party packages declare a ``register(registry)``
  callable in the entry-point group ``pytfrt.kernels``.
* :func:`load_kernels` -- a ``.py`` file or an importable module name (``--kernels``): its
  ``register(registry)`` is called, or every ``@kernel`` function in it is added.

All functions raise :class:`~pytfrt.host.registry.RegistryError` with the reason on failure.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pytfrt.host.registry import KernelRegistry, RegistryError

ENTRY_POINT_GROUP = "pytfrt.kernels"


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
    ("pytfrt.core_runtime.kernels", ("corert.", "corert_sync.", "tfrt_test.")),
    ("pytfrt.playground", ("sigmoid_inplace.", "sigmoid_grad_inplace.", "nqueens.", "mlp.")),
    ("pytfrt.backends.cpu.graph_kernels", ("tg.",)),
    ("pytfrt.distributed.kernels", ("tfrt_dist.",)),
)


def builtin_registry(entry_points: bool = True) -> KernelRegistry:
    """A registry with every built-in library registered lazily (plus entry-point plugins).

    Libraries whose module does not exist (not built yet) are skipped.
    """
    registry = KernelRegistry()
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
    base = Path(__file__).resolve().parent.parent.joinpath(*parts[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def load_entry_point_kernels(registry: KernelRegistry) -> list[str]:
    """Call every ``register`` callable of the ``pytfrt.kernels`` entry-point group.

    Returns the names of the entry points loaded.

    Raises:
        RegistryError: if an entry point cannot be loaded (the error names it).
    """
    loaded = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            register = ep.load()
            register(registry)
        except RegistryError:
            raise
        except Exception as exc:
            raise RegistryError(f"cannot load kernels from entry point '{ep.name}': {exc}") from exc
        loaded.append(ep.name)
    return loaded


def load_kernels(registry: KernelRegistry, spec: str) -> ModuleType:
    """Load extra kernels from a ``.py`` file path or an importable module name.

    Raises:
        RegistryError: if the file or module cannot be loaded, with the reason.
    """
    path = Path(spec)
    try:
        if spec.endswith(".py") or path.is_file():
            if not path.is_file():
                raise RegistryError(f"kernel file '{spec}' does not exist")
            mod_name = f"pytfrt_user_kernels_{path.stem}_{abs(hash(str(path.resolve())))}"
            module_spec = importlib.util.spec_from_file_location(mod_name, path)
            if module_spec is None or module_spec.loader is None:
                raise RegistryError(f"cannot load kernel file '{spec}'")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[mod_name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(spec)
    except RegistryError:
        raise
    except Exception as exc:
        raise RegistryError(
            f"cannot load kernels from '{spec}': {type(exc).__name__}: {exc}"
        ) from exc
    try:
        registry.add_module(module)
    except RegistryError as exc:
        raise RegistryError(f"kernels from '{spec}': {exc}") from exc
    return module
