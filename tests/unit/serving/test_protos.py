"""The project's own ``.proto`` files against the public APIs they mirror.

Every message, field and enum value pytfrt defines must exist in the public API with the same
number and type (so the bytes on the wire are TensorFlow Serving's and the Open Inference
Protocol's).  Oracles: the descriptors shipped by ``tensorflow-serving-api`` (with TensorFlow's
own) and by ``tritonclient`` (``inference``).  Also: the descriptor set compiles into a fresh
cache, and a missing cache directory falls back to a temporary one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytfrt.serving import protos


def _public_pool(tf: Any) -> Any:
    pytest.importorskip("tensorflow_serving.apis")
    pytest.importorskip("tritonclient.grpc")
    from google.protobuf import descriptor_pool
    from tensorflow_serving.apis import (  # noqa: F401 - registers the public messages
        get_model_metadata_pb2,
        get_model_status_pb2,
        model_service_pb2,
        prediction_log_pb2,
        prediction_service_pb2,
    )
    from tritonclient.grpc import service_pb2  # noqa: F401 - registers inference.*

    return descriptor_pool.Default()


def _ours() -> list[Any]:
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet.FromString(protos.descriptor_set_path().read_bytes())
    return [f for f in files.file if not f.name.startswith("google/")]


def _messages(package: str, messages: Any, prefix: str = "") -> list[tuple[str, Any]]:
    found = []
    for message in messages:
        name = f"{package}.{prefix}{message.name}"
        if not message.options.map_entry:
            found.append((name, message))
        found += _messages(package, message.nested_type, f"{prefix}{message.name}.")
    return found


def test_every_field_has_the_public_number_and_type(tf: Any) -> None:
    pool = _public_pool(tf)
    checked = 0
    for file in _ours():
        for name, message in _messages(file.package, file.message_type):
            public = pool.FindMessageTypeByName(name)
            for field in message.field:
                theirs = public.fields_by_name.get(field.name)
                assert theirs is not None, f"{name}.{field.name} is not in the public API"
                assert theirs.number == field.number, f"{name}.{field.name}"
                # bytes stand for the public tf.Example messages (same wire format).
                if not (field.type == field.TYPE_BYTES and theirs.type == theirs.TYPE_MESSAGE):
                    assert theirs.type == field.type, f"{name}.{field.name}"
                checked += 1
        for enum in file.enum_type:
            public_enum = pool.FindEnumTypeByName(f"{file.package}.{enum.name}")
            for value in enum.value:
                assert public_enum.values_by_name[value.name].number == value.number
    assert checked > 100


def test_services_have_the_public_methods(tf: Any) -> None:
    pool = _public_pool(tf)
    for service in ("tensorflow.serving.PredictionService", "tensorflow.serving.ModelService",
                    "inference.GRPCInferenceService"):
        ours = protos.service_descriptor(service)
        public = pool.FindServiceByName(service)
        for method in ours.methods:
            theirs = public.methods_by_name[method.name]
            assert theirs.input_type.full_name == method.input_type.full_name
            assert theirs.output_type.full_name == method.output_type.full_name


def test_the_descriptor_set_compiles_into_the_cache(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("grpc_tools")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = protos.descriptor_set_path()
    assert path == tmp_path / "cache" / "pytfrt" / "protos" / protos.descriptor_file_name()
    assert path.stat().st_size > 1000
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    fallback = protos.descriptor_set_path()
    assert fallback.read_bytes() == path.read_bytes()
