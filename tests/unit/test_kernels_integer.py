"""Integer, boolean and print kernels of ``tfrt`` against independent oracles: NumPy
fixed-width array arithmetic (which wraps silently), exact rational division, C formatting."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_kernels_support import invoke, new_host, values_of

from pytfrt.host import make_ready_chain
from pytfrt.kernels.basic import integer

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)

ARITH = [
    ("add", integer.add_i32, integer.add_i64, np.add),
    ("minus", integer.minus_i32, integer.minus_i64, np.subtract),
    ("mul", integer.mul_i32, integer.mul_i64, np.multiply),
]


def numpy_op(op, dtype, a: int, b: int) -> int:
    return int(op(np.array([a], dtype=dtype), np.array([b], dtype=dtype))[0])


@pytest.mark.parametrize("name,fn32,fn64,op", ARITH)
@given(a=I32, b=I32)
def test_i32_arithmetic_wraps_like_int32(name, fn32, fn64, op, a, b) -> None:
    assert fn32(a, b) == numpy_op(op, np.int32, a, b)


@pytest.mark.parametrize("name,fn32,fn64,op", ARITH)
@given(a=I64, b=I64)
def test_i64_arithmetic_wraps_like_int64(name, fn32, fn64, op, a, b) -> None:
    assert fn64(a, b) == numpy_op(op, np.int64, a, b)


@pytest.mark.parametrize(
    "a,b,expected",
    [
        (2**31 - 1, 1, -(2**31)),
        (-(2**31), -1, 2**31 - 1),
    ],
)
def test_add_i32_known_overflows(a: int, b: int, expected: int) -> None:
    assert integer.add_i32(a, b) == expected


def c_divmod(a: int, b: int) -> tuple[int, int]:
    q = math.trunc(Fraction(a, b))
    return q, a - b * q


@given(a=I32, b=I32.filter(lambda b: b != 0))
def test_div_i32_truncates_toward_zero(a: int, b: int) -> None:
    q, r = c_divmod(a, b)
    if q == 2**31:  # INT32_MIN / -1 wraps
        q = -(2**31)
    assert integer.div_i32(a, b) == (q, r)


@given(a=I64, b=I64.filter(lambda b: b != 0))
def test_div_i64_truncates_toward_zero(a: int, b: int) -> None:
    q, r = c_divmod(a, b)
    if q == 2**63:
        q = -(2**63)
    assert integer.div_i64(a, b) == (q, r)


@pytest.mark.parametrize(
    "a,b,q,r", [(7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1)]
)
def test_div_i32_sign_table(a: int, b: int, q: int, r: int) -> None:
    assert integer.div_i32(a, b) == (q, r)


def test_div_by_zero_is_emitted_and_errors_both_results() -> None:
    host, ctx, diags = new_host()
    frame = invoke("tfrt.div.i32", [5, 0], num_results=2, exec_ctx=ctx)
    assert diags.messages == ["Divide by zero"]
    assert all(r is not None and r.is_error() for r in frame.results)
    assert frame.results[0].error.message == "Divide by zero"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "name,a,b,expected",
    [
        ("tfrt.equal.i32", 3, 3, True),
        ("tfrt.equal.i64", 3, 4, False),
        ("tfrt.lessequal.i32", 3, 3, True),
        ("tfrt.lessequal.i32", 4, 3, False),
        ("tfrt.lessequal.i64", -5, 3, True),
        ("tfrt.and.i1", True, False, False),
        ("tfrt.and.i1", True, True, True),
    ],
)
def test_comparisons_through_registry(name: str, a, b, expected: bool) -> None:
    assert values_of(invoke(name, [a, b])) == [expected]


def test_lessequal_ignores_trailing_chain() -> None:
    assert values_of(invoke("tfrt.lessequal.i32", [1, 2, make_ready_chain()])) == [True]


@pytest.mark.parametrize(
    "name,attr,expected",
    [
        ("tfrt.constant.i32", 42, 42),
        ("tfrt.constant.i32", 2**31, -(2**31)),
        ("tfrt.constant.i64", -7, -7),
        ("tfrt.constant.ui32", -1, 2**32 - 1),
        ("tfrt.constant.ui64", 2**64 + 3, 3),
        ("tfrt.constant.i1", 1, True),
        ("tfrt.constant.i1", False, False),
    ],
)
def test_constants(name: str, attr, expected) -> None:
    frame = invoke(name, attrs=[attr])
    assert values_of(frame) == [expected]
    assert type(values_of(frame)[0]) is type(expected)


def test_sync_variants_are_sync_kernels() -> None:
    from test_kernels_support import REGISTRY

    ctx = new_host()[1]
    assert REGISTRY.get("tfrt.add_s.i32").call_sync([2**31 - 1, 1], [], [], ctx) == [-(2**31)]
    assert REGISTRY.get("tfrt.mul_s.i64").call_sync([3, 4], [], [], ctx) == [12]
    assert REGISTRY.get("tfrt.constant_s.i32").call_sync([], [5], [], ctx) == [5]


@pytest.mark.parametrize(
    "name,value,line",
    [
        ("tfrt.print.i1", True, "int1 = 1"),
        ("tfrt.print.i1", False, "int1 = 0"),
        ("tfrt.print.i32", -5, "int32 = -5"),
        ("tfrt.print.i64", 2**40, "int64 = 1099511627776"),
    ],
)
def test_integer_prints(capsys, name: str, value, line: str) -> None:
    frame = invoke(name, [value, make_ready_chain()])
    assert capsys.readouterr().out == line + "\n"
    assert frame.results[0] is not None and frame.results[0].is_concrete()
