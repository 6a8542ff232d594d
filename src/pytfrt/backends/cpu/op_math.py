"""The meaning of every elementwise op, once: :data:`MATH` (op name -> :class:`Math`).

One :class:`Math` record says everything about an elementwise ``tg`` op that the runtime
layers need, and (duck-typed, with no compiler import) its gradient rule:

* ``compute`` -- the NumPy compute function (operands positional, attributes keyword-only,
  optional ``out=``): the unfused graph kernel (:data:`pytfrt.backends.cpu.array_ops.GRAPH_OPS`),
  the compiler's constant folding and :mod:`pytfrt.eager` all call it;
* ``scalar`` -- the scalar formula (``(argument expressions, attributes) -> expression``) the
  fused elementwise kernels (:mod:`~pytfrt.backends.cpu.fused`) and the whole-region kernels
  (:mod:`~pytfrt.backends.cpu.small_graph`) are generated from (names it may use:
  :data:`pytfrt.backends.cpu.fused.NAMESPACE`: ``math``, ``np``, ``_sigmoid``, ``_erf``,
  ``_act``; compiled with Numba's ``numpy`` error model, so ``x / 0`` is IEEE's);
* ``vjp`` -- the gradient rule ``vjp(c, g) -> [cotangent per operand]`` the compiler's
  autodiff runs (``c`` is its rule context: ``c.op(name, *values, **attrs)``, ``c.const``,
  ``c.mul``, ``c.unbroadcast``, ``c.x``/``c.y`` operand/result values, ``c.attrs``);
  ``differentiable=False`` marks ops whose results carry no gradient;
* ``domain`` / ``result`` / ``attrs`` -- the operand types accepted (``float``, ``numeric``
  (not i1), ``integer`` (integers or i1), ``bool``, ``arith`` (anything but strings),
  ``any``), the result type (``same`` or ``bool``) and the attribute schema
  ``name -> (kind, default)``: the catalogue's type inference and the eager functions check
  them;
* ``activation`` -- the fused conv/matmul epilogue activation this op becomes
  (``-tg-fuse-epilogue``): an :class:`Activation` name, or a function of the op's attributes;
* ``eager`` / ``numpy`` -- the :mod:`pytfrt.eager` function name and the NumPy ufunc names it
  answers for ``Tensor.__array_ufunc__``.

:data:`ACTIVATIONS` holds the epilogue activations (their kernel code in
:mod:`~pytfrt.backends.cpu._epilogue` and their oneDNN eltwise post-op).

The compiler's catalogue (``pytfrt.compiler.ops.elementwise``) defines one ``tg`` op per record
(this module is in the runtime layers, so eager and the kernels can read it; the compiler
reads it too, never the other way round).  Every table keyed by an elementwise op's name is
derived from here at import.  Adding an elementwise op = one :class:`Math` entry below
(``docs/ops.md``, "Adding an op").  Filled at import, then only read: thread-safe.

Numerics: float16/bfloat16 operands of float-only ops are computed in float32 and rounded
once; sigmoid-like formulas are the overflow-free ones (``exp`` of a non-positive argument
only), so every path gives TF's and NumPy's answer at ``|x| = 100`` (tiny subnormals, not 0).
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytfrt.backends.cpu.ops import OpError, negative

Scalar = Callable[[list[str], dict[str, Any]], str]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
SELU_ALPHA, SELU_SCALE = _SELU_ALPHA, _SELU_SCALE


@dataclass(frozen=True)
class Activation:
    """One activation of the fused conv/matmul epilogue.

    Attributes:
        name: the ``activation`` attribute value.
        code: the integer the compiled epilogue kernel switches on (``_epilogue._act``).
        dnnl: ``(oneDNN eltwise algorithm name, alpha, beta)`` of the equivalent oneDNN
            post-op (``alpha`` ``None``: the op's ``alpha`` attribute), or ``None``.
    """

    name: str
    code: int
    dnnl: tuple[str, float | None, float] | None = None


ACTIVATIONS: dict[str, Activation] = {a.name: a for a in (
    Activation("none", 0),
    Activation("relu", 1, ("eltwise_relu", 0.0, 0.0)),
    Activation("relu6", 2, ("eltwise_clip_v2", 0.0, 6.0)),
    Activation("leaky_relu", 3, ("eltwise_relu", None, 0.0)),
    Activation("sigmoid", 4, ("eltwise_logistic", 0.0, 0.0)),
    Activation("tanh", 5, ("eltwise_tanh", 0.0, 0.0)),
    Activation("silu", 6, ("eltwise_swish", 1.0, 0.0)),
    Activation("gelu", 7, ("eltwise_gelu_erf", 0.0, 0.0)),
    Activation("gelu_tanh", 8, ("eltwise_gelu_tanh", 0.0, 0.0)),
    Activation("hard_swish", 9, ("eltwise_hardswish", 1.0 / 6.0, 0.5)),
)}
"""Epilogue activation name -> :class:`Activation` (codes are the epilogue kernel's)."""


@dataclass(frozen=True)
class Math:
    """One elementwise op (see the module docstring)."""

    name: str
    arity: int
    domain: str
    compute: Callable[..., Any]
    scalar: Scalar | None = None
    vjp: Callable[..., list[Any]] | None = None
    differentiable: bool = True
    result: str = "same"
    attrs: dict[str, tuple[str, Any]] = field(default_factory=dict)
    activation: str | Callable[[dict[str, Any]], str] | None = None
    eager: str | None = None
    numpy: tuple[str, ...] = ()
    doc: str = ""

    def activation_of(self, attrs: dict[str, Any]) -> str | None:
        """The epilogue activation this op with ``attrs`` becomes (``None``: it does not)."""
        act = self.activation
        return act(attrs) if callable(act) else act


MATH: dict[str, Math] = {}
"""Elementwise op name -> its :class:`Math` record."""


def _add(m: Math) -> None:
    if m.name in MATH:
        raise ValueError(f"elementwise op {m.name!r} is defined twice")
    if hasattr(m.compute, "__signature__"):  # a float_compute/plain_compute wrapper
        _attr_signature(m.compute, tuple(m.attrs))
    MATH[m.name] = m


# -- compute helpers -------------------------------------------------------------------------

_F32 = np.dtype(np.float32)


def arr(x: Any, dtype: Any) -> np.ndarray:
    """``x`` as an ndarray of ``dtype`` (NumPy ufuncs return scalars for 0-d inputs)."""
    if type(x) is np.ndarray and x.dtype == dtype:
        return x
    return np.asarray(x, dtype=dtype)


def _wide(x: np.ndarray) -> np.ndarray:
    """float16/bfloat16 (and other narrow floats) widened to float32 for computing."""
    if x.dtype.itemsize < 4 and x.dtype.kind in "fV" or x.dtype.name == "bfloat16":
        return x.astype(_F32)
    return x


def ufunc_compute(ufunc: Any, name: str, widen: bool = False) -> Callable[..., np.ndarray]:
    """A unary compute function from a NumPy ufunc of the operand's dtype (writes ``out=``);
    ``widen``: narrow floats through float32."""

    def compute(x: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        if widen and x.dtype.itemsize < 4:
            r = arr(ufunc(_wide(x)), _F32).astype(x.dtype)
            if out is not None:
                out[...] = r
                return out
            return r
        if out is not None:
            return ufunc(x, out=out)  # type: ignore[no-any-return]
        return arr(ufunc(x), x.dtype)

    compute.__name__ = name
    compute.ufunc = ufunc  # type: ignore[attr-defined]  # eager's fast paths call it directly
    return compute


def _attr_signature(compute: Callable[..., Any], attrs: tuple[str, ...]) -> None:
    """Give ``compute(x, **attrs)`` the signature ``(x, *, <attrs>)`` (the graph kernels read a
    compute function's keyword-only parameters as the op's attributes)."""
    kw = inspect.Parameter.KEYWORD_ONLY
    x = inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    compute.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [x, *(inspect.Parameter(a, kw) for a in attrs)])


def float_compute(fn: Callable[..., Any], name: str) -> Callable[..., np.ndarray]:
    """A unary compute function computing ``fn(x, **attributes)`` in float32/float64 (narrow
    floats widened), the result in the operand's dtype (its signature names the attributes of
    the record it is given to, :func:`_add`)."""

    def compute(x: np.ndarray, **kw: Any) -> np.ndarray:
        return arr(fn(_wide(x), **kw), x.dtype)

    compute.__name__ = name
    _attr_signature(compute, ())
    return compute


def plain_compute(fn: Callable[..., Any], name: str) -> Callable[..., np.ndarray]:
    """A unary compute function, the result in the operand's dtype (as :func:`float_compute`,
    not widened)."""

    def compute(x: np.ndarray, **kw: Any) -> np.ndarray:
        return arr(fn(x, **kw), x.dtype)

    compute.__name__ = name
    _attr_signature(compute, ())
    return compute


def binary_compute(ufunc: Any, name: str) -> Callable[..., np.ndarray]:
    """A binary compute function from a NumPy ufunc (result in ``x``'s dtype, ``out=``)."""

    def compute(x: np.ndarray, y: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        if out is not None:
            return ufunc(x, y, out=out)  # type: ignore[no-any-return]
        return arr(ufunc(x, y), x.dtype)

    compute.__name__ = name
    return compute


def compare_compute(ufunc: Any, name: str) -> Callable[..., np.ndarray]:
    """A comparison/logical compute function (bool result; unary or binary as ``ufunc``)."""

    def compute1(x: np.ndarray) -> np.ndarray:
        return arr(ufunc(x), np.bool_)

    def compute2(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return arr(ufunc(x, y), np.bool_)

    compute = compute1 if ufunc.nin == 1 else compute2
    compute.__name__ = name
    return compute


def _int_zero_check(y: np.ndarray, op: str) -> None:
    if y.dtype.kind in "iu" and not np.all(y):
        raise OpError(f"{op}: integer division by zero")


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x / y``; integers divide truncating toward zero (C semantics, as TF and ONNX)."""
    if x.dtype.kind in "iu":
        _int_zero_check(y, "div")
        q = np.floor_divide(x, y)
        fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return arr(q + fix.astype(x.dtype), x.dtype)
    return arr(np.true_divide(x, y), x.dtype)


def _floor_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``floor(x / y)``."""
    _int_zero_check(y, "floor_div")
    return arr(np.floor_divide(x, y), x.dtype)


def _floor_mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x - floor(x / y) * y`` (the sign of the divisor)."""
    _int_zero_check(y, "floor_mod")
    return arr(np.mod(x, y), x.dtype)


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ** y`` (integers: negative exponents are an error)."""
    if x.dtype.kind in "iu" and np.any(y < 0):
        raise OpError("pow: integers cannot be raised to negative integer powers")
    return arr(np.power(x, y), x.dtype)


def _squared_difference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(x - y) ** 2``."""
    d = np.subtract(x, y)
    return arr(d * d, x.dtype)


_erf_lock = threading.Lock()
_erf_ufunc: Any = None


def erf(x: np.ndarray) -> np.ndarray:
    """``erf`` of a float array (a Numba ufunc, compiled on first use; narrow floats widened)."""
    global _erf_ufunc
    if _erf_ufunc is None:
        with _erf_lock:
            if _erf_ufunc is None:
                import numba

                def _e(v: float) -> float:  # pragma: no cover - compiled
                    return math.erf(v)

                _erf_ufunc = numba.vectorize(["float32(float32)", "float64(float64)"],
                                             nopython=True, cache=False)(_e)
    return arr(_erf_ufunc(_wide(x)), x.dtype)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` without overflow (the CPU backend's compiled sigmoid)."""
    from pytfrt.backends.cpu.ops import sigmoid as cpu_sigmoid

    return cpu_sigmoid(x)


def silu(x: np.ndarray) -> np.ndarray:
    """``x * sigmoid(x)``, computed in float64 and rounded once (float32's ``sigmoid(-100)``
    is a subnormal with two significant digits, which the product would scale up)."""
    w = x.astype(np.float64)
    return arr(w * sigmoid(w), x.dtype)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x.dtype.type(0), x)


def _gelu(x: np.ndarray, *, approximate: bool) -> np.ndarray:
    """GELU in float64, rounded once by the caller (as the fused epilogue computes it: in
    float32, ``1 + erf(x / sqrt 2)`` cancels to a few bits below ``x = -3``)."""
    x = x.astype(np.float64)
    if approximate:
        return 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + erf(x * x.dtype.type(1 / math.sqrt(2.0))))


def _clip(x: np.ndarray, *, min: float, max: float) -> np.ndarray:  # noqa: A002 - op attribute
    """``min(max(x, min), max)`` (infinite bounds are no bound, also for integers)."""
    y = x
    if min != -math.inf:
        y = np.maximum(y, _bound(x.dtype, min))
    if max != math.inf:
        y = np.minimum(y, _bound(x.dtype, max))
    return y if y is not x else x.copy()


def _bound(dtype: np.dtype, v: float) -> Any:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return dtype.type(int(min(max(v, info.min), info.max)))
    return dtype.type(v)


def relu(x: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """``max(x, 0)``."""
    if out is not None:
        return np.maximum(x, x.dtype.type(0), out=out)  # type: ignore[no-any-return]
    return arr(np.maximum(x, x.dtype.type(0)), x.dtype)


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return 1 / x if x.dtype.kind == "f" else np.floor_divide(1, x)


def _identity(x: np.ndarray) -> np.ndarray:
    return x.copy()


def _select(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a where cond else b`` (broadcasting)."""
    return arr(np.where(cond, a, b), a.dtype)


# -- scalar formulas -------------------------------------------------------------------------


def _f(expr: str) -> Scalar:
    return lambda a, _k: expr.format(*a)


FAST_ERF = "__fast_erf__"
"""Attribute the fused kernels add for float32 programs: ``erf`` and exact ``gelu`` then use
the epilogue's rational ``erf`` (``_epilogue._erf``, within 7.7e-9 of ``math.erf``)."""


# -- gradient rules (duck-typed on the compiler's autodiff rule context) ----------------------


def _u(f: Callable[[Any, Any, Any, Any], Any]) -> Callable[[Any, Any], list[Any]]:
    """A unary rule ``f(c, g, x, y) -> cotangent`` as a full rule."""
    return lambda c, g: [f(c, g, c.x[0], c.y[0])]


def _vjp_add(c: Any, g: Any) -> list[Any]:
    return [c.unbroadcast(g, c.x[0]), c.unbroadcast(g, c.x[1])]


def _vjp_sub(c: Any, g: Any) -> list[Any]:
    return [c.unbroadcast(g, c.x[0]), c.unbroadcast(c.op("neg", g), c.x[1])]


def _vjp_mul(c: Any, g: Any) -> list[Any]:
    a, b = c.x
    return [c.unbroadcast(c.op("mul", g, b), a), c.unbroadcast(c.op("mul", g, a), b)]


def _vjp_div(c: Any, g: Any) -> list[Any]:
    a, b = c.x
    ga = c.op("div", g, b)
    gb = c.op("neg", c.op("mul", ga, c.y[0]))
    return [c.unbroadcast(ga, a), c.unbroadcast(gb, b)]


def _vjp_pow(c: Any, g: Any) -> list[Any]:
    a, e = c.x
    ga = c.op("mul", c.op("mul", g, e), c.op("pow", a, c.op("sub", e, c.const(1.0, e))))
    gb = c.op("mul", c.op("mul", g, c.y[0]), c.op("log", a))
    return [c.unbroadcast(ga, a), c.unbroadcast(gb, e)]


def _vjp_extremum(c: Any, g: Any) -> list[Any]:
    a, b = c.x
    pick_a = c.op("greater_equal" if c.name == "maximum" else "less_equal", a, b)
    zero = c.const(0.0, g)
    return [c.unbroadcast(c.op("select", pick_a, g, zero), a),
            c.unbroadcast(c.op("select", pick_a, zero, g), b)]


def _vjp_squared_difference(c: Any, g: Any) -> list[Any]:
    a, b = c.x
    d = c.mul(c.op("mul", g, c.op("sub", a, b)), 2.0)
    return [c.unbroadcast(d, a), c.unbroadcast(c.op("neg", d), b)]


def _vjp_atan2(c: Any, g: Any) -> list[Any]:
    a, b = c.x  # atan2(a, b) = angle of (b, a)
    den = c.op("add", c.op("square", a), c.op("square", b))
    q = c.op("div", g, den)
    return [c.unbroadcast(c.op("mul", q, b), a), c.unbroadcast(c.op("neg", c.op("mul", q, a)), b)]


def _vjp_select(c: Any, g: Any) -> list[Any]:
    cond, a, b = c.x
    zero = c.const(0.0, g)
    return [None, c.unbroadcast(c.op("select", cond, g, zero), a),
            c.unbroadcast(c.op("select", cond, zero, g), b)]


def _hard_swish_d(c: Any, g: Any, x: Any) -> Any:
    """``x * relu6(x + 3) / 6``: 0 below -3, 1 above 3, ``(2x + 3) / 6`` between."""
    mid = c.op("add", c.mul(x, 1.0 / 3.0), c.const(0.5, x))
    inner = c.op("logical_and", c.op("greater", x, c.const(-3.0, x)),
                 c.op("less", x, c.const(3.0, x)))
    above = c.op("cast", c.op("greater_equal", x, c.const(3.0, x)), to=x.dtype)
    return c.op("mul", g, c.op("select", inner, mid, above))


def _silu_d(c: Any, x: Any) -> Any:
    s = c.op("sigmoid", x)
    one_minus = c.op("sub", c.const(1.0, s), s)
    return c.op("mul", s, c.op("add", c.const(1.0, x), c.op("mul", x, one_minus)))


def _vjp_clip(c: Any, g: Any, x: Any, y: Any) -> Any:
    inside = c.op("logical_and", c.op("greater_equal", x, c.const(c.attrs["min"], x)),
                  c.op("less_equal", x, c.const(c.attrs["max"], x)))
    return c.op("select", inside, g, c.const(0.0, g))


# -- the records ---------------------------------------------------------------------------------

_name: str
_uf: Any
_np: Any
_np_name: Any
_expr: Any
_vjp: Any
_vjp1: Any
_fn: Any
_domain: Any
_eager: Any
_scalar: Any
_compute: Any

for _name, _uf, _eager, _np, _expr, _vjp in (
    ("add", np.add, "add", ("add",), "({0} + {1})", _vjp_add),
    ("sub", np.subtract, "subtract", ("subtract",), "({0} - {1})", _vjp_sub),
    ("mul", np.multiply, "multiply", ("multiply",), "({0} * {1})", _vjp_mul),
    # NaN wins, as NumPy and TF (Python's max/min return whichever comes first)
    ("maximum", np.maximum, "maximum", ("maximum",), "({0} if {0} > {1} or {0} != {0} else {1})",
     _vjp_extremum),
    ("minimum", np.minimum, "minimum", ("minimum",), "({0} if {0} < {1} or {0} != {0} else {1})",
     _vjp_extremum),
):
    _add(Math(_name, 2, "arith", binary_compute(_uf, _name), _f(_expr), _vjp, eager=_eager,
              numpy=_np))
_add(Math("atan2", 2, "float", binary_compute(np.arctan2, "atan2"), _f("math.atan2({0}, {1})"),
          _vjp_atan2, eager="atan2", numpy=("arctan2",)))
_add(Math("div", 2, "arith", _div, _f("({0} / {1})"), _vjp_div,
          numpy=("divide", "true_divide"),
          doc="``x / y``; integers truncate toward zero"))
_add(Math("floor_div", 2, "arith", _floor_div, None, differentiable=False,
          eager="floor_divide", numpy=("floor_divide",)))
_add(Math("floor_mod", 2, "arith", _floor_mod, None, differentiable=False,
          eager="floor_mod", numpy=("remainder", "mod")))
_add(Math("pow", 2, "arith", _pow, _f("({0} ** {1})"), _vjp_pow, numpy=("power",)))
_add(Math("squared_difference", 2, "arith", _squared_difference,
          _f("(({0} - {1}) * ({0} - {1}))"), _vjp_squared_difference,
          eager="squared_difference"))
for _name, _uf, _np_name in (
    ("equal", np.equal, "equal"), ("not_equal", np.not_equal, "not_equal"),
    ("less", np.less, "less"), ("less_equal", np.less_equal, "less_equal"),
    ("greater", np.greater, "greater"), ("greater_equal", np.greater_equal, "greater_equal"),
):
    _add(Math(_name, 2, "any", compare_compute(_uf, _name), None, differentiable=False,
              result="bool", numpy=(_np_name,)))
for _name, _uf in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                   ("logical_xor", np.logical_xor)):
    _add(Math(_name, 2, "bool", compare_compute(_uf, _name), None, differentiable=False,
              result="bool", eager=_name, numpy=(_name,)))
for _name, _uf in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or)):
    _add(Math(_name, 2, "integer", binary_compute(_uf, _name), None, differentiable=False,
              eager=_name, numpy=(_name,)))

# unary ops computed by one NumPy ufunc of the operand's dtype
for _name, _uf, _domain, _np, _expr, _vjp1 in (
    ("neg", negative, "numeric", ("negative",), "(-{0})",
     lambda c, g, x, y: c.op("neg", g)),
    ("abs", np.abs, "numeric", ("absolute", "fabs"), "abs({0})",
     lambda c, g, x, y: c.op("mul", g, c.op("sign", x))),
    ("square", np.square, "numeric", ("square",), "({0} * {0})",
     lambda c, g, x, y: c.op("mul", g, c.mul(x, 2.0))),
    ("exp", np.exp, "float", ("exp",), "math.exp({0})", lambda c, g, x, y: c.op("mul", g, y)),
    ("expm1", np.expm1, "float", ("expm1",), "math.expm1({0})",
     lambda c, g, x, y: c.op("mul", g, c.op("add", y, c.const(1.0, y)))),
    ("log", np.log, "float", ("log",),
     "(math.log({0}) if {0} > 0 else (-math.inf if {0} == 0 else math.nan))",
     lambda c, g, x, y: c.op("div", g, x)),
    ("log1p", np.log1p, "float", ("log1p",),
     "(math.log1p({0}) if {0} > -1 else (-math.inf if {0} == -1 else math.nan))",
     lambda c, g, x, y: c.op("div", g, c.op("add", x, c.const(1.0, x)))),
    ("sqrt", np.sqrt, "float", ("sqrt",), "(math.sqrt({0}) if {0} >= 0 else math.nan)",
     lambda c, g, x, y: c.op("div", g, c.mul(y, 2.0))),
    ("tanh", np.tanh, "float", ("tanh",), "math.tanh({0})",
     lambda c, g, x, y: c.op("tanh_grad", y, g)),
    ("sin", np.sin, "float", ("sin",), "math.sin({0})",
     lambda c, g, x, y: c.op("mul", g, c.op("cos", x))),
    ("cos", np.cos, "float", ("cos",), "math.cos({0})",
     lambda c, g, x, y: c.op("neg", c.op("mul", g, c.op("sin", x)))),
    ("tan", np.tan, "float", ("tan",), "math.tan({0})",
     lambda c, g, x, y: c.op("mul", g, c.op("add", c.op("square", y), c.const(1.0, y)))),
):
    _add(Math(_name, 1, _domain, ufunc_compute(_uf, _name, widen=_domain == "float"),
              _f(_expr), _u(_vjp1), eager=_name, numpy=_np,
              activation=_name if _name in ACTIVATIONS else None))

for _name, _fn, _domain, _np, _scalar, _vjp1 in (
    ("rsqrt", lambda x: 1 / np.sqrt(x), "float", (),
     _f("(1.0 / math.sqrt({0}) if {0} >= 0 else math.nan)"),
     lambda c, g, x, y: c.mul(c.op("mul", g, c.op("mul", y, c.op("square", y))), -0.5)),
    ("reciprocal", _reciprocal, "float", ("reciprocal",),
     _f("(1.0 / {0} if {0} != 0 else math.copysign(math.inf, {0}))"),
     lambda c, g, x, y: c.op("neg", c.op("mul", g, c.op("square", y)))),
    ("sigmoid", None, "float", (), _f("_sigmoid({0})"),
     lambda c, g, x, y: c.op("sigmoid_grad", y, g)),
    ("elu", lambda x: np.where(x > 0, x, np.expm1(x)), "float", (),
     _f("({0} if {0} > 0 else math.expm1({0}))"),
     lambda c, g, x, y: c.op("select", c.op("greater", x, c.const(0.0, x)), g,
                             c.op("mul", g, c.op("add", y, c.const(1.0, y))))),
    ("selu", lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(x)), "float", (),
     _f(f"({_SELU_SCALE!r} * ({{0}} if {{0}} > 0 else {_SELU_ALPHA!r} * math.expm1({{0}})))"),
     lambda c, g, x, y: c.op("select", c.op("greater", x, c.const(0.0, x)),
                             c.mul(g, _SELU_SCALE), c.op("mul", g, c.op(
                                 "add", y, c.const(_SELU_SCALE * _SELU_ALPHA, y))))),
    ("softplus", _softplus, "float", (),
     _f("(max({0}, 0.0) + math.log1p(math.exp(-abs({0}))))"),
     lambda c, g, x, y: c.op("mul", g, c.op("sigmoid", x))),
    ("softsign", lambda x: x / (1 + np.abs(x)), "float", (), _f("({0} / (1.0 + abs({0})))"),
     lambda c, g, x, y: c.op("div", g, c.op("square", c.op(
         "add", c.op("abs", x), c.const(1.0, x))))),
    # silu: the sigmoid in float64 (``+ 0.0``; Numba's float() keeps float32), as the epilogue
    ("silu", None, "float", (), _f("({0} * _sigmoid({0} + 0.0))"),
     lambda c, g, x, y: c.op("mul", g, _silu_d(c, x))),
    ("hard_swish", lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6, "float", (),
     _f("({0} * min(max({0} + 3.0, 0.0), 6.0) / 6.0)"),
     lambda c, g, x, y: _hard_swish_d(c, g, x)),
):
    if _fn is None:
        _compute = sigmoid if _name == "sigmoid" else silu
    elif _domain == "float":
        _compute = float_compute(_fn, _name)
    else:
        _compute = plain_compute(_fn, _name)
    _add(Math(_name, 1, _domain, _compute, _scalar, _u(_vjp1), eager=_name, numpy=_np,
              activation=_name if _name in ACTIVATIONS else None))

_add(Math("erf", 1, "float", erf,
          lambda a, k: f"_erf({a[0]})" if k.get(FAST_ERF) else f"math.erf({a[0]})",
          _u(lambda c, g, x, y: c.op("mul", g, c.mul(c.op("exp", c.op("neg", c.op(
              "square", x))), 2.0 / math.sqrt(math.pi)))), eager="erf"))
_add(Math("relu", 1, "numeric", relu, _f("max({0}, 0.0)"),
          _u(lambda c, g, x, y: c.op("relu_grad", g, x)), activation="relu", eager="relu"))
_add(Math("relu6", 1, "numeric",
          plain_compute(lambda x: np.minimum(np.maximum(x, x.dtype.type(0)), x.dtype.type(6)),
                        "relu6"),
          _f("min(max({0}, 0.0), 6.0)"), _u(lambda c, g, x, y: c.op("relu6_grad", g, x)),
          activation="relu6", eager="relu6"))
for _name, _fn, _np in (("sign", np.sign, ("sign",)), ("floor", np.floor, ("floor",)),
                        ("ceil", np.ceil, ("ceil",)), ("round", np.round, ("rint",))):
    _add(Math(_name, 1, "numeric", plain_compute(_fn, _name),
              {"sign": _f("(1.0 if {0} > 0 else (-1.0 if {0} < 0 else {0}))"),
               "floor": _f("np.floor({0})"), "ceil": _f("np.ceil({0})")}.get(_name),
              differentiable=False, eager=_name, numpy=_np))
_add(Math("identity", 1, "any", _identity, _f("{0}"), _u(lambda c, g, x, y: g)))
_add(Math("stop_gradient", 1, "any", _identity, _f("{0}"), _u(lambda c, g, x, y: None),
          eager="stop_gradient", doc="``x``, through which no gradient flows"))
_add(Math("logical_not", 1, "bool", compare_compute(np.logical_not, "logical_not"), None,
          differentiable=False, result="bool", eager="logical_not", numpy=("logical_not",)))
_add(Math("is_nan", 1, "float", compare_compute(np.isnan, "is_nan"), None,
          differentiable=False, result="bool", eager="is_nan", numpy=("isnan",)))
_add(Math("is_inf", 1, "float", compare_compute(np.isinf, "is_inf"), None,
          differentiable=False, result="bool", eager="is_inf", numpy=("isinf",)))
_add(Math("gelu", 1, "float", float_compute(_gelu, "gelu"),
          lambda a, k: (
              f"(0.5 * {a[0]} * (1.0 + math.tanh({_SQRT_2_OVER_PI!r} * ({a[0]} + 0.044715 * "
              f"{a[0]} * {a[0]} * {a[0]}))))" if k.get("approximate")
              else f"_act({a[0]}, {7 if k.get(FAST_ERF) else 10}, 0.0)"),
          _u(lambda c, g, x, y: c.op("gelu_grad", g, x, approximate=c.attrs["approximate"])),
          attrs={"approximate": ("bool", False)},
          activation=lambda k: "gelu_tanh" if k.get("approximate") else "gelu", eager="gelu"))
_add(Math("leaky_relu", 1, "float",
          float_compute(lambda x, alpha: np.where(x >= 0, x, x * x.dtype.type(alpha)),
                        "leaky_relu"),
          lambda a, k: f"({a[0]} if {a[0]} >= 0 else {float(k['alpha'])!r} * {a[0]})",
          _u(lambda c, g, x, y: c.op("select", c.op("greater_equal", x, c.const(0.0, x)),
                                     g, c.mul(g, c.attrs["alpha"]))),
          attrs={"alpha": ("float", 0.2)}, activation="leaky_relu", eager="leaky_relu"))
_add(Math("hard_sigmoid", 1, "float",
          float_compute(lambda x, alpha, beta: np.clip(x * alpha + beta, 0, 1), "hard_sigmoid"),
          lambda a, k: f"min(max({float(k['alpha'])!r} * {a[0]} + {float(k['beta'])!r}, 0.0), "
                       "1.0)",
          _u(lambda c, g, x, y: c.op("select", c.op("logical_and", c.op(
              "greater", y, c.const(0.0, y)), c.op("less", y, c.const(1.0, y))),
              c.mul(g, c.attrs["alpha"]), c.const(0.0, g))),
          attrs={"alpha": ("float", 0.2), "beta": ("float", 0.5)}, eager="hard_sigmoid"))
_add(Math("clip", 1, "numeric", plain_compute(_clip, "clip"),
          lambda a, k: f"min(max({a[0]}, {float(k['min'])!r}), {float(k['max'])!r})",
          _u(_vjp_clip),
          attrs={"min": ("float", float("-inf")), "max": ("float", float("inf"))}))
_add(Math("select", 3, "any", _select, _f("({1} if {0} else {2})"), _vjp_select,
          doc="``a where cond else b``"))

ELEMENTWISE_UNARY: tuple[str, ...] = tuple(n for n, m in MATH.items() if m.arity == 1)
"""The unary elementwise ops, in definition order."""


def activation_op(op: str, attrs: dict[str, Any]) -> str | None:
    """The epilogue activation op ``op`` with ``attrs`` becomes, or ``None``."""
    m = MATH.get(op)
    return None if m is None else m.activation_of(attrs)
