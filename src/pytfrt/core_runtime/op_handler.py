"""Op handlers: the device back ends that turn an op name into something that runs (docs/eager.md).

An :class:`OpHandler` answers :meth:`OpHandler.make_op` with a :class:`CoreRuntimeOp` (or raises
:class:`OpNotSupportedError`).  A ``CoreRuntimeOp`` is called with an execution context, the
argument TensorHandles, frozen attributes, the number of results and an optional op chain:

    results, out_chain = op(exec_ctx, args, attrs, num_results, chain)

Contract of a call (every handler implements it):

* Metadata errors (bad shapes/dtypes, unknown attributes) raise :class:`~.op_registry.OpError`
  synchronously -- nothing runs.  The caller reports them (the ``corert.executeop`` kernel emits a
  diagnostic; the eager API raises at the user's call site).
* Otherwise it returns ``num_results`` TensorHandles at once; their tensors may still be
  computing.  Runtime errors become error tensors; with ``emit_errors`` they are also emitted as
  diagnostics at ``exec_ctx.location`` (the BEF path).  Errors of arguments propagate to the
  results without running the op and are never re-emitted.
* ``out_chain`` is an AsyncValue for side-effecting ops when a chain was given, else ``None``.

Handlers here: :class:`NullOpHandler` (supports nothing), :class:`LoggingOpHandler` (logs each
dispatch to stderr, then delegates).  The CPU handler is in :mod:`.cpu_op_handler`.

Thread-safety: handlers are immutable after construction (the logging counter is locked); ops
may be called from any thread.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from pytfrt.core_runtime.op_attrs import EMPTY_ATTRS, OpAttrsRef
from pytfrt.core_runtime.op_registry import OpError
from pytfrt.core_runtime.tensor_handle import TensorHandle
from pytfrt.host.async_value import AsyncValue

if TYPE_CHECKING:
    from pytfrt.host.execution_context import ExecutionContext

OpResult = tuple[list[TensorHandle], "AsyncValue[Any] | None"]


class OpNotSupportedError(OpError):
    """No handler in the chain of fallbacks implements the op."""


class CoreRuntimeOp:
    """An op bound to the handler that runs it (TFRT's ``CoreRuntimeOp``); call it to dispatch.

    Subclasses implement :meth:`__call__` (see the module contract).
    """

    __slots__ = ("name", "handler")

    def __init__(self, name: str, handler: OpHandler | None) -> None:
        self.name = name
        self.handler = handler

    def __call__(
        self,
        exec_ctx: ExecutionContext | None,
        args: Sequence[TensorHandle],
        attrs: OpAttrsRef = EMPTY_ATTRS,
        num_results: int = 1,
        chain: AsyncValue[Any] | None = None,
        emit_errors: bool = False,
    ) -> OpResult:
        raise NotImplementedError

    def __repr__(self) -> str:
        handler = self.handler.name if self.handler is not None else "composite"
        return f"<CoreRuntimeOp '{self.name}' on {handler}>"


class OpHandler:
    """A device back end: makes ops by name (subclass and implement :meth:`make_op`)."""

    name: str = "op_handler"
    device: str = "CPU:0"

    def make_op(self, op_name: str) -> CoreRuntimeOp:
        """The op ``op_name`` on this handler (or its fallback).

        Raises:
            OpNotSupportedError: if neither this handler nor its fallbacks support the op.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} '{self.name}'>"


class NullOpHandler(OpHandler):
    """Supports no op: every :meth:`make_op` fails (the end of every fallback chain)."""

    name = "null"

    def make_op(self, op_name: str) -> CoreRuntimeOp:
        # TFRT's wording (its tests match it), after what a reader needs to know.
        raise OpNotSupportedError(
            f"unknown op '{op_name}': no op handler implements it "
            f"({op_name} was not supported by NullOpHandler)"
        )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class LoggingOpHandler(OpHandler):
    """Logs every dispatch to ``stream`` (stderr), then delegates to ``inner`` (docs/eager.md).

    Per dispatch, with a counter ``n`` starting at 0::

        [n] dispatch '<op>' <a> argument(s), <r> result(s), no attributes | OpAttrs print
        Inputs for [n]: '<op>':
          Input for [n] tensor <i>: <tensor print>
        <empty line>

    With ``sync_log_results`` the handler waits for the results and logs them the same way
    (``Outputs for`` / ``  Output for``).
    """

    def __init__(
        self, inner: OpHandler, sync_log_results: bool = False, stream: TextIO | None = None
    ) -> None:
        self.inner = inner
        self.sync_log_results = sync_log_results
        self.name = "sync_logging" if sync_log_results else "logging"
        self.device = inner.device
        self._stream = stream
        self._lock = threading.Lock()
        self._counter = 0

    def _next_id(self) -> int:
        with self._lock:
            n = self._counter
            self._counter += 1
            return n

    def write(self, text: str) -> None:
        """Write ``text`` to the log stream and flush (stderr is unbuffered in TFRT)."""
        stream = self._stream if self._stream is not None else sys.stderr
        stream.write(text)
        stream.flush()

    def make_op(self, op_name: str) -> CoreRuntimeOp:
        return _LoggingOp(op_name, self, self.inner.make_op(op_name))


class _LoggingOp(CoreRuntimeOp):
    __slots__ = ("inner",)

    def __init__(self, name: str, handler: LoggingOpHandler, inner: CoreRuntimeOp) -> None:
        super().__init__(name, handler)
        self.inner = inner

    def __call__(
        self,
        exec_ctx: ExecutionContext | None,
        args: Sequence[TensorHandle],
        attrs: OpAttrsRef = EMPTY_ATTRS,
        num_results: int = 1,
        chain: AsyncValue[Any] | None = None,
        emit_errors: bool = False,
    ) -> OpResult:
        handler = self.handler
        assert isinstance(handler, LoggingOpHandler)
        n = handler._next_id()
        head = (
            f"[{n}] dispatch '{self.name}' {_plural(len(args), 'argument')}, "
            f"{_plural(num_results, 'result')}, "
        )
        head += attrs.format() if len(attrs) else "no attributes\n"
        lines = [head + f"Inputs for [{n}]: '{self.name}':\n"]
        for i, h in enumerate(args):
            lines.append(f"  Input for [{n}] tensor {i}: {h.format()}\n")
        handler.write("".join(lines) + "\n")
        results, out_chain = self.inner(exec_ctx, args, attrs, num_results, chain, emit_errors)
        if handler.sync_log_results:
            pending = [h.tensor_av for h in results if not h.is_available()]
            if pending and exec_ctx is not None:
                exec_ctx.host.await_values(pending)
            out = [f"Outputs for [{n}]: '{self.name}':\n"]
            for i, h in enumerate(results):
                out.append(f"  Output for [{n}] tensor {i}: {h.format()}\n")
            handler.write("".join(out) + "\n")
        return results, out_chain
