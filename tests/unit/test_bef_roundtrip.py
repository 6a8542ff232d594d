"""BEF round trips and corruption: hand-built Programs, random Programs, mutated files.

* Whole-Program round trips (regions, sync and native functions, every location kind, every
  attribute kind): ``read_bef(write_bef(p))`` holds everything BEF stores of ``p`` and writing
  it again gives identical bytes.
* Hypothesis: random Programs (random DAGs of kernels with random attributes) round trip.
* Hypothesis: truncated, bit-flipped, spliced and overwritten BEF files either load or raise
  ``BefError`` -- never another exception, never a hang -- and whatever loads can be printed.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytfrt.bef import (
    BefError,
    BefWriteError,
    RawAttr,
    describe_bef,
    first_use_location,
    program_to_mlir,
    read_bef,
    write_bef,
)
from pytfrt.bef.builder import build_function
from pytfrt.bef.disasm import bef_to_mlir
from pytfrt.bef.format import DENSE_DTYPES, SCALAR_KINDS, TYPE_ATTR_CODES
from pytfrt.bef.program import Function, Kernel, Program
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
    UNKNOWN_LOC,
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    Location,
    NameLoc,
)

_RANGES = {
    "i1": (0, 1),
    "i8": (-128, 127),
    "i16": (-(2**15), 2**15 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "ui8": (0, 255),
    "ui16": (0, 2**16 - 1),
    "ui32": (0, 2**32 - 1),
    "ui64": (0, 2**64 - 1),
}
TYPES = ["i32", "i64", "f32", "!tfrt.chain", "!t.tensor", "none"]


def _bf16(x: float) -> float:
    bits = struct.unpack("<I", struct.pack("<f", x))[0] & 0xFFFF0000
    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


def scalar_of(kind: str) -> st.SearchStrategy[Attribute]:
    """A random scalar attribute of type ``kind`` (exactly representable values, no NaN)."""
    if kind in _RANGES:
        low, high = _RANGES[kind]
        return st.integers(low, high).map(lambda v: IntAttr(v, kind))
    if kind == "bf16":
        floats = st.floats(width=32, allow_nan=False).map(_bf16)
    else:
        floats = st.floats(width={"f16": 16, "f32": 32, "f64": 64}[kind], allow_nan=False)
    return floats.map(lambda v: FloatAttr(v, kind))


def _dense() -> st.SearchStrategy[Attribute]:
    def make(dtype: str, shape: tuple[int, ...], data: st.DataObject) -> Attribute:
        n = 1
        for d in shape:
            n *= d
        size = DENSE_DTYPES[dtype][1]
        if dtype == "i1":
            raw = bytes(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
        else:
            raw = data.draw(st.binary(min_size=n * size, max_size=n * size))
        return DenseAttr(dtype, shape, raw)

    return st.builds(
        make,
        st.sampled_from(sorted(DENSE_DTYPES)),
        st.lists(st.integers(0, 3), max_size=3).map(tuple),
        st.data(),
    )


def _leaf() -> st.SearchStrategy[Attribute]:
    kinds = sorted(SCALAR_KINDS)
    array = st.sampled_from(kinds).flatmap(
        lambda k: st.lists(scalar_of(k), max_size=4).map(lambda es: ArrayAttr(tuple(es), k))
    )
    shapes = st.one_of(st.none(), st.lists(st.integers(-1, 2**40), max_size=4).map(tuple)).map(
        ShapeAttr
    )
    return st.one_of(
        st.sampled_from(kinds).flatmap(scalar_of),
        st.text(max_size=8).map(StringAttr),
        st.sampled_from(sorted(TYPE_ATTR_CODES)).map(TypeAttr),
        st.just(UnitAttr()),
        array,
        shapes,
        _dense(),
    )


def attributes() -> st.SearchStrategy[Attribute]:
    """Any encodable attribute, aggregates nested up to a few levels."""
    return st.recursive(
        _leaf(),
        lambda inner: st.lists(inner, max_size=4).map(lambda es: AggregateAttr(tuple(es))),
        max_leaves=8,
    )


def locations() -> st.SearchStrategy[Location]:
    """Locations of every kind."""
    flc = st.builds(
        FileLineColLoc,
        st.sampled_from(["a.mlir", "b/c.mlir"]),
        st.integers(1, 500),
        st.integers(1, 120),
    )
    return st.recursive(
        st.one_of(st.just(UNKNOWN_LOC), flc),
        lambda inner: st.one_of(
            st.builds(
                NameLoc,
                st.text(
                    st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                    max_size=5,
                ),
                inner,
            ),
            st.builds(CallSiteLoc, inner, inner),
            st.lists(inner, max_size=3).map(lambda ls: FusedLoc(tuple(ls))),
        ),
        max_leaves=4,
    )


ATTRIBUTES = attributes()
LOCATIONS = locations()


@st.composite
def _function(draw: st.DrawFn, name: str, callees: list[int], kind: FunctionKind) -> Function:
    nargs = draw(st.integers(0, 3))
    register_types = [draw(st.sampled_from(TYPES)) for _ in range(nargs)]
    kernels = []
    for _ in range(draw(st.integers(0, 8))):
        defined = len(register_types)
        operands = draw(st.lists(st.integers(0, defined - 1), max_size=3)) if defined else []
        results = list(range(defined, defined + draw(st.integers(0, 2))))
        register_types += [draw(st.sampled_from(TYPES)) for _ in results]
        names = sorted(
            draw(st.sets(st.sampled_from(["value", "id", "b", "a_1", "zz"]), max_size=3))
        )
        attrs = [(n, draw(ATTRIBUTES)) for n in names]
        refs = draw(st.lists(st.sampled_from(callees), max_size=2)) if callees else []
        kernels.append(
            Kernel(
                draw(st.sampled_from(["tfrt.add.i32", "k.op", "tfrt.merge.chains", "x.y.z"])),
                operands,
                results,
                attrs,
                refs,
                draw(LOCATIONS),
                cost=draw(st.one_of(st.none(), st.integers(1, 20))),
                function_attr_names=[f"fn{i}" for i in range(len(refs))],
            )
        )
    n = len(register_types)
    returns = draw(st.lists(st.integers(0, n - 1), max_size=3)) if n else []
    return Function(
        name,
        kind,
        register_types[:nargs],
        [register_types[r] for r in returns],
        register_types,
        kernels,
        returns,
        draw(LOCATIONS),
        cost_threshold=draw(st.sampled_from([-1, 1, 5, 20])),
    )


@st.composite
def programs(draw: st.DrawFn) -> Program:
    """A random valid Program (finalized, stream ids not yet assigned)."""
    functions: list[Function] = []
    if draw(st.booleans()):
        functions.append(Function("native", FunctionKind.NATIVE, ["i32"], ["i32"]))
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from([FunctionKind.BEF, FunctionKind.SYNC]))
        callees = [j for j, f in enumerate(functions) if f.name]
        if draw(st.booleans()):  # a region body used by a kernel of the next function
            body = draw(_function("", callees, FunctionKind.BEF))
            functions.append(body)
            fn = draw(_function(f"f{i}", callees, kind))
            fn.kernels.append(
                Kernel("tfrt.repeat.i32", [], [], functions=[len(functions) - 1], num_regions=1)
            )
        else:
            fn = draw(_function(f"f{i}", callees, kind))
        functions.append(fn)
    return Program(functions).finalize()


def assert_same_program(got: Program, want: Program) -> None:
    """Assert that ``got`` (read back from BEF) holds everything BEF stores of ``want``."""
    assert len(got.functions) == len(want.functions)
    assert got.compiled_modules == want.compiled_modules
    for g, w in zip(got.functions, want.functions, strict=True):
        assert (g.name, g.kind, g.argument_types, g.result_types) == (
            w.name,
            w.kind,
            w.argument_types,
            w.result_types,
        )
        if w.kind is FunctionKind.NATIVE:
            continue
        assert g.register_types == w.register_types
        assert g.return_registers == w.return_registers
        assert g.location == w.location
        assert g.root_stream_id == w.root_stream_id
        assert (g.use_counts, g.used_by, g.pseudo_used_by) == (
            w.use_counts,
            w.used_by,
            w.pseudo_used_by,
        )
        assert len(g.kernels) == len(w.kernels)
        for gk, wk in zip(g.kernels, w.kernels, strict=True):
            for field in (
                "name",
                "operands",
                "results",
                "attributes",
                "functions",
                "location",
                "stream_id",
                "function_attr_names",
                "num_regions",
            ):
                assert getattr(gk, field) == getattr(wk, field), field


# --------------------------------------------------------------------------- tests

pytestmark = pytest.mark.timeout(120)


def hand_built_program() -> Program:
    body = build_function(
        "", ["x"], [("tfrt.add.i32", ["x", "x"], ["y"], {"location": NameLoc("inner")})], ["y"]
    )
    sync = build_function(
        "sync_fn",
        ["a", "b"],
        [("tfrt.add.i32.sync", ["a", "b"], ["c"])],
        ["c"],
        kind=FunctionKind.SYNC,
        location=FileLineColLoc("s.mlir", 1, 1),
    )
    native = Function("native_fn", FunctionKind.NATIVE, ["i32"], ["i32", "!tfrt.chain"])
    main = build_function(
        "main",
        ["ch", "n"],
        [
            (
                "tfrt.constant.i32",
                [],
                ["c"],
                {
                    "attributes": [("value", IntAttr(5, "i32"))],
                    "location": FileLineColLoc("m.mlir", 3, 4),
                },
            ),
            (
                "tfrt.repeat.i32",
                ["n", "c"],
                ["r"],
                {
                    "functions": [0],
                    "num_regions": 1,
                    "location": CallSiteLoc(NameLoc("callee"), FileLineColLoc("m.mlir", 5, 6)),
                },
            ),
            (
                "tfrt.call",
                ["r", "c"],
                ["s"],
                {
                    "functions": [1],
                    "function_attr_names": ["callee"],
                    "location": FusedLoc((NameLoc("a"), UNKNOWN_LOC, FileLineColLoc("x", 1, 2))),
                },
            ),
            ("tfrt.case", ["s"], [], {"functions": [1, 2], "function_attr_names": ["branches"]}),
            ("tfrt.print.i32", ["s", "ch"], ["ch1"], {"location": NameLoc("p", UNKNOWN_LOC)}),
        ],
        ["ch1", "s", "s"],
        types={"ch": "!tfrt.chain", "ch1": "!tfrt.chain"},
        location=FileLineColLoc("m.mlir", 1, 1),
        cost_threshold=1,
    )
    return Program([body, sync, native, main]).finalize()


def test_hand_built_program_round_trip() -> None:
    program = hand_built_program()
    data = write_bef(program)
    assert program.streams_assigned
    got = read_bef(data)
    assert got.streams_assigned
    assert_same_program(got, program)
    assert write_bef(got) == data
    text = program_to_mlir(got, locations=True)
    assert "func.func @sync_fn(%arg0: i32, %arg1: i32) -> (i32) attributes {tfrt.sync}" in text
    assert (
        "func.func private @native_fn(i32) -> (i32, !tfrt.chain) attributes {tfrt.native}" in text
    )
    assert '"tfrt.call"(%1, %0) {callee = @sync_fn}' in text
    assert "{branches = [@sync_fn, @native_fn]}" in text
    assert 'loc(callsite("callee" at "m.mlir":5:6))' in text
    assert 'loc(fused["a", unknown, "x":1:2])' in text
    assert "^bb0(%arg2: i32):" in text


def test_disabled_optional_sections() -> None:
    program = hand_built_program()
    got = read_bef(write_bef(program, optional_sections=False))
    main = got.get("main")
    assert main.register_types == ["!tfrt.chain", "i32", "none", "none", "none", "none"]
    assert main.kernels[0].attributes[0][0] == "attr0"
    assert isinstance(main.kernels[0].attributes[0][1], RawAttr)
    assert main.kernels[2].function_attr_names == []
    text, warnings = bef_to_mlir(write_bef(program, optional_sections=False))
    assert warnings == ["Missing AttributeTypes, AttributeNames or RegisterTypes sections."]
    assert "{attr0 = 0xdeadbeef : i32}" in text and "{callee = @sync_fn}" in text
    assert bef_to_mlir(write_bef(program))[1] == []


def test_unknown_kernel_first_use_location() -> None:
    program = read_bef(write_bef(hand_built_program()))
    assert first_use_location(program, "tfrt.add.i32") == NameLoc("inner")
    assert first_use_location(program, "tfrt.constant.i32") == FileLineColLoc("m.mlir", 3, 4)
    assert first_use_location(program, "nope") is None


def test_writer_runs_stream_analysis_only_when_needed() -> None:
    program = hand_built_program()
    for kern in program.get("main").kernels:
        kern.stream_id = 77
    program.streams_assigned = True
    got = read_bef(write_bef(program))
    assert {k.stream_id for k in got.get("main").kernels} == {77}
    program.streams_assigned = False
    write_bef(program)
    assert 77 not in {k.stream_id for k in program.get("main").kernels}


def test_inconsistent_register_types_are_a_write_error() -> None:
    program = hand_built_program()
    program.get("main").register_types.append("i32")
    with pytest.raises(BefWriteError, match="register types"):
        write_bef(program)


@given(programs())
def test_random_programs_round_trip(program: Program) -> None:
    data = write_bef(program)
    got = read_bef(data)
    assert_same_program(got, program)
    assert write_bef(got) == data
    program_to_mlir(got)
    describe_bef(data)


_SAMPLES = [
    write_bef(hand_built_program()),
    write_bef(hand_built_program(), optional_sections=False),
]


def _check_loads_or_bef_error(data: bytes) -> None:
    try:
        program = read_bef(data)
    except BefError:
        return
    program_to_mlir(program)
    try:
        write_bef(program)
    except BefWriteError:  # only untyped (raw) attributes may be unencodable
        assert any(
            isinstance(v, RawAttr)
            for fn in program.functions
            for k in fn.kernels
            for _, v in k.attributes
        )


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        data = write_bef(draw(programs()), optional_sections=draw(st.booleans()))
    else:
        data = draw(st.sampled_from(_SAMPLES))
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["truncate", "flip", "splice", "overwrite", "insert"]))
        if not buf:
            break
        i = draw(st.integers(0, len(buf) - 1))
        if how == "truncate":
            del buf[i:]
        elif how == "flip":
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif how == "splice":
            j = draw(st.integers(0, len(buf) - 1))
            n = draw(st.integers(1, 16))
            buf[i:i] = buf[j : j + n]
        elif how == "overwrite":
            junk = draw(st.binary(min_size=1, max_size=8))
            buf[i : i + len(junk)] = junk
        else:
            buf[i:i] = draw(st.binary(min_size=1, max_size=4))
    return bytes(buf)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_corrupted_files_load_or_raise_bef_error(data: bytes) -> None:
    _check_loads_or_bef_error(data)


def test_every_single_byte_truncation_and_flip_of_a_sample() -> None:
    """Exhaustive over one sample: every prefix, and every bit of every byte flipped."""
    data = _SAMPLES[0]
    for cut in range(len(data)):
        _check_loads_or_bef_error(data[:cut])
    for i in range(len(data)):
        for bit in (0, 3, 7):
            buf = bytearray(data)
            buf[i] ^= 1 << bit
            _check_loads_or_bef_error(bytes(buf))
