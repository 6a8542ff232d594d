"""``-tg-shape-plans`` and the ``tg.shape_plan`` kernel: a model's shape computations run once
per distinct input shape, with the same results as the separate kernels (the same graph
compiled without the passes is the oracle), for shapes that come back after others."""

from __future__ import annotations

import numpy as np
import pytest

from pytfrt.backends.cpu import shape_plan
from pytfrt.compiler.api import compile_module, parse_graph

# a Transformer's heads split and merge, a position range and a causal mask, all computed
# from the input's shape at run time (as torch's ONNX export writes them)
_GRAPH = """
func.func @main(%x: tensor<?x?x8xf32>) -> (tensor<?x?x2x4xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %s = "tg.shape"(%x) {out_type = "i64"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %i0 = "tg.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %i1 = "tg.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %b = "tg.gather"(%s, %i0) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %t = "tg.gather"(%s, %i1) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %eb = "tg.expand_dims"(%b) {axis = 0 : i64} : (tensor<i64>) -> tensor<1xi64>
  %et = "tg.expand_dims"(%t) {axis = 0 : i64} : (tensor<i64>) -> tensor<1xi64>
  %hd = "tg.constant"() {value = dense<[-1, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %v = "tg.concat"(%eb, %et, %hd) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = "tg.reshape"(%x, %v) {copy_zero = true} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %y = "tg.relu"(%x) : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %sy = "tg.shape"(%y) {out_type = "i64"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %ty = "tg.gather"(%sy, %i1) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %pos = "tg.range"(%i0, %ty, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %row = "tg.expand_dims"(%pos) {axis = 1 : i64} : (tensor<?xi64>) -> tensor<?x1xi64>
  %col = "tg.expand_dims"(%pos) {axis = 0 : i64} : (tensor<?xi64>) -> tensor<1x?xi64>
  %c = "tg.less_equal"(%col, %row) : (tensor<1x?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %zero = "tg.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %neg = "tg.constant"() {value = dense<-3.40282347e+38> : tensor<f32>} : () -> tensor<f32>
  %mask = "tg.select"(%c, %zero, %neg) : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %m2 = "tg.constant"() {value = dense<[-1, 16]> : tensor<2xi64>} : () -> tensor<2xi64>
  %flat = "tg.reshape"(%y, %m2) {copy_zero = true} : (tensor<?x?x8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  func.return %r, %mask, %flat : tensor<?x?x2x4xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}
"""  # noqa: E501


def test_plans_match_unplanned_model_across_shapes() -> None:
    from pytfrt.compiler.passes import default_pipeline

    gm = default_pipeline(parse_graph(_GRAPH))
    names = [op.name for op in gm.function("main").body.block.ops]
    assert names.count("tg.shape_plan") == 2
    assert not {"tg.gather", "tg.expand_dims", "tg.concat", "tg.range", "tg.select"} & set(names)
    fast = compile_module(gm, optimize=False)
    plain = compile_module(parse_graph(_GRAPH), optimize=False)
    rng = np.random.default_rng(0)
    for b, s in [(1, 4), (2, 6), (1, 4), (3, 2), (2, 6), (1, 2)]:  # shapes that come back
        x = rng.standard_normal((b, s, 8)).astype(np.float32)
        got, want = fast(x), plain(x)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        mask = np.asarray(got[1])
        assert mask.shape == (s, s) and (mask == 0).sum() == s * (s + 1) // 2


def _program() -> str:
    from pytfrt.compiler.kernel_programs import shape_plan_program
    from pytfrt.compiler.passes import run_passes

    gm = run_passes(parse_graph(_GRAPH), ["tg-shape-plans", "tg-dce"])
    plan_op = next(op for op in gm.function("main").body.block.ops
                   if op.name == "tg.shape_plan")
    return shape_plan_program(plan_op)


def test_kernel_caches_per_shape_and_returns_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    program = _program()
    monkeypatch.setattr(shape_plan, "MAX_ENTRIES", 2)
    monkeypatch.setattr(shape_plan, "_PLANS", {})
    fn = shape_plan.shape_plan
    a = fn(np.zeros((2, 3, 8), np.float32), program=program)
    np.testing.assert_array_equal(a, [2, 3, -1, 4])
    assert not a.flags.writeable
    assert fn(np.ones((2, 3, 8), np.float32), program=program) is a  # same shape: kept
    b = fn(np.zeros((5, 1, 8), np.float32), program=program)
    np.testing.assert_array_equal(b, [5, 1, -1, 4])
    fn(np.zeros((1, 1, 8), np.float32), program=program)  # a third shape drops the oldest
    plan = shape_plan.plan(program)
    assert len(plan.cache) == 2 and ((2, 3, 8),) not in plan.cache
    np.testing.assert_array_equal(fn(np.zeros((2, 3, 8), np.float32), program=program),
                                  [2, 3, -1, 4])
