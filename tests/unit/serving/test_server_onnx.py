"""The REST API end to end: a real ``pytfrt serve --backend=onnxruntime`` and a real HTTP client.

One server per module.  Expected outputs come from the same ONNX model run directly in ONNX
Runtime; every error case of the API is checked for its status code and ``{"error": ...}``
body, and the server is checked to still answer afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from serving_helpers import OnnxMLP, ServerProcess, metric_value, ort_run

MAX_BYTES = 4096


@pytest.fixture(scope="module")
def server(onnx_mlp: OnnxMLP, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        "--backend=onnxruntime", "--model_name=mlp", f"--model_base_path={onnx_mlp.base}",
        f"--max_request_bytes={MAX_BYTES}", "--file_system_poll_wait_seconds=0",
        log_dir=tmp_path_factory.mktemp("logs"),
    ).start()
    yield proc
    assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def _x(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 8)).astype(np.float32)


def test_row_format_matches_onnxruntime(client: httpx.Client, onnx_mlp: OnnxMLP) -> None:
    x = _x(3)
    r = client.post("/v1/models/mlp:predict", json={"instances": x.tolist()})
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["predictions"]
    np.testing.assert_allclose(np.array(body["predictions"]), ort_run(onnx_mlp.path, x),
                               rtol=1e-6, atol=1e-6)


def test_row_format_with_named_instances(client: httpx.Client, onnx_mlp: OnnxMLP) -> None:
    x = _x(2, seed=1)
    instances = [{"x": row} for row in x.tolist()]
    r = client.post("/v1/models/mlp:predict", json={"instances": instances})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["predictions"]), ort_run(onnx_mlp.path, x),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("named", [False, True])
def test_columnar_format_matches_onnxruntime(client: httpx.Client, onnx_mlp: OnnxMLP,
                                             named: bool) -> None:
    x = _x(5, seed=2)
    inputs = {"x": x.tolist()} if named else x.tolist()
    r = client.post("/v1/models/mlp/versions/1:predict", json={"inputs": inputs})
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["outputs"]
    np.testing.assert_allclose(np.array(body["outputs"]), ort_run(onnx_mlp.path, x),
                               rtol=1e-6, atol=1e-6)


def test_model_status(client: httpx.Client) -> None:
    for path in ("/v1/models/mlp", "/v1/models/mlp/versions/1"):
        r = client.get(path)
        assert r.status_code == 200
        assert r.json() == {"model_version_status": [{
            "version": "1", "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""},
        }]}


def test_metadata_is_the_signature_def(client: httpx.Client) -> None:
    r = client.get("/v1/models/mlp/metadata")
    assert r.status_code == 200
    body = r.json()
    assert body["model_spec"] == {"name": "mlp", "signature_name": "", "version": "1"}
    sig = body["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert sig["method_name"] == "tensorflow/serving/predict"
    x = sig["inputs"]["x"]
    assert x["dtype"] == "DT_FLOAT"
    assert [d["size"] for d in x["tensor_shape"]["dim"]] == ["-1", "8"]
    assert [d["size"] for d in sig["outputs"]["y"]["tensor_shape"]["dim"]] == ["-1", "4"]


ERROR_CASES = [
    # (method, path, body, status, words in the message)
    ("POST", "/v1/models/mlp:predict", b'{"instances": [[1, 2', 400, "JSON Parse error"),
    ("POST", "/v1/models/mlp:predict", b"[1, 2]", 400, "JSON object"),
    ("POST", "/v1/models/mlp:predict", b"{}", 400, "Missing 'inputs' or 'instances'"),
    ("POST", "/v1/models/mlp:predict", b'{"inputs": [[1]], "instances": [[1]]}', 400,
     "Not both"),
    ("POST", "/v1/models/mlp:predict", b'{"instances": [[1, 2, 3]]}', 400,
     "expects shape [?,8], got [1,3]"),
    ("POST", "/v1/models/mlp:predict", b'{"instances": [[1, 2, 3, 4, 5, 6, 7, 8], [1]]}', 400,
     "ragged"),
    ("POST", "/v1/models/mlp:predict", b'{"instances": [["a", "b", "c", "d", "e", "f", "g", '
     b'"h"]]}', 400, "expects DT_FLOAT"),
    ("POST", "/v1/models/mlp:predict", b'{"inputs": {"z": [[1, 2, 3, 4, 5, 6, 7, 8]]}}', 400,
     "unknown input 'z'"),
    ("POST", "/v1/models/mlp:predict", b'{"signature_name": "other", "inputs": [[1]]}', 400,
     "not found in signature def"),
    ("POST", "/v1/models/nope:predict", b'{"instances": [[1]]}', 404,
     "Servable not found for request: Latest(nope)"),
    ("POST", "/v1/models/mlp/versions/7:predict", b'{"instances": [[1]]}', 404,
     "Specific(mlp, 7)"),
    ("POST", "/v1/models/mlp/versions/x:predict", b"{}", 400, "Failed to convert version"),
    ("POST", "/v1/models/mlp/labels/stable:predict", b"{}", 400, "Unrecognized"),
    ("GET", "/v1/models/nope", None, 404, "Could not find any versions of model nope"),
    ("GET", "/v1/models/mlp/versions/9", None, 404, "Could not find version 9"),
    ("GET", "/v1/models/nope/metadata", None, 404, "Servable not found"),
    ("POST", "/v1/models/mlp:classify", b"{}", 501, "not supported"),
    ("GET", "/v1/models/mlp:predict", None, 400, "Malformed request"),
    ("PUT", "/v1/models/mlp", b"{}", 400, "Malformed request"),
    ("POST", "/v1/models/mlp:predict", b"{" + b" " * MAX_BYTES + b"}", 413, "exceeds the limit"),
]


@pytest.mark.parametrize("method,path,body,status,words", ERROR_CASES,
                         ids=[f"{c[3]}-{c[4][:24]}" for c in ERROR_CASES])
def test_errors_are_json_with_tf_serving_status(client: httpx.Client, method: str, path: str,
                                                body: bytes | None, status: int,
                                                words: str) -> None:
    r = client.request(method, path, content=body)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    payload = r.json()
    assert list(payload) == ["error"]
    assert words in payload["error"]
    assert "Traceback" not in r.text
    # The server is still up and serving.
    assert client.get("/v1/models/mlp").status_code == 200


def test_oversized_chunked_body_is_refused(client: httpx.Client) -> None:
    # No Content-Length: the limit is enforced while reading.
    def chunks() -> Iterator[bytes]:
        yield b'{"instances": ['
        for _ in range(MAX_BYTES // 8):
            yield b"1.0,1.0,"
        yield b"1.0]}"

    r = client.post("/v1/models/mlp:predict", content=chunks())
    assert r.status_code == 413
    assert "exceeds the limit" in r.json()["error"]


def test_nan_and_infinity_are_accepted(client: httpx.Client, onnx_mlp: OnnxMLP) -> None:
    x = _x(1, seed=3)
    x[0, 0] = np.inf
    body = json.dumps({"instances": x.tolist()})  # writes Infinity, as TF Serving accepts
    assert "Infinity" in body
    r = client.post("/v1/models/mlp:predict", content=body)
    assert r.status_code == 200, r.text
    expected = ort_run(onnx_mlp.path, x)
    got = np.array(json.loads(r.text)["predictions"], dtype=np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_metrics_count_requests_by_status(server: ServerProcess, client: httpx.Client) -> None:
    before = server.metrics()
    ok = metric_value(before, ":tensorflow:serving:request_count", model_name="mlp", status="OK")
    bad = metric_value(before, ":tensorflow:serving:request_count", model_name="mlp",
                       status="INVALID_ARGUMENT")
    assert client.post("/v1/models/mlp:predict", json={"instances": _x(1).tolist()}).is_success
    assert client.post("/v1/models/mlp:predict", content=b"{").status_code == 400
    after = server.metrics()
    assert metric_value(after, ":tensorflow:serving:request_count", model_name="mlp",
                        status="OK") == ok + 1
    assert metric_value(after, ":tensorflow:serving:request_count", model_name="mlp",
                        status="INVALID_ARGUMENT") == bad + 1
    assert metric_value(after, ":tensorflow:serving:request_latency_count", model_name="mlp",
                        API="predict", entrypoint="REST") >= ok + 2
    assert "# TYPE :tensorflow:serving:request_latency histogram" in after
    assert metric_value(after, "process_resident_memory_bytes") > 0


def test_unknown_model_names_share_one_metrics_label(server: ServerProcess,
                                                    client: httpx.Client) -> None:
    for i in range(3):
        assert client.post(f"/v1/models/random{i}:predict", content=b"{}").status_code == 404
    text = server.metrics()
    assert "random" not in text
    assert metric_value(text, ":tensorflow:serving:request_count", model_name="",
                        status="NOT_FOUND") >= 3


def test_unknown_path_outside_the_api(client: httpx.Client) -> None:
    r = client.get("/index.html")
    assert r.status_code == 404
    assert "error" in r.json()


def test_base_path_of_the_test_model(onnx_mlp: OnnxMLP) -> None:
    assert isinstance(onnx_mlp.base, Path) and (onnx_mlp.base / "1" / "model.onnx").is_file()


def test_big_bodies_parsed_while_they_arrive(server_factory: Any, onnx_mlp: OnnxMLP) -> None:
    # Bodies over 256 KiB for a one-float32-input model are scanned in pieces as they arrive
    # (fast_json.BodyScan): the answers and the errors are those of the general path.
    server = server_factory("--backend=onnxruntime", "--model_name=mlp",
                            f"--model_base_path={onnx_mlp.base}",
                            "--file_system_poll_wait_seconds=0")
    x = _x(3000, seed=5)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        for key in ("instances", "inputs"):
            body = json.dumps({key: x.tolist()})
            assert len(body) > 256 * 1024
            r = c.post("/v1/models/mlp:predict", content=body)
            assert r.status_code == 200, r.text
            got = np.array(r.json()["predictions" if key == "instances" else "outputs"],
                           dtype=np.float32)
            np.testing.assert_allclose(got, ort_run(onnx_mlp.path, x), rtol=1e-6, atol=1e-6)
        ragged = json.dumps({"instances": x.tolist() + [[1.0]]})
        r = c.post("/v1/models/mlp:predict", content=ragged)
        assert r.status_code == 400 and "ragged" in r.json()["error"]
        wide = json.dumps({"instances": np.zeros((2000, 9), np.float32).tolist()})
        r = c.post("/v1/models/mlp:predict", content=wide)
        assert r.status_code == 400
        assert r.json()["error"] == "input 'x' expects shape [?,8], got [2000,9]"
        broken = json.dumps({"instances": x.tolist()})[:-40] + "}"
        r = c.post("/v1/models/mlp:predict", content=broken)
        assert r.status_code == 400 and r.json()["error"].startswith("JSON Parse error")
        r = c.post("/v1/models/nope:predict", content=body)
        assert r.status_code == 404
        assert c.get("/v1/models/mlp").status_code == 200
