"""all_reduce / all_gather / broadcast against NumPy on the shared 2-worker cluster."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytfrt.distributed import ClusterError, RemoteError

ORACLE = {
    "sum": lambda a: np.sum(a, axis=0),
    "mean": lambda a: np.mean(a, axis=0),
    "max": lambda a: np.max(a, axis=0),
    "min": lambda a: np.min(a, axis=0),
    "prod": lambda a: np.prod(a, axis=0),
}


@st.composite
def worker_arrays(draw: Any) -> tuple[np.ndarray, np.ndarray]:
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64]))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=7))
    elements = (st.integers(-1000, 1000) if np.dtype(dtype).kind == "i"
                else st.floats(-1e3, 1e3, width=32))
    a = draw(hnp.arrays(dtype, shape, elements=elements))
    b = draw(hnp.arrays(dtype, shape, elements=elements))
    return a, b


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arrays=worker_arrays(), op=st.sampled_from(sorted(ORACLE)))
def test_all_reduce_matches_numpy(cluster: Any, reduction_path: str,
                                  arrays: tuple[np.ndarray, np.ndarray], op: str) -> None:
    got = cluster.all_reduce(list(arrays), op=op).result(timeout=30)
    want = ORACLE[op](np.stack(arrays))
    assert got.shape == want.shape
    if op == "mean":
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:
        assert got.dtype == arrays[0].dtype
        np.testing.assert_array_equal(got, want)


def test_all_reduce_of_worker_results_feeds_a_worker(cluster: Any, basic: Any,
                                                     reduction_path: str) -> None:
    x = np.linspace(-1, 1, 1001, dtype=np.float32).reshape(7, 143)
    on0 = cluster.remote_execute(0, basic, x, function="scale")          # 2x on worker 0
    on1 = cluster.remote_execute(1, basic, x * 3, function="scale")      # 6x on worker 1
    total = cluster.all_reduce([on0, on1], op="sum")
    np.testing.assert_allclose(total.result(timeout=30), 8 * x, rtol=1e-6)
    # The reduced value reaches a worker straight from the object store.
    again = cluster.remote_execute(1, basic, total, function="scale")
    np.testing.assert_allclose(again.result(timeout=30), 16 * x, rtol=1e-6)
    biggest = cluster.all_reduce([on0, on1], op="max").result(timeout=30)
    np.testing.assert_array_equal(biggest, np.maximum(2 * x, 6 * x))


def test_all_reduce_rejects_mismatched_arrays(cluster: Any, reduction_path: str) -> None:
    with pytest.raises(RemoteError, match=r"worker 1's array is float32\[3\], worker 0's is "
                       r"float32\[2\]"):
        cluster.all_reduce([np.zeros(2, np.float32), np.zeros(3, np.float32)]).result(30)
    with pytest.raises(ClusterError, match="one array per worker \\(2\\), got 3"):
        cluster.all_reduce([np.zeros(2)] * 3)
    with pytest.raises(ClusterError, match="unknown all_reduce op 'avg'"):
        cluster.all_reduce([np.zeros(2)] * 2, op="avg")


def test_all_gather_lists_or_concatenates(cluster: Any, basic: Any) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = cluster.remote_execute(1, basic, np.ones((1, 3), np.float32), function="scale")
    parts = cluster.all_gather([a, b]).result(timeout=30)
    assert isinstance(parts, list) and len(parts) == 2
    np.testing.assert_array_equal(parts[0], a)
    np.testing.assert_array_equal(parts[1], 2 * np.ones((1, 3), np.float32))
    joined = cluster.all_gather([a, b], axis=0)
    np.testing.assert_array_equal(joined.result(timeout=30),
                                  np.concatenate([a, 2 * np.ones((1, 3), np.float32)]))
    # Every worker reads the gathered value.
    for w in (0, 1):
        got = cluster.call(w, basic, joined, function="scale")
        np.testing.assert_array_equal(got, 2 * joined.result(timeout=30))


def test_broadcast_reaches_every_worker(cluster: Any, basic: Any) -> None:
    root_value = cluster.remote_execute(1, basic, np.arange(5, dtype=np.float32),
                                        function="scale")
    shared = cluster.broadcast(root_value, root=1)
    for w in (0, 1):
        np.testing.assert_array_equal(
            cluster.call(w, basic, shared, function="scale"), 4 * np.arange(5, dtype=np.float32)
        )
    from_driver = cluster.broadcast(np.full(3, 2.5, np.float32))
    np.testing.assert_array_equal(cluster.call(1, basic, from_driver, function="scale"),
                                  np.full(3, 5.0, np.float32))
    with pytest.raises(ClusterError, match="out of range"):
        cluster.broadcast(np.zeros(1), root=5)
