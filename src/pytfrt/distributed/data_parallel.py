"""DataParallel: synchronous data-parallel SGD of a compiled train step over a Cluster.

::

    dp = DataParallel(train_step, cluster, params={"w": w0, "b": b0}, learning_rate=0.1)
    for x, y in batches:
        loss = dp.step(x, y)          # shards the batch, all-reduces gradients, updates replicas
    weights = dp.variables            # {"w": ..., "b": ...}

The train step is anything :meth:`Cluster.load` accepts (or a handle it returned): a
``.bef``/``.mlir`` program, a saved ``CompiledModel`` directory or a ``CompiledModel``.  It is
called as ``f(*params, *batch_shard)`` and must return ``(loss, *grads)``, one gradient per
parameter with the parameter's shape, where ``loss`` is the *mean* over the shard's examples
(the usual reduction).

One step, for ``N`` workers and a batch of ``B`` examples split into shards of ``B_i``
(``numpy.array_split`` along axis 0), is **one actor call per worker**:

1. worker ``i`` first applies the previous step's update, ``p -= learning_rate * sum_j g_j``,
   reading every worker's previous flat gradient ``g_j`` from the object store (in place on
   one node);
2. then runs the train step on its shard with its replica of the parameters, scales the
   gradients by ``B_i / B`` and returns them flattened (one object) with ``B_i / B * loss``.

The sum of the weighted gradients is exactly the full-batch gradient of the mean loss, so ``N``
workers follow the same trajectory as one process on the full batch (up to floating-point
summation order).  The returned loss is the full-batch mean.  The last step's update is
applied by the next step, or by :attr:`variables` / :meth:`checkpoint`.  Summing the gathered
gradients on every worker (instead of a reduce-scatter, see ``Cluster.all_reduce``) trades
``N``-fold gradient reads for one task hop per step instead of three: at the sizes this is
meant for, the hops dominate (``docs/distributed.md``).  The driver sends only the batch
shards and receives one float per worker per step.

Faults: if a worker is lost, :meth:`step` raises :class:`WorkerLost` (no hang:
``timeout``, default the cluster's ``default_timeout``); :meth:`resume` restarts the lost
workers and puts every replica back at the last step that completed on all workers (a
surviving replica keeps its previous parameters for this; if none survives, the variables of the
last :meth:`checkpoint`, initially the starting parameters).  Then training continues.

Thread-safety: one DataParallel is driven by one thread at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pytfrt.distributed.cluster import Cluster, ProgramHandle
from pytfrt.distributed.errors import ClusterError, WorkerLost
from pytfrt.distributed.futures import RemoteFuture

_KEYS = itertools.count()


class DataParallel:
    """Data-parallel training of ``train_step`` on every worker of ``cluster``.

    Args:
        train_step: a program/model for :meth:`Cluster.load`, or a loaded ProgramHandle.
        cluster: the cluster.
        params: the initial parameters, ``{name: array}`` (in the train step's argument order)
            or a sequence (named ``param_0``...).  Float arrays.
        learning_rate: the SGD step size.
        function: the train step's function name (default: ``main`` or the only one).

    Raises:
        ClusterError: no parameters, non-float parameters, unknown function.
    """

    def __init__(
        self,
        train_step: Any,
        cluster: Cluster,
        params: Mapping[str, Any] | Sequence[Any],
        *,
        learning_rate: float = 0.01,
        function: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.handle = train_step if isinstance(train_step, ProgramHandle) else cluster.load(
            train_step, name="train_step"
        )
        self.function = function if function is not None else self.handle.default_function()
        if self.function not in self.handle.functions:
            raise ClusterError(f"the train step has no function '{self.function}'")
        items = list(params.items()) if isinstance(params, Mapping) else [
            (f"param_{i}", p) for i, p in enumerate(params)
        ]
        if not items:
            raise ClusterError("DataParallel needs at least one parameter")
        self.names = [name for name, _ in items]
        arrays = [np.array(p, copy=True) for _, p in items]
        for name, arr in zip(self.names, arrays, strict=True):
            if arr.dtype.kind != "f":
                raise ClusterError(f"parameter '{name}' is {arr.dtype}, not a float array")
        expected = self.handle.functions[self.function]
        if expected != 1 + len(arrays):
            raise ClusterError(
                f"the train step returns {expected} values; DataParallel expects the loss and "
                f"one gradient per parameter ({1 + len(arrays)})"
            )
        self.learning_rate = float(learning_rate)
        self.key = f"dp{next(_KEYS)}"
        self.steps_done = 0
        self._checkpoint = (0, arrays)
        self._broken: WorkerLost | None = None
        self._pending: list[Any] = []  # the last step's flat gradients, not yet applied
        self._init_replicas(arrays, 0)

    # -- training -----------------------------------------------------------------------------

    def step(self, *batch: Any, timeout: float | None = None) -> float:
        """One synchronous SGD step on ``batch`` (arrays sharing axis 0); the full-batch loss.

        Raises:
            WorkerLost: a worker died during the step (call :meth:`resume`, then continue).
            RemoteError: the train step failed on a worker.
            ValueError: the batch is empty, inconsistent, or smaller than the worker count.
            TimeoutError: no result within ``timeout`` while every worker is alive.
        """
        self._check_usable()
        n = self.cluster.num_workers
        shards = self._shard(batch, n)
        total = sum(len(s[0]) for s in shards)
        slots = [self.cluster._slot(i) for i in range(n)]
        for s in slots:
            if not s.alive:
                self._broken = WorkerLost(s.index, s.detail)
                raise self._broken
        pending = self._pending
        steps = [
            s.actor.dp_step.options(num_returns=2).remote(
                self.key, self.handle.id, self.function, len(self.names),
                len(shard[0]) / total, self.learning_rate, len(pending), *pending, *shard,
            )
            for s, shard in zip(slots, shards, strict=True)
        ]
        losses = RemoteFuture(self.cluster, [ref[0] for ref in steps], "tuple", range(n))
        try:
            values = losses.result(timeout if timeout is not None else self.cluster.default_timeout)
        except WorkerLost as exc:
            self._broken = exc
            raise
        self._pending = [ref[1] for ref in steps]
        self.steps_done += 1
        return float(sum(values))

    def _flush(self, timeout: float | None = None) -> None:
        """Apply the pending gradients of the last step on every replica."""
        if not self._pending:
            return
        n = self.cluster.num_workers
        refs = [self.cluster._slot(i).actor.dp_apply.remote(
            self.key, self.learning_rate, *self._pending) for i in range(n)]
        try:
            RemoteFuture(self.cluster, refs, "tuple", range(n)).result(
                timeout if timeout is not None else self.cluster.default_timeout)
        except WorkerLost as exc:
            self._broken = exc
            raise
        self._pending = []

    @staticmethod
    def _shard(batch: Sequence[Any], n: int) -> list[list[np.ndarray]]:
        if not batch:
            raise ValueError("step() needs at least one batch array")
        arrays = [np.asarray(b) for b in batch]
        size = len(arrays[0]) if arrays[0].ndim else 0
        for i, a in enumerate(arrays):
            if a.ndim == 0 or len(a) != size:
                raise ValueError(
                    f"batch array {i} has shape {a.shape}; every batch array needs the same "
                    f"first dimension ({size})"
                )
        if size < n:
            raise ValueError(f"a batch of {size} examples cannot be split over {n} workers")
        split = [np.array_split(a, n, axis=0) for a in arrays]
        return [[s[i] for s in split] for i in range(n)]

    # -- state --------------------------------------------------------------------------------

    @property
    def variables(self) -> dict[str, np.ndarray]:
        """The current parameters (copies), from the first live replica.

        Raises:
            WorkerLost: a worker was lost (call :meth:`resume`).
        """
        self._check_usable()
        self._flush()
        step, params = self._fetch(self.steps_done)
        return dict(zip(self.names, (np.array(p, copy=True) for p in params), strict=True))

    def checkpoint(self) -> None:
        """Keep the current parameters on the driver (used if every replica is lost)."""
        self._check_usable()
        self._flush()
        step, params = self._fetch(self.steps_done)
        self._checkpoint = (step, [np.array(p, copy=True) for p in params])

    def resume(self, timeout: float | None = None) -> int:
        """Restart lost workers and reset every replica to the last completed step.

        Returns the step training resumes from (``steps_done``).

        Raises:
            ClusterError: a worker could not be restarted.
        """
        n = self.cluster.num_workers
        lost = []
        for i in range(n):
            try:  # raises at once for a worker known to be lost
                self.cluster.worker_pid(i, timeout=timeout or 30.0)
            except WorkerLost:
                lost.append(i)
        applied = self.steps_done - (1 if self._pending else 0)  # what replicas hold
        try:
            step, params = self._fetch(applied, skip=lost)
        except (WorkerLost, ClusterError):
            step, params = self._checkpoint
            self._pending = []
        for i in lost:
            self.cluster.restart_worker(i, timeout)
        self._init_replicas(params, step)
        self._broken = None
        self.steps_done = step
        if self._pending:  # the last completed step's gradients, if they survived
            try:
                self._flush(timeout)
            except Exception:  # noqa: BLE001 - lost with their node: resume one step earlier
                self._pending = []
                self._broken = None
                self._init_replicas(params, step)
            else:
                self.steps_done = step + 1
        return self.steps_done

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise ClusterError(
                f"a worker was lost during step {self.steps_done + 1} ({self._broken}); call "
                "resume() first"
            )

    def _fetch(self, step: int, skip: Sequence[int] = ()) -> tuple[int, list[np.ndarray]]:
        """The parameters at ``step`` from the first replica that has them."""
        last: Exception | None = None
        for i in range(self.cluster.num_workers):
            if i in skip or not self.cluster.alive(i):
                continue
            slot = self.cluster._slot(i)
            fut = RemoteFuture(self.cluster, [slot.actor.dp_get.remote(self.key, step)],
                               "single", [i])
            try:
                got_step, params = fut.result(self.cluster.default_timeout)
            except Exception as exc:  # noqa: BLE001 - try the next replica
                last = exc
                continue
            return int(got_step), list(params)
        raise ClusterError(f"no live replica holds the parameters of step {step}: {last}")

    def _init_replicas(self, params: Sequence[np.ndarray], step: int) -> None:
        from pytfrt.distributed.cluster import import_ray

        shared = import_ray().put(list(params))  # one copy in the object store for all replicas
        refs = [
            self.cluster._slot(i).actor.dp_init.remote(self.key, shared, step)
            for i in range(self.cluster.num_workers)
        ]
        RemoteFuture(self.cluster, refs, "tuple", range(self.cluster.num_workers)).result(
            self.cluster.default_timeout
        )
