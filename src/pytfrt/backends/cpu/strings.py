"""Compute functions of the graph dialect's TF string ops (catalogue family ``strings``).

* ``as_string(x) {precision, scientific, shortest, width, fill}`` -- TF's ``AsString``: each
  number formatted by the C ``printf`` directive TF builds from the attributes (``%d`` for
  integers, ``%f``/``%e``/``%g`` for floats, ``true``/``false`` for booleans);
* ``string_to_hash_bucket(x) {num_buckets}`` -- TF's ``StringToHashBucketFast``:
  ``Fingerprint64(s) mod num_buckets``, where ``Fingerprint64`` is FarmHash's 64-bit
  fingerprint (:func:`fingerprint64`, the ``farmhashna`` hash TF links), on the UTF-8 bytes;
* ``hashed_cross(inputs...) {num_buckets, hash_key}`` -- TF's ``SparseCross`` with
  ``hashed_output`` on dense ``[batch, k_i]`` columns (Keras' ``HashedCrossing``): every
  combination of one feature per column (the last column varying fastest), hashed by chaining
  ``FingerprintCat64`` from ``hash_key`` over the features (an integer feature is its own
  64-bit value, a string its ``Fingerprint64``), modulo ``num_buckets`` (0: modulo
  ``2**63 - 1``); ``[batch, k_0 * k_1 ...]`` int64;
* ``string_lower(x) {encoding}`` -- TF's ``StringLower``: ASCII letters only (``encoding``
  ""), or every letter of UTF-8 text (``"utf-8"``);
* ``regex_replace(x) {pattern, rewrite, replace_global}`` -- TF's ``StaticRegexReplace`` by
  Python's ``re`` (the same matches as RE2 for the patterns both accept; ``\\1``-style groups
  in ``rewrite``);
* ``string_split_ragged(x) {sep, maxsplit}`` -- TF's ``StringSplitV2`` of a string vector:
  the ragged result as ``(indices[n, 2], values[n], shape[2])`` (empty ``sep``: runs of
  whitespace, empty pieces dropped);
* ``ragged_to_dense(values, rowids, nrows, default) {width}`` -- TF's ``RaggedTensorToTensor``
  of a ragged vector given by value row ids: ``[nrows, width]``, each row's values from the
  left, cut at ``width``, the rest ``default``;
* ``string_format(inputs...) {template, placeholder, summarize}`` -- TF's ``StringFormat``
  (what ``tf.print`` and ``tf.strings.format`` build): each ``placeholder`` of the template
  replaced by the next tensor, summarised as TF prints it (:func:`summary_text`);
* ``print(x) {output_stream, end}`` -- TF's ``PrintV2``: writes the string scalar ``x`` and
  ``end`` to ``sys.stderr``/``sys.stdout`` (``output_stream`` "stderr"/"stdout"; TF's
  ``log(info)``... streams write to ``stderr`` too), a stateful kernel ordered by its chain.

Strings are NumPy object arrays of ``str`` (TF's byte strings are decoded as UTF-8, other bytes
kept through surrogate escapes).  Operands positional, attributes keyword-only; pure functions
apart from ``print`` (thread-safe: each call writes one line with one ``write``).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError
from pytfrt.host.async_value import CHAIN, Chain
from pytfrt.host.registry import Attr, KernelError, kernel
from pytfrt.tensor.string_host_tensor import StringHostTensor

GRAPH_OPS = OpTable()
"""Op name -> compute function."""

_M = (1 << 64) - 1
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F


def _fetch64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 8], "little")


def _fetch32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 4], "little")


def _rot(v: int, shift: int) -> int:
    return ((v >> shift) | (v << (64 - shift))) & _M


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M
    b ^= b >> 47
    return (b * mul) & _M


def _len0to16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = _K2 + n * 2
        a = (_fetch64(s, 0) + _K2) & _M
        b = _fetch64(s, n - 8)
        c = (_rot(b, 37) * mul + a) & _M
        d = ((_rot(a, 25) + b) * mul) & _M
        return _len16(c, d, mul)
    if n >= 4:
        mul = _K2 + n * 2
        return _len16((n + (_fetch32(s, 0) << 3)) & _M, _fetch32(s, n - 4), mul)
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _M) * _K2) & _M
    return _K2


def _ends(s: bytes, ka: int) -> tuple[int, int, int, int, int]:
    """``mul`` and the four words ``a, b, c, d`` both long-string hashes start from (the
    first two words and the last two, ``a`` scaled by ``ka``)."""
    n = len(s)
    mul = _K2 + n * 2
    a = (_fetch64(s, 0) * ka) & _M
    c = (_fetch64(s, n - 8) * mul) & _M
    return mul, a, _fetch64(s, 8), c, (_fetch64(s, n - 16) * _K2) & _M


def _len17to32(s: bytes) -> int:
    mul, a, b, c, d = _ends(s, _K1)
    return _len16(
        (_rot((a + b) & _M, 43) + _rot(c, 30) + d) & _M,
        (a + _rot((b + _K2) & _M, 18) + c) & _M,
        mul,
    )


def _len33to64(s: bytes) -> int:
    n = len(s)
    mul, a, b, c, d = _ends(s, _K2)
    y = (_rot((a + b) & _M, 43) + _rot(c, 30) + d) & _M
    z = _len16(y, (a + _rot((b + _K2) & _M, 18) + c) & _M, mul)
    e = (_fetch64(s, 16) * mul) & _M
    f = _fetch64(s, 24)
    g = ((y + _fetch64(s, n - 32)) * mul) & _M
    h = ((z + _fetch64(s, n - 24)) * mul) & _M
    return _len16(
        (_rot((e + f) & _M, 43) + _rot(g, 30) + h) & _M,
        (e + _rot((f + a) & _M, 18) + g) & _M,
        mul,
    )


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = (_fetch64(s, i + k) for k in (0, 8, 16, 24))
    a = (a + w) & _M
    b = _rot((b + a + z) & _M, 21)
    c = a
    a = (a + x + y) & _M
    b = (b + _rot(a, 44)) & _M
    return (a + z) & _M, (b + c) & _M


def fingerprint64(s: bytes) -> int:
    """FarmHash's ``Fingerprint64`` of ``s`` (unsigned 64 bits), as TF's ``Fingerprint64``."""
    n = len(s)
    if n <= 16:
        return _len0to16(s)
    if n <= 32:
        return _len17to32(s)
    if n <= 64:
        return _len33to64(s)
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _M
    z = (_shift_mix((y * _K2 + 113) & _M) * _K2) & _M
    v = (0, 0)
    w = (0, 0)
    x = (x * _K2 + _fetch64(s, 0)) & _M
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    i = 0
    while True:
        x = (_rot((x + y + v[0] + _fetch64(s, i + 8)) & _M, 37) * _K1) & _M
        y = (_rot((y + v[1] + _fetch64(s, i + 48)) & _M, 42) * _K1) & _M
        x ^= w[1]
        y = (y + v[0] + _fetch64(s, i + 40)) & _M
        z = (_rot((z + w[0]) & _M, 33) * _K1) & _M
        v = _weak32(s, i, (v[1] * _K1) & _M, (x + w[0]) & _M)
        w = _weak32(s, i + 32, (z + w[1]) & _M, (y + _fetch64(s, i + 16)) & _M)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = _K1 + ((z & 0xFF) << 1)
    i = last64
    w = ((w[0] + ((n - 1) & 63)) & _M, w[1])
    v = ((v[0] + w[0]) & _M, v[1])
    w = ((w[0] + v[0]) & _M, w[1])
    x = (_rot((x + y + v[0] + _fetch64(s, i + 8)) & _M, 37) * mul) & _M
    y = (_rot((y + v[1] + _fetch64(s, i + 48)) & _M, 42) * mul) & _M
    x ^= (w[1] * 9) & _M
    y = (y + v[0] * 9 + _fetch64(s, i + 40)) & _M
    z = (_rot((z + w[0]) & _M, 33) * mul) & _M
    v = _weak32(s, i, (v[1] * mul) & _M, (x + w[0]) & _M)
    w = _weak32(s, i + 32, (z + w[1]) & _M, (y + _fetch64(s, i + 16)) & _M)
    z, x = x, z
    return _len16(
        (_len16(v[0], w[0], mul) + _shift_mix(y) * _K0 + z) & _M,
        (_len16(v[1], w[1], mul) + x) & _M,
        mul,
    )


def as_bytes(v: Any) -> bytes:
    """A string element's bytes (``str`` encoded as UTF-8, surrogate escapes restored)."""
    if isinstance(v, bytes):
        return v
    return str(v).encode("utf-8", "surrogateescape")


@GRAPH_OPS.op("string_to_hash_bucket")
def string_to_hash_bucket(x: np.ndarray, *, num_buckets: int) -> np.ndarray:
    """TF's ``StringToHashBucketFast``: ``Fingerprint64(s) mod num_buckets`` (int64)."""
    if num_buckets < 1:
        raise OpError(f"string_to_hash_bucket: num_buckets must be >= 1, got {num_buckets}")
    out = [fingerprint64(as_bytes(v)) % num_buckets for v in x.reshape(-1).tolist()]
    return np.asarray(out, dtype=np.int64).reshape(x.shape)


def _printf_spec(kind: str, precision: int, scientific: bool, shortest: bool, width: int,
                 fill: str) -> str:
    """The ``%`` directive TF's ``AsString`` builds (``kind``: NumPy's dtype kind)."""
    spec = "%"
    if fill:
        spec += fill
    if width > -1:
        spec += str(width)
    if kind == "f":
        if precision > -1:
            spec += f".{precision}"
        return spec + ("g" if shortest else "e" if scientific else "f")
    return spec + "d"


_CAT_MUL = np.uint64(0xC6A4A7935BD1E995)


def _shift_mix_u64(v: np.ndarray) -> np.ndarray:
    return v ^ (v >> np.uint64(47))


def fingerprint_cat64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TF's ``FingerprintCat64(a, b)`` elementwise on uint64 arrays (wrapping arithmetic)."""
    r = a ^ _CAT_MUL
    r = r ^ (_shift_mix_u64(b * _CAT_MUL) * _CAT_MUL)
    r = r * _CAT_MUL
    r = _shift_mix_u64(r) * _CAT_MUL
    return _shift_mix_u64(r)


def _feature_hashes(x: np.ndarray) -> np.ndarray:
    """The 64-bit value each feature of a cross contributes: strings their ``Fingerprint64``,
    integers their own two's-complement bits."""
    if x.dtype == object:
        flat = [fingerprint64(as_bytes(v)) for v in x.reshape(-1).tolist()]
        return np.asarray(flat, dtype=np.uint64).reshape(x.shape)
    return x.astype(np.int64).view(np.uint64)


@GRAPH_OPS.op("hashed_cross")
def hashed_cross(*inputs: np.ndarray, num_buckets: int, hash_key: int) -> np.ndarray:
    """TF's hashed ``SparseCross`` of dense ``[batch, k_i]`` columns: ``[batch, prod k_i]``."""
    if not inputs or any(x.ndim != 2 or x.shape[0] != inputs[0].shape[0] for x in inputs):
        raise OpError("hashed_cross: the columns must be 2-D with the same batch size, got "
                      f"{[x.shape for x in inputs]}")
    batch = inputs[0].shape[0]
    h = np.full((batch, 1), hash_key & ((1 << 64) - 1), dtype=np.uint64)
    for x in inputs:
        f = _feature_hashes(x)
        h = fingerprint_cat64(h[:, :, None], f[:, None, :]).reshape(batch, -1)
    modulus = np.uint64(num_buckets if num_buckets > 0 else (1 << 63) - 1)
    return (h % modulus).astype(np.int64)


def as_text(v: Any) -> str:
    """A string element as the runtime holds it: ``str`` (bytes decoded as UTF-8, other bytes
    kept through surrogate escapes)."""
    return as_bytes(v).decode("utf-8", "surrogateescape")


@GRAPH_OPS.op("string_lower")
def string_lower(x: np.ndarray, *, encoding: str) -> np.ndarray:
    """TF's ``StringLower``."""
    if encoding.lower().replace("-", "") == "utf8":
        out = [as_text(v).lower() for v in x.reshape(-1).tolist()]
    else:  # TF's default: ASCII letters only
        out = [as_text(as_bytes(v).lower()) for v in x.reshape(-1).tolist()]
    return np.asarray(out, dtype=object).reshape(x.shape)


@GRAPH_OPS.op("regex_replace")
def regex_replace(x: np.ndarray, *, pattern: str, rewrite: str,
                  replace_global: bool) -> np.ndarray:
    """TF's ``StaticRegexReplace`` (Python's ``re``)."""
    import re

    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise OpError(f"regex_replace: bad pattern {pattern!r}: {exc}") from None
    count = 0 if replace_global else 1
    out = [regex.sub(rewrite, as_text(v), count=count) for v in x.reshape(-1).tolist()]
    return np.asarray(out, dtype=object).reshape(x.shape)


@GRAPH_OPS.op("string_split_ragged")
def string_split_ragged(x: np.ndarray, *, sep: str, maxsplit: int
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TF's ``StringSplitV2`` of a vector: ragged ``(indices, values, shape)`` (the split of
    ONNX's ``StringSplit``, its padding dropped)."""
    from pytfrt.backends.cpu.onnx_text import string_split

    if x.ndim != 1:
        raise OpError(f"string_split_ragged: the input must be a vector, got {list(x.shape)}")
    text = np.asarray([as_text(v) for v in x.tolist()], dtype=object)
    padded, counts = string_split(text, delimiter=sep, maxsplit=maxsplit)
    keep = np.arange(padded.shape[1])[None, :] < counts[:, None]
    rows, cols = np.nonzero(keep)
    indices = np.stack([rows, cols], axis=1).astype(np.int64).reshape(-1, 2)
    values = np.asarray(padded[keep], dtype=object)
    return indices, values, np.asarray(padded.shape, dtype=np.int64)


@GRAPH_OPS.op("ragged_to_dense")
def ragged_to_dense(values: np.ndarray, rowids: np.ndarray, nrows: np.ndarray,
                    default: np.ndarray, *, width: int) -> np.ndarray:
    """TF's ``RaggedTensorToTensor`` of a ragged vector by value row ids: ``[nrows, width]``
    (``width`` -1: the longest row's length)."""
    rows = int(np.asarray(nrows).reshape(()))
    ids = np.asarray(rowids, dtype=np.int64).reshape(-1)
    if ids.size != values.shape[0] or (ids.size and (ids.min() < 0 or ids.max() >= rows
                                                    or np.any(np.diff(ids) < 0))):
        raise OpError("ragged_to_dense: the row ids must be sorted, in [0, nrows), one per value")
    starts = np.searchsorted(ids, np.arange(rows))
    cols = np.arange(ids.size) - starts[ids] if ids.size else ids
    if width < 0:
        width = int(cols.max()) + 1 if cols.size else 0
    out = np.empty((rows, width), dtype=values.dtype)
    out[...] = np.asarray(default).reshape(())
    keep = cols < width
    out[ids[keep], cols[keep]] = values[keep]
    return out


@GRAPH_OPS.op("as_string")
def as_string(x: np.ndarray, *, precision: int, scientific: bool, shortest: bool, width: int,
              fill: str) -> np.ndarray:
    """TF's ``AsString`` of a numeric or boolean tensor (see the module docstring)."""
    if x.dtype == np.bool_:
        out = ["true" if v else "false" for v in x.reshape(-1).tolist()]
    else:
        spec = _printf_spec(x.dtype.kind, precision, scientific, shortest, width, fill)
        out = [spec % v for v in x.reshape(-1).tolist()]
    return np.asarray(out, dtype=object).reshape(x.shape)


_ESCAPES = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}


def _c_escape(s: bytes) -> str:
    """``s`` escaped as TF prints a string element (``Utf8SafeCEscape``: quotes, backslash and
    control bytes escaped, bytes from 0x80 kept)."""
    out: list[str] = []
    for c in s:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif c < 0x20 or c == 0x7F:
            out.append(f"\\{c:03o}")
        else:
            out.append(chr(c) if c < 0x80 else bytes([c]).decode("latin-1"))
    text = "".join(out)
    # bytes from 0x80 were kept one per character: back to the UTF-8 text they spell
    return text.encode("latin-1").decode("utf-8", "surrogateescape")


def _float_text(v: float, digits: int, parse: Any) -> str:
    """C's ``%.{digits}g`` of ``v``, with ``digits + 3`` (float) or ``+ 2`` (double) when the
    short form does not read back as ``v`` -- TF's ``FloatToBuffer``/``DoubleToBuffer``."""
    if v != v:
        return "-nan" if np.signbit(v) else "nan"
    text = f"{v:.{digits}g}"
    if parse(float(text)) != v:
        text = f"{v:.{digits + (3 if digits == 6 else 2)}g}"
    return text


_FLUSHED = {np.dtype(np.float32): float(np.finfo(np.float32).tiny),
            np.dtype(np.float64): float(np.finfo(np.float64).tiny)}
"""The smallest normal number of the types whose denormals TF prints as zero."""


def element_text(v: Any, dtype: np.dtype[Any], quoted: bool = True) -> str:
    """One element as TF formats it (``PrintOneElement``; strings quoted in print_v2 mode)."""
    if dtype.kind == "O":
        text = _c_escape(as_bytes(v))
        return '"' + text + '"' if quoted else text
    if dtype.kind == "b":
        return "1" if v else "0"
    if dtype.kind == "f":
        f = float(v)
        if dtype in _FLUSHED and 0 < abs(f) < _FLUSHED[dtype]:
            f = math.copysign(0.0, f)  # TF's kernels run with denormals flushed to zero
        if dtype == np.float64:
            return _float_text(f, 15, float)
        return _float_text(f, 6, np.float32)  # float16/bfloat16 widened to float, as TF
    return str(int(v))


def summary_text(x: np.ndarray, limit: int) -> str:
    """``x`` as TF's ``StringFormat`` writes a tensor (``Tensor::SummarizeValue`` in print_v2
    mode): nested brackets, at most ``limit`` entries at each end of a dimension with ``...``
    between (``limit < 0``: all), rows on new lines."""
    n = x.size
    limit = n if limit < 0 else min(limit, n)
    if limit == 0 and x.dtype == np.bool_:
        return ""  # TF's boolean summary shows nothing at all then
    flat = x.reshape(-1)
    if x.ndim == 0:
        text = " ".join(element_text(flat[i], x.dtype) for i in range(limit))
        return text + ("..." if n > limit else "")
    out: list[str] = []
    dims = x.shape

    def spacing(d: int) -> None:
        if d == x.ndim - 1:
            out.append(" ")
        else:
            out.append("\n" * (x.ndim - d - 1) + " " * (d + 1))

    def dim(d: int, base: int) -> None:
        if d == x.ndim:
            out.append(element_text(flat[base], x.dtype))
            return
        out.append("[")
        count = dims[d]
        step = int(np.prod(dims[d + 1 :], dtype=np.int64))
        for i in range(min(limit, count)):
            if i > 0:
                spacing(d)
            dim(d + 1, base + step * i)
        if count > 2 * limit:
            spacing(d)
            out.append("...")
        for i in range(max(limit, count - limit), count):
            spacing(d)
            dim(d + 1, base + step * i)
        out.append("]")

    dim(0, 0)
    return "".join(out)


def format_template(template: str, placeholder: str, texts: list[str]) -> str:
    """``template`` with its ``placeholder``s replaced by ``texts`` in order.

    Raises:
        OpError: the placeholder count is not ``len(texts)``."""
    parts = template.split(placeholder)
    if len(parts) != len(texts) + 1:
        raise OpError(f"string_format: {len(parts) - 1} placeholders for {len(texts)} inputs")
    return parts[0] + "".join(t + p for t, p in zip(texts, parts[1:], strict=True))


@GRAPH_OPS.op("string_format")
def string_format(*inputs: np.ndarray, template: str, placeholder: str,
                  summarize: int) -> np.ndarray:
    """TF's ``StringFormat``: the template with each tensor summarised (a string scalar)."""
    texts = [summary_text(np.asarray(x), summarize) for x in inputs]
    return np.asarray(format_template(template, placeholder, texts), dtype=object)


def write_text(text: Any, *, output_stream: str, end: str) -> None:
    """``text`` then ``end`` written to ``sys.stderr``/``sys.stdout`` and flushed (what
    TF's ``PrintV2`` does with the standard streams)."""
    stream = sys.stdout if output_stream == "stdout" else sys.stderr
    stream.write(str(text) + end)
    stream.flush()


@kernel("tg.print", sync=True)
def print_kernel(x: StringHostTensor, chain: Chain, end: Attr[str],
                 output_stream: Attr[str]) -> Chain:
    """Kernel ``tg.print``: writes the string scalar ``x`` (:func:`write_text`) after ``chain``."""
    write_text(x.array.reshape(()).item(), output_stream=output_stream, end=end)
    return CHAIN


KERNELS: tuple[Any, ...] = (print_kernel,)
"""The chained kernels of this module (registered by ``graph_kernels.register``)."""


def assert_summary_text(x: np.ndarray, limit: int) -> str:
    """``x`` as TF's ``Assert`` writes a data tensor (``Tensor::SummarizeValue`` in the old
    mode): the first ``limit`` elements in row order (``limit < 0``: all), nested brackets
    without spaces between rows, strings unquoted, ``...`` where elements were left out."""
    n = x.size
    limit = n if limit < 0 else min(limit, n)
    if limit == 0 and x.dtype == np.bool_:
        return ""  # TF's boolean summary shows nothing at all then
    flat = x.reshape(-1)
    texts = [element_text(flat[i], x.dtype, quoted=False) for i in range(limit)]
    if x.ndim == 0:
        return " ".join(texts) + ("..." if n > limit else "")
    out: list[str] = []
    taken = 0

    def dim(d: int) -> None:
        nonlocal taken
        if taken >= limit:
            return
        if d == x.ndim - 1:
            for i in range(x.shape[d]):
                if taken >= limit:
                    if d:
                        out.append("...")
                    return
                out.append((" " if i else "") + texts[taken])
                taken += 1
            return
        for _ in range(x.shape[d]):
            opened = taken < limit
            if opened:
                out.append("[")
            dim(d + 1)
            if opened:
                out.append("]")

    dim(0)
    return "".join(out) + ("..." if n > limit else "")


@kernel("tg.assert", sync=True)
def assert_kernel(placeholder: Attr[str], summarize: Attr[int], template: Attr[str],
                  *args: Any) -> Chain:
    """Kernel ``tg.assert``: operands ``cond, data..., chain``; raises TF's message
    (``assertion failed: [data] ...``, :func:`assert_summary_text`) unless every element of
    ``cond`` is true."""
    cond, *data, _chain = args
    if not bool(np.all(cond.array)):
        texts = [assert_summary_text(np.asarray(d.array), summarize) for d in data]
        raise KernelError(format_template(template, placeholder, texts))
    return CHAIN


KERNELS = (*KERNELS, assert_kernel)
