"""The ``tfrt_test`` dialect (docs/conformance.md): ops with custom syntax; all others are generic.

``tfrt_test.benchmark`` attributes: ``duration_secs``, ``max_count``, ``name``,
``num_warmup_runs`` (i32; ``num_warmup_runs`` materialised as 1 when omitted).
``tfrt_test.sync_benchmark``: the same minus ``name``, plus ``target_fn`` (a function).
``tfrt_test.test_cost`` verifies ``_tfrt_cost > 0``.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import FunctionType, IntegerAttr, IntegerType, StringAttr, SymbolRefAttr
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from pytfrt.mlir.ops_base import (
    CHAIN,
    OpSpec,
    TfrtOp,
    make_op_classes,
    parse_attr_dict,
    parse_attr_dict_with_keyword,
    parse_operand_list,
    parse_region_with_args,
    parse_types_after_colon,
    print_attr_dict,
    print_attr_dict_with_keyword,
    print_operand_list,
    print_type_list,
    resolve,
)
from pytfrt.mlir.types import make_type

_BENCH_KEYS = ("duration_secs", "max_count", "num_warmup_runs")


def _parse_bench_args(parser: Parser):
    """``(%a : T, %b : T)`` -> (operands, types)."""
    operands = []
    types: list[Attribute] = []

    def one() -> None:
        operands.append(parser.parse_unresolved_operand())
        parser.parse_punctuation(":")
        types.append(parser.parse_type())

    parser.parse_comma_separated_list(parser.Delimiter.PAREN, one)
    return operands, types


def _parse_bench_keys(parser: Parser) -> dict[str, Attribute]:
    attrs: dict[str, Attribute] = {}
    while True:
        key = parser.parse_optional_keyword_in(_BENCH_KEYS)
        if key is None:
            break
        parser.parse_punctuation("=")
        attrs[key] = IntegerAttr(parser.parse_integer(), IntegerType(32))
        if parser.parse_optional_punctuation(",") is None:
            break
    for key in ("duration_secs", "max_count"):
        if key not in attrs:
            parser.raise_error(f"expected '{key}' in benchmark op")
    attrs.setdefault("num_warmup_runs", IntegerAttr(1, IntegerType(32)))
    return attrs


def _print_bench_args(printer: Printer, values: Sequence[SSAValue]) -> None:
    printer.print_string("(")
    for i, v in enumerate(values):
        if i:
            printer.print_string(", ")
        printer.print_operand(v)
        printer.print_string(" : ")
        printer.print_attribute(v.type)
    printer.print_string(")")


def _print_bench_keys(printer: Printer, attrs: dict[str, Attribute]) -> None:
    parts = []
    for key in _BENCH_KEYS:
        val = attrs.get(key)
        if isinstance(val, IntegerAttr):
            parts.append(f"{key} = {val.value.data}")
    printer.print_string(" " + ", ".join(parts))


class BenchmarkOp(TfrtOp):
    """``tfrt_test.benchmark "name"(%c : i32) duration_secs = 1, max_count = 100, ... {...}``."""

    name = "tfrt_test.benchmark"

    @classmethod
    def parse(cls, parser: Parser) -> BenchmarkOp:
        name = parser.parse_str_literal()
        operands, types = _parse_bench_args(parser)
        attrs = _parse_bench_keys(parser)
        attrs.update(parse_attr_dict_with_keyword(parser))
        attrs["name"] = StringAttr(name)
        values = resolve(parser, operands, types)
        body = parse_region_with_args(parser, operands, types)
        return cls.create(
            operands=values, result_types=[make_type(CHAIN)], attributes=attrs, regions=[body]
        )

    def shadowed_region_args(self) -> list[tuple[int, Sequence[SSAValue]]]:
        return [(0, self.operands)]

    def print(self, printer: Printer) -> None:
        name = self.attributes.get("name")
        printer.print_string(" ")
        printer.print_string_literal(name.data if isinstance(name, StringAttr) else "")
        _print_bench_args(printer, self.operands)
        _print_bench_keys(printer, self.attributes)
        print_attr_dict_with_keyword(printer, self.attributes, "name", *_BENCH_KEYS)
        printer.print_string(" ")
        printer.print_region(self.regions[0], print_entry_block_args=False)


class SyncBenchmarkOp(TfrtOp):
    """``tfrt_test.sync_benchmark @f(%a : i32) duration_secs = 1, max_count = 100, ...``."""

    name = "tfrt_test.sync_benchmark"

    @classmethod
    def parse(cls, parser: Parser) -> SyncBenchmarkOp:
        fn = parser.parse_symbol_name()
        operands, types = _parse_bench_args(parser)
        attrs = _parse_bench_keys(parser)
        attrs.update(parse_attr_dict(parser))
        attrs["target_fn"] = SymbolRefAttr(fn)
        return cls.create(operands=resolve(parser, operands, types), attributes=attrs)

    def print(self, printer: Printer) -> None:
        fn = self.attributes.get("target_fn")
        assert isinstance(fn, SymbolRefAttr)
        printer.print_string(f" @{fn.root_reference.data}")
        _print_bench_args(printer, self.operands)
        _print_bench_keys(printer, self.attributes)
        print_attr_dict(printer, self.attributes, "target_fn", *_BENCH_KEYS)


class DoAsyncOp(TfrtOp):
    """``%y = tfrt_test.do.async %x, %c : (i32, i32) -> (i32) { ... }``."""

    name = "tfrt_test.do.async"

    @classmethod
    def parse(cls, parser: Parser) -> DoAsyncOp:
        operands = parse_operand_list(parser)
        attrs = parse_attr_dict(parser)
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        values = resolve(parser, operands, ft.inputs.data)
        body = parse_region_with_args(parser, operands, ft.inputs.data)
        return cls.create(
            operands=values, result_types=ft.outputs.data, attributes=attrs, regions=[body]
        )

    def shadowed_region_args(self) -> list[tuple[int, Sequence[SSAValue]]]:
        return [(0, self.operands)]

    def print(self, printer: Printer) -> None:
        print_operand_list(printer, self.operands)
        print_attr_dict(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(
            FunctionType.from_lists([o.type for o in self.operands], list(self.result_types))
        )
        printer.print_string(" ")
        printer.print_region(self.regions[0], print_entry_block_args=False)


class TestCostOp(TfrtOp):
    """``%c = tfrt_test.test_cost %a, %b {id = 0 : i64, _tfrt_cost = 1 : i64} : i32, i32``: any
    operands (their types after the colon), one ``i32`` result (TFRT's ``$args attr-dict `:`
    type($args)``).  Without the type list, TFRT's earlier form: chain operands and one chain
    result (``%c1 = tfrt_test.test_cost %c0 {..}``)."""

    name = "tfrt_test.test_cost"

    @classmethod
    def parse(cls, parser: Parser) -> TestCostOp:
        operands = parse_operand_list(parser)
        attrs = parse_attr_dict(parser)
        types = parse_types_after_colon(parser)
        if types or not operands:
            result = make_type("i32")
        else:  # no type list: chains
            types = [make_type(CHAIN)] * len(operands)
            result = make_type(CHAIN)
        return cls.create(
            operands=resolve(parser, operands, types), result_types=[result], attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        print_operand_list(printer, self.operands)
        print_attr_dict(printer, self.attributes)
        if any(r.type != make_type(CHAIN) for r in self.results):
            printer.print_string(" : ")
            print_type_list(printer, [o.type for o in self.operands])

    def verify_(self) -> None:
        cost = self.attributes.get("_tfrt_cost")
        if isinstance(cost, IntegerAttr) and cost.value.data <= 0:
            raise VerifyException("'tfrt_test.test_cost' op cost value must be larger than 0")


def _specs() -> list[OpSpec]:
    return [OpSpec("tfrt_test.count3.i32", "simple", ("i32",), ("i32", "i32", "i32"))]


SPECIAL_OPS: list[type[Operation]] = [BenchmarkOp, SyncBenchmarkOp, DoAsyncOp, TestCostOp]


def tfrt_test_dialect() -> Dialect:
    """The ``tfrt_test`` dialect."""
    return Dialect("tfrt_test", make_op_classes(_specs()) + SPECIAL_OPS, [])


__all__ = ["tfrt_test_dialect", "parse_types_after_colon"]
