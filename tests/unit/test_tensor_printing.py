"""Exact TFRT print formats of host tensors, dtypes and shapes (docs/conformance.md)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytfrt.tensor import dtype as dt
from pytfrt.tensor.coo_host_tensor import dense_to_coo
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.scalar_host_tensor import ScalarHostTensor
from pytfrt.tensor.shape import FixedRankShape, PartialTensorShape, TensorShape
from pytfrt.tensor.string_host_tensor import StringHostTensor


def dht(values: object, dtype: dt.DType) -> DenseHostTensor:
    return DenseHostTensor.from_numpy(np.asarray(values, dtype.np_dtype), dtype)


def test_f32_values_use_percent_e() -> None:
    t = dht([[1.0, -2.5], [1e-7, 123456.0]], dt.F32)
    assert str(t) == (
        "DenseHostTensor dtype = f32, shape = [2, 2], values = [1.000000e+00, -2.500000e+00, "
        "1.000000e-07, 1.234560e+05]"
    )


def test_non_finite_values() -> None:
    t = dht([np.inf, -np.inf, np.nan], dt.F64)
    assert str(t) == "DenseHostTensor dtype = f64, shape = [3], values = [INF, -INF, nan]"


def test_truncation_after_16_values() -> None:
    t = dht(np.arange(17), dt.I32)
    expected = ", ".join(str(i) for i in range(16))
    assert str(t) == f"DenseHostTensor dtype = i32, shape = [17], values = [{expected}, ... ]"
    t16 = dht(np.arange(16), dt.I32)
    assert str(t16).endswith("14, 15]")


def test_rank0_and_empty() -> None:
    assert str(dht(2.0, dt.F32)) == (
        "DenseHostTensor dtype = f32, shape = [], values = [2.000000e+00]"
    )
    assert str(dht(np.zeros(0), dt.I32)) == "DenseHostTensor dtype = i32, shape = [0], values = []"


def test_f16_bf16_print_raw_bits() -> None:
    t = dht([1.0, -2.0], dt.F16)
    bits = np.array([1.0, -2.0], np.float16).view(np.uint16).tolist()
    assert str(t) == (
        f"DenseHostTensor dtype = f16, shape = [2], values = [fp16({bits[0]}), fp16({bits[1]})]"
    )
    assert bits == [15360, 49152]
    b = dht([1.0], dt.BF16)
    assert str(b) == "DenseHostTensor dtype = bf16, shape = [1], values = [bf16(16256)]"
    assert np.array([1.0], ml_dtypes.bfloat16).view(np.uint16)[0] == 16256


def test_complex_i1_and_small_ints() -> None:
    c = dht([1 + 2j], dt.COMPLEX64)
    assert str(c).endswith("values = [(1.000000e+00,2.000000e+00)]")
    assert "dtype = complex64" in str(c)
    b = dht([True, False], dt.I1)
    assert str(b) == "DenseHostTensor dtype = i1, shape = [2], values = [1, 0]"
    u = dht([255, 7], dt.UI8)
    assert str(u) == "DenseHostTensor dtype = u8, shape = [2], values = [255, 7]"
    i8 = dht([-128], dt.I8)
    assert str(i8).endswith("values = [-128]")


@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), max_size=20))
def test_float_format_matches_c_printf(values: list[float]) -> None:
    t = dht(values, dt.F32)
    text = str(t)
    shown = ", ".join("%e" % float(np.float32(v)) for v in values[:16])  # noqa: UP031
    if len(values) > 16:
        shown += ", ... "
    assert text == f"DenseHostTensor dtype = f32, shape = [{len(values)}], values = [{shown}]"


def test_dtype_names_codes_and_numpy() -> None:
    names = (
        "u8 u16 u32 u64 i1 i8 i16 i32 i64 bf16 f16 f32 f64 str complex64 complex128 "
        "qu8 qu16 qi8 qi16 qi32"
    )
    for name in names.split():
        d = dt.dtype_from_name(name)
        assert d.name == name
        assert dt.dtype_from_code(d.code) is d
    assert [d.code for d in dt.ALL_DTYPES] == list(range(1, 24))
    assert dt.dtype_from_name("ui8") is dt.UI8
    assert dt.dtype_from_name("bool") is dt.I1
    assert dt.dtype_from_numpy(np.float32) is dt.F32
    assert dt.dtype_from_numpy(ml_dtypes.bfloat16) is dt.BF16
    with pytest.raises(dt.DTypeError, match="unknown dtype 'f8'"):
        dt.dtype_from_name("f8")
    with pytest.raises(dt.DTypeError):
        dt.dtype_from_code(24)


def test_shapes_print_and_compare() -> None:
    assert str(TensorShape([2, 3])) == "[2, 3]"
    assert str(TensorShape([])) == "[]"
    assert TensorShape([2, 3]).num_elements == 6
    assert TensorShape([]).num_elements == 1
    assert TensorShape([4294967295, 65536]).dims == (4294967295, 65536)
    assert str(PartialTensorShape([-1, 57])) == "[-1, 57]"
    assert str(PartialTensorShape(None)) == "Unknown rank"
    with pytest.raises(ValueError, match=r"Unknown dimensions at following indices = \[0, 2\]"):
        PartialTensorShape([-1, 57, -1]).to_shape()
    with pytest.raises(ValueError, match="Unknown rank"):
        PartialTensorShape(None).to_shape()
    assert str(FixedRankShape([1, 0, 3])) == "[]"  # TFRT quirk: zero elements print []
    assert str(FixedRankShape([1, 2, 3])) == "[1, 2, 3]"
    with pytest.raises(ValueError, match="invalid dimension -2"):
        TensorShape([-2])


def test_coo_string_scalar_formats() -> None:
    t = dht(np.full((3, 2), 4), dt.I32)
    coo = dense_to_coo(t)
    assert str(coo) == (
        "CooHostTensor dtype = i32, shape = [3, 2], indices = [0, 0, 0, 1, 0, 2, 1, 0, 1, 1, "
        "1, 2], values = [4, 4, 4, 4, 4, 4]\n"
    )
    z = dense_to_coo(dht(np.zeros((2, 3)), dt.I32))
    assert str(z) == "CooHostTensor dtype = i32, shape = [2, 3], indices = [], values = []\n"
    s = StringHostTensor.create([2], ["string", "tensor"])
    assert str(s) == 'StringHostTensor shape = [2], values = ["string", "tensor"]'
    many = StringHostTensor.create([20], [str(i) for i in range(20)])
    assert str(many).endswith('"15"]')  # 17..32 strings: 16 shown, no ellipsis (quirk)
    more = StringHostTensor.create([33], [str(i) for i in range(33)])
    assert str(more).endswith('"15", ... ]')
    sc = ScalarHostTensor(dt.I32, [2, 2], 1)
    assert str(sc) == "ScalarHostTensor dtype = i32, shape = [2, 2], value = 1"
