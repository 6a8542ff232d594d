"""ONNX text operators -> the ``onnx_text`` catalogue family (:mod:`pytfrt.compiler.ops.onnx_text`).

``StringSplit``, ``StringNormalizer`` (its ``locale`` is not used: case changes are Python's
Unicode ones) and ``TfIdfVectorizer``; and from the ``ai.onnx.ml`` domain (registered as
``ai.onnx.ml.<op>``) ``LabelEncoder`` (a table lookup kernel), ``Binarizer`` and
``ArrayFeatureExtractor`` (composed from core ops).  Handlers registered in
:data:`~pytfrt.compiler.frontends.onnx_mapping.ONNX_OPS` on import.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter, Out, _dims, onnx_op


def _str_list(values: Any) -> str:
    return json.dumps([v.decode() if isinstance(v, bytes) else str(v) for v in values or []])


@onnx_op("StringSplit", note="`string_split {delimiter, maxsplit}` (onnx_text family)")
def _string_split(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    res = ctx.op("string_split", [ctx.input(node, 0)], delimiter=str(a.get("delimiter", "")),
                 maxsplit=int(a.get("maxsplit", -1)))
    return list(res)


@onnx_op("StringNormalizer", note="`string_normalizer {case_change_action, ...}` (onnx_text)")
def _string_normalizer(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    return [ctx.op("string_normalizer", [ctx.input(node, 0)],
                   case_change_action=str(a.get("case_change_action", "NONE")),
                   is_case_sensitive=bool(a.get("is_case_sensitive", 0)),
                   stopwords=_str_list(a.get("stopwords")))]


@onnx_op("TfIdfVectorizer", note="`tfidf_vectorizer {...}` (onnx_text family; n-gram counts)")
def _tfidf(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    return [ctx.op(
        "tfidf_vectorizer", [ctx.input(node, 0)],
        min_gram_length=int(a["min_gram_length"]), max_gram_length=int(a["max_gram_length"]),
        max_skip_count=int(a["max_skip_count"]), mode=str(a["mode"]),
        ngram_counts=[int(v) for v in a["ngram_counts"]],
        ngram_indexes=[int(v) for v in a["ngram_indexes"]],
        pool_int64s=[int(v) for v in a.get("pool_int64s", [])],
        pool_strings=_str_list(a.get("pool_strings")),
        weights=[float(v) for v in a.get("weights", [])],
    )]


def _ml_list(a: dict[str, Any], stem: str) -> tuple[list[Any], str] | None:
    """LabelEncoder's ``<stem>_strings/_int64s/_floats/_tensor``: (values, tg dtype)."""
    from pytfrt.compiler.frontends.onnx_proto import to_array
    from pytfrt.compiler.types import dtype_name

    for suffix, dtype in (("_strings", "string"), ("_int64s", "i64"), ("_floats", "f32")):
        if f"{stem}{suffix}" in a:
            vals = [v.decode() if isinstance(v, bytes) else v for v in a[f"{stem}{suffix}"]]
            return vals, dtype
    if f"{stem}_tensor" in a:
        arr = to_array(a[f"{stem}_tensor"])
        kind = "string" if arr.dtype.kind in "OSU" else dtype_name(arr.dtype)
        vals = [v.decode() if isinstance(v, bytes) else v for v in arr.reshape(-1).tolist()]
        return vals, kind
    return None


@onnx_op("ai.onnx.ml.LabelEncoder", note="`label_encoder {keys, values, default, dtype}` "
         "(onnx_text family; a table lookup)")
def _label_encoder(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    keys, values = _ml_list(a, "keys"), _ml_list(a, "values")
    if keys is None or values is None:
        ctx.unsupported(node, "keys and values must be given")
    (kv, _), (vv, vtype) = keys, values
    given = _ml_list(a, "default")  # default_tensor, or the default_<type> of the values
    dv: Any = {"string": "_Unused", "f32": -0.0}.get(vtype, -1)
    key = {"string": "default_string", "f32": "default_float"}.get(vtype, "default_int64")
    if "default_tensor" in a and given is not None and given[0]:
        dv = given[0][0]
    elif key in a:
        dv = a[key]
    return [ctx.op("label_encoder", [ctx.input(node, 0)], keys=json.dumps(kv),
                   values=json.dumps(vv), default=json.dumps(dv), dtype=vtype)]


@onnx_op("ai.onnx.ml.Binarizer", note="`select(x > threshold, 1, 0)`")
def _binarizer(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    t = float(ctx.attrs(node).get("threshold", 0.0))
    above = ctx.op("greater", [x, ctx.scalar(t, x)])
    return [ctx.op("select", [above, ctx.scalar(1, x), ctx.scalar(0, x)])]


@onnx_op("ai.onnx.ml.ArrayFeatureExtractor", note="`gather` on the last axis")
def _array_feature_extractor(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    rank = len(_dims(ctx, x))
    idx = ctx.known_input(node, 1)
    iv = (ctx.constant(np.asarray(idx, np.int64).reshape(-1), node.input[1]) if idx is not None
          else ctx.op("reshape", [ctx.input(node, 1)], shape=[-1]))
    y = ctx.op("gather", [x, iv], axis=rank - 1)
    return [y if rank > 1 else ctx.op("expand_dims", [y], axis=0)]
