"""pytfrt.distributed: TFRT's distributed runtime on Ray (optional extra ``pytfrt[ray]``).

* :class:`Cluster` -- worker actors, each owning a HostContext; ``load``, ``remote_execute``,
  collectives (``all_reduce``, ``all_gather``, ``broadcast``), ``kill_worker`` /
  ``restart_worker``.
* :class:`RemoteFuture` -- ``.result(timeout)``, ``.done()``, ``await``, ``.async_value``.
* :class:`DataParallel` -- synchronous data-parallel training of a compiled train step.
* Errors: :class:`WorkerLost`, :class:`RemoteError`, :class:`ClusterError`.
* The ``tfrt_dist.*`` kernels (:mod:`pytfrt.distributed.kernels`), registered lazily by prefix.

Documented in ``docs/distributed.md``.  Ray is imported lazily, inside the functions that need
it: importing this package never loads Ray.
"""

from pytfrt.distributed.cluster import Cluster as Cluster
from pytfrt.distributed.cluster import ProgramHandle as ProgramHandle
from pytfrt.distributed.data_parallel import DataParallel as DataParallel
from pytfrt.distributed.errors import ClusterError as ClusterError
from pytfrt.distributed.errors import DistributedError as DistributedError
from pytfrt.distributed.errors import RemoteError as RemoteError
from pytfrt.distributed.errors import WorkerLost as WorkerLost
from pytfrt.distributed.futures import RemoteFuture as RemoteFuture

__all__ = [
    "Cluster",
    "ClusterError",
    "DataParallel",
    "DistributedError",
    "ProgramHandle",
    "RemoteError",
    "RemoteFuture",
    "WorkerLost",
]
