"""BEF writer: Program -> bytes (the byte layout is documented in ``docs/bef.md``).

Entry point: :func:`write_bef`.  The writer is a pure function of the Program (plus the stream
analysis it may run); it is deterministic, so writing the same Program twice gives identical
bytes.  Not thread-safe with respect to concurrent mutation of the Program it is given.
"""

from __future__ import annotations

import struct

from pytfrt.bef.attr_codec import Encoded, _place, _Unencodable, encode_attribute
from pytfrt.bef.format import (
    MAGIC,
    PADDING_BYTE,
    PSEUDO_KERNEL_CODE,
    PSEUDO_KERNEL_LOCATION,
    VERSION,
    BefWriteError,
    SectionId,
    encode_vbr,
)
from pytfrt.bef.location_codec import LocationEncoder
from pytfrt.bef.program import Function, Kernel, Program
from pytfrt.bef.streams import assign_stream_ids
from pytfrt.support.function_kind import FunctionKind

vbr = encode_vbr


def write_bef(program: Program, *, optional_sections: bool = True) -> bytes:
    """Encode ``program`` as a BEF file.

    The program is finalized first.  If ``program.streams_assigned`` is False, stream analysis
    (:func:`~pytfrt.bef.streams.assign_stream_ids`) runs first and stores the stream ids in the
    Program (so the caller sees them); otherwise the existing ``Kernel.stream_id`` /
    ``Function.root_stream_id`` values are written as they are (e.g. for a Program read back
    from BEF, whose costs are no longer known).

    Args:
        program: the Program to encode.
        optional_sections: emit AttributeTypes, AttributeNames, RegisterTypes and pytfrt's
            FunctionAttrNames section (TFRT's ``--disable-optional-sections`` is ``False``).
            Without them the reader cannot type attributes (it returns ``RawAttr``) and
            register types are lost.

    Returns:
        The BEF bytes.

    Raises:
        ProgramError: the Program violates the model's invariants.
        BefWriteError: something cannot be encoded (e.g. ``BEF files cannot encode the 'x'
            attribute``); ``err.location`` is the op's location.
    """
    program.finalize()
    if not program.streams_assigned:
        assign_stream_ids(program)
    return _Writer(program, optional_sections).build()


class _Writer:
    def __init__(self, program: Program, optional: bool) -> None:
        self.program = program
        self.optional = optional
        self.bodies = [fn for fn in program.functions if fn.kind is not FunctionKind.NATIVE]
        self.module_ids = {name: i for i, name in enumerate(program.compiled_modules)}
        for fn in self.bodies:
            self._check_registers(fn)
        self._check_regions()
        self.kernel_codes = {name: i for i, name in enumerate(program.kernel_names())}
        self.type_ids: dict[str, int] = {}
        for fn in program.functions:
            for t in (*fn.argument_types, *fn.result_types, *fn.register_types):
                self.type_ids.setdefault(t, len(self.type_ids))
        self.string_offsets, self.strings = self._strings()
        self.attributes = bytearray()
        self.attr_align = 1
        self.attr_offsets: dict[tuple[int, bytes], int] = {}
        self.attr_types: list[tuple[int, int]] = []
        self.locations = LocationEncoder()

    # -- tables
    def _check_registers(self, fn: Function) -> None:
        expected = fn.num_arguments + sum(len(k.results) for k in fn.kernels)
        if len(fn.register_types) != expected:
            raise BefWriteError(
                f"function '{fn.name}' has {len(fn.register_types)} register types, "
                f"expected {expected} (arguments plus kernel results)",
                fn.location,
            )

    def _check_regions(self) -> None:
        functions = self.program.functions
        for i, fn in enumerate(functions):
            for kern in fn.kernels:
                for f in kern.functions[len(kern.functions) - kern.num_regions :]:
                    body = functions[f]
                    if f >= i or body.name or body.kind is FunctionKind.NATIVE:
                        raise BefWriteError(
                            f"region of {kern.name} must be an anonymous function collected "
                            "before the function that contains it",
                            kern.location,
                        )

    def _strings(self) -> tuple[dict[str, int], bytes]:
        names: set[str] = set(self.kernel_codes) | set(self.type_ids)
        names.update(fn.name for fn in self.program.functions)
        if self.optional:
            for fn in self.bodies:
                for kern in fn.kernels:
                    names.update(name for name, _ in kern.attributes)
                    names.update(kern.function_attr_names)
        encoded = sorted(n.encode("utf-8", "surrogateescape") for n in names)
        offsets: dict[str, int] = {}
        out = bytearray()
        for raw in encoded:
            if b"\0" in raw:
                raise BefWriteError(f"name {raw!r} contains a NUL byte")
            offsets[raw.decode("utf-8", "surrogateescape")] = len(out)
            out += raw + b"\0"
        return offsets, bytes(out)

    def _attribute(self, fn: Function, kern: Kernel, name: str, index: int) -> int:
        try:
            enc: Encoded = encode_attribute(
                kern.attributes[index][1], self.module_ids, self.program.compiled_modules
            )
        except _Unencodable as exc:
            raise BefWriteError(
                f"BEF files cannot encode the '{name}' attribute ({exc})", kern.location
            ) from None
        key = (enc.code, enc.data)
        offset = self.attr_offsets.get(key)
        if offset is None:
            start = _place(len(self.attributes), enc.align, enc.phase)
            self.attributes += bytes((PADDING_BYTE,)) * (start - len(self.attributes))
            self.attributes += enc.data
            self.attr_align = max(self.attr_align, enc.align)
            self.attr_offsets[key] = offset = start
            self.attr_types.append((start, enc.code))
        return offset

    # -- functions
    def _kernel_words(self, fn: Function, k: int, kern: Kernel) -> list[int]:
        attrs = [self._attribute(fn, kern, name, i) for i, (name, _) in enumerate(kern.attributes)]
        used_by = fn.used_by[k]
        words = [
            self.kernel_codes[kern.name],
            self.locations.add(kern.location),
            len(kern.operands),
            len(attrs),
            len(kern.functions),
            len(kern.results),
            *(len(u) for u in used_by),
            *kern.operands,
            *attrs,
            *kern.functions,
            *kern.results,
        ]
        for users in used_by:
            words.extend(u + 1 for u in users)
        return words

    def _function_record(self, fn: Function, base: int) -> bytes:
        location = self.locations.add(fn.location)
        nargs = fn.num_arguments
        pseudo = [PSEUDO_KERNEL_CODE, PSEUDO_KERNEL_LOCATION, 0, 0, 0, nargs + 1]
        pseudo += [len(u) for u in fn.pseudo_used_by]
        pseudo += [fn.num_registers, *range(nargs)]
        for users in fn.pseudo_used_by:
            pseudo.extend(u + 1 for u in users)
        records = [pseudo] + [self._kernel_words(fn, k, kern) for k, kern in enumerate(fn.kernels)]
        head = bytearray(vbr(location))
        head += vbr(fn.num_registers)
        head += b"".join(vbr(c) for c in fn.use_counts)
        head += vbr(len(records))
        offset = 0
        streams = [fn.root_stream_id] + [kern.stream_id for kern in fn.kernels]
        ready = [0] + [len(kern.operands) for kern in fn.kernels]
        for words, stream, count in zip(records, streams, ready, strict=True):
            head += vbr(offset) + vbr(count) + vbr(stream)
            offset += 4 * len(words)
        head += b"".join(vbr(r) for r in fn.return_registers)
        head += bytes((PADDING_BYTE,)) * ((-(base + len(head))) % 4)
        body = b"".join(struct.pack(f"<{len(w)}I", *w) for w in records)
        return bytes(head) + body

    # -- assembly
    def build(self) -> bytes:
        functions = bytearray()
        index = bytearray(vbr(len(self.program.functions)))
        for fn in self.program.functions:
            offset = len(functions)
            if fn.kind is not FunctionKind.NATIVE:
                try:
                    functions += self._function_record(fn, offset)
                except (struct.error, ValueError) as exc:
                    raise BefWriteError(
                        f"function '{fn.name}' cannot be encoded: {exc}", fn.location
                    ) from None
            index.append(int(fn.kind))
            index += vbr(offset) + vbr(self.string_offsets[fn.name])
            index += vbr(fn.num_arguments)
            index += b"".join(vbr(self.type_ids[t]) for t in fn.argument_types)
            index += vbr(len(fn.result_types))
            index += b"".join(vbr(self.type_ids[t]) for t in fn.result_types)

        out = bytearray(MAGIC + bytes((VERSION,)))
        _section(out, SectionId.STRINGS, self.strings)
        _section(out, SectionId.ATTRIBUTES, self.attributes, self.attr_align)
        _section(out, SectionId.KERNELS, self._name_table(self.kernel_codes))
        _section(out, SectionId.TYPES, self._name_table(self.type_ids))
        _section(out, SectionId.FUNCTION_INDEX, index)
        _section(out, SectionId.FUNCTIONS, functions, 4)
        _section(out, SectionId.LOCATION_STRINGS, self.locations.strings)
        _section(out, SectionId.LOCATIONS, self.locations.records)
        if self.optional:
            self._optional_sections(out)
        return bytes(out)

    def _name_table(self, table: dict[str, int]) -> bytes:
        out = bytearray(vbr(len(table)))
        for name in table:  # dicts keep insertion (= index) order
            out += vbr(self.string_offsets[name])
        return bytes(out)

    def _optional_sections(self, out: bytearray) -> None:
        types = bytearray(vbr(len(self.attr_types)))
        for offset, code in self.attr_types:
            types += vbr(offset) + vbr(code)
        _section(out, SectionId.ATTRIBUTE_TYPES, types)

        names = bytearray(vbr(len(self.bodies)))
        func_names = bytearray(vbr(len(self.bodies)))
        registers = bytearray(vbr(len(self.bodies)))
        for fn in self.bodies:
            names += vbr(len(fn.kernels) + 1)
            func_names += vbr(len(fn.kernels) + 1) + vbr(0) + vbr(0)
            for kern in fn.kernels:
                names += b"".join(vbr(self.string_offsets[n]) for n, _ in kern.attributes)
                func_names += vbr(kern.num_regions) + vbr(len(kern.function_attr_names))
                func_names += b"".join(
                    vbr(self.string_offsets[n]) for n in kern.function_attr_names
                )
            registers += vbr(len(fn.register_types))
            registers += b"".join(vbr(self.type_ids[t]) for t in fn.register_types)
        _section(out, SectionId.ATTRIBUTE_NAMES, names)
        _section(out, SectionId.REGISTER_TYPES, registers)
        _section(out, SectionId.FUNCTION_ATTR_NAMES, func_names)


def _section(out: bytearray, section_id: int, data: bytes | bytearray, align: int = 1) -> None:
    """Append one section: id, VBR((len << 1) | flag)[, alignment, 0xCC padding], data."""
    out.append(section_id)
    plain = vbr(len(data) << 1)
    if align > 1 and (len(out) + len(plain)) % align:
        out += vbr((len(data) << 1) | 1)
        out.append(align)
        out += bytes((PADDING_BYTE,)) * ((-len(out)) % align)
    else:
        out += plain
    out += data
