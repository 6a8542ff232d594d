"""Whole-function execution: an async BEF function that needs no asynchrony, run as Python code.

The dataflow executor (:mod:`pytfrt.executor.async_executor`) pays for futures, reference
counts and work-queue tasks on every kernel.  A function whose kernels all complete
synchronously needs none of that: at load time :func:`attach` decides, per function, whether it
*qualifies*, and if so translates it once into one straight-line Python function (like a
``tfrt.sync`` function, :mod:`pytfrt.executor.sync_executor`) that :class:`BEFFunction.execute`
calls instead of the dataflow executor (docs/executor.md, "Whole-function execution").

A function qualifies when every kernel is

* a kernel whose parameters bind statically without an AsyncValue or a KernelFrame
  (:mod:`pytfrt.executor.call_plan`) and takes no Function, or a sync kernel, and whose return
  annotation does not mention ``AsyncValue`` (its results are plain values); or
* ``tfrt.call`` of a qualifying BEF function, ``tfrt.if``/``tfrt.cond`` whose branches
  qualify, ``tfrt.repeat.i32`` or ``tfrt.while`` (``parallel_iterations`` 1) whose body
  qualifies -- these are inlined as Python ``if`` blocks and loops, no recursion.

Tensors and other values of non-scalar types may be passed through branches and loops only
unchanged (in the same position), so which registers share a value is known at load time.

What stays observable is kept (docs/executor.md):

* *order*: kernels run in the order the dataflow executor would run them on the ``s`` queue
  with every result available at once (:func:`schedule` replays its scheduling rules);
* *errors*: an exception emits the diagnostic at the kernel's location and its results become
  the error; a kernel with an error operand is skipped and its results are the last error
  operand, silently; independent kernels still run; errors reach the function's results.  No
  fallback: the error propagation is part of the generated code, behind one flag that is false
  while nothing went wrong;
* *cancellation and deadlines*: checked on entry, at every loop iteration and after every
  kernel that receives an ExecutionContext; once cancelled, kernels not yet started are skipped
  and their results are the cancellation value (``tfrt.repeat.i32`` ends with it);
* *destroy hooks*: a value of a non-scalar type produced by a kernel is destroyed
  (``__tfrt_destroy__``) right after its last consumer, as its AsyncValue would be;
* *results*: the caller gets available AsyncValues (an argument passed through is returned
  itself, with a new reference).

Not taken (the dataflow executor runs the call instead): tracing on, an argument not
available yet, ``PYTFRT_WHOLE_FUNCTION=0`` or ``load_program(..., whole_function=False)``.
A kernel that returns an AsyncValue anyway is unwrapped if it is available (the value keeps
its reference until its last consumer); an unavailable one is awaited when the thread may
block, else its results become an error with a diagnostic saying so.

Thread-safety: the generated function keeps all state in locals; any number of threads may run
one function at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from itertools import groupby
from typing import Any, Final

from pytfrt import config
from pytfrt.executor.async_executor import (
    BEFFunction,
    _message,
    _payload_error,
    _results_error,
    _switch_stream,
)
from pytfrt.executor.fused_segments import (
    FusedSegment,
    NotFusible,
    SegmentBuilder,
    Sym,
    provider,
)
from pytfrt.executor.kernel_info import (
    MODE_STATIC,
    MODE_SYNC,
    PLAIN_REGISTER_TYPES,
    FunctionInfo,
    KernelInfo,
)
from pytfrt.host.async_value import (
    CONCRETE,
    ERROR,
    AsyncValue,
    IndirectAsyncValue,
    make_available,
    make_error,
)
from pytfrt.host.execution_context import ExecutionContext
from pytfrt.host.function import Function
from pytfrt.host.kernel_frame import KernelFrame
from pytfrt.support.codegen import CodeBuilder, exec_generated
from pytfrt.support.errors import Status

ENV_SWITCH: Final = "PYTFRT_WHOLE_FUNCTION"
"""Environment variable: ``0`` turns whole-function execution off for programs loaded later."""

FUSE_SWITCH: Final = "PYTFRT_FUSE_SEGMENTS"
"""Environment variable: ``0`` turns fused segments off for programs loaded later (the
generated code then calls every kernel)."""

MAX_INLINED_KERNELS: Final = 20000
"""A function inlining more kernels than this keeps the dataflow executor."""

MAX_SEGMENT_ITEMS: Final = 256
"""Kernels (and calls) one fused segment may span at most (bounds the generation time)."""

MAX_BLOCK_DEPTH: Final = 8
"""Nested control-flow levels one generated function may have (Python limits nested blocks)."""

MAX_CALL_DEPTH: Final = 32
"""Nested calls one generated function may inline (the analysis recurses per call): a deeper
chain keeps the dataflow executor, which runs any depth in constant stack."""

_CONTROL_FLOW_MODULE: Final = "pytfrt.kernels.basic.control_flow"
_BASIC_KERNELS: Final = "pytfrt.kernels.basic."
_CONSTANT_PREFIX: Final = "tfrt.constant."
_CALL: Final = "tfrt.call"
_IF: Final = frozenset({"tfrt.if", "tfrt.cond"})
_REPEAT: Final = "tfrt.repeat.i32"
_WHILE: Final = "tfrt.while"


def fuse_by_default() -> bool:
    """Whether whole-function code fuses segments of tensor kernels (``PYTFRT_FUSE_SEGMENTS``,
    on unless ``0``; needs the CPU backend's fused kernels)."""
    if not config.flag(FUSE_SWITCH):
        return False
    return provider() is not None


def enabled_by_default() -> bool:
    """Whether whole-function execution is on unless a loader says otherwise (the env switch)."""
    return config.flag(ENV_SWITCH)


# -- scheduling ---------------------------------------------------------------------------------


def schedule(info: FunctionInfo) -> tuple[list[int], list[int]]:
    """The kernel ids of ``info`` in the order the dataflow executor runs them, and the
    positions in that order where a work-queue task starts (the kernels before the first
    one run in the call itself, the others later, one task after the other).

    Replays ``_Invocation._start``/``_process``/``_enqueue_outline`` (docs/executor.md) with
    every result available when published and the ``s`` queue's FIFO of tasks: ready kernels
    of the current stream LIFO, other streams sorted by stream id into one batch task.
    """
    kernels = info.kernels
    remaining = [k.init_count for k in kernels]
    streams = info.streams
    order: list[int] = []
    tasks: deque[deque[tuple[int, list[int]]]] = deque()

    def publish(users: Sequence[int], stream: int, inline: list[int],
                outline: list[int]) -> None:
        for u in users:
            remaining[u] -= 1
            if remaining[u] == 0:
                (inline if streams[u] == stream else outline).append(u)

    def enqueue(outline: list[int]) -> None:
        stream_of = streams.__getitem__
        outline.sort(key=stream_of)
        tasks.append(deque((s, list(g)) for s, g in groupby(outline, stream_of)))
        outline.clear()

    def process(stream: int, inline: list[int], outline: list[int],
                batch: deque[tuple[int, list[int]]]) -> None:
        while True:
            if not inline:
                if not outline:
                    if not batch:
                        return
                    stream, inline = batch.popleft()
                    continue
                stream = _switch_stream(kernels, inline, outline)
            if outline:
                enqueue(outline)
            k = inline.pop()
            order.append(k)
            kern = kernels[k]
            for r, users in zip(kern.results, kern.used_by, strict=True):
                if info.user_counts[r]:
                    publish(users, stream, inline, outline)

    pseudo = kernels[0]
    inline: list[int] = []
    outline: list[int] = []
    publish(pseudo.used_by[0], pseudo.stream, inline, outline)
    for a in range(info.num_arguments):
        if pseudo.has_users[a + 1]:
            publish(pseudo.used_by[a + 1], pseudo.stream, inline, outline)
    process(pseudo.stream, inline, outline, deque())
    starts: list[int] = []
    while tasks:
        if len(order) not in starts:
            starts.append(len(order))
        process(-1, [], [], tasks.popleft())
    return order, starts


# -- qualification --------------------------------------------------------------------------------


class _NotQualified(Exception):
    """The function keeps the dataflow executor (the message says why, for debugging)."""




def _control_flow(k: KernelInfo) -> str | None:
    """``k``'s control-flow name if it is one of the built-in kernels inlined here."""
    fn = k.fn
    if fn is None or getattr(fn, "__module__", None) != _CONTROL_FLOW_MODULE:
        return None
    if k.name == _CALL or k.name in _IF or k.name in (_REPEAT, _WHILE):
        return k.name
    return None


def _is_plain(t: str | None) -> bool:
    return t in PLAIN_REGISTER_TYPES


def _register_types(fn: BEFFunction) -> list[str | None]:
    info = fn.info
    types: list[str | None] = [None] * info.num_registers
    for a, t in enumerate(fn.argument_types):
        if a < len(types):
            types[a] = t
    for k in info.kernels[1:]:
        for r, rt in zip(k.results, k.result_types, strict=True):
            types[r] = rt
    return types


def _check_kernel(k: KernelInfo) -> None:
    if k.entry is None:
        raise _NotQualified(f"kernel '{k.name}' is unresolved")
    if k.mode == MODE_SYNC:
        pass
    elif k.mode == MODE_STATIC:
        if any(kind == "a" for kind, _ in k.slots):
            raise _NotQualified(f"kernel '{k.name}' takes an AsyncValue")
        if any(what in ("func", "funcs") for what, _ in k.constants):
            raise _NotQualified(f"kernel '{k.name}' takes a Function")
    else:
        raise _NotQualified(f"kernel '{k.name}' takes a KernelFrame")
    if k.entry.signature.returns_async:
        raise _NotQualified(f"kernel '{k.name}' may return an AsyncValue")


# -- code generation ------------------------------------------------------------------------------


class _Instance:
    """One inlined copy of a function body: its register -> variable map."""

    def __init__(self, fn: BEFFunction, names: dict[int, str], ctx_var: str) -> None:
        self.fn = fn
        self.info = fn.info
        self.names = names
        self.ctx_var = ctx_var
        self.types = _register_types(fn)


class _Generator:
    """Translates one qualifying function (with everything it inlines) into Python source."""

    def __init__(self) -> None:
        self.code = CodeBuilder({
            "_skip": _skip, "_fail": _fail, "_chk1": _chk1, "_chkn": _chkn, "_chks": _chks,
            "_rel": _rel, "_loc": _loc, "_AV": AsyncValue, "_int": int, "_NA": _NA,
        })
        self.namespace = self.code.namespace
        self.hoisted: list[str] = []
        self.counter = 0
        self.kernels = 0
        self.active: list[BEFFunction] = []
        # Whether some inlined body has kernels outside its root stream (docs/executor.md).
        self.multi_stream = False
        self.deferred = False  # the top-level body yields before its deferred part
        # Fused segments (pytfrt.executor.fused_segments): on unless switched off.
        self.fuse = fuse_by_default()
        self.raw = False
        self.pin: tuple[dict[int, str], dict[int, str]] | None = None
        if self.fuse:
            from pytfrt.host.async_value import CHAIN

            dht, f32 = provider().tensor_types()
            # NumPy-free processes (pytfrt.host.numpy_free): tensors pass their buffer (.raw),
            # f32 scalars are Python floats, new tensors are bytearrays shaped on the way out.
            self.raw = provider().buffer_flavour()
            self.namespace.update(_DHT=dht, _F32D=f32, _F32=provider().scalar_type(),
                                  _CHAIN=CHAIN, _INT=int,
                                  _WRAP=provider().new_tensor_wrapper())

    def var(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    @property
    def lines(self) -> list[str]:
        """The lines being emitted (swapped out and back to build alternative blocks)."""
        return self.code.lines

    @lines.setter
    def lines(self, value: list[str]) -> None:
        self.code.lines = value

    def const(self, value: Any) -> str:
        return self.code.const(value)

    def emit(self, depth: int, line: str) -> None:
        self.code.line(depth, line)

    def located(self, k: KernelInfo) -> str:
        """A variable holding ``k``'s located ExecutionContext (computed once per call)."""
        name = self.var().replace("v", "x", 1)
        self.hoisted.append(f"{name} = _loc(ctx, {self.const(k)})")
        return name

    # -- one function body ------------------------------------------------------------------

    def body(self, fn: BEFFunction, arg_names: Sequence[str], ctx_var: str, depth: int,
             level: int, top: bool = False) -> tuple[list[str], list[tuple[str, int]]]:
        """Emit ``fn``'s kernels; returns the result variables and, per result, its origin:
        ``("arg", i)`` an argument passed through unchanged, ``("new", root)`` otherwise."""
        if fn in self.active:
            raise _NotQualified(f"function '{fn.name}' is recursive")
        if level > MAX_BLOCK_DEPTH:
            raise _NotQualified("control flow nested too deeply")
        if len(self.active) > MAX_CALL_DEPTH:
            raise _NotQualified("calls nested too deeply to inline")
        self.active.append(fn)
        info = fn.info
        names = dict(enumerate(arg_names))
        inst = _Instance(fn, names, ctx_var)
        order, starts = schedule(info)
        task_starts = set(starts) if top else set()
        if any(info.kernels[kid].stream != info.kernels[0].stream for kid in order):
            self.multi_stream = True
        # Alias roots: a register shares its value with another (a call result passed through
        # from an argument, a loop value carried unchanged); the value dies after the root's
        # last use.  Roots of arguments and of returned registers are never released here.
        root = list(range(info.num_registers))
        kinds: list[str] = []
        plans: list[Any] = []
        for kid in order:
            k = info.kernels[kid]
            cf = _control_flow(k)
            if cf is None:
                _check_kernel(k)
                plans.append(None)
            else:
                plans.append(self._plan_control_flow(cf, k))
                for r, origin in zip(k.results, plans[-1][1], strict=True):
                    if origin is not None:
                        root[r] = root[k.operands[origin]]
            kinds.append(cf or "")
        last: dict[int, int] = {}
        for pos, kid in enumerate(order):
            k = info.kernels[kid]
            for r in k.operands:
                last[root[r]] = pos
            for r in k.results:
                last.setdefault(root[r], pos)
                last[root[r]] = max(last[root[r]], pos)
        keep = {root[a] for a in range(info.num_arguments)}
        keep |= {root[r] for r in info.result_registers}
        releases: dict[int, list[int]] = {}
        for r in range(info.num_registers):
            if root[r] != r or r in keep or r < info.num_arguments or _is_plain(inst.types[r]):
                continue
            if r not in last:
                continue
            releases.setdefault(last[r], []).append(r)
        defined = set(range(info.num_arguments))

        def emit_item(pos: int, d: int) -> None:
            k = info.kernels[order[pos]]
            self.kernels += 1
            if self.kernels > MAX_INLINED_KERNELS:
                raise _NotQualified("too many kernels to inline")
            if kinds[pos]:
                self._emit_control_flow(inst, k, kinds[pos], plans[pos], d, level)
            else:
                self._emit_kernel(inst, k, d)
            for r in sorted(releases.get(pos, ()), key=lambda r: _release_rank(k, r)):
                self.emit(d, f"_rel({names[r]}, H)")

        pos = no_segment_before = 0
        while pos < len(order):
            k = info.kernels[order[pos]]
            if pos in task_starts:
                # What follows runs in a work-queue task, as the dataflow executor's other
                # streams: hand out the results computed so far (``WholeFunction.execute``).
                self.deferred = True
                known = [names[r] if r in defined else "_NA" for r in info.result_registers]
                self.emit(depth, f"yield [{', '.join(known)}]")
                self.emit(depth, "if R._cancel_value is not None: E = True")
            found = None
            if self.fuse and pos >= no_segment_before:
                tried = self._segment(inst, order, kinds, pos, task_starts)
                if isinstance(tried, int):  # none starts before that position either
                    no_segment_before = tried
                else:
                    found = tried
            if found is None:
                defined.update(k.results)
                emit_item(pos, depth)
                pos += 1
                continue
            end, builder, env, deferred = found
            saved, self.lines = self.lines, []
            for p in range(pos, end):
                defined.update(info.kernels[order[p]].results)
                emit_item(p, depth + 1)
            fallback, self.lines = self.lines, []
            # The fused path runs the deferred items after the native call, into the same
            # variables as the unfused path.
            pinned = {r: names[r] for p in deferred for r in info.kernels[order[p]].results}
            outer_pin, self.pin = self.pin, (names, pinned)  # segments nest (in branches)
            for p in deferred:
                emit_item(p, depth + 1)
            self.pin = outer_pin
            after, self.lines = self.lines, saved
            self._emit_segment(inst, order, pos, end, builder, env, releases, depth,
                               set(deferred))
            self.lines.extend(after)
            self.emit(depth, "else:")
            self.lines.extend(fallback)
            pos = end
        self.active.pop()
        results = [names[r] for r in info.result_registers]
        origins: list[tuple[str, int]] = []
        for r in info.result_registers:
            rt = root[r]
            origins.append(("arg", rt) if rt < info.num_arguments else ("new", rt))
        return results, origins

    def _operands_and_results(self, names: dict[int, str], k: KernelInfo
                              ) -> tuple[list[str], str, list[str]]:
        """``k``'s operand variables (a list and a tuple expression) and new result variables."""
        ops = [names[r] for r in k.operands]
        outs = []
        pinned = self.pin[1] if self.pin is not None and self.pin[0] is names else {}
        for r in k.results:
            names[r] = pinned.get(r) or self.var()
            outs.append(names[r])
        return ops, f"({', '.join(ops)}{',' if len(ops) == 1 else ''})", outs

    # -- fused segments (pytfrt.executor.fused_segments) ------------------------------------------

    def _segment(self, inst: _Instance, order: list[int], kinds: list[str], pos: int,
                 task_starts: set[int]
                 ) -> tuple[int, SegmentBuilder, dict[int, Any], list[int]] | int | None:
        """The longest segment starting at ``pos``: ``(end, builder, register -> (Sym or
        None, Python expression), deferred positions)``; ``None`` if none starts there; a
        position if none worth it starts before it (only chains, constants, shapes or new
        tensors up to there).  At most :data:`MAX_SEGMENT_ITEMS` items.

        Items that cannot be fused but see only scalar and chain values (operands and
        results) may sit inside a segment: they touch no tensor, so the fused path runs them
        after the native call (the unfused path keeps the original order)."""
        info = inst.info
        builder = SegmentBuilder(self.const)
        env: dict[int, tuple[Sym | None, str]] = {}
        deferred: list[int] = []
        deferred_regs: set[int] = set()
        end = last = pos
        while end < len(order) and end - pos < MAX_SEGMENT_ITEMS:
            if end != pos and end in task_starts:
                break
            k = info.kernels[order[end]]
            trial, trial_env = builder.clone(), dict(env)
            try:
                if deferred_regs.intersection(k.operands):
                    raise NotFusible("uses a deferred result")
                self._fuse_item(trial, trial_env, inst.names, k, kinds[end], [])
            except NotFusible:
                if end == pos or not all(_is_plain(inst.types[r])
                                         for r in (*k.operands, *k.results)):
                    break
                deferred.append(end)
                deferred_regs.update(k.results)
                end += 1
                continue
            builder, env = trial, trial_env
            end += 1
            last = end
        if last == pos:
            return None
        if builder.kernels == 0 and (builder.allocs or deferred):
            return last
        return last, builder, env, [p for p in deferred if p < last]

    def _fuse_item(self, builder: SegmentBuilder, env: dict[int, Any], names: dict[int, str],
                   k: KernelInfo, kind: str, stack: list[BEFFunction]) -> None:
        """Add kernel ``k`` (or the body of the function it calls) to ``builder``."""
        operands = [env[r] if r in env else (None, names[r]) for r in k.operands]
        if kind == _CALL:
            callee = k.funcs[0] if k.funcs else None
            if not isinstance(callee, BEFFunction) or callee in stack or \
                    callee in self.active or len(stack) > MAX_CALL_DEPTH:
                raise NotFusible("call")
            cinfo = callee.info
            if cinfo.num_arguments != len(operands) or \
                    len(cinfo.result_registers) != k.num_results:
                raise NotFusible("call does not fit")
            cenv: dict[int, Any] = dict(enumerate(operands))
            corder, _ = schedule(cinfo)
            for kid in corder:
                ck = cinfo.kernels[kid]
                self._fuse_item(builder, cenv, {}, ck, _control_flow(ck) or "",
                                [*stack, callee])
            results = [cenv[r] for r in cinfo.result_registers]
        elif kind:
            raise NotFusible(kind)
        else:
            try:
                _check_kernel(k)
            except _NotQualified:
                raise NotFusible(k.name) from None
            if not str(getattr(k.fn, "__module__", "")).startswith("pytfrt."):
                raise NotFusible("not a built-in kernel")
            results = [(sym, "") for sym in builder.add(k, operands, _fold_constant(k))]
        for r, value in zip(k.results, results, strict=True):
            env[r] = value

    def _emit_segment(self, inst: _Instance, order: list[int], start: int, end: int,
                      builder: SegmentBuilder, env: dict[int, Any],
                      releases: dict[int, list[int]], depth: int, deferred: set[int]
                      ) -> None:
        """The fused path of a segment up to its deferred items (the caller appends them and
        the unfused path, its ``else``)."""
        info, names = inst.info, inst.names
        inside: list[int] = []
        for p in range(start, end):
            if p not in deferred:
                inside.extend(info.kernels[order[p]].results)
        used = set(info.result_registers)
        for p in [*range(end, len(order)), *deferred]:
            used.update(info.kernels[order[p]].operands)
        outs: list[str] = []
        assigns: list[str] = []
        for r in dict.fromkeys(inside):
            if r not in used:
                continue
            sym, py = env[r]
            if sym is None:
                expr = py
            elif sym.kind in "nsi":
                outs.append(sym.name)
                if sym.kind != "n":
                    expr = f"_f[{len(outs)}]"
                elif self.raw:
                    dims = next(a[1] for a in builder.allocs if a[0] == sym.name)
                    expr = (f"_WRAP(None if _alloc is None else ctx, _F32D, _f[{len(outs)}], "
                            f"{dims!r})")
                else:
                    expr = (f"(_DHT(_F32D, _f[{len(outs)}]) if _alloc is None else "
                            f"_WRAP(ctx, _F32D, _f[{len(outs)}]))")
            elif sym.kind == "c":
                expr = "_CHAIN"
            else:
                expr = sym.py
            assigns.append(f"{names[r]} = {expr}")
        d = depth
        if builder.allocs:
            for line in ("_alloc = ctx.request_context.host.allocator",
                         "_fuse_alloc = _alloc is None or _alloc.fused_ok"):
                if line not in self.hoisted:
                    self.hoisted.append(line)
        if builder.kernels:
            conds = ["not E"]
            conds += [f"{py}.__class__ is _DHT and {py}.dtype is _F32D"
                      + (f" and {py}.raw is not None" if self.raw else "")
                      for py in builder.ext_tensors]
            conds += [f"{py}.__class__ is _F32" for py in builder.ext_scalars]
            conds += [f"{py}.__class__ is _INT" for py in builder.ext_ints]
            if builder.allocs:
                # New tensors: fused only under an allocator that never refuses and reports
                # nothing but the balance (HostAllocator.fused_ok); those that leave the
                # segment are accounted with it (wrap_result), as the kernels account them.
                conds.append("_fuse_alloc")
            seg = self.const(FusedSegment(builder.source(outs), inst.fn.name,
                                          builder.calls_back))
            field = "raw" if self.raw else "array"
            args = [f"{py}.{field}" for py in builder.ext_tensors] + list(builder.ext_scalars) \
                + list(builder.ext_ints)
            self.emit(d, f"_f = {seg}({', '.join(args)}) if {' and '.join(conds)} else None")
        else:
            self.emit(d, "_f = None if E else True")
        self.emit(d, "if _f is not None:")
        for a in assigns:
            self.emit(d + 1, a)
        inside_set = set(inside)
        for p in range(start, end):
            if p in deferred:
                continue
            k = info.kernels[order[p]]
            for r in sorted(releases.get(p, ()), key=lambda r: _release_rank(k, r)):
                if r not in inside_set:
                    self.emit(d + 1, f"_rel({names[r]}, H)")
        if builder.kernels:
            self.emit(d + 1, "if R._cancel_value is not None: E = True")
        elif not assigns:
            self.emit(d + 1, "pass")

    # -- plain kernels ------------------------------------------------------------------------

    def _emit_kernel(self, inst: _Instance, k: KernelInfo, depth: int) -> None:
        names = inst.names
        ops, ops_tuple, outs = self._operands_and_results(names, k)
        folded = _fold_constant(k)
        if folded is not None:  # computed at load time; skipped like any kernel when cancelled
            self.emit(depth, "if E and (_s := _skip(R, ())) is not None:")
            self.emit(depth + 1, f"{outs[0]} = _s")
            self.emit(depth, "else:")
            self.emit(depth + 1, f"{outs[0]} = {self.const(folded[0])}")
            return
        kc = self.const(k)
        x = self.located(k) if any(kind == "x" for kind, _ in k.slots) else "ctx"
        n = len(outs)
        if k.mode == MODE_SYNC:
            call = (f"{self.const(k.entry.call_sync)}([{', '.join(ops)}], "  # type: ignore[union-attr]
                    f"{self.const(k.attrs)}, {self.const(k.funcs)}, {inst.ctx_var})")
        else:
            parts = []
            for kind, i in k.slots:
                if kind in "vp":
                    parts.append(names[i])
                elif kind == "x":
                    parts.append(x)
                else:
                    value = _constant(k, k.constants[i])
                    parts.append(self.const(value) if kind == "c" else f"list({self.const(value)})")
            call = f"{self.const(k.fn)}({', '.join(parts)})"
        takes_ctx = k.needs_context or k.mode == MODE_SYNC
        d = depth
        if n == 0:
            self.emit(d, f"if not E or _skip(R, {ops_tuple}) is None:")
            self.emit(d + 1, "try:")
            self.emit(d + 2, f"{call}" if k.mode != MODE_SYNC else f"_t = {call}")
            self.emit(d + 1, "except Exception as _e:")
            self.emit(d + 2, f"_fail(ctx, {kc}, _e)")
            self.emit(d + 2, "E = True")
            if k.mode == MODE_SYNC:
                self.emit(d + 1, "else:")
                self.emit(d + 2, f"if _t: _t, E = _chks(ctx, {kc}, _t, E, H)")
        else:
            target = " = ".join(outs)
            self.emit(d, f"if E and (_s := _skip(R, {ops_tuple})) is not None:")
            self.emit(d + 1, f"{target} = _s")
            self.emit(d, "else:")
            self.emit(d + 1, "try:")
            self.emit(d + 2, f"_t = {call}")
            self.emit(d + 1, "except Exception as _e:")
            self.emit(d + 2, f"{target} = _fail(ctx, {kc}, _e)")
            self.emit(d + 2, "E = True")
            self.emit(d + 1, "else:")
            if k.mode == MODE_SYNC:
                self.emit(d + 2, f"if _t.__class__ is not list or len(_t) != {n}:")
                self.emit(d + 3, f"_t, E = _chks(ctx, {kc}, _t, E, H)")
                self.emit(d + 2, f"{', '.join(outs)}, = _t")
            elif n == 1:
                ok = self.const(set())
                self.emit(d + 2, f"if _t.__class__ not in {ok}:")
                self.emit(d + 3, f"_t, E = _chk1(ctx, {kc}, _t, E, H, {ok})")
                self.emit(d + 2, f"{outs[0]} = _t")
            else:
                oks: list[set[type]] = [set() for _ in outs]
                okn = self.const(oks)
                test = " or ".join(f"_t[{i}].__class__ not in {self.const(s)}"
                                   for i, s in enumerate(oks))
                self.emit(d + 2, f"if _t.__class__ is not tuple or len(_t) != {n} or {test}:")
                self.emit(d + 3, f"_t, E = _chkn(ctx, {kc}, _t, E, H, {okn})")
                self.emit(d + 2, f"{', '.join(outs)}, = _t")
        if takes_ctx:
            self.emit(d, "if R._cancel_value is not None: E = True")

    # -- control flow ---------------------------------------------------------------------------

    def _plan_control_flow(self, cf: str, k: KernelInfo) -> tuple[list[BEFFunction], list[Any]]:
        """Check ``k``'s callees; returns them and, per result, the operand index it passes
        through unchanged (``None``: a new value)."""
        callees: list[BEFFunction] = []
        for f in k.funcs:
            if not isinstance(f, BEFFunction):
                raise _NotQualified(f"'{k.name}' calls a function that cannot be inlined")
            callees.append(f)
        nres = k.num_results
        nops = len(k.operands)
        origins: list[Any] = [None] * nres
        if cf == _CALL:
            (callee,) = callees
            if callee.info.num_arguments != nops or len(callee.result_types) != nres:
                raise _NotQualified("tfrt.call does not fit its callee")
            for i, (what, j) in enumerate(_origins(callee, self.active)):
                if what == "arg":
                    origins[i] = j
            return callees, origins
        if cf in _IF:
            if not callees or nops < 1:
                raise _NotQualified("tfrt.if without branches")
            if len(callees) == 1 and nres:
                raise _NotQualified("tfrt.if without else has results")
            for f in callees:
                if f.info.num_arguments != nops - 1 or len(f.result_types) != nres:
                    raise _NotQualified("tfrt.if branch does not fit")
            return callees, _passthrough(k)
        if cf == _REPEAT:
            (body,) = callees
            if nops < 1 or nres != nops - 1 or body.info.num_arguments != nres or \
                    len(body.result_types) != nres:
                raise _NotQualified("tfrt.repeat.i32 does not fit its body")
            return callees, _passthrough(k)
        # tfrt.while
        (body,) = callees
        if k.attrs and int(k.attrs[0]) > 1:
            raise _NotQualified("tfrt.while with parallel_iterations > 1")
        if nops < 1 or nres != nops - 1 or body.info.num_arguments != nres or \
                len(body.result_types) != nres + 1:
            raise _NotQualified("tfrt.while does not fit its body")
        return callees, _passthrough(k)

    def _emit_control_flow(self, inst: _Instance, k: KernelInfo, cf: str, plan: Any,
                           depth: int, level: int) -> None:
        callees, _ = plan
        names = inst.names
        ops, ops_tuple, outs = self._operands_and_results(names, k)
        x = self.located(k)
        d = depth
        self.emit(d, f"if E and (_s := _skip(R, {ops_tuple})) is not None:")
        self.emit(d + 1, (" = ".join(outs) + " = _s") if outs else "pass")
        if cf == _CALL:
            self.emit(d, "else:")
            results, origins = self.body(callees[0], ops, x, d + 1, level + 1)
            self._assign(d + 1, outs, results)
        elif cf in _IF:
            self.emit(d, f"elif {ops[0]}:")
            results, origins = self.body(callees[0], ops[1:], x, d + 1, level + 1)
            self._check_branch(inst, k, origins)
            self._assign(d + 1, outs, results)
            self.emit(d, "else:")
            if len(callees) > 1:
                results, origins = self.body(callees[1], ops[1:], x, d + 1, level + 1)
                self._check_branch(inst, k, origins)
                self._assign(d + 1, outs, results)
            else:
                self.emit(d + 1, "pass")
        elif cf == _REPEAT:
            self.emit(d, "else:")
            carried = [self.var() for _ in outs]
            self._assign(d + 1, carried, ops[1:])
            cancel = self.var()
            self.emit(d + 1, f"for _ in range(_int({ops[0]})):")
            self.emit(d + 2, f"{cancel} = R._cancel_value")
            self.emit(d + 2, f"if {cancel} is not None:")
            self.emit(d + 3, (" = ".join(carried) + f" = {cancel}") if carried else "pass")
            self.emit(d + 3, f"R.stopped({self.const(k.name)}, {self.const(k.location)})")
            self.emit(d + 3, "E = True")
            self.emit(d + 3, "break")
            results, origins = self.body(callees[0], carried, x, d + 2, level + 1)
            self._check_loop(inst, callees[0], origins, len(carried))
            self._assign(d + 2, carried, results)
            self._assign(d + 1, outs, carried)
        else:  # tfrt.while
            self.emit(d, "else:")
            carried = [self.var() for _ in outs]
            cond = self.var()
            self._assign(d + 1, [cond, *carried], ops)
            self.emit(d + 1, "while True:")
            self.emit(d + 2, f"if {cond}.__class__ is _AV or isinstance({cond}, _AV):")
            self.emit(d + 3, (" = ".join(outs) + f" = {cond}") if outs else "pass")
            self.emit(d + 3, "break")
            self.emit(d + 2, f"if not {cond}:")
            if outs:
                self._assign(d + 3, outs, carried)
            self.emit(d + 3, "break")
            self.emit(d + 2, "if R._cancel_value is not None:")
            self.emit(d + 3, "E = True")
            self.emit(d + 3, f"R.stopped({self.const(k.name)}, {self.const(k.location)})")
            results, origins = self.body(callees[0], carried, x, d + 2, level + 1)
            self._check_loop(inst, callees[0], origins[:-1], len(carried))
            self._assign(d + 2, [*carried, cond], results)

    def _assign(self, depth: int, targets: Sequence[str], sources: Sequence[str]) -> None:
        if targets:
            self.emit(depth, f"{', '.join(targets)}, = {', '.join(sources)},")
            return
        last = self.lines[-1]
        if last.endswith(":") and len(last) - len(last.lstrip()) < 4 * depth:
            self.emit(depth, "pass")  # an empty block

    def _check_branch(self, inst: _Instance, k: KernelInfo, origins: list[tuple[str, int]]
                      ) -> None:
        """A branch may return a non-scalar value only if it is its argument in the same
        position as the result (so the result is the operand's value, known at load)."""
        for i, (r, (what, j)) in enumerate(zip(k.results, origins, strict=True)):
            if _is_plain(inst.types[r]):
                continue
            if what != "arg" or j != i:
                raise _NotQualified(f"'{k.name}' result {i} is not its operand {i + 1}")

    def _check_loop(self, inst: _Instance, body: BEFFunction, origins: list[tuple[str, int]],
                    n: int) -> None:
        for i, (what, j) in enumerate(origins[:n]):
            if _is_plain(body.result_types[i]):
                continue
            if what != "arg" or j != i:
                raise _NotQualified(f"loop value {i} of a non-scalar type is not carried unchanged")


def _fold_constant(k: KernelInfo) -> tuple[Any] | None:
    """The value of a built-in ``tfrt.constant.*`` kernel (a pure function of its attribute),
    computed once at load time, or ``None`` (not one, or it fails: then it runs as usual and
    reports its error when the function runs)."""
    fn = k.fn
    if not k.name.startswith(_CONSTANT_PREFIX) or k.mode != MODE_STATIC or k.operands or \
            k.num_results != 1 or k.slots != [("c", 0)] or \
            not str(getattr(fn, "__module__", "")).startswith(_BASIC_KERNELS):
        return None
    try:
        value = fn(k.attrs[0])  # type: ignore[misc]
    except Exception:  # noqa: BLE001 - reported at run time by the kernel itself
        return None
    if value is None or isinstance(value, AsyncValue) or _payload_error(k, 0, value):
        return None
    return (value,)


def _passthrough(k: KernelInfo) -> list[int | None]:
    """Per result of an ``if`` or a loop: the operand whose value it is if its type is not a
    scalar one (checked when the body is generated), else ``None`` (a new value)."""
    return [i + 1 if not _is_plain(t) else None for i, t in enumerate(k.result_types)]


def _origins(fn: BEFFunction, active: list[BEFFunction]) -> list[tuple[str, int]]:
    """Per result of ``fn``: ``("arg", i)`` if it is argument ``i`` passed through unchanged
    (through calls, branches and loops), else ``("new", register)``."""
    if fn in active:
        raise _NotQualified(f"function '{fn.name}' is recursive")
    if len(active) > MAX_CALL_DEPTH:
        raise _NotQualified("calls nested too deeply to inline")
    info = fn.info
    root = list(range(info.num_registers))
    for k in info.kernels[1:]:  # program order is a topological order
        cf = _control_flow(k)
        if cf is None:
            continue
        if cf == _CALL:
            callee = k.funcs[0] if k.funcs else None
            if not isinstance(callee, BEFFunction):
                continue
            through: list[int | None] = [
                j if what == "arg" else None for what, j in _origins(callee, [*active, fn])
            ]
        else:
            through = list(_passthrough(k))
        for r, j in zip(k.results, through, strict=False):
            if j is not None and j < len(k.operands):
                root[r] = root[k.operands[j]]
    n = info.num_arguments
    return [("arg", root[r]) if root[r] < n else ("new", root[r])
            for r in info.result_registers]


def _release_rank(k: KernelInfo, r: int) -> int:
    """Operands are released in operand order, then unused results (as the executor does)."""
    try:
        return k.operands.index(r)
    except ValueError:
        return len(k.operands) + 1


def _constant(k: KernelInfo, constant: tuple[str, int]) -> Any:
    what, i = constant
    if what == "attr":
        return k.attrs[i]
    if what == "attrs":
        return tuple(k.attrs[i:])
    if what == "func":
        return k.funcs[i]
    return tuple(k.funcs[i:])


# -- run-time helpers of the generated code ------------------------------------------------------

_NA: Final = object()
"""A result not computed yet when the top-level body yields."""



def _loc(ctx: ExecutionContext, k: KernelInfo) -> ExecutionContext:
    """``k``'s located context (``_Invocation.kernel_context``'s cache)."""
    cache = k.ctx_cache
    if cache[0] is ctx:
        return cache[1]  # type: ignore[no-any-return]
    located = ExecutionContext(ctx.request_context, ctx.work_queue, k.location)
    k.ctx_cache = (ctx, located)
    return located


def _skip(request: Any, operands: Sequence[Any]) -> AsyncValue[Any] | None:
    """The error a kernel's results become instead of running it, or ``None`` (run it)."""
    error = request._cancel_value
    for a in operands:
        if isinstance(a, AsyncValue):  # registers hold payloads; an AsyncValue is an error
            error = a
    return error  # type: ignore[no-any-return]


def _report(x: ExecutionContext, k: KernelInfo, message: str) -> AsyncValue[Any]:
    frame = KernelFrame((), k.attrs, k.funcs, max(1, k.num_results), x, k.location, k.name)
    frame.report_error(message)
    return frame.results[0]  # type: ignore[return-value]


def _fail(x: ExecutionContext, k: KernelInfo, exc: Exception) -> AsyncValue[Any]:
    """A kernel raised: emit the diagnostic at its location; the error value."""
    return _report(x, k, _message(exc))


def _unwrap(x: ExecutionContext, k: KernelInfo, av: AsyncValue[Any],
            held: dict[int, AsyncValue[Any]]) -> Any:
    """A kernel returned an AsyncValue: its payload (kept in ``held`` until released), or the
    error value."""
    if av._state < CONCRETE:
        try:
            x.host.await_values([av])
        except Exception:  # noqa: BLE001 - e.g. awaiting from a work-queue task
            av.drop_ref()
            return _report(x, k, f"kernel '{k.name}' returned an unavailable value; run the "
                           f"program with {ENV_SWITCH}=0")
    if av._state == ERROR:
        return av
    held[id(av._value)] = av
    return av._value


def _chk1(x: ExecutionContext, k: KernelInfo, out: Any, errors: bool,
          held: dict[int, AsyncValue[Any]], ok: set[type]) -> tuple[Any, bool]:
    """Check a single result (``_Invocation._results_of``); ``(value, errors flag)``."""
    if isinstance(out, AsyncValue):
        value = _unwrap(x, k, out, held)
        return value, errors or isinstance(value, AsyncValue)
    if out is None:
        return _report(x, k, f"kernel '{k.name}' returned no value for its result"), True
    wrong = _payload_error(k, 0, out)
    if wrong is not None:
        return _report(x, k, wrong), True
    ok.add(out.__class__)
    return out, errors


def _chkn(x: ExecutionContext, k: KernelInfo, out: Any, errors: bool,
          held: dict[int, AsyncValue[Any]], oks: list[set[type]]) -> tuple[Any, bool]:
    """Check the results of a kernel with several; ``(tuple of values, errors flag)``."""
    wrong = _results_error(k, out)
    if wrong is not None:
        return (_report(x, k, wrong),) * k.num_results, True
    values = []
    for i, v in enumerate(out):
        if isinstance(v, AsyncValue):
            v = _unwrap(x, k, v, held)
            errors = errors or isinstance(v, AsyncValue)
        else:
            oks[i].add(v.__class__)
        values.append(v)
    return tuple(values), errors


def _chks(x: ExecutionContext, k: KernelInfo, out: Any, errors: bool,
          held: dict[int, AsyncValue[Any]]) -> tuple[Any, bool]:
    """Check a sync kernel's result list (``_Invocation._call_sync_kernel``)."""
    n = k.num_results
    if len(out) != n:
        return [_report(x, k, f"kernel '{k.name}' must return {n} results")] * n, True
    return list(out), errors


def _rel(value: Any, held: dict[int, AsyncValue[Any]]) -> None:
    """A value's last consumer ran: drop it (its ``__tfrt_destroy__`` hook runs)."""
    if held:
        av = held.pop(id(value), None)
        if av is not None:
            av.drop_ref()
            return
    hook = getattr(value, "__tfrt_destroy__", None)
    if hook is not None:
        hook()


# -- the compiled function ------------------------------------------------------------------------


class WholeFunction:
    """The generated code of one qualifying function (see the module docstring).

    Attributes:
        source: the generated Python text (for debugging and tests).
    """

    def __init__(self, fn: BEFFunction, source: str, run: Callable[..., Any],
                 origins: list[tuple[str, int]], multi_stream: bool, deferred: bool) -> None:
        self.fn = fn
        self.source = source
        self.multi_stream = multi_stream
        self.deferred = deferred
        self._run = run
        self._origins = origins
        self._registers = fn.info.result_registers

    def execute(self, exec_ctx: ExecutionContext, arguments: Sequence[AsyncValue[Any]]
                ) -> list[AsyncValue[Any]] | None:
        """Run the function; one owned available AsyncValue per result.

        Returns ``None`` (nothing ran) if an argument is not available yet, or if the function
        spans several streams and the work queue has several threads (the dataflow executor
        runs other streams' kernels on the workers): the caller then uses the dataflow
        executor.
        """
        if self.multi_stream and exec_ctx.queue.parallelism_level > 1:
            return None
        values: list[Any] = []
        errors = False
        for a in arguments:
            state = a._state
            if state == CONCRETE:
                values.append(a._value)
            elif state == ERROR:
                values.append(a)
                errors = True
            else:
                return None
        request = exec_ctx.request_context
        if request._cancel_value is not None:
            errors = True
        held: dict[int, AsyncValue[Any]] = {}
        if not self.deferred:
            outs = self._run(values, exec_ctx, request, errors, held)
            results: list[IndirectAsyncValue[Any]] = [IndirectAsyncValue() for _ in outs]
            self._publish(results, outs, arguments, held)
            return list(results)
        # Part of the body runs in a task (see ``schedule``): the results computed before it
        # are available now, the others once the task ran.  The registers keep their own
        # references to the arguments until then, as the dataflow executor's do.
        run = self._run(values, exec_ctx, request, errors, held)
        first = next(run)
        results = [IndirectAsyncValue() for _ in first]
        self._publish(results, first, arguments, held, partial=True)
        kept = [a.add_ref() for a in arguments]

        queue = exec_ctx.queue

        def rest() -> None:  # one task per task of the dataflow executor
            try:
                known = next(run)
            except StopIteration as stop:
                self._publish(results, stop.value, kept, held)
            except Exception as exc:  # noqa: BLE001 - never leave a result unresolved
                error = make_error(Status(f"whole-function execution of '{self.fn.name}' "
                                          f"failed: {_message(exc)}"))
                self._publish(results, [error] * len(results), kept, held)
                error.drop_ref()
            else:
                self._publish(results, known, kept, held, partial=True)
                queue.add_task(rest)
                return
            for a in kept:
                a.drop_ref()

        queue.add_task(rest)
        return list(results)  # the caller may change its list

    def _publish(self, results: list[IndirectAsyncValue[Any]], outs: Sequence[Any],
                 arguments: Sequence[AsyncValue[Any]], held: dict[int, AsyncValue[Any]],
                 partial: bool = False) -> None:
        """Forward each unresolved result to its value (``_NA``: not yet, if ``partial``).

        As the dataflow executor: one IndirectAsyncValue per result (``is_unique`` stays
        false for a function's results); a register returned twice shares one target.
        """
        made: dict[int, AsyncValue[Any]] = {}
        for ind, reg, v, (what, i) in zip(results, self._registers, outs, self._origins,
                                           strict=True):
            if v is _NA or ind._forwarded:
                continue
            target = made.get(reg)
            if target is not None:
                target.add_ref()
            elif isinstance(v, AsyncValue):  # an error value
                target = v.add_ref()
            elif what == "arg":
                target = arguments[i].add_ref()
            else:
                target = held.pop(id(v), None) if held else None
                if target is None:
                    target = make_available(v)
            made[reg] = target
            ind.forward_to(target)
        if not partial:
            for av in held.values():  # unwrapped values of scalar types (never released)
                av.drop_ref()
            held.clear()


def compile_function(fn: BEFFunction) -> WholeFunction:
    """Translate ``fn`` (a qualifying BEF function) into a :class:`WholeFunction`; if the
    code with fused segments is too big or nests too deeply, the code without them.

    Raises:
        _NotQualified: ``fn`` does not qualify (see the module docstring).
    """
    gen = _Generator()
    if not gen.fuse:
        return _compile(fn, gen)
    try:
        return _compile(fn, gen)
    except _NotQualified:
        gen = _Generator()
        gen.fuse = False
        return _compile(fn, gen)


def _compile(fn: BEFFunction, gen: _Generator) -> WholeFunction:
    info = fn.info
    args = [gen.var() for _ in range(info.num_arguments)]
    results, origins = gen.body(fn, args, "ctx", 1, 0, top=True)
    head = "def _run(args, ctx, R, E, H):\n"
    lines = []
    if args:
        lines.append(f"    {', '.join(args)}, = args")
    lines.extend(f"    {h}" for h in gen.hoisted)
    lines.extend(gen.lines)
    lines.append(f"    return [{', '.join(results)}]")
    source = head + "\n".join(lines) + "\n"
    try:
        exec_generated(source, f"whole function '{fn.name}'", gen.namespace)
    except (SyntaxError, RecursionError, MemoryError) as exc:  # e.g. nesting beyond Python's
        raise _NotQualified(f"generated code does not compile: {exc}") from None
    return WholeFunction(fn, source, gen.namespace["_run"], origins, gen.multi_stream,
                         gen.deferred)


class WholeBEFFunction(BEFFunction):
    """A BEF function that runs as a :class:`WholeFunction` when it can (module docstring).

    Attributes:
        whole_function: the generated code, or ``None`` (the dataflow executor runs it).
        why_not: why it does not qualify (``""`` if it does or was not examined).
    """

    def __init__(self, info: FunctionInfo, argument_types: Sequence[str],
                 result_types: Sequence[str]) -> None:
        super().__init__(info, argument_types, result_types)
        self.whole_function: WholeFunction | None = None
        self.why_not = ""

    def execute(
        self, exec_ctx: ExecutionContext, arguments: Sequence[AsyncValue[Any]]
    ) -> list[AsyncValue[Any]]:
        """As :meth:`BEFFunction.execute`; results may be available already."""
        whole = self.whole_function
        if whole is not None and exec_ctx.request_context.host.tracer is None \
                and len(arguments) == self.info.num_arguments:
            results = whole.execute(exec_ctx, arguments)
            if results is not None:
                return results
        return super().execute(exec_ctx, arguments)


def attach(functions: Sequence[Function]) -> None:
    """Give every qualifying function of a loaded program its whole-function code.

    Sets ``whole_function`` (and ``why_not``) on each :class:`WholeBEFFunction`.
    """
    for f in functions:
        if isinstance(f, WholeBEFFunction):
            try:
                f.whole_function = compile_function(f)
                f.why_not = ""
            except _NotQualified as exc:
                f.whole_function = None
                f.why_not = str(exc)
