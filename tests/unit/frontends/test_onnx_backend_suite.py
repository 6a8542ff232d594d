"""ONNX's own backend node suite (``onnx.backend.test.BackendTest``) on ``pytfrt.onnx_backend``.

Every single-operator case the installed ``onnx`` generates runs here through ONNX's runner,
which compares outputs with its expected ones (count, shape, dtype, ``rtol=1e-3, atol=1e-5``).
The cases expected to fail are listed in ``onnx_node_xfail.txt`` (next to this file), one per
line with the reason; they are marked as unittest expected failures, so a case that starts
passing fails the run ("unexpected success") until it is taken off the list.  Regenerate the
list after a change with::

    python benchmarks/onnx_conformance.py --no-ort \
        --write-xfail tests/unit/frontends/onnx_node_xfail.txt

Only the node cases run (the model-zoo kinds need downloads), and only their CPU variants
are made (pytfrt has no CUDA device: the ``_cuda`` twins would be collected only to be
skipped).  ONNX's loader gives every case read-only input arrays, and the session runs every
kernel on read-only operands (``PYTFRT_READONLY_OPERANDS``, ``tests/conftest.py``): a kernel
that writes an input fails its case.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

onnx = pytest.importorskip("onnx")

from onnx.backend.test import BackendTest  # noqa: E402

from pytfrt import onnx_backend  # noqa: E402

XFAIL_FILE = Path(__file__).with_name("onnx_node_xfail.txt")


def expected_failures() -> dict[str, str]:
    """Case name -> reason, from ``onnx_node_xfail.txt`` (``name<TAB>reason`` lines)."""
    out: dict[str, str] = {}
    for line in XFAIL_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.partition("\t")
            out[name.strip()] = reason.strip()
    return out


class _CpuNodeTests(BackendTest):
    """ONNX's runner making the node cases for the CPU device only: pytfrt has no CUDA
    device, so the ``_cuda`` twin of every case would only be collected and skipped; the
    model-zoo kinds (which need downloads) are not made either."""

    def _add_model_test(self, model_test: Any, kind: str) -> None:
        if kind == "Node":
            super()._add_model_test(model_test, kind)

    def _add_test(self, category: str, test_name: str, test_func: Any, report_item: Any,
                  devices: Any = ("CPU",), **kwargs: Any) -> None:
        super()._add_test(category, test_name, test_func, report_item, ("CPU",), **kwargs)


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the case generators' own numpy overflow warnings
    _suite = _CpuNodeTests(onnx_backend, __name__)
    for _name in expected_failures():
        _suite.xfail(rf"^{re.escape(_name)}_cpu$")
    OnnxBackendNodeModelTest = _suite.test_cases["OnnxBackendNodeModelTest"]


def test_xfail_list_names_real_cases() -> None:
    """Every listed expected failure is a case of the installed onnx (no stale entries)."""
    names = {n[: -len("_cpu")] for n in dir(OnnxBackendNodeModelTest) if n.endswith("_cpu")}
    stale = sorted(set(expected_failures()) - names)
    assert not stale, f"not node cases of onnx {onnx.__version__}: {stale[:10]}"
    assert len(names) > 1000
