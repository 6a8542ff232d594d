"""The ``corert`` dialect (core runtime, docs/eager.md): types, ``#corert.shape`` and custom ops.

``corert.executeop(%h) "op"(%a) {k = v} {f = @fn} : N`` stores ``op_name`` (string),
``op_attrs`` and ``op_func_attrs`` (arrays of ``[key, value]`` pairs, as TFRT's ExecuteOp);
``.seq`` adds an in/out op chain.  ``corert.cond`` uses ``a_true_fn``/``b_false_fn``;
``corert.while`` ``a_cond_fn``/``b_body_fn`` (cond first in name order).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, FunctionType, StringAttr, SymbolRefAttr
from xdsl.ir import Attribute, Dialect, Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from pytfrt.mlir.ops_base import (
    CHAIN,
    OpSpec,
    TfrtOp,
    make_op_classes,
    parse_attr_dict,
    parse_paren_operands,
    print_attr_dict,
    resolve,
)
from pytfrt.mlir.types import TYPE_CLASSES, CorertShapeAttr, make_type

TH = "!corert.tensorhandle"
HANDLER = "!corert.ophandler"


def _parse_pairs(parser: Parser) -> ArrayAttr:
    """``{k = v, ...}`` -> ``[["k", v], ...]`` (order kept)."""
    pairs: list[Attribute] = []
    for key, value in parser.parse_optional_attr_dict().items():
        pairs.append(ArrayAttr([StringAttr(key), value]))
    return ArrayAttr(pairs)


def _print_pairs(printer: Printer, attr: Attribute | None) -> None:
    if not isinstance(attr, ArrayAttr) or not attr.data:
        return
    printer.print_string(" {")
    for i, pair in enumerate(attr.data):
        if i:
            printer.print_string(", ")
        assert isinstance(pair, ArrayAttr) and isinstance(pair.data[0], StringAttr)
        printer.print_identifier_or_string_literal(pair.data[0].data)
        printer.print_string(" = ")
        printer.print_attribute(pair.data[1])
    printer.print_string("}")


class _ExecuteBase(TfrtOp):
    seq = False

    @classmethod
    def parse(cls, parser: Parser) -> _ExecuteBase:
        head = parse_paren_operands(parser)
        op_name = parser.parse_str_literal()
        args = parse_paren_operands(parser)
        op_attrs = _parse_pairs(parser)
        func_attrs = _parse_pairs(parser)
        # `: N` gives the number of tensor results; without it the op has none.
        n = 0
        if parser.parse_optional_punctuation(":") is not None:
            n = parser.parse_integer(allow_negative=False, allow_boolean=False)
        head_types = [make_type(HANDLER)] + ([make_type(CHAIN)] if cls.seq else [])
        th = make_type(TH)
        values = resolve(parser, [*head, *args], [*head_types, *([th] * len(args))])
        results = ([make_type(CHAIN)] if cls.seq else []) + [th] * n
        return cls.create(
            operands=values,
            result_types=results,
            attributes={
                "op_attrs": op_attrs,
                "op_func_attrs": func_attrs,
                "op_name": StringAttr(op_name),
            },
        )

    def print(self, printer: Printer) -> None:
        nhead = 2 if self.seq else 1
        printer.print_string("(")
        printer.print_list(self.operands[:nhead], printer.print_operand)
        printer.print_string(") ")
        name = self.attributes.get("op_name")
        printer.print_string_literal(name.data if isinstance(name, StringAttr) else "")
        printer.print_string("(")
        printer.print_list(self.operands[nhead:], printer.print_operand)
        printer.print_string(")")
        _print_pairs(printer, self.attributes.get("op_attrs"))
        _print_pairs(printer, self.attributes.get("op_func_attrs"))
        n = len(self.results) - (1 if self.seq else 0)
        if n:
            printer.print_string(f" : {n}")

    def verify_(self) -> None:
        for key in ("op_attrs", "op_func_attrs"):
            attrs = self.attributes.get(key)
            if attrs is None:
                continue
            pairs = attrs.data if isinstance(attrs, ArrayAttr) else None
            if pairs is None or not all(
                isinstance(p, ArrayAttr) and len(p.data) == 2 and isinstance(p.data[0], StringAttr)
                for p in pairs
            ):
                what = "op_attr" if key == "op_attrs" else "op_func_attr"
                raise VerifyException(
                    f"'{self.name}' op each {what} should be a key-value pair, where the key "
                    "is a string"
                )


class ExecuteOp(_ExecuteBase):
    """``%r = corert.executeop(%h) "op"(%a, %b) {attrs} : 1``."""

    name = "corert.executeop"


class SyncExecuteOp(_ExecuteBase):
    """``%r = corert_sync.executeop(%h) "op"(%a) : 1`` (in ``tfrt.sync`` functions)."""

    name = "corert_sync.executeop"


class ExecuteSeqOp(_ExecuteBase):
    """``%ch1, %r = corert.executeop.seq(%h, %ch0) "op"(%a) : 1``."""

    name = "corert.executeop.seq"
    seq = True
    separate_result_names = True  # the out chain and the tensors print as `%ch, %r = ...`


class _NamedHandlerOp(TfrtOp):
    key = "name"
    operand_type = HANDLER
    result_type = CHAIN

    @classmethod
    def parse(cls, parser: Parser) -> _NamedHandlerOp:
        operand = parser.parse_unresolved_operand()
        name = parser.parse_str_literal()
        attrs = parse_attr_dict(parser)
        attrs[cls.key] = StringAttr(name)
        return cls.create(
            operands=resolve(parser, [operand], [make_type(cls.operand_type)]),
            result_types=[make_type(cls.result_type)],
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operands[0])
        printer.print_string(" ")
        name = self.attributes.get(self.key)
        printer.print_string_literal(name.data if isinstance(name, StringAttr) else "")
        print_attr_dict(printer, self.attributes, self.key)


class RegisterOpHandlerOp(_NamedHandlerOp):
    """``%ch = corert.register_op_handler %h "cpu"``."""

    name = "corert.register_op_handler"


class GetOpHandlerOp(_NamedHandlerOp):
    """``%h = corert.get_op_handler %ch "cpu"``."""

    name = "corert.get_op_handler"
    key = "op_handler_name"
    operand_type = CHAIN
    result_type = HANDLER


class SyncGetOpHandlerOp(TfrtOp):
    """``%h = corert_sync.get_op_handler "cpu"`` (in ``tfrt.sync`` functions)."""

    name = "corert_sync.get_op_handler"

    @classmethod
    def parse(cls, parser: Parser) -> SyncGetOpHandlerOp:
        name = parser.parse_str_literal()
        attrs = parse_attr_dict(parser)
        attrs["op_handler_name"] = StringAttr(name)
        return cls.create(result_types=[make_type(HANDLER)], attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        name = self.attributes.get("op_handler_name")
        printer.print_string_literal(name.data if isinstance(name, StringAttr) else "")
        print_attr_dict(printer, self.attributes, "op_handler_name")


class _FnControlOp(TfrtOp):
    """``%ch, %r = corert.cond %p @t @f (%ch0, %a) : (T) -> (T)`` / ``corert.while @c @b (...)``."""

    fn_keys: tuple[str, ...] = ()
    has_pred = False

    @classmethod
    def parse(cls, parser: Parser) -> _FnControlOp:
        pred = [parser.parse_unresolved_operand()] if cls.has_pred else []
        fns = [parser.parse_symbol_name() for _ in cls.fn_keys]
        operands = parse_paren_operands(parser)
        attrs = parse_attr_dict(parser)
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        chain = make_type(CHAIN)
        pred_types = [make_type(TH)] if cls.has_pred else []
        for key, fn in zip(cls.fn_keys, fns, strict=True):
            attrs[key] = SymbolRefAttr(fn)
        return cls.create(
            operands=resolve(parser, [*pred, *operands], [*pred_types, chain, *ft.inputs.data]),
            result_types=[chain, *ft.outputs.data],
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        ops = list(self.operands)
        if self.has_pred:
            printer.print_string(" ")
            printer.print_operand(ops.pop(0))
        for key in self.fn_keys:
            fn = self.attributes.get(key)
            assert isinstance(fn, SymbolRefAttr)
            printer.print_string(f" @{fn.root_reference.data}")
        printer.print_string(" (")
        printer.print_list(ops, printer.print_operand)
        printer.print_string(")")
        print_attr_dict(printer, self.attributes, *self.fn_keys)
        printer.print_string(" : ")
        printer.print_attribute(
            FunctionType.from_lists([o.type for o in ops[1:]], list(self.result_types[1:]))
        )


class CondOp(_FnControlOp):
    """``corert.cond``."""

    name = "corert.cond"
    fn_keys = ("a_true_fn", "b_false_fn")
    has_pred = True


class WhileOp(_FnControlOp):
    """``corert.while``."""

    name = "corert.while"
    fn_keys = ("a_cond_fn", "b_body_fn")


def _specs() -> list[OpSpec]:
    rows = [
        OpSpec("corert.tensorhandle_to_int32", "simple", (TH,), ("i32",)),
        OpSpec("corert.const_dense_tensor", "attr", (), (TH,)),
        OpSpec("corert.const_string_tensor", "attrdict", (), (TH,)),
    ]
    for t in (
        "ui8", "ui16", "ui32", "ui64", "i1", "i8", "i16", "i32", "i64",
        "bf16", "f16", "f32", "f64", "complex64", "complex128",
    ):  # fmt: skip
        rows.append(OpSpec(f"corert.create_dense_tensor.{t}", "attrdict", (), (TH,)))
    return rows


SPECIAL_OPS: list[type[Operation]] = [
    ExecuteOp,
    ExecuteSeqOp,
    RegisterOpHandlerOp,
    GetOpHandlerOp,
    CondOp,
    WhileOp,
]


def corert_dialect() -> Dialect:
    """The ``corert`` dialect with its types and the shape attribute."""
    types = [cls for name, cls in TYPE_CLASSES.items() if name.startswith("corert.")]
    return Dialect("corert", make_op_classes(_specs()) + SPECIAL_OPS, [*types, CorertShapeAttr])


def corert_sync_dialect() -> Dialect:
    """``corert_sync``: the core-runtime ops of ``tfrt.sync`` functions (no chains)."""
    return Dialect("corert_sync", [SyncExecuteOp, SyncGetOpHandlerOp], [])
