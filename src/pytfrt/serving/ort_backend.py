"""The ``onnxruntime`` backend: an ``.onnx`` file in ONNX Runtime, behind the same HTTP layer.

ONNX Runtime is imported here only, when the first model loads.  Each request is one
``InferenceSession.run`` task on the host's work queue (``run`` is thread-safe and releases the
GIL); its intra-op threads do not spin while idle.  ONNX string tensors take and give Python
``str``; the HTTP layer uses ``bytes``, so they are converted at this boundary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import numpy as np

from pytfrt.host import HostContext
from pytfrt.serving.servable import (
    ONNX,
    Arrays,
    HostServable,
    LoadError,
    LoadOptions,
    Servable,
    require_format,
)
from pytfrt.serving.signature import ServingSignature, TensorInfo

_ORT_TYPES: Final[dict[str, Any]] = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
    "tensor(string)": object,
}


def _info(arg: Any) -> TensorInfo:
    if arg.type not in _ORT_TYPES:
        raise LoadError(f"ONNX tensor '{arg.name}' has unsupported type {arg.type}")
    shape = arg.shape
    dims = None if shape is None else [d if isinstance(d, int) else None for d in shape]
    return TensorInfo.of(arg.name, _ORT_TYPES[arg.type], dims)


class OnnxRuntimeServable(HostServable):
    """An ``onnxruntime.InferenceSession`` on the CPU execution provider."""

    def __init__(self, path: Path, host: HostContext, intra_op_threads: int = 0) -> None:
        import onnxruntime as ort

        self._host = host
        options = ort.SessionOptions()
        # Idle intra-op threads sleep instead of spinning: a server runs several sessions and
        # several requests at once, and spinning threads would take the cores they need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.intra_op_num_threads = intra_op_threads
        self._session = ort.InferenceSession(str(path), options,
                                             providers=["CPUExecutionProvider"])
        self.signature = ServingSignature(
            tuple(_info(a) for a in self._session.get_inputs()),
            tuple(_info(a) for a in self._session.get_outputs()),
        )
        self._output_names = self.signature.output_names
        self.description = "onnxruntime"

    def run(self, inputs: Arrays) -> Arrays:
        """Run the session synchronously (on the calling thread)."""
        feed = {}
        for name, value in inputs.items():
            if value.dtype == object:
                value = np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(value)
            feed[name] = value
        results = self._session.run(self._output_names, feed)
        out: Arrays = {}
        for name, value in zip(self._output_names, results, strict=True):
            array = np.asarray(value)
            if array.dtype == object:
                array = np.vectorize(lambda s: s.encode("utf-8") if isinstance(s, str) else s,
                                     otypes=[object])(array)
            out[name] = array
        return out

    def close(self) -> None:
        self._session = None


def load(path: Path, fmt: str, host: HostContext, options: LoadOptions) -> Servable:
    """Load an ``.onnx`` file (the only format this backend runs)."""
    require_format("onnxruntime", path, fmt, ONNX, ".onnx files")
    return OnnxRuntimeServable(path, host, options.intra_op_threads)
