"""Running the server: the runtime, the model manager and the ASGI app on uvicorn.

:func:`run_server` is what ``pytfrt serve`` calls.  It creates the :class:`HostContext` (the
``--work_queue_type`` work queue every request runs on), loads the initial model versions,
binds the listening socket itself (so ``--rest_api_port=0`` picks a free port, printed on
stdout as ``Exporting HTTP/REST API at:HOST:PORT ...``), and serves with uvicorn until SIGTERM
or SIGINT.

Why uvicorn: it is the reference ASGI server (the interface every Python web framework speaks,
so the app stays a plain callable with no framework underneath), it runs one asyncio event loop
-- the loop the runtime's AsyncValues are bridged into -- and it implements graceful shutdown:
on SIGTERM it stops accepting connections, lets every in-flight request finish (up to
``graceful_shutdown_seconds``) and only then returns.  After that the model manager unloads the
models, the work queue is drained and the process exits with status 0.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Final

from pytfrt.host import AsyncValue, HostContext, SingleThreadedWorkQueue, make_unconstructed
from pytfrt.serving import fast_json
from pytfrt.serving.app import DEFAULT_MAX_REQUEST_BYTES, ServingApp
from pytfrt.serving.config import BatchingParameters, ModelConfig, MonitoringConfig
from pytfrt.serving.errors import ListenError as ListenError
from pytfrt.serving.metrics import ServingMetrics
from pytfrt.serving.model_manager import ModelManager
from pytfrt.serving.servable import LoadOptions

GRACEFUL_SHUTDOWN_SECONDS: Final = 60.0


@dataclass
class ServerOptions:
    """Everything ``pytfrt serve`` is configured with (its flags, parsed)."""

    models: list[ModelConfig]
    backend: str = "pytfrt"
    rest_api_host: str = "127.0.0.1"
    rest_api_port: int = 8501
    work_queue_type: str = "mstd"
    batching: BatchingParameters | None = None
    poll_seconds: float = 1.0
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    cache_dir: Path | None = None
    intra_op_parallelism: int = 0
    graceful_shutdown_seconds: float = GRACEFUL_SHUTDOWN_SECONDS
    http_parser: str = "auto"
    """uvicorn's HTTP/1.1 implementation: ``h11``, ``httptools`` or ``auto``
    (:func:`resolve_http`)."""
    event_loop: str = "auto"
    """The asyncio event loop: ``asyncio``, ``uvloop`` or ``auto`` (:func:`resolve_loop`)."""
    grpc_port: int | None = None
    """The gRPC API's port (0: a free one; ``None``: no gRPC API)."""
    grpc_max_threads: int = 8
    """Threads serving gRPC calls."""
    rest_api_timeout_seconds: float | None = 30.0
    """A REST predict not answered in time gets HTTP 504 (``None``: no limit)."""
    model_warmup: bool = True
    """Replay each version's ``assets.extra/tf_serving_warmup_requests`` before it serves."""
    monitoring: MonitoringConfig | None = None
    """Where the metrics are served (``None``: the default path)."""


HTTP_PARSERS: Final = ("auto", "h11", "httptools")
EVENT_LOOPS: Final = ("auto", "asyncio", "uvloop")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _resolve(choice: str, choices: tuple[str, ...], fast: str, fallback: str, what: str,
             flag: str) -> str:
    if choice not in choices:
        raise ValueError(f"unknown {what} {choice!r} (choose from {', '.join(choices)})")
    if choice == "auto":
        return fast if _importable(fast) else fallback
    if choice == fast and not _importable(fast):
        raise ValueError(f"{flag}={fast} needs the {fast} package (pip install {fast})")
    return choice


def resolve_http(choice: str) -> str:
    """The HTTP implementation uvicorn runs: ``httptools`` (C, llhttp) when ``auto`` finds it
    installed, else the pure-Python ``h11``.

    Raises:
        ValueError: an unknown choice, or ``httptools`` asked for but not installed.
    """
    return _resolve(choice, HTTP_PARSERS, "httptools", "h11", "HTTP parser", "--http_parser")


def resolve_loop(choice: str) -> str:
    """The event loop uvicorn runs: ``uvloop`` (libuv) when ``auto`` finds it installed, else
    asyncio's own.

    Raises:
        ValueError: an unknown choice, or ``uvloop`` asked for but not installed.
    """
    return _resolve(choice, EVENT_LOOPS, "uvloop", "asyncio", "event loop", "--event_loop")


def make_host(backend: str, work_queue_type: str) -> HostContext:
    """The runtime requests run on: a new HostContext with a ``work_queue_type`` queue.

    For the pytfrt backend it is made by ``pytfrt.model.create_host`` (the built-in kernels
    registered) and every model is loaded or compiled with ``host=`` this host, so request work
    and model work share one queue.  The baselines get a plain HostContext.

    Raises:
        ValueError: if ``work_queue_type`` is not a TFRT work-queue type.
    """
    if backend != "pytfrt":
        return HostContext(work_queue_type)
    from pytfrt.model import create_host

    return create_host(work_queue_type)


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one).

    The socket is created with protocol ``IPPROTO_TCP`` explicitly: asyncio sets TCP_NODELAY
    only on sockets whose ``proto`` says TCP, and without it every keep-alive response (headers
    and body are two writes) waits ~40 ms for the client's delayed ACK (Nagle's algorithm).

    Raises:
        OSError: if the address cannot be bound.
    """
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                  proto=socket.IPPROTO_TCP)[0]
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def drive_single_threaded(host: HostContext) -> Callable[[], None] | None:
    """For an ``s`` work queue, a thread that runs its tasks; returns the function stopping it.

    The ``s`` queue runs tasks only inside ``await_values`` on the awaiting thread; the server
    never awaits on the event loop, so a driver thread awaits a value that is published only at
    shutdown, running every request's tasks in FIFO order meanwhile.  ``None`` for other queues.
    """
    if not isinstance(host.work_queue, SingleThreadedWorkQueue):
        return None
    stop: AsyncValue[None] = make_unconstructed()
    thread = threading.Thread(target=lambda: host.await_values([stop]),
                              name="pytfrt-serve-s-driver", daemon=True)
    thread.start()

    def finish() -> None:
        stop.emplace(None)
        thread.join()

    return finish


class _Terminated(BaseException):
    """SIGTERM/SIGINT arrived before the servers started (while models were loading).

    A ``BaseException``, like ``KeyboardInterrupt``: model loaders catch ``Exception`` to report
    a failed load, and must not swallow the request to stop."""


def _bind(what: str, host: str, port: int) -> socket.socket:
    try:
        return listen(host, port)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port} ({what}): {exc.strerror}") from None


class _Lifecycle:
    """The signal handler of :func:`run_server`: before the servers run, a signal aborts the
    start-up (:class:`_Terminated` raised in the main thread, wherever it is -- loading a
    model, compiling, binding); once they run, it asks uvicorn and the gRPC server to drain and
    stop.  Any later signal is ignored (the drain is under way)."""

    def __init__(self) -> None:
        self.uvicorn: Any = None
        self.serving = False
        self.stopping = False
        self.on_stop: list[Callable[[], None]] = []

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping:
            return
        if not self.serving:
            self.stopping = True
            raise _Terminated()
        self.stopping = True
        if self.uvicorn is not None:
            self.uvicorn.should_exit = True
        for stop in self.on_stop:
            stop()


def run_server(options: ServerOptions) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit status (0 after a clean drain).

    A signal at any moment ends the process: during start-up (models loading) it stops at
    once; while serving, in-flight requests drain for up to ``graceful_shutdown_seconds``.

    Raises:
        ListenError: a port cannot be bound.
    """
    import uvicorn

    life = _Lifecycle()
    previous = {sig: signal.signal(sig, life.handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    host: HostContext | None = None
    stop_driver: Callable[[], None] | None = None
    manager: ModelManager | None = None
    sock: socket.socket | None = None
    grpc_server: Any = None
    try:
        host = make_host(options.backend, options.work_queue_type)
        stop_driver = drive_single_threaded(host)
        metrics = ServingMetrics()
        warmup = None
        if options.model_warmup:
            from pytfrt.serving.warmup import warm_up_version

            warmup = warm_up_version
        manager = ModelManager(options.models, options.backend, host, metrics, options.batching,
                               LoadOptions(options.cache_dir, options.intra_op_parallelism),
                               warmup=warmup)
        # Bind first: a port in use fails at once, before minutes of model loading; clients
        # connecting meanwhile wait in the listen backlog until the app serves them.
        sock = _bind("HTTP/REST API", options.rest_api_host, options.rest_api_port)
        if options.grpc_port is not None:
            from pytfrt.serving.grpc_server import GrpcServer
            from pytfrt.serving.v2 import add_grpc_service

            grpc_server = GrpcServer(manager, host, metrics, options.grpc_max_threads)
            add_grpc_service(grpc_server)
            grpc_port = grpc_server.bind(options.rest_api_host, options.grpc_port)
        # Compile the JSON fast path while the models load (Numba caches it on disk).
        threading.Thread(target=fast_json.warm_up, name="pytfrt-serve-warm-up",
                         daemon=True).start()
        manager.start(options.poll_seconds)
        bound_host, bound_port = sock.getsockname()[:2]
        monitoring = options.monitoring or MonitoringConfig()
        app = ServingApp(manager, host, metrics, options.max_request_bytes,
                         monitoring.path if monitoring.enable else None,
                         options.rest_api_timeout_seconds)
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="on",
            http=resolve_http(options.http_parser), loop=resolve_loop(options.event_loop),
            timeout_graceful_shutdown=int(options.graceful_shutdown_seconds),
            proxy_headers=False, server_header=False,  # less work per request
        )
        life.uvicorn = uvicorn.Server(config)
        if grpc_server is not None:
            grpc_server.start()
            print(f"Running gRPC ModelServer at {bound_host}:{grpc_port} ...", flush=True)
            life.on_stop.append(lambda: grpc_server.stop(options.graceful_shutdown_seconds))
        print(f"Exporting HTTP/REST API at:{bound_host}:{bound_port} ...", flush=True)
        life.serving = True
        life.uvicorn.run(sockets=[sock])
        if grpc_server is not None:  # uvicorn stopped first (its own signal handlers ran)
            grpc_server.stop(options.graceful_shutdown_seconds).wait()
        print("pytfrt serve: drained in-flight requests, shutting down", file=sys.stderr,
              flush=True)
        return 0
    except _Terminated:
        print("pytfrt serve: terminated during start-up", file=sys.stderr, flush=True)
        return 0
    finally:
        life.serving, life.stopping = True, True  # a late signal during clean-up is ignored
        if grpc_server is not None:
            grpc_server.stop(0)
        if sock is not None:
            sock.close()
        if manager is not None:
            manager.stop()
        if stop_driver is not None:
            stop_driver()
        if host is not None:
            host.shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
