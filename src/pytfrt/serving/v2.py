"""The Open Inference Protocol ("v2", KServe's and Triton's): its tensors, REST JSON and gRPC.

REST (routed by :mod:`pytfrt.serving.app`; bodies are JSON, errors ``{"error": "..."}``):

==========================================================  ====================================
``GET  /v2/health/live``, ``/v2/health/ready``               200, or 503 when a model has no
                                                             version served
``GET  /v2``                                                 server metadata
``GET  /v2/models/{name}[/versions/{v}]``                    model metadata (inputs, outputs)
``GET  /v2/models/{name}[/versions/{v}]/ready``              200 when served, else 503
``POST /v2/models/{name}[/versions/{v}]/infer``              inference
==========================================================  ====================================

An inference request's ``inputs`` give ``name``, ``shape``, ``datatype`` (``FP32``, ``INT64``,
``BYTES`` ...) and ``data`` (row-major, flat or nested).  The **binary tensor data extension**:
with a header ``Inference-Header-Content-Length: N`` the body is N bytes of JSON followed by
the inputs whose ``parameters.binary_data_size`` is set, in order, as raw little-endian
C-order bytes (``BYTES`` elements: a 4-byte little-endian length, then the bytes).  Outputs are
returned as binary data when the request says ``parameters.binary_data_output: true`` or an
output asks ``parameters.binary_data: true`` (the response then has the same header); else as
JSON ``data``.  ``outputs`` in the request selects outputs.

gRPC: ``inference.GRPCInferenceService`` (ServerLive, ServerReady, ModelReady, ServerMetadata,
ModelMetadata, ModelInfer), registered on :class:`~pytfrt.serving.grpc_server.GrpcServer` by
:func:`add_grpc_service`; inputs come in ``raw_input_contents`` or the typed ``contents``;
outputs go out in ``raw_output_contents``.

Model and version resolution, validation and messages are the REST API's (the version: ASCII
digits, ``""`` for the latest).  Pure functions besides the handlers; thread-safe.
"""

from __future__ import annotations

import json
import math
import struct
import time
from typing import Any, Final

import ml_dtypes
import numpy as np

from pytfrt.serving.errors import ServingError, invalid, not_found
from pytfrt.serving.json_codec import MAX_TENSOR_RANK, check_tensor_inputs, parse_json_body
from pytfrt.serving.model_manager import LoadedVersion, ModelManager, parse_version
from pytfrt.serving.servable import Arrays
from pytfrt.serving.signature import ServingSignature, TensorInfo

SERVER_NAME: Final = "pytfrt"
EXTENSIONS: Final = ["binary_tensor_data"]
HEADER_LENGTH: Final = "inference-header-content-length"

DATATYPES: Final[dict[str, Any]] = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
    "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
    "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
    "BF16": ml_dtypes.bfloat16, "BYTES": object,
}
_NAMES: Final = {np.dtype(dt): name for name, dt in DATATYPES.items()}
# InferTensorContents' field for each datatype (gRPC's typed values).
CONTENTS_FIELD: Final = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}


def datatype(dtype: np.dtype[Any]) -> str:
    """The protocol's name of a NumPy dtype (``FP32`` ...)."""
    name = _NAMES.get(np.dtype(dtype))
    if name is None:
        raise invalid(f"dtype {dtype} has no Open Inference Protocol datatype")
    return name


def _dtype(name: Any, tensor: str) -> np.dtype[Any]:
    if not isinstance(name, str) or name not in DATATYPES:
        raise invalid(f"input '{tensor}': unknown datatype {name!r} (one of "
                      f"{', '.join(DATATYPES)})")
    return np.dtype(DATATYPES[name])


def _shape(shape: Any, tensor: str) -> tuple[int, ...]:
    if (not isinstance(shape, list | tuple) or len(shape) > MAX_TENSOR_RANK
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                       for d in shape)):
        raise invalid(f"input '{tensor}': 'shape' must be a list of at most "
                      f"{MAX_TENSOR_RANK} non-negative integers, got {shape!r}")
    return tuple(shape)


def _size(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def decode_bytes_elements(raw: bytes | memoryview, count: int, tensor: str) -> np.ndarray:
    """``count`` BYTES elements, each a 4-byte little-endian length and its bytes."""
    out = np.empty(count, dtype=object)
    view = memoryview(raw)
    pos = 0
    for i in range(count):
        if pos + 4 > len(view):
            raise invalid(f"input '{tensor}': binary data ends inside element {i}")
        (length,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if pos + length > len(view):
            raise invalid(f"input '{tensor}': binary data ends inside element {i}")
        out[i] = bytes(view[pos:pos + length])
        pos += length
    if pos != len(view):
        raise invalid(f"input '{tensor}': {len(view) - pos} bytes of binary data left over")
    return out


def decode_raw(raw: bytes | memoryview, dtype: np.dtype[Any], shape: tuple[int, ...],
               tensor: str) -> np.ndarray:
    """A tensor from its binary form (raw C-order little-endian values, or BYTES elements)."""
    size = _size(shape)
    if dtype.kind == "O":
        return decode_bytes_elements(raw, size, tensor).reshape(shape)
    if len(raw) != size * dtype.itemsize:
        raise invalid(f"input '{tensor}': {len(raw)} bytes of binary data, the shape "
                      f"{list(shape)} of {datatype(dtype)} needs {size * dtype.itemsize}")
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False) \
        .reshape(shape)


def encode_raw(array: np.ndarray) -> bytes:
    """The binary form of ``array`` (see :func:`decode_raw`)."""
    if array.dtype.kind == "O":
        parts = []
        for item in array.reshape(-1):
            data = item if isinstance(item, bytes) else str(item).encode("utf-8")
            parts.append(struct.pack("<I", len(data)) + data)
        return b"".join(parts)
    return np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()


def check_datatypes(inputs: Arrays, signature: ServingSignature) -> None:
    """Each known input has its signature's dtype (named with the protocol's datatypes)."""
    for info in signature.inputs:
        array = inputs.get(info.name)
        if array is not None and array.dtype != info.dtype:
            raise invalid(f"input '{info.name}' expects {datatype(info.dtype)}, got "
                          f"{datatype(array.dtype)}")


def _from_json_data(data: Any, dtype: np.dtype[Any], shape: tuple[int, ...],
                    tensor: str) -> np.ndarray:
    if not isinstance(data, list):
        raise invalid(f"input '{tensor}': 'data' must be a list")
    if dtype.kind == "O":
        flat = np.asarray(data, dtype=object).reshape(-1)
        if not all(isinstance(v, str) for v in flat):
            raise invalid(f"input '{tensor}': BYTES data must be strings")
        array = np.empty(flat.size, dtype=object)
        array[:] = [v.encode("utf-8") for v in flat]
    else:
        try:
            raw = np.asarray(data)
        except ValueError:
            raise invalid(f"input '{tensor}': ragged 'data'") from None
        kind = raw.dtype.kind
        if raw.size and (kind not in "biuf" or (dtype.kind == "b") != (kind == "b")
                         or (dtype.kind in "iu" and kind == "f")):
            raise invalid(f"input '{tensor}': 'data' does not hold {datatype(dtype)} values")
        with np.errstate(over="raise", invalid="raise"):
            try:
                array = raw.astype(dtype).reshape(-1)
            except FloatingPointError:
                raise invalid(f"input '{tensor}': a value is out of range for "
                              f"{datatype(dtype)}") from None
        if dtype.kind in "iu" and raw.size and not np.array_equal(array, raw.reshape(-1)):
            raise invalid(f"input '{tensor}': a value is out of range for {datatype(dtype)}")
    if array.size != _size(shape):
        raise invalid(f"input '{tensor}': {array.size} values for shape {list(shape)}")
    return array.reshape(shape)


# -- REST ---------------------------------------------------------------------------------------


class InferRequest:
    """A decoded REST inference request: inputs, which outputs and in which form."""

    def __init__(self, inputs: Arrays, outputs: list[tuple[str, bool]], request_id: str | None
                 ) -> None:
        self.inputs = inputs
        self.outputs = outputs
        """Requested outputs with whether each goes out as binary data."""
        self.id = request_id


def decode_rest_infer(body: bytes | bytearray, header_length: int | None,
                      signature: ServingSignature) -> InferRequest:
    """Parse a REST ``.../infer`` body (JSON, or JSON then binary data) against ``signature``.

    Raises:
        ServingError: ``INVALID_ARGUMENT`` naming what is wrong.
    """
    view = memoryview(body)
    if header_length is not None:
        if not 0 <= header_length <= len(view):
            raise invalid(f"Inference-Header-Content-Length {header_length} is not within the "
                          f"body's {len(view)} bytes")
        request = parse_json_body(bytes(view[:header_length]))
        binary = view[header_length:]
    else:
        request = parse_json_body(body)
        binary = view[:0]
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise invalid("the request must be a JSON object with an 'inputs' list")
    params = request.get("parameters") or {}
    if not isinstance(params, dict):
        raise invalid("'parameters' must be an object")
    inputs: Arrays = {}
    offset = 0
    for entry in request["inputs"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise invalid("each input must be an object with a 'name'")
        name = entry["name"]
        if name in inputs:
            raise invalid(f"input '{name}' is given twice")
        dtype = _dtype(entry.get("datatype"), name)
        shape = _shape(entry.get("shape"), name)
        size = (entry.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or size < 0 or offset + size > len(binary):
                raise invalid(f"input '{name}': binary_data_size {size!r} does not fit the "
                              f"{len(binary) - offset} bytes of binary data left")
            inputs[name] = decode_raw(binary[offset:offset + size], dtype, shape, name)
            offset += size
        else:
            if "data" not in entry:
                raise invalid(f"input '{name}' has neither 'data' nor binary data")
            inputs[name] = _from_json_data(entry["data"], dtype, shape, name)
    if offset != len(binary):
        raise invalid(f"{len(binary) - offset} bytes of binary data no input claims")
    check_datatypes(inputs, signature)
    check_tensor_inputs(inputs, signature, "the request")
    binary_all = bool(params.get("binary_data_output", False))
    wanted = request.get("outputs")
    outputs: list[tuple[str, bool]]
    if wanted is None:
        outputs = [(name, binary_all) for name in signature.output_names]
    else:
        if not isinstance(wanted, list):
            raise invalid("'outputs' must be a list")
        outputs = []
        for entry in wanted:
            if not isinstance(entry, dict) or entry.get("name") not in signature.output_names:
                name = entry.get("name") if isinstance(entry, dict) else entry
                raise invalid(f"unknown output {name!r} (the model's outputs: "
                              f"{', '.join(signature.output_names)})")
            binary = (entry.get("parameters") or {}).get("binary_data", binary_all)
            outputs.append((entry["name"], bool(binary)))
    request_id = request.get("id")
    return InferRequest(inputs, outputs, request_id if isinstance(request_id, str) else None)


def _json_data(array: np.ndarray) -> list[Any]:
    flat = array.reshape(-1)
    if array.dtype.kind == "O":
        try:
            return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in flat]
        except UnicodeDecodeError:
            raise ServingError("a BYTES output is not UTF-8: ask for it as binary data "
                               "(parameters.binary_data: true)") from None
    if array.dtype == ml_dtypes.bfloat16:
        flat = flat.astype(np.float32)
    return flat.tolist()  # type: ignore[no-any-return]


def encode_rest_infer(name: str, version: int, request: InferRequest, outputs: Arrays
                      ) -> tuple[bytes, int | None]:
    """The response body and, when some output is binary, the JSON header's length."""
    items = []
    binaries = []
    for output, binary in request.outputs:
        array = np.asarray(outputs[output])
        item: dict[str, Any] = {"name": output, "datatype": datatype(array.dtype),
                                "shape": list(array.shape)}
        if binary:
            raw = encode_raw(array)
            item["parameters"] = {"binary_data_size": len(raw)}
            binaries.append(raw)
        else:
            item["data"] = _json_data(array)
        items.append(item)
    response: dict[str, Any] = {"model_name": name, "model_version": str(version),
                                "outputs": items}
    if request.id is not None:
        response["id"] = request.id
    header = json.dumps(response, separators=(",", ":")).encode("utf-8")
    if not binaries:
        return header, None
    return b"".join([header, *binaries]), len(header)


def _tensor_metadata(info: TensorInfo) -> dict[str, Any]:
    shape = [-1] if info.shape is None else [-1 if d is None else d for d in info.shape]
    return {"name": info.name, "datatype": datatype(info.dtype), "shape": shape}


def model_metadata(manager: ModelManager, name: str, version: int | None) -> dict[str, Any]:
    """The model metadata response (``versions``: every version served).

    Raises:
        ServingError: ``NOT_FOUND`` as :meth:`ModelManager.acquire`.
    """
    lv = manager.acquire(name, version)
    try:
        return {
            "name": name,
            "versions": [str(v) for v in manager.served_versions(name)],
            "platform": platform(lv),
            "inputs": [_tensor_metadata(t) for t in lv.signature.inputs],
            "outputs": [_tensor_metadata(t) for t in lv.signature.outputs],
        }
    finally:
        manager.release(lv)


def platform(lv: LoadedVersion) -> str:
    """What runs the version, in the protocol's ``platform`` (the backend's description)."""
    return lv.servable.description or "pytfrt"


def model_ready(manager: ModelManager, name: str, version: int | None) -> bool:
    """Whether requests can reach ``name`` (at ``version``) now.

    Raises:
        ServingError: ``NOT_FOUND`` for an unknown model.
    """
    if name not in manager.model_names():
        raise not_found(f"Servable not found for request: Latest({name})")
    served = manager.served_versions(name)
    return bool(served) and (version is None or version in served)


def server_ready(manager: ModelManager) -> bool:
    """Every configured model has a version served."""
    return all(manager.served_versions(name) for name in manager.model_names())


def server_metadata() -> dict[str, Any]:
    import pytfrt

    return {"name": SERVER_NAME, "version": getattr(pytfrt, "__version__", ""),
            "extensions": EXTENSIONS}


def parse_v2_version(text: str) -> int | None:
    """A protocol version string: ``""`` for the latest, else ASCII digits within int64."""
    return parse_version(text) if text else None


# -- gRPC ---------------------------------------------------------------------------------------


def _grpc_inputs(request: Any) -> Arrays:
    inputs: Arrays = {}
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise invalid(f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} "
                      "inputs")
    for index, entry in enumerate(request.inputs):
        name = entry.name
        if name in inputs:
            raise invalid(f"input '{name}' is given twice")
        dtype = _dtype(entry.datatype, name)
        shape = _shape(list(entry.shape), name)
        if raw:
            inputs[name] = decode_raw(raw[index], dtype, shape, name)
            continue
        field = CONTENTS_FIELD.get(entry.datatype)
        if field is None:
            raise invalid(f"input '{name}': {entry.datatype} needs raw_input_contents")
        values = getattr(entry.contents, field)
        if dtype.kind == "O":
            array = np.empty(len(values), dtype=object)
            array[:] = list(values)
        else:
            array = np.asarray(values).astype(dtype)
        if array.size != _size(shape):
            raise invalid(f"input '{name}': {array.size} values for shape {list(shape)}")
        inputs[name] = array.reshape(shape)
    return inputs


def add_grpc_service(server: Any) -> None:
    """Register ``inference.GRPCInferenceService`` on a
    :class:`~pytfrt.serving.grpc_server.GrpcServer`."""
    from pytfrt.serving import protos
    from pytfrt.serving.grpc_server import run_model

    manager: ModelManager = server.manager
    message = protos.message_class

    def live(request: Any, context: Any) -> Any:
        return message("inference.ServerLiveResponse")(live=True)

    def ready(request: Any, context: Any) -> Any:
        return message("inference.ServerReadyResponse")(ready=server_ready(manager))

    def ready_model(request: Any, context: Any) -> Any:
        version = parse_v2_version(request.version)
        return message("inference.ModelReadyResponse")(
            ready=model_ready(manager, request.name, version))

    def metadata(request: Any, context: Any) -> Any:
        return message("inference.ServerMetadataResponse")(**server_metadata())

    def model(request: Any, context: Any) -> Any:
        from google.protobuf import json_format

        found = model_metadata(manager, request.name, parse_v2_version(request.version))
        return json_format.ParseDict(found, message("inference.ModelMetadataResponse")())

    def infer(request: Any, context: Any) -> Any:
        started = time.perf_counter()
        name = request.model_name
        known = name if name in manager.model_names() else ""
        code = "OK"
        try:
            lv = manager.acquire(name, parse_v2_version(request.model_version))
            try:
                inputs = _grpc_inputs(request)
                check_datatypes(inputs, lv.signature)
                check_tensor_inputs(inputs, lv.signature, "the request")
                wanted = [o.name for o in request.outputs] or lv.signature.output_names
                for output in wanted:
                    if output not in lv.signature.output_names:
                        raise invalid(f"unknown output '{output}' (the model's outputs: "
                                      f"{', '.join(lv.signature.output_names)})")
                outputs = run_model(lv, inputs)
            finally:
                manager.release(lv)
            response = message("inference.ModelInferResponse")(
                model_name=name, model_version=str(lv.version), id=request.id)
            for output in wanted:
                array = np.asarray(outputs[output])
                response.outputs.add(name=output, datatype=datatype(array.dtype),
                                     shape=list(array.shape))
                response.raw_output_contents.append(encode_raw(array))
            return response
        except ServingError as exc:
            code = exc.code.name
            raise
        finally:
            server.metrics.request_count.inc(known, code)
            server.metrics.request_latency.observe((time.perf_counter() - started) * 1e6,
                                                   known, "infer", "GRPC")

    server.add_service("inference.GRPCInferenceService", {
        "ServerLive": live, "ServerReady": ready, "ModelReady": ready_model,
        "ServerMetadata": metadata, "ModelMetadata": model, "ModelInfer": infer,
    })
