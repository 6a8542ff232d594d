"""The sync executor: a straight-line interpreter for ``tfrt.sync`` functions (docs/executor.md).

A :class:`SyncBEFFunction` runs its kernels sequentially in program order on plain values (no
AsyncValues, no scheduling).  Argument and result values belong to the caller; local registers
are reset right after the kernel holding their last use.  The first kernel error stops the
function and is returned to the caller (raised as :class:`KernelError` from
:meth:`SyncBEFFunction.execute_sync`); it is never emitted as a diagnostic.

Why code generation: the goal is a sync function within 3x of a plain Python loop calling the
same functions.  A generic interpreter loop costs several times that per kernel, so
at load time the function body is translated once into the equivalent straight-line Python
function -- one local variable per register, one call per kernel with its parameters bound by
the ``@kernel`` rules (docs/host.md), ``rN = None`` after a local's last use.  Kernels whose
parameters cannot be bound statically go through :meth:`KernelEntry.call_sync`.
:func:`generated_source` shows the text, for debugging.

Thread-safety: each call has its own locals; one function may run on many threads at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytfrt.executor.kernel_info import CHAIN_TYPE, FunctionInfo, KernelInfo
from pytfrt.host.async_value import AsyncValue, make_available, make_error
from pytfrt.host.binding import plan_binding
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function, FunctionKind
from pytfrt.host.kernel_frame import KernelError, result_list
from pytfrt.support.codegen import exec_generated
from pytfrt.support.errors import Status


class SyncBEFFunction(Function):
    """A ``tfrt.sync`` BEF function (see the module docstring)."""

    kind = FunctionKind.SYNC

    def __init__(self, info: FunctionInfo, argument_types: Sequence[str],
                 result_types: Sequence[str], register_types: Sequence[str] = ()) -> None:
        self.info = info
        self.name = info.name
        self.argument_types = tuple(argument_types)
        self.result_types = tuple(result_types)
        self.source, self._run = _compile(info, list(register_types))

    def execute_sync(self, exec_ctx: ExecutionContext, arguments: Sequence[Any]) -> list[Any]:
        """Run on plain values; returns plain results.

        Raises:
            KernelError: the first kernel error (its message), not emitted (docs/executor.md).
            ValueError: for a wrong number of arguments.
        """
        if len(arguments) != self.info.num_arguments:
            raise ValueError(
                f"function '{self.name}' takes {self.info.num_arguments} arguments, "
                f"got {len(arguments)}"
            )
        return self._run(arguments, exec_ctx)

    def execute(
        self, exec_ctx: ExecutionContext, arguments: Sequence[AsyncValue[Any]]
    ) -> list[AsyncValue[Any]]:
        """Run on available argument values; results are available values or one error.

        An error argument makes every result that error; a kernel error makes every result an
        error value with its message (not emitted).
        """
        n = len(self.result_types)
        for a in arguments:
            if a.is_error():
                if n:
                    a.add_ref(n)
                return [a] * n
        try:
            values = self.execute_sync(exec_ctx, [a.get() for a in arguments])
        except KernelError as exc:
            error = make_error(Status(str(exc)))
            if n > 1:
                error.add_ref(n - 1)
            return [error] * n
        return [make_available(v) for v in values]


def _fail(exc: Exception) -> KernelError:
    """The function's error for a kernel exception (the message only)."""
    if isinstance(exc, KernelError):
        return exc
    return KernelError(str(exc) or type(exc).__name__)


def static_call(k: KernelInfo, i: int, register_types: Sequence[str],
                operand: Callable[[int], str] = "r{}".format, ctx: str = "ctx") -> str | None:
    """Render ``k``'s binding plan as a call expression, or ``None`` if it cannot be static.

    The plan is :func:`pytfrt.host.binding.plan_binding`'s (the rules' one home); the call
    reads operand register ``r`` as ``operand(r)``, the ExecutionContext as ``ctx``, and the
    constants from the namespace names ``_f{i}`` (the kernel), ``_a{i}`` (its attributes) and
    ``_k{i}`` (the KernelInfo, for its functions).  Kernels taking a KernelFrame, or ops the
    kernel does not fit, go through :meth:`KernelEntry.call_sync`, which reports the error at
    run time.  A call of a kernel with several results returns its raw value:
    :func:`unpack_results` renders the check of its shape.
    """
    entry = k.entry
    assert entry is not None
    operands = list(k.operands)
    last = operands[-1] if operands else -1
    chain = 0 <= last < len(register_types) and register_types[last] == CHAIN_TYPE
    try:
        plan = plan_binding(entry.name, entry.signature, len(operands), chain, len(k.attrs),
                            len(k.function_ids), sync=True)
    except KernelError:
        return None
    parts: list[str] = []
    for kind, j in plan:
        if kind == "v":
            parts.append(operand(operands[j]))
        elif kind == "c":
            parts.append(f"_a{i}[{j}]")
        elif kind == "C":
            parts.append(f"list(_a{i}[{j}:])")
        elif kind == "f":
            parts.append(f"_k{i}.funcs[{j}]")
        elif kind == "F":
            parts.append(f"list(_k{i}.funcs[{j}:])")
        elif kind == "x":
            parts.append(ctx)
        else:  # a KernelFrame (or an AsyncValue, which plan_binding refuses for sync)
            return None
    return f"_f{i}({', '.join(parts)})"


def unpack_results(call: str, k: KernelInfo, i: int, targets: str) -> list[str]:
    """The lines assigning ``call`` (a :func:`static_call` of ``k``, number ``i``) to
    ``targets``: one result as it is; several only from a tuple of that many, else the error
    of :func:`pytfrt.host.kernel_frame.result_list` (namespace name ``_rl``), as
    :meth:`KernelEntry.call_sync` reports it."""
    n = k.num_results
    if n == 0:
        return [call]
    if n == 1:
        return [f"{targets} = {call}"]
    name = k.entry.name if k.entry is not None else ""
    return [f"t = {call}",
            f"if t.__class__ is not tuple or len(t) != {n}:",
            f"    t = _rl(t, {n}, {name!r})",
            f"{targets}, = t"]


def _compile(
    info: FunctionInfo, register_types: list[str]
) -> tuple[str, Callable[[Sequence[Any], ExecutionContext], list[Any]]]:
    """Translate ``info`` into a straight-line Python function ``(args, ctx) -> results``."""
    namespace: dict[str, Any] = {"_fail": _fail, "_rl": result_list}
    body: list[str] = []
    if info.num_arguments:
        names = ", ".join(f"r{a}" for a in range(info.num_arguments))
        body.append(f"{names}, = args")
    for i, (k, release) in enumerate(zip(info.kernels[1:], info.release_after, strict=True)):
        namespace[f"_f{i}"] = k.fn
        namespace[f"_a{i}"] = k.attrs
        namespace[f"_k{i}"] = k
        call = static_call(k, i, register_types)
        targets = ", ".join(f"r{r}" for r in k.results)
        if call is None:
            namespace[f"_cs{i}"] = k.entry.call_sync  # type: ignore[union-attr]
            values = ", ".join(f"r{r}" for r in k.operands)
            call = f"_cs{i}([{values}], _a{i}, _k{i}.funcs, ctx, {k.num_results})"
            if k.results:
                body.append(f"{targets}, = {call}")
            else:
                body.append(call)
        else:
            body += unpack_results(call, k, i, targets)
        for r in release:
            body.append(f"r{r} = None")
    results = ", ".join(f"r{r}" for r in info.result_registers)
    body.append(f"return [{results}]")
    source = "def _run(args, ctx):\n    try:\n" + "".join(
        f"        {line}\n" for line in body
    ) + "    except Exception as exc:\n        raise _fail(exc) from None\n"
    exec_generated(source, f"sync function '{info.name}'", namespace)
    return source, namespace["_run"]


def generated_source(function: SyncBEFFunction) -> str:
    """The Python text a sync function was translated into (for debugging)."""
    return function.source
