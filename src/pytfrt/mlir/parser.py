"""The MLIR parser: xDSL's parser with source positions, 2020 aliases and fast paths.

:class:`TfrtParser` subclasses xDSL's :class:`~xdsl.parser.Parser` and adds:

* ``op_positions``: the character offset of every parsed op's first character (the result
  list for ops with results, as MLIR's ``FileLineColLoc``), used for BEF locations and
  diagnostics;
* the 2020 spelling (examples/mlp_xor/README.md) without rewriting the text, so every diagnostic
  points at the original characters: op names ``hex.*`` -> ``tfrt.*``, ``dht.*`` -> ``tfrt_dht.*``,
  the bare ``func`` keyword -> ``func.func``, types ``!hex.*`` -> ``!tfrt.*``;
* MLIR's wording for undefined values and operand type mismatches;
* caches for builtin and parameterless dialect types, and the fast lexer of
  :mod:`pytfrt.mlir.lexer` (xDSL's lexer dominates the parse time of large functions).

One parser per input; not thread-safe.  Errors are xDSL ``ParseError`` exceptions, converted
to diagnostics by :mod:`pytfrt.mlir.diagnostics`; a parser made with ``shallow_depth`` raises
:class:`DeepNesting` at that region depth instead of recursing further.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import LocationAttr, UnknownLoc
from xdsl.ir import Attribute, Operation, SSAValue, TypeAttribute
from xdsl.parser import Parser
from xdsl.parser.core import UnresolvedOperand
from xdsl.parser.generic_parser import ParserState
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Input, Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from pytfrt.mlir.lexer import FastMLIRLexer

_RESULT_DEF = re.compile(r"\s*(?::\s*[0-9]+\s*)?(?:,\s*%[^\s,=:]+\s*(?::\s*[0-9]+\s*)?)*=(?!=)")

_LOC_ALIAS_DEF = re.compile(r"(?m)^[ \t]*(#[\w.$-]+)[ \t]*=[ \t]*(loc\()")

#: The longest op name a diagnostic quotes whole (a longer one is cut, with its length).
MAX_QUOTED_NAME = 80

#: The deepest nesting of regions the parser accepts, the function body counting as one
#: (docs/security.md, "Limits").  The parser recurses per level; beyond a few dozen levels
#: :func:`pytfrt.mlir.api.parse_source` parses on a helper thread with a large stack
#: (:func:`pytfrt.mlir.walk.call_with_deep_stack`).
MAX_REGION_DEPTH = 16_384


class DeepNesting(Exception):
    """Raised by a parser made with ``shallow_depth`` when regions nest deeper than that: the
    caller parses again on a deep stack.  Not a ``ParseError``, so no backtracking catches it."""

#: 2020 op-name prefixes and their later spelling (examples/mlp_xor/README.md).
OP_PREFIX_ALIASES = (("hex.", "tfrt."), ("dht.", "tfrt_dht."))
#: 2020 type-name prefixes.
TYPE_PREFIX_ALIASES = (("hex.", "tfrt."),)


def canonical_op_name(name: str) -> str:
    """Map a 2020 op name (``hex.add.i32``, ``dht.print_tensor``, ``func``) to today's."""
    if name == "func":
        return "func.func"
    for old, new in OP_PREFIX_ALIASES:
        if name.startswith(old):
            return new + name[len(old) :]
    return name


def canonical_attr_name(name: str) -> str:
    """Map a 2020 attribute name (``hex.sync``) to today's (``tfrt.sync``)."""
    if name.startswith("hex."):
        return "tfrt." + name[4:]
    return name


class NotedParseError(ParseError):
    """A parse error with MLIR notes attached: ``notes`` are ``(offset, message)`` pairs."""

    def __init__(self, span: Span, msg: str, notes: list[tuple[int, str]]) -> None:
        super().__init__(span, msg)
        self.notes = notes


class TfrtParser(Parser):
    """xDSL parser recording op positions and accepting the 2020 syntax."""

    def __init__(
        self, ctx: Context, text: str, name: str = "<unknown>", shallow_depth: int | None = None
    ) -> None:
        # Mirrors Parser.__init__ with the fast lexer.
        Parser.__init__(self, ctx, "", name)
        self._parser_state = ParserState(FastMLIRLexer(Input(text, name)))
        self.ssa_values = dict()
        self.blocks = dict()
        self.forward_block_references = defaultdict(list)
        self.forward_ssa_references = dict()
        self.op_positions: dict[Operation, int] = {}
        self._last_op_name = ""
        self._prescanned_aliases: set[str] = set()
        #: ops whose source says ``loc(unknown)`` (distinct from "no location written")
        self.explicit_unknown: set[Operation] = set()
        self._unknown_locs: dict[int, LocationAttr] = {}
        self.forward_use_spans: dict[str, Span] = {}
        #: name scopes enclosing the region being parsed (innermost last); see
        #: :func:`pytfrt.mlir.ops_base.parse_region_with_args`
        self.outer_scopes: list[dict[str, tuple[SSAValue, ...]]] = []
        #: where each named value was defined (character offset), for "prior use here" notes
        self.definition_offsets: dict[int, int] = {}
        self._int_float_types: dict[str, TypeAttribute | None] = {}
        self._dialect_types: dict[str, TypeAttribute] = {}
        self._region_depth = 0
        self.shallow_depth = shallow_depth

    # -- positions --------------------------------------------------------------------------
    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        try:
            op = super().parse_operation()
        except ParseError as err:
            if "builtin.unregistered does not have a custom format" not in err.msg:
                raise
            # A custom-syntax op nobody defines (often a misspelling): say which, as MLIR does.
            name = self._last_op_name
            content = self.lexer.input.content
            at = content.find(name, start)
            span = Span(at, at + len(name), self.lexer.input) if at >= 0 else err.span
            if len(name) > MAX_QUOTED_NAME:  # quote a bounded prefix of a huge token
                shown = name[:MAX_QUOTED_NAME] + f"...' ({len(name)} characters"
                raise ParseError(span, f"custom op '{shown}) is unknown") from None
            raise ParseError(
                span, f"custom op '{name}' is unknown{self._suggestion(name)}"
            ) from None
        self.op_positions[op] = start
        if id(op.location) in self._unknown_locs:
            self.explicit_unknown.add(op)
        return op

    def parse_optional_region(self, arguments=None):  # type: ignore[no-untyped-def,override]
        # The parser recurses per region (about ten Python frames a level): hand deep nesting
        # to a deep stack, refuse nesting beyond the cap with a located error.
        if self._current_token.kind != MLIRTokenKind.L_BRACE:
            return super().parse_optional_region(arguments)
        if self._region_depth >= MAX_REGION_DEPTH:
            self.raise_error(f"regions nested deeper than {MAX_REGION_DEPTH}")
        if self.shallow_depth is not None and self._region_depth >= self.shallow_depth:
            raise DeepNesting
        self._region_depth += 1
        try:
            return super().parse_optional_region(arguments)
        finally:
            self._region_depth -= 1

    def parse_optional_location(self) -> LocationAttr | None:
        loc = super().parse_optional_location()
        if isinstance(loc, UnknownLoc):
            loc = UnknownLoc()  # a fresh object: identity marks it as written in the source
            self._unknown_locs[id(loc)] = loc
        return loc

    def _prescan_location_aliases(self) -> None:
        """Define ``#name = loc(...)`` aliases before parsing: MLIR lets a location alias be
        used before its definition (printers put them at the end of the file)."""
        content = self.lexer.input.content
        for m in _LOC_ALIAS_DEF.finditer(content):
            name = m.group(1)
            if name in self.attribute_aliases:
                continue
            sub = TfrtParser(self.ctx, content[m.start(2) :], self.lexer.input.name)
            sub.attribute_aliases = self.attribute_aliases
            try:
                loc = sub.parse_optional_location()
            except ParseError:
                continue  # reported where the main parse reaches the definition
            if loc is not None:
                self.attribute_aliases[name] = loc
                self._prescanned_aliases.add(name)

    def _parse_alias_def(self) -> None:
        tok = self._current_token
        if tok.text in self._prescanned_aliases:
            # Defined by the prescan: consume the definition without redefining it.
            self._prescanned_aliases.discard(tok.text)
            del self.attribute_aliases[tok.text]
        super()._parse_alias_def()

    def parse_module(self, allow_implicit_module: bool = True):  # type: ignore[override]
        self._prescan_location_aliases()
        if self._current_token.kind == MLIRTokenKind.EOF:
            from xdsl.dialects.builtin import ModuleOp

            return ModuleOp([])  # an empty file is an empty module, as in MLIR
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError as err:
            if err.msg.startswith("values used but not defined"):
                self.check_undefined_values()
            raise

    def at_result_definition(self) -> bool:
        """Whether the current ``%x`` token starts the next op's result list (``%x =``)."""
        tok = self._current_token
        if tok.kind != MLIRTokenKind.PERCENT_IDENT:
            return False
        return _RESULT_DEF.match(self.lexer.input.content, tok.span.end) is not None

    # -- 2020 aliases -----------------------------------------------------------------------
    # -- dense<> literals in linear time -------------------------------------------------------

    def parse_dense_int_or_fp_elements_attr(self, type):  # type: ignore[no-untyped-def,override]  # noqa: A002
        """``dense<...>``: literals of plain decimal numbers with an int or float element type
        are decoded by :func:`fast_dense` (linear in the text, about a second for a million
        elements; xDSL's own parser takes minutes); anything else goes to xDSL.  A splat that
        would take more than :data:`MAX_DENSE_BYTES` is refused at the attribute."""
        state = self._parser_state
        token = state.current_token
        if token.kind is not MLIRTokenKind.LESS:
            return super().parse_dense_int_or_fp_elements_attr(type)
        text = state.lexer.input.content
        m = _DENSE_BODY.match(text, token.span.end)
        if m is None:
            return super().parse_dense_int_or_fp_elements_attr(type)
        saved = state.current_token, state.lexer.pos
        state.lexer.pos = m.end()
        state.current_token = state.lexer.lex()
        dense_type = type
        if dense_type is None:
            self.parse_punctuation(":", " in dense attribute")
            dense_type = self._parse_dense_literal_type()
        attr = fast_dense(m.group(1), dense_type, Span(token.span.start, m.end(),
                                                      state.lexer.input))
        if attr is not None:
            return attr
        state.current_token, state.lexer.pos = saved  # the general parser reports the problem
        return super().parse_dense_int_or_fp_elements_attr(type)

    def _get_op_by_name(self, name: str) -> type[Operation]:
        self._last_op_name = name
        return super()._get_op_by_name(canonical_op_name(name))

    def _suggestion(self, name: str) -> str:
        """`` (did you mean 'x'?)`` for the closest op name with a custom syntax, if any."""
        import difflib

        known = [op.name for op in self.ctx.loaded_ops if getattr(op, "parse", None)]
        close = difflib.get_close_matches(canonical_op_name(name), known, n=1, cutoff=0.8)
        return f" (did you mean '{close[0]}'?)" if close else ""

    def parse_optional_type(self) -> TypeAttribute | None:
        tok = self._current_token
        if tok.kind != MLIRTokenKind.EXCLAMATION_IDENT:
            return self._parse_optional_builtin_type()
        self._consume_token()
        name = tok.text[1:]
        for old, new in TYPE_PREFIX_ALIASES:
            if name.startswith(old):
                name = new + name[len(old) :]
        if "." not in name or self._current_token.kind == MLIRTokenKind.LESS:
            return self._parse_extended_type_or_attribute(name, True)
        cached = self._dialect_types.get(name)
        if cached is None:
            cached = self._parse_extended_type_or_attribute(name, True)
            self._dialect_types[name] = cached
        return cached

    def _parse_optional_integer_or_float_type(self) -> TypeAttribute | None:
        tok = self._current_token
        if tok.kind != MLIRTokenKind.BARE_IDENT:
            return None
        text = tok.text
        cache = self._int_float_types
        if text in cache:
            found = cache[text]
            if found is not None:
                self._consume_token()
            return found
        found = super()._parse_optional_integer_or_float_type()
        cache[text] = found
        return found

    # -- MLIR's wording for value errors ----------------------------------------------------
    def resolve_operand(self, operand: UnresolvedOperand, type: Attribute) -> SSAValue:  # type: ignore[override]  # noqa: A002
        name = operand.operand_name
        values = self.ssa_values.get(name)
        if values is None:
            for scope in reversed(self.outer_scopes):
                values = scope.get(name)
                if values is not None:
                    break
        if values is None:
            self.forward_use_spans.setdefault(name, operand.span)
            return super().resolve_operand(operand, type)
        if operand.index >= len(values):
            self.raise_error(
                f"result number {operand.index} of '%{name}' is out of range "
                f"(it has {len(values)} results)",
                operand.span,
            )
        resolved = values[operand.index]
        if resolved.type != type:
            prior = self.definition_offsets.get(id(resolved))
            raise NotedParseError(
                operand.span,
                f"use of value '{operand.span.text}' expects different type than prior "
                f"uses: '{type_to_str(type)}' vs '{type_to_str(resolved.type)}'",
                [(prior, "prior use here")] if prior is not None else [],
            )
        return resolved

    def _register_ssa_definition(self, name: str, values, span: Span) -> None:  # type: ignore[no-untyped-def]
        super()._register_ssa_definition(name, values, span)
        for value in values:
            self.definition_offsets[id(value)] = span.start

    def check_undefined_values(self) -> None:
        """Raise MLIR's error for the first value used but never defined."""
        if not self.forward_ssa_references:
            return
        spans = [
            self.forward_use_spans[n]
            for n in self.forward_ssa_references
            if n in self.forward_use_spans
        ]
        if spans:
            first = min(spans, key=lambda s: s.start)
            raise ParseError(first, "use of undeclared SSA value name")
        self.raise_error("use of undeclared SSA value name")


MAX_DENSE_BYTES = 1 << 28
"""The largest ``dense<>`` attribute (256 MiB): a splat such as ``dense<1.5> :
tensor<100000x100000xf32>`` asking for more is a parse error at the attribute."""

_NUMBER = r"[-+]?[0-9]+(?:\.[0-9]*(?:[eE][-+]?[0-9]+)?)?"
_DENSE_BODY = re.compile(r"\s*(\[[\[\]\s,0-9eE+.-]*+|" + _NUMBER + r")\s*>")


_NUMBERS_RE = re.compile(f"(?:{_NUMBER},)*+{_NUMBER}")
_NUMBER_CHARS = str.maketrans("", "", "0123456789.eE+-")


def _layout(shape: list[int]) -> str:
    """The brackets and commas of a literal of ``shape`` (``[[,],[,]]`` for 2x2)."""
    text = ""
    for d in reversed(shape):
        text = "[" + ",".join([text] * d) + "]"
    return text


def fast_dense(body: str, dense_type: Any, span: Span) -> Any:
    """The ``DenseIntOrFPElementsAttr`` of the literal ``body`` (a number, or nested lists of
    numbers) of ``dense_type``, or ``None`` when the fast path does not apply (xDSL's parser then
    parses it and reports any problem): an element type NumPy has no plain dtype for, a
    structure that does not match the type's shape, integers written as floats, a value that
    does not fit or is not finite.

    Raises:
        ParseError: at ``span`` when the attribute would exceed :data:`MAX_DENSE_BYTES`.
    """
    import numpy as np
    from xdsl.dialects.builtin import (
        BytesAttr,
        DenseIntOrFPElementsAttr,
        Float16Type,
        Float32Type,
        Float64Type,
        IntegerType,
        Signedness,
    )

    try:
        shape = [int(d) for d in dense_type.get_shape()]
        element = dense_type.element_type
    except (AttributeError, TypeError, ValueError):
        return None
    if any(d < 0 for d in shape):
        return None
    n = 1
    for d in shape:
        n *= d
    if isinstance(element, Float16Type | Float32Type | Float64Type):
        codes = {Float16Type: "<f2", Float32Type: "<f4", Float64Type: "<f8"}
        dtype = np.dtype(codes[element.__class__])
    elif isinstance(element, IntegerType) and element.width.data in (8, 16, 32, 64):
        signed = element.signedness.data != Signedness.UNSIGNED
        dtype = np.dtype(f"<{'i' if signed else 'u'}{element.width.data // 8}")
    else:
        return None
    if n * dtype.itemsize > MAX_DENSE_BYTES:
        raise ParseError(span, f"dense attribute of {n} elements ({n * dtype.itemsize} bytes) "
                               f"is larger than the limit of {MAX_DENSE_BYTES} bytes")
    compact = "".join(body.split())
    splat = not compact.startswith("[")
    if not splat and compact.translate(_NUMBER_CHARS) != _layout(shape):
        return None
    flat = compact.replace("[", "").replace("]", "")
    if _NUMBERS_RE.fullmatch(flat) is None:
        return None
    tokens = flat.split(",")
    if len(tokens) != (1 if splat else n):
        return None
    if dtype.kind in "iu":
        if any("." in t or "e" in t or "E" in t for t in tokens):
            return None
        try:
            wide = np.array(tokens, dtype=object if max(map(len, tokens)) > 18 else np.int64)
            info = np.iinfo(dtype)
            if wide.size and (wide.min() < info.min or wide.max() > info.max):
                return None
            values = wide.astype(dtype)
        except (OverflowError, ValueError, TypeError):
            return None
    else:
        with np.errstate(over="ignore"):
            values = np.array(tokens, dtype=np.float64).astype(dtype)
        if not np.isfinite(values).all():
            return None
    if splat:
        values = np.full(n, values[0], dtype)
    return DenseIntOrFPElementsAttr(dense_type, BytesAttr(values.tobytes()))


def type_to_str(attr: Attribute) -> str:
    """The printed MLIR form of a type or attribute."""
    from pytfrt.mlir.printer import attr_to_str

    return attr_to_str(attr)
