"""The ``tensorflow`` backend: a SavedModel's ``serving_default`` signature in TensorFlow itself.

The baseline pytfrt is measured against, behind the identical HTTP layer.  TensorFlow is
imported here only, when the first model loads.  Each request runs the signature's concrete
function as one task on the host's work queue (TensorFlow releases the GIL while it computes,
so the queue's threads run requests in parallel).  Thread-safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytfrt.host import HostContext
from pytfrt.serving.servable import (
    SAVED_MODEL,
    Arrays,
    HostServable,
    LoadError,
    LoadOptions,
    Servable,
    require_format,
)
from pytfrt.serving.signature import DEFAULT_SIGNATURE, ServingSignature, TensorInfo


def _info(name: str, spec: Any) -> TensorInfo:
    shape = None if spec.shape.rank is None else spec.shape.as_list()
    return TensorInfo.of(name, spec.dtype.as_numpy_dtype, shape)


class TensorFlowServable(HostServable):
    """A SavedModel loaded with ``tf.saved_model.load``."""

    def __init__(self, path: Path, host: HostContext, intra_op_threads: int = 0) -> None:
        from pytfrt.compiler.frontends.tf_import import tensorflow

        tf = tensorflow()

        if intra_op_threads > 0:
            try:
                tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
            except RuntimeError:  # TensorFlow's runtime is already up: the first setting stays
                pass

        self._tf = tf
        self._host = host
        self._loaded = tf.saved_model.load(str(path))
        signatures = getattr(self._loaded, "signatures", {})
        if DEFAULT_SIGNATURE not in signatures:
            raise LoadError(f"the SavedModel at {path} has no '{DEFAULT_SIGNATURE}' signature "
                            f"(it has: {', '.join(signatures) or 'none'})")
        self._fn = signatures[DEFAULT_SIGNATURE]
        _, kwargs = self._fn.structured_input_signature
        outputs = self._fn.structured_outputs
        if not isinstance(outputs, dict):
            outputs = {"output_0": outputs}
        self.signature = ServingSignature(
            tuple(_info(name, spec) for name, spec in kwargs.items()),
            tuple(_info(name, spec) for name, spec in outputs.items()),
        )
        self.description = "tensorflow SavedModel"

    def run(self, inputs: Arrays) -> Arrays:
        """Run the signature synchronously (on the calling thread)."""
        tf = self._tf
        feed = {}
        for info in self.signature.inputs:
            value = inputs[info.name]
            feed[info.name] = tf.constant(value, dtype=tf.string) if value.dtype == object \
                else tf.constant(value)
        result = self._fn(**feed)
        return {info.name: np.asarray(result[info.name].numpy()) for info in self.signature.outputs}

    def close(self) -> None:
        self._fn = None
        self._loaded = None


def load(path: Path, fmt: str, host: HostContext, options: LoadOptions) -> Servable:
    """Load a SavedModel directory (the only format this backend runs)."""
    require_format("tensorflow", path, fmt, SAVED_MODEL, "SavedModels")
    return TensorFlowServable(path, host, options.intra_op_threads)
