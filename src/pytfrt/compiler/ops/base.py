"""The op catalogue's building blocks: :class:`OpDef`, :class:`AttrSpec`, inference helpers.

An :class:`OpDef` says everything the compiler needs about one ``tg`` op:

* ``operands`` -- operand names; a trailing ``"*"`` on the last name makes it variadic, a
  trailing ``"?"`` makes it (and every later one) optional;
* ``attrs`` -- the attribute schema: name -> :class:`AttrSpec` (kind, default);
* ``infer`` -- ``infer(ctx) -> list[TType]``: result types from operand types, attributes and
  constant operands (``ctx.consts``); raises :class:`GraphError` through ``ctx.error``;
* ``compute`` -- the key of the op's compute function in the runtime table
  (:data:`pytfrt.backends.cpu.graph_kernels.GRAPH_OPS`, by default the op name); its
  keyword-only parameters are exactly the op's attributes, its positional ones the operands;
* ``grad`` -- the gradient (vector-Jacobian product) rule ``grad(c, g) -> [cotangent or None
  per operand]`` run by :mod:`pytfrt.compiler.autodiff` (``c``: its rule context); the rules
  table ``autodiff.VJP_RULES`` is derived from these (the non-elementwise ops' rules are in
  :mod:`pytfrt.compiler.ops.grad_rules`); ``grad_multi`` -- the rule of an op with several
  results, ``grad_multi(c, [cotangent or None per result])`` (``autodiff.MULTI_VJP_RULES``);
  ``differentiable=False`` marks ops whose results carry no gradient
  (``autodiff.NON_DIFFERENTIABLE``);
* ``math`` -- for elementwise ops, the runtime-side record
  (:class:`pytfrt.backends.cpu.op_math.Math`: compute, scalar formula for fused and
  small-graph code, epilogue/oneDNN activation, eager entry), from which the elementwise
  family makes its ``OpDef`` (the record lives in the runtime layers so that eager and the
  kernels can read it without importing the compiler);
* flags: ``stateful`` (never removed, reordered or folded), ``elementwise`` (fusable),
  ``prepare`` (the key of a compute function run once at load on the weight operands:
  ``prepare_operands(attrs, n)`` says which operands it takes).

Adding an op: ``docs/ops.md``, "Adding an op" (an elementwise op is one
:class:`~pytfrt.backends.cpu.op_math.Math` record; any other op one ``OpDef`` registered with
:func:`define` in a family module of this package, with its ``grad`` rule, + one compute
function in ``pytfrt.backends.cpu``).
The catalogue is filled at import and then only read: thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.types import TType, check_dtype

REQUIRED: Any = object()
"""Default of an attribute that must be given."""

ATTR_KINDS = ("int", "float", "bool", "str", "ints", "floats", "dtype", "sym", "syms", "dense")


@dataclass(frozen=True)
class AttrSpec:
    """One attribute of an op.

    Attributes:
        kind: one of :data:`ATTR_KINDS`.
        default: the value used when absent (:data:`REQUIRED` if it must be given).
        implicit: the attribute is left off the op when it equals its default (used for the
            attributes only passes set, e.g. the fused epilogue's ``activation``).
        choices: the allowed values of a ``str`` attribute, if restricted.
    """

    kind: str
    default: Any = REQUIRED
    implicit: bool = False
    choices: tuple[str, ...] = ()


def coerce_attr(op: str, name: str, spec: AttrSpec, value: Any) -> Any:
    """The canonical Python value of an attribute (tuples for lists, str for dtypes).

    Raises:
        GraphError: naming the op and attribute if ``value`` does not fit ``spec``.
    """

    def bad(what: str) -> GraphError:
        return GraphError(f"tg.{op}: attribute '{name}' must be {what}, got {value!r}")

    kind = spec.kind
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise bad("an int")
        return int(value)
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise bad("a float")
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool | np.bool_):
            raise bad("a bool")
        return bool(value)
    if kind == "str":
        if not isinstance(value, str):
            raise bad("a string")
        if spec.choices and value not in spec.choices:
            raise bad("one of " + ", ".join(repr(c) for c in spec.choices))
        return value
    if kind in ("ints", "floats"):
        if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
            raise bad(f"a list of {kind[:-1]}s")
        try:
            if kind == "ints":
                out: tuple[Any, ...] = tuple(_as_int(v) for v in value)
            else:
                out = tuple(float(v) for v in value)
        except (TypeError, ValueError):
            raise bad(f"a list of {kind[:-1]}s") from None
        return out
    if kind == "dtype":
        from pytfrt.compiler.types import dtype_name

        if isinstance(value, str):
            try:
                return check_dtype(value)
            except GraphError:
                raise bad("an element type name") from None
        try:
            return dtype_name(value)
        except (GraphError, TypeError):
            raise bad("an element type name") from None
    if kind == "sym":
        if not isinstance(value, str) or not value:
            raise bad("a function name")
        return value.lstrip("@")
    if kind == "syms":
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise bad("a list of function names")
        return tuple(str(v).lstrip("@") for v in value)
    if kind == "dense":
        return np.asarray(value)
    raise GraphError(f"tg.{op}: attribute '{name}' has unknown kind {kind!r}")  # pragma: no cover


def _as_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise TypeError
    return int(v)


@dataclass
class InferContext:
    """What an inference function sees for one op.

    Attributes:
        op: the op name (without ``tg.``).
        inputs: operand types.
        attrs: every attribute (defaults filled in).
        consts: per operand its value if it is a constant, else ``None``.
        functions: result types of the module's functions by name (for control flow).
        variables: types of the module's variables by name (for the state ops).
    """

    op: str
    inputs: list[TType]
    attrs: dict[str, Any]
    consts: list[np.ndarray | None] = field(default_factory=list)
    functions: dict[str, tuple[list[TType], list[TType]]] = field(default_factory=dict)
    variables: dict[str, TType] = field(default_factory=dict)

    def error(self, message: str) -> GraphError:
        """A :class:`GraphError` prefixed with the op name (raise it)."""
        return GraphError(f"tg.{self.op}: {message}")

    def const(self, i: int) -> np.ndarray | None:
        """The constant value of operand ``i`` (``None`` if it is not a constant or absent)."""
        return self.consts[i] if i < len(self.consts) else None


InferFn = Callable[[InferContext], list[TType]]


@dataclass(frozen=True)
class OpDef:
    """One catalogue entry (see the module docstring)."""

    name: str
    operands: tuple[str, ...]
    infer: InferFn
    attrs: dict[str, AttrSpec] = field(default_factory=dict)
    compute: str | None = ""
    family: str = ""
    doc: str = ""
    stateful: bool = False
    elementwise: bool = False
    num_results: int | None = 1
    prepare: str | None = None
    prepare_operands: Callable[[dict[str, Any], int], tuple[list[int], list[int]]] | None = None
    grad: Callable[..., list[Any]] | None = None
    grad_multi: Callable[..., list[Any]] | None = None
    differentiable: bool = True
    no_grad: str = ""
    """Why a differentiable op has no gradient rule, deliberately (``pytfrt.grad``'s
    :class:`~pytfrt.compiler.ops.grad_rules.AutodiffError` says it); empty for an op with a
    rule or ``differentiable=False``."""
    math: Any = None

    @property
    def compute_key(self) -> str | None:
        """The key of the compute function in the runtime table (``None``: no compute)."""
        if self.compute is None:
            return None
        return self.compute or self.name

    @property
    def operand_range(self) -> tuple[int, int | None]:
        """(minimum, maximum) operand count; maximum ``None`` if variadic."""
        required = 0
        for n in self.operands:
            if n.endswith("?") or n.endswith("*"):
                break
            required += 1
        if self.operands and self.operands[-1].endswith("*"):
            return required, None
        return required, len(self.operands)

    def full_attrs(self, given: dict[str, Any]) -> dict[str, Any]:
        """The attributes with defaults filled in (``given`` must already be coerced)."""
        out = {k: s.default for k, s in self.attrs.items() if s.default is not REQUIRED}
        out.update(given)
        return out

    def check_attrs(self, given: dict[str, Any]) -> dict[str, Any]:
        """Coerce ``given`` against the schema; returns the full attribute dict.

        Raises:
            GraphError: for an unknown attribute, a bad value or a missing required one.
        """
        out: dict[str, Any] = {}
        for k, v in given.items():
            spec = self.attrs.get(k)
            if spec is None:
                known = ", ".join(sorted(self.attrs)) or "none"
                raise GraphError(f"tg.{self.name}: unknown attribute '{k}' (known: {known})")
            out[k] = coerce_attr(self.name, k, spec, v)
        for k, spec in self.attrs.items():
            if k not in out:
                if spec.default is REQUIRED:
                    raise GraphError(f"tg.{self.name}: missing required attribute '{k}'")
                out[k] = spec.default
        return out

    def stored_attrs(self, full: dict[str, Any]) -> dict[str, Any]:
        """The attributes written on the op: all but implicit ones equal to their default."""
        return {
            k: v
            for k, v in full.items()
            if not (k in self.attrs and self.attrs[k].implicit and _same(v, self.attrs[k].default))
        }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return False
    return bool(a == b)


CATALOGUE: dict[str, OpDef] = {}
"""Every op of the dialect, by name (without the ``tg.`` prefix)."""


def define(
    name: str,
    operands: Sequence[str],
    infer: InferFn,
    attrs: dict[str, AttrSpec] | None = None,
    **kw: Any,
) -> OpDef:
    """Register an op in :data:`CATALOGUE` (at import of its family module).

    Raises:
        ValueError: if the name is taken.
    """
    if name in CATALOGUE:
        raise ValueError(f"tg.{name} is defined twice")
    opdef = OpDef(name=name, operands=tuple(operands), infer=infer, attrs=dict(attrs or {}), **kw)
    CATALOGUE[name] = opdef
    return opdef


# -- inference helpers ------------------------------------------------------------------------
def broadcast_shapes(ctx: InferContext, *shapes: tuple[int | None, ...] | None) -> Any:
    """NumPy broadcasting with dynamic dims; ``None`` if any rank is unknown.

    Raises:
        GraphError: for incompatible static dims.
    """
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes if s is not None), default=0)
    out: list[int | None] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if s is not None and len(s) - rank + i >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ctx.error(
                "operand shapes "
                + ", ".join(str(list(s)) for s in shapes if s is not None)
                + " do not broadcast"
            )
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def same_dtype(ctx: InferContext, indices: Sequence[int] | None = None) -> str:
    """The common element type of the operands (all must agree).

    Raises:
        GraphError: if they differ.
    """
    idx = range(len(ctx.inputs)) if indices is None else indices
    types = [ctx.inputs[i].dtype for i in idx if i < len(ctx.inputs)]
    if not types:
        raise ctx.error("needs at least one operand")
    if len(set(types)) > 1:
        raise ctx.error(f"operand element types differ: {', '.join(types)}")
    return types[0]


def norm_axis(ctx: InferContext, axis: int, rank: int | None, what: str = "axis") -> int:
    """``axis`` made non-negative for ``rank`` (unchanged when the rank is unknown).

    Raises:
        GraphError: if it is out of range.
    """
    if rank is None:
        return axis
    if not -rank <= axis < max(rank, 1) and not (rank == 0 and axis in (0, -1)):
        raise ctx.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def const_ints(ctx: InferContext, i: int) -> tuple[int, ...] | None:
    """A constant integer operand as a flat tuple, or ``None``."""
    v = ctx.const(i)
    if v is None:
        return None
    return tuple(int(x) for x in np.asarray(v).reshape(-1))
