"""Printing IR as mlir-opt does: ``module {``, ``%0``/``%arg0`` names, ``%0:2`` results.

:class:`MlirPrinter` subclasses xDSL's printer and only changes value naming (MLIR's scheme:
per isolated-from-above op, op results numbered ``%0, %1, ...`` region by region, nested
regions continuing from the enclosing region's count; entry-block arguments ``%argN``;
multi-result ops ``%N:k`` used as ``%N#i`` (ops whose results are of different kinds, e.g. a
chain and tensors, set ``separate_result_names`` and print ``%N, %M = ...``); region
arguments that TFRT's printers shadow take the names of the operands they receive) and prints
``builtin.module`` as ``module``.
"""

from __future__ import annotations

import io

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, f64, i64
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove


def attr_to_str(attr: Attribute) -> str:
    """The printed form of an attribute or type."""
    out = io.StringIO()
    Printer(stream=out).print_attribute(attr)
    return out.getvalue()


class _Namer:
    def __init__(self, shadow: list[tuple[SSAValue, SSAValue]]) -> None:
        self.names: dict[SSAValue, str] = {}
        self.shadow = shadow

    def name_op(self, op: Operation) -> None:
        """Name everything inside ``op`` (an isolated-from-above op or the module)."""
        stack: list[tuple[Region, int, int]] = [(r, 0, 0) for r in reversed(op.regions)]
        self._run(stack)

    def _run(self, stack: list[tuple[Region, int, int]]) -> None:
        names = self.names
        while stack:
            region, value_id, arg_id = stack.pop()
            pending: list[tuple[Region, int, int]] = []
            for block in region.blocks:
                for arg in block.args:
                    names[arg] = f"arg{arg_id}"
                    arg_id += 1
                for inner in block.ops:
                    n = len(inner.results)
                    if n > 1 and getattr(inner, "separate_result_names", False):
                        for res in inner.results:  # printed as `%4, %5 = ...`
                            names[res] = str(value_id)
                            value_id += 1
                    elif n == 1:
                        names[inner.results[0]] = str(value_id)
                        value_id += 1
                    elif n > 1:
                        for i, res in enumerate(inner.results):
                            names[res] = f"{value_id}#{i}"
                        value_id += 1
            for block in region.blocks:
                for inner in block.ops:
                    if not inner.regions:
                        continue
                    if isinstance(inner, ModuleOp) or inner.has_trait(
                        IsolatedFromAbove, value_if_unregistered=False
                    ):
                        sub = _Namer(self.shadow)
                        sub.name_op(inner)
                        names.update(sub.names)
                        continue
                    for r in inner.regions:
                        pending.append((r, value_id, arg_id))
            stack.extend(reversed(pending))
            # shadowed region arguments print as the operands they receive
            for block in region.blocks:
                for inner in block.ops:
                    hook = getattr(inner, "shadowed_region_args", None)
                    if hook is None:
                        continue
                    for index, operands in hook():
                        blk = inner.regions[index].blocks.first
                        if blk is None:
                            continue
                        for arg, operand in zip(blk.args, operands, strict=False):
                            self.shadow.append((arg, operand))


def compute_names(op: Operation) -> dict[SSAValue, str]:
    """MLIR value names for everything inside ``op``."""
    shadow: list[tuple[SSAValue, SSAValue]] = []
    namer = _Namer(shadow)
    namer.name_op(op)
    names = namer.names
    # resolve shadowing outermost first (operands are named before nested region args)
    for arg, operand in shadow:
        if operand in names:
            names[arg] = names[operand]
    return names


class MlirPrinter(Printer):
    """xDSL printer with MLIR's value names; call :meth:`print_module`."""

    def print_module(self, module: Operation) -> None:
        """Print a top-level op with fresh MLIR names."""
        self._mlir_names = compute_names(module)
        self.print_op(module)
        self.print_string("\n")

    def print_ssa_value(self, value: SSAValue) -> str:
        names = getattr(self, "_mlir_names", None)
        if names is not None and value in names:
            name = names[value]
            self.print_string(f"%{name}")
            return name
        return super().print_ssa_value(value)

    def _print_results(self, op: Operation) -> None:
        names = getattr(self, "_mlir_names", None)
        results = op.results
        if not results:
            return
        if names is None or results[0] not in names:
            super()._print_results(op)
            return
        if len(results) == 1:
            self.print_string(f"%{names[results[0]]} = ")
        elif "#" not in names[results[0]]:
            self.print_string(", ".join(f"%{names[r]}" for r in results) + " = ")
        else:
            base = names[results[0]].split("#")[0]
            self.print_string(f"%{base}:{len(results)} = ")

    def print_attribute(self, attribute: Attribute) -> None:
        # MLIR's default attribute types are left out: `1` is `1 : i64`, `1.0` is `1.0 : f64`.
        if isinstance(attribute, IntegerAttr) and attribute.type == i64:
            self.print_string(str(attribute.value.data))
            return
        if isinstance(attribute, FloatAttr) and attribute.type == f64:
            self.print_float(attribute.value.data, attribute.type)
            return
        super().print_attribute(attribute)

    def print_op(self, op: Operation) -> None:
        if isinstance(op, ModuleOp) and not self.print_generic_format:
            self.print_string("module")
            op.print(self)
            return
        super().print_op(op)


def print_module(module: Operation, generic: bool = False) -> str:
    """The module as MLIR text (custom syntax unless ``generic``).

    xDSL's printer recurses per region level: a module nested too deeply for the calling
    thread's stack is printed again on a deep stack
    (:func:`pytfrt.mlir.walk.call_with_deep_stack`)."""

    def render() -> str:
        out = io.StringIO()
        MlirPrinter(stream=out, print_generic_format=generic).print_module(module)
        return out.getvalue()

    try:
        return render()
    except RecursionError:
        from pytfrt.mlir.walk import call_with_deep_stack

        return call_with_deep_stack(render)
