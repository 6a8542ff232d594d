"""LocationStrings and Locations sections (docs/bef.md): encoding and validated decoding.

Records: ``00`` unknown; ``01 VBR file, VBR line, VBR col``; ``02 VBR name, <child>``;
``03 <callee> <caller>``; ``04 VBR n, <n children>``.  Strings are offsets into the
LocationStrings section (NUL-terminated, first-use order, deduplicated).  Every op and function
gets its own top-level record (no deduplication, like TFRT); kernels store its byte offset.
"""

from __future__ import annotations

from pytfrt.bef.format import BefError, decode_vbr, encode_vbr
from pytfrt.support.location import (
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    Location,
    NameLoc,
    UnknownLoc,
)

MAX_LOCATION_DEPTH = 64


class LocationEncoder:
    """Accumulates location records and their strings for the writer."""

    def __init__(self) -> None:
        self.records = bytearray()
        self.strings = bytearray()
        self._string_offsets: dict[str, int] = {}

    def add(self, loc: Location) -> int:
        """Append a top-level record for ``loc``; return its offset in the Locations section."""
        offset = len(self.records)
        self._emit(loc)
        return offset

    def _string(self, text: str) -> int:
        offset = self._string_offsets.get(text)
        if offset is None:
            raw = text.encode("utf-8", "surrogateescape")
            if b"\0" in raw:
                raise ValueError(f"location string {text!r} contains a NUL byte")
            offset = len(self.strings)
            self.strings += raw + b"\0"
            self._string_offsets[text] = offset
        return offset

    def _emit(self, loc: Location) -> None:
        out = self.records
        if isinstance(loc, FileLineColLoc):
            out.append(1)
            out += encode_vbr(self._string(loc.file))
            out += encode_vbr(loc.line)
            out += encode_vbr(loc.col)
        elif isinstance(loc, NameLoc):
            out.append(2)
            out += encode_vbr(self._string(loc.name))
            self._emit(loc.child)
        elif isinstance(loc, CallSiteLoc):
            out.append(3)
            self._emit(loc.callee)
            self._emit(loc.caller)
        elif isinstance(loc, FusedLoc):
            out.append(4)
            out += encode_vbr(len(loc.locations))
            for child in loc.locations:
                self._emit(child)
        else:
            out.append(0)


class LocationDecoder:
    """Decodes location records from ``data``; offsets are relative to the Locations section.

    Construction parses the whole section once: it must be a sequence of complete top-level
    records, and only their start offsets are valid references (so a corrupted offset pointing
    into the middle of a record is detected rather than decoded as garbage).
    """

    def __init__(
        self, data: bytes, base: int, end: int, strings_base: int, strings_end: int,
        max_records: int | None = None,
    ) -> None:
        self.data = data
        self.base = base
        self.end = end
        self.strings = _split_strings(data, strings_base, strings_end, "LocationStrings")
        self.records: dict[int, Location] = {}
        pos = base
        while pos < end:
            if max_records is not None and len(self.records) >= max_records:
                # Every top-level record is referenced by at least one byte of the Functions
                # section: more records than that is junk, refused before it costs memory.
                raise self._fail(
                    f"more location records than the Functions section can reference "
                    f"({max_records})", pos)
            loc, next_pos = self._decode(pos, 0)
            self.records[pos - base] = loc
            pos = next_pos

    def get(self, offset: int, section: str, at: int) -> Location:
        """The location at ``offset``; virtual offsets (>= 0xF0000000) are unknown.

        ``section``/``at`` name the referring place for the error message.
        """
        loc = self.records.get(offset)
        if loc is not None:
            return loc
        if offset >= 0xF0000000:
            return UnknownLoc()  # a distinct identity per op, as TFRT's virtual offsets
        raise BefError(f"location offset {offset} is not a location record", section, at)

    def _fail(self, what: str, pos: int) -> BefError:
        return BefError(what, "Locations", pos)

    def _vbr(self, pos: int) -> tuple[int, int]:
        try:
            return decode_vbr(self.data, pos, self.end)
        except IndexError:
            raise self._fail("truncated location record", pos) from None

    def _string(self, pos: int) -> tuple[str, int]:
        offset, next_pos = self._vbr(pos)
        text = self.strings.get(offset)
        if text is None:
            raise self._fail(f"location string offset {offset} is not a string start", pos)
        return text, next_pos

    def _decode(self, pos: int, depth: int) -> tuple[Location, int]:
        if depth > MAX_LOCATION_DEPTH:
            raise self._fail("location records nested too deeply", pos)
        if pos >= self.end:
            raise self._fail("truncated location record", pos)
        kind = self.data[pos]
        pos += 1
        if kind == 0:
            return UnknownLoc(), pos  # each record is its own location (docs/bef.md)
        if kind == 1:
            file, pos = self._string(pos)
            line, pos = self._vbr(pos)
            col, pos = self._vbr(pos)
            return FileLineColLoc(file, line, col), pos
        if kind == 2:
            name, pos = self._string(pos)
            child, pos = self._decode(pos, depth + 1)
            return NameLoc(name, child), pos
        if kind == 3:
            callee, pos = self._decode(pos, depth + 1)
            caller, pos = self._decode(pos, depth + 1)
            return CallSiteLoc(callee, caller), pos
        if kind == 4:
            count, pos = self._vbr(pos)
            if count > self.end - pos:
                raise self._fail(f"fused location count {count} exceeds the section", pos)
            children = []
            for _ in range(count):
                child, pos = self._decode(pos, depth + 1)
                children.append(child)
            return FusedLoc(tuple(children)), pos
        raise self._fail(f"unknown location record kind {kind}", pos - 1)


class StringTable:
    """The strings of a NUL-separated string section, decoded on demand.

    ``get(offset)`` is the text of the string starting at relative ``offset``, or ``None`` if
    no string starts there.  Only looked-up strings are decoded (and cached), so memory grows
    with the references a file makes, never with the section size (a section of 40 million
    empty strings costs nothing until they are used).
    """

    __slots__ = ("_data", "_base", "_end", "_cache")

    def __init__(self, data: bytes, base: int, end: int) -> None:
        self._data = data
        self._base = base
        self._end = end
        self._cache: dict[int, str] = {}

    def get(self, offset: int) -> str | None:
        """The string starting at ``offset``, or ``None``."""
        text = self._cache.get(offset)
        if text is not None:
            return text
        start = self._base + offset
        if offset < 0 or start >= self._end or (offset > 0 and self._data[start - 1] != 0):
            return None
        stop = self._data.index(b"\0", start, self._end)  # the section ends with NUL
        text = bytes(self._data[start:stop]).decode("utf-8", "surrogateescape")
        self._cache[offset] = text
        return text


def _split_strings(data: bytes, base: int, end: int, section: str) -> StringTable:
    """The string table of a section (:class:`StringTable`); the section must end with NUL."""
    if end > base and data[end - 1] != 0:
        raise BefError("string table is not NUL-terminated", section, end - 1)
    return StringTable(data, base, end)


split_strings = _split_strings


def is_unknown(loc: Location) -> bool:
    """Whether ``loc`` is the unknown location."""
    return isinstance(loc, UnknownLoc)
