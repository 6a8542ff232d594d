"""OpAttrs: the typed name -> value map passed to every core-runtime op (docs/eager.md).

An :class:`OpAttrs` is built by the caller (the ``corert.op_attrs_set.*`` kernels, the
``corert.executeop`` kernel from its ``op_attrs`` attribute, or the eager API from keyword
arguments) and then read by op metadata and dispatch functions.  :meth:`OpAttrs.freeze` returns
an immutable :class:`OpAttrsRef` (TFRT's ``OpAttrsRef``), which is what ops see.

Each entry has an :class:`OpAttrType` and a value:

==============  =========================================================================
type            value held
==============  =========================================================================
BOOL            ``bool``
I8 .. UI64      ``int``
F16 .. F64      ``float``
CHAR            ``str`` (TFRT stores strings as arrays of CHAR)
DTYPE           a :class:`~pytfrt.tensor.dtype.DType`
DENSE           a :class:`~pytfrt.support.attributes.DenseAttr`
SHAPE           a ``tuple`` of dims (-1 = unknown) or ``None`` (unranked)
AGGREGATE       a ``tuple`` of entries ``(OpAttrType, is_array, value)``
FUNC            ``str`` (the function name)
==============  =========================================================================

Scalars may also be arrays (``is_array``): the value is then a ``tuple`` of scalars.

Printing (:meth:`OpAttrs.format`) follows TFRT exactly: ``OpAttrs is empty`` or
``OpAttrs contains <n> entries:``, one line per entry sorted by name, then an empty line.

Thread-safety: an :class:`OpAttrs` is a plain mutable object for one builder thread; an
:class:`OpAttrsRef` is immutable and may be shared freely.  Reading (``get``) is a dict look-up.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from typing import Any, Final

from pytfrt.support.attributes import DenseAttr, ShapeAttr
from pytfrt.support.errors import PytfrtError
from pytfrt.tensor.dtype import DType, dtype_from_name


class OpAttrType(enum.Enum):
    """The kinds of op attribute value (TFRT's ``OpAttrType``); the name is what prints."""

    BOOL = "i1"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    UI8 = "ui8"
    UI16 = "ui16"
    UI32 = "ui32"
    UI64 = "ui64"
    BF16 = "bf16"
    F16 = "f16"
    F32 = "f32"
    F64 = "f64"
    COMPLEX64 = "complex64"
    COMPLEX128 = "complex128"
    CHAR = "char"
    DTYPE = "dtype"
    DENSE = "dense"
    AGGREGATE = "aggregate"
    SHAPE = "shape"
    FUNC = "func"


_INT_TYPES: Final = frozenset(
    {
        OpAttrType.I8, OpAttrType.I16, OpAttrType.I32, OpAttrType.I64,
        OpAttrType.UI8, OpAttrType.UI16, OpAttrType.UI32, OpAttrType.UI64,
    }
)
_FLOAT_TYPES: Final = frozenset({OpAttrType.BF16, OpAttrType.F16, OpAttrType.F32, OpAttrType.F64})

# MLIR scalar type name -> OpAttrType (``i1`` is BOOL).
_BY_MLIR_NAME: Final = {t.value: t for t in OpAttrType}
# TFRT dtype printed/MLIR name -> the OpAttrType name used when a DType prints in OpAttrs.
_DTYPE_PRINT: Final = {
    "u8": "UI8", "u16": "UI16", "u32": "UI32", "u64": "UI64", "i1": "BOOL", "i8": "I8",
    "i16": "I16", "i32": "I32", "i64": "I64", "f16": "F16", "bf16": "BF16", "f32": "F32",
    "f64": "F64", "complex64": "COMPLEX64", "complex128": "COMPLEX128", "str": "CHAR",
    "qu8": "QUI8", "qu16": "QUI16", "qi8": "QI8", "qi16": "QI16", "qi32": "QI32",
    "resource": "RESOURCE", "variant": "VARIANT",
}

MAX_PRINTED_ARRAY_ELEMENTS: Final = 5


class OpAttrsError(PytfrtError):
    """Setting a key twice, modifying a frozen map, or reading a key with the wrong type."""


def attr_type_from_mlir(name: str) -> OpAttrType:
    """The OpAttrType of an MLIR scalar type name (``i32``, ``f32``, ``i1`` -> BOOL, ...).

    Raises:
        OpAttrsError: for a name with no OpAttrType.
    """
    try:
        return _BY_MLIR_NAME[name]
    except KeyError:
        raise OpAttrsError(f"unsupported op attribute type '{name}'") from None


def dtype_print_name(dtype: DType) -> str:
    """How a dtype prints inside OpAttrs (``F32``, ``I32``, ``BOOL``, ``CHAR``, ...)."""
    return _DTYPE_PRINT.get(dtype.name, dtype.name.upper())


class OpAttrsRef(Mapping[str, Any]):
    """An immutable attribute map (the frozen form every op receives).

    ``attrs[name]`` / ``attrs.get(name, default)`` return plain values; :meth:`entry` returns
    ``(type, is_array, value)``.
    """

    __slots__ = ("_values", "_types")

    def __init__(
        self,
        values: dict[str, Any] | None = None,
        types: dict[str, tuple[OpAttrType, bool]] | None = None,
    ) -> None:
        self._values: dict[str, Any] = values if values is not None else {}
        self._types: dict[str, tuple[OpAttrType, bool]] = types if types is not None else {}

    # -- Mapping interface ----------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, name: str, default: Any = None) -> Any:
        """The value of ``name``, or ``default``."""
        return self._values.get(name, default)

    # -- typed access -------------------------------------------------------------------------

    def entry(self, name: str) -> tuple[OpAttrType, bool, Any]:
        """``(type, is_array, value)`` of ``name``; raises ``KeyError`` if missing."""
        attr_type, is_array = self._types[name]
        return attr_type, is_array, self._values[name]

    def type_of(self, name: str) -> OpAttrType:
        """The OpAttrType of ``name``; raises ``KeyError`` if missing."""
        return self._types[name][0]

    def get_typed(self, name: str, attr_type: OpAttrType, default: Any = None) -> Any:
        """The scalar value of ``name`` if it has ``attr_type``; ``default`` if missing.

        Raises:
            OpAttrsError: if the entry exists with another type or is an array.
        """
        info = self._types.get(name)
        if info is None:
            return default
        if info != (attr_type, False):
            raise OpAttrsError(
                f"attribute '{name}' has type {info[0].name}, expected {attr_type.name}"
            )
        return self._values[name]

    def get_array(self, name: str, default: Any = None) -> Any:
        """The tuple value of array entry ``name``; ``default`` if missing.

        Raises:
            OpAttrsError: if the entry is not an array.
        """
        info = self._types.get(name)
        if info is None:
            return default
        if not info[1]:
            raise OpAttrsError(f"attribute '{name}' is not an array")
        return self._values[name]

    def freeze(self) -> OpAttrsRef:
        """This map (already immutable)."""
        return self

    # -- printing -------------------------------------------------------------------------

    def format(self) -> str:
        """TFRT's print of the map (docs/eager.md), ending with an empty line.

        ``OpAttrs is empty\\n`` or ``OpAttrs contains <n> entries:\\n`` followed by
        ``  '<name>' type=<TYPE> value=<v>\\n`` per entry (name order) and ``\\n``.
        """
        if not self._values:
            return "OpAttrs is empty\n"
        lines = [f"OpAttrs contains {len(self._values)} entries:"]
        for name in sorted(self._values):
            attr_type, is_array = self._types[name]
            value = format_value(attr_type, is_array, self._values[name])
            lines.append(f"  '{name}' type={attr_type.name} value={value}")
        return "\n".join(lines) + "\n\n"

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in sorted(self._values.items()))
        return f"{type(self).__name__}({items})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpAttrsRef):
            return NotImplemented
        return self._values == other._values and self._types == other._types

    __hash__ = None  # type: ignore[assignment]


class OpAttrs(OpAttrsRef):
    """A mutable attribute map: set each key once; :meth:`freeze` takes immutable snapshots.

    As in TFRT's core runtime, freezing does not end the map's life: the frozen
    :class:`OpAttrsRef` is a copy, and the map may be extended and frozen again (each snapshot
    keeps the entries it had).  Raises :class:`OpAttrsError` when a key is set twice (TFRT
    returns false).  Not thread-safe: one writer at a time.
    """

    __slots__ = ("_frozen",)

    def __init__(self) -> None:
        super().__init__()
        self._frozen: OpAttrsRef | None = None

    def set(self, name: str, value: Any, attr_type: OpAttrType, is_array: bool = False) -> None:
        """Store ``value`` under ``name`` with its type (see the module table)."""
        if name in self._values:
            raise OpAttrsError(f"attribute '{name}' is already set")
        if is_array and not isinstance(value, tuple):
            value = tuple(value)
        self._values[name] = value
        self._types[name] = (attr_type, is_array)
        self._frozen = None  # the next freeze() snapshots the new entry too

    def set_bool(self, name: str, value: bool) -> None:
        """Set a BOOL scalar."""
        self.set(name, bool(value), OpAttrType.BOOL)

    def set_int(self, name: str, value: int, attr_type: OpAttrType = OpAttrType.I64) -> None:
        """Set an integer scalar of ``attr_type``."""
        self.set(name, int(value), attr_type)

    def set_float(self, name: str, value: float, attr_type: OpAttrType = OpAttrType.F32) -> None:
        """Set a float scalar of ``attr_type``."""
        self.set(name, float(value), attr_type)

    def set_string(self, name: str, value: str) -> None:
        """Set a string (a CHAR array in TFRT)."""
        self.set(name, str(value), OpAttrType.CHAR)

    def set_func(self, name: str, function_name: str) -> None:
        """Set a function-name attribute."""
        self.set(name, str(function_name), OpAttrType.FUNC)

    def set_dtype(self, name: str, dtype: DType | str) -> None:
        """Set a DTYPE attribute (a DType or its name)."""
        self.set(name, dtype_from_name(dtype) if isinstance(dtype, str) else dtype,
                 OpAttrType.DTYPE)

    def set_dense(self, name: str, dense: DenseAttr) -> None:
        """Set a DENSE attribute."""
        self.set(name, dense, OpAttrType.DENSE)

    def set_shape(self, name: str, dims: tuple[int, ...] | ShapeAttr | None) -> None:
        """Set a SHAPE attribute (dims with -1 for unknown, or ``None`` for unranked)."""
        if isinstance(dims, ShapeAttr):
            dims = dims.dims
        self.set(name, None if dims is None else tuple(int(d) for d in dims), OpAttrType.SHAPE)

    def set_array(self, name: str, values: Any, attr_type: OpAttrType) -> None:
        """Set an array of scalars of ``attr_type``."""
        self.set(name, tuple(values), attr_type, is_array=True)

    def set_aggregate(self, name: str, elements: tuple[tuple[OpAttrType, bool, Any], ...]) -> None:
        """Set an AGGREGATE of ``(type, is_array, value)`` elements."""
        self.set(name, tuple(elements), OpAttrType.AGGREGATE)

    def freeze(self) -> OpAttrsRef:
        """An immutable copy of the current entries (the same object until the map changes)."""
        if self._frozen is None:
            self._frozen = OpAttrsRef(dict(self._values), dict(self._types))
        return self._frozen


EMPTY_ATTRS: Final = OpAttrsRef()
"""The shared empty frozen map."""


def infer_entry(value: Any) -> tuple[OpAttrType, bool, Any]:
    """Type a plain Python value for OpAttrs (the eager API's keyword arguments).

    bool -> BOOL, int -> I64, float -> F32, str -> CHAR, DType -> DTYPE, DenseAttr -> DENSE,
    ShapeAttr -> SHAPE, a list/tuple of one scalar kind -> that array (empty -> I64 array).

    Raises:
        OpAttrsError: for values with no OpAttrs type.
    """
    if isinstance(value, bool):
        return OpAttrType.BOOL, False, value
    if isinstance(value, int):
        return OpAttrType.I64, False, value
    if isinstance(value, float):
        return OpAttrType.F32, False, value
    if isinstance(value, str):
        return OpAttrType.CHAR, False, value
    if isinstance(value, DType):
        return OpAttrType.DTYPE, False, value
    if isinstance(value, DenseAttr):
        return OpAttrType.DENSE, False, value
    if isinstance(value, ShapeAttr):
        return OpAttrType.SHAPE, False, value.dims
    if isinstance(value, (list, tuple)):
        items = tuple(value)
        if all(isinstance(v, bool) for v in items) and items:
            return OpAttrType.BOOL, True, items
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return OpAttrType.I64, True, tuple(int(v) for v in items)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            return OpAttrType.F32, True, tuple(float(v) for v in items)
    raise OpAttrsError(f"cannot use {value!r} as an op attribute")


def attrs_from_dict(values: Mapping[str, Any]) -> OpAttrsRef:
    """A frozen map from plain Python values typed by :func:`infer_entry`."""
    if not values:
        return EMPTY_ATTRS
    types: dict[str, tuple[OpAttrType, bool]] = {}
    plain: dict[str, Any] = {}
    for name, value in values.items():
        attr_type, is_array, typed = infer_entry(value)
        types[name] = (attr_type, is_array)
        plain[name] = typed
    return OpAttrsRef(plain, types)


# -- value printing (docs/eager.md) ---------------------------------------------------------------


def _format_scalar(attr_type: OpAttrType, value: Any) -> str:
    if attr_type is OpAttrType.BOOL:
        return "1" if value else "0"
    if attr_type in _INT_TYPES:
        return str(int(value))
    if attr_type in _FLOAT_TYPES:
        return format_float_e(float(value))
    if attr_type in (OpAttrType.COMPLEX64, OpAttrType.COMPLEX128):
        c = complex(value)
        return f"({format_float_e(c.real)},{format_float_e(c.imag)})"
    if attr_type is OpAttrType.DTYPE:
        return dtype_print_name(value) if isinstance(value, DType) else str(value).upper()
    return str(value)


def format_float_e(value: float) -> str:
    """C ``%e`` formatting with TFRT's spellings of non-finite values (``nan``, ``INF``)."""
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "INF" if value > 0 else "-INF"
    return f"{value:e}"


def _format_dense(dense: DenseAttr) -> str:
    dtype = dtype_print_name(dtype_from_name(dense.dtype))
    return f"dtype={dtype}, rank={len(dense.shape)}, elt_count={dense.num_elements}"


def _format_aggregate(elements: tuple[tuple[OpAttrType, bool, Any], ...]) -> str:
    parts = []
    for attr_type, _is_array, value in elements:
        if attr_type is OpAttrType.DENSE:
            parts.append("{" + _format_dense(value) + "}")
        elif attr_type is OpAttrType.AGGREGATE:
            parts.append("{" + _format_aggregate(value) + "}")
        else:
            parts.append("{unknown}")
    return f"elt_count={len(elements)} [" + ", ".join(parts) + "]"


def format_value(attr_type: OpAttrType, is_array: bool, value: Any) -> str:
    """How one entry's value prints after ``value=`` (docs/eager.md)."""
    if attr_type is OpAttrType.CHAR or attr_type is OpAttrType.FUNC:
        return "".join(value) if is_array else str(value)
    if is_array:
        shown = [_format_scalar(attr_type, v) for v in value[:MAX_PRINTED_ARRAY_ELEMENTS]]
        more = "..." if len(value) > MAX_PRINTED_ARRAY_ELEMENTS else ""
        return "[" + ", ".join(shown) + more + "]"
    if attr_type is OpAttrType.DENSE:
        return _format_dense(value)
    if attr_type is OpAttrType.SHAPE:
        if value is None:
            return "<*>"
        return "<" + "x".join("?" if d < 0 else str(d) for d in value) + ">"
    if attr_type is OpAttrType.AGGREGATE:
        return _format_aggregate(value)
    return _format_scalar(attr_type, value)
