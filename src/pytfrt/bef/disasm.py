"""The BEF disassembler: Program -> MLIR text (docs/bef.md), and a section dump for debugging.

:func:`program_to_mlir` prints a module the front end can re-parse:

* one ``func.func`` per named function (custom ``func.func`` syntax; ``tfrt.sync`` /
  ``tfrt.native`` restored; native functions as ``private`` declarations);
* anonymous functions as the regions of the op that references them;
* every kernel as a generic op ``"name"(%operands) ({regions}) {attributes} : (types) ->
  (types)``, result types from the register types (``none`` when unknown);
* function references restored under their original attribute names when
  ``Kernel.function_attr_names`` is known (BEF files written by pytfrt with optional sections),
  else, as TFRT does, as one attribute named ``callee`` (``@f``, or ``[@f, @g]`` for several);
  this keeps the attribute-name order (and so the executor's binding order) unchanged;
* untyped attributes (:class:`RawAttr`) as ``0xdeadbeef : i32``;
* optionally ``loc(...)`` suffixes;
* with ``op_generic`` (``--mlir-print-op-generic``) the module and functions in generic form
  as well (``"builtin.module"``, ``"func.func"`` with ``function_type`` / ``sym_name``
  properties; TFRT de22adc4's ``"builtin.func"`` with ``PYTFRT_TFRT_REVISION=de22adc4``).

:func:`bef_to_mlir` is the ``tfrt_translate --bef-to-mlir`` pipeline (read + print + the
``Missing ... sections.`` warning); :func:`describe_bef` a short human dump of the sections.
"""

from __future__ import annotations

import math
import re
import struct

from pytfrt.bef.attr_codec import RawAttr, SymbolRefAttr
from pytfrt.bef.format import SECTION_NAMES, BefError, SectionId
from pytfrt.bef.program import Function, Kernel, Program
from pytfrt.bef.reader import read_bef, read_sections
from pytfrt.support import tfrt_revision
from pytfrt.support.attributes import (
    AggregateAttr,
    ArrayAttr,
    Attribute,
    DenseAttr,
    FloatAttr,
    IntAttr,
    ShapeAttr,
    StringAttr,
    TypeAttr,
    UnitAttr,
)
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import (
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    Location,
    NameLoc,
)

MISSING_SECTIONS_WARNING = "Missing AttributeTypes, AttributeNames or RegisterTypes sections."
_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$.]*$")
_FLOAT_BITS = {"f16": ("e", "H", 4), "f32": ("f", "I", 8), "f64": ("d", "Q", 16)}
_DENSE_FORMATS = {
    "i1": "B",
    "i8": "b",
    "i16": "h",
    "i32": "i",
    "i64": "q",
    "ui8": "B",
    "ui16": "H",
    "ui32": "I",
    "ui64": "Q",
    "f16": "e",
    "bf16": "H",
    "f32": "f",
    "f64": "d",
    "complex64": "ff",
    "complex128": "dd",
}


def program_to_mlir(program: Program, *, generic: bool = True, locations: bool = False,
                    op_generic: bool = False) -> str:
    """Print ``program`` as an MLIR module (see the module docstring for the form).

    Args:
        program: the Program (e.g. from :func:`~pytfrt.bef.reader.read_bef`).
        generic: kernels are printed in generic op form; that is the only form this
            disassembler knows (``False`` raises ``NotImplementedError``).
        locations: append ``loc(...)`` to every op and function.
        op_generic: print the module and the functions in generic form too
            (``tfrt_translate --bef-to-mlir --mlir-print-op-generic``), as the MLIR of TFRT's
            main branch does: ``"builtin.module"() ({...}) : () -> ()`` and
            ``"func.func"() <{function_type = (i32) -> i32, sym_name = "f"}> ({...}) : () ->
            ()``; TFRT de22adc4's ``"builtin.func"() ({...}) {sym_name = "f", type = ...}``
            with ``PYTFRT_TFRT_REVISION=de22adc4`` (docs/conformance.md).
    """
    if not generic:
        raise NotImplementedError("only the generic op form is supported")
    return _Printer(program, locations).module(generic=op_generic)


def bef_to_mlir(data: bytes, *, locations: bool = False) -> tuple[str, list[str]]:
    """Read BEF bytes and print them; return ``(mlir_text, warnings)``.

    The warning list holds :data:`MISSING_SECTIONS_WARNING` when any optional section is
    absent (docs/bef.md).  Raises :class:`BefError` for a malformed file.
    """
    program = read_bef(data)
    sections = read_sections(bytes(data))
    optional = (SectionId.ATTRIBUTE_TYPES, SectionId.ATTRIBUTE_NAMES, SectionId.REGISTER_TYPES)
    warnings = [] if all(s in sections for s in optional) else [MISSING_SECTIONS_WARNING]
    return program_to_mlir(program, locations=locations), warnings


def describe_bef(data: bytes) -> str:
    """A short human-readable dump of a BEF file's sections and functions (``DEBUG`` output)."""
    data = bytes(data)
    lines = [f"BEF file, {len(data)} bytes"]
    try:
        sections = read_sections(data)
    except BefError as exc:
        return "\n".join([*lines, f"error: {exc}"])
    for sid, (start, end) in sorted(sections.items(), key=lambda item: item[1]):
        lines.append(
            f"  section {sid:2d} {SECTION_NAMES[sid]:<18} @{start:<7d} {end - start} bytes"
        )
    try:
        program = read_bef(data)
    except BefError as exc:
        return "\n".join([*lines, f"error: {exc}"])
    for i, fn in enumerate(program.functions):
        kind = fn.kind.name.lower()
        lines.append(
            f"  function {i} {fn.name!r} {kind}: {len(fn.argument_types)} args, "
            f"{len(fn.result_types)} results, {fn.num_registers} registers, "
            f"{len(fn.kernels)} kernels"
        )
    return "\n".join(lines)


def _symbol(name: str) -> str:
    return "@" + (name if _BARE.match(name) else _string(name))


def _string(text: str) -> str:
    out = []
    for byte in text.encode("utf-8", "surrogateescape"):
        ch = chr(byte)
        out.append(ch if 0x20 <= byte < 0x7F and ch not in '"\\' else f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


def _float(value: float, kind: str) -> str:
    if math.isfinite(value):
        text = repr(float(value))
        if "e" in text and "." not in text:
            text = text.replace("e", ".0e")
        return text
    if kind == "bf16":
        bits = struct.unpack("<I", struct.pack("<f", value))[0] >> 16
        return f"0x{bits:04X}"
    pack, unpack, digits = _FLOAT_BITS[kind]
    bits = struct.unpack("<" + unpack, struct.pack("<" + pack, value))[0]
    return f"0x{bits:0{digits}X}"


def attribute_to_mlir(attr: Attribute) -> str:
    """MLIR text of one attribute value."""
    if isinstance(attr, IntAttr):
        if attr.type == "i1":
            return "true" if attr.data else "false"
        return f"{attr.data} : {attr.type}"
    if isinstance(attr, FloatAttr):
        return f"{_float(attr.data, attr.type)} : {attr.type}"
    if isinstance(attr, StringAttr):
        return _string(attr.data)
    if isinstance(attr, TypeAttr):
        return attr.name
    if isinstance(attr, UnitAttr):
        return "unit"
    if isinstance(attr, ArrayAttr | AggregateAttr):
        return "[" + ", ".join(attribute_to_mlir(e) for e in attr.elements) + "]"
    if isinstance(attr, ShapeAttr):
        if attr.dims is None:
            return "#corert.shape<*>"
        return "#corert.shape<" + "x".join("?" if d < 0 else str(d) for d in attr.dims) + ">"
    if isinstance(attr, DenseAttr):
        return _dense(attr)
    if isinstance(attr, SymbolRefAttr):
        return "::".join(_symbol(n) for n in (attr.root, *attr.nested))
    if isinstance(attr, RawAttr):
        return "0xdeadbeef : i32"
    raise TypeError(f"cannot print attribute {attr!r}")


def _dense(attr: DenseAttr) -> str:
    elem_type = {"complex64": "complex<f32>", "complex128": "complex<f64>"}.get(
        attr.dtype, attr.dtype
    )
    tensor = "tensor<" + "".join(f"{d}x" for d in attr.shape) + elem_type + ">"
    fmt = _DENSE_FORMATS[attr.dtype]
    raw = struct.unpack(f"<{attr.num_elements * len(fmt)}{fmt[0]}", attr.data)
    if attr.dtype == "i1":
        items = ["true" if v else "false" for v in raw]
    elif attr.dtype == "bf16":
        items = [_float(struct.unpack("<f", struct.pack("<I", v << 16))[0], "bf16") for v in raw]
    elif attr.dtype.startswith("complex"):
        kind = "f32" if attr.dtype == "complex64" else "f64"
        items = [
            f"({_float(raw[i], kind)}, {_float(raw[i + 1], kind)})" for i in range(0, len(raw), 2)
        ]
    elif attr.dtype.startswith("f"):
        items = [_float(v, attr.dtype) for v in raw]
    else:
        items = [str(v) for v in raw]

    def nest(level: int, start: int) -> str:
        if level == len(attr.shape):
            return items[start]
        step = math.prod(attr.shape[level + 1 :])
        inner = [nest(level + 1, start + i * step) for i in range(attr.shape[level])]
        return "[" + ", ".join(inner) + "]"

    body = "" if attr.num_elements == 0 else nest(0, 0)
    return f"dense<{body}> : {tensor}"


def location_to_mlir(loc: Location) -> str:
    """The inside of ``loc(...)`` for a location."""
    if isinstance(loc, FileLineColLoc):
        return f"{_string(loc.file)}:{loc.line}:{loc.col}"
    if isinstance(loc, NameLoc):
        child = "" if loc.child.opaque() == "(unknown)" else f"({location_to_mlir(loc.child)})"
        return _string(loc.name) + child
    if isinstance(loc, CallSiteLoc):
        return f"callsite({location_to_mlir(loc.callee)} at {location_to_mlir(loc.caller)})"
    if isinstance(loc, FusedLoc):
        return "fused[" + ", ".join(location_to_mlir(c) for c in loc.locations) + "]"
    return "unknown"


def _function_attrs(program: Program, kern: Kernel) -> list[tuple[str, str]]:
    """Named function references as (attribute name, MLIR value) pairs.

    ``Kernel.function_attr_names`` holds one name per function-valued attribute.  With as many
    names as references every attribute is a flat ``@f``; with fewer, the leading names are
    flat references and the last name takes the remaining ones as an array (exact for the
    usual cases: all flat, or one array such as ``tfrt.case``'s branches).  Without names the
    references become TFRT's single ``callee`` attribute.
    """
    named = kern.functions[: len(kern.functions) - kern.num_regions]
    if not named:
        return []
    refs = [_symbol(program.functions[f].name) for f in named]
    names = kern.function_attr_names
    if not names or len(names) > len(refs):
        return [("callee", refs[0] if len(refs) == 1 else "[" + ", ".join(refs) + "]")]
    pairs = list(zip(names[:-1], refs, strict=False))
    rest = refs[len(names) - 1 :]
    last = rest[0] if len(rest) == 1 and len(names) == len(refs) else "[" + ", ".join(rest) + "]"
    return [*pairs, (names[-1], last)]


class _Printer:
    def __init__(self, program: Program, locations: bool) -> None:
        self.program = program
        self.locations = locations
        self.counter = 0
        self.arg_counter = 0

    def loc(self, loc: Location) -> str:
        return f" loc({location_to_mlir(loc)})" if self.locations else ""

    def module(self, generic: bool = False) -> str:
        """The module: nested compiled modules, then each named function; with ``generic``
        the module and function ops in generic form (``op_generic``)."""
        lines = ['"builtin.module"() ({' if generic else "module {"]
        for text in self.program.compiled_modules.values():
            lines.extend("  " + line for line in text.strip().splitlines())
        print_function = self.generic_function if generic else self.function
        for fn in self.program.functions:
            if fn.name:
                lines.extend(print_function(fn))
        lines.append("}) : () -> ()" if generic else "}")
        return "\n".join(lines) + "\n"

    def function(self, fn: Function) -> list[str]:
        self.counter = self.arg_counter = 0
        attrs = {FunctionKind.SYNC: " attributes {tfrt.sync}", FunctionKind.NATIVE: ""}
        results = ", ".join(fn.result_types)
        sig_results = "" if not fn.result_types else f" -> ({results})"
        if fn.kind is FunctionKind.NATIVE:
            args = ", ".join(fn.argument_types)
            head = f"  func.func private {_symbol(fn.name)}({args}){sig_results}"
            return [head + " attributes {tfrt.native}" + self.loc(fn.location)]
        names = self.names(fn)
        args = ", ".join(f"{names[a]}: {t}" for a, t in enumerate(fn.argument_types))
        head = f"  func.func {_symbol(fn.name)}({args}){sig_results}{attrs.get(fn.kind, '')} {{"
        body = self.body(fn, names, "    ")
        return [head, *body, "  }" + self.loc(fn.location)]

    def generic_function(self, fn: Function) -> list[str]:
        """``fn`` as a generic function op: TFRT's main branch prints ``"func.func"`` with its
        inherent attributes as properties before the body (``<{function_type = ..., sym_name =
        ...}> ({...})``); with ``PYTFRT_TFRT_REVISION=de22adc4``, ``"builtin.func"`` with
        ``sym_name`` / ``type`` after the body, as MLIR printed it then."""
        self.counter = self.arg_counter = 0
        results = fn.result_types
        ret = results[0] if len(results) == 1 and "->" not in results[0] else (
            "(" + ", ".join(results) + ")")
        signature = f"({', '.join(fn.argument_types)}) -> {ret}"
        main = tfrt_revision.is_main()
        inherent = [f"sym_name = {_string(fn.name)}",
                    f"{'function_type' if main else 'type'} = {signature}"]
        other = []
        if fn.kind is FunctionKind.NATIVE:
            inherent.append('sym_visibility = "private"')
            other.append("tfrt.native")
        elif fn.kind is FunctionKind.SYNC:
            other.append("tfrt.sync")
        if main:
            head = '  "func.func"() <{' + ", ".join(sorted(inherent)) + "}> ({"
            tail = "  })" + (" {" + ", ".join(other) + "}" if other else "") + " : () -> ()"
        else:
            head = '  "builtin.func"() ({'
            tail = "  }) {" + ", ".join(sorted(inherent + other)) + "} : () -> ()"
        tail += self.loc(fn.location)
        if fn.kind is FunctionKind.NATIVE:
            return [head, tail]
        names = self.names(fn)
        lines = [head]
        if fn.num_arguments:
            args = ", ".join(f"{names[a]}: {t}" for a, t in enumerate(fn.argument_types))
            lines.append(f"  ^bb0({args}):")
        lines.extend(self.body(fn, names, "    "))
        lines.append(tail)
        return lines

    def names(self, fn: Function) -> list[str]:
        """SSA names for the registers of ``fn``, unique within the enclosing ``func``."""
        names = [f"%arg{self.arg_counter + a}" for a in range(fn.num_arguments)]
        self.arg_counter += fn.num_arguments
        for _ in range(fn.num_arguments, fn.num_registers):
            names.append(f"%{self.counter}")
            self.counter += 1
        return names

    def body(self, fn: Function, names: list[str], indent: str) -> list[str]:
        """The lines of ``fn``'s kernels and return at ``indent``.

        Regions print inside their kernel's line, named depth-first in program order.  An
        explicit stack instead of recursion: nesting depth costs no Python stack."""
        root = _Body(fn, names, indent)
        stack = [root]
        while stack:
            top = stack[-1]
            if top.pending:  # the next region of the current kernel
                region = self.program.functions[top.pending.pop()]
                stack.append(_Body(region, self.names(region), top.indent + "    ", top))
                continue
            if top.kernel is not None:  # every region of the current kernel is printed
                top.lines.append(self.kernel_line(top, top.kernel, top.regions))
                top.kernel = None
            if top.next < len(top.fn.kernels):
                kern = top.fn.kernels[top.next]
                top.next += 1
                top.kernel, top.regions = kern, []
                count = len(kern.functions)
                top.pending = list(reversed(kern.functions[count - kern.num_regions :]))
                continue
            types = top.fn.register_types
            returned = ", ".join(top.names[r] for r in top.fn.return_registers)
            return_types = ", ".join(types[r] for r in top.fn.return_registers)
            top.lines.append(f'{top.indent}"tfrt.return"({returned}) : ({return_types}) -> ()')
            stack.pop()
            if top.parent is not None:
                top.parent.regions.append(self.region_text(top))
        return root.lines

    def kernel_line(self, at: _Body, kern: Kernel, regions: list[str]) -> str:
        """One kernel as a generic op, with its printed ``regions``."""
        names, types = at.names, at.fn.register_types
        pairs = [(n, attribute_to_mlir(v)) for n, v in kern.attributes]
        pairs += _function_attrs(self.program, kern)
        pairs.sort(key=lambda p: p[0])
        dict_text = ", ".join(f"{n if _BARE.match(n) else _string(n)} = {v}" for n, v in pairs)
        lhs = ", ".join(names[r] for r in kern.results)
        text = at.indent + (f"{lhs} = " if lhs else "")
        text += f"{_string(kern.name)}({', '.join(names[r] for r in kern.operands)})"
        if regions:
            text += " (" + ", ".join(regions) + ")"
        if dict_text:
            text += " {" + dict_text + "}"
        operand_types = ", ".join(types[r] for r in kern.operands)
        result_types = ", ".join(types[r] for r in kern.results)
        return text + f" : ({operand_types}) -> ({result_types})" + self.loc(kern.location)

    @staticmethod
    def region_text(region: _Body) -> str:
        """A printed region: braces, block arguments, then its body's lines."""
        fn, names = region.fn, region.names
        outer = region.indent[:-2]  # the block-argument line's indent
        lines = ["{"]
        if fn.num_arguments:
            args = ", ".join(
                f"{names[a]}: {t}" for a, t in enumerate(fn.register_types[: fn.num_arguments])
            )
            lines.append(f"{outer}^bb0({args}):")
        lines.extend(region.lines)
        lines.append(outer[:-2] + "}")
        return "\n".join(lines)


class _Body:
    """A function body being printed by :meth:`_Printer.body` (one level of its stack)."""

    def __init__(
        self, fn: Function, names: list[str], indent: str, parent: _Body | None = None
    ) -> None:
        self.fn = fn
        self.names = names
        self.indent = indent
        self.parent = parent
        self.lines: list[str] = []
        self.next = 0  # the next kernel to print
        self.kernel: Kernel | None = None  # the kernel whose regions are being printed
        self.regions: list[str] = []  # its regions printed so far
        self.pending: list[int] = []  # its regions still to print (last first)
