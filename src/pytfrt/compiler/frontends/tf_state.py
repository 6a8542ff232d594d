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

import json
import math
from typing import Any

import numpy as np

from pytfrt.compiler.frontends.tf_registry import tf_op
from pytfrt.compiler.frontends.tf_values import (
    TV,
    ConversionError,
    OtherResource,
    ResourceRef,
    attr,
    tf_dtype_name,
    tg_to_np,
)


def _ref(tv: TV) -> ResourceRef:
    if tv.resource is None:
        raise ConversionError("expected a resource handle bound to a variable")
    if isinstance(tv.resource, OtherResource):
        raise ConversionError(f"captured resource '{tv.resource.name}' is not a variable")
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


@tf_op("VariableShape", tg="(constant)", note="a variable's shape is fixed when it is captured")
def _variable_shape(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    shape = np.shape(cx.imp.variables[_ref(ins[0]).name])
    return [TV(const=np.asarray(shape, tg_to_np(tf_dtype_name(attr(node, "out_type", 3)))))]


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


@tf_op(
    "ResourceScatterAdd",
    "ResourceScatterSub",
    "ResourceScatterUpdate",
    tg="`one_hot`, `matmul`, `assign_add_variable` / `assign_sub_variable` / `select`",
    note="rows of a variable (what an `Embedding` gradient updates); repeated indices add up",
)
def _resource_scatter(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    res, indices, updates = ins
    var = read(cx, res)
    dims = [d for d in var.shape or () if d is not None]
    if var.shape is None or len(dims) != len(var.shape) or indices.shape is None:
        raise ConversionError("the variable's shape and the indices' rank must be known")
    rows, rest = dims[0], dims[1:]
    width = math.prod(rest)
    dtype = var.dtype or "f32"
    flat_idx = cx.reshape(indices, [-1])
    hot = cx.op(  # [k, rows]: row j of the variable receives update i where hot[i, j] = 1
        "one_hot",
        [flat_idx, cx.scalar(rows, "i32"), cx.scalar(1, dtype), cx.scalar(0, dtype)],
        axis=-1,
    )
    if updates.rank == 0:
        raise ConversionError("scalar updates are not supported")
    upd = cx.reshape(updates, [-1, width])
    dense = cx.reshape(cx.op("matmul", [hot, upd], transpose_a=True), [rows, *rest])
    if node.op == "ResourceScatterAdd":
        assign(cx, res, dense, "assign_add_variable")
    elif node.op == "ResourceScatterSub":
        assign(cx, res, dense, "assign_sub_variable")
    else:  # the last write wins in TF; with distinct indices, replace the hit rows
        hit = cx.op("reduce_max", [hot], axes=[0], keepdims=False)
        mask = cx.reshape(cx.op("greater", [hit, cx.scalar(0, dtype)]), [rows] + [1] * len(rest))
        assign(cx, res, cx.op("select", [mask, dense, var]))
    return []


def _table(tv: TV, node: Any) -> tuple[np.ndarray, np.ndarray]:
    """The keys and values of the lookup table behind ``tv`` (read once, at import)."""
    ref = tv.resource
    if not isinstance(ref, OtherResource):
        raise ConversionError("expected a lookup table")
    import tensorflow as tf

    tin, tout = attr(node, "Tin"), attr(node, "Tout")
    keys, values = tf.raw_ops.LookupTableExportV2(table_handle=ref.handle, Tkeys=tin, Tvalues=tout)
    return np.asarray(keys.numpy()), np.asarray(values.numpy())


def _json_list(a: np.ndarray) -> str:
    """``a``'s elements as a JSON array (TF's byte strings as text: UTF-8, other bytes kept
    through surrogate escapes, as the runtime decodes string tensors)."""
    return json.dumps([
        v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v
        for v in a.reshape(-1).tolist()
    ])


@tf_op(
    "LookupTableFindV2",
    tg="`equal`, `reduce_any`, `argmax`, `gather`, `select`; string keys or values: "
    "`label_encoder`",
    note="the table's contents are read at import; with string keys or values (StringLookup) "
    "the default value must be a constant",
)
def _lookup_find(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    table, keys_tv, default = ins
    keys, values = _table(table, node)
    if keys_tv.rank is None:
        raise ConversionError("the keys' rank must be known")
    dtype = tf_dtype_name(attr(node, "Tout"))
    if keys.dtype == object or values.dtype == object:
        if default.const is None:
            raise ConversionError("the default value of a string lookup must be a constant")
        return [
            cx.op(
                "label_encoder",
                [keys_tv],
                keys=_json_list(keys),
                values=_json_list(values),
                default=_json_list(np.asarray(default.const))[1:-1],
                dtype=dtype,
            )
        ]
    if keys.size == 0:
        return [cx.op("fill", [cx.as_i64(cx.op("shape", [keys_tv])), default])]
    axis = keys_tv.rank
    hit = cx.op(
        "equal",
        [
            cx.op("expand_dims", [keys_tv], axis=axis),
            cx.const(keys.astype(tg_to_np(keys_tv.dtype or "i64"))),
        ],
    )
    found = cx.op("reduce_any", [hit], axes=[axis], keepdims=False)
    where = cx.op(
        "argmax", [cx.op("cast", [hit], to="i32")], axis=axis, keepdims=False, output_type="i64"
    )
    got = cx.op("gather", [cx.const(values.astype(tg_to_np(dtype))), where], axis=0, batch_dims=0)
    return [cx.op("select", [found, got, default])]


@tf_op("LookupTableSizeV2", tg="(constant)", note="read at import")
def _lookup_size(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    ref = ins[0].resource
    if not isinstance(ref, OtherResource):
        raise ConversionError("expected a lookup table")
    import tensorflow as tf

    return [cx.const(np.asarray(tf.raw_ops.LookupTableSizeV2(table_handle=ref.handle).numpy()))]
