"""Every elementwise op gives the same answer on every path, at extreme and special inputs.

Each record of :data:`pytfrt.backends.cpu.op_math.MATH` runs through

* **eager** -- its ``pytfrt.eager`` function (``eager.MATH_FUNCTIONS``, fast paths included);
* **compiled, unfused** -- ``@pytfrt.function(optimize=False)``: the graph kernel ``tg.<op>``;
* **fused** -- the fused elementwise kernel's code: the statements :func:`fused.scalar_body`
  makes, in the flat loop :func:`fused.compile_flat` compiles (one Numba function holding
  every op, so that one compile covers them; ``test_fused_kernel_is_the_generated_code`` runs
  the real ``fused.run`` on a few ops and requires the same bits);
* **small graph** -- one ``tg.fused_graph`` program (``small_graph.kernel``) of every op;
* **epilogue** -- the fused conv/matmul epilogue's activations (``apply_activation``);

at +-100, +-90, +-20, subnormals, +-0, NaN, +-inf (float32 and float64 on every path;
float16 and bfloat16 on the paths that take them: eager and unfused).  The oracle is NumPy /
SciPy in float64, written here independently of the op records, rounded to the dtype.
The reductions (``reduce_sum/mean/max/min``) run on eager, unfused and small-graph code.

Required (documented in ``docs/ops.md``): NaN exactly where the oracle has NaN, infinities
and zeros' presence exactly; eager and unfused give the same bits; finite values within
``ULPS`` units in the last place of the oracle (``TOL`` adds an absolute bound where a path
uses an approximation: the fused float32 ``erf`` is a rational fit within 7.7e-9).
"""

from __future__ import annotations

import json
import math

import ml_dtypes
import numba
import numpy as np
import pytest
from scipy import special

import pytfrt
from pytfrt import eager as te
from pytfrt.backends.cpu import fused, small_graph
from pytfrt.backends.cpu.op_math import MATH
from pytfrt.compiler.frontends import trace

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on inf/nan inputs

BF16 = np.dtype(ml_dtypes.bfloat16)
SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _relu6(x):
    return np.minimum(np.maximum(x, 0), 6)


REF = {  # the float64 oracle: (op, attrs) -> function
    "neg": np.negative, "abs": np.abs, "square": np.square, "exp": np.exp, "expm1": np.expm1,
    "log": np.log, "log1p": np.log1p, "sqrt": np.sqrt, "tanh": np.tanh, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x, "sigmoid": special.expit,
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "selu": lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x)),
    "softplus": lambda x: np.logaddexp(0, x), "softsign": lambda x: x / (1 + np.abs(x)),
    "silu": lambda x: x * special.expit(x), "hard_swish": lambda x: x * _relu6(x + 3) / 6,
    "erf": special.erf, "relu": lambda x: np.maximum(x, 0), "relu6": _relu6, "sign": np.sign,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "identity": lambda x: x,
    "stop_gradient": lambda x: x, "is_nan": np.isnan, "is_inf": np.isinf,
    "gelu": lambda x: 0.5 * x * (1 + special.erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (
        x + 0.044715 * x ** 3))),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.2 * x),
    "hard_sigmoid": lambda x: np.clip(0.2 * x + 0.5, 0, 1),
    "clip": lambda x: np.clip(x, -1.0, 2.0),
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "pow": np.power, "atan2": np.arctan2,
    "squared_difference": lambda a, b: (a - b) ** 2, "floor_div": np.floor_divide,
    "floor_mod": np.mod, "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
}
ATTRS = {"gelu_tanh": ("gelu", {"approximate": True}), "clip": ("clip", {"min": -1.0, "max": 2.0})}

ULPS = 4
"""Finite results within this many units in the last place of the rounded oracle (NumPy's and
libm's float32 transcendentals are within 1-4 ulp)."""
TOL = {("erf", "fused", np.float32): 1e-8, ("gelu", "fused", np.float32): 1e-7,
       ("gelu", "epilogue", np.float32): 1e-7}
"""Extra absolute tolerance where a path uses an approximation (the fused float32 ``erf``)."""
FLOAT_ONLY_PATHS = ("fused", "small_graph")  # float32/float64 only, float results only

UNARY = [n for n in [*MATH, "gelu_tanh"] if n in REF and (n not in MATH or MATH[n].arity == 1)]
BINARY = [n for n in REF if n in MATH and MATH[n].arity == 2]


def _special(dtype: np.dtype) -> np.ndarray:
    tiny = {np.dtype(np.float16): 6e-8, BF16: 1e-40, np.dtype(np.float32): 1e-40,
            np.dtype(np.float64): 1e-310}[np.dtype(dtype)]  # a subnormal of the type
    big = [-100.0, -90.0, -20.0, -3.5, -1.0, -0.5, 0.5, 1.0, 2.5, 6.0, 20.0, 90.0, 100.0]
    vals = [*big, -tiny, tiny, -0.0, 0.0, math.nan, math.inf, -math.inf]
    return np.array(vals, np.float64).astype(dtype)


def _pairs(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([-100.0, -2.0, -0.5, -0.0, 0.0, 0.5, 3.0, 100.0, math.nan, math.inf,
                  -math.inf], np.float64)
    a, b = np.meshgrid(v, v)
    return a.reshape(-1).astype(dtype), b.reshape(-1).astype(dtype)


def _op(name: str) -> tuple[str, dict]:
    """(op, its full attributes) of a test name."""
    op, attrs = ATTRS.get(name, (name, {}))
    return op, {**{k: d for k, (_, d) in MATH[op].attrs.items()}, **attrs}


def _reference(name: str, *xs: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(REF[name](*(x.astype(np.float64) for x in xs)))


def _check(name: str, path: str, got: np.ndarray, *xs: np.ndarray) -> None:
    dtype = xs[0].dtype
    ref = _reference(name, *xs)
    if ref.dtype == np.bool_:
        np.testing.assert_array_equal(got, ref, err_msg=f"{name} ({path}, {dtype})")
        return
    want = ref.astype(dtype).astype(np.float64)
    g = np.asarray(got).astype(np.float64)
    ctx = f"{name} on the {path} path ({dtype}): inputs {[x.tolist() for x in xs]}"
    assert got.dtype == dtype, ctx
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want), err_msg=f"NaNs differ: {ctx}")
    fin = np.isfinite(want)
    np.testing.assert_array_equal(g[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)],
                                  err_msg=f"infinities differ: {ctx}")
    ulp = np.spacing(np.abs(want[fin]).astype(dtype)).astype(np.float64)
    err = np.abs(g[fin] - want[fin])
    bound = ULPS * ulp + TOL.get((_op(name)[0], path, dtype.type), 0.0) * np.maximum(
        1.0, np.abs(xs[0].astype(np.float64)[fin] if len(xs) == 1 else 1.0))
    bad = err > bound
    assert not bad.any(), (f"{ctx}: got {g[fin][bad].tolist()} want {want[fin][bad].tolist()} "
                           f"at {[x[fin][bad].tolist() for x in xs]}")


# -- the paths ------------------------------------------------------------------------------------


def _eager(name: str, *xs: np.ndarray) -> np.ndarray:
    op, attrs = _op(name)
    return te.MATH_FUNCTIONS[op](*(te.constant(x) for x in xs), **attrs).numpy()


def _unfused(names: list[str], *xs: np.ndarray) -> list[np.ndarray]:
    def f(*args):
        return tuple(trace.catalogue_op(_op(n)[0], args, _op(n)[1]) for n in names)

    return list(pytfrt.function(f, optimize=False)(*xs))


def _fused_all(names: list[str], *xs: np.ndarray) -> np.ndarray:
    """Every op's fused code (``fused.scalar_body``, as ``fused.compile_flat`` runs it) in one
    flat loop; row ``k`` of the result is op ``k``'s output."""
    n = len(xs)
    dtype = xs[0].dtype
    args = [f"a{i}" for i in range(n)]
    body = [f"        a{i} = x{i}[i]" for i in range(n)]
    for k, name in enumerate(names):
        op, attrs = _op(name)
        program = {"n": n, "ops": [[op, list(range(n)), attrs]]}
        lines, result = fused.scalar_body(program, args, prefix=f"v{k}_",
                                          fast_erf=dtype == np.float32)
        body += [f"        {line}" for line in lines] + [f"        out[{k}, i] = {result}"]
    params = ", ".join(f"x{i}" for i in range(n))
    src = f"def _all(out, {params}):\n    for i in range(out.shape[1]):\n" + "\n".join(body)
    ns = dict(fused.NAMESPACE)
    exec(compile(src, "<parity fused>", "exec"), ns)  # noqa: S102 - the test's generated code
    out = np.empty((len(names), xs[0].shape[0]), dtype)
    numba.njit(**fused.FLAT_OPTIONS)(ns["_all"])(out, *xs)
    return out


def _small_graph(names: list[str], *xs: np.ndarray) -> list[np.ndarray]:
    dt = xs[0].dtype.name
    shape = [xs[0].shape[0]]
    program = {"inputs": [[dt, shape] for _ in xs],
               "ops": [[_op(n)[0], list(range(len(xs))), _op(n)[1], [[dt, shape]]]
                       for n in names],
               "outputs": list(range(len(xs), len(xs) + len(names)))}
    outs = [np.empty(shape, xs[0].dtype) for _ in names]
    small_graph.kernel(json.dumps(program))(*xs, *outs)
    return outs


def _fusable(name: str) -> bool:
    op = _op(name)[0]
    return op in fused.SCALAR and MATH[op].result == "same"


# -- the tests ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compiled_results() -> dict:
    """``(path, dtype) -> {op: output}`` for the compiled paths, each compiled once."""
    res: dict = {}
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        x = _special(dtype)
        a, b = _pairs(dtype)
        un = [n for n in UNARY if _fusable(n)]
        bi = [n for n in BINARY if _fusable(n)]
        res[("fused", dtype)] = {**dict(zip(un, _fused_all(un, x), strict=True)),
                                 **dict(zip(bi, _fused_all(bi, a, b), strict=True))}
        res[("small_graph", dtype)] = {**dict(zip(un, _small_graph(un, x), strict=True)),
                                       **dict(zip(bi, _small_graph(bi, a, b), strict=True))}
    return res


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16],
                         ids=["f32", "f64", "f16", "bf16"])
def test_eager_and_unfused_match_the_oracle_bit_for_bit_with_each_other(dtype):
    dtype = np.dtype(dtype)
    x = _special(dtype)
    a, b = _pairs(dtype)
    unfused = dict(zip(UNARY, _unfused(UNARY, x), strict=True))
    unfused.update(zip(BINARY, _unfused(BINARY, a, b), strict=True))
    for name in [*UNARY, *BINARY]:
        xs = (x,) if name in UNARY else (a, b)
        e = _eager(name, *xs)
        _check(name, "eager", e, *xs)
        np.testing.assert_array_equal(
            unfused[name].view(np.uint8), e.view(np.uint8),
            err_msg=f"{name}: eager and @pytfrt.function differ ({dtype})")


@pytest.mark.parametrize("path", FLOAT_ONLY_PATHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_fused_and_small_graph_match_the_oracle(compiled_results, path, dtype):
    dtype = np.dtype(dtype)
    x = _special(dtype)
    a, b = _pairs(dtype)
    results = compiled_results[(path, dtype)]
    assert set(results) == {n for n in [*UNARY, *BINARY] if _fusable(n)}
    for name, got in results.items():
        _check(name, path, got, *((x,) if name in UNARY else (a, b)))


def test_fused_kernel_is_the_generated_code(compiled_results):
    x = _special(np.dtype(np.float32))
    for name in ("sigmoid", "softplus"):
        program = json.dumps({"n": 1, "ops": [[name, [0], {}]]})
        np.testing.assert_array_equal(fused.run(program, x),
                                      compiled_results[("fused", np.dtype(np.float32))][name])


def test_every_elementwise_op_is_covered():
    """Every op on floats is here (logical/bitwise ops take no floats; select has 3 operands)."""
    skip = {n for n, m in MATH.items() if m.domain in ("bool", "integer") or m.arity == 3}
    assert set(MATH) - skip <= {_op(n)[0] for n in [*UNARY, *BINARY]}


def test_sigmoid_of_minus_100_is_the_tiny_value_not_zero():
    x = np.array([-100.0, -90.0], np.float32)
    want = special.expit(x.astype(np.float64)).astype(np.float32)
    assert (want > 0).all()
    np.testing.assert_array_equal(te.sigmoid(x).numpy(), want)
    np.testing.assert_array_equal(pytfrt.function(te.sigmoid)(x), want)


# -- the fused epilogue's activations and the reductions ------------------------------------------

EPILOGUE_REF = {"relu": "relu", "relu6": "relu6", "leaky_relu": "leaky_relu",
                "sigmoid": "sigmoid", "tanh": "tanh", "silu": "silu", "gelu": "gelu",
                "gelu_tanh": "gelu_tanh", "hard_swish": "hard_swish"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_epilogue_activations_match_their_ops(dtype):
    """Every epilogue activation (the conv/matmul epilogue kernel, ``apply_activation``) gives
    its op's answer; and each is the activation of exactly the op records that name it."""
    from pytfrt.backends.cpu.activations import apply_activation
    from pytfrt.backends.cpu.op_math import ACTIVATIONS

    assert set(EPILOGUE_REF) == set(ACTIVATIONS) - {"none"}
    for ref in EPILOGUE_REF.values():
        op, attrs = _op(ref)
        assert MATH[op].activation_of(attrs) in ACTIVATIONS
    x = _special(np.dtype(dtype))
    for act, ref in EPILOGUE_REF.items():
        got = apply_activation(x.copy(), act, 0.2)
        _check(ref, "epilogue", got, x)


REDUCE_REF = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
              "reduce_min": np.min}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=["f32", "f64", "f16"])
def test_reductions_agree_on_every_path(dtype):
    """reduce_sum/mean/max/min: eager, compiled (unfused) and small-graph code against NumPy in
    float64 (max/min exactly; sums and means within 4 ulp of the sum/mean of magnitudes; NaN
    and infinities exactly)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(0)
    rows = [rng.uniform(-100, 100, 6), [1.0, math.nan, 2.0, 3.0, 4.0, 5.0],
            [math.inf, 1.0, -2.0, 3.0, 4.0, 5.0], [math.inf, -math.inf, 1.0, 2.0, 3.0, 4.0],
            [1e-40, -1e-40, 1e-40, 0.0, -0.0, 1e-40], [60000.0, 60000.0, 1.0, 2.0, 3.0, 4.0]]
    x = np.array(rows, np.float64).astype(dtype)
    fns = {"eager": lambda n: getattr(te, n)(x, axis=1).numpy(),
           "unfused": lambda n: pytfrt.function(lambda v: getattr(te, n)(v, axis=1),
                                                optimize=False)(x)}
    if dtype != np.float16:
        def sg(n: str) -> np.ndarray:
            program = {"inputs": [[dtype.name, list(x.shape)]],
                       "ops": [[n, [0], {"axes": [1], "keepdims": False},
                                [[dtype.name, [x.shape[0]]]]]], "outputs": [1]}
            out = np.empty(x.shape[0], dtype)
            small_graph.kernel(json.dumps(program))(x, out)
            return out
        fns["small_graph"] = sg
    for name, ref in REDUCE_REF.items():
        with np.errstate(all="ignore"):
            want = ref(x.astype(np.float64), axis=1)
            scale = np.mean(np.abs(x.astype(np.float64)), axis=1) * (
                x.shape[1] if name == "reduce_sum" else 1)
        big = np.finfo(dtype).max
        ulp = np.spacing(np.minimum(scale, big).astype(dtype)).astype(np.float64)
        ulp = np.where(np.isfinite(scale), ulp, 0.0) * (name in ("reduce_sum", "reduce_mean"))
        w = want.astype(dtype).astype(np.float64)
        for path, fn in fns.items():
            got = fn(name)
            assert got.dtype == dtype, (name, path)
            g = got.astype(np.float64)
            ctx = f"{name} on the {path} path ({dtype}): got {g.tolist()} want {w.tolist()}"
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=ctx)
            inf = np.isinf(w)
            np.testing.assert_array_equal(g[inf], w[inf], err_msg=ctx)
            fin = np.isfinite(w)
            assert (np.abs(g[fin] - w[fin]) <= ULPS * ulp[fin]).all(), ctx
