"""Stress: threads race ``and_then`` against publication; no wake-up may be lost or doubled.

Hypothesis draws the shape of each race (how many values, threads, waiters; which values become
errors; whether producers run on raw threads or as tasks of an ``mstd:2`` queue); the thread
switch interval is lowered so the interpreter interleaves threads at fine grain.  The oracle is
simple counting: every registered waiter must run exactly once, and must see its value
available when it runs.  ``pytest-timeout`` turns a deadlock into a failure.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.host import (
    AsyncValue,
    IndirectAsyncValue,
    create_work_queue,
    make_indirect,
    make_unconstructed,
    run_when_ready,
)
from pytfrt.host.work_queue import WorkQueue

pytestmark = pytest.mark.timeout(60)

JOIN_TIMEOUT_S = 20.0


@contextmanager
def preemptive_switching(seed: int, probability: float = 0.3) -> Iterator[None]:
    """Offer the interpreter lock to another thread at random function-call boundaries.

    CPython only switches threads at a few bytecodes, so the narrow windows that matter (a
    consumer between reading the state and appending its waiter) are almost never hit by
    plain threads.  A profile hook runs before every Python and C call -- including the
    ``list.append`` that registers a waiter -- and, with the given probability, sleeps for
    0 s, which releases the lock.  ``seed`` makes the choice of switch points reproducible
    per thread start order.
    """
    rng = random.Random(seed)

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call") and rng.random() < probability:
            time.sleep(0)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    threading.setprofile(hook)
    try:
        yield
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.setswitchinterval(old_interval)


@pytest.fixture(scope="module")
def mstd_queue() -> Iterator[WorkQueue]:
    queue = create_work_queue("mstd:2")
    yield queue
    queue.shutdown()


class Hits:
    """One slot per waiter; a waiter appends to its own slot (``list.append`` is atomic)."""

    def __init__(self, n: int) -> None:
        self.slots: list[list[bool]] = [[] for _ in range(n)]

    def waiter(self, index: int, av: AsyncValue[Any]) -> Callable[[], None]:
        def run() -> None:
            self.slots[index].append(av.is_available())

        return run

    def assert_each_ran_once_after_availability(self) -> None:
        lost = [i for i, s in enumerate(self.slots) if not s]
        doubled = [i for i, s in enumerate(self.slots) if len(s) > 1]
        early = [i for i, s in enumerate(self.slots) if s and not all(s)]
        assert (lost, doubled, early) == ([], [], [])


def run_race(
    jobs: list[Callable[[], None]],
    queue: WorkQueue | None,
    queued: set[int] | None = None,
    seed: int = 0,
) -> None:
    """Start every job at once (behind a barrier) on raw threads, or some as queue tasks.

    Raw threads run under :func:`preemptive_switching` with ``seed``; queued jobs run on the
    queue's (already started) worker threads.
    """
    queued = queued or set()
    barrier = threading.Barrier(len(jobs) - len(queued) + (1 if queued else 0))
    done = threading.Event() if queued else None
    remaining = [len(queued)]
    lock = threading.Lock()

    def gated(job: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            barrier.wait(JOIN_TIMEOUT_S)
            job()

        return run

    def queued_job(job: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            job()
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last and done is not None:
                done.set()

        return run

    threads = [threading.Thread(target=gated(j)) for i, j in enumerate(jobs) if i not in queued]
    with preemptive_switching(seed):
        for t in threads:
            t.start()
        if queued:
            assert queue is not None
            barrier.wait(JOIN_TIMEOUT_S)  # release the raw threads, then feed the workers
            for i in sorted(queued):
                queue.add_task(queued_job(jobs[i]))
        for t in threads:
            t.join(JOIN_TIMEOUT_S)
        if done is not None:
            assert done.wait(JOIN_TIMEOUT_S)
    assert not any(t.is_alive() for t in threads)


race_shapes = st.fixed_dictionaries(
    {
        "num_values": st.integers(1, 40),
        "consumers": st.integers(1, 4),
        "waiters_per_value": st.integers(1, 3),
        "errors": st.sets(st.integers(0, 39)),
        "producers_on_queue": st.booleans(),
        "seed": st.integers(0, 2**32 - 1),
    }
)


@settings(max_examples=25)
@given(shape=race_shapes)
def test_and_then_races_emplace_and_set_error(
    shape: dict[str, Any], mstd_queue: WorkQueue
) -> None:
    n = shape["num_values"]
    values: list[AsyncValue[int]] = [make_unconstructed() for _ in range(n)]
    per_consumer = n * shape["waiters_per_value"]
    hits = Hits(shape["consumers"] * per_consumer)

    def consumer(c: int) -> Callable[[], None]:
        def run() -> None:
            k = c * per_consumer
            for _ in range(shape["waiters_per_value"]):
                for av in values:
                    av.and_then(hits.waiter(k, av))
                    k += 1

        return run

    def producer(half: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(half, n, 2):
                if i in shape["errors"]:
                    values[i].set_error(f"error {i}")
                else:
                    values[i].emplace(i)

        return run

    jobs = [consumer(c) for c in range(shape["consumers"])] + [producer(0), producer(1)]
    queued = {len(jobs) - 2, len(jobs) - 1} if shape["producers_on_queue"] else set()
    run_race(jobs, mstd_queue, queued, shape["seed"])
    hits.assert_each_ran_once_after_availability()
    for i, av in enumerate(values):
        assert av.is_error() == (i in shape["errors"])
        assert av.is_error() or av.get() == i


@settings(max_examples=20)
@given(
    num_values=st.integers(1, 30),
    consumers=st.integers(1, 3),
    chain_depth=st.integers(1, 3),
    forward_first=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_indirect_forward_to_races_waiters(
    num_values: int, consumers: int, chain_depth: int, forward_first: bool, seed: int
) -> None:
    # Each head is forwarded through ``chain_depth`` indirect values to a concrete target,
    # while consumers wait on every link and another thread publishes the targets.
    heads: list[IndirectAsyncValue[int]] = [make_indirect() for _ in range(num_values)]
    links: list[list[IndirectAsyncValue[int]]] = []
    targets: list[AsyncValue[int]] = [make_unconstructed() for _ in range(num_values)]
    for head in heads:
        chain = [head] + [make_indirect() for _ in range(chain_depth - 1)]
        links.append(chain)
    watched: list[AsyncValue[int]] = [v for chain in links for v in chain]
    hits = Hits(consumers * len(watched))

    def consumer(c: int) -> Callable[[], None]:
        def run() -> None:
            for k, av in enumerate(watched):
                av.and_then(hits.waiter(c * len(watched) + k, av))

        return run

    def forwarder() -> None:
        for chain, target in zip(links, targets, strict=True):
            for outer, inner in zip(chain, chain[1:], strict=False):
                outer.forward_to(inner)
            chain[-1].forward_to(target)

    def publisher() -> None:
        for i, target in enumerate(targets):
            if i % 3 == 2:
                target.set_error(f"e{i}")
            else:
                target.emplace(i)

    if forward_first:
        forwarder()
        jobs = [consumer(c) for c in range(consumers)] + [publisher]
    else:
        jobs = [consumer(c) for c in range(consumers)] + [forwarder, publisher]
    run_race(jobs, None, seed=seed)
    hits.assert_each_ran_once_after_availability()
    for i, chain in enumerate(links):
        for av in chain:
            assert av.is_error() == (i % 3 == 2)
            assert av.is_error() or av.get() == i
            assert av.target is targets[i]


@settings(max_examples=20)
@given(
    num_values=st.integers(2, 30),
    groups=st.lists(st.lists(st.integers(0, 29), min_size=0, max_size=8), min_size=1, max_size=10),
    producers_on_queue=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_run_when_ready_races_producers(
    num_values: int,
    groups: list[list[int]],
    producers_on_queue: bool,
    seed: int,
    mstd_queue: WorkQueue,
) -> None:
    values: list[AsyncValue[int]] = [make_unconstructed() for _ in range(num_values)]
    members = [[values[i % num_values] for i in group] for group in groups]
    fired: list[list[bool]] = [[] for _ in groups]

    def registrar() -> None:
        for g, group in enumerate(members):
            run_when_ready(
                group,
                lambda g=g, group=group: fired[g].append(all(v.is_available() for v in group)),
            )

    def producer(half: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(half, num_values, 2):
                values[i].emplace(i) if i % 4 else values[i].set_error("e")

        return run

    jobs = [registrar, producer(0), producer(1)]
    run_race(jobs, mstd_queue, {1, 2} if producers_on_queue else set(), seed)
    assert fired == [[True] for _ in groups]


@pytest.mark.timeout(60)
def test_many_values_many_threads_no_lost_wakeups() -> None:
    # A fixed, larger race: 4 consumer threads x 1500 values against 2 producers.
    n = 1500
    values: list[AsyncValue[int]] = [make_unconstructed() for _ in range(n)]
    hits = Hits(4 * n)

    def consumer(c: int) -> Callable[[], None]:
        def run() -> None:
            for i, av in enumerate(values):
                av.and_then(hits.waiter(c * n + i, av))

        return run

    def producer(half: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(half, n, 2):
                values[i].emplace(i)

        return run

    run_race([consumer(c) for c in range(4)] + [producer(0), producer(1)], None, seed=1234)
    hits.assert_each_ran_once_after_availability()
