"""Cluster: a set of Ray actors, each owning a pytfrt HostContext, driven from one process.

::

    from pytfrt.distributed import Cluster

    with Cluster(num_workers=2) as cluster:            # starts a small local Ray instance
        prog = cluster.load("model.mlir")              # shipped once, through the object store
        fut = cluster.remote_execute(0, prog, x, function="f")
        y = fut.result(timeout=30)                     # or: await fut; or fut.async_value
        total = cluster.all_reduce([fut, cluster.remote_execute(1, prog, x2, function="f")])

With no ``address`` the cluster starts a local Ray instance sized for a small machine (the given
number of CPUs, a small object store, no dashboard, quiet logs) and shuts it down on exit;
with ``address="auto"`` or a Ray address it joins an existing cluster and leaves it running.
If Ray is already initialised in this process the cluster uses it as is.

Workers are Ray actors (``pytfrt.distributed.worker.Worker``), placed with Ray's ``SPREAD``
strategy and reserving ``cpus_per_worker`` CPUs each (0 by default, so a 2-core machine can
also run plain Ray tasks next to them).

Collectives (:meth:`Cluster.all_reduce`, :meth:`~Cluster.all_gather`,
:meth:`~Cluster.broadcast`) work on arrays held in the cluster (futures of worker results,
object refs) or given as NumPy arrays; their results are :class:`RemoteFuture` s that any worker
can consume without the data passing through the driver.  The algorithm (object store
reduce-scatter) and why it was chosen over ``ray.util.collective`` are in
``docs/distributed.md``.

Faults: :meth:`kill_worker` (tests) or any real loss of a worker process fails its pending
futures with :class:`WorkerLost` naming it; calls to a lost worker fail at once;
:meth:`restart_worker` starts a new actor and reloads every loaded program on it.

Thread-safety: every method may be called from any thread; worker bookkeeping is guarded by a
lock.  Errors: bad worker indices, unknown handles and calls after :meth:`shutdown` raise
:class:`ClusterError`; a missing Ray raises :class:`ClusterError` saying to install
``pytfrt[ray]``.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt.distributed.errors import ClusterError, RemoteError, WorkerLost
from pytfrt.distributed.futures import RemoteFuture
from pytfrt.distributed.worker import REDUCE_OPS, Parts, ProgramPayload, Worker

DEFAULT_OBJECT_STORE_BYTES = 200 * 1024 * 1024


def import_ray() -> Any:
    """Import Ray, or raise :class:`ClusterError` naming the extra to install."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - ray is installed in the test environment
        raise ClusterError(
            "pytfrt.distributed needs Ray: pip install 'pytfrt[ray]'"
        ) from exc
    return ray


@dataclass
class ProgramHandle:
    """A program or model loaded on every worker of a cluster (returned by ``Cluster.load``).

    Attributes:
        id: the handle's unique id on the workers.
        name: the name given at load time (kernels refer to programs by it).
        functions: function name -> number of (non-chain) results.
        kind: ``"bef"`` or ``"model"``.
    """

    id: str
    name: str
    functions: dict[str, int]
    kind: str
    payload_ref: Any = field(repr=False, default=None)

    def default_function(self) -> str:
        """The function called when none is named: ``main``, or the only function."""
        if "main" in self.functions:
            return "main"
        if len(self.functions) == 1:
            return next(iter(self.functions))
        raise ClusterError(
            f"program '{self.name}' has several functions ({', '.join(sorted(self.functions))});"
            " pass function=..."
        )


@dataclass
class _WorkerSlot:
    index: int
    actor: Any
    actor_id: str
    alive: bool = True
    detail: str = ""
    generation: int = 0
    node: str | None = None


class Cluster:
    """A driver for ``num_workers`` pytfrt workers on Ray (see the module docstring).

    Args:
        num_workers: number of worker actors (>= 1).
        address: ``None`` (start a local Ray instance), ``"auto"`` or a Ray address (join).
        work_queue_type: each worker's HostContext work queue (``"s"``, ``"mstd:N[,M]"``).
        num_cpus: CPUs of a local Ray instance (default: this machine's count).
        object_store_memory: bytes of a local instance's object store (default 200 MB).
        cpus_per_worker: CPUs each worker actor reserves (default 0).
        default_timeout: seconds :meth:`call` and training steps wait by default.

    Raises:
        ClusterError: Ray missing, ``num_workers < 1``, or the workers failed to start.
    """

    def __init__(
        self,
        num_workers: int = 2,
        address: str | None = None,
        work_queue_type: str = "mstd:1",
        *,
        num_cpus: int | None = None,
        object_store_memory: int = DEFAULT_OBJECT_STORE_BYTES,
        cpus_per_worker: float = 0.0,
        default_timeout: float = 120.0,
    ) -> None:
        if num_workers < 1:
            raise ClusterError(f"num_workers must be at least 1, got {num_workers}")
        from pytfrt.host.work_queue import create_work_queue

        try:  # validate the queue type on the driver: one clear error instead of N remote ones
            create_work_queue(work_queue_type).shutdown()
        except ValueError as exc:
            raise ClusterError(f"bad work_queue_type '{work_queue_type}': {exc}") from exc
        if address is None and "ray" not in sys.modules:
            # A local cluster talks over loopback only, never over the host's other addresses:
            # this switch (read when Ray is imported) makes Ray use 127.0.0.1 for its node.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray = import_ray()
        self.num_workers = num_workers
        self.work_queue_type = work_queue_type
        self.cpus_per_worker = cpus_per_worker
        self.default_timeout = default_timeout
        self._lock = threading.RLock()
        self._closed = False
        self._handles: dict[str, ProgramHandle] = {}
        self._ids = itertools.count()
        self._owns_ray = False
        self._actor_index: dict[str, int] = {}
        if not ray.is_initialized():
            if address is None:
                ray.init(
                    num_cpus=num_cpus if num_cpus is not None else (os.cpu_count() or 1),
                    object_store_memory=object_store_memory,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                    configure_logging=True,
                )
            else:
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
            self._owns_ray = True
        self._actor_class = _actor_class(ray)
        self._workers = [self._start_worker(i) for i in range(num_workers)]
        try:
            ray.get([w.actor.ping.remote() for w in self._workers], timeout=default_timeout)
        except Exception as exc:
            self.shutdown()
            raise ClusterError(f"the workers failed to start: {exc}") from exc

    # -- lifecycle ----------------------------------------------------------------------------

    def _start_worker(self, index: int, generation: int = 0) -> _WorkerSlot:
        actor = self._actor_class.options(
            num_cpus=self.cpus_per_worker,
            scheduling_strategy="SPREAD",
            max_restarts=0,
            max_task_retries=0,
        ).remote(index, self.work_queue_type)
        slot = _WorkerSlot(index, actor, actor._actor_id.hex(), generation=generation)
        self._actor_index[slot.actor_id] = index
        return slot

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop every worker (and the local Ray instance this cluster started). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(getattr(self, "_workers", []))
        ray = import_ray()
        for w in workers:
            if w.alive:
                try:
                    ray.kill(w.actor, no_restart=True)
                except Exception:  # noqa: BLE001, S110 - best effort at shutdown
                    pass
        if self._owns_ray:
            ray.shutdown()

    @property
    def closed(self) -> bool:
        """True after :meth:`shutdown`."""
        return self._closed

    def _slot(self, index: int) -> _WorkerSlot:
        if self._closed:
            raise ClusterError("the cluster is shut down")
        if not isinstance(index, int | np.integer) or not 0 <= index < self.num_workers:
            raise ClusterError(
                f"worker index {index!r} out of range (the cluster has {self.num_workers} workers)"
            )
        return self._workers[int(index)]

    def alive(self, index: int) -> bool:
        """Whether worker ``index`` is believed alive (a lost worker is noticed on first use)."""
        return self._slot(index).alive

    def worker_pid(self, index: int, timeout: float = 30.0) -> int:
        """The process id of worker ``index`` (raises :class:`WorkerLost` if it is gone)."""
        slot = self._slot(index)
        if not slot.alive:
            raise WorkerLost(index, slot.detail)
        return int(RemoteFuture(self, [slot.actor.ping.remote()], "single", [index]).result(
            timeout
        ))

    def kill_worker(self, index: int) -> None:
        """Kill worker ``index`` now (for tests): its pending futures fail with WorkerLost."""
        ray = import_ray()
        slot = self._slot(index)
        with self._lock:
            slot.alive = False
            slot.detail = "killed by Cluster.kill_worker"
        ray.kill(slot.actor, no_restart=True)
        # ray.kill is asynchronous: return once the actor no longer answers (at most ~10 s).
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            try:
                ray.get(slot.actor.ping.remote(), timeout=1.0)
            except Exception:  # noqa: BLE001 - any failure to answer: it is gone
                return
            time.sleep(0.05)

    def restart_worker(self, index: int, timeout: float | None = None) -> None:
        """Replace worker ``index`` by a new actor and reload every loaded program on it.

        Raises:
            ClusterError: the new worker failed to start or to load a program.
        """
        ray = import_ray()
        old = self._slot(index)
        if old.alive:
            try:
                ray.kill(old.actor, no_restart=True)
            except Exception:  # noqa: BLE001, S110 - it may already be gone
                pass
        new = self._start_worker(index, old.generation + 1)
        with self._lock:
            self._workers[index] = new
            handles = list(self._handles.values())
        refs = [new.actor.load.remote(h.id, h.payload_ref) for h in handles]
        try:
            ray.get([new.actor.ping.remote(), *refs], timeout=timeout or self.default_timeout)
        except Exception as exc:
            raise ClusterError(f"worker {index} failed to restart: {exc}") from exc

    # -- errors -------------------------------------------------------------------------------

    def _index_of_actor(self, actor_id: str | None) -> int | None:
        """The worker index of an actor id, current or replaced by a restart."""
        return self._actor_index.get(actor_id) if actor_id is not None else None

    def _mark_lost(self, index: int, detail: str) -> None:
        with self._lock:
            slot = self._workers[index]
            if slot.alive:
                slot.alive = False
                slot.detail = detail

    def _translate(self, exc: BaseException, workers: Sequence[int], probe: bool = True
                   ) -> BaseException:
        """A Ray exception as :class:`WorkerLost` / :class:`RemoteError` (workers named).

        With ``probe`` the workers may be pinged to find a dead one; Ray's callback thread
        passes ``False`` (it must not block on Ray)."""
        from ray.exceptions import ObjectLostError, RayActorError, RayTaskError

        cause: BaseException = exc
        if isinstance(exc, RayTaskError) and exc.cause is not None:
            cause = exc.cause
        elif isinstance(exc, WorkerLost | RemoteError | ClusterError):
            return exc
        if isinstance(cause, RemoteError):
            return RemoteError(cause.index, cause.remote_message)
        if isinstance(cause, WorkerLost):
            return cause
        if isinstance(cause, RayActorError):
            actor_id = getattr(cause, "actor_id", None)
            index = self._index_of_actor(actor_id)
            if index is None:
                index = workers[0] if len(workers) == 1 else -1
            if index < 0:
                lost = self._first_lost(workers, probe)
                if lost is not None:
                    return lost
            detail = self._workers[index].detail if index >= 0 else ""
            if not detail:
                detail = "the worker process died"
            if index >= 0:
                self._mark_lost(index, detail)
            return WorkerLost(index, detail)
        if isinstance(cause, ObjectLostError):
            lost = self._first_lost(workers, probe)
            return lost if lost is not None else RemoteError(-1, f"a result was lost: {cause}")
        return RemoteError(-1, f"{type(cause).__name__}: {cause}")

    def _first_lost(self, workers: Sequence[int], probe: bool = True) -> WorkerLost | None:
        """The first of ``workers`` known to be dead; with ``probe``, also pings the others."""
        for i in workers:
            slot = self._workers[i]
            if not slot.alive:
                return WorkerLost(i, slot.detail)
        if not probe:
            return None
        ray = import_ray()
        for i in workers:
            slot = self._workers[i]
            try:
                ray.get(slot.actor.ping.remote(), timeout=5.0)
            except Exception as exc:  # noqa: BLE001 - any failure to answer means lost
                from ray.exceptions import GetTimeoutError

                if isinstance(exc, GetTimeoutError):
                    continue  # busy, not dead
                self._mark_lost(i, f"the worker process died ({type(exc).__name__})")
                return WorkerLost(i, slot.detail)
        return None

    # -- programs -----------------------------------------------------------------------------

    def load(
        self, program: Any, *, name: str | None = None, timeout: float | None = None
    ) -> ProgramHandle:
        """Ship a program or model to every worker once and return its handle.

        ``program`` is a ``.bef``/``.mlir`` path, a saved ``CompiledModel`` directory, a
        ``CompiledModel`` (saved to a temporary directory first), or a ``pytfrt.bef.Program``.
        The payload is put in Ray's object store once; each worker reads it from there.

        Raises:
            ClusterError: unknown kind of program, or a file that does not exist.
            RemoteError: a worker could not load it (e.g. unknown kernel), with the reason.
        """
        ray = import_ray()
        payload = _make_payload(program, name)
        ref = ray.put(payload)
        handle_id = f"{payload.name}#{next(self._ids)}-{uuid.uuid4().hex[:6]}"
        workers = [self._slot(i) for i in range(self.num_workers)]
        refs = [w.actor.load.remote(handle_id, ref) for w in workers]
        results = RemoteFuture(self, refs, "tuple", range(self.num_workers)).result(
            timeout or self.default_timeout
        )
        handle = ProgramHandle(handle_id, payload.name, dict(results[0]), payload.kind, ref)
        with self._lock:
            self._handles[handle_id] = handle
        return handle

    def unload(self, handle: ProgramHandle) -> None:
        """Forget a handle on every live worker."""
        with self._lock:
            self._handles.pop(handle.id, None)
        for w in self._workers:
            if w.alive:
                w.actor.unload.remote(handle.id)

    def handle(self, name: str) -> ProgramHandle:
        """The most recently loaded handle with ``name`` (kernels use this)."""
        with self._lock:
            for h in reversed(list(self._handles.values())):
                if h.name == name:
                    return h
        raise ClusterError(f"no program named '{name}' is loaded on the cluster")

    def remote_execute(
        self, worker_index: int, handle: ProgramHandle | str, *arrays: Any,
        function: str | None = None,
    ) -> RemoteFuture:
        """Run ``function`` of ``handle`` on one worker; returns at once with a future.

        ``arrays`` are NumPy arrays, scalars, :class:`RemoteFuture` s or Ray object refs
        (futures and refs travel worker to worker through the object store).  The future's
        value is the single result, a tuple of results (``future[i]`` selects one), or
        ``None`` for a function with no non-chain results.

        Raises:
            ClusterError: bad worker index, unknown handle or function (at once).
        """
        slot = self._slot(worker_index)
        if isinstance(handle, str):
            handle = self.handle(handle)
        if handle.id not in self._handles:
            raise ClusterError(f"program '{handle.name}' is not loaded on this cluster")
        fname = function if function is not None else handle.default_function()
        if fname not in handle.functions:
            raise ClusterError(
                f"program '{handle.name}' has no function '{fname}' "
                f"(it has: {', '.join(sorted(handle.functions))})"
            )
        n = handle.functions[fname]
        if not slot.alive:
            return RemoteFuture.failed(self, WorkerLost(slot.index, slot.detail), [slot.index])
        args = [_as_argument(a) for a in arrays]
        method = slot.actor.execute.options(num_returns=max(n, 1))
        refs = method.remote(handle.id, fname, n, *args)
        refs = refs if isinstance(refs, list) else [refs]
        how = "none" if n == 0 else "single" if n == 1 else "tuple"
        return RemoteFuture(self, refs, how, [slot.index])

    def call(self, worker_index: int, handle: ProgramHandle | str, *arrays: Any,
             function: str | None = None, timeout: float | None = None) -> Any:
        """``remote_execute(...).result(timeout)`` (``default_timeout`` if not given)."""
        return self.remote_execute(worker_index, handle, *arrays, function=function).result(
            timeout if timeout is not None else self.default_timeout
        )

    def put(self, worker_index: int, array: Any) -> RemoteFuture:
        """``array`` as a value held by worker ``worker_index`` (copied into its process)."""
        slot = self._slot(worker_index)
        if not slot.alive:
            return RemoteFuture.failed(self, WorkerLost(slot.index, slot.detail), [slot.index])
        ref = slot.actor.identity.remote(_as_argument(array))
        return RemoteFuture(self, [ref], "single", [slot.index])

    # -- collectives --------------------------------------------------------------------------

    def _inputs(self, arrays_per_worker: Sequence[Any], what: str) -> list[Any]:
        if isinstance(arrays_per_worker, np.ndarray) or len(arrays_per_worker) != self.num_workers:
            raise ClusterError(
                f"{what} takes one array per worker ({self.num_workers}), got "
                f"{_count(arrays_per_worker)}"
            )
        return [_as_argument(a) for a in arrays_per_worker]

    def all_reduce(
        self, arrays_per_worker: Sequence[Any], op: str = "sum"
    ) -> RemoteFuture:
        """Element-wise ``op`` (``sum``, ``mean``, ``max``, ``min``, ``prod``) over one array per
        worker; every worker can read the result (object-store reduce-scatter).

        Worker ``c`` reduces chunk ``c`` (of ``N``) of every worker's array; the result is the
        ``N`` reduced chunks (one object each), which the driver or any worker concatenates when
        it reads the future.  When all workers share one node (one object store), reducers read
        their chunk straight from the input arrays; otherwise each worker first splits its
        array into ``N`` chunk objects (a reduce-scatter: each byte crosses the network once).

        Raises:
            ClusterError: wrong number of arrays, unknown ``op`` (at once).
            RemoteError: (from the future) the arrays differ in shape or dtype.
        """
        if op not in REDUCE_OPS:
            raise ClusterError(
                f"unknown all_reduce op '{op}' (expected one of {', '.join(REDUCE_OPS)})"
            )
        args = self._inputs(arrays_per_worker, "all_reduce")
        n = self.num_workers
        slots = [self._slot(i) for i in range(n)]
        dead = [s for s in slots if not s.alive]
        if dead:
            return RemoteFuture.failed(self, WorkerLost(dead[0].index, dead[0].detail), range(n))
        if self._one_node():
            reduced, shape = self._reduce_in_place(op, slots, args, with_shape=True)
            return RemoteFuture(self, reduced, "flat", range(n), shape_ref=shape)
        splits = [s.actor.split.options(num_returns=n + 1).remote(a, n)
                  for s, a in zip(slots, args, strict=True)]
        shapes = [sp[n] for sp in splits]
        reduced = [
            slots[c].actor.reduce.remote(op, n, *shapes, *[sp[c] for sp in splits])
            for c in range(n)
        ]
        return RemoteFuture(self, reduced, "flat", range(n), shape_ref=shapes[0])

    def _reduce_in_place(self, op: str, slots: Sequence[_WorkerSlot], arrays: Sequence[Any],
                         with_shape: bool) -> tuple[list[Any], Any]:
        """One shared object store: worker ``c`` reduces chunk ``c`` of every array in place.
        Returns the chunk refs and (``with_shape``) the ref of the ``(shape, dtype)``."""
        n = len(slots)
        first = slots[0].actor.reduce_slice.options(num_returns=2 if with_shape else 1).remote(
            op, 0, n, with_shape, *arrays)
        head, shape = (first[0], first[1]) if with_shape else (first, None)
        rest = [slots[c].actor.reduce_slice.remote(op, c, n, False, *arrays)
                for c in range(1, n)]
        return [head, *rest], shape

    def _one_node(self) -> bool:
        """Whether every worker runs on the same Ray node (asked once per worker start)."""
        with self._lock:
            missing = [w for w in self._workers if w.node is None]
        if missing:
            import_ray()
            nodes = RemoteFuture(self, [w.actor.node.remote() for w in missing], "tuple",
                                 [w.index for w in missing]).result(self.default_timeout)
            with self._lock:
                for w, node in zip(missing, nodes, strict=True):
                    w.node = node
        return len({w.node for w in self._workers}) == 1

    def all_gather(self, arrays_per_worker: Sequence[Any], axis: int | None = None
                   ) -> RemoteFuture:
        """Every worker's array, for every worker: a list (``axis=None``) or their
        concatenation along ``axis``.  Arrays already in the cluster are not moved until a
        worker (or the driver) reads the result.

        Raises:
            ClusterError: wrong number of arrays.
        """
        args = self._inputs(arrays_per_worker, "all_gather")
        refs = [self._held_by(i, a) for i, a in enumerate(args)]
        return RemoteFuture(
            self, refs, "list" if axis is None else "concat", range(self.num_workers),
            axis=axis or 0,
        )

    def broadcast(self, value: Any, root: int = 0) -> RemoteFuture:
        """``value`` (held by worker ``root``, or a NumPy array from the driver) for every
        worker.  In the object store a broadcast is one object that each worker reads (Ray
        copies it once per node); a NumPy array is put there once.

        Raises:
            ClusterError: bad ``root``.
        """
        slot = self._slot(root)
        arg = _as_argument(value)
        if isinstance(arg, RemoteFuture):
            return arg
        return RemoteFuture(self, [self._held_by(root, arg)], "single", [slot.index])

    def _held_by(self, index: int, arg: Any) -> Any:
        """An object ref for a worker argument: refs as they are, :class:`Parts` combined by
        worker ``index``, other values put in the object store by the driver."""
        if _is_ref(arg):
            return arg
        slot = self._slot(index)
        if isinstance(arg, Parts):
            return slot.actor.identity.remote(arg)
        return import_ray().put(arg)

    # -- the kernels' view --------------------------------------------------------------------

    def attach(self, host: Any) -> None:
        """Make this cluster the one the ``tfrt_dist.*`` kernels use on ``host``."""
        from pytfrt.distributed.kernels import ClusterBinding

        host.get_or_create_shared_context(ClusterBinding).cluster = self


def _actor_class(ray: Any) -> Any:
    """The Ray actor class of a worker: ``ping`` runs in its own concurrency group, so a
    liveness check is answered while the worker is busy running a program."""

    class PytfrtWorker(Worker):
        @ray.method(concurrency_group="control")  # type: ignore[misc]
        def ping(self) -> int:
            return Worker.ping(self)

    return ray.remote(concurrency_groups={"control": 1})(PytfrtWorker)


def _count(x: Any) -> str:
    try:
        return str(len(x))
    except TypeError:
        return type(x).__name__


def _is_ref(x: Any) -> bool:
    return type(x).__name__ == "ObjectRef"


def _as_argument(value: Any) -> Any:
    """A user argument as what a worker method receives."""
    if isinstance(value, RemoteFuture):
        return value.as_argument()
    return value


def _make_payload(program: Any, name: str | None) -> ProgramPayload:
    """Read a program/model into the payload the workers load (see :meth:`Cluster.load`)."""
    from pytfrt.bef.program import Program
    from pytfrt.bef.writer import write_bef

    if isinstance(program, Program):
        return ProgramPayload("bef", name or "program", bef=write_bef(program))
    if hasattr(program, "signature") and hasattr(program, "save"):  # a CompiledModel
        return _compiled_model_payload(program, name or "model")
    if isinstance(program, str | os.PathLike):
        path = Path(program)
        if path.is_dir():
            return _model_payload(path, name or path.name)
        if not path.is_file():
            raise ClusterError(f"cannot load '{path}': no such file or directory")
        data = path.read_bytes()
        if data[:2] == b"\x0b\xef":  # BEF's magic: ship the file as it is
            return ProgramPayload("bef", name or path.stem, bef=data)
        from pytfrt.mlir import MlirError, compile_mlir

        try:
            prog = compile_mlir(data.decode("utf-8"), str(path))
        except (MlirError, UnicodeDecodeError) as exc:
            raise ClusterError(f"cannot load '{path}': {exc}") from exc
        return ProgramPayload("bef", name or path.stem, bef=write_bef(prog))
    raise ClusterError(
        f"cannot load a {type(program).__name__}: expected a .bef/.mlir path, a saved model "
        "directory, a CompiledModel or a pytfrt.bef.Program"
    )


def _compiled_model_payload(model: Any, name: str) -> ProgramPayload:
    """A CompiledModel as its saved files (``model.save``; workers open them with
    ``pytfrt.load``)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pytfrt-model-") as tmp:
        model.save(tmp)
        return _model_payload(Path(tmp), name)


def _model_payload(directory: Path, name: str) -> ProgramPayload:
    if not (directory / "manifest.json").is_file():
        raise ClusterError(f"'{directory}' is not a saved CompiledModel (no manifest.json)")
    files = {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }
    return ProgramPayload("model", name, files=files)
