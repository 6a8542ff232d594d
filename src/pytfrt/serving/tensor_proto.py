"""``tensorflow.TensorProto`` <-> NumPy arrays, for the gRPC API (and warm-up records).

Decoding reads a tensor from ``tensor_content`` -- the bytes of a C-order little-endian array --
with :func:`numpy.frombuffer` over the message's bytes object (no per-element conversion and no
copy beyond the one the protobuf runtime makes handing the field out), or from the typed value
fields (``float_val``, ``int_val``, ``string_val`` ...), where, as in TensorFlow, a single value
fills the whole shape.  Encoding writes numeric arrays as ``tensor_content`` (one
``tobytes``; the array is used as is when already C-contiguous) and strings as ``string_val``.

Errors are :class:`~pytfrt.serving.errors.ServingError` (``INVALID_ARGUMENT``) naming the
tensor.  Pure functions; thread-safe.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Final

import ml_dtypes
import numpy as np

from pytfrt.serving import protos
from pytfrt.serving.errors import invalid

_NUMPY: Final[dict[str, Any]] = {
    "DT_FLOAT": np.float32, "DT_DOUBLE": np.float64, "DT_HALF": np.float16,
    "DT_BFLOAT16": ml_dtypes.bfloat16, "DT_INT8": np.int8, "DT_INT16": np.int16,
    "DT_INT32": np.int32, "DT_INT64": np.int64, "DT_UINT8": np.uint8, "DT_UINT16": np.uint16,
    "DT_UINT32": np.uint32, "DT_UINT64": np.uint64, "DT_BOOL": np.bool_,
    "DT_STRING": object, "DT_COMPLEX64": np.complex64, "DT_COMPLEX128": np.complex128,
}
# The typed field holding each type's values (TensorFlow's tensor.proto comments).
_FIELD: Final[dict[str, str]] = {
    "DT_FLOAT": "float_val", "DT_DOUBLE": "double_val", "DT_HALF": "half_val",
    "DT_BFLOAT16": "half_val", "DT_INT8": "int_val", "DT_INT16": "int_val", "DT_INT32": "int_val",
    "DT_UINT8": "int_val", "DT_UINT16": "int_val", "DT_INT64": "int64_val",
    "DT_UINT32": "uint32_val", "DT_UINT64": "uint64_val", "DT_BOOL": "bool_val",
    "DT_STRING": "string_val", "DT_COMPLEX64": "scomplex_val", "DT_COMPLEX128": "dcomplex_val",
}
MAX_RANK: Final = 32


class _Tables:
    def __init__(self) -> None:
        enum = protos.enum_descriptor("tensorflow.DataType")
        self.numpy = {enum.values_by_name[name].number: np.dtype(dt)
                      for name, dt in _NUMPY.items()}
        self.field = {enum.values_by_name[name].number: field for name, field in _FIELD.items()}
        self.names = {v.number: v.name for v in enum.values}
        self.by_numpy = {dt: number for number, dt in self.numpy.items()}
        self.tensor_proto = protos.message_class("tensorflow.TensorProto")


_tables: _Tables | None = None


def _t() -> _Tables:
    global _tables
    if _tables is None:
        _tables = _Tables()
    return _tables


def dtype_name(number: int) -> str:
    """The ``DataType`` name of ``number`` (``DT_FLOAT`` ...)."""
    return _t().names.get(number, f"DataType {number}")


def to_array(proto: Any, name: str) -> np.ndarray:
    """The array a ``TensorProto`` holds.

    Raises:
        ServingError: an unsupported dtype, an unknown or negative shape, or a value count that
            does not fit the shape.
    """
    tables = _t()
    dtype = tables.numpy.get(proto.dtype)
    if dtype is None:
        raise invalid(f"input '{name}': unsupported dtype {dtype_name(proto.dtype)}")
    shape_proto = proto.tensor_shape
    if shape_proto.unknown_rank or len(shape_proto.dim) > MAX_RANK:
        raise invalid(f"input '{name}': a tensor needs a known shape of at most {MAX_RANK} "
                      "dimensions")
    shape = tuple([d.size for d in shape_proto.dim])
    if shape and min(shape) < 0:
        raise invalid(f"input '{name}': negative dimension in shape {list(shape)}")
    size = math.prod(shape)
    if proto.tensor_content and dtype.kind != "O":
        content = proto.tensor_content
        if len(content) != size * dtype.itemsize:
            raise invalid(f"input '{name}': tensor_content holds {len(content)} bytes, the "
                          f"shape {list(shape)} of {dtype_name(proto.dtype)} needs "
                          f"{size * dtype.itemsize}")
        array = np.frombuffer(content, dtype=dtype.newbyteorder("<"))
        if sys.byteorder != "little":
            array = array.astype(dtype)
        return array.reshape(shape)
    values: Any = getattr(proto, tables.field[proto.dtype])
    count = len(values)
    if dtype.kind == "O":
        array = np.empty(count, dtype=object)
        array[:] = list(values)
    elif proto.dtype in (tables.by_numpy[np.dtype(np.float16)],
                         tables.by_numpy[np.dtype(ml_dtypes.bfloat16)]):
        array = np.asarray(values, dtype=np.uint16).view(dtype)
    elif dtype.kind == "c":
        pairs = np.asarray(values, dtype=np.float32 if dtype.itemsize == 8 else np.float64)
        if count % 2:
            raise invalid(f"input '{name}': complex values come in (real, imaginary) pairs")
        array = pairs.view(dtype)
        count //= 2
    else:
        array = np.asarray(values, dtype=dtype)
    if count == size:
        return array.reshape(shape)
    if count == 1:  # TensorFlow's rule: one value fills the tensor
        return np.full(shape, array[0], dtype=dtype)
    raise invalid(f"input '{name}': {count} values for shape {list(shape)} ({size} elements)")


def from_array(array: np.ndarray, out: Any = None) -> Any:
    """``array`` as a ``TensorProto`` (written into ``out`` when given, e.g. a map entry).

    Raises:
        ServingError: ``INVALID_ARGUMENT`` for an array of an unsupported dtype.
    """
    tables = _t()
    array = np.asarray(array)
    proto = tables.tensor_proto() if out is None else out
    if array.dtype.kind in "SU":
        array = array.astype(object)
    number = tables.by_numpy.get(array.dtype)
    if number is None:
        raise invalid(f"cannot send a tensor of dtype {array.dtype} over gRPC")
    proto.dtype = number
    for d in array.shape:
        proto.tensor_shape.dim.add().size = d
    if array.dtype.kind == "O":
        proto.string_val.extend(v if isinstance(v, bytes) else str(v).encode("utf-8")
                                for v in array.reshape(-1))
    else:
        proto.tensor_content = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
    return proto
