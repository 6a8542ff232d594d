"""The public surface of ``pytfrt.host``: what ``__all__`` promises exists and is documented."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import types
from pathlib import Path
from typing import Any

import pytest

import pytfrt.host
import pytfrt.testing

HOST_ALL = list(pytfrt.host.__all__)


def attribute_docstrings(module: types.ModuleType) -> dict[str, str]:
    """Docstrings written right after module-level assignments (``X = ...`` then a string)."""
    source = Path(inspect.getfile(module)).read_text()
    body = ast.parse(source).body
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            for target in targets:
                if isinstance(target, ast.Name):
                    docs[target.id] = after.value.value
    return docs


def documentation(name: str) -> str:
    obj = getattr(pytfrt.host, name)
    if inspect.isclass(obj) or inspect.isfunction(obj):
        return inspect.getdoc(obj) or ""
    # Aliases and constants: an attribute docstring in a host module, else their class's doc.
    for info in pkgutil.iter_modules(pytfrt.host.__path__):
        module = importlib.import_module(f"pytfrt.host.{info.name}")
        doc = attribute_docstrings(module).get(name)
        if doc:
            return doc
    cls = type(obj)
    if not cls.__module__.startswith("pytfrt."):
        return ""
    return inspect.getdoc(cls) or ""


def test_all_is_unique_and_complete() -> None:
    assert len(HOST_ALL) == len(set(HOST_ALL))
    public = {
        n
        for n, v in vars(pytfrt.host).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert public == set(HOST_ALL), "re-exported names must be listed in __all__ (and only those)"


@pytest.mark.parametrize("name", HOST_ALL)
def test_public_name_exists_and_is_documented(name: str) -> None:
    assert hasattr(pytfrt.host, name)
    doc = documentation(name)
    assert doc.strip(), f"pytfrt.host.{name} has no docstring"


def public_members(cls: type) -> list[tuple[str, Any]]:
    return [
        (n, v)
        for n, v in vars(cls).items()
        if not n.startswith("_")
        and (inspect.isfunction(v) or isinstance(v, property | staticmethod | classmethod))
    ]


CLASSES = [n for n in HOST_ALL if inspect.isclass(getattr(pytfrt.host, n))]


@pytest.mark.parametrize("name", CLASSES)
def test_public_methods_are_documented(name: str) -> None:
    cls = getattr(pytfrt.host, name)
    missing = [m for m, _ in public_members(cls) if not inspect.getdoc(getattr(cls, m))]
    assert missing == [], f"{name}: undocumented public members {missing}"


@pytest.mark.parametrize("package", [pytfrt.host, pytfrt.testing], ids=["host", "testing"])
def test_every_module_opens_with_a_docstring(package: types.ModuleType) -> None:
    undocumented = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if not (module.__doc__ or "").strip():
            undocumented.append(info.name)
    assert not (package.__doc__ or "").strip() == ""
    assert undocumented == []


def test_kernel_manual_lives_on_the_registry_module() -> None:
    # The README points kernel authors at pytfrt.host.kernel / the registry module docstring.
    doc = importlib.import_module("pytfrt.host.registry").__doc__ or ""
    for topic in ("Attr[T]", "RemainingAttrs", "KernelFrame", "trailing chain rule", "sync=True"):
        assert topic in doc
