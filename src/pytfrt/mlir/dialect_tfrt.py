"""The ``tfrt`` dialect (basic kernels, docs/conformance.md): op table and the control-flow ops.

Attribute names follow TFRT's op definitions, so kernels receive them in the same name-sorted
order: ``tfrt.call`` ``callee``; ``tfrt.cond`` ``a_true_fn``/``b_false_fn``; ``tfrt.case``
``branches``; ``tfrt.while`` ``body_fn`` + ``parallel_iterations``; ``tfrt.once`` ``function``;
``tfrt.parallel_call.i32`` ``callee``.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    FunctionType,
    IntegerAttr,
    IntegerType,
    SymbolRefAttr,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import traits_def
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import VerifyException

from pytfrt.mlir.ops_base import (
    CHAIN,
    OpSpec,
    TfrtOp,
    expand,
    make_op_classes,
    parse_attr_dict,
    parse_attr_dict_with_keyword,
    parse_operand_list,
    parse_paren_operands,
    parse_region_with_args,
    parse_type_list,
    parse_types_after_colon,
    print_attr_dict,
    print_attr_dict_with_keyword,
    print_operand_list,
    print_type_list,
    resolve,
    type_str,
)
from pytfrt.mlir.types import make_type

I1 = "i1"


def _specs() -> list[OpSpec]:
    rows: list[OpSpec] = []
    for t in ("i1", "i32", "i64", "ui32", "ui64", "f16", "bf16", "f32", "f64"):
        rows.append(OpSpec(f"tfrt.constant.{t}", "value", (), (t,)))
    for t in ("i32", "i64", "f32", "f64"):
        rows.append(OpSpec(f"tfrt.add.{t}", "simple", (t, t), (t,)))
    for t in ("i32", "i64"):
        for op in ("minus", "mul"):
            rows.append(OpSpec(f"tfrt.{op}.{t}", "simple", (t, t), (t,)))
        for op in ("equal", "lessequal"):
            rows.append(OpSpec(f"tfrt.{op}.{t}", "simple", (t, t), (I1,)))
        rows.append(OpSpec(f"tfrt.div.{t}", "simple", (t, t), (t, t)))
    rows.append(OpSpec("tfrt.and.i1", "simple", (I1, I1), (I1,)))
    for t in ("i1", "i32", "i64", "f32", "f64"):
        rows.append(OpSpec(f"tfrt.print.{t}", "simple", (t, CHAIN), (CHAIN,)))
    rows.append(OpSpec("tfrt.new.chain", "simple", (), (CHAIN,)))
    rows.append(OpSpec("tfrt.get_device", "simple", (CHAIN,), ("!tfrt.device",)))
    return rows


def _fn_type(parser: Parser) -> FunctionType:
    return parser.parse_function_type()


def _print_fn_type(
    printer: Printer,
    inputs: Sequence[Attribute],
    outputs: Sequence[Attribute],
    paren_results: bool = False,
) -> None:
    """Print `` : (ins) -> outs``; with ``paren_results`` the results are always parenthesised
    (TFRT's printers of if/cond/case/while/once write ``-> (i32)``, tfrt.call prints a plain
    function type ``-> i32``)."""
    printer.print_string(" : ")
    if not paren_results:
        printer.print_attribute(FunctionType.from_lists(list(inputs), list(outputs)))
        return
    printer.print_string("(")
    for i, t in enumerate(inputs):
        if i:
            printer.print_string(", ")
        printer.print_attribute(t)
    printer.print_string(") -> (")
    for i, t in enumerate(outputs):
        if i:
            printer.print_string(", ")
        printer.print_attribute(t)
    printer.print_string(")")


def _sym(attr: Attribute | None) -> str:
    assert isinstance(attr, SymbolRefAttr)
    return attr.root_reference.data


class ReturnOp(TfrtOp):
    """``tfrt.return %a, %b : T1, T2`` / ``tfrt.return``."""

    name = "tfrt.return"
    traits = traits_def(IsTerminator())

    @classmethod
    def parse(cls, parser: Parser) -> ReturnOp:
        operands = parse_operand_list(parser)
        types = parse_types_after_colon(parser) if operands else []
        return cls.create(operands=resolve(parser, operands, types))

    def print(self, printer: Printer) -> None:
        print_operand_list(printer, self.operands)
        if self.operands:
            printer.print_string(" : ")
            print_type_list(printer, [o.type for o in self.operands])

    def verify_(self) -> None:
        from xdsl.dialects.func import FuncOp

        parent = self.parent_op()
        if isinstance(parent, (IfOp, RepeatI32Op)):
            # The values a region returns become the op's results.
            if [o.type for o in self.operands] != list(parent.result_types):
                raise VerifyException(
                    f"'tfrt.return' op operand types don't match '{parent.name}' result"
                )
            return
        if not isinstance(parent, FuncOp):
            return
        results = parent.function_type.outputs.data
        if len(self.operands) != len(results):
            raise VerifyException(
                f"'tfrt.return' op has {len(self.operands)} operands, but enclosing function "
                f"returns {len(results)}"
            )
        for i, (val, want) in enumerate(zip(self.operands, results, strict=True)):
            if val.type != want:
                raise VerifyException(
                    f"'tfrt.return' op type of return operand {i} ('{type_str(val.type)}') "
                    f"doesn't match function result type ('{type_str(want)}')"
                )


class MergeChainsOp(TfrtOp):
    """``tfrt.merge.chains %a, %b : T1, T2``; the 2020 form has no type list (all chains)."""

    name = "tfrt.merge.chains"

    @classmethod
    def parse(cls, parser: Parser) -> MergeChainsOp:
        operands = parse_operand_list(parser)
        types = parse_types_after_colon(parser)
        if not types:
            types = [make_type(CHAIN)] * len(operands)
        attrs = parse_attr_dict(parser)
        return cls.create(
            operands=resolve(parser, operands, types),
            result_types=[make_type(CHAIN)],
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        print_operand_list(printer, self.operands)
        print_attr_dict(printer, self.attributes)
        if self.operands:
            printer.print_string(" : ")
            print_type_list(printer, [o.type for o in self.operands])


class _SymbolCallOp(TfrtOp):
    """Shared syntax of ``<op> @f(%a) : (i32) -> <results>`` (``tfrt.call``, ``tfrt.once``).

    Subclasses name the attribute holding the symbol and whether results print in parentheses.
    """

    symbol_attr = "callee"
    paren_results = False

    @classmethod
    def parse(cls, parser: Parser) -> _SymbolCallOp:
        callee = parser.parse_symbol_name()
        operands = parse_paren_operands(parser)
        attrs = parse_attr_dict(parser)
        parser.parse_punctuation(":")
        ft = _fn_type(parser)
        attrs[cls.symbol_attr] = SymbolRefAttr(callee)
        return cls.create(
            operands=resolve(parser, operands, ft.inputs.data),
            result_types=ft.outputs.data,
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(f" @{_sym(self.attributes.get(self.symbol_attr))}(")
        printer.print_list(self.operands, printer.print_operand)
        printer.print_string(")")
        print_attr_dict(printer, self.attributes, self.symbol_attr)
        _print_fn_type(
            printer, [o.type for o in self.operands], self.result_types, self.paren_results
        )


class CallOp(_SymbolCallOp):
    """``%r = tfrt.call @f(%a) : (i32) -> i32``."""

    name = "tfrt.call"


class IfOp(TfrtOp):
    """``tfrt.if %c, %a : (i32) -> (i32) { ... } else { ... }``."""

    name = "tfrt.if"

    @classmethod
    def parse(cls, parser: Parser) -> IfOp:
        operands = parse_operand_list(parser)
        if not operands:
            parser.raise_error("expected condition operand")
        attrs = parse_attr_dict(parser)
        parser.parse_punctuation(":")
        ft = _fn_type(parser)
        ins = ft.inputs.data
        values = resolve(parser, operands, [IntegerType(1), *ins])
        then = parse_region_with_args(parser, operands[1:], ins)
        if parser.parse_optional_keyword("else") is not None:
            other = parse_region_with_args(parser, operands[1:], ins)
        else:
            if ft.outputs.data:
                parser.raise_error("expected 'else' in 'tfrt.if' with result values")
            other = _empty_return_region(ins)
        return cls.create(
            operands=values,
            result_types=ft.outputs.data,
            attributes=attrs,
            regions=[then, other],
        )

    def shadowed_region_args(self) -> list[tuple[int, Sequence[SSAValue]]]:
        return [(0, self.operands[1:]), (1, self.operands[1:])]

    def print(self, printer: Printer) -> None:
        print_operand_list(printer, self.operands)
        print_attr_dict(printer, self.attributes)
        _print_fn_type(printer, [o.type for o in self.operands[1:]], self.result_types, True)
        printer.print_string(" ")
        printer.print_region(self.regions[0], print_entry_block_args=False)
        # TFRT's printer always writes the else region (a defaulted one is `tfrt.return`).
        printer.print_string(" else ")
        printer.print_region(self.regions[1], print_entry_block_args=False)


def _empty_return_region(arg_types: Sequence[Attribute]):
    from xdsl.ir import Block, Region

    block = Block(arg_types=arg_types)
    block.add_op(ReturnOp.create())
    return Region(block)


class CondOp(TfrtOp):
    """``%r = tfrt.cond %c @t @f (%a) : (i32) -> (i32)``."""

    name = "tfrt.cond"

    @classmethod
    def parse(cls, parser: Parser) -> CondOp:
        cond = parser.parse_unresolved_operand()
        t = parser.parse_symbol_name()
        f = parser.parse_symbol_name()
        operands = parse_paren_operands(parser)
        attrs = parse_attr_dict(parser)
        parser.parse_punctuation(":")
        ft = _fn_type(parser)
        attrs["a_true_fn"] = SymbolRefAttr(t)
        attrs["b_false_fn"] = SymbolRefAttr(f)
        return cls.create(
            operands=resolve(parser, [cond, *operands], [IntegerType(1), *ft.inputs.data]),
            result_types=ft.outputs.data,
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operands[0])
        true_fn = _sym(self.attributes.get("a_true_fn"))
        false_fn = _sym(self.attributes.get("b_false_fn"))
        printer.print_string(f" @{true_fn} @{false_fn} (")
        printer.print_list(self.operands[1:], printer.print_operand)
        printer.print_string(")")
        print_attr_dict(printer, self.attributes, "a_true_fn", "b_false_fn")
        _print_fn_type(printer, [o.type for o in self.operands[1:]], self.result_types, True)


class CaseOp(TfrtOp):
    """``%ch1, %r = tfrt.case %i [@b0, @b1] (%ch0, %a) : (!tfrt.chain, i32) -> (!tfrt.chain, i32)``;
    the earlier spelling without the chain in the type, ``: (i32) -> (i32)``, is also read."""

    name = "tfrt.case"

    @classmethod
    def parse(cls, parser: Parser) -> CaseOp:
        index = parser.parse_unresolved_operand()
        branches = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_symbol_name
        )
        operands = parse_paren_operands(parser)
        attrs = parse_attr_dict(parser)
        parser.parse_punctuation(":")
        ft = _fn_type(parser)
        attrs["branches"] = ArrayAttr([SymbolRefAttr(b) for b in branches])
        inputs, outputs = list(ft.inputs.data), list(ft.outputs.data)
        if len(operands) == len(inputs) + 1:
            # TFRT's earlier form leaves the leading chain out of the type:
            # ``(%ch, %a) : (i32) -> (i32)`` is ``(!tfrt.chain, i32) -> (!tfrt.chain, i32)``.
            chain = make_type(CHAIN)
            inputs, outputs = [chain, *inputs], [chain, *outputs]
        return cls.create(
            operands=resolve(parser, [index, *operands], [IntegerType(32), *inputs]),
            result_types=outputs,
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operands[0])
        branches = self.attributes.get("branches")
        assert isinstance(branches, ArrayAttr)
        printer.print_string(" [" + ", ".join(f"@{_sym(b)}" for b in branches.data) + "] (")
        printer.print_list(self.operands[1:], printer.print_operand)
        printer.print_string(")")
        print_attr_dict(printer, self.attributes, "branches")
        _print_fn_type(printer, [o.type for o in self.operands[1:]], self.result_types, True)


class WhileOp(TfrtOp):
    """``%r:2 = tfrt.while %c @body(%a, %b) parallel_iterations(1) : (T, T) -> (T, T)``."""

    name = "tfrt.while"

    @classmethod
    def parse(cls, parser: Parser) -> WhileOp:
        cond = parser.parse_unresolved_operand()
        body = parser.parse_symbol_name()
        operands = parse_paren_operands(parser)
        iters = 1
        if parser.parse_optional_keyword("parallel_iterations") is not None:
            parser.parse_punctuation("(")
            iters = parser.parse_integer()
            parser.parse_punctuation(")")
        attrs = parse_attr_dict(parser)
        parser.parse_punctuation(":")
        ft = _fn_type(parser)
        attrs["body_fn"] = SymbolRefAttr(body)
        attrs["parallel_iterations"] = IntegerAttr(iters, IntegerType(64))
        return cls.create(
            operands=resolve(parser, [cond, *operands], [IntegerType(1), *ft.inputs.data]),
            result_types=ft.outputs.data,
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operands[0])
        printer.print_string(f" @{_sym(self.attributes.get('body_fn'))}(")
        printer.print_list(self.operands[1:], printer.print_operand)
        iters = self.attributes.get("parallel_iterations")
        n = iters.value.data if isinstance(iters, IntegerAttr) else 1
        printer.print_string(f") parallel_iterations({n})")
        print_attr_dict(printer, self.attributes, "body_fn", "parallel_iterations")
        _print_fn_type(printer, [o.type for o in self.operands[1:]], self.result_types, True)


class OnceOp(_SymbolCallOp):
    """``%r = tfrt.once @f(%a) : (i32) -> (i32)``."""

    name = "tfrt.once"
    symbol_attr = "function"
    paren_results = True


class RepeatI32Op(TfrtOp):
    """``%s = tfrt.repeat.i32 %n, %v : i32 { ... }`` / ``tfrt.repeat.i32 %n { ... }``."""

    name = "tfrt.repeat.i32"

    @classmethod
    def parse(cls, parser: Parser) -> RepeatI32Op:
        operands = parse_operand_list(parser)
        if not operands:
            parser.raise_error("expected iteration count operand")
        attrs = parse_attr_dict_with_keyword(parser)
        types = parse_types_after_colon(parser) if len(operands) > 1 else []
        values = resolve(parser, operands, [IntegerType(32), *types])
        body = parse_region_with_args(parser, operands[1:], types)
        return cls.create(operands=values, result_types=types, attributes=attrs, regions=[body])

    def shadowed_region_args(self) -> list[tuple[int, Sequence[SSAValue]]]:
        return [(0, self.operands[1:])]

    def print(self, printer: Printer) -> None:
        print_operand_list(printer, self.operands)
        print_attr_dict_with_keyword(printer, self.attributes)
        if len(self.operands) > 1:
            printer.print_string(" : ")
            print_type_list(printer, [o.type for o in self.operands[1:]])
        printer.print_string(" ")
        printer.print_region(self.regions[0], print_entry_block_args=False)


def _parse_range_header(
    parser: Parser,
) -> tuple[UnresolvedOperand, UnresolvedOperand, UnresolvedOperand]:
    """``%start to %end fixed %block`` of ``tfrt.parallel_for/parallel_call.i32``."""
    start = parser.parse_unresolved_operand()
    parser.parse_keyword("to")
    end = parser.parse_unresolved_operand()
    parser.parse_keyword("fixed")
    return start, end, parser.parse_unresolved_operand()


def _print_range_header(printer: Printer, ops: Sequence[SSAValue]) -> None:
    """Print `` %start to %end fixed %block`` (the first three operands)."""
    printer.print_string(" ")
    printer.print_operand(ops[0])
    printer.print_string(" to ")
    printer.print_operand(ops[1])
    printer.print_string(" fixed ")
    printer.print_operand(ops[2])


class ParallelForI32Op(TfrtOp):
    """``%d = tfrt.parallel_for.i32 %s to %e fixed %b, %x : T { ... }`` (region args s, e, x)."""

    name = "tfrt.parallel_for.i32"

    @classmethod
    def parse(cls, parser: Parser) -> ParallelForI32Op:
        start, end, block = _parse_range_header(parser)
        args = []
        while parser.parse_optional_punctuation(",") is not None:
            args.append(parser.parse_unresolved_operand())
        attrs = parse_attr_dict_with_keyword(parser)
        types = parse_types_after_colon(parser) if args else []
        i32 = IntegerType(32)
        values = resolve(parser, [start, end, block, *args], [i32, i32, i32, *types])
        body = parse_region_with_args(parser, [start, end, *args], [i32, i32, *types])
        return cls.create(
            operands=values, result_types=[make_type(CHAIN)], attributes=attrs, regions=[body]
        )

    def shadowed_region_args(self) -> list[tuple[int, Sequence[SSAValue]]]:
        ops = self.operands
        return [(0, [ops[0], ops[1], *ops[3:]])]

    def print(self, printer: Printer) -> None:
        ops = self.operands
        _print_range_header(printer, ops)
        for arg in ops[3:]:
            printer.print_string(", ")
            printer.print_operand(arg)
        print_attr_dict_with_keyword(printer, self.attributes)
        if len(ops) > 3:
            printer.print_string(" : ")
            print_type_list(printer, [o.type for o in ops[3:]])
        printer.print_string(" ")
        printer.print_region(self.regions[0], print_entry_block_args=False)


class ParallelCallI32Op(TfrtOp):
    """``%d = tfrt.parallel_call.i32 %s to %e fixed %b @fn(%x) : T``."""

    name = "tfrt.parallel_call.i32"

    @classmethod
    def parse(cls, parser: Parser) -> ParallelCallI32Op:
        start, end, block = _parse_range_header(parser)
        callee = parser.parse_symbol_name()
        args = parse_paren_operands(parser)
        attrs = parse_attr_dict(parser)
        types = parse_types_after_colon(parser) if args else []
        i32 = IntegerType(32)
        attrs["callee"] = SymbolRefAttr(callee)
        return cls.create(
            operands=resolve(parser, [start, end, block, *args], [i32, i32, i32, *types]),
            result_types=[make_type(CHAIN)],
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        ops = self.operands
        _print_range_header(printer, ops)
        printer.print_string(f" @{_sym(self.attributes.get('callee'))}(")
        printer.print_list(ops[3:], printer.print_operand)
        printer.print_string(")")
        print_attr_dict(printer, self.attributes, "callee")
        if len(ops) > 3:
            printer.print_string(" : ")
            print_type_list(printer, [o.type for o in ops[3:]])


def parse_optional_type_list(parser: Parser) -> list[Attribute]:
    """``T1, T2`` if a type follows, else empty."""
    return parse_type_list(parser)


SPECIAL_OPS: list[type[Operation]] = [
    ReturnOp,
    MergeChainsOp,
    CallOp,
    IfOp,
    CondOp,
    CaseOp,
    WhileOp,
    OnceOp,
    RepeatI32Op,
    ParallelForI32Op,
    ParallelCallI32Op,
]


def tfrt_dialect() -> Dialect:
    """The ``tfrt`` dialect with its types."""
    from pytfrt.mlir.types import TYPE_CLASSES

    ops = make_op_classes(_specs()) + SPECIAL_OPS
    types = [cls for name, cls in TYPE_CLASSES.items() if name.startswith("tfrt.")]
    return Dialect("tfrt", ops, list(types))  # type: ignore[arg-type]


__all__ = ["tfrt_dialect", "expand"]
