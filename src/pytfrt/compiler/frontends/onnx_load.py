"""Reading an ``.onnx`` file without holding its weights twice.

``onnx.load`` parses the whole file into a ``ModelProto``, whose initializers keep their bytes
(``raw_data``) inside the protobuf; converting them to arrays then makes a second copy, and
both live until the ModelProto is dropped: the import's peak memory was twice the weights.
:func:`load_split` instead walks the file's protobuf wire format itself (the ``ModelProto`` ->
``graph`` -> ``initializer`` fields) and reads each large initializer's ``raw_data`` straight
from the file into a NumPy array of its own (``readinto``: one copy, no intermediate
``bytes``), then parses the rest of the model -- nodes, inputs, outputs, small initializers --
as an ordinary ``ModelProto`` that no longer contains those bytes.  The arrays are exactly
what ``onnx.numpy_helper.to_array`` makes of the same tensors (same dtype, shape and bits;
read-only like them, and aligned, where ``to_array``'s are views of a ``bytes``).

What is split out: top-level graph initializers of at least :data:`SPLIT_BYTES` bytes whose
data is ``raw_data`` in the file, of a fixed-width element type NumPy holds as is, on a
little-endian machine; and top-level initializers stored as external data (read one at a
time, by ``onnx``'s own reader, which checks their paths and sizes).  Everything else (small
tensors, ``int32_data``-style fields, strings, packed 4-/2-bit types, tensors inside
subgraphs and ``Constant`` nodes) stays in the ModelProto and is converted by the usual
path; external data of those is loaded as ``onnx.load`` does.  A file the scanner cannot
walk (damaged, not protobuf, a deprecated group field) is left to ``onnx.load``: the caller
falls back to it and reports its error as before.

Thread-safety: pure functions over their own file handles; concurrent calls are independent.
"""

from __future__ import annotations

import os
import sys
from typing import IO, TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import onnx

SPLIT_BYTES = 4096
"""Initializers with at least this many bytes of ``raw_data`` are read straight into arrays."""

# ModelProto.graph, GraphProto.initializer, and the TensorProto fields read here
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_RAW_DATA = 9

# ONNX element types whose raw_data is the little-endian array as NumPy stores it
_PLAIN_TYPES = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16})


class WireError(ValueError):
    """The file is not protobuf the scanner can walk (the caller falls back to ``onnx.load``)."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class _Fields:
    """The fields of the message occupying ``[start, end)`` of a file, read a header at a
    time: ``(field number, wire type, start of field, start of value, end of field)``."""

    def __init__(self, fh: IO[bytes], start: int, end: int) -> None:
        self.fh, self.pos, self.end = fh, start, end

    def __iter__(self) -> _Fields:
        return self

    def __next__(self) -> tuple[int, int, int, int, int]:
        if self.pos >= self.end:
            raise StopIteration
        start = self.pos
        self.fh.seek(start)
        head = self.fh.read(min(20, self.end - start))
        tag, p = _varint(head, 0)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, q = _varint(head, p)
            value, stop = start + p, start + q
        elif wire == 1:
            value, stop = start + p, start + p + 8
        elif wire == 5:
            value, stop = start + p, start + p + 4
        elif wire == 2:
            length, q = _varint(head, p)
            value, stop = start + q, start + q + length
        else:
            raise WireError(f"wire type {wire} (groups are not read)")
        if field == 0 or stop > self.end:
            raise WireError("field runs past its message")
        self.pos = stop
        return field, wire, start, value, stop


def _read(fh: IO[bytes], start: int, stop: int) -> bytes:
    fh.seek(start)
    data = fh.read(stop - start)
    if len(data) != stop - start:
        raise WireError("file ends inside a field")
    return data


def _split_tensor(fh: IO[bytes], start: int, stop: int, base_dir: str, origin: str
                  ) -> tuple[str, np.ndarray] | None:
    """The initializer at ``[start, stop)`` as ``(name, array)``, or ``None`` to leave it in
    the ModelProto (the usual path)."""
    from pytfrt.compiler.frontends.onnx_common import initializer_array
    from pytfrt.compiler.frontends.onnx_proto import TensorProto, np_dtype

    head = bytearray()
    raw: tuple[int, int] | None = None
    for field, _wire, fstart, value, fstop in _Fields(fh, start, stop):
        if field == _TENSOR_RAW_DATA:
            raw = (value, fstop)  # the last occurrence wins, as in protobuf
        else:
            head += _read(fh, fstart, fstop)
    tensor = TensorProto.FromString(bytes(head))
    if raw is None and tensor.data_location == TensorProto.EXTERNAL:
        # read from its file by onnx (size and path checked): one copy, as a bytes object
        return tensor.name, initializer_array(tensor, origin, base_dir)
    if (raw is None or raw[1] - raw[0] < SPLIT_BYTES or tensor.data_type not in _PLAIN_TYPES
            or tensor.HasField("segment") or any(d < 0 for d in tensor.dims)):
        return None
    dtype = np_dtype(tensor.data_type)
    count = 1
    for d in tensor.dims:
        count *= d
    if count * dtype.itemsize != raw[1] - raw[0]:
        return None  # a damaged tensor: the usual path reports it
    array = np.empty(tuple(tensor.dims), dtype)
    fh.seek(raw[0])
    if fh.readinto(array.reshape(-1).view(np.uint8).data) != raw[1] - raw[0]:  # type: ignore[attr-defined]
        raise WireError("file ends inside a tensor")
    array.flags.writeable = False  # as to_array's: a kernel writing a weight fails loudly
    return tensor.name, array


def load_split(path: str | os.PathLike[str], origin: str = ""
               ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """``(model, weights)``: the model in ``path`` without its large top-level initializers,
    and those initializers' arrays by name (see the module docstring).

    Raises :class:`WireError` when the file cannot be walked, what ``onnx`` raises for a
    ModelProto it cannot parse or external data it cannot read, and
    :class:`~pytfrt.compiler.frontends.onnx_common.OnnxImportError` for an external
    initializer that cannot be read (``origin`` names the model in that message).
    """
    from pytfrt.compiler.frontends.onnx_proto import ModelProto, load_external_data

    if sys.byteorder != "little":
        raise WireError("big-endian machine: raw_data needs byte swapping")
    base_dir = os.path.dirname(os.fspath(path))
    weights: dict[str, np.ndarray] = {}
    model_bytes = bytearray()
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        for field, wire, start, value, stop in _Fields(fh, 0, size):
            if field != _MODEL_GRAPH or wire != 2:
                model_bytes += _read(fh, start, stop)
                continue
            graph = bytearray()
            for gfield, gwire, gstart, gvalue, gstop in _Fields(fh, value, stop):
                split = (_split_tensor(fh, gvalue, gstop, base_dir, origin or str(path))
                         if gfield == _GRAPH_INITIALIZER and gwire == 2 else None)
                if split is None:
                    graph += _read(fh, gstart, gstop)
                    continue
                weights[split[0]] = split[1]
            model_bytes += _encode_varint(_MODEL_GRAPH << 3 | 2)
            model_bytes += _encode_varint(len(graph)) + graph
    model = ModelProto.FromString(bytes(model_bytes))
    load_external_data(model, base_dir)
    return model, weights
