"""Op classes generated from compact tables, and the shared pieces of TFRT's custom syntax.

TFRT has hundreds of kernel ops that differ only in a dtype suffix (``tfrt.add.i32``,
``tfrt.add.f64``, ...).  Instead of one hand-written class each, a dialect module lists
:class:`OpSpec` rows and :func:`make_op_class` turns each row into a small xDSL
:class:`~xdsl.ir.Operation` subclass whose ``parse``/``print`` follow one of a few *syntax
kinds*:

``simple``   ``op %a, %b attr-dict``: fixed operand and result types (``tfrt.add.i32``).
``value``    ``op 42 attr-dict``: attribute ``attr`` typed by the result (``tfrt.constant.i32``).
``attr``     ``op %a, %b <attribute> attr-dict``: a fully typed attribute after optional
             operands (``ts.build_shape [1 : i64]``, ``tfrt_dht.fill_tensor_with_constant.f32
             %t, %c 1.0 : f32``).
``attrdict`` ``op attr-dict``: no operands (``corert.const_string_tensor {...}``).

Ops with irregular syntax (control flow, benchmarks, executeop) subclass :class:`TfrtOp`
directly in their dialect modules.  Generic form (``"tfrt.add.i32"(%a, %b) : ...``) is always
accepted; the verifier then checks the op against its row (result count and types, operand
types, with TFRT's ignorable trailing chain operand tolerated).

Op classes are plain :class:`~xdsl.ir.Operation` subclasses (not IRDL): cheap to create at
import and to instantiate while parsing.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.irdl import traits_def
from xdsl.parser import Parser
from xdsl.parser.core import UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

from pytfrt.mlir.types import make_type

CHAIN = "!tfrt.chain"


@dataclass(frozen=True)
class OpSpec:
    """One row of an op table.

    Attributes:
        name: full op name (``tfrt.add.i32``).
        syntax: ``simple`` | ``value`` | ``attr`` | ``attrdict``.
        operands: printed operand types (the fixed operands of the custom form).
        results: printed result types.
        attr: attribute name for the ``value``/``attr`` kinds.
    """

    name: str
    syntax: str
    operands: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    attr: str = "value"


class TfrtOp(Operation):
    """Base of every TFRT op class: hooks for the printer and the verifier."""

    name: ClassVar[str] = "tfrt.op"
    traits = traits_def()
    spec: ClassVar[OpSpec | None] = None

    def shadowed_region_args(self) -> list[tuple[int, Sequence[SSAValue]]]:
        """``(region index, operands)`` pairs whose entry-block args print as the operands."""
        return []

    def verify_(self) -> None:
        spec = self.spec
        if spec is None:
            return
        check_results(self, spec.results)
        check_operands(self, spec.operands)


def check_results(op: Operation, expected: Sequence[str]) -> None:
    """Verify an op's result count and types against printed type names (ODS wording)."""
    if len(op.results) != len(expected):
        raise VerifyException(
            f"'{op.name}' op requires {len(expected)} results, but found {len(op.results)}"
        )
    for i, (res, want) in enumerate(zip(op.results, expected, strict=True)):
        if res.type != make_type(want):
            raise VerifyException(
                f"'{op.name}' op result #{i} must be {want} type, but got '{type_str(res.type)}'"
            )


def check_operands(op: Operation, expected: Sequence[str]) -> None:
    """Verify operand types; one extra trailing ``!tfrt.chain`` operand is tolerated."""
    n = len(op.operands)
    chain = make_type(CHAIN)
    if n != len(expected) and not (n == len(expected) + 1 and op.operands[-1].type == chain):
        raise VerifyException(f"'{op.name}' op requires {len(expected)} operands, but found {n}")
    for i, (val, want) in enumerate(zip(op.operands, expected, strict=False)):
        if val.type != make_type(want):
            raise VerifyException(
                f"'{op.name}' op operand #{i} must be {want} type, but got '{type_str(val.type)}'"
            )


def type_str(attr: Attribute) -> str:
    """Printed form of a type."""
    from pytfrt.mlir.printer import attr_to_str

    return attr_to_str(attr)


# -- parsing helpers ------------------------------------------------------------------------
def parse_operand_list(parser: Parser) -> list[UnresolvedOperand]:
    """``%a, %b, ...`` (possibly empty), undelimited; stops before a next op's ``%r =``."""
    if getattr(parser, "at_result_definition", lambda: False)():
        return []
    first = parser.parse_optional_unresolved_operand()
    if first is None:
        return []
    out = [first]
    while parser.parse_optional_punctuation(",") is not None:
        out.append(parser.parse_unresolved_operand())
    return out


def parse_n_operands(parser: Parser, n: int) -> list[UnresolvedOperand]:
    """Exactly ``n`` comma-separated operands (nothing is consumed when ``n == 0``)."""
    out: list[UnresolvedOperand] = []
    for i in range(n):
        if i:
            parser.parse_punctuation(",")
        out.append(parser.parse_unresolved_operand())
    return out


def parse_paren_operands(parser: Parser) -> list[UnresolvedOperand]:
    """``(%a, %b)`` (possibly ``()``)."""
    return parser.parse_comma_separated_list(
        parser.Delimiter.PAREN, parser.parse_unresolved_operand
    )


def resolve(
    parser: Parser, operands: Sequence[UnresolvedOperand], types: Sequence[Attribute]
) -> list[SSAValue]:
    """Resolve operands against types, with MLIR's count error at the first operand."""
    if len(operands) != len(types):
        at = operands[0].span if operands else None
        parser.raise_error(f"{len(operands)} operands present, but expected {len(types)}", at)
    return [parser.resolve_operand(o, t) for o, t in zip(operands, types, strict=True)]


def parse_type_list(parser: Parser) -> list[Attribute]:
    """``T1, T2, ...`` (at least one)."""
    out: list[Attribute] = [parser.parse_type()]
    while parser.parse_optional_punctuation(",") is not None:
        out.append(parser.parse_type())
    return out


def parse_types_after_colon(parser: Parser) -> list[Attribute]:
    """Optional ``: T1, T2``; empty list if there is no colon."""
    if parser.parse_optional_punctuation(":") is None:
        return []
    return parse_type_list(parser)


def parse_attr_dict(parser: Parser) -> dict[str, Attribute]:
    """Optional ``{name = value, ...}``."""
    return parser.parse_optional_attr_dict()


def parse_attr_dict_with_keyword(parser: Parser) -> dict[str, Attribute]:
    """Optional ``attributes {name = value, ...}`` (before a region, where ``{`` is ambiguous)."""
    found = parser.parse_optional_attr_dict_with_keyword()
    return dict(found.data) if found is not None else {}


def print_attr_dict_with_keyword(printer: Printer, attrs: dict[str, Attribute], *skip: str) -> None:
    """`` attributes {a = 1}`` for the attributes not in ``skip``."""
    rest = {k: attrs[k] for k in sorted(attrs) if k not in skip}
    printer.print_op_attributes(rest, print_keyword=True)


def parse_region_with_args(
    parser: Parser, operands: Sequence[UnresolvedOperand], types: Sequence[Attribute]
) -> Region:
    """Parse ``{ ... }`` whose entry block has one argument per operand, named like it.

    TFRT's region ops are isolated from above, so the body is a new name scope: its
    arguments take the operands' names (TFRT's ``shadowRegionArgs``) and its values may reuse
    any name of the enclosing function (``%x`` defined outside and again inside).  A name the
    body uses without defining still resolves to the enclosing value (when the parser keeps
    ``outer_scopes``, as :class:`~pytfrt.mlir.parser.TfrtParser` does), so that lowering can
    report TFRT's "references to kernels within the current region" error at the use.
    """
    saved = parser.ssa_values
    names = {o.operand_name for o in operands}
    scopes: list[dict[str, Any]] | None = getattr(parser, "outer_scopes", None)
    if scopes is not None:
        scopes.append({k: v for k, v in saved.items() if k not in names})
        parser.ssa_values = {}
    else:
        parser.ssa_values = {k: v for k, v in saved.items() if k not in names}
    args = [Parser.Argument(o.span, t) for o, t in zip(operands, types, strict=True)]
    try:
        return parser.parse_region(args)
    finally:
        parser.ssa_values = saved
        if scopes is not None:
            scopes.pop()


#: IEEE layouts of the float types a literal may have: (width, mantissa bits, max exponent)
_FLOAT_LAYOUTS: dict[str, tuple[int, int, int]] = {
    "f16": (16, 10, 15),
    "bf16": (16, 7, 127),
    "f32": (32, 23, 127),
    "f64": (64, 52, 1023),
}


def _float_from_bits(bits: int, width: int, mantissa: int) -> float:
    """The value of the IEEE float of ``width`` bits whose bit pattern is ``bits``."""
    if width == 64:
        return float(struct.unpack("<d", bits.to_bytes(8, "little"))[0])
    if mantissa == 7:  # bfloat16: the upper half of an f32
        bits <<= 16
        width = 32
    fmt = "<f" if width == 32 else "<e"
    return float(struct.unpack(fmt, bits.to_bytes(width // 8, "little"))[0])


def parse_value_of_type(parser: Parser, type_: Attribute) -> Attribute:
    """A bare literal typed by ``type_`` (``42``, ``1.0``, ``true``, ``0x7FC00000``).

    As in MLIR, a hexadecimal literal of a float type is the float's bit pattern.  A value
    that does not fit the type (an integer out of range, a float literal that rounds to
    infinity, a bit pattern wider than the type) is a ``ParseError`` at the literal.
    """
    start = parser.pos
    negative = parser._parse_optional_token(MLIRTokenKind.MINUS) is not None
    tok = parser._current_token
    if isinstance(type_, IntegerType):
        b = None if negative else parser.parse_optional_boolean()
        if b is not None:
            return IntegerAttr(int(b), type_)
        value = parser.parse_integer(allow_boolean=False, allow_negative=False)
        try:
            return IntegerAttr(-value if negative else value, type_)
        except VerifyException as err:
            parser.raise_error(str(err), start, tok.span.end)
    layout = _FLOAT_LAYOUTS.get(str(type_))
    if tok.kind == MLIRTokenKind.INTEGER_LIT and tok.text[:2].lower() == "0x" and layout:
        width, mantissa, _ = layout
        if negative:
            parser.raise_error("hexadecimal float literal should not have a leading minus",
                               start, tok.span.end)
        bits = parser.parse_integer(allow_boolean=False, allow_negative=False)
        if bits.bit_length() > width:
            parser.raise_error(f"hexadecimal float constant out of range for type "
                               f"'{type_}'", start, tok.span.end)
        return FloatAttr(_float_from_bits(bits, width, mantissa), type_)  # type: ignore[arg-type,call-overload]
    if tok.kind == MLIRTokenKind.INTEGER_LIT:
        whole = parser.parse_integer(allow_boolean=False, allow_negative=False)
        num = float(whole) if whole.bit_length() <= 1024 else math.inf
    else:
        num = parser.parse_float(allow_negative=False)
    if layout is not None:
        _, mantissa, emax = layout
        # Round to nearest even overflows from halfway past the largest finite value on.
        if math.isinf(num) or abs(num) >= (2.0 - 2.0 ** -(mantissa + 1)) * 2.0**emax:
            parser.raise_error(f"float constant out of range for type '{type_}'",
                               start, tok.span.end)
    return FloatAttr(-num if negative else num, type_)  # type: ignore[arg-type,call-overload]


# -- printing helpers -----------------------------------------------------------------------
def print_operand_list(printer: Printer, values: Sequence[SSAValue]) -> None:
    """`` %a, %b`` (leading space if non-empty)."""
    if values:
        printer.print_string(" ")
        printer.print_list(values, printer.print_operand)


def print_type_list(printer: Printer, types: Sequence[Attribute]) -> None:
    """``T1, T2``."""
    printer.print_list(types, printer.print_attribute)


def print_attr_dict(printer: Printer, attrs: dict[str, Attribute], *skip: str) -> None:
    """`` {a = 1}`` for the attributes not in ``skip`` (sorted, as MLIR prints them)."""
    rest = {k: attrs[k] for k in sorted(attrs) if k not in skip}
    printer.print_op_attributes(rest)


def print_value_without_type(printer: Printer, attr: Attribute) -> None:
    """A literal without its type (``42``, ``true``, ``1.000000e-01``)."""
    if isinstance(attr, IntegerAttr):
        if attr.type == IntegerType(1):
            printer.print_string("true" if attr.value.data else "false")
        else:
            printer.print_string(str(attr.value.data))
    elif isinstance(attr, FloatAttr):
        printer.print_float(attr.value.data, attr.type)  # type: ignore[arg-type]
    else:
        printer.print_attribute(attr)


# -- generated classes -----------------------------------------------------------------------
class SimpleOp(TfrtOp):
    """``op %a, %b attr-dict`` with the row's fixed types."""

    @classmethod
    def parse(cls, parser: Parser) -> SimpleOp:
        spec = cls.spec
        assert spec is not None
        operands = parse_n_operands(parser, len(spec.operands))
        values = resolve(parser, operands, [make_type(t) for t in spec.operands])
        attrs = parse_attr_dict(parser)
        return cls.create(
            operands=values,
            result_types=[make_type(t) for t in spec.results],
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        print_operand_list(printer, self.operands)
        print_attr_dict(printer, self.attributes)


class ValueOp(TfrtOp):
    """``op <literal> attr-dict``: the literal is typed by the single result."""

    @classmethod
    def parse(cls, parser: Parser) -> ValueOp:
        spec = cls.spec
        assert spec is not None
        rtype = make_type(spec.results[0])
        attrs = parse_attr_dict(parser)  # 2020 form allows a dict before the value
        value = parse_value_of_type(parser, rtype)
        attrs.update(parse_attr_dict(parser))
        attrs[spec.attr] = value
        return cls.create(result_types=[rtype], attributes=attrs)

    def print(self, printer: Printer) -> None:
        assert self.spec is not None
        value = self.attributes.get(self.spec.attr)
        if value is not None:
            printer.print_string(" ")
            print_value_without_type(printer, value)
        print_attr_dict(printer, self.attributes, self.spec.attr)


class AttrOp(TfrtOp):
    """``op %a, %b <typed attribute> attr-dict``."""

    @classmethod
    def parse(cls, parser: Parser) -> AttrOp:
        spec = cls.spec
        assert spec is not None
        operands = parse_n_operands(parser, len(spec.operands))
        values = resolve(parser, operands, [make_type(t) for t in spec.operands])
        value = parser.parse_attribute()
        attrs = parse_attr_dict(parser)
        attrs[spec.attr] = value
        return cls.create(
            operands=values,
            result_types=[make_type(t) for t in spec.results],
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        assert self.spec is not None
        print_operand_list(printer, self.operands)
        value = self.attributes.get(self.spec.attr)
        if value is not None:
            printer.print_string(" ")
            printer.print_attribute(value)
        print_attr_dict(printer, self.attributes, self.spec.attr)


class AttrDictOp(SimpleOp):
    """``op attr-dict`` (no operands): same as ``simple`` with zero operands."""


_KINDS: dict[str, type[TfrtOp]] = {
    "simple": SimpleOp,
    "value": ValueOp,
    "attr": AttrOp,
    "attrdict": AttrDictOp,
}


def _class_name(op_name: str) -> str:
    parts = op_name.replace(".", "_").split("_")
    return "".join(p[:1].upper() + p[1:] for p in parts) + "Op"


def make_op_class(spec: OpSpec) -> type[TfrtOp]:
    """Create the op class of one table row."""
    base = _KINDS[spec.syntax]
    return type(_class_name(spec.name), (base,), {"name": spec.name, "spec": spec})


def make_op_classes(specs: Sequence[OpSpec]) -> list[type[Operation]]:
    """Create the op classes of a table."""
    return [make_op_class(s) for s in specs]


def expand(pattern: str, suffixes: Sequence[str]) -> list[str]:
    """``expand("tfrt.add.{}", ["i32", "f32"])`` -> ``["tfrt.add.i32", "tfrt.add.f32"]``."""
    return [pattern.format(s) for s in suffixes]
