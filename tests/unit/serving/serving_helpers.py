"""Helpers of the serving tests: a real server in a subprocess, metric parsing, oracles.

:class:`ServerProcess` is :class:`pytfrt.serving.loadgen.ServerProcess` (``pytfrt serve`` as a
subprocess on a free 127.0.0.1 port, stopped with SIGTERM) with a log directory and a metrics
getter.  Network traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from pytfrt.serving import loadgen


class ServerProcess(loadgen.ServerProcess):
    """``pytfrt serve`` in a subprocess on a free loopback port, logging into ``log_dir``."""

    def __init__(self, *flags: str, log_dir: Path) -> None:
        super().__init__(*flags, log_path=log_dir / f"server-{time.monotonic_ns()}.log")

    def start(self, timeout: float = 120.0) -> ServerProcess:
        super().start(timeout)
        return self

    def metrics(self) -> str:
        return httpx.get(f"{self.url}/monitoring/prometheus/metrics", timeout=30).text


def metric_value(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text (0 if absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    prefix = f"{name}{{{want}}} " if labels else f"{name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return 0.0


@dataclass
class KerasMLP:
    base: Path
    """The model base path, holding version 1 only (tests copy ``v2_dir`` in)."""
    v2_dir: Path
    """A SavedModel of version 2, outside the base path."""
    oracles: dict[int, Any]
    """Version -> the Keras model (run it directly for the expected outputs)."""


@dataclass
class OnnxMLP:
    base: Path
    path: Path


def make_onnx_mlp(path: Path, seed: int) -> Path:
    """Write an ONNX MLP ``x[N,8] -> y[N,4]`` (MatMul, Add, Relu; weights from ``seed``)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"]),
         helper.make_node("Add", ["t", "b"], ["u"]),
         helper.make_node("Relu", ["u"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def ort_run(path: Path, x: np.ndarray) -> np.ndarray:
    """The oracle: the ONNX model run directly in ONNX Runtime."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


def copy_version(src: Path, base: Path, version: int) -> Path:
    """Publish ``src`` as ``base/<version>`` atomically (copy aside, then rename)."""
    staging = base.parent / f".staging-{base.name}-{version}"
    shutil.copytree(src, staging)
    base.mkdir(parents=True, exist_ok=True)
    target = base / str(version)
    os.replace(staging, target)
    return target


def tf_serving_request(tf: Any, name: str, x: np.ndarray, **spec: Any) -> Any:
    """A ``tensorflow-serving-api`` PredictRequest for model ``name`` with input ``x``."""
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    for key, value in spec.items():
        if key == "version":
            request.model_spec.version.value = value
        else:
            setattr(request.model_spec, key, value)
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    return request
