"""The ASGI application: TensorFlow Serving's REST API and its Prometheus endpoint.

Routes (paths are matched case-insensitively, as TF Serving does):

================================================================  ===========================
``POST /v1/models/{name}[/versions/{v}|/labels/{l}]:predict``     row or columnar predict
``GET  /v1/models/{name}[/versions/{v}|/labels/{l}]``             version status
``GET  /v1/models/{name}[/versions/{v}|/labels/{l}]/metadata``    signature def
``GET  /monitoring/prometheus/metrics``                           metrics (text format 0.0.4)
================================================================  ===========================

Every error is ``{"error": "<message>"}`` with TF Serving's HTTP status for its code (see
:mod:`pytfrt.serving.errors`); a body over ``max_request_bytes`` is refused with 413 before it
is read in full.  Nothing raised while handling a request escapes as a traceback.

Threading: the app runs on the event loop and does only I/O and routing there.  A predict
request pins its model version, then reads its body (the body of a big float tensor is copied
into one buffer as it arrives and its pieces are scanned by the small thread pool of
:class:`~pytfrt.serving.fast_json.BodyScan`; the version stays pinned while the client sends),
then becomes runtime work on the host's work queue -- decode
and validate the JSON, run the model (through the batcher when batching is on), encode the
response -- whose final AsyncValue the handler awaits through :func:`bridge.wrap_future`.
Unbatched requests to a servable that ``runs_inline`` do all three in one task.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from pytfrt.host import AsyncValue, HostContext
from pytfrt.serving import v2
from pytfrt.serving.bridge import chain, error_status, submit, then, wrap_future
from pytfrt.serving.config import DEFAULT_METRICS_PATH
from pytfrt.serving.errors import ServingError, invalid
from pytfrt.serving.fast_json import BodyScan
from pytfrt.serving.json_codec import body_scan, decode_predict_request, encode_predict_response
from pytfrt.serving.metrics import ServingMetrics
from pytfrt.serving.model_manager import LoadedVersion, ModelManager, parse_version
from pytfrt.serving.servable import Arrays
from pytfrt.serving.signature import ServingSignature
from pytfrt.support.errors import ErrorCode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

METRICS_PATH: Final = DEFAULT_METRICS_PATH
DEFAULT_MAX_REQUEST_BYTES: Final = 64 * 1024 * 1024

_MODEL_PATH: Final = re.compile(
    r"/v1/models/(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
    r"(?::(?P<method>[A-Za-z]+)|/(?P<metadata>metadata))?",
    re.IGNORECASE,
)
_V2_PATH: Final = re.compile(r"/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?"
                             r"(?P<tail>/ready|/infer)?")
_JSON_HEADERS: Final = [(b"content-type", b"application/json")]
Work = Callable[[LoadedVersion, "bytes | bytearray", "BodyScan | None"],
                AsyncValue[tuple[list[Any], bytes]]]


class PayloadTooLarge(ServingError):
    """A request body over the configured limit (HTTP 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body exceeds the limit of {limit} bytes "
                         "(--max_request_bytes)", ErrorCode.RESOURCE_EXHAUSTED)

    @property
    def http_status(self) -> int:
        return 413


class ServingApp:
    """The ASGI callable (see the module docstring).

    Args:
        manager: resolves model names and versions.
        host: whose work queue runs request work.
        metrics: the server's metrics.
        max_request_bytes: the largest request body accepted.
        metrics_path: where the Prometheus metrics are served (``None``: nowhere).
        timeout: seconds a predict request may take (``--rest_api_timeout_in_ms``); a late one
            gets ``DEADLINE_EXCEEDED`` (HTTP 504) while its work finishes in the background.
            ``None``: no limit.
    """

    def __init__(self, manager: ModelManager, host: HostContext, metrics: ServingMetrics,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 metrics_path: str | None = METRICS_PATH, timeout: float | None = None) -> None:
        self.manager = manager
        self.host = host
        self.metrics = metrics
        self.max_request_bytes = max_request_bytes
        self.metrics_path = metrics_path
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            status, headers, body = await self._handle(scope, receive)
        except ServingError as exc:
            status, headers, body = exc.http_status, _JSON_HEADERS, _error_body(exc.message)
        except Exception as exc:  # noqa: BLE001 - never a traceback to the client
            message = error_status(exc).message
            status, headers, body = 500, _JSON_HEADERS, _error_body(message)
        await send({
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode("ascii"))],
        })
        await send({"type": "http.response.body", "body": body})

    async def _handle(self, scope: Scope, receive: Receive) -> tuple[int, list[Any], bytes]:
        method: str = scope["method"]
        path: str = scope["path"]
        if path == self.metrics_path:
            if method != "GET":
                raise invalid(f"Malformed request: {method} {path}")
            text = self.metrics.render().encode("utf-8")
            return 200, [(b"content-type", b"text/plain; version=0.0.4")], text
        if path == "/v2" or path.startswith("/v2/"):
            return await self._v2(method, path, scope, receive)
        match = _MODEL_PATH.fullmatch(path)
        if match is None:
            if path.lower().startswith("/v1/"):
                raise invalid(f"Malformed request: {method} {path}")
            raise ServingError(f"no such endpoint: {method} {path}", ErrorCode.NOT_FOUND)
        name = match["name"]
        version = parse_version(match["version"])
        label = match["label"]
        api = (match["method"] or "").lower()
        if method == "POST" and api:
            if api in ("classify", "regress"):
                raise ServingError(f"the {api} API is not supported by pytfrt serve; use "
                                   ":predict", ErrorCode.UNIMPLEMENTED)
            if api != "predict":
                raise invalid(f"Malformed request: {method} {path}")
            return await self._predict(name, version, label, scope, receive)
        if method == "GET" and not api:
            if match["metadata"]:
                return 200, _JSON_HEADERS, _json(self.manager.metadata(name, version, label))
            return 200, _JSON_HEADERS, _json(self.manager.status(name, version, label))
        raise invalid(f"Malformed request: {method} {path}")

    async def _read_body(self, scope: Scope, receive: Receive,
                         signature: ServingSignature | None = None
                         ) -> tuple[bytes | bytearray, BodyScan | None]:
        """The request body, and the :class:`BodyScan` that parsed it while it arrived (a big
        body of a one-float32-input model, ``signature``'s), or ``None``."""
        limit = self.max_request_bytes
        length = None
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise invalid("bad Content-Length header") from None
                if length > limit:
                    raise PayloadTooLarge(limit)
        scan = body_scan(signature, length) if signature is not None and length else None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ServingError("the client disconnected", ErrorCode.CANCELLED)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(limit)
            if scan is None:
                chunks.append(chunk)
            elif size > scan.size:  # more than Content-Length (the HTTP parser prevents it)
                chunks = [bytes(scan.body()), chunk]
                scan = None
            else:
                scan.feed(chunk)
            if not message.get("more_body", False):
                if scan is None:
                    return b"".join(chunks), None
                return scan.body(), scan if size == scan.size else None

    async def _predict(self, name: str, version: int | None, label: str | None,
                       scope: Scope, receive: Receive) -> tuple[int, list[Any], bytes]:
        def work(lv: LoadedVersion, body: bytes | bytearray,
                 scanned: BodyScan | None) -> AsyncValue[tuple[list[Any], bytes]]:
            return then(self._predict_work(lv, body, scanned),
                        lambda response: (_JSON_HEADERS, response))

        return await self._pinned(name, version, label, scope, receive, work, "predict")

    async def _pinned(self, name: str, version: int | None, label: str | None, scope: Scope,
                      receive: Receive, work: Work, api: str) -> tuple[int, list[Any], bytes]:
        """Pin the version, read the body, run ``work`` (runtime work giving the response's
        headers and body) and await it within the timeout; count the request."""
        try:
            lv = self.manager.acquire(name, version, label)
        except ServingError as exc:
            await self._read_body(scope, receive)
            # Unknown names share one label: a client must not grow the metrics at will.
            known = name if name in self.manager.model_names() else ""
            self._count(known, exc.code, time.perf_counter(), api)
            raise
        code = ErrorCode.OK
        try:
            # The body of a big float tensor is parsed while it arrives (fast_json.BodyScan).
            body, scanned = await self._read_body(scope, receive,
                                                  lv.signature if api == "predict" else None)
            started = time.perf_counter()
            result = work(lv, body, scanned)
        except BaseException:
            self.manager.release(lv)
            raise
        # The version stays pinned until the runtime work is done, even if this handler is
        # cancelled first (so a hot swap never closes a model under a running request).
        result.and_then(lambda: self.manager.release(lv))
        in_flight = self.metrics.in_flight
        in_flight.inc(name)
        try:
            headers, response = await asyncio.wait_for(
                wrap_future(result, asyncio.get_running_loop()), self.timeout)
            if self.timeout is not None and time.perf_counter() - started > self.timeout:
                # done, but late: the loop (starved of the GIL while the work ran) ran the
                # work's completion before the timeout's timer
                raise TimeoutError
        except TimeoutError:
            code = ErrorCode.DEADLINE_EXCEEDED
            raise ServingError("Request timed out (--rest_api_timeout_in_ms)", code) from None
        except ServingError as exc:
            code = exc.code
            raise
        finally:
            in_flight.inc(name, amount=-1)
            self._count(name, code, started, api)
        return 200, headers, response

    # -- the Open Inference Protocol (v2) ----------------------------------------------------

    async def _v2(self, method: str, path: str, scope: Scope,
                  receive: Receive) -> tuple[int, list[Any], bytes]:
        manager = self.manager
        if method == "GET" and path in ("/v2", "/v2/"):
            return 200, _JSON_HEADERS, _json(v2.server_metadata())
        if method == "GET" and path == "/v2/health/live":
            return 200, _JSON_HEADERS, _json({"live": True})
        if method == "GET" and path == "/v2/health/ready":
            ready = v2.server_ready(manager)
            return (200 if ready else 503), _JSON_HEADERS, _json({"ready": ready})
        match = _V2_PATH.fullmatch(path)
        if match is None:
            raise ServingError(f"no such endpoint: {method} {path}", ErrorCode.NOT_FOUND)
        name, version, tail = match["name"], parse_version(match["version"]), match["tail"]
        if method == "GET" and tail is None:
            return 200, _JSON_HEADERS, _json(v2.model_metadata(manager, name, version))
        if method == "GET" and tail == "/ready":
            ready = v2.model_ready(manager, name, version)
            return (200 if ready else 503), _JSON_HEADERS, _json({"name": name, "ready": ready})
        if method == "POST" and tail == "/infer":
            header_length = None
            for key, value in scope.get("headers", []):
                if key == v2.HEADER_LENGTH.encode():
                    try:
                        header_length = int(value)
                    except ValueError:
                        raise invalid("bad Inference-Header-Content-Length header") from None
            return await self._pinned(name, version, None, scope, receive,
                                      lambda lv, body, _: self._v2_work(lv, body, header_length),
                                      "infer")
        raise invalid(f"Malformed request: {method} {path}")

    def _v2_work(self, lv: LoadedVersion, body: bytes | bytearray,
                 header_length: int | None) -> AsyncValue[tuple[list[Any], bytes]]:
        def decode() -> v2.InferRequest:
            return v2.decode_rest_infer(body, header_length, lv.signature)

        def encode(request: v2.InferRequest, outputs: Arrays) -> tuple[list[Any], bytes]:
            response, json_length = v2.encode_rest_infer(lv.model, lv.version, request, outputs)
            if json_length is None:
                return _JSON_HEADERS, response
            return [(b"content-type", b"application/octet-stream"),
                    (v2.HEADER_LENGTH.encode(), str(json_length).encode())], response

        servable = lv.servable
        if lv.batcher is None and servable.runs_inline:
            def decode_run_encode() -> tuple[list[Any], bytes]:
                request = decode()
                return encode(request, servable.run(request.inputs))

            return submit(self.host, decode_run_encode)

        def decode_and_run() -> AsyncValue[tuple[list[Any], bytes]]:
            request = decode()
            return then(lv.predict_async(request.inputs),
                        lambda outputs: encode(request, outputs))

        return chain(submit(self.host, decode_and_run), lambda inner: inner)

    def _predict_work(self, lv: LoadedVersion, body: bytes | bytearray,
                      scanned: BodyScan | None) -> AsyncValue[bytes]:
        signature = lv.signature
        servable = lv.servable
        if lv.batcher is None and servable.runs_inline:
            # One task, no second work-queue hop for the model: on the MLP (in-process A/B,
            # 16 concurrent requests) 218 us of CPU and 822 us wall per request against 245/986.
            def decode_run_encode() -> bytes:
                request = decode_predict_request(body, signature, scanned)
                return encode_predict_response(request.format, servable.run(request.inputs))

            return submit(self.host, decode_run_encode)

        def decode_and_run() -> AsyncValue[bytes]:
            request = decode_predict_request(body, signature, scanned)
            outputs = lv.predict_async(request.inputs)
            return then(outputs, lambda arrays: encode_predict_response(request.format, arrays))

        return chain(submit(self.host, decode_and_run), lambda inner: inner)

    def _count(self, name: str, code: ErrorCode, started: float, api: str) -> None:
        self.metrics.request_count.inc(name, code.name)
        self.metrics.request_latency.observe((time.perf_counter() - started) * 1e6, name,
                                             api, "REST")


def _json(obj: Any) -> bytes:
    return json.dumps(obj, indent=1).encode("utf-8") + b"\n"


def _error_body(message: str) -> bytes:
    return json.dumps({"error": message}).encode("utf-8") + b"\n"


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
