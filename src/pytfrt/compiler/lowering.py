"""Lowering a graph module to a BEF :class:`~pytfrt.bef.program.Program` plus its weights.

The program has two functions (and, later, control-flow bodies):

* ``@tg_init(weights...) -> resources...`` (an async BEF function, run once at load): takes
  the weights (from ``weights.btf`` or the ``GraphModule``) and runs the *prepare* kernels of
  ops with weight-dependent preparation (``tg.conv2d.prepare`` -> a conv plan); returns the
  *resources* ``@main`` uses: weights and prepared plans.
* ``@main(resources..., inputs...) -> outputs...``: one kernel ``tg.<op>`` per op, carrying
  all its attributes (defaults filled in, name-sorted); constants are resources (leading
  arguments), never kernels.  Without control flow or state it is a ``tfrt.sync`` function,
  which the executor runs as straight-line Python (``pytfrt.executor.sync_executor``).

This mirrors TFRT's SavedModel split (an init function whose results the serving functions
receive) and keeps per-call work to the ops themselves.  Pure: no shared state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import builtin as b
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, SSAValue

from pytfrt.bef.program import Function, Kernel, Program
from pytfrt.compiler.attrs import from_xattr
from pytfrt.compiler.builder import GraphModule, signature_of
from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.ops import OpDef, get_opdef
from pytfrt.compiler.types import TType, from_xdsl, np_dtype
from pytfrt.signature import Signature
from pytfrt.support import attributes as sa
from pytfrt.support.function_kind import FunctionKind
from pytfrt.support.location import UNKNOWN_LOC, Location

INIT = "tg_init"
MAIN = "main"
PLAN_TYPE = "!tg.plan"


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


def op_attrs(op: Operation, opdef: OpDef) -> dict[str, Any]:
    """The op's attributes as canonical Python values, defaults filled in.

    Raises:
        GraphError: for an unknown attribute or one of the wrong kind.
    """
    given: dict[str, Any] = {}
    for key, attr in op.attributes.items():
        spec = opdef.attrs.get(key)
        if spec is None:
            raise GraphError(f"{op.name}: unknown attribute '{key}'")
        given[key] = from_xattr(spec.kind, attr, f"{op.name} attribute '{key}'")
    return opdef.check_attrs(given)


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
               attributes: list[tuple[str, sa.Attribute]], loc: Location) -> list[int]:
        results = []
        for t in result_types:
            results.append(len(self.fn.register_types))
            self.fn.register_types.append(t)
        self.fn.kernels.append(Kernel(name=name, operands=operands, results=results,
                                      attributes=attributes, location=loc))
        return results


def lower(gm: GraphModule) -> LoweredModel:
    """Lower ``gm`` (see the module docstring).

    Raises:
        GraphError: for ops without a runtime form, missing or mistyped weights.
    """
    main = gm.function(MAIN)
    sig = gm.signature if gm.signature.inputs or gm.signature.outputs else signature_of(gm.module)
    ops = list(main.body.block.ops)
    body = [op for op in ops if not isinstance(op, ReturnOp)]
    ret = ops[-1]
    if not isinstance(ret, ReturnOp):
        raise GraphError("@main does not end with func.return")

    # 1. constants -> weights (init arguments)
    weights: dict[str, np.ndarray] = {}
    const_of: dict[SSAValue, str] = {}
    for op in body:
        if op.name != "tg.constant":
            continue
        name, arr = _constant_value(op, gm, len(weights))
        if name not in weights:
            weights[name] = arr
        const_of[op.results[0]] = name

    init = _FunctionLowerer(INIT, FunctionKind.BEF)
    init_reg: dict[str, int] = {}
    for name, arr in weights.items():
        init_reg[name] = init.arg(str(TType(_tname(arr), tuple(arr.shape))))

    # 2. which values main needs as resources; prepare kernels go to init when they can
    resources: list[tuple[int, str, SSAValue | None]] = []  # (init reg, type, plan-of-op)
    resource_of_const: dict[str, int] = {}
    resource_of_plan: dict[Operation, int] = {}
    other_ops: list[Operation] = []

    def const_resource(name: str) -> int:
        if name not in resource_of_const:
            resource_of_const[name] = len(resources)
            resources.append((init_reg[name], init.fn.register_types[init_reg[name]], None))
        return resource_of_const[name]

    for op in body:
        if op.name == "tg.constant":
            continue
        opdef = get_opdef(op.name)
        if opdef.prepare and opdef.prepare_operands is not None:
            attrs = op_attrs(op, opdef)
            prep, _run = opdef.prepare_operands(attrs, len(op.operands))
            if all(op.operands[i] in const_of for i in prep):
                regs = [init_reg[const_of[op.operands[i]]] for i in prep]
                (plan,) = init.kernel(f"tg.{opdef.prepare}", regs, [PLAN_TYPE],
                                      _kernel_attrs(opdef, attrs), _location(op))
                resource_of_plan[op] = len(resources)
                resources.append((plan, PLAN_TYPE, None))
        other_ops.append(op)
    # constants used directly by main's kernels or returned
    used_consts: list[str] = []
    for op in other_ops:
        skip: set[int] = set()
        if op in resource_of_plan:
            opdef = get_opdef(op.name)
            assert opdef.prepare_operands is not None
            skip = set(opdef.prepare_operands(op_attrs(op, opdef), len(op.operands))[0])
        for i, v in enumerate(op.operands):
            if i not in skip and v in const_of:
                used_consts.append(const_of[v])
    for v in ret.operands:
        if v in const_of:
            used_consts.append(const_of[v])
    for name in used_consts:
        const_resource(name)
    init.fn.return_registers = [r for r, _t, _ in resources]
    init.fn.result_types = [t for _r, t, _ in resources]

    # 3. main
    stateful = any(get_opdef(op.name).stateful for op in other_ops)
    control = any(get_opdef(op.name).family == "control" for op in other_ops)
    if stateful or control:
        raise GraphError("control flow and variables are not lowered yet")
    m = _FunctionLowerer(MAIN, FunctionKind.SYNC)
    res_regs = [m.arg(t) for _r, t, _ in resources]
    for a in main.body.block.args:
        m.arg(str(from_xdsl(a.type)), a)
    for v, name in const_of.items():
        if name in resource_of_const:
            m.regs[v] = res_regs[resource_of_const[name]]
    for op in other_ops:
        opdef = get_opdef(op.name)
        key = opdef.compute_key
        if key is None:
            raise GraphError(f"{op.name} has no runtime kernel")
        attrs = op_attrs(op, opdef)
        loc = _location(op)
        types = [str(from_xdsl(r.type)) for r in op.results]
        if opdef.prepare and opdef.prepare_operands is not None:
            prep, run = opdef.prepare_operands(attrs, len(op.operands))
            if op in resource_of_plan:
                plan = res_regs[resource_of_plan[op]]
            else:
                (plan,) = m.kernel(f"tg.{opdef.prepare}", [_reg(m, op, i) for i in prep],
                                   [PLAN_TYPE], _kernel_attrs(opdef, attrs), loc)
            operands = [_reg(m, op, run[0]), plan] + [_reg(m, op, i) for i in run[1:]]
            outs = m.kernel(f"tg.{key}", operands, types, [], loc)
        else:
            operands = [_reg(m, op, i) for i in range(len(op.operands))]
            outs = m.kernel(f"tg.{key}", operands, types, _kernel_attrs(opdef, attrs), loc)
        for r, reg in zip(op.results, outs, strict=True):
            m.regs[r] = reg
    # sync functions may not return arguments or one register twice: copy those
    returns: list[int] = []
    nargs = len(m.fn.argument_types)
    for v in ret.operands:
        reg = m.regs[v]
        if reg < nargs or reg in returns:
            (reg,) = m.kernel("tg.identity", [reg], [m.fn.register_types[reg]], [], UNKNOWN_LOC)
        returns.append(reg)
    m.fn.return_registers = returns
    m.fn.result_types = [m.fn.register_types[r] for r in returns]

    program = Program(functions=[init.fn, m.fn])
    program.finalize()
    from pytfrt.bef.streams import assign_stream_ids

    assign_stream_ids(program)
    return LoweredModel(program, list(weights), weights, sig, len(resources),
                        list(gm.variables))


def _reg(m: _FunctionLowerer, op: Operation, i: int) -> int:
    v = op.operands[i]
    r = m.regs.get(v)
    if r is None:
        raise GraphError(f"{op.name}: operand {i} is not defined in @main")
    return r


def _kernel_attrs(opdef: OpDef, attrs: dict[str, Any]) -> list[tuple[str, sa.Attribute]]:
    return [(k, bef_attr(opdef.attrs[k].kind, attrs[k])) for k in sorted(attrs)]


def _tname(arr: np.ndarray) -> str:
    from pytfrt.compiler.types import dtype_name

    return dtype_name(arr.dtype)


def _constant_value(op: Operation, gm: GraphModule, n: int) -> tuple[str, np.ndarray]:
    """(weight name, array) of a ``tg.constant``; missing weights are zero-filled."""
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

