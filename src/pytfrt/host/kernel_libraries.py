"""Where third-party kernels come from: entry-point plugins and ``--kernels`` files.

(pytfrt's own libraries are listed above the runtime layers, in :mod:`pytfrt.kernel_libraries`,
whose ``builtin_registry()`` registers them lazily and calls :func:`load_entry_point_kernels`.)

* :func:`load_entry_point_kernels` -- third-party packages declare a ``register(registry)``
  callable in the entry-point group ``pytfrt.kernels``.
* :func:`load_kernels` -- a ``.py`` file or an importable module name (``--kernels``): its
  ``register(registry)`` is called, or every ``@kernel`` function in it is added.

All functions raise :class:`~pytfrt.host.registry.RegistryError` with the reason on failure.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from pytfrt.host.registry import KernelRegistry, RegistryError

ENTRY_POINT_GROUP = "pytfrt.kernels"


def load_entry_point_kernels(registry: KernelRegistry) -> list[str]:
    """Call every ``register`` callable of the ``pytfrt.kernels`` entry-point group.

    Returns the names of the entry points loaded.

    Raises:
        RegistryError: if an entry point cannot be loaded (the error names it).
    """
    loaded: list[str] = []
    if not may_declare_entry_points(ENTRY_POINT_GROUP):
        return loaded
    import importlib.metadata  # ~50 ms of imports: only when some package may declare one

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


def may_declare_entry_points(group: str, path: list[str] | None = None) -> bool:
    """Whether some installed distribution on ``path`` (default ``sys.path``) may declare
    entry points of ``group``: a cheap scan of the ``entry_points.txt`` files of the
    ``*.dist-info``/``*.egg-info`` directories for the ``[group]`` header, so that a process
    without plugins does not import :mod:`importlib.metadata`.  Errs towards ``True`` (a zip
    on the path, which it does not open).
    """
    marker = f"[{group}]".encode()
    for base in sys.path if path is None else path:
        base = base or "."
        if os.path.isfile(base):
            return True  # a zip archive: let importlib.metadata look inside
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(base, name, "entry_points.txt"), "rb") as fh:
                        if marker in fh.read():
                            return True
                except OSError:
                    continue
    return False


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
