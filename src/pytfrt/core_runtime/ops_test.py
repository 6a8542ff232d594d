"""Core-runtime CPU test ops (docs/eager.md): tensor creation, async copies, printing, errors.

``tfrt_test.create_dense_tensor`` ``{shape, values}`` (one value = splat),
``tfrt_test.create_from_scalar`` ``{shape, value}`` (a ScalarHostTensor),
``tfrt_test.async.noop`` / ``async.noop_no_md`` (copy completed by a queued task; the second
without a metadata function), ``tfrt_test.print`` (side-effecting, chain ordered),
``tfrt_test.error.tensor`` (metadata fine, tensor error), ``tfrt_test.odd_collector`` (the odd
elements of a 1-D i32 tensor: data-dependent shape, so no metadata function).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytfrt.core_runtime.host_tensors import format_tensor, make_metadata, metadata_of
from pytfrt.core_runtime.op_attrs import OpAttrsRef, OpAttrType
from pytfrt.core_runtime.op_registry import OpError, OpFlags, OpRecord, OpRegistry
from pytfrt.tensor.dtype import DType, dtype_from_name
from pytfrt.tensor.scalar_host_tensor import ScalarHostTensor
from pytfrt.tensor.shape import TensorMetadata, format_dims


def _attr_dtype(attrs: OpAttrsRef, name: str, op: str) -> DType:
    """The dtype of attribute ``name``'s values (from its OpAttrs type)."""
    try:
        attr_type, _, _ = attrs.entry(name)
    except KeyError:
        raise OpError(f"{op} requires a '{name}' attribute") from None
    if attr_type in (OpAttrType.CHAR, OpAttrType.DTYPE, OpAttrType.DENSE, OpAttrType.AGGREGATE,
                     OpAttrType.SHAPE, OpAttrType.FUNC):
        raise OpError(f"{op} attribute '{name}' must hold numbers")
    return dtype_from_name(attr_type.value)


def _shape_attr(attrs: OpAttrsRef, op: str) -> tuple[int, ...]:
    shape = attrs.get("shape")
    if shape is None:
        raise OpError(f"{op} requires a 'shape' attribute")
    dims = tuple(int(d) for d in (shape if isinstance(shape, tuple) else (shape,)))
    if any(d < 0 for d in dims):
        raise OpError(f"{op} shape {format_dims(dims)} has a negative dimension")
    return dims


def _create_dense_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    op = "create_dense_tensor"
    if args:
        raise OpError(f"{op} takes no arguments")
    dims = _shape_attr(attrs, op)
    dtype = _attr_dtype(attrs, "values", op)
    values = attrs["values"]
    count = len(values) if isinstance(values, tuple) else 1
    n = int(np.prod(dims, dtype=np.int64))
    if count not in (1, n):
        raise OpError(
            f"{op}: {count} values do not fill the shape {format_dims(dims)} ({n} elements)"
        )
    return make_metadata(dtype, dims)


def _create_dense(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    md = _create_dense_md([], attrs)
    values = attrs["values"]
    flat = np.asarray(values if isinstance(values, tuple) else (values,), md.dtype.np_dtype)
    if flat.size == 1:
        return np.full(md.shape.dims, flat[0], md.dtype.np_dtype)
    return flat.reshape(md.shape.dims)


def _create_scalar_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    op = "create_from_scalar"
    if args:
        raise OpError(f"{op} takes no arguments")
    return make_metadata(_attr_dtype(attrs, "value", op), _shape_attr(attrs, op))


def _create_scalar(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    md = _create_scalar_md([], attrs)
    return ScalarHostTensor(md.dtype, md.shape.dims, attrs["value"])


def _identity_md(args: Sequence[TensorMetadata], attrs: OpAttrsRef) -> TensorMetadata:
    if len(args) != 1:
        raise OpError(f"the op takes 1 argument, got {len(args)}")
    return args[0]


def _copy_tensor(tensor: Any) -> Any:
    if isinstance(tensor, np.ndarray):
        return tensor.copy()
    return copy.copy(tensor)


def _async_noop(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    """Copy the argument in a task on the work queue (result unavailable until it runs)."""
    if len(args) != 1:
        raise OpError(f"async.noop takes 1 argument, got {len(args)}")
    tensor = args[0]
    if ctx is None:
        return _copy_tensor(tensor)
    return ctx.host.enqueue_work(lambda: _copy_tensor(tensor))


def _print(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    """Print each argument tensor (TFRT print format) to stdout."""
    for tensor in args:
        sys.stdout.write(format_tensor(tensor) + "\n")
        sys.stdout.flush()
    return ()


def _error_tensor(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    raise OpError("error from test.error.tensor implementation")


def _odd_collector(args: list[Any], attrs: OpAttrsRef, ctx: Any) -> Any:
    if len(args) != 1:
        raise OpError(f"odd_collector takes 1 argument, got {len(args)}")
    a = args[0]
    md = metadata_of(a)
    if md.shape.rank != 1:
        raise OpError("expected a 1D tensor input")
    if md.dtype.name != "i32":
        raise OpError("expected a i32 element type")
    return a[a % 2 == 1].copy()


def register(ops: OpRegistry) -> None:
    """Add the test ops to ``ops``."""
    pure = OpFlags.NO_SIDE_EFFECTS
    anyt = OpFlags.ANY_TENSOR
    ops.add(OpRecord("tfrt_test.create_dense_tensor", _create_dense, _create_dense_md, pure))
    ops.add(OpRecord("tfrt_test.create_from_scalar", _create_scalar, _create_scalar_md, pure))
    ops.add(OpRecord("tfrt_test.async.noop", _async_noop, _identity_md, pure | anyt))
    ops.add(OpRecord("tfrt_test.async.noop_no_md", _async_noop, None, pure | anyt))
    ops.add(OpRecord("tfrt_test.print", _print, None, OpFlags.ANY_TENSOR, num_results=0))
    ops.add(OpRecord("tfrt_test.error.tensor", _error_tensor, _identity_md, pure | anyt))
    ops.add(OpRecord("tfrt_test.odd_collector", _odd_collector, None, pure))


__all__ = ["DType", "register"]
