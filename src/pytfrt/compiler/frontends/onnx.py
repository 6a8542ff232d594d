"""The ONNX front end: an ONNX model (file or ``onnx.ModelProto``) -> a ``tg`` ``GraphModule``.

:func:`import_onnx` walks the main graph's nodes in order and emits, through
:class:`pytfrt.compiler.builder.GraphBuilder` only, the catalogue ops of ``docs/graph_dialect.md``
(the per-op mapping lives in :mod:`pytfrt.compiler.frontends.onnx_mapping`; ``docs/ops.md``
lists it).  What it guarantees:

* opsets 13 and later of the default domain (an older model is first upgraded with ONNX's
  version converter; a model it cannot upgrade is rejected with :class:`OnnxImportError`);
* initializers become weights (``tg.constant`` named after the initializer), created only when
  a runtime op uses them;
* dynamic dimensions (``dim_param`` such as ``batch`` or ``sequence``, or missing dims) stay
  dynamic (``None``) unless ``input_shapes`` fixes them; NCHW stays NCHW (``conv2d`` and the
  pools carry ``layout = "NCHW"``, filters stay ``OIHW``);
* a node whose inputs are all known at import time (initializers, ``Constant`` nodes, the
  ``Shape`` of a statically shaped value, and what is computed from those) is evaluated at
  import time with ONNX's own reference implementation (``onnx.reference``), so static shape
  subgraphs (``Shape``/``Gather``/``Concat``/``Reshape``) disappear; when a shape depends on a
  dynamic dimension, the subgraph is emitted as ops and runs at run time (``tg.shape``,
  ``tg.gather``, ``tg.concat``, the tensor-operand forms of ``reshape``/``slice``/``tile``...);
* an ONNX op it cannot express raises :class:`pytfrt.compiler.UnsupportedOpError` naming the op
  type, the node name and the model file.

Thread-safety: each call builds its own state; concurrent imports are independent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import onnx

    from pytfrt.compiler.builder import FunctionBuilder, GraphModule, Value

MIN_OPSET = 13
"""The oldest default-domain opset imported as is; older models are upgraded first."""

FOLD_LIMIT = 1 << 22
"""Import-time evaluation is skipped for nodes whose known inputs exceed this many elements."""

_NO_FOLD = frozenset(
    {
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)

# ONNX TensorProto data type -> tg element type name.
_ONNX_DTYPES: dict[int, str] = {
    1: "f32",
    2: "ui8",
    3: "i8",
    4: "ui16",
    5: "i16",
    6: "i32",
    7: "i64",
    9: "i1",
    10: "f16",
    11: "f64",
    12: "ui32",
    13: "ui64",
    16: "bf16",
    8: "string",
}


class OnnxImportError(ValueError):
    """A model the ONNX front end cannot read (bad file, bad graph, too old an opset)."""


def tg_dtype(onnx_type: int, *, where: str = "") -> str:
    """The ``tg`` element type name of an ONNX ``TensorProto`` data type."""
    try:
        return _ONNX_DTYPES[onnx_type]
    except KeyError:
        from onnx import TensorProto

        from pytfrt.compiler.errors import UnsupportedOpError

        try:
            name = TensorProto.DataType.Name(onnx_type)
        except ValueError:
            name = str(onnx_type)
        supported = ", ".join(TensorProto.DataType.Name(t) for t in sorted(_ONNX_DTYPES))
        raise UnsupportedOpError(
            f"element type {name}", "", where.rstrip(": "), f"supported types: {supported}"
        ) from None


def load_model(model_or_path: Any) -> tuple[onnx.ModelProto, str]:
    """``(ModelProto, origin)`` for a path or a ``ModelProto``; the origin names it in errors."""
    import onnx

    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path, "<onnx.ModelProto>"
    if isinstance(model_or_path, str | os.PathLike):
        path = Path(model_or_path)
        if not path.is_file():
            raise OnnxImportError(f"{path}: no such ONNX file")
        try:
            model = onnx.load(str(path))
        except Exception as exc:  # onnx raises DecodeError and friends
            raise OnnxImportError(f"{path}: not a readable ONNX model: {exc}") from exc
        if not model.graph.node and not model.graph.output:
            raise OnnxImportError(f"{path}: not an ONNX model (empty graph)")
        return model, str(path)
    raise TypeError(
        "import_onnx expects a .onnx path or an onnx.ModelProto, "
        f"got {type(model_or_path).__name__}"
    )


def _default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def _upgrade(model: onnx.ModelProto, origin: str) -> onnx.ModelProto:
    opset = _default_opset(model)
    if opset >= MIN_OPSET or not any(n.domain in ("", "ai.onnx") for n in model.graph.node):
        return model
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, MIN_OPSET)
    except Exception as exc:
        from pytfrt.compiler.errors import UnsupportedOpError

        detail = " ".join(str(exc).split())[:200]
        raise UnsupportedOpError(
            f"opset {opset}", "", origin,
            f"older than {MIN_OPSET} and ONNX's version converter could not upgrade it: {detail}"
        ) from exc


def import_onnx(
    model_or_path: Any,
    input_shapes: Mapping[str, Sequence[int | None]] | Sequence[Any] | None = None,
    input_values: Mapping[str, np.ndarray] | None = None,
) -> GraphModule:
    """Import an ONNX model as a ``tg`` :class:`~pytfrt.compiler.builder.GraphModule`.

    ``model_or_path``: a ``.onnx`` path or an ``onnx.ModelProto``.  ``input_shapes`` optionally
    fixes dynamic input dimensions: a mapping input name -> shape, or a sequence in input order
    of shapes or objects with a ``.shape`` (``None`` keeps a dimension dynamic).  The module's
    entry ``@main`` takes the graph inputs (initializers excluded) and returns the graph
    outputs, under their ONNX names.  ``input_values`` fixes graph inputs to values (they are
    then constants of the graph and no longer inputs of ``@main``): what
    :mod:`pytfrt.compiler.frontends.onnx_specialize` uses for operands known only at run time.

    Raises :class:`OnnxImportError` (a ``ValueError``) for an unreadable model or bad input
    shapes, :class:`pytfrt.compiler.UnsupportedOpError` for an op the catalogue cannot express.
    """
    from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter

    model, origin = load_model(model_or_path)
    model = _upgrade(model, origin)
    return OnnxGraphImporter(model, origin).run(input_shapes, input_values)


def materialize(fn: FunctionBuilder, array: np.ndarray, name: str) -> Value:
    """A ``tg.constant`` for ``array``: inline when small, else a weight named ``name``."""
    from pytfrt.compiler.builder import INLINE_LIMIT

    arr = np.asarray(array)
    if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make a scalar 1-D)
        arr = arr.copy(order="C")
    return fn.constant(arr, name=name if arr.size > INLINE_LIMIT else None)
