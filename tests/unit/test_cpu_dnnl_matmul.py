"""Dense layers on a constant weight packed once for oneDNN's matmul primitive
(``pytfrt.backends.cpu._dnnl_matmul``, reached through ``graph_nn.matmul.specialize``) against
float64 NumPy with torch's activations."""

from __future__ import annotations

import unittest.mock as mock

import numpy as np
import pytest
import torch
from cpu_refs import activation_refs
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _dnnl_conv, _dnnl_matmul, graph_nn

ACTS = activation_refs(0.1)
pytestmark = pytest.mark.skipif(_dnnl_conv.library() is None, reason="oneDNN not installed")


def _dense(w, bias, act, residual, transpose_b):
    consts = {1: w} if bias is None else {1: w, 2: bias}
    return graph_nn.matmul.specialize(
        consts, transpose_a=False, transpose_b=transpose_b, activation=act, alpha=0.1,
        epilogue_operands=(int(bias is not None), int(residual)))


def _want(a, ww, bias, r, act):
    y = a.astype(np.float64) @ ww.astype(np.float64)
    y = y + (0 if bias is None else bias) + (0 if r is None else r)
    return ACTS[act](torch.from_numpy(y)).numpy()


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([(1, 48), (2, 3), (1, 9), (1,)]), st.integers(48, 160),
       st.integers(1, 700), st.booleans(), st.booleans(), st.sampled_from([None, "full", "row"]),
       st.sampled_from(["none", "relu", "gelu", "gelu_tanh", "silu"]), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_packed_dense_matches_numpy(lead, k, n, transpose_b, with_bias, res, act, whole, seed):
    """Rank-1 to rank-3 inputs, a weight stored ``[K, N]`` or ``[N, K]`` (``transpose_b``),
    bias, residual and activation fused; column parts that do not divide ``N`` evenly.  With
    ``whole`` (the large-weight mode: every product in the runner) also strided inputs and a
    residual broadcast from one row."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(np.float32)
    ww = w.T if transpose_b else w
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    a = rng.standard_normal((*lead, 2 * k)).astype(np.float32)
    a = a[..., ::2] if whole else np.ascontiguousarray(a[..., :k])
    r = None
    if res is not None and (whole or res == "full"):
        r = rng.standard_normal((*lead, n) if res == "full" else (n,)).astype(np.float32)
    with mock.patch.object(_dnnl_matmul, "MIN_MACS", 64), \
            mock.patch.object(_dnnl_matmul, "PART_MIN_WEIGHTS", 16), \
            mock.patch.object(_dnnl_matmul, "RELEASE_MIN_WEIGHTS", 1 if whole else 1 << 30):
        f = _dense(w, bias, act, r is not None, transpose_b)
        assert f is not None and hasattr(f, "release") == whole
        if whole:
            assert f.release(1) is not None
            w = None  # the released function does not read it
        extra = [x for x in (bias, r) if x is not None]
        got = f(a, w, *extra)
    np.testing.assert_allclose(got, _want(a, ww, bias, r, act), rtol=1e-4,
                               atol=1e-4 * np.sqrt(k))


def _check_rows(runner, w, bias, rows, rng):
    """``gelu_tanh(a @ w + bias + r)`` through ``runner`` for each row count, in turn."""
    k, n = w.shape
    for m in rows:
        a = rng.standard_normal((m, k)).astype(np.float32)
        r = rng.standard_normal((m, n)).astype(np.float32)
        y = np.full((m, n), np.nan, np.float32)
        assert runner.ready((m, k))
        runner.run(a, y, r)
        np.testing.assert_allclose(y, _want(a, w, bias, r, "gelu_tanh"), rtol=1e-4, atol=1e-3)


def test_runner_is_used_and_rows_vary(monkeypatch):
    """Large products run in the primitive (a part per thread, each with its columns packed
    once): several row counts share the packed columns, ``out`` is written in place, and a
    residual that is not the result's shape takes the general path."""
    monkeypatch.setattr(_dnnl_matmul, "PART_MIN_WEIGHTS", 1 << 12)
    rng = np.random.default_rng(7)
    k, n = 256, 1000
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    runner = _dnnl_matmul.make(w, bias, "gelu_tanh", 0.0, residual=True)
    assert runner is not None
    _check_rows(runner, w, bias, (40, 17, 64, 40), rng)
    impl = runner.impl((40, k))
    assert impl and not impl.startswith("ref")
    assert len(runner._prims[(64, k)]) >= 2 or _dnnl_matmul._parallel.num_threads() == 1
    packed = {h.channels for h in runner._packed}
    assert len(packed) == len(runner._packed)  # one packed copy per column part

    f = _dense(w, bias, "relu", True, False)
    a = rng.standard_normal((3, 30, k)).astype(np.float32)
    out = np.full((3, 30, n), np.nan, np.float32)
    r = rng.standard_normal((3, 30, n)).astype(np.float32)
    assert f(a, w, bias, r, out=out) is out
    np.testing.assert_allclose(out, _want(a, w, bias, r, "relu"), rtol=1e-4, atol=1e-3)
    r_row = rng.standard_normal(n).astype(np.float32)  # broadcast residual: general path
    np.testing.assert_allclose(f(a, w, bias, r_row), _want(a, w, bias, r_row, "relu"),
                               rtol=1e-4, atol=1e-3)


def test_make_declines():
    w = np.ones((64, 64), np.float32)
    assert _dnnl_matmul.make(w.astype(np.float64), None, "none", 0.0, False) is None
    assert _dnnl_matmul.make(w, np.ones(3, np.float32), "none", 0.0, False) is None
    assert _dnnl_matmul.make(w[:, ::2], None, "none", 0.0, False) is None  # no unit stride


def test_compiled_model_keeps_one_copy_of_a_large_weight(tmp_path):
    """An ONNX MatMul + Add + Relu on a 768 x 1024 weight: the compiled model's dense layer
    packs the weight and the model drops its own copy (``save`` rebuilds the same bits); the
    outputs match ONNX Runtime for several row counts (batch and sequence dynamic), and a
    weight that another op also reads is kept."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    import pytfrt
    from pytfrt.model import _PreparedWeight

    rng = np.random.default_rng(11)
    k, n = 768, 1024
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", n])]
    for shared in (False, True):
        extra_nodes, extra_in, extra_out, feeds = [], [], [], {}
        if shared:  # a run-time op also reads the weight: the model must keep it
            extra_nodes = [helper.make_node("Mul", ["w", "s"], ["ws"])]
            extra_in = [helper.make_tensor_value_info("s", TensorProto.FLOAT, [1])]
            extra_out = [helper.make_tensor_value_info("ws", TensorProto.FLOAT, [k, n])]
            feeds = {"s": np.array([0.5], np.float32)}
        graph = helper.make_graph(
            [*nodes, *extra_nodes], "dense",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", k]), *extra_in],
            outputs + extra_out,
            [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        path = tmp_path / f"dense{int(shared)}.onnx"
        onnx.save(proto, str(path))
        model = pytfrt.compile(str(path))
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        prepared = [x for x in model._weights if isinstance(x, _PreparedWeight)]
        assert len(prepared) == (0 if shared else 1)
        for shape in ((1, 64, k), (2, 3, k), (1, 1, k)):
            x = rng.standard_normal(shape).astype(np.float32)
            got = model(x=x, **feeds)
            want = sess.run(None, {"x": x, **feeds})
            if shared:
                np.testing.assert_array_equal(got["ws"] if isinstance(got, dict) else got[1],
                                              want[1])
                got = got["y"] if isinstance(got, dict) else got[0]
            np.testing.assert_allclose(got, want[0], rtol=1e-4, atol=1e-4)
        if not shared:
            rebuilt = np.asarray(prepared[0])  # the compiler may store it transposed
            assert np.array_equal(rebuilt, w if rebuilt.shape == w.shape else w.T)
            # saved and reloaded: the same bits (the loaded weights carry NumPy's own dtype
            # objects, so the packed path is taken again, not the general one)
            model.save(tmp_path / "saved")
            loaded = pytfrt.load(tmp_path / "saved")
            assert all(np.asarray(a).dtype is np.dtype(np.float32) for a in loaded._weights)
            x = rng.standard_normal((1, 5, k)).astype(np.float32)
            np.testing.assert_array_equal(loaded(x=x), model(x=x))
            model.save(tmp_path / "saved")
            again = pytfrt.load(tmp_path / "saved")
            x = rng.standard_normal((1, 5, k)).astype(np.float32)
            np.testing.assert_array_equal(again(x=x), model(x=x))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_column_parts_of_a_large_weight(monkeypatch, threads):
    """Parts cover the columns once, in order, on 64-column boundaries; a weight of more than
    ``MAX_PART_WEIGHTS`` elements or ``MAX_PART_COLUMNS`` columns per thread gets a multiple
    of the thread count (at most the spin pool's ``MAX_PARTS``), parts no wider than
    ``MAX_PART_COLUMNS`` then (the LM head of GPT-2: 61 parts of 832 columns on two threads,
    where ``MAX_PARTS`` binds); smaller ones one part per thread."""
    monkeypatch.setattr(_dnnl_matmul._parallel, "num_threads", lambda: threads)
    most = _dnnl_matmul._spin_pool.MAX_PARTS
    for k, n in ((768, 50257), (768, 3072), (768, 2304), (3072, 768), (768, 768), (64, 700)):
        parts = _dnnl_matmul.column_parts(k, n)
        assert parts[0][0] == 0 and parts[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
        assert all(c0 % 64 == 0 and c1 > c0 for c0, c1 in parts)
        assert len(parts) <= most
        wide = n > _dnnl_matmul.MAX_PART_COLUMNS * threads
        big = k * n > _dnnl_matmul.MAX_PART_WEIGHTS * threads
        if big or wide:
            capped = -(-n // _dnnl_matmul.MAX_PART_COLUMNS) > most - threads
            assert len(parts) % threads == 0 or parts[-1][1] - parts[-1][0] < 64 * threads \
                or capped
            if not capped:
                assert all(c1 - c0 <= _dnnl_matmul.MAX_PART_COLUMNS for c0, c1 in parts)
            if big:
                assert all(k * (c1 - c0) <= _dnnl_matmul.MAX_PART_WEIGHTS + 64 * k
                           for c0, c1 in parts)
        elif k * n >= threads * _dnnl_matmul.PART_MIN_WEIGHTS:
            assert len(parts) == threads
    if threads == 2:  # BERT's and GPT-2's dense layers on this machine's two threads
        assert [len(_dnnl_matmul.column_parts(k, n)) for k, n in (
            (768, 768), (768, 2304), (768, 3072), (3072, 768), (768, 50257))] == [2, 4, 4, 2, 61]
    assert len(_dnnl_matmul.column_parts(768, 50257, 3)) == 3


def test_many_column_parts_match_numpy(monkeypatch):
    """A weight split into many more parts than threads (the helpers claim them as they
    finish): bias, residual and GELU fused, row counts changing between calls, against
    float64 NumPy."""
    monkeypatch.setattr(_dnnl_matmul, "MAX_PART_WEIGHTS", 4000)
    monkeypatch.setattr(_dnnl_matmul, "PART_MIN_WEIGHTS", 16)
    rng = np.random.default_rng(12)
    k, n = 96, 1000
    w = rng.standard_normal((n, k)).astype(np.float32).T  # the tied-embedding layout
    bias = rng.standard_normal(n).astype(np.float32)
    runner = _dnnl_matmul.make(w, bias, "gelu_tanh", 0.0, residual=True)
    assert runner is not None and len(runner._cols) >= 8
    _check_rows(runner, w, bias, (64, 13, 1, 64), rng)


def _gelu64(v):
    return torch.nn.functional.gelu(torch.from_numpy(np.asarray(v, np.float64))).numpy()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 9), st.integers(1, 70), st.integers(0, 40), st.integers(0, 2**31 - 1))
def test_native_gelu_block_matches_float64(rows, width, gap, seed):
    """``_gelu_native``'s function alone on a strided block (rows of any width, whole and
    partial 16-lane vectors): the float64 GELU within the approximation's 1.5e-7 of ``erf``
    (scaled by ``|x| / 2``), exact zeros far below 0, nothing outside the block written."""
    import ctypes

    from pytfrt.backends.cpu import _gelu_native

    address = _gelu_native.address()
    if not address:
        pytest.skip("no C compiler or no AVX-512")
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_int64)(address)
    rng = np.random.default_rng(seed)
    stride = width + gap
    buf = (rng.standard_normal((rows, stride)) * 4).astype(np.float32)
    buf[0, 0] = -30.0  # far below 0: exactly 0
    if width > 1:
        buf[0, 1] = 20.0  # far above: x itself
    before = buf.copy()
    geometry = _gelu_native.geometry(rows, width, stride)
    assert geometry is not None
    assert fn(buf.ctypes.data, geometry) == 0
    x = before[:, :width].astype(np.float64)
    want = _gelu64(x)
    err = np.abs(buf[:, :width] - want)
    assert (err <= 2e-6 * np.abs(want) + 1e-7 * np.abs(x) + 1e-30).all(), err.max()
    assert buf[0, 0] == 0.0
    np.testing.assert_array_equal(buf[:, width:], before[:, width:])
    tiny = buf[buf != 0]
    assert (np.abs(tiny) >= np.finfo(np.float32).tiny).all()


@pytest.mark.parametrize("native", [False, True])
def test_dense_gelu_after_parts_matches_torch(monkeypatch, native):
    """A GELU dense layer split into parts whose widths differ, with the native GELU applied
    to each part's block by the spin pool (or in a part run on the caller) and with oneDNN's
    post-op instead, against float64 torch; several row counts."""
    from pytfrt.backends.cpu import _gelu_native

    if native and not _gelu_native.address():
        pytest.skip("no C compiler or no AVX-512")
    monkeypatch.setattr(_gelu_native, "ENABLED", native)
    monkeypatch.setattr(_dnnl_matmul, "PART_MIN_WEIGHTS", 16)
    monkeypatch.setattr(_dnnl_matmul, "MAX_PART_COLUMNS", 128)
    rng = np.random.default_rng(5)
    k, n = 96, 700
    w = rng.standard_normal((k, n)).astype(np.float32) * 0.3
    bias = rng.standard_normal(n).astype(np.float32)
    runner = _dnnl_matmul.make(w, bias, "gelu", 0.0, residual=False)
    assert runner is not None and len(runner._cols) >= 4 and bool(runner._act_fn) == native
    for m in (64, 7, 1):
        a = rng.standard_normal((m, k)).astype(np.float32)
        y = np.full((m, n), np.nan, np.float32)
        assert runner.ready((m, k))
        runner.run(a, y)
        want = _gelu64(a.astype(np.float64) @ w + bias)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=2e-5)
    assert all(bool(p.act_fn) == native for p in runner._prims[(1, k)])
