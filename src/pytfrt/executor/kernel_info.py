"""Per-function data the executors precompute once at load time (never per call).

A :class:`FunctionInfo` is the executable form of one ``bef.Function``: every kernel resolved to
its registry entry, attributes converted to the plain values kernels receive, function
references resolved to :class:`~pytfrt.host.Function` objects, used-by lists and initial ready
counts laid out as tuples the hot loop reads without further work.

Kernel ids: ``0`` is the pseudo kernel (docs/executor.md), kernel ``k`` of the function body has id
``k + 1``.  Everything here is immutable after :func:`build_function_info` (and the function
fix-up in the loader), so one ``FunctionInfo`` is shared by all concurrent invocations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from pytfrt.bef.program import Function as ProgramFunction
from pytfrt.executor.call_plan import CHAIN_TYPE, Constant, Slot, instantiate, plan_slots
from pytfrt.host.function import Function
from pytfrt.host.registry import KernelEntry, KernelKind
from pytfrt.support.location import Location

# Register types whose payloads are plain Python scalars or the Chain: no ``__tfrt_destroy__``
# hook, so reference counts of such registers are unobservable inside the executor (see
# ``_counted_registers``).
PLAIN_REGISTER_TYPES: Final = frozenset(
    {"i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "index",
     "f16", "bf16", "f32", "f64", CHAIN_TYPE}
)

# How the async executor calls a kernel (chosen once per kernel at load time).
MODE_STATIC: Final = 0  # a generated call function binds every parameter (call_plan)
MODE_FRAME: Final = 1  # general binding through a KernelFrame (entry.invoke)
MODE_SYNC: Final = 2  # a sync kernel used in an async function: entry.call_sync


class KernelInfo:
    """One kernel of a function, ready to run (read-only after loading).

    Attributes:
        name: kernel name (MLIR op name).
        entry: the registry entry (``None`` for the pseudo kernel).
        fn: the kernel's Python function (``entry.fn``).
        mode: ``MODE_STATIC``, ``MODE_FRAME`` or ``MODE_SYNC``.
        call: static mode: the generated ``call(registers, invocation)`` (set by
            :func:`link_functions`), else ``None``.
        operands / results: register indices.
        used_by: per result, the kernel ids using it (MLIR use-list order).
        has_users: per result, whether the register has any use (kernels or return).
        stream: stream id (docs/executor.md).
        init_count: initial ready count ``max(1, len(operands))``.
        attrs: plain attribute values (name-sorted).
        function_ids: indices into ``Program.functions``; ``funcs`` their Function objects.
        location: the op's location.
        needs_context: the kernel takes an ExecutionContext or a KernelFrame.
        release: operand registers whose reference the kernel drops after running (the
            reference-counted ones, in operand order; a register used twice appears twice).
        result_info: per result ``(register, used_by, use count, reference-counted,
            unboxed)`` (see ``FunctionInfo``).
        ctx_cache: ``(parent context, located context)`` of the last call (see
            ``_Invocation.kernel_context``).
        result_types: the declared type of each result (``None`` if unknown).
        payload_ok: payload classes seen to fit ``result_types[0]`` (filled by the executor).
        slots / constants: static mode: the binding plan (:func:`call_plan.plan_slots`).
        takes_values: the kernel receives only payloads of its operands (static mode without
            ``AsyncValue`` parameters, or a sync kernel).
    """

    __slots__ = (
        "name",
        "entry",
        "fn",
        "mode",
        "call",
        "slots",
        "constants",
        "operands",
        "results",
        "used_by",
        "has_users",
        "stream",
        "init_count",
        "attrs",
        "function_ids",
        "funcs",
        "location",
        "needs_context",
        "num_results",
        "takes_values",
        "release",
        "result_info",
        "ctx_cache",
        "result_types",
        "payload_ok",
    )

    def __init__(
        self,
        name: str,
        entry: KernelEntry | None,
        operands: tuple[int, ...],
        results: tuple[int, ...],
        used_by: tuple[tuple[int, ...], ...],
        has_users: tuple[bool, ...],
        stream: int,
        attrs: tuple[Any, ...],
        function_ids: tuple[int, ...],
        location: Location,
        register_types: list[str],
    ) -> None:
        self.name = name
        self.entry = entry
        self.fn = entry.fn if entry is not None else None
        self.operands = operands
        self.results = results
        self.num_results = len(results)
        self.used_by = used_by
        self.has_users = has_users
        self.stream = stream
        self.init_count = max(1, len(operands))
        self.attrs = attrs
        self.function_ids = function_ids
        self.funcs: list[Function] = []
        self.location = location
        self.needs_context = False
        self.mode = MODE_FRAME
        self.call: Any = None
        self.slots: list[Slot] = []
        self.constants: list[Constant] = []
        # Whether the kernel sees only payloads of its operands (never their AsyncValues).
        self.takes_values = False
        self.release: tuple[int, ...] = ()
        self.result_info: tuple[tuple[int, tuple[int, ...], int, bool, bool], ...] = ()
        self.ctx_cache: tuple[Any, Any] = (None, None)
        self.result_types = tuple(_type_of(register_types, r) for r in results)
        # Classes of single-result payloads already checked against ``result_types[0]`` (the
        # executor's fast path publishes those without another look; see async_executor).
        self.payload_ok: set[type] = set()
        if entry is not None:
            self._choose_mode(entry, register_types)

    def _choose_mode(self, entry: KernelEntry, register_types: list[str]) -> None:
        self.needs_context = entry.signature.needs_context
        if entry.kind is KernelKind.SYNC:
            self.mode = MODE_SYNC
            self.takes_values = True
            return
        plan = plan_slots(entry, self.operands, len(self.attrs), len(self.function_ids),
                          register_types)
        if plan is not None:
            self.mode = MODE_STATIC
            self.slots, self.constants = plan
            self.takes_values = all(kind != "a" for kind, _ in self.slots)

    def __repr__(self) -> str:
        return f"<KernelInfo {self.name} stream={self.stream}>"


def _type_of(register_types: list[str], reg: int) -> str | None:
    return register_types[reg] if 0 <= reg < len(register_types) else None


@dataclass
class FunctionInfo:
    """The executable form of one async or sync BEF function (see the module docstring).

    Attributes:
        name: the function name (``""`` for region bodies).
        num_arguments / num_registers: counts.
        user_counts: uses per register (return uses included).
        kernels: kernel infos by kernel id (index 0 is the pseudo kernel).
        streams: stream id by kernel id.
        result_registers: the registers named by the return op.
        result_ref_counts: per result register, the refcount of its IndirectAsyncValue:
            kernel uses + number of times returned + 1 (the executor's pin).
        pseudo_stream: the stream of the pseudo kernel (= the return op's stream).
        release_after: sync functions only: per body kernel, local registers to reset after it.
        counted: per register, whether its value's references are counted (see
            ``_counted_registers``).
        unboxed: per register, whether it holds the bare payload instead of an AsyncValue
            (see ``_unboxed_registers``).
        count_templates: per kernel id, the initial ready-count tokens: ``()`` for a kernel
            that is ready at its first (only) decrement, else a list of ``n`` tokens whose
            bottom one is ``True`` (copied per call; see ``_Invocation``).
    """

    name: str
    num_arguments: int
    num_registers: int
    user_counts: tuple[int, ...]
    kernels: list[KernelInfo]
    streams: tuple[int, ...]
    result_registers: tuple[int, ...]
    result_ref_counts: dict[int, int]
    pseudo_stream: int
    release_after: list[tuple[int, ...]]
    counted: tuple[bool, ...]
    unboxed: tuple[bool, ...]
    count_templates: tuple[Any, ...]


def build_function_info(
    fn: ProgramFunction, entries: list[KernelEntry]
) -> FunctionInfo:
    """Precompute the executable form of ``fn``; ``entries[k]`` is kernel ``k``'s entry.

    ``fn`` must be finalized (``use_counts``/``used_by`` filled).  Function references are
    resolved later, by :func:`link_functions`.
    """
    user_counts = tuple(fn.use_counts)
    types = fn.register_types
    pseudo_stream = fn.root_stream_id
    # Pseudo kernel: result 0 is the "pseudo register" (zero-operand users); then the arguments.
    pseudo_used_by = tuple(tuple(k + 1 for k in users) for users in fn.pseudo_used_by)
    pseudo_has_users = (True,) + tuple(user_counts[a] > 0 for a in range(fn.num_arguments))
    pseudo = KernelInfo(
        "<pseudo>", None, (), tuple(range(fn.num_arguments)), pseudo_used_by,
        pseudo_has_users, pseudo_stream, (), (), fn.location, types,
    )
    kernels = [pseudo]
    for k, kern in enumerate(fn.kernels):
        kernels.append(
            KernelInfo(
                kern.name,
                entries[k],
                tuple(kern.operands),
                tuple(kern.results),
                tuple(tuple(u + 1 for u in users) for users in fn.used_by[k]),
                tuple(user_counts[r] > 0 for r in kern.results),
                kern.stream_id,
                tuple(
                    value if entries[k].signature.raw_attributes else value.value
                    for _, value in kern.attributes
                ),
                tuple(kern.functions),
                kern.location,
                types,
            )
        )
    returned: dict[int, int] = {}
    for r in fn.return_registers:
        returned[r] = returned.get(r, 0) + 1
    counted = _counted_registers(fn.num_registers, types, kernels, returned)
    unboxed = _unboxed_registers(fn.num_registers, kernels, counted)
    for info in kernels[1:]:
        info.release = tuple(r for r in info.operands if counted[r])
        info.result_info = tuple(
            (r, users, user_counts[r], counted[r], unboxed[r])
            for r, users in zip(info.results, info.used_by, strict=True)
        )
        info.slots = [("p", i) if kind == "v" and unboxed[i] else (kind, i)
                      for kind, i in info.slots]
    ref_counts = {r: user_counts[r] + 1 for r in returned}
    return FunctionInfo(
        name=fn.name,
        num_arguments=fn.num_arguments,
        num_registers=fn.num_registers,
        user_counts=user_counts,
        kernels=kernels,
        streams=tuple(k.stream for k in kernels),
        result_registers=tuple(fn.return_registers),
        result_ref_counts=ref_counts,
        pseudo_stream=pseudo_stream,
        release_after=_release_points(fn),
        counted=counted,
        unboxed=unboxed,
        count_templates=tuple(
            () if k.init_count == 1 else [True] + [False] * (k.init_count - 1)
            for k in kernels
        ),
    )


def link_functions(info: FunctionInfo, functions: list[Function]) -> None:
    """Resolve ``info``'s function references against the loaded ``functions``, then make
    the call functions of its static-mode kernels (their constants include functions)."""
    for k in info.kernels[1:]:
        k.funcs = [functions[i] for i in k.function_ids]
        if k.mode == MODE_STATIC:
            k.call = instantiate(k.fn, k.slots, k.constants, k.attrs, k.funcs, k)  # type: ignore[arg-type]


def _counted_registers(
    num_registers: int, types: list[str], kernels: list[KernelInfo], returned: dict[int, int]
) -> tuple[bool, ...]:
    """Per register, whether the executor counts the references of its value.

    A register is *not* counted when its value can never be observed through its reference
    count: its type is a plain scalar or the chain (:data:`PLAIN_REGISTER_TYPES`, payloads
    without a destroy hook), it is not returned to the caller, every kernel using it receives
    its payload only (never the AsyncValue or a KernelFrame), and its producer is not a
    frame kernel (whose result may be a value shared with someone who counts).  Arguments are
    borrowed from the caller: a counted argument takes its own references, an uncounted one
    none.
    """
    ok = [
        r not in returned and _type_of(types, r) in PLAIN_REGISTER_TYPES
        for r in range(num_registers)
    ]
    for k in kernels[1:]:
        if not k.takes_values:
            for r in k.operands:
                ok[r] = False
        if k.mode == MODE_FRAME:
            for r in k.results:
                ok[r] = False
    return tuple(not e for e in ok)


def _unboxed_registers(
    num_registers: int, kernels: list[KernelInfo], counted: tuple[bool, ...]
) -> tuple[bool, ...]:
    """Registers that hold their bare payload (an int, a float, the Chain), not an AsyncValue.

    True for an uncounted register produced and consumed only by static-mode kernels (which
    read payloads through their generated call functions): nothing else ever sees it, so the
    executor need not allocate an AsyncValue for it.  If such a register receives an error,
    it holds the error AsyncValue instead (and the invocation's ``errors`` flag is set).
    """
    ok = [False] * num_registers
    for k in kernels[1:]:
        if k.mode == MODE_STATIC:
            for r in k.results:
                ok[r] = not counted[r]
    for k in kernels[1:]:
        if k.mode != MODE_STATIC:
            for r in k.operands:
                ok[r] = False
    return tuple(ok)


def _release_points(fn: ProgramFunction) -> list[tuple[int, ...]]:
    """For each kernel, the local registers whose last use it is (or that it defines unused).

    Arguments and returned registers are never released (the caller owns them).
    """
    keep = set(range(fn.num_arguments)) | set(fn.return_registers)
    last_use: dict[int, int] = {}
    for k, kern in enumerate(fn.kernels):
        for r in kern.operands:
            last_use[r] = k
    release: list[list[int]] = [[] for _ in fn.kernels]
    for k, kern in enumerate(fn.kernels):
        for r in kern.results:
            if r not in keep and r not in last_use:
                release[k].append(r)
    for r, k in last_use.items():
        if r not in keep:
            release[k].append(r)
    return [tuple(sorted(set(rs))) for rs in release]
