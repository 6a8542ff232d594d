"""Every CPU tensor kernel against its NumPy reference (table-driven, Hypothesis shapes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from op_records import OP_RECORDS, OpRecord, record_cases
from tensor_harness import registry, run

from pytfrt.tensor import dtype as dt
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import DType


@pytest.mark.parametrize(
    ("record", "dtype"),
    record_cases(),
    ids=[r.kernel_name(d) for r, d in record_cases()],
)
@settings(max_examples=20)
@given(data=st.data())
def test_kernel_matches_numpy(record: OpRecord, dtype: DType, data: st.DataObject) -> None:
    shapes = data.draw(record.shapes, label="shapes")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    in_dtypes = (
        record.input_dtypes(dtype) if record.input_dtypes else [dtype] * len(shapes)
    )
    arrays = [record.values(d, s, rng) for d, s in zip(in_dtypes, shapes, strict=True)]
    expected = record.reference(*[a.copy() for a in arrays])
    tensors = [DenseHostTensor.from_numpy(a, d) for a, d in zip(arrays, in_dtypes, strict=True)]
    out = run(record.kernel_name(dtype), record.operands(tensors, dtype), record.attrs)
    assert out.diagnostics == []
    if record.output is None:
        result = out.value()
        assert isinstance(result, DenseHostTensor)
        got = result.array
    else:
        got = tensors[record.output].array
    assert got.shape == np.shape(expected)
    tol = record.tolerance(dtype)
    if tol == 0:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(
            got.astype(np.float64), np.asarray(expected, np.float64), rtol=tol, atol=tol
        )


def test_every_record_names_registered_kernels() -> None:
    names = set(registry().names())
    for record, dtype in record_cases():
        assert record.kernel_name(dtype) in names


def test_all_cpu_families_have_records() -> None:
    """Guard: each registered CPU family (ignoring dtype/rank) is covered by a record or a
    dedicated test in this directory."""
    covered = {r.name.split(".{t}")[0] for r in OP_RECORDS} | {
        "tfrt_test.cast", "tfrt_test.slice_inplace", "tfrt_test.max_pooling_2d",
        "eigen.max_pooling_2d", "tfrt_test.zero_padding", "tfrt_test.broadcast",
    }
    families = {
        n.rsplit(".", 1)[0] if n.count(".") == 2 else ".".join(n.split(".")[:2])
        for n in registry().names()
        if n.startswith(("eigen.", "tfrt_test."))
    }
    families = {".".join(f.split(".")[:2]) for f in families}
    assert families <= {".".join(c.split(".")[:2]) for c in covered}


def test_matmul_beta_zero_ignores_nan_in_output() -> None:
    a = DenseHostTensor.from_numpy(np.ones((2, 2), np.float32))
    c = DenseHostTensor.from_numpy(np.full((2, 2), np.nan, np.float32))
    out = run("eigen.matmul.f32", [np.float32(1), a, a, np.float32(0), c])
    assert out.diagnostics == []
    np.testing.assert_array_equal(c.array, np.full((2, 2), 2, np.float32))


def test_matmul_shape_errors_are_diagnostics() -> None:
    a = DenseHostTensor.from_numpy(np.ones((2, 3), np.float32))
    b = DenseHostTensor.from_numpy(np.ones((2, 2), np.float32))
    c = DenseHostTensor.from_numpy(np.ones((2, 2), np.float32))
    out = run("eigen.matmul.f32", [1.0, a, b, 0.0, c])
    assert out.diagnostics == ["MatMul input tensors inner dimension mismatch: [2, 3] vs. [2, 2]"]
    assert out.error() == out.diagnostics[0]
    c3 = DenseHostTensor.from_numpy(np.ones((3, 3), np.float32))
    out = run("eigen.matmul.f32", [1.0, b, b, 0.0, c3])
    assert out.diagnostics == [
        "MatMul output shape [3, 3] does not match product shape of inputs: [2, 2] * [2, 2]"
    ]


def test_dtype_mismatch_is_a_kernel_error() -> None:
    a = DenseHostTensor.from_numpy(np.ones((2, 2), np.int32))
    out = run("tfrt_test.relu_inplace.f32", [a])
    assert out.diagnostics == ["tensor has dtype i32 but the kernel expects f32"]


def test_broadcast_rank2_bias_as_in_the_xor_playground() -> None:
    bias = DenseHostTensor.from_numpy(np.array([[-3.85270514]], np.float32))
    from pytfrt.tensor.shape import TensorShape

    out = run("tfrt_test.broadcast.f32.2", [bias, TensorShape((4, 1))])
    np.testing.assert_array_equal(out.value().array, np.full((4, 1), -3.85270514, np.float32))
    bad = run("tfrt_test.broadcast.f32.2", [bias, TensorShape((4, 2))])
    assert bad.diagnostics == [
        "broadcast input tensor dimension and target shape mismatch: [1, 1] vs. [4, 2]"
    ]


def test_broadcast_rank3_target_with_rank_suffix_not_enforced() -> None:
    from pytfrt.tensor.shape import TensorShape

    bias = DenseHostTensor.from_numpy(np.array([1, 2], np.float32))
    out = run("tfrt_test.broadcast.f32.2", [bias, TensorShape((3, 1, 2))])
    assert out.value().array.reshape(-1).tolist() == [1, 2, 1, 2, 1, 2]


def test_max_pool_errors_and_same_padding() -> None:
    x = DenseHostTensor.from_numpy(np.zeros((2, 3, 3, 6), np.float32))
    y = DenseHostTensor.from_numpy(np.zeros((2, 1, 1, 6), np.float32))
    out = run("tfrt_test.max_pooling_2d.f32", [x, y], ["invalid", (3, 3), (3, 3)])
    assert out.diagnostics == ["MaxPool2D padding 'invalid' is not recognized"]
    y2 = DenseHostTensor.from_numpy(np.zeros((2, 2, 1, 6), np.float32))
    out = run("tfrt_test.max_pooling_2d.f32", [x, y2], ["valid", (3, 3), (3, 3)])
    assert out.diagnostics == [
        "MaxPool2D output shape [2, 2, 1, 6] does not match the expected output shape "
        "[2, 1, 1, 6]"
    ]
    # "same": 5x5 input, 3x3 window, stride 2 -> 3x3 output; pads 1 on each side.
    arr = np.arange(25, dtype=np.float32).reshape(1, 5, 5, 1) - 30
    xs = DenseHostTensor.from_numpy(arr)
    ys = DenseHostTensor.from_numpy(np.zeros((1, 3, 3, 1), np.float32))
    out = run("eigen.max_pooling_2d.f32", [xs, ys], ["same", (3, 3), (2, 2)])
    assert out.diagnostics == []
    ref = np.full((3, 3), -np.inf, np.float32)
    for i in range(3):
        for j in range(3):
            for di in range(3):
                for dj in range(3):
                    r, c = 2 * i + di - 1, 2 * j + dj - 1
                    if 0 <= r < 5 and 0 <= c < 5:
                        ref[i, j] = max(ref[i, j], arr[0, r, c, 0])
    np.testing.assert_array_equal(ys.array[0, :, :, 0], ref)
    # tfrt_test variant floors at the smallest positive float (quirk)
    out = run("tfrt_test.max_pooling_2d.f32", [xs, ys], ["same", (3, 3), (2, 2)])
    assert np.all(ys.array == np.finfo(np.float32).tiny)


def test_flatten_and_gradient_descent_errors() -> None:
    x = DenseHostTensor.from_numpy(np.zeros((2, 3), np.float32))
    y = DenseHostTensor.from_numpy(np.zeros((3, 2), np.float32))
    out = run("tfrt_test.flatten.f32", [x, y])
    assert out.diagnostics == ["Flatten output shape [3, 2] does not match the input shape [2, 3]"]
    lr = DenseHostTensor.from_numpy(np.zeros((2,), np.float32))
    out = run("tfrt_test.gradient_descent.f32", [x, lr, x])
    assert out.diagnostics == ["GradientDescent lr should have only one element"]


def test_slice_inplace() -> None:
    arr = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x = DenseHostTensor.from_numpy(arr)
    begin = DenseHostTensor.from_numpy(np.array([1, 2, 0], np.int64))
    out_t = DenseHostTensor.from_numpy(np.zeros((2, 2, 3), np.float32))
    from pytfrt.host.async_value import CHAIN

    out = run("tfrt_test.slice_inplace.f32.3", [x, begin, CHAIN, out_t], chain=False)
    assert out.diagnostics == []
    np.testing.assert_array_equal(out_t.array, arr[1:3, 2:4, 0:3])


def test_kernels_allocate_through_the_host_allocator() -> None:
    from pytfrt.host.allocator import FixedSizeAllocator
    from pytfrt.tensor.shape import TensorShape

    log: list[str] = []

    class Log:
        def write(self, s: str) -> None:
            log.append(s)

        def flush(self) -> None:
            pass

    alloc = FixedSizeAllocator(capacity=1024, log=Log())  # type: ignore[arg-type]
    bias = DenseHostTensor.from_numpy(np.ones(32, np.float32))
    out = run("tfrt_test.broadcast.f32.1", [bias, TensorShape((32,))], allocator=alloc)
    assert alloc.remaining == 1024 - 192
    out.value().__tfrt_destroy__()
    assert alloc.remaining == 1024
    big = run("tfrt_test.broadcast.f32.2", [bias, TensorShape((8, 32))], allocator=alloc)
    assert big.diagnostics == ["Cannot allocate tensor"]


def test_cast_truncates_like_static_cast() -> None:
    a = DenseHostTensor.from_numpy(np.array([-1.7, 2.9], np.float32))
    b = DenseHostTensor.from_numpy(np.zeros(2, np.int32))
    run("tfrt_test.cast.f32_to_i32", [a, b])
    assert b.array.tolist() == [-1, 2]
    assert dt.I32 is b.dtype


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64", "float16", "int32", "int64", "int8"]),
       rows=st.integers(1, 40), cols=st.sampled_from([1, 2, 4, 8, 16]), width=st.integers(1, 3),
       in_place=st.booleans())
def test_negative_into_strided_outputs(dtype: str, rows: int, cols: int, width: int,
                                       in_place: bool) -> None:
    # NumPy 2.4's own np.negative writes wrong elements into some strided outputs on AVX-512
    # machines (e.g. a float32 column with rows 16 bytes apart); ops.negative must not.
    from pytfrt.backends.cpu.ops import negative

    width = min(width, cols)
    base = (np.arange(rows * cols).reshape(rows, cols) % 97 + 1).astype(dtype)
    view = base[:, :width]
    want = np.array([[-x for x in row] for row in view.tolist()], dtype)  # Python's negation
    out = view if in_place else np.zeros_like(base)[:, :width]
    assert negative(view, out=out) is out
    np.testing.assert_array_equal(out, want)
