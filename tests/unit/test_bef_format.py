"""BEF primitives and file framing: VBR integers, header checks, section headers (docs/bef.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytfrt.bef import BefError, Program, read_bef, write_bef
from pytfrt.bef.builder import build_function
from pytfrt.bef.format import SectionId, decode_vbr, encode_vbr
from pytfrt.bef.reader import read_sections

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "value, encoded",
    [(0, "00"), (127, "7f"), (128, "8100"), (300, "822c"), (16384, "818000")],
)
def test_vbr_spec_examples(value: int, encoded: str) -> None:
    assert encode_vbr(value).hex() == encoded
    assert decode_vbr(bytes.fromhex(encoded), 0, len(encoded) // 2) == (value, len(encoded) // 2)


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_vbr_round_trip(value: int) -> None:
    raw = encode_vbr(value)
    # Independent oracle: 7-bit groups, most significant first, continuation bit on all but last.
    groups = [b & 0x7F for b in raw]
    assert all(b & 0x80 for b in raw[:-1]) and not raw[-1] & 0x80
    assert sum(g << (7 * i) for i, g in enumerate(reversed(groups))) == value
    assert decode_vbr(raw + b"\xff", 0, len(raw) + 1) == (value, len(raw))


def test_vbr_overrun_and_negative() -> None:
    with pytest.raises(IndexError):
        decode_vbr(b"\x81\x82", 0, 2)
    with pytest.raises(IndexError):
        decode_vbr(b"\x81\x00", 0, 1)  # the end bound is respected
    with pytest.raises(ValueError):
        encode_vbr(-1)


def _small_bef() -> bytes:
    fn = build_function("main", ["a"], [("tfrt.add.i32", ["a", "a"], ["b"])], ["b"])
    return write_bef(Program([fn]))


def test_header_and_section_order() -> None:
    data = _small_bef()
    assert data[:3] == b"\x0b\xef\x00"
    sections = read_sections(data)
    order = sorted(sections, key=lambda s: sections[s][0])
    assert order == list(range(12))
    start, _ = sections[SectionId.FUNCTIONS]
    assert start % 4 == 0


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "invalid BEF file header detected"),
        (b"\x0b", "invalid BEF file header detected"),
        (b"\x0c\xef\x00", "invalid BEF file header detected"),
        (b"\x0b\xef", "Unknown BEF format version detected"),
        (b"\x0b\xef\x01", "Unknown BEF format version detected"),
        (b"\x0b\xef\x00\x00", "BEF file section header corrupted"),
        (b"\x0b\xef\x00\x00\x08abc", "BEF file section header corrupted"),
        (b"\x0b\xef\x00\x05\x03\x00", "BEF file section header corrupted"),
        (b"\x0b\xef\x00\x05\x03\x04\x00", "BEF file section header corrupted"),
    ],
)
def test_header_errors(data: bytes, reason: str) -> None:
    with pytest.raises(BefError) as info:
        read_bef(data)
    assert info.value.reason == reason
    assert "byte offset" in str(info.value)


def test_empty_module_and_unknown_sections_are_skipped() -> None:
    data = write_bef(Program([]))
    assert read_bef(data).functions == []
    extra = data + bytes([42]) + encode_vbr(3 << 1) + b"xyz"
    assert read_bef(extra).functions == []


def test_duplicate_section_is_an_error() -> None:
    data = _small_bef()
    start, end = read_sections(data)[SectionId.KERNELS]
    dup = data + bytes([SectionId.KERNELS]) + encode_vbr((end - start) << 1) + data[start:end]
    with pytest.raises(BefError, match="duplicate section"):
        read_bef(dup)


def test_error_names_section_and_offset() -> None:
    data = bytearray(_small_bef())
    start, _ = read_sections(bytes(data))[SectionId.KERNELS]
    data[start] = 9  # kernel count 9 > the bytes that follow
    with pytest.raises(BefError) as info:
        read_bef(bytes(data))
    assert info.value.section == "Kernels" and info.value.offset == start
    assert f"Kernels section, byte offset {start}" in str(info.value)
