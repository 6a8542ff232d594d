"""Per-function data the executors precompute once at load time (never per call).

A :class:`FunctionInfo` is the executable form of one ``bef.Function``: every kernel resolved to
its registry entry, attributes converted to the plain values kernels receive, function
references resolved to :class:`~pytfrt.host.Function` objects, used-by lists and initial ready
counts laid out as tuples the hot loop reads without further work.

Kernel ids: ``0`` is the pseudo kernel (spec 2.2), kernel ``k`` of the function body has id
``k + 1``.  Everything here is immutable after :func:`build_function_info` (and the function
fix-up in the loader), so one ``FunctionInfo`` is shared by all concurrent invocations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from pytfrt.bef.program import Function as ProgramFunction
from pytfrt.host.async_value import Chain
from pytfrt.host.function import Function
from pytfrt.host.registry import KernelEntry, KernelKind
from pytfrt.support.errors import Status
from pytfrt.support.location import Location

CHAIN_TYPE: Final = "!tfrt.chain"

# Payload types without a ``__tfrt_destroy__`` hook: their reference counts are unobservable
# when the AsyncValue never leaves the executor (see ``_elidable_registers``).
PLAIN_TYPES: Final = frozenset({int, float, bool, str, type(None), Chain, Status})

# How the async executor calls a kernel (chosen once per kernel at load time).
MODE_SIMPLE: Final = 0  # every parameter is a plain argument payload: fn(*payloads)
MODE_FRAME: Final = 1  # general binding through a KernelFrame (entry.invoke)
MODE_SYNC: Final = 2  # a sync kernel used in an async function: entry.call_sync


class KernelInfo:
    """One kernel of a function, ready to run (read-only after loading).

    Attributes:
        name: kernel name (MLIR op name).
        entry: the registry entry (``None`` for the pseudo kernel).
        fn: the kernel's Python function (``entry.fn``), for the simple mode.
        mode: ``MODE_SIMPLE``, ``MODE_FRAME`` or ``MODE_SYNC``.
        num_call_args: payloads passed in simple mode (drops an ignored trailing chain).
        operands / results: register indices.
        used_by: per result, the kernel ids using it (MLIR use-list order).
        has_users: per result, whether the register has any use (kernels or return).
        stream: stream id (spec 2.5).
        init_count: initial ready count ``max(1, len(operands))``.
        attrs: plain attribute values (name-sorted).
        function_ids: indices into ``Program.functions``; ``funcs`` their Function objects.
        location: the op's location.
        needs_context: the kernel takes an ExecutionContext or a KernelFrame.
    """

    __slots__ = (
        "name",
        "entry",
        "fn",
        "mode",
        "num_call_args",
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
        "operand_elide",
        "result_info",
        "trim",
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
        self.num_call_args = len(operands)
        self.operand_elide: tuple[bool, ...] = ()
        self.result_info: tuple[tuple[int, tuple[int, ...], int, bool], ...] = ()
        if entry is not None:
            self._choose_mode(entry, register_types)
        self.trim = self.num_call_args != len(operands)

    def _choose_mode(self, entry: KernelEntry, register_types: list[str]) -> None:
        sig = entry.signature
        self.needs_context = sig.needs_context
        if entry.kind is KernelKind.SYNC:
            self.mode = MODE_SYNC
            return
        n = len(self.operands)
        if not sig.simple or self.num_results > 1:
            return
        if n == sig.num_args:
            self.mode = MODE_SIMPLE
        elif n == sig.num_args + 1 and _type_of(register_types, self.operands[-1]) == CHAIN_TYPE:
            self.mode = MODE_SIMPLE  # trailing chain rule, decided once
            self.num_call_args = n - 1

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
        result_registers: the registers named by the return op.
        result_ref_counts: per result register, the refcount of its IndirectAsyncValue:
            kernel uses + number of times returned + 1 (the executor's pin).
        pseudo_stream: the stream of the pseudo kernel (= the return op's stream).
        release_after: sync functions only: per body kernel, local registers to reset after it.
        elide: per register, whether reference counting may be skipped for plain payloads.
    """

    name: str
    num_arguments: int
    num_registers: int
    user_counts: tuple[int, ...]
    kernels: list[KernelInfo]
    result_registers: tuple[int, ...]
    result_ref_counts: dict[int, int]
    pseudo_stream: int
    release_after: list[tuple[int, ...]]
    elide: tuple[bool, ...]


def build_function_info(
    fn: ProgramFunction, entries: list[KernelEntry]
) -> FunctionInfo:
    """Precompute the executable form of ``fn``; ``entries[k]`` is kernel ``k``'s entry.

    ``fn`` must be finalized (``use_counts``/``used_by`` filled).
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
    elide = _elidable_registers(fn.num_registers, kernels, returned)
    for info in kernels[1:]:
        info.operand_elide = tuple(elide[r] for r in info.operands)
        info.result_info = tuple(
            (r, users, user_counts[r], elide[r])
            for r, users in zip(info.results, info.used_by, strict=True)
        )
    ref_counts = {r: user_counts[r] + 1 for r in returned}
    return FunctionInfo(
        name=fn.name,
        num_arguments=fn.num_arguments,
        num_registers=fn.num_registers,
        user_counts=user_counts,
        kernels=kernels,
        result_registers=tuple(fn.return_registers),
        result_ref_counts=ref_counts,
        pseudo_stream=pseudo_stream,
        release_after=_release_points(fn),
        elide=elide,
    )


def _elidable_registers(
    num_registers: int, kernels: list[KernelInfo], returned: dict[int, int]
) -> tuple[bool, ...]:
    """Registers whose AsyncValue never escapes the executor.

    True when the register is not returned, every kernel using it receives payloads only
    (simple or sync mode) and its producer is not a frame kernel (whose result may be shared).
    For such a register holding a payload without a destroy hook (:data:`PLAIN_TYPES`),
    reference counting is unobservable, so the executor skips it.
    """
    ok = [r not in returned for r in range(num_registers)]
    for k in kernels[1:]:
        if k.mode == MODE_FRAME:
            # Its operands may be inspected or aliased; its results may be shared values whose
            # transferred reference must be dropped again.
            for r in (*k.operands, *k.results):
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
