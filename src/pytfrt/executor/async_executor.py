"""The async BEF executor: runs one BEF function as dataflow over AsyncValues (docs/executor.md).

:class:`BEFFunction` implements :class:`pytfrt.host.Function`.  Each ``execute`` call creates an
:class:`_Invocation` (TFRT's ``BEFExecutor``) holding the per-call state: one register per SSA
value and one ready counter per kernel.  Everything else was precomputed at load time
(:mod:`pytfrt.executor.kernel_info`) and is shared, so a loaded function may be executed from
any number of threads at once.

Scheduling follows TFRT exactly (docs/executor.md): a ready-kernel queue has a current stream
id, an ``inline`` vector (same stream, processed LIFO on the current thread) and an ``outline``
vector (other streams).  When ``inline`` runs dry the queue switches to the stream of
``outline[0]`` (libstdc++ ``std::partition`` emulated); remaining outline kernels are sorted by
stream id and enqueued as one work-queue task per stream.  A result that is not available yet
resumes its users through ``and_then`` in a new queue of the producer's stream, inline unless
``MAX_NESTING`` levels (invocations, continuations, waiter cascades) are already active on the
thread: then it is deferred to the outermost level (:func:`pytfrt.host.async_value.run_nested`),
and so is a function invocation, so call chains and loops of any length run in constant stack.

Strictness and errors (docs/executor.md, docs/host.md): a kernel runs only when all its operands are
available. If one is an error (or the request is cancelled) it is not called: every result is the
last error operand (or the cancel value), silently.  Kernel exceptions are reported once, at the
kernel's location, by ``KernelFrame.report_error``.

Reference counts (docs/executor.md): a register's value holds exactly one reference per use; each
consumer drops its reference right after it ran, so payload ``__tfrt_destroy__`` hooks fire
right after the last consumer.

The fast path (decided per kernel and per register at load time, see
:mod:`pytfrt.executor.kernel_info` and :mod:`pytfrt.executor.call_plan`): a kernel whose
parameters bind without a KernelFrame is called through a generated function that reads its
operands straight from the registers; a register of a scalar or chain type that only such
kernels read is *unboxed* -- it holds the bare payload, no AsyncValue is made for it, and its
reference count (unobservable: no destroy hook, never seen as an AsyncValue) is not kept.
Everything observable -- order, strictness, errors, destroy hooks, ``is_unique`` of values a
kernel can see -- is as described above.

Thread-safety: ready counters are lists of tokens popped by the producers (one atomic step,
see :class:`_Invocation`); the per-kernel context cache is a tuple replaced atomically.
"""

from __future__ import annotations

import numbers
from collections import deque
from collections.abc import Sequence
from functools import partial
from itertools import groupby
from operator import itemgetter
from typing import Any, Final

from pytfrt.executor.kernel_info import (
    MODE_STATIC,
    MODE_SYNC,
    FunctionInfo,
    KernelInfo,
)
from pytfrt.host.async_value import (
    CHAIN,
    CONCRETE,
    ERROR,
    MAX_NESTING,
    AsyncValue,
    Chain,
    IndirectAsyncValue,
    make_available,
    nesting_depth,
    run_nested,
)
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function, FunctionKind
from pytfrt.host.registry import KernelFrame

TRACE_LEVEL_VERBOSE: Final = 1
TRACE_LEVEL_DEBUG: Final = 2
PROCESS_READY_KERNELS_SCOPE: Final = "BEFExecutor::ProcessReadyKernels"

_new_object: Final = object.__new__
_copy = itemgetter(slice(None))  # t[:]: a fresh copy of a list, the tuple itself for a tuple

ResultInfo = tuple[int, Sequence[int], int, bool, bool]
"""``(register, users, use count, reference-counted, unboxed)`` of one result."""

# What a payload of a scalar result type must be (other types are not checked): a kernel
# returning, say, a string for an ``i32`` result gets a diagnostic at its own location instead
# of handing the string to its consumers.
_SCALAR_KINDS: Final = {
    "i1": numbers.Integral, "i8": numbers.Integral, "i16": numbers.Integral,
    "i32": numbers.Integral, "i64": numbers.Integral, "ui8": numbers.Integral,
    "ui16": numbers.Integral, "ui32": numbers.Integral, "ui64": numbers.Integral,
    "f16": numbers.Real, "bf16": numbers.Real, "f32": numbers.Real, "f64": numbers.Real,
}


def _payload_error(k: KernelInfo, index: int, value: Any) -> str | None:
    """Why ``value`` cannot be result ``index`` of ``k``, or ``None`` if it can."""
    declared = k.result_types[index] if index < len(k.result_types) else None
    if declared is None:
        return None
    cls = value.__class__
    kind = _SCALAR_KINDS.get(declared)
    if kind is not None:  # numpy registers its scalars with ``numbers``, except ``bool_``
        ok = issubclass(cls, kind) or (cls.__name__ == "bool_" and cls.__module__ == "numpy")
    elif declared.endswith("chain"):
        ok = cls is Chain
    else:
        return None
    if ok:
        return None
    return f"kernel '{k.name}' returned a {cls.__name__} for its {declared} result {index}"


def _results_error(k: KernelInfo, out: Any) -> str | None:
    """Why ``out`` is not a usable return value of ``k``, a kernel with several results (a
    tuple of ``k.num_results`` values, each an AsyncValue or a valid payload), or ``None``.

    On a bad payload the AsyncValues in ``out`` are released (the kernel handed over their
    references).  Shared by the dataflow executor and the whole-function executor.
    """
    n = k.num_results
    if out is None:
        return f"kernel '{k.name}' did not set all of its {n} results"
    if not isinstance(out, tuple) or len(out) != n:
        return f"kernel '{k.name}' must return {n} results"
    for i, v in enumerate(out):
        wrong = None if isinstance(v, AsyncValue) else _payload_error(k, i, v)
        if wrong is not None:
            for other in out:
                if isinstance(other, AsyncValue):
                    other.drop_ref()
            return wrong
    return None


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
    """The state of one call of a BEF function (TFRT's ``BEFExecutor``).

    ``counts[k]`` is kernel ``k``'s ready counter as a list of tokens (a copy of
    ``FunctionInfo.count_templates[k]``): each producer of an operand pops one token, and the
    one that pops the bottom ``True`` token makes the kernel ready -- a decrement-and-test in
    one atomic step, safe when producers run on several threads.  Single-operand kernels have
    ``()``: their only producer makes them ready at once.

    ``errors`` becomes true once an error value is stored in a register; until then the hot
    loop does not look at the operands' states (a kernel only reads registers stored before
    its last operand's producer made it ready, so the flag is always up to date).
    """

    __slots__ = ("info", "kernels", "streams", "registers", "counts", "exec_ctx", "request",
                 "tracer", "user_counts", "counted", "unboxed", "errors")

    def __init__(self, info: FunctionInfo, exec_ctx: ExecutionContext) -> None:
        self.info = info
        self.kernels = info.kernels
        self.streams = info.streams
        self.user_counts = info.user_counts
        self.counted = info.counted
        self.unboxed = info.unboxed
        # An AsyncValue per register, or the bare payload of an unboxed one (None: not set yet);
        # one more slot at the end is the pseudo kernel's "pseudo register" (docs/executor.md).
        self.registers: list[Any] = [None] * (info.num_registers + 1)
        self.counts: list[Any] = list(map(_copy, info.count_templates))
        self.exec_ctx = exec_ctx
        self.request = exec_ctx.request_context
        self.errors = False
        self.tracer = getattr(self.request.host, "tracer", None)
        if self.tracer is not None:  # per-call tracer (pytfrt.host.tracing), None if off
            self.tracer = self.tracer.bind_invocation(info)

    def kernel_context(self, k: KernelInfo) -> ExecutionContext:
        """The execution context kernel ``k`` receives: this call's, located at ``k``.

        Contexts are immutable, so the last one made for ``k`` is kept on ``k`` and reused
        while the parent context is the same object (a region body or callee run repeatedly
        by one kernel gets the same parent every time).
        """
        ctx = self.exec_ctx
        cache = k.ctx_cache
        if cache[0] is ctx:
            return cache[1]
        located = ExecutionContext(ctx.request_context, ctx.work_queue, k.location)
        k.ctx_cache = (ctx, located)
        return located

    # -- entry point --------------------------------------------------------------------------

    def run(self, arguments: Sequence[AsyncValue[Any]]) -> list[AsyncValue[Any]]:
        info = self.info
        registers = self.registers
        results: list[AsyncValue[Any]] = []
        for r in info.result_registers:
            value = registers[r]
            if value is None:
                value = IndirectAsyncValue()
                value.add_ref(info.result_ref_counts[r] - 1)
                registers[r] = value
            results.append(value)
        if nesting_depth() >= MAX_NESTING:
            # Too deep on this thread: start later at a shallow depth (see run_nested); the
            # borrowed arguments are kept alive until then.
            kept = [a.add_ref() for a in arguments]
            run_nested(partial(self._start_owned, kept))
        else:
            run_nested(partial(self._start, arguments))
        return results

    def _start_owned(self, arguments: list[AsyncValue[Any]]) -> None:
        try:
            self._start(arguments)
        finally:
            for a in arguments:
                a.drop_ref()

    def _start(self, arguments: Sequence[AsyncValue[Any]]) -> None:
        """Publish the pseudo kernel's results (the arguments) and run what became ready."""
        pseudo = self.kernels[0]
        stream = pseudo.stream
        inline: list[int] = []
        outline: list[int] = []
        # Result 0: the pseudo register, whose users are the zero-operand kernels.
        pseudo_info = (self.info.num_registers, pseudo.used_by[0], 1, False, True)
        self._publish(pseudo_info, CHAIN, stream, inline, outline, None, True)
        counted = self.counted
        for a, arg in enumerate(arguments):
            if pseudo.has_users[a + 1]:
                if counted[a]:
                    arg.add_ref()  # arguments are borrowed: the registers take their own refs
                info = (a, pseudo.used_by[a + 1], self.user_counts[a], counted[a],
                        self.unboxed[a])
                self._publish(info, arg, stream, inline, outline)
        self._process(stream, inline, outline)

    # -- publishing results -------------------------------------------------------------------

    def _publish(self, info: ResultInfo, value: Any, stream: int, inline: list[int],
                 outline: list[int], k: KernelInfo | None = None, payload: bool = False) -> None:
        """Publish one result: TFRT's ``ProcessUsedBysAndSetRegister``, the one place for it.

        ``info`` is the result's ``(register, users, use count, counted, unboxed)``;
        ``value`` an AsyncValue carrying one reference, or a bare payload if ``payload``.
        Available: store it in the register (forwarding the caller's value for a function
        result) and decrement the users' ready counts -- the ready ones go to ``inline``
        (same stream) or ``outline``.  Unavailable: register it with the request (kernel
        results only, so cancellation and deadlines can abandon it) and resume the users
        through ``and_then`` (:meth:`_resume`).
        """
        reg, users, uses, counted, unboxed = info
        registers = self.registers
        if payload:  # available by definition
            if unboxed:
                registers[reg] = value
            else:
                av = _new_object(AsyncValue)  # make_available(value), inlined
                av._state = CONCRETE
                av._value = value
                av._waiters = []
                av._refs = [True]
                if not uses:
                    if counted:
                        av.drop_ref()
                    return
                if registers[reg] is None:
                    if counted and uses > 1:
                        av.add_ref(uses - 1)
                    registers[reg] = av
                else:
                    self._set_register(reg, av)
        else:
            if not uses:
                if counted:
                    value.drop_ref()
                return
            state = value._state
            if state != CONCRETE:
                if state != ERROR:
                    if k is not None:
                        value = self.request.watch(value, k.name, k.location)
                    if value._state < CONCRETE:
                        if users:
                            value.and_then(
                                partial(self._resume, info, value, stream, k is not None)
                            )
                        else:  # a function result: forward the caller's value
                            self._set_register(reg, value)
                        return
                self._set_register(reg, value)
            elif unboxed:
                registers[reg] = value._value
            elif registers[reg] is None:
                if counted and uses > 1:
                    value.add_ref(uses - 1)
                registers[reg] = value
            else:
                self._set_register(reg, value)
        counts = self.counts
        streams = self.streams
        for u in users:  # decrement the ready counts
            c = counts[u]
            if c and not c.pop():
                continue
            if streams[u] == stream:
                inline.append(u)
            else:
                outline.append(u)

    def _set_register(self, reg: int, value: AsyncValue[Any]) -> None:
        """Store available ``value`` (carrying one reference) in ``reg`` (``SetRegisterValue``)."""
        if value._state == ERROR:
            self.errors = True
        current = self.registers[reg]
        if self.unboxed[reg]:
            self.registers[reg] = value._value if value._state == CONCRETE else value
            return
        if current is None:
            uses = self.user_counts[reg]
            if uses > 1 and self.counted[reg]:
                value.add_ref(uses - 1)
            self.registers[reg] = value
            return
        # A function result: forward the caller's IndirectAsyncValue and drop the pin.
        if current.ref_count > 1:
            current.drop_ref()
            current.forward_to(value)
        else:
            current.forward_to(value)
            current.drop_ref()

    def _resume(self, info: ResultInfo, value: AsyncValue[Any], stream: int,
                watched: bool = False) -> None:
        """Continuation: ``value`` became available; run its users in a new queue.

        One :func:`run_nested` level: beyond ``MAX_NESTING`` levels on this thread it is
        deferred to the outermost level (TFRT enqueues it beyond 100 nested continuations;
        Python frames are costlier, so the bound is lower and the deferral stays on the thread).
        """
        if watched:  # the register takes the real value again (``is_unique`` stays exact)
            target = value._target  # type: ignore[attr-defined]
            target.add_ref()
            value.drop_ref()
            value = target
        run_nested(partial(self._resume_now, info, value, stream))

    def _resume_now(self, info: ResultInfo, value: AsyncValue[Any], stream: int) -> None:
        inline: list[int] = []
        outline: list[int] = []
        if self.tracer is not None:
            self.tracer.value_ready(info[0])
        self._publish(info, value, stream, inline, outline)
        self._process(stream, inline, outline)

    def _enqueue_outline(self, outline: list[int]) -> None:
        """Sort ``outline`` by stream id and enqueue its streams in batches (docs/executor.md).

        TFRT enqueues one task per stream, in stream order.  Here the per-stream groups go
        into one shared FIFO that ``min(#streams, parallelism)`` tasks drain, each running
        one stream's kernels at a time: on ``s`` (one task) the streams run in exactly the
        order separate tasks would; on ``mstd`` the workers share them dynamically.  One
        queued task per batch instead of per stream is what makes fan-out cheap.
        """
        stream_of = self.streams.__getitem__
        outline.sort(key=stream_of)  # stable, as libstdc++'s insertion sort for small inputs
        queue = self.exec_ctx.queue
        groups = deque((stream, list(group)) for stream, group in groupby(outline, stream_of))
        outline.clear()
        if len(groups) == 1:
            stream, ks = groups[0]
            queue.add_task(partial(self._process, stream, ks, []))
            return
        drain = partial(self._process, -1, [], [], groups)
        for _ in range(min(len(groups), queue.parallelism_level)):
            queue.add_task(drain)

    # -- the scheduling loop ------------------------------------------------------------------

    def _process(self, stream: int, inline: list[int], outline: list[int],
                 batch: deque[tuple[int, list[int]]] | None = None) -> None:
        """TFRT's ``ProcessReadyKernels``: run ready kernels LIFO, enqueue other streams.

        The common case -- a static-mode kernel, no error so far, no tracer -- calls the
        kernel's generated binding directly; everything else goes through
        :meth:`_run_general`.  Results are published by :meth:`_publish`.  A batch task
        (:meth:`_enqueue_outline`) passes the shared ``batch`` of stream groups: whenever the
        current stream runs dry it takes the next group, until none is left.
        """
        tracer = self.tracer
        if tracer is not None:
            # TFRT's executor opens this scope around every ProcessReadyKernels call (the
            # first run, each continuation and each enqueued stream task); kernel scopes nest
            # inside it.
            tracer.begin_scope(PROCESS_READY_KERNELS_SCOPE, TRACE_LEVEL_VERBOSE)
            try:
                self._process_loop(stream, inline, outline, batch)
            finally:
                tracer.end_scope()
        else:
            self._process_loop(stream, inline, outline, batch)

    def _process_loop(self, stream: int, inline: list[int], outline: list[int],
                      batch: deque[tuple[int, list[int]]] | None) -> None:
        """The loop of :meth:`_process` (see there)."""
        kernels = self.kernels
        registers = self.registers
        request = self.request
        slow = self.tracer is not None
        publish = self._publish
        while True:
            if not inline:
                if not outline:
                    if not batch:
                        return
                    try:
                        stream, inline = batch.popleft()
                    except IndexError:  # another worker took the last group
                        return
                    continue
                stream = _switch_stream(kernels, inline, outline)
            if outline:
                self._enqueue_outline(outline)
            k = kernels[inline.pop()]
            # 1. Run the kernel (docs/executor.md).
            call = k.call
            if call is None or slow or self.errors or request._cancel_value is not None:
                results = self._run_general(k)
            else:
                try:
                    out = call(registers, self)
                except Exception as exc:  # noqa: BLE001 - every kernel error becomes a diagnostic
                    results = self._report(k, _message(exc))
                else:
                    if k.num_results == 1 and out.__class__ in k.payload_ok:
                        # One result, a plain payload: no AsyncValue unless the register needs
                        # one.  Release the arguments first (a value dies right after its
                        # last consumer), then publish.
                        for r in k.release:
                            registers[r].drop_ref()
                        publish(k.result_info[0], out, stream, inline, outline, k, True)
                        continue
                    results = self._results_of(k, out)
            # 2. Release the arguments.
            for r in k.release:
                registers[r].drop_ref()
            # 3. Publish the results and schedule the kernels that became ready.
            for info, value in zip(k.result_info, results):  # noqa: B905 - equal by construction
                publish(info, value, stream, inline, outline, k)

    def _run_general(self, k: KernelInfo) -> list[AsyncValue[Any]]:
        """Run ``k`` or forward an error operand or the cancellation (docs/executor.md)."""
        # Unboxed registers (static-mode consumers only) hold a bare payload or an error value.
        args: list[Any] = [self.registers[r] for r in k.operands]
        error = self.request._cancel_value
        if self.errors:
            for a in args:
                if isinstance(a, AsyncValue) and a._state == ERROR:  # the last error wins
                    error = a
        tracer = self.tracer
        if error is not None:
            # Every result is the error, one reference per counted result slot.
            refs = sum(1 for info in k.result_info if info[3])
            if refs:
                error.add_ref(refs)
            if tracer is not None:
                tracer.skip_kernel(k, error)
            return [error] * k.num_results
        if tracer is not None:
            tracer.begin_kernel(
                k, [a if isinstance(a, AsyncValue) else make_available(a) for a in args]
            )
            results = self._call(k, args)
            tracer.end_kernel(results)
            return results
        return self._call(k, args)

    def _results_of(self, k: KernelInfo, out: Any) -> list[AsyncValue[Any]]:
        """The result values for a static-mode kernel's return value (``store_results``)."""
        n = k.num_results
        if n == 1:
            if isinstance(out, AsyncValue):
                return [out]  # owned: a kernel returning an argument added a ref (docs/host.md)
            if out is None:
                return self._report(k, f"kernel '{k.name}' returned no value for its result")
            wrong = _payload_error(k, 0, out)
            if wrong is not None:
                return self._report(k, wrong)
            k.payload_ok.add(out.__class__)  # the fast path takes it from now on (atomic add)
            return [make_available(out)]
        if n == 0:
            return []
        wrong = _results_error(k, out)
        if wrong is not None:
            return self._report(k, wrong)
        return [v if isinstance(v, AsyncValue) else make_available(v) for v in out]

    def _call(self, k: KernelInfo, args: list[AsyncValue[Any]]) -> list[AsyncValue[Any]]:
        """Call kernel ``k`` on available, non-error ``args``; returns its result values."""
        if k.mode == MODE_STATIC:
            try:
                out = k.call(self.registers, self)
            except Exception as exc:  # noqa: BLE001 - every kernel error becomes a diagnostic
                return self._report(k, _message(exc))
            return self._results_of(k, out)
        if k.mode == MODE_SYNC:
            return self._call_sync_kernel(k, args)
        return self._call_frame(k, args)

    def _make_frame(self, k: KernelInfo, args: Sequence[AsyncValue[Any]]) -> KernelFrame:
        ctx = self.kernel_context(k) if k.needs_context else self.exec_ctx
        return KernelFrame(args, k.attrs, k.funcs, k.num_results, ctx, k.location, k.name)

    def _report(self, k: KernelInfo, message: str) -> list[AsyncValue[Any]]:
        """Emit ``message`` at ``k``'s location; every result becomes that error."""
        frame = self._make_frame(k, ())
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
            return self._report(k, _message(exc))
        if len(values) != k.num_results:
            return self._report(k, f"kernel '{k.name}' must return {k.num_results} results")
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
