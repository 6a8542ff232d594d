"""Front-end entry points: parse + verify MLIR text, lower it to a Program.

* :func:`parse_source` -> :class:`ParsedModule` (module, op positions, source) or MlirError;
* :func:`verify_module` runs op verifiers (TFRT ops' checks, ``tfrt.call`` symbol check, xDSL's
  builtin verifiers) and reports failures as diagnostics at the op;
* :func:`compile_mlir` / :func:`compile_file` = parse + verify + lower.

Every xDSL exception is converted to an :class:`~pytfrt.mlir.diagnostics.MlirError`; no
traceback escapes for bad input.  Thread-safe (each call has its own parser and context).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects import builtin as b
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation
from xdsl.utils.exceptions import ParseError

from pytfrt.bef.program import Program
from pytfrt.mlir.context import KNOWN_DIALECTS, make_context
from pytfrt.mlir.diagnostics import MlirDiagnostic, MlirError, SourceFile
from pytfrt.mlir.dialect_tfrt import CallOp
from pytfrt.mlir.lowering import lower_module, op_name
from pytfrt.mlir.parser import TfrtParser


@dataclass
class ParsedModule:
    """A parsed module with what diagnostics and lowering need."""

    module: b.ModuleOp
    source: SourceFile
    positions: dict[Operation, int] = field(default_factory=dict)
    explicit_unknown: set[Operation] = field(default_factory=set)

    def diagnostic(
        self, op: Operation | None, message: str, severity: str = "error"
    ) -> MlirDiagnostic:
        """A diagnostic at ``op`` (or without position)."""
        pos = self.positions.get(op, -1) if op is not None else -1
        if pos < 0:
            return MlirDiagnostic(self.source.name, 0, 0, severity, message)
        return self.source.diagnostic(pos, message, severity)


def parse_source(text: str, filename: str) -> ParsedModule:
    """Parse MLIR text (unregistered ops allowed). Raises :class:`MlirError`."""
    source = SourceFile(filename, text)
    try:
        parser = TfrtParser(make_context(), text, filename)  # lexes the first token
    except ParseError as err:
        raise MlirError([source.diagnostic(err.span.start, err.msg)], source) from None
    try:
        module = parser.parse_module()
    except ParseError as err:
        diags = [source.diagnostic(err.span.start, err.msg)]
        for offset, note in getattr(err, "notes", ()):
            diags.append(source.diagnostic(offset, note, "note"))
        raise MlirError(diags, source) from None
    except Exception as err:  # noqa: BLE001 - any xDSL failure is a diagnostic, not a crash
        pos = parser._current_token.span.start
        msg = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise MlirError([source.diagnostic(pos, msg)], source) from None
    if not isinstance(module, b.ModuleOp):  # pragma: no cover - parse_module guarantees it
        raise MlirError([MlirDiagnostic(filename, 0, 0, "error", "expected a module")], source)
    for op in module.walk():
        if len(op.attributes) > 1:
            op.attributes = dict(sorted(op.attributes.items()))
    return ParsedModule(module, source, parser.op_positions, parser.explicit_unknown)


def verify_module(parsed: ParsedModule) -> None:
    """Run the verifiers as MLIR does; raises :class:`MlirError` at the first failure.

    Nested operations are verified before the operation holding them (a ``tfrt.return`` before
    its ``tfrt.if``), in program order, and verification stops at the first failing op.
    """
    diags: list[MlirDiagnostic] = []
    symbols = {op.sym_name.data: op for op in parsed.module.walk() if isinstance(op, FuncOp)}
    for op in parsed.module.walk(region_first=True):
        if diags:
            break
        if isinstance(op, b.UnregisteredOp):
            continue
        try:
            if isinstance(op, CallOp):
                callee = op.attributes.get("callee")
                if (
                    isinstance(callee, b.SymbolRefAttr)
                    and callee.root_reference.data not in symbols
                ):
                    diags.append(
                        parsed.diagnostic(
                            op,
                            f"'tfrt.call' op '{callee.root_reference.data}' does not reference "
                            "a valid function",
                        )
                    )
                    continue
                if isinstance(callee, b.SymbolRefAttr):
                    mismatch = _call_mismatch(op, symbols[callee.root_reference.data])
                    if mismatch:
                        diags.append(parsed.diagnostic(op, f"'tfrt.call' op {mismatch}"))
                        continue
            op.verify_()
        except Exception as err:  # noqa: BLE001 - verifier failures become diagnostics
            msg = str(err).strip() or type(err).__name__
            if not msg.startswith("'"):
                msg = f"'{op_name(op)}' op {msg}"
            diags.append(parsed.diagnostic(op, msg))
    if diags:
        raise MlirError(diags, parsed.source)


def _call_mismatch(call: CallOp, callee: FuncOp) -> str:
    """MLIR's message for a call whose types differ from its callee's signature ("" if none)."""
    from pytfrt.mlir.parser import type_to_str

    fn_type = callee.function_type
    for what, given, wanted in (
        ("operand", [o.type for o in call.operands], fn_type.inputs.data),
        ("result", list(call.result_types), fn_type.outputs.data),
    ):
        if len(given) != len(wanted):
            return f"incorrect number of {what}s for callee"
        for i, (have, want) in enumerate(zip(given, wanted, strict=True)):
            if have != want:
                return (
                    f"{what} type mismatch: expected {what} type '{type_to_str(want)}', "
                    f"but provided '{type_to_str(have)}' for {what} number {i}"
                )
    return ""


def check_registered(
    parsed: ParsedModule, is_kernel: Callable[[str], bool] | None = None
) -> None:
    """``tfrt_opt`` without ``--allow-unregistered-dialect``: reject ops of unknown dialects.

    An op that names a registered kernel (``is_kernel(name)``, e.g. the playground's
    ``sigmoid_inplace.f32``) is known too: in pytfrt a kernel is its op's definition.
    """
    for op in parsed.module.walk():
        if not isinstance(op, b.UnregisteredOp):
            continue
        name = op.op_name.data
        dialect = name.split(".", 1)[0] if "." in name else ""
        if dialect not in KNOWN_DIALECTS and not (is_kernel is not None and is_kernel(name)):
            raise MlirError(
                [
                    parsed.diagnostic(
                        op,
                        f"operation being parsed with an unregistered dialect ('{name}'). If "
                        "this is intended, please use -allow-unregistered-dialect with the "
                        "MLIR tool used",
                    )
                ],
                parsed.source,
            )


def lower(parsed: ParsedModule) -> Program:
    """Lower a verified module (its errors as :class:`MlirError`, docs/bef.md)."""
    return lower_module(
        parsed.module,
        parsed.source.name,
        parsed.positions,
        parsed.source,
        parsed.explicit_unknown,
    )


def compile_mlir(text: str, filename: str) -> Program:
    """Parse, verify and lower MLIR text to a finalized Program. Raises :class:`MlirError`."""
    parsed = parse_source(text, filename)
    verify_module(parsed)
    return lower(parsed)


def compile_file(path: str) -> Program:
    """:func:`compile_mlir` of a file; the location file name is ``path`` as given."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as err:
        raise MlirError(
            [MlirDiagnostic(path, 0, 0, "error", f"could not open input file: {err.strerror}")]
        ) from None
    return compile_mlir(text, path)
