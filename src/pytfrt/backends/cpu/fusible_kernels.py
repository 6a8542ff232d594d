"""Numba implementations of host tensor kernels, for fused segments of whole-function code.

Whole-function execution (:mod:`pytfrt.executor.whole_function`, docs/executor.md) may run a
run of consecutive kernels as ONE Numba call (:mod:`pytfrt.executor.fused_segments`).  A
kernel takes part when it has an entry in :data:`FUSIBLE` here: its operand roles, what its
result is, a *check* (an expression over its operands that is true only if the Python kernel
would succeed, so that a fused segment can validate every kernel before it mutates anything)
and a *call* of the ``@numba.njit`` function below that computes it.  The Python kernels
(``backends/cpu/kernels.py``, ``playground/mlp.py``) keep their own NumPy code; the functions
here repeat their formulas step by step in float32 with the same operation order and
roundings, so a fused kernel gives the same bits as its Python kernel: matrix products call
the same BLAS (``np.dot``), and ``exp`` -- which NumPy computes with its own SIMD
approximation -- is NumPy's, called back from the compiled code.

Operand roles: ``t`` a float32 DenseHostTensor, ``s`` a float32 scalar, ``i`` a Python int
(or bool), ``h`` a shape known when the code is generated (``ts.build_shape``), ``-`` any
value (a chain) that is only waited for.  Results: ``chain``, ``f32`` (a Python float),
``int`` (a Python int; ``int int`` for two), ``bool``, ``new`` (a new float32 tensor whose shape
is known when the code is generated) or ``shape``.

Thread-safety: the functions are pure apart from writing their output operands.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np

_jit = numba.njit(nogil=True, cache=True, error_model="numpy")


@dataclass(frozen=True)
class Fusible:
    """How a kernel takes part in a fused segment.

    Attributes:
        roles: one character per operand (see the module docstring); operands beyond it are
            ``-``.
        result: ``chain``, ``f32``, ``int``, ``int int``, ``bool``, ``new`` or ``shape``.
        check: a format string over the operand names (``{0}``, ``{1}``...) giving an njit
            boolean expression, or ``""`` (always succeeds once the guards hold).
        call: a format string of the njit statement computing the kernel; ``{out}`` is the
            result's name (``new``/``f32``).
        calls_back: it calls NumPy from the compiled code, which may raise only if
            :func:`numpy_errors_quiet` is false (then the segment runs unfused).
        distinct: operand pairs that must be different values (an out-of-place kernel whose
            NumPy code copies through a temporary when they are the same).
    """

    roles: str
    result: str
    check: str = ""
    call: str = ""
    distinct: tuple[tuple[int, int], ...] = ()
    calls_back: bool = False


# -- shape checks -----------------------------------------------------------------------------


@_jit
def dim(shape: Any, i: int) -> int:
    """``shape[i]``, or -1 if the rank is smaller (any rank, one compiled function)."""
    if i < len(shape):
        return shape[i]  # type: ignore[no-any-return]
    return -1


@_jit
def same_shape(a: Any, b: Any) -> bool:
    """Same rank and dimensions."""
    return a.shape == b.shape  # type: ignore[no-any-return]


@_jit
def matmul_ok(a: Any, b: Any, c: Any) -> bool:
    """``eigen.matmul``'s shape rule: ``[m, k] x [k, n] -> [m, n]``."""
    return (a.ndim == 2 and b.ndim == 2 and c.ndim == 2 and dim(a.shape, 1) == dim(b.shape, 0)
            and dim(c.shape, 0) == dim(a.shape, 0) and dim(c.shape, 1) == dim(b.shape, 1))


@_jit
def transpose_ok(a: Any, out: Any) -> bool:
    """``[m, n] -> [n, m]``."""
    return (a.ndim == 2 and out.ndim == 2 and dim(out.shape, 0) == dim(a.shape, 1)
            and dim(out.shape, 1) == dim(a.shape, 0))


@_jit
def flatten_ok(a: Any, out: Any) -> bool:
    """Same first dimension and element count (both ranked)."""
    return a.ndim >= 1 and out.ndim >= 1 and dim(a.shape, 0) == dim(out.shape, 0) \
        and a.size == out.size


@_jit
def mean_axis_zero_ok(a: Any, out: Any) -> bool:
    """``[n, m] -> [m]`` with at least one row."""
    return a.ndim == 2 and out.ndim == 1 and dim(out.shape, 0) == dim(a.shape, 1) \
        and dim(a.shape, 0) > 0


@_jit
def gradient_descent_ok(g: Any, lr: Any, out: Any) -> bool:
    """``lr`` has one element (rank 1) and ``g``, ``out`` the same shape."""
    return lr.ndim == 1 and lr.size == 1 and g.shape == out.shape


@_jit
def broadcast_ok(bias: Any, last: int) -> bool:
    """A rank-1 bias repeated along a last axis of ``last`` elements."""
    return bias.ndim == 1 and bias.size == last and last > 0


# -- the kernels ------------------------------------------------------------------------------


@_jit
def flat(a: Any) -> Any:
    """A rank-1 view of a C-contiguous array."""
    return a.reshape(a.size)


@_jit
def matmul(alpha: Any, a: Any, b: Any, beta: Any, c: Any) -> None:
    """``c = alpha a b + beta c`` in float32, as ``ops.matmul`` (the product first)."""
    al = np.float32(alpha)
    be = np.float32(beta)
    m, n = c.shape
    prod = np.dot(a, b)  # the BLAS call NumPy's ``a @ b`` makes: the same bits
    if be == 0:
        for i in range(m):
            for j in range(n):
                c[i, j] = prod[i, j] * al if al != 1 else prod[i, j]
        return
    for i in range(m):
        for j in range(n):
            v = prod[i, j] * al if al != 1 else prod[i, j]
            w = c[i, j] * be if be != 1 else c[i, j]
            c[i, j] = w + v


@_jit
def broadcast(bias: Any, out: Any) -> None:
    """Every row of ``out`` (rank 2) set to ``bias``."""
    o = out.reshape(out.size // bias.size, bias.size)
    for i in range(o.shape[0]):
        for j in range(bias.size):
            o[i, j] = bias[j]


def _errstate_getter() -> Any:
    try:
        from numpy._core import _ufunc_config

        return _ufunc_config._extobj_contextvar.get  # type: ignore[attr-defined]
    except (ImportError, AttributeError):  # another NumPy: check every time
        return object


_errstate = _errstate_getter()
_quiet_errstate: list[Any] = []


def numpy_errors_quiet() -> bool:
    """Whether NumPy's floating-point error handling (``np.seterr``/``np.errstate``) neither
    raises nor calls back, so :func:`exp_inplace_numpy` cannot raise.  Fast when the state is
    one seen before (a context variable's identity)."""
    state = _errstate()
    if _quiet_errstate and state is _quiet_errstate[0]:
        return True
    if any(v in ("raise", "call") for v in np.geterr().values()):
        return False
    _quiet_errstate[:] = [state]
    return True


def exp_inplace_numpy(a: np.ndarray) -> None:
    """``a = exp(a)`` by NumPy (its float32 ``exp`` is not correctly rounded, so a fused
    kernel calls it back rather than differ in the last bit)."""
    np.exp(a, out=a)


@numba.njit(cache=True, error_model="numpy")  # no nogil: it calls back into Python
def sigmoid_inplace(a: Any) -> None:
    """``a = 1 / (1 + exp(-a))`` step by step in float32 (``ops.sigmoid_inplace``); ``exp``
    is NumPy's own (:func:`exp_inplace_numpy`)."""
    x = flat(a)
    for i in range(x.size):
        x[i] = -x[i]
    with numba.objmode():
        exp_inplace_numpy(x)
    one = np.float32(1.0)
    for i in range(x.size):
        x[i] = one / (x[i] + one)


@_jit
def sigmoid_grad_inplace(a: Any, g: Any) -> None:
    """``g = a - a * a`` (playground ``sigmoid_grad_inplace.f32``)."""
    x, y = flat(a), flat(g)
    for i in range(x.size):
        y[i] = x[i] * x[i]
        y[i] = x[i] - y[i]


@_jit
def multiply_inplace(a: Any, b: Any) -> None:
    """``b = a * b``."""
    x, y = flat(a), flat(b)
    for i in range(x.size):
        y[i] = x[i] * y[i]


@_jit
def subtract_inplace(a: Any, out: Any) -> None:
    """``out -= a``."""
    x, y = flat(a), flat(out)
    for i in range(x.size):
        y[i] = y[i] - x[i]


@_jit
def mse_loss(p: Any, t: Any) -> float:
    """``mean((p - t)**2)``: the float32 sum in order, divided in float64, rounded to float32
    (``mlp.mse_loss.f32``)."""
    x, y = flat(p), flat(t)
    s = np.float32(0.0)
    for i in range(x.size):
        d = x[i] - y[i]
        s += d * d
    return float(np.float32(np.float64(s) / x.size))


@_jit
def copy_flat(a: Any, out: Any) -> None:
    """``out``'s elements = ``a``'s, row-major (``tfrt_test.flatten``)."""
    x, y = flat(a), flat(out)
    for i in range(x.size):
        y[i] = x[i]


@_jit
def transpose(a: Any, out: Any) -> None:
    """``out = a.T`` (rank 2)."""
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[j, i] = a[i, j]


@_jit
def mean_axis_zero(a: Any, out: Any) -> None:
    """``out = mean(a, axis=0)``: float32 row sums in order, divided by the row count."""
    rows, cols = a.shape
    for j in range(cols):
        out[j] = a[0, j]
    for i in range(1, rows):
        for j in range(cols):
            out[j] = out[j] + a[i, j]
    r = np.float32(rows)
    for j in range(cols):
        out[j] = out[j] / r


@_jit
def gradient_descent(g: Any, lr: Any, out: Any) -> None:
    """``out -= g * lr[0]``."""
    r = lr[0]
    x, y = flat(g), flat(out)
    for i in range(x.size):
        y[i] = y[i] - x[i] * r


@_jit
def is_i32(a: int) -> bool:
    """Whether an integer fits in int32 (the fused integer kernels' domain)."""
    return -0x80000000 <= a <= 0x7FFFFFFF  # type: ignore[no-any-return]


@_jit
def add_i32(a: int, b: int) -> int:
    """Wrapping 32-bit addition (``tfrt.add.i32``)."""
    return ((a + b + 0x80000000) & 0xFFFFFFFF) - 0x80000000  # type: ignore[no-any-return]


@_jit
def div_i32(a: int, b: int) -> tuple[int, int]:
    """Truncating quotient (wrapped to 32 bits) and remainder (``tfrt.div.i32``; ``b != 0``)."""
    q = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        q = -q
    return ((q + 0x80000000) & 0xFFFFFFFF) - 0x80000000, a - b * q


@_jit
def overlap(a: Any, b: Any) -> bool:
    """Whether two C-contiguous arrays share memory."""
    sa = a.ctypes.data
    sb = b.ctypes.data
    return sa < sb + b.nbytes and sb < sa + a.nbytes  # type: ignore[no-any-return]


MODULE_ALIAS = "_fk"
"""The name the generated segment code imports this module as."""

FUSIBLE: dict[str, Fusible] = {
    "tfrt.new.chain": Fusible("", "chain"),
    "tfrt.merge.chains": Fusible("", "chain"),
    "ts.build_shape": Fusible("", "shape"),
    "eigen.matmul.f32": Fusible(
        "sttst", "chain", f"{MODULE_ALIAS}.matmul_ok({{1}}, {{2}}, {{4}})",
        f"{MODULE_ALIAS}.matmul({{0}}, {{1}}, {{2}}, {{3}}, {{4}})"),
    "tfrt_test.broadcast.f32.2": Fusible(
        "th", "new", "", f"{MODULE_ALIAS}.broadcast({{0}}, {{out}})"),
    "sigmoid_inplace.f32": Fusible("t", "chain", "", f"{MODULE_ALIAS}.sigmoid_inplace({{0}})",
                                   calls_back=True),
    "sigmoid_grad_inplace.f32": Fusible(
        "tt", "chain", f"{MODULE_ALIAS}.same_shape({{0}}, {{1}})",
        f"{MODULE_ALIAS}.sigmoid_grad_inplace({{0}}, {{1}})"),
    "mlp.multiply_inplace.f32": Fusible(
        "tt", "chain", f"{MODULE_ALIAS}.same_shape({{0}}, {{1}})",
        f"{MODULE_ALIAS}.multiply_inplace({{0}}, {{1}})"),
    "mlp.mse_loss.f32": Fusible(
        "tt", "f32", f"{MODULE_ALIAS}.same_shape({{0}}, {{1}}) and {{0}}.size > 0",
        f"{{out}} = {MODULE_ALIAS}.mse_loss({{0}}, {{1}})"),
    "tfrt_test.subtract_inplace.f32": Fusible(
        "tt", "chain", f"{MODULE_ALIAS}.same_shape({{0}}, {{1}})",
        f"{MODULE_ALIAS}.subtract_inplace({{0}}, {{1}})"),
    "tfrt_test.flatten.f32": Fusible(
        "tt", "chain", f"{MODULE_ALIAS}.flatten_ok({{0}}, {{1}})",
        f"{MODULE_ALIAS}.copy_flat({{0}}, {{1}})",
        distinct=((0, 1),)),
    "tfrt_test.tensor_transpose.f32": Fusible(
        "tt", "chain", f"{MODULE_ALIAS}.transpose_ok({{0}}, {{1}})",
        f"{MODULE_ALIAS}.transpose({{0}}, {{1}})",
        distinct=((0, 1),)),
    "tfrt_test.mean_axis_zero.f32": Fusible(
        "tt", "chain", f"{MODULE_ALIAS}.mean_axis_zero_ok({{0}}, {{1}})",
        f"{MODULE_ALIAS}.mean_axis_zero({{0}}, {{1}})", distinct=((0, 1),)),
    "tfrt.add.i32": Fusible(
        "ii", "int", f"{MODULE_ALIAS}.is_i32({{0}}) and {MODULE_ALIAS}.is_i32({{1}})",
        f"{{out}} = {MODULE_ALIAS}.add_i32({{0}}, {{1}})"),
    "tfrt.div.i32": Fusible(
        "ii", "int int",
        f"{MODULE_ALIAS}.is_i32({{0}}) and {MODULE_ALIAS}.is_i32({{1}}) and {{1}} != 0",
        f"{{out}} = {MODULE_ALIAS}.div_i32({{0}}, {{1}})"),
    "tfrt.equal.i32": Fusible(
        "ii", "bool", f"{MODULE_ALIAS}.is_i32({{0}}) and {MODULE_ALIAS}.is_i32({{1}})",
        "{out} = {0} == {1}"),
    "tfrt_test.gradient_descent.f32": Fusible(
        "ttt", "chain", f"{MODULE_ALIAS}.gradient_descent_ok({{0}}, {{1}}, {{2}})",
        f"{MODULE_ALIAS}.gradient_descent({{0}}, {{1}}, {{2}})"),
}
"""Kernel name -> how it is fused (``tfrt_dht.create_uninitialized_tensor.f32.R`` and the
folded ``tfrt.constant.*`` kernels are handled by the segment builder itself)."""

IMPORT = f"import pytfrt.backends.cpu.fusible_kernels as {MODULE_ALIAS}"
"""The import line a generated segment needs."""


def tensor_types() -> tuple[type, Any]:
    """The tensor class and dtype object a fused segment's outside tensors must have."""
    from pytfrt.tensor.dense_host_tensor import DenseHostTensor
    from pytfrt.tensor.dtype import F32

    return DenseHostTensor, F32


def new_tensor_wrapper() -> Any:
    """How a segment's new tensors leave it: ``wrap_result(exec_ctx, dtype, array)``, a
    DenseHostTensor accounted with the host allocator as the kernels account theirs."""
    from pytfrt.tensor.dense_host_tensor import wrap_result

    return wrap_result


MAX_NEW_ELEMENTS = 1 << 16
"""A fused segment makes new tensors of at most this many elements (bigger ones: unfused)."""


def new_tensor_dims(kernel_name: str, shape: Any) -> tuple[int, ...] | None:
    """The dimensions ``tfrt_dht.create_uninitialized_tensor.f32.R`` makes from its ``shape``
    attribute, or ``None`` if it would fail (or the tensor is big): decided without allocating
    anything."""
    from pytfrt.tensor.kernels.util import dims_of

    try:
        dims = dims_of(shape)
        rank = int(kernel_name.rsplit(".", 1)[1])
    except Exception:  # noqa: BLE001 - the kernel reports it at run time
        return None
    if len(dims) > rank or any(d < 0 for d in dims) or math.prod(dims) > MAX_NEW_ELEMENTS:
        return None
    return dims


def compile_segment(source: str, name: str) -> Any:
    """The Numba dispatcher of a generated segment function ``name`` (the whole-region
    kernels' loader and on-disk cache: :func:`pytfrt.backends.cpu.small_graph._load`); the
    source is stamped with a digest of this module, whose functions it calls (Numba's cache
    does not notice their changes)."""
    from pytfrt.backends.cpu.small_graph import _load

    imports = f"# kernels {_module_digest()}\n{IMPORT}\n\n\n"
    return _load(source, imports, name, {"cache": True, "error_model": "numpy"},
                 "_pytfrt_segment_")


@functools.cache
def _module_digest() -> str:
    """A digest of this module's source, read once per process (it does not change while
    the process runs)."""
    try:
        data = Path(__file__).read_bytes()
    except OSError:
        data = b""
    return hashlib.sha256(data).hexdigest()[:16]


def compile_after() -> int:
    """Runs of a segment that stay unfused before it compiles (the whole-region kernels')."""
    from pytfrt.backends.cpu.small_graph import COMPILE_AFTER

    return COMPILE_AFTER
