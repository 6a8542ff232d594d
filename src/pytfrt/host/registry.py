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

Parameters are bound by their annotation, left to right (spec 1.5):

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
and is *not* emitted (spec 2.6).

Thread-safety: a registry is filled before use and then only read; ``add``/``add_kernel`` take a
lock, so concurrent registration is safe too.  Kernels themselves may run on any thread.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import threading
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Annotated, Any, TypeVar

from pytfrt.host.async_value import (
    CHAIN,
    AsyncValue,
    Chain,
    IndirectAsyncValue,
    make_available,
    make_error,
)
from pytfrt.host.diagnostics import Diagnostic
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.support.attributes import Attribute
from pytfrt.support.errors import PytfrtError, Status
from pytfrt.support.location import UNKNOWN_LOC, Location

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class _AttrRole:
    """Marks a parameter that receives the next attribute."""


class _RemainingAttrsRole:
    """Marks a parameter that receives all remaining attributes."""


class _RemainingFunctionsRole:
    """Marks a parameter that receives all remaining functions."""


class _TypedAttrRole:
    """Marks a parameter that receives the next attribute as a typed ``Attribute`` object."""


Attr = Annotated[T, _AttrRole]
"""``Attr[int]``: the parameter receives the next attribute's value."""

RemainingAttrs = Annotated[list[Any], _RemainingAttrsRole]
"""The parameter receives the list of remaining attribute values."""

RemainingFunctions = Annotated[list[Function], _RemainingFunctionsRole]
"""The parameter receives the list of remaining functions."""

TypedAttr = Annotated[Attribute, _TypedAttrRole]
"""The parameter receives the next attribute as its typed :class:`Attribute` object (e.g.
``IntAttr(1, "i32")``), for kernels that need the MLIR type and not only the value.  A kernel
with a ``TypedAttr`` parameter receives *all* its attributes as objects (``raw_attributes``):
its ``RemainingAttrs`` are objects too, and it should not mix in ``Attr[T]`` parameters."""


class KernelError(PytfrtError):
    """Raised by kernels to report an error (any exception works; this one reads best)."""


class RegistryError(PytfrtError):
    """Duplicate registration, unknown kernel name, or a signature that cannot be adapted."""


class KernelKind(enum.Enum):
    """Which executor may call a kernel."""

    ASYNC = "async"
    SYNC = "sync"


class KernelFrame:
    """Everything one kernel invocation sees: arguments, attributes, functions, result slots.

    Built by the executor; a kernel asks for it with a ``KernelFrame`` parameter when it needs
    to set results itself (asynchronous kernels).  A frame may be kept and used from another
    thread after the kernel returns (e.g. ``report_error`` from a task); each slot must be set
    exactly once.
    """

    __slots__ = (
        "arguments",
        "attributes",
        "functions",
        "results",
        "exec_ctx",
        "location",
        "name",
    )

    def __init__(
        self,
        arguments: Sequence[AsyncValue[Any]],
        attributes: Sequence[Any],
        functions: Sequence[Function],
        num_results: int,
        exec_ctx: ExecutionContext,
        location: Location = UNKNOWN_LOC,
        name: str = "",
    ) -> None:
        self.arguments = arguments
        self.attributes = attributes
        self.functions = functions
        self.results: list[AsyncValue[Any] | None] = [None] * num_results
        self.exec_ctx = exec_ctx
        self.location = location
        self.name = name

    @property
    def num_results(self) -> int:
        """Number of result slots."""
        return len(self.results)

    def argument(self, index: int) -> Any:
        """The payload of argument ``index`` (must be concrete)."""
        return self.arguments[index].get()

    def set_result(self, index: int, value: AsyncValue[Any]) -> None:
        """Store ``value`` (available or not) in result slot ``index``."""
        self.results[index] = value

    def emplace_result(self, index: int, value: Any) -> None:
        """Store an available value in result slot ``index``."""
        self.results[index] = make_available(value)

    def allocate_result(self, index: int) -> AsyncValue[Any]:
        """Store a new unavailable value in slot ``index`` and return it (fill it later)."""
        value: AsyncValue[Any] = AsyncValue()
        self.results[index] = value
        return value

    def allocate_indirect_result(self, index: int) -> IndirectAsyncValue[Any]:
        """Store a new :class:`IndirectAsyncValue` in slot ``index`` and return it."""
        value: IndirectAsyncValue[Any] = IndirectAsyncValue()
        self.results[index] = value
        return value

    def emit_error(self, message: str) -> AsyncValue[Any]:
        """Emit a diagnostic at this kernel's location and return an error value."""
        self.exec_ctx.host.emit_error(Diagnostic(message, self.location))
        return make_error(Status(message))

    def report_error(self, message: str) -> None:
        """Emit a diagnostic and make every unset or still-unavailable result an error.

        Unset slots get one shared error value; allocated, unavailable, non-indirect results
        are set to the error in place (spec 1.9).
        """
        self.exec_ctx.host.emit_error(Diagnostic(message, self.location))
        status = Status(message)
        error: AsyncValue[Any] | None = None
        for i, slot in enumerate(self.results):
            if slot is None:
                if error is None:
                    error = make_error(status)
                else:
                    error.add_ref()  # one reference per result slot
                self.results[i] = error
            elif slot.is_unavailable():
                slot.set_error(status)


class _Role(enum.Enum):
    ARG = 1
    ARG_AV = 2
    VAR_ARGS = 3
    VAR_ARG_AVS = 4
    ATTR = 5
    ATTRS = 6
    FUNC = 7
    FUNCS = 8
    EXEC_CTX = 9
    FRAME = 10


@dataclass
class KernelSignature:
    """How a kernel's parameters map onto a frame (computed once at registration).

    ``simple`` (every parameter is a plain argument payload: the fast path) and
    ``needs_context`` (the kernel takes an ExecutionContext or a KernelFrame) are derived from
    ``roles`` when the signature is made; treat a signature as immutable.
    """

    roles: list[_Role]
    num_args: int  # fixed positional arguments (ARG + ARG_AV)
    variadic: bool  # takes remaining arguments
    raw_attributes: bool = False  # attributes are passed as typed Attribute objects
    simple: bool = field(init=False)
    needs_context: bool = field(init=False)

    def __post_init__(self) -> None:
        self.simple = all(r is _Role.ARG for r in self.roles)
        self.needs_context = any(r in (_Role.EXEC_CTX, _Role.FRAME) for r in self.roles)


ParamRole = _Role
"""Public name of the parameter roles (for executors that generate call code from them)."""


def _role_of(annotation: Any, kind: Any) -> _Role:
    if kind is inspect.Parameter.VAR_POSITIONAL:
        if typing.get_origin(annotation) is AsyncValue or annotation is AsyncValue:
            return _Role.VAR_ARG_AVS
        return _Role.VAR_ARGS
    if typing.get_origin(annotation) is Annotated:
        extras = typing.get_args(annotation)[1:]
        if _AttrRole in extras or _TypedAttrRole in extras:
            return _Role.ATTR
        if _RemainingAttrsRole in extras:
            return _Role.ATTRS
        if _RemainingFunctionsRole in extras:
            return _Role.FUNCS
    if annotation is ExecutionContext:
        return _Role.EXEC_CTX
    if annotation is KernelFrame:
        return _Role.FRAME
    if isinstance(annotation, type) and issubclass(annotation, Function):
        return _Role.FUNC
    if annotation is AsyncValue or typing.get_origin(annotation) is AsyncValue:
        return _Role.ARG_AV
    if typing.get_origin(annotation) is IndirectAsyncValue:
        return _Role.ARG_AV
    return _Role.ARG


def analyze_signature(fn: Callable[..., Any]) -> KernelSignature:
    """Work out each parameter's role from its annotation.

    Raises:
        RegistryError: if the annotations cannot be resolved or a parameter kind is not
            supported (keyword-only parameters, ``**kwargs``).
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - re-raised with context
        raise RegistryError(
            f"cannot resolve the annotations of kernel function {fn.__qualname__}: {exc}"
        ) from exc
    roles: list[_Role] = []
    raw_attributes = False
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD):
            raise RegistryError(
                f"kernel function {fn.__qualname__}: keyword-only parameter "
                f"'{param.name}' cannot be bound"
            )
        hint = hints.get(param.name, Any)
        roles.append(_role_of(hint, param.kind))
        if typing.get_origin(hint) is Annotated and _TypedAttrRole in typing.get_args(hint)[1:]:
            raw_attributes = True
    num_args = sum(1 for r in roles if r in (_Role.ARG, _Role.ARG_AV))
    variadic = any(r in (_Role.VAR_ARGS, _Role.VAR_ARG_AVS) for r in roles)
    return KernelSignature(roles, num_args, variadic, raw_attributes)


@dataclass
class KernelEntry:
    """A registered kernel: its name, kind, Python function and adapted invoker."""

    name: str
    fn: Callable[..., Any]
    kind: KernelKind
    signature: KernelSignature = field(repr=False)

    def bind(
        self,
        values: Sequence[Any],
        arguments: Sequence[AsyncValue[Any]] | None,
        attributes: Sequence[Any],
        functions: Sequence[Function],
        exec_ctx: ExecutionContext | None,
        frame: KernelFrame | None,
    ) -> list[Any]:
        """Build the positional call arguments for :attr:`fn` (see the module docstring).

        ``values`` are the argument payloads; ``arguments`` their AsyncValues (async kernels).

        Raises:
            KernelError: if the operand count does not fit the signature.
        """
        sig = self.signature
        n = len(values)
        if not sig.variadic and n != sig.num_args:
            if n == sig.num_args + 1 and (values[-1] is CHAIN or isinstance(values[-1], Chain)):
                n -= 1  # trailing chain rule
            else:
                raise KernelError(
                    f"kernel '{self.name}' takes {sig.num_args} arguments but the op has {n}"
                )
        if sig.simple:
            return list(values[:n])
        out: list[Any] = []
        arg_i = attr_i = func_i = 0
        for role in sig.roles:
            if role is _Role.ARG:
                out.append(values[arg_i])
                arg_i += 1
            elif role is _Role.ARG_AV:
                if arguments is None:
                    raise KernelError(f"sync kernel '{self.name}' cannot take an AsyncValue")
                out.append(arguments[arg_i])
                arg_i += 1
            elif role is _Role.VAR_ARGS:
                out.extend(values[arg_i:n])
                arg_i = n
            elif role is _Role.VAR_ARG_AVS:
                if arguments is None:
                    raise KernelError(f"sync kernel '{self.name}' cannot take AsyncValues")
                out.extend(arguments[arg_i:n])
                arg_i = n
            elif role is _Role.ATTR:
                if attr_i >= len(attributes):
                    raise KernelError(f"kernel '{self.name}' is missing an attribute")
                out.append(attributes[attr_i])
                attr_i += 1
            elif role is _Role.ATTRS:
                out.append(list(attributes[attr_i:]))
                attr_i = len(attributes)
            elif role is _Role.FUNC:
                if func_i >= len(functions):
                    raise KernelError(f"kernel '{self.name}' is missing a function")
                out.append(functions[func_i])
                func_i += 1
            elif role is _Role.FUNCS:
                out.append(list(functions[func_i:]))
                func_i = len(functions)
            elif role is _Role.EXEC_CTX:
                out.append(exec_ctx)
            elif role is _Role.FRAME:
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
        exec_ctx: ExecutionContext,
    ) -> list[Any]:
        """Run this kernel on plain values (sync functions); returns the result values.

        Raises:
            Exception: whatever the kernel raises (the sync executor turns it into the
                function's error without emitting it).
        """
        call_args = self.bind(values, None, attributes, functions, exec_ctx, None)
        out = self.fn(*call_args)
        return _as_list(out)


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _as_list(out: Any) -> list[Any]:
    if out is None:
        return []
    if isinstance(out, tuple):
        return list(out)
    return [out]


def _to_av(value: Any) -> AsyncValue[Any]:
    if isinstance(value, AsyncValue):
        return value
    return make_available(value)


def store_results(frame: KernelFrame, out: Any, name: str = "") -> None:
    """Store a kernel's return value ``out`` in ``frame``'s result slots (see module doc)."""
    results = frame.results
    n = len(results)
    if n == 1:
        if out is not None or results[0] is None:
            if out is None:
                frame.report_error(f"kernel '{name}' returned no value for its result")
                return
            results[0] = _to_av(out)
        return
    if n == 0:
        return
    if out is None:
        if any(r is None for r in results):
            frame.report_error(f"kernel '{name}' did not set all of its {n} results")
        return
    if not isinstance(out, tuple) or len(out) != n:
        frame.report_error(f"kernel '{name}' must return {n} results")
        return
    for i, value in enumerate(out):
        results[i] = _to_av(value)


def kernel(*names: str, sync: bool = False) -> Callable[[F], F]:
    """Mark a function as the kernel(s) ``names`` (see the module docstring).

    Records ``(name, kind)`` pairs on the function and returns it unchanged.
    """
    if not names:
        raise RegistryError("@kernel needs at least one kernel name")

    def mark(fn: F) -> F:
        kind = KernelKind.SYNC if sync else KernelKind.ASYNC
        marks: list[tuple[str, KernelKind]] = list(getattr(fn, "__pytfrt_kernels__", []))
        marks.extend((name, kind) for name in names)
        fn.__pytfrt_kernels__ = marks  # type: ignore[attr-defined]
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
                try:
                    self.add_module(importlib.import_module(module_name))
                except Exception as exc:  # noqa: BLE001 - kept for the unknown-kernel error
                    self.load_errors.append(f"{module_name}: {type(exc).__name__}: {exc}")

    def add_kernel(
        self, name: str, fn: Callable[..., Any], kind: KernelKind = KernelKind.ASYNC
    ) -> KernelEntry:
        """Register ``fn`` under ``name``.

        Raises:
            RegistryError: if ``name`` is already registered or ``fn`` cannot be adapted.
        """
        entry = KernelEntry(name, fn, kind, analyze_signature(fn))
        with self._lock:
            if name in self._kernels:
                raise RegistryError(f"kernel '{name}' is already registered")
            self._kernels[name] = entry
        return entry

    def add_sync_kernel(self, name: str, fn: Callable[..., Any]) -> KernelEntry:
        """Register a sync kernel (see :meth:`add_kernel`)."""
        return self.add_kernel(name, fn, KernelKind.SYNC)

    def add(self, *fns: Callable[..., Any]) -> None:
        """Register functions marked with ``@kernel`` under every name they carry."""
        for fn in fns:
            marks = getattr(fn, "__pytfrt_kernels__", None)
            if not marks:
                raise RegistryError(f"{fn!r} is not marked with @kernel")
            for name, kind in marks:
                self.add_kernel(name, fn, kind)

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
