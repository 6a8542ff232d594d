"""Baselines for the N-Queens scheduling benchmark: the same solver, other ways to run tasks.

Every baseline runs the task tree of :mod:`pytfrt.playground.nqueens` -- one task per valid
placement of ``0..levels`` columns; inner tasks create their children, depth-``levels`` tasks
count their subtree with the given solver -- so task counts are equal across variants and the
timing differences are scheduling costs:

* :func:`solve_single` -- no tasks: the solver on the empty board, on the calling thread.
* :class:`TaskQueuePool` -- the original C++ program's design (an explicit task queue served by
  a fixed set of worker threads), made correct: the queue is an unbounded deque (the original's
  fixed-capacity ring buffer threw ``queue is full``), idle workers sleep on a condition
  variable (the original spun), and the pool knows it is done when the count of queued plus
  running tasks drops to zero (the original relied on an "all tasks enqueued" flag).
* :func:`solve_executor` -- :class:`concurrent.futures.ThreadPoolExecutor`: tasks submit their
  children; completion is tallied by ``add_done_callback``, so no worker ever blocks.
* :func:`solve_dask` -- dask's threaded scheduler on a graph with one key per task (leaves call
  the solver, inner keys sum their children).  Building the graph is part of the timed cost.

All functions validate ``(n, levels)`` with ``check_arguments`` (``ValueError``) and return
``(solutions, tasks)``.  They are safe to call from any thread that is not one of the pool's
own workers; a pool or executor may be reused for many runs, one run at a time.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pytfrt.playground.nqueens_solvers import Placement, Solver, check_arguments, children


def solve_single(n: int, solver: Solver) -> tuple[int, int]:
    """Count the solutions on the calling thread, without tasks. Returns ``(count, 0)``."""
    check_arguments(n, 0)
    return solver(n, ()), 0


class TaskQueuePool:
    """An explicit FIFO task queue served by ``threads`` worker threads (started once).

    Use as a context manager or call :meth:`close`.  :meth:`solve` runs one task tree and
    blocks the calling thread (never a worker) until it is finished.
    """

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"TaskQueuePool needs at least one thread, got {threads}")
        self.threads = threads
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[Placement] = deque()
        self._pending = 0  # queued + running tasks of the current run
        self._total = 0
        self._tasks = 0
        self._error: BaseException | None = None
        self._job: tuple[int, int, Solver] | None = None
        self._closed = False
        self._done = threading.Event()
        self._workers = [
            threading.Thread(target=self._work, name=f"nqueens-pool-{i}", daemon=True)
            for i in range(threads)
        ]
        for worker in self._workers:
            worker.start()

    def solve(self, n: int, levels: int, solver: Solver) -> tuple[int, int]:
        """Run the task tree of ``(n, levels)``; returns ``(solutions, tasks)``.

        Raises:
            ValueError: for invalid arguments or a closed pool.
            Exception: the first exception raised by a task (the run still drains).
        """
        check_arguments(n, levels)
        with self._cond:
            if self._closed:
                raise ValueError("TaskQueuePool.solve() on a closed pool")
            self._job = (n, levels, solver)
            self._total = 0
            self._tasks = 1
            self._error = None
            self._pending = 1
            self._done.clear()
            self._queue.append(())
            self._cond.notify()
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._total, self._tasks

    def _work(self) -> None:
        cond = self._cond
        queue = self._queue
        while True:
            with cond:
                while not queue and not (self._closed and self._pending == 0):
                    cond.wait()
                if not queue:
                    return  # closed, and no run in progress
                placement = queue.popleft()
                job = self._job
            assert job is not None
            n, levels, solver = job
            kids: list[Placement] = []
            count = 0
            error: BaseException | None = None
            try:
                if len(placement) < levels:
                    kids = children(n, placement)
                else:
                    count = solver(n, placement)
            except Exception as exc:  # noqa: BLE001 - handed to the caller of solve()
                error = exc
            with cond:
                if error is not None and self._error is None:
                    self._error = error
                if kids:
                    queue.extend(kids)
                    self._tasks += len(kids)
                    cond.notify(len(kids))
                self._total += count
                self._pending += len(kids) - 1
                if self._pending == 0:
                    self._done.set()
                    if self._closed:
                        cond.notify_all()

    def close(self) -> None:
        """Stop the workers (after any queued work). Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for worker in self._workers:
            worker.join()

    def __enter__(self) -> TaskQueuePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def solve_executor(
    executor: ThreadPoolExecutor, n: int, levels: int, solver: Solver
) -> tuple[int, int]:
    """Run the task tree on ``executor``; returns ``(solutions, tasks)``.

    Raises:
        ValueError: for invalid arguments.
        Exception: the first exception raised by a task.
    """
    check_arguments(n, levels)
    lock = threading.Lock()
    done = threading.Event()
    state: dict[str, Any] = {"pending": 1, "total": 0, "tasks": 1, "error": None}

    def run(placement: Placement) -> int:
        if len(placement) == levels:
            return solver(n, placement)
        kids = children(n, placement)
        with lock:
            state["pending"] += len(kids)
            state["tasks"] += len(kids)
        for kid in kids:
            spawn(kid)
        return 0

    def finished(future: Future[int]) -> None:
        error = future.exception()
        with lock:
            if error is not None:
                state["error"] = state["error"] or error
            else:
                state["total"] += future.result()
            state["pending"] -= 1
            last = state["pending"] == 0
        if last:
            done.set()

    def spawn(placement: Placement) -> None:
        executor.submit(run, placement).add_done_callback(finished)

    spawn(())
    done.wait()
    if state["error"] is not None:
        raise state["error"]
    return state["total"], state["tasks"]


def dask_graph(n: int, levels: int, solver: Solver) -> tuple[dict[str, Any], str]:
    """The dask task graph of ``(n, levels)`` and its root key.

    Keys are ``"nq"`` plus the placement's rows (``"nq/0/4"``); leaves are
    ``(solver, n, placement)`` and inner keys ``(sum, [child keys])``.
    """
    check_arguments(n, levels)
    graph: dict[str, Any] = {}

    def add(placement: Placement) -> str:
        key = "nq" + "".join(f"/{row}" for row in placement)
        if len(placement) == levels:
            graph[key] = (solver, n, placement)
        else:
            graph[key] = (sum, [add(kid) for kid in children(n, placement)])
        return key

    return graph, add(())


def solve_dask(n: int, levels: int, threads: int, solver: Solver) -> tuple[int, int]:
    """Build the graph and run it with ``dask.threaded.get``; returns ``(solutions, tasks)``.

    Raises:
        ValueError: for invalid arguments.
        ImportError: if dask is not installed (``pip install pytfrt[bench]``).
    """
    import dask.threaded

    graph, root = dask_graph(n, levels, solver)
    return int(dask.threaded.get(graph, root, num_workers=threads)), len(graph)
