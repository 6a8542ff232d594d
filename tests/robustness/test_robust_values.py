"""Wrong values are errors, not output: literals, call signatures and kernel names (nesting:
``test_robust_nesting.py``).

Each test feeds the MLIR front end (or the kernel loader) an input that used to produce a
wrong value or an unlocated failure, and checks the diagnostic against its own line and
column, computed from the input text (not hard-coded positions).
"""

from __future__ import annotations

import math
import struct

import pytest

from pytfrt.mlir import MlirError, compile_mlir

pytestmark = pytest.mark.timeout(60)


def error_of(text: str) -> str:
    with pytest.raises(MlirError) as info:
        compile_mlir(text, "bad.mlir")
    return str(info.value)


def test_unknown_op_message_quotes_a_bounded_prefix() -> None:
    name = "tfrt." + "x" * 100_000
    message = error_of("func.func @main() {\n  %a = " + name + " 1\n  tfrt.return\n}\n")
    first = message.splitlines()[0]
    assert first.startswith("bad.mlir:2:8: error: custom op 'tfrt.xxx")
    assert f"({len(name)} characters) is unknown" in first
    assert len(message) < 1000


def test_short_unknown_op_is_quoted_whole() -> None:
    message = error_of("func.func @main() {\n  tfrt.add.i33\n  tfrt.return\n}\n")
    assert "custom op 'tfrt.add.i33' is unknown" in message


@pytest.mark.parametrize(
    "type_,literal,fmt",
    [("f32", "0x7FC00000", "<f"), ("f32", "0xBF800000", "<f"), ("f32", "0x00000001", "<f"),
     ("f64", "0x7FF8000000000000", "<d"), ("f64", "0x3FD0000000000000", "<d"),
     ("f16", "0x3C00", "<e"), ("f16", "0xFC00", "<e")],
)
def test_hex_float_literal_is_a_bit_pattern(type_: str, literal: str, fmt: str) -> None:
    from pytfrt.mlir.api import parse_source

    parsed = parse_source(
        f"func.func @main() {{\n  %a = tfrt.constant.{type_} {literal}\n  tfrt.return\n}}\n",
        "hex.mlir",
    )
    (const,) = [op for op in parsed.module.walk() if op.name == f"tfrt.constant.{type_}"]
    got = const.attributes["value"].value.data  # type: ignore[attr-defined]
    size = struct.calcsize(fmt)
    want = struct.unpack(fmt, int(literal, 16).to_bytes(size, "little"))[0]
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == want


def _sub(a: int, b: int) -> int:
    return a - b


def test_registering_a_builtin_name_is_an_error_unless_overriding() -> None:
    from pytfrt.host.registry import RegistryError, kernel
    from pytfrt.kernel_libraries import builtin_registry

    registry = builtin_registry(entry_points=False)
    with pytest.raises(RegistryError, match=r"kernel 'tfrt\.add\.i32' is already registered"):
        registry.add_kernel("tfrt.add.i32", _sub)
    assert registry.get("tfrt.add.i32").fn is not _sub

    registry.add(kernel("tfrt.add.i32", override=True)(_sub))
    assert registry.get("tfrt.add.i32").fn is _sub
    # The rest of the built-in library is intact.
    assert "tfrt.mul.i32" in registry and not registry.load_errors


def test_a_new_name_needs_no_override() -> None:
    from pytfrt.kernel_libraries import builtin_registry

    registry = builtin_registry(entry_points=False)
    registry.add_kernel("my.sub.i32", _sub)
    assert registry.get("my.sub.i32").fn is _sub
