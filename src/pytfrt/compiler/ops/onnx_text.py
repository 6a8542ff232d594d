"""Catalogue family: ONNX's text operators (``onnx_text``).

* ``string_split(x) {delimiter, maxsplit}`` -- ONNX ``StringSplit``: two results, the
  substrings ``[*x.shape, n]`` (``n`` known at run time, padded with "") and their counts;
* ``string_normalizer(x) {case_change_action, is_case_sensitive, stopwords}`` -- ONNX
  ``StringNormalizer`` (``[C]`` or ``[1, C]``; the length known at run time);
* ``label_encoder(x) {keys, values, default, dtype}`` -- ONNX-ML ``LabelEncoder`` (keys,
  values and the default as JSON);
* ``tfidf_vectorizer(x) {min_gram_length, max_gram_length, max_skip_count, mode,
  ngram_counts, ngram_indexes, pool_int64s, pool_strings, weights}`` -- ONNX
  ``TfIdfVectorizer`` (f32 ``[C_out]`` or ``[N, C_out]``).

The string lists (``stopwords``, ``pool_strings``) are ``str`` attributes holding a JSON array
of strings (the catalogue has no list-of-strings attribute kind).

Compute functions: :mod:`pytfrt.backends.cpu.onnx_text`.  Filled at import, then read only.
"""

from __future__ import annotations

from pytfrt.compiler.ops.base import AttrSpec, InferContext, define
from pytfrt.compiler.types import TType


def _strings(ctx: InferContext) -> TType:
    (x,) = ctx.inputs
    if x.dtype != "string":
        raise ctx.error(f"operand must be strings, got {x.dtype}")
    return x


def _string_split(ctx: InferContext) -> list[TType]:
    x = _strings(ctx)
    shape = None if x.shape is None else (*x.shape, None)
    return [TType("string", shape), TType("i64", x.shape)]


def _string_normalizer(ctx: InferContext) -> list[TType]:
    x = _strings(ctx)
    if x.rank not in (None, 1, 2):
        raise ctx.error(f"operand must be [C] or [1, C], got {x}")
    return [TType("string", None if x.shape is None else (*x.shape[:-1], None))]


def _tfidf(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.rank not in (None, 1, 2):
        raise ctx.error(f"operand must be [C] or [N, C], got {x}")
    width = max(ctx.attrs["ngram_indexes"], default=-1) + 1
    shape = None if x.shape is None else ((width,) if len(x.shape) == 1 else (x.shape[0], width))
    return [TType("f32", shape)]


def _label_encoder(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    return [TType(ctx.attrs["dtype"], x.shape)]


define("label_encoder", ("x",), _label_encoder, {
    "keys": AttrSpec("str"), "values": AttrSpec("str"), "default": AttrSpec("str"),
    "dtype": AttrSpec("dtype"),
}, family="onnx", doc="ONNX-ML LabelEncoder", differentiable=False)
define("string_split", ("x",), _string_split,
       {"delimiter": AttrSpec("str", ""), "maxsplit": AttrSpec("int", -1)}, family="onnx",
       num_results=2, doc="ONNX StringSplit", differentiable=False)
define("string_normalizer", ("x",), _string_normalizer, {
    "case_change_action": AttrSpec("str", "NONE", choices=("NONE", "LOWER", "UPPER")),
    "is_case_sensitive": AttrSpec("bool", False), "stopwords": AttrSpec("str", "[]"),
}, family="onnx", doc="ONNX StringNormalizer", differentiable=False)
define("tfidf_vectorizer", ("x",), _tfidf, {
    "min_gram_length": AttrSpec("int"), "max_gram_length": AttrSpec("int"),
    "max_skip_count": AttrSpec("int"),
    "mode": AttrSpec("str", "TF", choices=("TF", "IDF", "TFIDF")),
    "ngram_counts": AttrSpec("ints"), "ngram_indexes": AttrSpec("ints"),
    "pool_int64s": AttrSpec("ints", ()), "pool_strings": AttrSpec("str", "[]"),
    "weights": AttrSpec("floats", ()),
}, family="onnx", doc="ONNX TfIdfVectorizer", differentiable=False)
