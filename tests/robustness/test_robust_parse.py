"""No pathological parsing: bad MLIR text is a ``file:line:col: error:``, in linear time.

The timeouts are hang guards, not timings: the inputs that used to backtrack exponentially
(an unterminated string literal of 30 characters took 51 s) now take microseconds.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytfrt.mlir import MlirError, compile_mlir
from pytfrt.mlir import lexer as lexer_mod

pytestmark = pytest.mark.timeout(60)


def error_of(text: str) -> str:
    with pytest.raises(MlirError) as info:
        compile_mlir(text, "bad.mlir")
    return str(info.value)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("n", [30, 40, 100_000])
def test_unterminated_string_literal_is_a_located_error(n: int) -> None:
    message = error_of('func.func @main() { "' + "a" * n)
    assert message.startswith(
        "bad.mlir:1:21: error: End of file reached before closing string literal."
    )


@pytest.mark.parametrize(
    "text,expected",
    [
        ("\ufefffunc.func @main() {}", "bad.mlir:1:1: error: Unexpected character"),
        ("$", "bad.mlir:1:1: error: Unexpected character: $"),
        ('"', "bad.mlir:1:1: error: End of file reached before closing string literal."),
        ('"abc', "bad.mlir:1:1: error: End of file reached before closing string literal."),
    ],
)
def test_lexer_error_on_the_first_token_is_a_diagnostic(text: str, expected: str) -> None:
    assert error_of(text).startswith(expected)


def test_input_over_the_size_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexer_mod, "MAX_SOURCE_CHARS", 1000)
    message = error_of("// padding\n" * 100)
    assert message.startswith("bad.mlir:1:1: error: the input is 1100 characters long; the "
                              "MLIR front end accepts at most 1000")


def test_error_on_a_huge_line_shows_a_window_of_it() -> None:
    message = error_of("func.func @main() {" + " " * 100_000 + "$")
    lines = message.splitlines()
    assert lines[0].startswith("bad.mlir:1:100020: error:")
    assert len(lines[1]) <= 200 and lines[1].endswith(" $")
    assert lines[2].index("^") == lines[1].index("$")


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text",
    [
        "func.func @main() { %x = tfrt.constant.i32 " + "1" * 200_000 + ".",
        "func.func @main() { %x = tfrt.constant.f32 1." + "1" * 200_000 + "e",
        " " * 200_000 + "$",
        "// " + "x" * 200_000,
    ],
)
def test_long_tokens_lex_in_linear_time(text: str) -> None:
    try:
        compile_mlir(text, "bad.mlir")
    except MlirError:
        pass


ALPHABET = st.sampled_from(list('"\\%@!^#$:;,.()[]{}<>=-+*/0123456789abxeEfunc.tr \n\t\ufeff'))


@given(st.text(ALPHABET, max_size=60))
def test_random_text_gives_diagnostics_only(text: str) -> None:
    try:
        compile_mlir(text, "bad.mlir")
    except MlirError as err:
        assert str(err).startswith("bad.mlir")
