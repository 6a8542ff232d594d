"""A small builder for hand-written Programs (tests, tracers, examples).

:func:`build_function` turns an SSA-style description into a finalized
:class:`~pytfrt.bef.program.Function`::

    fn = build_function(
        "add", args=["a", "b"],
        ops=[("tfrt.add.i32", ["a", "b"], ["sum"])],
        returns=["sum"],
    )

Registers are numbered as the Program model requires (arguments, then results in op order).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytfrt.bef.program import Function, Kernel, ProgramError
from pytfrt.support.attributes import Attribute
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import UNKNOWN_LOC, Location

CHAIN = "!tfrt.chain"

#: One op: (kernel name, operand names, result names), optionally followed by a dict of extra
#: Kernel fields (``attributes``, ``functions``, ``location``, ``cost``, ...).
OpSpec = tuple[str, Sequence[str], Sequence[str]] | tuple[str, Sequence[str], Sequence[str], dict]


def build_function(
    name: str,
    args: Sequence[str],
    ops: Sequence[OpSpec],
    returns: Sequence[str],
    *,
    types: dict[str, str] | None = None,
    kind: FunctionKind = FunctionKind.BEF,
    location: Location = UNKNOWN_LOC,
    cost_threshold: int = -1,
    merge_inter_dependent_streams: bool = False,
    default_type: str = "i32",
) -> Function:
    """Build and finalize a function from SSA value names.

    Args:
        name: function name (``""`` for a region body).
        args: argument value names.
        ops: the kernels in program order (see :data:`OpSpec`); attributes given in the extra
            dict are sorted by name here.
        returns: the value names returned by ``tfrt.return``.
        types: value name -> printed type (default ``default_type``).
        kind, location, cost_threshold, merge_inter_dependent_streams: Function fields.
        default_type: type of values missing from ``types``.

    Raises:
        ProgramError: a name is used before it is defined, or defined twice.
    """
    types = types or {}
    reg: dict[str, int] = {}
    register_types: list[str] = []

    def define(value: str) -> int:
        if value in reg:
            raise ProgramError(f"value %{value} defined twice")
        reg[value] = len(register_types)
        register_types.append(types.get(value, default_type))
        return reg[value]

    def use(value: str) -> int:
        if value not in reg:
            raise ProgramError(f"value %{value} used before it is defined")
        return reg[value]

    for a in args:
        define(a)
    kernels = []
    for spec in ops:
        kname, operands, results = spec[0], spec[1], spec[2]
        extra: dict = dict(spec[3]) if len(spec) > 3 else {}  # type: ignore[misc]
        attrs: list[tuple[str, Attribute]] = sorted(
            extra.pop("attributes", []), key=lambda pair: pair[0]
        )
        operand_ids = [use(o) for o in operands]
        kernels.append(Kernel(kname, operand_ids, [define(r) for r in results], attrs, **extra))
    return Function(
        name,
        kind,
        argument_types=[register_types[reg[a]] for a in args],
        result_types=[register_types[use(r)] for r in returns],
        register_types=register_types,
        kernels=kernels,
        return_registers=[use(r) for r in returns],
        location=location,
        cost_threshold=cost_threshold,
        merge_inter_dependent_streams=merge_inter_dependent_streams,
    ).finalize()
