"""ONNX's own backend node suite (``onnx.backend.test.BackendTest``) on ``pytfrt.onnx_backend``.

Every single-operator case the installed ``onnx`` generates runs here through ONNX's runner,
which compares outputs with its expected ones (count, shape, dtype, ``rtol=1e-3, atol=1e-5``).
The cases expected to fail are listed in ``onnx_node_xfail.txt`` (next to this file), one per
line with the reason; they are marked as unittest expected failures, so a case that starts
passing fails the run ("unexpected success") until it is taken off the list.  Regenerate the
list after a change with::

    python benchmarks/onnx_conformance.py --no-ort \
        --write-xfail tests/unit/frontends/onnx_node_xfail.txt

Only the node cases run (the model-zoo kinds need downloads).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

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


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the case generators' own numpy overflow warnings
    _suite = BackendTest(onnx_backend, __name__)
    for _name in expected_failures():
        _suite.xfail(rf"^{re.escape(_name)}_cpu$")
    OnnxBackendNodeModelTest = _suite.test_cases["OnnxBackendNodeModelTest"]


def test_xfail_list_names_real_cases() -> None:
    """Every listed expected failure is a case of the installed onnx (no stale entries)."""
    names = {n[: -len("_cpu")] for n in dir(OnnxBackendNodeModelTest) if n.endswith("_cpu")}
    stale = sorted(set(expected_failures()) - names)
    assert not stale, f"not node cases of onnx {onnx.__version__}: {stale[:10]}"
    assert len(names) > 1000


_READ_ONLY_SCRIPT = r"""
import functools, warnings
import numpy as np
from pytfrt.backends.cpu import graph_kernels as gk

table = gk.graph_ops()
written = set()

def freeze(op, fn):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
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
        finally:
            for v in views:  # a result may alias an operand: writable again for its users
                if isinstance(v, np.ndarray) and v.base is not None and v.base.flags.writeable:
                    v.flags.writeable = True
    return wrapped

for name in list(table):
    table[name] = freeze(name, table[name])

from onnx.backend.test.loader import load_model_tests
from pytfrt import onnx_backend

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    cases = load_model_tests(kind="node")
seen, ran = set(), 0
for case in cases:
    op = case.model.graph.node[0].op_type if case.model.graph.node else ""
    if op in seen or case.name.endswith("_expanded"):
        continue
    seen.add(op)
    for inputs, _ in case.data_sets[:1]:
        if not all(isinstance(x, np.ndarray) for x in inputs):
            continue
        arrays = list(inputs)
        before = [a.copy() for a in arrays]
        try:
            onnx_backend.prepare(case.model).run(arrays)
            ran += 1
        except Exception:
            pass
        for a, b in zip(arrays, before):
            if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
                written.add("input of " + case.name)
print("RAN", ran)
print("WRITTEN", sorted(written))
"""


def test_kernels_never_write_their_operands() -> None:
    """Every kernel the node suite reaches (one case per ONNX op) runs on read-only operands.

    The compute functions are wrapped so their array operands are read-only views: a kernel
    that writes an operand raises NumPy's "read-only" error, which the wrapper records; the
    model inputs are also compared before and after each run.
    """
    import os
    import subprocess
    import sys

    src = str(Path(onnx_backend.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _READ_ONLY_SCRIPT], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines()
                 if line.startswith(("RAN", "WRITTEN")))
    assert int(lines["RAN"]) > 100
    assert lines["WRITTEN"] == "[]", f"kernels that write an operand: {lines['WRITTEN']}"
