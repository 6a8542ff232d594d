"""The ONNX op mapping: one handler per ONNX op type, emitting ``tg`` catalogue ops.

:data:`ONNX_OPS` maps each supported ONNX op type (default domain, opsets 13 and later) to its
handler; ``docs/ops.md`` (section "ONNX") is generated from it by :func:`ops_markdown` (a test
checks that they agree).  A handler receives the :class:`OnnxGraphImporter` (the import state)
and the ``NodeProto``; it returns one entry per node output: a ``tg`` ``Value``, or a NumPy
array when the output is known at import time.

Import-time folding: a node whose inputs are all known (initializers, ``Constant`` nodes,
static shapes and what is computed from them) is imported by its handler like any other, and
the ``tg`` ops it emitted are evaluated on those constants by the runtime's compute functions
(:func:`pytfrt.compiler.passes.fold.evaluate`, shared with ``-tg-constant-fold``); its outputs
are bound as known arrays and the ops erased (:meth:`OnnxGraphImporter._fold_emitted`).  So
a value folded at import is the value the same op computes at run time.  ``onnx.reference``
(imported only then) evaluates the nodes without a handler (e.g. ``HannWindow``, otherwise
imported as its ONNX function body), those whose handler raises on these constants, and the
``Constant`` forms :func:`_constant` does not read (``sparse_value``, strings).  Random ops
and ``DequantizeLinear`` are never folded (``_NO_FOLD``), nor control flow.

Conventions: ONNX inputs that the catalogue takes as attributes (axes, perms, pads, ...) must be
known at import time (initializers, ``Constant`` nodes or static shape arithmetic); otherwise the
handler raises ``UnsupportedOpError`` saying which input must be constant.  Inputs that the
catalogue can take as tensors (``Reshape``'s shape, ``Slice``'s bounds, ``Tile``'s repeats,
``Expand``'s shape) use the attribute form when known and the tensor-operand form otherwise, so
dynamic shapes run at run time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from pytfrt.backends.cpu._geometry import same_pad
from pytfrt.compiler.errors import UnsupportedOpError
from pytfrt.compiler.frontends.onnx_common import (
    _NO_FOLD,
    FOLD_LIMIT,
    OnnxImportError,
    _default_opset,
    initializer_array,
    materialize,
    tg_dtype,
)
from pytfrt.compiler.frontends.onnx_patterns import fuse_patterns
from pytfrt.compiler.frontends.onnx_proto import _ONNX_DTYPES
from pytfrt.compiler.frontends.onnx_shapes import Partial, reshape_target
from pytfrt.compiler.frontends.onnx_shapes import infer as infer_partial

if TYPE_CHECKING:  # pragma: no cover
    import onnx

    from pytfrt.compiler.builder import FunctionBuilder, GraphModule, Value

Out = Any  # a tg Value, a NumPy array (known at import time), a SeqOut or EMPTY


class _EmptyOptional:
    """The type of :data:`EMPTY`."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _EmptyOptional()
"""An empty ONNX optional during import (``Optional`` without an input, or an optional graph
input called with ``None``).  A present optional is just its value (a tensor or SeqOut); a
name bound to EMPTY counts as an absent input for the ops that read it."""

EMPTY_OUTPUT = -1
"""The :attr:`OnnxGraphImporter.output_layout` count of a graph output that is an empty
optional (returned as ``None``)."""


class SeqOut(list):  # type: ignore[type-arg]
    """An ONNX sequence value during import: its elements (``tg`` Values or known arrays).

    Sequences exist only at import time: their length must be known then (a sequence graph
    input is specialised on its length by the backend, one function argument per element;
    a sequence graph output is returned as its elements, see
    :attr:`OnnxGraphImporter.output_layout`)."""

Handler = Callable[["OnnxGraphImporter", Any], list[Out]]

ONNX_OPS: dict[str, Handler] = {}
"""ONNX op type -> handler (the single source of the supported-op list)."""

_NOTES: dict[str, str] = {}
"""ONNX op type -> what the mapping emits / its limits (shown in ``docs/ops.md``)."""

MS_OPS: dict[str, Handler] = {}
"""``com.microsoft`` op type -> handler: the contrib ops ONNX Runtime's quantizer writes in
QOperator models (``QLinearAdd``, ``QGemm``...; filled by ``onnx_quant``)."""


def _is_known(out: Out) -> bool:
    """Whether a handler's output is known at import time (an array, an empty optional, or a
    sequence of arrays)."""
    if isinstance(out, SeqOut):
        return all(_is_known(e) for e in out)
    return out is EMPTY or isinstance(out, np.ndarray | np.generic)


def onnx_op(*op_types: str, note: str = "") -> Callable[[Handler], Handler]:
    """Register a handler for ``op_types`` (with a one-line note for the docs)."""

    def register(fn: Handler) -> Handler:
        for t in op_types:
            if t in ONNX_OPS:
                raise ValueError(f"ONNX op {t} mapped twice")
            ONNX_OPS[t] = fn
            if note:
                _NOTES[t] = note
        return fn

    return register


class OnnxGraphImporter:
    """The state of one import: ONNX value name -> ``tg`` Value or known array.

    Not thread-safe; one instance per import.
    """

    def __init__(self, model: onnx.ModelProto, origin: str,
                 weights: Mapping[str, np.ndarray] | None = None) -> None:
        self.model = model
        self.weights = dict(weights or {})
        """Initializers already read into arrays (:func:`onnx_load.load_split` takes them out
        of the ModelProto); they join the graph's own initializers."""
        self.origin = origin
        self.opset = _default_opset(model)
        self.graph = model.graph
        self.values: dict[str, Value] = {}
        self.known: dict[str, np.ndarray] = {}
        self.partial: dict[str, Partial] = {}
        self.fn: FunctionBuilder | None = None
        self.gb: Any = None
        self._const_names: set[str] = set()
        self._node: Any = None
        self._expanded = 0
        self.seqs: dict[str, SeqOut] = {}
        self.empties: set[str] = set()  # names bound to an empty optional
        self.output_layout: list[tuple[str, int | None]] = []
        """Per graph output: ``(name, None)`` for a tensor, ``(name, n)`` for a sequence
        returned as ``n`` results, ``(name, EMPTY_OUTPUT)`` for an empty optional (no result)
        (filled by :meth:`run`)."""

    # -- entry ------------------------------------------------------------------------------

    def run(self, input_shapes: Any = None, input_values: Any = None,
            sequence_inputs: Mapping[str, Sequence[tuple[Any, Any]]] | None = None,
            empty_inputs: Sequence[str] = ()) -> GraphModule:
        """Import the graph.  ``sequence_inputs``: per sequence-typed graph input, its
        elements' ``(shape, numpy dtype)`` (each element becomes an argument ``name#k``).
        An optional-typed graph input is imported as its element type (tensor or sequence),
        or, named in ``empty_inputs``, as an empty optional (no argument)."""
        from pytfrt.compiler.builder import GraphBuilder

        g = self.graph
        self._check_single_assignment()
        for init in g.initializer:
            self.known[init.name] = initializer_array(init, self.origin)
        self.known.update(self.weights)
        self.weights.clear()  # the arrays now live in ``known`` and, once used, in the graph
        for name, value in (input_values or {}).items():
            self.known[name] = np.asarray(value)
        for init in g.sparse_initializer:
            self._fail_graph(f"sparse initializer {init.values.name!r} is not supported")
        for o in g.output:
            kind = o.type.WhichOneof("value")
            if kind == "optional_type":
                kind = o.type.optional_type.elem_type.WhichOneof("value")
            if kind not in (None, "tensor_type", "sequence_type"):
                raise UnsupportedOpError(
                    f"graph output of type {kind}", o.name, self.origin,
                    "only tensors, sequences and optionals of them are supported (no maps)")
        self.empties |= set(empty_inputs)
        inputs = [optional_element(i) for i in g.input
                  if i.name not in self.known and i.name not in self.empties]
        seq_in = {i.name for i in inputs if i.type.HasField("sequence_type")}
        tensor_specs = iter(self._input_specs([i for i in inputs if i.name not in seq_in],
                                              input_shapes))
        specs: list[tuple[str, Any, str]] = []
        for i in inputs:
            if i.name not in seq_in:
                specs.append(next(tensor_specs))
                continue
            if sequence_inputs is None or i.name not in sequence_inputs:
                raise UnsupportedOpError(
                    "graph input of type sequence_type", i.name, self.origin,
                    "a sequence input is imported once its length is known (run the model "
                    "through pytfrt.onnx_backend, which specialises on it)")
            from pytfrt.compiler.types import dtype_name

            specs += [(f"{i.name}#{k}", tuple(shape), dtype_name(np.dtype(dt)))
                      for k, (shape, dt) in enumerate(sequence_inputs[i.name])]
        self.gb = gb = GraphBuilder()
        self.fn = fn = gb.function("main", inputs=specs)
        by_name = dict(zip((sp[0] for sp in specs), fn.arguments, strict=True))
        for i in inputs:
            if i.name in seq_in:
                self.seqs[i.name] = SeqOut(
                    by_name[f"{i.name}#{k}"] for k in range(len(sequence_inputs[i.name]))  # type: ignore[index]
                )
            else:
                self.values[i.name] = by_name[i.name]
        self.import_body([o.name for o in g.output], flatten_sequences=True)
        return gb.finish()

    def import_nodes(self) -> None:
        """Import this graph's nodes into ``self.fn`` (in order)."""
        for node in fuse_patterns(self.graph):
            self._import_node(node)

    def import_body(self, outputs: Sequence[str], flatten_sequences: bool = False) -> None:
        """Import this graph's nodes into ``self.fn`` and return ``outputs`` from it
        (``flatten_sequences``: a sequence output as its elements, ``name#k``)."""
        fn = self.f
        self.import_nodes()
        outs: list[Value] = []
        names: list[str] = []
        self.output_layout = []
        for name in outputs:
            if flatten_sequences and name in self.empties:
                self.output_layout.append((name, EMPTY_OUTPUT))
                continue
            if flatten_sequences and name in self.seqs:
                elems = self.seqs[name]
                self.output_layout.append((name, len(elems)))
                items = [(f"{name}#{k}", self.element(e, f"{name}#{k}"))
                         for k, e in enumerate(elems)]
            else:
                self.output_layout.append((name, None))
                items = [(name, self.value(name))]
            for n, v in items:
                if any(v is p for p in outs) or any(v is a for a in fn.arguments):
                    v = fn.op("identity", [v], loc=n)
                outs.append(v)
                names.append(n)
        fn.returns(outs, names=names)

    def element(self, e: Out, hint: str = "elem") -> Value:
        """A sequence element as a ``tg`` Value (a known array becomes a constant)."""
        return self.constant(e, hint) if isinstance(e, np.ndarray | np.generic) else e

    def sequence(self, node: Any, i: int) -> SeqOut:
        """Input ``i`` of ``node``, which must be a sequence known at import time."""
        name = node.input[i] if self.has(node, i) else ""
        if name not in self.seqs:
            self.unsupported(node, f"input {i} must be a sequence of a length known at import")
        return self.seqs[name]

    def child(self, graph: Any, fn: FunctionBuilder) -> OnnxGraphImporter:
        """An importer for subgraph ``graph`` (a control-flow body) building ``fn``.

        It sees the outer graph's import-time constants; outer runtime values must be bound
        to ``fn``'s arguments in ``child.values`` by the caller.
        """
        sub = OnnxGraphImporter(self.model, self.origin)
        sub.graph = graph
        sub.gb, sub.fn = self.gb, fn
        sub.known = dict(self.known)
        sub.partial = dict(self.partial)
        sub.seqs = dict(self.seqs)
        sub.empties = set(self.empties)
        sub._const_names = self._const_names
        for init in graph.initializer:
            sub.known[init.name] = initializer_array(init, self.origin)
        return sub

    def _input_specs(self, inputs: Sequence[Any], input_shapes: Any) -> list[tuple[str, Any, str]]:
        fixed: dict[str, Sequence[int | None]] = {}
        if input_shapes is not None:
            if isinstance(input_shapes, Mapping):
                fixed = dict(input_shapes)
                unknown = set(fixed) - {i.name for i in inputs}
                if unknown:
                    raise OnnxImportError(
                        f"{self.origin}: input_shapes names unknown inputs {sorted(unknown)}; "
                        f"the model's inputs: {[i.name for i in inputs]}"
                    )
            else:
                seq = list(input_shapes)
                if len(seq) != len(inputs):
                    raise OnnxImportError(
                        f"{self.origin}: {len(seq)} input shapes given for {len(inputs)} inputs"
                    )
                for i, s in zip(inputs, seq, strict=True):
                    fixed[i.name] = getattr(s, "shape", s)
        specs = []
        for i in inputs:
            tt = i.type.tensor_type
            if not i.type.HasField("tensor_type"):
                kind = i.type.WhichOneof("value") or "untyped"
                raise UnsupportedOpError(
                    f"graph input of type {kind}", i.name, self.origin,
                    "only tensor inputs are supported (no sequences, optionals or maps)")
            dtype = tg_dtype(tt.elem_type, where=f"{self.origin}: input {i.name!r}: ")
            shape: tuple[int | None, ...] | None
            if tt.HasField("shape"):
                shape = tuple(
                    d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim
                )
            else:
                shape = None
            if i.name in fixed:
                want = tuple(None if d is None else int(d) for d in fixed[i.name])
                if shape is not None:
                    if len(want) != len(shape):
                        raise OnnxImportError(
                            f"{self.origin}: input {i.name!r} has rank {len(shape)}, "
                            f"input_shapes gives {list(want)}"
                        )
                    for a, b in zip(shape, want, strict=True):
                        if a is not None and b is not None and a != b:
                            raise OnnxImportError(
                                f"{self.origin}: input {i.name!r} has shape {list(shape)}, "
                                f"input_shapes gives {list(want)}"
                            )
                    shape = tuple(
                        b if b is not None else a for a, b in zip(shape, want, strict=True)
                    )
                else:
                    shape = want
            specs.append((i.name, shape, dtype))
        return specs

    # -- per node ---------------------------------------------------------------------------

    def _import_node(self, node: Any) -> None:
        self._node = node
        domain = node.domain or ""
        if domain == "pytfrt" and node.op_type == "Silu":  # made by onnx_patterns.fuse_silu
            self._bind(node, [self.op("silu", [self.input(node, 0)])])
            return
        if domain not in ("", "ai.onnx") and f"{domain}.{node.op_type}" in ONNX_OPS:
            # ai.onnx.ml and ai.onnx.preview.training ops, registered as "<domain>.<op>"
            self._bind(node, ONNX_OPS[f"{domain}.{node.op_type}"](self, node))
            return
        if domain == "com.microsoft" and node.op_type in MS_OPS:
            self._bind(node, MS_OPS[node.op_type](self, node))
            return
        if domain not in ("", "ai.onnx"):
            if self._expand(node):  # an op of a known domain defined as a function
                return
            self.unsupported(node, f"custom domain {domain!r}")
        present = [n for n in node.input if n]
        foldable = bool(
            node.op_type not in _NO_FOLD
            and present
            and all(n in self.known for n in present)
            and sum(self.known[n].size for n in present) <= FOLD_LIMIT
            and node.op_type not in ("If", "Loop", "Scan")
        )
        if node.op_type not in ONNX_OPS and node.op_type not in _NO_FOLD and (
                foldable or not present):  # no handler: ONNX's reference implementation
            results = self._reference(node)
            if results is not None:
                self._bind(node, results)
                return
        partial = infer_partial(self, node)
        if not foldable and partial is not None and partial.known and len(node.output) == 1:
            self._bind(node, [partial.array()])  # a shape element computation, known now
            return
        handler = ONNX_OPS.get(node.op_type)
        if handler is None:
            if self._expand(node):
                return
            self.unsupported(node)
        mark, n_weights = self.f.block.last_op, len(self.gb.weights)
        try:
            outs = handler(self, node)
        except Exception as exc:
            if foldable:  # the handler cannot take these constants: evaluate the node itself
                results = self._reference(node)
                if results is not None:
                    self._bind(node, results)
                    return
            if (not isinstance(exc, UnsupportedOpError)
                    or getattr(exc, "runtime_operands", None) or not self._expand(node)):
                raise
            return
        if foldable:
            outs = self._fold_emitted(node, mark, n_weights, outs)
        self._bind(node, outs)
        if partial is not None and node.output[0] in self.values:
            self.partial[node.output[0]] = partial

    def _fold_emitted(self, node: Any, mark: Any, n_weights: int, outs: Sequence[Out]
                      ) -> list[Out]:
        """Import-time folding of ``node``, whose inputs are all known: evaluate the ``tg``
        ops its handler just emitted (after op ``mark`` of the block) with the runtime's
        compute functions (:func:`pytfrt.compiler.passes.fold.evaluate`, the evaluation of
        ``-tg-constant-fold``).  When every output comes out known, they are returned as
        arrays and the emitted ops are erased, with the weights added since the builder had
        ``n_weights`` that only they used; otherwise ``outs`` as they are (those ops run at
        run time)."""
        from pytfrt.compiler.passes.common import const_value

        block = self.f.block
        op = block.first_op if mark is None else mark.next_op
        emitted = []
        while op is not None:
            emitted.append(op)
            op = op.next_op
        known: dict[Any, np.ndarray] = {}
        table = None
        for op in emitted:
            if op.name == "tg.constant":
                continue  # read below, where an op uses it
            values = []
            for v in op.operands:
                arr = known.get(v)
                if arr is None:
                    arr = const_value(self.gb, v)
                if arr is None:
                    break
                values.append(arr)
            else:
                if table is None:
                    from pytfrt.backends.cpu.graph_kernels import graph_ops

                    table = graph_ops()
                from pytfrt.compiler.passes.fold import evaluate

                res = evaluate(op, values, table)
                if res is not None:
                    known.update(zip(op.results, res, strict=True))

        arrays = [self._as_known(o, known) for o in outs]
        if any(not _is_known(o) for o in arrays):
            return list(outs)
        inside = set(emitted)
        if all(u.operation in inside for op in emitted for r in op.results for u in r.uses):
            gone = {r for op in emitted for r in op.results}
            dropped = {getattr(op.attributes["weight"], "data", None) for op in emitted
                       if op.name == "tg.constant" and "weight" in op.attributes}
            for op in reversed(emitted):
                op.detach()
                op.erase()
            weights = self.gb.weights
            for name in list(itertools.islice(reversed(weights), len(weights) - n_weights)):
                if name in dropped:
                    del weights[name]
            for name in node.input:  # constants the handler made of the inputs
                v = self.values.get(name)
                if v is not None and v.ssa in gone:
                    del self.values[name]
        return arrays

    def _as_known(self, out: Out, known: Mapping[Any, np.ndarray]) -> Out:
        """A handler's output with each ``tg`` Value replaced by its array when it is a
        constant or in ``known`` (SSA value -> array: the ops folded by :meth:`_fold_emitted`).
        (A method, not a closure: a recursive closure is a reference cycle, which would keep
        the importer -- the model and its arrays -- alive until a garbage collection.)"""
        from pytfrt.compiler.passes.common import const_value

        if isinstance(out, SeqOut):
            return SeqOut(self._as_known(e, known) for e in out)
        if out is EMPTY or isinstance(out, np.ndarray | np.generic):
            return out
        arr = known.get(out.ssa)
        if arr is None:
            arr = out.const if out.const is not None else const_value(self.gb, out.ssa)
        return out if arr is None else arr

    def _expand(self, node: Any) -> bool:
        """Import ``node`` as its ONNX function body (the op's definition in terms of other
        ops, from its schema), if it has one; whether it did."""
        import onnx
        from onnx import helper
        from onnx.backend.test.case.node import function_expand_helper

        domain = node.domain or ""
        level = self.opset if domain in ("", "ai.onnx") else next(
            (int(o.version) for o in self.model.opset_import if o.domain == domain), 1)
        try:
            schema = onnx.defs.get_schema(node.op_type, level, domain)
        except (onnx.defs.SchemaError, TypeError):  # TypeError: a damaged name (not UTF-8)
            return False
        sch: Any = schema  # (the stubs lack the function accessors)
        plain = [v for v in sch.function_opset_versions if v <= level]
        dependent = [v for v in sch.context_dependent_function_opset_versions
                     if v <= level]
        if not plain and not dependent:
            return False
        version = max(plain + dependent)
        if version in dependent:
            types = []
            for name in node.input:
                dtype, shape = self._type_of(name) if name else ("f32", None)
                types.append(helper.make_tensor_type_proto(
                    _ONNX_OF_TG[dtype], None if shape is None else list(shape)
                ).SerializeToString())
            body = sch.get_context_dependent_function_with_opset_version(
                version, node.SerializeToString(), types)
        else:
            body = sch.get_function_with_opset_version(version)
        fn = onnx.FunctionProto()
        fn.ParseFromString(body)
        given = {a.name for a in node.attribute}
        defaults = [a for a in fn.attribute_proto if a.name not in given]
        given |= {a.name for a in defaults}
        for name, spec in schema.attributes.items():
            if name not in given and spec.default_value.name:
                defaults.append(spec.default_value)
        if defaults:  # the function's attribute defaults, for references to omitted ones
            full = onnx.NodeProto()
            full.CopyFrom(node)
            full.attribute.extend(defaults)
            node = full
        self._expanded += 1
        prefix = f"{node.op_type}_{self._expanded}_{node.output[0] if node.output else ''}/"
        nodes = function_expand_helper(node, fn, prefix)
        opset = next((int(o.version) for o in fn.opset_import if o.domain in ("", "ai.onnx")),
                     version)
        saved = self.opset
        self.opset = opset
        try:
            for sub in nodes:
                self._import_node(sub)
        except UnsupportedOpError as exc:
            if getattr(exc, "runtime_operands", None):
                # the body's names mean nothing outside it: the node's own run-time operands
                # are what a caller can specialise on
                exc.runtime_operands = [  # type: ignore[attr-defined]
                    n for n in node.input if n and n not in self.known]
            raise
        finally:
            self.opset = saved
        return True

    def _type_of(self, name: str) -> tuple[str, tuple[int | None, ...] | None]:
        if name in self.known:
            arr = self.known[name]
            from pytfrt.compiler.types import dtype_name

            return dtype_name(arr.dtype), tuple(arr.shape)
        v = self.value(name)
        return v.dtype, v.shape

    def _bind(self, node: Any, outs: Sequence[Out]) -> None:
        for name, out in zip(node.output, outs, strict=False):
            if not name:
                continue
            if out is EMPTY:
                self.empties.add(name)
                for table in (self.values, self.known, self.seqs):
                    table.pop(name, None)  # type: ignore[attr-defined]
            elif isinstance(out, SeqOut):
                self.empties.discard(name)
                self.seqs[name] = out
                self.values.pop(name, None)
                self.known.pop(name, None)
            elif isinstance(out, np.ndarray | np.generic):
                self.known[name] = np.asarray(out)
                self.values.pop(name, None)
            else:
                self.values[name] = out

    def _reference(self, node: Any) -> list[Any] | None:
        """``node`` run on its known inputs by ONNX's reference implementation
        (``onnx.reference``, imported here only), or ``None`` when it cannot be evaluated.

        Import-time folding goes through pytfrt's own ops (:meth:`_fold_emitted`); this is
        the fallback for a node without a handler in :data:`ONNX_OPS` (or an ONNX function
        body), for a node whose handler cannot import it with these constant inputs, and for
        the forms of ``Constant`` :func:`_constant` does not read itself."""
        from onnx.reference import ReferenceEvaluator

        try:
            ev = ReferenceEvaluator(node, opsets={"": self.opset})
            feeds = {n: self.known[n] for n in node.input if n}
            res = ev.run(None, feeds)
        except Exception:  # noqa: BLE001 - not foldable: left to run at run time
            return None
        return [SeqOut(np.asarray(e) for e in r) if isinstance(r, list) else np.asarray(r)
                for r in res]

    # -- helpers for handlers ---------------------------------------------------------------

    @property
    def f(self) -> FunctionBuilder:
        assert self.fn is not None
        return self.fn

    def has(self, node: Any, i: int) -> bool:
        """Whether optional input ``i`` is present (an empty optional value is not)."""
        return len(node.input) > i and bool(node.input[i]) and node.input[i] not in self.empties

    def known_input(self, node: Any, i: int) -> np.ndarray | None:
        """Input ``i``'s value if known at import time, else ``None``."""
        if not self.has(node, i):
            return None
        return self.known.get(node.input[i])

    def const_input(self, node: Any, i: int, what: str) -> np.ndarray:
        """Input ``i``'s value, which must be known at import time (else UnsupportedOpError)."""
        v = self.known_input(node, i)
        if v is None:
            self.unsupported(node, f"input {i} ({what}) must be a constant", [i])
        return v

    def input(self, node: Any, i: int) -> Value:
        """Input ``i`` as a ``tg`` Value (a known array becomes a ``tg.constant``)."""
        if not self.has(node, i):
            self.unsupported(node, f"missing input {i}")
        return self.value(node.input[i])

    def value(self, name: str) -> Value:
        v = self.values.get(name)
        if v is not None:
            return v
        if name in self.seqs and self._node is not None:
            self.unsupported(self._node, f"the sequence {name!r} where a tensor is expected")
        if name in self.known:
            v = self.constant(self.known[name], name)
            self.values[name] = v
            return v
        raise OnnxImportError(f"{self.origin}: value {name!r} is used before it is defined")

    def constant(self, array: Any, hint: str = "const") -> Value:
        """A ``tg.constant`` of ``array`` (unique name derived from ``hint``)."""
        name = hint
        k = 1
        while name in self._const_names:
            k += 1
            name = f"{hint}#{k}"
        self._const_names.add(name)
        return materialize(self.f, np.asarray(array), name)

    def scalar(self, value: float, like: Value, hint: str = "scalar") -> Value:
        """A rank-0 constant of ``like``'s element type."""
        return self.constant(np.asarray(value, dtype=_np_dtype(like.dtype)), hint)

    def op(self, name: str, operands: Sequence[Value], node: Any = None, **attrs: Any) -> Any:
        """Emit catalogue op ``name`` located at ``node`` (default: the node being imported)."""
        node = node if node is not None else self._node
        loc = (node.name or f"{node.op_type}:{node.output[0]}") if node is not None else None
        low = _low_precision(name, operands)
        if low is None:
            return self.f.op(name, list(operands), loc=loc, **attrs)
        # computed in f32 and rounded once at the end, as ONNX Runtime's CPU kernels do
        wide = [self.f.op("cast", [v], loc=loc, to="f32") if v.dtype == low else v
                for v in operands]
        res = self.f.op(name, wide, loc=loc, **attrs)
        if isinstance(res, list | tuple):
            return type(res)(self._narrow(r, low, loc) for r in res)
        return self._narrow(res, low, loc)

    def _narrow(self, v: Value, low: str, loc: Any) -> Value:
        return self.f.op("cast", [v], loc=loc, to=low) if v.dtype == "f32" else v

    def attrs(self, node: Any) -> dict[str, Any]:
        from pytfrt.compiler.frontends.onnx_proto import attribute_value

        if isinstance(node, _AttrNode):
            return dict(node.overrides)
        out = {}
        for a in node.attribute:
            v = attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode()
            out[a.name] = v
        return out

    def unsupported(self, node: Any, reason: str = "", operands: Sequence[int] = ()) -> NoReturn:
        """Raise ``UnsupportedOpError`` for ``node``; ``operands``: the input indices that
        would have to be known at import time for the node to be imported."""
        from pytfrt.compiler.errors import UnsupportedOpError

        name = node.name or (node.output[0] if node.output else "")
        op_type = node.op_type if not node.domain else f"{node.domain}.{node.op_type}"
        err = UnsupportedOpError(op_type, name, self.origin, reason)
        # operands known only at run time that the node needs as constants: a caller that has
        # their values can import again with them fixed (frontends.onnx_specialize)
        err.runtime_operands = [  # type: ignore[attr-defined]
            node.input[i] for i in operands
            if i < len(node.input) and node.input[i] and node.input[i] not in self.known
        ]
        raise err

    def _fail_graph(self, message: str) -> NoReturn:
        raise OnnxImportError(f"{self.origin}: {message}")

    def _check_single_assignment(self) -> None:
        """Each value of the graph is defined once -- a graph input or an initializer (a name
        may be both: an input with a default), or one output of one node -- as ONNX requires
        (static single assignment): a second definition would silently shadow the first."""
        g = self.graph
        defined = {i.name for i in g.input} | {t.name for t in g.initializer}
        for node in g.node:
            for name in node.output:
                if not name:
                    continue
                if name in defined:
                    self._fail_graph(
                        f"value {name!r} is defined twice (again by node "
                        f"{node.name or node.op_type!r}): an ONNX graph defines each value once")
                defined.add(name)

    def used_outputs(self, node: Any) -> list[int]:
        """Indices of ``node``'s outputs that some node or graph output consumes."""
        names = {n for nd in self.graph.node for n in nd.input} | {
            o.name for o in self.graph.output
        }
        return [i for i, o in enumerate(node.output) if o and o in names]


_MOVEMENT = frozenset(
    """constant reshape transpose concat split slice pad gather gather_nd scatter_nd tile
    broadcast_to expand_dims squeeze shape size fill range one_hot where top_k depth_to_space
    space_to_depth identity_n identity select cast if case while yield gather_elements
    scatter_elements trilu equal not_equal read_variable neg abs sign is_nan is_inf
    reduce_max reduce_min maximum minimum relu""".split()
)
"""Ops exact in any float type (no rounding): never widened."""

_ACCUMULATING = frozenset(
    """matmul conv2d conv2d_transpose batch_norm layer_norm softmax log_softmax l2_normalize
    lrn cumsum reduce_sum reduce_mean reduce_prod einsum resize avg_pool2d""".split()
)
"""Ops that sum many terms: f16 operands are widened to f32 (as ONNX Runtime accumulates)."""


def _low_precision(name: str, operands: Sequence[Value]) -> str | None:
    """``bf16``/``f16`` if op ``name`` on ``operands`` is computed in f32, else ``None``."""
    if name in _MOVEMENT:
        return None
    dtypes = {v.dtype for v in operands}
    if "bf16" in dtypes:
        return "bf16"
    if "f16" in dtypes and name in _ACCUMULATING:
        return "f16"
    return None


_ONNX_OF_TG = {v: k for k, v in _ONNX_DTYPES.items()}


def _np_dtype(tg: str) -> Any:
    from pytfrt.compiler.types import np_dtype

    return np_dtype(tg)


def _is_float(v: Value) -> bool:
    return v.dtype in ("f16", "bf16", "f32", "f64")


def _rank(ctx: OnnxGraphImporter, v: Value) -> int:
    return len(_dims(ctx, v))


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _ints(a: Any) -> list[int]:
    return [int(x) for x in np.asarray(a).reshape(-1)]


def optional_element(vi: Any) -> Any:
    """A graph input's ``ValueInfoProto`` with an optional type replaced by its element type
    (the same object when it is not optional)."""
    if not vi.type.HasField("optional_type"):
        return vi
    from pytfrt.compiler.frontends.onnx_proto import ValueInfoProto

    out = ValueInfoProto()
    out.name = vi.name
    out.type.CopyFrom(vi.type.optional_type.elem_type)
    return out


def _dims(ctx: OnnxGraphImporter, v: Value) -> tuple[int | None, ...]:
    """``v``'s shape (``None`` for dynamic dims); its rank must be known."""
    if v.shape is None:  # its rank may follow from the value of a small graph input
        node = ctx._node
        ctx.unsupported(node, "needs an input of known rank",
                        range(len(node.input)) if node is not None else ())
    return v.shape


def _static_shape(v: Value) -> tuple[int, ...] | None:
    """``v``'s shape if every dim is static, else ``None``."""
    if v.shape is None or any(d is None for d in v.shape):
        return None
    return tuple(int(d) for d in v.shape if d is not None)


# -- elementwise --------------------------------------------------------------------------

_UNARY = {
    "Neg": "neg",
    "Abs": "abs",
    "Exp": "exp",
    "Log": "log",
    "Sqrt": "sqrt",
    "Reciprocal": "reciprocal",
    "Sign": "sign",
    "Floor": "floor",
    "Ceil": "ceil",
    "Round": "round",
    "Tanh": "tanh",
    "Sigmoid": "sigmoid",
    "Relu": "relu",
    "Softplus": "softplus",
    "Softsign": "softsign",
    "Erf": "erf",
    "Sin": "sin",
    "Cos": "cos",
    "Tan": "tan",
    "Not": "logical_not",
    "IsNaN": "is_nan",
    "HardSwish": "hard_swish",
}
_BINARY = {
    "Add": "add",
    "Sub": "sub",
    "Mul": "mul",
    "Pow": "pow",
    "Equal": "equal",
    "Less": "less",
    "LessOrEqual": "less_equal",
    "Greater": "greater",
    "GreaterOrEqual": "greater_equal",
    "And": "logical_and",
    "Or": "logical_or",
    "Xor": "logical_xor",
    "BitwiseAnd": "bitwise_and",
    "BitwiseOr": "bitwise_or",
}


def _unary(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return [ctx.op(_UNARY[node.op_type], [ctx.input(node, 0)])]


def _binary(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a, b = ctx.input(node, 0), ctx.input(node, 1)
    if node.op_type == "Pow" and a.dtype != b.dtype:  # computed in f64, the base's type
        wide = [ctx.op("cast", [v], to="f64") if v.dtype != "f64" else v for v in (a, b)]
        y = ctx.op("pow", wide)
        return [ctx.op("cast", [y], to=a.dtype) if a.dtype != "f64" else y]
    return [ctx.op(_BINARY[node.op_type], [a, b])]


for _t in _UNARY:
    onnx_op(_t, note=f"`{_UNARY[_t]}`")(_unary)
for _t in _BINARY:
    onnx_op(_t, note=f"`{_BINARY[_t]}`")(_binary)


@onnx_op("Div", note="`div`; integer operands: truncating division (as ONNX Runtime)")
def _div(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a, b = ctx.input(node, 0), ctx.input(node, 1)
    if _is_float(a):
        return [ctx.op("div", [a, b])]
    # ONNX integer Div truncates toward zero: sign(a)*sign(b) * (|a| // |b|).
    q = ctx.op("floor_div", [ctx.op("abs", [a]), ctx.op("abs", [b])])
    s = ctx.op("mul", [ctx.op("sign", [a]), ctx.op("sign", [b])])
    return [ctx.op("mul", [s, q])]


@onnx_op("Mod", note="`floor_mod` (`fmod = 0`); `fmod = 1`: `x - trunc(x / y) * y`")
def _mod(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    if ctx.attrs(node).get("fmod", 0):
        from pytfrt.compiler.frontends.onnx_more import mod_fmod

        return [mod_fmod(ctx, node)]
    return [ctx.op("floor_mod", [ctx.input(node, 0), ctx.input(node, 1)])]


def _variadic(tg: str) -> Handler:
    def handler(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
        vals = [ctx.input(node, i) for i in range(len(node.input)) if ctx.has(node, i)]
        acc = vals[0]
        for v in vals[1:]:
            acc = ctx.op(tg, [acc, v])
        if node.op_type == "Mean":
            acc = ctx.op("div", [acc, ctx.scalar(len(vals), acc)])
        elif len(vals) == 1:
            acc = ctx.op("identity", [acc])
        return [acc]

    return handler


onnx_op("Max", note="`maximum` (variadic: a chain)")(_variadic("maximum"))
onnx_op("Min", note="`minimum` (variadic: a chain)")(_variadic("minimum"))
onnx_op("Sum", note="`add` (variadic: a chain)")(_variadic("add"))
onnx_op("Mean", note="`add` chain, `div`")(_variadic("add"))


@onnx_op("IsInf", note="`is_inf` (`detect_negative`/`detect_positive` via `select`)")
def _isinf(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    inf = ctx.op("is_inf", [x])
    neg, pos = a.get("detect_negative", 1), a.get("detect_positive", 1)
    if neg and pos:
        return [inf]
    zero = ctx.scalar(0, x)
    side = ctx.op("less" if neg else "greater", [x, zero])
    return [ctx.op("logical_and", [inf, side])]


@onnx_op("Identity", note="forwarded (no op)")
def _identity(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    if node.input[0] in ctx.empties:
        return [EMPTY]
    if node.input[0] in ctx.seqs:
        return [SeqOut(ctx.seqs[node.input[0]])]
    k = ctx.known_input(node, 0)
    return [k if k is not None else ctx.input(node, 0)]


@onnx_op(
    "Dropout",
    note="identity, the mask all true (inference, or training with ratio 0); training mode "
    "with a ratio > 0 is unsupported",
)
def _dropout(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    if ctx.has(node, 2):
        training = bool(ctx.const_input(node, 2, "training_mode").reshape(-1)[0])
        ratio = float(ctx.const_input(node, 1, "ratio")) if ctx.has(node, 1) else 0.5
        if training and ratio != 0.0:
            ctx.unsupported(
                node,
                f"training_mode = true with ratio {ratio}: a random mask (pytfrt has no "
                "generator matching another runtime's)",
            )
    outs: list[Out] = [x]
    if 1 in ctx.used_outputs(node):
        static = _static_shape(x)
        if static is not None:
            outs.append(np.ones(static, dtype=bool))
        else:
            true = ctx.constant(np.asarray(True), "dropout/true")
            outs.append(ctx.op("fill", [_shape_of(ctx, x), true]))
    return outs


@onnx_op("LeakyRelu", note="`leaky_relu {alpha}`")
def _leaky(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    alpha = float(ctx.attrs(node).get("alpha", 0.01))
    return [ctx.op("leaky_relu", [ctx.input(node, 0)], alpha=alpha)]


@onnx_op("HardSigmoid", note="`hard_sigmoid {alpha, beta}`")
def _hard_sigmoid(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    return [
        ctx.op(
            "hard_sigmoid",
            [ctx.input(node, 0)],
            alpha=float(a.get("alpha", 0.2)),
            beta=float(a.get("beta", 0.5)),
        )
    ]


@onnx_op("Elu", note="`elu` (`alpha = 1`), else `select(x > 0, x, alpha * expm1(x))`")
def _elu(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    alpha = float(ctx.attrs(node).get("alpha", 1.0))
    if alpha == 1.0:
        return [ctx.op("elu", [x])]
    neg = ctx.op("mul", [ctx.op("expm1", [x]), ctx.scalar(alpha, x)])
    return [ctx.op("select", [ctx.op("greater", [x, ctx.scalar(0, x)]), x, neg])]


@onnx_op("Selu", note="`selu` (default `alpha`/`gamma`), else composed")
def _selu(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    alpha = float(a.get("alpha", 1.67326319217681884765625))
    gamma = float(a.get("gamma", 1.05070102214813232421875))
    if math.isclose(alpha, 1.6732632423543772, rel_tol=1e-6) and math.isclose(
        gamma, 1.0507009873554805, rel_tol=1e-6
    ):
        return [ctx.op("selu", [x])]
    neg = ctx.op("mul", [ctx.op("expm1", [x]), ctx.scalar(alpha, x)])
    y = ctx.op("select", [ctx.op("greater", [x, ctx.scalar(0, x)]), x, neg])
    return [ctx.op("mul", [y, ctx.scalar(gamma, x)])]


@onnx_op("Celu", note="`max(0,x) + min(0, alpha * expm1(x / alpha))`")
def _celu(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    alpha = float(ctx.attrs(node).get("alpha", 1.0))
    e = ctx.op(
        "mul", [ctx.op("expm1", [ctx.op("div", [x, ctx.scalar(alpha, x)])]), ctx.scalar(alpha, x)]
    )
    zero = ctx.scalar(0, x)
    return [ctx.op("add", [ctx.op("maximum", [x, zero]), ctx.op("minimum", [e, zero])])]


@onnx_op("ThresholdedRelu", note="`select(x > alpha, x, 0)`")
def _thresholded_relu(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    alpha = float(ctx.attrs(node).get("alpha", 1.0))
    cond = ctx.op("greater", [x, ctx.scalar(alpha, x)])
    return [ctx.op("select", [cond, x, ctx.scalar(0, x)])]


@onnx_op("PRelu", note="`select(x > 0, x, slope * x)`")
def _prelu(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x, slope = ctx.input(node, 0), ctx.input(node, 1)
    cond = ctx.op("greater", [x, ctx.scalar(0, x)])
    return [ctx.op("select", [cond, x, ctx.op("mul", [x, slope])])]


@onnx_op("Mish", note="`x * tanh(softplus(x))`")
def _mish(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    return [ctx.op("mul", [x, ctx.op("tanh", [ctx.op("softplus", [x])])])]


@onnx_op("Gelu", note="`gelu {approximate}` (opset 20)")
def _gelu(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    approx = ctx.attrs(node).get("approximate", "none")
    return [ctx.op("gelu", [ctx.input(node, 0)], approximate=approx == "tanh")]


@onnx_op(
    "Clip", note="`relu` / `relu6` / `clip {min, max}`; non-constant bounds: `maximum`/`minimum`"
)
def _clip(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    lo_k, hi_k = ctx.known_input(node, 1), ctx.known_input(node, 2)
    lo_dyn = ctx.has(node, 1) and lo_k is None
    hi_dyn = ctx.has(node, 2) and hi_k is None
    if lo_dyn or hi_dyn:
        y = x
        if ctx.has(node, 1):
            y = ctx.op("maximum", [y, ctx.input(node, 1)])
        if ctx.has(node, 2):
            y = ctx.op("minimum", [y, ctx.input(node, 2)])
        return [y]
    lo = float(lo_k) if lo_k is not None else -math.inf
    hi = float(hi_k) if hi_k is not None else math.inf
    if _is_float(x) and lo == 0.0 and hi == math.inf:
        return [ctx.op("relu", [x])]
    if _is_float(x) and lo == 0.0 and hi == 6.0:
        return [ctx.op("relu6", [x])]
    if not _is_float(x):
        y = x
        if lo_k is not None:
            y = ctx.op("maximum", [y, ctx.input(node, 1)])
        if hi_k is not None:
            y = ctx.op("minimum", [y, ctx.input(node, 2)])
        return [y if y is not x else ctx.op("identity", [x])]
    return [ctx.op("clip", [x], min=lo, max=hi)]


@onnx_op("Cast", note="`cast {to}`")
def _cast(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    to = tg_dtype(int(ctx.attrs(node)["to"]), where=f"{ctx.origin}: node {node.name!r}: ")
    x = ctx.input(node, 0)
    if x.dtype == to:
        return [x]
    return [ctx.op("cast", [x], to=to)]


@onnx_op("CastLike", note="`cast {to}` (the second input's type)")
def _cast_like(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x, like = ctx.input(node, 0), ctx.input(node, 1)
    return [x if x.dtype == like.dtype else ctx.op("cast", [x], to=like.dtype)]


@onnx_op("Where", note="`select`")
def _where(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return [ctx.op("select", [ctx.input(node, 0), ctx.input(node, 1), ctx.input(node, 2)])]


# -- linear algebra, convolution, pooling, normalisation ---------------------------------


@onnx_op("MatMul", note="`matmul`")
def _matmul(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return [
        ctx.op(
            "matmul", [ctx.input(node, 0), ctx.input(node, 1)], transpose_a=False, transpose_b=False
        )
    ]


@onnx_op(
    "Gemm",
    note="`matmul {transpose_a, transpose_b}` (a constant transposed operand is stored "
    "transposed) + `mul` by alpha/beta, `add` C",
)
def _gemm(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    operands, flags = [], []
    for i, key in ((0, "transA"), (1, "transB")):
        k = ctx.known_input(node, i)
        if k is not None and a.get(key, 0):
            # A constant operand is stored transposed (a weight in [K, N] layout for the GEMM).
            operands.append(ctx.constant(np.ascontiguousarray(k.T), f"{node.input[i]}/T"))
            flags.append(False)
        else:
            operands.append(ctx.input(node, i))
            flags.append(bool(a.get(key, 0)))
    y = ctx.op("matmul", operands, transpose_a=flags[0], transpose_b=flags[1])
    if alpha != 1.0:
        y = ctx.op("mul", [y, ctx.scalar(alpha, y)])
    if ctx.has(node, 2) and beta != 0.0:
        ck = ctx.known_input(node, 2)
        if ck is not None:
            c = ctx.constant((ck * beta).astype(ck.dtype) if beta != 1.0 else ck, node.input[2])
        else:
            c = ctx.input(node, 2)
            if beta != 1.0:
                c = ctx.op("mul", [c, ctx.scalar(beta, c)])
        y = ctx.op("add", [y, c])
    return [y]


def _spatial_pads(
    ctx: OnnxGraphImporter,
    node: Any,
    x: Value,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> tuple[list[int] | None, str | None]:
    """``(pads as (top, bottom, left, right), None)`` or ``(None, "SAME")`` (dynamic SAME)."""
    a = ctx.attrs(node)
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        p = [int(v) for v in a.get("pads", [0] * 4)]
        return [p[0], p[2], p[1], p[3]], None
    if auto == "VALID":
        return [0, 0, 0, 0], None
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        ctx.unsupported(node, f"auto_pad {auto!r}")
    spatial = [d for d in (x.shape or (None,) * 4)[2:] if d is not None]
    if len(spatial) != 2:
        if auto == "SAME_UPPER":
            return None, "SAME"
        ctx.unsupported(node, "auto_pad SAME_LOWER with dynamic spatial dimensions")
    (t, b), (l_, r) = (
        same_pad(spatial[i], kernel[i], strides[i], dilations[i], upper=auto == "SAME_UPPER")
        for i in range(2)
    )
    return [t, b, l_, r], None


def _bias_nchw(ctx: OnnxGraphImporter, node: Any, y: Value, i: int) -> Value:
    """``y + bias`` for a per-channel bias on NCHW (reshaped to ``[C, 1, 1]``)."""
    bk = ctx.known_input(node, i)
    if bk is not None:
        b = ctx.constant(bk.reshape(-1, 1, 1), node.input[i])
    else:
        b = ctx.op("reshape", [ctx.input(node, i)], shape=[-1, 1, 1])
    return ctx.op("add", [y, b])


def _expand_1d(ctx: OnnxGraphImporter, node: Any) -> tuple[Value, Value]:
    """A 1-D conv/pool's input (and weight) lifted to 2-D by an H axis of 1."""
    x = ctx.op("expand_dims", [ctx.input(node, 0)], axis=2)
    if ctx.has(node, 1):
        wk = ctx.known_input(node, 1)
        w = (
            ctx.constant(wk[:, :, None, :], node.input[1])
            if wk is not None
            else ctx.op("expand_dims", [ctx.input(node, 1)], axis=2)
        )
        return x, w
    return x, x


def _lift_1d_attrs(node: Any, ctx: OnnxGraphImporter) -> dict[str, Any]:
    a = ctx.attrs(node)
    out = dict(a)
    for key, one in (("kernel_shape", 1), ("strides", 1), ("dilations", 1)):
        if key in a:
            out[key] = [one] + list(a[key])
    if "pads" in a:
        p = list(a["pads"])
        out["pads"] = [0, p[0], 0, p[1]]
    return out


@onnx_op("Conv", note="`conv2d {layout = NCHW}` (+ `add` of the bias); 1-D via an H axis of 1")
def _conv(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    attrs = ctx.attrs(node)
    if rank == 3:
        x, w = _expand_1d(ctx, node)
        attrs = _lift_1d_attrs(node, ctx)
    elif rank == 4:
        w = ctx.input(node, 1)
    else:
        ctx.unsupported(node, f"{rank - 2}-D convolution")
    if w.shape is None or None in w.shape[2:]:
        ctx.unsupported(node, "the filter's spatial size must be static")
    kernel = [int(k) for k in attrs.get("kernel_shape", list(w.shape[2:]))]
    strides = [int(s) for s in attrs.get("strides", [1, 1])]
    dilations = [int(d) for d in attrs.get("dilations", [1, 1])]
    tmp = _AttrNode(node, attrs)
    pads, padding = _spatial_pads(ctx, tmp, x, kernel, strides, dilations)
    kw: dict[str, Any] = {
        "layout": "NCHW",
        "strides": strides,
        "dilations": dilations,
        "groups": int(attrs.get("group", 1)),
    }
    if padding is not None:
        kw["padding"] = padding
    else:
        kw["pads"] = pads
    y = ctx.op("conv2d", [x, w], **kw)
    if ctx.has(node, 2):
        y = _bias_nchw(ctx, node, y, 2)
    if rank == 3:
        y = ctx.op("squeeze", [y], axes=[2])
    return [y]


class _AttrNode:
    """A node view with overridden attributes (1-D ops lifted to 2-D)."""

    def __init__(self, node: Any, attrs: dict[str, Any]) -> None:
        self.overrides = attrs
        self.op_type, self.name, self.input, self.output = (
            node.op_type,
            node.name,
            node.input,
            node.output,
        )
        self.domain = node.domain
        self.attribute: list[Any] = []


@onnx_op("ConvTranspose", note="`conv2d_transpose {layout = NCHW}` (filter IOHW) + bias `add`; "
         "other ranks, output_shape, SAME: `conv_transpose_nd`")
def _conv_transpose(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x, w = ctx.input(node, 0), ctx.input(node, 1)
    a = ctx.attrs(node)
    auto = a.get("auto_pad", "NOTSET")
    if _rank(ctx, x) != 4 or "output_shape" in a or auto not in ("NOTSET", "", "VALID"):
        from pytfrt.compiler.frontends.onnx_nd import conv_transpose_general

        return conv_transpose_general(ctx, node)
    p = [int(v) for v in a.get("pads", [0] * 4)] if auto in ("NOTSET", "") else [0] * 4
    y = ctx.op(
        "conv2d_transpose",
        [x, w],
        layout="NCHW",
        strides=[int(s) for s in a.get("strides", [1, 1])],
        dilations=[int(d) for d in a.get("dilations", [1, 1])],
        pads=[p[0], p[2], p[1], p[3]],
        groups=int(a.get("group", 1)),
        output_padding=[int(o) for o in a.get("output_padding", [0, 0])],
    )
    if ctx.has(node, 2):
        y = _bias_nchw(ctx, node, y, 2)
    return [y]


def _pool(tg: str) -> Handler:
    def handler(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
        x = ctx.input(node, 0)
        rank = _rank(ctx, x)
        attrs = ctx.attrs(node)
        indices = len(node.output) > 1 and 1 in ctx.used_outputs(node)
        if (rank not in (3, 4) or any(int(d) != 1 for d in attrs.get("dilations", []))
                or indices):
            from pytfrt.compiler.frontends.onnx_nd import pool_general

            return pool_general(ctx, node, "max" if tg == "max_pool2d" else "avg")
        if rank == 3:
            x = ctx.op("expand_dims", [x], axis=2)
            attrs = _lift_1d_attrs(node, ctx)
        kernel = [int(k) for k in attrs["kernel_shape"]]
        strides = [int(s) for s in attrs.get("strides", [1, 1])]
        pads, padding = _spatial_pads(ctx, _AttrNode(node, attrs), x, kernel, strides, [1, 1])
        if padding is not None:
            ctx.unsupported(node, "auto_pad SAME with dynamic spatial dimensions")
        kw: dict[str, Any] = {
            "layout": "NCHW",
            "ksize": kernel,
            "strides": strides,
            "pads": pads,
            "ceil_mode": bool(attrs.get("ceil_mode", 0)),
        }
        if tg == "avg_pool2d":
            kw["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
        y = ctx.op(tg, [x], **kw)
        if rank == 3:
            y = ctx.op("squeeze", [y], axes=[2])
        return [y]

    return handler


onnx_op("MaxPool", note="`max_pool2d {layout = NCHW}` (1-D via an H axis of 1); other "
        "ranks and dilations: `pool_nd {kind = max}`; the Indices output: "
        "`pool_nd {kind = argmax}`")(
    _pool("max_pool2d")
)
onnx_op("AveragePool", note="`avg_pool2d {layout = NCHW}` (1-D via an H axis of 1); other "
        "ranks and dilations: `pool_nd {kind = avg}`")(
    _pool("avg_pool2d")
)


def _global_pool(tg: str, reduce: str) -> Handler:
    def handler(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
        x = ctx.input(node, 0)
        rank = _rank(ctx, x)
        if rank == 4:
            return [ctx.op(tg, [x], layout="NCHW")]
        return [ctx.op(reduce, [x], axes=list(range(2, rank)), keepdims=True)]

    return handler


onnx_op("GlobalAveragePool", note="`global_avg_pool {layout = NCHW}` (other ranks: `reduce_mean`)")(
    _global_pool("global_avg_pool", "reduce_mean")
)
onnx_op("GlobalMaxPool", note="`global_max_pool {layout = NCHW}` (other ranks: `reduce_max`)")(
    _global_pool("global_max_pool", "reduce_max")
)


@onnx_op("BatchNormalization", note="`batch_norm {axis = 1}`; `training_mode = 1`: the batch "
         "statistics (`reduce_mean`/`squared_difference`/`rsqrt`) and the running averages")
def _batch_norm(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    eps = float(a.get("epsilon", 1e-5))
    if a.get("training_mode", 0):
        return _batch_norm_training(ctx, node, eps, float(a.get("momentum", 0.9)))
    if len(ctx.used_outputs(node)) > 1:
        ctx.unsupported(node, "the statistics outputs of an opset-6/9 training-mode node")
    ops = [ctx.input(node, i) for i in range(5)]
    return [ctx.op("batch_norm", ops, epsilon=eps, axis=1)]


def _batch_norm_training(ctx: OnnxGraphImporter, node: Any, eps: float, momentum: float
                         ) -> list[Out]:
    """ONNX ``BatchNormalization`` with ``training_mode = 1``: ``Y`` normalised with the
    batch's mean and (population) variance over every axis but 1, and the running averages
    ``input * momentum + batch * (1 - momentum)`` as ``running_mean``/``running_var``."""
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    axes = [d for d in range(rank) if d != 1]
    mean = ctx.op("reduce_mean", [x], axes=axes, keepdims=True)
    var = ctx.op("reduce_mean", [ctx.op("squared_difference", [x, mean])], axes=axes,
                 keepdims=True)
    inv = ctx.op("rsqrt", [ctx.op("add", [var, ctx.scalar(eps, x)])])
    shape = [-1] + [1] * (rank - 2)
    y = ctx.op("mul", [ctx.op("sub", [x, mean]), ctx.op("mul", [inv, _per_channel(
        ctx, node, 1, shape)])])
    outs: list[Out] = [ctx.op("add", [y, _per_channel(ctx, node, 2, shape)])]
    for i, batch in ((3, mean), (4, var)):
        running = ctx.input(node, i)
        flat = ctx.op("reshape", [batch], shape=[-1])
        if flat.dtype != running.dtype:
            flat = ctx.op("cast", [flat], to=running.dtype)
        outs.append(ctx.op("add", [ctx.op("mul", [running, ctx.scalar(momentum, running)]),
                                   ctx.op("mul", [flat, ctx.scalar(1 - momentum, running)])]))
    return outs


@onnx_op(
    "LayerNormalization", note="`layer_norm {axis, epsilon}` (Mean/InvStdDev outputs unsupported)"
)
def _layer_norm(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    if len(ctx.used_outputs(node)) > 1 or (
        ctx.used_outputs(node) and ctx.used_outputs(node)[0] != 0
    ):
        ctx.unsupported(node, "the Mean / InvStdDev outputs")
    axis = _axis(int(a.get("axis", -1)), _rank(ctx, x))
    ops = [x, ctx.input(node, 1)]
    has_beta = ctx.has(node, 2)
    if has_beta:
        ops.append(ctx.input(node, 2))
    return [
        ctx.op(
            "layer_norm",
            ops,
            axis=axis,
            epsilon=float(a.get("epsilon", 1e-5)),
            has_gamma=True,
            has_beta=has_beta,
        )
    ]


@onnx_op("InstanceNormalization", note="`reduce_mean`/`squared_difference`/`rsqrt` composition")
def _instance_norm(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    eps = float(ctx.attrs(node).get("epsilon", 1e-5))
    axes = list(range(2, rank))
    mean = ctx.op("reduce_mean", [x], axes=axes, keepdims=True)
    var = ctx.op("reduce_mean", [ctx.op("squared_difference", [x, mean])], axes=axes, keepdims=True)
    inv = ctx.op("rsqrt", [ctx.op("add", [var, ctx.scalar(eps, x)])])
    y = ctx.op("mul", [ctx.op("sub", [x, mean]), inv])
    shape = [-1] + [1] * (rank - 2)
    scale = _per_channel(ctx, node, 1, shape)
    bias = _per_channel(ctx, node, 2, shape)
    return [ctx.op("add", [ctx.op("mul", [y, scale]), bias])]


def _per_channel(ctx: OnnxGraphImporter, node: Any, i: int, shape: list[int]) -> Value:
    k = ctx.known_input(node, i)
    if k is not None:
        return ctx.constant(k.reshape(shape), node.input[i])
    return ctx.op("reshape", [ctx.input(node, i)], shape=shape)


def _softmax(tg: str) -> Handler:
    def handler(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
        x = ctx.input(node, 0)
        axis = _axis(int(ctx.attrs(node).get("axis", -1)), _rank(ctx, x))
        if tg == "softmax" and x.dtype == "f16":
            # in float16 step by step (each step rounded, as ONNX's definition computes it):
            # one rounding at the end differs by an ulp where the steps round the other way
            top = ctx.op("reduce_max", [x], axes=[axis], keepdims=True)
            e = ctx.op("exp", [ctx.op("sub", [x, top])])
            return [ctx.op("div", [e, ctx.op("reduce_sum", [e], axes=[axis], keepdims=True)])]
        return [ctx.op(tg, [x], axis=axis)]

    return handler


onnx_op("Softmax", note="`softmax {axis}`; float16: `reduce_max`, `exp`, `reduce_sum`, `div`, "
        "each rounded")(_softmax("softmax"))
onnx_op("LogSoftmax", note="`log_softmax {axis}`")(_softmax("log_softmax"))


# -- reductions ---------------------------------------------------------------------------

_REDUCE = {
    "ReduceSum": "reduce_sum",
    "ReduceMean": "reduce_mean",
    "ReduceMax": "reduce_max",
    "ReduceMin": "reduce_min",
    "ReduceProd": "reduce_prod",
    "ReduceL1": "reduce_sum",
    "ReduceL2": "reduce_sum",
    "ReduceSumSquare": "reduce_sum",
    "ReduceLogSum": "reduce_sum",
    "ReduceLogSumExp": "reduce_sum",
}


def _reduce_axes(ctx: OnnxGraphImporter, node: Any, x: Value) -> list[int] | None:
    """The normalised axes, or ``None`` for "no reduction" (``noop_with_empty_axes``)."""
    a = ctx.attrs(node)
    if "axes" in a:
        axes = [int(v) for v in a["axes"]]
    elif ctx.has(node, 1):
        axes = _ints(ctx.const_input(node, 1, "axes"))
    else:
        axes = []
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return None
        return list(range(_rank(ctx, x)))
    rank = _rank(ctx, x)
    return sorted(_axis(v, rank) for v in axes)


_EMPTY_REDUCE = ("ReduceMax", "ReduceMin", "ReduceLogSumExp")


def _reduce(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    axes = _reduce_axes(ctx, node, x)
    if axes is None:
        return [ctx.op("identity", [x])]
    keep = bool(ctx.attrs(node).get("keepdims", 1))
    t = node.op_type
    static = _static_shape(x)
    if static is not None and any(static[a] == 0 for a in axes) and t in _EMPTY_REDUCE:
        # an empty reduction: the identity of the max/min (-inf/+inf, or the type's bounds)
        shape = [1 if i in axes else d for i, d in enumerate(static) if keep or i not in axes]
        dt = _np_dtype(x.dtype)
        low = t != "ReduceMin"
        if dt.kind == "f":
            fill = -np.inf if low else np.inf
        elif dt.kind == "b":
            fill = not low
        else:
            fill = np.iinfo(dt).min if low else np.iinfo(dt).max
        return [np.full(shape, fill, dtype=dt)]
    if x.dtype == "i1" and t in ("ReduceMax", "ReduceMin"):
        y = ctx.op(_REDUCE[t], [ctx.op("cast", [x], to="ui8")], axes=axes, keepdims=keep)
        return [ctx.op("cast", [y], to="i1")]
    if t == "ReduceLogSumExp":
        m = ctx.op("reduce_max", [x], axes=axes, keepdims=True)
        s = ctx.op("reduce_sum", [ctx.op("exp", [ctx.op("sub", [x, m])])], axes=axes, keepdims=True)
        y = ctx.op("add", [ctx.op("log", [s]), m])
        return [y if keep else ctx.op("squeeze", [y], axes=axes)]
    if t == "ReduceL1":
        x = ctx.op("abs", [x])
    elif t in ("ReduceL2", "ReduceSumSquare"):
        x = ctx.op("square", [x])
    y = ctx.op(_REDUCE[t], [x], axes=axes, keepdims=keep)
    if t == "ReduceL2":
        y = ctx.op("sqrt", [y])
    elif t == "ReduceLogSum":
        y = ctx.op("log", [y])
    return [y]


for _t in _REDUCE:
    onnx_op(
        _t,
        note=f"`{_REDUCE[_t]} {{axes, keepdims}}`"
        + (
            ""
            if _t in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd")
            else " composed"
        ),
    )(_reduce)


def _arg(tg: str) -> Handler:
    def handler(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
        a = ctx.attrs(node)
        x = ctx.input(node, 0)
        axis = _axis(int(a.get("axis", 0)), _rank(ctx, x))
        keep = bool(a.get("keepdims", 1))
        if not a.get("select_last_index", 0):
            return [ctx.op(tg, [x], axis=axis, keepdims=keep, output_type="i64")]
        # the last of equal extremes: the first in the reversed axis, index n - 1 - i
        n = x.shape[axis] if x.shape is not None else None
        if n is None:
            ctx.unsupported(node, "select_last_index = 1 along a dynamic axis")
        rev = ctx.op("slice", [x], starts=[-1], ends=[-(1 << 62)], axes=[axis], steps=[-1])
        i = ctx.op(tg, [rev], axis=axis, keepdims=keep, output_type="i64")
        return [ctx.op("sub", [ctx.constant(np.asarray(n - 1, np.int64), "arg/last"), i])]

    return handler


onnx_op("ArgMax", note="`argmax {axis, keepdims}`")(_arg("argmax"))
onnx_op("ArgMin", note="`argmin {axis, keepdims}`")(_arg("argmin"))


@onnx_op("CumSum", note="`cumsum {axis, exclusive, reverse}`")
def _cumsum(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    axis = _axis(int(ctx.const_input(node, 1, "axis").reshape(-1)[0]), _rank(ctx, x))
    return [
        ctx.op(
            "cumsum",
            [x],
            axis=axis,
            exclusive=bool(a.get("exclusive", 0)),
            reverse=bool(a.get("reverse", 0)),
        )
    ]


# -- shapes and data movement -------------------------------------------------------------


def _shape_of(ctx: OnnxGraphImporter, x: Value) -> Value:
    return ctx.op("shape", [x], out_type="i64")


@onnx_op("Shape", note="known when the input's shape is static; else `shape` (+ `slice`)")
def _shape(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    a = ctx.attrs(node)
    start, end = a.get("start"), a.get("end")
    static = _static_shape(x)
    if static is not None:
        return [np.asarray(static, dtype=np.int64)[slice(start, end)]]
    s = _shape_of(ctx, x)
    if start is None and end is None:
        return [s]
    dims = _dims(ctx, x)
    rank = len(dims)
    lo = _axis(int(start or 0), rank)
    hi = rank if end is None else min(rank, _axis(int(end), rank))
    if all(d is not None for d in dims[lo:hi]):
        return [np.asarray(dims[lo:hi], dtype=np.int64)]
    return [ctx.op("slice", [s], starts=[lo], ends=[hi], axes=[0], steps=[1])]


@onnx_op("Size", note="known when static; else `size`")
def _size(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    static = _static_shape(x)
    if static is not None:
        return [np.asarray(int(np.prod(static)), dtype=np.int64)]
    return [ctx.op("size", [x], out_type="i64")]


@onnx_op(
    "Reshape",
    note="`reshape {shape, copy_zero}`; a shape computed at run time: `reshape(x, shape)`",
)
def _reshape(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    copy_zero = not ctx.attrs(node).get("allowzero", 0)
    target = reshape_target(ctx, x, node.input[1], copy_zero)
    if target is not None:  # known at import time, but for at most one element
        return [ctx.op("reshape", [x], shape=target)]
    k = ctx.known_input(node, 1)
    if k is not None:
        # Zeros copying several dynamic dims: the target is built at run time.
        sx = _shape_of(ctx, x)
        parts = [
            ctx.op("slice", [sx], starts=[i], ends=[i + 1], axes=[0], steps=[1])
            if t == 0 and copy_zero
            else ctx.constant(np.asarray([t], np.int64))
            for i, t in enumerate(_ints(k))
        ]
        return [ctx.op("reshape", [x, ctx.op("concat", parts, axis=0)])]
    return [ctx.op("reshape", [x, ctx.input(node, 1)], copy_zero=copy_zero)]


@onnx_op("Flatten", note="`reshape` to 2-D")
def _flatten(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    axis = _axis(int(ctx.attrs(node).get("axis", 1)), rank)
    dims = _dims(ctx, x)
    head, tail = dims[:axis], dims[axis:]
    if None not in tail:
        return [ctx.op("reshape", [x], shape=[-1, math.prod(d or 1 for d in tail)])]
    if None not in head:
        return [ctx.op("reshape", [x], shape=[math.prod(d or 1 for d in head), -1])]
    s = _shape_of(ctx, x)
    lead = ctx.op(
        "reduce_prod",
        [ctx.op("slice", [s], starts=[0], ends=[axis], axes=[0], steps=[1])],
        axes=[0],
        keepdims=True,
    )
    minus = ctx.constant(np.asarray([-1], np.int64), f"{node.output[0]}/minus1")
    return [ctx.op("reshape", [x, ctx.op("concat", [lead, minus], axis=0)])]


@onnx_op("Transpose", note="`transpose {perm}`")
def _transpose(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    perm = ctx.attrs(node).get("perm")
    if perm is None:
        perm = list(reversed(range(_rank(ctx, x))))
    return [ctx.op("transpose", [x], perm=[int(p) for p in perm])]


@onnx_op("Concat", note="`concat {axis}`")
def _concat(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    vals = [ctx.input(node, i) for i in range(len(node.input)) if ctx.has(node, i)]
    axis = int(ctx.attrs(node)["axis"])
    rank = next((len(v.shape) for v in vals if v.shape is not None), None)
    if rank is None:
        ctx.unsupported(node, "inputs of unknown rank")
    return [ctx.op("concat", vals, axis=_axis(axis, rank))]


@onnx_op("Split", note="`split {axis, sizes}` (`split` input constant, or `num_outputs`)")
def _split(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    a = ctx.attrs(node)
    axis = _axis(int(a.get("axis", 0)), _rank(ctx, x))
    n = len(node.output)
    if ctx.has(node, 1):
        sizes = _ints(ctx.const_input(node, 1, "split"))
    elif "split" in a:
        sizes = [int(s) for s in a["split"]]
    else:
        dim = _dims(ctx, x)[axis]
        if dim is None:
            ctx.unsupported(node, "an even split of a dynamic dimension")
        n = int(a.get("num_outputs", n))
        chunk = -(-int(dim) // n)
        sizes = [chunk] * (n - 1) + [int(dim) - chunk * (n - 1)]
    res = ctx.op("split", [x], axis=axis, sizes=sizes, n_results=len(sizes))
    return list(res) if isinstance(res, list | tuple) else [res]


@onnx_op(
    "Slice",
    note="`slice {starts, ends, axes, steps}`; bounds computed at run time: the tensor form",
)
def _slice(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    known = [ctx.known_input(node, i) for i in range(1, 5)]
    starts_k, ends_k, axes_k, steps_k = known
    if axes_k is None and ctx.has(node, 3):
        ctx.unsupported(node, "input 3 (axes) must be a constant", [3])
    if steps_k is None and ctx.has(node, 4):
        ctx.unsupported(node, "input 4 (steps) must be a constant", [4])
    n = None
    for k in (starts_k, ends_k):
        if k is not None:
            n = k.size
    if n is None:
        s_in = ctx.input(node, 1)
        n = s_in.shape[0] if s_in.shape else None
        if n is None:
            ctx.unsupported(node, "bounds of unknown length")
    axes = [_axis(v, rank) for v in _ints(axes_k)] if axes_k is not None else list(range(n))
    steps = _ints(steps_k) if steps_k is not None else [1] * len(axes)
    if starts_k is not None and ends_k is not None:
        return [
            ctx.op(
                "slice",
                [x],
                starts=_clamp64(starts_k),
                ends=_clamp64(ends_k),
                axes=axes,
                steps=steps,
            )
        ]
    starts = ctx.input(node, 1)
    ends = ctx.input(node, 2)
    if starts.dtype != "i64":
        starts = ctx.op("cast", [starts], to="i64")
    if ends.dtype != "i64":
        ends = ctx.op("cast", [ends], to="i64")
    axes_v = ctx.constant(np.asarray(axes, np.int64), f"{node.output[0]}/axes")
    steps_v = ctx.constant(np.asarray(steps, np.int64), f"{node.output[0]}/steps")
    return [ctx.op("slice", [x, starts, ends, axes_v, steps_v])]


def _clamp64(a: np.ndarray) -> list[int]:
    lim = np.iinfo(np.int64)
    return [int(max(lim.min, min(lim.max, int(v)))) for v in np.asarray(a).reshape(-1)]


@onnx_op("Pad", note="`pad {pads, mode, value}` or `pad(x, pads)` (modes constant, reflect, edge, "
         "wrap)")
def _pad(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    mode = ctx.attrs(node).get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        ctx.unsupported(node, f"mode {mode!r}")
    pk = ctx.known_input(node, 1)
    if pk is None:
        pads_v = ctx.input(node, 1)
        if ctx.has(node, 3):  # the full [begins..., ends...] vector, zeros off the axes
            axes = [_axis(v, rank) for v in _ints(ctx.const_input(node, 3, "axes"))]
            if pads_v.dtype != "i64":
                pads_v = ctx.op("cast", [pads_v], to="i64")
            zero = ctx.constant(np.zeros(1, np.int64), "pad/zeros")
            pieces = []
            for side in range(2):
                for d in range(rank):
                    if d in axes:
                        j = side * len(axes) + axes.index(d)
                        pieces.append(ctx.op("slice", [pads_v], starts=[j], ends=[j + 1],
                                             axes=[0], steps=[1]))
                    else:
                        pieces.append(zero)
            pads_v = ctx.op("concat", pieces, axis=0)
        return [_padded(ctx, node, [x, pads_v], mode=mode)]
    pads = _ints(pk)
    if ctx.has(node, 3):
        axes = [_axis(v, rank) for v in _ints(ctx.const_input(node, 3, "axes"))]
        full = [0] * (2 * rank)
        for j, ax in enumerate(axes):
            full[ax] = pads[j]
            full[rank + ax] = pads[len(axes) + j]
        pads = full
    return [_padded(ctx, node, [x], pads=pads, mode=mode)]


def _padded(ctx: OnnxGraphImporter, node: Any, operands: list[Value], **attrs: Any) -> Value:
    """``pad`` with ONNX Pad's ``constant_value`` (input 2): an attribute when known, else
    the value put where a padded mask of ones is 0."""
    vk = ctx.known_input(node, 2) if ctx.has(node, 2) else np.zeros(())
    if vk is not None or attrs.get("mode") != "constant":
        value = 0.0 if vk is None or vk.size == 0 else float(vk.reshape(-1)[0])
        return ctx.op("pad", operands, value=value, **attrs)
    x = operands[0]
    y = ctx.op("pad", operands, value=0.0, **attrs)
    one = ctx.constant(np.ones((), _np_dtype(x.dtype)), "pad/one")
    mask = ctx.op("pad", [ctx.op("fill", [_shape_of(ctx, x), one]), *operands[1:]], value=0.0,
                  **attrs)
    outside = ctx.op("equal", [mask, ctx.constant(np.zeros((), _np_dtype(x.dtype)), "pad/zero")])
    return ctx.op("select", [outside, ctx.input(node, 2), y])


@onnx_op("Gather", note="`gather {axis}` (constant negative indices normalised)")
def _gather(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    axis = _axis(int(ctx.attrs(node).get("axis", 0)), _rank(ctx, x))
    ik = ctx.known_input(node, 1)
    if ik is not None and (ik < 0).any():
        dim = _dims(ctx, x)[axis]
        if dim is None:
            ctx.unsupported(node, "negative indices into a dynamic dimension")
        ik = np.where(ik < 0, ik + dim, ik)
        idx = ctx.constant(ik, f"{node.input[1]}/normalised")
    else:
        idx = ctx.input(node, 1)
    return [ctx.op("gather", [x, idx], axis=axis, batch_dims=0)]


@onnx_op("GatherND", note="`gather_nd {batch_dims}`")
def _gather_nd(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    bd = int(ctx.attrs(node).get("batch_dims", 0))
    return [ctx.op("gather_nd", [ctx.input(node, 0), ctx.input(node, 1)], batch_dims=bd)]


@onnx_op("Unsqueeze", note="`expand_dims` per axis")
def _unsqueeze(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    a = ctx.attrs(node)
    axes = [int(v) for v in a["axes"]] if "axes" in a else _ints(ctx.const_input(node, 1, "axes"))
    out_rank = _rank(ctx, x) + len(axes)
    y = x
    for ax in sorted(_axis(v, out_rank) for v in axes):
        y = ctx.op("expand_dims", [y], axis=ax)
    return [y]


@onnx_op("Squeeze", note="`squeeze {axes}`")
def _squeeze(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    a = ctx.attrs(node)
    if "axes" in a:
        axes = [int(v) for v in a["axes"]]
    elif ctx.has(node, 1):
        axes = _ints(ctx.const_input(node, 1, "axes"))
    else:
        dims = _dims(ctx, x)
        if None in dims:
            ctx.unsupported(node, "squeezing all unit dims of a dynamically shaped input", [0])
        axes = [i for i, d in enumerate(dims) if d == 1]
    return [ctx.op("squeeze", [x], axes=sorted(_axis(v, rank) for v in axes))]


@onnx_op("Tile", note="`tile {multiples}` or `tile(x, multiples)`")
def _tile(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    k = ctx.known_input(node, 1)
    if k is not None:
        return [ctx.op("tile", [x], multiples=_ints(k))]
    return [ctx.op("tile", [x, ctx.input(node, 1)])]


@onnx_op("Expand", note="`broadcast_to` (static result shape) or `add` of `fill(shape, 0)`")
def _expand(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    k = ctx.known_input(node, 1)
    static = _static_shape(x)
    if k is not None and static is not None:
        target = np.broadcast_shapes(static, tuple(_ints(k)))
        if tuple(target) == static:
            return [x]
        shape = ctx.constant(np.asarray(target, np.int64), f"{node.output[0]}/shape")
        return [ctx.op("broadcast_to", [x, shape])]
    # Bidirectional broadcast at run time: x + zeros(shape) (logical_or for booleans).
    zeros = ctx.op(
        "fill",
        [
            ctx.input(node, 1),
            ctx.constant(np.zeros((), _np_dtype(x.dtype)), f"{node.output[0]}/zero"),
        ],
    )
    return [ctx.op("logical_or" if x.dtype == "i1" else "add", [x, zeros])]


@onnx_op("ConstantOfShape", note="`fill(shape, value)` (known shape: a constant)")
def _constant_of_shape(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    from pytfrt.compiler.frontends.onnx_proto import to_array

    a = [x for x in node.attribute if x.name == "value"]
    value = to_array(a[0].t).reshape(()) if a else np.zeros((), np.float32)
    return [ctx.op("fill", [ctx.input(node, 0), ctx.constant(value, f"{node.output[0]}/value")])]


@onnx_op("Range", note="`range(start, limit, delta)`")
def _range(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    return [ctx.op("range", [ctx.input(node, 0), ctx.input(node, 1), ctx.input(node, 2)])]


@onnx_op("OneHot", note="`one_hot(indices, depth, on, off) {axis}` (negative indices + depth)")
def _one_hot(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    vk = ctx.const_input(node, 2, "values")
    idx = ctx.input(node, 0)
    depth = ctx.input(node, 1)
    if idx.dtype != "i64":
        idx = ctx.op("cast", [idx], to="i64")
    if depth.dtype != "i64":
        depth = ctx.op("cast", [depth], to="i64")
    if depth.shape != ():
        depth = ctx.op("reshape", [depth], shape=[])
    # ONNX counts a negative index from the end (index + depth); out of range stays all off
    zero = ctx.constant(np.asarray(0, np.int64), "onehot/zero")
    idx = ctx.op("select", [ctx.op("less", [idx, zero]), ctx.op("add", [idx, depth]), idx])
    axis = int(ctx.attrs(node).get("axis", -1))
    off = ctx.constant(vk.reshape(-1)[0], f"{node.output[0]}/off")
    on = ctx.constant(vk.reshape(-1)[1], f"{node.output[0]}/on")
    return [ctx.op("one_hot", [idx, depth, on, off], axis=axis)]


@onnx_op("NonZero", note="`where` + `transpose` (ONNX gives `[rank, n]`)")
def _nonzero(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    w = ctx.op("where", [ctx.input(node, 0)])
    return [ctx.op("transpose", [w], perm=[1, 0])]


@onnx_op("TopK", note="`top_k(x, k)` (other axes via `transpose`; `largest = 0` via `neg`)")
def _top_k(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    rank = _rank(ctx, x)
    axis = _axis(int(a.get("axis", -1)), rank)
    largest = bool(a.get("largest", 1))
    k = ctx.input(node, 1)
    if k.shape and len(k.shape) == 1:
        k = ctx.op("reshape", [k], shape=[])
    if axis != rank - 1:
        perm = list(range(rank))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        x = ctx.op("transpose", [x], perm=perm)
    def flip(v: Value) -> Value:  # order-reversing and its own inverse
        if _is_float(v):
            return ctx.op("neg", [v])
        if v.dtype == "i1":
            ctx.unsupported(node, "largest = 0 on bool")
        # ~v as (all ones) - v: no overflow at the signed minimum, no wrap of unsigned 0
        ones = np.asarray(~np.zeros((), dtype=_np_dtype(v.dtype)))
        return ctx.op("sub", [ctx.constant(ones, "topk/ones"), v])

    if not largest:
        x = flip(x)
    vals, idx = ctx.op("top_k", [x, k], sorted=bool(a.get("sorted", 1)), n_results=2)
    if not largest:
        vals = flip(vals)
    if idx.dtype != "i64":
        idx = ctx.op("cast", [idx], to="i64")
    if axis != rank - 1:
        vals = ctx.op("transpose", [vals], perm=perm)
        idx = ctx.op("transpose", [idx], perm=perm)
    return [vals, idx]


@onnx_op("DepthToSpace", note="`depth_to_space {block_size, layout = NCHW, mode}` (DCR, CRD)")
def _depth_to_space(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    return [
        ctx.op(
            "depth_to_space",
            [ctx.input(node, 0)],
            block_size=int(a["blocksize"]),
            layout="NCHW",
            mode=a.get("mode", "DCR"),
        )
    ]


@onnx_op("SpaceToDepth", note="`space_to_depth {block_size, layout = NCHW, mode}` (DCR, CRD)")
def _space_to_depth(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    return [
        ctx.op(
            "space_to_depth",
            [ctx.input(node, 0)],
            block_size=int(a["blocksize"]),
            layout="NCHW",
            mode=str(a.get("mode", "DCR")),
        )
    ]


@onnx_op("LRN", note="`lrn {axis = 1}` (odd `size`; TF's `alpha` = ONNX's `alpha / size`)")
def _lrn(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    size = int(a["size"])
    if size % 2 == 0:
        ctx.unsupported(node, "an even window size")
    return [
        ctx.op(
            "lrn",
            [ctx.input(node, 0)],
            depth_radius=(size - 1) // 2,
            bias=float(a.get("bias", 1.0)),
            alpha=float(a.get("alpha", 1e-4)) / size,
            beta=float(a.get("beta", 0.75)),
            axis=1,
        )
    ]


@onnx_op(
    "Resize", note="`resize {size, layout = NCHW, mode, ...}` (4-D, spatial, whole sizes); "
    "every other rank, mode and option: `resize_nd` (static output size)"
)
def _resize(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    from pytfrt.compiler.frontends.onnx_nd import resize_general

    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    dims = _dims(ctx, x)
    mode = a.get("mode", "nearest")
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    if (
        len(dims) != 4
        or mode not in ("nearest", "linear")
        or ctm in ("tf_crop_and_resize", "half_pixel_symmetric")
        or a.get("antialias", 0) or a.get("exclude_outside", 0) or "axes" in a
        or a.get("keep_aspect_ratio_policy", "stretch") != "stretch"
    ):
        return resize_general(ctx, node)
    sizes, scales = ctx.known_input(node, 3), ctx.known_input(node, 2)
    if ctx.has(node, 3):
        if sizes is None:
            ctx.unsupported(node, "input 3 (sizes) must be a constant", [3])
        out: list[int | None] = [int(v) for v in sizes.reshape(-1)]
    elif scales is not None and scales.size == 4:
        if None in dims[2:]:
            ctx.unsupported(node, "scales on dynamic spatial dimensions")
        out = list(dims[:2])
        for d, sc in zip(dims[2:], scales.reshape(-1)[2:], strict=True):
            n = int(math.floor(int(d or 0) * float(sc)))
            if not math.isclose(n, int(d or 0) * float(sc), abs_tol=1e-4):
                return resize_general(ctx, node)  # the scale, not the size, places samples
            out.append(n)
    else:
        ctx.unsupported(node, "input 2 (scales) or 3 (sizes) must be a constant", [2, 3])
    for i in (0, 1):
        if out[i] is not None and dims[i] is not None and out[i] != dims[i]:
            return resize_general(ctx, node)
    return [
        ctx.op(
            "resize",
            [x],
            size=[int(out[2] or 0), int(out[3] or 0)],
            layout="NCHW",
            mode=mode,
            coordinate_transformation_mode=ctm,
            nearest_mode=a.get("nearest_mode", "round_prefer_floor"),
        )
    ]


@onnx_op("GatherElements", note="`gather_elements {axis}` (ONNX family)")
def _gather_elements(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    x = ctx.input(node, 0)
    axis = _axis(int(ctx.attrs(node).get("axis", 0)), _rank(ctx, x))
    return [ctx.op("gather_elements", [x, ctx.input(node, 1)], axis=axis)]


@onnx_op("ScatterElements", note="`scatter_elements {axis, reduction}` (ONNX family)")
def _scatter_elements(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    axis = _axis(int(a.get("axis", 0)), _rank(ctx, x))
    ops = [x, ctx.input(node, 1), ctx.input(node, 2)]
    return [ctx.op("scatter_elements", ops, axis=axis, reduction=a.get("reduction", "none"))]


@onnx_op("ScatterND", note="`scatter_nd`; with a reduction `scatter_nd_reduce {reduction}`")
def _scatter_nd(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    reduction = str(ctx.attrs(node).get("reduction", "none"))
    operands = [ctx.input(node, i) for i in range(3)]
    if reduction != "none":
        return [ctx.op("scatter_nd_reduce", operands, reduction=reduction)]
    return [ctx.op("scatter_nd", operands)]


@onnx_op("Einsum", note="`einsum {equation}` (ONNX family)")
def _einsum(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    vals = [ctx.input(node, i) for i in range(len(node.input))]
    return [ctx.op("einsum", vals, equation=str(ctx.attrs(node)["equation"]))]


@onnx_op("Trilu", note="`trilu {upper, k}` (constant k; ONNX family)")
def _trilu(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    k = ctx.const_input(node, 1, "k") if ctx.has(node, 1) else np.zeros(())
    upper = bool(ctx.attrs(node).get("upper", 1))
    return [ctx.op("trilu", [ctx.input(node, 0)], upper=upper, k=int(k.reshape(-1)[0]))]


_CONSTANT_LISTS = {"value_float": np.float32, "value_floats": np.float32,
                   "value_int": np.int64, "value_ints": np.int64}


@onnx_op("Constant", note="a known value (import-time constant)")
def _constant(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    from pytfrt.compiler.frontends.onnx_proto import attribute_value, to_array

    if len(node.attribute) == 1 and not node.attribute[0].ref_attr_name:
        (a,) = node.attribute
        if a.name == "value":
            return [to_array(a.t)]
        if a.name in _CONSTANT_LISTS:
            return [np.array(attribute_value(a), dtype=_CONSTANT_LISTS[a.name])]
    res = ctx._reference(node)  # sparse_value, value_string(s)
    if res is None:
        ctx.unsupported(node, "this form of Constant")
    return res


def supported_ops() -> list[str]:
    """The supported ONNX op types, sorted."""
    return sorted(ONNX_OPS)


def ops_markdown() -> str:
    """The "ONNX" section of ``docs/ops.md`` (generated from :data:`ONNX_OPS`)."""
    lines = [
        "## ONNX",
        "",
        "Generated from `pytfrt.compiler.frontends.onnx_mapping.ONNX_OPS` by",
        "`ops_markdown()` (a test checks that this section and the table agree). Default domain,",
        "opsets 13 and later (older models are upgraded with ONNX's version converter). A node",
        "whose inputs are all known at import time is evaluated then (its ops by pytfrt's",
        "kernels; an op without a row here by `onnx.reference`), whatever its type. Every",
        "other node needs a row here, or an ONNX function body in its",
        "schema (Attention, the loss ops, RMSNormalization, LayerNormalization's extra outputs,",
        "CenterCropPad, RotaryEmbedding...: imported as that body, op by op); else the import",
        "raises `UnsupportedOpError`. An operand the graph dialect needs as an attribute that",
        "arrives as a graph input is specialised on at run time by `pytfrt.onnx_backend`.",
        "Rows `ai.onnx.ml.<op>` are ops of the ONNX-ML domain; sequences are lists of a length",
        "known at import (`onnx_sequence.py`).",
        "",
        "| ONNX op | emits |",
        "| --- | --- |",
    ]
    for t in supported_ops():
        lines.append(f"| `{t}` | {_NOTES.get(t, '')} |")
    return "\n".join(lines) + "\n"


__all__ = ["ONNX_OPS", "OnnxGraphImporter", "ops_markdown", "supported_ops"]

# Control flow (If, Loop) registers its handlers in ONNX_OPS on import.
from pytfrt.compiler.frontends import onnx_control as _onnx_control  # noqa: E402,F401

# Ops composed from catalogue ops (trigonometry, Hardmax, LpNormalization...) register on import.
from pytfrt.compiler.frontends import onnx_more as _onnx_more  # noqa: E402,F401
from pytfrt.compiler.frontends import onnx_nd as _onnx_nd  # noqa: E402,F401

# The quantised operators (QuantizeLinear, DequantizeLinear, QLinearConv...) register on import.
from pytfrt.compiler.frontends import onnx_quant as _onnx_quant  # noqa: E402,F401

# LSTM, GRU and RNN register theirs (tg.recurrent) on import.
from pytfrt.compiler.frontends import onnx_recurrent as _onnx_recurrent  # noqa: E402,F401

# Sequence ops (sequences of a length known at import) register on import.
from pytfrt.compiler.frontends import onnx_sequence as _onnx_sequence  # noqa: E402,F401

# StringSplit, StringNormalizer and TfIdfVectorizer (the onnx_text family) register on import,
# and the ai.onnx.ml ops (as "ai.onnx.ml.<op>").
from pytfrt.compiler.frontends import onnx_text as _onnx_text  # noqa: E402,F401

# The optimizers of ai.onnx.preview.training (Adagrad, Adam, Momentum) register on import.
from pytfrt.compiler.frontends import onnx_training as _onnx_training  # noqa: E402,F401
