"""Run an ONNX model whose shapes or attribute-like operands are known only when it is called.

:class:`SpecializingModel` compiles an ONNX model on first call with the call's input shapes
fixed, and keeps one :class:`~pytfrt.model.CompiledModel` per input signature.  When the
importer refuses a node because an operand the graph dialect takes as an attribute (axes,
``k``, pads, scales, a target shape...) is a run-time value computed from graph inputs, those
graph inputs (small ones: at most :data:`MAX_SPECIALISED` elements) are *specialised on*: the
model is imported again with their values fixed (``import_onnx(input_values=...)``), and the
compiled model is cached per value.  So a model is only refused (``UnsupportedOpError``) when
the operator itself, or a large run-time operand, cannot be expressed.

Thread-safety: calls may come from several threads; compiling is serialised by a lock, running
a cached model is not.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytfrt.compiler.errors import UnsupportedOpError

MAX_SPECIALISED = 4096
"""Largest graph input (in elements) whose value a model is specialised on."""

MAX_VARIANTS = 64
"""Compiled variants kept per model (the oldest is dropped beyond this)."""


class SpecializingModel:
    """An ONNX ``ModelProto`` compiled per call signature (see the module docstring).

    ``model(args)`` takes the graph inputs (initializers excluded) in order and returns the
    graph outputs as a list in graph-output order.

    Raises (on call): ``UnsupportedOpError`` for what the importer cannot express,
    ``pytfrt.model.InputError`` / ``ModelError`` for bad inputs or failing kernels,
    ``ValueError`` for a wrong number of inputs.
    """

    def __init__(self, model: Any, host: Any = None) -> None:
        from pytfrt.compiler.frontends.onnx import _upgrade, load_model

        self.host = host  # where the compiled models run (None: pytfrt.model.default_host())
        proto, origin = load_model(model)
        self.model = _upgrade(proto, origin)
        self.origin = origin
        graph = self.model.graph
        inits = {i.name for i in graph.initializer}
        self.input_names = [i.name for i in graph.input if i.name not in inits]
        self.output_names = [o.name for o in graph.output]
        self._producers = {o: n for n in graph.node for o in n.output if o}
        self._specialised: set[str] = set()
        self._cache: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        if len(args) != len(self.input_names):
            raise ValueError(
                f"{self.origin}: the model takes {len(self.input_names)} inputs "
                f"({', '.join(self.input_names)}), got {len(args)}"
            )
        for name, a in zip(self.input_names, args, strict=True):
            if a is None or isinstance(a, list | tuple | dict):
                raise UnsupportedOpError(
                    f"input value of type {type(a).__name__}", name, self.origin,
                    "only tensor inputs are supported (no sequences, optionals or maps)")
        arrays = [np.asarray(a) for a in args]
        compiled, baked = self._compiled(arrays)
        feed = [a for n, a in zip(self.input_names, arrays, strict=True) if n not in baked]
        out = compiled(*feed)
        structure = compiled.signature.structure
        if structure == "single":
            return [out]
        if structure == "dict":
            return [out[n] for n in self.output_names]
        return list(out)

    def _key(self, arrays: list[np.ndarray], baked: frozenset[str]) -> Any:
        parts: list[Any] = []
        for n, a in zip(self.input_names, arrays, strict=True):
            parts.append((a.shape, a.dtype.str, a.tobytes() if n in baked else None))
        return baked, tuple(parts)

    def _compiled(self, arrays: list[np.ndarray]) -> tuple[Any, frozenset[str]]:
        baked = frozenset(self._specialised)
        hit = self._cache.get(self._key(arrays, baked))
        if hit is not None:
            return hit, baked
        with self._lock:
            while True:
                baked = frozenset(self._specialised)
                key = self._key(arrays, baked)
                hit = self._cache.get(key)
                if hit is not None:
                    return hit, baked
                try:
                    compiled = self._compile(arrays, baked)
                except UnsupportedOpError as exc:
                    more = self._to_specialise(exc, arrays)
                    if not more:
                        raise
                    self._specialised |= more
                    self._cache.clear()
                    continue
                if len(self._cache) >= MAX_VARIANTS:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = compiled
                return compiled, baked

    def _compile(self, arrays: list[np.ndarray], baked: frozenset[str]) -> Any:
        from pytfrt.compiler.api import compile_module
        from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter

        declared = {i.name: len(i.type.tensor_type.shape.dim) for i in self.model.graph.input
                    if i.type.tensor_type.HasField("shape")}
        # the call's shapes, where the model declares that rank (else its declaration stands
        # and the call is checked against it)
        shapes = {n: a.shape for n, a in zip(self.input_names, arrays, strict=True)
                  if n not in baked and declared.get(n, a.ndim) == a.ndim}
        values = {n: a for n, a in zip(self.input_names, arrays, strict=True) if n in baked}
        gm = OnnxGraphImporter(self.model, self.origin).run(shapes, values)
        return compile_module(gm, host=self.host)

    def _to_specialise(self, exc: UnsupportedOpError, arrays: list[np.ndarray]) -> set[str]:
        """The graph inputs feeding the refused node's run-time operands (small ones only)."""
        wanted = getattr(exc, "runtime_operands", None) or []
        sizes = {n: a.size for n, a in zip(self.input_names, arrays, strict=True)}
        found: set[str] = set()
        seen: set[str] = set()
        stack = list(wanted)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in sizes:
                found.add(name)
                continue
            node = self._producers.get(name)
            if node is not None:
                stack.extend(n for n in node.input if n)
        found -= self._specialised
        if not found or any(sizes[n] > MAX_SPECIALISED for n in found):
            return set()
        return found
