"""The MLIR front end: TFRT's dialects on xDSL, diagnostics, and lowering to a Program.

Public API (xDSL is imported on first use, so importing this package is cheap):

* :func:`compile_mlir` ``(text, filename) -> Program`` and :func:`compile_file` ``(path)``:
  parse, verify and lower; raise :class:`MlirError` (a ``PytfrtError``) whose
  ``diagnostics`` are ``(file, line, col, severity, message)``-convertible records;
* :func:`parse_source`, :func:`verify_module`, :func:`lower`, :func:`print_module` for the tools;
* :func:`lower_module` ``(module, filename, ...)`` for already parsed xDSL modules.

Layering: depends on :mod:`pytfrt.support` and :mod:`pytfrt.bef` only.
"""

from __future__ import annotations

from typing import Any

from pytfrt.mlir.diagnostics import MlirDiagnostic as MlirDiagnostic
from pytfrt.mlir.diagnostics import MlirError as MlirError
from pytfrt.mlir.diagnostics import SourceFile as SourceFile

_LAZY = {
    "compile_mlir": "pytfrt.mlir.api",
    "compile_file": "pytfrt.mlir.api",
    "parse_source": "pytfrt.mlir.api",
    "verify_module": "pytfrt.mlir.api",
    "check_registered": "pytfrt.mlir.api",
    "lower": "pytfrt.mlir.api",
    "ParsedModule": "pytfrt.mlir.api",
    "lower_module": "pytfrt.mlir.lowering",
    "print_module": "pytfrt.mlir.printer",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pytfrt.mlir' has no attribute {name!r}")


__all__ = ["MlirDiagnostic", "MlirError", "SourceFile", *_LAZY]
