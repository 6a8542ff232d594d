"""The model manager: which versions of which models are served, loading, hot swap, unloading.

Layout on disk is TF Serving's: a model's ``base_path`` holds one directory per version, named
by a non-negative integer (``BASE/1/``, ``BASE/2/``...); other entries are ignored.  The
model's version policy (``latest`` N, default 1; ``all``; ``specific``) picks the versions to
serve among those present.

Life of a version (its ``state`` in the status API): ``START`` -> ``LOADING`` -> ``AVAILABLE``
-> ``UNLOADING`` -> ``END``; a version that fails to load goes to ``END`` with the error in its
status, is retried on the next polls (:data:`MAX_LOAD_ATTEMPTS` in all), and does not displace
the version being served.

Hot swap, without failing a request: the poller loads a new version *before* retiring an old
one (availability first, as TF Serving's default policy); requests pin the version they resolve
with :meth:`ModelManager.acquire`, which counts them; a retired version leaves the routing table
at once but is closed only when its last pinned request has released it (on a blocking runtime
thread, never on the event loop).

Threads: :meth:`ModelManager.poll` runs on the caller's thread (the first poll at start-up) and
then on the poller thread every ``poll_seconds``; ``acquire``/``release``, ``status`` and
``metadata`` may be called from any thread (the event loop) and only take a short lock.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pytfrt.host import AsyncValue, HostContext
from pytfrt.serving.batching import Batcher
from pytfrt.serving.config import BatchingParameters, ModelConfig
from pytfrt.serving.errors import ServingError, invalid, not_found
from pytfrt.serving.metrics import ServingMetrics
from pytfrt.serving.servable import Arrays, LoadOptions, Servable, load_servable
from pytfrt.serving.signature import signature_def_json
from pytfrt.support.errors import ErrorCode

MAX_LOAD_ATTEMPTS: Final = 3

START, LOADING, AVAILABLE, UNLOADING, END = "START", "LOADING", "AVAILABLE", "UNLOADING", "END"


@dataclass
class VersionStatus:
    """What the status API reports for one version."""

    state: str = START
    error_code: ErrorCode = ErrorCode.OK
    error_message: str = ""
    attempts: int = 0


class LoadedVersion:
    """One loaded version: its servable, optional batcher, and the count of pinned requests."""

    def __init__(self, model: str, version: int, servable: Servable,
                 batcher: Batcher | None) -> None:
        self.model = model
        self.version = version
        self.servable = servable
        self.batcher = batcher
        self.signature = servable.signature
        self.pinned = 0
        self.retired = False

    def predict_async(self, inputs: Arrays) -> AsyncValue[Arrays]:
        """Run one request, through the batcher when batching is on (any thread)."""
        if self.batcher is not None:
            return self.batcher.submit(inputs)
        return self.servable.predict_async(inputs)


@dataclass
class _Model:
    config: ModelConfig
    served: dict[int, LoadedVersion] = field(default_factory=dict)
    status: dict[int, VersionStatus] = field(default_factory=dict)
    missing: bool = False
    """The base path did not exist at the last poll."""


INT64_MAX: Final = 2**63 - 1
_ASCII_DIGITS: Final = re.compile(r"[0-9]{1,19}")


def parse_version(text: str | None) -> int | None:
    """A version from a URL segment: ASCII digits within int64, as TF Serving's ``int64``.

    ``str.isdigit`` would take ``"\u0661"`` (ARABIC-INDIC ONE, which ``int`` reads as 1) and
    ``"\u00b2"`` (which ``int`` refuses); neither is a version.

    Raises:
        ServingError: ``INVALID_ARGUMENT`` (HTTP 400) for anything else.
    """
    if text is None:
        return None
    if _ASCII_DIGITS.fullmatch(text) is None or int(text) > INT64_MAX:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise invalid(f"Failed to convert version: {shown} to numeric")
    return int(text)


def _version_dirs(base: Path) -> dict[int, Path]:
    try:
        entries = list(base.iterdir())
    except OSError:
        return {}
    return {int(p.name): p for p in entries if p.name.isdigit() and p.is_dir()}


class ModelManager:
    """Serves the models of ``configs`` (see the module docstring).

    Args:
        configs: the models.
        backend: ``pytfrt``, ``tensorflow`` or ``onnxruntime``.
        host: the runtime; model work and unloading run on its work queue.
        metrics: where batch sizes are recorded.
        batching: batching parameters, or ``None`` to run each request on its own.
        load_options: the compile cache and thread settings backends load models with.
        log: where progress lines go (default: stderr).
        warmup: called as ``warmup(servable, version_dir)`` after a version loads and before
            it serves (``--enable_model_warmup``); an exception fails the load.
    """

    def __init__(self, configs: list[ModelConfig], backend: str, host: HostContext,
                 metrics: ServingMetrics, batching: BatchingParameters | None = None,
                 load_options: LoadOptions | None = None,
                 log: Callable[[str], None] | None = None,
                 warmup: Callable[[Servable, Path], int] | None = None) -> None:
        self.backend = backend
        self._warmup = warmup
        self._host = host
        self._metrics = metrics
        self._batching = batching
        self._load_options = load_options or LoadOptions()
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._models = {c.name: _Model(c) for c in configs}
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    # -- polling ----------------------------------------------------------------------------

    def start(self, poll_seconds: float) -> None:
        """Poll once now (loading the initial versions), then every ``poll_seconds`` if > 0."""
        self.poll()
        if poll_seconds > 0:
            self._poller = threading.Thread(target=self._poll_loop, args=(poll_seconds,),
                                            name="pytfrt-serve-poller", daemon=True)
            self._poller.start()

    def _poll_loop(self, seconds: float) -> None:
        while not self._stop.wait(seconds):
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - the poller must survive anything
                self._log(f"pytfrt serve: polling failed: {type(exc).__name__}: {exc}")

    def poll(self) -> None:
        """Scan every base path; load wanted versions, then retire unwanted ones."""
        with self._poll_lock:
            for model in self._models.values():
                self._poll_model(model)

    def _poll_model(self, model: _Model) -> None:
        config = model.config
        missing = not config.base_path.is_dir()
        if missing != model.missing:
            model.missing = missing
            if missing:
                self._log(f"pytfrt serve: model '{config.name}': its base path "
                          f"{config.base_path} does not exist or is not a directory; no "
                          "version can load until it does")
            else:
                self._log(f"pytfrt serve: model '{config.name}': base path "
                          f"{config.base_path} found")
        on_disk = _version_dirs(config.base_path)
        loadable = [v for v, s in ((v, model.status.get(v)) for v in on_disk)
                    if s is None or s.state != END or s.error_code == ErrorCode.OK
                    or s.attempts < MAX_LOAD_ATTEMPTS]
        wanted = config.version_policy.select(loadable)
        for version in wanted:
            if version not in model.served:
                self._load(model, version, on_disk[version])
        with self._lock:
            # Retire what is no longer wanted -- but never the last version while a wanted
            # one failed to load (availability first).
            keep = {v for v in wanted if v in model.served}
            if not keep:
                keep = set(model.served) & set(on_disk)
            retired = [lv for v, lv in model.served.items() if v not in keep]
            for lv in retired:
                del model.served[lv.version]
                lv.retired = True
                model.status[lv.version].state = UNLOADING
            idle = [lv for lv in retired if lv.pinned == 0]
        for lv in idle:
            self._unload(lv)

    def _load(self, model: _Model, version: int, path: Path) -> None:
        name = model.config.name
        status = model.status.setdefault(version, VersionStatus())
        with self._lock:
            status.state = LOADING
            status.attempts += 1
        self._log(f"pytfrt serve: model '{name}' version {version}: loading {path}")
        started = time.perf_counter()
        try:
            servable = load_servable(self.backend, path, self._host, model.config.model_platform,
                                     self._load_options)
            if self._warmup is not None:
                try:
                    replayed = self._warmup(servable, path)
                except ServingError as exc:
                    servable.close()
                    raise ServingError(f"warm-up failed: {exc.message}") from None
                if replayed:
                    self._log(f"pytfrt serve: model '{name}' version {version}: warm-up "
                              f"replayed {replayed} request(s)")
        except ServingError as exc:
            with self._lock:
                status.state = END
                status.error_code = ErrorCode.UNKNOWN
                status.error_message = exc.message
            self._log(f"pytfrt serve: model '{name}' version {version} failed to load "
                      f"(attempt {status.attempts} of {MAX_LOAD_ATTEMPTS}): {exc.message}")
            return
        batcher = None
        if self._batching is not None:
            if servable.signature.batchable:
                batcher = Batcher(servable, self._host, self._batching,
                                  self._batch_observer(name))
            else:
                self._log(f"pytfrt serve: model '{name}' version {version}: not every input and "
                          "output has a dynamic 0-th dimension, so its requests are not batched")
        loaded = LoadedVersion(name, version, servable, batcher)
        with self._lock:
            model.served[version] = loaded
            status.state = AVAILABLE
            status.error_code = ErrorCode.OK
            status.error_message = ""
        self._log(f"pytfrt serve: model '{name}' version {version} is AVAILABLE "
                  f"({servable.description or self.backend}, loaded in "
                  f"{time.perf_counter() - started:.2f} s)")

    def _batch_observer(self, name: str) -> Callable[[int, int, list[float]], None]:
        metrics = self._metrics

        def observe(rows: int, requests: int, delays: list[float]) -> None:
            metrics.batch_size.observe(rows, name)
            metrics.merged_requests.inc(name, amount=requests)
            for delay in delays:
                metrics.batch_delay.observe(delay * 1e6, name)

        return observe

    def _unload(self, lv: LoadedVersion) -> None:
        def unload() -> None:
            try:
                if lv.batcher is not None:
                    lv.batcher.close()
                lv.servable.close()
            finally:
                with self._lock:
                    self._models[lv.model].status[lv.version].state = END
                self._log(f"pytfrt serve: model '{lv.model}' version {lv.version} unloaded")

        self._host.enqueue_blocking_work(unload)

    def stop(self) -> None:
        """Stop polling and unload every version (call once requests are drained)."""
        self._stop.set()
        if self._poller is not None:
            self._poller.join()
        with self._lock:
            everything = [lv for m in self._models.values() for lv in m.served.values()]
            for model in self._models.values():
                model.served.clear()
        for lv in everything:
            lv.retired = True
            if lv.batcher is not None:
                lv.batcher.close()
            lv.servable.close()

    # -- requests -------------------------------------------------------------------------------

    def _model(self, name: str) -> _Model:
        model = self._models.get(name)
        if model is None:
            raise not_found(f"Servable not found for request: Latest({name})")
        return model

    def _resolve(self, name: str, version: int | None, label: str | None) -> int | None:
        if label is None:
            return version
        labels = self._model(name).config.version_labels
        if label not in labels:
            raise invalid(f"Unrecognized servable version label: {label}")
        return labels[label]

    def acquire(self, name: str, version: int | None = None,
                label: str | None = None) -> LoadedVersion:
        """Pin the version a request names (``None``: the highest served); release it after.

        Raises:
            ServingError: ``NOT_FOUND`` for an unknown model or a version not served,
                ``INVALID_ARGUMENT`` for an unknown label.
        """
        model = self._models.get(name)
        wanted = self._resolve(name, version, label) if model is not None else None
        with self._lock:
            if model is not None and model.served:
                lv = model.served.get(wanted) if wanted is not None \
                    else model.served[max(model.served)]
                if lv is not None:
                    lv.pinned += 1
                    return lv
        if wanted is None:
            raise not_found(f"Servable not found for request: Latest({name})")
        raise not_found(f"Servable not found for request: Specific({name}, {wanted})")

    def release(self, lv: LoadedVersion) -> None:
        """Unpin a version (any thread); the last release of a retired version unloads it."""
        with self._lock:
            lv.pinned -= 1
            unload = lv.retired and lv.pinned == 0
        if unload:
            self._unload(lv)

    # -- status and metadata ----------------------------------------------------------------------

    def status(self, name: str, version: int | None = None,
               label: str | None = None) -> dict[str, Any]:
        """The GetModelStatus response (every version, or the one named).

        Raises:
            ServingError: ``NOT_FOUND`` for an unknown model or version.
        """
        model = self._models.get(name)
        if model is None:
            raise not_found(f"Could not find any versions of model {name}")
        wanted = self._resolve(name, version, label)
        with self._lock:
            items = sorted(model.status.items(), reverse=True)
            if wanted is not None:
                items = [(v, s) for v, s in items if v == wanted]
            rows = [{
                "version": str(v),
                "state": s.state,
                "status": {"error_code": s.error_code.name, "error_message": s.error_message},
            } for v, s in items]
        if not rows:
            if model.missing:
                raise not_found(f"Could not find any versions of model {name}: its base path "
                                f"{model.config.base_path} does not exist")
            if wanted is None:
                raise not_found(f"Could not find any versions of model {name}")
            raise not_found(f"Could not find version {wanted} of model {name}")
        return {"model_version_status": rows}

    def metadata(self, name: str, version: int | None = None,
                 label: str | None = None) -> dict[str, Any]:
        """The GetModelMetadata response (``signature_def``) of the version named or served.

        Raises:
            ServingError: as :meth:`acquire`.
        """
        lv = self.acquire(name, version, label)
        try:
            return {
                "model_spec": {"name": name, "signature_name": "", "version": str(lv.version)},
                "metadata": signature_def_json(lv.signature),
            }
        finally:
            self.release(lv)

    def model_names(self) -> list[str]:
        """The configured model names."""
        return list(self._models)

    def served_versions(self, name: str) -> list[int]:
        """The versions of ``name`` requests can reach now (highest first)."""
        with self._lock:
            return sorted(self._model(name).served, reverse=True)

