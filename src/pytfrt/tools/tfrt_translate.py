"""``tfrt_translate``: MLIR -> BEF and BEF -> MLIR (docs/conformance.md).

Usage::

    tfrt_translate --mlir-to-bef in.mlir [-o out.bef] [--disable-optional-sections[=true]]
                   [--split-input-file] [--verify-diagnostics]
    tfrt_translate --bef-to-mlir [in.bef | -] [--mlir-print-op-generic] [-o out.mlir]

Flags take one or two dashes and ``--flag=value``.  Diagnostics go to stderr as
``file:line:col: error: ...``; exit status 1 on any failure.  The compiler (xDSL) is imported
only when a translation runs, so importing this module is cheap.

:func:`translate_file_to_bef` is the in-process entry used by ``tests/lit/lit.cfg.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tfrt_translate", description="TFRT MLIR <-> BEF translator")
    mode = p.add_mutually_exclusive_group()
    # TFRT's tutorial also spells them with underscores (--mlir_to_bef).
    mode.add_argument(
        "--mlir-to-bef", "--mlir_to_bef", action="store_true", help="translate MLIR to BEF"
    )
    mode.add_argument(
        "--bef-to-mlir", "--bef_to_mlir", action="store_true", help="translate BEF to MLIR"
    )
    p.add_argument("input", nargs="?", default="-", help="input file ('-' = stdin)")
    p.add_argument("-o", dest="output", default="-", help="output file (default stdout)")
    p.add_argument(
        "--disable-optional-sections",
        nargs="?",
        const="true",
        default="false",
        help="omit AttributeTypes, AttributeNames and RegisterTypes",
    )
    p.add_argument("--split-input-file", action="store_true", help="split on '// -----'")
    p.add_argument("--verify-diagnostics", action="store_true", help="check expected-* lines")
    p.add_argument("--mlir-print-op-generic", action="store_true", help="print generic form")
    p.add_argument(
        "--allow-unregistered-dialect", action="store_true", help="accepted (always allowed)"
    )
    return p


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise _ArgError(message)


def _write(path: str, data: bytes) -> None:
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        with open(path, "wb") as fh:
            fh.write(data)


def translate_file_to_bef(
    rel_path: str, dst_path: str, cwd: str | None = None, optional_sections: bool = True
) -> None:
    """Compile ``rel_path`` (relative to ``cwd``) to BEF at ``dst_path`` (absolute or cwd-relative).

    Location file names are ``rel_path`` as given.  Raises ``MlirError`` / ``OSError``.
    """
    from pytfrt.bef.writer import write_bef
    from pytfrt.mlir.api import compile_mlir

    src = os.path.join(cwd, rel_path) if cwd else rel_path
    with open(src, encoding="utf-8") as fh:
        text = fh.read()
    data = write_bef(compile_mlir(text, rel_path), optional_sections=optional_sections)
    dst = dst_path if os.path.isabs(dst_path) or not cwd else os.path.join(cwd, dst_path)
    with open(dst, "wb") as fh:
        fh.write(data)


def _mlir_to_bef(args: argparse.Namespace) -> int:
    from pytfrt.bef.format import BefWriteError
    from pytfrt.bef.writer import write_bef
    from pytfrt.mlir.api import compile_mlir
    from pytfrt.mlir.diagnostics import MlirError
    from pytfrt.mlir.driver import DiagnosticSink, read_input, split_input

    name = "<stdin>" if args.input == "-" else args.input
    text = read_input(args.input)
    assert isinstance(text, str)
    sink = DiagnosticSink(name, text, args.verify_diagnostics)
    optional = args.disable_optional_sections.lower() not in ("true", "1", "")
    out = bytearray()
    for chunk in split_input(text, args.split_input_file):
        try:
            out += write_bef(compile_mlir(chunk, name), optional_sections=optional)
        except MlirError as err:
            sink.error(err)
        except BefWriteError as err:
            # Something BEF cannot encode: a diagnostic at the op, like any other error.
            sink.error(MlirError([_write_error_diagnostic(err, name)], sink.source))
    ok = sink.finish()
    if ok and not args.verify_diagnostics:
        _write(args.output, bytes(out))
    return 0 if ok else 1


def _write_error_diagnostic(err: Exception, filename: str) -> Any:
    """An error diagnostic for a :class:`BefWriteError`, at its op's source position if known."""
    from pytfrt.mlir.diagnostics import MlirDiagnostic

    loc = getattr(err, "location", None)
    flc = loc.file_line_col() if loc is not None else None
    if flc is None:
        return MlirDiagnostic(filename, 0, 0, "error", str(err))
    file, line, col = flc
    return MlirDiagnostic(file, line, col, "error", str(err))


def _bef_to_mlir(args: argparse.Namespace) -> int:
    from pytfrt.bef import disasm
    from pytfrt.bef.format import BefError
    from pytfrt.bef.reader import read_bef
    from pytfrt.mlir.driver import read_input

    data = read_input(args.input, binary=True)
    assert isinstance(data, bytes)
    if not data:
        print("error: BEF file is empty.", file=sys.stderr)
        return 1
    try:
        program = read_bef(data)
    except BefError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    text = disasm.program_to_mlir(program, op_generic=args.mlir_print_op_generic)
    if getattr(program, "missing_optional_sections", False) or not _has_optional(data):
        print(
            "warning: Missing AttributeTypes, AttributeNames or RegisterTypes sections.",
            file=sys.stderr,
        )
    if not args.mlir_print_op_generic:
        from pytfrt.mlir.api import parse_source
        from pytfrt.mlir.diagnostics import MlirError
        from pytfrt.mlir.printer import print_module

        try:
            text = print_module(parse_source(text, "<bef>").module)
        except MlirError as err:  # pragma: no cover - the disassembler's output always parses
            sys.stderr.write(err.render())
            return 1
    _write(args.output, text.encode("utf-8"))
    return 0


def _has_optional(data: bytes) -> bool:
    from pytfrt.bef.reader import read_sections

    try:
        sections = read_sections(data)
    except Exception:  # noqa: BLE001 - read_bef already validated the file
        return True
    return all(s in sections for s in (8, 9, 10))


def main(argv: list[str] | None = None) -> int:
    """Run the tool; returns the exit status."""
    from pytfrt.mlir.driver import normalize_argv

    argv = normalize_argv(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    parser.__class__ = _Parser
    try:
        args = parser.parse_args(argv)
    except _ArgError as err:
        print(f"tfrt_translate: {err}", file=sys.stderr)
        return 1
    if not (args.mlir_to_bef or args.bef_to_mlir):
        print("tfrt_translate: one of --mlir-to-bef or --bef-to-mlir is required", file=sys.stderr)
        return 1
    try:
        if args.mlir_to_bef:
            return _mlir_to_bef(args)
        return _bef_to_mlir(args)
    except OSError as err:
        print(f"tfrt_translate: cannot open '{err.filename}': {err.strerror}", file=sys.stderr)
        return 1
    except UnicodeDecodeError:
        print("tfrt_translate: input is not valid UTF-8 text", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
