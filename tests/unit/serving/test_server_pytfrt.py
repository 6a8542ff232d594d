"""``pytfrt serve`` with the default backend: models compiled by pytfrt, run as CompiledModels.

One server per module serving a Keras SavedModel and an ONNX model, both compiled on load;
oracles: the Keras model and ONNX Runtime.  Then the compile cache: a second server on the same
cache directory loads the compiled models instead of compiling them again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from serving_helpers import KerasMLP, OnnxMLP, ServerProcess, ort_run

# The first test waits for TensorFlow to import and the compiler to run.
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("compile_cache")


@pytest.fixture(scope="module")
def config(keras_mlp: KerasMLP, onnx_mlp: OnnxMLP,
           tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pytfrt_config") / "models.config"
    path.write_text(f"""model_config_list {{
        config {{ name: "mlp" base_path: "{keras_mlp.base}" }}
        config {{ name: "mlp_onnx" base_path: "{onnx_mlp.base}" model_platform: "onnx" }}
    }}""")
    return path


@pytest.fixture(scope="module")
def server(config: Path, cache_dir: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(f"--model_config_file={config}", f"--compile_cache_dir={cache_dir}",
                         "--file_system_poll_wait_seconds=0",
                         log_dir=tmp_path_factory.mktemp("logs")).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def test_savedmodel_compiled_by_pytfrt_matches_keras(server: ServerProcess,
                                                     keras_mlp: KerasMLP) -> None:
    x = np.random.default_rng(7).standard_normal((3, 8)).astype(np.float32)
    for body, key in (({"instances": x.tolist()}, "predictions"),
                      ({"inputs": {"x": x.tolist()}}, "outputs")):
        r = httpx.post(f"{server.url}/v1/models/mlp:predict", json=body, timeout=60)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.array(r.json()[key]), np.asarray(keras_mlp.oracles[1](x)),
                                   rtol=1e-5, atol=1e-5)
    assert "compiled from tensorflow" in server.log()


def test_onnx_compiled_by_pytfrt_matches_onnxruntime(server: ServerProcess,
                                                     onnx_mlp: OnnxMLP) -> None:
    x = np.random.default_rng(8).standard_normal((2, 8)).astype(np.float32)
    r = httpx.post(f"{server.url}/v1/models/mlp_onnx:predict", json={"instances": x.tolist()},
                   timeout=60)
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["predictions"]), ort_run(onnx_mlp.path, x),
                               rtol=1e-5, atol=1e-5)


def test_pytfrt_metadata_and_input_errors(server: ServerProcess) -> None:
    meta = httpx.get(f"{server.url}/v1/models/mlp_onnx/metadata", timeout=30).json()
    sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert list(sig["inputs"]) == ["x"] and list(sig["outputs"]) == ["y"]
    r = httpx.post(f"{server.url}/v1/models/mlp:predict", json={"instances": [[1.0] * 7]},
                   timeout=30)
    assert r.status_code == 400 and "expects shape [?,8]" in r.json()["error"]


def test_a_second_server_loads_from_the_compile_cache(server: ServerProcess, config: Path,
                                                      cache_dir: Path,
                                                      server_factory: object) -> None:
    assert callable(server_factory)
    entries = [p for p in cache_dir.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 2, server.log()  # one compiled model per version served
    assert all((e / "model.bef").is_file() and (e / "manifest.json").is_file() for e in entries)
    second = server_factory(f"--model_config_file={config}", f"--compile_cache_dir={cache_dir}",
                            "--file_system_poll_wait_seconds=0")
    assert second.log().count("loaded from the compile cache") == 2, second.log()
    x = np.ones((1, 8), np.float32)
    first = httpx.post(f"{server.url}/v1/models/mlp:predict", json={"instances": x.tolist()},
                       timeout=30).json()
    again = httpx.post(f"{second.url}/v1/models/mlp:predict", json={"instances": x.tolist()},
                       timeout=30).json()
    assert first == again


def test_a_compiled_model_directory_is_served_as_a_version(tmp_path: Path, onnx_mlp: OnnxMLP,
                                                          server_factory: object) -> None:
    import pytfrt

    assert callable(server_factory)
    pytfrt.compile(str(onnx_mlp.path)).save(str(tmp_path / "compiled" / "3"))
    server = server_factory("--model_name=c", f"--model_base_path={tmp_path / 'compiled'}",
                            "--file_system_poll_wait_seconds=0")
    assert "pytfrt compiled model" in server.log()
    x = np.random.default_rng(9).standard_normal((4, 8)).astype(np.float32)
    r = httpx.post(f"{server.url}/v1/models/c/versions/3:predict", json={"inputs": x.tolist()},
                   timeout=60)
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["outputs"]), ort_run(onnx_mlp.path, x),
                               rtol=1e-5, atol=1e-5)
