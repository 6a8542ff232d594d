"""ONNX text operators -> the ``onnx_text`` catalogue family (:mod:`pytfrt.compiler.ops.onnx_text`).

``StringSplit``, ``StringNormalizer`` (its ``locale`` is not used: case changes are Python's
Unicode ones) and ``TfIdfVectorizer``; handlers registered in
:data:`~pytfrt.compiler.frontends.onnx_mapping.ONNX_OPS` on import.
"""

from __future__ import annotations

import json
from typing import Any

from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter, Out, onnx_op


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
