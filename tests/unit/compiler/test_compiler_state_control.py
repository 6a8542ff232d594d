"""Variables (state threaded by a chain) and functional control flow (if, case, while),
compiled and run against sequential Python references."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pytfrt
from pytfrt.compiler import GraphBuilder, GraphError
from pytfrt.compiler.api import compile_module


def _counter():  # type: ignore[no-untyped-def]
    """y = v; v += x; v *= 2 (as assign of v * 2); returns (y, v after)."""
    gb = GraphBuilder()
    gb.variable("v", np.zeros(3, np.float32))
    fn = gb.function("main", inputs=[("x", (3,), "f32")])
    (x,) = fn.arguments
    before = fn.op("read_variable", [], name="v")
    fn.op("assign_add_variable", [x], name="v")
    mid = fn.op("read_variable", [], name="v")
    fn.op("assign_variable", [fn.op("mul", [mid, fn.constant(np.float32(2))])], name="v")
    after = fn.op("read_variable", [], name="v")
    fn.returns([before, after], names=["before", "after"])
    return gb.finish()


def test_variables_persist_across_calls_in_program_order(tmp_path: Path) -> None:
    model = compile_module(_counter())
    v = np.zeros(3, np.float32)
    for step in range(4):
        x = np.full(3, step + 1, np.float32)
        before, after = model(x)
        np.testing.assert_array_equal(before, v)
        v = (v + x) * 2
        np.testing.assert_array_equal(after, v)
    np.testing.assert_array_equal(model.variables["v"], v)
    model.variables["v"][:] = -1  # a copy: the model is unchanged
    np.testing.assert_array_equal(model.variables["v"], v)
    model.save(tmp_path / "m")
    loaded = pytfrt.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.variables["v"], v)


def test_unknown_variable_is_a_graph_error() -> None:
    fn = GraphBuilder().function("main")
    with pytest.raises(GraphError, match="unknown variable 'w'"):
        fn.op("read_variable", [], name="w")


def _branches(gb: GraphBuilder) -> None:
    for name, op in (("double", "add"), ("square", "mul")):
        f = gb.function(name, inputs=[("a", (None,), "f32")])
        (a,) = f.arguments
        f.returns([f.op(op, [a, a])])


def test_if_and_case() -> None:
    gb = GraphBuilder()
    _branches(gb)
    neg = gb.function("negate", inputs=[("a", (None,), "f32")])
    neg.returns([neg.op("neg", [neg.arguments[0]])])
    fn = gb.function("main", inputs=[("p", (), "i1"), ("i", (), "i32"), ("x", (None,), "f32")])
    p, i, x = fn.arguments
    y = fn.op("if", [p, x], then_branch="double", else_branch="square")
    z = fn.op("case", [i, y], branches=["double", "square", "negate"])
    assert y.shape == (None,)
    fn.returns([z])
    model = compile_module(gb.finish())
    x = np.array([1.0, -2.0, 3.0], np.float32)
    for pv in (True, False):
        for iv in (0, 1, 2, 7):
            y = x + x if pv else x * x
            want = [y + y, y * y, -y][min(iv, 2)]
            np.testing.assert_array_equal(model(np.bool_(pv), np.int32(iv), x), want)


def test_while_loop() -> None:
    """while i < n: i += 1; acc = acc * 2 + x  (x a loop-invariant captured as an argument)."""
    gb = GraphBuilder()
    cond = gb.function("cond", inputs=[("i", (), "i32"), ("n", (), "i32"), ("acc", (2,), "f32"),
                                       ("x", (2,), "f32")])
    i, n, acc, x = cond.arguments
    cond.returns([cond.op("less", [i, n])])
    body = gb.function("body", inputs=[("i", (), "i32"), ("n", (), "i32"), ("acc", (2,), "f32"),
                                       ("x", (2,), "f32")])
    i, n, acc, x = body.arguments
    two = body.constant(np.float32(2))
    body.returns([body.op("add", [i, body.constant(np.int32(1))]), n,
                  body.op("add", [body.op("mul", [acc, two]), x]), x])
    fn = gb.function("main", inputs=[("n", (), "i32"), ("x", (2,), "f32")])
    n, x = fn.arguments
    zero = fn.constant(np.int32(0))
    acc0 = fn.constant(np.zeros(2, np.float32))
    outs = fn.op("while", [zero, n, acc0, x], cond="cond", body="body")
    fn.returns([outs[0], outs[2]], names=["steps", "acc"])
    model = compile_module(gb.finish())
    xv = np.array([1.0, 0.5], np.float32)
    for nv in (0, 1, 5):
        acc = np.zeros(2, np.float32)
        for _ in range(nv):
            acc = acc * 2 + xv
        steps, got = model(np.int32(nv), xv)
        assert int(steps) == nv
        np.testing.assert_array_equal(got, acc)


def test_while_with_a_stateful_body() -> None:
    """The body adds to a variable: the chain runs through the loop."""
    gb = GraphBuilder()
    gb.variable("total", np.zeros((), np.int64))
    cond = gb.function("cond", inputs=[("i", (), "i64")])
    cond.returns([cond.op("less", [cond.arguments[0], cond.constant(np.int64(4))])])
    body = gb.function("body", inputs=[("i", (), "i64")])
    (i,) = body.arguments
    body.op("assign_add_variable", [i], name="total")
    body.returns([body.op("add", [i, body.constant(np.int64(1))])])
    fn = gb.function("main", inputs=[("start", (), "i64")])
    out = fn.op("while", [fn.arguments[0]], cond="cond", body="body", n_results=1)
    fn.returns([out, fn.op("read_variable", [], name="total")])
    model = compile_module(gb.finish())
    assert [int(v) for v in model(np.int64(1))] == [4, 1 + 2 + 3]
    assert [int(v) for v in model(np.int64(0))] == [4, 6 + 0 + 1 + 2 + 3]


def test_concurrent_updates_are_serialised() -> None:
    import threading

    gb = GraphBuilder()
    gb.variable("total", np.zeros((), np.int64))
    fn = gb.function("main", inputs=[("x", (), "i64")])
    old = fn.op("read_variable", [], name="total")
    fn.op("assign_variable", [fn.op("add", [old, fn.arguments[0]])], name="total")
    fn.returns([old])
    model = compile_module(gb.finish())
    seen: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(50):
            before = int(model(np.int64(1)))
            with lock:
                seen.append(before)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(model.variables["total"]) == 300  # no update lost (read-add-assign atomic)
    assert sorted(seen) == list(range(300))  # each call saw a distinct state
