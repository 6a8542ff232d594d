"""The gRPC APIs' messages: the ``.proto`` files of this directory, compiled by ``grpcio-tools``.

The ``.proto`` files (TensorFlow's tensor messages, TensorFlow Serving's PredictionService and
ModelService, the Open Inference Protocol's GRPCInferenceService) are compiled by
``grpc_tools.protoc`` into one ``FileDescriptorSet``: at build time by ``setup.py`` (it lands next
to them as ``descriptors-<hash>.binpb``), or on first use into the cache
(``$XDG_CACHE_HOME/pytfrt/protos``; source checkouts and editable installs), keyed by the SHA-256
of the ``.proto`` sources so an edited file is never served from a stale compilation.

The message classes are made from that set in a **private descriptor pool**
(:func:`message_class`), not from generated ``_pb2`` modules in the default pool: TensorFlow and
``tensorflow-serving-api`` register the very same full names (``tensorflow.TensorProto``,
``tensorflow.serving.PredictRequest``) in the default pool, and a process holding both (the
``tensorflow`` backend) would fail with duplicate symbols.  The bytes on the wire are the same.

Importing this module imports nothing beyond the standard library; protobuf is imported when a
message class is first asked for, and ``grpcio-tools`` runs (in a child process) only when the
set has to be compiled.
Thread-safe (the pool is built once, under a lock).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from functools import cache
from pathlib import Path
from typing import Any, Final

HERE: Final = Path(__file__).resolve().parent
PROTO_FILES: Final = ("tensorflow_core.proto", "tensorflow_error.proto",
                      "tensorflow_serving.proto", "inference.proto")
_lock = threading.Lock()


def source_digest() -> str:
    """SHA-256 (hex, 16 digits) of the ``.proto`` sources, in :data:`PROTO_FILES` order."""
    digest = hashlib.sha256()
    for name in PROTO_FILES:
        digest.update(name.encode() + b"\0" + (HERE / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def descriptor_file_name() -> str:
    return f"descriptors-{source_digest()}.binpb"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytfrt" / "protos"


def compile_protos(out: Path) -> None:
    """Compile :data:`PROTO_FILES` (with their imports) into the descriptor set ``out``, written
    atomically.  protoc runs in a child process (``python -m grpc_tools.protoc``): loaded into a
    process that already holds TensorFlow's protobuf runtime, grpc_tools' compiler crashes.

    Raises:
        RuntimeError: ``grpcio-tools`` is missing or protoc reports an error.
    """
    import importlib.util
    import subprocess
    import sys

    spec = importlib.util.find_spec("grpc_tools")
    if spec is None or spec.origin is None:
        raise RuntimeError("compiling the gRPC API's .proto files needs grpcio-tools: "
                           "pip install 'pytfrt[serve]'")
    well_known = Path(spec.origin).resolve().parent / "_proto"
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
    os.close(fd)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{HERE}", f"-I{well_known}",
             "--include_imports", f"--descriptor_set_out={tmp}", *PROTO_FILES],
            capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"protoc failed (status {done.returncode}) on "
                               f"{', '.join(PROTO_FILES)}: {done.stderr.strip()}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def descriptor_set_path() -> Path:
    """The compiled descriptor set: the packaged one, else the cached one (compiled if absent).

    Raises:
        RuntimeError: as :func:`compile_protos`.
    """
    name = descriptor_file_name()
    packaged = HERE / name
    if packaged.exists():
        return packaged
    cached = _cache_dir() / name
    if not cached.exists():
        try:
            compile_protos(cached)
        except OSError:  # no writable cache: compile into a private temporary directory
            cached = Path(tempfile.mkdtemp(prefix="pytfrt-protos-")) / name
            compile_protos(cached)
    return cached


@cache
def _pool() -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool

    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set_path().read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    return pool


def message_class(full_name: str) -> Any:
    """The message class of ``full_name`` (e.g. ``"tensorflow.serving.PredictRequest"``)."""
    from google.protobuf import message_factory

    with _lock:
        pool = _pool()
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def enum_descriptor(full_name: str) -> Any:
    """The enum descriptor of ``full_name`` (e.g. ``"tensorflow.DataType"``)."""
    with _lock:
        return _pool().FindEnumTypeByName(full_name)


def service_descriptor(full_name: str) -> Any:
    """The service descriptor of ``full_name`` (e.g. ``"inference.GRPCInferenceService"``)."""
    with _lock:
        return _pool().FindServiceByName(full_name)
