"""Buffer planning at run time: steady-state calls reuse the arena's buffers, results never
alias them, and concurrent calls (separate arenas) all get correct results."""

from __future__ import annotations

import threading

import numpy as np

from pytfrt.compiler import GraphBuilder, GraphModule
from pytfrt.compiler.api import compile_module

RNG = np.random.default_rng(3)
W1 = RNG.standard_normal((16, 32)).astype(np.float32)
W2 = RNG.standard_normal((32, 32)).astype(np.float32)
W3 = RNG.standard_normal((32, 8)).astype(np.float32)


def _build() -> GraphModule:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 16), "f32")])
    (x,) = fn.arguments
    h1 = fn.op("relu", [fn.op("matmul", [x, fn.constant(W1, name="w1")])])
    h2 = fn.op("tanh", [fn.op("matmul", [h1, fn.constant(W2, name="w2")])])
    h3 = fn.op("add", [h2, h1])  # in place into a dying operand's buffer
    y = fn.op("matmul", [fn.op("sigmoid", [h3]), fn.constant(W3, name="w3")])
    fn.returns([fn.op("softmax", [y], axis=-1), fn.op("reshape", [h3], shape=[-1])])
    return gb.finish()


def _ref(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h1 = np.maximum(x @ W1, 0)
    h3 = np.tanh(h1 @ W2) + h1
    y = (1 / (1 + np.exp(-h3))) @ W3
    e = np.exp(y - y.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), h3.reshape(-1)


def test_steady_state_calls_reuse_the_arena_and_results_are_not_overwritten() -> None:
    model = compile_module(_build())
    assert model._arena_index >= 0
    x1 = RNG.standard_normal((3, 16)).astype(np.float32)
    x2 = RNG.standard_normal((3, 16)).astype(np.float32)
    first = model(x1)
    model(x2)
    (arena,) = model._arenas
    buffers = {k: id(v) for k, v in arena.slots.items()}
    assert buffers  # something was planned
    second = model(x2)
    third = model(x1)
    assert {k: id(v) for k, v in arena.slots.items()} == buffers  # no new buffers
    for got, (p, h) in ((first, _ref(x1)), (second, _ref(x2)), (third, _ref(x1))):
        np.testing.assert_allclose(got[0], p, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], h, rtol=1e-5, atol=1e-6)
    # results are owned by the caller: a later call does not change an earlier result
    np.testing.assert_allclose(first[1], _ref(x1)[1], rtol=1e-5, atol=1e-6)
    # a new batch size still computes correctly (buffers are re-made)
    x5 = RNG.standard_normal((5, 16)).astype(np.float32)
    np.testing.assert_allclose(model(x5)[0], _ref(x5)[0], rtol=1e-5, atol=1e-6)


def test_concurrent_calls_use_separate_arenas() -> None:
    model = compile_module(_build())
    inputs = [RNG.standard_normal((2, 16)).astype(np.float32) for _ in range(8)]
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for _ in range(30):
                got = model(inputs[i])
                want = _ref(inputs[i])
                np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert 1 <= len(model._arenas) <= 8
