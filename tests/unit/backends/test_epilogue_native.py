"""The C epilogue and dense-layer kernels (``_epilogue_native``, ``_gemm_native``) against NumPy
in float64, and small models that run without importing Numba.

Oracles: the epilogue ``act(y + bias + residual)`` and ``relu?(x @ w + bias)`` computed in
float64 NumPy (with ``math.erf`` for GELU); the batched matmul against NumPy's ``matmul``.  Each
version the CPU has (AVX-512, AVX2, generic) is checked.  The fresh-process tests compile and
call an ONNX MLP (batch 1 and 32: ``dense_rows`` and the 2-D GEMM with its epilogue) and a
Transformer-like block (batched products in the oneDNN batch loop, dense layers with bias and
GELU) and check that Numba was never imported -- and, with the C kernels switched off, that it
was (so the models do reach these kernels).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _epilogue_native, _gemm_native, gemm
from pytfrt.backends.cpu._epilogue import ACTIVATION_CODES, epilogue_2d

needs_cc = pytest.mark.skipif(_epilogue_native.module() is None
                              or _gemm_native.module() is None, reason="no C compiler")

VERSIONS = ("avx512", "avx2", "generic")

_ERF = np.vectorize(math.erf)


@pytest.fixture(params=VERSIONS, scope="module")
def version(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each compiled version of the kernels the CPU can run (the best one restored after)."""
    if _epilogue_native.module() is None:
        pytest.skip("no C compiler")
    best = _epilogue_native.module().version(), _gemm_native.module().version()
    if not (_epilogue_native.use(request.param) and _gemm_native.use(request.param)):
        pytest.skip(f"the CPU has no {request.param}")
    try:
        yield request.param
    finally:
        _epilogue_native.use(best[0])
        _gemm_native.use(best[1])


@contextlib.contextmanager
def _numba_kernels(module: Any) -> Iterator[None]:
    """``module.ENABLED`` false (the Numba kernels) for the block."""
    saved = module.ENABLED
    module.ENABLED = False
    try:
        yield
    finally:
        module.ENABLED = saved


def _act(v: np.ndarray, name: str, alpha: float) -> np.ndarray:
    """The activations in float64 NumPy."""
    c = math.sqrt(2.0 / math.pi)
    return {
        "none": lambda: v,
        "relu": lambda: np.maximum(v, 0),
        "relu6": lambda: np.clip(v, 0, 6),
        "leaky_relu": lambda: np.where(v >= 0, v, alpha * v),
        "sigmoid": lambda: 1 / (1 + np.exp(-v)),
        "tanh": lambda: np.tanh(v),
        "silu": lambda: v / (1 + np.exp(-v)),
        "gelu": lambda: 0.5 * v * (1 + _ERF(v / math.sqrt(2.0))),
        "gelu_tanh": lambda: 0.5 * v * (1 + np.tanh(c * (v + 0.044715 * v**3))),
        "hard_swish": lambda: v * np.clip(v + 3, 0, 6) / 6,
    }[name]()


def test_every_activation_code_is_covered() -> None:
    assert set(ACTIVATION_CODES) == {"none", "relu", "relu6", "leaky_relu", "sigmoid", "tanh",
                                     "silu", "gelu", "gelu_tanh", "hard_swish"}


@needs_cc
@settings(max_examples=120, deadline=None)
@given(name=st.sampled_from(sorted(ACTIVATION_CODES)), dtype=st.sampled_from([np.float32,
                                                                             np.float64]),
       m=st.integers(1, 6), n=st.integers(1, 600), bias=st.sampled_from(["none", "cols",
                                                                        "rows"]),
       residual=st.sampled_from(["none", "full", "broadcast"]), transposed=st.booleans(),
       cols=st.booleans(), seed=st.integers(0, 2**16))
def test_epilogue_matches_numpy(version: str, name: str, dtype: type, m: int, n: int, bias: str,
                                residual: str, transposed: bool, cols: bool, seed: int) -> None:
    """``act(y + bias + residual)`` on columns ``j0:j1`` of ``y`` (C-contiguous or a transposed
    view), bias along columns or rows (``i % len``), residual of ``y``'s shape (strided) or
    broadcast along rows (zero stride), float32 and float64: NumPy float64 within rounding; the
    columns outside ``j0:j1`` untouched."""
    rng = np.random.default_rng(seed)
    y0 = (rng.standard_normal((n, m) if transposed else (m, n)) * 4).astype(dtype)
    y = y0.T if transposed else y0
    b = None
    if bias == "cols":
        b = rng.standard_normal(n).astype(dtype)
    elif bias == "rows":
        b = rng.standard_normal(max(1, m // 2)).astype(dtype)
    r = None
    if residual == "full":
        r = rng.standard_normal((m, 2 * n)).astype(dtype)[:, ::2]
    elif residual == "broadcast":
        r = np.broadcast_to(rng.standard_normal(n).astype(dtype), (m, n))
    j0, j1 = (n // 3, n - n // 4) if cols else (0, n)
    alpha = 0.2
    before = y.copy()
    pre = before.astype(np.float64)
    if b is not None:
        pre = pre + (b[:, None][np.arange(m) % len(b)] if bias == "rows" else b)
    if r is not None:
        pre = pre + r
    ref = before.astype(np.float64)
    ref[:, j0:j1] = _act(pre, name, alpha)[:, j0:j1]
    epilogue_2d(y, b, r, ACTIVATION_CODES[name], alpha, bias_rows=bias == "rows",
                cols=(j0, j1) if cols else None)
    if dtype == np.float32:
        # float32 rounding of the inputs' sum and the result, plus the rational erf / tanh
        np.testing.assert_allclose(y, ref, rtol=3e-7, atol=2e-7)
    else:
        np.testing.assert_allclose(y, ref, rtol=1e-13, atol=1e-13)  # libm's erf, tanh, exp
    np.testing.assert_array_equal(y[:, :j0], before[:, :j0])
    np.testing.assert_array_equal(y[:, j1:], before[:, j1:])


@needs_cc
@pytest.mark.parametrize("name", sorted(ACTIVATION_CODES))
def test_epilogue_propagates_nan_and_matches_numba(name: str) -> None:
    """NaN propagates through every activation (``max`` / ``min`` with Python's rule, as the
    Numba kernel), and the C results equal the Numba kernel's bit for bit on float32 data
    (without a bias: the Numba GELU kernel rounds ``y + bias`` to float32 first, the C one
    does not)."""
    x = np.array([[np.nan, -np.inf, -40.0, -3.5, -1.0, -0.0, 0.0, 0.3, 2.5, 7.0, 50.0, np.inf]],
                 np.float32)
    x = np.concatenate([x, x * 0.37, x * 2.9])
    bias = None
    code = ACTIVATION_CODES[name]
    y = x.copy()
    epilogue_2d(y, bias, None, code, 0.1)
    assert np.isnan(y[0, 0])
    z = x.copy()
    with _numba_kernels(_epilogue_native):
        epilogue_2d(z, bias, None, code, 0.1)
    np.testing.assert_array_equal(y, z)


@needs_cc
def test_epilogue_declines_what_it_cannot_take() -> None:
    """Operands outside the C function's contract return ``False`` with nothing written."""
    mod = _epilogue_native.module()
    y = np.ones((2, 3), np.float32)
    assert not mod.epilogue(y.astype(np.int32), None, None, 1, 0.0, False, 0, 3)
    assert not mod.epilogue(y.astype(">f4"), None, None, 1, 0.0, False, 0, 3)
    ro = y.copy()
    ro.flags.writeable = False
    assert not mod.epilogue(ro, None, None, 1, 0.0, False, 0, 3)
    assert not mod.epilogue(y, np.ones(2, np.float32), None, 0, 0.0, False, 0, 3)  # short bias
    assert not mod.epilogue(y, None, None, 0, 0.0, False, 0, 4)  # columns beyond y
    assert not mod.epilogue(y, None, None, 12, 0.0, False, 0, 3)  # an unknown activation
    assert mod.epilogue(y, np.ones(3, np.float32), None, 0, 0.0, False, 0, 3)
    np.testing.assert_array_equal(y, 2.0)


@needs_cc
@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, gemm.GEMV_ROWS), k=st.integers(1, 300), n=st.integers(1, 300),
       with_bias=st.booleans(), relu=st.booleans(), strided=st.booleans(),
       seed=st.integers(0, 2**16))
def test_dense_rows_matches_numpy(version: str, m: int, k: int, n: int, with_bias: bool,
                                  relu: bool, strided: bool, seed: int) -> None:
    """``relu?(x @ w + bias)`` for at most ``GEMV_ROWS`` rows (``x`` C-contiguous or strided,
    ``k`` around the kernel's steps of 4): NumPy float64 within float32 accumulation error,
    and the same bits as the Numba kernel (the same summation order: with or without a C
    compiler a model computes the same)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, 2 * k) if strided else (m, k)).astype(np.float32)
    if strided:
        x = x[:, ::2]
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if with_bias else None
    y = gemm.dense_rows(x, w, b, relu)
    assert y is not None
    ref = x.astype(np.float64) @ w + (0 if b is None else b)
    ref = np.maximum(ref, 0) if relu else ref
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=2e-6 * math.sqrt(k) * 4)
    with _numba_kernels(_gemm_native):
        numba_y = gemm.dense_rows(x, w, b, relu)
    assert numba_y is not None
    np.testing.assert_array_equal(numba_y, y)


@needs_cc
def test_dense_rows_declines_what_it_cannot_take() -> None:
    mod = _gemm_native.module()
    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    y = np.zeros((2, 4), np.float32)
    assert not mod.dense_rows(x, np.asfortranarray(w), None, False, y)
    assert not mod.dense_rows(x.astype(np.float64), w, None, False, y)
    assert not mod.dense_rows(x, w, np.ones(3, np.float32), False, y)
    assert not mod.dense_rows(x, w, None, False, np.zeros((2, 5), np.float32))
    assert mod.dense_rows(x, w, np.ones(4, np.float32), False, y)
    np.testing.assert_array_equal(y, 4.0)


@needs_cc
@pytest.mark.skipif(not gemm.parallel_gemm(), reason="oneDNN not installed")
@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 6), m=st.integers(1, 70), k=st.integers(1, 70), n=st.integers(1, 70),
       ta=st.booleans(), broadcast_b=st.booleans(), gelu=st.booleans(),
       seed=st.integers(0, 2**16))
def test_native_batch_loop_matches_numpy(batch: int, m: int, k: int, n: int, ta: bool,
                                         broadcast_b: bool, gelu: bool, seed: int) -> None:
    """The batched float32 matmul through the C batch loop (strided batch operands: a
    transposed ``a`` view, a ``b`` broadcast over the batch), with bias and GELU: NumPy."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((batch, k, m) if ta else (batch, m, k)).astype(np.float32)
    a = a.swapaxes(-1, -2) if ta else a
    b = rng.standard_normal((1, k, n) if broadcast_b else (batch, k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    y = np.empty((batch, m, n), np.float32)
    saved = gemm.BATCHED_MIN
    try:
        gemm.BATCHED_MIN = 1
        assert gemm._batched(a, b, y, bias, ACTIVATION_CODES["gelu" if gelu else "none"], 0.0)
    finally:
        gemm.BATCHED_MIN = saved
    pre = a.astype(np.float64) @ b.astype(np.float64) + bias
    ref = _act(pre, "gelu", 0.0) if gelu else pre
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * math.sqrt(k))


def test_batch_loop_is_the_c_one() -> None:
    """With a C compiler and oneDNN, ``gemm``'s batch loop is the C module's function."""
    if _gemm_native.module() is None or not gemm.parallel_gemm():
        pytest.skip("no C compiler or no oneDNN")
    loop = gemm._kernel()
    assert getattr(loop, "func", None) is _gemm_native.module().batched


def _mlp_call() -> Any:
    """``benchmarks/mlp_call.py`` (its MLP's weights and ONNX file)."""
    name = "pytfrt_bench_mlp_call"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[3] / "benchmarks" / "mlp_call.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _onnx_block(path: Path, d: int, ff: int) -> dict[str, np.ndarray]:
    """A Transformer-like ONNX block on ``x [B, S, d]``: ``s = x @ x^T`` and ``s @ x`` (batched
    products), then ``gelu(h @ w1 + b1) @ w2 + b2`` (dense layers with bias and GELU)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    ws = {"w1": (rng.standard_normal((d, ff)) / math.sqrt(d)).astype(np.float32),
          "b1": (rng.standard_normal(ff) * 0.1).astype(np.float32),
          "w2": (rng.standard_normal((ff, d)) / math.sqrt(ff)).astype(np.float32),
          "b2": (rng.standard_normal(d) * 0.1).astype(np.float32)}
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["x", "xt"], ["s"]),
        helper.make_node("Mul", ["s", "scale"], ["ss"]),
        helper.make_node("MatMul", ["ss", "x"], ["h"]),
        helper.make_node("MatMul", ["h", "w1"], ["p1"]),
        helper.make_node("Add", ["p1", "b1"], ["q1"]),
        helper.make_node("Gelu", ["q1"], ["g1"]),
        helper.make_node("MatMul", ["g1", "w2"], ["p2"]),
        helper.make_node("Add", ["p2", "b2"], ["y"]),
    ]
    inits = [numpy_helper.from_array(v, k) for k, v in ws.items()]
    inits.append(numpy_helper.from_array(np.array(1.0 / d, np.float32), "scale"))
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 96, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 96, d])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), str(path))
    return ws


_CHILD = """
import json, sys
import numpy as np
import pytfrt
from pytfrt.backends.cpu import _epilogue_native, _gemm_native
path, data, native = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
_epilogue_native.ENABLED = _gemm_native.ENABLED = native
model = pytfrt.compile(path)
x = np.load(data)
y = [np.asarray(model(x)) for _ in range(2)][-1]
np.save(data + ".y.npy", y)
print(json.dumps({"numba": "numba" in sys.modules}))
"""


def _run_child(path: Path, x: np.ndarray, native: bool, tmp: Path) -> tuple[bool, np.ndarray]:
    data = tmp / f"x{int(native)}.npy"
    np.save(data, x)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(data), str(int(native))],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = json.loads(proc.stdout.strip().splitlines()[-1])["numba"]
    return imported, np.load(str(data) + ".y.npy")


@needs_cc
@pytest.mark.parametrize("batch", [1, 32])
def test_mlp_call_imports_no_numba(batch: int, tmp_path: Path) -> None:
    """An MLP 784-512-512-10 (bias + ReLU) compiled and called in a fresh interpreter at batch
    1 (``dense_rows``) and 32 (the GEMM and its epilogue) imports no Numba and agrees with
    NumPy; with the C kernels off it does import Numba (the calls reach them)."""
    pytest.importorskip("onnx")
    bench = _mlp_call()
    path = tmp_path / "mlp.onnx"
    ws, bs = bench._weights()
    bench._onnx_file(ws, bs, path)
    x = np.random.default_rng(2).standard_normal((batch, 784)).astype(np.float32)
    ref = x.astype(np.float64)
    for i, (w, b) in enumerate(zip(ws, bs, strict=True)):
        ref = ref @ w + b
        ref = ref if i == len(ws) - 1 else np.maximum(ref, 0)
    imported, y = _run_child(path, x, True, tmp_path)
    assert not imported
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    if batch == 1:
        assert _run_child(path, x, False, tmp_path)[0]


@needs_cc
@pytest.mark.skipif(not gemm.parallel_gemm(), reason="oneDNN not installed")
def test_transformer_block_imports_no_numba(tmp_path: Path) -> None:
    """A Transformer-like block (batched products above ``BATCHED_MIN``, dense layers with bias
    and GELU) compiled and called in a fresh interpreter imports no Numba and agrees with NumPy;
    with the C kernels off it does import Numba."""
    d, ff = 64, 256
    assert 96 * d * 96 >= gemm.BATCHED_MIN
    path = tmp_path / "block.onnx"
    ws = _onnx_block(path, d, ff)
    x = np.random.default_rng(3).standard_normal((2, 96, d)).astype(np.float32)
    x64 = x.astype(np.float64)
    h = (x64 @ x64.swapaxes(1, 2) / d) @ x64
    ref = _act(h @ ws["w1"] + ws["b1"], "gelu", 0.0) @ ws["w2"] + ws["b2"]
    imported, y = _run_child(path, x, True, tmp_path)
    assert not imported
    np.testing.assert_allclose(y, ref, rtol=2e-4, atol=2e-4 * np.abs(ref).max())
    assert _run_child(path, x, False, tmp_path)[0]
