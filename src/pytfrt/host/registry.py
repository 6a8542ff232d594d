"""The kernel registry and ``@kernel``: how a plain typed Python function becomes a kernel.

Kernel author's manual
======================

Write an ordinary function and decorate it::

    @kernel("tfrt.add.i32")
    def add_i32(a: int, b: int) -> int:
        return wrap_i32(a + b)

    def register(registry: KernelRegistry) -> None:
        registry.add(add_i32)

The decorator only records the name(s) on the function and returns it unchanged, so it can be
unit-tested directly.  Nothing is registered at import time: a module exposes
``register(registry)``, and ``KernelRegistry.add_module(module)`` calls it (or, if the module has
none, adds every decorated function in it).  Third-party packages plug in through the entry
point group ``pytfrt.kernels`` (each entry point names a ``register(registry)`` callable); the
tools also accept ``--kernels file_or_module.py`` (both in :mod:`pytfrt.host.kernel_libraries`).

Parameters are bound by their annotation, left to right (docs/host.md):

===================================  ==========================================================
annotation                           receives
===================================  ==========================================================
anything else (``int``, ``X``)       the payload of the next argument
``AsyncValue[...]``                  the next argument's AsyncValue itself (to alias/forward it)
``*args`` (``*args: AsyncValue``)    all remaining argument payloads (resp. AsyncValues)
``Attr[T]``                          the next attribute's plain value (attributes are in
                                     **name-sorted** order, ``_tfrt_cost`` dropped)
``RemainingAttrs``                   the list of remaining attribute values
``TypedAttr``                        the next attribute as a typed ``Attribute`` object (then
                                     every attribute of the kernel is passed as an object)
``Function``                         the next function (symbol refs, then regions)
``RemainingFunctions``               the list of remaining functions
``ExecutionContext``                 the execution context (request, queue, location)
``KernelFrame``                      the raw frame (result slots, ``report_error``)
===================================  ==========================================================

An op may have one operand more than the kernel declares if that last operand is a chain: it
is ignored (the *trailing chain rule*).

The return value fills the results: one value -> result 0; a tuple -> results 0..n-1 when the op
has several results; an :class:`AsyncValue` is stored as is (an async result); ``None`` when the
op has no results or the kernel set them through its ``KernelFrame``.  Raising any exception
reports an error: the message is emitted as a diagnostic at the kernel's location and every
result slot not yet set becomes that error (``frame.report_error``).

Sync kernels (``@kernel(name, sync=True)``) run inside ``tfrt.sync`` functions on plain values:
the same binding rules, no AsyncValues; an exception aborts the sync function with that error
and is *not* emitted (docs/executor.md).

Thread-safety: a registry is filled before use and then only read; ``add``/``add_kernel`` take a
lock, so concurrent registration is safe too.  Kernels themselves may run on any thread.
"""

from __future__ import annotations

import enum
import importlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from pytfrt.host.async_value import CHAIN, AsyncValue, Chain
from pytfrt.host.binding import (
    Attr,
    BindingPlan,
    KernelSignature,
    ParamRole,
    RegistryError,
    RemainingAttrs,
    RemainingFunctions,
    TypedAttr,
    analyze_signature,
    plan_binding,
)
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.kernel_frame import KernelError, KernelFrame, result_list, store_results

F = TypeVar("F", bound=Callable[..., Any])


class KernelKind(enum.Enum):
    """Which executor may call a kernel."""

    ASYNC = "async"
    SYNC = "sync"


@dataclass
class KernelEntry:
    """A registered kernel: its name, kind, Python function and adapted invoker."""

    name: str
    fn: Callable[..., Any]
    kind: KernelKind
    _signature: KernelSignature | None = field(default=None, repr=False)
    _plans: dict[tuple[int, bool, int, int, bool], BindingPlan] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def signature(self) -> KernelSignature:
        """How the kernel's parameters map onto a frame; worked out on first use for the
        kernels of lazily loaded libraries (most of a program's libraries' kernels are never
        used, and resolving annotations is most of registering one).

        Raises:
            RegistryError: the annotations cannot be resolved or a parameter kind is not
                supported (see :func:`pytfrt.host.binding.analyze_signature`).
        """
        sig = self._signature
        if sig is None:
            sig = self._signature = analyze_signature(self.fn)
        return sig

    def bind(
        self,
        values: Sequence[Any],
        arguments: Sequence[AsyncValue[Any]] | None,
        attributes: Sequence[Any],
        functions: Sequence[Function],
        exec_ctx: ExecutionContext | None,
        frame: KernelFrame | None,
    ) -> list[Any]:
        """Build the positional call arguments for :attr:`fn` by interpreting its binding plan.

        ``values`` are the argument payloads; ``arguments`` their AsyncValues (``None`` for sync
        kernels).  Plans (:func:`pytfrt.host.binding.plan_binding`) are cached per op shape.

        Raises:
            KernelError: if the op does not fit the signature.
        """
        n = len(values)
        last_is_chain = n > 0 and (values[-1] is CHAIN or isinstance(values[-1], Chain))
        key = (n, last_is_chain, len(attributes), len(functions), arguments is None)
        plan = self._plans.get(key)
        if plan is None:
            plan = plan_binding(self.name, self.signature, n, last_is_chain, len(attributes),
                                len(functions), sync=arguments is None)
            self._plans[key] = plan
        out: list[Any] = []
        for kind, i in plan:
            if kind == "v":
                out.append(values[i])
            elif kind == "a":
                assert arguments is not None
                out.append(arguments[i])
            elif kind == "c":
                out.append(attributes[i])
            elif kind == "C":
                out.append(list(attributes[i:]))
            elif kind == "f":
                out.append(functions[i])
            elif kind == "F":
                out.append(list(functions[i:]))
            elif kind == "x":
                out.append(exec_ctx)
            else:
                out.append(frame)
        return out

    def invoke(self, frame: KernelFrame) -> None:
        """Run this (async) kernel on ``frame`` and fill every result slot.

        Never raises for kernel errors: they are reported with ``frame.report_error``.
        """
        try:
            values = [a._value for a in frame.arguments]
            call_args = self.bind(
                values,
                frame.arguments,
                frame.attributes,
                frame.functions,
                frame.exec_ctx,
                frame,
            )
            out = self.fn(*call_args)
        except Exception as exc:  # noqa: BLE001 - every kernel error becomes a diagnostic
            frame.report_error(_message(exc))
            return
        store_results(frame, out, self.name)

    def call_sync(
        self, values: Sequence[Any], attributes: Sequence[Any], functions: Sequence[Function],
        exec_ctx: ExecutionContext, num_results: int | None = None,
    ) -> list[Any]:
        """Run this kernel on plain values (sync functions); returns the result values.

        Raises:
            Exception: whatever the kernel raises (the sync executor turns it into the
                function's error without emitting it).
        """
        call_args = self.bind(values, None, attributes, functions, exec_ctx, None)
        out = self.fn(*call_args)
        if num_results is None:  # the count is not known: take the value as it comes
            return [] if out is None else list(out) if isinstance(out, tuple) else [out]
        return result_list(out, num_results, self.name)


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def kernel(*names: str, sync: bool = False, override: bool = False) -> Callable[[F], F]:
    """Mark a function as the kernel(s) ``names`` (see the module docstring).

    Records ``(name, kind)`` pairs on the function and returns it unchanged.  With
    ``override=True`` the names may replace kernels already registered (built-in ones
    included, see :meth:`KernelRegistry.add_kernel`).
    """
    if not names:
        raise RegistryError("@kernel needs at least one kernel name")

    def mark(fn: F) -> F:
        kind = KernelKind.SYNC if sync else KernelKind.ASYNC
        marks: list[tuple[str, KernelKind]] = list(getattr(fn, "__pytfrt_kernels__", []))
        marks.extend((name, kind) for name in names)
        fn.__pytfrt_kernels__ = marks  # type: ignore[attr-defined]
        if override:
            replaced = set(getattr(fn, "__pytfrt_overrides__", ())) | set(names)
            fn.__pytfrt_overrides__ = replaced  # type: ignore[attr-defined]
        return fn

    return mark


class KernelRegistry:
    """Maps kernel names (exactly the MLIR op names) to :class:`KernelEntry` objects."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._load_lock = threading.RLock()
        self._kernels: dict[str, KernelEntry] = {}
        self._types: dict[str, str] = {}
        self._lazy: list[tuple[str, tuple[str, ...]]] = []
        self.load_errors: list[str] = []
        """Lazy libraries that failed to load, as ``module: error`` strings."""
        self._lazy_loading = 0  # > 0 while a lazy library registers its kernels

    def kernel_names(self) -> list[str]:
        """Every registered kernel name, sorted (loads every pending lazy library first)."""
        self._load_lazy(None)
        with self._lock:
            return sorted(self._kernels)

    def add_lazy_library(self, module_name: str, prefixes: Sequence[str] = ()) -> None:
        """Register the kernels of ``module_name`` on first need (keeps start-up fast).

        The module is imported and added (:meth:`add_module`) the first time a name starting
        with one of ``prefixes`` is looked up and missing, or when every name is needed.
        """
        with self._load_lock:
            self._lazy.append((module_name, tuple(prefixes)))

    def _load_lazy(self, name: str | None) -> None:
        """Load pending libraries whose prefixes match ``name`` (all of them if ``None``)."""
        with self._load_lock:
            matching = [
                lib
                for lib in self._lazy
                if name is None or any(name.startswith(p) for p in lib[1])
            ]
            for lib in matching:
                self._lazy.remove(lib)
            for module_name, _ in matching:
                # A broken library must not hide the kernels of the others: record the failure
                # and report it only if a kernel stays unknown.
                self._lazy_loading += 1
                try:
                    self.add_module(importlib.import_module(module_name))
                except Exception as exc:  # noqa: BLE001 - kept for the unknown-kernel error
                    self.load_errors.append(f"{module_name}: {type(exc).__name__}: {exc}")
                finally:
                    self._lazy_loading -= 1

    def add_kernel(
        self,
        name: str,
        fn: Callable[..., Any],
        kind: KernelKind = KernelKind.ASYNC,
        override: bool = False,
    ) -> KernelEntry:
        """Register ``fn`` under ``name``; with ``override=True`` it may replace a kernel.

        A name that a pending lazy library may define (a built-in ``tfrt.add.i32``) loads
        that library first, so a plugin cannot take a built-in kernel's place by registering
        before it is loaded: it must ask with ``override=True``.

        Raises:
            RegistryError: if ``name`` is already registered (and ``override`` is false) or
                ``fn`` cannot be adapted.
        """
        # Kernels of a lazily loaded (built-in) library are checked on first use; others now,
        # so a plugin's mistake is reported where it registers.
        entry = KernelEntry(name, fn, kind,
                            None if self._lazy_loading else analyze_signature(fn))
        if not self._lazy_loading and self._lazy and name not in self._kernels:
            self._load_lazy(name)
        with self._lock:
            if name in self._kernels and not override:
                raise RegistryError(
                    f"kernel '{name}' is already registered (register it with "
                    "override=True to replace it)"
                )
            self._kernels[name] = entry
        return entry

    def add_sync_kernel(self, name: str, fn: Callable[..., Any]) -> KernelEntry:
        """Register a sync kernel (see :meth:`add_kernel`)."""
        return self.add_kernel(name, fn, KernelKind.SYNC)

    def add(self, *fns: Callable[..., Any], override: bool = False) -> None:
        """Register functions marked with ``@kernel`` under every name they carry.

        ``override=True`` (here or in ``@kernel``) lets them replace registered kernels.
        """
        for fn in fns:
            marks = getattr(fn, "__pytfrt_kernels__", None)
            if not marks:
                raise RegistryError(f"{fn!r} is not marked with @kernel")
            overrides = getattr(fn, "__pytfrt_overrides__", ())
            for name, kind in marks:
                self.add_kernel(name, fn, kind, override or name in overrides)

    def add_module(self, module: ModuleType) -> None:
        """Call ``module.register(self)``, or add every ``@kernel`` function in the module."""
        register = getattr(module, "register", None)
        if callable(register):
            register(self)
            return
        found = [
            obj
            for obj in vars(module).values()
            if callable(obj) and getattr(obj, "__pytfrt_kernels__", None)
        ]
        if not found:
            raise RegistryError(
                f"module {module.__name__!r} has no register(registry) and no @kernel functions"
            )
        self.add(*found)

    def get(self, name: str) -> KernelEntry:
        """The kernel named ``name``.

        Raises:
            RegistryError: ``unknown kernel name '<name>'``.
        """
        entry = self.find(name)
        if entry is None:
            if self.load_errors:
                raise RegistryError(
                    f"unknown kernel name '{name}' (kernel libraries that failed to load: "
                    + "; ".join(self.load_errors)
                    + ")"
                )
            raise RegistryError(f"unknown kernel name '{name}'")
        return entry

    def find(self, name: str) -> KernelEntry | None:
        """The kernel named ``name`` (loading lazy libraries as needed), or ``None``."""
        entry = self._kernels.get(name)
        if entry is not None:
            return entry
        # A miss waits for any library load in progress on another thread (the lock), then
        # loads the matching libraries, then all of them.
        with self._load_lock:
            entry = self._kernels.get(name)
            if entry is None and self._lazy:
                self._load_lazy(name)
                entry = self._kernels.get(name)
                if entry is None and self._lazy:
                    self._load_lazy(None)
                    entry = self._kernels.get(name)
        return entry

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __len__(self) -> int:
        self._load_lazy(None)
        return len(self._kernels)

    def names(self) -> list[str]:
        """All registered names, sorted (loads every lazy library)."""
        self._load_lazy(None)
        return sorted(self._kernels)

    def intern_type(self, name: str) -> str:
        """Return the canonical (interned) copy of a type name."""
        with self._lock:
            return self._types.setdefault(name, name)


__all__ = [
    "Attr",
    "KernelEntry",
    "KernelError",
    "KernelFrame",
    "KernelKind",
    "KernelRegistry",
    "KernelSignature",
    "ParamRole",
    "RegistryError",
    "RemainingAttrs",
    "RemainingFunctions",
    "TypedAttr",
    "analyze_signature",
    "kernel",
    "store_results",
]
