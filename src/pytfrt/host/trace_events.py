"""Recorded traces: the :class:`Trace` model, TFRT's text sink and the Chrome JSON writer.

:func:`build_trace` turns the per-thread records of a :class:`~pytfrt.host.tracing.Tracer`
into a :class:`Trace`: matched scopes and kernel calls become :class:`Slice` objects (with
their thread, nesting depth and self time), error/cancellation records become
:class:`Instant` markers, producer -> consumer kernel edges of the same function call become
flows, and every kernel slice gets its queueing delay (start minus the time its last operand
became available).

Sinks (objects with ``write(trace)``, called by ``Tracer.flush``):

* :class:`TextSink` -- TFRT's debug sink: ``Scope:<name>``, ``End Scope``, ``Event:<name>``
  lines, merged across threads in time order, written in one block (TFRT writes them to a
  separately buffered stream, so they appear after the normal output; docs/tracing.md).
  At ``debug`` level a kernel whose result is an error adds ``Event:error: <kernel>``, one
  that forwards an error without running ``Event:skipped: <kernel>`` (``cancelled`` if the
  request was cancelled).
* :class:`ChromeTraceSink` -- the Chrome/Perfetto trace-event JSON (``chrome://tracing``,
  https://ui.perfetto.dev): one track per thread, ``X`` slices, ``s``/``f`` flow arrows,
  ``i`` instant markers, ``M`` process/thread names.

Thread-safety: pure functions of a snapshot; build the trace when the traced work is quiescent.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from pytfrt.host.tracing import (
    BEGIN,
    END,
    EVENT,
    KERNEL,
    KERNEL_END,
    QUEUED_AT,
    READY,
    SKIPPED,
    TracingLevel,
    register_trace_builder,
)
from pytfrt.host.tracing import Tracer as Tracer

KERNEL_CATEGORY = "kernel"
SCOPE_CATEGORY = "scope"
TASK_CATEGORY = "task"
FLOW_NAME = "dataflow"


@dataclass
class Slice:
    """One completed scope or kernel call on one thread (times in ns since the trace origin)."""

    name: str
    category: str
    """``"kernel"``, ``"task"`` (a work-queue task) or ``"scope"``."""
    tid: int
    start: int
    end: int
    depth: int
    """Nesting depth on its thread (0 = outermost)."""
    args: dict[str, Any] = field(default_factory=dict)
    """Shown by trace viewers: for kernels ``function``, ``invocation``, ``kernel_id``,
    ``location``, ``arguments`` (shape descriptions), ``queue_delay_us``."""
    child_time: int = 0
    """Time spent in directly nested slices (``duration - child_time`` is the self time)."""
    queue_delay: int = 0
    """Kernels: start minus the time the last operand became available (>= 0)."""
    error: str | None = None
    """Kernels: the message if a result was an error when the kernel returned."""

    @property
    def duration(self) -> int:
        """``end - start`` in ns."""
        return self.end - self.start

    @property
    def self_time(self) -> int:
        """Duration minus the time of directly nested slices."""
        return self.end - self.start - self.child_time


@dataclass
class Instant:
    """A marker: an event, a kernel error, a skipped (error-forwarding) or cancelled kernel."""

    name: str
    category: str
    """``"event"``, ``"error"``, ``"skipped"`` or ``"cancelled"``."""
    tid: int
    ts: int
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trace:
    """A recorded trace (see the module docstring).

    Attributes:
        threads: ``(tid, thread name)`` per track, in order of first record.
        slices: every completed slice (per thread in the order they ended).
        instants: markers.
        flows: ``(producer slice index, consumer slice index)`` kernel dataflow edges.
        text_lines: TFRT's text-sink lines, level-filtered, in time order.
        process_name: for the viewer.
        level: the tracer's level.
    """

    threads: list[tuple[int, str]]
    slices: list[Slice]
    instants: list[Instant]
    flows: list[tuple[int, int]]
    text_lines: list[str]
    process_name: str = "pytfrt"
    level: TracingLevel = TracingLevel.DEFAULT

    def kernel_slices(self) -> list[Slice]:
        """The kernel slices only."""
        return [s for s in self.slices if s.category == KERNEL_CATEGORY]


# -- building a trace ---------------------------------------------------------------------------


class _Open:
    """A scope or kernel call whose end has not been seen yet (walk state)."""

    __slots__ = ("record", "keep", "child_time", "parent", "depth")

    parent: _Open | None
    depth: int

    def __init__(self, record: tuple[Any, ...], keep: bool, stack: list[_Open]) -> None:
        self.record = record
        self.keep = keep
        self.child_time = 0
        top = stack[-1] if stack else None
        parent: _Open | None = top if top is None or top.keep else top.parent
        self.parent = parent
        """The innermost kept open slice around this one (O(1) nesting bookkeeping)."""
        self.depth = 0 if parent is None else parent.depth + 1


def build_trace(tracer: Tracer) -> Trace:
    """Match the records of ``tracer`` into a :class:`Trace` (see the module docstring)."""
    origin = tracer.origin_ns
    level = tracer.level
    slices: list[Slice] = []
    instants: list[Instant] = []
    threads: list[tuple[int, str]] = []
    per_thread_lines: list[list[tuple[int, str]]] = []
    kernel_slice: dict[tuple[int, int], int] = {}
    kernel_meta: list[tuple[int, Any, Any]] = []  # (slice index, invocation, kernel info)
    ready: dict[tuple[int, int], int] = {}
    for buf in tracer.buffers():
        threads.append((buf.tid, buf.name))
        lines: list[tuple[int, str]] = []
        per_thread_lines.append(lines)
        stack: list[_Open] = []
        for rec in list(buf.records):
            kind = rec[0]
            if kind == BEGIN or kind == KERNEL:
                keep = kind == KERNEL or rec[3] <= level
                stack.append(_Open(rec, keep, stack))
                if keep and (kind == BEGIN or level >= TracingLevel.DEBUG):
                    name = rec[2] if kind == BEGIN else rec[3].name
                    lines.append((rec[1], f"Scope:{name}"))
            elif kind == END or kind == KERNEL_END:
                if not stack:
                    continue  # unbalanced end (the scope began before this tracer existed)
                top = stack.pop()
                begin = top.record
                if not top.keep:
                    continue
                is_kernel = begin[0] == KERNEL
                if is_kernel and rec[2] is not None and level >= TracingLevel.DEBUG:
                    lines.append((rec[1], f"Event:error: {begin[3].name}"))
                if not is_kernel or level >= TracingLevel.DEBUG:
                    lines.append((rec[1], "End Scope"))
                if top.parent is not None:
                    top.parent.child_time += rec[1] - begin[1]
                sl = Slice(
                    name=begin[3].name if is_kernel else begin[2],
                    category=KERNEL_CATEGORY if is_kernel else SCOPE_CATEGORY,
                    tid=buf.tid,
                    start=begin[1] - origin,
                    end=rec[1] - origin,
                    depth=top.depth,
                    child_time=top.child_time,
                )
                if is_kernel:
                    inv, kernel = begin[2], begin[3]
                    kid = inv.meta.kernel_ids.get(id(kernel), -1)
                    sl.args = {
                        "function": inv.meta.name,
                        "invocation": inv.seq,
                        "kernel_id": kid,
                        "location": str(kernel.location),
                    }
                    if begin[4] is not None:
                        sl.args["arguments"] = begin[4]
                    if kind == KERNEL_END and rec[2] is not None:
                        sl.error = rec[2]
                        sl.args["error"] = rec[2]
                        instants.append(Instant(f"error: {sl.name}", "error", buf.tid,
                                                rec[1] - origin,
                                                {"message": rec[2], "kernel": sl.name}))
                    kernel_slice[(inv.seq, kid)] = len(slices)
                    kernel_meta.append((len(slices), inv, kernel))
                elif begin[4]:
                    sl.args = dict(begin[4])
                    queued = sl.args.pop(QUEUED_AT, None)
                    if queued is not None:
                        sl.category = TASK_CATEGORY
                        sl.queue_delay = max(0, begin[1] - queued)
                        sl.args["queue_delay_us"] = round(sl.queue_delay / 1000, 3)
                slices.append(sl)
            elif kind == EVENT:
                if rec[3] <= level:
                    lines.append((rec[1], f"Event:{rec[2]}"))
                    instants.append(Instant(rec[2], "event", buf.tid, rec[1] - origin,
                                            dict(rec[4] or {})))
            elif kind == SKIPPED:
                inv, kernel, message, cancelled = rec[2], rec[3], rec[4], rec[5]
                category = "cancelled" if cancelled else "skipped"
                if level >= TracingLevel.DEBUG:
                    lines.append((rec[1], f"Event:{category}: {kernel.name}"))
                instants.append(Instant(f"{category}: {kernel.name}", category, buf.tid,
                                        rec[1] - origin,
                                        {"message": message, "kernel": kernel.name,
                                         "function": inv.meta.name,
                                         "location": str(kernel.location)}))
            elif kind == READY:
                ready[(rec[2].seq, rec[3])] = rec[1] - origin
    flows = _dataflow(slices, kernel_slice, kernel_meta, ready, origin)
    merged = heapq.merge(*per_thread_lines, key=lambda item: item[0])
    return Trace(
        threads=threads,
        slices=slices,
        instants=instants,
        flows=flows,
        text_lines=[line for _, line in merged],
        process_name=tracer.process_name,
        level=level,
    )


def _dataflow(
    slices: list[Slice],
    kernel_slice: dict[tuple[int, int], int],
    kernel_meta: list[tuple[int, Any, Any]],
    ready: dict[tuple[int, int], int],
    origin: int,
) -> list[tuple[int, int]]:
    """Producer -> consumer edges, and each kernel's queueing delay (set on the slices)."""
    flows: list[tuple[int, int]] = []
    for index, inv, kernel in kernel_meta:
        consumer = slices[index]
        ready_at = inv.start_ns - origin
        seen: set[int] = set()
        for reg in kernel.operands:
            p = inv.meta.producer.get(reg, 0)
            ps = kernel_slice.get((inv.seq, p)) if p > 0 else None
            t = ready.get((inv.seq, reg))
            if t is None and ps is not None:
                t = slices[ps].end
            if t is not None and t > ready_at:
                ready_at = t
            if ps is not None and ps not in seen:
                seen.add(ps)
                flows.append((ps, index))
        consumer.queue_delay = max(0, consumer.start - ready_at)
        consumer.args["queue_delay_us"] = round(consumer.queue_delay / 1000, 3)
    return flows


# -- sinks --------------------------------------------------------------------------------------


class TextSink:
    """TFRT's debug tracing sink: writes ``trace.text_lines`` to ``stream`` in one block.

    Args:
        stream: a text stream; ``None`` means ``sys.stdout`` at write time.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream

    def write(self, trace: Trace) -> None:
        """Write every line (nothing if there are none) and flush."""
        import sys

        stream = self.stream if self.stream is not None else sys.stdout
        if trace.text_lines:
            stream.write("\n".join(trace.text_lines) + "\n")
        stream.flush()


class ChromeTraceSink:
    """Writes the Chrome/Perfetto trace-event JSON of a trace to ``path``.

    The file is created (empty) at construction, so an unwritable path fails early.

    Raises:
        OSError: ``could not open trace file '<path>': <reason>`` (construction or write).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            with open(path, "w", encoding="utf-8"):
                pass
        except OSError as exc:
            raise OSError(f"could not open trace file '{path}': {exc.strerror or exc}") from exc

    def write(self, trace: Trace) -> None:
        """Write ``chrome_trace(trace)`` as JSON."""
        with open(self.path, "w", encoding="utf-8") as fh:
            # json.dumps uses the C encoder (json.dump to a file does not): ~10x faster.
            fh.write(json.dumps(chrome_trace(trace), separators=(",", ":")) + "\n")


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


PID = 1


def chrome_trace(trace: Trace) -> dict[str, Any]:
    """The trace-event JSON object (the "JSON Object Format" of the Trace Event Format).

    Events: ``M`` ``process_name``/``thread_name``/``thread_sort_index`` metadata, one ``X``
    complete event per slice (``ts``/``dur`` in microseconds), ``s``/``f`` flow pairs (one
    ``id`` per producer -> consumer edge; ``f`` binds to the enclosing slice, ``bp: "e"``) and
    ``i`` thread-scoped instant markers.
    """
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0,
         "args": {"name": trace.process_name}},
    ]
    for tid, name in trace.threads:
        events.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": tid,
                       "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid,
                       "args": {"sort_index": tid}})
    for s in trace.slices:
        events.append({"ph": "X", "name": s.name, "cat": s.category, "pid": PID, "tid": s.tid,
                       "ts": _us(s.start), "dur": _us(s.duration), "args": s.args})
    for flow_id, (p, c) in enumerate(trace.flows, start=1):
        producer, consumer = trace.slices[p], trace.slices[c]
        # Timestamps strictly inside each slice, so the viewer binds them to it.
        out_ts = max(producer.start, producer.end - 1)
        in_ts = min(consumer.start + 1, consumer.end) if consumer.duration > 1 else consumer.start
        events.append({"ph": "s", "name": FLOW_NAME, "cat": FLOW_NAME, "id": flow_id,
                       "pid": PID, "tid": producer.tid, "ts": _us(out_ts)})
        events.append({"ph": "f", "bp": "e", "name": FLOW_NAME, "cat": FLOW_NAME,
                       "id": flow_id, "pid": PID, "tid": consumer.tid, "ts": _us(in_ts)})
    for m in trace.instants:
        events.append({"ph": "i", "s": "t", "name": m.name, "cat": m.category, "pid": PID,
                       "tid": m.tid, "ts": _us(m.ts), "args": m.args})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"producer": "pytfrt", "tracing_level": trace.level.name.lower()},
    }


def write_chrome_trace(trace: Trace, path: str) -> None:
    """Write ``trace`` as Chrome trace-event JSON to ``path``."""
    ChromeTraceSink(path).write(trace)


def create_tracer(
    level: str | int | TracingLevel = "default",
    trace_file: str | None = None,
    *,
    text: bool = True,
    process_name: str = "pytfrt",
) -> Tracer:
    """The tracer ``bef_executor`` uses: a text sink and/or a Chrome JSON file.

    Args:
        level: the text sink's level (``--tracing_level``); with a trace file but no text
            sink, ``debug``.
        trace_file: if given, kernel slices are recorded (whatever the level) and written
            there as trace-event JSON by ``flush``.
        text: attach the text sink (``--enable_tracing``).
        process_name: the process name in the JSON trace.

    Raises:
        ValueError: for an unknown level.
    """
    sinks: list[Any] = []
    if trace_file and not text:
        level = TracingLevel.DEBUG  # the JSON trace alone keeps everything
    if text:
        sinks.append(TextSink())
    if trace_file:
        sinks.append(ChromeTraceSink(trace_file))
    return Tracer(
        level,
        trace_kernels=True if trace_file else None,
        capture_shapes=bool(trace_file),
        sinks=sinks,
        process_name=process_name,
    )


def iter_kernel_slices(traces: Iterable[Trace]) -> Iterable[Slice]:
    """Every kernel slice of several traces."""
    for trace in traces:
        yield from trace.kernel_slices()


register_trace_builder(build_trace)  # registration: Tracer.snapshot builds with it
