"""The two MLIR rewrite passes ``tfrt_opt`` offers: ``-inline`` and ``-canonicalize``.

* :func:`inline_calls` mirrors MLIR's inliner on TFRT programs: every ``tfrt.call`` (or
  ``func.call``) whose callee is a function with a single-block body and whose symbol is not
  public-with-other-uses gets the callee's body cloned in place of the call (callee arguments
  replaced by the call operands, call results by the operands of the callee's terminator).
  Afterwards private functions that are no longer referenced are erased (MLIR's symbol DCE).
  Calls to native (body-less) functions and recursive calls are left alone.
* :func:`canonicalize` applies the ``tfrt.merge.chains`` canonicalization checked by TFRT's
  ``compiler/merge_chains.mlir`` (docs/conformance.md): operands that have other uses are dropped;
  if no operand is left the op is replaced by its first operand; if every operand is single-use the
  op is kept unchanged.

Both mutate the module in place; neither raises for well-formed (verified) input.
"""

from __future__ import annotations

from xdsl.dialects import builtin as b
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue

from pytfrt.mlir.walk import walk_ops

_CALL_OPS = ("tfrt.call", "func.call")
_RETURN_OPS = ("tfrt.return", "func.return")


def _callee_name(op: Operation) -> str | None:
    attr = op.attributes.get("callee")
    if isinstance(attr, b.SymbolRefAttr) and not attr.nested_references.data:
        return attr.root_reference.data
    return None


def _functions(module: b.ModuleOp) -> dict[str, FuncOp]:
    return {
        op.sym_name.data: op for op in module.body.block.ops if isinstance(op, FuncOp)
    }


def _is_private(fn: FuncOp) -> bool:
    vis = fn.sym_visibility
    return vis is not None and vis.data == "private"


def _inline_one(call: Operation, callee: FuncOp) -> bool:
    """Clone ``callee``'s body in place of ``call``; False if it cannot be inlined."""
    blocks = list(callee.body.blocks)
    if len(blocks) != 1:
        return False
    body = blocks[0]
    terminator = body.last_op
    if terminator is None or terminator.name not in _RETURN_OPS:
        return False
    if len(call.operands) != len(body.args) or len(call.results) != len(terminator.operands):
        return False
    block = call.parent_block()
    if block is None:
        return False
    mapper: dict[SSAValue, SSAValue] = dict(zip(body.args, call.operands, strict=True))
    for op in body.ops:
        if op is terminator:
            break
        block.insert_op_before(op.clone(value_mapper=mapper), call)
    for result, value in zip(call.results, terminator.operands, strict=True):
        result.replace_all_uses_with(mapper.get(value, value))
    call.detach()
    call.erase()
    return True


def _symbol_uses(module: b.ModuleOp) -> set[str]:
    used: set[str] = set()

    def collect(attr: object) -> None:
        if isinstance(attr, b.SymbolRefAttr):
            used.add(attr.root_reference.data)
        elif isinstance(attr, b.ArrayAttr):
            for e in attr.data:
                collect(e)
        elif isinstance(attr, b.DictionaryAttr):
            for e in attr.data.values():
                collect(e)

    for op in walk_ops(module):
        if isinstance(op, FuncOp):
            continue
        for attr in op.attributes.values():
            collect(attr)
    return used


def inline_calls(module: b.ModuleOp) -> None:
    """Inline calls to functions with bodies, then erase unreferenced private functions."""
    functions = _functions(module)
    for _ in range(16):  # nested calls: repeat until nothing changes (bounded, no recursion)
        changed = False
        for fn in functions.values():
            calls = [op for op in walk_ops(fn) if op.name in _CALL_OPS]
            for call in calls:
                name = _callee_name(call)
                callee = functions.get(name) if name is not None else None
                if callee is None or callee is fn or not callee.body.blocks:
                    continue
                if any(
                    op.name in _CALL_OPS and _callee_name(op) == name for op in walk_ops(callee)
                ):
                    continue  # recursive
                changed |= _inline_one(call, callee)
        if not changed:
            break
    used = _symbol_uses(module)
    for name, fn in functions.items():
        if _is_private(fn) and fn.body.blocks and name not in used:
            fn.detach()
            fn.erase()


def canonicalize(module: b.ModuleOp) -> None:
    """Apply the ``tfrt.merge.chains`` canonicalization everywhere in ``module``."""
    for op in [o for o in walk_ops(module) if o.name == "tfrt.merge.chains"]:
        operands = list(op.operands)
        if not operands:
            continue
        single = [v for v in operands if v.has_one_use()]
        if len(single) == len(operands):
            continue
        if not single:
            op.results[0].replace_all_uses_with(operands[0])
            op.detach()
            op.erase()
            continue
        new = op.clone()
        new.operands = single
        block = op.parent_block()
        assert block is not None
        block.insert_op_before(new, op)
        op.results[0].replace_all_uses_with(new.results[0])
        op.detach()
        op.erase()
