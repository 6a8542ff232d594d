"""CPU tensor math on NumPy arrays: shape rules and compute, as plain functions.

Everything here works on ``numpy.ndarray`` objects (a DenseHostTensor's ``.array``) and is
shared by the graph kernels (:mod:`pytfrt.backends.cpu.kernels`) and the eager op handlers
of the core runtime.  Each op has

* a **shape rule** ``<op>_shape(...)`` taking dimension tuples and returning the result's
  dimensions, raising :class:`OpError` with TFRT's message when they do not fit; and
* a **compute function** that writes into a given output array (``out``) or returns a new one,
  assuming the shape rule passed (call it first; the kernels do).

Float32 semantics: computations stay in the arrays' dtype (NumPy's scalar promotion keeps
``float * float32-array`` in float32), matching TFRT's per-step rounding.  Large operations
release the GIL inside NumPy/BLAS.  Thread-safety: pure functions; callers order writers of
the same array (chains).

``broadcast`` and rank-2 biases (decision for the playground's ``mlp_xor.mlir``): TFRT's
``tfrt_test.broadcast.T.R`` expects a 1-D input whose length equals the target's last
dimension; the XOR program (examples/mlp_xor/README.md) passes its output bias as a ``[1, 1]``
tensor.  We accept any input whose **element count** equals the target's last dimension and
repeat its elements (row-major) along the last axis -- a ``[1, 1]`` bias broadcast to ``[4, 1]``
gives four copies of its value, which reproduces the original playground's XOR outputs.  Any
other input is the error
``broadcast input tensor dimension and target shape mismatch: [..] vs. [..]``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.support.errors import PytfrtError
from pytfrt.tensor.shape import format_dims

Dims = tuple[int, ...]


class OpError(PytfrtError, ValueError):
    """Operands that do not fit an op (message as TFRT words it)."""


def same_shape(op: str, a: Sequence[int], b: Sequence[int]) -> Dims:
    """The common shape of two element-wise operands.

    Raises:
        OpError: ``<op> tensor shape mismatch: [..] vs. [..]``.
    """
    if tuple(a) != tuple(b):
        raise OpError(f"{op} tensor shape mismatch: {format_dims(a)} vs. {format_dims(b)}")
    return tuple(a)


# -- matmul -----------------------------------------------------------------------------------


class MatmulShapeError(OpError):
    """Operand shapes :func:`matmul_result_shape` rejects; ``reason`` is ``"rank"``,
    ``"transpose_a"``/``"transpose_b"`` (rank < 2 with that flag), ``"inner"`` (``k`` = the
    two contraction sizes) or ``"batch"`` (batch dimensions that do not broadcast)."""

    def __init__(self, message: str, reason: str, k: tuple[Any, Any] = (None, None)) -> None:
        super().__init__(message)
        self.reason = reason
        self.k = k


def matmul_result_shape(a_shape: Sequence[int | None], b_shape: Sequence[int | None], *,
                        transpose_a: bool = False, transpose_b: bool = False
                        ) -> tuple[int | None, ...]:
    """NumPy ``matmul``'s result shape, the one matmul shape rule (the kernels, the compiler's
    inference, the core runtime's metadata and eager all use it): rank-1 operands are a row /
    column, batch dimensions broadcast, ``transpose_*`` swap an operand's last two axes.
    ``None`` is an unknown size (checks against it pass; a broadcast of it stays unknown).

    Raises:
        MatmulShapeError: naming the operand shapes and the reason.
    """
    if len(a_shape) == 2 and len(b_shape) == 2 and not transpose_a and not transpose_b \
            and a_shape[1] == b_shape[0] and a_shape[1] is not None:
        return (a_shape[0], b_shape[1])  # the common case, without the general checks
    sa, sb = list(a_shape), list(b_shape)
    shapes = f"{sa} x {sb}"
    if not sa or not sb:
        raise MatmulShapeError(f"matmul: operands must have rank >= 1, got {tuple(sa)} and "
                               f"{tuple(sb)}", "rank")
    for s, flag, name in ((sa, transpose_a, "a"), (sb, transpose_b, "b")):
        if flag:
            if len(s) < 2:
                raise MatmulShapeError(f"matmul: transpose_{name} needs a rank >= 2 operand, "
                                       f"got shape {tuple(s)}", f"transpose_{name}")
            s[-1], s[-2] = s[-2], s[-1]
    a2 = [1, *sa] if len(sa) == 1 else sa
    b2 = [*sb, 1] if len(sb) == 1 else sb
    k1, k2 = a2[-1], b2[-2]
    if k1 is not None and k2 is not None and k1 != k2:
        raise MatmulShapeError(f"matmul: inner dimensions differ: {shapes} ({k1} != {k2})",
                               "inner", (k1, k2))
    ba, bb = a2[:-2], b2[:-2]
    rank = max(len(ba), len(bb))
    one: list[int | None] = [1]
    ba, bb = one * (rank - len(ba)) + ba, one * (rank - len(bb)) + bb
    batch: list[int | None] = []
    for x, y in zip(ba, bb, strict=True):
        known = {d for d in (x, y) if d is not None and d != 1}
        if len(known) > 1:
            raise MatmulShapeError(f"matmul: batch dimensions do not broadcast: {shapes}",
                                   "batch")
        batch.append(known.pop() if known else (None if None in (x, y) else 1))
    shape = [*batch, a2[-2], b2[-1]]
    if len(sa) == 1:
        shape.pop(-2)
    if len(sb) == 1:
        shape.pop(-1)
    return tuple(None if d is None else int(d) for d in shape)




def matmul_shape(a: Sequence[int], b: Sequence[int], c: Sequence[int] | None = None) -> Dims:
    """``[m, k] x [k, n] -> [m, n]``; if ``c`` is given it must be ``[m, n]``.

    Raises:
        OpError: ``MatMul input tensors inner dimension mismatch: [..] vs. [..]`` or
            ``MatMul output shape [..] does not match product shape of inputs: [..] * [..]``.
    """
    if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        raise OpError(
            f"MatMul input tensors inner dimension mismatch: {format_dims(a)} vs. "
            f"{format_dims(b)}"
        )
    out = (a[0], b[1])
    if c is not None and tuple(c) != out:
        raise OpError(
            f"MatMul output shape {format_dims(c)} does not match product shape of inputs: "
            f"{format_dims(a)} * {format_dims(b)}"
        )
    return out


def matmul(alpha: float, a: np.ndarray, b: np.ndarray, beta: float, c: np.ndarray) -> None:
    """``c = alpha * a @ b + beta * c`` in place (shapes checked by :func:`matmul_shape`)."""
    if beta == 0:
        np.matmul(a, b, out=c)
        if alpha != 1:
            c *= alpha
        return
    product = a @ b
    if alpha != 1:
        product *= alpha
    if beta != 1:
        c *= beta
    c += product


def matmul_transposed(
    a: np.ndarray, b: np.ndarray, transpose_a: bool = False, transpose_b: bool = False
) -> np.ndarray:
    """``op(a) @ op(b)`` as a new array (the eager ``tfrt_test.matmul`` op).

    Raises:
        OpError: ``matmul arguments have incompatible shapes`` (TFRT's eager message).
    """
    x = a.T if transpose_a else a
    y = b.T if transpose_b else b
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0]:
        raise OpError("matmul arguments have incompatible shapes")
    return x @ y


# -- broadcast ----------------------------------------------------------------------------------


def broadcast_shape(bias: Sequence[int], target: Sequence[int]) -> Dims:
    """The target shape, if a bias of shape ``bias`` can be repeated along its last axis.

    Raises:
        OpError: ``broadcast input tensor dimension and target shape mismatch: [..] vs. [..]``.
    """
    n = 1
    for d in bias:
        n *= d
    if len(target) == 0 or target[-1] != n or len(bias) == 0:
        raise OpError(
            "broadcast input tensor dimension and target shape mismatch: "
            f"{format_dims(bias)} vs. {format_dims(target)}"
        )
    return tuple(target)


def broadcast(bias: np.ndarray, target: Sequence[int]) -> np.ndarray:
    """A new array of shape ``target`` with ``bias``'s elements repeated along the last axis."""
    out = np.empty(tuple(target), bias.dtype)
    out[...] = bias if bias.ndim == 1 else bias.reshape(-1)
    return out


# -- element-wise ------------------------------------------------------------------------------


def negative(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.negative(a, out=out)``, written through a contiguous temporary when ``out`` is not
    contiguous.

    NumPy 2.4's SIMD loop for ``negative`` writes wrong elements into some strided outputs on
    AVX-512 machines (a float32 or int32 column whose rows are 16 bytes apart, as an LSTM's
    gate slice of hidden size 1 is; float64/int64 at 64 bytes), in place or not; contiguous
    outputs and strided inputs are computed correctly.  Every ``negative`` with an ``out=`` in
    the kernels goes through here.
    """
    if out is None or out.flags.c_contiguous:
        return np.negative(a, out=out)  # type: ignore[no-any-return]
    out[...] = np.negative(a)
    return out


def relu(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``max(a, 0)`` in ``a``'s dtype, into ``out`` if given; returns the result."""
    if out is None:
        r = np.maximum(a, a.dtype.type(0))
        return r if type(r) is np.ndarray else np.asarray(r)
    np.maximum(a, 0, out=out)
    return out


def matmul_2d(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b`` for two rank-2 arrays of one numeric dtype, or ``None`` if they are not.

    The cheap form the eager fast path and ``tfrt_test.matmul`` use; transposes, batches,
    bias and activations are :func:`pytfrt.backends.cpu.gemm.matmul`'s.
    """
    if a.dtype is b.dtype and a.ndim == 2 and b.ndim == 2 and a.dtype.kind in "fiu":
        return a @ b
    return None


# The stable sigmoid as a compiled Numba ufunc, built on first use (a NumPy formulation if
# Numba is unusable).  The fused conv/matmul epilogue inlines the same scalar formula inside
# its compiled loop (backends/cpu/_epilogue.py): that copy is deliberate.
_sigmoid_lock = threading.Lock()
_sigmoid_impl: Callable[[Any], Any] | None = None


def _numpy_sigmoid(a: Any) -> Any:
    t = np.exp(-np.abs(a))
    return np.where(a >= 0, 1 / (1 + t), t / (1 + t)).astype(a.dtype, copy=False)


def _sigmoid_scalar(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    t = math.exp(x)
    return t / (1.0 + t)


def _sigmoid_ufunc() -> Callable[[Any], Any]:
    global _sigmoid_impl
    fn = _sigmoid_impl
    if fn is not None:
        return fn
    with _sigmoid_lock:
        if _sigmoid_impl is None:
            try:
                import numba

                vec = numba.vectorize(
                    ["float32(float32)", "float64(float64)"], cache=True, nopython=True
                )(_sigmoid_scalar)
                _sigmoid_impl = vec.ufunc
            except Exception:  # noqa: BLE001 - any Numba failure: the NumPy formulation
                _sigmoid_impl = _numpy_sigmoid
        return _sigmoid_impl


def sigmoid(a: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-a))``, numerically safe for large ``|a|``, in ``a``'s dtype.

    float32/float64 in one compiled pass; other float dtypes (f16, bf16) through float32.
    Thread-safe.
    """
    if a.dtype.kind == "f" and a.dtype.itemsize >= 4:
        r = _sigmoid_ufunc()(a)
    else:
        r = _sigmoid_ufunc()(a.astype(np.float32)).astype(a.dtype)
    return r if type(r) is np.ndarray else np.asarray(r)


def sigmoid_inplace(a: np.ndarray) -> None:
    """``a = 1 / (1 + exp(-a))`` in place, step by step in ``a``'s dtype.

    The playground's ``sigmoid_inplace.f32`` formula (its XOR outputs depend on these exact
    roundings); :func:`sigmoid` is the numerically safe one.
    """
    negative(a, out=a)
    np.exp(a, out=a)
    a += a.dtype.type(1.0)
    np.reciprocal(a, out=a)


def relu_grad_inplace(activation: np.ndarray, grad: np.ndarray) -> None:
    """``grad *= (activation > 0)``."""
    grad[activation <= 0] = 0


def add(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a + b`` (NumPy broadcasting), into ``out`` if given; returns the result."""
    r = np.add(a, b, out=out) if out is not None else np.add(a, b)
    return r if type(r) is np.ndarray else np.asarray(r)


def equal(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out = (a == b)`` converted to ``out``'s dtype (1/0)."""
    np.equal(a, b, out=out, casting="unsafe")


def cast(a: np.ndarray, out: np.ndarray) -> None:
    """``out = a`` converted to ``out``'s dtype (C ``static_cast``: floats truncate)."""
    np.copyto(out, a, casting="unsafe")


def subtract_inplace(a: np.ndarray, out: np.ndarray) -> None:
    """``out -= a``."""
    np.subtract(out, a, out=out)


def gradient_descent_check(lr: np.ndarray) -> None:
    """Raises :class:`OpError` ``GradientDescent lr should have only one element``."""
    if lr.size != 1:
        raise OpError("GradientDescent lr should have only one element")


def gradient_descent(grad: np.ndarray, lr: np.ndarray, out: np.ndarray) -> None:
    """``out -= grad * lr[0]`` (``lr`` has one element)."""
    out -= grad * (lr[0] if lr.ndim == 1 else lr.reshape(-1)[0])


def softmax_inplace(a: np.ndarray) -> None:
    """``a = exp(a) / sum(exp(a))`` along the last axis, without max subtraction (as TFRT)."""
    np.exp(a, out=a)
    a /= a.sum(axis=-1, keepdims=True)


# -- reductions and reshapes ----------------------------------------------------------------------


def argmax_shape(a: Sequence[int]) -> Dims:
    """``[rows, cols] -> [rows]``.

    Raises:
        OpError: if ``a`` is not rank 2.
    """
    if len(a) != 2:
        raise OpError(f"argmax expects a rank 2 tensor, got shape {format_dims(a)}")
    return (a[0],)


def argmax(a: np.ndarray) -> np.ndarray:
    """Index of the first maximum of each row, as int32."""
    if a.shape[1] == 0:
        return np.zeros(a.shape[0], np.int32)
    return np.argmax(a, axis=1).astype(np.int32)


def reduce_mean_shape(a: Sequence[int]) -> Dims:
    """``[n] -> []``.

    Raises:
        OpError: if ``a`` is not rank 1.
    """
    if len(a) != 1:
        raise OpError(f"reduce_mean expects a rank 1 tensor, got shape {format_dims(a)}")
    return ()


def reduce_mean(a: np.ndarray) -> np.ndarray:
    """The mean of all elements as a rank-0 array of ``a``'s dtype."""
    return np.asarray(a.sum(dtype=a.dtype) / a.dtype.type(max(a.size, 1)), a.dtype).reshape(())


# Integers below this are exact in float32 (a 24-bit significand).
_EXACT_F32_INT = 1 << 24
_F32_F64 = (np.dtype(np.float32), np.dtype(np.float64))


def mean_axis_zero_shape(a: Sequence[int], out: Sequence[int]) -> Dims:
    """``[n, m] -> [m]``.

    Raises:
        OpError: if the shapes do not fit.
    """
    if len(a) != 2 or tuple(out) != (a[1],):
        raise OpError(
            f"MeanAxisZero output shape {format_dims(out)} does not match the input shape "
            f"{format_dims(a)}"
        )
    return (a[1],)


def mean_axis_zero(a: np.ndarray, out: np.ndarray) -> None:
    """``out = mean(a, axis=0)``.

    For float32/float64 ``out`` (and fewer than 2**24 rows), ``np.mean``'s own two steps
    without its Python-level dispatch: the same sum (``np.add.reduce`` in ``out``'s dtype),
    then a division by the row count in ``out``'s dtype.  ``np.mean`` divides in float64 and
    rounds; for one division that double rounding gives the correctly rounded quotient (53 >=
    2 * 24 + 2 bits), so the results are identical, at a quarter of the cost on the XOR
    program's small tensors.  Anything else goes through ``np.mean``.
    """
    rows = a.shape[0]
    dtype = out.dtype
    if 0 < rows < _EXACT_F32_INT and dtype in _F32_F64:
        np.add.reduce(a, 0, dtype, out=out)
        out /= rows
        return
    np.mean(a, axis=0, out=out, dtype=dtype)


def transpose_shape(a: Sequence[int], out: Sequence[int]) -> Dims:
    """2-D transpose ``[m, n] -> [n, m]``.

    Raises:
        OpError: if the shapes do not fit.
    """
    if len(a) != 2 or tuple(out) != (a[1], a[0]):
        raise OpError(
            f"Transpose output shape {format_dims(out)} does not match the input shape "
            f"{format_dims(a)}"
        )
    return (a[1], a[0])


def transpose(a: np.ndarray, out: np.ndarray) -> None:
    """``out = a.T``."""
    np.copyto(out, a.T)


def flatten_shape(a: Sequence[int], out: Sequence[int]) -> Dims:
    """Element counts and dimension 0 must match.

    Raises:
        OpError: ``Flatten output shape [..] does not match the input shape [..]``.
    """
    if not a or not out or a[0] != out[0] or math.prod(a) != math.prod(out):
        raise OpError(
            f"Flatten output shape {format_dims(out)} does not match the input shape "
            f"{format_dims(a)}"
        )
    return tuple(out)


def flatten(a: np.ndarray, out: np.ndarray) -> None:
    """Copy ``a``'s elements (row-major) into ``out``."""
    if a.shape == out.shape:
        out[...] = a
    else:
        out.reshape(-1)[:] = a.reshape(-1)


def onnx_slice(start: int, end: int, step: int, dim: int) -> slice:
    """ONNX ``Slice``'s bounds on an axis of size ``dim`` as a Python slice (the one rule of
    ``tg.slice``'s kernel and shape inference).

    Per the ONNX spec (https://onnx.ai/onnx/operators/onnx__Slice.html): a negative start or end
    counts from the end (``+ dim``); then for ``step > 0`` both are clamped to ``[0, dim]``,
    for ``step < 0`` the start to ``[0, dim - 1]`` and the end to ``[-1, dim - 1]`` (``-1``:
    through element 0).  Python's own clamping differs in one case: a negative step with a
    start below ``-dim`` selects nothing in Python but starts at element 0 in ONNX.  ``step``
    must not be 0."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    if dim == 0:
        return slice(0, 0, step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


def slice_shape(a: Sequence[int], begin: Sequence[int], out: Sequence[int]) -> Dims:
    """``out`` must fit inside ``a`` at ``begin``.

    Raises:
        OpError: if the ranks differ or the slice is out of bounds.
    """
    if len(a) != len(out) or len(begin) != len(a):
        raise OpError(
            f"Slice ranks do not match: input {format_dims(a)}, begin {format_dims(begin)}, "
            f"output {format_dims(out)}"
        )
    for d, b, o in zip(a, begin, out, strict=True):
        if b < 0 or b + o > d:
            raise OpError(
                f"Slice of shape {format_dims(out)} at {format_dims(begin)} is out of bounds "
                f"of the input shape {format_dims(a)}"
            )
    return tuple(out)


def slice_copy(a: np.ndarray, begin: Sequence[int], out: np.ndarray) -> None:
    """``out = a[begin : begin + out.shape]``."""
    index = tuple(slice(b, b + o) for b, o in zip(begin, out.shape, strict=True))
    np.copyto(out, a[index])
