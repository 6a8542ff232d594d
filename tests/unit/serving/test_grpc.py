"""The gRPC API driven by TensorFlow Serving's own Python client (``tensorflow-serving-api``).

The session's ``served`` server (``conftest.py``: ``pytfrt serve --backend=onnxruntime`` with
``mlp``, ``broken`` -- a corrupted warm-up file -- and ``missing`` -- no base path).
Oracles: ONNX Runtime run directly on the same model; TensorFlow's ``make_tensor_proto`` /
``make_ndarray`` for the tensor codec.  Bad REST requests (versions, nesting) go to the same
server.
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from serving_helpers import ort_run, tf_serving_request

grpc = pytest.importorskip("grpc")
pytest.importorskip("tensorflow_serving.apis")


def _stubs(served: dict[str, Any]) -> tuple[Any, Any]:
    from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

    channel = served["channel"]
    return (prediction_service_pb2_grpc.PredictionServiceStub(channel),
            model_service_pb2_grpc.ModelServiceStub(channel))


def _x(seed: int, rows: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 8)).astype(np.float32)


def _error(call: Any, *args: Any) -> tuple[Any, str]:
    with pytest.raises(grpc.RpcError) as info:
        call(*args, timeout=30)
    return info.value.code(), info.value.details()


def test_predict_matches_onnx_runtime(tf: Any, served: dict[str, Any]) -> None:
    predict, _ = _stubs(served)
    x = _x(0)
    response = predict.Predict(tf_serving_request(tf, "mlp", x), timeout=30)
    assert response.model_spec.name == "mlp" and response.model_spec.version.value == 1
    assert list(response.outputs) == ["y"]
    np.testing.assert_allclose(tf.make_ndarray(response.outputs["y"]), ort_run(served["mlp"], x),
                               rtol=1e-6, atol=1e-6)


def test_typed_value_fields_and_one_value_filling_the_shape(tf: Any,
                                                            served: dict[str, Any]) -> None:
    predict, _ = _stubs(served)
    x = _x(1)
    request = tf_serving_request(tf, "mlp", x)
    typed = request.inputs["x"]
    typed.ClearField("tensor_content")
    typed.float_val.extend(x.reshape(-1).tolist())
    got = tf.make_ndarray(predict.Predict(request, timeout=30).outputs["y"])
    np.testing.assert_allclose(got, ort_run(served["mlp"], x), rtol=1e-6, atol=1e-6)
    filled = tf_serving_request(tf, "mlp", np.full((3, 8), 0.25, np.float32))
    filled.inputs["x"].ClearField("tensor_content")
    filled.inputs["x"].float_val.append(0.25)
    got = tf.make_ndarray(predict.Predict(filled, timeout=30).outputs["y"])
    np.testing.assert_allclose(got, ort_run(served["mlp"], np.full((3, 8), 0.25, np.float32)),
                               rtol=1e-6, atol=1e-6)


def test_versions_labels_and_output_filter(tf: Any, served: dict[str, Any]) -> None:
    predict, _ = _stubs(served)
    x = _x(2)
    by_label = predict.Predict(tf_serving_request(tf, "mlp", x, version_label="stable"), timeout=30)
    assert by_label.model_spec.version.value == 1
    filtered = tf_serving_request(tf, "mlp", x, version=1)
    filtered.output_filter.append("y")
    assert list(predict.Predict(filtered, timeout=30).outputs) == ["y"]
    filtered.output_filter.append("z")
    code, message = _error(predict.Predict, filtered)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "z" in message
    code, message = _error(predict.Predict, tf_serving_request(tf, "mlp", x, version=7))
    assert code == grpc.StatusCode.NOT_FOUND
    assert message == "Servable not found for request: Specific(mlp, 7)"
    code, message = _error(predict.Predict, tf_serving_request(tf, "nope", x))
    assert (code, message) == (grpc.StatusCode.NOT_FOUND,
                               "Servable not found for request: Latest(nope)")
    request = tf_serving_request(tf, "mlp", x, version_label="canary")
    code, message = _error(predict.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "canary" in message
    request = tf_serving_request(tf, "mlp", x, signature_name="other")
    code, message = _error(predict.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "other" in message


@pytest.mark.parametrize("bad", ["dtype", "shape", "name", "content"])
def test_bad_tensors_are_invalid_argument(tf: Any, served: dict[str, Any], bad: str) -> None:
    predict, _ = _stubs(served)
    x = _x(3)
    request = tf_serving_request(tf, "mlp", x)
    if bad == "dtype":
        request.inputs["x"].CopyFrom(tf.make_tensor_proto(x.astype(np.float64)))
    elif bad == "shape":
        request.inputs["x"].CopyFrom(tf.make_tensor_proto(x[:, :3]))
    elif bad == "name":
        request.inputs["w"].CopyFrom(request.inputs.pop("x"))
    else:
        request.inputs["x"].tensor_content = request.inputs["x"].tensor_content[:-4]
    code, message = _error(predict.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert {"dtype": "expects DT_FLOAT, got DT_DOUBLE", "shape": "expects shape [?,8]",
            "name": "unknown input 'w'", "content": "tensor_content holds"}[bad] in message


def test_metadata_and_status(served: dict[str, Any]) -> None:
    from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2

    predict, models = _stubs(served)
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = "mlp"
    request.metadata_field.append("signature_def")
    response = predict.GetModelMetadata(request, timeout=30)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(signatures)
    signature = signatures.signature_def["serving_default"]
    assert signature.method_name == "tensorflow/serving/predict"
    assert [d.size for d in signature.inputs["x"].tensor_shape.dim] == [-1, 8]
    assert [d.size for d in signature.outputs["y"].tensor_shape.dim] == [-1, 4]
    # The same as the REST metadata API says.
    rest = httpx.get(f"{served['server'].url}/v1/models/mlp/metadata", timeout=30).json()
    rest_sig = rest["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert rest_sig["inputs"]["x"]["dtype"] == "DT_FLOAT" == \
        signature.inputs["x"].DESCRIPTOR.fields_by_name["dtype"].enum_type.values_by_number[
            signature.inputs["x"].dtype].name

    status = get_model_status_pb2.GetModelStatusRequest()
    status.model_spec.name = "mlp"
    (version,) = models.GetModelStatus(status, timeout=30).model_version_status
    states = get_model_status_pb2.ModelVersionStatus
    assert (version.version, version.state) == (1, states.AVAILABLE)
    status.model_spec.name = "broken"
    (version,) = models.GetModelStatus(status, timeout=30).model_version_status
    assert version.state == states.END
    assert "warm-up failed" in version.status.error_message
    assert "record 0: bad data checksum" in version.status.error_message
    status.model_spec.name = "missing"
    code, message = _error(models.GetModelStatus, status)
    assert code == grpc.StatusCode.NOT_FOUND and "base path" in message and "missing" in message


def test_classify_and_regress_need_their_signatures(served: dict[str, Any]) -> None:
    from tensorflow_serving.apis import classification_pb2, regression_pb2

    predict, _ = _stubs(served)
    for call, request, kind in ((predict.Classify, classification_pb2.ClassificationRequest(),
                                 "classify"),
                                (predict.Regress, regression_pb2.RegressionRequest(), "regress")):
        request.model_spec.name = "mlp"
        code, message = _error(call, request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert f"tensorflow/serving/{kind}" in message
        request.model_spec.name = "nope"
        assert _error(call, request)[0] == grpc.StatusCode.NOT_FOUND


def test_warm_up_ran_and_start_up_logged_the_missing_base_path(served: dict[str, Any]) -> None:
    log = served["server"].log()
    assert "model 'mlp' version 1: warm-up replayed 3 request(s)" in log
    assert "model 'missing': its base path" in log and "does not exist" in log


# -- bad REST requests on the same server ---------------------------------------------------------


@pytest.mark.parametrize("version", ["%D9%A1", "%C2%B2", "1" * 5000, str(2**63), "-1", "1.0"])
def test_versions_are_ascii_digits_within_int64(served: dict[str, Any], version: str) -> None:
    url = f"{served['server'].url}/v1/models/mlp/versions/{version}"
    for response in (httpx.get(url, timeout=30),
                     httpx.post(url + ":predict", json={"instances": _x(4).tolist()}, timeout=30)):
        assert response.status_code == 400, response.text
        assert response.json()["error"].startswith("Failed to convert version: ")
    # ASCII digits within int64 are versions (9223372036854775807 is not served: 404).
    assert httpx.get(f"{served['server'].url}/v1/models/mlp/versions/{2**63 - 1}",
                     timeout=30).status_code == 404


@pytest.mark.parametrize("depth", [40, 2000, 100_000])
def test_deep_json_is_a_400(served: dict[str, Any], depth: int) -> None:
    body = '{"instances": ' + "[" * depth + "1.0" + "]" * depth + "}"
    response = httpx.post(f"{served['server'].url}/v1/models/mlp:predict", content=body,
                          timeout=60)
    assert response.status_code == 400, response.text
    assert "deeper" in response.json()["error"]
    assert "Traceback" not in served["server"].log()


# -- the TensorProto codec against TensorFlow's --------------------------------------------------

_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8,
           np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_DTYPES).flatmap(lambda dt: hnp.arrays(
    dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))),
       st.booleans())
def test_tensor_proto_codec_agrees_with_tensorflow(tf: Any, array: np.ndarray,
                                                  typed: bool) -> None:
    from pytfrt.serving import tensor_proto

    ours = tensor_proto.from_array(array)
    np.testing.assert_array_equal(tf.make_ndarray(
        tf.make_tensor_proto(array).__class__.FromString(ours.SerializeToString())), array)
    # TensorFlow's proto (tensor_content, or typed fields from a list) read by ours.
    theirs = (tf.make_tensor_proto(array.tolist(), dtype=tf.as_dtype(array.dtype),
                                   shape=array.shape) if typed and array.size
              else tf.make_tensor_proto(array))
    decoded = tensor_proto.to_array(type(ours).FromString(theirs.SerializeToString()), "x")
    assert decoded.dtype == array.dtype and decoded.shape == array.shape
    np.testing.assert_array_equal(decoded, array)


def test_string_tensors_round_trip(tf: Any) -> None:
    from pytfrt.serving import tensor_proto

    array = np.array([[b"a", b"\xff\x00"], [b"", "é".encode()]], dtype=object)
    ours = tensor_proto.from_array(array)
    back = tf.make_ndarray(tf.make_tensor_proto(b"").__class__.FromString(
        ours.SerializeToString()))
    assert back.tolist() == array.tolist()
    decoded = tensor_proto.to_array(
        type(ours).FromString(tf.make_tensor_proto(array).SerializeToString()), "s")
    assert decoded.tolist() == array.tolist()
