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
import functools
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "pytfrt"

# layer -> the pytfrt layers it may import (its own layer is always allowed).  Every module has
# a layer: a package's name, or for a top-level module its entry in MODULE_LAYERS; only
# ``pytfrt/__init__.py`` itself is ROOT.
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
RUNTIME = {"support", "host", "bef", "executor", "kernels", "tensor", "backends"}
MODULE_LAYERS = {
    # pytfrt.config reads the PYTFRT_* switches: stdlib only, usable by every layer.
    "pytfrt.config": "support",
    # The eager API over core_runtime, and the user-facing tracing facade.
    "pytfrt.eager": "eager",
    "pytfrt.tracing": "eager",
    # A compiled model's runtime side (CompiledModel, load) and its signature: runtime layers
    # only, never the compiler, xDSL, TensorFlow or ONNX.
    "pytfrt.model": "model",
    "pytfrt.signature": "model",
    # pytfrt's own kernel libraries: names modules of every runtime layer (lazily, by name).
    "pytfrt.kernel_libraries": "kernel_libraries",
    # @pytfrt.function, grad, cond...: Python traced into the graph dialect (the compiler).
    "pytfrt.function": "function",
    # ONNX's backend API over pytfrt.compile: a compiler front door, like pytfrt.function.
    "pytfrt.onnx_backend": "function",
    # pytfrt.keras.fit: compiles a Keras model's train step with pytfrt.compile (TF lazily).
    "pytfrt.keras": "function",
    # pytfrt.quantize: calibrates and rewrites a model's graph, then pytfrt.compile's back end.
    "pytfrt.quantization": "function",
}
ALLOWED["eager"] = ALLOWED["core_runtime"] | {"core_runtime"}
ALLOWED["kernel_libraries"] = {
    "support", "host", "kernels", "tensor", "backends", "core_runtime", "playground",
    "distributed",
}
ALLOWED["model"] = RUNTIME | {"kernel_libraries"}
# The compiler (graph dialect, passes, lowering; imports xDSL) sits on top of the runtime and the
# MLIR front end.
BELOW_COMPILER = set(ALLOWED) | {"model"}
ALLOWED["compiler"] = BELOW_COMPILER
ALLOWED["function"] = BELOW_COMPILER | {"compiler"}
ALLOWED["testing"] = BELOW_COMPILER
# The model server sits on top of the runtime and the compiler (it compiles SavedModel/ONNX
# versions on load); only tools import it.  The distributed runtime on Ray runs programs and
# compiled models on Ray actors; only tools (and the lazy kernel-library list) name it, and it is
# the only package that imports Ray (lazily, see the test below).
ALLOWED["serving"] = BELOW_COMPILER | {"compiler"}
ALLOWED["distributed"] = BELOW_COMPILER | {"compiler"}
ALLOWED["tools"] = set(ALLOWED)
# ``pytfrt/__init__.py`` imports no layer at import time, so ``import pytfrt`` stays cheap: its
# public names are imported on first use, by name (PEP 562 ``__getattr__``).
ROOT = "<root>"
ALLOWED[ROOT] = set()
ROOT_LAZY = {"function", "model", "compiler"}  # the public names and errors
"""What ``pytfrt/__init__.py`` may import lazily by name."""
BY_NAME_EXCEPTIONS = {
    # An entry-point group's name, not a module reference.
    ("pytfrt.host.kernel_libraries", "pytfrt.kernels"),
    # The MLIR front end's context loads the compiler's `tg` dialect by name when it exists, so
    # that every tool parses graph-dialect files (a dialect registered by name, as kernel
    # libraries are; the mlir layer never imports the compiler).
    ("pytfrt.mlir.context", "pytfrt.compiler.dialect"),
}
"""``(module, name)``: strings the by-name check accepts, each with its reason."""


@dataclass(frozen=True)
class Import:
    """One imported module name, where it appears, and how it is executed."""

    module: str
    line: int
    in_function: bool
    type_checking_only: bool
    by_name: bool = False  # a string: import_module("..."), or a name in a lazy table


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(name: str) -> str:
    parts = name.split(".")
    top = ".".join(parts[:2])
    if top in MODULE_LAYERS:
        return MODULE_LAYERS[top]
    if len(parts) > 1 and (PKG / parts[1]).is_dir():
        return parts[1]
    if len(parts) > 1:
        raise AssertionError(f"top-level module {top} has no layer in MODULE_LAYERS")
    return ROOT


_IMPORT_CALLS = {"import_module", "__import__", "find_spec"}


@functools.cache
def _module_names() -> frozenset[str]:
    return frozenset(module_name(p) for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def string_imports(tree: ast.Module, modules: frozenset[str]) -> list[tuple[str, int, bool]]:
    """Imports by name: ``(module, line, in_function)``.

    * a call ``import_module(X)`` / ``__import__(X)`` / ``find_spec(X)`` whose ``X`` is a string
      literal or a module-level name bound to one;
    * in a module that makes such calls at all (with any argument), every other string literal
      (not a docstring) that is exactly the name of a ``pytfrt`` module: the lazy tables
      (kernel libraries, PEP 562 attributes, serving backends) name modules to import later.
    """
    constants = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        and isinstance(n.value.value, str)
        for t in n.targets if isinstance(t, ast.Name)
    }
    found: list[tuple[str, int, bool]] = []
    calls = False
    docstrings = _docstrings(tree)
    literals: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        nonlocal calls
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call):
                f = child.func
                fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if fname in _IMPORT_CALLS:
                    calls = True
                    arg = child.args[0] if child.args else None
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        found.append((arg.value, child.lineno, in_function))
                    elif isinstance(arg, ast.Name) and arg.id in constants:
                        found.append((constants[arg.id], child.lineno, in_function))
            elif (isinstance(child, ast.Constant) and isinstance(child.value, str)
                  and id(child) not in docstrings and child.value in modules):
                literals.append((child.value, child.lineno, in_function))
            visit(child, in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(tree, False)
    if calls:
        found.extend(lit for lit in literals if lit not in found)
    return found


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
    for module, line, in_function in string_imports(tree, _module_names()):
        found.append(Import(module, line, in_function, False, by_name=True))
    return found


def all_modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


MODULES = all_modules()


def test_the_packages_of_the_layout_are_known() -> None:
    existing = {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__"}
    unknown = existing - set(ALLOWED)
    assert not unknown, f"packages missing from the layering table: {sorted(unknown)}"
    assert {"support", "host"} <= existing


def layering_violations(path: Path, name: str | None = None) -> list[str]:
    """The imports of ``path`` (module ``name``) that its layer may not make."""
    name = name if name is not None else module_name(path)
    layer = layer_of(name)
    allowed = ALLOWED[layer] | {layer}
    violations = []
    for imp in imports_of(path, name):
        if imp.module.startswith("pytfrt."):
            if imp.by_name and (name, imp.module) in BY_NAME_EXCEPTIONS:
                continue
            target = layer_of(imp.module)
            if layer == ROOT and imp.by_name:
                ok = target in ROOT_LAZY  # PEP 562: imported on first use
            else:
                ok = target in allowed
            if not ok:
                how = " by name" if imp.by_name else ""
                violations.append(f"line {imp.line}: {layer} imports {imp.module}{how}")
        elif layer == "support":
            top = imp.module.split(".")[0]
            if top and top not in sys.stdlib_module_names and top != "__future__":
                violations.append(f"line {imp.line}: support imports non-stdlib {imp.module}")
    return violations


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_module_imports_only_lower_layers(path: Path) -> None:
    name = module_name(path)
    assert layering_violations(path) == [], f"{name} breaks the layering of docs/layout.md"


def test_the_checker_fails_on_planted_string_and_top_level_imports(tmp_path: Path) -> None:
    # Imports by name and of top-level modules count: a host module naming the compiler in
    # import_module (directly or through a constant), a lazy table, or importing pytfrt.model.
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import importlib\n"
        "PROVIDER = 'pytfrt.backends.cpu.fusible_kernels'\n"
        "TABLE = {'x': 'pytfrt.compiler.api'}\n"
        "def f():\n"
        "    importlib.import_module('pytfrt.compiler.lowering')\n"
        "    return importlib.import_module(PROVIDER)\n"
        "def g():\n"
        "    from pytfrt.model import load\n"
        "    return load\n"
    )
    found = layering_violations(sample, "pytfrt.host.sample")
    assert sorted(found) == [
        "line 2: host imports pytfrt.backends.cpu.fusible_kernels by name",
        "line 3: host imports pytfrt.compiler.api by name",
        "line 5: host imports pytfrt.compiler.lowering by name",
        "line 6: host imports pytfrt.backends.cpu.fusible_kernels by name",
        "line 8: host imports pytfrt.model",
    ]
    # The same file as a module of a layer that may import all of them passes.
    assert layering_violations(sample, "pytfrt.tools.sample") == []


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
