"""TF resource variables and optimizer updates -> the graph dialect's variable ops.

A resource handle is never a runtime value: it is a :class:`~.tf_values.ResourceRef` naming
the variable. When the imported program writes no variable, reads are frozen into weights
(constants named after the variable); otherwise every variable is declared with
``GraphBuilder.variable`` and reads/writes become ``read_variable`` / ``assign_variable`` /
``assign_add_variable`` / ``assign_sub_variable``. TF's fused optimizer updates
(``ResourceApply*``) are expanded into reads, arithmetic and assigns following TF's kernels'
update rules (``tensorflow/core/kernels/training_ops.cc``).
"""

from __future__ import annotations

from typing import Any

from pytfrt.compiler.frontends.tf_registry import tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, ResourceRef, attr


def _ref(tv: TV) -> ResourceRef:
    if tv.resource is None:
        raise ConversionError("expected a resource handle bound to a variable")
    return tv.resource


def read(cx: Any, tv: TV) -> TV:
    """The current value of the variable behind resource ``tv``."""
    return cx.imp.variable_tv(cx, _ref(tv))


def assign(cx: Any, tv: TV, value: TV, op: str = "assign_variable") -> None:
    """Write ``value`` into the variable behind ``tv`` (``op``: assign, add or sub)."""
    ref = _ref(tv)
    if not cx.imp.keep_variables:
        raise ConversionError("variable writes in a program imported with frozen variables")
    cx.imp.declare_variable(ref.name)
    cx.ops(op, [value], 0, name=ref.name)


@tf_op("ReadVariableOp", tg="`read_variable` (or a weight when frozen)")
def _read_variable(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [read(cx, ins[0])]


@tf_op("AssignVariableOp", tg="`assign_variable`")
def _assign_variable(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    assign(cx, ins[0], ins[1])
    return []


@tf_op("AssignAddVariableOp", tg="`assign_add_variable`")
def _assign_add(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    assign(cx, ins[0], ins[1], "assign_add_variable")
    return []


@tf_op("AssignSubVariableOp", tg="`assign_sub_variable`")
def _assign_sub(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    assign(cx, ins[0], ins[1], "assign_sub_variable")
    return []


@tf_op("VarIsInitializedOp", tg="(constant true)", note="captured variables are always initialised")
def _is_initialized(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    _ref(ins[0])
    return [cx.scalar(True, "i1")]


@tf_op("ResourceGather", tg="`read_variable`, `gather`", note="axis 0")
def _resource_gather(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    table = read(cx, ins[0])
    return [cx.op("gather", [table, ins[1]], axis=0, batch_dims=int(attr(node, "batch_dims", 0)))]


@tf_op(
    "VarHandleOp",
    tg="(none)",
    note="only variables captured from outside the function are supported",
)
def _var_handle(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    raise ConversionError("variables created inside the imported function are not supported")


# -- optimizers -------------------------------------------------------------------------------


def _f(cx: Any, op: str, *args: TV) -> TV:
    return cx.op(op, list(args))


@tf_op("ResourceApplyGradientDescent", tg="`assign_sub_variable`", note="var -= alpha * delta")
def _apply_sgd(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    var, alpha, delta = ins
    assign(cx, var, _f(cx, "mul", alpha, delta), "assign_sub_variable")
    return []


@tf_op("ResourceApplyMomentum", tg="reads, arithmetic, assigns", note="`use_nesterov` supported")
def _apply_momentum(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    var, accum, lr, grad, momentum = ins
    acc = _f(cx, "add", _f(cx, "mul", read(cx, accum), momentum), grad)
    assign(cx, accum, acc)
    if attr(node, "use_nesterov", False):
        step = _f(
            cx, "add", _f(cx, "mul", grad, lr), _f(cx, "mul", _f(cx, "mul", acc, momentum), lr)
        )
    else:
        step = _f(cx, "mul", lr, acc)
    assign(cx, var, step, "assign_sub_variable")
    return []


@tf_op(
    "ResourceApplyKerasMomentum", tg="reads, arithmetic, assigns", note="`use_nesterov` supported"
)
def _apply_keras_momentum(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    var, accum, lr, grad, momentum = ins
    acc = _f(cx, "sub", _f(cx, "mul", read(cx, accum), momentum), _f(cx, "mul", lr, grad))
    assign(cx, accum, acc)
    if attr(node, "use_nesterov", False):
        step = _f(cx, "sub", _f(cx, "mul", acc, momentum), _f(cx, "mul", lr, grad))
    else:
        step = acc
    assign(cx, var, step, "assign_add_variable")
    return []


@tf_op("ResourceApplyAdam", tg="reads, arithmetic, assigns", note="`use_nesterov` supported")
def _apply_adam(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    var, m, v, b1p, b2p, lr, b1, b2, eps, grad = ins
    one = cx.scalar(1, grad.dtype)
    lr_t = _f(
        cx,
        "div",
        _f(cx, "mul", lr, _f(cx, "sqrt", _f(cx, "sub", one, b2p))),
        _f(cx, "sub", one, b1p),
    )
    m_old, v_old = read(cx, m), read(cx, v)
    m_new = _f(cx, "add", m_old, _f(cx, "mul", _f(cx, "sub", grad, m_old), _f(cx, "sub", one, b1)))
    v_new = _f(
        cx,
        "add",
        v_old,
        _f(cx, "mul", _f(cx, "sub", _f(cx, "square", grad), v_old), _f(cx, "sub", one, b2)),
    )
    assign(cx, m, m_new)
    assign(cx, v, v_new)
    if attr(node, "use_nesterov", False):
        num = _f(cx, "add", _f(cx, "mul", m_new, b1), _f(cx, "mul", _f(cx, "sub", one, b1), grad))
    else:
        num = m_new
    step = _f(cx, "div", _f(cx, "mul", lr_t, num), _f(cx, "add", _f(cx, "sqrt", v_new), eps))
    assign(cx, var, step, "assign_sub_variable")
    return []


@tf_op("ResourceApplyAdagrad", tg="reads, arithmetic, assigns")
def _apply_adagrad(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    var, accum, lr, grad = ins
    acc = read(cx, accum)
    if attr(node, "update_slots", True):
        acc = _f(cx, "add", acc, _f(cx, "square", grad))
        assign(cx, accum, acc)
    assign(
        cx, var, _f(cx, "div", _f(cx, "mul", lr, grad), _f(cx, "sqrt", acc)), "assign_sub_variable"
    )
    return []


@tf_op("ResourceApplyRMSProp", tg="reads, arithmetic, assigns")
def _apply_rmsprop(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    var, ms, mom, lr, rho, momentum, eps, grad = ins
    one = cx.scalar(1, grad.dtype)
    ms_new = _f(
        cx,
        "add",
        _f(cx, "mul", rho, read(cx, ms)),
        _f(cx, "mul", _f(cx, "sub", one, rho), _f(cx, "square", grad)),
    )
    assign(cx, ms, ms_new)
    mom_new = _f(
        cx,
        "add",
        _f(cx, "mul", momentum, read(cx, mom)),
        _f(cx, "div", _f(cx, "mul", lr, grad), _f(cx, "sqrt", _f(cx, "add", ms_new, eps))),
    )
    assign(cx, mom, mom_new)
    assign(cx, var, mom_new, "assign_sub_variable")
    return []
