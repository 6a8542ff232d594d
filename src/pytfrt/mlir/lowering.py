"""Lowering of verified IR to the plain :class:`~pytfrt.bef.program.Program` (docs/bef.md).

* Functions in BEF collection order: a post-order walk where each region of an op becomes an
  anonymous function (name ``""``) when the op is visited, before the function containing it;
  top-level functions in file order (nested non-compiled modules are walked too).
* Registers: arguments first, then op results in program order.
* Kernels: attributes name-sorted, ``_tfrt_cost`` into ``Kernel.cost``, flat symbol refs (and
  arrays of them) into ``Kernel.functions`` in attribute-name order, then regions.
* Locations: explicit ``loc(...)`` annotations, else ``file:line:col`` of the op's first
  character (:class:`~pytfrt.support.location.FileLineColLoc`).
* Translation errors become :class:`~pytfrt.mlir.diagnostics.MlirError` diagnostics at
  the offending op.

Called by :mod:`pytfrt.mlir.api` after parsing and verification; pure, no shared state.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import builtin as b
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute as XAttr
from xdsl.ir import Operation, Region, SSAValue

from pytfrt.bef.program import Function, Kernel, Program
from pytfrt.mlir.attributes import UnsupportedAttribute, convert_attribute, convert_location
from pytfrt.mlir.diagnostics import MlirDiagnostic, MlirError, SourceFile
from pytfrt.mlir.parser import canonical_attr_name
from pytfrt.mlir.printer import attr_to_str, print_module
from pytfrt.mlir.walk import walk_ops
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import FileLineColLoc, Location

RETURN_OPS = frozenset({"tfrt.return", "func.return"})


def op_name(op: Operation) -> str:
    """The op's name (the real name of an unregistered op)."""
    if isinstance(op, b.UnregisteredOp):
        return op.op_name.data
    return op.name


def _attrs(op: Operation) -> dict[str, XAttr]:
    if isinstance(op, b.UnregisteredOp):
        return {k: v for k, v in op.attributes.items() if k != "op_name__"}
    if op.properties:
        return {**op.properties, **op.attributes}
    return op.attributes


class _Lowerer:
    def __init__(self, filename: str, positions: dict[Operation, int], source: SourceFile):
        self.filename = filename
        self.positions = positions
        self.source = source
        self.program = Program()
        self.index: dict[int, int] = {}  # id(func op or region) -> function index
        self.named: dict[str, int] = {}
        self.type_names: dict[XAttr, str] = {}
        self.module_attrs: dict[str, XAttr] = {}
        self.compiled: set[str] = set()
        self.explicit_unknown: set[Operation] = set()
        #: per function (collection order): its body ops, return last (None for natives)
        self.function_ops: list[list[Operation] | None] = []

    # -- errors & locations ---------------------------------------------------------------
    def error(self, op: Operation | None, message: str) -> MlirError:
        pos = self.positions.get(op, -1) if op is not None else -1
        if pos < 0:
            diag = MlirDiagnostic(self.filename, 0, 0, "error", message)
        else:
            diag = self.source.diagnostic(pos, message)
        return MlirError([diag], self.source)

    def location(self, op: Operation) -> Location:
        if not isinstance(op.location, b.UnknownLoc) or op in self.explicit_unknown:
            return convert_location(op.location)
        pos = self.positions.get(op)
        if pos is None:
            return convert_location(op.location)
        line, col = self.source.line_col(pos)
        return FileLineColLoc(self.filename, line, col)

    def type_name(self, t: XAttr) -> str:
        name = self.type_names.get(t)
        if name is None:
            name = attr_to_str(t)
            self.type_names[t] = name
        return name

    # -- collection order -------------------------------------------------------------------
    def collect(self, module: b.ModuleOp) -> list[tuple[Operation, object]]:
        """Assign function indices in BEF order; returns (owner op, func op | region) pairs.

        Iterative (an explicit stack), so region nesting costs no Python stack."""
        order: list[tuple[Operation, object]] = []
        # Work items: ("ops", iterator) visits a block's ops; ("func", op) / ("region", op,
        # region) index a function once everything nested in it is indexed; ("regions", op,
        # iterator) visits an op's regions in order.
        stack: list[tuple[Any, ...]] = [("ops", iter(module.body.block.ops))]
        while stack:
            item = stack[-1]
            kind = item[0]
            if kind == "ops":
                op = next(item[1], None)
                if op is None:
                    stack.pop()
                elif isinstance(op, b.ModuleOp):
                    if "tfrt.compiled" in op.attributes:
                        if op.sym_name is not None:
                            self.compiled.add(op.sym_name.data)
                    else:
                        stack.append(("ops", iter(op.body.block.ops)))
                elif isinstance(op, FuncOp):
                    stack.append(("func", op))
                    if op.body.blocks:
                        stack.append(("ops", iter(op.body.blocks.first.ops)))  # type: ignore[union-attr]
                elif op.regions:
                    stack.append(("regions", op, iter(op.regions)))
            elif kind == "regions":
                region = next(item[2], None)
                if region is None:
                    stack.pop()
                    continue
                stack.append(("region", item[1], region))
                for blk in reversed(list(region.blocks)):
                    stack.append(("ops", iter(blk.ops)))
            elif kind == "func":
                stack.pop()
                func = item[1]
                self.index[id(func)] = len(order)
                self.named[func.sym_name.data] = len(order)
                order.append((func, func))
            else:
                stack.pop()
                self.index[id(item[2])] = len(order)
                order.append((item[1], item[2]))
        return order

    # -- lowering -----------------------------------------------------------------------------
    def lower(self, module: b.ModuleOp) -> Program:
        self.module_attrs = dict(module.attributes)
        order = self.collect(module)
        funcs = self.program.functions
        for owner, what in order:
            if isinstance(what, FuncOp):
                funcs.append(self.lower_func(what))
            else:
                assert isinstance(what, Region)
                funcs.append(self.lower_region(what, "", owner, FunctionKind.BEF, owner))
        return self.program

    def _option(self, func: FuncOp, key: str) -> XAttr | None:
        for attrs in (func.attributes, self.module_attrs):
            for name, value in attrs.items():
                if canonical_attr_name(name) == key:
                    return value
        return None

    def lower_func(self, func: FuncOp) -> Function:
        attr_names = {canonical_attr_name(n) for n in func.attributes}
        name = func.sym_name.data
        ftype = func.function_type
        if not func.body.blocks:
            self.function_ops.append(None)
            if "tfrt.native" not in attr_names:
                raise self.error(func, "external functions are not allowed")
            return Function(
                name=name,
                kind=FunctionKind.NATIVE,
                argument_types=[self.type_name(t) for t in ftype.inputs.data],
                result_types=[self.type_name(t) for t in ftype.outputs.data],
                location=self.location(func),
            )
        kind = FunctionKind.SYNC if "tfrt.sync" in attr_names else FunctionKind.BEF
        fn = self.lower_region(func.body, name, func, kind, func)
        fn.result_types = [self.type_name(t) for t in ftype.outputs.data]
        threshold = self._option(func, "tfrt.cost_threshold")
        if isinstance(threshold, b.IntegerAttr):
            fn.cost_threshold = threshold.value.data
        upper = self._option(func, "tfrt.upper_cost_threshold")
        if isinstance(upper, b.IntegerAttr):
            fn.upper_cost_threshold = upper.value.data
        merge = self._option(func, "tfrt.merge_inter_dependent_streams")
        if isinstance(merge, b.IntegerAttr):
            fn.merge_inter_dependent_streams = bool(merge.value.data)
        elif isinstance(merge, b.UnitAttr):
            fn.merge_inter_dependent_streams = True
        return fn

    def lower_region(
        self, region: Region, name: str, owner: Operation, kind: FunctionKind, loc_op: Operation
    ) -> Function:
        blocks = list(region.blocks)
        if len(blocks) != 1:
            raise self.error(owner, "multi-block regions cannot be emitted to BEF files")
        block = blocks[0]
        regs: dict[SSAValue, int] = {}
        reg_types: list[str] = []
        type_name = self.type_name
        for arg in block.args:
            regs[arg] = len(reg_types)
            reg_types.append(type_name(arg.type))
        ops = list(block.ops)
        if not ops or op_name(ops[-1]) not in RETURN_OPS:
            raise self.error(ops[-1] if ops else owner, "all functions need to have a tfrt.return")
        self.function_ops.append(ops)
        kernels: list[Kernel] = []
        for op in ops[:-1]:
            if op_name(op) in RETURN_OPS:
                raise self.error(op, "return op must be at the end of its block")
            kernels.append(self.lower_op(op, regs, reg_types))
        ret = ops[-1]
        returns = []
        for v in ret.operands:
            r = regs.get(v)
            if r is None:
                raise self.error(
                    ret,
                    "BEF executor only supports references to kernels within the current region",
                )
            returns.append(r)
        if kind is FunctionKind.SYNC:
            nargs = len(block.args)
            seen: set[int] = set()
            for i, r in enumerate(returns):
                if r < nargs:
                    raise self.error(ret, f"return value {i} is an argument in a sync function")
                if r in seen:
                    raise self.error(ret, f"return value {i} is duplicated in a sync function")
                seen.add(r)
        return Function(
            name=name,
            kind=kind,
            argument_types=reg_types[: len(block.args)],
            result_types=[type_name(v.type) for v in ret.operands],
            register_types=reg_types,
            kernels=kernels,
            return_registers=returns,
            location=self.location(loc_op),
        )

    def lower_op(self, op: Operation, regs: dict[SSAValue, int], reg_types: list[str]) -> Kernel:
        operands = []
        for v in op.operands:
            r = regs.get(v)
            if r is None:
                raise self.error(
                    op,
                    "BEF executor only supports references to kernels within the current region",
                )
            operands.append(r)
        results = []
        for res in op.results:
            regs[res] = len(reg_types)
            results.append(len(reg_types))
            reg_types.append(self.type_name(res.type))
        kern = Kernel(
            name=op_name(op), operands=operands, results=results, location=self.location(op)
        )
        attrs = _attrs(op)
        if attrs:
            self.lower_attributes(op, kern, attrs)
        for region in op.regions:
            kern.functions.append(self.index[id(region)])
        kern.num_regions = len(op.regions)
        return kern

    def lower_attributes(self, op: Operation, kern: Kernel, attrs: dict[str, XAttr]) -> None:
        for key in sorted(attrs):
            value = attrs[key]
            if key == "_tfrt_cost":
                if isinstance(value, b.IntegerAttr):
                    kern.cost = value.value.data
                continue
            fns = self.function_refs(op, value)
            if fns is not None:
                kern.functions.extend(fns)
                kern.function_attr_names.append(key)
                continue
            try:
                kern.attributes.append((key, convert_attribute(value, self.compiled)))
            except UnsupportedAttribute:
                raise self.error(op, f"BEF files cannot encode the '{key}' attribute") from None
            except MemoryError:
                raise self.error(op, f"not enough memory for the '{key}' attribute") from None

    def function_refs(self, op: Operation, value: XAttr) -> list[int] | None:
        if isinstance(value, b.SymbolRefAttr) and not value.nested_references.data:
            sym = value.root_reference.data
            if sym in self.compiled:
                return None
            if sym not in self.named:
                raise self.error(op, f"function @{sym} not defined")
            return [self.named[sym]]
        if (
            isinstance(value, b.ArrayAttr)
            and value.data
            and all(
                isinstance(e, b.SymbolRefAttr) and not e.nested_references.data for e in value.data
            )
        ):
            out = []
            for e in value.data:
                assert isinstance(e, b.SymbolRefAttr)
                out.extend(self.function_refs(op, e) or [])
            return out
        return None


def lower_module(
    module: b.ModuleOp,
    filename: str,
    positions: dict[Operation, int] | None = None,
    source: SourceFile | None = None,
    explicit_unknown: set[Operation] | None = None,
) -> Program:
    """Lower a verified module to a finalized Program (stream ids assigned if available).

    Raises :class:`MlirError` for a module that cannot be translated.
    """
    return lower_module_with_ops(module, filename, positions, source, explicit_unknown)[0]


def lower_module_with_ops(
    module: b.ModuleOp,
    filename: str,
    positions: dict[Operation, int] | None = None,
    source: SourceFile | None = None,
    explicit_unknown: set[Operation] | None = None,
) -> tuple[Program, list[list[Operation] | None]]:
    """:func:`lower_module` plus, per function, the ops its kernels came from (return last)."""
    low = _Lowerer(filename, positions or {}, source or SourceFile(filename, ""))
    low.explicit_unknown = explicit_unknown or set()
    program = low.lower(module)
    for name in sorted(low.compiled):
        program.compiled_modules[name] = _compiled_module_text(module, name)
    program.finalize()
    try:
        from pytfrt.bef.streams import assign_stream_ids
    except ImportError:  # pragma: no cover - while the BEF package is being written
        return program, low.function_ops
    assign_stream_ids(program)
    return program, low.function_ops


def _compiled_module_text(module: b.ModuleOp, name: str) -> str:
    for op in walk_ops(module):
        if isinstance(op, b.ModuleOp) and op.sym_name is not None and op.sym_name.data == name:
            return print_module(op, generic=True).rstrip("\n")
    return ""
