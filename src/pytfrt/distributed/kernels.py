"""The ``tfrt_dist.*`` kernels: remote execution and collectives inside an MLIR program.

They run on the *driver*: the HostContext a program runs on must have a cluster attached with
``cluster.attach(host)`` (otherwise each kernel fails with a clear error).  Values of type
``!tfrt_dist.remote`` are handles to data held in the cluster (a
:class:`~pytfrt.distributed.RemoteFuture`): they are available at once, like TFRT's remote
object ids, so a chain of remote kernels is submitted to Ray without waiting, and Ray runs each
step as soon as its inputs exist.  A remote failure (a program error, a lost worker) surfaces
at ``tfrt_dist.fetch`` as an error value (``UNAVAILABLE`` for a lost worker).

=============================================  ==================================================
kernel                                         operands -> results
=============================================  ==================================================
``tfrt_dist.num_workers``                      () -> i32
``tfrt_dist.remote_execute``                   (args...) {program, function, worker} -> remote
                                               x k (the function's non-chain results; args are
                                               tensors, scalars or remotes)
``tfrt_dist.put``                              (tensor) {worker} -> remote
``tfrt_dist.all_reduce``                       (one remote/tensor per worker) {op} -> remote
``tfrt_dist.all_gather``                       (one remote/tensor per worker) {axis} -> remote
                                               (the concatenation along ``axis``)
``tfrt_dist.broadcast``                        (remote/tensor) {root} -> remote
``tfrt_dist.fetch``                            (remote) -> !t.tensor, or the scalar (async:
                                               ready when the value arrives on the driver)
=============================================  ==================================================

Attributes: ``program`` (the name given to ``Cluster.load``), ``function`` (str), ``worker``,
``root`` (i32), ``op`` (``"sum"``, ``"mean"``, ``"max"``, ``"min"``, ``"prod"``), ``axis`` (i64).
Ray is never imported by this module; the cluster does that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pytfrt.distributed.errors import DistributedError
from pytfrt.host.async_value import AsyncValue
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.registry import Attr, KernelError, KernelFrame, KernelRegistry, kernel

if TYPE_CHECKING:
    from pytfrt.distributed.cluster import Cluster


class ClusterBinding:
    """The HostContext shared context that holds the cluster the kernels use."""

    def __init__(self, host: Any) -> None:
        self.cluster: Cluster | None = None


def _cluster(ctx: ExecutionContext) -> Cluster:
    cluster = ctx.host.get_or_create_shared_context(ClusterBinding).cluster
    if cluster is None or cluster.closed:
        raise KernelError(
            "tfrt_dist: no pytfrt.distributed Cluster is attached to this HostContext "
            "(call cluster.attach(host))"
        )
    return cluster


def _value(payload: Any) -> Any:
    """A kernel operand as a cluster argument: tensors as NumPy arrays, remotes as they are."""
    array = getattr(payload, "array", None)
    return array if isinstance(array, np.ndarray) else payload


def _guard(name: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except DistributedError as exc:
        raise KernelError(f"{name}: {exc}") from exc


@kernel("tfrt_dist.num_workers")
def num_workers(ctx: ExecutionContext) -> int:
    """The number of workers of the attached cluster."""
    return _cluster(ctx).num_workers


@kernel("tfrt_dist.remote_execute")
def remote_execute(
    frame: KernelFrame, *args: Any
) -> None:
    """Run ``function`` of ``program`` on ``worker``; one remote result per function result."""
    function, program, worker = frame.attributes[:3]
    cluster = _cluster(frame.exec_ctx)
    fut = _guard(
        "tfrt_dist.remote_execute",
        lambda: cluster.remote_execute(
            int(worker), str(program), *[_value(a) for a in args], function=str(function)
        ),
    )
    if len(fut) != frame.num_results and not (fut.how == "none" and frame.num_results == 0):
        raise KernelError(
            f"tfrt_dist.remote_execute: '{function}' has {len(fut)} result(s), the op "
            f"{frame.num_results}"
        )
    for i in range(frame.num_results):
        frame.emplace_result(i, fut[i])


@kernel("tfrt_dist.put")
def put(ctx: ExecutionContext, tensor: Any, worker: Attr[int]) -> Any:
    """A tensor of the driver as a value held by ``worker``."""
    cluster = _cluster(ctx)
    return _guard("tfrt_dist.put", cluster.put, int(worker), _value(tensor))


def _per_worker(frame: KernelFrame, values: Any, collective: str, attribute: str,
                convert: Any) -> Any:
    """``cluster.<collective>(values, <attribute>)`` for a one-attribute collective kernel."""
    name = f"tfrt_dist.{collective}"
    if len(frame.attributes) != 1:
        raise KernelError(f"{name}: expected one attribute, '{attribute}'")
    method = getattr(_cluster(frame.exec_ctx), collective)
    return _guard(name, method, [_value(v) for v in values], convert(frame.attributes[0]))


@kernel("tfrt_dist.all_reduce")
def all_reduce(frame: KernelFrame, *values: Any) -> Any:
    """The element-wise reduction (attribute ``op``) of one value per worker."""
    return _per_worker(frame, values, "all_reduce", "op", str)


@kernel("tfrt_dist.all_gather")
def all_gather(frame: KernelFrame, *values: Any) -> Any:
    """The concatenation along ``axis`` of one value per worker."""
    return _per_worker(frame, values, "all_gather", "axis", int)


@kernel("tfrt_dist.broadcast")
def broadcast(ctx: ExecutionContext, value: Any, root: Attr[int]) -> Any:
    """``value`` (held by worker ``root``) for every worker."""
    cluster = _cluster(ctx)
    return _guard("tfrt_dist.broadcast", cluster.broadcast, _value(value), int(root))


@kernel("tfrt_dist.fetch")
def fetch(remote: Any) -> AsyncValue[Any]:
    """The remote value on the driver, as a DenseHostTensor (ready when it arrives)."""
    from pytfrt.distributed.futures import RemoteFuture
    from pytfrt.tensor.dense_host_tensor import DenseHostTensor

    if not isinstance(remote, RemoteFuture):
        raise KernelError(f"tfrt_dist.fetch: expected a remote value, got {type(remote).__name__}")
    source = remote.async_value
    result: AsyncValue[Any] = AsyncValue()

    def done() -> None:
        if source.is_error():
            result.set_error(source.error)
            return
        value = source.get()
        if not isinstance(value, np.ndarray):
            result.emplace(value)  # a scalar result (i32, f32, ...)
            return
        if not value.flags.writeable:
            value = value.copy()  # the object store's zero-copy views are read-only
        result.emplace(DenseHostTensor.from_numpy(value))

    source.and_then(done)
    return result


def register(registry: KernelRegistry) -> None:
    """Register the ``tfrt_dist.*`` kernels."""
    registry.add(num_workers, remote_execute, put, all_reduce, all_gather, broadcast, fetch)
