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
skipped).
"""

from __future__ import annotations

import functools
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx.backend.test import BackendTest  # noqa: E402

from pytfrt import onnx_backend  # noqa: E402

_CASES: list[Any] = []

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
    from onnx.backend.test.loader import load_model_tests

    _CASES.extend(load_model_tests(kind="node"))
    for _name in expected_failures():
        _suite.xfail(rf"^{re.escape(_name)}_cpu$")
    OnnxBackendNodeModelTest = _suite.test_cases["OnnxBackendNodeModelTest"]


def test_xfail_list_names_real_cases() -> None:
    """Every listed expected failure is a case of the installed onnx (no stale entries)."""
    names = {n[: -len("_cpu")] for n in dir(OnnxBackendNodeModelTest) if n.endswith("_cpu")}
    stale = sorted(set(expected_failures()) - names)
    assert not stale, f"not node cases of onnx {onnx.__version__}: {stale[:10]}"
    assert len(names) > 1000


def _frozen(op: str, fn: Any, written: set[str]) -> Any:
    """``fn`` called on read-only views of its array operands; records ``op`` if it writes."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        views = []
        for a in args:
            if isinstance(a, np.ndarray):
                a = a.view()
                a.flags.writeable = False
            views.append(a)
        try:
            return fn(*views, **kwargs)
        except ValueError as exc:
            if "read-only" in str(exc):
                written.add(op)
            raise
        finally:  # a result may alias an operand: writable again for its users
            for v in views:
                if isinstance(v, np.ndarray) and v.base is not None and v.base.flags.writeable:
                    v.flags.writeable = True

    return wrapped


def test_kernels_never_write_their_operands() -> None:
    """Every kernel the node suite reaches (one case per ONNX op) runs on read-only operands.

    On a host of its own, the compute functions are wrapped so their array operands are
    read-only views: a kernel that writes an operand raises NumPy's "read-only" error, which
    the wrapper records; the model inputs are also compared before and after each run.
    """
    from pytfrt.backends.cpu import graph_kernels
    from pytfrt.model import create_host

    table = graph_kernels.graph_ops()
    saved = dict(table)
    written: set[str] = set()
    ran = 0
    seen: set[str] = set()
    try:
        for name, fn in saved.items():
            table[name] = _frozen(name, fn, written)
        host = create_host("s")  # a new registry: its kernels are made from the wrapped table
        for case in _CASES:
            if case.name.endswith("_expanded") or not case.model.graph.node:
                continue
            op = case.model.graph.node[0].op_type
            if op in seen or not case.data_sets:
                continue
            inputs = list(case.data_sets[0][0])
            if not all(isinstance(x, np.ndarray) for x in inputs):
                continue
            seen.add(op)
            before = [a.copy() for a in inputs]
            try:
                onnx_backend.prepare(case.model, host=host).run(inputs)
                ran += 1
            except Exception:  # noqa: BLE001 - unsupported cases are the suite's business
                continue
            for a, b in zip(inputs, before, strict=True):
                if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
                    written.add(f"the input of {case.name}")
    finally:
        table.update(saved)
    assert ran > 100
    assert not written, f"kernels that write an operand: {sorted(written)}"
