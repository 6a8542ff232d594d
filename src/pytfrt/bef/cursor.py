"""A bounded cursor over BEF bytes, shared by the reader and the function-record decoder.

Every read is checked against the end of its section; an overrun raises
:class:`~pytfrt.bef.format.BefError` naming the section and offset.  Not thread-safe (one
cursor per reading thread).
"""

from __future__ import annotations

from pytfrt.bef.format import BefError, decode_vbr
from pytfrt.bef.location_codec import StringTable


class Cursor:
    """A bounded reader over ``data[pos:end]`` that raises :class:`BefError` on overrun."""

    __slots__ = ("data", "pos", "end", "section")

    def __init__(self, data: bytes, start: int, end: int, section: str) -> None:
        self.data = data
        self.pos = start
        self.end = end
        self.section = section

    def fail(self, what: str, pos: int | None = None) -> BefError:
        """The error for ``what`` at ``pos`` (default: the current position)."""
        return BefError(what, self.section, self.pos if pos is None else pos)

    def vbr(self) -> int:
        """Read one VBR integer."""
        pos = self.pos
        if pos + 1 < self.end:
            byte = self.data[pos]
            if byte < 0x80:
                self.pos = pos + 1
                return byte
            second = self.data[pos + 1]
            if second < 0x80:
                self.pos = pos + 2
                return ((byte & 0x7F) << 7) | second
        try:
            value, self.pos = decode_vbr(self.data, pos, self.end)
        except IndexError:
            raise self.fail("truncated or overlong VBR integer") from None
        return value

    def count(self, what: str, item_size: int = 1) -> int:
        """Read a count whose items take at least ``item_size`` bytes each."""
        at = self.pos
        n = self.vbr()
        if n * item_size > self.end - self.pos:
            raise self.fail(f"{what} count {n} exceeds the remaining bytes", at)
        return n

    def byte(self) -> int:
        """Read one byte."""
        if self.pos >= self.end:
            raise self.fail("unexpected end of section")
        self.pos += 1
        return self.data[self.pos - 1]

    def index(self, limit: int, what: str) -> int:
        """Read a VBR that must be ``< limit``."""
        at = self.pos
        value = self.vbr()
        if value >= limit:
            raise self.fail(f"{what} {value} out of range (limit {limit})", at)
        return value

    def string(self, strings: StringTable, what: str) -> str:
        """Read a VBR string offset that must start a string of the Strings section."""
        at = self.pos
        offset = self.vbr()
        text = strings.get(offset)
        if text is None:
            raise self.fail(f"{what} string offset {offset} is not a string start", at)
        return text

    def expect_end(self) -> None:
        """Require that the whole section was consumed."""
        if self.pos != self.end:
            raise self.fail(f"{self.end - self.pos} unexpected trailing bytes")
