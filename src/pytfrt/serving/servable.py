"""What a backend serves: the :class:`Servable` interface, version formats, backend choice.

A *servable* is one loaded version of one model: its :class:`ServingSignature` and an
asynchronous ``predict`` that takes one array per input (already validated against the
signature) and yields one array per output.  Three backends implement it behind the same HTTP
layer:

========== ============================================== ===========================
backend    runs                                           serves version directories
========== ============================================== ===========================
pytfrt     pytfrt's ``CompiledModel`` (default)           SavedModel, ``.onnx``, compiled
tensorflow the SavedModel in TensorFlow's own runtime     SavedModel
onnxruntime an ``onnxruntime.InferenceSession``           ``.onnx``
========== ============================================== ===========================

A version directory ``BASE/<version>/`` holds one of: a SavedModel (``saved_model.pb``), a
compiled pytfrt model (``model.bef`` + ``manifest.json``), or one ``.onnx`` file
(:func:`detect_format`).  Backends import TensorFlow / ONNX Runtime / the compiler lazily, in
:func:`load_servable`, so importing this module stays light.

Contract of every servable: ``predict_async`` may be called from any thread, concurrently; it
never blocks the caller on model work (that runs as a task on the host's work queue) and
reports failures as an error AsyncValue.  A servable whose ``runs_inline`` is true also has a
synchronous ``run`` that a task already on the host's work queue may call (it computes on the
calling thread and never waits for other work-queue tasks): an unbatched request then decodes,
runs and encodes in one task instead of hopping to a second one.  ``close()`` is called once,
after the last request using the servable has finished.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from pytfrt.host import AsyncValue, HostContext
from pytfrt.serving.bridge import submit
from pytfrt.serving.errors import ServingError
from pytfrt.serving.signature import ServingSignature
from pytfrt.support.errors import ErrorCode

Arrays = dict[str, np.ndarray]

BACKENDS: Final[dict[str, str]] = {
    "pytfrt": "pytfrt.serving.pytfrt_backend",
    "tensorflow": "pytfrt.serving.tf_backend",
    "onnxruntime": "pytfrt.serving.ort_backend",
}
"""Backend name -> the module defining its ``load(path, fmt, host, options)`` function."""

SAVED_MODEL: Final = "tensorflow"
ONNX: Final = "onnx"
COMPILED: Final = "pytfrt"


@dataclass(frozen=True)
class LoadOptions:
    """How backends load models (the server's flags that concern them)."""

    cache_dir: Path | None = None
    """Where the pytfrt backend keeps the models it compiles (``None``: no cache)."""
    intra_op_threads: int = 0
    """Threads one model call may use (``--tensorflow_intra_op_parallelism``); 0: the
    library's default.  TensorFlow and ONNX Runtime take it per session; pytfrt's NumPy BLAS
    reads it from the environment, which ``pytfrt serve`` sets before NumPy loads."""


class LoadError(ServingError):
    """A version directory that cannot be served by the chosen backend."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.FAILED_PRECONDITION)


class Servable:
    """One loaded model version (see the module docstring for the contract)."""

    signature: ServingSignature
    """The model's inputs and outputs."""
    description: str = ""
    """What runs it (for logs and the status API), e.g. ``tensorflow SavedModel``."""
    runs_inline: bool = False
    """True if :meth:`run` may be called on a work-queue thread (see the module docstring)."""

    def predict_async(self, inputs: Arrays) -> AsyncValue[Arrays]:
        """Run the model on ``inputs`` (name -> array); the result maps output names to arrays."""
        raise NotImplementedError

    def run(self, inputs: Arrays) -> Arrays:
        """Run the model synchronously on the calling thread (only if :attr:`runs_inline`)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the model (no request uses it any more)."""


class HostServable(Servable):
    """A servable with a synchronous :meth:`run`: :meth:`predict_async` runs it as blocking
    work on the host (``self._host``), so requests never run a model on the event loop."""

    _host: HostContext
    runs_inline = True

    def predict_async(self, inputs: Arrays) -> AsyncValue[Arrays]:
        return submit(self._host, lambda: self.run(inputs))


def require_format(backend: str, path: Path, fmt: str, served: str, what: str) -> None:
    """Raise :class:`LoadError` unless ``fmt`` is ``served``, the one format ``backend`` runs
    (``what`` names it in the message, which suggests the other backends)."""
    if fmt != served:
        others = " or ".join(f"--backend={b}" for b in BACKENDS if b != backend)
        raise LoadError(f"the {backend} backend serves {what} only; {path} is a {fmt} "
                        f"model (use {others})")


def detect_format(version_dir: Path) -> tuple[str, Path]:
    """The format of a version directory and the path its backend loads.

    Returns ``("tensorflow", dir)`` for a SavedModel, ``("pytfrt", dir)`` for a compiled
    model, ``("onnx", file)`` for a directory holding exactly one ``.onnx`` file.

    Raises:
        LoadError: if the directory holds none of them, or several ``.onnx`` files.
    """
    if (version_dir / "saved_model.pb").is_file() or (version_dir / "saved_model.pbtxt").is_file():
        return SAVED_MODEL, version_dir
    if (version_dir / "model.bef").is_file() and (version_dir / "manifest.json").is_file():
        return COMPILED, version_dir
    onnx_files = sorted(version_dir.glob("*.onnx"))
    if len(onnx_files) == 1:
        return ONNX, onnx_files[0]
    if len(onnx_files) > 1:
        names = ", ".join(p.name for p in onnx_files)
        raise LoadError(f"{version_dir} holds several .onnx files ({names}); keep one")
    raise LoadError(
        f"{version_dir} holds no model: expected saved_model.pb (SavedModel), one .onnx file, "
        "or model.bef + manifest.json (a compiled pytfrt model)"
    )


def load_servable(backend: str, version_dir: Path, host: HostContext,
                  platform: str | None = None, options: LoadOptions | None = None) -> Servable:
    """Load ``version_dir`` with ``backend`` (``pytfrt``, ``tensorflow`` or ``onnxruntime``).

    ``platform`` (a config's ``model_platform``), when given, must match the directory's format.
    ``options`` carries the compile cache and thread settings.

    Raises:
        LoadError: unknown backend, a format the backend cannot run, a platform mismatch, or a
            model the backend fails to load (the message says which and why).
    """
    if backend not in BACKENDS:
        raise LoadError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
    fmt, path = detect_format(version_dir)
    if platform is not None and platform != fmt:
        raise LoadError(f"{version_dir} holds a {fmt} model but model_platform is {platform!r}")
    try:
        module = importlib.import_module(BACKENDS[backend])
        servable: Servable = module.load(path, fmt, host, options or LoadOptions())
    except ServingError:
        raise
    except Exception as exc:
        raise LoadError(f"{backend} backend failed to load {path}: "
                        f"{type(exc).__name__}: {exc}") from exc
    return servable
