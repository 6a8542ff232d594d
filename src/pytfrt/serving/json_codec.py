"""TensorFlow Serving's JSON mapping for ``:predict``: request JSON -> arrays -> response JSON.

The formats are those of TF Serving's REST API (``docs/serving.md`` shows each):

* request: ``{"signature_name"?: str, "instances": ...}`` (row format) or ``{..., "inputs":
  ...}`` (columnar format), never both.  In the row format ``instances`` is a list with one
  entry per batch row: the row's value when the model has one input, else an object naming
  every input.  In the columnar format ``inputs`` is the one input's whole tensor, or an object
  mapping every input name to its tensor.
* values: JSON numbers (``NaN``, ``Infinity``, ``-Infinity`` accepted), ``true``/``false``,
  strings (UTF-8 encoded into ``bytes``) and ``{"b64": "..."}`` for binary strings.
* response: ``{"predictions": ...}`` for a row request (the output's rows, or one object per row
  when the model has several outputs) and ``{"outputs": ...}`` for a columnar request (the
  output's tensor, or an object of all outputs).  String outputs whose name ends in ``_bytes``
  are written as ``{"b64": ...}``.

Every mismatch with the signature -- unknown or missing input, wrong dtype (a string for a
number, a fraction for an integer, an out-of-range integer), ragged lists, wrong rank or fixed
dimension -- raises :class:`ServingError` (``INVALID_ARGUMENT``) naming the input.  Pure
functions; thread-safe.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from pytfrt.serving import fast_json
from pytfrt.serving.errors import ServingError, invalid
from pytfrt.serving.signature import DEFAULT_SIGNATURE, ServingSignature, TensorInfo
from pytfrt.support.errors import ErrorCode

ROW: Final = "row"
COLUMNAR: Final = "columnar"
_REQUEST_KEYS: Final = ("signature_name", "instances", "inputs")
_FLOAT_SOURCE_KINDS: Final = "fiu"
MAX_TENSOR_RANK: Final = fast_json.MAX_RANK
"""The deepest nesting of lists a tensor value may have (deeper: ``INVALID_ARGUMENT``)."""


@dataclass(frozen=True)
class PredictRequest:
    """A decoded ``:predict`` request: its format and one array per model input."""

    format: str
    """:data:`ROW` or :data:`COLUMNAR` (the response uses the matching format)."""
    inputs: dict[str, np.ndarray]


# -- request ------------------------------------------------------------------------------------


def parse_json_body(body: bytes | bytearray) -> Any:
    """``json.loads`` with TF Serving's error message for a malformed body."""
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise invalid(f"JSON Parse error: {exc.msg} at offset: {exc.pos}") from None
    except UnicodeDecodeError as exc:
        raise invalid(f"JSON Parse error: the body is not UTF-8 ({exc.reason})") from None
    except RecursionError:
        raise invalid("JSON Parse error: the JSON nests deeper than the parser's limit of "
                      f"about {sys.getrecursionlimit()} levels") from None


def body_scan(signature: ServingSignature, size: int) -> fast_json.BodyScan | None:
    """A :class:`~pytfrt.serving.fast_json.BodyScan` for a ``:predict`` body of ``size`` bytes
    to ``signature``'s model, when the fast path can take it (one float32 input, a big body),
    else ``None``."""
    if _float32_input(signature) is None:
        return None
    return fast_json.BodyScan.start(size)


def _float32_input(signature: ServingSignature) -> TensorInfo | None:
    """The input of a one-input float32 signature (the only kind :mod:`fast_json` parses),
    else ``None``."""
    if len(signature.inputs) != 1 or signature.inputs[0].dtype != np.float32:
        return None
    return signature.inputs[0]


def decode_predict_request(body: bytes | bytearray, signature: ServingSignature,
                           scanned: fast_json.BodyScan | None = None) -> PredictRequest:
    """Parse and validate a ``:predict`` body against ``signature``.

    ``scanned``: the :func:`body_scan` that received ``body``, whose result is used instead of
    scanning ``body`` again (the same array or ``None``).

    Raises:
        ServingError: ``INVALID_ARGUMENT`` for a malformed body or a mismatch with the signature.
    """
    fast = _fast_path(body, signature, scanned)
    if fast is not None:
        return fast
    request = parse_json_body(body)
    if not isinstance(request, dict):
        raise invalid("the request body must be a JSON object")
    for key in request:
        if key not in _REQUEST_KEYS:
            raise invalid(f"unknown key '{key}' in the request (expected 'signature_name' and "
                          "one of 'instances' or 'inputs')")
    name = request.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(name, str):
        raise invalid("'signature_name' must be a string")
    if name not in ("", DEFAULT_SIGNATURE):
        raise invalid(f'Serving signature name: "{name}" not found in signature def')
    if "instances" in request and "inputs" in request:
        raise invalid("Not both 'inputs' and 'instances' can be set")
    if "instances" in request:
        return PredictRequest(ROW, _decode_rows(request["instances"], signature))
    if "inputs" in request:
        return PredictRequest(COLUMNAR, _decode_columns(request["inputs"], signature))
    raise invalid("Missing 'inputs' or 'instances' key")


def _fast_path(body: bytes | bytearray, signature: ServingSignature,
               scanned: fast_json.BodyScan | None) -> PredictRequest | None:
    """A big float32 tensor for a one-input model, parsed by :mod:`~pytfrt.serving.fast_json`.

    Gives the same result as the general path or ``None`` (then the general path runs).
    """
    info = _float32_input(signature)
    if info is None or len(body) < fast_json.MIN_BYTES:
        return None
    parsed = scanned.result() if scanned is not None else fast_json.parse_float32_tensor(
        bytes(body) if isinstance(body, bytearray) else body)
    if parsed is None:
        return None
    key, array = parsed
    if key == "instances" and (array.ndim == 0 or array.shape[0] == 0):
        return None  # the general path reports it
    check_shape(array, info)
    return PredictRequest(ROW if key == "instances" else COLUMNAR, {info.name: array})


def _is_b64(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and "b64" in value


def check_names(given: dict[str, Any], signature: ServingSignature, where: str) -> None:
    """Check that ``given`` names exactly ``signature``'s inputs (``where`` names the part of the
    request in the error).

    Raises:
        ServingError: ``INVALID_ARGUMENT`` for an unknown or a missing input.
    """
    expected = signature.input_names
    for key in given:
        if key not in expected:
            raise invalid(f"{where} names unknown input '{key}' (the model's inputs: "
                          f"{', '.join(expected)})")
    for key in expected:
        if key not in given:
            raise invalid(f"{where} is missing input '{key}'")


def _decode_rows(instances: Any, signature: ServingSignature) -> dict[str, np.ndarray]:
    if not isinstance(instances, list):
        raise invalid("'instances' must be a list with one entry per batch row")
    if not instances:
        raise invalid("'instances' is empty")
    named = [isinstance(i, dict) and not _is_b64(i) for i in instances]
    if any(named) and not all(named):
        raise invalid("'instances' mixes objects and plain values")
    if not named[0]:
        return _single_input(instances, signature, "each instance")
    for row, instance in enumerate(instances):
        check_names(instance, signature, f"instance {row}")
    return {info.name: to_array([inst[info.name] for inst in instances], info)
            for info in signature.inputs}


def _decode_columns(inputs: Any, signature: ServingSignature) -> dict[str, np.ndarray]:
    if isinstance(inputs, dict) and not _is_b64(inputs):
        check_names(inputs, signature, "'inputs'")
        return {info.name: to_array(inputs[info.name], info) for info in signature.inputs}
    return _single_input(inputs, signature, "'inputs'")


def _single_input(value: Any, signature: ServingSignature, what: str) -> dict[str, np.ndarray]:
    """``value`` as the model's only input; ``what`` names it in the error if it has several."""
    if len(signature.inputs) != 1:
        raise invalid(f"the model has {len(signature.inputs)} inputs "
                      f"({', '.join(signature.input_names)}): {what} must be an object "
                      "naming them")
    info = signature.inputs[0]
    return {info.name: to_array(value, info)}


def to_array(value: Any, info: TensorInfo) -> np.ndarray:
    """Convert a JSON value to an array of ``info``'s dtype and check it against ``info``'s shape.

    Raises:
        ServingError: ``INVALID_ARGUMENT`` naming the input.
    """
    if info.dtype.kind == "O":
        array = _string_array(value, info.name)
    else:
        array = _numeric_array(value, info)
    check_shape(array, info)
    return array


def check_shape(array: np.ndarray, info: TensorInfo) -> None:
    """Raises ``INVALID_ARGUMENT`` if ``array``'s shape does not fit ``info``'s."""
    if info.shape is None:
        return
    fits = len(array.shape) == len(info.shape) and all(
        want is None or want == got for want, got in zip(info.shape, array.shape, strict=True)
    )
    if not fits:
        got = "[" + ",".join(str(d) for d in array.shape) + "]"
        raise invalid(f"input '{info.name}' expects shape {info.shape_str()}, got {got}")


def _nesting(value: Any) -> int:
    """How deep ``value``'s first elements nest lists (the rank it claims)."""
    depth = 0
    while isinstance(value, list) and depth <= MAX_TENSOR_RANK:
        depth += 1
        value = value[0] if value else None
    return depth


def _check_rank(value: Any, name: str) -> None:
    if _nesting(value) > MAX_TENSOR_RANK:
        raise invalid(f"input '{name}' nests lists deeper than {MAX_TENSOR_RANK} levels "
                      f"(a tensor has at most {MAX_TENSOR_RANK} dimensions)")


def _numeric_array(value: Any, info: TensorInfo) -> np.ndarray:
    _check_rank(value, info.name)
    try:
        raw = np.asarray(value)
    except ValueError:
        raise invalid(f"input '{info.name}': ragged nested lists (every row of a tensor must "
                      "have the same length)") from None
    target = info.dtype
    if raw.size == 0:
        return raw.astype(target)
    kind = raw.dtype.kind
    want = info.tf_dtype
    if target.kind == "b":
        if kind != "b":
            raise invalid(
                f"input '{info.name}' expects {want} (true/false), got {_kind_name(kind)}"
            )
        return raw
    if target.kind in "iu":
        if kind not in "iu":
            raise invalid(f"input '{info.name}' expects {want} (integers), got {_kind_name(kind)}")
        limits = np.iinfo(target)
        if int(raw.min()) < limits.min or int(raw.max()) > limits.max:
            raise invalid(f"input '{info.name}': a value is out of range for {want}")
        return raw.astype(target, copy=False)
    if kind not in _FLOAT_SOURCE_KINDS:
        raise invalid(f"input '{info.name}' expects {want} (numbers), got {_kind_name(kind)}")
    return raw.astype(target, copy=False)


def _kind_name(kind: str) -> str:
    return {
        "b": "booleans",
        "f": "fractional numbers",
        "i": "integers",
        "u": "integers",
        "U": "strings",
        "O": "objects or mixed values",
    }.get(kind, f"values of kind {kind!r}")


def _string_array(value: Any, name: str) -> np.ndarray:
    _check_rank(value, name)  # bounds walk()'s recursion below
    shape: list[int] = []
    probe = value
    while isinstance(probe, list):  # the shape the first element at each depth implies
        shape.append(len(probe))
        if not probe:
            break
        probe = probe[0]
    flat: list[bytes] = []

    def walk(item: Any, depth: int) -> None:
        if depth < len(shape):
            if not isinstance(item, list) or len(item) != shape[depth]:
                raise invalid(f"input '{name}': ragged nested lists (every row of a tensor must "
                              "have the same length)")
            for sub in item:
                walk(sub, depth + 1)
        elif isinstance(item, list):
            raise invalid(f"input '{name}': ragged nested lists (every row of a tensor must "
                          "have the same length)")
        else:
            flat.append(_to_bytes(item, name))

    walk(value, 0)
    array = np.empty(len(flat), dtype=object)
    array[:] = flat
    return array.reshape(shape)


def _to_bytes(item: Any, name: str) -> bytes:
    if isinstance(item, str):
        return item.encode("utf-8")
    if _is_b64(item) and isinstance(item["b64"], str):
        try:
            return base64.b64decode(item["b64"], validate=True)
        except (binascii.Error, ValueError):
            raise invalid(f"input '{name}': invalid base64 in a {{\"b64\": ...}} value") from None
    raise invalid(f"input '{name}' expects DT_STRING (strings or {{\"b64\": ...}}), "
                  f"got {type(item).__name__}")


def check_tensor_inputs(inputs: dict[str, np.ndarray], signature: ServingSignature,
                        where: str) -> None:
    """Check arrays decoded from a binary tensor format (gRPC, the v2 protocol) against
    ``signature``: every input present and known, of the input's dtype and shape.

    Raises:
        ServingError: ``INVALID_ARGUMENT`` naming the input.
    """
    check_names(inputs, signature, where)
    for info in signature.inputs:
        array = inputs[info.name]
        if array.dtype != info.dtype:
            got = TensorInfo.of(info.name, array.dtype, None).tf_dtype
            raise invalid(f"input '{info.name}' expects {info.tf_dtype}, got {got}")
        check_shape(array, info)


# -- response -----------------------------------------------------------------------------------


def encode_predict_response(fmt: str, outputs: dict[str, np.ndarray]) -> bytes:
    """The response body for ``outputs`` (name -> array, in signature order) in format ``fmt``.

    Raises:
        ServingError: for a row-format request whose outputs do not share their 0-th
            dimension (``INVALID_ARGUMENT``), or a non-UTF-8 string output whose name does not
            end in ``_bytes`` (``INTERNAL``).
    """
    if len(outputs) == 1:
        (array,) = outputs.values()
        fast = fast_json.dumps_float32(np.asarray(array))  # json.dumps's bytes, faster
        if fast is not None:
            return (b'{"outputs":' if fmt == COLUMNAR else b'{"predictions":') + fast + b"}\n"
    if fmt == COLUMNAR:
        if len(outputs) == 1:
            ((name, array),) = outputs.items()
            body: dict[str, Any] = {"outputs": _to_json(array, name)}
        else:
            body = {"outputs": {name: _to_json(a, name) for name, a in outputs.items()}}
    elif len(outputs) == 1:
        ((name, array),) = outputs.items()
        body = {"predictions": _to_json(array, name)}
    else:
        sizes = {name: (a.shape[0] if a.ndim else None) for name, a in outputs.items()}
        if None in sizes.values() or len(set(sizes.values())) != 1:
            detail = ", ".join(f"{n}: {s}" for n, s in sizes.items())
            raise invalid("the outputs do not share their 0-th dimension, so they cannot be "
                          f"returned as rows ({detail}); use the columnar 'inputs' format")
        columns = {name: _to_json(a, name) for name, a in outputs.items()}
        rows = next(iter(sizes.values()))
        assert rows is not None
        body = {"predictions": [{name: col[i] for name, col in columns.items()}
                                for i in range(rows)]}
    return json.dumps(body, separators=(",", ":")).encode("utf-8") + b"\n"


def _to_json(array: np.ndarray, name: str) -> Any:
    array = np.asarray(array)
    if array.dtype.kind == "O" or array.dtype.kind == "S":
        as_b64 = name.endswith("_bytes")
        return _strings_to_json(array.tolist(), name, as_b64)
    if array.dtype.kind in "fc" and array.dtype.itemsize < 4 or array.dtype.kind == "V":
        array = array.astype(np.float32)  # float16 / bfloat16: print through float32
    return array.tolist()


def _strings_to_json(item: Any, name: str, as_b64: bool) -> Any:
    if isinstance(item, list):
        return [_strings_to_json(sub, name, as_b64) for sub in item]
    if isinstance(item, str):
        item = item.encode("utf-8")
    if not isinstance(item, bytes):
        raise ServingError(f"output '{name}' holds {type(item).__name__}, not strings",
                           ErrorCode.INTERNAL)
    if as_b64:
        return {"b64": base64.b64encode(item).decode("ascii")}
    try:
        return item.decode("utf-8")
    except UnicodeDecodeError:
        raise ServingError(f"output '{name}' holds bytes that are not UTF-8 (name the output "
                           "with a '_bytes' suffix to receive them as base64)",
                           ErrorCode.INTERNAL) from None
