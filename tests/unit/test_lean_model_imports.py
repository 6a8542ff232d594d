"""A saved small CNN loads and runs without Numba, llvmlite or SciPy (the memory they cost).

A convolution, a squeeze-and-excitation block (global average pool, two 1x1 convolutions,
hard sigmoid, multiply) and a global average pool: the kernels a mobile CNN runs, all with C
or oneDNN versions (``docs/kernels.md``, "What a model imports").  The ONNX model is compiled
and saved here; a fresh interpreter then ``pytfrt.load``s it, runs it on two threads and
reports its outputs and which heavy modules it imported.  The outputs are checked against
ONNX's reference evaluator; no Numba, llvmlite, SciPy, ONNX, xDSL or compiler module may be
loaded.  The compile path, in a fresh interpreter too, must not load OpenSSL (``hashlib``) or
``concurrent.futures`` (and with it ``logging``): nothing in a compile needs them, and together
they cost it ~4 MB (``docs/benchmarks.md``).  Memory itself is measured by
``benchmarks/memory.py``, never asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pytfrt

pytest.importorskip("onnx")
from onnx import ModelProto, TensorProto, helper, numpy_helper, save
from onnx.reference import ReferenceEvaluator

HEAVY = ("numba", "llvmlite", "scipy", "onnx", "xdsl", "pytfrt.compiler", "pytfrt.mlir")


def _model() -> ModelProto:
    rng = np.random.default_rng(0)
    c, r = 32, 8

    def init(name: str, *shape: int) -> TensorProto:
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["a"]),
        helper.make_node("GlobalAveragePool", ["a"], ["s"]),
        helper.make_node("Conv", ["s", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Conv", ["hr", "w2", "b2"], ["g"]),
        helper.make_node("HardSigmoid", ["g"], ["gs"], alpha=1.0 / 6.0, beta=0.5),
        helper.make_node("Mul", ["a", "gs"], ["e"]),
        helper.make_node("GlobalAveragePool", ["e"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "lean",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 160, 160])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 1, 1])],
        [init("w", c, 3, 3, 3), init("b", c), init("w1", r, c, 1, 1), init("b1", r),
         init("w2", c, r, 1, 1), init("b2", c)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import pytfrt
    how, path, x_path, watched = sys.argv[1:]
    model = pytfrt.load(path) if how == "load" else pytfrt.compile(path)
    x = np.load(x_path)
    outs = [model(x=x) for _ in range(3)]
    y = outs[-1]
    y = list(y.values())[0] if isinstance(y, dict) else y
    imported = [m for m in json.loads(watched) if m in sys.modules]
    print(json.dumps({"y": np.asarray(y).ravel().tolist(), "imported": imported}))
""")
COMPILE_UNNEEDED = ("hashlib", "_hashlib", "concurrent.futures")


def _fresh_run(tmp_path: Path, how: str, watched: tuple[str, ...], seed: int) -> list[str]:
    """Run the lean model in a fresh interpreter on two threads -- ``pytfrt.load`` of it
    compiled and saved here (``how="load"``) or ``pytfrt.compile`` of the ``.onnx`` file --,
    check its output against ONNX's reference evaluator, and return which of ``watched``
    that interpreter imported."""
    model = _model()
    path = tmp_path / "lean.onnx"
    save(model, str(path))
    target = path
    if how == "load":
        target = tmp_path / "saved"
        pytfrt.compile(str(path)).save(str(target))
    x = np.random.default_rng(seed).standard_normal((1, 3, 160, 160)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, how, str(target), str(tmp_path / "x.npy"),
         json.dumps(watched)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(np.array(got["y"], np.float32), np.ravel(want), rtol=1e-4,
                               atol=1e-5)
    return list(got["imported"])


def test_saved_cnn_runs_without_numba_scipy_or_compiler(tmp_path: Path) -> None:
    heavy = _fresh_run(tmp_path, "load", HEAVY, seed=1)
    assert heavy == [], f"a saved CNN's run imported {heavy}"


def test_compile_path_leaves_openssl_and_futures_unloaded(tmp_path: Path) -> None:
    unneeded = _fresh_run(tmp_path, "compile", COMPILE_UNNEEDED, seed=2)
    assert unneeded == [], f"compiling a CNN imported {unneeded}"


def test_kernel_modules_take_numba_from_the_lazy_stand_in() -> None:
    # a top-level ``import numba`` in a kernel module would bring Numba (~80 MB) into every
    # process that registers the CPU kernels; only _native (Numba intrinsics, imported by
    # the Numba fallback of the spin pool) may import it
    import re

    cpu = Path(pytfrt.__file__).parent / "backends" / "cpu"
    eager = re.compile(r"^(import numba|from numba\b)", re.M)
    offenders = sorted(p.name for p in cpu.glob("*.py")
                       if p.name != "_native.py" and eager.search(p.read_text()))
    assert offenders == [], f"use 'from pytfrt.backends.cpu._jit import numba' in {offenders}"
