"""Compute functions of the ``onnx_text`` catalogue family (``pytfrt.compiler.ops.onnx_text``).

ONNX's text-processing operators: ``StringSplit``, ``StringNormalizer`` and
``TfIdfVectorizer`` (n-gram counting over integer or string tokens).  Strings are NumPy
object arrays of ``str``, as everywhere in the runtime.  Same conventions as
:mod:`pytfrt.backends.cpu.onnx_kernels`: operands positional, attributes keyword-only, new
arrays returned (operands are never written), pure functions (thread-safe).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError

GRAPH_OPS = OpTable()
"""Op name -> compute function."""


@GRAPH_OPS.op("string_split")
def string_split(x: np.ndarray, *, delimiter: str, maxsplit: int) -> tuple[np.ndarray, ...]:
    """ONNX ``StringSplit``: ``(substrings [*x.shape, longest] padded with "", counts)``.

    An empty ``delimiter`` splits at runs of whitespace (and drops leading/trailing ones);
    ``maxsplit < 0``: no limit."""
    parts = [(str(s).split(delimiter, maxsplit) if delimiter else str(s).split(None, maxsplit))
             for s in x.reshape(-1)]
    width = max((len(p) for p in parts), default=0)
    y = np.full((len(parts), width), "", dtype=object)
    for i, p in enumerate(parts):
        y[i, : len(p)] = p
    counts = np.asarray([len(p) for p in parts], np.int64).reshape(x.shape)
    return y.reshape(*x.shape, width), counts


@GRAPH_OPS.op("string_normalizer")
def string_normalizer(x: np.ndarray, *, case_change_action: str, is_case_sensitive: bool,
                      stopwords: str) -> np.ndarray:
    """ONNX ``StringNormalizer`` of ``[C]`` or ``[1, C]`` strings: stop words (a JSON array)
    removed, then the case changed; an input left empty gives one empty string."""
    if x.ndim == 2 and x.shape[0] != 1 or x.ndim not in (1, 2):
        raise OpError(f"string_normalizer: input must be [C] or [1, C], got {list(x.shape)}")
    words = [str(s) for s in x.reshape(-1)]
    stops = json.loads(stopwords)
    if is_case_sensitive:
        stop = set(stops)
        kept = [w for w in words if w not in stop]
    else:
        stop = {s.lower() for s in stops}
        kept = [w for w in words if w.lower() not in stop]
    if case_change_action == "LOWER":
        kept = [w.lower() for w in kept]
    elif case_change_action == "UPPER":
        kept = [w.upper() for w in kept]
    out = np.asarray(kept or [""], dtype=object)
    return out.reshape(1, -1) if x.ndim == 2 else out


def _grams(pool: list[Any], counts: tuple[int, ...]) -> dict[tuple[Any, ...], int]:
    """The pool's n-grams -> their position in pool order (``counts[n-1]``: where the
    n-grams start)."""
    out: dict[tuple[Any, ...], int] = {}
    k = 0
    for n0, start in enumerate(counts):
        n = n0 + 1
        end = counts[n0 + 1] if n0 + 1 < len(counts) else len(pool)
        if (end - start) % n:
            raise OpError(f"tfidf_vectorizer: the pool's {n}-grams do not fill whole grams")
        for i in range(start, end, n):
            out[tuple(pool[i: i + n])] = k
            k += 1
    return out


@GRAPH_OPS.op("tfidf_vectorizer")
def tfidf_vectorizer(x: np.ndarray, *, min_gram_length: int, max_gram_length: int,
                     max_skip_count: int, mode: str, ngram_counts: tuple[int, ...],
                     ngram_indexes: tuple[int, ...], pool_int64s: tuple[int, ...],
                     pool_strings: str, weights: tuple[float, ...]) -> np.ndarray:
    """ONNX ``TfIdfVectorizer`` of ``[C]`` or ``[N, C]`` tokens: per row, the counts of the
    pool's n-grams (``min_gram_length..max_gram_length`` tokens, ``0..max_skip_count`` tokens
    skipped between them; a unigram counted once), then ``TF``, ``IDF`` or ``TFIDF``.
    ``pool_strings``: a JSON array (empty: the pool is ``pool_int64s``)."""
    strings = json.loads(pool_strings)
    pool: list[Any] = list(strings) if strings else [int(v) for v in pool_int64s]
    grams = _grams(pool, ngram_counts)
    if len(grams) != len(ngram_indexes):
        raise OpError(f"tfidf_vectorizer: {len(grams)} n-grams, {len(ngram_indexes)} indexes")
    width = max(ngram_indexes, default=-1) + 1
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    if rows.ndim != 2:
        raise OpError(f"tfidf_vectorizer: input must be [C] or [N, C], got {list(x.shape)}")
    out = np.zeros((rows.shape[0], width), np.float32)
    for r, row in enumerate(rows):
        toks = [str(t) if strings else int(t) for t in row]
        c = len(toks)
        for n in range(min_gram_length, max_gram_length + 1):
            for skip in range(max_skip_count + 1 if n > 1 else 1):
                step = skip + 1
                for i in range(c - (n - 1) * step):
                    k = grams.get(tuple(toks[i: i + (n - 1) * step + 1: step]))
                    if k is not None:
                        out[r, ngram_indexes[k]] += 1
    if mode != "TF":
        w = np.ones(width, np.float32)
        if weights:
            for k, idx in enumerate(ngram_indexes):
                w[idx] = weights[k]
        out = (out > 0).astype(np.float32) * w if mode == "IDF" else out * w
    return out.reshape(-1) if x.ndim == 1 else out


def _text(v: Any) -> str:
    """A string element as ``str`` (TF's byte strings decoded as UTF-8, other bytes kept
    through surrogate escapes)."""
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


@GRAPH_OPS.op("label_encoder")
def label_encoder(x: np.ndarray, *, keys: str, values: str, default: str, dtype: str
                  ) -> np.ndarray:
    """ONNX-ML ``LabelEncoder``: each element of ``x`` looked up in ``keys`` (JSON arrays of
    keys and values), ``default`` (JSON) where absent; the result has element type
    ``dtype``."""
    from pytfrt.tensor.dtype import dtype_from_name

    table = dict(zip(json.loads(keys), json.loads(values), strict=True))
    miss = json.loads(default)
    conv: Any = _text if x.dtype.kind in "OSU" else (float if x.dtype.kind == "f" else int)
    out = [table.get(conv(v), miss) for v in x.reshape(-1).tolist()]
    if dtype == "string":
        return np.asarray(out, dtype=object).reshape(x.shape)
    return np.asarray(out).astype(dtype_from_name(dtype).np_dtype).reshape(x.shape)
