"""Types and attributes of the TFRT dialects (``!tfrt.chain``, ``!t.tensor``, ``#corert.shape``).

Every TFRT type is parameterless, so the classes are generated from :data:`TYPE_NAMES` (one
entry per ``dialect.name``).  :func:`make_type` builds a type object from its printed form for
the op tables (``"i32"``, ``"!tfrt.chain"``, ``"f32"``).  ``#corert.shape<2x?x3>`` /
``#corert.shape<*>`` is :class:`CorertShapeAttr` (dims ``None`` = unranked, ``-1`` = unknown).
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import (
    BFloat16Type,
    ComplexType,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    NoneType,
    Signedness,
)
from xdsl.ir import Attribute, Data, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

#: Every parameterless dialect type, by dialect (docs/conformance.md).
TYPE_NAMES: dict[str, tuple[str, ...]] = {
    "tfrt": ("chain", "string", "device", "test.resource", "dist_context"),
    "t": ("tensor",),
    "ts": (
        "shape",
        "partial_shape",
        "fixed_rank_shape.0",
        "fixed_rank_shape.1",
        "fixed_rank_shape.2",
        "fixed_rank_shape.3",
        "fixed_rank_shape.4",
        "fixed_rank_shape.5",
    ),
    "corert": (
        "tensorhandle",
        "ophandler",
        "op_handler",
        "opattrs",
        "opattrs_ref",
        "op",
        "string",
        "resource",
        "variant",
        "quint8",
        "quint16",
        "qint8",
        "qint16",
        "qint32",
    ),
    "vt": ("value",),
    "test": ("atomic.i32", "atomic.i64"),
    "my": ("coordinate",),
    "ht": ("host_buffer",),
}


def _class_name(full: str) -> str:
    parts = full.replace(".", "_").split("_")
    return "".join(p[:1].upper() + p[1:] for p in parts) + "Type"


def _make_type_class(full: str) -> type[TypeAttribute]:
    cls = type(_class_name(full), (ParametrizedAttribute, TypeAttribute), {"name": full})
    return irdl_attr_definition(cls)  # type: ignore[return-value]


#: ``"tfrt.chain"`` -> its type class.
TYPE_CLASSES: dict[str, type[TypeAttribute]] = {
    f"{dialect}.{name}": _make_type_class(f"{dialect}.{name}")
    for dialect, names in TYPE_NAMES.items()
    for name in names
}


#: Spellings of a type that TFRT renamed: ``!tfrt_tensor.tensor`` (TFRT's tensor dialect since
#: 2022) is ``!t.tensor`` (its name before); both parse to the one type, printed ``!t.tensor``.
TYPE_ALIASES: dict[str, str] = {"tfrt_tensor.tensor": "t.tensor"}


def _make_alias_class(full: str, target: str) -> type[TypeAttribute]:
    """A registrable type class named ``full`` whose parsed instances are ``target``'s."""
    target_cls: Any = TYPE_CLASSES[target]

    def new(cls: type, params: object) -> Attribute:
        return target_cls.new(params)  # type: ignore[no-any-return]

    cls: Any = _make_type_class(full)
    cls.new = classmethod(new)
    return cls  # type: ignore[no-any-return]


#: ``"tfrt_tensor.tensor"`` -> the class the parser finds (it builds the target type).
ALIAS_CLASSES: dict[str, type[TypeAttribute]] = {
    alias: _make_alias_class(alias, target) for alias, target in TYPE_ALIASES.items()
}


@irdl_attr_definition
class CorertShapeAttr(Data[tuple[int, ...] | None]):
    """``#corert.shape<2x?x3>`` (dims, ``-1`` unknown) or ``#corert.shape<*>`` (``None``)."""

    name = "corert.shape"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> tuple[int, ...] | None:
        with parser.in_angle_brackets():
            if parser.parse_optional_punctuation("*") is not None:
                return None
            dims = parser.parse_dimension_list()
            return tuple(-1 if d < 0 else d for d in dims)

    def print_parameter(self, printer: Printer) -> None:
        if self.data is None:
            printer.print_string("<*>")
        else:
            printer.print_string("<" + "x".join("?" if d < 0 else str(d) for d in self.data) + ">")


_SIMPLE: dict[str, Attribute] = {
    "f16": Float16Type(),
    "bf16": BFloat16Type(),
    "f32": Float32Type(),
    "f64": Float64Type(),
    "none": NoneType(),
}
_CACHE: dict[str, Attribute] = {}


def make_type(text: str) -> Attribute:
    """Build a type from its printed form (``i32``, ``f32``, ``complex<f64>``, ``!t.tensor``)."""
    found = _CACHE.get(text)
    if found is not None:
        return found
    if text in _SIMPLE:
        found = _SIMPLE[text]
    elif text.startswith("!"):
        found = TYPE_CLASSES[text[1:]]()
    elif text.startswith("complex<") and text.endswith(">"):
        found = ComplexType(make_type(text[8:-1]))  # type: ignore[arg-type,type-var]
    elif text.startswith("ui"):
        found = IntegerType(int(text[2:]), Signedness.UNSIGNED)
    elif text.startswith("si"):
        found = IntegerType(int(text[2:]), Signedness.SIGNED)
    elif text.startswith("i"):
        found = IntegerType(int(text[1:]))
    else:
        raise ValueError(f"unknown type name {text!r}")
    _CACHE[text] = found
    return found
