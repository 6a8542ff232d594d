"""The ``pytfrt`` backend (the default): models run as pytfrt ``CompiledModel``s.

A version directory holding a compiled model (``model.bef`` + ``manifest.json``, written by
``CompiledModel.save``) is loaded with ``pytfrt.load`` -- no TensorFlow, ONNX or compiler
needed.  A SavedModel or ``.onnx`` version is compiled on load with ``pytfrt.compile`` and the
result saved in the compile cache under the SHA-256 of the version's files (and the compiler's
fingerprint, so a changed compiler compiles again), so a restart or another server loads it
without compiling again.  The cache entry is written to a temporary directory and renamed
into place, so concurrent servers never see a half-written one.

Requests call ``CompiledModel.call_async`` (thread-safe; each call gets its own request
context), which runs the call on the model's HostContext: models are loaded and compiled with
``host=`` the server's host (:func:`pytfrt.serving.server.make_host`), so request work and
model calls share one runtime and one work queue.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt.host import AsyncValue, HostContext
from pytfrt.serving.bridge import then
from pytfrt.serving.errors import ServingError
from pytfrt.serving.servable import (
    COMPILED,
    SAVED_MODEL,
    Arrays,
    LoadError,
    LoadOptions,
    Servable,
)
from pytfrt.serving.signature import DEFAULT_SIGNATURE, ServingSignature
from pytfrt.support.errors import ErrorCode


def content_hash(path: Path) -> str:
    """SHA-256 over every file under ``path`` (a file or a directory): names and bytes."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        rel = file.name if file == path else file.relative_to(path).as_posix()
        digest.update(rel.encode("utf-8") + b"\0")
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def compile_cached(path: Path, fmt: str, cache_dir: Path | None,
                   log: Callable[[str], None] | None = None,
                   host: HostContext | None = None) -> Any:
    """The ``CompiledModel`` for a SavedModel directory or ``.onnx`` file, via the cache,
    running on ``host`` (``None``: ``pytfrt.model.default_host()``).

    A cache entry that cannot be loaded is compiled again; a model that cannot be saved is
    served without being cached (both are reported through ``log``).
    """
    import pytfrt

    say = log or (lambda line: None)
    signature = DEFAULT_SIGNATURE if fmt == SAVED_MODEL else None
    if cache_dir is None:
        return pytfrt.compile(str(path), signature=signature, host=host)
    from pytfrt.compiler import fingerprint

    # The compiler's fingerprint, not just the version: a changed pass must not serve a
    # program an older compiler produced.
    source = f"{fingerprint()}\0{fmt}\0{content_hash(path)}"
    key = hashlib.sha256(source.encode()).hexdigest()[:32]
    entry = cache_dir / key
    if (entry / "manifest.json").is_file():
        try:
            model = pytfrt.load(str(entry), host=host)
        except Exception as exc:  # noqa: BLE001 - a damaged entry is compiled again
            say(f"pytfrt serve: compile cache entry {entry} cannot be loaded ({exc}); "
                "compiling again")
        else:
            say(f"pytfrt serve: {path} loaded from the compile cache ({entry})")
            return model
    started = time.perf_counter()
    model = pytfrt.compile(str(path), signature=signature, host=host)
    say(f"pytfrt serve: compiled {path} in {time.perf_counter() - started:.2f} s")
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cache_dir))
    try:
        model.save(str(staging / "model"))
        try:
            os.replace(staging / "model", entry)
        except OSError:  # another server stored the same entry first: keep theirs
            pass
    except Exception as exc:  # noqa: BLE001 - serving does not depend on the cache
        say(f"pytfrt serve: the compiled model is not cached ({type(exc).__name__}: {exc})")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return model


def _as_outputs(result: Any, names: list[str]) -> Arrays:
    if isinstance(result, dict):
        return {name: np.asarray(result[name]) for name in names}
    if isinstance(result, tuple | list):
        if len(result) != len(names):
            raise LoadError(f"the model returned {len(result)} values for {len(names)} outputs")
        return {name: np.asarray(value) for name, value in zip(names, result, strict=True)}
    return {names[0]: np.asarray(result)}


class PytfrtServable(Servable):
    """A ``CompiledModel``; requests are ``call_async`` calls, or direct calls (:meth:`run`) on
    the request's task when the model's ``@main`` is a sync function (it then computes on the
    calling thread: ``CompiledModel.call_source`` is set)."""

    def __init__(self, model: Any, description: str) -> None:
        self._model = model
        self.signature = ServingSignature.from_specs(model.signature.inputs,
                                                     model.signature.outputs)
        self._output_names = self.signature.output_names
        self.description = description
        self.runs_inline = bool(getattr(model, "call_source", ""))

    def predict_async(self, inputs: Arrays) -> AsyncValue[Arrays]:
        names = self._output_names
        return then(self._model.call_async(**inputs), lambda result: _as_outputs(result, names))

    def run(self, inputs: Arrays) -> Arrays:
        from pytfrt.model import ModelError

        try:
            result = self._model(**inputs)
        except ModelError as exc:  # as call_async reports it: the kernel's message
            raise ServingError(str(exc), ErrorCode.INTERNAL) from None
        return _as_outputs(result, self._output_names)

    def close(self) -> None:
        self._model = None


def load(path: Path, fmt: str, host: HostContext, options: LoadOptions) -> Servable:
    """Load a compiled model, or compile a SavedModel / ONNX model (through the cache)."""
    try:
        import pytfrt.model
    except ImportError as exc:
        raise LoadError(f"the pytfrt backend needs pytfrt.model ({exc})") from None
    import pytfrt

    if fmt == COMPILED:
        return PytfrtServable(pytfrt.load(str(path), host=host), "pytfrt compiled model")
    model = compile_cached(path, fmt, options.cache_dir,
                           lambda line: print(line, file=sys.stderr, flush=True), host)
    return PytfrtServable(model, f"pytfrt, compiled from {fmt}")
