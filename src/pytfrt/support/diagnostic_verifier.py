"""Expected-diagnostic checking (MLIR's ``-verify-diagnostics``), stdlib only.

Used by ``tfrt_opt``/``tfrt_translate --verify-diagnostics`` and by ``bef_executor`` for runtime
errors (docs/conformance.md).  Source files carry annotations such as::

    // expected-error @+1 {{something bad happened}}
    %x = "tfrt_test.fail"() : () -> i32
    %y = "tfrt_test.fail"() : () -> i32  // expected-error {{something bad}}

Kinds ``expected-error``, ``-warning``, ``-remark``, ``-note``; designators: none (same line),
``@+N``, ``@-N``, ``@above`` / ``@below`` (the nearest line above/below that is not itself
an ``expected-*`` line).  ``expected-error-re`` treats ``{{...}}`` parts as regular expressions.

Usage::

    v = DiagnosticVerifier()            # lazy loading of files by path (relative to cwd)
    v.add_file("x.mlir", text)          # or register sources explicitly
    v.handle(file, line, col, "error", message)   # True if it matched an expectation
    ok = v.finish()                     # reports never-produced expectations

A matching diagnostic is consumed silently (an expectation matches once; the message must
contain the expected text).  A non-matching one is printed to ``stream`` as
``<file>:<line>:<col>: error: unexpected error: <msg>`` (followed by the source line and a
caret when the file is known) and makes verification fail; diagnostics without a file
position are always unexpected.  :meth:`finish` prints
``<file>:<line>:<col>: error: expected error "<text>" was not produced`` for every unmatched
expectation of every *loaded* file; files never loaded are not checked.

Thread-safe: one lock guards all state; output lines are written whole under the lock.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import TextIO

_ANNOTATION = re.compile(
    r"expected-(error|warning|remark|note)(-re)?\s*(@(?:[+-][0-9]+|above|below))?\s*\{\{(.*?)\}\}"
)
_KIND_NAMES = ("error", "warning", "remark", "note")


@dataclass
class Expectation:
    """One ``expected-*`` annotation."""

    kind: str
    text: str
    line: int  # the line the diagnostic must be on (1-based)
    anno_line: int  # where the annotation is written
    anno_col: int
    regex: re.Pattern[str] | None = None
    matched: bool = False

    def matches(self, message: str) -> bool:
        """Whether a diagnostic message satisfies this expectation."""
        if self.regex is not None:
            return self.regex.search(message) is not None
        return self.text in message


def _compile_re(text: str) -> re.Pattern[str]:
    parts = re.split(r"(\{\{.*?\}\})", text)
    pattern = "".join(p[2:-2] if p.startswith("{{") else re.escape(p) for p in parts)
    return re.compile(pattern)


def parse_expectations(text: str) -> list[Expectation]:
    """Every expectation in a source text, with ``@above``/``@below`` resolved."""
    out: list[Expectation] = []
    pending_below: list[Expectation] = []
    last_plain = 0
    for lineno, line in enumerate(text.split("\n"), start=1):
        found = list(_ANNOTATION.finditer(line))
        if not found:
            for exp in pending_below:
                exp.line = lineno
            pending_below.clear()
            last_plain = lineno
            continue
        for m in found:
            kind, is_re, where, body = m.group(1), m.group(2), m.group(3), m.group(4)
            exp = Expectation(kind, body, lineno, lineno, m.start() + 1)
            if is_re:
                exp.regex = _compile_re(body)
            if where == "@above":
                exp.line = last_plain
            elif where == "@below":
                pending_below.append(exp)
            elif where:
                exp.line = lineno + int(where[1:])
            out.append(exp)
        # a line holding code before the annotation also counts as a plain line
        if line[: found[0].start()].split("//")[0].strip():
            last_plain = lineno
    return out


@dataclass
class _File:
    text: str
    expectations: list[Expectation] = field(default_factory=list)


class DiagnosticVerifier:
    """Matches emitted diagnostics against ``expected-*`` annotations (thread-safe).

    Args:
        stream: where unexpected / unproduced diagnostics are written (default stderr).
        load_files: open files named by diagnostics lazily (relative to ``cwd``).
        cwd: base directory for lazy loading (default: the process working directory).
        show_source: print the source line and a caret under each reported diagnostic.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        load_files: bool = True,
        cwd: str | None = None,
        show_source: bool = True,
    ) -> None:
        self._stream = stream
        self._load = load_files
        self._cwd = cwd
        self._show_source = show_source
        self._files: dict[str, _File] = {}
        self._missing: set[str] = set()
        self._lock = threading.Lock()
        self.failed = False

    @property
    def stream(self) -> TextIO:
        """The output stream."""
        return self._stream if self._stream is not None else sys.stderr

    def add_file(self, path: str, text: str) -> None:
        """Register a source text (replacing an earlier one of the same path)."""
        with self._lock:
            self._files[path] = _File(text, parse_expectations(text))

    def _get(self, path: str) -> _File | None:
        found = self._files.get(path)
        if found is not None or not self._load or path in self._missing:
            return found
        full = os.path.join(self._cwd, path) if self._cwd else path
        try:
            with open(full, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError):
            self._missing.add(path)
            return None
        found = _File(text, parse_expectations(text))
        self._files[path] = found
        return found

    def handle(self, file: str | None, line: int, col: int, severity: str, message: str) -> bool:
        """Check one diagnostic; returns True if it matched an expectation (printed nothing)."""
        with self._lock:
            src = self._get(file) if file and line > 0 else None
            if src is not None:
                for exp in src.expectations:
                    if (
                        not exp.matched
                        and exp.line == line
                        and exp.kind == severity
                        and exp.matches(message)
                    ):
                        exp.matched = True
                        return True
            self.failed = True
            self._emit(file, line, col, f"unexpected {severity}: {message}", src)
            return False

    def finish(self) -> bool:
        """Report never-produced expectations of loaded files; True if all went well."""
        with self._lock:
            for path, src in self._files.items():
                for exp in src.expectations:
                    if exp.matched:
                        continue
                    self.failed = True
                    self._emit(
                        path,
                        exp.anno_line,
                        exp.anno_col,
                        f'expected {exp.kind} "{exp.text}" was not produced',
                        src,
                    )
            return not self.failed

    def _emit(self, file: str | None, line: int, col: int, message: str, src: _File | None) -> None:
        if file and line > 0:
            text = f"{file}:{line}:{col}: error: {message}\n"
            if self._show_source and src is not None:
                lines = src.text.split("\n")
                if line <= len(lines):
                    shown, at = lines[line - 1].rstrip("\r"), max(col - 1, 0)
                    if len(shown) > 160:  # a window around the column of a very long line
                        start = max(0, at - 80)
                        shown, at = shown[start:start + 160] + " ...", at - start
                    text += shown + "\n" + " " * at + "^\n"
        else:
            text = f"{file or '<unknown>'}: error: {message}\n"
        self.stream.write(text)
        self.stream.flush()


__all__ = ["DiagnosticVerifier", "Expectation", "parse_expectations"]
