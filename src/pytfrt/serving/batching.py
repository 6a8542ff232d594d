"""Dynamic batching: concurrent requests of one model version merged along the 0-th dimension.

The scheduling follows TF Serving's batch scheduler, with its four parameters
(:class:`~pytfrt.serving.config.BatchingParameters`):

* requests join the *open* batch while it has room (``max_batch_size`` rows in all) and their
  inputs agree on everything but the 0-th dimension (same trailing shapes and dtypes); a
  request that does not fit closes the open batch and starts a new one;
* a batch is *closed* when it is full, or ``batch_timeout_micros`` after its first request
  arrived *and* a batch slot is free -- while all ``num_batch_threads`` slots are busy the open
  batch keeps filling, so batches grow with the load and shrink to one request when idle;
* closed batches wait in a FIFO of at most ``max_enqueued_batches``; a request that would need a
  new batch while the FIFO is full is refused with ``UNAVAILABLE`` (HTTP 503), TF Serving's
  back-pressure;
* a request with more rows than ``max_batch_size`` is refused with ``INVALID_ARGUMENT``.

A running batch is one task on the host's work queue: concatenate the inputs, call the
servable, then (on the thread that publishes the result) slice each request's rows out of the
outputs and publish them.  Only the timeout needs a thread of its own (the *timer*, which
sleeps until the open batch's deadline).  Thread-safety: :meth:`Batcher.submit` may be called
from any thread; all state is guarded by one condition variable and no callback runs under it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytfrt.host import AsyncValue, HostContext, make_error, make_unconstructed
from pytfrt.serving.bridge import chain, error_status, submit
from pytfrt.serving.config import BatchingParameters
from pytfrt.serving.errors import ServingError
from pytfrt.serving.servable import Arrays, Servable
from pytfrt.support.errors import ErrorCode, Status

BatchObserver = Callable[[int, int, list[float]], None]
"""Called once per batch with (rows, number of requests, each request's queueing delay in s)."""


@dataclass
class _Task:
    inputs: Arrays
    rows: int
    arrived: float
    result: AsyncValue[Arrays] = field(default_factory=make_unconstructed)


@dataclass
class _Batch:
    key: Any
    deadline: float
    tasks: list[_Task] = field(default_factory=list)
    rows: int = 0


class Batcher:
    """Merges the requests of one servable into batches (see the module docstring).

    Args:
        servable: the model version the batches run on.
        host: whose work queue runs the batches.
        params: the batching parameters.
        observe: optional :data:`BatchObserver` (metrics).
    """

    def __init__(self, servable: Servable, host: HostContext, params: BatchingParameters,
                 observe: BatchObserver | None = None) -> None:
        self._servable = servable
        self._host = host
        self._params = params
        self._timeout = params.batch_timeout_micros / 1e6
        self._observe = observe
        self._cond = threading.Condition()
        self._open: _Batch | None = None
        self._ready: deque[_Batch] = deque()
        self._running = 0
        self._closed = False
        self._names = [t.name for t in servable.signature.inputs]
        self._timer = threading.Thread(target=self._timer_loop, name="pytfrt-batch-timer",
                                       daemon=True)
        self._timer.start()

    # -- requests -------------------------------------------------------------------------

    def submit(self, inputs: Arrays) -> AsyncValue[Arrays]:
        """Queue one request (name -> array, all sharing their 0-th dimension)."""
        rows = {a.shape[0] if a.ndim else -1 for a in inputs.values()}
        if len(rows) != 1 or -1 in rows:
            return make_error(Status("batching needs every input to have the same 0-th "
                                     f"dimension, got {sorted(rows)}", ErrorCode.INVALID_ARGUMENT))
        (n,) = rows
        limit = self._params.max_batch_size
        if n > limit:
            return make_error(Status(f"Task size {n} is larger than maximum batch size {limit}",
                                     ErrorCode.INVALID_ARGUMENT))
        key = tuple((name, inputs[name].shape[1:], inputs[name].dtype.str) for name in self._names)
        task = _Task(inputs, n, time.monotonic())
        with self._cond:
            if self._closed:
                return make_error(Status("the model version is being unloaded",
                                         ErrorCode.UNAVAILABLE))
            batch = self._open
            if batch is not None and (batch.key != key or batch.rows + n > limit):
                self._close_open()
                batch = None
            if batch is None:
                if len(self._ready) >= self._params.max_enqueued_batches:
                    return make_error(Status("The batch scheduling queue to which this task was "
                                             "submitted is full", ErrorCode.UNAVAILABLE))
                batch = self._open = _Batch(key, task.arrived + self._timeout)
                self._cond.notify()  # the timer sleeps until this batch's deadline
            batch.tasks.append(task)
            batch.rows += n
            if batch.rows == limit:
                self._close_open()
            runnable = self._take_runnable()
        for ready in runnable:
            self._start(ready)
        return task.result

    def close(self) -> None:
        """Stop the timer thread.  Call when no request uses the batcher any more."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if threading.current_thread() is not self._timer:
            self._timer.join()

    def statistics(self) -> dict[str, int]:
        """Open-batch rows, closed batches waiting, and batches running (a snapshot)."""
        with self._cond:
            open_rows = self._open.rows if self._open is not None else 0
            return {"open_rows": open_rows, "enqueued": len(self._ready),
                    "running": self._running}

    # -- scheduling (callers hold self._cond) -------------------------------------------------

    def _close_open(self) -> None:
        assert self._open is not None
        self._ready.append(self._open)
        self._open = None

    def _take_runnable(self) -> list[_Batch]:
        runnable = []
        while self._running < self._params.num_batch_threads:
            if self._ready:
                batch = self._ready.popleft()
            elif self._open is not None and self._open.deadline <= time.monotonic():
                batch, self._open = self._open, None
            else:
                break
            self._running += 1
            runnable.append(batch)
        return runnable

    def _timer_loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    runnable = self._take_runnable()
                    if runnable:
                        break
                    batch = self._open
                    if batch is not None and self._running < self._params.num_batch_threads:
                        self._cond.wait(max(batch.deadline - time.monotonic(), 0.0))
                    else:
                        self._cond.wait()  # for a new batch or a free slot
            for ready in runnable:
                self._start(ready)

    # -- running a batch --------------------------------------------------------------------

    def _start(self, batch: _Batch) -> None:
        started = time.monotonic()
        if self._observe is not None:
            self._observe(batch.rows, len(batch.tasks), [started - t.arrived for t in batch.tasks])
        tasks = batch.tasks

        def merge_and_run() -> AsyncValue[Arrays]:
            if len(tasks) == 1:
                merged = tasks[0].inputs
            else:
                merged = {name: np.concatenate([t.inputs[name] for t in tasks])
                          for name in self._names}
            return self._servable.predict_async(merged)

        outputs = chain(submit(self._host, merge_and_run), lambda av: av)
        outputs.and_then(lambda: self._finish(tasks, batch.rows, outputs))

    def _finish(self, tasks: list[_Task], rows: int, outputs: AsyncValue[Arrays]) -> None:
        try:
            if outputs.is_error():
                for task in tasks:
                    task.result.set_error(outputs.error)
            else:
                self._split(tasks, rows, outputs.get())
        finally:
            with self._cond:
                self._running -= 1
                runnable = self._take_runnable()
                self._cond.notify()
            for ready in runnable:
                self._start(ready)

    @staticmethod
    def _split(tasks: list[_Task], rows: int, outputs: Arrays) -> None:
        if len(tasks) == 1:
            tasks[0].result.emplace(outputs)
            return
        for name, array in outputs.items():
            if array.ndim == 0 or array.shape[0] != rows:
                got = array.shape[0] if array.ndim else "a scalar"
                error = error_status(ServingError(
                    f"output '{name}' has {got} rows for a batch of {rows} rows; the model "
                    "cannot be batched (serve it without --enable_batching)", ErrorCode.INTERNAL))
                for task in tasks:
                    task.result.set_error(error)
                return
        start = 0
        for task in tasks:
            end = start + task.rows
            task.result.emplace({name: array[start:end] for name, array in outputs.items()})
            start = end
