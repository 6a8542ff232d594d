"""The Open Inference Protocol (v2) driven by Triton's own clients (``tritonclient.http`` and
``tritonclient.grpc``), on the session's ``served`` server (``conftest.py``).

Oracles: ONNX Runtime run directly on the served ONNX MLP; Triton's own BYTES serialization
(``tritonclient.utils``) for the binary tensor format; raw HTTP (httpx) for the JSON forms.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from serving_helpers import ort_run

http_client = pytest.importorskip("tritonclient.http")
grpc_client = pytest.importorskip("tritonclient.grpc")
triton_utils = pytest.importorskip("tritonclient.utils")


def _x(seed: int, rows: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def clients(served: dict[str, Any]) -> Any:
    rest = http_client.InferenceServerClient(urlparse(served["server"].url).netloc)
    grpc = grpc_client.InferenceServerClient(served["server"].grpc_target)
    yield rest, grpc
    rest.close()
    grpc.close()


def test_health_and_metadata(clients: Any) -> None:
    rest, grpc = clients
    assert rest.is_server_live() and grpc.is_server_live()
    # "broken" has no version served, so the server is not ready; "mlp" is.
    assert not rest.is_server_ready() and not grpc.is_server_ready()
    assert rest.is_model_ready("mlp") and grpc.is_model_ready("mlp")
    assert rest.is_model_ready("mlp", "1") and not rest.is_model_ready("mlp", "2")
    assert not rest.is_model_ready("broken") and not grpc.is_model_ready("broken")
    assert rest.get_server_metadata()["extensions"] == ["binary_tensor_data"]
    meta = rest.get_model_metadata("mlp")
    assert meta["versions"] == ["1"]
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 8]}]
    assert meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}]
    grpc_meta = grpc.get_model_metadata("mlp", as_json=True)
    assert grpc_meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": ["-1", "8"]}]


@pytest.mark.parametrize("binary_in", [True, False])
@pytest.mark.parametrize("binary_out", [True, False, None])
def test_rest_infer_matches_onnx_runtime(clients: Any, served: dict[str, Any], binary_in: bool,
                                         binary_out: bool | None) -> None:
    rest, _ = clients
    x = _x(5)
    given_input = http_client.InferInput("x", list(x.shape), "FP32")
    given_input.set_data_from_numpy(x, binary_data=binary_in)
    outputs = (None if binary_out is None
               else [http_client.InferRequestedOutput("y", binary_data=binary_out)])
    result = rest.infer("mlp", [given_input], outputs=outputs, request_id="r-1")
    np.testing.assert_allclose(result.as_numpy("y"), ort_run(served["mlp"], x),
                               rtol=1e-6, atol=1e-6)
    response = result.get_response()
    assert (response["model_name"], response["model_version"], response["id"]) == \
        ("mlp", "1", "r-1")


def test_grpc_infer_matches_onnx_runtime(clients: Any, served: dict[str, Any]) -> None:
    _, grpc = clients
    x = _x(6, rows=3)
    given_input = grpc_client.InferInput("x", list(x.shape), "FP32")
    given_input.set_data_from_numpy(x)
    result = grpc.infer("mlp", [given_input], model_version="1",
                        outputs=[grpc_client.InferRequestedOutput("y")])
    np.testing.assert_allclose(result.as_numpy("y"), ort_run(served["mlp"], x),
                               rtol=1e-6, atol=1e-6)
    assert result.get_response().model_version == "1"


def test_json_tensors_nested_and_flat(served: dict[str, Any]) -> None:
    x = _x(7)
    url = f"{served['server'].url}/v2/models/mlp/infer"
    for data in (x.tolist(), x.reshape(-1).tolist()):
        body = {"inputs": [{"name": "x", "shape": [2, 8], "datatype": "FP32", "data": data}]}
        response = httpx.post(url, json=body, timeout=30)
        assert response.status_code == 200, response.text
        (out,) = response.json()["outputs"]
        assert (out["name"], out["datatype"], out["shape"]) == ("y", "FP32", [2, 4])
        np.testing.assert_allclose(np.array(out["data"], np.float32).reshape(2, 4),
                                   ort_run(served["mlp"], x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["datatype", "shape", "count", "name", "output", "model",
                                  "version", "binary_size", "header", "json"])
def test_bad_requests_are_clear_errors(served: dict[str, Any], case: str) -> None:
    x = _x(8)
    entry: dict[str, Any] = {"name": "x", "shape": [2, 8], "datatype": "FP32",
                             "data": x.reshape(-1).tolist()}
    body: Any = {"inputs": [entry]}
    path, headers, status = "/v2/models/mlp/infer", {}, 400
    content: bytes | None = None
    if case == "datatype":
        entry["datatype"] = "FP64"
        want = "input 'x' expects FP32, got FP64"
    elif case == "shape":
        entry["shape"], entry["data"] = [2, 3], x[:, :3].reshape(-1).tolist()
        want = "expects shape [?,8]"
    elif case == "count":
        entry["shape"] = [3, 8]
        want = "16 values for shape [3, 8]"
    elif case == "name":
        entry["name"] = "w"
        want = "unknown input 'w'"
    elif case == "output":
        body["outputs"] = [{"name": "z"}]
        want = "unknown output 'z'"
    elif case == "model":
        path, status, want = "/v2/models/nope/infer", 404, "Latest(nope)"
    elif case == "version":
        path, want = "/v2/models/mlp/versions/%C2%B2/infer", "Failed to convert version"
    elif case == "binary_size":
        del entry["data"]
        entry["parameters"] = {"binary_data_size": 64}
        header = json.dumps(body).encode()
        content = header + x.tobytes()[:32]
        headers = {"Inference-Header-Content-Length": str(len(header))}
        want = "binary_data_size 64 does not fit the 32 bytes"
    elif case == "header":
        content = json.dumps(body).encode()
        headers = {"Inference-Header-Content-Length": str(len(content) + 1)}
        want = "is not within the body"
    else:
        content, want = b'{"inputs": [', "JSON Parse error"
    response = httpx.post(f"{served['server'].url}{path}", headers=headers, timeout=30,
                          **({"content": content} if content is not None else {"json": body}))
    assert response.status_code == status, response.text
    assert want in response.json()["error"]


def test_triton_client_errors_carry_the_message(clients: Any) -> None:
    rest, grpc = clients
    x = _x(9).astype(np.float64)
    for module, client in ((http_client, rest), (grpc_client, grpc)):
        given_input = module.InferInput("x", list(x.shape), "FP64")
        given_input.set_data_from_numpy(x)
        with pytest.raises(triton_utils.InferenceServerException, match="expects FP32"):
            client.infer("mlp", [given_input])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=20), max_size=6))
def test_bytes_tensors_use_tritons_serialization(items: list[bytes]) -> None:
    from pytfrt.serving import v2

    array = np.array(items, dtype=object).reshape(len(items))
    if len(items) == 0:
        array = np.empty(0, dtype=object)
    theirs = triton_utils.serialize_byte_tensor(array)  # a 0-d object array of the bytes
    theirs_bytes = theirs.item() if theirs is not None and theirs.size else b""
    assert v2.encode_raw(array) == theirs_bytes
    if items:
        assert triton_utils.deserialize_bytes_tensor(v2.encode_raw(array)).tolist() == items
    decoded = v2.decode_raw(theirs_bytes, np.dtype(object), (len(items),), "s")
    assert decoded.tolist() == items
    if items:
        with pytest.raises(Exception, match="binary data ends inside element"):
            v2.decode_raw(theirs_bytes[:-1] if items[-1] else theirs_bytes[:-4], np.dtype(object),
                          (len(items),), "s")
