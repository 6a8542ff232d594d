"""The ``corert.*`` BEF kernels and the core-runtime test kernels (docs/eager.md).

Registered by :func:`register` (the kernel registry loads this module lazily for names starting
with ``corert.`` and ``tfrt_test.``).  Op handlers live in the HostContext's
:class:`~.core_runtime.CoreRuntime`, so registrations made by one BEF function (e.g. the
``--test_init_function``) are seen by later ones.

Result timing of ``corert.executeop`` (docs/eager.md): each result register is made available only
when the tensor inside the handle exists; an error tensor makes the register that error, with no
further diagnostic.  Metadata and dispatch errors are emitted at the kernel's location.

Attributes: kernels that build OpAttrs or tensors from attributes take a ``TypedAttr`` parameter,
so the executor passes the attribute objects (OpAttrs keep MLIR types: ``i32`` vs ``i64``); they
also accept plain values, typing them by inference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.core_runtime import kernels_control
from pytfrt.core_runtime.core_runtime import CoreRuntime, handle_from_av
from pytfrt.core_runtime.host_tensors import as_dht, format_tensor, metadata_of
from pytfrt.core_runtime.kernel_attrs import (
    attrs_from_pairs,
    dense_attr_to_array,
    op_name_and_attrs,
    plain,
    typed_entry,
)
from pytfrt.core_runtime.op_attrs import (
    OpAttrs,
    OpAttrsRef,
    OpAttrType,
)
from pytfrt.core_runtime.op_handler import LoggingOpHandler, NullOpHandler, OpHandler
from pytfrt.core_runtime.op_registry import OpError
from pytfrt.core_runtime.tensor_handle import TensorHandle
from pytfrt.host.async_value import AsyncValue, Chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.registry import (
    KernelError,
    KernelFrame,
    KernelRegistry,
    RemainingAttrs,
    TypedAttr,
    kernel,
)
from pytfrt.support.attributes import DenseAttr
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import STRING, dtype_from_name
from pytfrt.tensor.string_host_tensor import StringHostTensor


def _runtime(exec_ctx: ExecutionContext) -> CoreRuntime:
    return CoreRuntime.of(exec_ctx.host)


# -- op handlers ---------------------------------------------------------------------------------


@kernel("corert.create_null_op_handler")
def create_null_op_handler() -> OpHandler:
    """A handler that supports no op."""
    return NullOpHandler()


@kernel("corert.create_cpu_op_handler")
def create_cpu_op_handler(fallback: OpHandler, exec_ctx: ExecutionContext) -> OpHandler:
    """A CPU handler over the built-in ops, falling back to ``fallback``."""
    return _runtime(exec_ctx).create_cpu_op_handler(fallback)


@kernel("corert.create_logging_op_handler")
def create_logging_op_handler(inner: OpHandler, attrs: RemainingAttrs) -> OpHandler:
    """A logging handler around ``inner`` (``sync_log_results`` non-zero: log results too)."""
    sync = bool(plain(attrs[0])) if attrs else False
    return LoggingOpHandler(inner, sync_log_results=sync)


@kernel("corert.register_op_handler")
def register_op_handler(
    handler: OpHandler, attrs: RemainingAttrs, exec_ctx: ExecutionContext
) -> Chain:
    """Register ``handler`` under the name attribute (for the whole host)."""
    _runtime(exec_ctx).register_op_handler(str(plain(attrs[0])), handler)
    return Chain()


@kernel("corert.get_op_handler")
def get_op_handler(attrs: RemainingAttrs, exec_ctx: ExecutionContext) -> OpHandler:
    """The handler registered under the name attribute (``op_handler not found: <name>``)."""
    return _runtime(exec_ctx).get_op_handler(str(plain(attrs[0])))


# -- executing ops -------------------------------------------------------------------------------


def _publish(av: AsyncValue[Any], handle: TensorHandle) -> None:
    """Make ``av`` the handle once its tensor exists, or the tensor's error."""

    def done() -> None:
        err = handle.error
        if err is not None:
            av.set_error(err)
        else:
            av.emplace(handle)

    handle.and_then(done)


def _execute(
    frame: KernelFrame,
    op: Callable[..., Any],
    args: Sequence[Any],
    attrs: OpAttrsRef,
    num_results: int,
    chain: AsyncValue[Any] | None,
    first_result: int,
) -> AsyncValue[Any] | None:
    ctx = frame.exec_ctx.with_location(frame.location)
    handles = [a if isinstance(a, TensorHandle) else _as_handle(a) for a in args]
    try:
        results, out_chain = op(ctx, handles, attrs, num_results, chain, True)
    except OpError as exc:
        frame.report_error(str(exc))
        return None
    for i, h in enumerate(results):
        _publish(frame.allocate_result(first_result + i), h)
    return out_chain


def _as_handle(value: Any) -> TensorHandle:
    """Accept a host tensor where a TensorHandle is expected (kernels mixing both worlds)."""
    if isinstance(value, AsyncValue):
        return handle_from_av(value)
    return TensorHandle.from_tensor(value)


@kernel("corert.executeop")
def executeop(
    frame: KernelFrame, first: TypedAttr, rest: RemainingAttrs, handler: OpHandler, *args: Any
) -> None:
    """``%r = corert.executeop(%h) "op"(%a, ...) {attrs} : N``."""
    op_name, op_attrs = op_name_and_attrs([first, *rest])
    op = handler.make_op(op_name)
    _execute(frame, op, args, op_attrs, frame.num_results, None, 0)


@kernel("corert_sync.get_op_handler", sync=True)
def sync_get_op_handler(attrs: RemainingAttrs, exec_ctx: ExecutionContext) -> OpHandler:
    """``%h = corert_sync.get_op_handler "cpu"`` in a sync function."""
    return _runtime(exec_ctx).get_op_handler(str(plain(attrs[0])))


@kernel("corert_sync.executeop", sync=True)
def sync_executeop(
    first: TypedAttr, rest: RemainingAttrs, handler: OpHandler, exec_ctx: ExecutionContext,
    *args: Any,
) -> Any:
    """``%r = corert_sync.executeop(%h) "op"(%a) : N``: run the op and wait for its tensors.

    The number of results is the op's own (a sync kernel has no result slots to count).
    """
    op_name, op_attrs = op_name_and_attrs([first, *rest])
    op = handler.make_op(op_name)
    record = getattr(op, "record", None)
    n = record.num_results if record is not None else 1
    handles = [a if isinstance(a, TensorHandle) else _as_handle(a) for a in args]
    results, _ = op(exec_ctx, handles, op_attrs, n, None, True)
    pending = [h.tensor_av for h in results if not h.is_available()]
    if pending:
        exec_ctx.host.await_values(pending)
    for h in results:
        if h.error is not None:
            raise OpError(h.error.message)
    if not results:
        return None
    return results[0] if len(results) == 1 else tuple(results)


@kernel("corert_sync.print_tensorhandle", sync=True)
def sync_print_tensorhandle(handle: TensorHandle) -> None:
    """Print the handle to stdout (a sync function's print)."""
    print_tensorhandle(handle)


@kernel("corert.executeop.seq")
def executeop_seq(
    frame: KernelFrame,
    first: TypedAttr,
    rest: RemainingAttrs,
    handler: OpHandler,
    chain: AsyncValue[Any],
    *args: Any,
) -> None:
    """``%ch1, %r = corert.executeop.seq(%h, %ch0) "op"(%a) : N`` (op chain in and out)."""
    op_name, op_attrs = op_name_and_attrs([first, *rest])
    op = handler.make_op(op_name)
    out_chain = _execute(frame, op, args, op_attrs, frame.num_results - 1, chain, 1)
    if frame.results[0] is None:
        out = out_chain if out_chain is not None else chain
        # A result holds its own reference: forwarding the argument chain takes one more.
        frame.set_result(0, out.add_ref() if out is chain else out)


@kernel("corert.make_composite_op")
def make_composite_op(fn: Function, exec_ctx: ExecutionContext) -> Any:
    """An op running ``fn`` (``(chain, th...) -> (chain, th...)``)."""
    return _runtime(exec_ctx).make_composite_op(fn)


@kernel("corert.execute_crt_op")
def execute_crt_op(
    frame: KernelFrame, first: TypedAttr, rest: RemainingAttrs, op: Any, *args: Any
) -> None:
    """``%r = "corert.execute_crt_op"(%op, %h...) {op_attrs = [], op_func_attrs = []}``."""
    attrs = [first, *rest]
    op_attrs = attrs_from_pairs(attrs[0] if attrs else (), attrs[1] if len(attrs) > 1 else ())
    _execute(frame, op, args, op_attrs, frame.num_results, None, 0)


# -- tensor handles ------------------------------------------------------------------------------


@kernel("corert.print_tensorhandle")
def print_tensorhandle(handle: TensorHandle) -> Chain:
    """Print the handle (docs/conformance.md) to stdout and flush."""
    import sys

    sys.stdout.write(handle.format() + "\n")
    sys.stdout.flush()
    return Chain()


def _wait_tensor(handle: TensorHandle, fn: Callable[[Any], Any]) -> AsyncValue[Any]:
    """An AV with ``fn(tensor)`` once the handle's tensor exists (or its error)."""
    out: AsyncValue[Any] = AsyncValue()

    def done() -> None:
        err = handle.error
        if err is not None:
            out.set_error(err)
            return
        try:
            out.emplace(fn(handle.get_tensor()))
        except Exception as exc:  # noqa: BLE001 - becomes the result's error
            out.set_error(str(exc))

    handle.and_then(done)
    return out


@kernel("corert.tensorhandle_to_shape")
def tensorhandle_to_shape(handle: TensorHandle) -> Any:
    """The tensor's shape (``!ts.shape``)."""
    return _wait_tensor(handle, lambda t: metadata_of(t).shape)


@kernel("corert.tensorhandle_to_ht")
def tensorhandle_to_ht(handle: TensorHandle) -> Any:
    """The host tensor inside the handle (a DenseHostTensor for dense tensors)."""
    return _wait_tensor(handle, as_dht)


def _to_int32(tensor: Any) -> int:
    if not isinstance(tensor, np.ndarray) or tensor.dtype != np.int32:
        raise OpError("Expecting a DenseHostTensor of int32 as branch index.")
    if tensor.size != 1:
        raise OpError("The tensor should have only one element, which is the index.")
    return int(tensor.reshape(-1)[0])


@kernel("corert.tensorhandle_to_int32")
def tensorhandle_to_int32(frame: KernelFrame, handle: TensorHandle) -> None:
    """The single i32 element of the handle's tensor (a ``tfrt.case`` index)."""
    out = frame.allocate_result(0)

    def done() -> None:
        err = handle.error
        if err is not None:
            out.set_error(err)
            return
        try:
            value = _to_int32(handle.get_tensor())
        except OpError as exc:
            frame.report_error(str(exc))
            return
        out.emplace(value)

    handle.and_then(done)


# -- constant tensors ----------------------------------------------------------------------------


@kernel("corert.const_dense_tensor")
def const_dense_tensor(value: TypedAttr) -> TensorHandle:
    """A handle of the ``dense<...>`` attribute's tensor."""
    return TensorHandle.from_tensor(dense_attr_to_array(plain(value)))


def _dense_attr_dht(value: Any) -> DenseHostTensor:
    dense = plain(value)
    if not isinstance(dense, DenseAttr):
        raise KernelError(f"expected a dense<...> attribute, got {type(dense).__name__}")
    return DenseHostTensor(dtype_from_name(dense.dtype), dense_attr_to_array(dense))


@kernel("tfrt_test.const_dense_attr")
def const_dense_attr(value: TypedAttr) -> DenseHostTensor:
    """A fresh ``DenseHostTensor`` of the ``dense<...>`` attribute (a splat fills every element),
    as TFRT's ``tensor/mlir_tests/dense_host_tensor.mlir`` uses it."""
    return _dense_attr_dht(value)


@kernel("tfrt_test.sync.const_dense_attr", sync=True)
def sync_const_dense_attr(value: TypedAttr) -> DenseHostTensor:
    """Sync twin of ``tfrt_test.const_dense_attr``."""
    return _dense_attr_dht(value)


@kernel("corert.const_string_tensor")
def const_string_tensor(first: TypedAttr, rest: RemainingAttrs) -> TensorHandle:
    """``{shape = [2], value = ["a", "b"]}``; one value is broadcast to every element."""
    attrs = [first, *rest]
    values = dict(zip(("shape", "value"), (plain(a) for a in attrs), strict=False))
    dims = tuple(int(d) for d in values.get("shape", ()))
    strings = values.get("value", ())
    strings = (strings,) if isinstance(strings, str) else tuple(strings)
    n = int(np.prod(dims, dtype=np.int64))
    if len(strings) == 1 and n != 1:
        strings = strings * n
    return TensorHandle.from_tensor(StringHostTensor.create(dims, list(strings)))


def _create_dense(dtype_name: str) -> Callable[..., TensorHandle]:
    dtype = dtype_from_name(dtype_name)

    def create(first: TypedAttr, rest: RemainingAttrs) -> TensorHandle:
        attrs = [first, *rest]
        values = dict(zip(("shape", "value"), (plain(a) for a in attrs), strict=False))
        dims = tuple(int(d) for d in values.get("shape", ()))
        flat = values.get("value", ())
        flat = flat if isinstance(flat, tuple) else (flat,)
        n = int(np.prod(dims, dtype=np.int64))
        if len(flat) != n:
            raise OpError(
                f"create_dense_tensor: {len(flat)} values given for a tensor of {n} elements"
            )
        array = np.asarray(flat, dtype=dtype.np_dtype).reshape(dims)
        return TensorHandle.from_tensor(array)

    create.__name__ = f"create_dense_tensor_{dtype_name}"
    return create


CREATE_DENSE_TYPES = (
    "ui8", "ui16", "ui32", "ui64", "i1", "i8", "i16", "i32", "i64",
    "bf16", "f16", "f32", "f64", "complex64", "complex128",
)  # fmt: skip


# -- op attrs ------------------------------------------------------------------------------------


@kernel("corert.create_op_attrs")
def create_op_attrs() -> OpAttrs:
    """A new empty, mutable OpAttrs."""
    return OpAttrs()


def _op_attrs_setter(kind: str, array: bool) -> Callable[..., Chain]:
    def setter(op_attrs: OpAttrs, key_attr: TypedAttr, value_attr: TypedAttr) -> Chain:
        key = str(plain(key_attr))
        attr_type, is_array, value = typed_entry(value_attr, kind)
        op_attrs.set(key, value, attr_type, is_array or array)
        return Chain()

    setter.__name__ = f"op_attrs_set_{'array_' if array else ''}{kind}"
    return setter


SET_KINDS = ("bool", "i32", "i64", "f32", "dtype", "dense", "aggregate", "shape", "str")
SET_ARRAY_KINDS = ("i32", "i64", "f32")


@kernel("tfrt_test.corert.op_attrs_print")
def op_attrs_print(op_attrs: OpAttrsRef) -> Chain:
    """Print the OpAttrs (docs/eager.md) to stdout."""
    import sys

    sys.stdout.write(op_attrs.format())
    sys.stdout.flush()
    return Chain()


@kernel("tfrt_test.corert.op_attrs_freeze")
def op_attrs_freeze(op_attrs: OpAttrsRef) -> tuple[OpAttrsRef, Chain]:
    """The frozen (immutable) copy, and a chain."""
    return op_attrs.freeze(), Chain()


@kernel("tfrt_test.corert.op_attrs_ref_print")
def op_attrs_ref_print(op_attrs: OpAttrsRef) -> Chain:
    """Print a frozen OpAttrs."""
    return op_attrs_print(op_attrs)


@kernel("tfrt_test.error_tensorhandle")
def error_tensorhandle(frame: KernelFrame) -> TensorHandle:
    """An available TensorHandle whose tensor is an error; emits ``invalid tensorhandle`` at the
    kernel's location (as TFRT's test kernel does)."""
    return TensorHandle.from_error(frame.emit_error("invalid tensorhandle").error)


def register(registry: KernelRegistry) -> None:
    """Register every ``corert.*`` kernel and the core-runtime test kernels."""
    registry.add(
        create_null_op_handler, create_cpu_op_handler, create_logging_op_handler,
        register_op_handler, get_op_handler, executeop, executeop_seq, make_composite_op,
        execute_crt_op, print_tensorhandle, tensorhandle_to_shape, tensorhandle_to_ht,
        tensorhandle_to_int32, const_dense_tensor, const_string_tensor, create_op_attrs,
        sync_get_op_handler, sync_executeop, sync_print_tensorhandle,
        op_attrs_print, op_attrs_freeze, op_attrs_ref_print, error_tensorhandle,
        const_dense_attr, sync_const_dense_attr,
    )
    for t in CREATE_DENSE_TYPES:
        registry.add_kernel(f"corert.create_dense_tensor.{t}", _create_dense(t))
    for k in SET_KINDS:
        registry.add_kernel(f"corert.op_attrs_set.{k}", _op_attrs_setter(k, False))
    for k in SET_ARRAY_KINDS:
        registry.add_kernel(f"corert.op_attrs_set_array.{k}", _op_attrs_setter(k, True))
    kernels_control.register(registry)


__all__ = ["STRING", "OpAttrType", "format_tensor", "register"]
