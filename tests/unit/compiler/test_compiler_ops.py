"""Every catalogue op, compiled and run, against an independent reference (NumPy formulas,
Python's math module, explicit loops); and the catalogue/runtime-table consistency."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytfrt.backends.cpu.graph_kernels import graph_ops
from pytfrt.compiler import GraphBuilder
from pytfrt.compiler.api import compile_module
from pytfrt.compiler.ops import CATALOGUE
from pytfrt.compiler.types import dtype_name

R = np.random.default_rng(11)
F = R.standard_normal((3, 4)).astype(np.float32)
G = R.standard_normal((3, 4)).astype(np.float32)
P = R.uniform(0.1, 3, (3, 4)).astype(np.float32)
IA = R.integers(-9, 9, (3, 4)).astype(np.int32)
IB = np.where(R.integers(-9, 9, (3, 4)) == 0, 3, R.integers(-9, 9, (3, 4))).astype(np.int32)
B1 = R.integers(0, 2, (3, 4)).astype(bool)
B2 = R.integers(0, 2, (3, 4)).astype(bool)
X4 = R.standard_normal((2, 5, 6, 3)).astype(np.float32)


def vec(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.vectorize(fn, otypes=[np.float64])(x.astype(np.float64))


def run(op: str, inputs: list[np.ndarray], attrs: dict[str, Any],
        const_inputs: tuple[int, ...] = (), n: int | None = None) -> Any:
    gb = GraphBuilder()
    args = [(f"a{i}", a.shape, dtype_name(a.dtype)) for i, a in enumerate(inputs)
            if i not in const_inputs]
    fn = gb.function("main", inputs=args)
    it = iter(fn.arguments)
    vals = [fn.constant(a) if i in const_inputs else next(it) for i, a in enumerate(inputs)]
    out = fn.op(op, vals, n_results=n, **attrs)
    fn.returns(out if isinstance(out, list) else [out])
    model = compile_module(gb.finish(), optimize=False)
    return model(*[a for i, a in enumerate(inputs) if i not in const_inputs])


def trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([int(x / y) for x, y in zip(a.ravel(), b.ravel(), strict=True)],
                    a.dtype).reshape(a.shape)


BINARY: list[tuple[str, list[np.ndarray], Callable[..., np.ndarray]]] = [
    ("add", [F, G], lambda a, b: a + b),
    ("sub", [F, G], lambda a, b: a - b),
    ("mul", [F, G], lambda a, b: a * b),
    ("div", [F, P], lambda a, b: a / b),
    ("div", [IA, IB], trunc_div),
    ("floor_div", [IA, IB], lambda a, b: np.floor(a / b).astype(a.dtype)),
    ("floor_mod", [IA, IB], lambda a, b: a - np.floor(a / b).astype(a.dtype) * b),
    ("pow", [P, F], lambda a, b: np.exp(b * np.log(a.astype(np.float64)))),
    ("maximum", [F, G], lambda a, b: np.where(a > b, a, b)),
    ("minimum", [F, G], lambda a, b: np.where(a < b, a, b)),
    ("squared_difference", [F, G], lambda a, b: (a - b) ** 2),
    ("equal", [IA, IB], lambda a, b: a == b),
    ("not_equal", [IA, IB], lambda a, b: a != b),
    ("less", [F, G], lambda a, b: a < b),
    ("less_equal", [IA, IB], lambda a, b: a <= b),
    ("greater", [F, G], lambda a, b: a > b),
    ("greater_equal", [IA, IB], lambda a, b: a >= b),
    ("logical_and", [B1, B2], lambda a, b: a & b),
    ("logical_or", [B1, B2], lambda a, b: a | b),
    ("logical_xor", [B1, B2], lambda a, b: a ^ b),
    ("bitwise_and", [IA, IB], lambda a, b: a & b),
    ("bitwise_or", [IA, IB], lambda a, b: a | b),
    ("atan2", [F, G], lambda a, b: vec(lambda _: 0.0)(a) + np.vectorize(math.atan2)(
        a.astype(np.float64), b.astype(np.float64))),
]


@pytest.mark.parametrize(("op", "inputs", "ref"), BINARY, ids=[b[0] for b in BINARY])
def test_binary(op: str, inputs: list[np.ndarray], ref: Callable[..., np.ndarray]) -> None:
    got = run(op, inputs, {})
    want = ref(*inputs)
    assert got.shape == want.shape
    if want.dtype == bool:
        assert got.dtype == bool
        np.testing.assert_array_equal(got, want)
    else:
        assert got.dtype == inputs[0].dtype
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_binary_broadcasting() -> None:
    row = R.standard_normal((1, 4)).astype(np.float32)
    np.testing.assert_allclose(run("add", [F, row], {}), F + row)
    np.testing.assert_allclose(run("mul", [F[:, :1], row], {}), F[:, :1] * row)


def _sigmoid(v: float) -> float:
    return 1 / (1 + math.exp(-v))


UNARY: list[tuple[str, np.ndarray, dict[str, Any], Callable[[np.ndarray], np.ndarray]]] = [
    ("neg", F, {}, lambda x: -x),
    ("abs", F, {}, vec(abs)),
    ("exp", F, {}, vec(math.exp)),
    ("expm1", F, {}, vec(math.expm1)),
    ("log", P, {}, vec(math.log)),
    ("log1p", P, {}, vec(math.log1p)),
    ("sqrt", P, {}, vec(math.sqrt)),
    ("rsqrt", P, {}, vec(lambda v: 1 / math.sqrt(v))),
    ("square", F, {}, vec(lambda v: v * v)),
    ("reciprocal", P, {}, vec(lambda v: 1 / v)),
    ("sign", F, {}, vec(lambda v: math.copysign(1.0, v) if v else 0.0)),
    ("floor", F * 3, {}, vec(math.floor)),
    ("ceil", F * 3, {}, vec(math.ceil)),
    ("round", np.array([0.5, 1.5, 2.5, -0.5, -1.7], np.float32), {},
     lambda x: np.array([0.0, 2.0, 2.0, -0.0, -2.0])),
    ("tanh", F, {}, vec(math.tanh)),
    ("sigmoid", F, {}, vec(_sigmoid)),
    ("relu", F, {}, vec(lambda v: max(v, 0.0))),
    ("relu6", F * 5, {}, vec(lambda v: min(max(v, 0.0), 6.0))),
    ("elu", F, {}, vec(lambda v: v if v > 0 else math.exp(v) - 1)),
    ("selu", F, {}, vec(lambda v: 1.0507009873554805 * (v if v > 0 else 1.6732632423543772
                                                          * (math.exp(v) - 1)))),
    ("softplus", F, {}, vec(lambda v: math.log(1 + math.exp(v)))),
    ("softsign", F, {}, vec(lambda v: v / (1 + abs(v)))),
    ("erf", F, {}, vec(math.erf)),
    ("sin", F, {}, vec(math.sin)),
    ("cos", F, {}, vec(math.cos)),
    ("tan", F, {}, vec(math.tan)),
    ("silu", F, {}, vec(lambda v: v * _sigmoid(v))),
    ("hard_swish", F * 3, {}, vec(lambda v: v * min(max(v + 3, 0.0), 6.0) / 6)),
    ("identity", F, {}, lambda x: x),
    ("gelu", F, {"approximate": False}, vec(lambda v: v / 2 * (1 + math.erf(v / math.sqrt(2))))),
    ("gelu", F, {"approximate": True}, vec(lambda v: v / 2 * (1 + math.tanh(
        math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))))),
    ("leaky_relu", F, {"alpha": 0.3}, vec(lambda v: v if v >= 0 else 0.3 * v)),
    ("hard_sigmoid", F * 3, {"alpha": 0.2, "beta": 0.5},
     vec(lambda v: min(max(0.2 * v + 0.5, 0.0), 1.0))),
    ("clip", F, {"min": -0.5, "max": 0.25}, vec(lambda v: min(max(v, -0.5), 0.25))),
]


@pytest.mark.parametrize(("op", "x", "attrs", "ref"), UNARY,
                         ids=[f"{u[0]}{'_approx' if u[2].get('approximate') else ''}"
                              for u in UNARY])
def test_unary(op: str, x: np.ndarray, attrs: dict[str, Any],
               ref: Callable[[np.ndarray], np.ndarray]) -> None:
    got = run(op, [x], attrs)
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_allclose(got, ref(x), rtol=3e-6, atol=2e-6)


def test_predicates_cast_select() -> None:
    x = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(run("is_nan", [x], {}), [False, True, False, False])
    np.testing.assert_array_equal(run("is_inf", [x], {}), [False, False, True, True])
    np.testing.assert_array_equal(run("logical_not", [B1], {}), ~B1)
    f = np.array([-2.7, -0.5, 0.5, 2.7], np.float32)
    np.testing.assert_array_equal(run("cast", [f], {"to": "i32"}), [-2, 0, 0, 2])
    np.testing.assert_array_equal(run("cast", [IA], {"to": "f64"}), IA.astype(np.float64))
    np.testing.assert_array_equal(run("select", [B1, F, G], {}),
                                  [[a if c else b for c, a, b in zip(*r, strict=True)]
                                   for r in zip(B1, F, G, strict=True)])


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                "reduce_prod"])
@pytest.mark.parametrize(("axes", "keepdims"), [((), False), ((1,), True), ((0, -1), False)])
def test_reductions(op: str, axes: tuple[int, ...], keepdims: bool) -> None:
    fn = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
          "reduce_min": np.min, "reduce_prod": np.prod}[op]
    want = fn(F.astype(np.float64), axis=axes or None, keepdims=keepdims)
    np.testing.assert_allclose(run(op, [F], {"axes": axes, "keepdims": keepdims}), want,
                               rtol=1e-5, atol=1e-6)
    if op in ("reduce_sum", "reduce_max"):
        got = run(op, [IA], {"axes": axes, "keepdims": keepdims})
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, fn(IA, axis=axes or None, keepdims=keepdims))


def test_logical_reductions_arg_and_cumsum() -> None:
    np.testing.assert_array_equal(run("reduce_any", [B1], {"axes": [1]}), B1.any(axis=1))
    np.testing.assert_array_equal(run("reduce_all", [B1], {"axes": [0]}), B1.all(axis=0))
    got = run("argmax", [F], {"axis": 1, "output_type": "i32"})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [int(np.argmax(r)) for r in F])
    np.testing.assert_array_equal(run("argmin", [F], {"axis": 0, "keepdims": True}),
                                  [[int(np.argmin(c)) for c in F.T]])
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
    np.testing.assert_array_equal(run("cumsum", [x], {"axis": 1}), [[1, 3, 6], [4, 9, 15]])
    np.testing.assert_array_equal(run("cumsum", [x], {"axis": 1, "exclusive": True}),
                                  [[0, 1, 3], [0, 4, 9]])
    np.testing.assert_array_equal(run("cumsum", [x], {"axis": 1, "reverse": True}),
                                  [[6, 5, 3], [15, 11, 6]])
    np.testing.assert_array_equal(
        run("cumsum", [x], {"axis": 1, "exclusive": True, "reverse": True}),
        [[5, 3, 0], [11, 6, 0]])


def test_shape_ops() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(run("reshape", [x], {"shape": [4, -1]}), x.reshape(4, 6))
    np.testing.assert_array_equal(run("reshape", [x, np.array([6, 4])], {}, (1,)),
                                  x.reshape(6, 4))
    np.testing.assert_array_equal(run("reshape", [x, np.array([0, -1])], {"copy_zero": True},
                                      (1,)), x.reshape(2, 12))
    np.testing.assert_array_equal(run("transpose", [x], {"perm": [2, 0, 1]}),
                                  np.moveaxis(x, 2, 0))
    np.testing.assert_array_equal(run("concat", [x, x[:, :1]], {"axis": 1}),
                                  np.concatenate([x, x[:, :1]], 1))
    a, b = run("split", [x], {"axis": 2, "sizes": [1, -1]}, n=2)
    np.testing.assert_array_equal(a, x[:, :, :1])
    np.testing.assert_array_equal(b, x[:, :, 1:])
    np.testing.assert_array_equal(
        run("slice", [x], {"starts": [1, -100], "ends": [100, -1], "axes": [1, 2],
                           "steps": [1, 2]}), x[:, 1:, 0:3:2])
    np.testing.assert_array_equal(
        run("slice", [x, np.array([2]), np.array([-100]), np.array([1]), np.array([-1])], {},
            (1, 2, 3, 4)), x[:, 2::-1])
    np.testing.assert_array_equal(run("pad", [x], {"pads": [0, 1, 0, 0, 2, 1], "value": 7.0}),
                                  np.pad(x, ((0, 0), (1, 2), (0, 1)), constant_values=7))
    np.testing.assert_array_equal(run("pad", [x], {"pads": [0, 1, 1, 0, 1, 1],
                                                   "mode": "reflect"}),
                                  np.pad(x, ((0, 0), (1, 1), (1, 1)), mode="reflect"))
    np.testing.assert_array_equal(run("tile", [x], {"multiples": [1, 2, 1]}),
                                  np.concatenate([x, x], 1))
    np.testing.assert_array_equal(run("broadcast_to", [x[:, :1], np.array([2, 3, 4])], {},
                                      (1,)), np.repeat(x[:, :1], 3, axis=1))
    assert run("expand_dims", [x], {"axis": -1}).shape == (2, 3, 4, 1)
    assert run("squeeze", [x[:, :1]], {"axes": [1]}).shape == (2, 4)
    np.testing.assert_array_equal(run("shape", [x], {}), [2, 3, 4])
    assert int(run("size", [x], {"out_type": "i32"})) == 24
    np.testing.assert_array_equal(run("fill", [np.array([2, 2]), np.float32(3)], {}, (0,)),
                                  np.full((2, 2), 3, np.float32))
    np.testing.assert_array_equal(run("range", [np.int64(2), np.int64(9), np.int64(3)], {},
                                      (0, 1, 2)), [2, 5, 8])
    out = run("identity_n", [x], {}, n=1)
    np.testing.assert_array_equal(out, x)


def test_gather_scatter_one_hot_where_top_k() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[2, 0], [1, -1]], np.int64)
    np.testing.assert_array_equal(run("gather", [x, idx], {"axis": 1}),
                                  [[[r[2], r[0]], [r[1], r[3]]] for r in x])
    bidx = np.array([[0, 1], [2, 2], [3, 0]], np.int64)
    np.testing.assert_array_equal(run("gather", [x, bidx], {"axis": 1, "batch_dims": 1}),
                                  [[x[i, j] for j in bidx[i]] for i in range(3)])
    nd = np.array([[0, 1], [2, 3]], np.int64)
    np.testing.assert_array_equal(run("gather_nd", [x, nd], {}), [x[0, 1], x[2, 3]])
    upd = np.array([100, 200], np.float32)
    want = x.copy()
    want[0, 1], want[2, 3] = 100, 200
    np.testing.assert_array_equal(run("scatter_nd", [x, nd, upd], {}), want)
    oh = run("one_hot", [np.array([0, 2, 5]), np.int64(3), np.float32(1), np.float32(-1)],
             {"axis": -1}, (1, 2, 3))
    np.testing.assert_array_equal(oh, [[1, -1, -1], [-1, -1, 1], [-1, -1, -1]])
    np.testing.assert_array_equal(run("where", [B1], {}),
                                  [[i, j] for i in range(3) for j in range(4) if B1[i, j]])
    v, i = run("top_k", [np.array([[3, 1, 3, 2]], np.float32), np.int64(2)], {}, (1,), n=2)
    np.testing.assert_array_equal(v, [[3, 3]])
    np.testing.assert_array_equal(i, [[0, 2]])


def test_space_ops_and_resize() -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 1, 16)
    d = run("depth_to_space", [x], {"block_size": 2})
    # TF DepthToSpace (DCR): out[0, h, w, c] = in[0, 0, 0, (h * 2 + w) * 4 + c]
    assert d.shape == (1, 2, 2, 4)
    for h in range(2):
        for w in range(2):
            np.testing.assert_array_equal(d[0, h, w], x[0, 0, 0, (h * 2 + w) * 4:][:4])
    np.testing.assert_array_equal(run("space_to_depth", [d], {"block_size": 2}), x)
    img = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    near = run("resize", [img], {"size": [4, 6], "layout": "NCHW", "mode": "nearest",
                                 "coordinate_transformation_mode": "asymmetric",
                                 "nearest_mode": "floor"})
    np.testing.assert_array_equal(near[0, 0], img[0, 0].repeat(2, 0).repeat(2, 1))
    lin = run("resize", [img], {"size": [3, 5], "layout": "NCHW", "mode": "linear",
                                "coordinate_transformation_mode": "align_corners"})
    # align_corners: rows at 0, .5, 1 and columns at 0, .5, ..., 2 of the input grid
    want = np.array([[r * 3 + c for c in np.linspace(0, 2, 5)] for r in np.linspace(0, 1, 3)])
    np.testing.assert_allclose(lin[0, 0], want, rtol=1e-6)


def _pool_ref(x: np.ndarray, k: int, s: int, fn: Callable[..., Any]) -> np.ndarray:
    n, h, w, c = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    return np.array([[[[fn(x[b, i * s:i * s + k, j * s:j * s + k, ch]) for ch in range(c)]
                       for j in range(ow)] for i in range(oh)] for b in range(n)])


def test_nn_ops() -> None:
    np.testing.assert_allclose(run("max_pool2d", [X4], {"layout": "NHWC", "ksize": [2, 2],
                                                        "strides": [2, 2]}),
                               _pool_ref(X4, 2, 2, np.max))
    np.testing.assert_allclose(run("avg_pool2d", [X4], {"layout": "NHWC", "ksize": [3, 3],
                                                        "strides": [1, 1]}),
                               _pool_ref(X4, 3, 1, np.mean), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run("global_avg_pool", [X4], {"layout": "NHWC"}),
                               X4.mean(axis=(1, 2), keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run("global_max_pool", [X4.transpose(0, 3, 1, 2).copy()],
                                   {"layout": "NCHW"}),
                               X4.max(axis=(1, 2)).reshape(2, 3, 1, 1))
    e = np.exp(F - F.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run("softmax", [F], {}), e / e.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(run("log_softmax", [F], {"axis": 0}),
                               F - np.log(np.exp(F).sum(0, keepdims=True)), rtol=1e-5,
                               atol=1e-6)
    sc, of, mu, va = (R.uniform(0.5, 2, 3).astype(np.float32) for _ in range(4))
    np.testing.assert_allclose(run("batch_norm", [X4, sc, of, mu, va], {"epsilon": 0.01,
                                                                        "axis": 3}),
                               (X4 - mu) / np.sqrt(va + 0.01) * sc + of, rtol=1e-5, atol=1e-5)
    g, bt = R.standard_normal(4).astype(np.float32), R.standard_normal(4).astype(np.float32)
    mean, var = F.mean(1, keepdims=True), F.var(1, keepdims=True)
    np.testing.assert_allclose(run("layer_norm", [F, g, bt], {"axis": 1, "epsilon": 1e-5}),
                               (F - mean) / np.sqrt(var + 1e-5) * g + bt, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run("layer_norm", [F], {"axis": -1, "has_gamma": False,
                                                       "has_beta": False}),
                               (F - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run("l2_normalize", [F], {"axis": [1]}),
                               F / np.sqrt((F.astype(np.float64) ** 2).sum(1, keepdims=True)),
                               rtol=1e-5)
    x = R.standard_normal((1, 1, 1, 6)).astype(np.float32)
    sq = [sum(x[0, 0, 0, max(0, c - 1):c + 2] ** 2) for c in range(6)]
    np.testing.assert_allclose(run("lrn", [x], {"depth_radius": 1, "bias": 2.0, "alpha": 0.5,
                                                "beta": 0.75}),
                               x / (2 + 0.5 * np.array(sq)) ** 0.75, rtol=1e-5)


def test_conv2d_transpose_against_scatter_loops() -> None:
    x = R.standard_normal((1, 3, 3, 2)).astype(np.float32)
    w = R.standard_normal((2, 2, 4, 2)).astype(np.float32)  # HWOI
    got = run("conv2d_transpose", [x, w], {"layout": "NHWC", "strides": [2, 2]})
    want = np.zeros((1, 6, 6, 4))
    for i in range(3):
        for j in range(3):
            for a in range(2):
                for b in range(2):
                    want[0, 2 * i + a, 2 * j + b] += w[a, b] @ x[0, i, j]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_every_op_has_a_runtime_compute_function_with_its_attributes() -> None:
    table = graph_ops()
    for name, opdef in CATALOGUE.items():
        key = opdef.compute_key
        if key is None:
            continue
        assert key in table, f"tg.{name}: no compute function '{key}'"
        fn = table[opdef.prepare] if opdef.prepare else table[key]
        kw = {p.name for p in inspect.signature(fn).parameters.values()
              if p.kind is p.KEYWORD_ONLY} - {"out"}
        assert kw == set(opdef.attrs), f"tg.{name}: compute attributes {sorted(kw)}"


@pytest.mark.parametrize(("eq", "shapes"), [
    ("j,ij->ij", [(1,), (2, 3)]),            # a size-1 label takes the other operand's size
    ("ij,j->ij", [(2, 3), (1,)]),
    ("ij,kj->ikj", [(2, 1), (4, 3)]),
    ("...j,...j->...", [(1, 5, 3), (4, 1, 3)]),  # "..." dims broadcast right-aligned
    ("i...,i...->i...", [(2, 1), (2, 3, 1)]),
    ("ij,jk", [(2, 3), (3, 4)]),              # implicit output
])
def test_einsum_broadcasts_like_numpy(eq: str, shapes: list[tuple[int, ...]]) -> None:
    inputs = [R.standard_normal(s).astype(np.float32) for s in shapes]
    want = np.einsum(eq, *inputs)
    # the inferred static shape (what buffer planning and later ops rely on) ...
    fn = GraphBuilder().function("main", inputs=[(f"a{i}", s, "f32") for i, s in enumerate(shapes)])
    assert fn.op("einsum", list(fn.arguments), equation=eq).shape == want.shape
    # ... and the computed result
    got = np.asarray(run("einsum", inputs, {"equation": eq}))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_einsum_rejects_mismatched_labels() -> None:
    from pytfrt.compiler import GraphError

    with pytest.raises(GraphError, match="do not broadcast"):
        run("einsum", [F, R.standard_normal((5,)).astype(np.float32)], {"equation": "ij,j->i"})
