"""What one kernel invocation sees (:class:`KernelFrame`) and how its return value becomes
results (:func:`result_list`, :func:`store_results`).

The result rules, in one place for every executor: the return value fills the results -- one
value -> result 0; a tuple -> results 0..n-1 when the op has several results; an
:class:`AsyncValue` is stored as is (an async result); ``None`` when the op has no results or the
kernel set them through its frame.  Anything else is the kernel's error.

Thread-safety: a frame may be used from another thread after the kernel returns (each slot is
set exactly once); the functions are pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytfrt.host.async_value import AsyncValue, IndirectAsyncValue, make_available, make_error
from pytfrt.host.diagnostics import Diagnostic
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.support.errors import PytfrtError
from pytfrt.support.location import UNKNOWN_LOC, Location


class KernelError(PytfrtError):
    """Raised by kernels to report an error (any exception works; this one reads best)."""


class KernelFrame:
    """Everything one kernel invocation sees: arguments, attributes, functions, result slots.

    Built by the executor; a kernel asks for it with a ``KernelFrame`` parameter when it needs
    to set results itself (asynchronous kernels).  A frame may be kept and used from another
    thread after the kernel returns (e.g. ``report_error`` from a task); each slot must be set
    exactly once.
    """

    __slots__ = (
        "arguments",
        "attributes",
        "functions",
        "results",
        "exec_ctx",
        "location",
        "name",
    )

    def __init__(
        self,
        arguments: Sequence[AsyncValue[Any]],
        attributes: Sequence[Any],
        functions: Sequence[Function],
        num_results: int,
        exec_ctx: ExecutionContext,
        location: Location = UNKNOWN_LOC,
        name: str = "",
    ) -> None:
        self.arguments = arguments
        self.attributes = attributes
        self.functions = functions
        self.results: list[AsyncValue[Any] | None] = [None] * num_results
        self.exec_ctx = exec_ctx
        self.location = location
        self.name = name

    @property
    def num_results(self) -> int:
        """Number of result slots."""
        return len(self.results)

    def argument(self, index: int) -> Any:
        """The payload of argument ``index`` (must be concrete)."""
        return self.arguments[index].get()

    def set_result(self, index: int, value: AsyncValue[Any]) -> None:
        """Store ``value`` (available or not) in result slot ``index``."""
        self.results[index] = value

    def emplace_result(self, index: int, value: Any) -> None:
        """Store an available value in result slot ``index``."""
        self.results[index] = make_available(value)

    def allocate_result(self, index: int) -> AsyncValue[Any]:
        """Store a new unavailable value in slot ``index`` and return it (fill it later)."""
        value: AsyncValue[Any] = AsyncValue()
        self.results[index] = value
        return value

    def allocate_indirect_result(self, index: int) -> IndirectAsyncValue[Any]:
        """Store a new :class:`IndirectAsyncValue` in slot ``index`` and return it."""
        value: IndirectAsyncValue[Any] = IndirectAsyncValue()
        self.results[index] = value
        return value

    def emit_error(self, message: str) -> AsyncValue[Any]:
        """Emit a diagnostic at this kernel's location and return an error value."""
        diag = Diagnostic(message, self.location)
        self.exec_ctx.host.emit_error(diag)
        return make_error(diag.status)

    def report_error(self, message: str) -> None:
        """Emit a diagnostic and make every unset or still-unavailable result an error.

        Unset slots get one shared error value; allocated, unavailable, non-indirect results
        are set to the error in place (docs/host.md).
        """
        diag = Diagnostic(message, self.location)
        self.exec_ctx.host.emit_error(diag)
        status = diag.status
        error: AsyncValue[Any] | None = None
        for i, slot in enumerate(self.results):
            if slot is None:
                if error is None:
                    error = make_error(status)
                else:
                    error.add_ref()  # one reference per result slot
                self.results[i] = error
            elif slot.is_unavailable():
                slot.set_error(status)


def result_list(out: Any, n: int, name: str) -> list[Any]:
    """The ``n`` result values of a kernel that returned ``out`` (see the module docstring).

    Raises:
        KernelError: ``out`` does not give ``n`` results.
    """
    if n == 0:
        return []
    if n == 1:
        if out is None:
            raise KernelError(f"kernel '{name}' returned no value for its result")
        return [out]
    if not isinstance(out, tuple) or len(out) != n:
        raise KernelError(f"kernel '{name}' must return {n} results")
    return list(out)


def _to_av(value: Any) -> AsyncValue[Any]:
    if isinstance(value, AsyncValue):
        return value
    return make_available(value)


def store_results(frame: KernelFrame, out: Any, name: str = "") -> None:
    """Store a kernel's return value ``out`` in ``frame``'s result slots (see module doc)."""
    results = frame.results
    n = len(results)
    if out is None and n and all(r is not None for r in results):
        return  # the kernel set its results through the frame
    if out is None and n > 1:
        frame.report_error(f"kernel '{name}' did not set all of its {n} results")
        return
    try:
        values = result_list(out, n, name)
    except KernelError as exc:
        frame.report_error(str(exc))
        return
    for i, value in enumerate(values):
        results[i] = _to_av(value)
