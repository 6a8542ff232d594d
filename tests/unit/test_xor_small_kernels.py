"""The XOR program's kernels after their small-tensor fast paths: same results as NumPy's own.

The fast paths (``backends/cpu/ops.py``, ``playground/mlp.py``, ``tensor/``) skip NumPy's
Python-level dispatch; these tests check them bit for bit against the calls they replace
(``np.mean``, ``np.prod``-based shape checks, ``DenseHostTensor.create``'s conversion) on random
inputs, and that bad input still gets the same errors.
"""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytfrt.backends.cpu import ops
from pytfrt.host import HostContext, ResourceContext
from pytfrt.host.allocator import HostAllocator
from pytfrt.host.registry import KernelError
from pytfrt.kernel_libraries import builtin_registry
from pytfrt.playground.mlp import mse_loss_f32
from pytfrt.tensor import dtype as dt
from pytfrt.tensor.dense_host_tensor import DenseHostTensor, allocate_dense
from pytfrt.tensor.shape import ShapeError

FLOATS32 = st.floats(-1e6, 1e6, width=32, allow_nan=False)


def _arrays(dtype: type, rows: st.SearchStrategy[int]) -> st.SearchStrategy[np.ndarray]:
    return st.tuples(rows, st.integers(1, 5)).flatmap(
        lambda s: hnp.arrays(dtype, s, elements=st.floats(-1e6, 1e6, width=32 if dtype is
                                                          np.float32 else 64))
    )


@settings(max_examples=200, deadline=None)
@given(_arrays(np.float32, st.integers(1, 40)))
def test_mean_axis_zero_matches_np_mean_f32(a: np.ndarray) -> None:
    out = np.empty(a.shape[1], np.float32)
    ops.mean_axis_zero(a, out)
    expected = np.mean(a, axis=0, dtype=np.float32)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


@settings(max_examples=100, deadline=None)
@given(_arrays(np.float64, st.integers(1, 40)))
def test_mean_axis_zero_matches_np_mean_f64(a: np.ndarray) -> None:
    out = np.empty(a.shape[1], np.float64)
    ops.mean_axis_zero(a, out)
    np.testing.assert_array_equal(out, np.mean(a, axis=0, dtype=np.float64))


def test_mean_axis_zero_empty_keeps_np_mean_behaviour() -> None:
    out = np.zeros(3, np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ops.mean_axis_zero(np.zeros((0, 3), np.float32), out)
    assert np.isnan(out).all()
    assert any("Mean of empty slice" in str(w.message) for w in caught)


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return builtin_registry()


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9).flatmap(
    lambda n: st.tuples(hnp.arrays(np.float32, (n, 1), elements=FLOATS32),
                        hnp.arrays(np.float32, (n, 1), elements=FLOATS32))))
def test_mse_loss_matches_np_mean(pair: tuple[np.ndarray, np.ndarray]) -> None:
    p, t = pair
    got = mse_loss_f32(DenseHostTensor.from_numpy(p), DenseHostTensor.from_numpy(t))
    diff = p - t
    expected = float(np.float32(np.mean(diff * diff, dtype=np.float32)))
    assert got == expected or (np.isnan(got) and np.isnan(expected))


def test_mse_loss_errors(registry) -> None:  # type: ignore[no-untyped-def]
    mse = registry.get("mlp.mse_loss.f32").fn
    a = DenseHostTensor.from_numpy(np.zeros((4, 1), np.float32))
    with pytest.raises(KernelError, match=r"tensor shape mismatch: \[4, 1\] vs. \[2\]"):
        mse(a, DenseHostTensor.from_numpy(np.zeros(2, np.float32)))
    with pytest.raises(KernelError, match="mlp.mse_loss.f32 expects an f32 tensor, got f64"):
        mse(a, DenseHostTensor.from_numpy(np.zeros((4, 1), np.float64)))


@given(st.lists(st.integers(0, 6), max_size=4), st.lists(st.integers(0, 6), max_size=4))
def test_flatten_shape_against_np_prod(a: list[int], out: list[int]) -> None:
    ok = bool(a) and bool(out) and a[0] == out[0] and int(np.prod(a)) == int(np.prod(out))
    if ok:
        assert ops.flatten_shape(tuple(a), tuple(out)) == tuple(out)
    else:
        with pytest.raises(ops.OpError, match="Flatten output shape .* does not match"):
            ops.flatten_shape(tuple(a), tuple(out))


def test_create_dims_conversion_and_errors() -> None:
    t = DenseHostTensor.create(dt.F32, (4, 2))
    assert t.array.shape == (4, 2) and not t.array.any()
    odd_dims: list = [np.int64(3), True]  # converted with int()
    assert DenseHostTensor.create(dt.F32, odd_dims).array.shape == (3, 1)
    with pytest.raises(ShapeError, match=r"invalid dimension -1 in shape \[2, -1\]"):
        DenseHostTensor.create(dt.F32, (2, -1))
    with pytest.raises(ShapeError, match=r"invalid dimension -2 in shape \[-2\]"):
        DenseHostTensor.create(dt.F32, [-2])


def test_create_kernel_rejects_bad_shape_attributes(registry) -> None:  # type: ignore[no-untyped-def]
    create = registry.get("tfrt_dht.create_uninitialized_tensor.f32.2").fn
    assert create((4, 1), None).array.shape == (4, 1)
    with pytest.raises(KernelError, match="invalid dimension -4"):
        create((-4, 1), None)
    with pytest.raises(KernelError, match="more than the kernel's rank 2"):
        create((1, 2, 3), None)
    with pytest.raises(KernelError, match="expected a shape attribute"):
        create(("a", 1), None)


def test_accounting_released_when_collected_or_destroyed() -> None:
    alloc = HostAllocator()
    host = HostContext("s", builtin_registry(), allocator=alloc)
    ctx = host.new_execution_context(ResourceContext())
    t = allocate_dense(ctx, dt.F32, (4, 2))
    assert (alloc.stats.current_allocations, alloc.stats.current_bytes) == (1, 64 + 32)
    del t
    gc.collect()
    assert (alloc.stats.current_allocations, alloc.stats.current_bytes) == (0, 0)
    t = allocate_dense(ctx, dt.F32, (4, 2))
    t.__tfrt_destroy__()
    assert (alloc.stats.current_allocations, alloc.stats.current_bytes) == (0, 0)
    del t
    gc.collect()
    assert (alloc.stats.current_allocations, alloc.stats.current_bytes) == (0, 0)  # once only
