"""Source locations of kernels and functions, and their TFRT renderings.

The location kinds mirror MLIR's (and BEF's location records, docs/bef.md): unknown, file:line:col,
named, call-site and fused.  All are immutable and hashable.

Renderings (docs/bef.md):
* ``str(loc)`` is TFRT's opaque decoding: ``(unknown)``, ``file;line;col`` is *not* used for
  FileLineCol (those decode to structured (file, line, col)), ``<child>(<name>)`` for names,
  ``<callee><-<caller>`` for call sites, comma-joined for fused locations.
* :meth:`Location.debug_info` is what ``tfrt_test.print_debug_info`` prints, or ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytfrt.support import tfrt_revision


class Location:
    """Base class of all location kinds."""

    __slots__ = ()

    def file_line_col(self) -> tuple[str, int, int] | None:
        """Return (file, line, column) if this is a FileLineCol location, else ``None``."""
        return None

    def debug_info(self) -> str | None:
        """Return the debug-info string TFRT derives from this location, or ``None``."""
        return None

    def opaque(self) -> str:
        """Return TFRT's opaque string decoding of this location (docs/bef.md)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class UnknownLoc(Location):
    """No location."""

    def opaque(self) -> str:
        return "(unknown)"

    def __str__(self) -> str:
        return self.opaque()


UNKNOWN_LOC = UnknownLoc()


@dataclass(frozen=True, slots=True)
class FileLineColLoc(Location):
    """A position in a source file; ``line`` and ``col`` are 1-based."""

    file: str
    line: int
    col: int

    def file_line_col(self) -> tuple[str, int, int] | None:
        return (self.file, self.line, self.col)

    def opaque(self) -> str:
        return f"{self.file};{self.line};{self.col}"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class NameLoc(Location):
    """A named location (``loc("name")`` or ``loc("name"(child))``)."""

    name: str
    child: Location = UNKNOWN_LOC

    def file_line_col(self) -> tuple[str, int, int] | None:
        return None

    def debug_info(self) -> str | None:
        return self.name

    def opaque(self) -> str:
        if isinstance(self.child, UnknownLoc):
            return self.name
        return f"{self.child.opaque()}({self.name})"

    def __str__(self) -> str:
        return self.opaque()


@dataclass(frozen=True, slots=True)
class CallSiteLoc(Location):
    """A call-site location: ``callee`` called from ``caller``."""

    callee: Location
    caller: Location

    def debug_info(self) -> str | None:
        if isinstance(self.callee, NameLoc):
            return self.callee.name
        return None

    def opaque(self) -> str:
        return f"{self.callee.opaque()}<-{self.caller.opaque()}"

    def __str__(self) -> str:
        return self.opaque()


@dataclass(frozen=True, slots=True)
class FusedLoc(Location):
    """Several locations fused into one."""

    locations: tuple[Location, ...]

    def debug_info(self) -> str | None:
        # TFRT's main branch joins the named components (``fused["foo", "bar"]`` -> ``foobar``;
        # none -> ``""``); de22adc4 took the first one (``foo``; none -> no debug info).
        names = [loc.name for loc in self.locations if isinstance(loc, NameLoc)]
        if tfrt_revision.is_main():
            return "".join(names)
        return names[0] if names else None

    def opaque(self) -> str:
        return ",".join(loc.opaque() for loc in self.locations)

    def __str__(self) -> str:
        return self.opaque()
