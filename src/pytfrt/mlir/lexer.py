"""A faster MLIR lexer for xDSL's parser (same tokens, one regular expression per token).

xDSL's :class:`~xdsl.utils.mlir_lexer.MLIRLexer` lexes character by character through several
Python method calls per token, which dominates parsing time for large functions.  This lexer
recognises the common tokens (bare and ``%``/``!``/``@`` identifiers, punctuation, decimal
integers, arrows and plain string literals) with one compiled regular expression and falls back
to xDSL's own lexer for everything else, so the token stream is identical.

Tokens carry their text as an instance attribute (instead of slicing the input on every
``token.text``), which the parser reads many times per token.

Robustness: every pattern matches in time linear in what it consumes (no nested quantifiers,
possessive repetition where a failed match could backtrack), and inputs longer than
:data:`MAX_SOURCE_CHARS` are refused with a ``ParseError`` at 1:1 before any lexing (parsing
costs about 2 ms and 100 KB per kilobyte of MLIR, so a bigger file would take minutes and
gigabytes).

Not thread-safe: one lexer per parse.
"""

from __future__ import annotations

import re
from typing import Final

from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Input, Span, Token
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRTokenKind, StringLiteral

_K = MLIRTokenKind

MAX_SOURCE_CHARS: Final = 16 * 1024 * 1024
"""The largest MLIR text the front end accepts (16 Mi characters, about 450,000 operations)."""

_TOKEN_RE = re.compile(
    r"""(?:\s+|//[^\n]*)*
    (?:
      (?P<bare>[a-zA-Z_][a-zA-Z0-9_$.]*)
     |(?P<pct>%(?:[0-9]+|[a-zA-Z$._-][a-zA-Z0-9$._-]*))
     |(?P<excl>!(?:[0-9]+|[a-zA-Z$._-][a-zA-Z0-9$._-]*))
     |(?P<at>@[a-zA-Z_][a-zA-Z0-9_$.]*)
     |(?P<arrow>->)
     |(?P<punct>[:,()\[\]<>=}+*?|])
     |(?P<int>[0-9]++)(?![.xXeE])
     |(?P<str>"[^"\\\n\v\f]*")
    )?""",
    re.VERBOSE | re.ASCII,
)

_PUNCT = {
    ":": _K.COLON,
    ",": _K.COMMA,
    "(": _K.L_PAREN,
    ")": _K.R_PAREN,
    "}": _K.R_BRACE,
    "[": _K.L_SQUARE,
    "]": _K.R_SQUARE,
    "<": _K.LESS,
    ">": _K.GREATER,
    "=": _K.EQUAL,
    "+": _K.PLUS,
    "*": _K.STAR,
    "?": _K.QUESTION,
    "|": _K.VERTICAL_BAR,
}
_GROUP_KIND = {
    "bare": _K.BARE_IDENT,
    "pct": _K.PERCENT_IDENT,
    "excl": _K.EXCLAMATION_IDENT,
    "at": _K.AT_IDENT,
    "arrow": _K.ARROW,
    "int": _K.INTEGER_LIT,
}


class FastToken(Token):  # type: ignore[type-arg]
    """A token whose ``text`` is stored rather than recomputed from the input."""

    text = ""  # type: ignore[assignment]  # shadows Token.text; set per instance


class FastMLIRLexer(MLIRLexer):
    """Drop-in replacement of :class:`MLIRLexer` with a fast path for common tokens."""

    # xDSL's pattern nests quantifiers (``(?:[^"...]+|...)*``): an unterminated literal makes
    # it backtrack exponentially.  One character (or escape) per repetition, possessively,
    # matches the same strings in linear time.
    _unescaped_characters_regex = re.compile(
        r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"'
    )

    def __init__(self, input: Input) -> None:  # noqa: A002 - xDSL's parameter name
        size = len(input.content)
        if size > MAX_SOURCE_CHARS:
            raise ParseError(
                Span(0, 0, input),
                f"the input is {size} characters long; the MLIR front end accepts at most "
                f"{MAX_SOURCE_CHARS} (split the module)",
            )
        super().__init__(input)

    def lex(self) -> Token:  # type: ignore[type-arg]
        content = self.input.content
        m = _TOKEN_RE.match(content, self.pos)
        assert m is not None  # the pattern can match the empty string
        group = m.lastgroup
        if group is None:
            # whitespace only: let xDSL lex the rare token (or EOF) after it
            self.pos = m.end()
            return super().lex()
        start = m.start(group)
        end = m.end()
        self.pos = end
        text = content[start:end]
        if group == "punct":
            kind = _PUNCT[text]
            span: Span = Span(start, end, self.input)  # type: ignore[type-arg]
        elif group == "str":
            kind = _K.STRING_LIT
            span = StringLiteral(start, end, self.input)
        else:
            kind = _GROUP_KIND[group]
            span = Span(start, end, self.input)
        tok = FastToken(kind, span)
        tok.text = text
        return tok
