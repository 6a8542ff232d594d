"""CoreRuntime: the op-by-op runtime on a HostContext (docs/eager.md).

A :class:`CoreRuntime` wraps one HostContext and owns the named op handlers registered on it
(``register_op_handler`` / ``get_op_handler``; registrations last as long as the host, so the
``corert.*`` kernels of different BEF functions see each other's handlers).  Get the instance of
a host with :meth:`CoreRuntime.of` (a HostContext shared context) or build one directly.

``execute(op_name, handler, args, attrs)`` makes the op on the handler and dispatches it
(metadata errors raise :class:`~.op_registry.OpError`; see :mod:`.op_handler` for the whole
call contract); :meth:`make_op` returns the callable op for repeated use, and
:meth:`make_composite_op` turns a BEF function ``(chain, th...) -> (chain, th...)`` into an op.

Thread-safety: handler registration takes a lock; everything else is safe to call from any
thread.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pytfrt.core_runtime.cpu_op_handler import CpuOpHandler
from pytfrt.core_runtime.op_attrs import EMPTY_ATTRS, OpAttrsRef, attrs_from_dict
from pytfrt.core_runtime.op_handler import (
    CoreRuntimeOp,
    NullOpHandler,
    OpHandler,
    OpResult,
)
from pytfrt.core_runtime.tensor_handle import TensorHandle
from pytfrt.host.async_value import AsyncValue, make_available, make_ready_chain
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.host_context import HostContext
from pytfrt.support.errors import PytfrtError


class OpHandlerNotFoundError(PytfrtError):
    """``get_op_handler`` of a name nobody registered."""


class CoreRuntime:
    """Named op handlers plus op execution on one HostContext.

    Args:
        host: the HostContext ops run on (work queue, diagnostics, allocator).
    """

    def __init__(self, host: HostContext) -> None:
        self.host = host
        self._lock = threading.Lock()
        self._handlers: dict[str, OpHandler] = {}

    @staticmethod
    def of(host: HostContext) -> CoreRuntime:
        """The CoreRuntime of ``host`` (created on first use, one per host)."""
        return host.get_or_create_shared_context(CoreRuntime)

    # -- op handlers ----------------------------------------------------------------------

    def register_op_handler(self, name: str, handler: OpHandler) -> None:
        """Register ``handler`` under ``name`` (a later registration replaces an earlier one)."""
        with self._lock:
            self._handlers[name] = handler

    def get_op_handler(self, name: str) -> OpHandler:
        """The handler registered as ``name``.

        Raises:
            OpHandlerNotFoundError: ``op_handler not found: <name>``.
        """
        handler = self._handlers.get(name)
        if handler is None:
            raise OpHandlerNotFoundError(f"op_handler not found: {name}")
        return handler

    def handler_names(self) -> list[str]:
        """Registered handler names, sorted."""
        with self._lock:
            return sorted(self._handlers)

    def create_cpu_op_handler(self, fallback: OpHandler | None = None) -> CpuOpHandler:
        """A CPU handler over the built-in ops, falling back to ``fallback`` (null if omitted)."""
        return CpuOpHandler(fallback=fallback if fallback is not None else NullOpHandler())

    # -- ops ------------------------------------------------------------------------------

    def make_op(self, op_name: str, handler: OpHandler | str) -> CoreRuntimeOp:
        """The op ``op_name`` on ``handler`` (an object or a registered name).

        Raises:
            OpNotSupportedError: if the handler chain does not support the op.
            OpHandlerNotFoundError: for an unknown handler name.
        """
        if isinstance(handler, str):
            handler = self.get_op_handler(handler)
        return handler.make_op(op_name)

    def make_composite_op(self, fn: Function) -> CoreRuntimeOp:
        """An op that runs ``fn``: ``(chain, th...) -> (chain, th...)``."""
        return CompositeOp(fn)

    def execute(
        self,
        op_name: str,
        handler: OpHandler | str,
        args: Sequence[TensorHandle],
        attrs: OpAttrsRef | Mapping[str, Any] | None = None,
        num_results: int = 1,
        exec_ctx: ExecutionContext | None = None,
        chain: AsyncValue[Any] | None = None,
    ) -> list[TensorHandle]:
        """Run ``op_name`` on ``handler`` and return its result handles (maybe future).

        ``attrs`` may be an OpAttrs map or a dict of plain values (typed by
        :func:`~.op_attrs.infer_entry`).

        Raises:
            OpError: metadata errors and unsupported ops (synchronously).
        """
        if attrs is None:
            frozen = EMPTY_ATTRS
        elif isinstance(attrs, OpAttrsRef):
            frozen = attrs.freeze()
        else:
            frozen = attrs_from_dict(attrs)
        op = self.make_op(op_name, handler)
        ctx = exec_ctx if exec_ctx is not None else self.host.new_execution_context()
        results, _ = op(ctx, args, frozen, num_results, chain)
        return results

    def await_handles(self, handles: Sequence[TensorHandle]) -> None:
        """Block until every handle's tensor is available (drives the host's queue)."""
        pending = [h.tensor_av for h in handles if not h.is_available()]
        if pending:
            self.host.await_values(pending)


def handle_from_av(av: AsyncValue[Any]) -> TensorHandle:
    """A TensorHandle for an AsyncValue whose payload is a TensorHandle (BEF registers).

    Available concrete -> the handle itself; otherwise a handle whose tensor resolves when the
    inner handle's tensor does (or becomes the error).
    """
    if av.is_concrete():
        return av.get()  # type: ignore[no-any-return]
    tensor: AsyncValue[Any] = AsyncValue()

    def on_handle() -> None:
        if av.is_error():
            tensor.set_error(av.error)
            return
        inner: TensorHandle = av.get()

        def on_tensor() -> None:
            err = inner.error
            if err is not None:
                tensor.set_error(err)
            else:
                tensor.emplace(inner.get_tensor())

        inner.and_then(on_tensor)

    av.and_then(on_handle)
    return TensorHandle(None, tensor)


class CompositeOp(CoreRuntimeOp):
    """A BEF function used as an op (``corert.make_composite_op``)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Function) -> None:
        super().__init__(fn.name or "<composite>", None)
        self.fn = fn

    def __call__(
        self,
        exec_ctx: ExecutionContext | None,
        args: Sequence[TensorHandle],
        attrs: OpAttrsRef = EMPTY_ATTRS,
        num_results: int = 1,
        chain: AsyncValue[Any] | None = None,
        emit_errors: bool = False,
    ) -> OpResult:
        if exec_ctx is None:
            raise PytfrtError("a composite op needs an execution context")
        in_chain = chain if chain is not None else make_ready_chain()
        outs = self.fn.execute(exec_ctx, [in_chain] + [make_available(h) for h in args])
        if len(outs) != num_results + 1:
            raise PytfrtError(
                f"composite op '{self.name}' returns {len(outs) - 1} tensor handles, "
                f"{num_results} expected"
            )
        return [handle_from_av(av) for av in outs[1:]], outs[0]
