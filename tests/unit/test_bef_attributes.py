"""Attribute encodings (docs/bef.md): byte layouts against hand-computed bytes, and round trips."""

from __future__ import annotations

import math
import struct

import pytest

from pytfrt.bef import BefWriteError, Program, RawAttr, SymbolRefAttr, read_bef, write_bef
from pytfrt.bef.builder import build_function
from pytfrt.bef.format import SectionId
from pytfrt.bef.reader import read_sections
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

pytestmark = pytest.mark.timeout(60)


def program_with(*attrs: Attribute, modules: dict[str, str] | None = None) -> Program:
    named = [(f"a{i:02d}", a) for i, a in enumerate(attrs)]
    fn = build_function("f", [], [("k.op", [], [], {"attributes": named})], [])
    return Program([fn], dict(modules or {}))


def round_trip(*attrs: Attribute, modules: dict[str, str] | None = None) -> list[Attribute]:
    program = read_bef(write_bef(program_with(*attrs, modules=modules)))
    return [value for _, value in program.functions[0].kernels[0].attributes]


def attribute_section(attr: Attribute) -> bytes:
    data = write_bef(program_with(attr))
    start, end = read_sections(data)[SectionId.ATTRIBUTES]
    return data[start:end]


@pytest.mark.parametrize(
    "attr, expected",
    [
        (IntAttr(1, "i1"), "01"),
        (IntAttr(-2, "i8"), "fe"),
        (IntAttr(200, "ui8"), "c8"),
        (IntAttr(-2, "i16"), "feff"),
        (IntAttr(65535, "ui16"), "ffff"),
        (IntAttr(300, "i32"), "2c010000"),
        (IntAttr(-1, "i64"), "ff" * 8),
        (IntAttr(2**64 - 1, "ui64"), "ff" * 8),
        (FloatAttr(1.0, "f32"), "0000803f"),
        (FloatAttr(-2.5, "f64"), struct.pack("<d", -2.5).hex()),
        (FloatAttr(1.0, "f16"), "003c"),
        (FloatAttr(1.0, "bf16"), "803f"),
        (StringAttr("abc"), "03000000616263"),
        (StringAttr(""), "00000000"),
        (TypeAttr("f32"), "0a"),
        (TypeAttr("i1"), "05"),
        (ShapeAttr(None), "00000000"),
        (ArrayAttr((IntAttr(1, "i32"), IntAttr(2, "i32")), "i32"), "020000000100000002000000"),
        (ArrayAttr((), "i32"), "00000000"),
        (UnitAttr(), "01"),
    ],
)
def test_scalar_and_simple_layouts(attr: Attribute, expected: str) -> None:
    assert attribute_section(attr).hex() == expected
    assert round_trip(attr) == [attr]


def test_array_of_i64_places_payload_8_aligned() -> None:
    arr = ArrayAttr((IntAttr(7, "i64"),), "i64")
    raw = attribute_section(arr)
    # count at offset 4 (4 mod 8) so that the payload starts at offset 8.
    assert raw.hex() == "cccccccc01000000" + struct.pack("<q", 7).hex()
    assert round_trip(arr) == [arr]


def test_ranked_shape_layout() -> None:
    shape = ShapeAttr((2, -1, 3))
    raw = attribute_section(shape)
    body = raw[4:]  # placed at 4 mod 8 so the dims are 8-aligned
    assert struct.unpack_from("<BBHII", body) == (8, 0, 12, 12 + 24, 3)
    assert struct.unpack_from("<3q", body, 12) == (2, -1, 3)
    assert round_trip(shape, ShapeAttr(())) == [shape, ShapeAttr(())]


def test_dense_layout() -> None:
    data = struct.pack("<6f", *range(6))
    dense = DenseAttr("f32", (2, 3), data)
    raw = attribute_section(dense)[4:]
    assert struct.unpack_from("<BBHIIII", raw) == (8, 10, 36, 36 + 24, 36, 6, 2)
    assert struct.unpack_from("<2q", raw, 20) == (2, 3)
    assert raw[36:] == data
    cases = [
        dense,
        DenseAttr("i1", (3,), b"\x01\x00\x01"),
        DenseAttr("i64", (), struct.pack("<q", -5)),
        DenseAttr("complex64", (1,), struct.pack("<2f", 1.0, -1.0)),
        DenseAttr("bf16", (0, 4), b""),
    ]
    assert round_trip(*cases) == cases


def test_aggregate_layout_and_nesting() -> None:
    agg = AggregateAttr((StringAttr("hi"), IntAttr(5, "i64")))
    raw = attribute_section(agg)
    align, dtype, _, size, count = struct.unpack_from("<BBHII", raw)
    assert (align, dtype, count, size) == (8, 0, 2, len(raw))
    off0, off1 = struct.unpack_from("<2I", raw, 12)
    assert raw[off0 - 1] == 16 and raw[off0 : off0 + 6] == b"\x02\x00\x00\x00hi"
    assert raw[off1 - 1] == 9 and off1 % 8 == 0
    assert struct.unpack_from("<q", raw, off1) == (5,)
    nested = AggregateAttr(
        (
            AggregateAttr((StringAttr("a"), ArrayAttr((FloatAttr(1.5, "f64"),), "f64"))),
            AggregateAttr(()),
            DenseAttr("i32", (1,), b"\x01\x00\x00\x00"),
            ShapeAttr((4,)),
            TypeAttr("i64"),
            UnitAttr(),
            IntAttr(0, "i1"),
        )
    )
    assert round_trip(agg, nested, AggregateAttr(())) == [agg, nested, AggregateAttr(())]


def test_deduplication_by_value_in_first_encounter_order() -> None:
    one = IntAttr(1, "i32")
    data = write_bef(program_with(one, IntAttr(1, "ui32"), one, FloatAttr(-0.0), FloatAttr(0.0)))
    start, end = read_sections(data)[SectionId.ATTRIBUTES]
    # i32 1, ui32 1 (different type), f32 -0.0, f32 0.0: four distinct encodings.
    assert end - start == 16
    program = read_bef(data)
    values = [v for _, v in program.functions[0].kernels[0].attributes]
    assert values[0] == values[2] == one and values[1] == IntAttr(1, "ui32")
    assert math.copysign(1.0, values[3].data) == -1.0  # type: ignore[attr-defined]


def test_symbol_ref_to_compiled_module() -> None:
    modules = {"kernels": 'module @kernels attributes {tfrt.compiled} {\n  "func.func"() ...\n}'}
    ref = SymbolRefAttr("kernels", ("main",))
    program = read_bef(write_bef(program_with(ref, modules=modules)))
    assert program.functions[0].kernels[0].attributes[0][1] == ref
    assert program.compiled_modules == modules


@pytest.mark.parametrize(
    "attr, why",
    [
        (IntAttr(128, "i8"), "does not fit"),
        (FloatAttr(1e300, "f32"), "does not fit"),
        (TypeAttr("!tfrt.chain"), "type"),
        (SymbolRefAttr("nowhere"), "no compiled module"),
        (DenseAttr("f32", (2,), b"\x00"), "does not match"),
        (StringAttr("\ud800"), "not valid text"),
    ],
)
def test_unencodable_attributes(attr: Attribute, why: str) -> None:
    with pytest.raises(BefWriteError, match=f"BEF files cannot encode the 'a00' attribute.*{why}"):
        write_bef(program_with(attr))


def test_without_attribute_types_attributes_are_raw() -> None:
    attrs = (IntAttr(5, "i32"), StringAttr("xy"))
    data = write_bef(program_with(*attrs), optional_sections=False)
    program = read_bef(data)
    kern = program.functions[0].kernels[0]
    assert [name for name, _ in kern.attributes] == ["attr0", "attr1"]
    raw0, raw1 = (v for _, v in kern.attributes)
    assert isinstance(raw0, RawAttr) and isinstance(raw1, RawAttr)
    assert raw0.data == b"\x05\x00\x00\x00" and raw1.data == b"\x02\x00\x00\x00xy"
    assert program.functions[0].register_types == []
