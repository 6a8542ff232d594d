"""The TensorFlow front end: ``tf.function``, Keras models and SavedModels -> a ``GraphModule``.

:func:`import_tf` gets a concrete function out of what it is given, then translates its graph
(and the function library its control flow uses) node by node into the graph dialect
(:mod:`.tf_graph`; the op mapping table is :data:`.tf_registry.TF_OPS`, documented in
``docs/ops.md``):

* a ``tf.function`` with an input signature (or given one), or a concrete function;
* a Keras model (Keras 3): called with ``training=False`` on its inputs' specs;
* a SavedModel directory: its ``serving_default`` signature (``signature=`` picks another);
* a ``.keras`` (or ``.h5``) file: loaded with ``keras.models.load_model``.

Dynamic dimensions of the input specs (a ``None`` batch) stay dynamic, so one compiled model
serves any batch size. Outputs keep TF's structure: a single tensor, a tuple/list, or a dict
with TF's names (nested structures are flattened; their names are the ``/``-joined paths).
Variables are frozen into weights unless the function writes one (a training step): then they
all become the model's variables (``CompiledModel.variables``), named as TF names them
(``sequential/dense/kernel``).

TensorFlow is imported lazily here only. Errors: ``UnsupportedOpError`` for an op (or an
attribute of one) the dialect cannot express, naming the op type, the node and the Python
frame or file it came from; ``ValueError`` for an object that is none of the above.
Not thread-safe per call (each call builds its own module).
"""

from __future__ import annotations

import linecache
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytfrt.compiler.builder import GraphBuilder, GraphModule
from pytfrt.compiler.errors import UnsupportedOpError
from pytfrt.compiler.frontends.tf_graph import (
    FunctionContext,
    GraphImporter,
    LibraryGraph,
    is_library_frame,
)
from pytfrt.compiler.frontends.tf_registry import load_all
from pytfrt.compiler.frontends.tf_values import TV, OtherResource, ResourceRef, tf_dtype_name


def _tf() -> Any:
    from pytfrt.compiler.frontends.tf_import import tensorflow

    return tensorflow()


@dataclass
class _Source:
    """A concrete function to import and how to present its inputs and outputs."""

    cf: Any
    description: str
    input_names: list[str] | None = None
    keep_alive: list[Any] = field(default_factory=list)


def import_tf(
    obj: Any, input_signature: Any = None, *, signature: str | None = None
) -> GraphModule:
    """Import a TF program into the graph dialect.

    Args:
        obj: a ``tf.function``, a concrete function, a Keras model, a SavedModel directory
            or a ``.keras``/``.h5`` file path.
        input_signature: a list of ``tf.TensorSpec`` for a ``tf.function`` without one, or
            to override a Keras model's input shapes.
        signature: the SavedModel signature to import (default ``serving_default``).

    Returns:
        The module, with ``@main`` taking the function's inputs in order.

    Raises:
        ValueError: ``obj`` is not something this front end imports, or needs a signature.
        pytfrt.compiler.UnsupportedOpError: an op the graph dialect cannot express.
    """
    src = _source(obj, input_signature, signature)
    load_all()
    try:
        return _import_concrete(src)
    except UnsupportedOpError as exc:
        named = with_keras_layer(exc, obj) if _is_keras_model(obj) else exc
        if named is exc:
            raise
        raise named from exc


def with_keras_layer(exc: UnsupportedOpError, model: Any, more: str = "") -> UnsupportedOpError:
    """``exc`` told in the terms of Keras ``model``: the layer whose name scope made its node,
    and the line of the user's source that created that layer, or ``exc`` itself when no
    layer is found.  ``more`` is added to the detail (what else can run the model)."""
    layer = _keras_layer_of(model, exc.node)
    if layer is None:
        return exc
    made_by = f"made by Keras layer '{layer.name}' ({type(layer).__name__})"
    callers = _user_frames()
    built_at = _layer_built_at(layer, [f for f, _ in callers] + [exc.where.rpartition(":")[0]])
    where = exc.where
    # A functional or Sequential model is re-traced inside pytfrt, so the op's first user
    # frame is the call into pytfrt (compile, fit): the layer's line says more.
    if built_at and where in {f"{f}:{n}" for f, n in callers}:
        where = built_at
    if built_at:
        made_by += ", created on that line" if where == built_at else f", created at {built_at}"
    detail = "; ".join(d for d in (made_by, exc.detail, more) if d)
    return UnsupportedOpError(exc.op_type, exc.node, where, detail)


def _keras_layer_of(model: Any, node: str) -> Any:
    """The layer of ``model`` whose name scope made the TF node ``node``, if one is found.

    Node names hold the scopes of the layers that made them (``functional_1/conv3d_1/op``);
    TensorFlow may add a ``_N`` suffix to a scope that Keras's layer name does not have.
    """
    try:
        layers = {layer.name: layer for layer in model._flatten_layers(include_self=False)}
    except (AttributeError, TypeError):
        return None
    for scope in reversed(node.split("/")[:-1]):
        for name in (scope, re.sub(r"_\d+$", "", scope)):
            if name in layers:
                return layers[name]
    return None


def _user_frames() -> list[tuple[str, int]]:
    """``(file, line)`` of the current call stack's frames outside pytfrt, TF and Keras."""
    frames = []
    frame: Any = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not is_library_frame(name):
            frames.append((name, frame.f_lineno))
        frame = frame.f_back
    return frames


def _layer_built_at(layer: Any, files: list[str]) -> str:
    """``file:line`` where ``layer`` was created, found in the user's source ``files``, or "".

    Keras does not record where a layer was constructed, so this looks for the constructor
    call ``ClassName(`` in the files of the user's frames (the script or notebook cell that
    called ``pytfrt.compile``, the code that made the op). A call that passes the layer's own
    ``name=`` wins; otherwise a class constructed on one line only. Ambiguous: "".
    """
    cls = type(layer).__name__
    call = re.compile(rf"(?<![\w]){re.escape(cls)}\s*\(")
    named = re.compile(rf"""name\s*=\s*['"]{re.escape(layer.name)}['"]""")
    found: list[tuple[str, bool]] = []
    for file in dict.fromkeys(f for f in files if f):
        lines = linecache.getlines(file)
        for i, line in enumerate(lines):
            code = line.split("#", 1)[0]
            if not call.search(code) or code.lstrip().startswith("class "):
                continue
            # The call's arguments may run over the next lines: up to where its parentheses close.
            text, depth = "", 0
            for more in lines[i:i + 20]:
                text += more
                depth += more.count("(") - more.count(")")
                if depth <= 0:
                    break
            found.append((f"{file}:{i + 1}", bool(named.search(text))))
    by_name = [at for at, is_named in found if is_named]
    if len(by_name) == 1:
        return by_name[0]
    return found[0][0] if len(found) == 1 else ""


# -- getting a concrete function --------------------------------------------------------------


def _source(obj: Any, input_signature: Any, signature: str | None) -> _Source:
    if isinstance(obj, str | os.PathLike):
        return _source_path(os.fspath(obj), input_signature, signature)
    tf = _tf()
    if _is_keras_model(obj):
        return _source_keras(obj, input_signature, type(obj).__name__)
    if isinstance(obj, tf.types.experimental.ConcreteFunction):
        return _Source(obj, f"concrete function '{getattr(obj, 'name', '?')}'")
    if hasattr(obj, "get_concrete_function"):
        name = getattr(obj, "__name__", None) or getattr(
            getattr(obj, "python_function", None), "__name__", "?"
        )
        if input_signature is not None:
            cf = obj.get_concrete_function(*_specs(input_signature))
        elif getattr(obj, "input_signature", None) is not None:
            cf = obj.get_concrete_function()
        else:
            raise ValueError(
                f"tf.function '{name}' has no input_signature: "
                "pass input_signature=[tf.TensorSpec(...)]"
            )
        return _Source(cf, f"tf.function '{name}'")
    raise ValueError(
        f"cannot import a {type(obj).__name__}: expected a tf.function, a Keras model, a "
        "SavedModel directory or a .keras file"
    )


def _specs(input_signature: Any) -> list[Any]:
    tf = _tf()
    out = []
    for s in input_signature:
        if isinstance(s, tf.TensorSpec):
            out.append(s)
        elif isinstance(s, tuple) and len(s) == 2:
            out.append(tf.TensorSpec(s[0], s[1]))
        else:
            raise ValueError(f"input_signature entries must be tf.TensorSpec, got {s!r}")
    return out


def _is_keras_model(obj: Any) -> bool:
    try:
        import keras
    except ImportError:  # pragma: no cover - keras ships with TF 2.16+
        return False
    return isinstance(obj, keras.Model)


def _source_path(path: str, input_signature: Any, signature: str | None) -> _Source:
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, "saved_model.pb")):
            raise ValueError(f"{path}: not a SavedModel directory (no saved_model.pb)")
        tf = _tf()
        try:
            loaded = tf.saved_model.load(path)
        except Exception as exc:  # noqa: BLE001 - TF's own errors name no file
            raise ValueError(
                f"{path}: TensorFlow cannot load this SavedModel ({type(exc).__name__}: "
                f"{str(exc)[:300]}); it is damaged or from an incompatible TensorFlow: export "
                "it again with tf.saved_model.save"
            ) from None
        key = signature or "serving_default"
        sigs = loaded.signatures
        if key not in sigs:
            raise ValueError(
                f"{path}: no signature '{key}' (has: {', '.join(sorted(sigs)) or 'none'})"
            )
        cf = sigs[key]
        names = list(getattr(cf, "_arg_keywords", None) or [])
        return _Source(cf, f"SavedModel {path} signature '{key}'", names or None, [loaded])
    if path.endswith((".keras", ".h5")):
        if not os.path.exists(path):
            raise ValueError(f"{path}: no such file")
        _tf()
        import keras

        try:
            model = keras.models.load_model(path, compile=False)
        except Exception as exc:  # noqa: BLE001 - Keras says "File not found" for a bad zip
            raise ValueError(
                f"{path}: Keras cannot load this file ({type(exc).__name__}: {str(exc)[:300]}); "
                "it exists but is damaged or not a Keras model: save it again with "
                "model.save('model.keras')"
            ) from None
        return _source_keras(model, input_signature, path)
    raise ValueError(f"{path}: expected a SavedModel directory or a .keras/.h5 file")


def _source_keras(model: Any, input_signature: Any, where: str) -> _Source:
    tf = _tf()
    try:
        inputs = list(model.inputs)
    except (AttributeError, ValueError):
        inputs = []
    if input_signature is not None:
        specs = _specs(input_signature)
    elif inputs:
        specs = [tf.TensorSpec(t.shape, t.dtype) for t in inputs]
    else:
        raise ValueError(
            f"Keras model {where} is not built: pass input_signature=[tf.TensorSpec(...)]"
        )
    names = [_keras_input_name(t, i) for i, t in enumerate(inputs)] if inputs else None
    structure = getattr(model, "_inputs_struct", None)
    tf_nest = tf.nest

    def call(*xs: Any) -> Any:
        if structure is not None and not isinstance(structure, list | tuple):
            if isinstance(structure, dict):
                arg: Any = tf_nest.pack_sequence_as(structure, list(xs))
            else:
                arg = xs[0]
        elif len(xs) == 1:
            arg = xs[0]
        else:
            arg = list(xs)
        return model(arg, training=False)

    fn = tf.function(call, input_signature=specs, autograph=False)
    return _Source(fn.get_concrete_function(), f"Keras model {where}", names, [model])


def _keras_input_name(t: Any, i: int) -> str:
    name = getattr(t, "name", None) or f"input_{i}"
    return str(name).split(":")[0]


# -- importing ----------------------------------------------------------------------------


def _import_concrete(src: _Source) -> GraphModule:
    tf = _tf()
    cf = src.cf
    graph = cf.graph
    gd = graph.as_graph_def()
    library = {f.signature.name: f for f in gd.library.function}

    captures = list(zip(graph.external_captures, graph.internal_captures, strict=False))
    capture_names = {t.op.name for _, t in captures}
    arg_placeholders = [t for t in graph.inputs if t.op.name not in capture_names]

    variables, bound = _variables(tf, graph, captures)
    gb = GraphBuilder()
    imp = GraphImporter(gb, library, variables, keep_variables=False, source=src.description)
    imp.keep_variables = imp.any_side_effects(gd.node, state_only=True)

    names = _input_names(src, arg_placeholders)
    inputs = [
        (n, _shape(t.shape), tf_dtype_name(t.dtype))
        for n, t in zip(names, arg_placeholders, strict=True)
    ]
    fb = gb.function("main", inputs=inputs)
    cx = FunctionContext(imp, fb, src.description)
    bindings = [TV(v) for v in fb.arguments] + [bound[t.op.name] for _, t in captures]
    lg = LibraryGraph(
        "main",
        gd,
        [t.op.name for t in arg_placeholders] + [t.op.name for _, t in captures],
        [t.name for t in graph.outputs],
        graph,
    )
    outs = cx.translate(lg, bindings)
    out_names, structure = _output_structure(tf, cf, len(outs))
    for name in imp.variables:
        if imp.keep_variables:
            imp.declare_variable(name)
    vals = [cx.val(tv) for tv in outs]
    fb.returns(vals, names=out_names, structure=structure)
    return gb.finish()


def _shape(shape: Any) -> tuple[int | None, ...] | None:
    if shape.rank is None:
        return None
    return tuple(None if d is None else int(d) for d in shape.as_list())


def _input_names(src: _Source, placeholders: list[Any]) -> list[str]:
    if src.input_names is not None and len(src.input_names) == len(placeholders):
        names = list(src.input_names)
    else:
        names = []
        for t in placeholders:
            op = t.op
            user = (
                op.get_attr("_user_specified_name")
                if "_user_specified_name" in op.node_def.attr
                else None
            )
            names.append(user.decode() if isinstance(user, bytes) else (user or op.name))
    seen: set[str] = set()
    out = []
    for i, n in enumerate(names):
        n = n or f"input_{i}"
        while n in seen:
            n = f"{n}_{i}"
        seen.add(n)
        out.append(n)
    return out


def _variables(
    tf: Any, graph: Any, captures: list[tuple[Any, Any]]
) -> tuple[dict[str, np.ndarray], dict[str, TV]]:
    """Captured tensors -> bindings: resource handles to variables, eager tensors to constants."""
    by_handle: dict[int, Any] = {}
    for v in getattr(graph, "variables", ()) or ():
        handle = getattr(v, "handle", None)
        if handle is not None:
            by_handle[id(handle)] = v
    values: dict[str, np.ndarray] = {}
    bound: dict[str, TV] = {}
    for ext, internal in captures:
        if ext.dtype == tf.resource:
            var = by_handle.get(id(ext))
            if var is not None:
                name = _variable_name(var.name, values)
                values[name] = np.array(var.numpy())
            else:  # a bare handle (``v.handle`` passed to a raw op), or another resource
                value = _read_handle(tf, ext)
                if value is None:  # a lookup table...: its ops say whether they can use it
                    bound[internal.op.name] = TV(resource=OtherResource(internal.op.name, ext))
                    continue
                name = _variable_name(internal.op.name, values)
                values[name] = value
            bound[internal.op.name] = TV(resource=ResourceRef(name))
        else:
            bound[internal.op.name] = TV(const=np.asarray(ext.numpy()), name=internal.op.name)
    return values, bound


def _read_handle(tf: Any, handle: Any) -> np.ndarray | None:
    """The current value of the variable behind a captured resource handle (``None`` if the
    resource is not a variable)."""
    from tensorflow.python.ops import resource_variable_ops

    data = resource_variable_ops.get_eager_safe_handle_data(handle)
    if data is None or not data.is_set or not data.shape_and_type:
        return None
    dtype = tf.dtypes.as_dtype(data.shape_and_type[0].dtype)
    return np.array(tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype).numpy())


def _variable_name(name: str, taken: dict[str, Any]) -> str:
    base = name[:-2] if name.endswith(":0") else name
    out, i = base, 1
    while out in taken:
        out = f"{base}_{i}"
        i += 1
    return out


def _output_structure(tf: Any, cf: Any, n: int) -> tuple[list[str], str]:
    structured = cf.structured_outputs
    if isinstance(structured, dict):
        paths = _paths(structured)
        if len(paths) == n:
            return paths, "dict"
    elif isinstance(structured, list | tuple):
        flat = tf.nest.flatten(structured)
        if len(flat) == n and len(flat) == len(structured):
            return [f"output_{i}" for i in range(n)], "list" if isinstance(
                structured, list
            ) else "tuple"
        paths = _paths(structured)
        if len(flat) == n and len(paths) == n:  # nested: flattened, named by paths ("1/y")
            return paths, "tuple"
    elif n == 1:
        return ["output_0"], "single"
    return [f"output_{i}" for i in range(n)], "single" if n == 1 else "tuple"


def _paths(structure: Any, prefix: str = "") -> list[str]:
    """``/``-joined key paths of a nested structure's leaves, in ``tf.nest`` order (sorted keys)."""
    out: list[str] = []
    if isinstance(structure, dict):
        for k in sorted(structure):
            out += _paths(structure[k], f"{prefix}{k}/")
    elif isinstance(structure, list | tuple):
        for i, v in enumerate(structure):
            out += _paths(v, f"{prefix}{i}/")
    elif structure is not None:
        out.append(prefix[:-1])
    return out
