"""Generated C, compiled once with the machine's C compiler into an on-disk cache.

The fused segments of whole-function code (:mod:`pytfrt.backends.cpu.fusible_kernels`) are C
extension modules generated per segment.  :func:`extension` compiles such a module's source
with ``cc`` (``$CC`` if set) into :func:`cache_dir`, named by the SHA-256 of everything that
decides the binary (the source, the compiler command, the Python ABI tag and the NumPy
version), and imports it; a later process finds the shared object and only loads it (about a
millisecond), so a program pays the compiler once per machine, not once per run -- and never
imports Numba.

Also the home of :data:`COMPILE_AFTER`, which the whole-region Numba kernels of
:mod:`pytfrt.backends.cpu.small_graph` share; the owner-only directory is
:func:`pytfrt.support.disk_cache.cache_dir`.

Errors: :class:`CompileError` when there is no C compiler, it fails, or the module cannot be
loaded (callers fall back to their uncompiled path).  Thread-safe: concurrent compiles of the
same module (threads or processes) each write a private temporary file and rename it into
place.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

from pytfrt.support.disk_cache import cache_dir, key_digest

COMPILE_AFTER = 2
"""Calls of a generated kernel that run uncompiled before it is compiled: a program run once or
twice (a test, a one-off evaluation) never pays the compile; a training loop compiles on its
third step (a C segment) or starts compiling there in the background (a Numba region)."""

CFLAGS = ("-O2", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math",
          "-fno-strict-aliasing", "-w")
"""Compiler flags: no contraction into fused multiply-adds and no fast-math, so every float32
operation rounds as NumPy's loops round it (the same bits)."""

_lock = threading.Lock()
_loaded: dict[str, ModuleType] = {}


class CompileError(Exception):
    """The C source could not be compiled or loaded (the message says why)."""


def _compiler() -> list[str]:
    import shlex
    import shutil

    cc = shlex.split(os.environ.get("CC", "")) or ["cc"]
    found = shutil.which(cc[0]) or (shutil.which("gcc") if cc == ["cc"] else None)
    if found is None:
        raise CompileError(f"no C compiler ({cc[0]!r} not found)")
    return [found, *cc[1:]]


def _includes(uses_numpy: bool) -> list[str]:
    import sysconfig

    paths = [f"-I{sysconfig.get_paths()['include']}"]
    if uses_numpy:
        import numpy as np

        paths.append(f"-I{np.get_include()}")
    return paths


def module_name(source: str, prefix: str, uses_numpy: bool = True) -> str:
    """The module name (``prefix`` + a digest) the source must define ``PyInit_`` for: the
    digest covers the source, the compiler command, the Python ABI tag and NumPy's version
    (if the module uses NumPy's C API: ``uses_numpy``)."""
    version = ""
    if uses_numpy:
        import numpy as np

        version = np.__version__
    key = "\0".join((source, os.environ.get("CC", ""), " ".join(CFLAGS),
                     sys.implementation.cache_tag or "", version))
    return prefix + key_digest(key)


def extension(source: str, name: str, uses_numpy: bool = True) -> ModuleType:
    """The C extension module ``name`` (from :func:`module_name`) built from ``source``:
    loaded from :func:`cache_dir` if it was built before (a file there that does not load --
    truncated, from another machine -- is built again), else compiled there (or into a
    temporary directory if there is no usable cache directory) and loaded.

    Raises:
        CompileError: no compiler, the compile failed, or the module cannot be loaded.
    """
    module = _loaded.get(name)
    if module is not None:
        return module
    with _lock:
        module = _loaded.get(name)
        if module is None:
            module = _loaded[name] = _build(source, name, uses_numpy)
    return module


class OptionalExtension:
    """A NumPy-using C module from ``source`` (its name written ``MODNAME`` there, replaced by
    :func:`module_name` with ``prefix``), built or loaded by the first call: the call returns
    the module, or ``None`` when it cannot be built or :attr:`enabled` is false (the caller
    keeps its other path).  Thread-safe."""

    def __init__(self, source: str, prefix: str) -> None:
        self.source, self.prefix = source, prefix
        self.enabled = True
        """``False``: the call returns ``None`` (tests of the other path)."""
        self._module: ModuleType | None = None
        self._tried = False
        self._lock = threading.Lock()

    def __call__(self) -> ModuleType | None:
        if not self.enabled:
            return None
        if not self._tried:
            with self._lock:
                if not self._tried:
                    name = module_name(self.source, self.prefix)
                    try:
                        self._module = extension(self.source.replace("MODNAME", name), name)
                    except CompileError:
                        self._module = None
                    self._tried = True
        return self._module


def _build(source: str, name: str, uses_numpy: bool) -> ModuleType:
    d = cache_dir()
    if d is not None:
        path = d / f"{name}.so"
        if path.exists():
            try:
                return _import(name, path)
            except CompileError:  # truncated or foreign: built again below
                pass
        _compile(source, name, d, path, uses_numpy)
        return _import(name, path)
    import tempfile  # only when building (as subprocess, shlex, shutil): ~10 ms of start-up

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.so"
        _compile(source, name, Path(tmp), path, uses_numpy)
        return _import(name, path)


def _compile(source: str, name: str, d: Path, path: Path, uses_numpy: bool) -> None:
    import subprocess
    import tempfile

    fd, c_file = tempfile.mkstemp(dir=d, prefix=f".{name}.", suffix=".c")
    so_file = c_file[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(source)
        cmd = [*_compiler(), *CFLAGS, *_includes(uses_numpy), c_file, "-o", so_file, "-lm"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CompileError(f"{cmd[0]} failed: {exc}") from None
        if proc.returncode != 0:
            raise CompileError(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        os.replace(so_file, path)
    except OSError as exc:
        raise CompileError(f"cannot write to {d}: {exc}") from None
    finally:
        for f in (c_file, so_file):
            try:
                os.unlink(f)
            except OSError:
                pass


def _import(name: str, path: Path) -> ModuleType:
    try:
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (ImportError, OSError) as exc:
        raise CompileError(f"cannot load {path}: {exc}") from None
    return module
