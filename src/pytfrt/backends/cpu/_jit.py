"""Numba, imported only when a Numba kernel is first called.

Importing Numba (with llvmlite and the SciPy it pulls in) costs ~80 MB of resident memory and
~0.15 s; its first compile (or load from the on-disk cache) another ~45 MB.  Most kernel
modules define a few ``@numba.njit`` functions at import time, and the kernel registry imports
every kernel module, so a model whose kernels all have C or oneDNN versions (the mobile CNNs:
``docs/kernels.md``) used to pay for Numba without running a single Numba function.

The kernel modules therefore write ``from pytfrt.backends.cpu._jit import numba`` instead of
``import numba``.  Until Numba is needed, that name is :data:`numba`, a stand-in whose
``njit(...)`` (and ``jit``) returns a :class:`LazyDispatcher` per function: calling one (or
reading an attribute of it that only Numba's dispatcher has, ``py_func`` aside) imports
Numba.  Any other attribute of the stand-in (``numba.prange``, ``numba.typeof``,
``numba.vectorize``...) imports Numba too and is Numba's.

When Numba is imported through here (:func:`real_numba`), every pending :class:`LazyDispatcher`
becomes a real ``numba.njit`` dispatcher (no compile yet: Numba compiles on the first call as
before), and the globals of every loaded ``pytfrt`` module that hold a stand-in are rebound to
the real object, so compiled code that calls another kernel function (or ``numba.prange``)
through a module global sees Numba's objects.  Code that imports Numba itself and compiles
functions that reach kernel functions must call :func:`real_numba` first.

Thread-safety: the switch happens once, under a lock; a :class:`LazyDispatcher` may be called
from any thread.  Errors are Numba's (an import failure raises ``ImportError`` at the first
call of a Numba kernel).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

_lock = threading.RLock()
_real: ModuleType | None = None
_pending: list[LazyDispatcher] = []


def loaded() -> bool:
    """Whether Numba has been imported (by anyone) in this process."""
    return _real is not None or "numba" in sys.modules


def real_numba() -> ModuleType:
    """The ``numba`` module, imported now if needed; every :class:`LazyDispatcher` made so
    far becomes Numba's dispatcher and module globals holding a stand-in are rebound."""
    global _real, numba
    if _real is not None:
        return _real
    with _lock:
        if _real is None:
            import numba as module

            for proxy in list(_pending):
                proxy._resolve(module)
            _pending.clear()
            _real = module
            numba = module  # later ``from ..._jit import numba`` get Numba itself
            _rebind(module)
    return _real


def _rebind(module: ModuleType) -> None:
    """Replace stand-ins in the globals of every loaded ``pytfrt`` module."""
    for name, mod in list(sys.modules.items()):
        if not name.startswith("pytfrt") or mod is None:
            continue
        ns = vars(mod)
        for key, value in list(ns.items()):
            if value is _STAND_IN:
                ns[key] = module
            elif isinstance(value, LazyDispatcher) and value._dispatcher is not None:
                ns[key] = value._dispatcher


class LazyDispatcher:
    """A ``numba.njit`` function whose dispatcher is made (Numba imported) on first use.

    Calls and attributes other than ``py_func`` go to Numba's dispatcher."""

    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = py_func
        self._options = options
        self._dispatcher: Any = None
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__module__ = py_func.__module__
        self.__doc__ = py_func.__doc__

    def _resolve(self, module: ModuleType) -> Any:
        if self._dispatcher is None:
            self._dispatcher = module.njit(**self._options)(self.py_func)
        return self._dispatcher

    def dispatcher(self) -> Any:
        """Numba's dispatcher for this function (imports Numba)."""
        if self._dispatcher is None:
            real_numba()
        return self._dispatcher if self._dispatcher is not None else \
            self._resolve(real_numba())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.dispatcher()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)

    def __repr__(self) -> str:
        return f"<lazy numba.njit {self.__module__}.{self.__qualname__}>"


class _NumbaStandIn:
    """The ``numba`` name of the kernel modules until Numba is imported (see the module
    docstring)."""

    def njit(self, *args: Any, **options: Any) -> Any:
        if _real is not None or (args and not callable(args[0])):
            # Numba already here, or eager signatures given: Numba's own decorator
            return real_numba().njit(*args, **options)
        if args:  # bare ``@numba.njit``
            return self._lazy(args[0], options)
        return lambda fn: self._lazy(fn, options)

    jit = njit

    @staticmethod
    def _lazy(fn: Callable[..., Any], options: dict[str, Any]) -> Any:
        with _lock:
            if _real is not None:
                return _real.njit(**options)(fn)
            proxy = LazyDispatcher(fn, options)
            _pending.append(proxy)
            return proxy

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(real_numba(), name)


_STAND_IN: Any = _NumbaStandIn()
numba: Any = _STAND_IN
"""Numba's stand-in until Numba is imported, then ``numba`` itself."""
