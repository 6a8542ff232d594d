"""Inputs are never written: graph kernels, eager ops and compiled models on read-only inputs.

NumPy raises on a write into a read-only array, so running code on read-only inputs turns a
silent in-place write (a caller's input, a model's weights) into an error.  Three layers:

* **Every graph kernel, in every test.**  ``tests/conftest.py`` turns ``PYTFRT_READONLY_OPERANDS``
  on for the whole session (``docs/config.md``): every compute function of the runtime table gets
  read-only views of its array operands, in every test that runs a kernel (the operator tests,
  the ONNX node suite, the Keras layers, the models...).  Here: the switch is on, and it does
  catch a kernel that writes (a planted one).  A run of the whole suite also fails unless every
  kernel of the table was run that way, in some test or a process a test started
  (``tests/conftest.py``, ``readonly_unreached.txt`` for the exceptions).
* **Compiled models** (Hypothesis): random graphs of catalogue ops -- elementwise records,
  matmul, reductions, softmax, shape ops, concat -- compiled with the default pipeline (fusion,
  buffer planning, in-place elementwise) and without it, called with read-only arrays: the call
  succeeds, the inputs keep their bytes, and the results equal the same call on writable copies.
* **Eager ops** (Hypothesis): every elementwise record's ``pytfrt.eager`` function and the other
  eager ops on read-only NumPy arrays: the inputs keep their bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytfrt import eager as te
from pytfrt.backends.cpu import graph_kernels
from pytfrt.backends.cpu.op_math import MATH
from pytfrt.compiler import GraphBuilder
from pytfrt.compiler.api import compile_module

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on inf/nan values

FLOAT_UNARY = sorted(m.name for m in MATH.values()
                     if m.arity == 1 and m.domain in ("float", "numeric", "arith", "any")
                     and m.result == "same" and not m.attrs)
FLOAT_BINARY = sorted(m.name for m in MATH.values()
                      if m.arity == 2 and m.domain in ("float", "numeric", "arith", "any")
                      and m.result == "same" and not m.attrs)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


def test_the_suite_runs_kernels_on_readonly_operands() -> None:
    """The switch is on for the session, and a kernel that writes its operand fails."""
    table = graph_kernels.graph_ops()
    assert all(getattr(fn, "__pytfrt_readonly__", False) for fn in table.values()
               if not getattr(fn, "opaque_result", False))

    def bad_relu(x: np.ndarray) -> np.ndarray:
        np.maximum(x, 0, out=x)  # writes its operand
        return x

    x = np.array([-1.0, 2.0], np.float32)
    with pytest.raises(ValueError, match="read-only"):
        graph_kernels.readonly_operands(bad_relu)(x)
    assert x.tolist() == [-1.0, 2.0]
    # a result that is a view of a writable operand stays writable for its users
    view = graph_kernels.readonly_operands(lambda a: a.reshape(2, 1))(x)
    assert view.flags.writeable and np.shares_memory(view, x)


# -- compiled models ---------------------------------------------------------------------------

SHAPE = (3, 4)


@st.composite
def programs(draw: Any) -> list[tuple[str, list[int], dict[str, Any]]]:
    """A random straight-line program over two (3, 4) float32 arguments (values 0 and 1).

    Value ``i`` is the result of step ``i - 2``; ops draw their operands among the (3, 4)
    values (``full``), and a step pair brings other shapes back to (3, 4).
    """
    steps: list[tuple[str, list[int], dict[str, Any]]] = []
    full = [0, 1]

    def add(op: str, operands: list[int], attrs: dict[str, Any], *, is_full: bool) -> int:
        steps.append((op, operands, attrs))
        index = len(steps) + 1
        if is_full:
            full.append(index)
        return index

    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["unary", "binary", "matmul", "reduce", "softmax",
                                     "transpose2", "concat_slice"]))
        pick = st.sampled_from(list(full))
        a, b = draw(pick), draw(pick)
        if kind == "unary":
            add(draw(st.sampled_from(FLOAT_UNARY)), [a], {}, is_full=True)
        elif kind == "binary":
            add(draw(st.sampled_from(FLOAT_BINARY)), [a, b], {}, is_full=True)
        elif kind == "matmul":  # (3,4) x (3,4)^T -> (3,3), then (3,3) x (3,4) -> (3,4)
            m = add("matmul", [a, b], {"transpose_b": True}, is_full=False)
            add("matmul", [m, a], {}, is_full=True)
        elif kind == "reduce":  # keepdims (3,1), broadcast back with an add
            op = draw(st.sampled_from(["reduce_sum", "reduce_max", "reduce_mean"]))
            r = add(op, [a], {"axes": [1], "keepdims": True}, is_full=False)
            add("add", [a, r], {}, is_full=True)
        elif kind == "softmax":
            add("softmax", [a], {"axis": -1}, is_full=True)
        elif kind == "transpose2":
            t = add("transpose", [a], {"perm": [1, 0]}, is_full=False)
            add("transpose", [t], {"perm": [1, 0]}, is_full=True)
        else:  # (6,4), then its rows 1..3
            c = add("concat", [a, b], {"axis": 0}, is_full=False)
            add("slice", [c], {"starts": [1], "ends": [4], "axes": [0]}, is_full=True)
    return steps


def _compile(steps: list[tuple[str, list[int], dict[str, Any]]], n_out: int,
             optimize: bool) -> Any:
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", SHAPE, "f32"), ("y", SHAPE, "f32")])
    values = list(fn.arguments)
    for op, operands, attrs in steps:
        values.append(fn.op(op, [values[i] for i in operands], **attrs))
    fn.returns(values[-n_out:])
    return compile_module(gb.finish(), optimize=optimize)


finite = hnp.arrays(np.float32, SHAPE, elements=st.floats(-3, 3, width=32))


@settings(max_examples=12)
@given(steps=programs(), x=finite, y=finite, n_out=st.integers(1, 3),
       optimize=st.booleans())
def test_compiled_models_never_write_their_inputs(steps: list[Any], x: np.ndarray,
                                                  y: np.ndarray, n_out: int,
                                                  optimize: bool) -> None:
    n_out = min(n_out, len(steps))
    model = _compile(steps, n_out, optimize)
    wx, wy = x.copy(), y.copy()  # writable inputs must not become the model's buffers either
    want = model(wx, wy)
    fx, fy = _frozen(x), _frozen(y)
    for _ in range(2):  # the second call reuses the first call's buffers
        got = model(fx, fy)
        assert np.array_equal(fx, x) and np.array_equal(fy, y)
        assert np.array_equal(wx, x) and np.array_equal(wy, y)
        for g, w in zip(got if isinstance(got, (list, tuple)) else [got],
                        want if isinstance(want, (list, tuple)) else [want], strict=True):
            # same values (a later call may take a compiled path: last-bit differences)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


# -- eager ops ---------------------------------------------------------------------------------

def _eager_calls(a: np.ndarray, b: np.ndarray) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = [
        (name, lambda f=te.MATH_FUNCTIONS[name]: f(a)) for name in FLOAT_UNARY
    ] + [(name, lambda f=te.MATH_FUNCTIONS[name]: f(a, b)) for name in FLOAT_BINARY]
    calls += [
        ("matmul", lambda: te.matmul(a, b, transpose_b=True)),
        ("reduce_sum", lambda: te.reduce_sum(a, axis=1)),
        ("reduce_mean", lambda: te.reduce_mean(a, axis=0, keepdims=True)),
        ("reduce_max", lambda: te.reduce_max(a)),
        ("reduce_min", lambda: te.reduce_min(a, axis=1)),
        ("argmax", lambda: te.argmax(a, axis=1)),
        ("softmax", lambda: te.softmax(a)),
        ("log_softmax", lambda: te.log_softmax(a)),
        ("cast", lambda: te.cast(a, np.float64)),
        ("reshape", lambda: te.reshape(a, (4, 3))),
        ("transpose", lambda: te.transpose(a)),
        ("expand_dims", lambda: te.expand_dims(a, 0)),
        ("squeeze", lambda: te.squeeze(te.expand_dims(a, 0), 0)),
        ("concat", lambda: te.concat([a, b], axis=1)),
        ("broadcast_to", lambda: te.broadcast_to(a[:1], a.shape)),
        ("where", lambda: te.where(a > b, a, b)),
        ("clip", lambda: te.clip(a, -1.0, 1.0)),
        ("gather", lambda: te.gather(a, np.array([2, 0], np.int32), axis=0)),
        ("zeros_like", lambda: te.zeros_like(a)),
        ("constant", lambda: te.constant(a) + 1),
        ("tensor ops", lambda: (te.constant(a) * b - a) / 2),
    ]
    return calls


@settings(max_examples=10)
@given(a=finite, b=finite)
def test_eager_ops_never_write_their_inputs(a: np.ndarray, b: np.ndarray) -> None:
    fa, fb = _frozen(a), _frozen(b)
    for name, call in _eager_calls(fa, fb):
        np.asarray(call())  # waits for the value; an error names the op
        assert np.array_equal(fa, a, equal_nan=True), name
        assert np.array_equal(fb, b, equal_nan=True), name
