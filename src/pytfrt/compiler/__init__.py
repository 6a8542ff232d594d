"""The compiler: the graph dialect ``tg``, its op catalogue, GraphBuilder, passes, lowering.

See ``docs/graph_dialect.md`` (the contract) and ``docs/compiler.md`` (the pipeline).
Public names are imported lazily (importing this package loads neither xDSL nor NumPy):

* :func:`compile` -- a TF function / Keras model / SavedModel dir / ONNX model / GraphModule
  -> :class:`pytfrt.model.CompiledModel`; :func:`fingerprint` -- a digest of the compiler
  (keys caches of compiled models);
* :class:`GraphBuilder`, :class:`FunctionBuilder`, :class:`Value`, :class:`GraphModule`;
* :class:`Signature`, :class:`TensorSpec`; :class:`GraphError`, :class:`UnsupportedOpError`.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "compile": "pytfrt.compiler.api",
    "compile_module": "pytfrt.compiler.api",
    "fingerprint": "pytfrt.compiler.api",
    "GraphBuilder": "pytfrt.compiler.builder",
    "FunctionBuilder": "pytfrt.compiler.builder",
    "Value": "pytfrt.compiler.builder",
    "GraphModule": "pytfrt.compiler.builder",
    "Signature": "pytfrt.signature",
    "TensorSpec": "pytfrt.signature",
    "GraphError": "pytfrt.compiler.errors",
    "UnsupportedOpError": "pytfrt.compiler.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytfrt.compiler' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = list(_LAZY)
