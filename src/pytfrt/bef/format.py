"""BEF format constants, error types and the primitive encodings (docs/bef.md).

Everything that both the writer and the reader must agree on lives here: the magic bytes and
version, section ids, the DType and BEFAttributeType codes, the pseudo-kernel markers, and the
VBR integer encoding (7-bit groups, most-significant group first).  See ``docs/bef.md``.
"""

from __future__ import annotations

import enum

from pytfrt.support.errors import PytfrtError
from pytfrt.support.location import Location

MAGIC = b"\x0b\xef"
VERSION = 0
PADDING_BYTE = 0xCC

#: Kernel record code and location of the pseudo kernel 0 (docs/bef.md).
PSEUDO_KERNEL_CODE = 0xABABABAB
PSEUDO_KERNEL_LOCATION = 0xCDCDCDCD
#: Location offsets at or above this value are TFRT "virtual" offsets (no representable
#: location); they decode to the unknown location.
VIRTUAL_LOCATION_BASE = 0xF0000000

#: Canonical header diagnostics (docs/executor.md); :attr:`BefError.reason` carries them verbatim.
BAD_HEADER = "invalid BEF file header detected"
BAD_VERSION = "Unknown BEF format version detected"
BAD_SECTION_HEADER = "BEF file section header corrupted"


class SectionId(enum.IntEnum):
    """Section ids (docs/bef.md); 11 is pytfrt's extension section."""

    STRINGS = 0
    ATTRIBUTES = 1
    KERNELS = 2
    TYPES = 3
    FUNCTION_INDEX = 4
    FUNCTIONS = 5
    LOCATION_STRINGS = 6
    LOCATIONS = 7
    ATTRIBUTE_TYPES = 8
    ATTRIBUTE_NAMES = 9
    REGISTER_TYPES = 10
    #: pytfrt extension (optional, skipped by TFRT readers): per kernel, the names of the
    #: attributes that referred to functions (``Kernel.function_attr_names``).
    FUNCTION_ATTR_NAMES = 11


SECTION_NAMES = {s.value: "".join(p.title() for p in s.name.split("_")) for s in SectionId}


class AttrType(enum.IntEnum):
    """BEFAttributeType codes (docs/bef.md): 1..23 are DType codes; arrays are ``code | 0x80``."""

    UI8 = 1
    UI16 = 2
    UI32 = 3
    UI64 = 4
    I1 = 5
    I8 = 6
    I16 = 7
    I32 = 8
    I64 = 9
    F32 = 10
    F64 = 11
    COMPLEX64 = 12
    COMPLEX128 = 13
    F16 = 14
    BF16 = 15
    STRING = 16
    RESOURCE = 17
    VARIANT = 18
    QUI8 = 19
    QUI16 = 20
    QI8 = 21
    QI16 = 22
    QI32 = 23
    TYPE = 25
    FUNC = 26
    SHAPE = 27
    DENSE = 28
    SYMBOL_REF = 29
    AGGREGATE = 30
    #: pytfrt extension: a unit (presence-only) attribute, encoded as the byte 0x01.
    UNIT = 31


ARRAY_FLAG = 0x80

#: Scalar attribute type name -> (DType code, struct format, byte size).
SCALAR_KINDS: dict[str, tuple[int, str, int]] = {
    "ui8": (1, "B", 1),
    "ui16": (2, "H", 2),
    "ui32": (3, "I", 4),
    "ui64": (4, "Q", 8),
    "i1": (5, "B", 1),
    "i8": (6, "b", 1),
    "i16": (7, "h", 2),
    "i32": (8, "i", 4),
    "i64": (9, "q", 8),
    "f32": (10, "f", 4),
    "f64": (11, "d", 8),
    "f16": (14, "e", 2),
    "bf16": (15, "H", 2),
}
SCALAR_BY_CODE = {code: name for name, (code, _, _) in SCALAR_KINDS.items()}

#: DenseAttr dtype name -> (DType code, element byte size).
DENSE_DTYPES: dict[str, tuple[int, int]] = {
    "ui8": (1, 1),
    "ui16": (2, 2),
    "ui32": (3, 4),
    "ui64": (4, 8),
    "i1": (5, 1),
    "i8": (6, 1),
    "i16": (7, 2),
    "i32": (8, 4),
    "i64": (9, 8),
    "f32": (10, 4),
    "f64": (11, 8),
    "complex64": (12, 8),
    "complex128": (13, 16),
    "f16": (14, 2),
    "bf16": (15, 2),
}
DENSE_BY_CODE = {code: name for name, (code, _) in DENSE_DTYPES.items()}

#: TypeAttr printed type name -> DType code (the one-byte encoding of type attributes).
TYPE_ATTR_CODES: dict[str, int] = {
    "ui8": 1,
    "ui16": 2,
    "ui32": 3,
    "ui64": 4,
    "i1": 5,
    "i8": 6,
    "i16": 7,
    "i32": 8,
    "i64": 9,
    "f32": 10,
    "f64": 11,
    "complex<f32>": 12,
    "complex<f64>": 13,
    "f16": 14,
    "bf16": 15,
    "!corert.string": 16,
    "!corert.resource": 17,
    "!corert.variant": 18,
    "!corert.quint8": 19,
    "!corert.quint16": 20,
    "!corert.qint8": 21,
    "!corert.qint16": 22,
    "!corert.qint32": 23,
}
TYPE_ATTR_BY_CODE = {code: name for name, code in TYPE_ATTR_CODES.items()}


class BefError(PytfrtError):
    """A BEF file is malformed, truncated or inconsistent (raised by the reader only).

    ``str(err)`` names the section and the byte offset (from the start of the file);
    :attr:`reason` is the bare problem (for the header checks exactly TFRT's diagnostic text),
    :attr:`section` the section name (``""`` for the file header) and :attr:`offset` the byte
    offset.
    """

    def __init__(self, reason: str, section: str = "", offset: int = 0) -> None:
        where = f"{section} section" if section else "file header"
        super().__init__(f"{reason} ({where}, byte offset {offset})")
        self.reason = reason
        self.section = section
        self.offset = offset


class BefWriteError(PytfrtError):
    """A Program cannot be encoded as BEF (e.g. ``BEF files cannot encode the 'x' attribute``).

    :attr:`location` is the location of the offending op (or ``None``), so the front end can
    report it as a diagnostic at the source position.
    """

    def __init__(self, message: str, location: Location | None = None) -> None:
        super().__init__(message)
        self.location = location


def encode_vbr(value: int) -> bytes:
    """Encode an unsigned integer as VBR: 7-bit groups, most-significant first (docs/bef.md).

    ``0 -> 00``, ``127 -> 7F``, ``128 -> 81 00``, ``300 -> 82 2C``.
    Raises ``ValueError`` for a negative value.
    """
    if value < 0x80:
        if value < 0:
            raise ValueError(f"VBR integers are unsigned, got {value}")
        return bytes((value,))
    groups = []
    while value:
        groups.append(value & 0x7F)
        value >>= 7
    groups.reverse()
    for i in range(len(groups) - 1):
        groups[i] |= 0x80
    return bytes(groups)


def decode_vbr(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """Decode one VBR integer at ``pos``, reading no byte at or beyond ``end``.

    Returns ``(value, new_pos)``.  Raises ``IndexError`` if the integer runs past ``end`` or
    is longer than 10 bytes (more than 64 bits); callers turn that into a :class:`BefError`.
    """
    value = 0
    limit = pos + 10
    if limit > end:
        limit = end
    while pos < limit:
        byte = data[pos]
        pos += 1
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, pos
    raise IndexError("VBR integer overruns its section")


def align_up(value: int, alignment: int) -> int:
    """The smallest multiple of ``alignment`` that is ``>= value``."""
    return (value + alignment - 1) // alignment * alignment
