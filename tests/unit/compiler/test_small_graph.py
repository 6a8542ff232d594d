"""``-tg-fuse-small-graph`` and its whole-region Numba kernel (``tg.fused_graph``).

Oracles: the same module compiled without the passes (every op on its own compute function),
JAX for the XOR training step, NumPy for the region kernel's op-by-op fallback.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import small_graph
from pytfrt.backends.cpu.ops import OpError
from pytfrt.compiler.api import compile_module
from pytfrt.compiler.builder import GraphBuilder, GraphModule
from pytfrt.compiler.passes import default_pipeline

SETTINGS = settings(max_examples=10, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                    phases=[Phase.explicit, Phase.generate])  # each example compiles: no shrinking
REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "mlp_xor"
BENCHMARKS = REPO / "benchmarks"

UNARY = ["sigmoid", "tanh", "exp", "neg", "square", "relu", "abs", "silu"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


def _compiled(model: Any) -> bool:
    """Whether the model's only kernel (its region) runs its Numba function now."""
    (name,) = re.findall(r"(_c\d+)\(", model.call_source)
    caller = inspect.unwrap(model._call.__globals__[name])  # past the read-only check's wrapper
    return caller.__globals__["_warm"] is True  # type: ignore[no-any-return]


def _ops(gm: GraphModule) -> list[str]:
    return [op.name for op in gm.function().body.block.ops]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[tuple[str, tuple[int, ...]]], list[tuple], int]:
    """A random program: input shapes and a list of steps over earlier values."""
    m, k, n = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    inputs = [("a", (m, k)), ("b", (k, n)), ("c", (n,)), ("d", (m, n))]
    steps = [("matmul", draw(st.booleans()))]  # value 4: [m, n]
    for _ in range(draw(st.integers(2, 7))):
        steps.append(draw(st.one_of(
            st.tuples(st.just("unary"), st.sampled_from(UNARY)),
            st.tuples(st.just("binary"), st.sampled_from(BINARY), st.sampled_from(["c", "d"])),
            st.tuples(st.just("reduce"), st.sampled_from(["reduce_sum", "reduce_mean",
                                                          "reduce_max", "reduce_min"]),
                      st.sampled_from([[0], [1], []]), st.booleans()),
            st.tuples(st.just("transpose")),
            st.tuples(st.just("reshape")),
            st.tuples(st.just("sigmoid_grad")),
            st.tuples(st.just("matmul_t")),
        )))
    return inputs, steps, draw(st.integers(0, 2**31 - 1))


def _build(inputs: list[tuple[str, tuple[int, ...]]], steps: list[tuple]) -> GraphModule:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[(name, shape, "f32") for name, shape in inputs])
    named = dict(zip([name for name, _ in inputs], fn.arguments, strict=True))
    a, b = named["a"], named["b"]
    cur = None
    outs = []
    for step in steps:
        kind = step[0]
        if kind == "matmul":
            cur = fn.op("matmul", [a, b], transpose_a=False, transpose_b=False)
            if step[1]:
                cur = fn.op("add", [cur, named["c"]])
            continue
        assert cur is not None
        if kind == "unary":
            cur = fn.op(step[1], [cur])
        elif kind == "binary":
            other = named[step[2]]
            if other.shape == cur.shape or (step[2] == "c" and cur.shape[-1:] == other.shape):
                cur = fn.op(step[1], [cur, other])
            else:
                cur = fn.op(step[1], [cur, cur])
        elif kind == "reduce":
            axes = [x for x in step[2] if x < len(cur.shape)]
            outs.append(fn.op(step[1], [cur], axes=axes, keepdims=step[3]))
        elif kind == "transpose" and len(cur.shape) == 2:
            cur = fn.op("transpose", [cur], perm=[1, 0])
        elif kind == "reshape":
            cur = fn.op("reshape", [cur], shape=[-1])
        elif kind == "sigmoid_grad":
            cur = fn.op("sigmoid_grad", [fn.op("sigmoid", [cur]), cur])
        elif kind == "matmul_t" and len(cur.shape) == 2:
            # cur^T @ cur: a gradient-style product
            cur = fn.op("matmul", [cur, cur], transpose_a=True, transpose_b=False)
    assert cur is not None
    fn.returns([cur, *outs])
    return gb.finish()


@SETTINGS
@given(graphs())
def test_a_fused_small_graph_computes_what_the_unfused_ops_compute(case: tuple) -> None:
    inputs, steps, seed = case
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _, shape in inputs]
    plain = compile_module(_build(inputs, steps), optimize=False)
    gm = default_pipeline(_build(inputs, steps))
    assert "tg.fused_graph" in _ops(gm)
    fast = compile_module(gm, optimize=False)
    want = plain(*arrays)
    want = want if isinstance(want, tuple) else (want,)
    for i in range(small_graph.COMPILE_AFTER + 2):  # op by op, then the Numba function
        if i == small_graph.COMPILE_AFTER + 1:
            assert small_graph.wait_for_compiles(timeout=300)  # started by the previous call
        got = fast(*arrays)
        got = got if isinstance(got, tuple) else (got,)
        for u, v in zip(want, got, strict=True):
            assert u.dtype == v.dtype and u.shape == v.shape
            np.testing.assert_allclose(v, u, rtol=2e-5, atol=2e-5)
    assert _compiled(fast)
    assert len(re.findall(r"_c\d+\(", fast.call_source)) == 1  # one call: the region


def _import(directory: Path, name: str) -> Any:
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def test_the_xor_training_step_is_one_region_and_matches_jax() -> None:
    pytest.importorskip("jax")
    import jax.numpy as jnp

    xt = _import(EXAMPLES, "xor_training")
    step = _import(BENCHMARKS, "xor").jax_step()  # the benchmark's JAX step: same maths
    model = xt.train_step.compiled(xt.INITIAL_PARAMS, xt.X, xt.Y)
    assert len(re.findall(r"_c\d+\(", model.call_source)) == 1  # one kernel call
    assert xt.LEARNING_RATE / 2 == 4.0  # the JAX step's rate
    ours = xt.INITIAL_PARAMS
    theirs = tuple(jnp.asarray(p) for p in ours)
    for _ in range(30):
        loss, ours = xt.train_step(ours, xt.X, xt.Y)
        jloss, theirs = step(theirs, xt.X, xt.Y)
        np.testing.assert_allclose(loss, np.asarray(jloss), rtol=1e-5, atol=1e-7)
    assert small_graph.wait_for_compiles(timeout=300)
    assert _compiled(model)
    for p, q in zip(ours, theirs, strict=True):
        assert p.dtype == np.float32
        np.testing.assert_allclose(p, np.asarray(q), rtol=1e-5, atol=1e-6)


PROGRAM = json.dumps({
    "inputs": [["float32", [3, 2]], ["float32", [2, 2]], ["float32", [2]]],
    "ops": [
        ["matmul", [0, 1, 2], {"activation": "tanh", "alpha": 0.2, "epilogue_operands": [1, 0],
                               "transpose_a": False, "transpose_b": True},
         [["float32", [3, 2]]]],
        ["reduce_max", [3], {"axes": [1], "keepdims": True}, [["float32", [3, 1]]]],
        ["transpose", [3], {"perm": [1, 0]}, [["float32", [2, 3]]]],
    ],
    "outputs": [4, 5],
})


def test_the_region_kernel_matches_numpy_and_its_op_by_op_fallback() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2)).astype(np.float32)
    w = rng.standard_normal((2, 2)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    y = np.tanh(x @ w.T + b)
    for _ in range(small_graph.COMPILE_AFTER + 1):  # op by op; the last call starts the compile
        small_graph.caller(PROGRAM)(x, w, b)
    assert small_graph.wait_for_compiles(timeout=300)
    assert small_graph.caller(PROGRAM).__globals__["_warm"] is True
    m, t = small_graph.caller(PROGRAM)(x, w, b)
    np.testing.assert_allclose(m, y.max(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(t, y.T, rtol=1e-6)
    for got, ref in zip((m, t), small_graph.evaluate(PROGRAM, x, w, b), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-6)
    # a non-contiguous input (a transposed view) and NaN propagation in reduce_max
    xt = np.asfortranarray(x)
    xt[1, 0] = np.nan
    m2, _ = small_graph.caller(PROGRAM)(xt, w, b)
    assert np.isnan(m2[1, 0]) and not np.isnan(m2[[0, 2], 0]).any()


def test_malformed_and_unsupported_programs_are_op_errors() -> None:
    with pytest.raises(OpError, match="malformed"):
        small_graph.kernel("{not json")
    bad = json.loads(PROGRAM)
    bad["ops"][0][0] = "softmax"
    with pytest.raises(OpError, match="'softmax' is not supported"):
        small_graph.kernel(json.dumps(bad))
    bad = json.loads(PROGRAM)
    bad["inputs"][0][0] = "int32"
    with pytest.raises(OpError, match="float32/float64"):
        small_graph.kernel(json.dumps(bad))


def test_the_generated_source_is_cached_on_disk(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTFRT_CACHE_DIR", str(tmp_path))
    program = json.loads(PROGRAM)
    program["ops"][0][2]["alpha"] = 0.25  # a program no other test compiled in this process
    program["ops"][0][2]["activation"] = "leaky_relu"
    text = json.dumps(program)
    x = np.arange(6, dtype=np.float32).reshape(3, 2) - 3
    w = np.eye(2, dtype=np.float32)
    b = np.zeros(2, np.float32)
    for _ in range(small_graph.COMPILE_AFTER + 1):
        m, _ = small_graph.caller(text)(x, w, b)
    y = np.where(x >= 0, x, 0.25 * x)
    np.testing.assert_allclose(m, y.max(axis=1, keepdims=True))
    files = list((tmp_path / "graphs").glob("g_*.py"))
    assert len(files) == 1 and "def _graph(" in files[0].read_text()


def test_a_cache_directory_others_may_write_is_not_used(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Code is imported from the cache: a directory others can write to would let them inject it.
    monkeypatch.setenv("PYTFRT_CACHE_DIR", str(tmp_path))
    d = small_graph.cache_dir()
    assert d == tmp_path / "graphs"
    d.chmod(0o777)
    assert small_graph.cache_dir() is None
    d.chmod(0o755)
    assert small_graph.cache_dir() == d


class _Terminal:
    """A standard error that says it is a terminal and records what is written to it."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_a_numba_compile_is_announced_once_on_a_terminal(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTFRT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(small_graph, "_ANNOUNCED", [])
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    program = json.loads(PROGRAM)
    program["ops"][0][2]["alpha"] = 0.375  # a program not compiled before (not in the cache)
    program["ops"][0][2]["activation"] = "leaky_relu"
    text = json.dumps(program)
    x, w, b = np.ones((3, 2), np.float32), np.eye(2, dtype=np.float32), np.zeros(2, np.float32)
    for _ in range(small_graph.COMPILE_AFTER):
        small_graph.caller(text)(x, w, b)
    assert term.text == ""  # the op-by-op calls compile nothing
    small_graph.caller(text)(x, w, b)
    assert term.text.count("pytfrt: compiling generated code with Numba in the background") == 1
    assert str(tmp_path / "graphs") in term.text
    assert small_graph.wait_for_compiles(timeout=300)
    # Now in Numba's cache, and announced already: silent.
    monkeypatch.setattr(small_graph, "_ANNOUNCED", [])
    small_graph.announce_compile(small_graph.kernel(text))
    small_graph.caller(text)(x, w, b)
    assert term.text.count("compiling") == 1


def test_no_announcement_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(small_graph, "_ANNOUNCED", [])
    small_graph.announce_compile(object())
    assert capsys.readouterr().err == "" and small_graph._ANNOUNCED == []


def test_calls_go_on_op_by_op_while_the_kernel_compiles(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The call that starts the Numba compile and the calls during it do not wait for it (a
    training loop does not pause): the compile here is held until the test lets it go."""
    monkeypatch.setenv("PYTFRT_CACHE_DIR", str(tmp_path))
    program = json.loads(PROGRAM)
    program["ops"][0][2]["alpha"] = 0.625  # a program not compiled before in this process
    program["ops"][0][2]["activation"] = "leaky_relu"
    text = json.dumps(program)
    k = small_graph.kernel(text)
    release = threading.Event()
    compile_now = k.compile

    def held(signature: Any) -> Any:
        assert release.wait(60)
        return compile_now(signature)

    monkeypatch.setattr(k, "compile", held)
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 2), (2, 2), (2,)))
    want = small_graph.evaluate(text, x, w, b)
    run = small_graph.caller(text)
    for _ in range(small_graph.COMPILE_AFTER + 5):  # the compile starts, and is held
        for got, ref in zip(run(x, w, b), want, strict=True):
            np.testing.assert_array_equal(got, ref)  # op by op: exactly the ops' results
    assert run.__globals__["_warm"] is False
    release.set()
    assert small_graph.wait_for_compiles(timeout=300)
    assert run.__globals__["_warm"] is True
    for got, ref in zip(run(x, w, b), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_a_background_compile_that_fails_leaves_the_region_op_by_op(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTFRT_CACHE_DIR", str(tmp_path))
    program = json.loads(PROGRAM)
    program["ops"][0][2]["alpha"] = 0.875  # a program not compiled before in this process
    program["ops"][0][2]["activation"] = "leaky_relu"
    text = json.dumps(program)

    def broken(signature: Any) -> Any:
        raise OSError("the cache file cannot be read")

    monkeypatch.setattr(small_graph.kernel(text), "compile", broken)
    x, w, b = np.ones((3, 2), np.float32), np.eye(2, dtype=np.float32), np.zeros(2, np.float32)
    want = small_graph.evaluate(text, x, w, b)
    run = small_graph.caller(text)
    with pytest.warns(RuntimeWarning, match="cache file cannot be read"):  # (once)
        for _ in range(small_graph.COMPILE_AFTER + 1):
            run(x, w, b)
        assert small_graph.wait_for_compiles(timeout=60)
        got = run(x, w, b)
    assert run.__globals__["_warm"] is False
    for g, r in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, r)
