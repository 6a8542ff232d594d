"""TF TensorLists (``tf.TensorArray`` in ``tf.while_loop``, Keras RNN layers) as stacked tensors.

A TensorList of ``n`` elements of shape ``e`` is held as one tensor ``[n, *e]`` (its
:attr:`~.tf_values.TV.list_elem` records ``e`` as far as known). ``TensorListFromTensor`` and
``TensorListStack`` are then identities, ``TensorListGetItem`` a ``gather``, and
``TensorListSetItem(list, i, item)`` is ``concat(list[:i], item[None], list[i+1:])`` (the two
slices broadcast to the item's runtime shape), which both replaces element ``i`` and, when
``i`` equals the length, appends. A list reserved with an element shape known only in part
(the dynamic batch) starts empty (``[0, 1, ...]``) and grows as the loop writes it in order,
which is how ``tf.TensorArray`` outputs of loops (Keras' LSTM/GRU) are filled.

TF's while-loop gradients push each step's intermediates onto accumulators
(``EmptyTensorList``, ``TensorListPushBack``) and the gradient loop pops them
(``TensorListPopBack``). While such a list's elements are all known at import time (the
forward loop unrolled, :func:`.tf_control._unroll`), the list also keeps them
(:attr:`~.tf_values.TV.list_items`): a pop gives back the very value pushed, static shape and
constants included, and the stacked tensor is built only if an op needs it. Limits: reading
an element of a reserved list before writing it is an error at run time (TF returns zeros);
element shapes of unknown rank are not supported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.compiler.frontends.tf_registry import tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, attr, tf_dtype_name, tg_to_np

_BIG = 2**62


def _elem_shape(tv: TV) -> tuple[int | None, ...]:
    dims = tv.known_vector()
    if dims is None or (tv.shape == () and dims and dims[0] is not None and dims[0] < 0):
        raise ConversionError("TensorList element shapes of unknown rank are not supported")
    return tuple(None if d is None or d < 0 else int(d) for d in dims)


def as_list(tv: TV, elem: tuple[int | None, ...] | None) -> TV:
    """``tv`` marked as a TensorList with element shape ``elem``."""
    tv.list_elem = elem
    return tv


def _i64_vector(cx: Any, tv: TV) -> TV:
    return cx.reshape(cx.as_i64(tv), [1])


@tf_op("TensorListFromTensor", tg="(the tensor itself)", family="tf_lists")
def _from_tensor(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x = ins[0]
    if x.shape is None:
        raise ConversionError("TensorListFromTensor needs a tensor of known rank")
    return [as_list(TV(cx.val(x)), tuple(x.shape[1:]))]


@tf_op(
    "TensorListReserve",
    tg="`constant`, or `broadcast_to` of a zero",
    note="full zeros if the element shape is known (statically or at run time), else empty "
    "(grows)",
    family="tf_lists",
)
def _reserve(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    elem = _elem_shape(ins[0])
    dtype = tg_to_np(tf_dtype_name(attr(node, "element_dtype")))
    n = ins[1].const
    if n is not None and int(n) >= 0 and None not in elem:
        full = np.zeros((int(n), *(int(d) for d in elem if d is not None)), dtype)
        return [as_list(cx.const(full), elem)]
    runtime_elem = ins[0].const is None and (ins[0]._value is not None or ins[0]._thunk is not None)
    if n is not None and not runtime_elem:  # elements of unknown shape: grows as written
        start = np.zeros((0, *(1 if d is None else d for d in elem)), dtype)
        return [as_list(cx.const(start), elem)]
    if not runtime_elem and None in elem:
        raise ConversionError("TensorListReserve of a dynamic length with unknown element dims")
    shape = cx.op("concat", [_i64_vector(cx, ins[1]), cx.as_i64(ins[0])], axis=0)
    zeros = cx.op("broadcast_to", [cx.const(np.zeros((), dtype)), shape])
    return [as_list(zeros, elem)]


@tf_op(
    "TensorListElementShape",
    tg="`shape`, `slice`",
    note="known entries folded",
    family="tf_lists",
)
def _element_shape(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    lst = ins[0]
    dtype = tf_dtype_name(attr(node, "shape_type", 3))
    elem = lst.list_elem if lst.list_elem is not None else (
        None if lst.shape is None else tuple(lst.shape[1:])
    )
    if elem is None:
        raise ConversionError("TensorListElementShape of a list of unknown element rank")
    if None not in elem:
        return [TV(const=np.asarray(elem, tg_to_np(dtype)))]
    s = cx.op("shape", [lst], out_type=dtype)
    value = cx.op("slice", [s], starts=[1], ends=[len(elem) + 1], axes=[0], steps=[1])
    return [TV(cx.val(value), partial=list(elem), dtype=dtype, shape=(len(elem),))]


@tf_op(
    "EmptyTensorList",
    tg="`constant`",
    note="an empty `[0, *element_shape]` (unknown dims 1: pushes broadcast them)",
    family="tf_lists",
)
def _empty(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    elem = _elem_shape(ins[0])
    dtype = tg_to_np(tf_dtype_name(attr(node, "element_dtype")))
    start = np.zeros((0, *(1 if d is None else d for d in elem)), dtype)
    out = as_list(cx.const(start), elem)
    out.list_items = []
    return [out]


def _with_items(cx: Any, like: TV, items: list[TV], build: Any) -> TV:
    """A TensorList of elements ``items`` (known at import time), stacked by ``build()`` only
    if an op needs the tensor."""
    elem = like.list_elem if like.list_elem is not None else (
        items[0].shape if items else None
    )
    shape = None if elem is None else (len(items), *elem)
    out = TV(thunk=lambda: cx.val(build()), dtype=like.dtype, shape=shape)
    out.list_elem = elem
    out.list_items = items
    return out


def _push(cx: Any, lst: TV, item: TV) -> TV:
    if lst.rank is None or item.rank is None or lst.rank != item.rank + 1:
        raise ConversionError("TensorListPushBack: the list and the item ranks do not fit")
    n = cx.op(
        "slice", [cx.op("shape", [lst], out_type="i64")], starts=[0], ends=[1], axes=[0], steps=[1]
    )
    full = cx.op("concat", [n, cx.op("shape", [item], out_type="i64")], axis=0)
    out = cx.op(
        "concat", [cx.op("broadcast_to", [lst, full]), cx.op("expand_dims", [item], axis=0)], axis=0
    )
    return as_list(out, lst.list_elem if lst.list_elem is not None else item.shape)


@tf_op(
    "TensorListPushBack",
    tg="`shape`, `broadcast_to`, `concat`",
    note="TF's while-loop gradient accumulators; elements kept at import time when the list's "
    "are",
    family="tf_lists",
)
def _push_back(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    lst, item = ins[0], ins[1]
    if lst.list_items is not None:
        return [_with_items(cx, lst, [*lst.list_items, item], lambda: _push(cx, lst, item))]
    return [_push(cx, lst, item)]


@tf_op(
    "TensorListPopBack",
    tg="`slice`",
    note="the list without its last element, and that element",
    family="tf_lists",
)
def _pop_back(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    lst = ins[0]
    if lst.list_items is not None:
        if not lst.list_items:
            raise ConversionError("TensorListPopBack of an empty list")
        return [
            _with_items(cx, lst, lst.list_items[:-1], lambda: _pop(cx, lst)[0]),
            lst.list_items[-1],
        ]
    return _pop(cx, lst)


def _pop(cx: Any, lst: TV) -> list[TV]:
    if lst.rank is None or lst.rank < 1:
        raise ConversionError("TensorListPopBack needs a list of known element rank")
    rest = cx.op("slice", [lst], starts=[0], ends=[-1], axes=[0], steps=[1])
    last = cx.op("slice", [lst], starts=[-1], ends=[_BIG], axes=[0], steps=[1])
    item = cx.op("squeeze", [last], axes=[0])
    return [as_list(rest, lst.list_elem), item]


@tf_op("TensorListGetItem", "TensorListGather", tg="`gather`", family="tf_lists")
def _get_item(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    """One index (GetItem) or a vector of them (Gather): the same gather along the list."""
    return [cx.op("gather", [ins[0], ins[1]], axis=0, batch_dims=0)]


@tf_op(
    "TensorListSetItem",
    tg="`slice`, `broadcast_to`, `concat`",
    note="replaces, or appends at the end",
    family="tf_lists",
)
def _set_item(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    lst, index, item = ins[0], ins[1], ins[2]
    if lst.rank is None or item.rank is None or lst.rank != item.rank + 1:
        raise ConversionError("TensorListSetItem: the list and the item ranks do not fit")
    i = _i64_vector(cx, index)
    zero, one, big = (cx.const(np.array([v], np.int64)) for v in (0, 1, _BIG))
    head = cx.op("slice", [lst, zero, i, zero, one])
    tail = cx.op("slice", [lst, cx.op("add", [i, one]), big, zero, one])
    item_shape = cx.op("shape", [item], out_type="i64")
    tail_len = cx.op(
        "slice", [cx.op("shape", [tail], out_type="i64")], starts=[0], ends=[1], axes=[0], steps=[1]
    )
    head = cx.op("broadcast_to", [head, cx.op("concat", [i, item_shape], axis=0)])
    tail = cx.op("broadcast_to", [tail, cx.op("concat", [tail_len, item_shape], axis=0)])
    out = cx.op("concat", [head, cx.op("expand_dims", [item], axis=0), tail], axis=0)
    return [as_list(out, lst.list_elem if lst.list_elem is not None else item.shape)]


@tf_op(
    "TensorListStack",
    tg="`reshape`",
    note="restores the static shape `[num_elements, *element_shape]`",
    family="tf_lists",
)
def _stack(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    lst = ins[0]
    n = int(attr(node, "num_elements", -1))
    try:
        elem = _elem_shape(ins[1])
    except ConversionError:
        elem = lst.list_elem or ()
    dims = [None if n < 0 else n, *elem]
    if sum(1 for d in dims if d is None) <= 1 and lst.rank in (None, len(dims)):
        return [cx.reshape(lst, dims)]
    return [TV(cx.val(lst))]


@tf_op("TensorListLength", tg="`shape`, `slice`", family="tf_lists")
def _length(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    lst = ins[0]
    if lst.shape is not None and lst.shape[0] is not None:
        return [cx.scalar(lst.shape[0], "i32")]
    s = cx.op("shape", [lst], out_type="i32")
    return [cx.reshape(cx.op("slice", [s], starts=[0], ends=[1], axes=[0], steps=[1]), [])]
