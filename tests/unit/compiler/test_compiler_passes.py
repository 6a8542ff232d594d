"""The graph passes keep the model's meaning: optimised vs unoptimised on random graphs
(Hypothesis), plus each pass's rewrite checked directly."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytfrt.compiler import GraphBuilder, GraphModule
from pytfrt.compiler.api import compile_module
from pytfrt.compiler.passes import default_pipeline, run_passes

UNARY = ["relu", "sigmoid", "tanh", "exp", "neg", "square", "silu", "relu6", "abs", "gelu",
         "softsign", "hard_swish"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def _compare(build: Callable[[], GraphModule], inputs: list[np.ndarray], rtol: float = 1e-5,
             atol: float = 1e-5) -> GraphModule:
    plain = compile_module(build(), optimize=False)
    gm = default_pipeline(build())
    fast = compile_module(gm, optimize=False)
    a, b = plain(*inputs), fast(*inputs)
    for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,),
                    strict=True):
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_allclose(v, u, rtol=rtol, atol=atol)
    return gm


def _op_names(gm: GraphModule) -> list[str]:
    return [op.name for op in gm.function().body.block.ops]


@st.composite
def elementwise_graphs(draw: st.DrawFn) -> tuple[list[tuple], int]:
    """A random DAG of elementwise ops: (op, operand indices) steps over 2 inputs + 1 const."""
    steps = []
    n = 3
    for _ in range(draw(st.integers(2, 7))):
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(UNARY)), [draw(st.integers(0, n - 1))]))
        else:
            steps.append((draw(st.sampled_from(BINARY)),
                          [draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))]))
        n += 1
    outputs = draw(st.integers(1, 2))
    return steps, outputs


@SETTINGS
@given(elementwise_graphs(), st.integers(0, 2**31 - 1))
def test_elementwise_fusion_keeps_results(graph: tuple[list[tuple], int], seed: int) -> None:
    steps, n_out = graph
    rng = np.random.default_rng(seed)
    const = rng.uniform(-1, 1, (5,)).astype(np.float32)

    def build() -> GraphModule:
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (None, 5), "f32"), ("y", (5,), "f32")])
        vals = [*fn.arguments, fn.constant(const)]
        for op, args in steps:
            vals.append(fn.op(op, [vals[i] for i in args]))
        outs = vals[-n_out:]
        if all(v.shape == (5,) for v in outs):  # keep an input-dependent output
            outs = [fn.op("add", [outs[0], vals[0]])]
        fn.returns(outs)
        return gb.finish()

    x = rng.uniform(-2, 2, (3, 5)).astype(np.float32)
    y = rng.uniform(-2, 2, (5,)).astype(np.float32)
    _compare(build, [x, y], rtol=2e-5, atol=2e-5)


@SETTINGS
@given(st.sampled_from(["NHWC", "NCHW"]), st.integers(1, 3), st.integers(1, 2), st.booleans(),
       st.sampled_from(["relu", "relu6", "sigmoid", "none"]), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_conv_batch_norm_epilogue_fusion_keeps_results(
        layout: str, k: int, stride: int, residual: bool, act: str, bias: bool,
        seed: int) -> None:
    rng = np.random.default_rng(seed)
    cin, cout = 3, 4
    wshape = (k, k, cin, cout) if layout == "NHWC" else (cout, cin, k, k)
    w = rng.standard_normal(wshape).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    bn = [rng.uniform(0.5, 2, cout).astype(np.float32) for _ in range(4)]
    xshape = (2, 6, 6, cin) if layout == "NHWC" else (2, cin, 6, 6)
    pad = (k - 1) // 2

    def build() -> GraphModule:
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (None, *xshape[1:]), "f32")])
        (x,) = fn.arguments
        y = fn.op("conv2d", [x, fn.constant(w, name="w")], layout=layout,
                  strides=[stride, stride], pads=[pad, k - 1 - pad, pad, k - 1 - pad])
        if bias:
            bc = b if layout == "NHWC" else b.reshape(cout, 1, 1)
            y = fn.op("add", [y, fn.constant(bc, name="b")])
        axis = 3 if layout == "NHWC" else 1
        y = fn.op("batch_norm", [y, *[fn.constant(p, name=f"bn{i}") for i, p in enumerate(bn)]],
                  epsilon=1e-3, axis=axis)
        if residual:
            y = fn.op("add", [y, fn.op("sigmoid", [y])])
        if act != "none":
            y = fn.op(act, [y])
        fn.returns([y])
        return gb.finish()

    x = rng.standard_normal(xshape).astype(np.float32)
    gm = _compare(build, [x], rtol=1e-4, atol=1e-4)
    names = _op_names(gm)
    assert "tg.batch_norm" not in names or bias  # BN folds when the conv has no bias epilogue
    if not bias and not residual:  # NCHW: the conv runs NHWC between two transposes
        assert names.count("tg.conv2d") == 1 and len(
            [n for n in names if n not in ("tg.constant", "func.return", "tg.transpose")]) == 1
        assert names.count("tg.transpose") == (2 if layout == "NCHW" else 0)


def test_mlp_pipeline_fuses_bias_and_relu_into_matmul() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)

    def build() -> GraphModule:
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (None, 8), "f32")])
        h = fn.op("matmul", [fn.arguments[0], fn.constant(w, name="w")])
        fn.returns([fn.op("relu", [fn.op("add", [h, fn.constant(b, name="b")])])])
        return gb.finish()

    gm = _compare(build, [rng.standard_normal((2, 8)).astype(np.float32)])
    assert _op_names(gm) == ["tg.constant", "tg.constant", "tg.matmul", "func.return"]
    assert set(gm.weights) == {"w", "b"}


def test_constant_fold_then_dce_removes_dead_weights() -> None:
    def build() -> GraphModule:
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (4,), "f32")])
        big = fn.constant(np.arange(100, dtype=np.float32), name="big")
        s = fn.op("reduce_sum", [fn.op("mul", [big, big])])
        fn.returns([fn.op("mul", [fn.arguments[0], s])])
        return gb.finish()

    gm = run_passes(build(), ["tg-constant-fold", "tg-dce"])
    assert "big" not in gm.weights
    assert _op_names(gm) == ["tg.constant", "tg.mul", "func.return"]
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(compile_module(gm, optimize=False)(x),
                               x * float(np.sum(np.arange(100.0) ** 2)))


def test_the_pipeline_is_idempotent() -> None:
    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 6)).astype(np.float32)

    def build() -> GraphModule:
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (None, 6), "f32")])
        (x,) = fn.arguments
        h = fn.op("relu", [fn.op("matmul", [x, fn.constant(w, name="w")])])
        h = fn.op("tanh", [fn.op("mul", [fn.op("exp", [h]), fn.constant(np.float32(0.5))])])
        fn.returns([fn.op("add", [h, x])])
        return gb.finish()

    once = default_pipeline(build())
    text = str(once)
    twice = default_pipeline(once)
    assert str(twice) == text
    x = rng.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(compile_module(twice, optimize=False)(x),
                               compile_module(build(), optimize=False)(x), rtol=1e-5, atol=1e-6)


@SETTINGS
@given(st.sampled_from(["NHWC", "NCHW", "matmul"]), st.booleans(), st.booleans(),
       st.booleans(), st.integers(0, 2**31 - 1))
def test_an_expanded_batch_norm_folds_into_the_conv_or_matmul(
        kind: str, pre_bias: bool, offset: bool, scalar_scale: bool, seed: int) -> None:
    """``[add(] mul([add(] y, b [)], s) [, o)]`` with per-channel constants (TF's inference
    batch norm after constant folding) becomes one conv/matmul with a bias epilogue."""
    rng = np.random.default_rng(seed)
    cin, cout = 3, 4
    wshape: tuple[int, ...]
    xshape: tuple[int, ...]
    cshape: tuple[int, ...]
    if kind == "matmul":
        wshape, xshape, cshape = (cin, cout), (2, cin), (1, cout)
    elif kind == "NHWC":
        wshape, xshape, cshape = (3, 3, cin, cout), (2, 5, 5, cin), (1, 1, 1, cout)
    else:
        wshape, xshape, cshape = (cout, cin, 3, 3), (2, cin, 5, 5), (cout, 1, 1)
    w = rng.standard_normal(wshape).astype(np.float32)
    consts = [rng.uniform(0.5, 2, cout).astype(np.float32).reshape(cshape) for _ in range(3)]
    if scalar_scale:
        consts[1] = np.array(1.5, np.float32)

    def build() -> GraphModule:
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (None, *xshape[1:]), "f32")])
        (x,) = fn.arguments
        if kind == "matmul":
            y = fn.op("matmul", [x, fn.constant(w, name="w")])
        else:
            y = fn.op("conv2d", [x, fn.constant(w, name="w")], layout=kind, strides=[1, 1],
                      pads=[1, 1, 1, 1])
        if pre_bias:
            y = fn.op("add", [y, fn.constant(consts[0], name="b")])
        y = fn.op("mul", [fn.constant(consts[1], name="s"), y])
        if offset:
            y = fn.op("add", [y, fn.constant(consts[2], name="o")])
        fn.returns([fn.op("relu", [y])])
        return gb.finish()

    gm = _compare(build, [rng.standard_normal(xshape).astype(np.float32)], rtol=1e-4,
                  atol=1e-4)
    names = [n for n in _op_names(gm) if n not in ("tg.constant", "func.return")]
    if kind == "NCHW":  # -tg-layout-nhwc: the conv runs NHWC between two transposes
        assert names == ["tg.transpose", "tg.conv2d", "tg.transpose"]
    else:
        assert names == ["tg.matmul" if kind == "matmul" else "tg.conv2d"]


def test_a_scale_that_varies_along_another_axis_is_not_folded() -> None:
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 3, 2, 4)).astype(np.float32)
    s = rng.uniform(0.5, 2, (1, 5, 1, 1)).astype(np.float32)  # along H, not the channels

    def build() -> GraphModule:
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (None, 5, 5, 2), "f32")])
        y = fn.op("conv2d", [fn.arguments[0], fn.constant(w, name="w")], layout="NHWC",
                  strides=[1, 1], pads=[1, 1, 1, 1])
        fn.returns([fn.op("mul", [y, fn.constant(s, name="s")])])
        return gb.finish()

    gm = _compare(build, [rng.standard_normal((2, 5, 5, 2)).astype(np.float32)], rtol=1e-4,
                  atol=1e-4)
    assert "tg.mul" in _op_names(gm) or "tg.fused_elementwise" in _op_names(gm)


def test_a_wide_dense_weight_is_stored_transposed_with_the_same_results() -> None:
    """``-tg-matmul-weight-layout``: a ``(k, 1024)`` float32 weight (4 KB rows) becomes a
    ``(1024, k)`` weight read with ``transpose_b``; the old weight is gone (no copy kept) and
    the results equal the unoptimised graph's and float64 NumPy's."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((24, 1024)).astype(np.float32)
    b = rng.standard_normal(1024).astype(np.float32)

    def build() -> GraphModule:
        gb = GraphBuilder()
        fn = gb.function("main", inputs=[("x", (None, 24), "f32")])
        h = fn.op("matmul", [fn.arguments[0], fn.constant(w, name="w")])
        fn.returns([fn.op("relu", [fn.op("add", [h, fn.constant(b, name="b")])])])
        return gb.finish()

    x = rng.standard_normal((70, 24)).astype(np.float32)
    gm = _compare(build, [x])
    assert "w" not in gm.weights
    (name,) = [n for n, a in gm.weights.items() if a.shape == (1024, 24)]
    np.testing.assert_array_equal(gm.weights[name], w.T)
    mm = [op for op in gm.function().body.block.ops if op.name == "tg.matmul"]
    assert len(mm) == 1 and "transpose_b = true" in str(mm[0])
    want = np.maximum(x.astype(np.float64) @ w + b, 0)
    np.testing.assert_allclose(compile_module(gm, optimize=False)(x), want, rtol=1e-4, atol=1e-4)
