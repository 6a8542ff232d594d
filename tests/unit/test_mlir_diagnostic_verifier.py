"""The expected-* diagnostic verifier (MLIR's -verify-diagnostics semantics)."""

from __future__ import annotations

import io
import threading

from pytfrt.support.diagnostic_verifier import DiagnosticVerifier, parse_expectations

SRC = """\
// expected-error @+1 {{bad thing}}
%x = op1
%y = op2  // expected-warning {{careful}}
// expected-remark @-2 {{look}}
%z = op3
// expected-error @above {{z failed}}
// expected-note @below {{see here}}
// expected-error @below {{w failed}}
%w = op4
"""


def test_designators_resolve_to_lines() -> None:
    got = [(e.kind, e.text, e.line) for e in parse_expectations(SRC)]
    assert got == [
        ("error", "bad thing", 2),
        ("warning", "careful", 3),
        ("remark", "look", 2),
        ("error", "z failed", 5),
        ("note", "see here", 9),
        ("error", "w failed", 9),
    ]


def _verifier() -> tuple[DiagnosticVerifier, io.StringIO]:
    out = io.StringIO()
    v = DiagnosticVerifier(out, load_files=False)
    v.add_file("a.mlir", SRC)
    return v, out


def test_all_matched_is_silent() -> None:
    v, out = _verifier()
    assert v.handle("a.mlir", 2, 1, "error", "runtime error: a bad thing happened")
    assert v.handle("a.mlir", 3, 1, "warning", "be careful")
    assert v.handle("a.mlir", 2, 1, "remark", "look here")
    assert v.handle("a.mlir", 5, 1, "error", "z failed")
    assert v.handle("a.mlir", 9, 1, "note", "see here")
    assert v.handle("a.mlir", 9, 1, "error", "w failed")
    assert v.finish()
    assert out.getvalue() == ""


def test_unexpected_and_unproduced_are_reported() -> None:
    v, out = _verifier()
    assert not v.handle("a.mlir", 5, 3, "error", "other message")
    assert v.handle("a.mlir", 2, 1, "error", "bad thing")  # matched once
    assert not v.handle("a.mlir", 2, 1, "error", "bad thing")  # second time: unexpected
    assert not v.handle(None, 0, 0, "error", "no location")
    assert not v.finish()
    text = out.getvalue()
    assert "a.mlir:5:3: error: unexpected error: other message\n%z = op3\n  ^\n" in text
    assert "a.mlir:2:1: error: unexpected error: bad thing\n" in text
    assert "<unknown>: error: unexpected error: no location" in text
    assert 'a.mlir:3:14: error: expected warning "careful" was not produced' in text


def test_lazy_loading_relative_to_cwd(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "p.mlir").write_text("// expected-error @+1 {{boom}}\nop\n")
    out = io.StringIO()
    v = DiagnosticVerifier(out, cwd=str(tmp_path))
    assert v.handle("p.mlir", 2, 1, "error", "runtime error: boom")
    assert not v.handle("missing.mlir", 1, 1, "error", "x")
    assert not v.finish()
    assert "missing.mlir:1:1: error: unexpected error: x" in out.getvalue()


def test_untouched_files_are_not_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    v = DiagnosticVerifier(io.StringIO(), cwd=str(tmp_path))
    assert v.finish()


def test_thread_safe_matching() -> None:
    n = 200
    src = "\n".join(f"op // expected-error {{{{e{i}}}}}" for i in range(n)) + "\n"
    v = DiagnosticVerifier(io.StringIO(), load_files=False)
    v.add_file("t.mlir", src)
    results: list[bool] = []
    lock = threading.Lock()

    def work(start: int) -> None:
        for i in range(start, n, 4):
            ok = v.handle("t.mlir", i + 1, 1, "error", f"e{i}")
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == n and all(results)
    assert v.finish()
