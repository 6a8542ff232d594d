"""A server in a subprocess and a bounded closed-loop load generator, over loopback only.

Used by ``pytfrt bench serve`` and the serving tests:

* :class:`ServerProcess` starts ``pytfrt serve`` as a child process on ``127.0.0.1`` with
  ``--rest_api_port=0`` and reads the port it picked from its ``Exporting HTTP/REST API at:``
  line; :meth:`ServerProcess.stop` sends SIGTERM and returns the exit status.
* :func:`run_load` drives a server with N concurrent clients, each a keep-alive HTTP/1.1
  connection sending one request, waiting for the whole response, then sending the next
  (closed loop).  It stops by itself: after ``duration`` seconds or ``max_requests`` requests,
  whichever comes first, and no request waits longer than ``request_timeout``.  The client is
  a minimal HTTP/1.1 implementation on asyncio streams (pre-encoded request, ``Content-Length``
  responses), so the generator costs little CPU next to the server it measures.

Only loopback addresses are accepted (:func:`check_loopback`): load goes nowhere else.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final
from urllib.parse import urlsplit

import numpy as np

from pytfrt.serving.metrics import cpu_seconds, resident_memory_bytes

START_TIMEOUT: Final = 600.0
READY_PREFIX: Final = "Exporting HTTP/REST API at:"
GRPC_PREFIX: Final = "Running gRPC ModelServer at "


def check_loopback(host: str) -> None:
    """Raise ``ValueError`` unless ``host`` is a loopback address (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(f"refusing to send load to {host!r}: only loopback addresses are allowed")


class ServerProcess:
    """``pytfrt serve <flags>`` in a child process on a free loopback port.

    Args:
        flags: ``pytfrt serve`` flags (``--rest_api_port`` and ``--rest_api_host`` are set here).
        log_path: where the server's stderr goes.
        env: extra environment variables.
        command: the program and its leading arguments (default ``python -m
            pytfrt.tools.pytfrt_cli serve``; ``benchmarks/serve_breakdown.py`` runs the same
            server with timing hooks through it).
    """

    def __init__(self, *flags: str, log_path: Path, env: dict[str, str] | None = None,
                 command: list[str] | None = None) -> None:
        self.flags = list(flags)
        self.command = command or [sys.executable, "-m", "pytfrt.tools.pytfrt_cli", "serve"]
        self.log_path = log_path
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.grpc_target = ""
        """``HOST:PORT`` of the gRPC API (printed before the REST line)."""
        self._log: IO[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    def start(self, timeout: float = START_TIMEOUT) -> ServerProcess:
        """Start the server and wait until it listens; raises ``RuntimeError`` if it does not."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in stop
        self.proc = subprocess.Popen(
            [*self.command, "--rest_api_host=127.0.0.1", "--rest_api_port=0",
             *([] if any(f.startswith("--port") for f in self.flags) else ["--port=0"]),
             *self.flags],
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=self.env,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            if line.startswith(GRPC_PREFIX):
                self.grpc_target = line[len(GRPC_PREFIX):].split()[0]
            if line.startswith(READY_PREFIX):
                self.url = "http://" + line[len(READY_PREFIX):].split()[0]
                return self
        code = self.proc.poll()
        self.stop()
        raise RuntimeError(f"pytfrt serve did not start (exit status {code}):\n{self.log()}")

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        """The server's stderr so far."""
        return self.log_path.read_text(encoding="utf-8") if self.log_path.exists() else ""

    def rss(self) -> int | None:
        """The server's resident memory in bytes (``None`` off Linux or once it exited)."""
        return resident_memory_bytes(self.pid) if self.proc and self.proc.poll() is None else None

    def cpu(self) -> float | None:
        """The server's CPU time so far in seconds (``None`` off Linux or once it exited)."""
        return cpu_seconds(self.pid) if self.proc and self.proc.poll() is None else None

    def terminate(self) -> None:
        """Send SIGTERM and return at once."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for the server to exit; its exit status."""
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM, wait (kill after ``timeout`` s); the exit status (``None`` if never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.proc.returncode


@dataclass
class LoadResult:
    """What a load run measured."""

    clients: int
    elapsed: float
    """Seconds from the first request sent to the last response received."""
    latencies: list[float] = field(default_factory=list)
    """Seconds per successful request (HTTP 200), in completion order."""
    errors: dict[str, int] = field(default_factory=dict)
    """Failure kind (``HTTP 503``, ``timeout``, ``ConnectionResetError``...) -> count."""
    first_body: bytes = b""
    """The body of the first successful response (for checking the outputs)."""

    @property
    def ok(self) -> int:
        return len(self.latencies)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def throughput(self) -> float:
        """Successful requests per second."""
        return self.ok / self.elapsed if self.elapsed > 0 else 0.0

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile latency in seconds (NaN without successes)."""
        return float(np.percentile(self.latencies, q)) if self.latencies else float("nan")

    def summary(self) -> dict[str, float | int | dict[str, int]]:
        """A JSON-ready summary (latencies in milliseconds)."""
        return {
            "clients": self.clients,
            "requests": self.ok,
            "errors": self.error_count,
            "error_kinds": dict(self.errors),
            "seconds": round(self.elapsed, 3),
            "throughput_rps": round(self.throughput, 1),
            "p50_ms": round(self.percentile(50) * 1e3, 3),
            "p90_ms": round(self.percentile(90) * 1e3, 3),
            "p99_ms": round(self.percentile(99) * 1e3, 3),
        }


def _request_bytes(host: str, port: int, path: str, body: bytes,
                   headers: dict[str, str] | None = None) -> bytes:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    content_type = "" if headers and "Content-Type" in headers else \
        "Content-Type: application/json\r\n"
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{content_type}{extra}"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("ascii") + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionResetError("the server closed the connection")
    status = int(status_line.split()[1])
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return status, body


async def _run_load(url: str, body: bytes, clients: int, duration: float, max_requests: int,
                    request_timeout: float, headers: dict[str, str] | None = None) -> LoadResult:
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    check_loopback(host)
    request = _request_bytes(host, port, parts.path, body, headers)
    result = LoadResult(clients, 0.0)
    budget = [max_requests]
    started = time.perf_counter()
    deadline = started + duration

    def fail(kind: str) -> None:
        result.errors[kind] = result.errors.get(kind, 0) + 1

    async def client() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.perf_counter() < deadline and budget[0] > 0:
                budget[0] -= 1
                t0 = time.perf_counter()
                writer.write(request)
                try:
                    status, payload = await asyncio.wait_for(_read_response(reader),
                                                             request_timeout)
                except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    fail("timeout" if isinstance(exc, TimeoutError) else type(exc).__name__)
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                    continue
                if status == 200:
                    result.latencies.append(time.perf_counter() - t0)
                    if not result.first_body:
                        result.first_body = payload
                else:
                    fail(f"HTTP {status}")
        finally:
            writer.close()

    outcomes = await asyncio.gather(*(client() for _ in range(clients)), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            fail(type(outcome).__name__)
    result.elapsed = time.perf_counter() - started
    return result


def run_load(url: str, body: bytes, *, clients: int, duration: float,
             max_requests: int = 10**9, request_timeout: float = 60.0,
             event_loop: str = "auto", headers: dict[str, str] | None = None) -> LoadResult:
    """Closed-loop load on ``url`` (a ``:predict`` URL on a loopback address).

    Args:
        url: the full URL requests are POSTed to.
        body: the request body (sent as is by every client).
        clients: concurrent connections.
        duration: stop sending new requests after this many seconds.
        max_requests: stop after this many requests in all.
        request_timeout: a request with no full response by then counts as a ``timeout`` error.
        event_loop: the client's event loop: ``uvloop``, ``asyncio`` or ``auto`` (uvloop when
            installed: measured ~20 us of client CPU per request against ~30-40 us with
            asyncio's loop, which matters on a small machine shared with the server).
        headers: extra request headers (e.g. ``Inference-Header-Content-Length``).

    Raises:
        ValueError: if the URL's host is not a loopback address, or a bad ``event_loop``.
    """
    with asyncio.Runner(loop_factory=_loop_factory(event_loop)) as runner:
        return runner.run(_run_load(url, body, clients, duration, max_requests, request_timeout,
                                    headers))


GRPC_CHANNELS: Final = 4
"""Connections a gRPC load spreads its clients over (each channel multiplexes its calls)."""


async def _run_grpc_load(target: str, method: str, request: bytes, clients: int,
                         duration: float, max_requests: int, request_timeout: float
                         ) -> LoadResult:
    import grpc

    check_loopback(target.rsplit(":", 1)[0].strip("[]"))
    result = LoadResult(clients, 0.0)
    budget = [max_requests]
    channels = [grpc.aio.insecure_channel(target, options=[
        ("grpc.use_local_subchannel_pool", 1), ("grpc.max_receive_message_length", -1)])
        for _ in range(min(clients, GRPC_CHANNELS))]
    calls = [channel.unary_unary(method) for channel in channels]  # bytes in, bytes out
    started = time.perf_counter()
    deadline = started + duration

    def fail(kind: str) -> None:
        result.errors[kind] = result.errors.get(kind, 0) + 1

    async def client(me: int) -> None:
        call = calls[me % len(calls)]
        while time.perf_counter() < deadline and budget[0] > 0:
            budget[0] -= 1
            t0 = time.perf_counter()
            try:
                payload = await call(request, timeout=request_timeout)
            except grpc.aio.AioRpcError as exc:
                fail(f"gRPC {exc.code().name}")
                continue
            result.latencies.append(time.perf_counter() - t0)
            if not result.first_body:
                result.first_body = payload

    try:
        outcomes = await asyncio.gather(*(client(i) for i in range(clients)),
                                        return_exceptions=True)
    finally:
        for channel in channels:
            await channel.close()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            fail(type(outcome).__name__)
    result.elapsed = time.perf_counter() - started
    return result


def run_grpc_load(target: str, method: str, request: bytes, *, clients: int, duration: float,
                  max_requests: int = 10**9, request_timeout: float = 60.0) -> LoadResult:
    """Closed-loop gRPC load: ``clients`` concurrent calls of ``method`` (e.g.
    ``/tensorflow.serving.PredictionService/Predict``) with the serialized ``request``, on
    asyncio's loop with ``grpc.aio`` over :data:`GRPC_CHANNELS` connections; a call that fails
    counts as ``gRPC <CODE>``.  ``first_body`` is the first serialized response.

    Raises:
        ValueError: if ``target``'s host is not a loopback address.
    """
    with asyncio.Runner() as runner:
        return runner.run(_run_grpc_load(target, method, request, clients, duration,
                                         max_requests, request_timeout))


def _loop_factory(event_loop: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if event_loop not in ("auto", "asyncio", "uvloop"):
        raise ValueError(f"unknown event loop {event_loop!r} (auto, asyncio or uvloop)")
    if event_loop == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if event_loop == "uvloop":
            raise ValueError("event_loop='uvloop' needs the uvloop package") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
