"""CPU math ops: elementwise, matmul, activations, reductions and casts (``tfrt_test.*``).

Each op is registered by :func:`register` with its metadata function (shared by the eager and
graph paths), its NumPy dispatch function and, where worthwhile, an eager fast path (see
:mod:`.op_registry` for the contract).  Conventions:

* Binary elementwise ops need equal dtypes and NumPy-broadcastable shapes.
* Float-only ops (sigmoid, softmax, exp, ...) reject integer inputs in their metadata function.
* f16 and bf16 are computed in their own dtype where NumPy/ml_dtypes can, else in f32 and cast
  back, so results always have the input dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.backends.cpu import ops as cpu
from pytfrt.backends.cpu.array_ops import GRAPH_OPS as ARRAY_OPS
from pytfrt.backends.cpu.gemm import matmul as gemm_matmul
from pytfrt.backends.cpu.norm import softmax as cpu_softmax
from pytfrt.backends.cpu.op_math import MATH
from pytfrt.backends.cpu.ops import matmul_result_shape
from pytfrt.core_runtime.host_tensors import make_metadata
from pytfrt.core_runtime.op_attrs import OpAttrsRef
from pytfrt.core_runtime.op_registry import OpError, OpFlags, OpRecord, OpRegistry
from pytfrt.tensor.dtype import BF16, F32, I32, DType, dtype_from_name
from pytfrt.tensor.scalar_host_tensor import ScalarHostTensor
from pytfrt.tensor.shape import TensorMetadata, format_dims

_ndarray = np.ndarray
_asarray = np.asarray
_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _is_float(dtype: DType) -> bool:
    return dtype.kind == "float"


def _is_numeric(dtype: DType) -> bool:
    return dtype.kind in ("int", "uint", "float", "complex", "bool")


# -- metadata functions ------------------------------------------------------------------------


def binary_metadata(op: str) -> Callable[[Sequence[TensorMetadata], OpAttrsRef], TensorMetadata]:
    """Metadata of a broadcasting binary op: equal dtypes, broadcast shape."""
    short = _short(op)

    def metadata(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
        if len(args) != 2:
            raise OpError(f"{short} takes 2 arguments, got {len(args)}")
        a, b = args
        if a.dtype is not b.dtype:
            raise OpError(f"{short} arguments have different dtypes: {a.dtype} vs {b.dtype}")
        if not _is_numeric(a.dtype):
            raise OpError(f"{short} does not support dtype {a.dtype}")
        try:
            dims = np.broadcast_shapes(a.shape.dims, b.shape.dims)
        except ValueError:
            raise OpError(
                f"{short} arguments have incompatible shapes {a.shape} vs {b.shape}"
            ) from None
        return make_metadata(a.dtype, dims)

    return metadata


def _single_numeric_argument(
    short: str, args: Sequence[TensorMetadata], float_only: bool
) -> TensorMetadata:
    """The one argument of a unary op or reduction, if its dtype is allowed; else ``OpError``."""
    if len(args) != 1:
        raise OpError(f"{short} takes 1 argument, got {len(args)}")
    a = args[0]
    if float_only and not _is_float(a.dtype):
        raise OpError(f"{short} requires a floating-point tensor, got {a.dtype}")
    if not _is_numeric(a.dtype):
        raise OpError(f"{short} does not support dtype {a.dtype}")
    return a


def unary_metadata(
    op: str, float_only: bool = False
) -> Callable[[Sequence[TensorMetadata], OpAttrsRef], TensorMetadata]:
    """Metadata of an elementwise unary op (same dtype and shape)."""
    short = _short(op)

    def metadata(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
        a = _single_numeric_argument(short, args, float_only)
        return a

    return metadata


def matmul_metadata(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    """``[m, k] x [k, n] -> [m, n]`` with optional transposes; equal dtypes."""
    if len(args) != 2:
        raise OpError(f"matmul takes 2 arguments, got {len(args)}")
    a, b = args
    if a.dtype is not b.dtype:
        raise OpError(f"matmul arguments have different dtypes: {a.dtype} vs {b.dtype}")
    if not _is_numeric(a.dtype) or a.dtype.kind == "bool":
        raise OpError(f"matmul does not support dtype {a.dtype}")
    if a.shape.rank != 2 or b.shape.rank != 2:
        raise OpError(f"matmul requires rank-2 arguments, got {a.shape} and {b.shape}")
    try:
        dims = matmul_result_shape(a.shape.dims, b.shape.dims,
                                   transpose_a=bool(attrs.get("transpose_a", False)),
                                   transpose_b=bool(attrs.get("transpose_b", False)))
    except cpu.MatmulShapeError:
        raise OpError(f"matmul arguments have incompatible shapes {a.shape} vs {b.shape}"
                      ) from None
    return make_metadata(a.dtype, dims)  # type: ignore[arg-type]


def _axes(attrs: OpAttrsRef, rank: int, op: str) -> tuple[int, ...]:
    """The normalized reduction axes (all axes if the ``axis`` attribute is absent)."""
    axis = attrs.get("axis")
    if axis is None:
        return tuple(range(rank))
    raw = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for ax in raw:
        a = int(ax)
        if not -rank <= a < rank:
            raise OpError(f"{op} axis {a} is out of range for a rank-{rank} tensor")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise OpError(f"{op} has a repeated axis in {list(raw)}")
    return tuple(sorted(out))


def reduce_metadata(
    op: str, float_only: bool = False, result_dtype: DType | None = None, single_axis: bool = False
) -> Callable[[Sequence[TensorMetadata], OpAttrsRef], TensorMetadata]:
    """Metadata of a reduction over the ``axis`` attribute (``keepdims`` optional)."""
    short = _short(op)

    def metadata(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
        a = _single_numeric_argument(short, args, float_only)
        dims = a.shape.dims
        if single_axis and isinstance(attrs.get("axis"), tuple):
            raise OpError(f"{short} takes a single axis")
        axes = _axes(attrs, len(dims), short)
        if any(dims[ax] == 0 for ax in axes) and short in ("argmax", "reduce_max", "reduce_min"):
            raise OpError(f"{short} of an empty axis in a tensor of shape {format_dims(dims)}")
        if attrs.get("keepdims", False):
            out = tuple(1 if i in axes else d for i, d in enumerate(dims))
        else:
            out = tuple(d for i, d in enumerate(dims) if i not in axes)
        return make_metadata(result_dtype or a.dtype, out)

    return metadata


def cast_target(attrs: OpAttrsRef) -> DType:
    """The target dtype of a cast from its ``type`` attribute (a name or a DType)."""
    target = attrs.get("type")
    if target is None:
        raise OpError("cast requires a 'type' attribute")
    if isinstance(target, DType):
        return target
    try:
        return dtype_from_name(str(target))
    except ValueError:
        raise OpError(f"cast to unknown dtype '{target}'") from None


def cast_metadata(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    """Same shape, the ``type`` attribute's dtype."""
    if len(args) != 1:
        raise OpError(f"cast takes 1 argument, got {len(args)}")
    target = cast_target(attrs)
    if not _is_numeric(target) or not _is_numeric(args[0].dtype):
        raise OpError(f"cast from {args[0].dtype} to {target} is not supported")
    return make_metadata(target, args[0].shape.dims)


# -- compute helpers ---------------------------------------------------------------------------


def _arr(x: Any) -> np.ndarray:
    return x if type(x) is _ndarray else _asarray(x)


def _via_f32(fn: Callable[[np.ndarray], Any], a: np.ndarray) -> np.ndarray:
    """Apply ``fn`` in a dtype NumPy computes well: f16/bf16 go through f32 and back."""
    if a.dtype == _F16 or a.dtype == BF16.np_dtype:
        return _arr(fn(a.astype(_F32))).astype(a.dtype)
    return _arr(fn(a))


sigmoid = cpu.sigmoid
"""The CPU backend's sigmoid (:func:`pytfrt.backends.cpu.ops.sigmoid`)."""


def softmax(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """``exp(a - max) / sum(exp(a - max))`` along ``axis`` (the CPU backend's softmax)."""
    if a.size == 0:
        return a.copy()
    return cpu_softmax(a, axis)


def _softmax_metadata(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    md = unary_metadata("softmax", float_only=True)(args, attrs)
    rank = md.shape.rank
    axis = int(attrs.get("axis", -1))
    if rank == 0 or not -rank <= axis < rank:
        raise OpError(f"softmax axis {axis} is out of range for a rank-{rank} tensor")
    return md


def _scalar_add(a: ScalarHostTensor, b: ScalarHostTensor) -> ScalarHostTensor:
    return ScalarHostTensor(a.dtype, a.dims, a.value + b.value)


def _add_dispatch(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    a, b = args
    if isinstance(a, ScalarHostTensor) and isinstance(b, ScalarHostTensor):
        if a.dims == b.dims:
            return _scalar_add(a, b)
    if isinstance(a, ScalarHostTensor):
        a = a.to_dense().array
    if isinstance(b, ScalarHostTensor):
        b = b.to_dense().array
    return cpu.add(a, b)


# -- eager fast paths: cheap guards, the same arithmetic as the dispatch functions -------------


def _fast_binary(ufunc: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def fast(a: Any, b: Any) -> Any:
        if a.dtype is b.dtype and a.dtype.kind in "fiu":
            r = ufunc(a, b)
            return r if type(r) is _ndarray else _asarray(r)
        return None

    fast.ufunc = ufunc  # type: ignore[attr-defined]  # eager inlines it for float32/64
    return fast


def _fast_float_unary(fn: Callable[[Any], Any]) -> Callable[..., Any]:
    def fast(a: Any) -> Any:
        if a.dtype.kind == "f" and a.dtype.itemsize >= 4:
            r = fn(a)
            return r if type(r) is _ndarray else _asarray(r)
        return None

    fast.ufunc = fn  # type: ignore[attr-defined]  # eager's C fast path calls it for float32/64
    return fast


_fast_matmul = cpu.matmul_2d


def _fast_relu(a: Any) -> Any:
    if a.dtype.kind in "fi" and a.dtype.itemsize >= 4:
        return cpu.relu(a)
    return None


def _fast_sigmoid(a: Any) -> Any:
    if a.dtype.kind == "f" and a.dtype.itemsize >= 4:
        return cpu.sigmoid(a)
    return None


def _fast_softmax(a: Any) -> Any:
    if a.dtype.kind == "f" and a.dtype.itemsize >= 4 and a.ndim >= 1:
        return softmax(a, -1)
    return None


# -- registration ------------------------------------------------------------------------------

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "tfrt_test.subtract": np.subtract,
    "tfrt_test.multiply": np.multiply,
    "tfrt_test.maximum": np.maximum,
    "tfrt_test.minimum": np.minimum,
}

# TFRT's unary test ops: their math is the elementwise op's (pytfrt.backends.cpu.op_math)
_FLOAT_UNARY: dict[str, Callable[[Any], Any]] = {
    f"tfrt_test.{n}": MATH[n].compute for n in ("exp", "log", "tanh", "sqrt", "sigmoid")}

_UNARY: dict[str, Callable[[Any], Any]] = {
    f"tfrt_test.{n}": MATH[n].compute for n in ("neg", "abs", "square")}


def _binary_dispatch(fn: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def dispatch(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
        return _arr(fn(args[0], args[1]))

    return dispatch


def _unary_dispatch(fn: Callable[[Any], Any]) -> Callable[..., Any]:
    def dispatch(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
        return _arr(fn(args[0]))

    return dispatch


def _divide(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    a, b = args
    if a.dtype.kind in "iu":
        if np.any(b == 0):
            raise OpError("divide: integer division by zero")
        return _arr(np.floor_divide(a, b))
    return _arr(np.divide(a, b))


def _equal(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    a, b = args
    return _arr((a == b).astype(a.dtype))


def _relu(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    return cpu.relu(args[0])


def _matmul(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    a, b = args
    out = gemm_matmul(
        a, b, transpose_a=bool(attrs.get("transpose_a", False)),
        transpose_b=bool(attrs.get("transpose_b", False)),
    )
    return out.astype(a.dtype, copy=False)  # f16/bf16 are computed wider


def _softmax(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    axis = int(attrs.get("axis", -1))
    return _via_f32(lambda x: softmax(x, axis), args[0])


def _reduce(name: str) -> Callable[..., Any]:
    """The dispatch of ``tfrt_test.<name>``: the graph op's compute function (one reduction
    for eager and compiled code: its dtypes, accumulation and errors)."""
    fn = ARRAY_OPS[name]

    def dispatch(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
        a = args[0]
        return fn(a, axes=_axes(attrs, a.ndim, name) or (), keepdims=bool(
            attrs.get("keepdims", False)))

    return dispatch


def _argmax(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    a = args[0]
    axis = int(attrs.get("axis", 0))
    return _arr(np.argmax(a, axis=axis)).astype(np.int32)


def _argmax_metadata(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    if attrs.get("axis") is None:
        raise OpError("argmax requires an 'axis' attribute")
    return reduce_metadata("argmax", result_dtype=I32, single_axis=True)(args, attrs)


def _cast(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    target = cast_target(attrs)
    return _arr(args[0].astype(target.np_dtype))


def register(ops: OpRegistry) -> None:
    """Add the math ops to ``ops``."""
    pure = OpFlags.NO_SIDE_EFFECTS
    ops.add(OpRecord("tfrt_test.add", _add_dispatch, binary_metadata("tfrt_test.add"),
                     pure | OpFlags.ALLOW_SCALAR, fast=_fast_binary(np.add),
                     doc="elementwise a + b (dense or scalar)"))
    for name, fn in _BINARY.items():
        ops.add(OpRecord(name, _binary_dispatch(fn), binary_metadata(name), pure,
                         fast=_fast_binary(fn)))
    ops.add(OpRecord("tfrt_test.divide", _divide, binary_metadata("tfrt_test.divide"), pure))
    ops.add(OpRecord("tfrt_test.equal", _equal, binary_metadata("tfrt_test.equal"), pure,
                     doc="1 where equal else 0, in the arguments' dtype"))
    ops.add(OpRecord("tfrt_test.matmul", _matmul, matmul_metadata, pure, fast=_fast_matmul))
    ops.add(OpRecord("tfrt_test.relu", _relu, unary_metadata("tfrt_test.relu"), pure,
                     fast=_fast_relu))
    for name, ufn in _FLOAT_UNARY.items():
        fast = (_fast_sigmoid if name == "tfrt_test.sigmoid"
                else _fast_float_unary(getattr(ufn, "ufunc", ufn)))
        ops.add(OpRecord(name, _unary_dispatch(ufn),
                         unary_metadata(name, float_only=True), pure, fast=fast))
    for name, ufn in _UNARY.items():
        ops.add(OpRecord(name, _unary_dispatch(ufn), unary_metadata(name), pure))
    ops.add(OpRecord("tfrt_test.softmax", _softmax, _softmax_metadata, pure,
                     fast=_fast_softmax))
    ops.add(OpRecord("tfrt_test.reduce_mean", _reduce("reduce_mean"),
                     reduce_metadata("tfrt_test.reduce_mean"), pure))
    ops.add(OpRecord("tfrt_test.reduce_sum", _reduce("reduce_sum"),
                     reduce_metadata("tfrt_test.reduce_sum"), pure))
    ops.add(OpRecord("tfrt_test.reduce_max", _reduce("reduce_max"),
                     reduce_metadata("tfrt_test.reduce_max"), pure))
    ops.add(OpRecord("tfrt_test.reduce_min", _reduce("reduce_min"),
                     reduce_metadata("tfrt_test.reduce_min"), pure))
    ops.add(OpRecord("tfrt_test.argmax", _argmax, _argmax_metadata, pure))
    ops.add(OpRecord("tfrt_test.cast", _cast, cast_metadata, pure))


__all__ = ["F32", "register", "sigmoid", "softmax"]
