"""The native fork-join of oneDNN primitive parts (``backends/cpu/_spin_pool``).

Two halves.  The pool's mechanics with Python stand-ins for oneDNN's C functions (ctypes
callbacks whose addresses the native loops call): every part runs exactly once whatever the
number of parts and helpers (Hypothesis), with the addresses the table and the call give,
on the running thread's stream and scratchpad; channel parts copy their rows between the
output and the thread's buffer; the first error status is returned; the caller runs every
part when no helper takes one; sleeping helpers are woken.  Then real convolutions: split
convolutions through the pool give bit-for-bit the results of the Python path (same
primitives) for batch, row and channel parts with each residual mode, and many threads
calling one plan at once (one holds the pool, the others take the Python path) agree with
a single-threaded reference.
"""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest
from cpu_refs import conv_in_mode, conv_relu_nhwc
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _dnnl_conv, _parallel, _spin_native, _spin_pool, conv
from pytfrt.host import parallel

_EXEC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                         ctypes.c_int64)
_WAIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64)
_SET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
PRIM0, DST0, SRC0, RES0, SP0 = 1000, 2000, 3000, 4000, 5000


class FakeDnnl:
    """Stand-ins for ``dnnl_primitive_execute``, ``dnnl_stream_wait`` and
    ``dnnl_memory_set_data_handle``: they record which thread ran which part with which
    data handles, and a part's "primitive" adds ``index + 1`` to each float of its
    destination (like oneDNN's ``sum`` post-op onto what the destination holds)."""

    def __init__(self, fail: dict[int, int] | None = None, rows: int = 0, width: int = 0):
        self.lock = threading.Lock()
        self.handles: dict[tuple[int, int], int] = {}
        self.runs: list[tuple[int, int, int, dict[str, int]]] = []
        self.fail = fail or {}
        self.rows, self.width = rows, width
        self.streams: list[int] = []
        self._cbs = (_EXEC(self._execute), _WAIT(lambda s: 0), _SET(self._set))

    def addresses(self) -> tuple[int, int, int]:
        return tuple(int(ctypes.cast(f, ctypes.c_void_p).value) for f in self._cbs)

    def new_stream(self) -> int:
        with self.lock:
            s = 77_000 + len(self.streams)
            self.streams.append(s)
        return s

    def _set(self, mem: int, addr: int) -> int:
        with self.lock:
            self.handles[(threading.get_ident(), mem)] = addr
        return 0

    def _execute(self, prim: int, stream: int, nargs: int, args: int) -> int:
        i = prim - PRIM0
        tid = threading.get_ident()
        with self.lock:
            got = {name: self.handles.get((tid, base + i), -1)
                   for name, base in (("src", SRC0), ("dst", DST0), ("res", RES0),
                                      ("sp", SP0))}
            self.runs.append((i, tid, stream, got))
        if self.rows:  # a channel part: its destination is the thread's dense buffer
            n = self.rows * self.width
            buf = np.ctypeslib.as_array((ctypes.c_float * n).from_address(got["dst"]))
            buf += i + 1
        return self.fail.get(i, 0)


def _table(n: int, channel: tuple[int, int, int, bool] | None = None) -> np.ndarray:
    t = np.zeros((n, _spin_pool.NF), np.int64)
    for i in range(n):
        t[i, _spin_pool.PRIM] = PRIM0 + i
        t[i, _spin_pool.NARGS] = 3
        t[i, _spin_pool.SRC_MEM] = SRC0 + i
        t[i, _spin_pool.SRC_OFF] = 10 * i
        t[i, _spin_pool.DST_MEM] = DST0 + i
        t[i, _spin_pool.DST_OFF] = 100 * i
        t[i, _spin_pool.RES_MEM] = RES0 + i
        t[i, _spin_pool.SP_MEM] = SP0 + i
        if channel is not None:
            rows, width, stride, copy_in = channel
            t[i, _spin_pool.CH_OFF] = 4 * width * i
            t[i, _spin_pool.CH_BYTES] = 4 * width
            t[i, _spin_pool.CH_ROWS] = rows
            t[i, _spin_pool.CH_STRIDE] = 4 * stride
            t[i, _spin_pool.CH_COPY_IN] = int(copy_in)
    return t


def _run(pool: _spin_pool.Pool, fake: FakeDnnl, table: np.ndarray, ya: int = 900_000) -> int:
    with pool.lock:
        pool.reserve(4096, 4 * max(fake.rows * fake.width, 1))
        return pool.run(table, 500_000, ya, 700_000)


@settings(max_examples=25, deadline=None)
@given(parts=st.integers(1, 40), helpers=st.integers(1, 3), calls=st.integers(1, 4))
def test_every_part_runs_once_with_its_addresses(parts, helpers, calls):
    fake = FakeDnnl()
    pool = _spin_pool.Pool(fake.addresses(), helpers, fake.new_stream)
    try:
        for _ in range(calls):
            fake.runs.clear()
            assert _run(pool, fake, _table(parts)) == 0
            assert sorted(i for i, *_ in fake.runs) == list(range(parts))
            slots = {}
            for i, tid, stream, got in fake.runs:
                assert got["src"] == 500_000 + 10 * i
                assert got["dst"] == 900_000 + 100 * i
                assert got["res"] == 700_000 + 100 * i
                assert got["sp"] % 64 == 0
                # one stream and scratchpad per thread, none shared between threads
                assert slots.setdefault(tid, (stream, got["sp"])) == (stream, got["sp"])
            streams = [s for s, _ in slots.values()]
            scratch = [sp for _, sp in slots.values()]
            assert len(set(streams)) == len(streams) and len(set(scratch)) == len(scratch)
            assert set(streams) <= set(fake.streams)
    finally:
        pool.stop()


@pytest.mark.skipif(_spin_native.module() is None, reason="needs the C loops")
def test_trace_records_each_job_and_the_thread_and_times_of_every_part():
    fake = FakeDnnl()
    pool = _spin_pool.Pool(fake.addresses(), 2, fake.new_stream)
    try:
        assert _spin_pool.trace(np.zeros(400, np.int64)) is None  # nothing traced before
        for n in (5, 3):
            assert _run(pool, fake, _table(n)) == 0
        rec = _spin_pool.trace(None)
        assert rec is not None and rec.shape == (2 + 5 + 3, _spin_pool.TRACE_FIELDS)
        jobs = np.flatnonzero(rec[:, 0] == -1)
        assert jobs.tolist() == [0, 6]
        for at, n in zip(jobs, (5, 3), strict=True):
            _, parts, published, prim = rec[at]
            assert parts == n and prim == PRIM0
            mine = rec[at + 1:at + 1 + n]
            assert sorted(mine[:, 1]) == list(range(n))  # every part once
            assert set(mine[:, 0]) <= {0, 1, 2}  # two helpers' slots and the caller's
            assert (mine[:, 2] <= mine[:, 3]).all() and (mine[:, 2] >= published).all()
        assert _run(pool, fake, _table(4)) == 0  # not traced any more
        assert _spin_pool.trace(None) is None
        small = np.zeros(8, np.int64)  # room for two records: the rest are dropped
        _spin_pool.trace(small)
        assert _run(pool, fake, _table(6)) == 0
        rec = _spin_pool.trace(None)
        assert rec is not None and len(rec) == 2 and rec[0, 0] == -1
    finally:
        _spin_pool.trace(None)
        pool.stop()


@pytest.mark.parametrize("copy_in", [False, True])
def test_channel_parts_copy_rows_through_the_thread_buffer(copy_in):
    rows, width, parts = 5, 3, 4
    stride = width * parts + 2  # two spare columns the parts must not touch
    fake = FakeDnnl(rows=rows, width=width)
    pool = _spin_pool.Pool(fake.addresses(), 1, fake.new_stream)
    try:
        y = np.arange(100, 100 + rows * stride, dtype=np.float32).reshape(rows, stride)
        before = y.copy()
        table = _table(parts, (rows, width, stride, copy_in))
        assert _run(pool, fake, table, int(y.ctypes.data)) == 0
        for i in range(parts):
            cols = slice(i * width, (i + 1) * width)
            if copy_in:  # the part added to what the output held
                np.testing.assert_array_equal(y[:, cols], before[:, cols] + i + 1)
            else:  # the part added to the thread's buffer: stale content, not the output
                assert np.all(y[:, cols] != before[:, cols] + i + 1)
        np.testing.assert_array_equal(y[:, parts * width:], before[:, parts * width:])
    finally:
        pool.stop()


@pytest.mark.parametrize("loops", ["c", "numba"])
def test_both_loop_versions_run_every_part_and_copy_channel_rows(monkeypatch, loops):
    # the C loops (_spin_native) and the Numba ones (used without a C compiler) alike
    if loops == "numba":
        monkeypatch.setattr(_spin_pool, "loops", _spin_pool._NumbaLoops)
    else:
        assert _spin_pool.loops() is not None and _spin_pool._spin_native.module() is not None
    rows, width, parts = 3, 4, 6
    stride = width * parts
    fake = FakeDnnl(rows=rows, width=width)
    pool = _spin_pool.Pool(fake.addresses(), 2, fake.new_stream)
    try:
        y = np.zeros((rows, stride), np.float32)
        assert _run(pool, fake, _table(parts, (rows, width, stride, True)),
                    int(y.ctypes.data)) == 0
        assert sorted(i for i, *_ in fake.runs) == list(range(parts))
        np.testing.assert_array_equal(y, np.repeat(np.arange(1, parts + 1), width)[None]
                                      .repeat(rows, 0))
    finally:
        pool.stop()


@pytest.mark.parametrize("loops", ["c", "numba"])
def test_call_parts_run_their_function_once_each(monkeypatch, loops):
    """Call parts (``PRIM`` 0, :func:`_spin_pool.call_table`): each index runs ``fn(context,
    i)`` exactly once, across threads, no oneDNN function is called, and a nonzero return is
    the job's status."""
    if loops == "numba":
        monkeypatch.setattr(_spin_pool, "loops", _spin_pool._NumbaLoops)
    fake = FakeDnnl()
    pool = _spin_pool.Pool(fake.addresses(), 2, fake.new_stream)
    seen: list[tuple[int, int, int]] = []

    def part(context: int, i: int) -> int:
        seen.append((context, i, threading.get_ident()))
        return 9 if i == 4 else 0

    fn = _SET(part)  # int (int64, int64)
    address = int(ctypes.cast(fn, ctypes.c_void_p).value or 0)
    try:
        with pool.lock:
            assert pool.run(_spin_pool.call_table(address, 1234, 7), 0, 0, 0) == 9
            assert sorted(i for _, i, _ in seen) == list(range(7))
            assert {c for c, _, _ in seen} == {1234} and not fake.runs
            seen.clear()
            assert pool.run(_spin_pool.call_table(address, 55, 3), 0, 0, 0) == 0
            assert sorted(i for _, i, _ in seen) == [0, 1, 2]
    finally:
        pool.stop()


def test_first_error_status_is_returned_and_other_parts_still_finish():
    fake = FakeDnnl(fail={2: 5})
    pool = _spin_pool.Pool(fake.addresses(), 1, fake.new_stream)
    try:
        assert _run(pool, fake, _table(4)) == 5
        fake.fail.clear()
        fake.runs.clear()
        assert _run(pool, fake, _table(4)) == 0  # the error does not stick to the pool
        assert sorted(i for i, *_ in fake.runs) == [0, 1, 2, 3]
    finally:
        pool.stop()


def test_caller_runs_every_part_when_no_helper_takes_one():
    fake = FakeDnnl()
    pool = _spin_pool.Pool(fake.addresses(), 1, fake.new_stream)
    pool.stop()  # the helper has exited: nobody claims from the back
    assert _run(pool, fake, _table(6)) == 0
    assert sorted(i for i, *_ in fake.runs) == list(range(6))
    assert {tid for _, tid, *_ in fake.runs} == {threading.get_ident()}


def test_sleeping_helpers_are_woken(monkeypatch):
    monkeypatch.setattr(_spin_pool, "SPIN_US", 200)
    fake = FakeDnnl()
    pool = _spin_pool.Pool(fake.addresses(), 2, fake.new_stream)
    try:
        deadline = time.monotonic() + 5
        while not all(pool.ctrl[(_spin_pool._HELPERS + k) * _spin_pool._LINE
                                + _spin_pool._H_SLEEPING] for k in range(2)):
            assert time.monotonic() < deadline, "helpers never went to sleep"
            time.sleep(0.001)
        helpers: set[int] = set()
        deadline = time.monotonic() + 30  # a loaded machine may run the caller alone for long
        while not helpers:  # a woken helper claims a part of some job
            assert time.monotonic() < deadline, "no sleeping helper ever took a part"
            fake.runs.clear()
            assert _run(pool, fake, _table(8)) == 0
            assert sorted(i for i, *_ in fake.runs) == list(range(8))
            helpers |= {tid for _, tid, *_ in fake.runs} - {threading.get_ident()}
            time.sleep(0.002)  # longer than SPIN_US: they sleep again before the next job
    finally:
        pool.stop()


# -- real convolutions -------------------------------------------------------------------

needs_dnnl = pytest.mark.skipif(not _dnnl_conv.available() or _parallel.num_threads() < 2,
                                reason="needs oneDNN and two threads")


def _plan(k: int, cin: int, cout: int, seed: int) -> tuple[conv.ConvPlan, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, k, cin, cout)) * 0.05).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    return conv.plan_conv2d(w, layout="NHWC", pads=(k // 2,) * 4, bias=b, activation="relu",
                            algorithm="dnnl"), rng


def _torch_reference(plan: conv.ConvPlan, x: np.ndarray, r: np.ndarray | None) -> np.ndarray:
    return conv_relu_nhwc(x, np.array(plan.filter()), plan.bias, 1, plan.kh // 2, r)


def _jobs_run() -> int:
    pool = _spin_pool._pool
    return 0 if pool is None else int(pool.ctrl[_spin_pool._SEQ * _spin_pool._LINE])


def _both_paths(monkeypatch, fn):
    monkeypatch.setattr(_dnnl_conv, "SPIN_POOL", True)
    before = _jobs_run()
    pooled = fn()
    assert _jobs_run() == before + 1  # the split convolution was one job of the pool
    monkeypatch.setattr(_dnnl_conv, "SPIN_POOL", False)
    return pooled, fn()


@needs_dnnl
@pytest.mark.parametrize("n,h,cin,cout,kind", [
    (4, 14, 64, 128, "batch"), (1, 28, 64, 96, "rows"), (1, 7, 256, 256, "channels"),
    (3, 7, 128, 64, "channels")])
@pytest.mark.parametrize("residual", ["none", "operand", "in place"])
def test_split_convs_through_the_pool_match_the_python_path(monkeypatch, n, h, cin, cout,
                                                            kind, residual):
    monkeypatch.setattr(_dnnl_conv, "CHANNEL_SPLIT_MAX_ROWS", 3 * 7 * 7)  # n = 3: channels too
    plan, rng = _plan(3, cin, cout, n + h)
    x = rng.standard_normal((n, h, h, cin)).astype(np.float32)
    r = rng.standard_normal((n, h, h, cout)).astype(np.float32)
    prims = plan.dnnl._get(x.shape, _dnnl_conv.NO_RESIDUAL)
    assert len(prims) == (len(_dnnl_conv.batch_bounds(n, 2)) - 1 if kind == "batch" else 2)
    assert (prims[0].channels is not None) == (kind == "channels")

    pooled, python = _both_paths(monkeypatch, lambda: conv_in_mode(plan, x, r, residual))
    np.testing.assert_array_equal(pooled, python)
    np.testing.assert_allclose(pooled, _torch_reference(plan, x, None if residual == "none"
                                                        else r), rtol=1e-4, atol=1e-4)


@needs_dnnl
def test_many_threads_calling_one_plan(monkeypatch):
    monkeypatch.setattr(_dnnl_conv, "SPIN_POOL", True)
    plan, rng = _plan(3, 64, 64, 9)
    xs = [rng.standard_normal((2, 28, 28, 64)).astype(np.float32) for _ in range(6)]
    expected = [_torch_reference(plan, x, None) for x in xs]
    got: dict[int, list[np.ndarray]] = {}

    def worker(t: int) -> None:
        got[t] = [conv.conv2d(plan, x) for _ in range(5) for x in xs]

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for t in range(4):
        for j, y in enumerate(got[t]):
            np.testing.assert_allclose(y, expected[j % len(xs)], rtol=1e-5, atol=1e-5)


@needs_dnnl
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("n", [3, 8])
def test_batched_max_pool_split_by_batch(monkeypatch, layout, n):
    from pytfrt.backends.cpu import _dnnl_pool, pooling

    monkeypatch.setattr(_dnnl_pool, "SPLIT_MIN_BYTES", 1)
    rng = np.random.default_rng(n)
    xn = rng.standard_normal((n, 15, 13, 24)).astype(np.float32)  # NHWC
    # 3x3 windows, stride 2, one row/column of padding on each side (ResNet's pool)
    padded = np.pad(xn, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
    expected = windows[:, ::2, ::2].max(axis=(-2, -1))
    x = xn if layout == "NHWC" else np.ascontiguousarray(xn.transpose(0, 3, 1, 2))
    before = _jobs_run()
    y = pooling.max_pool2d(x, layout=layout, ksize=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
    assert _jobs_run() == before + 1  # one pool job: the batch parts
    got = y if layout == "NHWC" else y.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(got, expected)


def _conv_in_child(queue) -> None:  # runs in a forked child
    plan, rng = _plan(3, 64, 64, 11)
    x = rng.standard_normal((2, 28, 28, 64)).astype(np.float32)
    before = _jobs_run()
    y = conv.conv2d(plan, x)
    queue.put((before, _jobs_run(), y, x))


@needs_dnnl
def test_a_forked_child_makes_its_own_pool():
    import multiprocessing

    plan, rng = _plan(3, 64, 64, 12)
    conv.conv2d(plan, rng.standard_normal((2, 28, 28, 64)).astype(np.float32))
    assert _spin_pool._pool is not None  # the parent's pool and helpers exist
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_conv_in_child, args=(queue,))
    child.start()
    before, after, y, x = queue.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert before == 0 and after == 1  # a fresh pool in the child ran the job
    child_plan, _ = _plan(3, 64, 64, 11)
    np.testing.assert_allclose(y, _torch_reference(child_plan, x, None), rtol=1e-4, atol=1e-4)


@needs_dnnl
@pytest.mark.parametrize("k,cin,cout,h,expect", [
    (3, 200, 200, 13, "channels"),  # filter / output = 9 * 200 / 169 >= 8, odd channels
    (3, 96, 48, 9, "channels"),  # 864 / 81
    (1, 200, 200, 13, "rows"),  # a 1x1 filter: 200 / 169
    (3, 32, 64, 11, "rows"),  # 288 / 121
])
@pytest.mark.parametrize("residual", [False, True])
def test_filter_heavy_convs_split_by_channels_at_batch_1(monkeypatch, k, cin, cout, h, expect,
                                                         residual):
    monkeypatch.setattr(_dnnl_conv, "CHANNEL_SPLIT_FILTER_RATIO", 8.0)
    plan, rng = _plan(k, cin, cout, cin + h)
    x = rng.standard_normal((1, h, h, cin)).astype(np.float32)
    r = rng.standard_normal((1, h, h, cout)).astype(np.float32)
    prims = plan.dnnl._get(x.shape, _dnnl_conv.RESIDUAL_IN_DST if residual else 0)
    assert len(prims) == 2
    assert (prims[0].channels is not None) == (expect == "channels")
    # a batch of two still splits by batch
    assert plan.dnnl._get((2, h, h, cin), _dnnl_conv.NO_RESIDUAL)[0].channels is None

    def call() -> np.ndarray:
        if not residual:
            return conv.conv2d(plan, x)
        out = r.copy()
        return conv.conv2d(plan, x, out, out=out)

    pooled, python = _both_paths(monkeypatch, call)
    np.testing.assert_array_equal(pooled, python)
    np.testing.assert_allclose(pooled, _torch_reference(plan, x, r if residual else None),
                               rtol=1e-4, atol=1e-4)


_ONE_OPENMP_THREAD = r"""
import ctypes, json, os, threading
import numpy as np
from pytfrt.backends.cpu import _dnnl_blocked, conv

gomp = ctypes.CDLL("libgomp.so.1")
tasks = lambda: len(os.listdir("/proc/self/task"))
rng = np.random.default_rng(0)
plan = conv.plan_conv2d((rng.standard_normal((3, 3, 64, 64)) * 0.1).astype(np.float32),
                        layout="NHWC", pads=(1,) * 4, algorithm="dnnl")
x = rng.standard_normal((1, 28, 28, 64)).astype(np.float32)
xb = rng.standard_normal((1, 14, 14, 256)).astype(np.float32)
got = {}

def on_thread(name, fn):
    def run():
        before = tasks()
        y = fn()
        got[name] = [before, tasks(), gomp.omp_get_max_threads(), y.tolist()]
    t = threading.Thread(target=run)
    t.start()
    t.join()

on_thread("makes", lambda: conv.conv2d(plan, x)[0, :2, :2, :2])  # primitives and pool made here
on_thread("runs", lambda: conv.conv2d(plan, x)[0, :2, :2, :2])  # a thread that only runs parts
on_thread("reorder", lambda: _dnnl_blocked.reorder(xb, "NHWC", "NCHW16c")[0, :2, :2, :2, :2])
print(json.dumps(got))
"""


@needs_dnnl
def test_threads_that_make_or_run_primitives_use_one_openmp_thread():
    # A primitive made on a thread whose OpenMP default is two threads, or run from one, starts
    # an OpenMP team beside the pool's helper (once measured: 16 ms for a 200 KB reorder, and a
    # model whose first call came on another thread ran 2x slower afterwards).  A clean process:
    # earlier tests have pinned this one's threads.
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _ONE_OPENMP_THREAD], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    for name in ("runs", "reorder"):
        before, after, max_threads, _ = got[name]
        assert max_threads == 1, name
        # at most: the thread of the step before may still be leaving /proc/self/task
        assert after <= before, f"{name}: {after - before} OpenMP threads started"
    assert got["runs"][3] == got["makes"][3]


# -- the native entry (try_job, bound): the whole job in one call from a launcher -----------

needs_c = pytest.mark.skipif(_spin_native.module() is None, reason="needs the C loops")


class _Entry:
    """A pool of :class:`FakeDnnl` registered as the native entry's pool (the process's pool,
    if any, registered again afterwards), and a ``slow`` stand-in that records its calls."""

    def __init__(self, fake: FakeDnnl, helpers: int = 2) -> None:
        self.fake = fake
        self.pool = _spin_pool.Pool(fake.addresses(), helpers, fake.new_stream)
        self.pool.reserve(4096, 64)
        self.slow_calls: list[tuple[int, int]] = []
        self.mod = _spin_native.module()
        _spin_pool._register(self.pool)

    def slow(self, x: np.ndarray, y: np.ndarray) -> str:
        self.slow_calls.append((int(x.ctypes.data), int(y.ctypes.data)))
        return "slow"

    def close(self) -> None:
        _spin_pool._register(_spin_pool._pool)
        self.pool.stop()


@pytest.fixture
def entry():
    e = _Entry(FakeDnnl())
    e.mod.try_job(np.zeros((0, _spin_pool.NF), np.int64), 0, 0, 0, 0, 0)  # this thread pinned
    yield e
    e.close()


@needs_c
def test_bound_launcher_runs_the_job_natively_with_the_arrays_addresses(entry):
    x, y = np.zeros(4, np.float32), np.zeros(8, np.float32)
    free = parallel.budget().free
    go = _spin_pool.bound(_table(5), 4096, 64, entry.slow, {"SPIN_POOL": True})
    assert go is not entry.slow
    for _ in range(3):
        entry.fake.runs.clear()
        assert go(x, y) is None and not entry.slow_calls
        assert sorted(i for i, *_ in entry.fake.runs) == list(range(5))
        for i, _, _, got in entry.fake.runs:
            assert got["src"] == x.ctypes.data + 10 * i and got["dst"] == y.ctypes.data + 100 * i
    assert not entry.pool.lock.locked() and parallel.budget().free == free


@needs_c
def test_bound_launcher_takes_the_slow_path_when_the_pool_cannot_run_it(entry):
    x, y = np.zeros(4, np.float32), np.zeros(8, np.float32)
    gate = {"SPIN_POOL": True}
    go = _spin_pool.bound(_table(3), 4096, 64, entry.slow, gate)
    want = (int(x.ctypes.data), int(y.ctypes.data))

    def slow_only() -> None:
        entry.slow_calls.clear()
        entry.fake.runs.clear()
        assert go(x, y) == "slow" and entry.slow_calls == [want] and not entry.fake.runs

    with entry.pool.lock:  # another thread's job holds the pool (and its budget slots)
        slow_only()
    gate["SPIN_POOL"] = False  # the pool switched off
    slow_only()
    gate["SPIN_POOL"] = True
    big = _spin_pool.bound(_table(3), 1 << 30, 64, entry.slow, gate)  # scratchpad not reserved
    entry.slow_calls.clear()
    assert big(x, y) == "slow" and entry.slow_calls == [want]
    if entry.pool.lock.slots:  # the budget's helper slots all taken (say, by a parallel_for)
        taken = parallel.num_threads() - 1
        assert parallel.try_reserve(taken)
        try:
            slow_only()
        finally:
            parallel.release(taken)
    result: list[str] = []  # a thread that never pinned its oneDNN through try_job
    t = threading.Thread(target=lambda: result.append(go(x, y)))
    t.start()
    t.join()
    assert result == ["slow"]
    entry.mod.forget()  # as in a forked child: the parent's pool is not its own
    slow_only()
    _spin_pool._register(entry.pool)
    entry.fake.runs.clear()
    assert go(x, y) is None and len(entry.fake.runs) == 3  # free again: the native path


@needs_c
def test_native_entry_raises_the_status_and_gives_back_the_lock_and_slots(entry):
    entry.fake.fail[1] = 7
    free = parallel.budget().free
    go = _spin_pool.bound(_table(4), 0, 0, entry.slow, {"SPIN_POOL": True})
    x = np.zeros(2, np.float32)
    with pytest.raises(RuntimeError, match="status 7"):
        go(x, x)
    assert sorted(i for i, *_ in entry.fake.runs) == [0, 1, 2, 3]  # the others still ran
    assert not entry.pool.lock.locked() and parallel.budget().free == free
    with pytest.raises(RuntimeError, match="status 7"):
        entry.mod.try_job(_table(4), 0, 0, 0, 0, 0)
    entry.fake.fail.clear()
    assert entry.mod.try_job(_table(4), 0, 0, 0, 0, 0) is True
    assert not entry.pool.lock.locked() and parallel.budget().free == free


def test_without_the_c_loops_bound_is_the_slow_path_and_try_job_runs_nothing(monkeypatch):
    def slow(x: np.ndarray, y: np.ndarray) -> None:
        return None

    monkeypatch.setattr(_spin_native.module, "enabled", False)
    assert _spin_pool.bound(_table(3), 0, 0, slow, {"SPIN_POOL": True}) is slow
    monkeypatch.setattr(_spin_pool, "loops", _spin_pool._NumbaLoops)
    fake = FakeDnnl()
    pool = _spin_pool.Pool(fake.addresses(), 1, fake.new_stream)
    monkeypatch.setattr(_spin_pool, "_pool", pool)
    try:
        assert _spin_pool.try_job(_table(3), 0, 0, 0, 0, 0) is False and not fake.runs
    finally:
        pool.stop()
