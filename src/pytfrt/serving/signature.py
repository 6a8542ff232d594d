"""A served model's signature, and its JSON form in TensorFlow Serving's metadata API.

Every backend describes its model with one :class:`ServingSignature`: the named input and
output tensors, each a :class:`TensorInfo` (name, NumPy dtype, shape with ``None`` for a
dimension known only at run time, or ``None`` for an unknown rank).  The REST layer validates
requests against it and :func:`signature_def_json` renders it as the ``signature_def`` of
``GET /v1/models/{name}/metadata``.  Objects are immutable and thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

DEFAULT_SIGNATURE: Final = "serving_default"
"""The one signature key a served model exposes (TF's ``kDefaultServingSignatureDefKey``)."""
PREDICT_METHOD: Final = "tensorflow/serving/predict"

# NumPy dtype -> TensorFlow's DataType enum name, as the metadata API prints it.
_TF_DTYPE_NAMES: Final[dict[str, str]] = {
    "float32": "DT_FLOAT",
    "float64": "DT_DOUBLE",
    "float16": "DT_HALF",
    "bfloat16": "DT_BFLOAT16",
    "int8": "DT_INT8",
    "int16": "DT_INT16",
    "int32": "DT_INT32",
    "int64": "DT_INT64",
    "uint8": "DT_UINT8",
    "uint16": "DT_UINT16",
    "uint32": "DT_UINT32",
    "uint64": "DT_UINT64",
    "bool": "DT_BOOL",
    "object": "DT_STRING",
    "complex64": "DT_COMPLEX64",
    "complex128": "DT_COMPLEX128",
}

STRING_DTYPE: Final = np.dtype(object)
"""String tensors are NumPy object arrays of ``bytes`` (TF's ``DT_STRING``)."""


@dataclass(frozen=True)
class TensorInfo:
    """One named tensor of a signature."""

    name: str
    dtype: np.dtype[Any]
    """NumPy dtype; ``object`` for strings (items are ``bytes``)."""
    shape: tuple[int | None, ...] | None
    """Dimensions, ``None`` where dynamic; ``None`` for an unknown rank."""

    @classmethod
    def of(cls, name: str, dtype: Any, shape: Iterable[int | None] | None) -> TensorInfo:
        """Build from loose parts (any dtype-like; negative or ``None`` dims become ``None``)."""
        dims = None
        if shape is not None:
            dims = tuple(d if isinstance(d, int) and d >= 0 else None for d in shape)
        return cls(name, np.dtype(dtype), dims)

    @property
    def tf_dtype(self) -> str:
        """TensorFlow's name of the dtype (``DT_FLOAT``...)."""
        return _TF_DTYPE_NAMES.get(self.dtype.name, "DT_INVALID")

    @property
    def batched(self) -> bool:
        """True if the 0-th dimension is dynamic (requests can be merged along it)."""
        return self.shape is not None and len(self.shape) >= 1 and self.shape[0] is None

    def shape_str(self) -> str:
        """The shape as ``[?,784]`` (``[*]`` for unknown rank)."""
        if self.shape is None:
            return "[*]"
        return "[" + ",".join("?" if d is None else str(d) for d in self.shape) + "]"


@dataclass(frozen=True)
class ServingSignature:
    """The inputs and outputs of a served model, in the model's own order."""

    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.outputs]

    @property
    def batchable(self) -> bool:
        """True if every input and output has a dynamic 0-th dimension."""
        return all(t.batched for t in self.inputs) and all(t.batched for t in self.outputs)

    @classmethod
    def from_specs(cls, inputs: Iterable[Any], outputs: Iterable[Any]) -> ServingSignature:
        """Build from objects with ``name``, ``dtype`` and ``shape`` (e.g. ``pytfrt.model``'s
        ``TensorSpec``)."""
        return cls(
            tuple(TensorInfo.of(s.name, s.dtype, s.shape) for s in inputs),
            tuple(TensorInfo.of(s.name, s.dtype, s.shape) for s in outputs),
        )


def _tensor_info_json(info: TensorInfo) -> dict[str, Any]:
    shape: dict[str, Any]
    if info.shape is None:
        shape = {"dim": [], "unknown_rank": True}
    else:
        shape = {
            "dim": [{"size": str(-1 if d is None else d), "name": ""} for d in info.shape],
            "unknown_rank": False,
        }
    return {"dtype": info.tf_dtype, "tensor_shape": shape, "name": f"{info.name}:0"}


def signature_def_json(signature: ServingSignature) -> dict[str, Any]:
    """The ``metadata`` object of a GetModelMetadata response for ``signature``."""
    sig = {
        "inputs": {t.name: _tensor_info_json(t) for t in signature.inputs},
        "outputs": {t.name: _tensor_info_json(t) for t in signature.outputs},
        "method_name": PREDICT_METHOD,
        "defaults": {},
    }
    return {"signature_def": {"signature_def": {DEFAULT_SIGNATURE: sig}}}
