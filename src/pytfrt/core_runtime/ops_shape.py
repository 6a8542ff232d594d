"""CPU shape ops (``tfrt_test.reshape``, ``transpose``, ``expand_dims``, ``squeeze``,
``concat``, ``broadcast_to``, ``shape``): metadata functions and NumPy dispatch.

Shape ops return views where NumPy can (zero-copy), like TFRT's reshape of a DenseHostTensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pytfrt.core_runtime.host_tensors import make_metadata
from pytfrt.core_runtime.op_attrs import OpAttrsRef
from pytfrt.core_runtime.op_registry import OpError, OpFlags, OpRecord, OpRegistry
from pytfrt.tensor.dtype import I64
from pytfrt.tensor.shape import TensorMetadata, format_dims


def _one(args: Sequence[TensorMetadata], op: str) -> TensorMetadata:
    if len(args) != 1:
        raise OpError(f"{op} takes 1 argument, got {len(args)}")
    return args[0]


def _num_elements(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def reshape_dims(dims: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    """Resolve a reshape target (one ``-1`` allowed) against input ``dims``.

    Raises:
        OpError: for a target that does not hold the input's element count.
    """
    n = _num_elements(dims)
    target = tuple(int(d) for d in target)
    unknown = [i for i, d in enumerate(target) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in target):
        raise OpError(f"reshape target {format_dims(target)} is invalid")
    if unknown:
        known = _num_elements([d for d in target if d != -1])
        if known == 0 or n % known:
            raise OpError(
                f"reshape cannot reshape a tensor of shape {format_dims(dims)} into "
                f"{format_dims(target)}"
            )
        target = tuple(n // known if d == -1 else d for d in target)
    if _num_elements(target) != n:
        raise OpError(
            f"reshape cannot reshape a tensor of shape {format_dims(dims)} ({n} elements) "
            f"into {format_dims(target)}"
        )
    return target


def _reshape_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    a = _one(args, "reshape")
    target = attrs.get("shape")
    if target is None:
        raise OpError("reshape requires a 'shape' attribute")
    return make_metadata(a.dtype, reshape_dims(a.shape.dims, target))


def _reshape(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    return args[0].reshape(reshape_dims(args[0].shape, attrs["shape"]))


def _perm(attrs: OpAttrsRef, rank: int) -> tuple[int, ...]:
    perm = attrs.get("perm")
    if perm is None:
        return tuple(range(rank - 1, -1, -1))
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(rank)):
        raise OpError(f"transpose permutation {list(perm)} is invalid for a rank-{rank} tensor")
    return perm


def _transpose_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    a = _one(args, "transpose")
    dims = a.shape.dims
    perm = _perm(attrs, len(dims))
    return make_metadata(a.dtype, tuple(dims[p] for p in perm))


def _transpose(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    return np.transpose(args[0], _perm(attrs, args[0].ndim))


def _expand_axis(attrs: OpAttrsRef, rank: int) -> int:
    axis = int(attrs.get("axis", 0))
    if not -rank - 1 <= axis <= rank:
        raise OpError(f"expand_dims axis {axis} is out of range for a rank-{rank} tensor")
    return axis % (rank + 1)


def _expand_dims_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    a = _one(args, "expand_dims")
    dims = list(a.shape.dims)
    dims.insert(_expand_axis(attrs, len(dims)), 1)
    return make_metadata(a.dtype, tuple(dims))


def _expand_dims(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    return np.expand_dims(args[0], _expand_axis(attrs, args[0].ndim))


def _squeeze_axes(attrs: OpAttrsRef, dims: Sequence[int]) -> tuple[int, ...]:
    axis = attrs.get("axis")
    rank = len(dims)
    if axis is None:
        return tuple(i for i, d in enumerate(dims) if d == 1)
    axes = []
    for ax in axis if isinstance(axis, tuple) else (axis,):
        if not -rank <= int(ax) < rank:
            raise OpError(f"squeeze axis {ax} is out of range for a rank-{rank} tensor")
        a = int(ax) % rank
        if dims[a] != 1:
            raise OpError(f"squeeze cannot remove axis {ax} of size {dims[a]}")
        axes.append(a)
    return tuple(sorted(set(axes)))


def _squeeze_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    a = _one(args, "squeeze")
    dims = a.shape.dims
    axes = _squeeze_axes(attrs, dims)
    return make_metadata(a.dtype, tuple(d for i, d in enumerate(dims) if i not in axes))


def _squeeze(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    return np.squeeze(args[0], _squeeze_axes(attrs, args[0].shape))


def _concat_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    if not args:
        raise OpError("concat takes at least 1 argument")
    first = args[0]
    rank = first.shape.rank
    axis = int(attrs.get("axis", 0))
    if not -rank <= axis < rank:
        raise OpError(f"concat axis {axis} is out of range for a rank-{rank} tensor")
    axis %= rank
    total = 0
    for md in args:
        if md.dtype is not first.dtype:
            raise OpError(f"concat arguments have different dtypes: {first.dtype} vs {md.dtype}")
        dims = md.shape.dims
        if len(dims) != rank or any(
            d != e for i, (d, e) in enumerate(zip(dims, first.shape.dims, strict=True))
            if i != axis
        ):
            raise OpError(
                f"concat arguments have incompatible shapes {first.shape} vs {md.shape}"
            )
        total += dims[axis]
    out = list(first.shape.dims)
    out[axis] = total
    return make_metadata(first.dtype, tuple(out))


def _concat(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    return np.concatenate(args, axis=int(attrs.get("axis", 0)))


def _broadcast_to_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    a = _one(args, "broadcast_to")
    target = tuple(int(d) for d in attrs.get("shape", ()))
    try:
        out = np.broadcast_shapes(a.shape.dims, target)
    except ValueError:
        out = None
    if out != target:
        raise OpError(f"broadcast_to cannot broadcast {a.shape} to {format_dims(target)}")
    return make_metadata(a.dtype, target)


def _broadcast_to(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    return np.ascontiguousarray(np.broadcast_to(args[0], tuple(attrs["shape"])))


def _shape_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    a = _one(args, "shape")
    return make_metadata(I64, (a.shape.rank,))


def _shape(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    return np.array(args[0].shape, dtype=np.int64)


def register(ops: OpRegistry) -> None:
    """Add the shape ops to ``ops``."""
    pure = OpFlags.NO_SIDE_EFFECTS
    ops.add(OpRecord("tfrt_test.reshape", _reshape, _reshape_md, pure))
    ops.add(OpRecord("tfrt_test.transpose", _transpose, _transpose_md, pure))
    ops.add(OpRecord("tfrt_test.expand_dims", _expand_dims, _expand_dims_md, pure))
    ops.add(OpRecord("tfrt_test.squeeze", _squeeze, _squeeze_md, pure))
    ops.add(OpRecord("tfrt_test.concat", _concat, _concat_md, pure))
    ops.add(OpRecord("tfrt_test.broadcast_to", _broadcast_to, _broadcast_to_md, pure))
    # TFRT's own name for it (its eager MNIST program uses ``tfrt_test.broadcast``).
    ops.add(OpRecord("tfrt_test.broadcast", _broadcast_to, _broadcast_to_md, pure))
    ops.add(OpRecord("tfrt_test.shape", _shape, _shape_md, pure))
