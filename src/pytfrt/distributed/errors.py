"""The exceptions of :mod:`pytfrt.distributed` and their mapping to pytfrt ``Status`` codes.

* :class:`DistributedError` -- base class (a :class:`~pytfrt.support.errors.PytfrtError`).
* :class:`WorkerLost` -- a worker process (or its node) went away; names the worker.
* :class:`RemoteError` -- the remote program or model failed; carries the worker's message.
* :class:`ClusterError` -- misuse on the driver: bad worker index, unknown handle, closed
  cluster, Ray not installed.

Every error a :class:`~pytfrt.distributed.RemoteFuture` raises is one of these (or
``TimeoutError``); when bridged to an ``AsyncValue`` they become error values whose
:class:`~pytfrt.support.errors.Status` code is :func:`status_code` of the exception.
"""

from __future__ import annotations

from pytfrt.support.errors import ErrorCode, PytfrtError


class DistributedError(PytfrtError):
    """Base class of every error pytfrt.distributed raises on purpose."""


class ClusterError(DistributedError):
    """A driver-side misuse (bad worker index, unknown handle, closed cluster, no Ray)."""


class WorkerLost(DistributedError):
    """Worker ``index`` died (process killed, crashed, node lost) before producing a result.

    Attributes:
        index: the worker's index in its :class:`~pytfrt.distributed.Cluster`.
        detail: what Ray reported, if anything.
    """

    def __init__(self, index: int, detail: str = "") -> None:
        self.index = index
        self.detail = detail
        message = f"worker {index} was lost"
        if detail:
            message += f": {detail}"
        super().__init__(message)

    def __reduce__(self) -> tuple[type[WorkerLost], tuple[int, str]]:
        return (WorkerLost, (self.index, self.detail))


class RemoteError(DistributedError):
    """The program or model failed on worker ``index`` (the worker's own error message).

    Attributes:
        index: the worker that failed, or ``-1`` if unknown.
    """

    def __init__(self, index: int, message: str) -> None:
        self.index = index
        self.remote_message = message
        super().__init__(f"worker {index}: {message}" if index >= 0 else message)

    def __reduce__(self) -> tuple[type[RemoteError], tuple[int, str]]:
        return (RemoteError, (self.index, self.remote_message))


def status_code(exc: BaseException) -> ErrorCode:
    """The pytfrt error code an exception maps to when it becomes an error AsyncValue."""
    if isinstance(exc, WorkerLost):
        return ErrorCode.UNAVAILABLE
    if isinstance(exc, TimeoutError):
        return ErrorCode.DEADLINE_EXCEEDED
    if isinstance(exc, ClusterError | ValueError | TypeError):
        return ErrorCode.INVALID_ARGUMENT
    return ErrorCode.INTERNAL
