"""``pytfrt serve --backend=tensorflow``: SavedModels in TensorFlow behind the same REST API.

One server per module serving three models from a ``--model_config_file``: the Keras MLP, a
string model (``{"b64": ...}`` in and out) and a two-input, two-output model (row format with
named instances, both response shapes).  Oracles: the models run directly in TensorFlow.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from serving_helpers import KerasMLP, ServerProcess

# The first test waits for a server that imports TensorFlow.
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(keras_mlp: KerasMLP, string_model: Path, two_input_model: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("tf_server")
    config = work / "models.config"
    config.write_text(f"""
        # three models, one server
        model_config_list {{
          config {{ name: "mlp" base_path: "{keras_mlp.base}" model_platform: "tensorflow" }}
          config {{ name: 'strings' base_path: '{string_model}' }}
          config {{
            name: "pair"
            base_path: "{two_input_model}"
            model_version_policy {{ latest {{ num_versions: 1 }} }}
            version_labels {{ key: "stable" value: 1 }}
          }}
        }}
    """)
    proc = ServerProcess("--backend=tensorflow", f"--model_config_file={config}",
                         "--file_system_poll_wait_seconds=0", log_dir=work).start()
    yield proc
    assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def test_keras_mlp_both_formats(client: httpx.Client, keras_mlp: KerasMLP) -> None:
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    expected = np.asarray(keras_mlp.oracles[1](x))
    rows = client.post("/v1/models/mlp:predict", json={"instances": x.tolist()})
    cols = client.post("/v1/models/mlp:predict", json={"inputs": {"x": x.tolist()}})
    assert rows.status_code == 200 and cols.status_code == 200, (rows.text, cols.text)
    np.testing.assert_allclose(np.array(rows.json()["predictions"]), expected, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.array(cols.json()["outputs"]), expected, rtol=1e-5, atol=1e-6)


def test_metadata_of_a_savedmodel(client: httpx.Client) -> None:
    sig = client.get("/v1/models/mlp/versions/1/metadata").json()[
        "metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert list(sig["inputs"]) == ["x"]
    assert list(sig["outputs"]) == ["output_0"]
    assert [d["size"] for d in sig["outputs"]["output_0"]["tensor_shape"]["dim"]] == ["-1", "4"]


def test_b64_strings_in_and_out(client: httpx.Client, tf: Any) -> None:
    raw = [b"\x00\xffbinary", "héllo".encode(), b""]
    instances = [{"b64": base64.b64encode(b).decode()} for b in raw]
    r = client.post("/v1/models/strings:predict", json={"instances": instances})
    assert r.status_code == 200, r.text
    rows = r.json()["predictions"]
    assert [row["length"] for row in rows] == [int(n) for n in tf.strings.length(raw).numpy()]
    assert [base64.b64decode(row["echo_bytes"]["b64"]) for row in rows] == raw
    # Plain JSON strings are UTF-8 text.
    r = client.post("/v1/models/strings:predict", json={"inputs": {"text": ["abc", "é"]}})
    assert r.status_code == 200, r.text
    assert r.json()["outputs"]["length"] == [3, 2]


def test_strings_reject_numbers_and_bad_base64(client: httpx.Client) -> None:
    r = client.post("/v1/models/strings:predict", json={"instances": [1, 2]})
    assert r.status_code == 400 and "DT_STRING" in r.json()["error"]
    r = client.post("/v1/models/strings:predict", json={"instances": [{"b64": "%%%"}]})
    assert r.status_code == 400 and "base64" in r.json()["error"]


def test_two_inputs_named_instances_and_columns(client: httpx.Client) -> None:
    a = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    b = [10, 20]
    sums = (np.array(a) + np.array(b)[:, None]).tolist()
    rows = client.post("/v1/models/pair/labels/stable:predict",
                       json={"instances": [{"a": a[0], "b": b[0]}, {"a": a[1], "b": b[1]}]})
    assert rows.status_code == 200, rows.text
    assert rows.json() == {"predictions": [
        {"sum": sums[0], "scale": 20}, {"sum": sums[1], "scale": 40}]}
    cols = client.post("/v1/models/pair:predict", json={"inputs": {"a": a, "b": b}})
    assert cols.json() == {"outputs": {"sum": sums, "scale": [20, 40]}}


@pytest.mark.parametrize("body,words", [
    ({"instances": [[1, 2, 3]]}, "each instance must be an object"),
    ({"instances": [{"a": [1.0, 2.0, 3.0]}]}, "instance 0 is missing input 'b'"),
    ({"inputs": {"a": [[1.0, 2.0, 3.0]], "b": [1.5]}}, "expects DT_INT32 (integers)"),
    ({"inputs": {"a": [[1.0, 2.0, 3.0]], "b": [2**40]}}, "out of range for DT_INT32"),
    ({"inputs": {"a": [[True, False, True]], "b": [1]}}, "expects DT_FLOAT"),
])
def test_two_inputs_dtype_and_name_errors(client: httpx.Client, body: dict[str, Any],
                                          words: str) -> None:
    r = client.post("/v1/models/pair:predict", json=body)
    assert r.status_code == 400, r.text
    assert words in r.json()["error"]


def test_tensorflow_backend_refuses_onnx(onnx_mlp: Any, server_factory: Any) -> None:
    # The version fails to load; the server runs and reports the failure in the status API.
    server = server_factory("--backend=tensorflow", "--model_name=m",
                            f"--model_base_path={onnx_mlp.base}",
                            "--file_system_poll_wait_seconds=0")
    status = httpx.get(f"{server.url}/v1/models/m", timeout=30).json()["model_version_status"]
    assert status[0]["state"] == "END"
    assert "serves SavedModels only" in status[0]["status"]["error_message"]
    r = httpx.post(f"{server.url}/v1/models/m:predict", json={"instances": [[0] * 8]}, timeout=30)
    assert r.status_code == 404
