"""ONNX's protobuf classes without importing the ``onnx`` package, and the few helpers the
ONNX front end needs on its common path.

``import onnx`` registers every operator schema of its C++ extension at import time (about
15 MB of resident memory, ``docs/benchmarks.md``); reading and importing a model needs only
the protobuf message classes, which ONNX generates into ``onnx/onnx_ml_pb2.py``.  This module
executes that one generated file (found through the installed ``onnx``'s package directory,
without running ``onnx/__init__.py``) under a name of its own, :data:`PB2_NAME`; when ``onnx``
is already imported it uses ``onnx``'s own module instead.  Either way the classes are the
protobuf runtime's classes of the descriptors ``onnx/onnx-ml.proto`` registers in the default
descriptor pool, so they are the very classes ``onnx`` exposes (``onnx.ModelProto is
onnx_proto.ModelProto``, also when ``onnx`` is imported later): a user's ``onnx.ModelProto``
is accepted as is and models made here are ``onnx``'s.

Helpers, each equal to ``onnx``'s own for what the front end meets and deferring to ``onnx``
(imported then) for the rest:

* :func:`to_array` -- ``onnx.numpy_helper.to_array`` (raw and typed fields of the fixed-width
  numeric types here; strings, external data, packed 4-/2-bit, float8, complex by ``onnx``);
* :func:`np_dtype` -- ``onnx.helper.tensor_dtype_to_np_dtype``;
* :func:`attribute_value` -- ``onnx.helper.get_attribute_value``;
* :func:`make_node` -- ``onnx.helper.make_node`` for attributes of Python scalars, strings
  and lists of them;
* :func:`load_external_data` -- ``onnx.external_data_helper.load_external_data_for_model``,
  importing ``onnx`` only when some tensor of the model has external data.

What still imports ``onnx`` (lazily, where it runs): the version converter (opsets older than
:data:`~pytfrt.compiler.frontends.onnx_common.MIN_OPSET`), the expansion of ops defined as
ONNX functions, import-time evaluation of a node pytfrt has no handler for, or whose handler
cannot take its constant inputs (``onnx.reference``; every other node is folded through
pytfrt's own ops, :mod:`~pytfrt.compiler.frontends.onnx_mapping`), ``onnx.defs`` for an opset above
:data:`ONNX_KNOWN_OPSET`, a model file in a text format (``onnx.load``), and the helpers
above for what they leave to ``onnx``.

Thread-safety: the module is loaded once at import (under the import lock); the helpers are
pure functions.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import numpy as np

PB2_NAME = "pytfrt._onnx_ml_pb2"
"""The module name ``onnx/onnx_ml_pb2.py`` is executed under when ``onnx`` is not imported."""

ONNX_KNOWN_OPSET = 20
"""The newest default-domain opset every ``onnx`` pytfrt supports knows (onnx >= 1.15,
``pyproject.toml``): a model at or below it needs no question to ``onnx.defs``."""


def _load_pb2() -> ModuleType:
    """``onnx``'s generated ``onnx_ml_pb2`` module (see the module docstring)."""
    own = sys.modules.get("onnx.onnx_ml_pb2")
    if own is not None:
        return own
    loaded = sys.modules.get(PB2_NAME)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("onnx")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the ONNX front end needs the onnx package: pip install 'pytfrt[onnx]'")
    path = f"{next(iter(spec.submodule_search_locations))}/onnx_ml_pb2.py"
    pb2_spec = importlib.util.spec_from_file_location(PB2_NAME, path)
    if pb2_spec is None or pb2_spec.loader is None:  # pragma: no cover - a broken install
        import onnx.onnx_ml_pb2 as fallback

        return fallback
    module = importlib.util.module_from_spec(pb2_spec)
    sys.modules[PB2_NAME] = module
    try:
        pb2_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[PB2_NAME]
        raise
    return module


pb2 = _load_pb2()
ModelProto: Any = pb2.ModelProto
GraphProto: Any = pb2.GraphProto
NodeProto: Any = pb2.NodeProto
TensorProto: Any = pb2.TensorProto
AttributeProto: Any = pb2.AttributeProto
ValueInfoProto: Any = pb2.ValueInfoProto
FunctionProto: Any = pb2.FunctionProto
TypeProto: Any = pb2.TypeProto


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

# the fixed-width element types read here: the front end's element-type table (bf16 resolved
# to ml_dtypes.bfloat16, as onnx's, on first use only)
FIXED_TYPES = frozenset(t for t, name in _ONNX_DTYPES.items() if name != "string")
"""The ONNX element types of fixed width :func:`to_array` and :func:`np_dtype` read
themselves (bf16 as ``ml_dtypes.bfloat16``, as ``onnx``)."""
_BITS16 = frozenset({TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT16,
                     TensorProto.UINT16})
_FIELD = {
    TensorProto.FLOAT: ("float_data", np.float32),
    TensorProto.INT64: ("int64_data", np.int64),
    TensorProto.DOUBLE: ("double_data", np.float64),
    TensorProto.UINT32: ("uint64_data", np.uint64),
    TensorProto.UINT64: ("uint64_data", np.uint64),
}


def np_dtype(data_type: int) -> np.dtype[Any]:
    """The NumPy dtype of ONNX element type ``data_type`` (``onnx.helper``'s for the others;
    ``KeyError`` for an unknown type, as there)."""
    if data_type in FIXED_TYPES:
        from pytfrt.compiler.types import np_dtype as tg_np_dtype

        return np.dtype(tg_np_dtype(_ONNX_DTYPES[data_type]))
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(data_type))


def to_array(tensor: Any, base_dir: str = "") -> np.ndarray:
    """The array of ``TensorProto`` ``tensor``: what ``onnx.numpy_helper.to_array`` returns
    (a read-only view of ``raw_data``, or a new array of a typed field), and its errors."""
    if (tensor.data_type not in FIXED_TYPES or sys.byteorder != "little"
            or tensor.data_location == TensorProto.EXTERNAL or tensor.HasField("segment")):
        from onnx import numpy_helper

        return numpy_helper.to_array(tensor, base_dir)
    dt, dims = np_dtype(tensor.data_type), tuple(tensor.dims)
    if tensor.HasField("raw_data"):
        return np.frombuffer(tensor.raw_data, dtype=dt).reshape(dims)
    if tensor.data_type in _BITS16:
        bits = np.array(tensor.int32_data, dtype=np.int32).view(np.uint32).astype(np.uint16)
        return bits.reshape(dims).view(dt)
    if tensor.data_type == TensorProto.BOOL:
        data = np.array(tensor.int32_data, dtype=np.int32).view(np.uint32).astype(np.uint8)
        return data.view(dt).reshape(dims)
    field, storage = _FIELD.get(tensor.data_type, ("int32_data", np.int32))
    return np.asarray(getattr(tensor, field), dtype=storage).astype(dt).reshape(dims)


_VALUE_FIELDS = {
    AttributeProto.FLOAT: "f", AttributeProto.INT: "i", AttributeProto.STRING: "s",
    AttributeProto.TENSOR: "t", AttributeProto.SPARSE_TENSOR: "sparse_tensor",
    AttributeProto.GRAPH: "g", AttributeProto.TYPE_PROTO: "tp",
}
_LIST_FIELDS = {
    AttributeProto.FLOATS: "floats", AttributeProto.INTS: "ints",
    AttributeProto.STRINGS: "strings", AttributeProto.TENSORS: "tensors",
    AttributeProto.SPARSE_TENSORS: "sparse_tensors", AttributeProto.GRAPHS: "graphs",
    AttributeProto.TYPE_PROTOS: "type_protos",
}


def attribute_value(attr: Any) -> Any:
    """The value of ``AttributeProto`` ``attr``, as ``onnx.helper.get_attribute_value``
    (``ValueError`` for a reference attribute or an unknown type; ``None`` if undefined)."""
    if attr.ref_attr_name:
        raise ValueError(f"Cannot get value of reference attribute: {attr}")
    field = _VALUE_FIELDS.get(attr.type)
    if field is not None:
        return getattr(attr, field)
    field = _LIST_FIELDS.get(attr.type)
    if field is not None:
        return list(getattr(attr, field))
    if attr.type == AttributeProto.UNDEFINED:
        return None
    raise ValueError(f"Unsupported ONNX attribute: {attr}")


def _attribute(name: str, value: Any) -> Any:
    """An ``AttributeProto`` of a Python scalar, string or list of one kind of them (what
    ``onnx.helper.make_attribute`` makes; ``onnx``'s for other values)."""
    attr = AttributeProto(name=name)
    items = value if isinstance(value, list | tuple) else None
    kinds = {type(v) for v in items} if items is not None else {type(value)}
    if items is not None and items and kinds <= {int, bool}:
        attr.ints.extend(int(v) for v in items)
        attr.type = AttributeProto.INTS
    elif items is not None and items and kinds <= {int, float} and float in kinds:
        attr.floats.extend(float(v) for v in items)
        attr.type = AttributeProto.FLOATS
    elif items is not None and items and kinds <= {str, bytes}:
        attr.strings.extend(v.encode() if isinstance(v, str) else v for v in items)
        attr.type = AttributeProto.STRINGS
    elif items is None and kinds <= {int, bool}:
        attr.i, attr.type = int(value), AttributeProto.INT
    elif items is None and kinds == {float}:
        attr.f, attr.type = value, AttributeProto.FLOAT
    elif items is None and kinds <= {str, bytes}:
        attr.s = value.encode() if isinstance(value, str) else value
        attr.type = AttributeProto.STRING
    else:
        from onnx import helper

        return helper.make_attribute(name, value)
    return attr


def make_node(op_type: str, inputs: Sequence[str], outputs: Sequence[str],
              name: str | None = None, domain: str | None = None, **attrs: Any) -> Any:
    """A ``NodeProto``, as ``onnx.helper.make_node`` (attributes sorted by name; ``None``
    values left out)."""
    node = NodeProto(op_type=op_type, input=list(inputs), output=list(outputs))
    if name:
        node.name = name
    if domain is not None:
        node.domain = domain
    node.attribute.extend(_attribute(k, v) for k, v in sorted(attrs.items()) if v is not None)
    return node


def _graph_tensors(graph: Any) -> Iterator[Any]:
    """Every ``TensorProto`` of ``graph``: initializers and node attributes, subgraphs
    included (the tensors ``onnx.external_data_helper`` loads)."""
    yield from graph.initializer
    for node in graph.node:
        yield from _attribute_tensors(node.attribute)


def _attribute_tensors(attributes: Any) -> Iterator[Any]:
    for a in attributes:
        if a.HasField("t"):
            yield a.t
        yield from a.tensors
        if a.type == AttributeProto.GRAPH:
            yield from _graph_tensors(a.g)
        for g in a.graphs:
            yield from _graph_tensors(g)


def load_external_data(model: Any, base_dir: str) -> None:
    """Load the external data of ``model``'s tensors from ``base_dir`` into the model (what
    ``onnx.external_data_helper.load_external_data_for_model`` does; ``onnx`` is imported
    only when a tensor has external data)."""
    functions = (t for f in model.functions for n in f.node
                 for t in _attribute_tensors(n.attribute))
    for t in itertools.chain(_graph_tensors(model.graph), functions):
        if t.data_location == TensorProto.EXTERNAL:
            from onnx import external_data_helper

            external_data_helper.load_external_data_for_model(model, base_dir)
            return
