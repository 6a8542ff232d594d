"""The gRPC API: TensorFlow Serving's PredictionService and ModelService (and, registered by
:mod:`pytfrt.serving.v2`, the Open Inference Protocol's GRPCInferenceService).

Services and calls, with TensorFlow Serving's messages and status codes
(:mod:`pytfrt.serving.protos`):

=====================================================  =========================================
``tensorflow.serving.PredictionService/Predict``        run the model (``output_filter`` kept)
``tensorflow.serving.PredictionService/GetModelMetadata``  ``signature_def`` (a ``SignatureDefMap``
                                                        in an ``Any``)
``tensorflow.serving.PredictionService/Classify``       ``INVALID_ARGUMENT``: served signatures
``tensorflow.serving.PredictionService/Regress``        are predict signatures (TF Serving's
                                                        answer for those)
``tensorflow.serving.ModelService/GetModelStatus``      version states, as the REST status API
=====================================================  =========================================

Model, version and label resolution, validation messages and metrics are those of the REST API
(the same :class:`~pytfrt.serving.model_manager.ModelManager`, the same checks of
:mod:`pytfrt.serving.json_codec`); a :class:`ServingError` becomes the gRPC status of its
canonical code with its message.

Threading: a synchronous ``grpc.server`` with ``--grpc_max_threads`` threads.  A call decodes
its tensors on its gRPC thread and runs the model there when the servable ``runs_inline`` (its
``run`` computes on the calling thread; an unbatched REST request runs it on a work-queue
thread the same way), else through ``predict_async`` -- the batcher when batching is on -- and
blocks its gRPC thread until the result is available; the version stays pinned meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import numpy as np

from pytfrt.host import HostContext
from pytfrt.serving import protos, tensor_proto
from pytfrt.serving.bridge import error_status, wait
from pytfrt.serving.errors import ListenError, ServingError, invalid
from pytfrt.serving.json_codec import check_tensor_inputs
from pytfrt.serving.metrics import ServingMetrics
from pytfrt.serving.model_manager import LoadedVersion, ModelManager
from pytfrt.serving.servable import Arrays
from pytfrt.serving.signature import DEFAULT_SIGNATURE, PREDICT_METHOD, signature_def_json
from pytfrt.support.errors import ErrorCode

PREDICTION_SERVICE: Final = "tensorflow.serving.PredictionService"
MODEL_SERVICE: Final = "tensorflow.serving.ModelService"
MAX_MESSAGE_BYTES: Final = 2**31 - 1


def run_model(lv: LoadedVersion, inputs: Arrays) -> Arrays:
    """Run one request on ``lv`` from a gRPC thread and return its outputs: on this thread when
    the servable ``runs_inline`` and no batcher merges requests (no hand-off to the work queue
    and back), else through ``lv.predict_async`` (the batcher, or the runtime), waited for."""
    if lv.batcher is None and lv.servable.runs_inline:
        return lv.servable.run(inputs)
    return wait(lv.predict_async(inputs))


def grpc_status(code: ErrorCode) -> Any:
    """The ``grpc.StatusCode`` of a canonical code (same names)."""
    import grpc

    return getattr(grpc.StatusCode, code.name, grpc.StatusCode.UNKNOWN)


Handler = Callable[[Any, Any], Any]


class GrpcServer:
    """A ``grpc.server`` serving the TF Serving services over ``manager``'s models.

    Args:
        manager: resolves models and versions.
        host: whose work queue runs the models.
        metrics: the server's metrics (``entrypoint="GRPC"``).
        max_threads: gRPC threads (the most calls served at once).
        max_message_bytes: the largest request message accepted.
    """

    def __init__(self, manager: ModelManager, host: HostContext, metrics: ServingMetrics,
                 max_threads: int, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        import grpc

        self.manager = manager
        self.host = host
        self.metrics = metrics
        self._executor = ThreadPoolExecutor(max_workers=max_threads,
                                            thread_name_prefix="pytfrt-grpc")
        self._server = grpc.server(self._executor, options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", -1),
            ("grpc.so_reuseport", 0),
        ])
        self._stopped: threading.Event | None = None
        self.add_service(PREDICTION_SERVICE, {
            "Predict": self.predict,
            "GetModelMetadata": self.get_model_metadata,
            "Classify": self.classify,
            "Regress": self.regress,
        })
        self.add_service(MODEL_SERVICE, {"GetModelStatus": self.get_model_status})
        self._spec = protos.message_class("tensorflow.serving.ModelSpec")
        self._predict_response = protos.message_class("tensorflow.serving.PredictResponse")

    def add_service(self, service: str, handlers: dict[str, Handler]) -> None:
        """Serve ``service``'s calls (method name -> ``handler(request, context)``); request and
        response types come from the service's descriptor.  Call before :meth:`start`."""
        import grpc

        descriptor = protos.service_descriptor(service)
        methods = {}
        for name, handler in handlers.items():
            method = descriptor.methods_by_name[name]
            request = protos.message_class(method.input_type.full_name)
            response = protos.message_class(method.output_type.full_name)
            methods[name] = grpc.unary_unary_rpc_method_handler(
                self._guard(handler), request_deserializer=request.FromString,
                response_serializer=response.SerializeToString)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, methods),))

    @staticmethod
    def _guard(handler: Handler) -> Handler:
        """``handler`` with every failure turned into a gRPC status (never a traceback)."""
        def call(request: Any, context: Any) -> Any:
            try:
                return handler(request, context)
            except ServingError as exc:
                context.abort(grpc_status(exc.code), exc.message)
            except Exception as exc:  # noqa: BLE001 - an internal error, as a status
                status = error_status(exc)
                context.abort(grpc_status(status.code), status.message)
        return call

    def bind(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: a free port); the port bound.

        Raises:
            ListenError: the address cannot be bound.
        """
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = self._server.add_insecure_port(address)
        except RuntimeError as exc:
            raise ListenError(f"cannot listen on {host}:{port} (gRPC API): {exc}") from None
        if bound == 0:
            raise ListenError(f"cannot listen on {host}:{port} (gRPC API): address in use or "
                              "not available")
        return int(bound)

    def start(self) -> None:
        self._server.start()

    def stop(self, grace: float) -> threading.Event:
        """Stop accepting calls; calls in flight get ``grace`` seconds.  Returns an event set
        when the server has stopped (idempotent: later calls return the first one's event)."""
        if self._stopped is None:
            self._stopped = self._server.stop(grace)
        return self._stopped

    # -- model resolution ---------------------------------------------------------------------

    def _resolve(self, spec: Any) -> tuple[str, int | None, str | None]:
        choice = spec.WhichOneof("version_choice")
        version = spec.version.value if choice == "version" else None
        label = spec.version_label if choice == "version_label" else None
        if not spec.name:
            raise invalid("Missing ModelSpec")
        return spec.name, version, label

    def _model_spec(self, out: Any, name: str, version: int) -> None:
        out.name = name
        out.version.value = version
        out.signature_name = DEFAULT_SIGNATURE

    @staticmethod
    def _check_signature(name: str) -> None:
        if name not in ("", DEFAULT_SIGNATURE):
            raise invalid(f'Serving signature key "{name}" not found.')

    # -- PredictionService ---------------------------------------------------------------------

    def predict(self, request: Any, context: Any) -> Any:
        started = time.perf_counter()
        name, version, label = self._resolve(request.model_spec)
        code = ErrorCode.OK
        known = name if name in self.manager.model_names() else ""
        try:
            self._check_signature(request.model_spec.signature_name)
            lv = self.manager.acquire(name, version, label)
            try:
                inputs = {key: tensor_proto.to_array(value, key)
                          for key, value in request.inputs.items()}
                check_tensor_inputs(inputs, lv.signature, "the request")
                wanted = list(request.output_filter) or lv.signature.output_names
                for output in wanted:
                    if output not in lv.signature.output_names:
                        raise invalid(f"output tensor alias not found in signature: {output} "
                                      f"Outputs expected to be in the set "
                                      f"{{{','.join(lv.signature.output_names)}}}.")
                self.metrics.in_flight.inc(name)
                try:
                    outputs = run_model(lv, inputs)
                finally:
                    self.metrics.in_flight.inc(name, amount=-1)
            finally:
                self.manager.release(lv)
            response = self._predict_response()
            self._model_spec(response.model_spec, name, lv.version)
            for output in wanted:
                tensor_proto.from_array(np.asarray(outputs[output]), response.outputs[output])
            return response
        except ServingError as exc:
            code = exc.code
            raise
        finally:
            self.metrics.request_count.inc(known, code.name)
            self.metrics.request_latency.observe((time.perf_counter() - started) * 1e6, known,
                                                 "predict", "GRPC")

    def get_model_metadata(self, request: Any, context: Any) -> Any:
        from google.protobuf import json_format

        name, version, label = self._resolve(request.model_spec)
        fields = list(request.metadata_field)
        if fields != ["signature_def"]:
            raise invalid("Metadata field(s) " + ", ".join(f"'{f}'" for f in fields) +
                          " not supported: signature_def is the only one")
        lv = self.manager.acquire(name, version, label)
        try:
            signature = lv.signature
            served = lv.version
        finally:
            self.manager.release(lv)
        response = protos.message_class("tensorflow.serving.GetModelMetadataResponse")()
        self._model_spec(response.model_spec, name, served)
        response.model_spec.signature_name = ""
        sig_map = json_format.ParseDict(
            signature_def_json(signature)["signature_def"],
            protos.message_class("tensorflow.serving.SignatureDefMap")())
        response.metadata["signature_def"].Pack(sig_map)
        return response

    def _not_a_predict_call(self, request: Any, method: str) -> Any:
        """Classify and Regress: the model must exist, and its signature is a predict one."""
        name, version, label = self._resolve(request.model_spec)
        self._check_signature(request.model_spec.signature_name)
        self.manager.release(self.manager.acquire(name, version, label))
        raise invalid(f"Expected {'classification' if method == 'classify' else 'regression'} "
                      f"signature method_name to be tensorflow/serving/{method}. "
                      f"Was: {PREDICT_METHOD}")

    def classify(self, request: Any, context: Any) -> Any:
        return self._not_a_predict_call(request, "classify")

    def regress(self, request: Any, context: Any) -> Any:
        return self._not_a_predict_call(request, "regress")

    # -- ModelService --------------------------------------------------------------------------

    def get_model_status(self, request: Any, context: Any) -> Any:
        from google.protobuf import json_format

        name, version, label = self._resolve(request.model_spec)
        return json_format.ParseDict(
            self.manager.status(name, version, label),
            protos.message_class("tensorflow.serving.GetModelStatusResponse")())
