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
from pytfrt.compiler.frontends.onnx_mapping import EMPTY_OUTPUT, optional_element

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
        self._optionals = {i.name for i in graph.input if i.type.HasField("optional_type")}
        self._sequences = {i.name for i in graph.input
                           if optional_element(i).type.HasField("sequence_type")}
        self._producers = {o: n for n in _all_nodes(graph) for o in n.output if o}
        self._specialised: set[str] = set()
        self._cache: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        if len(args) != len(self.input_names):
            raise ValueError(
                f"{self.origin}: the model takes {len(self.input_names)} inputs "
                f"({', '.join(self.input_names)}), got {len(args)}"
            )
        arrays: list[Any] = []
        for name, a in zip(self.input_names, args, strict=True):
            if name in self._sequences and isinstance(a, list | tuple):
                arrays.append([np.asarray(e) for e in a])  # one argument per element
            elif a is None and name in self._optionals:
                arrays.append(None)  # an empty optional: imported as such, no argument
            elif a is None or isinstance(a, list | tuple | dict):
                raise UnsupportedOpError(
                    f"input value of type {type(a).__name__}", name, self.origin,
                    "only tensor and sequence inputs are supported (no optionals or maps)")
            else:
                arrays.append(np.asarray(a))
        (compiled, layout), baked = self._compiled(arrays)
        feed: list[np.ndarray] = []
        for n, a in zip(self.input_names, arrays, strict=True):
            if isinstance(a, list):
                feed += a
            elif a is not None and n not in baked:
                feed.append(a)
        out = compiled(*feed)
        structure = compiled.signature.structure
        if structure == "single":
            flat = [out]
        elif structure == "dict":
            flat = list(out.values())
        else:
            flat = list(out)
        results: list[Any] = []
        for _, count in layout:  # regroup the elements of sequence outputs
            if count is None:
                results.append(flat.pop(0))
            elif count == EMPTY_OUTPUT:
                results.append(None)
            else:
                results.append([np.asarray(flat.pop(0)) for _ in range(count)])
        return results

    def _key(self, arrays: list[Any], baked: frozenset[str]) -> Any:
        parts: list[Any] = []
        for n, a in zip(self.input_names, arrays, strict=True):
            if a is None:
                parts.append(None)
            elif isinstance(a, list):
                parts.append(tuple((e.shape, e.dtype.str) for e in a))
            else:
                parts.append((a.shape, a.dtype.str, a.tobytes() if n in baked else None))
        return baked, tuple(parts)

    def _compiled(self, arrays: list[Any]) -> tuple[Any, frozenset[str]]:
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

    def _compile(self, arrays: list[Any], baked: frozenset[str]) -> Any:
        """``(compiled model, output layout)`` for this signature (see
        :attr:`OnnxGraphImporter.output_layout`)."""
        from pytfrt.compiler.api import compile_module
        from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter

        elements = [optional_element(i) for i in self.model.graph.input]
        declared = {i.name: len(i.type.tensor_type.shape.dim) for i in elements
                    if i.type.tensor_type.HasField("shape")}
        # the call's shapes, where the model declares that rank (else its declaration stands
        # and the call is checked against it)
        tensors = [(n, a) for n, a in zip(self.input_names, arrays, strict=True)
                   if not isinstance(a, list) and a is not None]
        shapes = {n: a.shape for n, a in tensors
                  if n not in baked and declared.get(n, a.ndim) == a.ndim}
        values = {n: a for n, a in tensors if n in baked}
        seqs = {n: [(e.shape, e.dtype) for e in a]
                for n, a in zip(self.input_names, arrays, strict=True) if isinstance(a, list)}
        empty = [n for n, a in zip(self.input_names, arrays, strict=True) if a is None]
        imp = OnnxGraphImporter(self.model, self.origin)
        gm = imp.run(shapes, values, seqs, empty)
        return compile_module(gm, host=self.host), list(imp.output_layout)

    def _to_specialise(self, exc: UnsupportedOpError, arrays: list[Any]) -> set[str]:
        """The graph inputs feeding the refused node's run-time operands (small ones only;
        never a sequence)."""
        wanted = getattr(exc, "runtime_operands", None) or []
        sizes = {n: (a.size if isinstance(a, np.ndarray) else MAX_SPECIALISED + 1)
                 for n, a in zip(self.input_names, arrays, strict=True)}
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
        # integer inputs first (sizes, axes, shapes): often they alone fix what the importer
        # needs; a float input is specialised on only if the next attempt still asks for it
        ints = {n for n in found
                for a in [arrays[self.input_names.index(n)]] if a.dtype.kind in "iub"}
        return ints or found


def _all_nodes(graph: Any) -> list[Any]:
    """``graph``'s nodes and those of every subgraph (``If`` branches, ``Loop``/``Scan``
    bodies), whose outputs the importer may bind in the outer scope."""
    from pytfrt.compiler.frontends.onnx_proto import AttributeProto

    out = []
    for node in graph.node:
        out.append(node)
        for a in node.attribute:
            if a.type == AttributeProto.GRAPH:
                out += _all_nodes(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    out += _all_nodes(g)
    return out
