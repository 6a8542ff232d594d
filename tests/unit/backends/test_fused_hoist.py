"""The flat fused loop evaluates ops that read no full-shaped input once (scalars) or once per
row position (per-channel operands), not per element: random programs over full, per-channel
and scalar inputs give bit-identical results to the same loop evaluating every op per element
and agree with NumPy; a batch norm's input-gradient program is hoisted."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import fused

_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum}
_UNARY = {"neg": np.negative, "square": np.square, "relu": lambda a: np.maximum(a, 0),
          "abs": np.abs}


@st.composite
def _programs(draw):  # type: ignore[no-untyped-def]
    """(program, kinds of the inputs, NumPy reference function): kinds 0 full, 1 scalar,
    2 per-channel; the last op reads a full value, so the flat loop runs."""
    kinds = draw(st.lists(st.sampled_from([0, 1, 2]), min_size=2, max_size=5))
    kinds[draw(st.integers(0, len(kinds) - 1))] = 0
    n = len(kinds)
    ops: list[list[object]] = []
    for _ in range(draw(st.integers(1, 7))):
        values = n + len(ops)
        if draw(st.booleans()):
            name = draw(st.sampled_from(sorted(_BINARY)))
            args = [draw(st.integers(0, values - 1)), draw(st.integers(0, values - 1))]
        elif draw(st.booleans()):
            name = "select"  # select(a > 0 as a number, b, c): a condition of any kind
            args = [draw(st.integers(0, values - 1)) for _ in range(3)]
        else:
            name = draw(st.sampled_from(sorted(_UNARY)))
            args = [draw(st.integers(0, values - 1))]
        ops.append([name, args, {}])
    full = [j for j, k in enumerate(kinds) if k == 0]
    ops.append(["add", [n + len(ops) - 1, full[0]], {}])  # the result reads a full input
    return {"n": n, "ops": ops}, kinds


def _numpy(program: dict, inputs: list[np.ndarray]) -> np.ndarray:
    vals = list(inputs)
    for name, args, _ in program["ops"]:
        a = [vals[j] for j in args]
        if name == "select":
            vals.append(np.where(a[0] != 0, a[1], a[2]))
        elif name in _BINARY:
            vals.append(_BINARY[name](a[0], a[1]))
        else:
            vals.append(_UNARY[name](a[0]))
    return vals[-1]


@settings(max_examples=10, deadline=None)
@given(prog=_programs(), rows=st.integers(1, 9), k=st.integers(2, 17),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**31 - 1))
def test_hoisted_loop_is_bit_identical_to_the_ufunc(prog, rows, k, dtype, seed):
    program, kinds = prog
    rng = np.random.default_rng(seed)
    shape = (rows, 3, k)
    inputs = [rng.standard_normal(shape if kd == 0 else () if kd == 1 else (k,)).astype(dtype)
              for kd in kinds]
    text = json.dumps(program)
    got = fused.run(text, *inputs)
    assert fused._PLANS[next(reversed(fused._PLANS))][1] == tuple(kinds)  # the flat loop ran
    every_element = fused.compile_flat(text, (np.dtype(dtype).name,) * len(inputs),
                                       tuple(kinds), hoist=False)
    want = np.empty(shape, dtype)
    every_element(want.reshape(-1), *[a.item() if kd == 1 else a.reshape(-1)
                                      for a, kd in zip(inputs, kinds, strict=True)])
    np.testing.assert_array_equal(got, want)
    ref = _numpy(program, [a.astype(np.float64) for a in inputs])
    np.testing.assert_allclose(got, np.broadcast_to(ref, shape), rtol=1e-5, atol=1e-5)


def test_batch_norm_input_gradient_is_hoisted():
    """TF's batch-norm input gradient as ``-tg-fuse-elementwise`` leaves it (x, mean, the
    per-channel sums, counts, the ReLU's gradient, gamma * rsqrt(var + eps)): the divisions
    of per-channel sums by counts run once per channel, and the result matches NumPy."""
    program = {"n": 9, "ops": [["sub", [0, 1], {}], ["div", [2, 3], {}], ["mul", [4, 10], {}],
                               ["mul", [11, 9], {}], ["div", [5, 6], {}], ["mul", [7, 8], {}],
                               ["add", [14, 13], {}], ["add", [15, 12], {}]]}
    kinds = (fused.FULL, fused.ROW, fused.ROW, fused.SCALAR_IN, fused.SCALAR_IN, fused.ROW,
             fused.SCALAR_IN, fused.FULL, fused.ROW)
    lines, result = fused.scalar_body(program, [f"a{i}" for i in range(9)])
    src = fused._hoisted(9, kinds, program, lines, result)
    loop = src[src.index("i = r * k + c"):]
    assert "/" not in loop and "np.full(k, v1)" not in src and "np.full(k, v2)" in src
    rng = np.random.default_rng(0)
    x, g = (rng.standard_normal((4, 5, 5, 16)).astype(np.float32) for _ in range(2))
    mean, s1, s2 = (rng.standard_normal((1, 1, 1, 16)).astype(np.float32) for _ in range(3))
    scale = rng.standard_normal(16).astype(np.float32)
    cnt, coef, cnt2 = np.float32(100.0), np.float32(-0.5), np.float32(100.0)
    got = fused.run(json.dumps(program), x, mean, s1, cnt, coef, s2, cnt2, g, scale)
    ref = g * scale + s2 / cnt2 + coef * (s1 / cnt) * (x - mean)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
