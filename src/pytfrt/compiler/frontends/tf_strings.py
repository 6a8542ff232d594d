"""TF's string ops and ``tf.print`` -> the ``strings`` family of the graph dialect.

Keras' ``Hashing`` layer is ``AsString`` then ``StringToHashBucketFast``; ``tf.print`` is
``StringFormat`` (the message: a template with each tensor summarised as TF prints it) then
``PrintV2`` (a stateful op the compiled program runs in program order, writing to the same
stream as TF: ``sys.stderr`` or ``sys.stdout``). Constant operands of ``StringFormat`` are
formatted at import, so the compiled program formats only run-time tensors. ``Assert``
(``tf.debugging``'s checks) runs too: a stateful ``assert`` that fails the call with TF's
``assertion failed: [...]`` message. Keras' ``HashedCrossing`` is a hashed ``SparseCross`` of
dense columns then ``SparseToDense``: the cross of dense columns fills every entry of a
``[batch, k]`` tensor, so the pair becomes one ``hashed_cross`` (sparse inputs are refused).
Keras' ``TextVectorization`` standardizes (``StringLower``, ``StaticRegexReplace``), splits
(``StringSplitV2``: a ragged tensor as its indices, flat values and shape, all run-time
tensors), looks the flat values up, and pads (``RaggedTensorToTensor`` by value row ids).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.backends.cpu.strings import (
    as_bytes,
    as_text,
    assert_summary_text,
    format_template,
    summary_text,
)
from pytfrt.compiler.frontends.tf_registry import tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, attr


@tf_op("AsString", tg="`as_string`", note="numbers and booleans, TF's printf formats")
def _as_string(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    fill = attr(node, "fill", "")
    if len(fill) > 1:
        raise ConversionError(f"fill must be at most one character, got {fill!r}")
    return [
        cx.op(
            "as_string",
            ins,
            precision=attr(node, "precision", -1),
            scientific=bool(attr(node, "scientific", False)),
            shortest=bool(attr(node, "shortest", False)),
            width=attr(node, "width", -1),
            fill=fill,
        )
    ]


@tf_op(
    "StringToHashBucketFast",
    tg="`string_to_hash_bucket`",
    note="FarmHash `Fingerprint64` modulo the bucket count, bit for bit (Keras' `Hashing`)",
)
def _hash_bucket(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("string_to_hash_bucket", ins, num_buckets=attr(node, "num_buckets"))]


@tf_op(
    "SparseCross",
    tg="`hashed_cross`",
    note="hashed crosses of dense columns (Keras' `HashedCrossing`), bit for bit; sparse "
    "columns and string crosses are not supported; the result only through `SparseToDense`",
)
def _sparse_cross(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    if attr(node, "N", 0):
        raise ConversionError("sparse input columns are not supported (only dense ones)")
    if not attr(node, "hashed_output", False):
        raise ConversionError("string crosses (hashed_output=False) are not supported")
    dense = cx.op("hashed_cross", ins, num_buckets=attr(node, "num_buckets"),
                  hash_key=attr(node, "hash_key"))
    batch, width = dense.shape if dense.shape is not None else (None, None)

    def sparse_only() -> Any:
        raise ConversionError("the indices of a crossed sparse tensor can only be used by "
                              "SparseToDense")

    indices = TV(thunk=sparse_only, dtype="i64", shape=(None, 2))
    values = cx.reshape(dense, [-1])
    if batch is not None and width is not None:
        shape = TV(const=np.asarray([batch, width], dtype=np.int64))
    else:
        shape = TV(partial=[batch, width], dtype="i64", shape=(2,), thunk=sparse_only)
    for tv in (indices, values, shape):
        tv.dense_rows = dense
    return [indices, values, shape]


@tf_op(
    "SparseToDense",
    tg="(none)",
    note="of a `SparseCross` of dense columns only (that cross is already dense)",
)
def _sparse_to_dense(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    indices, shape, values, _default = ins
    dense = indices.dense_rows
    if dense is None or values.dense_rows is not dense or shape.dense_rows is not dense:
        raise ConversionError("only the sparse result of a SparseCross of dense columns is "
                              "supported")
    return [dense]


@tf_op("StringLower", tg="`string_lower`", note="ASCII letters (TF's default), or UTF-8 "
       "text with `encoding='utf-8'`")
def _string_lower(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("string_lower", ins, encoding=attr(node, "encoding", ""))]


@tf_op("StaticRegexReplace", tg="`regex_replace`", note="Python's `re` for RE2: the patterns "
       "Keras' standardization uses (character classes, groups) match alike")
def _regex_replace(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [cx.op("regex_replace", ins, pattern=attr(node, "pattern"),
                  rewrite=attr(node, "rewrite", ""),
                  replace_global=bool(attr(node, "replace_global", True)))]


@tf_op("StringSplitV2", tg="`string_split_ragged`", note="a string vector, constant separator; the "
       "ragged result as run-time indices, values and shape")
def _string_split(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    x, sep = ins
    if sep.const is None:
        raise ConversionError("the separator must be constant")
    text = as_text(np.asarray(sep.const).reshape(()).item())
    return cx.ops("string_split_ragged", [x], 3, sep=text, maxsplit=attr(node, "maxsplit", -1))


@tf_op("RaggedTensorToTensor", tg="`ragged_to_dense`", note="one ragged dimension given by "
       "`FIRST_DIM_SIZE` and `VALUE_ROWIDS` (what a split builds); the row count from the data")
def _ragged_to_tensor(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    shape, values, default = ins[:3]
    kinds = attr(node, "row_partition_types", [])
    if kinds != ["FIRST_DIM_SIZE", "VALUE_ROWIDS"]:
        raise ConversionError(f"row partitions {kinds} are not supported (only FIRST_DIM_SIZE, "
                              "VALUE_ROWIDS)")
    nrows, rowids = ins[3], ins[4]
    dims = shape.known_vector() if shape.rank == 1 else None
    if dims is not None and (len(dims) != 2 or dims[0] not in (None, -1)):
        raise ConversionError(f"a target shape {dims} (only [-1, width] is supported)")
    width = -1 if dims is None or dims[1] is None else int(dims[1])
    return [cx.op("ragged_to_dense", [values, rowids, nrows, default], width=width)]


def _fresh_placeholder(texts: list[str]) -> str:
    """A placeholder that occurs in none of ``texts``."""
    mark = "{}"
    while any(mark in t for t in texts):
        mark = "{" + mark + "}"
    return mark


def _format(cx: Any, template: str, placeholder: str, summarize: int, ins: list[TV]) -> TV:
    """``string_format`` of the run-time operands of ``ins``; the constant ones formatted into
    the template now."""
    parts = template.split(placeholder)
    if len(parts) != len(ins) + 1:
        raise ConversionError(f"the template has {len(parts) - 1} placeholders for {len(ins)} "
                              "inputs")
    texts = [None if tv.const is None else summary_text(np.asarray(tv.const), summarize)
             for tv in ins]
    mark = _fresh_placeholder(parts + [t for t in texts if t is not None])
    pieces = [mark if t is None else t for t in texts]
    new = format_template(template, placeholder, pieces)
    tensors = [tv for tv, t in zip(ins, texts, strict=True) if t is None]
    return cx.op("string_format", tensors, template=new, placeholder=mark, summarize=summarize)


@tf_op(
    "StringFormat",
    tg="`string_format`",
    note="tensors summarised as TF prints them (`summarize` entries at each end of a "
    "dimension); constant operands formatted at import",
)
def _string_format(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    return [_format(cx, attr(node, "template"), attr(node, "placeholder"),
                    attr(node, "summarize", 3), ins)]


_STREAMS = ("stderr", "stdout")


@tf_op(
    "PrintV2",
    tg="`print`",
    note="`tf.print` to `sys.stderr` or `sys.stdout` (stateful: runs in program order); "
    "logging and file streams are refused",
)
def _print(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    stream = attr(node, "output_stream", "stderr")
    if stream not in _STREAMS:
        raise ConversionError(
            f"output stream {stream!r} is not supported (tf.print to sys.stderr or sys.stdout)"
        )
    (x,) = ins
    if x.const is not None:  # a constant message: a string_format without operands
        text = as_bytes(np.asarray(x.const).reshape(()).item()).decode("utf-8", "surrogateescape")
        x = cx.op("string_format", [], template=text, placeholder=_fresh_placeholder([text]))
    cx.ops("print", [x], 0, output_stream=stream, end=attr(node, "end", "\n"))
    return []


@tf_op(
    "Assert",
    tg="(none) when true at import; else `assert`",
    note="a run-time condition (or a constant false one, in the branch `tf.debugging` guards "
    "it with) checked by the program, failing with TF's message",
)
def _assert(cx: Any, node: Any, ins: list[TV]) -> list[TV]:
    cond, data = ins[0], ins[1:]
    if cond.const is not None and bool(np.all(cond.const)):
        return []
    summarize = attr(node, "summarize", 3)
    texts = [None if tv.const is None else assert_summary_text(np.asarray(tv.const), summarize)
             for tv in data]
    mark = _fresh_placeholder(["assertion failed: "] + [t for t in texts if t is not None])
    template = "assertion failed: " + " ".join(f"[{mark if t is None else t}]" for t in texts)
    tensors = [tv for tv, t in zip(data, texts, strict=True) if t is None]
    cx.ops("assert", [cond, *tensors], 0, summarize=summarize, template=template,
           placeholder=mark)
    return []
