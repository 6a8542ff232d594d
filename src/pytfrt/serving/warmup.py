"""Model warm-up (``--enable_model_warmup``): replay a version's recorded requests before it
serves, as TensorFlow Serving does.

A version directory may hold ``assets.extra/tf_serving_warmup_requests``: a TFRecord file
whose records are ``tensorflow.serving.PredictionLog`` messages.  Each record's
``predict_log.request`` is decoded, checked against the signature and run once on the freshly
loaded servable (so first requests do not pay for lazy initialisation); only then does the
version become ``AVAILABLE``.  As in TF Serving, at most :data:`MAX_RECORDS` records are read.
A malformed file (truncated record, bad checksum, a record that is not a predict log, a request
the model refuses) fails the load with a message saying which record and why.

TFRecord framing: ``uint64 length``, ``uint32 masked_crc32c(length)``, ``data``,
``uint32 masked_crc32c(data)``, little-endian.  Thread-safe (called on the loading thread).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from pytfrt.serving import protos, tensor_proto
from pytfrt.serving.bridge import wait
from pytfrt.serving.errors import ServingError, invalid
from pytfrt.serving.json_codec import check_tensor_inputs
from pytfrt.serving.servable import Servable

WARMUP_FILE: Final = Path("assets.extra") / "tf_serving_warmup_requests"
MAX_RECORDS: Final = 1000


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE: Final = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC: rotated right by 15 bits plus a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_tfrecords(path: Path) -> Iterator[bytes]:
    """The records of a TFRecord file, checksums verified.

    Raises:
        ServingError: ``INVALID_ARGUMENT`` for a truncated record or a checksum mismatch.
    """
    data = path.read_bytes()
    pos, index = 0, 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise invalid(f"{path}: record {index} is truncated (length header)")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked_crc32c(header) != header_crc:
            raise invalid(f"{path}: record {index}: bad length checksum (not a TFRecord file?)")
        start = pos + 12
        if start + length + 4 > len(data):
            raise invalid(f"{path}: record {index} is truncated")
        record = data[start:start + length]
        (crc,) = struct.unpack("<I", data[start + length:start + length + 4])
        if masked_crc32c(record) != crc:
            raise invalid(f"{path}: record {index}: bad data checksum")
        yield record
        pos, index = start + length + 4, index + 1


def warm_up_version(servable: Servable, version_dir: Path) -> int:
    """Replay ``version_dir``'s warm-up requests on ``servable``; how many ran (0 without a
    warm-up file).

    Raises:
        ServingError: a malformed file or a request the model refuses (the record named).
    """
    path = version_dir / WARMUP_FILE
    if not path.is_file():
        return 0
    log_class = protos.message_class("tensorflow.serving.PredictionLog")
    count = 0
    for index, record in enumerate(read_tfrecords(path)):
        if index >= MAX_RECORDS:
            break
        log = log_class.FromString(record)
        if log.WhichOneof("log_type") != "predict_log":
            raise invalid(f"{path}: record {index} is not a predict log (only PredictRequest "
                          "warm-up records are supported)")
        try:
            inputs = {key: tensor_proto.to_array(value, key)
                      for key, value in log.predict_log.request.inputs.items()}
            check_tensor_inputs(inputs, servable.signature, f"warm-up record {index}")
            if servable.runs_inline:
                servable.run(inputs)
            else:
                wait(servable.predict_async(inputs))
        except ServingError as exc:
            raise ServingError(f"{path}: record {index}: {exc.message}", exc.code) from None
        count += 1
    return count
