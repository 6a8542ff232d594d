"""Loading a Program for execution (TFRT's ``BEFFile::Open``, docs/executor.md).

:func:`load_program` resolves everything before anything runs:

1. every kernel name against the HostContext's registry -- the first unknown name emits
   ``unknown kernel name '<name>'`` at the location of the first kernel using it and loading
   fails (:class:`LoadError`);
2. sync functions may only use sync kernels;
3. native declarations against a :class:`~pytfrt.executor.native.NativeRegistry`;
4. attributes are converted to plain kernel values and per-kernel data is precomputed
   (:mod:`pytfrt.executor.kernel_info`), then function references are resolved.

The result, a :class:`BEFFile`, is immutable and shareable: any number of requests may execute
its functions concurrently, each call with its own state.
"""

from __future__ import annotations

from pytfrt.bef.program import Function as ProgramFunction
from pytfrt.bef.program import Program
from pytfrt.executor.async_executor import BEFFunction
from pytfrt.executor.kernel_info import FunctionInfo, build_function_info, link_functions
from pytfrt.executor.native import NativeFunction, NativeRegistry, test_native_registry
from pytfrt.executor.sync_executor import SyncBEFFunction
from pytfrt.executor.whole_function import WholeBEFFunction, attach, enabled_by_default
from pytfrt.host.diagnostics import Diagnostic
from pytfrt.host.function import Function, FunctionKind
from pytfrt.host.host_context import HostContext
from pytfrt.host.registry import KernelEntry, KernelKind
from pytfrt.support.errors import PytfrtError
from pytfrt.support.location import UNKNOWN_LOC, Location


class LoadError(PytfrtError):
    """Loading failed; the reason was also emitted as a diagnostic (docs/executor.md)."""


class BEFFile:
    """A loaded program: one :class:`~pytfrt.host.Function` per ``Program`` function.

    Attributes:
        program: the Program it was loaded from.
        functions: executable functions, in Program (BEF FunctionIndex) order.
    """

    def __init__(self, program: Program, functions: list[Function]) -> None:
        self.program = program
        self.functions = functions
        self._by_name = {f.name: f for f in functions if f.name}

    def get_function(self, name: str) -> Function | None:
        """The named function, or ``None``."""
        return self._by_name.get(name)

    @property
    def function_names(self) -> list[str]:
        """Names of the named functions, in order."""
        return [f.name for f in self.functions if f.name]


def load_program(
    program: Program,
    host: HostContext,
    natives: NativeRegistry | None = None,
    whole_function: bool | None = None,
) -> BEFFile:
    """Resolve ``program`` against ``host.registry`` and ``natives`` (see the module docstring).

    Args:
        program: a Program (finalized here if needed).
        host: supplies the kernel registry and receives load diagnostics.
        natives: native implementations; TFRT's test natives if omitted.
        whole_function: run functions that need no asynchrony as generated straight-line
            code (:mod:`pytfrt.executor.whole_function`); default: on unless the environment
            variable ``PYTFRT_WHOLE_FUNCTION`` is ``0``.

    Raises:
        LoadError: after emitting the diagnostic that explains it.
    """
    if natives is None:
        natives = test_native_registry()
    if whole_function is None:
        whole_function = enabled_by_default()
    for fn in program.functions:
        if fn.kind is not FunctionKind.NATIVE and len(fn.use_counts) != fn.num_registers:
            fn.finalize()
    entries = _resolve_kernels(program, host)
    functions: list[Function] = []
    infos: list[FunctionInfo | None] = []
    for fn in program.functions:
        if fn.kind is FunctionKind.NATIVE:
            impl = natives.get(fn.name)
            if impl is None:
                _fail(host, "unable to find native function in global registry", fn.location)
            functions.append(NativeFunction(fn.name, impl, fn.argument_types,  # type: ignore[arg-type]
                                            fn.result_types))
            infos.append(None)
            continue
        fn_entries = [entries[k.name] for k in fn.kernels]
        if fn.kind is FunctionKind.SYNC:
            _check_sync(host, fn, fn_entries)
        info = build_function_info(fn, fn_entries)
        infos.append(info)
        if fn.kind is FunctionKind.SYNC:
            functions.append(
                SyncBEFFunction(info, fn.argument_types, fn.result_types, fn.register_types)
            )
        elif whole_function:
            functions.append(WholeBEFFunction(info, fn.argument_types, fn.result_types))
        else:
            functions.append(BEFFunction(info, fn.argument_types, fn.result_types))
    # Resolve function references (kernels look them up at call time, so order is free).
    for maybe_info in infos:
        if maybe_info is not None:
            link_functions(maybe_info, functions)
    if whole_function:
        attach(functions)
    return BEFFile(program, functions)


def _fail(host: HostContext, message: str, location: Location = UNKNOWN_LOC) -> None:
    host.emit_error(Diagnostic(message, location))
    raise LoadError(message)


def _resolve_kernels(program: Program, host: HostContext) -> dict[str, KernelEntry]:
    """Look every kernel name up, in BEF Kernels-table order; fail at the first unknown one."""
    entries: dict[str, KernelEntry] = {}
    registry = host.registry
    for name in program.kernel_names():
        entry = registry.find(name)
        if entry is None:
            _fail(host, f"unknown kernel name '{name}'", _first_use(program, name))
        entries[name] = entry  # type: ignore[assignment]
    return entries


def _first_use(program: Program, name: str) -> Location:
    for fn in program.functions:
        for kern in fn.kernels:
            if kern.name == name:
                return kern.location
    return UNKNOWN_LOC


def _check_sync(host: HostContext, fn: ProgramFunction, entries: list[KernelEntry]) -> None:
    for kern, entry in zip(fn.kernels, entries, strict=True):
        if entry.kind is not KernelKind.SYNC:
            _fail(
                host,
                f"Invalid SyncBEFFunction '{fn.name}': kernel '{kern.name}' is not a sync kernel",
                kern.location,
            )
