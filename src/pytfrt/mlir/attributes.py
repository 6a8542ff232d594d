"""Conversion of xDSL attributes and locations to pytfrt's plain values (docs/bef.md).

=======================================  ===================================================
MLIR                                     :mod:`pytfrt.support.attributes`
=======================================  ===================================================
``42 : i32``, ``true``                   ``IntAttr(42, "i32")``, ``IntAttr(1, "i1")``
``1.0 : f32``                            ``FloatAttr(1.0, "f32")``
``"s"``                                  ``StringAttr("s")``
``unit``                                 ``UnitAttr()``
``i32``, ``!t.tensor`` (type attrs)      ``TypeAttr("i32")``
``[1 : i32, 2 : i32]``                   ``ArrayAttr((...), "i32")`` (one scalar kind)
``[["a", 1 : i32], 1.0 : f32]``          ``AggregateAttr((...))`` (mixed or nested)
``dense<...> : tensor<2x3xf32>``         ``DenseAttr("f32", (2, 3), raw little-endian bytes)``
``#corert.shape<2x?x3>``                 ``ShapeAttr((2, -1, 3))``
``@mod::@fn`` (``tfrt.compiled``)        ``pytfrt.bef.attr_codec.SymbolRefAttr``
=======================================  ===================================================

Anything else raises :class:`UnsupportedAttribute` (reported as ``BEF files cannot encode the
'<name>' attribute``).
"""

from __future__ import annotations

import struct

from xdsl.dialects import builtin as b
from xdsl.ir import Attribute as XAttr
from xdsl.ir import TypeAttribute

from pytfrt.mlir.types import CorertShapeAttr
from pytfrt.support import attributes as pa
from pytfrt.support import location as pl


class UnsupportedAttribute(Exception):
    """The attribute has no BEF encoding."""


_FLOAT_NAMES: dict[type, str] = {
    b.Float16Type: "f16",
    b.BFloat16Type: "bf16",
    b.Float32Type: "f32",
    b.Float64Type: "f64",
}


def int_type_name(t: XAttr) -> str:
    """``i32`` / ``ui8`` / ... for an integer (or index) type."""
    if isinstance(t, b.IndexType):
        return "i64"
    if not isinstance(t, b.IntegerType):
        raise UnsupportedAttribute
    width = t.width.data
    prefix = "ui" if t.signedness.data == b.Signedness.UNSIGNED else "i"
    name = f"{prefix}{width}"
    if name not in pa.INT_TYPES:
        raise UnsupportedAttribute
    return name


def float_type_name(t: XAttr) -> str:
    """``f16`` / ``bf16`` / ``f32`` / ``f64``."""
    name = _FLOAT_NAMES.get(type(t))
    if name is None:
        raise UnsupportedAttribute
    return name


def element_dtype(t: XAttr) -> str:
    """TFRT dtype name of a tensor element type."""
    if isinstance(t, b.ComplexType):
        inner = float_type_name(t.element_type)
        return {"f32": "complex64", "f64": "complex128"}.get(inner) or _unsupported()
    if isinstance(t, (b.IntegerType, b.IndexType)):
        return int_type_name(t)
    return float_type_name(t)


def _unsupported() -> str:
    raise UnsupportedAttribute


_STRUCT = {
    "i1": "B", "i8": "b", "ui8": "B", "i16": "h", "ui16": "H", "i32": "i", "ui32": "I",
    "i64": "q", "ui64": "Q", "f16": "e", "f32": "f", "f64": "d",
}  # fmt: skip


def dense_bytes(attr: b.DenseIntOrFPElementsAttr) -> pa.DenseAttr:
    """Raw little-endian row-major bytes, splats expanded."""
    shape = tuple(attr.get_shape())
    dtype = element_dtype(attr.get_element_type())
    count = 1
    for d in shape:
        count *= d
    code = _STRUCT.get(dtype)
    raw = attr.data.data
    if code is not None and dtype != "i1" and len(raw) == count * struct.calcsize(code):
        # xDSL already holds the little-endian values (no per-element Python objects)
        return pa.DenseAttr(dtype, shape, bytes(raw))
    values: list = list(attr.get_values())  # type: ignore[call-overload]
    if len(values) == 1 and count != 1:
        values = values * count
    if dtype in ("complex64", "complex128"):
        code = "f" if dtype == "complex64" else "d"
        flat = [x for pair in values for x in pair]
        data = struct.pack(f"<{len(flat)}{code}", *flat)
    elif dtype == "bf16":
        data = b"".join(
            (struct.unpack("<I", struct.pack("<f", v))[0] >> 16).to_bytes(2, "little")
            for v in values
        )
    else:
        if dtype == "i1":
            values = [1 if v else 0 for v in values]
        elif dtype.startswith("ui"):
            bits = int(dtype[2:])
            values = [v & ((1 << bits) - 1) for v in values]
        data = struct.pack(f"<{len(values)}{_STRUCT[dtype]}", *values)
    return pa.DenseAttr(dtype, shape, data)


def convert_attribute(
    attr: XAttr, compiled: set[str] | frozenset[str] = frozenset()
) -> pa.Attribute:
    """Convert one attribute value; raises :class:`UnsupportedAttribute`."""
    if isinstance(attr, b.IntegerAttr):
        name = int_type_name(attr.type)
        data = attr.value.data
        if name == "i1":
            data = 1 if data else 0
        elif name.startswith("ui"):
            data &= (1 << int(name[2:])) - 1
        return pa.IntAttr(data, name)
    if isinstance(attr, b.FloatAttr):
        return pa.FloatAttr(float(attr.value.data), float_type_name(attr.type))
    if isinstance(attr, b.StringAttr):
        return pa.StringAttr(attr.data)
    if isinstance(attr, b.UnitAttr):
        return pa.UnitAttr()
    if isinstance(attr, b.ArrayAttr):
        elems = tuple(convert_attribute(e, compiled) for e in attr.data)
        return make_array(elems)
    if isinstance(attr, b.DenseIntOrFPElementsAttr):
        return dense_bytes(attr)
    if isinstance(attr, CorertShapeAttr):
        return pa.ShapeAttr(attr.data)
    if isinstance(attr, b.SymbolRefAttr) and attr.root_reference.data in compiled:
        from pytfrt.bef.attr_codec import SymbolRefAttr

        nested = tuple(r.data for r in attr.nested_references.data)
        return SymbolRefAttr(attr.root_reference.data, nested)
    if isinstance(attr, TypeAttribute):
        from pytfrt.mlir.printer import attr_to_str

        return pa.TypeAttr(attr_to_str(attr))
    raise UnsupportedAttribute


def make_array(elems: tuple[pa.Attribute, ...]) -> pa.Attribute:
    """Flat array if all elements are scalars of one type, else an aggregate."""
    if not elems:
        return pa.ArrayAttr((), "i32")
    first = elems[0]
    if isinstance(first, (pa.IntAttr, pa.FloatAttr)):
        kind = type(first)
        ty = first.type
        if all(type(e) is kind and e.type == ty for e in elems):  # type: ignore[attr-defined]
            return pa.ArrayAttr(elems, ty)
    return pa.AggregateAttr(elems)


def convert_location(loc: XAttr) -> pl.Location:
    """An xDSL location attribute as a pytfrt location."""
    if isinstance(loc, b.FileLineColLoc):
        return pl.FileLineColLoc(loc.filename.data, loc.line.data, loc.column.data)
    if isinstance(loc, b.NameLoc):
        child = loc.location
        return pl.NameLoc(
            loc.desc.data,
            pl.UNKNOWN_LOC if isinstance(child, b.NoneAttr) else convert_location(child),
        )
    if isinstance(loc, b.CallSiteLoc):
        return pl.CallSiteLoc(convert_location(loc.callee), convert_location(loc.caller))
    if isinstance(loc, b.FusedLoc):
        locs = loc.locations
        items = locs.data if isinstance(locs, b.ArrayAttr) else ()
        return pl.FusedLoc(tuple(convert_location(x) for x in items))
    # a fresh object per op: each op has its own location record in BEF (docs/bef.md)
    return pl.UnknownLoc()
