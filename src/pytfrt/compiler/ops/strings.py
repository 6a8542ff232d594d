"""Catalogue family: TF's string ops and printing (``strings``).

* ``as_string(x) {precision, scientific, shortest, width, fill}`` -- numbers to strings, as
  TF's ``AsString``;
* ``string_to_hash_bucket(x) {num_buckets}`` -- TF's ``StringToHashBucketFast`` (FarmHash's
  ``Fingerprint64`` modulo ``num_buckets``, i64);
* ``hashed_cross(inputs*) {num_buckets, hash_key}`` -- TF's hashed ``SparseCross`` of dense
  ``[batch, k_i]`` columns (all integers or all strings): ``[batch, prod k_i]`` i64;
* ``string_lower(x) {encoding}``, ``regex_replace(x) {pattern, rewrite, replace_global}`` --
  TF's ``StringLower`` and ``StaticRegexReplace`` (strings -> strings of the same shape);
* ``string_split_ragged(x) {sep, maxsplit}`` -- TF's ``StringSplitV2`` of a string vector: three
  results, the ragged split's ``indices`` (i64 ``[n, 2]``), ``values`` (strings ``[n]``) and
  ``shape`` (i64 ``[2]``);
* ``ragged_to_dense(values, rowids, nrows, default) {width}`` -- TF's ``RaggedTensorToTensor``
  of a ragged vector given by value row ids: ``[nrows, width]``;
* ``string_format(inputs*) {template, placeholder, summarize}`` -- TF's ``StringFormat`` (a
  string scalar);
* ``print(x) {output_stream, end}`` -- TF's ``PrintV2`` of a string scalar: *stateful* (never
  removed or reordered; the lowering threads the function's chain through it), no result;
* ``assert(cond, data*) {summarize, template, placeholder}`` -- TF's ``Assert``: stateful
  like ``print``; fails the call with ``template`` (the data tensors summarised into its
  placeholders) unless every element of ``cond`` is true.

None carries a gradient.  Compute functions: :mod:`pytfrt.backends.cpu.strings`.  Filled at
import, then read only.
"""

from __future__ import annotations

from pytfrt.compiler.ops.base import AttrSpec, InferContext, define
from pytfrt.compiler.types import TType


def _as_string(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype == "string":
        raise ctx.error("the operand must be numbers or booleans, got strings")
    return [TType("string", x.shape)]


def _hash_bucket(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype != "string":
        raise ctx.error(f"the operand must be strings, got {x.dtype}")
    if ctx.attrs["num_buckets"] < 1:
        raise ctx.error(f"num_buckets must be >= 1, got {ctx.attrs['num_buckets']}")
    return [TType("i64", x.shape)]


def _hashed_cross(ctx: InferContext) -> list[TType]:
    if not ctx.inputs:
        raise ctx.error("at least one column is needed")
    kinds = {x.dtype == "string" for x in ctx.inputs}
    if len(kinds) > 1 or not all(x.dtype == "string" or x.dtype in ("i32", "i64")
                                 for x in ctx.inputs):
        raise ctx.error("the columns must be all strings or all i32/i64, got "
                        f"{[x.dtype for x in ctx.inputs]}")
    if ctx.attrs["num_buckets"] < 0:
        raise ctx.error(f"num_buckets must be >= 0, got {ctx.attrs['num_buckets']}")
    batch: int | None = None
    width: int | None = 1
    for x in ctx.inputs:
        if x.shape is None:
            width = None
            continue
        if len(x.shape) != 2:
            raise ctx.error(f"each column must be 2-D [batch, features], got {x}")
        batch = x.shape[0] if batch is None else batch
        width = None if width is None or x.shape[1] is None else width * x.shape[1]
    return [TType("i64", (batch, width))]


def _strings_same(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype != "string":
        raise ctx.error(f"the operand must be strings, got {x.dtype}")
    return [x]


def _string_split(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype != "string" or x.rank not in (None, 1):
        raise ctx.error(f"the operand must be a string vector, got {x}")
    return [TType("i64", (None, 2)), TType("string", (None,)), TType("i64", (2,))]


def _ragged_to_dense(ctx: InferContext) -> list[TType]:
    values, rowids, nrows, default = ctx.inputs
    if values.rank not in (None, 1) or rowids.rank not in (None, 1):
        raise ctx.error(f"values and row ids must be vectors, got {values} and {rowids}")
    if default.dtype != values.dtype:
        raise ctx.error(f"the default ({default.dtype}) must be of the values' type "
                        f"({values.dtype})")
    width = ctx.attrs["width"]
    return [TType(values.dtype, (None, None if width < 0 else width))]


def _string_format(ctx: InferContext) -> list[TType]:
    holes = ctx.attrs["template"].count(ctx.attrs["placeholder"])
    if holes != len(ctx.inputs):
        raise ctx.error(f"the template has {holes} placeholders for {len(ctx.inputs)} inputs")
    return [TType("string", ())]


def _print(ctx: InferContext) -> list[TType]:
    (x,) = ctx.inputs
    if x.dtype != "string" or x.shape not in (None, ()):
        raise ctx.error(f"the operand must be a string scalar, got {x}")
    return []


define("as_string", ("x",), _as_string, {
    "precision": AttrSpec("int", -1), "scientific": AttrSpec("bool", False),
    "shortest": AttrSpec("bool", False), "width": AttrSpec("int", -1),
    "fill": AttrSpec("str", ""),
}, family="strings", doc="TF AsString", differentiable=False)
define("string_to_hash_bucket", ("x",), _hash_bucket, {"num_buckets": AttrSpec("int")},
       family="strings", doc="TF StringToHashBucketFast", differentiable=False)
define("hashed_cross", ("inputs*",), _hashed_cross, {
    "num_buckets": AttrSpec("int", 0), "hash_key": AttrSpec("int", 0),
}, family="strings", doc="TF SparseCross (hashed, dense columns)", differentiable=False)
define("string_lower", ("x",), _strings_same, {"encoding": AttrSpec("str", "")},
       family="strings", doc="TF StringLower", differentiable=False)
define("regex_replace", ("x",), _strings_same, {
    "pattern": AttrSpec("str"), "rewrite": AttrSpec("str", ""),
    "replace_global": AttrSpec("bool", True),
}, family="strings", doc="TF StaticRegexReplace", differentiable=False)
define("string_split_ragged", ("x",), _string_split, {
    "sep": AttrSpec("str", ""), "maxsplit": AttrSpec("int", -1),
}, family="strings", doc="TF StringSplitV2", num_results=3, differentiable=False)
define("ragged_to_dense", ("values", "rowids", "nrows", "default"), _ragged_to_dense,
       {"width": AttrSpec("int", -1)}, family="strings", doc="TF RaggedTensorToTensor",
       differentiable=False)
define("string_format", ("inputs*",), _string_format, {
    "template": AttrSpec("str", "%s"), "placeholder": AttrSpec("str", "%s"),
    "summarize": AttrSpec("int", 3),
}, family="strings", doc="TF StringFormat", differentiable=False)
define("print", ("x",), _print, {
    "output_stream": AttrSpec("str", "stderr", choices=("stderr", "stdout")),
    "end": AttrSpec("str", "\n"),
}, family="strings", doc="TF PrintV2", stateful=True, num_results=0, compute=None,
       differentiable=False)


def _assert(ctx: InferContext) -> list[TType]:
    cond = ctx.inputs[0]
    if cond.dtype != "i1":
        raise ctx.error(f"the condition must be boolean, got {cond.dtype}")
    return []


define("assert", ("cond", "data*"), _assert, {
    "summarize": AttrSpec("int", 3), "template": AttrSpec("str"),
    "placeholder": AttrSpec("str", "{}"),
}, family="strings", doc="TF Assert", stateful=True, num_results=0, compute=None,
       differentiable=False)
