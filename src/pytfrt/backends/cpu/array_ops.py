"""Compute functions of the graph dialect's elementwise, shape and reduction ops (NumPy).

Each function takes the op's operands as positional ndarrays and its attributes as
keyword-only arguments named as in the catalogue (``docs/graph_dialect.md``), and returns a new
ndarray (or a tuple for several results).  :data:`GRAPH_OPS` maps op names to them; the graph
kernels (:mod:`pytfrt.backends.cpu.graph_kernels`) and the compiler's constant folding both call
these, so each op's math lives here once.  Element types are preserved (NumPy's promotion of
Python scalars is weak), comparisons return ``bool``.  Pure functions: thread-safe.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function (see the module docstring)."""


def _arr(x: Any, dtype: Any) -> np.ndarray:
    """``x`` as an ndarray of ``dtype`` (NumPy ufuncs return scalars for 0-d inputs)."""
    if type(x) is np.ndarray and x.dtype == dtype:
        return x
    return np.asarray(x, dtype=dtype)


# -- binary -----------------------------------------------------------------------------------
def _binary(ufunc: Any) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray, y: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        if out is not None:
            return ufunc(x, y, out=out)  # type: ignore[no-any-return]
        return _arr(ufunc(x, y), x.dtype)

    compute.__name__ = ufunc.__name__
    return compute


def _compare(ufunc: Any) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _arr(ufunc(x, y), np.bool_)

    compute.__name__ = ufunc.__name__
    return compute


for _name, _ufunc in {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "atan2": np.arctan2, "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
}.items():  # fmt: skip
    GRAPH_OPS[_name] = _binary(_ufunc)
for _name, _cmp in {
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal, "logical_and": np.logical_and,
    "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}.items():  # fmt: skip
    GRAPH_OPS[_name] = _compare(_cmp)


def _int_zero_check(y: np.ndarray, op: str) -> None:
    if y.dtype.kind in "iu" and not np.all(y):
        raise OpError(f"{op}: integer division by zero")


@GRAPH_OPS.op("div")
def div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x / y``; integers divide truncating toward zero (C semantics, as TF and ONNX)."""
    if x.dtype.kind in "iu":
        _int_zero_check(y, "div")
        q = np.floor_divide(x, y)
        fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return _arr(q + fix.astype(x.dtype), x.dtype)
    return _arr(np.true_divide(x, y), x.dtype)


@GRAPH_OPS.op("floor_div")
def floor_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``floor(x / y)``."""
    _int_zero_check(y, "floor_div")
    return _arr(np.floor_divide(x, y), x.dtype)


@GRAPH_OPS.op("floor_mod")
def floor_mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x - floor(x / y) * y`` (the sign of the divisor)."""
    _int_zero_check(y, "floor_mod")
    return _arr(np.mod(x, y), x.dtype)


@GRAPH_OPS.op("pow")
def pow_(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ** y`` (integers: negative exponents are an error)."""
    if x.dtype.kind in "iu" and np.any(y < 0):
        raise OpError("pow: integers cannot be raised to negative integer powers")
    return _arr(np.power(x, y), x.dtype)


@GRAPH_OPS.op("squared_difference")
def squared_difference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(x - y) ** 2``."""
    d = np.subtract(x, y)
    return _arr(d * d, x.dtype)


# -- unary ------------------------------------------------------------------------------------
@numba.vectorize(["float32(float32)", "float64(float64)"], nopython=True, cache=False)
def _erf(v: float) -> float:  # pragma: no cover - compiled
    return math.erf(v)


def _unary(fn: Callable[[np.ndarray], Any], name: str) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray) -> np.ndarray:
        return _arr(fn(x), x.dtype)

    compute.__name__ = name
    return compute


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

# unary ops that are one ufunc of the operand's dtype (they can write into ``out``)
_UFUNC_UNARY: dict[str, Any] = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "sqrt": np.sqrt,
    "square": np.square,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
}


def _ufunc_unary(ufunc: Any, name: str) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        if out is not None:
            return ufunc(x, out=out)  # type: ignore[no-any-return]
        return _arr(ufunc(x), x.dtype)

    compute.__name__ = name
    return compute


_UNARY: dict[str, Callable[[np.ndarray], Any]] = {
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x if x.dtype.kind == "f" else np.floor_divide(1, x),
    "sign": np.sign,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu6": lambda x: np.minimum(np.maximum(x, x.dtype.type(0)), x.dtype.type(6)),
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "selu": lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(x)),
    "softplus": lambda x: np.logaddexp(x.dtype.type(0), x),
    "softsign": lambda x: x / (1 + np.abs(x)),
    "erf": lambda x: _erf(x) if x.dtype in (np.float32, np.float64) else _erf(
        x.astype(np.float32)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "hard_swish": lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6,
    "identity": lambda x: x.copy(),
}
for _name, _fn in _UNARY.items():
    GRAPH_OPS[_name] = _unary(_fn, _name)
for _name, _uf in _UFUNC_UNARY.items():
    GRAPH_OPS[_name] = _ufunc_unary(_uf, _name)


@GRAPH_OPS.op("relu")
def relu(x: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """``max(x, 0)``."""
    if out is not None:
        return np.maximum(x, x.dtype.type(0), out=out)
    return _arr(np.maximum(x, x.dtype.type(0)), x.dtype)


@GRAPH_OPS.op("logical_not")
def logical_not(x: np.ndarray) -> np.ndarray:
    """``not x``."""
    return _arr(np.logical_not(x), np.bool_)


@GRAPH_OPS.op("is_nan")
def is_nan(x: np.ndarray) -> np.ndarray:
    """``isnan(x)``."""
    return _arr(np.isnan(x), np.bool_)


@GRAPH_OPS.op("is_inf")
def is_inf(x: np.ndarray) -> np.ndarray:
    """``isinf(x)``."""
    return _arr(np.isinf(x), np.bool_)


@GRAPH_OPS.op("gelu")
def gelu(x: np.ndarray, *, approximate: bool) -> np.ndarray:
    """GELU: exact ``x/2 (1 + erf(x/sqrt 2))`` or the tanh approximation."""
    if approximate:
        y = 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    else:
        y = 0.5 * x * (1 + _UNARY["erf"](x * (1 / math.sqrt(2.0))))
    return _arr(y, x.dtype)


@GRAPH_OPS.op("leaky_relu")
def leaky_relu(x: np.ndarray, *, alpha: float) -> np.ndarray:
    """``x if x >= 0 else alpha * x``."""
    return _arr(np.where(x >= 0, x, x * alpha), x.dtype)


@GRAPH_OPS.op("hard_sigmoid")
def hard_sigmoid(x: np.ndarray, *, alpha: float, beta: float) -> np.ndarray:
    """``clip(alpha * x + beta, 0, 1)``."""
    return _arr(np.clip(x * alpha + beta, 0, 1), x.dtype)


@GRAPH_OPS.op("clip")
def clip(x: np.ndarray, *, min: float, max: float) -> np.ndarray:  # noqa: A002 - op attribute
    """``min(max(x, min), max)`` (infinite bounds are no bound, also for integers)."""
    y = x
    if min != -math.inf:
        y = np.maximum(y, _bound(x.dtype, min))
    if max != math.inf:
        y = np.minimum(y, _bound(x.dtype, max))
    return _arr(y if y is not x else x.copy(), x.dtype)


def _bound(dtype: np.dtype, v: float) -> Any:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return dtype.type(int(min(max(v, info.min), info.max)))
    return dtype.type(v)


@GRAPH_OPS.op("cast")
def cast(x: np.ndarray, *, to: str) -> np.ndarray:
    """``x`` converted to element type ``to`` (float -> int truncates toward zero)."""
    from pytfrt.tensor.dtype import dtype_from_name

    target = np.dtype(dtype_from_name(to).np_dtype)
    if x.dtype.kind == "f" and target.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(target)
    return x.astype(target)


@GRAPH_OPS.op("select")
def select(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a where cond else b`` (broadcasting)."""
    return _arr(np.where(cond, a, b), a.dtype)


# -- reductions ---------------------------------------------------------------------------------
def _axes(axes: tuple[int, ...]) -> tuple[int, ...] | None:
    return tuple(axes) if axes else None


@GRAPH_OPS.op("reduce_sum")
def reduce_sum(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Sum over ``axes`` (all if empty), in the operand's element type."""
    return _arr(np.sum(x, axis=_axes(axes), keepdims=keepdims, dtype=x.dtype), x.dtype)


@GRAPH_OPS.op("reduce_prod")
def reduce_prod(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Product over ``axes``."""
    return _arr(np.prod(x, axis=_axes(axes), keepdims=keepdims, dtype=x.dtype), x.dtype)


@GRAPH_OPS.op("reduce_mean")
def reduce_mean(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Mean over ``axes`` (integers: truncated)."""
    acc = np.float64 if x.dtype.kind in "iu" or x.dtype == np.float64 else np.float32
    m = np.mean(x, axis=_axes(axes), keepdims=keepdims, dtype=acc)
    if x.dtype.kind in "iu":
        m = np.trunc(m)
    return _arr(m, x.dtype)


def _minmax(fn: Any, name: str) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        ax = _axes(axes)
        if x.size == 0:
            raise OpError(f"{name}: cannot reduce an empty tensor")
        return _arr(fn(x, axis=ax, keepdims=keepdims), x.dtype)

    compute.__name__ = name
    return compute


GRAPH_OPS["reduce_max"] = _minmax(np.max, "reduce_max")
GRAPH_OPS["reduce_min"] = _minmax(np.min, "reduce_min")


@GRAPH_OPS.op("reduce_any")
def reduce_any(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Logical or over ``axes``."""
    return _arr(np.any(x, axis=_axes(axes), keepdims=keepdims), np.bool_)


@GRAPH_OPS.op("reduce_all")
def reduce_all(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Logical and over ``axes``."""
    return _arr(np.all(x, axis=_axes(axes), keepdims=keepdims), np.bool_)


def _arg(fn: Any, name: str) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray, *, axis: int, keepdims: bool, output_type: str) -> np.ndarray:
        if x.shape[axis] == 0:
            raise OpError(f"{name}: the reduced dimension is empty")
        out = fn(x, axis=axis, keepdims=keepdims)
        return _arr(out, np.int32 if output_type == "i32" else np.int64)

    compute.__name__ = name
    return compute


GRAPH_OPS["argmax"] = _arg(np.argmax, "argmax")
GRAPH_OPS["argmin"] = _arg(np.argmin, "argmin")


@GRAPH_OPS.op("cumsum")
def cumsum(x: np.ndarray, *, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """Cumulative sum along ``axis`` (TF's ``exclusive``/``reverse``)."""
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        c = np.roll(c, 1, axis=axis)
        idx = [slice(None)] * x.ndim
        idx[axis % max(x.ndim, 1)] = slice(0, 1)
        c[tuple(idx)] = 0
    if reverse:
        c = np.flip(c, axis)
    return np.ascontiguousarray(c)
