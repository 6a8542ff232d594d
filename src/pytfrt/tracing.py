"""pytfrt.tracing: see what ran where, and for how long (user-facing tracing API).

Trace a block of Python code and open the result in https://ui.perfetto.dev or
``chrome://tracing``::

    import pytfrt.tracing

    with pytfrt.tracing.trace("out.json", hosts=[host]) as tracer:
        results = function.execute(exec_ctx, [])
        host.await_values(results)
    print(len(tracer.snapshot().kernel_slices()), "kernel calls")

Without ``hosts`` the eager runtime's host (:func:`pytfrt.eager.runtime`) is traced.  The
tracer is installed as ``host.tracer`` for the duration of the block (BEF functions started
inside the block are traced; the previous tracer is restored afterwards).

Everything else is re-exported from :mod:`pytfrt.host.tracing` (recording) and
:mod:`pytfrt.host.trace_events` (the trace model and sinks); ``bef_executor`` calls
:func:`create_tracer` for ``--enable_tracing`` / ``--trace_file``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pytfrt.host.trace_events import ChromeTraceSink as ChromeTraceSink
from pytfrt.host.trace_events import Instant as Instant
from pytfrt.host.trace_events import Slice as Slice
from pytfrt.host.trace_events import TextSink as TextSink
from pytfrt.host.trace_events import Trace as Trace
from pytfrt.host.trace_events import build_trace as build_trace
from pytfrt.host.trace_events import chrome_trace as chrome_trace
from pytfrt.host.trace_events import create_tracer as create_tracer
from pytfrt.host.trace_events import write_chrome_trace as write_chrome_trace
from pytfrt.host.tracing import InvocationTracer as InvocationTracer
from pytfrt.host.tracing import Tracer as Tracer
from pytfrt.host.tracing import TracingLevel as TracingLevel
from pytfrt.host.tracing import parse_tracing_level as parse_tracing_level

__all__ = [
    "ChromeTraceSink",
    "Instant",
    "InvocationTracer",
    "Slice",
    "TextSink",
    "Trace",
    "Tracer",
    "TracingLevel",
    "build_trace",
    "chrome_trace",
    "create_tracer",
    "parse_tracing_level",
    "trace",
    "write_chrome_trace",
]


@contextmanager
def trace(
    path: str | None = None,
    *,
    hosts: Sequence[Any] | None = None,
    level: str | TracingLevel = "debug",
    capture_shapes: bool = True,
    quiesce: bool = True,
) -> Iterator[Tracer]:
    """Trace everything ``hosts`` run inside the ``with`` block.

    Args:
        path: if given, the Chrome/Perfetto trace-event JSON is written there on exit.
        hosts: the HostContexts to trace; default: the eager runtime's host.
        level: scopes above this level are dropped (kernel slices are always recorded).
        capture_shapes: record the dtype and shape of every kernel argument.
        quiesce: on exit, wait (``host.quiesce()``) until the hosts ran all queued work, so
            the trace is complete; call only from a non-worker thread.

    Yields:
        The :class:`Tracer` (``tracer.snapshot()`` gives the :class:`Trace`).

    Raises:
        ValueError: for an unknown level.
    """
    tracer = Tracer(level, trace_kernels=True, capture_shapes=capture_shapes,
                    process_name="pytfrt")
    if hosts is None:
        from pytfrt.eager import runtime

        hosts = [runtime().host]
    previous = [getattr(h, "tracer", None) for h in hosts]
    for h in hosts:
        h.tracer = tracer
    try:
        yield tracer
    finally:
        try:
            if quiesce:
                for h in hosts:
                    h.quiesce()
        finally:
            for h, old in zip(hosts, previous, strict=True):
                h.tracer = old
        if path is not None:
            write_chrome_trace(tracer.snapshot(), path)
