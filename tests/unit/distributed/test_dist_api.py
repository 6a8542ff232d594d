"""The public surface of pytfrt.distributed: documented, and importing it does not load Ray."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import pytfrt.distributed as dist

CLASSES = [n for n in dist.__all__ if inspect.isclass(getattr(dist, n))]


@pytest.mark.parametrize("name", dist.__all__)
def test_public_names_are_documented(name: str) -> None:
    assert (inspect.getdoc(getattr(dist, name)) or "").strip(), name


@pytest.mark.parametrize("name", CLASSES)
def test_public_methods_are_documented(name: str) -> None:
    cls = getattr(dist, name)
    missing = [
        m for m, v in vars(cls).items()
        if not m.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))
        and not inspect.getdoc(getattr(cls, m))
    ]
    assert missing == [], f"{name}: undocumented public members {missing}"


def test_importing_the_package_and_its_kernels_does_not_load_ray() -> None:
    code = ("import sys, pytfrt.distributed, pytfrt.distributed.kernels\n"
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "False"
