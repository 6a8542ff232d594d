"""The import rules of docs/layout.md, checked on the source with the ``ast`` module.

Every module under ``src/pytfrt`` is parsed (not imported).  Each ``import``/``from ... import``
anywhere in it -- module level, inside functions, under ``TYPE_CHECKING`` -- that names a
``pytfrt`` package must name one the module's layer may use.  ``support`` may import only the
standard library; top-level facade modules (``pytfrt.eager``, ``pytfrt.tracing``) may use every
runtime layer, and ``pytfrt/__init__.py`` none.  xDSL (the compiler front end) may be imported
only by ``pytfrt.mlir`` and ``pytfrt.compiler``, and by ``pytfrt.tools`` inside functions, so
running a ``.bef`` file never loads the compiler; a subprocess check confirms it for the
runtime entry points.
Packages that do not exist yet are skipped.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "pytfrt"

# layer -> the pytfrt layers it may import (its own layer is always allowed).
ALLOWED: dict[str, set[str]] = {
    "support": set(),
    "host": {"support"},
    "bef": {"support"},
    "executor": {"host", "bef", "support"},
    "kernels": {"host", "support"},
    "tensor": {"host", "support"},
    "backends": {"host", "tensor", "support"},
    "playground": {"host", "tensor", "backends", "support"},
    "core_runtime": {"host", "tensor", "backends", "executor", "bef", "support"},
    "mlir": {"support", "bef"},
}
# Top-level modules that are layers of their own: pytfrt.eager is the eager API over core_runtime.
MODULE_LAYERS = {"pytfrt.eager": "eager"}
ALLOWED["eager"] = ALLOWED["core_runtime"] | {"core_runtime"}
EVERYTHING = set(ALLOWED) | {"tools", "testing"}
ALLOWED["tools"] = EVERYTHING
ALLOWED["testing"] = EVERYTHING - {"tools"}
# The compiler (graph dialect, passes, lowering; imports xDSL) sits on top of the runtime and the
# MLIR front end.  pytfrt.model (CompiledModel, load) is the runtime side of a compiled model:
# runtime layers only, never the compiler, xDSL, TensorFlow or ONNX.
MODULE_LAYERS["pytfrt.model"] = "model"
ALLOWED["model"] = {"support", "host", "bef", "executor", "kernels", "tensor", "backends"}
EVERYTHING = EVERYTHING | {"model"}
ALLOWED["compiler"] = EVERYTHING - {"tools", "testing"}
EVERYTHING = EVERYTHING | {"compiler"}
ALLOWED["tools"] = ALLOWED["tools"] | {"compiler"}
# The model server sits on top of the runtime and the compiler (it compiles SavedModel/ONNX
# versions on load); only tools import it.
ALLOWED["serving"] = (EVERYTHING - {"tools", "testing"}) | {"compiler"}
ALLOWED["tools"] = EVERYTHING | {"serving"}
# The distributed runtime on Ray runs programs and compiled models on Ray actors; only tools
# import it, and it is the only package that imports Ray (lazily, see the test below).
ALLOWED["distributed"] = (EVERYTHING - {"tools", "testing"}) | {"compiler"}
ALLOWED["tools"] = ALLOWED["tools"] | {"distributed"}
# Other top-level modules (``pytfrt.tracing``) are user-facing facades over the runtime layers:
# any runtime layer, but not tools or testing.  ``pytfrt/__init__.py`` itself imports no layer,
# so ``import pytfrt`` stays cheap.
ROOT = "<root>"
ALLOWED[ROOT] = EVERYTHING - {"tools", "testing"}


@dataclass(frozen=True)
class Import:
    """One imported module name, where it appears, and how it is executed."""

    module: str
    line: int
    in_function: bool
    type_checking_only: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(name: str) -> str:
    if name in MODULE_LAYERS:
        return MODULE_LAYERS[name]
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and (PKG / parts[1]).is_dir() else ROOT


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, name: str | None = None) -> list[Import]:
    """Every import in ``path`` (module ``name``), relative imports resolved to absolute."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = name if name is not None else module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(alias.name, child.lineno, in_function, type_checking))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.append(Import(target, child.lineno, in_function, type_checking))
                if not child.module:  # "from . import x": x may be a submodule
                    for alias in child.names:
                        found.append(
                            Import(f"{target}.{alias.name}", child.lineno, in_function,
                                   type_checking)
                        )
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, True, type_checking)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), in_function, True)
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), in_function, type_checking)
            else:
                visit(child, in_function, type_checking)

    visit(tree, False, False)
    return found


def all_modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


MODULES = all_modules()


def test_the_packages_of_the_layout_are_known() -> None:
    existing = {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__"}
    unknown = existing - set(ALLOWED)
    assert not unknown, f"packages missing from the layering table: {sorted(unknown)}"
    assert {"support", "host"} <= existing


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_module_imports_only_lower_layers(path: Path) -> None:
    name = module_name(path)
    layer = layer_of(name)
    allowed = ALLOWED[layer] | {layer}
    violations = []
    for imp in imports_of(path):
        if imp.module.startswith("pytfrt."):
            target = layer_of(imp.module)
            if name == "pytfrt" or (target != ROOT and target not in allowed):
                violations.append(f"line {imp.line}: {layer} imports {imp.module}")
        elif layer == "support":
            top = imp.module.split(".")[0]
            if top and top not in sys.stdlib_module_names and top != "__future__":
                violations.append(f"line {imp.line}: support imports non-stdlib {imp.module}")
    assert violations == [], f"{name} breaks the layering of docs/layout.md"


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_only_mlir_imports_xdsl(path: Path) -> None:
    name = module_name(path)
    layer = layer_of(name)
    if layer in ("mlir", "compiler"):
        return
    bad = []
    for imp in imports_of(path):
        if imp.module.split(".")[0] != "xdsl" or imp.type_checking_only:
            continue
        if layer == "tools" and imp.in_function:
            continue  # tools may load the compiler on demand
        bad.append(f"line {imp.line}: {imp.module}")
    assert bad == [], f"{name} imports xDSL outside pytfrt.mlir"


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_only_distributed_imports_ray_and_only_lazily(path: Path) -> None:
    # Ray is the optional extra pytfrt[ray]: importing any pytfrt module must not load it.
    name = module_name(path)
    bad = [
        f"line {imp.line}: {imp.module}"
        for imp in imports_of(path)
        if imp.module.split(".")[0] == "ray"
        and not imp.type_checking_only
        and (layer_of(name) != "distributed" or not imp.in_function)
    ]
    assert bad == [], f"{name} imports Ray outside functions of pytfrt.distributed"


RUNTIME_ENTRY_POINTS = [
    "pytfrt.host",
    "pytfrt.bef",
    "pytfrt.executor",
    "pytfrt.kernels",
    "pytfrt.tensor",
    "pytfrt.tools.bef_executor",
    "pytfrt.model",
]


def test_runtime_entry_points_do_not_load_xdsl() -> None:
    import importlib.util

    present = [m for m in RUNTIME_ENTRY_POINTS if importlib.util.find_spec(m) is not None]
    code = (
        "import importlib, sys\n"
        f"for m in {present!r}:\n"
        "    importlib.import_module(m)\n"
        "print(sorted({k.split('.')[0] for k in sys.modules if k.split('.')[0] == 'xdsl'}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, f"importing {present} failed:\n{out.stderr}"
    assert out.stdout.strip() == "[]", f"importing {present} loaded xDSL"


def test_the_checker_sees_violations(tmp_path: Path) -> None:
    # The AST walk must find imports in every position it claims to check.
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "import xdsl.ir\n"
        "if TYPE_CHECKING:\n"
        "    from pytfrt.executor import x\n"
        "def f():\n"
        "    from pytfrt.mlir import y\n"
        "    import numpy\n"
        "from .registry import kernel\n"
        "from .. import bef\n"
    )
    imports = imports_of(sample, "pytfrt.host.sample")
    found = {(i.module, i.in_function, i.type_checking_only) for i in imports}
    assert found >= {
        ("xdsl.ir", False, False),
        ("pytfrt.executor", False, True),
        ("pytfrt.mlir", True, False),
        ("numpy", True, False),
        ("pytfrt.host.registry", False, False),
        ("pytfrt.bef", False, False),
    }
