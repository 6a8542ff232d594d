"""Lowering a graph module to a BEF :class:`~pytfrt.bef.program.Program` plus its weights.

The program has these functions:

* ``@tg_init(weights...) -> resources...`` (an async BEF function, run once at load): takes
  the weights (from ``weights.btf`` or the ``GraphModule``) and runs the *prepare* kernels of
  ops with weight-dependent preparation (``tg.conv2d.prepare`` -> a conv plan); returns the
  *resources* ``@main`` uses: weights and prepared plans.
* ``@main(resources..., inputs...) -> outputs...``: one kernel ``tg.<op>`` per op, carrying
  all its attributes (defaults filled in, name-sorted); constants are resources (leading
  arguments), never kernels.  Without control flow or state it is a ``tfrt.sync`` function,
  which the executor runs as straight-line Python (``pytfrt.executor.sync_executor``).
* every other function of the module (control-flow bodies), as async BEF functions, and
  ``__while_*`` helpers (``tfrt.while`` wants ``body(args) -> (args', cond)``).

Every function takes the resources as its leading arguments.  Control flow lowers to
``tfrt.if`` / ``tfrt.case`` / ``tfrt.while`` (after ``tg.to_pred`` / ``tg.to_index`` turn the
condition tensor into a value) and ``tfrt.call``; variables to ``tg.read_variable`` /
``tg.assign*_variable`` kernels on the request's resource context (created by
``tg.create_variable`` in ``@tg_init``), with one chain threaded through every stateful op in
program order -- a function that (transitively) touches state takes a chain after the resources
and returns one last.

This mirrors TFRT's SavedModel split (an init function whose results the serving functions
receive) and keeps per-call work to the ops themselves.  Pure: no shared state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import builtin as b
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from pytfrt.bef.program import Function, Kernel, Program
from pytfrt.compiler.attrs import BUFFER_ATTR, from_xattr, op_attrs
from pytfrt.compiler.builder import GraphModule, signature_of
from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.kernel_programs import graph_program, region_program, shape_plan_program
from pytfrt.compiler.ops import OpDef, get_opdef
from pytfrt.compiler.types import TType, from_xdsl, np_dtype
from pytfrt.signature import Signature
from pytfrt.support import attributes as sa
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import UNKNOWN_LOC, Location

INIT = "tg_init"
MAIN = "main"
PLAN_TYPE = "!tg.plan"
ARENA_TYPE = "!tg.arena"
"""The ``-tg-plan-buffers`` annotation: ``[slot, site]`` (see ``passes/buffers.py``)."""


@dataclass
class LoweredModel:
    """What :func:`lower` produces.

    Attributes:
        program: the BEF program (``@tg_init``, ``@main``).
        init_inputs: the weight names ``@tg_init`` takes, in argument order.
        weights: those weights' arrays (inline constants appear as ``__inline_<n>``).
        signature: the model's signature.
        num_resources: how many leading arguments of ``@main`` come from ``@tg_init``.
    """

    program: Program
    init_inputs: list[str]
    weights: dict[str, np.ndarray]
    signature: Signature
    num_resources: int
    variables: list[str] = field(default_factory=list)




def bef_attr(kind: str, value: Any) -> sa.Attribute:
    """A kernel attribute value of a catalogue attribute."""
    if kind == "bool":
        return sa.IntAttr(int(value), "i1")
    if kind == "int":
        return sa.IntAttr(int(value), "i64")
    if kind == "float":
        return sa.FloatAttr(float(value), "f64")
    if kind in ("str", "dtype"):
        return sa.StringAttr(str(value))
    if kind == "ints":
        return sa.ArrayAttr(tuple(sa.IntAttr(int(v), "i64") for v in value), "i64")
    if kind == "floats":
        return sa.ArrayAttr(tuple(sa.FloatAttr(float(v), "f64") for v in value), "f64")
    raise GraphError(f"attributes of kind {kind} cannot be kernel attributes")


def _location(op: Operation) -> Location:
    if isinstance(op.location, b.UnknownLoc):
        return UNKNOWN_LOC
    from pytfrt.mlir.attributes import convert_location

    return convert_location(op.location)


class _FunctionLowerer:
    """Registers and kernels of one BEF function."""

    def __init__(self, name: str, kind: FunctionKind) -> None:
        self.fn = Function(name=name, kind=kind)
        self.regs: dict[SSAValue, int] = {}

    def arg(self, type_name: str, value: SSAValue | None = None) -> int:
        r = len(self.fn.register_types)
        self.fn.register_types.append(type_name)
        self.fn.argument_types.append(type_name)
        if value is not None:
            self.regs[value] = r
        return r

    def kernel(self, name: str, operands: list[int], result_types: list[str],
               attributes: Sequence[tuple[str, sa.Attribute]], loc: Location,
               functions: list[int] | None = None) -> list[int]:
        results = []
        for t in result_types:
            results.append(len(self.fn.register_types))
            self.fn.register_types.append(t)
        self.fn.kernels.append(Kernel(name=name, operands=operands, results=results,
                                      attributes=list(attributes), location=loc,
                                      functions=list(functions or [])))
        return list(results)

    def reg(self, op: Operation, i: int) -> int:
        r = self.regs.get(op.operands[i])
        if r is None:
            raise GraphError(f"{op.name}: operand {i} is not defined in @{self.fn.name}")
        return r

    def finish(self, returns: list[int]) -> Function:
        """Set the returned registers (copying arguments and duplicates in sync functions)."""
        out: list[int] = []
        nargs = len(self.fn.argument_types)
        for reg in returns:
            sync = self.fn.kind is FunctionKind.SYNC
            if sync and (reg < nargs or reg in out) and self.fn.register_types[reg] != CHAIN:
                (reg,) = self.kernel("tg.identity", [reg], [self.fn.register_types[reg]], [],
                                     UNKNOWN_LOC)
            out.append(reg)
        self.fn.return_registers = out
        self.fn.result_types = [self.fn.register_types[r] for r in out]
        return self.fn


CHAIN = "!tfrt.chain"
CONTROL = {"tg.if", "tg.case", "tg.while"}




def callees(op: Operation, funcs: dict[str, FuncOp]) -> list[str]:
    """The functions a control-flow op calls (none for other ops).

    Raises:
        GraphError: for a reference to a function that does not exist.
    """
    if op.name not in CONTROL:
        return []
    opdef = get_opdef(op.name)
    attrs = op_attrs(op, opdef)
    names: list[str] = []
    for k, spec in opdef.attrs.items():
        if spec.kind == "sym":
            names.append(attrs[k])
        elif spec.kind == "syms":
            names.extend(attrs[k])
    for n in names:
        if n not in funcs:
            raise GraphError(f"{op.name}: unknown function @{n}")
    return names


def stateful_functions(funcs: dict[str, FuncOp]) -> set[str]:
    """The functions that touch variables, directly or through the functions they call."""
    found = {n for n, f in funcs.items()
             if any(op.name.startswith("tg.") and op.name != "tg.constant"
                    and get_opdef(op.name).stateful for op in f.body.block.ops)}
    calls = {n: {c for op in f.body.block.ops for c in callees(op, funcs)}
             for n, f in funcs.items()}
    changed = True
    while changed:
        changed = False
        for n, cs in calls.items():
            if n not in found and cs & found:
                found.add(n)
                changed = True
    return found


class _ModuleLowerer:
    """Lowers every function of a module; resources are shared by all of them."""

    def __init__(self, gm: GraphModule) -> None:
        self.gm = gm
        self.funcs: dict[str, FuncOp] = {
            op.sym_name.data: op for op in gm.module.body.block.ops if isinstance(op, FuncOp)
        }
        if MAIN not in self.funcs:
            raise GraphError("the module has no @main function")
        self.program = Program()
        self.init = _FunctionLowerer(INIT, FunctionKind.BEF)
        self.program.functions.append(self.init.fn)
        self.index: dict[str, int] = {}
        for name in [MAIN, *[n for n in self.funcs if n != MAIN]]:
            self.index[name] = len(self.index) + 1
        self.lowered: dict[str, Function] = {}
        # weights (init arguments) and resources (init results = leading args everywhere)
        self.weights: dict[str, np.ndarray] = {}
        self.weight_reg: dict[str, int] = {}
        self.const_of: dict[SSAValue, str] = {}
        self.resources: list[tuple[int, str]] = []  # (init register, type)
        self.resource_of_weight: dict[str, int] = {}
        self.resource_of_plan: dict[Operation, int] = {}
        self.init_chains: list[int] = []
        self.arena: int | None = None
        self.stateful = self._stateful_functions()

    def _callees(self, op: Operation) -> list[str]:
        return callees(op, self.funcs)

    def _stateful_functions(self) -> set[str]:
        return stateful_functions(self.funcs)

    # -- resources --------------------------------------------------------------------------
    def collect_resources(self) -> None:
        n = 0
        for func in self.funcs.values():
            for op in func.body.block.ops:
                if op.name == "tg.constant":
                    name, arr = _constant_value(op, self.gm, n)
                    n += 1
                    self._add_weight(name, arr)
                    self.const_of[op.results[0]] = name
        for name in self.gm.variables:
            init_value = self.gm.weights.get(name)
            if init_value is None:
                raise GraphError(f"variable '{name}' has no initial value")
            self._add_weight(name, np.asarray(init_value))
        for name in self.gm.variables:  # after every argument: arguments are the first registers
            (ch,) = self.init.kernel("tg.create_variable", [self.weight_reg[name]], [CHAIN],
                                     [("name", sa.StringAttr(name))], UNKNOWN_LOC)
            self.init_chains.append(ch)
        for func in self.funcs.values():
            for op in func.body.block.ops:
                self._prepare_in_init(op)
        for func in self.funcs.values():
            for op in func.body.block.ops:
                if op.name in ("tg.constant", "func.return") or op in self.resource_of_plan:
                    skip = self._prepare_operands(op) if op in self.resource_of_plan else set()
                else:
                    skip = set()
                for i, v in enumerate(op.operands):
                    if i not in skip and v in self.const_of:
                        self._weight_resource(self.const_of[v])
            ret = list(func.body.block.ops)[-1]
            for v in ret.operands:
                if v in self.const_of:
                    self._weight_resource(self.const_of[v])

    def _add_weight(self, name: str, arr: np.ndarray) -> None:
        if name in self.weights:
            return
        self.weights[name] = arr
        self.weight_reg[name] = self.init.arg(str(TType(_tname(arr), tuple(arr.shape))))

    def _weight_resource(self, name: str) -> int:
        if name not in self.resource_of_weight:
            self.resource_of_weight[name] = len(self.resources)
            r = self.weight_reg[name]
            self.resources.append((r, self.init.fn.register_types[r]))
        return self.resource_of_weight[name]

    def _prepare_operands(self, op: Operation) -> set[int]:
        opdef = get_opdef(op.name)
        assert opdef.prepare_operands is not None
        return set(opdef.prepare_operands(op_attrs(op, opdef), len(op.operands))[0])

    def _prepare_in_init(self, op: Operation) -> None:
        if not op.name.startswith("tg.") or op.name == "tg.constant":
            return
        opdef = get_opdef(op.name)
        if not opdef.prepare or opdef.prepare_operands is None:
            return
        attrs = op_attrs(op, opdef)
        prep, _run = opdef.prepare_operands(attrs, len(op.operands))
        if not all(op.operands[i] in self.const_of for i in prep):
            return
        regs = [self.weight_reg[self.const_of[op.operands[i]]] for i in prep]
        (plan,) = self.init.kernel(f"tg.{opdef.prepare}", regs, [PLAN_TYPE],
                                   _kernel_attrs(opdef, attrs), _location(op))
        self.resource_of_plan[op] = len(self.resources)
        self.resources.append((plan, PLAN_TYPE))

    # -- functions --------------------------------------------------------------------------
    def lower_all(self) -> None:
        self.collect_resources()
        init = self.init
        init.fn.return_registers = [r for r, _t in self.resources] + self.init_chains
        init.fn.result_types = [init.fn.register_types[r] for r in init.fn.return_registers]
        order = sorted(self.index, key=self.index.__getitem__)
        self.program.functions.extend(Function(name=n) for n in order)  # placeholders
        for name in order:
            self.program.functions[self.index[name]] = self.lower_function(name)

    def lower_function(self, name: str) -> Function:
        func = self.funcs[name]
        ops = list(func.body.block.ops)
        has_control = any(op.name in CONTROL for op in ops)
        sync = name == MAIN and not has_control
        m = _FunctionLowerer(name, FunctionKind.SYNC if sync else FunctionKind.BEF)
        res = [m.arg(t) for _r, t in self.resources]
        self.arena = None
        if sync and any(BUFFER_ATTR in op.attributes for op in ops):
            self.arena = m.arg(ARENA_TYPE)
        stateful = name in self.stateful
        chain: int | None = None
        if stateful and name != MAIN:
            chain = m.arg(CHAIN)
        for a in func.body.block.args:
            m.arg(str(from_xdsl(a.type)), a)
        if stateful and chain is None:
            (chain,) = m.kernel("tg.new_chain", [], [CHAIN], [], UNKNOWN_LOC)
        for v, wname in self.const_of.items():
            if wname in self.resource_of_weight:
                m.regs[v] = res[self.resource_of_weight[wname]]
        ret = ops[-1]
        if not isinstance(ret, ReturnOp):
            raise GraphError(f"@{name} does not end with func.return")
        for op in ops[:-1]:
            if op.name == "tg.constant":
                continue
            chain = self.lower_op(m, op, res, chain)
        returns = [m.regs[v] if v in m.regs else self._undefined(name, v) for v in ret.operands]
        if stateful and name != MAIN:
            assert chain is not None
            returns.append(chain)
        elif stateful and not sync:
            # @main returns no chain: its results wait for it, so a failed effect (an
            # assertion in a branch...) fails the call instead of only being reported
            assert chain is not None
            returns = [m.kernel("tg.after_chain", [r, chain], [str(from_xdsl(v.type))], [],
                                UNKNOWN_LOC)[0] for r, v in zip(returns, ret.operands, strict=True)]
        return m.finish(returns)

    @staticmethod
    def _undefined(fname: str, v: SSAValue) -> int:
        raise GraphError(f"@{fname} returns a value it does not define ({v})")

    def lower_op(self, m: _FunctionLowerer, op: Operation, res: list[int],
                 chain: int | None) -> int | None:
        opdef = get_opdef(op.name)
        attrs = op_attrs(op, opdef)
        loc = _location(op)
        types = [str(from_xdsl(r.type)) for r in op.results]
        if op.name in CONTROL:
            outs, chain = self.lower_control(m, op, attrs, res, chain, types, loc)
        elif opdef.stateful:
            assert chain is not None
            key = _kernel_attrs(opdef, attrs)
            if op.name == "tg.read_variable":
                outs = m.kernel(op.name, [chain], [*types, CHAIN], key, loc)
                chain = outs.pop()
            else:  # the assigns, tg.print: operands and the chain in, the chain out
                operands = [m.reg(op, i) for i in range(len(op.operands))]
                (chain,) = m.kernel(op.name, [*operands, chain], [CHAIN], key, loc)
                outs = []
        elif op.name == "tg.fused_graph":
            program = sa.StringAttr(graph_program(op))
            outs = m.kernel(op.name, [m.reg(op, i) for i in range(len(op.operands))], types,
                            [("program", program)], loc)
        elif op.name == "tg.shape_plan":
            program = sa.StringAttr(shape_plan_program(op))
            outs = m.kernel(op.name, [m.reg(op, i) for i in range(len(op.operands))], types,
                            [("program", program)], loc)
        elif op.name == "tg.fused_elementwise":
            program = sa.StringAttr(region_program(op.regions[0].blocks.first))  # type: ignore[arg-type]
            outs = self._kernel(m, op, op.name, [m.reg(op, i) for i in range(len(op.operands))],
                                types, [("program", program)], loc)
        elif opdef.prepare and opdef.prepare_operands is not None:
            prep, run = opdef.prepare_operands(attrs, len(op.operands))
            if op in self.resource_of_plan:
                plan = res[self.resource_of_plan[op]]
            else:
                (plan,) = m.kernel(f"tg.{opdef.prepare}", [m.reg(op, i) for i in prep],
                                   [PLAN_TYPE], _kernel_attrs(opdef, attrs), loc)
            operands = [m.reg(op, run[0]), plan] + [m.reg(op, i) for i in run[1:]]
            outs = self._kernel(m, op, f"tg.{opdef.compute_key}", operands, types, [], loc)
        else:
            if opdef.compute_key is None:
                raise GraphError(f"{op.name} has no runtime kernel")
            operands = [m.reg(op, i) for i in range(len(op.operands))]
            outs = self._kernel(m, op, f"tg.{opdef.compute_key}", operands, types,
                                _kernel_attrs(opdef, attrs), loc)
        for r, reg in zip(op.results, outs, strict=True):
            m.regs[r] = reg
        return chain

    def _kernel(self, m: _FunctionLowerer, op: Operation, name: str, operands: list[int],
                types: list[str], attrs: list[tuple[str, sa.Attribute]], loc: Location
                ) -> list[int]:
        """A kernel, or its ``.buf`` form writing into the call's arena when planned."""
        plan = op.attributes.get(BUFFER_ATTR)
        if plan is None or self.arena is None:
            return m.kernel(name, operands, types, attrs, loc)
        slot_site = from_xattr("ints", plan, f"{op.name} {BUFFER_ATTR}")
        buf = ("buffer", bef_attr("ints", slot_site))
        return m.kernel(f"{name}.buf", [self.arena, *operands], types,
                        sorted([*attrs, buf]), loc)

    def lower_control(self, m: _FunctionLowerer, op: Operation, attrs: dict[str, Any],
                      res: list[int], chain: int | None, types: list[str], loc: Location
                      ) -> tuple[list[int], int | None]:
        callees = self._callees(op)
        stateful = any(c in self.stateful for c in callees)
        ch = [chain] if stateful and chain is not None else []
        out_types = types + ([CHAIN] if ch else [])
        operands = [m.reg(op, i) for i in range(len(op.operands))]
        if op.name in ("tg.if", "tg.case"):
            conv = "tg.to_pred" if op.name == "tg.if" else "tg.to_index"
            (sel,) = m.kernel(conv, [operands[0]], ["i1" if op.name == "tg.if" else "i64"], [],
                              loc)
            kname = "tfrt.if" if op.name == "tg.if" else "tfrt.case"
            fns = [self._callee_index(c, stateful) for c in callees]
            outs = m.kernel(kname, [sel, *res, *ch, *operands[1:]], out_types, [], loc, fns)
        else:
            cond, body = attrs["cond"], attrs["body"]
            ci = self._callee_index(cond, stateful)
            first = m.kernel("tfrt.call", [*res, *ch, *operands],
                             ["tensor<i1>", *([CHAIN] if ch else [])], [], loc, [ci])
            if ch:
                ch = [first[1]]
            (pred,) = m.kernel("tg.to_pred", [first[0]], ["i1"], [], loc)
            wbody = self._while_body(cond, body, stateful, types)
            loop_types = [t for _r, t in self.resources] + ([CHAIN] if ch else []) + types
            outs = m.kernel("tfrt.while", [pred, *res, *ch, *operands], loop_types, [], loc,
                            [wbody])
            outs = outs[len(self.resources):]
            if ch:
                outs = outs[1:] + outs[:1]
        if ch:
            chain = outs.pop()
        return outs, chain

    def _callee_index(self, name: str, caller_stateful: bool) -> int:
        if caller_stateful and name not in self.stateful:
            # the callee takes no chain: route through a wrapper that passes it along
            return self._chain_wrapper(name)
        return self.index[name]

    def _chain_wrapper(self, name: str) -> int:
        key = f"__chain_{name}"
        if key in self.index:
            return self.index[key]
        func = self.funcs[name]
        w = _FunctionLowerer(key, FunctionKind.BEF)
        res = [w.arg(t) for _r, t in self.resources]
        ch = w.arg(CHAIN)
        args = [w.arg(str(from_xdsl(t))) for t in func.function_type.inputs.data]
        rtypes = [str(from_xdsl(t)) for t in func.function_type.outputs.data]
        outs = w.kernel("tfrt.call", [*res, *args], rtypes, [], UNKNOWN_LOC, [self.index[name]])
        self.index[key] = len(self.program.functions)
        self.program.functions.append(w.finish([*outs, ch]))
        return self.index[key]

    def _while_body(self, cond: str, body: str, stateful: bool, types: list[str]) -> int:
        """``(res..., [ch], args...) -> (res..., [ch], body(args)..., to_pred(cond(...)))``."""
        w = _FunctionLowerer(f"__while_{body}_{cond}", FunctionKind.BEF)
        res = [w.arg(t) for _r, t in self.resources]
        ch = [w.arg(CHAIN)] if stateful else []
        args = [w.arg(t) for t in types]
        bi = self._callee_index(body, stateful)
        ci = self._callee_index(cond, stateful)
        outs = w.kernel("tfrt.call", [*res, *ch, *args], types + ([CHAIN] if ch else []), [],
                        UNKNOWN_LOC, [bi])
        if ch:
            ch = [outs.pop()]
        c = w.kernel("tfrt.call", [*res, *ch, *outs], ["tensor<i1>"] + ([CHAIN] if ch else []),
                     [], UNKNOWN_LOC, [ci])
        if ch:
            ch = [c[1]]
        (pred,) = w.kernel("tg.to_pred", [c[0]], ["i1"], [], UNKNOWN_LOC)
        index = len(self.program.functions)
        self.program.functions.append(w.finish([*res, *ch, *outs, pred]))
        return index


def lower(gm: GraphModule) -> LoweredModel:
    """Lower ``gm`` (see the module docstring).

    Raises:
        GraphError: for ops without a runtime form, missing or mistyped weights, unknown
            functions.
    """
    sig = gm.signature if gm.signature.inputs or gm.signature.outputs else signature_of(gm.module)
    low = _ModuleLowerer(gm)
    low.lower_all()
    program = low.program
    program.finalize()
    from pytfrt.bef.streams import assign_stream_ids

    assign_stream_ids(program)
    return LoweredModel(program, list(low.weights), low.weights, sig, len(low.resources),
                        list(gm.variables))


def _kernel_attrs(opdef: OpDef, attrs: dict[str, Any]) -> list[tuple[str, sa.Attribute]]:
    return [(k, bef_attr(opdef.attrs[k].kind, attrs[k])) for k in sorted(attrs)]


def _tname(arr: np.ndarray) -> str:
    from pytfrt.compiler.types import dtype_name

    return dtype_name(arr.dtype)


def _constant_value(op: Operation, gm: GraphModule, n: int) -> tuple[str, np.ndarray]:
    """(weight name, array) of a ``tg.constant`` (a missing weight: zeros if ``gm.zero_fill``)."""
    t = from_xdsl(op.results[0].type)
    value = op.attributes.get("value")
    if value is not None:
        arr = from_xattr("dense", value, "tg.constant")
        return f"__inline_{n}", _check_const(arr, t, "inline value")
    w = op.attributes.get("weight")
    if not isinstance(w, b.StringAttr):
        raise GraphError("tg.constant needs a 'weight' or a 'value' attribute")
    name = w.data
    arr = gm.weights.get(name)
    if arr is None:
        if not gm.zero_fill:
            raise GraphError(f"tg.constant: weight '{name}' is not in the module's weights")
        if not t.static:
            raise GraphError(f"weight '{name}' is missing and its type {t} is not static")
        arr = np.zeros(tuple(d or 0 for d in t.shape or ()), np_dtype(t.dtype))
    return name, _check_const(np.asarray(arr), t, f"weight '{name}'")


def _check_const(arr: np.ndarray, t: TType, what: str) -> np.ndarray:
    if arr.dtype != np_dtype(t.dtype):
        raise GraphError(f"{what} has dtype {arr.dtype}, the constant's type is {t}")
    if t.shape is not None and (len(t.shape) != arr.ndim or any(
            d is not None and d != s for d, s in zip(t.shape, arr.shape, strict=True))):
        raise GraphError(f"{what} has shape {list(arr.shape)}, the constant's type is {t}")
    return arr


__all__ = ["INIT", "MAIN", "LoweredModel", "bef_attr", "lower", "op_attrs"]

