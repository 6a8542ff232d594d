"""``pytfrt bench models``: the model zoo through pytfrt vs ONNX Runtime, TF and PyTorch.

The harness is ``benchmarks/models.py`` (with the exporters in ``benchmarks/zoo.py``); this
module only loads it from the source tree by path (the benchmarks are not part of the installed
package) and forwards ``add_arguments``/``run``.  Outside a source checkout the command says so
and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS_DIR = Path(__file__).resolve().parents[3] / "benchmarks"
_MODULE = "pytfrt_bench_models"


def _harness() -> ModuleType | None:
    mod = sys.modules.get(_MODULE)
    if mod is not None:
        return mod
    path = BENCHMARKS_DIR / "models.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    if spec is None or spec.loader is None:
        return None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE] = mod
    spec.loader.exec_module(mod)
    return mod


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The harness's options (none outside a source checkout)."""
    mod = _harness()
    if mod is not None:
        mod.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the harness; 2 if ``benchmarks/models.py`` is not there."""
    mod = _harness()
    if mod is None:
        print(
            f"pytfrt bench models: {BENCHMARKS_DIR / 'models.py'} not found (the model "
            "benchmark runs from a source checkout)",
            file=sys.stderr,
        )
        return 2
    return int(mod.run(args))
