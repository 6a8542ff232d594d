"""Tracing: scopes, events and kernel slices, recorded per thread (TFRT's ``tracing/``).

A :class:`Tracer` is attached to a :class:`~pytfrt.host.HostContext` as ``host.tracer``
(``None`` -- the default -- means tracing is off).  Producers call it:

* the ``bef_executor`` driver: ``begin_scope("Bef Executor")``, ``begin_scope("Function: f")``;
* the async executor: :meth:`Tracer.bind_invocation` once per function call, which returns an
  :class:`InvocationTracer` (or ``None`` when kernels are not traced), then per kernel
  :meth:`InvocationTracer.begin_kernel` / :meth:`InvocationTracer.end_kernel`, and
  :meth:`InvocationTracer.skip_kernel` for kernels that forward an error or a cancellation
  without running;
* the core runtime: :meth:`Tracer.wrap` around an op's metadata and dispatch functions;
* anyone: :meth:`Tracer.scope` / :meth:`Tracer.event`.

Levels (TFRT's ``--tracing_level``): ``default`` < ``verbose`` < ``debug``.  A scope or event
of a level above the tracer's is dropped when the trace is exported; kernel slices are
``debug``-level scopes named after the kernel (TFRT's names).

Cost: with tracing off the executor pays one ``is None`` test per kernel.  With tracing on, a
record is one ``perf_counter_ns()`` call and one ``list.append`` on the calling thread's own
buffer: no lock is taken after a thread's first record.

Thread-safety: every recording method may be called from any thread at any time.  Export
(:meth:`Tracer.snapshot`, :meth:`Tracer.flush`) reads all buffers; call it when the traced
work is quiescent (records appended concurrently may or may not be included).

The sinks (TFRT's text sink and a Chrome trace-event JSON writer) and the analysis of a
recorded trace live in :mod:`pytfrt.host.trace_events`, which sits above this module: importing
it registers the function that turns records into a ``Trace`` (:func:`register_trace_builder`),
which :meth:`Tracer.snapshot` calls.  (Sinks and the ``pytfrt.tracing`` facade come from that
module, so a tracer with sinks always has it.)
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Final, Protocol

from pytfrt.host.async_value import ERROR, AsyncValue
from pytfrt.support.errors import ErrorCode

if TYPE_CHECKING:
    from pytfrt.host.trace_events import Trace

_trace_builder: list[Callable[[Tracer], Trace]] = []


def register_trace_builder(build: Callable[[Tracer], Trace]) -> None:
    """Set the function :meth:`Tracer.snapshot` uses (``trace_events.build_trace``)."""
    _trace_builder[:] = [build]


class TracingLevel(enum.IntEnum):
    """How much is recorded: each level includes the ones below it."""

    DEFAULT = 0
    VERBOSE = 1
    DEBUG = 2


def parse_tracing_level(text: str | int | TracingLevel) -> TracingLevel:
    """``"default"``/``"verbose"``/``"debug"`` (or a level) as a :class:`TracingLevel`.

    Raises:
        ValueError: for any other value.
    """
    if isinstance(text, TracingLevel):
        return text
    if isinstance(text, int):
        return TracingLevel(text)
    try:
        return TracingLevel[text.strip().upper()]
    except KeyError:
        raise ValueError(
            f"unknown tracing level '{text}' (expected default, verbose or debug)"
        ) from None


# Record kinds (first element of every record tuple in a thread buffer).
BEGIN: Final = 0  # (BEGIN, ts, name, level, args)
END: Final = 1  # (END, ts)
EVENT: Final = 2  # (EVENT, ts, name, level, args)
KERNEL: Final = 3  # (KERNEL, ts, invocation, kernel_info, shapes)
KERNEL_END: Final = 4  # (KERNEL_END, ts, error message or None)
SKIPPED: Final = 5  # (SKIPPED, ts, invocation, kernel_info, message, cancelled)
READY: Final = 6  # (READY, ts, invocation, register)

QUEUED_AT: Final = "queued_at_ns"
"""Scope argument: when the scope's task was enqueued (becomes the slice's queueing delay)."""


class _KernelLike(Protocol):
    """What the tracer reads of an executor kernel (``pytfrt.executor`` ``KernelInfo``)."""

    name: str
    operands: tuple[int, ...]
    results: tuple[int, ...]
    location: Any


class _FunctionLike(Protocol):
    """What the tracer reads of an executor function (``FunctionInfo``)."""

    name: str
    kernels: Sequence[Any]


class ThreadBuffer:
    """The records of one thread, in call order (appended only by that thread)."""

    __slots__ = ("tid", "name", "ident", "records")

    def __init__(self, tid: int, name: str, ident: int) -> None:
        self.tid = tid
        """Small track number (1, 2, ... in order of first record)."""
        self.name = name
        """The thread's name when it first recorded."""
        self.ident = ident
        """``threading.get_ident()`` of the thread."""
        self.records: list[tuple[Any, ...]] = []
        """The records (see the record kinds above)."""


class FunctionMeta:
    """Static facts about one traced function, computed once per FunctionInfo.

    Attributes:
        name: the function name (``"<region>"`` for anonymous region bodies).
        kernel_ids: ``id(kernel_info) -> kernel id`` (0 is the pseudo kernel).
        producer: ``register -> kernel id`` of the kernel defining it (0 for arguments).
        kernels: the kernel infos by kernel id.
    """

    __slots__ = ("name", "kernel_ids", "producer", "kernels", "info")

    def __init__(self, info: _FunctionLike) -> None:
        self.info = info  # keeps id() keys valid for the tracer's lifetime
        self.name = info.name or "<region>"
        self.kernels = list(info.kernels)
        self.kernel_ids = {id(k): i for i, k in enumerate(self.kernels)}
        self.producer: dict[int, int] = {}
        for i, k in enumerate(self.kernels):
            for r in k.results:
                self.producer[r] = i


class Tracer:
    """Records scopes, events and kernel slices of everything run on a host (module doc).

    Args:
        level: the most detailed level kept (a :class:`TracingLevel` or its name).
        trace_kernels: record kernel slices; defaults to ``level >= DEBUG``.
        capture_shapes: record a short description (dtype and shape) of every kernel argument.
        sinks: objects with ``write(trace)`` called by :meth:`flush` (see
            :mod:`pytfrt.host.trace_events`: ``TextSink``, ``ChromeTraceSink``).
        process_name: the process name shown by trace viewers.

    Raises:
        ValueError: for an unknown level name.
    """

    def __init__(
        self,
        level: str | int | TracingLevel = TracingLevel.DEFAULT,
        *,
        trace_kernels: bool | None = None,
        capture_shapes: bool = True,
        sinks: Sequence[Any] = (),
        process_name: str = "pytfrt",
    ) -> None:
        self.level = parse_tracing_level(level)
        self.trace_kernels = self.level >= TracingLevel.DEBUG if trace_kernels is None else (
            trace_kernels
        )
        self.capture_shapes = capture_shapes
        self.sinks = list(sinks)
        self.process_name = process_name
        self.origin_ns = perf_counter_ns()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._buffers: list[ThreadBuffer] = []
        self._functions: dict[int, FunctionMeta] = {}
        self._next_invocation = 0

    # -- buffers ------------------------------------------------------------------------------

    def _records(self) -> list[tuple[Any, ...]]:
        """The calling thread's record list (created on its first record)."""
        try:
            return self._local.records  # type: ignore[no-any-return]
        except AttributeError:
            pass
        thread = threading.current_thread()
        with self._lock:
            buf = ThreadBuffer(len(self._buffers) + 1, thread.name, threading.get_ident())
            self._buffers.append(buf)
        self._local.records = buf.records
        return buf.records

    def buffers(self) -> list[ThreadBuffer]:
        """A copy of the list of thread buffers (for export)."""
        with self._lock:
            return list(self._buffers)

    def clear(self) -> None:
        """Forget every record (thread tracks are kept)."""
        with self._lock:
            for buf in self._buffers:
                buf.records.clear()

    # -- scopes and events --------------------------------------------------------------------

    def begin_scope(self, name: str, level: int = TracingLevel.DEFAULT,
                    args: dict[str, Any] | None = None) -> None:
        """Open a scope on the calling thread; close it with :meth:`end_scope` (same thread)."""
        self._records().append((BEGIN, perf_counter_ns(), name, level, args))

    def end_scope(self) -> None:
        """Close the innermost open scope of the calling thread."""
        self._records().append((END, perf_counter_ns()))

    @contextmanager
    def scope(self, name: str, level: int = TracingLevel.DEFAULT,
              args: dict[str, Any] | None = None) -> Iterator[None]:
        """``with tracer.scope(name):`` -- :meth:`begin_scope` ... :meth:`end_scope`."""
        self.begin_scope(name, level, args)
        try:
            yield
        finally:
            self.end_scope()

    def event(self, name: str, level: int = TracingLevel.DEFAULT,
              args: dict[str, Any] | None = None) -> None:
        """Record an instant event (TFRT's ``Event:<name>``)."""
        self._records().append((EVENT, perf_counter_ns(), name, level, args))

    def wrap(self, fn: Callable[..., Any], name: str,
             level: int = TracingLevel.VERBOSE) -> Callable[..., Any]:
        """``fn`` wrapped in a scope called ``name`` (for a call that may run on any thread)."""

        def traced(*args: Any, **kwargs: Any) -> Any:
            self.begin_scope(name, level)
            try:
                return fn(*args, **kwargs)
            finally:
                self.end_scope()

        return traced

    def wrap_task(self, fn: Callable[[], Any], level: int = TracingLevel.VERBOSE
                  ) -> Callable[[], Any]:
        """``fn`` (a work-queue task being enqueued now) wrapped in a ``Task: <name>`` scope.

        The slice records how long the task waited in the queue (``queue_delay_us``).
        ``HostContext.enqueue_work`` calls this while tracing.
        """
        name = "Task: " + task_name(fn)
        args = {QUEUED_AT: perf_counter_ns()}

        def task() -> Any:
            self.begin_scope(name, level, args)
            try:
                return fn()
            finally:
                self.end_scope()

        return task

    def trace_op_record(self, record: Any) -> Any:
        """A copy of a core-runtime op record whose metadata and dispatch functions run in
        ``RunMetadataFunction`` / ``RunDispatchFunction: <op>#...#`` debug scopes (TFRT's names).

        ``record`` is a dataclass with ``name``, ``metadata`` (or ``None``) and ``dispatch``
        fields (``pytfrt.core_runtime.op_registry.OpRecord``); the CPU op handler calls this
        per dispatch while tracing.  The dispatch scope's name describes the invocation as
        TFRT's core runtime did (:func:`dispatch_scope_name`); it is completed when the
        dispatch function returns, since the result metadata is known then.
        """
        import dataclasses

        metadata = record.metadata
        dispatch = record.dispatch
        name = record.name

        def traced_dispatch(tensors: Sequence[Any], attrs: Any, exec_ctx: Any) -> Any:
            records = self._records()
            index = len(records)
            self.begin_scope(f"RunDispatchFunction: {name}", TracingLevel.DEBUG)
            out = None
            try:
                out = dispatch(tensors, attrs, exec_ctx)
                return out
            finally:
                self.end_scope()
                outs = out if isinstance(out, tuple) else (out,)
                location = getattr(exec_ctx, "location", None)
                full = dispatch_scope_name(
                    name, location.debug_info() if location is not None else None,
                    [_metadata_text(t) for t in tensors], [_metadata_text(o) for o in outs],
                    attrs.format() if hasattr(attrs, "format") else str(attrs))
                if index < len(records) and records[index][0] == BEGIN:
                    records[index] = (BEGIN, records[index][1], full, *records[index][3:])

        return dataclasses.replace(
            record,
            metadata=None if metadata is None else self.wrap(
                metadata, "RunMetadataFunction", TracingLevel.DEBUG),
            dispatch=traced_dispatch,
        )

    # -- executor hooks -----------------------------------------------------------------------

    def bind_invocation(self, info: _FunctionLike) -> InvocationTracer | None:
        """Called by the executor once per function call; ``None`` if kernels are not traced."""
        if not self.trace_kernels:
            return None
        key = id(info)
        meta = self._functions.get(key)
        with self._lock:
            if meta is None:
                meta = self._functions.setdefault(key, FunctionMeta(info))
            self._next_invocation += 1
            seq = self._next_invocation
        return InvocationTracer(self, meta, seq)

    # -- export -------------------------------------------------------------------------------

    def snapshot(self) -> Trace:
        """The records so far as a :class:`~pytfrt.host.trace_events.Trace`."""
        if not _trace_builder:
            raise RuntimeError("no trace builder: import pytfrt.tracing (or "
                               "pytfrt.host.trace_events) before taking a snapshot")
        return _trace_builder[0](self)

    def flush(self) -> None:
        """Write the trace to every sink (the ``bef_executor`` driver calls this at exit)."""
        if not self.sinks:
            return
        trace = self.snapshot()
        for sink in self.sinks:
            sink.write(trace)


class InvocationTracer:
    """The tracer of one BEF function call (created by :meth:`Tracer.bind_invocation`).

    The executor calls :meth:`begin_kernel` and :meth:`end_kernel` on the same thread around
    each kernel, :meth:`skip_kernel` for a kernel that does not run, and :meth:`value_ready`
    when a register's value becomes available later than its producer returned.  The
    ``begin_scope``/``end_scope`` pair is also accepted (a plain scope).
    """

    __slots__ = ("tracer", "meta", "seq", "start_ns", "_local", "_shapes")

    def __init__(self, tracer: Tracer, meta: FunctionMeta, seq: int) -> None:
        self.tracer = tracer
        self.meta = meta
        self.seq = seq
        """Unique number of this call within the tracer."""
        self.start_ns = perf_counter_ns()
        """When the call started (the ready time of zero-operand kernels)."""
        self._local = tracer._local
        self._shapes = tracer.capture_shapes

    def begin_kernel(self, kernel: _KernelLike, args: Sequence[AsyncValue[Any]]) -> None:
        """Kernel ``kernel`` is about to run on ``args`` (available, non-error values)."""
        shapes = [describe_value(a._value) for a in args] if self._shapes else None
        try:
            records = self._local.records
        except AttributeError:
            records = self.tracer._records()
        records.append((KERNEL, perf_counter_ns(), self, kernel, shapes))

    def end_kernel(self, results: Sequence[AsyncValue[Any]]) -> None:
        """The kernel opened by :meth:`begin_kernel` returned ``results``."""
        ts = perf_counter_ns()
        message = None
        for r in results:
            if r._state == ERROR:
                message = r._value.message if r._value is not None else "error"
                break
        self._local.records.append((KERNEL_END, ts, message))

    def skip_kernel(self, kernel: _KernelLike, error: AsyncValue[Any]) -> None:
        """``kernel`` did not run: an operand is an error or the request was cancelled."""
        status = error._value
        message = getattr(status, "message", "error")
        cancelled = getattr(status, "code", None) == ErrorCode.CANCELLED
        self.tracer._records().append(
            (SKIPPED, perf_counter_ns(), self, kernel, message, cancelled)
        )

    def value_ready(self, register: int) -> None:
        """``register``'s value just became available (an async result or argument)."""
        self.tracer._records().append((READY, perf_counter_ns(), self, register))

    def begin_scope(self, name: str, level: int = TracingLevel.DEFAULT) -> None:
        """A plain scope (delegates to the tracer)."""
        self.tracer.begin_scope(name, level)

    def end_scope(self) -> None:
        """Close a plain scope (delegates to the tracer)."""
        self.tracer.end_scope()


def dispatch_scope_name(op: str, long_name: str | None, inputs: Sequence[str],
                        results: Sequence[str], attributes: str) -> str:
    """The name of an op's dispatch scope, as TFRT's core runtime wrote it:
    ``RunDispatchFunction: <op>#op_name=<op>,[long_name=<name>,]Inputs=(<md>;...),``
    ``Results=(<md>;...),Attributes=<OpAttrs print>#`` (metadata as ``f32 [2, 3]``; the
    long name is the op's named location, e.g. ``loc("scope/name")``)."""
    named = f"long_name={long_name}," if long_name else ""
    return (f"RunDispatchFunction: {op}#op_name={op},{named}Inputs=({';'.join(inputs)}),"
            f"Results=({';'.join(results)}),Attributes={attributes}#")


def _metadata_text(value: Any) -> str:
    """A tensor's (or an available AsyncValue's tensor's) metadata as text, ``?`` if unknown."""
    if isinstance(value, AsyncValue):
        if not value.is_concrete():
            return "?"
        value = value.get()
    md = getattr(value, "metadata", None)
    if md is not None:
        return str(md)
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    kind, size = getattr(dtype, "kind", None), getattr(dtype, "itemsize", 0)
    if kind is None or not isinstance(shape, tuple):
        return "?"
    # A NumPy array (the CPU ops' dense form): TFRT's dtype spelling (i1, i32, ui8, f32,
    # complex64) follows from the kind and width; the host layer does not import pytfrt.tensor.
    prefix = {"b": "i", "i": "i", "u": "ui", "f": "f", "c": "complex"}.get(kind)
    if prefix is None:
        return "?"
    name = "i1" if kind == "b" else f"{prefix}{8 * size}"
    return f"{name} [{', '.join(str(d) for d in shape)}]"


def task_name(fn: Any) -> str:
    """A readable name for a task callable: its qualified name without ``<locals>``."""
    while hasattr(fn, "func"):  # functools.partial (possibly nested)
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return str(name).replace("<locals>.", "")


def describe_value(value: Any) -> str:
    """A short description of a kernel argument: ``"f32 [2, 3]"`` for tensors, else its type.

    Never blocks and never raises (a tensor whose metadata is not known is described by its
    type name).
    """
    try:
        shape = getattr(value, "shape", None)
    except Exception:  # noqa: BLE001 - metadata not available yet (future tensor handles)
        shape = None
    if shape is None:
        return type(value).__name__
    dims = getattr(shape, "dims", shape)
    try:
        text = "[" + ", ".join(str(d) for d in dims) + "]"
    except TypeError:
        text = str(shape)
    try:
        dtype = getattr(value, "dtype", None)
    except Exception:  # noqa: BLE001
        dtype = None
    if dtype is None:
        return text
    return f"{getattr(dtype, 'name', dtype)} {text}"
