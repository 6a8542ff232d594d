"""How a kernel's Python parameters are bound to an op: roles, signatures and binding plans.

:func:`analyze_signature` gives each parameter a :class:`ParamRole` from its annotation (the
table in :mod:`pytfrt.host.registry`); :func:`plan_binding` turns a signature and an op's shape
(operand count, whether the last operand is a chain, attribute and function counts) into a
:class:`BindingPlan`: one :data:`Slot` per call argument.  This module is the only place the
binding rules live -- the trailing chain rule, attributes in name order, functions in their own
list, variadic operands:

* :meth:`pytfrt.host.registry.KernelEntry.bind` interprets a plan at run time;
* the async executor's generated call functions (:mod:`pytfrt.executor.call_plan`) and the
  sync executor's generated straight-line code (:mod:`pytfrt.executor.sync_executor`) render
  the same plan as Python source, once per op at load time.

Slot kinds: ``v`` the payload of operand *i*; ``a`` operand *i*'s AsyncValue; ``c`` attribute
*i*; ``C`` the list of attributes *i..*; ``f`` function *i*; ``F`` the list of functions *i..*;
``x`` the ExecutionContext; ``k`` the KernelFrame.

Thread-safety: pure functions; plans are immutable tuples.
"""

from __future__ import annotations

import enum
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from pytfrt.host.async_value import AsyncValue, IndirectAsyncValue
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.kernel_frame import KernelError, KernelFrame
from pytfrt.support.attributes import Attribute
from pytfrt.support.errors import PytfrtError

T = TypeVar("T")


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


class RegistryError(PytfrtError):
    """Duplicate registration, unknown kernel name, or a signature that cannot be adapted."""


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
    returns_async: bool = True  # its return annotation may be an AsyncValue (or is unknown)
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


_SIGNATURES: dict[Any, tuple[KernelSignature, Any]] = {}
"""Signatures of plain functions by (code, annotations, globals): the many kernels made by one
factory (one per dtype or rank) share their code and annotation strings, and resolving the
annotations is most of a kernel library's registration time.  The globals dict is kept in the
value, so its ``id`` in the key is not reused while the entry lives."""


def analyze_signature(fn: Callable[..., Any]) -> KernelSignature:
    """Work out each parameter's role from its annotation (cached for plain functions that
    share code, annotations and globals: the result depends on nothing else).

    Thread-safe.

    Raises:
        RegistryError: if the annotations cannot be resolved or a parameter kind is not
            supported (keyword-only parameters, ``**kwargs``).
    """
    key = None
    code = getattr(fn, "__code__", None)
    if code is not None and inspect.isfunction(fn) and not hasattr(fn, "__wrapped__") \
            and not hasattr(fn, "__signature__"):
        try:
            key = (code, tuple(fn.__annotations__.items()), id(fn.__globals__))
            hit = _SIGNATURES.get(key)
        except TypeError:  # an unhashable annotation
            key = hit = None
        if hit is not None:
            return hit[0]
    sig = _analyze_signature(fn)
    if key is not None:
        _SIGNATURES[key] = (sig, fn.__globals__)
    return sig


def _analyze_signature(fn: Callable[..., Any]) -> KernelSignature:
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
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
    ret = hints.get("return")
    return KernelSignature(roles, num_args, variadic, raw_attributes,
                           ret is not None and "AsyncValue" in repr(ret))


Slot = tuple[str, int]
"""One call argument of a plan: ``(kind, index)`` (see the module docstring)."""

BindingPlan = tuple[Slot, ...]
"""The call arguments of one kernel for one op shape, in parameter order."""


def plan_binding(
    name: str,
    signature: KernelSignature,
    num_operands: int,
    last_is_chain: bool,
    num_attrs: int,
    num_funcs: int,
    sync: bool = False,
) -> BindingPlan:
    """Bind ``signature``'s parameters to an op with this shape (the rules of the module doc).

    An op may have one operand more than the kernel declares if that operand is a chain: it is
    left out (the *trailing chain rule*).

    Raises:
        KernelError: the operand, attribute or function counts do not fit, or a sync kernel
            asks for AsyncValues.
    """
    sig = signature
    n = num_operands
    if not sig.variadic and n != sig.num_args:
        if n == sig.num_args + 1 and last_is_chain:
            n -= 1
        else:
            raise KernelError(f"kernel '{name}' takes {sig.num_args} arguments but the op has {n}")
    if sig.simple:
        return tuple(("v", i) for i in range(n))
    plan: list[Slot] = []
    arg_i = attr_i = func_i = 0
    for role in sig.roles:
        if role is _Role.ARG or role is _Role.ARG_AV:
            if role is _Role.ARG_AV and sync:
                raise KernelError(f"sync kernel '{name}' cannot take an AsyncValue")
            if arg_i >= n:
                raise KernelError(
                    f"kernel '{name}' takes at least {sig.num_args} arguments but the op has {n}"
                )
            plan.append(("v" if role is _Role.ARG else "a", arg_i))
            arg_i += 1
        elif role is _Role.VAR_ARGS or role is _Role.VAR_ARG_AVS:
            if role is _Role.VAR_ARG_AVS and sync:
                raise KernelError(f"sync kernel '{name}' cannot take AsyncValues")
            kind = "v" if role is _Role.VAR_ARGS else "a"
            plan.extend((kind, i) for i in range(arg_i, n))
            arg_i = n
        elif role is _Role.ATTR:
            if attr_i >= num_attrs:
                raise KernelError(f"kernel '{name}' is missing an attribute")
            plan.append(("c", attr_i))
            attr_i += 1
        elif role is _Role.ATTRS:
            plan.append(("C", attr_i))
            attr_i = num_attrs
        elif role is _Role.FUNC:
            if func_i >= num_funcs:
                raise KernelError(f"kernel '{name}' is missing a function")
            plan.append(("f", func_i))
            func_i += 1
        elif role is _Role.FUNCS:
            plan.append(("F", func_i))
            func_i = num_funcs
        elif role is _Role.EXEC_CTX:
            plan.append(("x", 0))
        else:
            plan.append(("k", 0))
    return tuple(plan)
