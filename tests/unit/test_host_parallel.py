"""The process's parallel runtime (``pytfrt.host.parallel``): parallel_for, submit, the budget.

Oracles: the serial loop (every index runs exactly once, results as ``range(n)``), the thread
budget counted directly (helper threads running kernel work at once, sampled inside the
work), Python's own exception propagation, and ``concurrent.futures`` semantics for
:func:`submit`.  Timeouts turn a deadlock into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.host import parallel

pytestmark = pytest.mark.timeout(120)


class Meter:
    """Counts shards running on helper threads (not the callers) at once."""

    def __init__(self, callers: set[int]) -> None:
        self.lock = threading.Lock()
        self.callers = callers
        self.now = 0
        self.peak = 0

    def __enter__(self) -> None:
        if threading.get_ident() in self.callers:
            return
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def __exit__(self, *exc: object) -> None:
        if threading.get_ident() in self.callers:
            return
        with self.lock:
            self.now -= 1


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 40), serial=st.booleans())
def test_every_index_runs_once(n: int, serial: bool) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def shard(i: int) -> None:
        with lock:
            seen.append(i)

    parallel.parallel_for(shard, n, serial=serial)
    assert sorted(seen) == list(range(n))


def test_budget_holds_across_concurrent_and_nested_callers() -> None:
    """Four threads each run parallel loops whose shards run nested loops and submit tasks:
    every index runs once, and never more than ``num_threads() - 1`` helpers work at once."""
    callers: set[int] = set()
    meter = Meter(callers)
    counts = [0] * 4
    count_lock = threading.Lock()

    def inner(i: int) -> None:
        with meter:
            time.sleep(0.0005)

    def outer(c: int) -> Any:
        def shard(i: int) -> None:
            with meter:
                time.sleep(0.0005)
            parallel.parallel_for(inner, 5)  # nested: runs on whichever thread has the shard
            with count_lock:
                counts[c] += 1
        return shard

    errors: list[BaseException] = []

    def caller(c: int) -> None:
        callers.add(threading.get_ident())
        try:
            for _ in range(5):
                parallel.parallel_for(outer(c), 8)
                f = parallel.submit(lambda: sum(range(10)))
                assert f.result(timeout=30) == 45
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(c,)) for c in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert not errors, errors
    assert counts == [40] * 4
    assert meter.peak <= parallel.num_threads() - 1
    assert parallel.helper_threads() <= parallel.num_threads() - 1


def test_first_exception_propagates_and_loop_stops() -> None:
    ran: list[int] = []

    def shard(i: int) -> None:
        ran.append(i)
        if i == 3:
            raise ValueError("shard 3 failed")

    with pytest.raises(ValueError, match="shard 3 failed"):
        parallel.parallel_for(shard, 200)
    assert 3 in ran and len(ran) < 200 + 1

    def nested(i: int) -> None:
        parallel.parallel_for(shard, 10)

    with pytest.raises(ValueError, match="shard 3 failed"):
        parallel.parallel_for(nested, 4)


def test_submit_delivers_results_and_exceptions() -> None:
    assert parallel.submit(pow, 2, 10).result(timeout=30) == 1024
    with pytest.raises(ZeroDivisionError):
        parallel.submit(lambda: 1 / 0).result(timeout=30)


@pytest.mark.skipif(parallel.num_threads() < 2, reason="needs a helper thread")
def test_a_task_no_helper_started_can_be_cancelled_and_run_by_the_caller() -> None:
    """While every helper slot is held (as the spin pool holds them), a submitted task waits;
    cancel() succeeds, it never runs, and the slots come back."""
    slots = parallel.num_threads() - 1
    assert parallel.try_reserve(slots)
    try:
        assert not parallel.try_reserve(1)
        ran: list[int] = []
        f = parallel.submit(ran.append, 1)
        time.sleep(0.05)
        assert not f.running() and f.cancel()
    finally:
        parallel.release(slots)
    assert parallel.submit(lambda: 7).result(timeout=30) == 7
    assert ran == []
    assert parallel.try_reserve(slots)
    parallel.release(slots)


def test_budget_of_four_threads_in_a_fresh_process() -> None:
    """``PYTFRT_NUM_THREADS=4``: three helpers, and at most three work at once while the spin
    pool's reservation is refused when they are all busy."""
    code = """
import threading, time
from pytfrt.host import parallel
assert parallel.num_threads() == 4
lock = threading.Lock(); now = [0]; peak = [0]; main = threading.get_ident()
def shard(i):
    if threading.get_ident() != main:
        with lock:
            now[0] += 1; peak[0] = max(peak[0], now[0])
    time.sleep(0.01)
    if threading.get_ident() != main:
        with lock:
            now[0] -= 1
parallel.parallel_for(shard, 40)
busy = threading.Event(); go = threading.Event()
fs = [parallel.submit(lambda: (busy.set(), go.wait(10))) for _ in range(3)]
busy.wait(10); time.sleep(0.05)
refused = not parallel.try_reserve(1)
go.set(); [f.result(10) for f in fs]
print(peak[0], parallel.helper_threads(), refused, parallel.try_reserve(3))
"""
    env = {**os.environ, "PYTFRT_NUM_THREADS": "4"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    peak, started, refused, reserved = out.stdout.split()
    assert 1 <= int(peak) <= 3 and int(started) == 3
    assert refused == "True" and reserved == "True"


def test_spin_pool_lock_takes_helper_slots() -> None:
    """The convolutions' native pool counts against the same budget: its lock holds one slot
    per helper and is refused while they are taken."""
    np = pytest.importorskip("numpy")
    del np
    from pytfrt.backends.cpu._spin_pool import BudgetLock

    slots = parallel.num_threads() - 1
    lock = BudgetLock(slots)
    assert lock.acquire(blocking=False)
    try:
        assert not parallel.try_reserve(1) or slots == 0
        assert not lock.acquire(blocking=False)
    finally:
        lock.release()
    if slots:
        assert parallel.try_reserve(slots)
        try:
            assert not lock.acquire(blocking=False)
        finally:
            parallel.release(slots)
    assert lock.acquire(blocking=False)
    lock.release()


@pytest.mark.skipif(parallel.num_threads() < 2, reason="needs a helper thread")
def test_helpers_give_their_slots_back_before_the_caller_sees_the_job_done() -> None:
    """Consecutive operations: right after a ``parallel_for`` returns, the next one's spin pool
    lock (one slot per helper) is granted, not refused because a helper of the previous
    operation still held its slot (which would send the operation down its slower path).
    Almost always: a helper that woke for a job the caller just finished gives its slot back
    a moment later (the lock waits ``GRACE_US`` for it)."""
    from pytfrt.backends.cpu._spin_pool import BudgetLock

    lock = BudgetLock(parallel.num_threads() - 1)
    granted = 0
    for _ in range(50):
        parallel.parallel_for(lambda i: time.sleep(0.001), 4)
        if lock.acquire(blocking=False):
            granted += 1
            lock.release()
    assert granted >= 45
