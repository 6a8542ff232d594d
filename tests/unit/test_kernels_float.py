"""Float and complex kernels of ``tfrt`` against NumPy float32/float64 arithmetic and C printf
formatting (``'%f' %``), including the resize-ratio computation where float32 rounding shows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_kernels_support import REGISTRY, invoke, new_host, values_of

from pytfrt.host import make_ready_chain
from pytfrt.kernels.basic import float as fk

F32S = st.floats(
    width=32, allow_nan=False, allow_infinity=False, min_value=-(2.0**60), max_value=2.0**60
)
F64S = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e150, max_value=1e150)


@pytest.mark.parametrize(
    "fn,op",
    [(fk.add_f32, np.add), (fk.multiply_f32, np.multiply)],
)
@given(a=F32S, b=F32S)
def test_f32_arithmetic_rounds_to_float32(fn, op, a: float, b: float) -> None:
    with np.errstate(over="ignore"):
        expected = op(np.array([a], np.float32), np.array([b], np.float32))[0]
    got = fn(np.float32(a), np.float32(b))
    assert isinstance(got, np.float32)
    assert got == expected


@given(a=F32S, b=F32S.filter(lambda b: b != 0.0))
def test_div_f32_rounds_to_float32(a: float, b: float) -> None:
    with np.errstate(over="ignore"):
        expected = np.divide(np.array([a], np.float32), np.array([b], np.float32))[0]
    assert fk.div_f32(np.float32(a), np.float32(b)) == expected


@given(a=F64S, b=F64S)
def test_f64_arithmetic_is_double(a: float, b: float) -> None:
    assert fk.add_f64(a, b) == a + b
    assert fk.multiply_f64(a, b) == a * b
    assert fk.minimum(a, b) == min(a, b)


def test_minimum_is_std_min_with_nan() -> None:
    nan = float("nan")
    assert math.isnan(fk.minimum(nan, 1.0))  # std::min(a, b) = b < a ? b : a
    assert fk.minimum(1.0, nan) == 1.0


@pytest.mark.parametrize("name", ["tfrt.div.f32", "tfrt.div.f64"])
def test_float_div_by_zero_is_emitted(name: str) -> None:
    _, ctx, diags = new_host()
    zero = np.float32(0.0) if name.endswith("f32") else 0.0
    frame = invoke(name, [1.0, zero], exec_ctx=ctx)
    assert diags.messages == ["Divide by zero"]
    assert frame.results[0] is not None and frame.results[0].is_error()


def resize_f32(height: int, width: int, resize_min: float) -> list[np.float32]:
    """The reference computation with NumPy float32 arrays."""
    h = np.array([height], np.int64).astype(np.float32)
    w = np.array([width], np.int64).astype(np.float32)
    smaller = np.minimum(h, w)
    ratio = np.array([resize_min], np.float32) / smaller
    return [h[0], w[0], smaller[0], ratio[0], (h * ratio)[0], (w * ratio)[0]]


def test_resize_ratio_chain_shows_float32_rounding() -> None:
    h = fk.cast_i64_to_f32(737)
    w = fk.cast_i64_to_f32(899)
    smaller = fk.minimum(h, w)
    ratio = fk.div_f32(fk.constant_f32(256.0), smaller)
    new_h = fk.multiply_f32(h, ratio)
    new_w = fk.multiply_f32(w, ratio)
    got = [h, w, smaller, ratio, new_h, new_w]
    assert got == resize_f32(737, 899, 256.0)
    # Known answers (docs/conformance.md): float32 gives 312.271362 where double gives 312.271370.
    assert "%f" % new_w == "312.271362"  # noqa: UP031 - C printf is the oracle
    assert fk.cast_float_to_i64(new_w) == int(resize_f32(737, 899, 256.0)[-1])
    # f64 keeps more digits and truncation of 255.99999... gives 255.
    ratio64 = fk.div_f64(256.0, fk.cast_i64_to_f64(737))
    assert "%f" % fk.multiply_f64(899.0, ratio64) == "312.271370"  # noqa: UP031
    assert fk.cast_float_to_i64(fk.multiply_f64(737.0, ratio64)) == math.trunc(737.0 * ratio64)


@pytest.mark.parametrize(
    "value,expected",
    [(2.9, 2), (-2.9, -2), (float("nan"), -(2**63)), (1e300, -(2**63)), (-0.5, 0)],
)
def test_float_to_i64_truncates(value: float, expected: int) -> None:
    assert fk.cast_float_to_i64(value) == expected


@given(st.integers(-(2**63), 2**63 - 1))
def test_i64_to_f32_single_rounding(value: int) -> None:
    assert fk.cast_i64_to_f32(value) == np.array([value], np.int64).astype(np.float32)[0]


@pytest.mark.parametrize(
    "name,attr,kind",
    [
        ("tfrt.constant.f32", 0.1, np.float32),
        ("tfrt.constant.f64", 0.1, float),
        ("tfrt.constant.f16", 0.1, np.float16),
    ],
)
def test_float_constants_have_their_width(name: str, attr: float, kind: type) -> None:
    (value,) = values_of(invoke(name, attrs=[attr]))
    assert type(value) is kind
    assert value == kind(attr)


def test_bf16_constant() -> None:
    import ml_dtypes

    (value,) = values_of(invoke("tfrt.constant.bf16", attrs=[1.5]))
    assert value.dtype == np.dtype(ml_dtypes.bfloat16) and float(value) == 1.5


def test_complex_constants_bind_imaginary_before_real() -> None:
    # attributes arrive name-sorted: imaginary, real
    assert values_of(invoke("tfrt.constant.complex128", attrs=[2.0, 1.0])) == [complex(1, 2)]
    (c64,) = values_of(invoke("tfrt.constant.complex64", attrs=[-2.5, 1.0]))
    assert c64.dtype == np.complex64 and c64 == np.complex64(1 - 2.5j)


def test_sync_float_constant() -> None:
    ctx = new_host()[1]
    (value,) = REGISTRY.get("tfrt.constant_s.f32").call_sync([], [0.1], [], ctx)
    assert value == np.float32(0.1)


@pytest.mark.parametrize(
    "name,value,line",
    [
        ("tfrt.print.f32", np.float32(7.0), "f32 = 7.000000"),
        ("tfrt.print.f32", np.float32(899) * (np.float32(256) / np.float32(737)), None),
        ("tfrt.print.f64", 256.0 / 737.0, None),
        ("tfrt.print.f64", float("inf"), "f64 = inf"),
        ("tfrt.print.f16", np.float16(1.0), "f16 = 15360"),
        ("tfrt.print.f16", np.float16(-2.0), "f16 = 49152"),
        ("tfrt.print.complex64", np.complex64(1 - 2j), "complex64 = 1.000000+-2.000000i"),
        ("tfrt.print.complex128", complex(0.5, 3), "complex128 = 0.500000+3.000000i"),
    ],
)
def test_float_prints(capsys, name: str, value, line: str | None) -> None:
    invoke(name, [value, make_ready_chain()])
    out = capsys.readouterr().out
    if line is None:  # oracle: C printf %f
        line = f"{name.split('.')[-1]} = " + "%f" % float(value)  # noqa: UP031
    assert out == line + "\n"


def test_f16_bits_match_numpy_view() -> None:
    for v in (0.0, -0.0, 1.0, 65504.0, 1e-7):
        assert fk.f16_bits(v) == int(np.array([v], np.float16).view(np.uint16)[0])


def test_f32_overflow_rounds_to_inf_without_warnings() -> None:
    import warnings

    flt_max = float(np.finfo(np.float32).max)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fk.multiply_f32(np.float32(3e38), np.float32(10)) == np.inf
        assert fk.add_f32(np.float32(-3e38), np.float32(-3e38)) == -np.inf
        # just below the rounding threshold FLT_MAX + ulp/2: still FLT_MAX
        assert fk.to_f32(float.fromhex("0x1.fffffefffp+127")) == flt_max
        assert fk.to_f32(float.fromhex("0x1.ffffffp+127")) == np.inf
        assert np.isnan(fk.to_f32(float("nan")))
