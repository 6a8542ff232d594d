"""Compiler diagnostics: ``file:line:col: error: message`` plus the source line and a caret.

Nothing here imports xDSL.  :class:`SourceFile` maps character offsets to 1-based line and
column; :class:`MlirError` carries every diagnostic of a failed compilation as
``(file, line, col, severity, message)`` tuples and renders them as mlir-opt does.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from pytfrt.support.errors import PytfrtError


@dataclass(frozen=True, slots=True)
class MlirDiagnostic:
    """One diagnostic; ``line``/``col`` are 1-based (0 when the position is unknown)."""

    file: str
    line: int
    col: int
    severity: str
    message: str

    def as_tuple(self) -> tuple[str, int, int, str, str]:
        """``(file, line, col, severity, message)``."""
        return (self.file, self.line, self.col, self.severity, self.message)


class SourceFile:
    """A source text with offset -> (line, col) conversion. Immutable; thread-safe."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text
        starts = [0]
        find = text.find
        pos = find("\n")
        while pos >= 0:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        self._starts = starts

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return i + 1, offset - self._starts[i] + 1

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, without its newline."""
        if not 1 <= line <= len(self._starts):
            return ""
        start = self._starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start : end if end >= 0 else len(self.text)].rstrip("\r")

    def diagnostic(self, offset: int, message: str, severity: str = "error") -> MlirDiagnostic:
        """A diagnostic at a character offset."""
        line, col = self.line_col(offset)
        return MlirDiagnostic(self.name, line, col, severity, message)


def render(diag: MlirDiagnostic, source: SourceFile | None = None) -> str:
    """``file:line:col: severity: message`` then (if known) the source line and a caret."""
    if diag.line <= 0:
        return f"{diag.file}: {diag.severity}: {diag.message}\n"
    head = f"{diag.file}:{diag.line}:{diag.col}: {diag.severity}: {diag.message}\n"
    if source is None:
        return head
    text = source.line_text(diag.line)
    col = diag.col
    if len(text) > MAX_SNIPPET:  # a window around the column, never megabytes of one line
        start = max(0, min(col - 1 - MAX_SNIPPET // 2, len(text) - MAX_SNIPPET))
        text = text[start : start + MAX_SNIPPET]
        col -= start
    return head + text + "\n" + " " * (col - 1) + "^\n"


MAX_SNIPPET = 160
"""The longest source excerpt a rendered diagnostic shows (characters of the line)."""


class MlirError(PytfrtError):
    """Parsing, verifying or lowering MLIR failed.

    Attributes:
        diagnostics: every diagnostic, as :class:`MlirDiagnostic` (tuple-convertible).
        source: the source file the positions refer to (for rendering), if known.
    """

    def __init__(self, diagnostics: list[MlirDiagnostic], source: SourceFile | None = None):
        self.diagnostics = diagnostics
        self.source = source
        super().__init__(self.render().rstrip("\n"))

    @property
    def tuples(self) -> list[tuple[str, int, int, str, str]]:
        """The diagnostics as ``(file, line, col, severity, message)`` tuples."""
        return [d.as_tuple() for d in self.diagnostics]

    def render(self) -> str:
        """All diagnostics in mlir-opt's format (with source lines and carets)."""
        return "".join(render(d, self.source) for d in self.diagnostics)
