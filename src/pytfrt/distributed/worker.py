"""What each worker of a :class:`~pytfrt.distributed.Cluster` runs: the body of its Ray actor.

A :class:`Worker` owns one :class:`~pytfrt.host.HostContext` (its own work queue and kernel
registry) and the programs and models shipped to it, by handle id.  It is a plain class: the
cluster wraps it with ``ray.remote`` when it starts an actor, and tests may use it directly.

Payloads (what :meth:`Worker.load` receives, through Ray's object store, once per worker):

* :class:`ProgramPayload` ``kind="bef"``: a BEF file (``.mlir`` is compiled to BEF on the driver,
  so workers never load the MLIR front end).  Each loaded program keeps one
  ``ResourceContext`` for all its calls (state persists across calls, as in a session).
* ``kind="model"``: the files of a saved ``CompiledModel`` directory (``model.bef``,
  ``weights.btf``, ``manifest.json``); the worker writes them to a private temporary
  directory and opens them with ``pytfrt.load``.

Calling convention of :meth:`Worker.execute` for BEF functions: the caller passes the
non-chain arguments in order (chains are supplied by the worker); NumPy arrays become
``DenseHostTensor``s (copied only if read-only, e.g. zero-copy views of the object store),
scalars are passed as ``int``/``float``/``bool`` for ``iN``/``fN``/``i1``.  Results: chains
are dropped, tensors become NumPy arrays.  A function with ``k`` non-chain results returns
``k`` values (Ray ``num_returns=k``), one object each, so every result can be consumed on its
own by another worker.

Arguments may also be :class:`Parts`: several object refs resolved here and combined
(concatenation or a list), which is how a collective's result reaches a worker without
passing through the driver.

Collective helpers (:func:`split_flat`, :func:`reduce_arrays`) implement the object-store
all-reduce (reduce-scatter, then each worker reads the reduced chunks); see
``docs/distributed.md``.

Thread-safety: a Ray actor runs one method at a time (the default), and so does a Worker.
Errors: programs that fail raise :class:`~pytfrt.distributed.errors.RemoteError` with the
kernel's message; bad arguments raise it too, naming the argument.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytfrt.distributed.errors import RemoteError

CHAIN_TYPE = "!tfrt.chain"
TENSOR_TYPES = ("!t.tensor", "!tfrt_tensor.tensor", "!corert.tensorhandle")
REDUCE_OPS = ("sum", "mean", "max", "min", "prod")


@dataclass(frozen=True)
class ProgramPayload:
    """A program or model as shipped to the workers (see the module docstring)."""

    kind: str  # "bef" or "model" (a saved CompiledModel's files)
    name: str
    bef: bytes = b""
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Parts:
    """An argument made of several object refs, combined on the worker.

    ``how`` is ``"flat"`` (concatenate 1-D chunks, reshape to ``shape``), ``"concat"``
    (concatenate along ``axis``) or ``"list"`` (a list of arrays).
    """

    refs: tuple[Any, ...]
    how: str
    axis: int = 0
    shape_ref: Any = None


def combine_parts(values: Sequence[Any], how: str, axis: int = 0, shape: Any = None) -> Any:
    """Combine resolved part values (one place for the driver and the workers)."""
    if how == "flat":
        flat = values[0] if len(values) == 1 else np.concatenate(values)
        return flat.reshape(shape) if shape is not None else flat
    if how == "concat":
        return np.concatenate(values, axis=axis)
    if how == "list":
        return list(values)
    raise ValueError(f"unknown combination '{how}'")


def resolve_argument(arg: Any) -> Any:
    """A worker-side argument: :class:`Parts` are fetched (Ray) and combined, others as is."""
    if not isinstance(arg, Parts):
        return arg
    import ray

    values = ray.get(list(arg.refs))
    shape = ray.get(arg.shape_ref)[0] if arg.shape_ref is not None else None
    return combine_parts(values, arg.how, arg.axis, shape)


def split_flat(array: Any, parts: int) -> list[np.ndarray]:
    """``array`` flattened and split into ``parts`` near-equal contiguous chunks (views)."""
    flat = np.ascontiguousarray(array).reshape(-1)
    return np.array_split(flat, parts)


def reduce_arrays(op: str, arrays: Sequence[Any]) -> np.ndarray:
    """Element-wise ``op`` over equally shaped arrays (``mean`` of integers is ``float64``).

    Raises:
        ValueError: unknown ``op``, no arrays, or arrays of different shapes.
    """
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction '{op}' (expected one of {', '.join(REDUCE_OPS)})")
    if not arrays:
        raise ValueError("nothing to reduce")
    arrs = [np.asarray(a) for a in arrays]
    shape = arrs[0].shape
    for i, a in enumerate(arrs):
        if a.shape != shape:
            raise ValueError(f"array {i} has shape {a.shape}, array 0 has shape {shape}")
    if op == "mean":
        dtype = arrs[0].dtype if arrs[0].dtype.kind in "fc" else np.dtype(np.float64)
        total = np.array(arrs[0], dtype=dtype, copy=True)
        for a in arrs[1:]:
            np.add(total, a, out=total, casting="unsafe")
        total /= len(arrs)
        return total
    ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}[op]
    out = np.array(arrs[0], copy=True)
    for a in arrs[1:]:
        ufunc(out, a, out=out)
    return out


def to_numpy_result(value: Any) -> Any:
    """A kernel result as a NumPy array (tensors) or a plain Python/NumPy scalar."""
    array = getattr(value, "array", None)
    if isinstance(array, np.ndarray):
        return array
    to_dense = getattr(value, "to_dense", None)
    if to_dense is not None:
        return to_dense().array
    return value


def _to_argument(value: Any, type_name: str, position: int, function: str) -> Any:
    """A driver-side value as the payload a BEF function argument of ``type_name`` expects."""
    if type_name in TENSOR_TYPES or type_name.endswith("tensor"):
        from pytfrt.tensor.dense_host_tensor import DenseHostTensor

        if isinstance(value, DenseHostTensor):
            return value
        array = np.asarray(value)
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = np.array(array, copy=True, order="C")
        try:
            return DenseHostTensor.from_numpy(array)
        except Exception as exc:
            raise RemoteError(-1, f"argument {position} of '{function}': {exc}") from exc
    if type_name == "i1":
        return bool(value)
    if type_name.startswith(("i", "ui")):
        return int(value)
    if type_name.startswith(("f", "bf")):
        return float(value)
    return value


class _LoadedProgram:
    """A BEF program loaded into a worker's HostContext."""

    def __init__(self, host: Any, payload: ProgramPayload) -> None:
        from pytfrt.bef.format import BefError
        from pytfrt.bef.reader import read_bef
        from pytfrt.executor import LoadError, load_program
        from pytfrt.host.execution_context import ResourceContext

        self.host = host
        try:
            program = read_bef(payload.bef)
        except BefError as exc:
            raise RemoteError(-1, f"{payload.name}: invalid BEF: {exc}") from exc
        try:
            self.bef = load_program(program, host)
        except LoadError as exc:
            raise RemoteError(-1, f"{payload.name}: cannot load: {exc}") from exc
        self.resources = ResourceContext()

    def functions(self) -> dict[str, int]:
        """Named functions -> number of non-chain results."""
        return {
            f.name: sum(1 for t in f.result_types if t != CHAIN_TYPE)
            for f in self.bef.functions
            if f.name
        }

    def call(self, function: str, args: Sequence[Any]) -> list[Any]:
        from pytfrt.host.async_value import CHAIN, make_available
        from pytfrt.host.execution_context import ExecutionContext
        from pytfrt.host.function import FunctionKind
        from pytfrt.host.registry import KernelError

        fn = self.bef.get_function(function)
        if fn is None:
            raise RemoteError(-1, f"no function '{function}' in the program")
        types = list(fn.argument_types)
        wanted = [t for t in types if t != CHAIN_TYPE]
        if len(args) != len(wanted):
            raise RemoteError(
                -1, f"'{function}' takes {len(wanted)} argument(s) ({', '.join(wanted)}), "
                f"got {len(args)}"
            )
        it = iter(args)
        payloads = [
            CHAIN if t == CHAIN_TYPE else _to_argument(next(it), t, i, function)
            for i, t in enumerate(types)
        ]
        ctx = ExecutionContext(self.host.new_request(self.resources))
        if fn.kind is FunctionKind.SYNC:
            try:
                values = fn.execute_sync(ctx, payloads)
            except KernelError as exc:
                raise RemoteError(-1, f"'{function}' failed: {exc}") from exc
        else:
            avs = [make_available(p) for p in payloads]
            results = fn.execute(ctx, avs)
            self.host.await_values(results)
            errors = [r.error.message for r in results if r.is_error()]
            if errors:
                for r in results:
                    r.drop_ref()
                raise RemoteError(-1, f"'{function}' failed: {errors[0]}")
            values = [r.get() for r in results]
            for r in results:
                r.drop_ref()
        return [
            to_numpy_result(v)
            for v, t in zip(values, fn.result_types, strict=True)
            if t != CHAIN_TYPE
        ]


class _LoadedModel:
    """A saved ``CompiledModel`` opened with ``pytfrt.load`` from a private temporary directory
    (removed once loaded), on the worker's own HostContext."""

    def __init__(self, payload: ProgramPayload, host: Any) -> None:
        self.directory = tempfile.mkdtemp(prefix="pytfrt-worker-model-")
        for rel, data in payload.files.items():
            path = os.path.join(self.directory, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)
        try:
            from pytfrt.model import load
        except ImportError as exc:
            raise RemoteError(-1, f"{payload.name}: pytfrt.model is not available: {exc}") from exc
        try:
            self.model = load(self.directory, host=host)
        except Exception as exc:
            raise RemoteError(-1, f"{payload.name}: cannot load model: {exc}") from exc
        finally:
            # The weights are memory-mapped: the mapping outlives the files, so nothing is left
            # behind even if the worker is killed later.
            self.close()

    def functions(self) -> dict[str, int]:
        return {"main": len(self.model.signature.outputs)}

    def call(self, function: str, args: Sequence[Any]) -> list[Any]:
        if function != "main":
            raise RemoteError(-1, f"a compiled model has one function, 'main', not '{function}'")
        try:
            out = self.model(*args)
        except Exception as exc:
            raise RemoteError(-1, f"model call failed: {type(exc).__name__}: {exc}") from exc
        if isinstance(out, dict):
            names = [spec.name for spec in self.model.signature.outputs]
            return [np.asarray(out[n]) for n in names]
        if isinstance(out, tuple | list):
            return [np.asarray(o) for o in out]
        return [np.asarray(out)]

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class Worker:
    """One worker: a HostContext plus the programs/models loaded into it (see module doc).

    Args:
        index: the worker's index in its cluster (used in error messages).
        work_queue_type: the HostContext's work queue (``"s"``, ``"mstd:N"``, ...).
    """

    def __init__(self, index: int, work_queue_type: str = "mstd:1") -> None:
        from pytfrt.host.host_context import HostContext
        from pytfrt.kernel_libraries import builtin_registry

        self.index = index
        self.diagnostics: list[str] = []
        self.host = HostContext(work_queue_type, builtin_registry(), self._on_diagnostic)
        self.loaded: dict[str, _LoadedProgram | _LoadedModel] = {}
        self.state: dict[str, Any] = {}

    def _on_diagnostic(self, diagnostic: Any) -> None:
        # Runtime errors also reach the caller as error results; keep the last few for `info`.
        self.diagnostics.append(str(getattr(diagnostic, "message", diagnostic)))
        del self.diagnostics[:-20]

    def _error(self, exc: RemoteError) -> RemoteError:
        return RemoteError(self.index, exc.remote_message)

    # -- management ---------------------------------------------------------------------------

    def ping(self) -> int:
        """The worker's process id (also a liveness check)."""
        return os.getpid()

    def load(self, handle_id: str, payload: ProgramPayload) -> dict[str, int]:
        """Load ``payload`` under ``handle_id``; returns function name -> result count."""
        try:
            loaded: _LoadedProgram | _LoadedModel = (
                _LoadedModel(payload, self.host) if payload.kind == "model"
                else _LoadedProgram(self.host, payload)
            )
        except RemoteError as exc:
            raise self._error(exc) from None
        old = self.loaded.pop(handle_id, None)
        if isinstance(old, _LoadedModel):
            old.close()
        self.loaded[handle_id] = loaded
        return loaded.functions()

    def unload(self, handle_id: str) -> None:
        """Forget a handle (no error if unknown)."""
        old = self.loaded.pop(handle_id, None)
        if isinstance(old, _LoadedModel):
            old.close()

    def call(self, handle_id: str, function: str, args: Sequence[Any]) -> list[Any]:
        """Run ``function`` of a loaded handle on resolved ``args``; the non-chain results."""
        loaded = self.loaded.get(handle_id)
        if loaded is None:
            raise RemoteError(self.index, f"handle '{handle_id}' is not loaded on this worker")
        try:
            return loaded.call(function, [resolve_argument(a) for a in args])
        except RemoteError as exc:
            raise self._error(exc) from None
        except Exception as exc:  # noqa: BLE001 - any other failure, with this worker named
            raise RemoteError(self.index, f"'{function}': {type(exc).__name__}: {exc}") from None

    def execute(self, handle_id: str, function: str, num_results: int, *args: Any) -> Any:
        """:meth:`call`, returned the way Ray's ``num_returns=max(num_results, 1)`` expects."""
        results = self.call(handle_id, function, args)
        if len(results) != num_results:
            raise RemoteError(
                self.index, f"'{function}' returned {len(results)} results, "
                f"expected {num_results}"
            )
        if num_results == 0:
            return None
        return results[0] if num_results == 1 else tuple(results)

    # -- collectives (object store) -----------------------------------------------------------

    def split(self, array: Any, parts: int) -> Any:
        """Reduce-scatter, step 1: ``parts`` flat chunks of ``array``, then its shape."""
        array = np.asarray(resolve_argument(array))
        chunks = split_flat(array, parts)
        return (*chunks, (array.shape, array.dtype.str))

    def reduce(self, op: str, count: int, *values: Any) -> np.ndarray:
        """Reduce-scatter, step 2: ``values`` = ``count`` shapes, then ``count`` chunks."""
        shapes, chunks = values[:count], values[count:]
        self._check_same(shapes)
        return self._reduce(op, chunks)

    def reduce_slice(self, op: str, index: int, parts: int, with_shape: bool,
                     *arrays: Any) -> Any:
        """All-reduce when every worker shares one node (and so one object store): chunk
        ``index`` of ``parts`` of the reduction, read straight from the whole input arrays
        (zero-copy views of the shared store); with ``with_shape``, also the shape."""
        arrs = [np.asarray(resolve_argument(a)) for a in arrays]
        described = [(a.shape, a.dtype.str) for a in arrs]
        self._check_same(described)
        size = arrs[0].size
        lo = index * (size // parts) + min(index, size % parts)  # numpy.array_split's bounds
        hi = lo + size // parts + (1 if index < size % parts else 0)
        chunk = self._reduce(op, [a.reshape(-1)[lo:hi] for a in arrs])
        return (chunk, described[0]) if with_shape else chunk

    def _check_same(self, described: Sequence[Any]) -> None:
        for i, s in enumerate(described):
            if tuple(s) != tuple(described[0]):
                raise RemoteError(
                    self.index, f"all_reduce: worker {i}'s array is {_describe(s)}, "
                    f"worker 0's is {_describe(described[0])}"
                )

    def _reduce(self, op: str, chunks: Sequence[Any]) -> np.ndarray:
        try:
            return reduce_arrays(op, chunks)
        except ValueError as exc:
            raise RemoteError(self.index, f"all_reduce: {exc}") from None

    def node(self) -> str:
        """The Ray node this worker runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def identity(self, value: Any) -> Any:
        """The value as this worker sees it (resolves :class:`Parts`)."""
        return resolve_argument(value)

    # -- data-parallel training -------------------------------------------------------------

    def dp_init(self, key: str, params: Sequence[Any], step: int) -> int:
        """Hold a replica of the parameters (copies) at training step ``step``."""
        self.state[key] = {
            "params": [np.array(p, copy=True) for p in params],
            "prev": None,
            "step": step,
        }
        return step

    def dp_step(
        self, key: str, handle_id: str, function: str, num_params: int, weight: float,
        learning_rate: float, num_pending: int, *rest: Any,
    ) -> tuple[float, np.ndarray]:
        """One data-parallel step on this replica: ``(weight * loss, weight * flat gradient)``.

        ``rest`` holds ``num_pending`` flat gradients of the previous step (every worker's, read
        in place from the object store), applied first (:meth:`dp_apply`), then the batch shard.
        The train step is called as ``f(*params, *shard)`` and returns ``(loss, *grads)``; the
        gradients, scaled by ``weight`` (this shard's share of the batch), are flattened into
        one float vector.
        """
        pending, batch = rest[:num_pending], rest[num_pending:]
        if pending:
            self.dp_apply(key, learning_rate, *pending)
        st = self.state[key]
        out = self.call(handle_id, function, [*st["params"], *batch])
        if len(out) != 1 + num_params:
            raise RemoteError(
                self.index, f"the train step returned {len(out)} values; expected the loss and "
                f"{num_params} gradients"
            )
        loss, grads = out[0], out[1:]
        for i, (g, p) in enumerate(zip(grads, st["params"], strict=True)):
            if np.shape(g) != p.shape:
                raise RemoteError(
                    self.index, f"gradient {i} has shape {np.shape(g)}, its parameter "
                    f"{p.shape}"
                )
        dtype = np.result_type(*[p.dtype for p in st["params"]])
        flat = np.concatenate([np.asarray(g, dtype).reshape(-1) for g in grads])
        flat *= dtype.type(weight)
        return float(np.asarray(loss).reshape(-1).sum()) * weight, flat

    def dp_apply(self, key: str, learning_rate: float, *grads: Any) -> int:
        """``params -= learning_rate * sum(grads)`` (the workers' weighted flat gradients, so
        their sum is the full-batch gradient); keeps the previous parameters; the new step."""
        st = self.state[key]
        flat = grads[0] if len(grads) == 1 else self._reduce("sum", grads)
        prev = [p.copy() for p in st["params"]]
        offset = 0
        for p in st["params"]:
            n = p.size
            p -= p.dtype.type(learning_rate) * flat[offset : offset + n].reshape(p.shape)
            offset += n
        st["prev"] = prev
        st["step"] += 1
        return int(st["step"])

    def dp_get(self, key: str, step: int | None = None) -> tuple[int, list[np.ndarray]]:
        """The replica's parameters at ``step`` (the current or the previous step)."""
        st = self.state[key]
        if step is None or step == st["step"]:
            return st["step"], st["params"]
        if step == st["step"] - 1 and st["prev"] is not None:
            return step, st["prev"]
        raise RemoteError(self.index, f"no parameters for step {step} (at step {st['step']})")

    def shutdown(self) -> None:
        """Stop the HostContext and remove temporary model directories."""
        for loaded in self.loaded.values():
            if isinstance(loaded, _LoadedModel):
                loaded.close()
        self.loaded.clear()
        self.host.shutdown()


def _describe(shape_and_dtype: Any) -> str:
    shape, dtype = shape_and_dtype
    return f"{np.dtype(dtype).name}{list(shape)}"
