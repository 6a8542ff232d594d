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
  import time: imported by its handler, whose ``tg`` ops are then evaluated with the runtime's
  compute functions (the evaluation ``-tg-constant-fold`` uses, so folding and running agree
  bit for bit) and dropped; ONNX's reference implementation (``onnx.reference``) only
  evaluates a node without a handler, or one whose handler cannot take these constants.
  Static shape subgraphs (``Shape``/``Gather``/``Concat``/``Reshape``) thus disappear; when
  a shape depends on a dynamic dimension, the subgraph is emitted as ops and runs at run time
  (``tg.shape``, ``tg.gather``, ``tg.concat``, the tensor-operand forms of
  ``reshape``/``slice``/``tile``...);
* an ONNX op it cannot express raises :class:`pytfrt.compiler.UnsupportedOpError` naming the op
  type, the node name and the model file.

The common path does not import the ``onnx`` package, only ONNX's protobuf module
(:mod:`~pytfrt.compiler.frontends.onnx_proto` says when ``onnx`` itself is imported).

Thread-safety: each call builds its own state; concurrent imports are independent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytfrt.compiler.frontends.onnx_common import FOLD_LIMIT as FOLD_LIMIT
from pytfrt.compiler.frontends.onnx_common import MIN_OPSET as MIN_OPSET
from pytfrt.compiler.frontends.onnx_common import OnnxImportError as OnnxImportError
from pytfrt.compiler.frontends.onnx_common import _default_opset
from pytfrt.compiler.frontends.onnx_common import materialize as materialize
from pytfrt.compiler.frontends.onnx_common import tg_dtype as tg_dtype

if TYPE_CHECKING:  # pragma: no cover
    import onnx

    from pytfrt.compiler.builder import GraphModule

_TEXT_SUFFIXES = frozenset({".txtpb", ".textproto", ".prototxt", ".pbtxt", ".json", ".onnxjson",
                            ".onnxtxt", ".onnxtext"})
"""File suffixes ``onnx.load`` reads as a text format (any other file is binary protobuf)."""


def load_model(model_or_path: Any) -> tuple[onnx.ModelProto, str]:
    """``(ModelProto, origin)`` for a path or a ``ModelProto``; the origin names it in errors.
    A file is read as ``onnx.load`` reads it: binary protobuf (external data included) without
    importing ``onnx`` (:mod:`~pytfrt.compiler.frontends.onnx_proto`), a text format (told by
    the suffix, as ``onnx.load`` tells it) by ``onnx.load``."""
    from pytfrt.compiler.frontends.onnx_proto import ModelProto, load_external_data

    if isinstance(model_or_path, ModelProto):
        return model_or_path, "<onnx.ModelProto>"
    if isinstance(model_or_path, str | os.PathLike):
        path = Path(model_or_path)
        if not path.is_file():
            raise OnnxImportError(f"{path}: no such ONNX file")
        try:
            if path.suffix.lower() in _TEXT_SUFFIXES:
                import onnx  # (onnx.load reads these formats, told by the suffix)

                model = onnx.load(str(path))
            else:
                model = ModelProto.FromString(path.read_bytes())
                load_external_data(model, str(path.parent))
        except Exception as exc:  # protobuf raises DecodeError, onnx its own errors
            raise OnnxImportError(f"{path}: not a readable ONNX model: {exc}") from exc
        if not model.graph.node and not model.graph.output:
            raise OnnxImportError(f"{path}: not an ONNX model (empty graph)")
        return model, str(path)
    raise TypeError(
        "import_onnx expects a .onnx path or an onnx.ModelProto, "
        f"got {type(model_or_path).__name__}"
    )


def _upgrade(model: onnx.ModelProto, origin: str) -> onnx.ModelProto:
    """``model`` itself when its opset needs no upgrade, else upgraded to :data:`MIN_OPSET`
    with ONNX's version converter; ``onnx`` is imported only for an opset above
    :data:`~pytfrt.compiler.frontends.onnx_proto.ONNX_KNOWN_OPSET` (to ask ``onnx.defs``
    whether it knows it) or below :data:`MIN_OPSET`."""
    from pytfrt.compiler.frontends.onnx_proto import ONNX_KNOWN_OPSET

    opset = _default_opset(model)
    if opset > ONNX_KNOWN_OPSET:
        import onnx

        newest = onnx.defs.onnx_opset_version()
        if opset > newest:
            raise OnnxImportError(
                f"{origin}: opset {opset} is newer than this importer knows (the installed "
                f"onnx {onnx.__version__} knows opsets up to {newest}): upgrade onnx, or export "
                f"the model with opset <= {newest}")
    if opset >= MIN_OPSET or not any(n.domain in ("", "ai.onnx") for n in model.graph.node):
        return model
    from onnx import version_converter

    if opset < 9 and any(n.op_type == "Scan" for n in model.graph.node):
        # ONNX's converter drops Scan-8's batch axis from the graph's inputs and outputs
        # without adding it back: a graph of Scan-8 nodes only is imported at its own opset
        # (the Scan handler reads the batch axis); mixed with other old ops it is refused
        if all(n.op_type == "Scan" for n in model.graph.node):
            return model
        from pytfrt.compiler.errors import UnsupportedOpError

        raise UnsupportedOpError(
            "Scan", next(n.name for n in model.graph.node if n.op_type == "Scan"), origin,
            f"Scan-8 (opset {opset}) beside other ops: ONNX's version converter cannot "
            "upgrade its batch axis")
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
    input_values: Mapping[str, Any] | None = None,
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

    model, origin, weights = _load_with_weights(model_or_path)
    model = _upgrade(model, origin)
    importer = OnnxGraphImporter(model, origin, weights)
    del model, weights  # the importer holds the only references: dropped as it goes
    return importer.run(input_shapes, input_values)


def _load_with_weights(model_or_path: Any) -> tuple[onnx.ModelProto, str, dict[str, Any]]:
    """``(ModelProto, origin, weights)``: for a file, its large initializers read straight
    into arrays (``weights``) and left out of the ModelProto, so the import never holds them
    twice (:mod:`pytfrt.compiler.frontends.onnx_load`); otherwise :func:`load_model`'s
    ModelProto and no weights.  A file the scanner cannot walk, or one old enough to need
    ONNX's version converter (which wants the initializers in the model), is read by
    :func:`load_model`."""
    if isinstance(model_or_path, str | os.PathLike) and Path(model_or_path).is_file():
        from google.protobuf.message import DecodeError

        from pytfrt.compiler.frontends.onnx_load import WireError, load_split

        origin = str(Path(model_or_path))
        try:
            model, weights = load_split(model_or_path, origin)
        except OnnxImportError:
            raise
        except (WireError, DecodeError, OSError, ValueError):
            pass  # load_model reads it again and reports what is wrong with it
        else:
            if (model.graph.node or model.graph.output) and (
                    _default_opset(model) >= MIN_OPSET or not weights):
                return model, origin, weights
    model, origin = load_model(model_or_path)
    return model, origin, {}
