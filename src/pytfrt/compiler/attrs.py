"""Attribute values between Python (the catalogue's canonical form) and xDSL attributes.

Kinds (``pytfrt.compiler.ops.base.ATTR_KINDS``): ``int`` -> ``i64`` integer, ``float`` -> ``f64``
float, ``bool`` -> ``true``/``false``, ``str``/``dtype`` -> string, ``ints``/``floats`` ->
arrays, ``sym`` -> ``@f``, ``syms`` -> ``[@f, @g]``, ``dense`` -> ``dense<...>`` elements.
Reading is lenient about integer widths and float widths (hand-written ``.mlir`` files).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects import builtin as b
from xdsl.ir import Attribute, Operation

from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.types import TType, dtype_name, element_xdsl, from_xdsl, to_xdsl

if TYPE_CHECKING:
    from pytfrt.compiler.ops import OpDef

BUFFER_ATTR = "tg.buffer"
"""The attribute the buffer-planning pass puts on an op (not one of the op's own)."""


def to_xattr(kind: str, value: Any) -> Attribute:
    """The xDSL attribute of a canonical Python value of ``kind``."""
    if kind == "bool":
        return b.IntegerAttr(int(value), b.IntegerType(1))
    if kind == "int":
        return b.IntegerAttr(int(value), b.i64)
    if kind == "float":
        return b.FloatAttr(float(value), b.f64)
    if kind in ("str", "dtype"):
        return b.StringAttr(value)
    if kind == "ints":
        return b.ArrayAttr([b.IntegerAttr(int(v), b.i64) for v in value])
    if kind == "floats":
        return b.ArrayAttr([b.FloatAttr(float(v), b.f64) for v in value])
    if kind == "sym":
        return b.SymbolRefAttr(value)
    if kind == "syms":
        return b.ArrayAttr([b.SymbolRefAttr(v) for v in value])
    if kind == "dense":
        return dense_attr(np.asarray(value))
    raise GraphError(f"unknown attribute kind {kind!r}")


def dense_attr(array: np.ndarray) -> Attribute:
    """``dense<...> : tensor<...>`` of an array.

    Raises:
        GraphError: for string arrays (they must be weights).
    """
    name = dtype_name(array.dtype)
    if name == "string":
        raise GraphError("string constants cannot be inline values")
    ttype = to_xdsl(TType(name, tuple(array.shape)))
    flat = array.reshape(-1)
    if array.dtype.kind == "b":
        data: list[Any] = [int(v) for v in flat]
    elif array.dtype.kind in "iu":
        data = [int(v) for v in flat]
    else:
        data = [float(v) for v in flat.astype(np.float64)]
    return b.DenseIntOrFPElementsAttr.from_list(ttype, data)


def from_xattr(kind: str, attr: Attribute, where: str) -> Any:
    """The canonical Python value of an xDSL attribute of ``kind``.

    Raises:
        GraphError: naming ``where`` if the attribute does not have the kind's form.
    """
    try:
        if kind == "bool":
            if isinstance(attr, b.IntegerAttr):
                return bool(attr.value.data)
            if isinstance(attr, b.UnitAttr):
                return True
        elif kind == "int" and isinstance(attr, b.IntegerAttr):
            return int(attr.value.data)
        elif kind == "float" and isinstance(attr, b.FloatAttr | b.IntegerAttr):
            return float(attr.value.data)
        elif kind in ("str", "dtype") and isinstance(attr, b.StringAttr):
            return attr.data
        elif kind == "dtype" and isinstance(attr, b.TypeAttribute):
            from pytfrt.compiler.types import element_name

            return element_name(attr)
        elif kind == "ints":
            if isinstance(attr, b.ArrayAttr):
                return tuple(int(e.value.data) for e in attr.data)  # type: ignore[attr-defined]
            if isinstance(attr, b.DenseArrayBase):
                return tuple(int(v) for v in attr.get_values())
        elif kind == "floats" and isinstance(attr, b.ArrayAttr):
            return tuple(float(e.value.data) for e in attr.data)  # type: ignore[attr-defined]
        elif kind == "sym" and isinstance(attr, b.SymbolRefAttr):
            return attr.root_reference.data
        elif kind == "syms" and isinstance(attr, b.ArrayAttr):
            return tuple(e.root_reference.data for e in attr.data)  # type: ignore[attr-defined]
        elif kind == "dense" and isinstance(attr, b.DenseIntOrFPElementsAttr):
            return dense_value(attr)
    except (AttributeError, TypeError, ValueError):
        pass
    raise GraphError(f"{where}: attribute must be of kind {kind}, got {attr}")


def dense_value(attr: b.DenseIntOrFPElementsAttr) -> np.ndarray:
    """The array held by a ``dense<...>`` attribute."""
    t = from_xdsl(attr.get_type())
    from pytfrt.compiler.types import np_dtype

    values = list(attr.get_values())
    shape = tuple(d or 0 for d in (t.shape or ()))
    arr = np.array(values, dtype=np_dtype(t.dtype) if t.dtype != "bf16" else np.float32)
    if arr.size == 1 and int(np.prod(shape)) != 1:
        arr = np.full(shape, arr.reshape(()))
    return arr.astype(np_dtype(t.dtype)).reshape(shape)


__all__ = ["dense_attr", "dense_value", "element_xdsl", "from_xattr", "to_xattr"]


def op_attrs(op: Operation, opdef: OpDef) -> dict[str, Any]:
    """The op's attributes as canonical Python values, defaults filled in.

    Raises:
        GraphError: for an unknown attribute or one of the wrong kind.
    """
    given: dict[str, Any] = {}
    for key, attr in op.attributes.items():
        if key == BUFFER_ATTR:
            continue
        spec = opdef.attrs.get(key)
        if spec is None:
            raise GraphError(f"{op.name}: unknown attribute '{key}'")
        given[key] = from_xattr(spec.kind, attr, f"{op.name} attribute '{key}'")
    return opdef.check_attrs(given)
