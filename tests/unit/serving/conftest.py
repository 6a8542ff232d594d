"""Fixtures of the serving tests: small models exported once per session.

Models (session-scoped, in one tmp dir; TensorFlow is imported once, by the ``tf`` fixture):

* ``keras_mlp``: a Keras MLP ``x[?,8] -> output_0[?,4]`` exported as SavedModel versions 1 and
  2 (different weights), with the Keras models kept as oracles;
* ``string_model``: a ``tf.Module`` SavedModel taking strings (``text``) and returning their
  lengths and the strings back (``echo_bytes``, a ``_bytes`` output);
* ``two_input_model``: a SavedModel ``(a[?,3], b[?]) -> (sum[?,3], scale[?])``;
* ``onnx_mlp``: an ONNX model ``x[N,8] -> y[N,4]`` (MatMul, Add, Relu) made with onnx.helper.

``served`` is one server shared by the gRPC and v2 tests (see its docstring).
``server_factory`` starts servers (:class:`serving_helpers.ServerProcess`) stopped after the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from serving_helpers import (
    KerasMLP,
    OnnxMLP,
    ServerProcess,
    make_onnx_mlp,
    tf_serving_request,
)


@pytest.fixture(scope="session")
def tf() -> Any:
    """TensorFlow, imported once per session."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="session")
def serving_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serving")


def _keras_mlp(tf: Any, seed: int) -> Any:
    keras = tf.keras
    keras.utils.set_random_seed(seed)
    inp = keras.Input((8,), name="x")
    hidden = keras.layers.Dense(16, activation="relu")(inp)
    out = keras.layers.Dense(4)(hidden)
    return keras.Model(inp, out)


@pytest.fixture(scope="session")
def keras_mlp(tf: Any, serving_dir: Path) -> KerasMLP:
    base = serving_dir / "mlp_tf"
    models = {1: _keras_mlp(tf, 1), 2: _keras_mlp(tf, 2)}
    models[1].export(str(base / "1"), verbose=False)
    v2 = serving_dir / "mlp_tf_v2"
    models[2].export(str(v2), verbose=False)
    return KerasMLP(base, v2, models)


@pytest.fixture(scope="session")
def string_model(tf: Any, serving_dir: Path) -> Path:
    class Strings(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text: Any) -> dict[str, Any]:
            return {"length": tf.strings.length(text), "echo_bytes": text}

    module = Strings()
    base = serving_dir / "strings"
    tf.saved_model.save(module, str(base / "1"), signatures={"serving_default": module.serve})
    return base


@pytest.fixture(scope="session")
def two_input_model(tf: Any, serving_dir: Path) -> Path:
    class TwoInputs(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="a"),
                                      tf.TensorSpec([None], tf.int32, name="b")])
        def serve(self, a: Any, b: Any) -> dict[str, Any]:
            return {"sum": a + tf.cast(b, tf.float32)[:, None], "scale": b * 2}

    module = TwoInputs()
    base = serving_dir / "two_inputs"
    tf.saved_model.save(module, str(base / "1"), signatures={"serving_default": module.serve})
    return base


@pytest.fixture(scope="session")
def onnx_mlp(serving_dir: Path) -> OnnxMLP:
    pytest.importorskip("onnx")
    base = serving_dir / "mlp_onnx"
    return OnnxMLP(base, make_onnx_mlp(base / "1" / "model.onnx", seed=0))


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Any]:
    """Start servers with ``server_factory(*flags)``; all are stopped after the test."""
    started: list[ServerProcess] = []

    def start(*flags: str) -> ServerProcess:
        server = ServerProcess(*flags, log_dir=tmp_path)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


def _warmup_file(tf: Any, path: Path, requests: list[Any], corrupt: bool = False) -> None:
    from tensorflow_serving.apis import prediction_log_pb2

    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for request in requests:
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
    if corrupt:
        data = bytearray(path.read_bytes())
        data[20] ^= 0xFF  # inside the first record's data: its checksum no longer matches
        path.write_bytes(bytes(data))


@pytest.fixture(scope="session")
def served(tf: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One server for the gRPC and v2 tests: ``--backend=onnxruntime`` with ``mlp`` (an ONNX MLP
    with a warm-up file written by TensorFlow's TFRecordWriter; label ``stable`` = 1),
    ``broken`` (its warm-up file has a corrupted record) and ``missing`` (no base path);
    a gRPC channel to it; the MLP's path (the oracle runs it in ONNX Runtime)."""
    grpc = pytest.importorskip("grpc")
    pytest.importorskip("tensorflow_serving.apis")
    root = tmp_path_factory.mktemp("grpc")
    mlp = make_onnx_mlp(root / "mlp" / "1" / "model.onnx", seed=3)
    broken = make_onnx_mlp(root / "broken" / "1" / "model.onnx", seed=4)
    warm = [tf_serving_request(tf, "mlp", np.ones((r, 8), np.float32)) for r in (1, 2, 3)]
    _warmup_file(tf, mlp.parent / "assets.extra" / "tf_serving_warmup_requests", warm)
    _warmup_file(tf, broken.parent / "assets.extra" / "tf_serving_warmup_requests", warm,
                 corrupt=True)
    config = root / "models.config"
    config.write_text(
        "model_config_list {\n"
        f"  config {{ name: 'mlp' base_path: '{root / 'mlp'}' "
        "version_labels { key: 'stable' value: 1 } }\n"
        f"  config {{ name: 'broken' base_path: '{root / 'broken'}' }}\n"
        f"  config {{ name: 'missing' base_path: '{root / 'missing'}' }}\n"
        "}\n")
    server = ServerProcess("--backend=onnxruntime", f"--model_config_file={config}",
                           "--file_system_poll_wait_seconds=0", log_dir=root).start()
    channel = grpc.insecure_channel(server.grpc_target)
    yield {"server": server, "channel": channel, "mlp": mlp}
    channel.close()
    assert server.stop() == 0, server.log()
