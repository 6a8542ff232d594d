"""The abstract :class:`Function` that kernels call (TFRT's ``tfrt::Function``).

Control-flow kernels (``tfrt.call``, ``tfrt.if``, ``tfrt.while`` ...) receive ``Function``
objects from their frame and call :meth:`Function.execute`; the executor implements this
interface one layer up, so kernels never import the executor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytfrt.support.function_kind import FunctionKind

__all__ = ["Function", "FunctionKind"]

if TYPE_CHECKING:
    from pytfrt.host.async_value import AsyncValue
    from pytfrt.host.execution_context import ExecutionContext


class Function:
    """A callable unit of work with typed arguments and results.

    Contract:
    * :meth:`execute` may be called from any thread, concurrently; each call is independent.
    * Arguments are borrowed: the callee takes its own references if it keeps them.
    * It returns exactly ``num_results`` AsyncValues, possibly unavailable (usually
      :class:`~pytfrt.host.IndirectAsyncValue`), each carrying one reference for the caller.
    * Errors are returned as error AsyncValues, never raised.
    """

    name: str = ""
    argument_types: Sequence[str] = ()
    result_types: Sequence[str] = ()
    kind: FunctionKind = FunctionKind.BEF

    @property
    def num_arguments(self) -> int:
        """Number of arguments."""
        return len(self.argument_types)

    @property
    def num_results(self) -> int:
        """Number of results."""
        return len(self.result_types)

    def execute(
        self, exec_ctx: ExecutionContext, arguments: Sequence[AsyncValue[Any]]
    ) -> list[AsyncValue[Any]]:
        """Run the function on ``arguments``; returns its results (see the class contract)."""
        raise NotImplementedError

    def execute_sync(self, exec_ctx: ExecutionContext, arguments: Sequence[Any]) -> list[Any]:
        """Run a sync function on plain values and return plain results.

        Raises:
            KernelError: with the first error of a kernel; nothing is emitted (docs/executor.md).
        """
        raise NotImplementedError(f"function '{self.name}' is not a sync function")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} '{self.name}'>"
