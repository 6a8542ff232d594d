"""BEF reader and validator: bytes -> Program (docs/executor.md, docs/bef.md).

Entry point: :func:`read_bef`.  Every count, offset, length, index and cross-reference is
checked against the bytes actually present (each loop is bounded by the remaining bytes), and
every problem becomes one :class:`~pytfrt.bef.format.BefError` naming the section and the byte
offset.  The used-by lists, use counts and ready counts stored in the file must equal the ones
:meth:`Function.finalize` derives from the kernels, so the executor may trust either.

Kernel names are *not* resolved here: the executor does that at load time (docs/executor.md)
and reports an unknown kernel at :func:`first_use_location` (the location of the first kernel
with that name, in function order then program order, exactly the record TFRT would find).
"""

from __future__ import annotations

from pytfrt.bef.attr_codec import AttrDecoder, RawAttr
from pytfrt.bef.cursor import Cursor
from pytfrt.bef.format import (
    BAD_HEADER,
    BAD_SECTION_HEADER,
    BAD_VERSION,
    MAGIC,
    PADDING_BYTE,
    SECTION_NAMES,
    VERSION,
    BefError,
    SectionId,
    decode_vbr,
)
from pytfrt.bef.function_reader import FunctionRecord, read_function_record
from pytfrt.bef.location_codec import LocationDecoder, split_strings
from pytfrt.bef.program import Function, Kernel, Program, ProgramError
from pytfrt.support.attributes import Attribute
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import Location

__all__ = ["Cursor", "first_use_location", "read_bef", "read_sections"]


def read_sections(data: bytes) -> dict[int, tuple[int, int]]:
    """Check the header and split the file into sections: ``{id: (start, end)}``.

    Unknown section ids are skipped; a repeated known id is an error.
    """
    if len(data) < 2 or data[:2] != MAGIC:
        raise BefError(BAD_HEADER, "", 0)
    if len(data) < 3 or data[2] != VERSION:
        raise BefError(BAD_VERSION, "", 2)
    sections: dict[int, tuple[int, int]] = {}
    pos = 3
    total = len(data)
    while pos < total:
        header = pos
        section_id = data[pos]
        try:
            value, pos = decode_vbr(data, pos + 1, total)
        except IndexError:
            raise BefError(BAD_SECTION_HEADER, f"section {section_id}", header) from None
        length, aligned = value >> 1, value & 1
        if aligned:
            if pos >= total:
                raise BefError(BAD_SECTION_HEADER, f"section {section_id}", header)
            align = data[pos]
            pos += 1
            if align == 0 or align & (align - 1):
                raise BefError(BAD_SECTION_HEADER, f"section {section_id}", header)
            padded = pos + (-pos) % align
            if padded > total or any(b != PADDING_BYTE for b in data[pos:padded]):
                raise BefError(BAD_SECTION_HEADER, f"section {section_id}", header)
            pos = padded
        if length > total - pos:
            raise BefError(BAD_SECTION_HEADER, f"section {section_id}", header)
        if section_id in SECTION_NAMES:
            if section_id in sections:
                raise BefError("duplicate section", SECTION_NAMES[section_id], header)
            sections[section_id] = (pos, pos + length)
        pos += length
    return sections


def read_bef(data: bytes | bytearray | memoryview) -> Program:
    """Decode and validate a BEF file; return the finalized Program.

    Without an AttributeTypes section the kernel attributes are :class:`RawAttr` values and
    attribute names are ``attr<i>`` when AttributeNames is missing; without RegisterTypes the
    non-argument registers have type ``none``.  ``Kernel.cost`` and the stream-analysis options
    are not stored in BEF (they come back as defaults); ``streams_assigned`` is True.

    Raises:
        BefError: the bytes are not a valid BEF file (never any other exception).
    """
    return _Reader(bytes(data)).read()


def first_use_location(program: Program, kernel_name: str) -> Location | None:
    """Location of the first kernel named ``kernel_name`` (functions in order, then ops).

    The executor uses it to report ``unknown kernel name '<name>'`` where TFRT does (at
    load time, docs/executor.md).  Returns ``None`` if no kernel has that name.
    """
    for fn in program.functions:
        for kern in fn.kernels:
            if kern.name == kernel_name:
                return kern.location
    return None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.sections = read_sections(data)

    def cursor(self, section: SectionId) -> Cursor:
        start, end = self.sections.get(section, (len(self.data), len(self.data)))
        return Cursor(self.data, start, end, SECTION_NAMES[section])

    def read(self) -> Program:
        start, end = self.sections.get(SectionId.STRINGS, (0, 0))
        self.strings = split_strings(self.data, start, end, "Strings")
        self.kernel_names = self._name_table(SectionId.KERNELS, "kernel name")
        self.type_names = self._name_table(SectionId.TYPES, "type name")
        ls, le = self.sections.get(SectionId.LOCATION_STRINGS, (0, 0))
        lb, lend = self.sections.get(SectionId.LOCATIONS, (0, 0))
        fb, fend = self.sections.get(SectionId.FUNCTIONS, (0, 0))
        self.locations = LocationDecoder(self.data, lb, lend, ls, le, max_records=fend - fb)
        ab, aend = self.sections.get(SectionId.ATTRIBUTES, (0, 0))
        self.attr_decoder = AttrDecoder(self.data, ab, aend)
        self.typed_attrs = self._attribute_types()

        index = self._function_index()
        bodies = [i for i, entry in enumerate(index) if entry[0] is not FunctionKind.NATIVE]
        records: dict[int, FunctionRecord] = {}
        for i in bodies:
            records[i] = read_function_record(self, index[i], len(index))
        reg_types = self._register_types(index, records, bodies)
        attr_names = self._per_kernel_names(SectionId.ATTRIBUTE_NAMES, records, bodies, False)
        func_names = self._per_kernel_names(SectionId.FUNCTION_ATTR_NAMES, records, bodies, True)
        raw_attrs = self._raw_attributes(records) if self.typed_attrs is None else {}

        functions = []
        for i, (kind, name, args, results, _) in enumerate(index):
            if i not in records:
                functions.append(Function(name, kind, list(args), list(results)))
                continue
            rec = records[i]
            fn = Function(
                name,
                kind,
                argument_types=list(args),
                result_types=list(results),
                register_types=reg_types[i],
                return_registers=rec.return_registers,
                location=rec.location,
                root_stream_id=rec.root_stream_id,
            )
            for k, raw in enumerate(rec.kernels):
                names = attr_names[i][k] if attr_names else None
                attributes: list[tuple[str, Attribute]] = []
                for j, offset in enumerate(raw.attribute_offsets):
                    value = (
                        raw_attrs[offset] if self.typed_attrs is None else self.typed_attrs[offset]
                    )
                    attributes.append((names[j] if names else f"attr{j}", value))
                trailing = raw.num_regions
                if trailing is None:  # no FunctionAttrNames: regions are the anonymous tail
                    trailing = 0
                    for f in reversed(raw.functions):
                        if index[f][1] or f >= i:
                            break
                        trailing += 1
                for f in raw.functions[len(raw.functions) - trailing :]:
                    if f >= i or index[f][1] or index[f][0] is FunctionKind.NATIVE:
                        raise BefError(
                            f"kernel region function {f} must be an earlier anonymous function",
                            "Functions",
                            raw.record_start,
                        )
                fn.kernels.append(
                    Kernel(
                        raw.name,
                        raw.operands,
                        raw.results,
                        attributes,
                        raw.functions,
                        raw.location,
                        raw.stream_id,
                        function_attr_names=func_names[i][k] if func_names else [],
                        num_regions=trailing,
                    )
                )
            self._check_derived(fn, rec)
            functions.append(fn)
        program = Program(functions, dict(self.attr_decoder.modules), streams_assigned=True)
        try:
            return program.finalize()
        except ProgramError as exc:
            raise BefError(str(exc), "Functions", self.sections[SectionId.FUNCTIONS][0]) from None

    # -- tables
    def _name_table(self, section: SectionId, what: str) -> list[str]:
        c = self.cursor(section)
        names = [c.string(self.strings, what) for _ in range(c.count(what))]
        c.expect_end()
        return names

    def _attribute_types(self) -> dict[int, Attribute] | None:
        if SectionId.ATTRIBUTE_TYPES not in self.sections:
            return None
        c = self.cursor(SectionId.ATTRIBUTE_TYPES)
        entries: list[tuple[int, int, int]] = []
        for _ in range(c.count("attribute", 2)):
            at = c.pos
            entries.append((c.vbr(), c.vbr(), at))
        c.expect_end()
        typed: dict[int, Attribute] = {}
        extents = []
        for offset, code, at in entries:
            if offset in typed:
                raise c.fail(f"attribute offset {offset} listed twice", at)
            value, end = self.attr_decoder.decode(offset, code)
            typed[offset] = value
            extents.append((offset, end))
        extents.sort()
        for (_, end), (next_start, _) in zip(extents, extents[1:], strict=False):
            if end > next_start:
                raise self.attr_decoder.fail("attributes overlap", next_start)
        return typed

    def _raw_attributes(self, records: dict[int, FunctionRecord]) -> dict[int, Attribute]:
        offsets = sorted(
            {o for rec in records.values() for k in rec.kernels for o in k.attribute_offsets}
        )
        size = self.attr_decoder.end - self.attr_decoder.base
        raw: dict[int, Attribute] = {}
        for i, offset in enumerate(offsets):
            stop = offsets[i + 1] if i + 1 < len(offsets) else size
            base = self.attr_decoder.base
            raw[offset] = RawAttr(offset, self.data[base + offset : base + stop])
        return raw

    def _function_index(self) -> list[tuple[FunctionKind, str, list[str], list[str], int]]:
        c = self.cursor(SectionId.FUNCTION_INDEX)
        fstart, fend = self.sections.get(SectionId.FUNCTIONS, (0, 0))
        entries = []
        ntypes = len(self.type_names)
        for _ in range(c.count("function", 5)):
            at = c.pos
            kind_byte = c.byte()
            if kind_byte not in (0, 1, 2):
                raise c.fail(f"unknown function kind {kind_byte}", at)
            kind = FunctionKind(kind_byte)
            offset = c.vbr()
            if kind is not FunctionKind.NATIVE and offset >= fend - fstart:
                raise c.fail(f"function record offset {offset} out of range", at)
            name = c.string(self.strings, "function name")
            args = [
                self.type_names[c.index(ntypes, "type index")] for _ in range(c.count("argument"))
            ]
            results = [
                self.type_names[c.index(ntypes, "type index")] for _ in range(c.count("result"))
            ]
            entries.append((kind, name, args, results, offset))
        c.expect_end()
        names = [e[1] for e in entries if e[1]]
        if len(names) != len(set(names)):
            raise c.fail("duplicate function name", c.end)
        return entries

    def _register_types(self, index, records, bodies):  # type: ignore[no-untyped-def]
        result: dict[int, list[str]] = {}
        if SectionId.REGISTER_TYPES not in self.sections:
            for i in bodies:
                args = index[i][2]
                result[i] = list(args) + ["none"] * (records[i].num_registers - len(args))
            return result
        c = self.cursor(SectionId.REGISTER_TYPES)
        at = c.pos
        if c.vbr() != len(bodies):
            raise c.fail("function count does not match the FunctionIndex", at)
        ntypes = len(self.type_names)
        for i in bodies:
            at = c.pos
            if c.vbr() != records[i].num_registers:
                raise c.fail("register count does not match the function record", at)
            result[i] = [
                self.type_names[c.index(ntypes, "type index")]
                for _ in range(records[i].num_registers)
            ]
        c.expect_end()
        return result

    def _per_kernel_names(self, section, records, bodies, counted):  # type: ignore[no-untyped-def]
        """AttributeNames (``counted=False``) or FunctionAttrNames: names per kernel."""
        if section not in self.sections:
            return None
        c = self.cursor(section)
        at = c.pos
        if c.vbr() != len(bodies):
            raise c.fail("function count does not match the FunctionIndex", at)
        result: dict[int, list[list[str]]] = {}
        for i in bodies:
            rec = records[i]
            at = c.pos
            if c.vbr() != len(rec.kernels) + 1:
                raise c.fail("kernel count does not match the function record", at)
            if counted and (c.vbr(), c.vbr()) != (0, 0):
                raise c.fail("the pseudo kernel has no function attributes", at)
            per_kernel = []
            for raw in rec.kernels:
                if counted:
                    at = c.pos
                    regions = c.vbr()
                    if regions > len(raw.functions):
                        raise c.fail(f"region count {regions} exceeds the kernel's functions", at)
                    raw.num_regions = regions
                n = c.count("name") if counted else len(raw.attribute_offsets)
                per_kernel.append([c.string(self.strings, "attribute name") for _ in range(n)])
            result[i] = per_kernel
        c.expect_end()
        return result

    def _check_derived(self, fn: Function, rec: FunctionRecord) -> None:
        try:
            fn.finalize()
        except ProgramError as exc:
            raise BefError(str(exc), "Functions", rec.start) from None
        if fn.use_counts != rec.use_counts:
            raise BefError("register use counts do not match the kernels", "Functions", rec.start)
        if rec.pseudo_used_by != fn.pseudo_used_by:
            raise BefError("pseudo kernel used-by lists are inconsistent", "Functions", rec.start)
        for k, raw in enumerate(rec.kernels):
            if raw.used_by != fn.used_by[k]:
                raise BefError(
                    f"kernel {k + 1} used-by lists are inconsistent", "Functions", raw.record_start
                )
