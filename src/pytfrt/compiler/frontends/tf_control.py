"""TF functional control flow and function calls -> ``tg.if`` / ``tg.case`` / ``tg.while``.

``If``/``StatelessIf`` (``tf.cond``), ``Case``/``StatelessCase`` (``tf.switch_case``) and
``While``/``StatelessWhile`` (``tf.while_loop``) become the dialect's functional ops whose
bodies are functions of the module, made from TF's function library. Arguments known at
import time (constants, variables' resource handles) are bound inside the bodies instead of
being passed, so bodies see static shapes and name their variables; a condition or branch
index known at import time selects its branch directly (inlined). For ``While``, a loop
variable the body passes through unchanged is bound statically too (TF passes captured
tensors as loop variables); a loop that is a Keras ``LSTM``/``GRU``/``SimpleRNN`` layer
becomes one ``tg.recurrent`` instead (:mod:`.tf_recurrent`). A loop of a gradient (it carries
TF's accumulators of the forward loop's intermediates) with a trip count known at import time
is unrolled instead (:func:`_unroll`).
``PartitionedCall``/``StatefulPartitionedCall`` are inlined.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.compiler.frontends.tf_graph import split_input
from pytfrt.compiler.frontends.tf_recurrent import fuse_keras_loop
from pytfrt.compiler.frontends.tf_registry import tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, attr


def _static(tv: TV) -> bool:
    return tv.resource is not None or tv.const is not None


def _as_bool(cx: Any, cond: TV) -> TV:
    if cond.dtype == "i1":
        return cond
    return cx.op("not_equal", [cond, cx.scalar(0, cond.dtype)])


def _inline(cx: Any, fname: str, args: list[TV]) -> list[TV]:
    lg = cx.imp.library_graph(fname)
    saved_where = cx.where
    cx.where = f"function '{fname}' of {cx.imp.source}"
    try:
        return cx.translate(lg, list(args))
    finally:
        cx.where = saved_where


@tf_op("PartitionedCall", "StatefulPartitionedCall", tg="(inlined)", family="tf_control")
def _call(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return _inline(cx, attr(node, "f"), ins)


def _call_branches(
    cx: Any, names: list[str], args: list[TV], selector: TV, op: str, **extra: Any
) -> list[TV]:
    static = [_static(a) for a in args]
    made = [cx.imp.body_function(n, args, static) for n in names]
    dyn = made[0][1]
    operands = [selector] + [args[i] for i in dyn]
    n_out = len(cx.imp.library_graph(names[0]).outputs)
    fnames = [m[0] for m in made]
    if op == "if":
        return cx.ops("if", operands, n_out, then_branch=fnames[0], else_branch=fnames[1])
    return cx.ops("case", operands, n_out, branches=fnames)


@tf_op(
    "If",
    "StatelessIf",
    tg="`if`",
    note="a constant condition inlines its branch",
    family="tf_control",
)
def _if(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    cond, args = ins[0], ins[1:]
    then_f, else_f = attr(node, "then_branch"), attr(node, "else_branch")
    if cond.const is not None:
        return _inline(cx, then_f if bool(np.asarray(cond.const).reshape(-1)[0]) else else_f, args)
    if cond.rank not in (0, None):
        raise ConversionError(f"a condition of shape {cond.shape} (expected a scalar)")
    return _call_branches(cx, [then_f, else_f], args, _as_bool(cx, cond), "if")


@tf_op(
    "Case",
    "StatelessCase",
    tg="`case`",
    note="out-of-range index runs the last branch, as TF",
    family="tf_control",
)
def _case(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    index, args = ins[0], ins[1:]
    branches = list(attr(node, "branches"))
    if index.const is not None:
        i = int(np.asarray(index.const).reshape(-1)[0])
        return _inline(cx, branches[i if 0 <= i < len(branches) else -1], args)
    if index.dtype not in ("i32", "i64"):
        raise ConversionError("the branch index must be an integer")
    # TF runs the last branch for an out-of-range index: clamp negatives to it too.
    n = cx.scalar(len(branches) - 1, index.dtype)
    bad = cx.op(
        "logical_or",
        [cx.op("less", [index, cx.scalar(0, index.dtype)]), cx.op("greater", [index, n])],
    )
    index = cx.op("select", [bad, n, index])
    return _call_branches(cx, branches, args, index, "case")


_UNROLL_LIMIT = 64
"""Most iterations :func:`_unroll` inlines (a longer loop keeps its ``tg.while``)."""


def _unroll(cx: Any, cond_f: str, body_f: str, ins: list[TV]) -> list[TV] | None:
    """The loop's results with its iterations inlined, or ``None`` (nothing used emitted).

    Only for loops that carry a TensorList whose elements are known at import time (TF's
    while-loop gradient: the forward loop pushes each step's intermediates onto accumulators,
    the gradient loop pops them), and only if the condition is known at import time before
    every iteration (a static trip count, at most :data:`_UNROLL_LIMIT`). Then each popped
    element is the very value pushed, shapes and constants included, so the gradient loop's
    shape arithmetic folds as it does outside loops. Ops emitted by an attempt that gives up
    are left unused (removed as dead code).
    """
    if not any(a.list_items is not None for a in ins):
        return None
    args = list(ins)
    for step in range(_UNROLL_LIMIT + 1):
        cond = _inline(cx, cond_f, args)[0]
        if cond.const is None:
            return None
        if not bool(np.asarray(cond.const).reshape(-1)[0]):
            return args
        if step == _UNROLL_LIMIT:
            return None
        outs = _inline(cx, body_f, args)
        for new, old in zip(outs, args, strict=True):
            if new.list_elem is None and old.list_elem is not None:
                new.list_elem = old.list_elem
        args = outs
    return None


def _pass_through(lg: Any, i: int) -> bool:
    """True if output ``i`` of body graph ``lg`` is its input ``i`` (through Identity ops)."""
    name, idx, _ = split_input(lg.outputs[i])
    while True:
        if name == lg.inputs[i]:
            return idx == 0
        node = lg.by_name.get(name)
        if node is None or node.op not in ("Identity", "StopGradient") or not node.input:
            return False
        name, idx, _ = split_input(node.input[0])


@tf_op(
    "While",
    "StatelessWhile",
    tg="`while`; a Keras LSTM/GRU/SimpleRNN loop: `recurrent`",
    note="loop-invariant constants and variables bound statically; a recurrent layer's loop "
    "is replaced once proved equal on random inputs (masking keeps the loop)",
    family="tf_control",
)
def _while(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    cond_f, body_f = attr(node, "cond"), attr(node, "body")
    unrolled = _unroll(cx, cond_f, body_f, ins)
    if unrolled is not None:
        return unrolled
    body = cx.imp.library_graph(body_f)
    static = [_static(a) and _pass_through(body, i) for i, a in enumerate(ins)]
    for i, (a, s) in enumerate(zip(ins, static, strict=True)):
        if a.resource is not None and not s:
            raise ConversionError(f"loop variable {i} is a resource handle the body replaces")
    shapes = attr(node, "output_shapes", [])
    args: list[TV] = []
    for i, a in enumerate(ins):
        if static[i]:
            args.append(a)
            continue
        if a.list_elem is not None:  # a TensorList: its length and unknown element dims vary
            arg = TV(cx.val(a), dtype=a.dtype, shape=(None, *a.list_elem))
            arg.list_elem = a.list_elem
            args.append(arg)
            continue
        shape = a.shape
        if (
            i < len(shapes)
            and shapes[i] is not None
            and a.shape is not None
            and len(shapes[i]) == len(a.shape)
        ):
            shape = tuple(
                None if s is None or d is None else d
                for s, d in zip(shapes[i], a.shape, strict=True)
            )
        elif i < len(shapes) and shapes[i] is None:
            shape = None
        args.append(TV(cx.val(a), dtype=a.dtype, shape=shape))
    c_name, dyn = cx.imp.body_function(cond_f, args, static, boolean_result=True)
    b_name, _ = cx.imp.body_function(
        body_f, args, static, results=[i for i, s in enumerate(static) if not s]
    )
    operands = [args[i] for i in dyn]
    outs = fuse_keras_loop(cx, operands, [ins[i] for i in dyn], c_name, b_name)
    if outs is None:
        outs = cx.ops("while", operands, len(dyn), cond=c_name, body=b_name)
    result: list[TV] = list(ins)
    for i, v in zip(dyn, outs, strict=True):
        v.list_elem = ins[i].list_elem
        result[i] = v
    return result
