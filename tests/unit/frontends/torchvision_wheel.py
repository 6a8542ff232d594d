"""torchvision's model definitions, read out of its wheel without installing torchvision.

Why: the torchvision wheels the package registry has are built against the CUDA build of torch;
beside the CPU build of torch that the project pins, ``import torchvision`` fails (its C++ ops do
not load: ``operator torchvision::nms does not exist``), and ``transformers`` imports torchvision
whenever it is installed -- installing it would break the BERT/GPT-2 tests.  The classification
model definitions (``torchvision/models/resnet.py``, ``mobilenetv3.py`` ...) are plain Python on
top of ``torch.nn``; this module serves them, unchanged, from the wheel's zip under a private
package name (``_tv_wheel``), so that nothing named ``torchvision`` is importable or imported.

* :func:`wheel_path` finds the wheel: ``$PYTFRT_TORCHVISION_WHEEL``, else a cached download in
  ``~/.cache/pytfrt/wheels`` made with ``pip download --no-deps`` (pip's ordinary client; the
  version is the one that pairs with the pinned torch).  ``None`` when neither works.
* :func:`load_models` returns ``{"resnet": <module>, ...}`` for the model files asked for.

Three package ``__init__`` files are left out (the root's, ``ops``' and ``transforms``': they
import the C++ ops and the image decoders), and ``transforms/_presets.py`` -- the preprocessing
that pretrained weights record, never called by a model -- is replaced by two placeholder
names.  Everything else a model file imports (``ops/misc.py``, ``utils.py``, ``models/_api.py``,
``_utils.py`` ...) is torchvision's own file.  Not thread-safe (it edits ``sys.modules`` and
``sys.meta_path``); call it from a session fixture.
"""

from __future__ import annotations

import enum
import importlib.abc
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

# The torchvision release that pairs with the torch pinned in pyproject.toml (torch 2.13).
TORCHVISION_VERSION = "0.28.0"
PACKAGE = "_tv_wheel"
_EMPTY_PACKAGES = {"", "models", "ops", "transforms"}


def wheel_path(cache: Path | None = None) -> Path | None:
    """The torchvision wheel: ``$PYTFRT_TORCHVISION_WHEEL``, else a cached ``pip download``."""
    env = os.environ.get("PYTFRT_TORCHVISION_WHEEL")
    if env:
        return Path(env) if Path(env).is_file() else None
    cache = cache or Path.home() / ".cache" / "pytfrt" / "wheels"
    pattern = f"torchvision-{TORCHVISION_VERSION}-*.whl"
    found = sorted(cache.glob(pattern))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".download-{os.getpid()}"
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--dest", str(tmp), f"torchvision=={TORCHVISION_VERSION}"]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return None
    for whl in tmp.glob(pattern):
        os.replace(whl, cache / whl.name)  # atomic: a concurrent worker sees all or nothing
    for leftover in tmp.iterdir():
        leftover.unlink()
    tmp.rmdir()
    found = sorted(cache.glob(pattern))
    return found[0] if found else None


class _Presets(ModuleType):
    """Stand-in for ``transforms/_presets.py``: the names model files record with weights."""

    class ImageClassification:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("torchvision preprocessing presets are not loaded from the wheel")

    class InterpolationMode(enum.Enum):
        NEAREST = "nearest"
        BILINEAR = "bilinear"
        BICUBIC = "bicubic"


class _WheelFinder(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Serves ``_tv_wheel.X.Y`` from ``torchvision/X/Y.py`` in the wheel."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.names = set(archive.namelist())

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != PACKAGE and not fullname.startswith(PACKAGE + "."):
            return None
        rel = fullname[len(PACKAGE) + 1:].replace(".", "/")
        is_pkg = rel in _EMPTY_PACKAGES or f"torchvision/{rel}/__init__.py" in self.names
        known = f"torchvision/{rel}.py" in self.names or rel == "transforms/_presets"
        if not (is_pkg or known):
            return None
        spec = importlib.machinery.ModuleSpec(fullname, self, is_package=is_pkg)
        if is_pkg:
            spec.submodule_search_locations = []
        return spec

    def create_module(self, spec: Any) -> ModuleType | None:
        if spec.name == f"{PACKAGE}.transforms._presets":
            return _Presets(spec.name)
        return None

    def _file(self, fullname: str) -> str | None:
        rel = fullname[len(PACKAGE) + 1:].replace(".", "/")
        if rel in _EMPTY_PACKAGES or rel == "transforms/_presets":
            return None
        file = f"torchvision/{rel}.py"
        return file if file in self.names else f"torchvision/{rel}/__init__.py"

    def get_source(self, fullname: str) -> str | None:
        # also what ``inspect.getsource`` reads (torch.jit looks at the model classes' source)
        file = self._file(fullname)
        return None if file is None else self.archive.read(file).decode()

    def exec_module(self, module: ModuleType) -> None:
        file = self._file(module.__name__)
        if file is None:
            return
        module.__file__ = f"{self.archive.filename}/{file}"
        code = compile(self.get_source(module.__name__) or "", module.__file__, "exec")
        exec(code, module.__dict__)  # noqa: S102


def load_models(wheel: Path, names: Sequence[str]) -> dict[str, ModuleType]:
    """``{name: torchvision.models.<name> as a module}`` read from ``wheel``."""
    if not any(isinstance(f, _WheelFinder) for f in sys.meta_path):
        sys.meta_path.append(_WheelFinder(zipfile.ZipFile(wheel)))
    return {n: importlib.import_module(f"{PACKAGE}.models.{n}") for n in names}
