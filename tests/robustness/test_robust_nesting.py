"""Region nesting has no Python-sized limit: thousands of nested ``tfrt.if`` parse, verify,
lower, round-trip through BEF and run; beyond the documented cap the error is located.

The parser is xDSL's, recursive per region level; :func:`pytfrt.mlir.api.parse_source` moves a
deeply nested parse to a helper thread with a large stack.  Every later phase is iterative.
The oracle: ``nested_ifs(depth)`` returns 2 at any depth (the innermost branch adds 1 + 1).
"""

from __future__ import annotations

import sys
import threading

import pytest
from robust_harness import QUEUES, nested_ifs, run_program
from xdsl.dialects.builtin import ModuleOp

from pytfrt.bef.reader import read_bef
from pytfrt.bef.writer import write_bef
from pytfrt.mlir import MlirError, compile_mlir
from pytfrt.mlir import parser as parser_mod
from pytfrt.mlir.api import lower, parse_source, verify_module
from pytfrt.mlir.walk import walk_ops

pytestmark = pytest.mark.timeout(600)


def round_trip_and_run(depth: int, queues: tuple[str, ...]) -> None:
    text = nested_ifs(depth)
    parsed = parse_source(text, "deep.mlir")
    verify_module(parsed)
    program = lower(parsed)
    del parsed
    assert len(program.functions) == 2 * depth + 1  # main + two branches per level
    data = write_bef(program)
    again = read_bef(data)
    assert write_bef(again) == data
    for queue in queues:
        assert run_program(again, queue).results == [2]


def test_1000_nested_ifs_compile_round_trip_and_run_on_every_queue() -> None:
    before = sys.getrecursionlimit()
    round_trip_and_run(1000, QUEUES)
    assert sys.getrecursionlimit() == before  # the deep parse restored it


@pytest.mark.slow
def test_10000_nested_ifs_compile_round_trip_and_run() -> None:
    round_trip_and_run(10_000, ("s",))


def test_deep_parses_in_parallel_threads() -> None:
    before = sys.getrecursionlimit()
    results: list[object] = []

    def work(depth: int) -> None:
        try:
            results.append(run_program(compile_mlir(nested_ifs(depth), "p.mlir")).results)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            results.append(exc)

    threads = [threading.Thread(target=work, args=(d,)) for d in (300, 400, 500)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [[2]] * 3
    assert sys.getrecursionlimit() == before


def error_of(text: str) -> str:
    with pytest.raises(MlirError) as info:
        compile_mlir(text, "bad.mlir")
    return str(info.value)


def brace_position(text: str, count: int) -> tuple[int, int]:
    """Line and column of the ``count``-th ``{`` of ``text`` (1-based)."""
    offset = -1
    for _ in range(count):
        offset = text.index("{", offset + 1)
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


# 20: refused by the parse on the calling thread; 300: by the parse on the deep stack.
@pytest.mark.parametrize("cap", [20, 300])
def test_regions_nested_deeper_than_the_cap_are_a_located_error(
        cap: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parser_mod, "MAX_REGION_DEPTH", cap)
    # The function body is level 1: cap - 1 ifs fit, one more is refused at its `{`.
    assert run_program(compile_mlir(nested_ifs(cap - 1), "ok.mlir")).results == [2]
    text = nested_ifs(cap)
    line, col = brace_position(text, cap + 1)
    message = error_of(text)
    assert message.startswith(f"bad.mlir:{line}:{col}: error: regions nested deeper than {cap}")
    assert "recursion" not in message


def test_the_documented_cap_is_at_least_ten_thousand_ifs() -> None:
    assert parser_mod.MAX_REGION_DEPTH > 10_000


def test_parse_errors_inside_deep_nesting_are_located() -> None:
    text = nested_ifs(500)
    at = text.index("tfrt.add.i32")
    bad = text[:at] + "tfrt.add.i32 %x, %nope\n" + text[text.index("\n", at) + 1:]
    line = bad.count("\n", 0, at) + 1
    message = error_of(bad)
    assert message.startswith(f"bad.mlir:{line}:")
    assert "nope" in message and "recursion" not in message


def assert_same_walks(module: ModuleOp) -> None:
    for region_first in (False, True):
        ours = list(walk_ops(module, region_first=region_first))
        assert ours == list(module.walk(region_first=region_first))


def test_walk_ops_visits_in_xdsl_order() -> None:
    text = nested_ifs(4) + """
func.func private @body(%i: i32) -> (i32) {
  %r = tfrt.repeat.i32 %i, %i : i32 {
    %one = tfrt.constant.i32 1
    %y = tfrt.add.i32 %i, %one
    tfrt.return %y : i32
  }
  tfrt.return %r : i32
}
"""
    assert_same_walks(parse_source(text, "w.mlir").module)


# 600 levels: beyond what the recursive printers managed on Python's default stack (the
# printed text grows with the square of the depth: its indentation).
def test_600_nested_ifs_print_and_parse_back() -> None:
    from pytfrt.mlir import print_module

    once = print_module(parse_source(nested_ifs(600), "a.mlir").module)
    assert once.count("tfrt.if") == 600
    assert print_module(parse_source(once, "b.mlir").module) == once


def test_600_nested_ifs_disassemble_and_compile_back() -> None:
    from pytfrt.bef.disasm import program_to_mlir

    data = write_bef(compile_mlir(nested_ifs(600), "a.mlir"))
    text = program_to_mlir(read_bef(data))  # tfrt_translate -bef-to-mlir
    assert text.count('"tfrt.if"') == 600
    again = compile_mlir(text, "b.mlir")
    assert len(again.functions) == 1201
    assert run_program(again).results == [2]
