"""Helpers of the serving tests: a real server in a subprocess, metric parsing, oracles.

:class:`ServerProcess` starts ``pytfrt serve`` as a subprocess on a free loopback port
(``--rest_api_port=0``; the port is read from the ``Exporting HTTP/REST API at:...`` line) and
stops it with SIGTERM.  Network traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

START_TIMEOUT = 120.0


class ServerProcess:
    """``pytfrt serve`` in a subprocess; ``url`` is its base URL once :meth:`start` returns."""

    def __init__(self, *flags: str, log_dir: Path) -> None:
        self.flags = list(flags)
        self.log_path = log_dir / f"server-{os.getpid()}-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self._lines: queue.Queue[str | None] = queue.Queue()

    def start(self) -> ServerProcess:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in stop
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytfrt.tools.pytfrt_cli", "serve", "--rest_api_port=0",
             *self.flags],
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            if line.startswith("Exporting HTTP/REST API at:"):
                address = line.split("at:", 1)[1].split()[0]
                self.url = f"http://{address}"
                return self
        code = self.proc.poll()
        self.stop()
        raise RuntimeError(f"server did not start (exit {code}):\n{self.log()}")

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8") if self.log_path.exists() else ""

    def terminate(self) -> None:
        """Send SIGTERM (returns at once)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self) -> int | None:
        """SIGTERM, then wait; returns the exit status (kills after 60 s)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

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
    target = base / str(version)
    os.replace(staging, target)
    return target
