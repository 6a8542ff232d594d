"""The batcher in process: merging, splitting, back-pressure and errors, against a reference.

The servable is a NumPy function run on the host's ``mstd`` work queue that records the batch
sizes it sees; the oracle is the same function applied to each request on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.host import AsyncValue, HostContext
from pytfrt.serving.batching import Batcher
from pytfrt.serving.bridge import submit
from pytfrt.serving.config import BatchingParameters
from pytfrt.serving.servable import Arrays, Servable
from pytfrt.serving.signature import ServingSignature, TensorInfo
from pytfrt.support.errors import ErrorCode

W = np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32)


def reference(x: np.ndarray) -> Arrays:
    return {"y": x @ W, "n": x.sum(axis=1)}


class RecordingServable(Servable):
    def __init__(self, host: HostContext, gate: threading.Event | None = None,
                 fail: bool = False) -> None:
        self.host = host
        self.gate = gate
        self.fail = fail
        self.batches: list[int] = []
        self.signature = ServingSignature(
            (TensorInfo.of("x", np.float32, (None, 3)),),
            (TensorInfo.of("y", np.float32, (None, 2)), TensorInfo.of("n", np.float32, (None,))),
        )

    def predict_async(self, inputs: Arrays) -> AsyncValue[Arrays]:
        def run() -> Arrays:
            if self.gate is not None:
                self.gate.wait(10)
            self.batches.append(inputs["x"].shape[0])
            if self.fail:
                raise RuntimeError("kernel exploded")
            return reference(inputs["x"])

        return submit(self.host, run)


@pytest.fixture(scope="module")
def host() -> Iterator[HostContext]:
    with HostContext("mstd:2") as h:
        yield h


def wait_all(values: list[AsyncValue[Arrays]]) -> None:
    done = threading.Semaphore(0)
    for v in values:
        v.and_then(done.release)
    for _ in values:
        assert done.acquire(timeout=30)


def make(host: HostContext, servable: Servable, **params: int) -> Batcher:
    return Batcher(servable, host, BatchingParameters(**params))


def test_concurrent_requests_merge_and_split_correctly(host: HostContext) -> None:
    gate = threading.Event()
    servable = RecordingServable(host, gate)
    batcher = make(host, servable, max_batch_size=64, batch_timeout_micros=0,
                   num_batch_threads=1)
    try:
        rng = np.random.default_rng(1)
        first = batcher.submit({"x": rng.standard_normal((1, 3)).astype(np.float32)})
        # The only batch slot is busy (the gate holds it): the next requests accumulate.
        xs = [rng.standard_normal((1 + i % 3, 3)).astype(np.float32) for i in range(10)]
        results = [batcher.submit({"x": x}) for x in xs]
        gate.set()
        wait_all([first, *results])
    finally:
        batcher.close()
    assert servable.batches == [1, sum(x.shape[0] for x in xs)]
    for x, r in zip(xs, results, strict=True):
        assert r.is_concrete()
        for name, want in reference(x).items():
            np.testing.assert_allclose(r.get()[name], want, rtol=1e-6)


@settings(max_examples=25)
@given(rows=st.lists(st.integers(1, 4), min_size=1, max_size=12),
       max_batch=st.integers(4, 16), threads=st.integers(1, 3))
def test_any_arrival_pattern_gives_each_request_its_own_rows(host: HostContext, rows: list[int],
                                                             max_batch: int,
                                                             threads: int) -> None:
    servable = RecordingServable(host)
    batcher = make(host, servable, max_batch_size=max_batch, batch_timeout_micros=200,
                   num_batch_threads=threads)
    xs = [np.full((n, 3), i, np.float32) for i, n in enumerate(rows)]
    results: list[AsyncValue[Arrays]] = [None] * len(xs)  # type: ignore[list-item]

    def client(i: int) -> None:
        results[i] = batcher.submit({"x": xs[i]})

    workers = [threading.Thread(target=client, args=(i,)) for i in range(len(xs))]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wait_all(results)
    finally:
        batcher.close()
    assert sum(servable.batches) == sum(rows)
    assert max(servable.batches) <= max_batch
    for x, r in zip(xs, results, strict=True):
        np.testing.assert_allclose(r.get()["y"], reference(x)["y"], rtol=1e-6)


def test_different_trailing_shapes_run_in_separate_batches(host: HostContext) -> None:
    class AnyWidth(RecordingServable):
        def predict_async(self, inputs: Arrays) -> AsyncValue[Arrays]:
            x = inputs["x"]
            self.batches.append(x.shape[0])
            return submit(self.host, lambda: {"y": x * 2, "n": x.sum(axis=1)})

    servable = AnyWidth(host)
    servable.signature = ServingSignature((TensorInfo.of("x", np.float32, (None, None)),),
                                          servable.signature.outputs)
    batcher = make(host, servable, max_batch_size=8, batch_timeout_micros=20_000)
    try:
        a = batcher.submit({"x": np.ones((1, 3), np.float32)})
        b = batcher.submit({"x": np.ones((1, 5), np.float32)})
        wait_all([a, b])
    finally:
        batcher.close()
    assert a.get()["y"].shape == (1, 3) and b.get()["y"].shape == (1, 5)
    assert sorted(servable.batches) == [1, 1]


def test_full_queue_refuses_with_unavailable(host: HostContext) -> None:
    gate = threading.Event()
    servable = RecordingServable(host, gate)
    batcher = make(host, servable, max_batch_size=1, batch_timeout_micros=0,
                   num_batch_threads=1, max_enqueued_batches=2)
    x = np.zeros((1, 3), np.float32)
    try:
        accepted = [batcher.submit({"x": x}) for _ in range(3)]  # 1 running + 2 enqueued
        refused = batcher.submit({"x": x})
        assert refused.is_error()
        assert refused.error.code == ErrorCode.UNAVAILABLE
        assert "queue" in refused.error.message
        gate.set()
        wait_all(accepted)
    finally:
        batcher.close()
    assert all(v.is_concrete() for v in accepted)


def test_oversized_and_mismatched_requests_are_refused(host: HostContext) -> None:
    batcher = make(host, RecordingServable(host), max_batch_size=2)
    try:
        big = batcher.submit({"x": np.zeros((3, 3), np.float32)})
        assert big.is_error() and big.error.code == ErrorCode.INVALID_ARGUMENT
        assert "larger than maximum batch size 2" in big.error.message
    finally:
        batcher.close()


def test_a_failing_batch_fails_each_of_its_requests(host: HostContext) -> None:
    gate = threading.Event()
    batcher = make(host, RecordingServable(host, gate, fail=True), max_batch_size=8,
                   batch_timeout_micros=0, num_batch_threads=1)
    try:
        values = [batcher.submit({"x": np.zeros((1, 3), np.float32)}) for _ in range(4)]
        gate.set()
        wait_all(values)
    finally:
        batcher.close()
    assert all(v.is_error() and "kernel exploded" in v.error.message for v in values)


def test_observer_sees_every_batch(host: HostContext) -> None:
    seen: list[tuple[int, int]] = []
    observe: Callable[[int, int, list[float]], None] = \
        lambda rows, n, delays: seen.append((rows, n))  # noqa: E731
    gate = threading.Event()
    batcher = Batcher(RecordingServable(host, gate), host,
                      BatchingParameters(max_batch_size=8, batch_timeout_micros=0,
                                         num_batch_threads=1), observe)
    try:
        values = [batcher.submit({"x": np.zeros((2, 3), np.float32)}) for _ in range(4)]
        gate.set()
        wait_all(values)
    finally:
        batcher.close()
    assert sum(r for r, _ in seen) == 8 and sum(n for _, n in seen) == 4
