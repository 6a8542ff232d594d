"""Turning BEF kernel attributes into typed OpAttrs entries (for the ``corert.*`` kernels).

Kernels may receive either the attribute objects of :mod:`pytfrt.support.attributes` (which keep
MLIR types: ``1 : i32`` vs ``1 : i64``) or their plain ``.value`` forms.  Both are accepted; plain
values are typed by the setter's kind or by inference (:func:`~.op_attrs.infer_entry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pytfrt.core_runtime.op_attrs import (
    OpAttrsError,
    OpAttrsRef,
    OpAttrType,
    attr_type_from_mlir,
    infer_entry,
)
from pytfrt.support.attributes import (
    AggregateAttr,
    ArrayAttr,
    Attribute,
    DenseAttr,
    FloatAttr,
    IntAttr,
    ShapeAttr,
    StringAttr,
    TypeAttr,
    UnitAttr,
)
from pytfrt.tensor.dtype import DType, dtype_from_name

Entry = tuple[OpAttrType, bool, Any]

_KIND_TYPES = {
    "bool": OpAttrType.BOOL,
    "i32": OpAttrType.I32,
    "i64": OpAttrType.I64,
    "f32": OpAttrType.F32,
    "str": OpAttrType.CHAR,
}


def plain(value: Any) -> Any:
    """The plain value of an attribute object (or ``value`` itself if already plain)."""
    if isinstance(value, (DenseAttr, ShapeAttr, TypeAttr)):
        return value
    if isinstance(value, Attribute):
        return value.value
    return value


def _dtype(value: Any) -> DType:
    if isinstance(value, DType):
        return value
    name = value.name if isinstance(value, TypeAttr) else str(value)
    return dtype_from_name(name.removeprefix("!corert.").removeprefix("!tfrt."))


def _aggregate(elements: Sequence[Any]) -> tuple[Entry, ...]:
    return tuple(typed_entry(e) for e in elements)


def typed_entry(value: Any, kind: str | None = None) -> Entry:
    """``(type, is_array, value)`` for an attribute object or plain value.

    ``kind`` is the ``corert.op_attrs_set.<kind>`` suffix, used when the value is plain.

    Raises:
        OpAttrsError: for values with no OpAttrs type.
    """
    if kind == "dtype":
        return OpAttrType.DTYPE, False, _dtype(value)
    if kind == "aggregate":
        elems = value.elements if isinstance(value, (AggregateAttr, ArrayAttr)) else value
        return OpAttrType.AGGREGATE, False, _aggregate(tuple(elems))
    if kind == "shape":
        dims = value.dims if isinstance(value, ShapeAttr) else value
        return OpAttrType.SHAPE, False, None if dims is None else tuple(int(d) for d in dims)
    if isinstance(value, IntAttr):
        if value.type == "i1":
            return OpAttrType.BOOL, False, bool(value.data)
        return attr_type_from_mlir(value.type), False, int(value.data)
    if isinstance(value, FloatAttr):
        return attr_type_from_mlir(value.type), False, float(value.data)
    if isinstance(value, StringAttr):
        return OpAttrType.CHAR, False, value.data
    if isinstance(value, UnitAttr):
        return OpAttrType.BOOL, False, True
    if isinstance(value, TypeAttr):
        return OpAttrType.DTYPE, False, _dtype(value)
    if isinstance(value, DenseAttr):
        return OpAttrType.DENSE, False, value
    if isinstance(value, ShapeAttr):
        return OpAttrType.SHAPE, False, value.dims
    if isinstance(value, ArrayAttr):
        return attr_type_from_mlir(value.element_type), True, value.value
    if isinstance(value, AggregateAttr):
        elems = value.elements
        if elems and all(isinstance(e, (IntAttr, FloatAttr)) for e in elems):
            types = {e.type for e in elems if isinstance(e, (IntAttr, FloatAttr))}
            if len(types) == 1:
                return attr_type_from_mlir(types.pop()), True, value.value
        return OpAttrType.AGGREGATE, False, _aggregate(elems)
    # plain values
    if kind in _KIND_TYPES:
        attr_type = _KIND_TYPES[kind]
        if isinstance(value, tuple):
            return attr_type, True, value
        return attr_type, False, value
    if kind == "dense":
        return OpAttrType.DENSE, False, value
    if isinstance(value, tuple) and any(
        isinstance(v, (tuple, DenseAttr, TypeAttr, str)) for v in value
    ):
        return OpAttrType.AGGREGATE, False, _aggregate(value)
    try:
        return infer_entry(value)
    except OpAttrsError:
        raise OpAttrsError(f"unsupported op attribute value {value!r}") from None


def attrs_from_pairs(pairs: Any, func_pairs: Any = ()) -> OpAttrsRef:
    """A frozen OpAttrs from executeop's ``op_attrs`` (and ``op_func_attrs``) ``[key, value]``
    pairs, as attribute objects or plain tuples."""
    values: dict[str, Any] = {}
    types: dict[str, tuple[OpAttrType, bool]] = {}
    for raw, is_func in ((pairs, False), (func_pairs, True)):
        items = raw.elements if isinstance(raw, (AggregateAttr, ArrayAttr)) else raw or ()
        for pair in items:
            elems: Any = pair.elements if isinstance(pair, (AggregateAttr, ArrayAttr)) else pair
            key, value = tuple(elems)
            name = str(plain(key))
            if is_func:
                values[name] = str(plain(value)).lstrip("@")
                types[name] = (OpAttrType.FUNC, False)
                continue
            attr_type, is_array, typed = typed_entry(value)
            values[name] = typed
            types[name] = (attr_type, is_array)
    return OpAttrsRef(values, types)


def op_name_and_attrs(attrs: Sequence[Any]) -> tuple[str, OpAttrsRef]:
    """Split executeop's name-sorted attributes ``op_attrs, op_func_attrs, op_name``.

    Raises:
        OpAttrsError: if no op name is present.
    """
    names = [a for a in attrs if isinstance(a, (str, StringAttr))]
    if not names:
        raise OpAttrsError("corert.executeop has no op_name attribute")
    op_name = str(plain(names[-1]))
    rest = [a for a in attrs if not isinstance(a, (str, StringAttr))]
    op_attrs = rest[0] if rest else ()
    func_attrs = rest[1] if len(rest) > 1 else ()
    return op_name, attrs_from_pairs(op_attrs, func_attrs)


def dense_attr_to_array(dense: DenseAttr) -> np.ndarray:
    """The ndarray of a ``dense<...>`` attribute (a copy, writable)."""
    dtype = dtype_from_name(dense.dtype)
    if dtype.kind == "bool":
        flat = np.frombuffer(dense.data, np.uint8).astype(np.bool_)
    else:
        flat = np.frombuffer(dense.data, dtype.np_dtype.newbyteorder("<")).astype(
            dtype.np_dtype
        )
    n = dense.num_elements
    if flat.size == 1 and n != 1:
        flat = np.full(n, flat[0], dtype.np_dtype)
    return flat.reshape(dense.shape).copy()
