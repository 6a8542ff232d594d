"""Shared plumbing of ``tfrt_opt`` and ``tfrt_translate`` (no xDSL import at module level).

* :func:`normalize_argv`: TFRT tools take ``-flag`` and ``--flag`` alike; argparse wants ``--``.
* :func:`split_input` (``--split-input-file``): chunks separated by ``// -----`` lines, each
  padded with blank lines so that line numbers stay those of the whole file.
* :class:`DiagnosticSink`: prints diagnostics (mlir-opt format) or feeds them to a
  :class:`~pytfrt.support.diagnostic_verifier.DiagnosticVerifier`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import TextIO

from pytfrt.mlir.diagnostics import MlirDiagnostic, MlirError, SourceFile, render
from pytfrt.support.diagnostic_verifier import DiagnosticVerifier

_SPLIT = re.compile(r"^// -----\s*$", re.MULTILINE)


def normalize_argv(argv: Iterable[str], short: Iterable[str] = ("-o", "-h")) -> list[str]:
    """``-mlir-to-bef`` -> ``--mlir-to-bef`` (single-letter options are kept)."""
    keep = set(short)
    out = []
    for arg in argv:
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2 and arg not in keep:
            head = arg.split("=", 1)[0]
            if head not in keep:
                arg = "-" + arg
        out.append(arg)
    return out


def split_input(text: str, split: bool) -> list[str]:
    """The chunks to process (one unless ``split``), line numbers preserved."""
    if not split:
        return [text]
    chunks = []
    pos = 0
    line = 0
    for m in _SPLIT.finditer(text):
        chunk = text[pos : m.start()]
        chunks.append("\n" * line + chunk)
        line += chunk.count("\n") + 1
        pos = m.end()
    chunks.append("\n" * line + text[pos:])
    return chunks


class DiagnosticSink:
    """Where diagnostics go: stderr in mlir-opt format, or the expected-* verifier."""

    def __init__(self, filename: str, text: str, verify: bool, stream: TextIO | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.source = SourceFile(filename, text)
        self.verifier: DiagnosticVerifier | None = None
        if verify:
            self.verifier = DiagnosticVerifier(self.stream, load_files=False)
            self.verifier.add_file(filename, text)
        self.had_error = False

    def emit(self, diags: Iterable[MlirDiagnostic]) -> None:
        """Report diagnostics (errors make :attr:`had_error` true unless expected)."""
        for d in diags:
            if self.verifier is not None:
                self.verifier.handle(d.file, d.line, d.col, d.severity, d.message)
                continue
            if d.severity == "error":
                self.had_error = True
            self.stream.write(render(d, self.source if d.file == self.source.name else None))
            self.stream.flush()

    def error(self, err: MlirError) -> None:
        """Report a failed compilation."""
        if self.verifier is None:
            self.had_error = True
        self.emit(err.diagnostics)

    def finish(self) -> bool:
        """True if the run succeeded (all expectations met when verifying)."""
        if self.verifier is not None:
            return self.verifier.finish()
        return not self.had_error


def read_input(path: str, binary: bool = False) -> str | bytes:
    """Read a file (``-`` = stdin). Raises OSError."""
    if path == "-":
        return sys.stdin.buffer.read() if binary else sys.stdin.read()
    if binary:
        with open(path, "rb") as fh:
            return fh.read()
    with open(path, encoding="utf-8") as fh:
        return fh.read()
