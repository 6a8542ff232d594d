"""The op registry of a device's op handler: per op, a metadata function and a dispatch function.

Everything about one op lives in its :class:`OpRecord` (JAX's "impl + shape rule in one place"):

* ``metadata(args, attrs) -> TensorMetadata | tuple[TensorMetadata, ...]`` -- the shape/dtype
  function.  It sees only argument metadata, runs synchronously at dispatch when that metadata
  is known, and raises :class:`OpError` for invalid inputs: that is how shape errors reach the
  caller at once (a diagnostic in BEF programs, an exception in the eager API), before any
  computation runs.  The same function serves the eager and the graph (``corert.executeop``)
  paths.  ``None`` means the op has no metadata function: results get their metadata from the
  tensors once they exist ("async metadata").
* ``dispatch(args, attrs, exec_ctx) -> tensor | tuple | AsyncValue`` -- the computation.  Dense
  arguments arrive as ``numpy.ndarray`` (scalar and COO tensors are converted unless the op
  accepts them, strings only if accepted); it returns the result tensor(s) (ndarrays or host
  tensor objects), or AsyncValues of them for asynchronous ops.  Raising any exception makes the
  results errors with that message (runtime errors).
* ``fast`` (optional) -- the eager fast path: ``fast(*arrays, attrs) -> ndarray`` or ``None``
  when its cheap guard rejects the inputs (then the general path with the metadata function
  runs).  A fast function must give exactly the dispatch function's result whenever it does not
  return ``None``, and raise only where the metadata function would too.
* ``flags`` -- :class:`OpFlags`.

Thread-safety: fill a registry at start-up; afterwards it is only read (lock-free dict reads).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pytfrt.backends.cpu import ops as cpu_ops

MetadataFn = Callable[..., Any]
DispatchFn = Callable[..., Any]


# An op's metadata or dispatch function rejecting its inputs (the message is reported): the
# CPU backend's one OpError class, so an error raised by the compute layer is caught as is.
OpError = cpu_ops.OpError


class OpFlags(enum.Flag):
    """Properties of an op (TFRT's ``CpuOpFlags``)."""

    NONE = 0
    NO_SIDE_EFFECTS = enum.auto()
    """Pure op: never waits for the incoming op chain, produces no chain."""
    ALLOW_SCALAR = enum.auto()
    """Accepts ScalarHostTensor arguments as they are (else converted to dense)."""
    ALLOW_COO = enum.auto()
    """Accepts CooHostTensor arguments as they are (else converted to dense)."""
    ALLOW_STRING = enum.auto()
    """Accepts StringHostTensor arguments."""
    ANY_TENSOR = enum.auto()
    """Passes every argument through unconverted (test ops that copy or print)."""


@dataclass(slots=True)
class OpRecord:
    """One op: name, dispatch and metadata functions, flags, eager fast path (module doc)."""

    name: str
    dispatch: DispatchFn
    metadata: MetadataFn | None = None
    flags: OpFlags = OpFlags.NO_SIDE_EFFECTS
    num_results: int = 1
    """Results the op produces (the eager API uses it; BEF programs say ``: N``)."""
    fast: Callable[..., Any] | None = None
    doc: str = ""


class OpRegistry:
    """Op name -> :class:`OpRecord` for one op handler (e.g. the CPU handler's table)."""

    def __init__(self) -> None:
        self._ops: dict[str, OpRecord] = {}

    def add(self, record: OpRecord) -> OpRecord:
        """Register ``record``.

        Raises:
            OpError: if an op of that name is registered already.
        """
        if record.name in self._ops:
            raise OpError(f"op '{record.name}' is already registered")
        self._ops[record.name] = record
        return record

    def op(
        self,
        name: str,
        metadata: MetadataFn | None = None,
        flags: OpFlags = OpFlags.NO_SIDE_EFFECTS,
        num_results: int = 1,
        fast: Callable[..., Any] | None = None,
    ) -> Callable[[DispatchFn], DispatchFn]:
        """Decorator form: ``@ops.op("tfrt_test.relu", metadata=unary_md)`` on the dispatch fn."""

        def add(dispatch: DispatchFn) -> DispatchFn:
            self.add(OpRecord(name, dispatch, metadata, flags, num_results, fast,
                              (dispatch.__doc__ or "").strip()))
            return dispatch

        return add

    def get(self, name: str) -> OpRecord | None:
        """The record of ``name``, or ``None``."""
        return self._ops.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._ops

    def __iter__(self) -> Iterator[OpRecord]:
        return iter(self._ops.values())

    def __len__(self) -> int:
        return len(self._ops)

    def names(self) -> list[str]:
        """All op names, sorted."""
        return sorted(self._ops)
