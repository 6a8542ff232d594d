"""Typed attribute encodings of the BEF Attributes section (docs/bef.md), both directions.

:func:`encode_attribute` turns an :class:`~pytfrt.support.attributes.Attribute` into an
:class:`Encoded` blob (BEFAttributeType code, bytes, and the alignment its offset needs);
:func:`decode_attribute` reads one back from a buffer with full bounds checks.  Layout rules
(``docs/bef.md`` has the byte pictures):

* an encoded attribute must start at an offset ``o`` (relative to the section start) with
  ``o % align == phase``; ``phase`` is 4 for the layouts whose 8-byte payload follows a 4- or
  12-byte prefix (arrays of 8-byte scalars, ranked shapes, dense tensors) and 0 otherwise;
* everything is little-endian; padding bytes are ``0xCC``.

Two attribute kinds exist only in BEF: :class:`SymbolRefAttr` (a reference into a
``tfrt.compiled`` module) and :class:`RawAttr` (what the reader returns when a file carries no
AttributeTypes section, so an attribute's type is unknown).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from pytfrt.bef.format import (
    ARRAY_FLAG,
    DENSE_BY_CODE,
    DENSE_DTYPES,
    PADDING_BYTE,
    SCALAR_BY_CODE,
    SCALAR_KINDS,
    TYPE_ATTR_BY_CODE,
    TYPE_ATTR_CODES,
    AttrType,
    BefError,
    decode_vbr,
    encode_vbr,
)
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

MAX_NESTING = 64
_INT_RANGES = {
    "i1": (0, 1),
    "i8": (-(1 << 7), (1 << 7) - 1),
    "i16": (-(1 << 15), (1 << 15) - 1),
    "i32": (-(1 << 31), (1 << 31) - 1),
    "i64": (-(1 << 63), (1 << 63) - 1),
    "ui8": (0, (1 << 8) - 1),
    "ui16": (0, (1 << 16) - 1),
    "ui32": (0, (1 << 32) - 1),
    "ui64": (0, (1 << 64) - 1),
}


@dataclass(frozen=True, slots=True)
class SymbolRefAttr(Attribute):
    """A symbol reference into a nested ``tfrt.compiled`` module (``@root::@nested...``).

    The module's generic MLIR text is in :attr:`Program.compiled_modules` under ``root``.
    """

    root: str
    nested: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RawAttr(Attribute):
    """An attribute whose type is unknown because the BEF file has no AttributeTypes section.

    ``offset`` is its offset in the Attributes section, ``data`` the bytes from there up to the
    next referenced attribute (or the section end).  Kernels receive the RawAttr itself;
    :func:`~pytfrt.bef.disasm.program_to_mlir` prints it as ``0xdeadbeef : i32`` (docs/bef.md).
    """

    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Encoded:
    """One encoded attribute: its BEFAttributeType ``code``, bytes, and alignment rule."""

    code: int
    data: bytes
    align: int = 1
    phase: int = 0


class _Unencodable(Exception):
    """Internal: the attribute has no BEF encoding (the writer reports it with the name)."""


def attribute_type_code(attr: Attribute) -> int:
    """The BEFAttributeType of ``attr`` (docs/bef.md). Raises ``_Unencodable`` if it has none."""
    if isinstance(attr, IntAttr | FloatAttr):
        return SCALAR_KINDS[attr.type][0]
    if isinstance(attr, StringAttr):
        return AttrType.STRING
    if isinstance(attr, ArrayAttr):
        if attr.element_type not in SCALAR_KINDS:
            raise _Unencodable(f"array element type {attr.element_type!r}")
        return SCALAR_KINDS[attr.element_type][0] | ARRAY_FLAG
    table = {
        TypeAttr: AttrType.TYPE,
        ShapeAttr: AttrType.SHAPE,
        DenseAttr: AttrType.DENSE,
        SymbolRefAttr: AttrType.SYMBOL_REF,
        AggregateAttr: AttrType.AGGREGATE,
        UnitAttr: AttrType.UNIT,
    }
    for cls, code in table.items():
        if isinstance(attr, cls):
            return code
    raise _Unencodable(type(attr).__name__)


def _scalar_bytes(attr: Attribute, kind: str) -> bytes:
    if isinstance(attr, IntAttr) and attr.type == kind:
        low, high = _INT_RANGES[kind]
        if not low <= attr.data <= high:
            raise _Unencodable(f"{attr.data} does not fit {kind}")
        return struct.pack("<" + SCALAR_KINDS[kind][1], attr.data)
    if isinstance(attr, FloatAttr) and attr.type == kind:
        try:
            if kind == "bf16":
                return struct.pack("<H", _to_bf16_bits(attr.data))
            return struct.pack("<" + SCALAR_KINDS[kind][1], attr.data)
        except (OverflowError, struct.error) as exc:
            raise _Unencodable(f"{attr.data} does not fit {kind}") from exc
    raise _Unencodable(f"{attr!r} is not a {kind} scalar")


def _to_bf16_bits(value: float) -> int:
    """Round a float to bfloat16 (round to nearest even, via float32) and return its bits."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if math.isnan(value):
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _from_bf16_bits(bits: int) -> float:
    return float(struct.unpack("<f", struct.pack("<I", bits << 16))[0])


def _place(pos: int, align: int, phase: int) -> int:
    """The first offset ``>= pos`` with ``offset % align == phase``."""
    return pos + (phase - pos) % align


def encode_attribute(
    attr: Attribute, module_ids: dict[str, int], modules: dict[str, str]
) -> Encoded:
    """Encode ``attr`` (docs/bef.md).

    ``module_ids`` maps compiled-module names to compilation-unit ids and ``modules`` holds
    their text (both from :attr:`Program.compiled_modules`).  Raises ``_Unencodable`` when the
    value has no BEF encoding (the writer turns it into ``BEF files cannot encode ...``).
    """
    code = attribute_type_code(attr)
    if isinstance(attr, IntAttr | FloatAttr):
        size = SCALAR_KINDS[attr.type][2]
        return Encoded(code, _scalar_bytes(attr, attr.type), size)
    if isinstance(attr, StringAttr):
        try:
            raw = attr.data.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise _Unencodable("string is not valid text") from exc
        return Encoded(code, struct.pack("<I", len(raw)) + raw, 4)
    if isinstance(attr, UnitAttr):
        return Encoded(code, b"\x01")
    if isinstance(attr, TypeAttr):
        if attr.name not in TYPE_ATTR_CODES:
            raise _Unencodable(f"type {attr.name}")
        return Encoded(code, bytes((TYPE_ATTR_CODES[attr.name],)))
    if isinstance(attr, ArrayAttr):
        size = SCALAR_KINDS[attr.element_type][2]
        align = max(4, size)
        payload = b"".join(_scalar_bytes(e, attr.element_type) for e in attr.elements)
        return Encoded(code, struct.pack("<I", len(attr.elements)) + payload, align, align - 4)
    if isinstance(attr, ShapeAttr):
        if attr.dims is None:
            return Encoded(code, b"\0\0\0\0", 4)
        rank = len(attr.dims)
        head = struct.pack("<BBHII", 8, 0, 12, 12 + 8 * rank, rank)
        try:
            dims = struct.pack(f"<{rank}q", *attr.dims)
        except struct.error as exc:
            raise _Unencodable("shape dimension out of range") from exc
        return Encoded(code, head + dims, 8, 4)
    if isinstance(attr, DenseAttr):
        return _encode_dense(attr)
    if isinstance(attr, AggregateAttr):
        return _encode_aggregate(attr, module_ids, modules)
    assert isinstance(attr, SymbolRefAttr)
    return _encode_symbol_ref(attr, module_ids, modules)


def _encode_dense(attr: DenseAttr) -> Encoded:
    if attr.dtype not in DENSE_DTYPES:
        raise _Unencodable(f"dense element type {attr.dtype}")
    dtype, size = DENSE_DTYPES[attr.dtype]
    if any(d < 0 for d in attr.shape) or len(attr.data) != attr.num_elements * size:
        raise _Unencodable("dense data does not match its shape")
    rank = len(attr.shape)
    element_offset = 20 + 8 * rank
    if element_offset > 0xFFFF or attr.num_elements > 0xFFFFFFFF:
        raise _Unencodable("dense attribute too large")
    byte_size = element_offset + len(attr.data)
    if byte_size > 0xFFFFFFFF:
        raise _Unencodable("dense attribute too large")
    head = struct.pack(
        "<BBHIIII", 8, dtype, element_offset, byte_size, element_offset, attr.num_elements, rank
    )
    return Encoded(AttrType.DENSE, head + struct.pack(f"<{rank}q", *attr.shape) + attr.data, 8, 4)


def _encode_aggregate(
    attr: AggregateAttr, module_ids: dict[str, int], modules: dict[str, str]
) -> Encoded:
    if not attr.elements:
        return Encoded(AttrType.AGGREGATE, b"\0\0\0\0", 4)
    parts = [encode_attribute(e, module_ids, modules) for e in attr.elements]
    align = max([4] + [p.align for p in parts])
    n = len(parts)
    body = bytearray()
    offsets = []
    pos = 12 + 4 * n
    for part in parts:
        start = _place(pos + 1, part.align, part.phase)
        body += bytes((PADDING_BYTE,)) * (start - 1 - pos)
        body.append(part.code)
        offsets.append(start)
        body += part.data
        pos = start + len(part.data)
    if pos > 0xFFFFFFFF:
        raise _Unencodable("aggregate attribute too large")
    head = struct.pack(f"<BBHII{n}I", align, 0, min(12 + 4 * n, 0xFFFF), pos, n, *offsets)
    return Encoded(AttrType.AGGREGATE, head + bytes(body), align)


def _encode_symbol_ref(
    attr: SymbolRefAttr, module_ids: dict[str, int], modules: dict[str, str]
) -> Encoded:
    if attr.root not in module_ids:
        raise _Unencodable(f"symbol reference @{attr.root} (no compiled module of that name)")
    names = [attr.root, *attr.nested]
    encoded_names = [n.encode("utf-8", "surrogateescape") for n in names]
    module = modules[attr.root].encode("utf-8", "surrogateescape")
    if b"\0" in module:
        raise _Unencodable("compiled module text contains a NUL byte")
    out = bytearray(encode_vbr(module_ids[attr.root]))
    out += encode_vbr(len(encoded_names[0]))
    out += encode_vbr(len(attr.nested))
    for name in encoded_names[1:]:
        out += encode_vbr(len(name))
    out += encode_vbr(len(module))
    out += b"".join(encoded_names) + module + b"\0"
    return Encoded(AttrType.SYMBOL_REF, bytes(out))


# --------------------------------------------------------------------------- decoding


class AttrDecoder:
    """Decodes attributes from the Attributes section ``[base, end)`` of ``data``.

    Offsets passed in are relative to ``base``; errors raise :class:`BefError` naming the
    Attributes section and the absolute byte offset.  Compiled modules found in symbol refs
    are collected in :attr:`modules` (root name -> module text).
    """

    def __init__(self, data: bytes, base: int, end: int) -> None:
        self.data = data
        self.base = base
        self.end = end
        self.modules: dict[str, str] = {}
        self.module_ids: dict[int, str] = {}

    def fail(self, what: str, rel: int) -> BefError:
        """Make the error for a problem at relative offset ``rel``."""
        return BefError(what, "Attributes", self.base + rel)

    def decode(
        self, rel: int, code: int, limit: int | None = None, depth: int = 0
    ) -> tuple[Attribute, int]:
        """Decode the attribute of type ``code`` at relative offset ``rel``.

        ``limit`` bounds the attribute's end (relative); returns ``(attribute, end)``.
        """
        end = self.end - self.base if limit is None else min(limit, self.end - self.base)
        if depth > MAX_NESTING:
            raise self.fail("attributes nested too deeply", rel)
        if not 0 <= rel < end:
            raise self.fail(f"attribute offset {rel} out of range", max(rel, 0))
        if code & ARRAY_FLAG:
            return self._array(rel, code & ~ARRAY_FLAG, end)
        if code in SCALAR_BY_CODE:
            return self._scalar(rel, SCALAR_BY_CODE[code], end)
        if code == AttrType.STRING:
            self._check_align(rel, 4, 0)
            n = self._u32(rel, end)
            stop = rel + 4 + n
            if stop > end:
                raise self.fail("string attribute overruns its bounds", rel)
            raw = bytes(self.data[self.base + rel + 4 : self.base + stop])
            return StringAttr(raw.decode("utf-8", "surrogateescape")), stop
        if code == AttrType.UNIT:
            if self._byte(rel, end) != 1:
                raise self.fail("malformed unit attribute", rel)
            return UnitAttr(), rel + 1
        if code == AttrType.TYPE:
            dtype = self._byte(rel, end)
            if dtype not in TYPE_ATTR_BY_CODE:
                raise self.fail(f"unknown type attribute code {dtype}", rel)
            return TypeAttr(TYPE_ATTR_BY_CODE[dtype]), rel + 1
        if code == AttrType.SHAPE:
            return self._shape(rel, end)
        if code == AttrType.DENSE:
            return self._dense(rel, end)
        if code == AttrType.AGGREGATE:
            return self._aggregate(rel, end, depth)
        if code == AttrType.SYMBOL_REF:
            return self._symbol_ref(rel, end)
        raise self.fail(f"unsupported attribute type code {code}", rel)

    # -- primitives
    def _check_align(self, rel: int, align: int, phase: int) -> None:
        if rel % align != phase:
            raise self.fail(f"misaligned attribute (needs offset % {align} == {phase})", rel)

    def _byte(self, rel: int, end: int) -> int:
        if rel + 1 > end:
            raise self.fail("attribute overruns its bounds", rel)
        return self.data[self.base + rel]

    def _u32(self, rel: int, end: int) -> int:
        if rel + 4 > end:
            raise self.fail("attribute overruns its bounds", rel)
        return int(struct.unpack_from("<I", self.data, self.base + rel)[0])

    def _scalar(self, rel: int, kind: str, end: int) -> tuple[Attribute, int]:
        _, fmt, size = SCALAR_KINDS[kind]
        self._check_align(rel, size, 0)
        if rel + size > end:
            raise self.fail("attribute overruns its bounds", rel)
        (raw,) = struct.unpack_from("<" + fmt, self.data, self.base + rel)
        return self._make_scalar(kind, raw, rel), rel + size

    def _make_scalar(self, kind: str, raw: int | float, rel: int) -> Attribute:
        if kind == "i1":
            if raw not in (0, 1):
                raise self.fail(f"invalid i1 value {raw}", rel)
            return IntAttr(int(raw), "i1")
        if kind == "bf16":
            return FloatAttr(_from_bf16_bits(int(raw)), "bf16")
        if kind.startswith(("f", "b")):
            return FloatAttr(float(raw), kind)
        return IntAttr(int(raw), kind)

    def _array(self, rel: int, elem_code: int, end: int) -> tuple[Attribute, int]:
        if elem_code not in SCALAR_BY_CODE:
            raise self.fail(f"unsupported array element type code {elem_code}", rel)
        kind = SCALAR_BY_CODE[elem_code]
        _, fmt, size = SCALAR_KINDS[kind]
        align = max(4, size)
        self._check_align(rel, align, align - 4)
        n = self._u32(rel, end)
        stop = rel + 4 + n * size
        if stop > end:
            raise self.fail(f"array of {n} elements overruns its bounds", rel)
        raws = struct.unpack_from(f"<{n}{fmt}", self.data, self.base + rel + 4)
        elements = tuple(self._make_scalar(kind, r, rel) for r in raws)
        return ArrayAttr(elements, kind), stop

    def _shape(self, rel: int, end: int) -> tuple[Attribute, int]:
        if self._byte(rel, end) == 0:
            self._check_align(rel, 4, 0)
            if self._u32(rel, end) != 0:
                raise self.fail("malformed unranked shape attribute", rel)
            return ShapeAttr(None), rel + 4
        self._check_align(rel, 8, 4)
        if rel + 12 > end:
            raise self.fail("shape attribute overruns its bounds", rel)
        align, dtype, prefix, size, rank = struct.unpack_from("<BBHII", self.data, self.base + rel)
        if (align, dtype, prefix) != (8, 0, 12) or size != 12 + 8 * rank:
            raise self.fail("malformed shape attribute header", rel)
        if rel + size > end:
            raise self.fail("shape attribute overruns its bounds", rel)
        dims = struct.unpack_from(f"<{rank}q", self.data, self.base + rel + 12)
        if any(d < -1 for d in dims):
            raise self.fail("invalid shape dimension", rel)
        return ShapeAttr(tuple(dims)), rel + size

    def _dense(self, rel: int, end: int) -> tuple[Attribute, int]:
        self._check_align(rel, 8, 4)
        if rel + 20 > end:
            raise self.fail("dense attribute overruns its bounds", rel)
        fields = struct.unpack_from("<BBHIIII", self.data, self.base + rel)
        align, dtype, prefix, size, elem_off, count, rank = fields
        if align != 8 or dtype not in DENSE_BY_CODE or elem_off != 20 + 8 * rank:
            raise self.fail("malformed dense attribute header", rel)
        if prefix != elem_off or rel + elem_off > end:
            raise self.fail("malformed dense attribute header", rel)
        name = DENSE_BY_CODE[dtype]
        dims = struct.unpack_from(f"<{rank}q", self.data, self.base + rel + 20)
        if any(d < 0 for d in dims) or math.prod(dims) != count:
            raise self.fail("dense attribute shape does not match its element count", rel)
        if size != elem_off + count * DENSE_DTYPES[name][1] or rel + size > end:
            raise self.fail("dense attribute size is inconsistent or overruns", rel)
        raw = bytes(self.data[self.base + rel + elem_off : self.base + rel + size])
        if name == "i1" and any(b > 1 for b in raw):
            raise self.fail("invalid i1 value in dense attribute", rel)
        return DenseAttr(name, tuple(dims), raw), rel + size

    def _aggregate(self, rel: int, end: int, depth: int) -> tuple[Attribute, int]:
        self._check_align(rel, 4, 0)
        if self._byte(rel, end) == 0:
            if self._u32(rel, end) != 0:
                raise self.fail("malformed empty aggregate attribute", rel)
            return AggregateAttr(()), rel + 4
        if rel + 12 > end:
            raise self.fail("aggregate attribute overruns its bounds", rel)
        align, _, _, size, n = struct.unpack_from("<BBHII", self.data, self.base + rel)
        if align not in (4, 8, 16) or rel % align:
            raise self.fail("malformed aggregate attribute header", rel)
        table = 12 + 4 * n
        if n == 0 or size < table or rel + size > end:
            raise self.fail("aggregate attribute size is inconsistent or overruns", rel)
        offsets = struct.unpack_from(f"<{n}I", self.data, self.base + rel + 12)
        elements = []
        previous_end = table
        for i, off in enumerate(offsets):
            if not previous_end < off < size:
                raise self.fail(f"aggregate element {i} offset {off} out of order or range", rel)
            code = self.data[self.base + rel + off - 1]
            elem_limit = min(offsets[i + 1] - 1, size) if i + 1 < n else size
            elem, elem_end = self.decode(rel + off, code, rel + elem_limit, depth + 1)
            elements.append(elem)
            previous_end = elem_end - rel
        if previous_end != size:
            raise self.fail("aggregate attribute size does not match its elements", rel)
        return AggregateAttr(tuple(elements)), rel + size

    def _symbol_ref(self, rel: int, end: int) -> tuple[Attribute, int]:
        pos = self.base + rel
        stop = self.base + end
        try:
            unit, pos = decode_vbr(self.data, pos, stop)
            root_len, pos = decode_vbr(self.data, pos, stop)
            n_nested, pos = decode_vbr(self.data, pos, stop)
            if n_nested > stop - pos:
                raise IndexError
            lengths = [root_len]
            for _ in range(n_nested):
                length, pos = decode_vbr(self.data, pos, stop)
                lengths.append(length)
            module_len, pos = decode_vbr(self.data, pos, stop)
        except IndexError:
            raise self.fail("truncated symbol reference attribute", rel) from None
        total = sum(lengths) + module_len + 1
        if total > stop - pos or self.data[pos + total - 1] != 0:
            raise self.fail("symbol reference attribute overruns or lacks its NUL", rel)
        names = []
        for length in lengths:
            names.append(bytes(self.data[pos : pos + length]).decode("utf-8", "surrogateescape"))
            pos += length
        module = bytes(self.data[pos : pos + module_len]).decode("utf-8", "surrogateescape")
        known = self.modules.get(names[0])
        if (known is not None and known != module) or self.module_ids.get(unit, names[0]) != names[
            0
        ]:
            raise self.fail("inconsistent compiled module in symbol reference", rel)
        self.modules[names[0]] = module
        self.module_ids[unit] = names[0]
        return SymbolRefAttr(names[0], tuple(names[1:])), pos + module_len + 1 - self.base
