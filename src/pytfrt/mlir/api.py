"""Front-end entry points: parse + verify MLIR text, lower it to a Program.

* :func:`parse_source` -> :class:`ParsedModule` (module, op positions, source) or MlirError;
* :func:`verify_module` runs op verifiers (TFRT ops' checks, ``tfrt.call`` symbol check, xDSL's
  builtin verifiers) and reports failures as diagnostics at the op;
* :func:`compile_mlir` / :func:`compile_file` = parse + verify + lower.

Every xDSL exception is converted to an :class:`~pytfrt.mlir.diagnostics.MlirError`; no
traceback escapes for bad input.  Thread-safe (each call has its own parser and context).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from xdsl.dialects import builtin as b
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation
from xdsl.irdl import OpDef, traits_def
from xdsl.traits import IsolatedFromAbove
from xdsl.utils.exceptions import ParseError, VerifyException

from pytfrt.bef.program import Program
from pytfrt.mlir.context import KNOWN_DIALECTS, make_context
from pytfrt.mlir.diagnostics import MlirDiagnostic, MlirError, SourceFile
from pytfrt.mlir.dialect_tfrt import CallOp
from pytfrt.mlir.lowering import lower_module, op_name
from pytfrt.mlir.parser import DeepNesting, TfrtParser
from pytfrt.mlir.walk import call_with_deep_stack, stack_depth, walk_ops


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
    """Parse MLIR text (unregistered ops allowed). Raises :class:`MlirError`.

    Regions may nest up to :data:`~pytfrt.mlir.parser.MAX_REGION_DEPTH` levels: text nested
    deeper than the calling thread's stack allows is parsed again on a helper thread with a
    large stack (:func:`~pytfrt.mlir.walk.call_with_deep_stack`)."""
    shallow = _shallow_depth()
    parsed = None
    if shallow > 0:
        try:
            parsed = _parse(text, filename, shallow)
        except DeepNesting:
            parsed = None
    if parsed is None:
        try:
            parsed = call_with_deep_stack(lambda: _parse(text, filename, None))
        except RuntimeError as err:  # no thread with a large stack: the nesting is the problem
            source = SourceFile(filename, text)
            raise MlirError(
                [MlirDiagnostic(filename, 0, 0, "error", f"regions nested too deep: {err}")],
                source,
            ) from None
    for op in walk_ops(parsed.module):
        if len(op.attributes) > 1:
            op.attributes = dict(sorted(op.attributes.items()))
    return parsed


#: Python frames per region level the shallow parse budgets (about 10 measured for tfrt.if).
_FRAMES_PER_LEVEL = 16
#: Frames kept free for the work at the deepest level.
_FRAME_RESERVE = 200
#: The deepest nesting parsed on the calling thread.
_SHALLOW_MAX = 48


def _shallow_depth() -> int:
    """How many region levels the calling thread's remaining recursion budget can parse."""
    free = sys.getrecursionlimit() - stack_depth() - _FRAME_RESERVE
    return max(0, min(_SHALLOW_MAX, free // _FRAMES_PER_LEVEL))


def _parse(text: str, filename: str, shallow_depth: int | None) -> ParsedModule:
    source = SourceFile(filename, text)
    try:
        parser = TfrtParser(make_context(), text, filename, shallow_depth)  # lexes a token
    except ParseError as err:
        raise MlirError([source.diagnostic(err.span.start, err.msg)], source) from None
    try:
        module = parser.parse_module()
    except ParseError as err:
        diags = [source.diagnostic(err.span.start, err.msg)]
        for offset, note in getattr(err, "notes", ()):
            diags.append(source.diagnostic(offset, note, "note"))
        raise MlirError(diags, source) from None
    except DeepNesting:
        raise
    except Exception as err:  # noqa: BLE001 - any xDSL failure is a diagnostic, not a crash
        pos = parser._current_token.span.start
        msg = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise MlirError([source.diagnostic(pos, msg)], source) from None
    if not isinstance(module, b.ModuleOp):  # pragma: no cover - parse_module guarantees it
        raise MlirError([MlirDiagnostic(filename, 0, 0, "error", "expected a module")], source)
    return ParsedModule(module, source, parser.op_positions, parser.explicit_unknown)


def verify_module(parsed: ParsedModule) -> None:
    """Run the verifiers as MLIR does; raises :class:`MlirError` at the first failure.

    Nested operations are verified before the operation holding them (a ``tfrt.return`` before
    its ``tfrt.if``), in program order, and verification stops at the first failing op.
    """
    diags: list[MlirDiagnostic] = []
    symbols = {op.sym_name.data: op for op in walk_ops(parsed.module) if isinstance(op, FuncOp)}
    for op in walk_ops(parsed.module, region_first=True):
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
            if isinstance(op, FuncOp):
                _verify_func(op)
            else:
                op.verify_()
        except Exception as err:  # noqa: BLE001 - verifier failures become diagnostics
            msg = str(err).strip() or type(err).__name__
            if not msg.startswith("'"):
                msg = f"'{op_name(op)}' op {msg}"
            diags.append(parsed.diagnostic(op, msg))
    if diags:
        raise MlirError(diags, parsed.source)


_func_def_cache: list[OpDef] = []


def _verify_func(func: FuncOp) -> None:
    """``func.verify_()`` in time linear in the body, however deeply its regions nest.

    xDSL's ``IsolatedFromAbove`` check walks up the parent chain of every operand's owner
    (time proportional to the nesting depth for each operand); here the owners are looked up
    in the set of the function's ops and blocks instead.  The other checks are xDSL's: the op
    definition without that trait, then ``FuncOp``'s own check of the entry block."""
    if not _func_def_cache:
        full = FuncOp.get_irdl_definition()
        kept = (t for t in full.traits if not isinstance(t, IsolatedFromAbove))
        _func_def_cache.append(replace(full, traits=traits_def(*kept)))
    _func_def_cache[0].verify(func)
    inside: set[int] = set()
    nested = list(walk_ops(func))
    for op in nested:
        inside.add(id(op))
        for region in op.regions:
            inside.update(id(block) for block in region.blocks)
    inside.discard(id(func))
    for op in nested:
        for operand in op.operands:
            if id(operand.owner) not in inside:
                raise VerifyException(
                    f"Operation using value defined out of its IsolatedFromAbove parent: "
                    f"'{op_name(op)}'"
                )
    entry = func.body.blocks.first
    if entry is not None and func.function_type.inputs.data != tuple(entry.arg_types):
        raise VerifyException(
            "Expected entry block arguments to have the same types as the function input types"
        )


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
    for op in walk_ops(parsed.module):
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
