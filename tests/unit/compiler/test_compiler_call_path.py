"""The CompiledModel call function (``@main`` rendered as straight-line Python at load).

Oracle: the same BEF ``@main`` run by the sync executor (``SyncBEFFunction.execute_sync`` on
DenseHostTensors, an independent interpreter of the program), and NumPy.  Also: steady-state
memory over 1,000 calls, counted with ``tracemalloc`` (no timing), and peak memory against the
weights plus one activation set.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.compiler import GraphBuilder, GraphModule
from pytfrt.compiler.api import compile_module
from pytfrt.model import CompiledModel, InputError, ModelError
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import dtype_from_numpy

RNG = np.random.default_rng(11)
W1 = (RNG.standard_normal((8, 16)) * 0.3).astype(np.float32)
B1 = RNG.standard_normal(16).astype(np.float32)
W2 = (RNG.standard_normal((16, 4)) * 0.3).astype(np.float32)


def _build() -> GraphModule:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 8), "f32"), ("s", (), "f32")])
    x, s = fn.arguments
    h = fn.op("relu", [fn.op("add", [fn.op("matmul", [x, fn.constant(W1, name="w1")]),
                                      fn.constant(B1, name="b1")])])
    g = fn.op("tanh", [fn.op("mul", [fn.op("sub", [h, s]), s])])  # a fused region
    y = fn.op("matmul", [g, fn.constant(W2, name="w2")])
    fn.returns([fn.op("softmax", [y], axis=-1), fn.op("reshape", [g], shape=[-1])],
               names=["p", "g"])
    return gb.finish()


def _numpy(x: np.ndarray, s: np.float32) -> tuple[np.ndarray, np.ndarray]:
    h = np.maximum(x @ W1 + B1, 0)
    g = np.tanh((h - s) * s)
    y = g @ W2
    e = np.exp(y - y.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), g.reshape(-1)


def _sync_executor(model: CompiledModel, *inputs: np.ndarray) -> list[np.ndarray]:
    """``@main`` on the sync executor (arguments: resources, a fresh arena, inputs)."""
    from pytfrt.backends.cpu.arena import Arena

    args = list(model._resources)
    if model._arena_index >= 0:
        args.append(Arena())
    args += [DenseHostTensor(dtype_from_numpy(x.dtype), x) for x in inputs]
    return [v.array for v in model._main.execute_sync(model._ctx, args)]


@pytest.fixture(scope="module")
def model() -> CompiledModel:
    return compile_module(_build())


def test_the_call_function_is_rendered_straight_line(model: CompiledModel) -> None:
    src = model.call_source
    assert src.startswith("def _call(args):")
    assert "for " not in src and "while " not in src  # straight-line: no loop per call
    assert "_cs" not in src  # every kernel calls its compute function directly


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 6), s=st.floats(-2, 2, width=32), seed=st.integers(0, 2**16))
def test_agrees_with_the_sync_executor_and_numpy(model: CompiledModel, batch: int, s: float,
                                                 seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((batch, 8)).astype(np.float32)
    sv = np.float32(s)
    got = model(x, np.array(sv))
    ref = _sync_executor(model, x, np.array(sv))
    want = _numpy(x, sv)
    assert isinstance(got, tuple) and len(got) == 2
    for g, r, w in zip(got, ref, want, strict=True):
        assert type(g) is np.ndarray
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_inputs_are_checked_and_converted(model: CompiledModel) -> None:
    x = RNG.standard_normal((2, 8)).astype(np.float32)
    want = model(x, np.float32(0.5))[0]
    # array-likes and dtype objects equal to (not identical with) float32 take the slow check
    np.testing.assert_allclose(model(x.tolist(), 0.5)[0], want, rtol=1e-6)
    np.testing.assert_allclose(model(x.view(np.dtype("<f4")), np.float32(0.5))[0], want)
    np.testing.assert_allclose(model(s=0.5, x=x)[0], want)
    with pytest.raises(InputError, match="must have dtype float32"):
        model(x.astype(np.float64), np.float32(0.5))
    with pytest.raises(InputError, match=r"must have shape \[\?, 8\]"):
        model(x[:, :4], np.float32(0.5))
    with pytest.raises(InputError, match=r"must have shape \[\]"):
        model(x, np.ones(2, np.float32))
    with pytest.raises(InputError, match="takes 2 inputs"):
        model(x)


def test_a_kernel_error_is_a_model_error_and_the_arena_goes_back_to_the_pool() -> None:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 4), "f32")])
    fn.returns([fn.op("relu", [fn.op("reshape", [fn.arguments[0]], shape=[3, -1])])])
    m = compile_module(gb.finish())
    np.testing.assert_array_equal(m(np.ones((3, 4), np.float32)), np.ones((3, 4)))
    with pytest.raises(ModelError, match="reshape"):
        m(np.ones((2, 4), np.float32))
    np.testing.assert_array_equal(m(-np.ones((6, 4), np.float32)), np.zeros((3, 8)))
    assert len(m._arenas) <= 1


def test_variable_kernels_are_called_directly_and_agree_with_the_sync_executor() -> None:
    """Kernels that are not compute functions (variables) are called with their binding plan
    rendered once, not bound per call; state and results agree with the sync executor run
    on the same state and with a Python reference."""
    gb = GraphBuilder()
    gb.variable("v", np.zeros(3, np.float32))
    fn = gb.function("main", inputs=[("x", (3,), "f32")])
    (x,) = fn.arguments
    before = fn.op("read_variable", [], name="v")
    fn.op("assign_add_variable", [fn.op("mul", [x, before])], name="v")
    fn.op("assign_add_variable", [x], name="v")
    fn.returns([before, fn.op("read_variable", [], name="v")], names=["before", "after"])
    m = compile_module(gb.finish())
    assert "_cs" not in m.call_source
    v = np.zeros(3, np.float32)
    for step in range(4):
        xs = np.arange(3, dtype=np.float32) + step
        before_v, after_v = m(xs)
        np.testing.assert_array_equal(before_v, v)
        v = v + xs * v + xs
        np.testing.assert_array_equal(after_v, v)
    got = _sync_executor(m, xs)  # one more step, on the interpreter
    np.testing.assert_array_equal(got[0], v)
    np.testing.assert_array_equal(got[1], v + xs * v + xs)


def test_call_async_checks_inputs_at_once_and_returns_the_outputs(model: CompiledModel) -> None:
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    with pytest.raises(InputError):
        model.call_async(x.astype(np.int32), np.float32(1))
    av = model.call_async(x, np.float32(1))
    model.host.await_values([av])
    np.testing.assert_allclose(av.get()[0], _numpy(x, np.float32(1))[0], rtol=1e-4)


def test_steady_state_calls_do_not_grow_memory(model: CompiledModel) -> None:
    """3,000 calls with the same shapes: the traced heap does not grow with the calls (no
    timing).  A few kilobytes of small-object pools may settle once after other tests ran in
    this process (measured: 44 objects of ~56 bytes); a leak of one object per call would be
    over 90 kB."""
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    s = np.float32(0.25)
    for _ in range(20):  # warm up: arena buffers, fused-kernel plans
        model(x, s)
    tracemalloc.start()
    try:
        model(x, s)
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(3000):
            out = model(x, s)
        del out
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 16384, f"grew by {after - before} bytes over 3000 calls"
    assert peak - before < 64 * 1024


def test_peak_memory_of_a_call_is_below_twice_weights_plus_activations() -> None:
    """A 512-wide MLP at batch 256: one call's peak (traced, after warm-up) stays below the
    weights plus twice the largest activation set (the planned buffers and the results)."""
    rng = np.random.default_rng(5)
    ws = [(rng.standard_normal((a, b)) * 0.05).astype(np.float32)
          for a, b in [(256, 512), (512, 512), (512, 64)]]
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 256), "f32")])
    (h,) = fn.arguments
    for i, w in enumerate(ws):
        h = fn.op("matmul", [h, fn.constant(w, name=f"w{i}")])
        if i < 2:
            h = fn.op("relu", [h])
    fn.returns([h])
    m = compile_module(gb.finish())
    x = rng.standard_normal((256, 256)).astype(np.float32)
    m(x)
    weights = sum(w.nbytes for w in ws)
    activations = x.nbytes + 2 * 256 * 512 * 4 + 256 * 64 * 4
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        y = m(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(
        y, np.maximum(np.maximum(x @ ws[0], 0) @ ws[1], 0) @ ws[2], rtol=1e-3, atol=1e-3)
    # the traced peak of a steady-state call: only the result is new
    assert peak - base <= y.nbytes + 64 * 1024
    assert peak - base < 2 * weights + activations


@pytest.mark.parametrize("activation", ["relu", "none"])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_specialised_dense_matmul_equals_the_general_one(activation: str,
                                                         transpose_b: bool) -> None:
    from pytfrt.backends.cpu import graph_nn

    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 5) if transpose_b else (5, 6)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    attrs = dict(transpose_a=False, transpose_b=transpose_b, activation=activation, alpha=0.0,
                 epilogue_operands=(1, 0))
    dense = graph_nn.matmul.specialize({1: w, 2: bias}, **attrs)  # type: ignore[attr-defined]
    assert dense is not None
    for rows in (1, 3, 150_000):  # the last one is past the short path: the general entry
        a = rng.standard_normal((rows, 5)).astype(np.float32)
        want = (a.astype(np.float64) @ (w.T if transpose_b else w) + bias)
        if activation == "relu":
            want = np.maximum(want, 0)
        np.testing.assert_allclose(dense(a, w, bias), want, rtol=1e-4, atol=1e-4)
        out = np.empty((rows, 6), np.float32)
        assert dense(a, w, bias, out=out) is out
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="dtype"):  # a wrong input: the general entry's error
        dense(np.ones((2, 5), np.float64), w, bias)
    # no constant weight, a residual or another activation: not specialised
    assert graph_nn.matmul.specialize({2: bias}, **attrs) is None  # type: ignore[attr-defined]
    assert graph_nn.matmul.specialize(  # type: ignore[attr-defined]
        {1: w}, **{**attrs, "activation": "tanh", "epilogue_operands": (0, 0)}) is None
