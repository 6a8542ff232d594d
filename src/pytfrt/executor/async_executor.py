"""The async BEF executor: runs one BEF function as dataflow over AsyncValues (spec 2.2-2.4).

:class:`BEFFunction` implements :class:`pytfrt.host.Function`.  Each ``execute`` call creates an
:class:`_Invocation` (TFRT's ``BEFExecutor``) holding the per-call state: one register per SSA
value and one ready counter per kernel.  Everything else was precomputed at load time
(:mod:`pytfrt.executor.kernel_info`) and is shared, so a loaded function may be executed from
any number of threads at once.

Scheduling follows TFRT at REV exactly (spec 2.3): a ready-kernel queue has a current stream
id, an ``inline`` vector (same stream, processed LIFO on the current thread) and an ``outline``
vector (other streams).  When ``inline`` runs dry the queue switches to the stream of
``outline[0]`` (libstdc++ ``std::partition`` emulated); remaining outline kernels are sorted by
stream id and enqueued as one work-queue task per stream.  A result that is not available yet
resumes its users through ``and_then`` in a new queue of the producer's stream, inline unless
100 continuations are already nested on the thread (then it is enqueued).

Strictness and errors (spec 2.4, 1.9): a kernel runs only when all its operands are available.
If one is an error (or the request is cancelled) it is not called: every result is the last
error operand (or the cancel value), silently.  Kernel exceptions are reported once, at the
kernel's location, by ``KernelFrame.report_error``.

Reference counts (spec 2.2): a register's value holds exactly one reference per use; each
consumer drops its reference right after it ran, so payload ``__tfrt_destroy__`` hooks fire
right after the last consumer.

Thread-safety: ready counters of multi-operand kernels are decremented under the invocation's
lock; single-operand counters are decremented by exactly one producer, so need none.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

from pytfrt.executor.kernel_info import (
    MODE_SIMPLE,
    MODE_SYNC,
    PLAIN_TYPES,
    FunctionInfo,
    KernelInfo,
)
from pytfrt.host.async_value import (
    CONCRETE,
    ERROR,
    AsyncValue,
    IndirectAsyncValue,
    make_available,
)
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function, FunctionKind
from pytfrt.host.registry import KernelFrame

MAX_NESTED_CONTINUATIONS: Final = 100
TRACE_LEVEL_DEBUG: Final = 2

_tls = threading.local()


class BEFFunction(Function):
    """An async BEF function of a loaded program (see the module docstring).

    ``execute`` never raises for kernel errors; results are IndirectAsyncValues that resolve
    to the returned values or errors.
    """

    kind = FunctionKind.BEF

    def __init__(self, info: FunctionInfo, argument_types: Sequence[str],
                 result_types: Sequence[str]) -> None:
        self.info = info
        self.name = info.name
        self.argument_types = tuple(argument_types)
        self.result_types = tuple(result_types)

    def execute(
        self, exec_ctx: ExecutionContext, arguments: Sequence[AsyncValue[Any]]
    ) -> list[AsyncValue[Any]]:
        """Run the function; returns one IndirectAsyncValue (+1 reference) per result."""
        if len(arguments) != self.info.num_arguments:
            raise ValueError(
                f"function '{self.name}' takes {self.info.num_arguments} arguments, "
                f"got {len(arguments)}"
            )
        return _Invocation(self.info, exec_ctx).run(arguments)


class _Invocation:
    """The state of one call of a BEF function (TFRT's ``BEFExecutor``)."""

    __slots__ = ("info", "kernels", "registers", "counts", "exec_ctx", "request", "lock",
                 "tracer", "user_counts", "elide")

    def __init__(self, info: FunctionInfo, exec_ctx: ExecutionContext) -> None:
        self.info = info
        self.kernels = info.kernels
        self.user_counts = info.user_counts
        self.elide = info.elide
        self.registers: list[AsyncValue[Any] | None] = [None] * info.num_registers
        self.counts = [k.init_count for k in info.kernels]
        self.exec_ctx = exec_ctx
        self.request = exec_ctx.request_context
        self.lock = threading.Lock()
        self.tracer = getattr(exec_ctx.request_context.host, "tracer", None)
        if self.tracer is not None:  # per-call tracer (pytfrt.host.tracing), None if off
            self.tracer = self.tracer.bind_invocation(info)

    # -- entry point --------------------------------------------------------------------------

    def run(self, arguments: Sequence[AsyncValue[Any]]) -> list[AsyncValue[Any]]:
        info = self.info
        registers = self.registers
        results: list[AsyncValue[Any]] = []
        for r in info.result_registers:
            value = registers[r]
            if value is None:
                value = IndirectAsyncValue()
                value._refs = info.result_ref_counts[r]
                registers[r] = value
            results.append(value)
        # The pseudo kernel: publish the zero-operand users, then the arguments.
        pseudo = self.kernels[0]
        stream = pseudo.stream
        inline: list[int] = []
        outline: list[int] = []
        self._decrement(pseudo.used_by[0], stream, inline, outline)
        elide = self.elide
        for a, arg in enumerate(arguments):
            if pseudo.has_users[a + 1]:
                if arg._state < CONCRETE or not elide[a] or arg._value.__class__ not in PLAIN_TYPES:
                    arg.add_ref()  # arguments are borrowed: the registers take their own refs
                self._publish(a, arg, pseudo.used_by[a + 1], stream, inline, outline)
        self._process(stream, inline, outline)
        return results

    # -- register and queue helpers -------------------------------------------------------------

    def _set_register(self, reg: int, value: AsyncValue[Any]) -> None:
        """Store ``value`` (carrying one reference) in ``reg`` (TFRT's ``SetRegisterValue``)."""
        current = self.registers[reg]
        if current is None:
            uses = self.user_counts[reg]
            if uses > 1 and (not self.elide[reg] or value._value.__class__ not in PLAIN_TYPES):
                value.add_ref(uses - 1)
            self.registers[reg] = value
            return
        # A function result: forward the caller's IndirectAsyncValue and drop the pin.
        if current._refs > 1:
            current.drop_ref()
            current.forward_to(value)  # type: ignore[attr-defined]
        else:
            current.forward_to(value)  # type: ignore[attr-defined]
            current.drop_ref()

    def _decrement(self, users: Sequence[int], stream: int, inline: list[int],
                   outline: list[int]) -> None:
        """Decrement the ready count of ``users``; ready ones go to ``inline``/``outline``."""
        counts = self.counts
        kernels = self.kernels
        for u in users:
            if counts[u] != 1:
                with self.lock:
                    left = counts[u] - 1
                    counts[u] = left
                if left:
                    continue
            if kernels[u].stream == stream:
                inline.append(u)
            else:
                outline.append(u)

    def _publish(self, reg: int, value: AsyncValue[Any], users: Sequence[int], stream: int,
                 inline: list[int], outline: list[int]) -> None:
        """TFRT's ``ProcessUsedBysAndSetRegister`` for a register that has uses."""
        if value._state >= CONCRETE:
            self._set_register(reg, value)
            if users:
                self._decrement(users, stream, inline, outline)
        elif not users:
            self._set_register(reg, value)
        else:
            value.and_then(lambda: self._resume(reg, value, users, stream))

    def _resume(self, reg: int, value: AsyncValue[Any], users: Sequence[int],
                stream: int) -> None:
        """Continuation: ``value`` became available; run its users in a new queue."""
        depth = getattr(_tls, "depth", 0)
        if depth >= MAX_NESTED_CONTINUATIONS:
            self.exec_ctx.queue.add_task(lambda: self._resume_now(reg, value, users, stream))
            return
        _tls.depth = depth + 1
        try:
            self._resume_now(reg, value, users, stream)
        finally:
            _tls.depth = depth

    def _resume_now(self, reg: int, value: AsyncValue[Any], users: Sequence[int],
                    stream: int) -> None:
        inline: list[int] = []
        outline: list[int] = []
        if self.tracer is not None:
            self.tracer.value_ready(reg)
        if reg < self.info.num_arguments and self.elide[reg] and (
            value._value.__class__ in PLAIN_TYPES
        ):
            value.drop_ref()  # a plain argument needs no references after all (see run)
        self._set_register(reg, value)
        self._decrement(users, stream, inline, outline)
        self._process(stream, inline, outline)

    def _enqueue_outline(self, outline: list[int]) -> None:
        """Sort ``outline`` by stream id and enqueue one task per stream (spec 2.3)."""
        kernels = self.kernels
        outline.sort(key=lambda k: kernels[k].stream)
        queue = self.exec_ctx.queue
        start = 0
        n = len(outline)
        while start < n:
            stream = kernels[outline[start]].stream
            end = start + 1
            while end < n and kernels[outline[end]].stream == stream:
                end += 1
            group = outline[start:end]
            queue.add_task(lambda s=stream, g=group: self._process(s, g, []))  # type: ignore[misc]
            start = end
        outline.clear()

    # -- the scheduling loop ------------------------------------------------------------------

    def _process(self, stream: int, inline: list[int], outline: list[int]) -> None:
        """TFRT's ``ProcessReadyKernels``: run ready kernels LIFO, enqueue other streams.

        The common steps are written out inline (this loop is the executor's hot path); the
        rarer ones go through the helper methods above.
        """
        kernels = self.kernels
        registers = self.registers
        counts = self.counts
        request = self.request
        tracer = self.tracer
        plain = PLAIN_TYPES
        while True:
            if not inline:
                if not outline:
                    return
                stream = _switch_stream(kernels, inline, outline)
            if outline:
                self._enqueue_outline(outline)
            k = kernels[inline.pop()]
            args = [registers[r] for r in k.operands]
            error = request._cancel_value
            for a in args:
                if a._state == ERROR:  # type: ignore[union-attr]
                    error = a
            # 1. Run the kernel, or forward the error without running it (spec 2.4).
            if error is not None:
                results = [error] * k.num_results
                if results:
                    error.add_ref(len(results))
                if tracer is not None:
                    tracer.skip_kernel(k, error)
            elif tracer is not None:
                tracer.begin_kernel(k, args)
                results = self._call(k, args)  # type: ignore[arg-type]
                tracer.end_kernel(results)
            elif k.mode == MODE_SIMPLE:
                try:
                    if k.trim:
                        out = k.fn(*[a._value for a in args[: k.num_call_args]])  # type: ignore[index, misc, union-attr]
                    else:
                        out = k.fn(*[a._value for a in args])  # type: ignore[misc, union-attr]
                except Exception as exc:  # noqa: BLE001 - every kernel error becomes a diagnostic
                    results = self._report(k, args, _message(exc))  # type: ignore[arg-type]
                else:
                    if not k.num_results:
                        results = []
                    elif out.__class__ in plain:
                        results = [make_available(out)]
                    else:
                        results = self._simple_result(k, args, out)  # type: ignore[arg-type]
            else:
                results = self._call(k, args)  # type: ignore[arg-type]
            # 2. Release the arguments (a value dies right after its last consumer).
            i = 0
            for a in args:
                if not k.operand_elide[i] or a._value.__class__ not in plain:  # type: ignore[union-attr]
                    a.drop_ref()  # type: ignore[union-attr]
                i += 1
            # 3. Publish the results and schedule the kernels that became ready.
            i = 0
            for value in results:
                reg, users, uses, elide = k.result_info[i]
                i += 1
                if uses == 0:
                    if not elide or value._value.__class__ not in plain:
                        value.drop_ref()
                    continue
                if value._state < CONCRETE:
                    self._publish(reg, value, users, stream, inline, outline)
                    continue
                if registers[reg] is None:
                    if uses > 1 and (not elide or value._value.__class__ not in plain):
                        value.add_ref(uses - 1)
                    registers[reg] = value
                else:
                    self._set_register(reg, value)
                for u in users:
                    if counts[u] != 1:
                        with self.lock:
                            left = counts[u] - 1
                            counts[u] = left
                        if left:
                            continue
                    if kernels[u].stream == stream:
                        inline.append(u)
                    else:
                        outline.append(u)

    def _simple_result(self, k: KernelInfo, args: list[AsyncValue[Any]], out: Any
                       ) -> list[AsyncValue[Any]]:
        if isinstance(out, AsyncValue):
            return [out]  # owned: a kernel returning an argument added a ref (spec 1.3)
        if out is None:
            return self._report(k, args, f"kernel '{k.name}' returned no value for its result")
        return [make_available(out)]

    def _call(self, k: KernelInfo, args: list[AsyncValue[Any]]) -> list[AsyncValue[Any]]:
        """Call kernel ``k`` on available, non-error ``args``; returns its result values."""
        if k.mode == MODE_SIMPLE:
            try:
                out = k.fn(*[a._value for a in args[: k.num_call_args]])  # type: ignore[misc]
            except Exception as exc:  # noqa: BLE001 - every kernel error becomes a diagnostic
                return self._report(k, args, _message(exc))
            if k.num_results == 0:
                return []
            return self._simple_result(k, args, out)
        if k.mode == MODE_SYNC:
            return self._call_sync_kernel(k, args)
        return self._call_frame(k, args)

    def _make_frame(self, k: KernelInfo, args: list[AsyncValue[Any]]) -> KernelFrame:
        ctx = self.exec_ctx
        if k.needs_context:
            ctx = ExecutionContext(ctx.request_context, ctx.work_queue, k.location)
        return KernelFrame(args, k.attrs, k.funcs, k.num_results, ctx, k.location, k.name)

    def _report(self, k: KernelInfo, args: list[AsyncValue[Any]], message: str
                ) -> list[AsyncValue[Any]]:
        """Emit ``message`` at ``k``'s location; every result becomes that error."""
        frame = self._make_frame(k, args)
        frame.report_error(message)
        return frame.results  # type: ignore[return-value]

    def _call_frame(self, k: KernelInfo, args: list[AsyncValue[Any]]) -> list[AsyncValue[Any]]:
        frame = self._make_frame(k, args)
        k.entry.invoke(frame)  # type: ignore[union-attr]
        results = frame.results
        if None in results:
            frame.report_error(f"kernel '{k.name}' did not set all of its results")
        return results  # type: ignore[return-value]

    def _call_sync_kernel(self, k: KernelInfo, args: list[AsyncValue[Any]]
                          ) -> list[AsyncValue[Any]]:
        """A sync kernel used in an async function: plain values in, available values out."""
        try:
            values = k.entry.call_sync(  # type: ignore[union-attr]
                [a._value for a in args], k.attrs, k.funcs, self.exec_ctx
            )
        except Exception as exc:  # noqa: BLE001 - every kernel error becomes a diagnostic
            return self._report(k, args, _message(exc))
        if len(values) != k.num_results:
            return self._report(
                k, args, f"kernel '{k.name}' must return {k.num_results} results"
            )
        return [make_available(v) for v in values]


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _switch_stream(kernels: list[KernelInfo], inline: list[int], outline: list[int]) -> int:
    """Adopt the stream of ``outline[0]``; move its kernels to ``inline`` (``std::partition``).

    Emulates libstdc++'s bidirectional ``std::partition`` with the predicate "stream differs":
    kernels of other streams end up in front (kept in ``outline``), those of the new stream at
    the back, which are appended to ``inline`` in that order.
    """
    stream = kernels[outline[0]].stream
    first = 0
    last = len(outline)
    while True:
        while True:
            if first == last:
                break
            if kernels[outline[first]].stream != stream:
                first += 1
            else:
                break
        if first == last:
            break
        last -= 1
        while True:
            if first == last:
                break
            if kernels[outline[last]].stream == stream:
                last -= 1
            else:
                break
        if first == last:
            break
        outline[first], outline[last] = outline[last], outline[first]
        first += 1
    inline.extend(outline[first:])
    del outline[first:]
    return stream
