"""TF TensorLists (``tf.TensorArray`` in ``tf.while_loop``, Keras RNN layers) as stacked tensors.

A TensorList of ``n`` elements of shape ``e`` is held as one tensor ``[n, *e]`` (its
:attr:`~.tf_values.TV.list_elem` records ``e`` as far as known). ``TensorListFromTensor`` and
``TensorListStack`` are then identities, ``TensorListGetItem`` a ``gather``, and
``TensorListSetItem(list, i, item)`` is ``concat(list[:i], item[None], list[i+1:])`` (the two
slices broadcast to the item's runtime shape), which both replaces element ``i`` and, when
``i`` equals the length, appends. A list reserved with an element shape known only in part
(the dynamic batch) starts empty (``[0, 1, ...]``) and grows as the loop writes it in order,
which is how ``tf.TensorArray`` outputs of loops (Keras' LSTM/GRU) are filled. Limits: reading
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
    tg="`constant`",
    note="full zeros if the element shape is static, else empty (grows)",
    family="tf_lists",
)
def _reserve(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    elem = _elem_shape(ins[0])
    (n,) = cx.ints(ins[1], "num_elements")
    dtype = tg_to_np(tf_dtype_name(attr(node, "element_dtype")))
    if None not in elem and n >= 0:
        start = np.zeros((n, *elem), dtype)  # type: ignore[misc]
    else:
        start = np.zeros((0, *(1 if d is None else d for d in elem)), dtype)
    return [as_list(cx.const(start), elem)]


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
