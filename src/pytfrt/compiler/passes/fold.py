"""``-tg-constant-fold`` and ``-tg-dce``.

Constant folding evaluates ops whose operands are all constants with the op's own compute
function (the runtime table of ``pytfrt.backends.cpu.graph_kernels``, so folding and running
agree bit for bit) and replaces them by constants (inline when small, else new weights).
Stateful ops, control flow, ops with a load-time ``prepare`` step, and results larger than
:data:`FOLD_LIMIT` elements are left alone; an op whose compute raises is left for run time
to report.

Dead-code elimination removes ops whose results are unused -- never stateful ops or control
flow that reaches state -- then functions no control-flow op refers to, then weights no constant
refers to.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects.func import ReturnOp

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.lowering import CONTROL, callees, stateful_functions
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    functions,
    is_tg,
    make_constant,
    prune_weights,
    replace,
    ttype,
)
from pytfrt.compiler.types import np_dtype

FOLD_LIMIT = 1 << 22
"""Results with more elements than this are not folded (they would bloat the weights)."""


def evaluate(op: Any, values: list[np.ndarray], table: dict[str, Any]) -> list[np.ndarray] | None:
    """The results of ``tg`` op ``op`` on the operand arrays ``values``, computed by the op's
    own compute function in ``table`` (the runtime table), or ``None`` when it is not to be
    evaluated ahead of run time: a stateful op, control flow, an op with a load-time
    ``prepare`` step or without a compute function, a compute that raises (run time reports
    it), results whose dtype or shape are not the op's result types, or results larger than
    :data:`FOLD_LIMIT` elements.

    The one evaluation of ``-tg-constant-fold`` and of the ONNX front end's import-time
    folding (:meth:`pytfrt.compiler.frontends.onnx_mapping.OnnxGraphImporter._import_node`).
    Thread-safe as the compute functions are (they are pure)."""
    opdef = get_opdef(op.name)
    if (opdef.stateful or op.name in CONTROL or opdef.prepare or opdef.compute_key is None
            or not op.operands):
        return None
    fn = table.get(opdef.compute_key)
    if fn is None:
        return None
    try:
        with np.errstate(all="ignore"):  # (what run time would warn about is not run yet)
            out = fn(*values, **attrs_of(op))
    except Exception:  # noqa: BLE001 - the kernel reports it at run time
        return None
    outs = list(out) if isinstance(out, tuple) else [out]
    if len(outs) != len(op.results):
        return None
    arrays = []
    for r, o in zip(op.results, outs, strict=True):
        arr = np.asarray(o)
        t = ttype(r)
        if arr.dtype != np_dtype(t.dtype) or arr.size > FOLD_LIMIT:
            return None
        if t.shape is not None and (len(t.shape) != arr.ndim or any(
                d is not None and d != s for d, s in zip(t.shape, arr.shape, strict=True))):
            return None
        arrays.append(arr)
    return arrays


def _fold_one(gm: GraphModule, op: Any, table: dict[str, Any]) -> bool:
    values = []
    for v in op.operands:
        arr = const_value(gm, v)
        if arr is None:
            return False
        values.append(arr)
    arrays = evaluate(op, values, table)
    if arrays is None:
        return False
    block = op.parent_block()
    assert block is not None
    consts = []
    for arr in arrays:
        c = make_constant(gm, arr)
        block.insert_op_before(c, op)
        consts.append(c.results[0])
    replace(op, consts)
    return True


def constant_fold(gm: GraphModule) -> GraphModule:
    """Run ``-tg-constant-fold`` in place (folded-away constants stay until ``-tg-dce``)."""
    from pytfrt.backends.cpu.graph_kernels import graph_ops

    table = graph_ops()
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if is_tg(op) and op.name != "tg.constant":
                _fold_one(gm, op, table)
    return gm


def dce(gm: GraphModule) -> GraphModule:
    """Run ``-tg-dce`` in place."""
    funcs = {f.sym_name.data: f for f in functions(gm)}
    stateful = stateful_functions(funcs)
    for f in funcs.values():
        changed = True
        while changed:
            changed = False
            for op in reversed(list(f.body.block.ops)):
                if isinstance(op, ReturnOp) or not is_tg(op):
                    continue
                if get_opdef(op.name).stateful:
                    continue
                if op.name in CONTROL and any(c in stateful for c in callees(op, funcs)):
                    continue
                if all(not r.uses for r in op.results):
                    op.detach()
                    op.erase()
                    changed = True
    # without @main (a library of functions, e.g. a test file) every function is a root
    live = {"main"} if "main" in funcs else set(funcs)
    todo = list(live)
    while todo:
        f = funcs[todo.pop()]
        for op in f.body.block.ops:
            for c in callees(op, funcs):
                if c not in live:
                    live.add(c)
                    todo.append(c)
    for name, f in funcs.items():
        if name not in live:
            f.detach()
            f.erase()
    prune_weights(gm)
    return gm
