"""Prometheus metrics of the server, written in the text exposition format by hand.

Served at TF Serving's path ``/monitoring/prometheus/metrics`` with TF Serving's metric names
(its exporter turns ``/tensorflow/serving/request_count`` into ``:tensorflow:serving:...``):

================================================  =========  ===================================
metric                                            type       labels
================================================  =========  ===================================
``:tensorflow:serving:request_count``             counter    ``model_name``, ``status`` (code)
``:tensorflow:serving:request_latency``           histogram  ``model_name``, ``API``,
                                                             ``entrypoint`` (microseconds)
``:tensorflow:serving:batching:processed_batch_size``  histogram  ``model_name`` (rows per batch)
``:tensorflow:serving:batching:batch_delay_us``   histogram  ``model_name`` (queueing, us)
``:tensorflow:serving:batching:merged_request_count``  counter  ``model_name`` (requests per batch,
                                                             summed)
``:pytfrt:serving:requests_in_flight``            gauge      ``model_name`` (received, not
                                                             yet answered)
``process_resident_memory_bytes``                 gauge      (none)
================================================  =========  ===================================

No ``prometheus_client`` dependency: a counter is a dict of label values -> float, a histogram
keeps cumulative bucket counts, sum and count.  Every method is thread-safe (one lock per
metric); :meth:`MetricsRegistry.render` produces a consistent snapshot per metric.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Final

LATENCY_BUCKETS_US: Final = tuple(float(round(10 * 1.8**i)) for i in range(33))
"""Request latency buckets (TF Serving's: 10 us growing by 1.8x, 33 buckets)."""
BATCH_SIZE_BUCKETS: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0)
DELAY_BUCKETS_US: Final = tuple(float(10 * 2**i) for i in range(20))

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(labels: Labels, extra: str = "") -> str:
    parts = [f'{k}="{_escape(v)}"' for k, v in labels]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(int(value)) if float(value).is_integer() else repr(float(value))


class Counter:
    """A monotonically increasing value per label set."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str]) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(label_names)
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, *label_values: str, amount: float = 1.0) -> None:
        """Add ``amount`` to the value of these label values (in ``label_names`` order)."""
        key = tuple(zip(self.label_names, label_values, strict=True))
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, *label_values: str) -> float:
        """The current value (0 if never incremented)."""
        key = tuple(zip(self.label_names, label_values, strict=True))
        with self._lock:
            return self._values.get(key, 0.0)

    def samples(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        return [f"{self.name}{_label_text(k)} {_number(v)}" for k, v in items]


class Gauge(Counter):
    """A value per label set that goes up and down (``inc`` with a negative amount)."""

    kind = "gauge"


class Histogram:
    """Observations counted into cumulative ``le`` buckets, with their sum and count."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str],
                 buckets: Sequence[float]) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(label_names)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[Labels, list[float]] = {}  # bucket counts..., +Inf count, sum
        self._lock = threading.Lock()

    def observe(self, value: float, *label_values: str) -> None:
        """Record one observation for these label values."""
        key = tuple(zip(self.label_names, label_values, strict=True))
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = [0.0] * (len(self.buckets) + 2)
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    series[i] += 1
                    break
            else:
                series[len(self.buckets)] += 1
            series[-1] += value

    def count(self, *label_values: str) -> int:
        """How many observations were recorded for these label values."""
        key = tuple(zip(self.label_names, label_values, strict=True))
        with self._lock:
            series = self._series.get(key)
            return 0 if series is None else int(sum(series[:-1]))

    def samples(self) -> list[str]:
        with self._lock:
            items = sorted((k, list(v)) for k, v in self._series.items())
        lines = []
        for key, series in items:
            running = 0.0
            for bound, n in zip((*self.buckets, float("inf")), series[:-1], strict=True):
                running += n
                le = 'le="' + _number(bound) + '"'
                lines.append(f"{self.name}_bucket{_label_text(key, le)} {_number(running)}")
            lines.append(f"{self.name}_sum{_label_text(key)} {_number(series[-1])}")
            lines.append(f"{self.name}_count{_label_text(key)} {_number(running)}")
        return lines


class ServingMetrics:
    """The server's metrics (see the module table) and their text rendering."""

    def __init__(self) -> None:
        self.request_count = Counter(
            ":tensorflow:serving:request_count",
            "The total number of requests.", ("model_name", "status"))
        self.request_latency = Histogram(
            ":tensorflow:serving:request_latency",
            "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
            ("model_name", "API", "entrypoint"), LATENCY_BUCKETS_US)
        self.batch_size = Histogram(
            ":tensorflow:serving:batching:processed_batch_size",
            "Tracks the batch size distribution on processing (rows per batch).",
            ("model_name",), BATCH_SIZE_BUCKETS)
        self.batch_delay = Histogram(
            ":tensorflow:serving:batching:batch_delay_us",
            "Tracks the batching delay (in microseconds) for inputs by model_name.",
            ("model_name",), DELAY_BUCKETS_US)
        self.merged_requests = Counter(
            ":tensorflow:serving:batching:merged_request_count",
            "Requests that ran as part of a batch (summed over batches).", ("model_name",))
        self.in_flight = Gauge(
            ":pytfrt:serving:requests_in_flight",
            "Predict requests received and not yet answered.", ("model_name",))
        self._metrics: list[Counter | Histogram] = [
            self.request_count, self.request_latency, self.batch_size, self.batch_delay,
            self.merged_requests, self.in_flight,
        ]

    def render(self) -> str:
        """All metrics in the Prometheus text exposition format (version 0.0.4)."""
        lines: list[str] = []
        for metric in self._metrics:
            lines.append(f"# HELP {metric.name} {metric.help}")
            lines.append(f"# TYPE {metric.name} {metric.kind}")
            lines.extend(metric.samples())
        rss = resident_memory_bytes()
        if rss is not None:
            lines.append("# HELP process_resident_memory_bytes Resident memory size in bytes.")
            lines.append("# TYPE process_resident_memory_bytes gauge")
            lines.append(f"process_resident_memory_bytes {rss}")
        return "\n".join(lines) + "\n"


def resident_memory_bytes(pid: int | None = None) -> int | None:
    """The resident set size of process ``pid`` (default: this one), or ``None`` off Linux."""
    path = f"/proc/{pid or os.getpid()}/statm"
    try:
        with open(path, encoding="ascii") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int | None = None) -> float | None:
    """User + system CPU time of process ``pid`` (default: this one) so far, all threads, or
    ``None`` off Linux."""
    path = f"/proc/{pid or os.getpid()}/stat"
    try:
        with open(path, encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat(5))
    except (OSError, ValueError, IndexError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")
