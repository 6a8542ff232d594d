"""``ts``, ``tfrt_dht``, ``coo`` and ``tfrt_sht`` kernels, invoked directly on kernel frames."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensor_harness import registry, run

from pytfrt.host.allocator import FixedSizeAllocator
from pytfrt.tensor import dtype as dt
from pytfrt.tensor.dense_host_tensor import DenseHostTensor, HostBuffer
from pytfrt.tensor.kernels.dht_kernels import dense_allclose
from pytfrt.tensor.shape import FixedRankShape, PartialTensorShape, TensorShape


def dht(values: object, dtype: dt.DType = dt.I32) -> DenseHostTensor:
    return DenseHostTensor.from_numpy(np.asarray(values, dtype.np_dtype), dtype)


# -- ts ------------------------------------------------------------------------------------------


def test_shape_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    s = run("ts.build_shape", [], [(1, 57, 92)], chain=False).value()
    assert s == TensorShape([1, 57, 92])
    run("ts.print_shape", [s])
    run("ts.print_shape", [TensorShape([])])
    assert capsys.readouterr().out == "shape = [1, 57, 92]\nshape = []\n"
    assert run("ts.get_num_elements", [s], chain=False).value() == 1 * 57 * 92
    assert run("ts.get_dimension", [s, 1], chain=False).value() == 57
    assert run("ts.equal_shape", [s, TensorShape([1, 57, 92])], chain=False).value() is True
    assert run("ts.equal_shape", [s, TensorShape([])], chain=False).value() is False
    f = run("ts.as_fixed_rank_shape.3", [s], chain=False).value()
    assert f == FixedRankShape([1, 57, 92])
    run("ts.print_fixed_rank_shape.3", [f])
    assert capsys.readouterr().out == "fixed_rank_shape = [1, 57, 92]\n"


def test_partial_shape_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    p = run("ts.build_partial_shape", [], [(-1, 57, -1)], chain=False).value()
    run("ts.print_partial_shape", [p])
    u = run("ts.build_unranked_partial_shape", [], chain=False).value()
    run("ts.print_partial_shape", [u])
    assert capsys.readouterr().out == (
        "partial_tensor_shape = [-1, 57, -1]\npartial_tensor_shape = Unknown rank\n"
    )
    bad = run("ts.to_shape", [p], chain=False)
    assert bad.diagnostics == ["Unknown dimensions at following indices = [0, 2]"]
    assert run("ts.to_shape", [u], chain=False).diagnostics == ["Unknown rank"]
    ok = run("ts.to_shape", [PartialTensorShape([1, 2])], chain=False).value()
    assert ok == TensorShape([1, 2])
    back = run("ts.to_partial_shape", [ok], chain=False).value()
    assert back == PartialTensorShape([1, 2])


# -- tfrt_dht -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", dt.NUMERIC_DTYPES, ids=lambda d: d.mlir_name)
def test_create_fill_set_equal_for_every_dtype(dtype: dt.DType) -> None:
    t = run(f"tfrt_dht.create_uninitialized_tensor.{dtype.mlir_name}.2", [], [(2, 3)],
            chain=False).value()
    assert t.dtype is dtype and t.array.shape == (2, 3)
    one = True if dtype is dt.I1 else 1
    fill = run(f"tfrt_dht.fill_tensor_with_constant.{dtype.mlir_name}", [t], [one])
    assert fill.diagnostics == []
    assert np.all(t.array == dtype.np_dtype.type(one))
    vals = tuple(bool(i % 2) if dtype is dt.I1 else i for i in range(6))
    run(f"tfrt_dht.set_tensor_with_constant_values.{dtype.mlir_name}", [t], [vals])
    np.testing.assert_array_equal(t.array.reshape(-1), np.asarray(vals, dtype.np_dtype))
    same = DenseHostTensor.from_numpy(t.array.copy(), dtype)
    eq = run(f"tfrt_dht.tensor_equal.{dtype.mlir_name}", [t, same], num_results=2)
    assert eq.value(0) is True
    same.array.reshape(-1)[1] = dtype.np_dtype.type(0 if dtype is not dt.I1 else False)
    ne = run(f"tfrt_dht.tensor_equal.{dtype.mlir_name}", [t, same], num_results=2)
    assert ne.value(0) is False


def test_bool_suffix_alias_and_rank_suffix_is_an_upper_bound() -> None:
    t = run("tfrt_dht.create_uninitialized_tensor.bool.1", [], [(4,)], chain=False).value()
    assert t.dtype is dt.I1 and t.array.shape == (4,)
    # Shorter than the suffix: accepted (TFRT's MNIST program creates its biases this way).
    t2 = run("tfrt_dht.create_uninitialized_tensor.f32.2", [], [(2,)], chain=False).value()
    assert t2.array.shape == (2,)
    # Longer than the suffix: an error at the kernel.
    out = run("tfrt_dht.create_uninitialized_tensor.bool.0", [], [(4,)], chain=False)
    assert out.diagnostics == ["shape [4] has 1 dimensions, more than the kernel's rank 0"]
    out = run("tfrt_dht_sync.create_uninitialized_tensor.f32.1", [], [(2, 3)], chain=False)
    assert out.diagnostics == ["shape [2, 3] has 2 dimensions, more than the kernel's rank 1"]


def test_set_values_count_mismatch_and_wrong_dtype() -> None:
    t = dht(np.zeros(3))
    out = run("tfrt_dht.set_tensor_with_constant_values.i32", [t], [(1, 2)])
    assert out.diagnostics == ["Incorrect number of values for the tensor: 2, but expected 3"]
    out = run("tfrt_dht.fill_tensor_with_constant.f32", [t], [1.0])
    assert out.diagnostics == ["tensor has dtype i32 but the kernel expects f32"]
    from pytfrt.host.async_value import CHAIN

    ok = run("tfrt_dht.set_tensor_with_values.i32", [t, CHAIN, 7, 8, 9], chain=False)
    assert ok.diagnostics == [] and t.array.tolist() == [7, 8, 9]


def test_allocator_accounting_and_refusal() -> None:
    alloc = FixedSizeAllocator(capacity=1024, log=_NullLog())  # type: ignore[arg-type]
    t = run("tfrt_dht.create_uninitialized_tensor.f32.1", [], [(32,)], allocator=alloc,
            chain=False).value()
    assert alloc.remaining == 1024 - 192
    big = run("tfrt_dht.create_uninitialized_tensor.f32.1", [], [(1024,)], allocator=alloc,
              chain=False)
    assert big.diagnostics == ["Cannot allocate tensor"]
    t.__tfrt_destroy__()
    t.__tfrt_destroy__()  # idempotent
    assert alloc.remaining == 1024


class _NullLog:
    def write(self, s: str) -> None:
        pass

    def flush(self) -> None:
        pass


def test_print_and_shape_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    t = dht([[1, -1], [-1, 1]])
    run("tfrt_dht.print_tensor", [t])
    run("tfrt_dht.print_tensor_shape", [t])
    assert capsys.readouterr().out == (
        "DenseHostTensor dtype = i32, shape = [2, 2], values = [1, -1, -1, 1]\n[2, 2]\n"
    )
    assert run("tfrt_dht.get_tensor_shape", [t], chain=False).value() == TensorShape([2, 2])


def test_buffers_and_make_tensor(capsys: pytest.CaptureFixture[str]) -> None:
    t = dht([1, 2, 3, 4])
    buf = run("tfrt_dht.get_buffer", [t], num_results=2).value()
    assert isinstance(buf, HostBuffer) and buf.size == 16
    sl = run("tfrt_dht.get_buffer_slice", [buf, 4, 8], chain=False).value()
    made = run("tfrt_dht.make_tensor.i32", [sl, TensorShape([2])], num_results=2).value()
    assert made.array.tolist() == [2, 3]
    made.array[0] = 20
    assert t.array.tolist() == [1, 20, 3, 4]  # shares the bytes
    bad = run("tfrt_dht.make_tensor.i32", [sl, TensorShape([3])], num_results=2)
    assert bad.diagnostics == [
        "dht.make_tensor failed: buffer_size (8) is not equal to the number of elements in "
        "shape ([3]) times element size (4)"
    ]
    run("tfrt_dht.print_buffer", [sl])
    assert capsys.readouterr().out.startswith("HostBuffer<pointer=0x")
    new = run("tfrt_dht.allocate_buffer", [24, 8], chain=False).value()
    assert new.size == 24


@given(
    hnp.arrays(np.float32, hnp.array_shapes(max_dims=2, max_side=4),
               elements=st.floats(-1e3, 1e3, width=32)),
    st.sampled_from([2, 3, 1000]),
)
def test_allclose_against_formula(a: np.ndarray, ulp: int) -> None:
    eps = np.finfo(np.float32).eps
    b = (a * np.float32(1 + 1.5 * eps)).astype(np.float32)
    diff = np.abs(a.astype(np.float64) - b)
    ref = np.all(
        (np.abs(a - b) <= np.float32(eps) * np.abs(a + b) * ulp)
        | (np.abs(a - b) < np.finfo(np.float32).tiny)
    )
    assert dense_allclose(dht(a, dt.F32), dht(b, dt.F32), ulp) == bool(ref)
    assert diff.shape == a.shape


def test_allclose_kernels() -> None:
    a = dht([1.0, 2.0], dt.F32)
    b = dht([1.0, 2.0 + 1e-6], dt.F32)
    c = dht([1.0, 2.5], dt.F32)
    assert run("tfrt_dht.tensor_allclose.f32", [a, b], num_results=2).value() is True
    assert run("tfrt_dht.tensor_allclose.1000ulp.f32", [a, c], num_results=2).value() is False
    d = dht([1.0, 2.0, 3.0], dt.F32)
    assert run("tfrt_dht.tensor_allclose.f32", [a, d], num_results=2).value() is False
    names = registry().names()
    for infix in ("", "3ulp.", "1000ulp.", "2000ulp.", "100000ulp."):
        assert f"tfrt_dht.tensor_allclose.{infix}f32" in names


# -- coo and sht ----------------------------------------------------------------------------------


def test_coo_round_trip_square(capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    a = dht(rng.integers(-2, 3, size=(10, 10)))
    s = run("coo.convert_dht_to_coo.i32.2", [a], num_results=2).value()
    d = run("coo.convert_coo_to_dht.i32.2", [s], num_results=2).value()
    np.testing.assert_array_equal(d.array, a.array)
    f = run("coo.convert_dht_to_coo.i32.2", [d], num_results=2).value()
    assert run("coo.tensor_equal.i32.2", [s, f], num_results=2).value() is True
    ones = run("coo.convert_dht_to_coo.i32.2", [dht(np.ones((10, 10)))], num_results=2).value()
    assert run("coo.tensor_equal.i32.2", [s, ones], num_results=2).value() is False
    run("tfrt_dht.print_tensor", [run("coo.convert_dht_to_coo.f32.2",
                                       [dht(np.ones((2, 2)), dt.F32)], num_results=2).value()])
    assert capsys.readouterr().out == (
        "CooHostTensor dtype = f32, shape = [2, 2], indices = [0, 0, 0, 1, 1, 0, 1, 1], values = "
        "[1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00]\n\n"
    )


def test_string_tensor_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    t = run("tfrt_sht.create_tensor", [], [(2,), ("string", "tensor")], chain=False).value()
    run("tfrt_dht.print_tensor", [t])
    u = run("tfrt_sht.create_uninitialized_tensor", [], [(2,)], chain=False).value()
    run("tfrt_dht.print_tensor", [u])
    assert capsys.readouterr().out == (
        'StringHostTensor shape = [2], values = ["string", "tensor"]\n'
        'StringHostTensor shape = [2], values = ["", ""]\n'
    )
    bad = run("tfrt_sht.create_tensor", [], [(3,), ("a",)], chain=False)
    assert bad.diagnostics == ["Incorrect number of values for the tensor: 1, but expected 3"]


def test_zero_copy_numpy_interop() -> None:
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = DenseHostTensor.from_numpy(arr)
    assert t.numpy() is arr and t.dtype is dt.F32
    assert t.shape == TensorShape([2, 3]) and t.num_elements == 6
    assert str(t.metadata) == "f32 [2, 3]"
    with pytest.raises(ValueError, match="cannot hold TFRT dtype i32"):
        DenseHostTensor.from_numpy(arr, dt.I32)
    q = DenseHostTensor.from_numpy(np.array([1], np.int8), dt.QI8)
    assert "dtype = qi8" in str(q)
