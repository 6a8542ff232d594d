"""The plain ``Program`` model: what a BEF file holds, independent of MLIR and of bytes.

Producers (the MLIR lowering, the BEF reader, future tracers and importers) build a
:class:`Program`; consumers (the BEF writer, the executor, the disassembler) read it.  It is a
documented, plain data model with no behaviour beyond derived views and validation.

Registers: each function has ``num_registers`` SSA values; the function's arguments are
registers ``0..num_arguments-1``, then every kernel result in kernel order.

Kernels: one per non-return op, in program order.  ``attributes`` are the op's non-function
attributes in **name-sorted** order (``_tfrt_cost`` excluded; it is kept in ``cost``);
``functions`` are indices into :attr:`Program.functions`: flat symbol refs and arrays of symbol
refs in attribute-name order, then the op's regions in order (docs/host.md, docs/bef.md).

Functions: in BEF collection order (post-order: region bodies before the function that contains
them).  Region bodies are anonymous (``name == ""``).

Thread-safety: a Program is built once and then only read; the derived views are computed
eagerly by :meth:`Function.finalize` so concurrent readers never race on a cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytfrt.support.attributes import Attribute
from pytfrt.support.errors import PytfrtError
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import UNKNOWN_LOC, Location


class ProgramError(PytfrtError):
    """A Program violates the model's invariants."""


@dataclass
class Kernel:
    """One op of a function body (a kernel record, docs/bef.md).

    Attributes:
        name: the kernel name (= MLIR op name), e.g. ``tfrt.add.i32``.
        operands: argument register indices, in operand order.
        results: result register indices, in result order.
        attributes: ``(name, value)`` pairs sorted by name (function refs excluded).
        functions: indices into ``Program.functions`` (symbol refs, then regions).
        location: source location of the op.
        stream_id: scheduling stream from stream analysis (docs/executor.md).
        cost: the ``_tfrt_cost`` attribute if present (stream analysis input), else ``None``.
        function_attr_names: names of the attributes that referred to functions (for
            round trips; region functions are not listed).
    """

    name: str
    operands: list[int] = field(default_factory=list)
    results: list[int] = field(default_factory=list)
    attributes: list[tuple[str, Attribute]] = field(default_factory=list)
    functions: list[int] = field(default_factory=list)
    location: Location = UNKNOWN_LOC
    stream_id: int = 0
    cost: int | None = None
    function_attr_names: list[str] = field(default_factory=list)
    num_regions: int = 0

    @property
    def attribute_values(self) -> list[object]:
        """The plain attribute values, in name order, as kernels receive them."""
        return [value.value for _, value in self.attributes]


@dataclass
class Function:
    """A BEF function: signature, registers, kernels and returned registers.

    Attributes:
        name: the symbol name; ``""`` for region bodies.
        kind: BEF (async), SYNC (``tfrt.sync``) or NATIVE (no body).
        argument_types / result_types: printed MLIR type names (``i32``, ``!tfrt.chain``).
        register_types: type name of every register (arguments first).
        kernels: the body's ops except the terminator, in program order.
        return_registers: the registers named by ``tfrt.return``.
        location: location of the ``func`` op, or of the op owning the region.
        cost_threshold / upper_cost_threshold / merge_inter_dependent_streams: stream-analysis
            options (docs/bef.md, stream analysis); ``upper_cost_threshold`` > 0 caps how much
            cost one stream may gather.
        root_stream_id: stream id of the pseudo kernel 0 (the root of stream analysis; the
            stream that contains ``tfrt.return``), set by stream analysis and stored in BEF.
    """

    name: str
    kind: FunctionKind = FunctionKind.BEF
    argument_types: list[str] = field(default_factory=list)
    result_types: list[str] = field(default_factory=list)
    register_types: list[str] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    return_registers: list[int] = field(default_factory=list)
    location: Location = UNKNOWN_LOC
    cost_threshold: int = -1
    upper_cost_threshold: int = -1
    merge_inter_dependent_streams: bool = False
    root_stream_id: int = 0
    # derived (see finalize)
    use_counts: list[int] = field(default_factory=list, repr=False)
    used_by: list[list[list[int]]] = field(default_factory=list, repr=False)
    pseudo_used_by: list[list[int]] = field(default_factory=list, repr=False)

    @property
    def num_arguments(self) -> int:
        """Number of arguments."""
        return len(self.argument_types)

    @property
    def num_registers(self) -> int:
        """Number of registers (arguments + all kernel results)."""
        return len(self.register_types)

    def finalize(self) -> Function:
        """Compute the derived views (use counts, used-by lists) and check invariants.

        * ``use_counts[r]``: number of uses of register ``r`` (a use by the return counts; an op
          using a value twice counts twice).
        * ``used_by[k][i]``: kernel indices (0-based into :attr:`kernels`) using result ``i`` of
          kernel ``k``, in MLIR use-list order (reverse program order), duplicates kept.
        * ``pseudo_used_by[0]``: zero-operand kernels in program order; ``pseudo_used_by[1+a]``:
          users of argument ``a`` in reverse program order (docs/executor.md, docs/bef.md).

        Returns ``self``. Raises :class:`ProgramError` on a broken invariant.
        """
        if self.kind is FunctionKind.NATIVE:
            return self
        n = self.num_registers
        users: list[list[int]] = [[] for _ in range(n)]
        counts = [0] * n
        defined = [False] * n
        for a in range(self.num_arguments):
            defined[a] = True
        for k, kern in enumerate(self.kernels):
            for r in kern.operands:
                if not 0 <= r < n or not defined[r]:
                    raise ProgramError(
                        f"function '{self.name}': kernel {k} ({kern.name}) uses register {r} "
                        "before it is defined"
                    )
                counts[r] += 1
                users[r].append(k)
            for r in kern.results:
                if not 0 <= r < n or defined[r]:
                    raise ProgramError(
                        f"function '{self.name}': kernel {k} ({kern.name}) redefines register {r}"
                    )
                defined[r] = True
        for r in self.return_registers:
            if not 0 <= r < n or not defined[r]:
                raise ProgramError(f"function '{self.name}': returns undefined register {r}")
            counts[r] += 1
        self.use_counts = counts
        self.used_by = [[users[r][::-1] for r in kern.results] for kern in self.kernels]
        zero = [k for k, kern in enumerate(self.kernels) if not kern.operands]
        self.pseudo_used_by = [zero] + [users[a][::-1] for a in range(self.num_arguments)]
        return self


@dataclass
class Program:
    """A whole BEF program: its functions, in collection order.

    ``compiled_modules`` holds the generic MLIR text of nested ``tfrt.compiled`` modules, keyed by
    symbol name, for round trips (they are never executed by the host executor).
    """

    functions: list[Function] = field(default_factory=list)
    compiled_modules: dict[str, str] = field(default_factory=dict)
    #: True once stream ids are final (set by ``pytfrt.bef.streams.assign_stream_ids`` and by
    #: ``read_bef``); ``write_bef`` runs stream analysis only while this is False.
    streams_assigned: bool = False

    def function_index(self, name: str) -> int:
        """Index of the named function. Raises ``KeyError`` if there is none."""
        for i, fn in enumerate(self.functions):
            if fn.name == name and name:
                return i
        raise KeyError(name)

    def get(self, name: str) -> Function:
        """The named function. Raises ``KeyError`` if there is none."""
        return self.functions[self.function_index(name)]

    @property
    def named_functions(self) -> list[Function]:
        """Functions with a name, in collection order."""
        return [fn for fn in self.functions if fn.name]

    def kernel_names(self) -> list[str]:
        """Every kernel name used, in first-encounter order (the BEF Kernels table order)."""
        seen: dict[str, None] = {}
        for fn in self.functions:
            for kern in fn.kernels:
                seen.setdefault(kern.name, None)
        return list(seen)

    def finalize(self) -> Program:
        """Finalize every function and check cross-references. Returns ``self``."""
        for fn in self.functions:
            fn.finalize()
            for kern in fn.kernels:
                for f in kern.functions:
                    if not 0 <= f < len(self.functions):
                        raise ProgramError(
                            f"function '{fn.name}': kernel {kern.name} refers to function "
                            f"index {f} out of range"
                        )
        return self
