"""Translation of TF graphs (a concrete function's GraphDef and its function library) into tg.

:class:`GraphImporter` holds what one import shares: the ``GraphBuilder``, the function library,
the variables (frozen into constants, or kept as variables when the program writes any), and
the tg functions already made for control-flow bodies. :class:`FunctionContext` is the tg
function being filled and the helpers converters call (``cx.op``, ``cx.reshape``...).

Order: nodes are translated in a topological order of data *and* control edges that keeps
TF's node order among independent nodes, so stateful ops (variable reads and writes) reach
the graph dialect in an order that respects the source program's control dependencies. Only
nodes that feed an output or have a side effect (a variable write, or a call / control-flow op
whose body has one) are translated: dead nodes never cause an unsupported-op error.

Errors: a node that cannot be expressed raises ``UnsupportedOpError(op_type, node, where)``;
``where`` is the Python frame that created the node (first frame outside TF and Keras), or the
library function and the source (SavedModel directory...). Single-threaded (one import).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.backends.cpu.strings import as_text
from pytfrt.compiler.errors import GraphError, UnsupportedOpError
from pytfrt.compiler.frontends import tf_complex
from pytfrt.compiler.frontends.tf_fold import fold
from pytfrt.compiler.frontends.tf_registry import TF_OPS, tf_op
from pytfrt.compiler.frontends.tf_values import TV, ConversionError, ResourceRef, attr

SIDE_EFFECT_OPS = frozenset({
    "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
    "ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyKerasMomentum",
    "ResourceApplyAdam", "ResourceApplyAdagrad", "ResourceApplyRMSProp",
})  # fmt: skip
"""Ops translated even when no output depends on them."""

NO_EFFECT_STATEFUL_OPS = frozenset({
    "ReadVariableOp", "ResourceGather", "ResourceGatherNd", "VarHandleOp", "VarIsInitializedOp",
    "VariableShape", "Placeholder", "HashTableV2", "MutableHashTableV2", "LookupTableFindV2",
    "LookupTableSizeV2", "LookupTableExportV2", "AnonymousHashTable", "RandomUniform",
    "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal", "RandomShuffle",
    "StatelessRandomGetKeyCounter", "StatelessRandomGetAlg", "DestroyResourceOp",
    "TensorListReserve", "EmptyTensorList",
})  # fmt: skip
"""Ops TF marks stateful whose only effects are reads (or the TF-internal state of a random
generator or resource lifetime): dropped like any pure op when nothing uses them. Every other
stateful op (``PrintV2``, ``Assert``, ``ResourceScatterAdd``, summaries, file writes...) is
translated even when nothing depends on it, so it either runs or the import fails naming it."""

OUTPUT_OPS = frozenset({"PrintV2", "Assert"})
"""Stateful ops whose only effect is output: they keep their order but, unlike variable writes,
do not make the import keep the variables as variables (they stay frozen weights)."""


def stateful_with_effects(op_type: str) -> bool:
    """True if TF declares ``op_type`` stateful and it is not a known read-only op."""
    if op_type in NO_EFFECT_STATEFUL_OPS:
        return False
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(op_type)
    return bool(op_def is not None and op_def.is_stateful)


CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
CONTROL_OPS = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"})
_FUNC_ATTRS = ("f", "then_branch", "else_branch", "cond", "body", "branches")

# Frames of these libraries (and of pytfrt itself) are not "the user's line" of an error.
LIBRARY_FRAMES = ("/tensorflow/", "/keras/", "/tf_keras/", "/absl/", "<frozen")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def is_library_frame(filename: str) -> bool:
    """Whether a frame of ``filename`` is TensorFlow's, Keras's or pytfrt's, not the user's."""
    return filename.startswith(_PACKAGE) or any(s in filename for s in LIBRARY_FRAMES)


def python_frame(op: Any) -> str:
    """``file:line`` of the first frame outside TF/Keras/pytfrt that created ``op`` (or "")."""
    tb = getattr(op, "traceback", None) or []
    for frame in reversed(list(tb)):
        name = str(getattr(frame, "filename", ""))
        if not is_library_frame(name):
            return f"{name}:{getattr(frame, 'lineno', '?')}"
    return ""


class LibraryGraph:
    """One TF graph to translate: its nodes, inputs (placeholder names) and outputs."""

    def __init__(
        self, name: str, graph_def: Any, inputs: list[str], outputs: list[str], graph: Any = None
    ) -> None:
        self.name = name
        self.nodes = list(graph_def.node)
        self.by_name = {n.name: n for n in self.nodes}
        self.inputs = inputs
        self.outputs = outputs
        self.graph = graph  # the tf.Graph, for node tracebacks (None for library functions)


def split_input(ref: str) -> tuple[str, int, bool]:
    """``"node:1"`` -> ``("node", 1, False)``; ``"^node"`` -> ``("node", 0, True)``."""
    if ref.startswith("^"):
        return ref[1:], 0, True
    name, _, idx = ref.partition(":")
    return name, int(idx) if idx else 0, False


def topological_order(nodes: Sequence[Any]) -> list[Any]:
    """The nodes in a topological order of data and control edges, stable in node order."""
    index = {n.name: i for i, n in enumerate(nodes)}
    indeg = [0] * len(nodes)
    users: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for ref in n.input:
            src = index.get(split_input(ref)[0])
            if src is not None:
                indeg[i] += 1
                users[src].append(i)
    heap = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(heap)
    order: list[Any] = []
    while heap:
        i = heapq.heappop(heap)
        order.append(nodes[i])
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, u)
    if len(order) != len(nodes):
        raise GraphError("the TF graph has a cycle")
    return order


class GraphImporter:
    """State shared by every function of one import (see the module docstring).

    Args:
        gb: the ``GraphBuilder`` receiving the module.
        library: TF function library, name -> ``FunctionDef``.
        variables: variable name -> initial value (NumPy), for resource handles.
        keep_variables: emit ``read_variable``/``assign_*`` (True) or freeze reads into constants.
        source: what is imported, for error messages (``"tf.function 'f'"``, a directory...).
    """

    def __init__(
        self,
        gb: Any,
        library: dict[str, Any],
        variables: dict[str, np.ndarray],
        keep_variables: bool,
        source: str,
    ) -> None:
        self.gb = gb
        self.library = library
        self.variables = variables
        self.keep_variables = keep_variables
        self.source = source
        self._graphs: dict[str, LibraryGraph] = {}
        self._functions: dict[Any, tuple[str, list[int]]] = {}
        self._side_effects: dict[tuple[str, bool], bool] = {}
        self._declared: set[str] = set()
        self._names: set[str] = set()

    # -- the library ----------------------------------------------------------------------
    def library_graph(self, fname: str) -> LibraryGraph:
        """The graph of library function ``fname`` (converted once with TF's importer)."""
        if fname not in self._graphs:
            if fname not in self.library:
                raise ConversionError(f"function '{fname}' is not in the function library")
            from tensorflow.python.framework.function_def_to_graph import function_def_to_graph

            fg = function_def_to_graph(self.library[fname])
            self._graphs[fname] = LibraryGraph(
                fname,
                fg.as_graph_def(),
                [t.op.name for t in fg.inputs],
                [t.name for t in fg.outputs],
            )
        return self._graphs[fname]

    def called_functions(self, node: Any) -> list[str]:
        out: list[str] = []
        for key in _FUNC_ATTRS:
            if key in node.attr:
                v = attr(node, key)
                out += v if isinstance(v, list) else [v]
        return out

    def has_side_effects(self, node: Any, *, state_only: bool = False) -> bool:
        """True for variable writes, other stateful ops (``PrintV2``...), and calls / control
        flow whose bodies contain one; ``state_only``: not counting :data:`OUTPUT_OPS`."""
        if node.op in SIDE_EFFECT_OPS:
            return True
        if node.op not in CALL_OPS and node.op not in CONTROL_OPS:
            return stateful_with_effects(node.op) and not (state_only and node.op in OUTPUT_OPS)
        return any(
            self._function_has_side_effects(f, state_only) for f in self.called_functions(node)
        )

    def _function_has_side_effects(self, fname: str, state_only: bool) -> bool:
        key = (fname, state_only)
        if key not in self._side_effects:
            self._side_effects[key] = False  # recursion guard
            fdef = self.library.get(fname)
            if fdef is None:
                return False
            self._side_effects[key] = any(
                self.has_side_effects(n, state_only=state_only) for n in fdef.node_def
            )
        return self._side_effects[key]

    def any_side_effects(self, nodes: Sequence[Any], *, state_only: bool = False) -> bool:
        return any(self.has_side_effects(n, state_only=state_only) for n in nodes)

    # -- variables ------------------------------------------------------------------------
    def variable_tv(self, cx: FunctionContext, ref: ResourceRef) -> TV:
        """The value of a variable read: a named constant (frozen) or a ``read_variable``."""
        value = self.variables[ref.name]
        if not self.keep_variables:
            return TV(const=value, name=ref.name)
        self.declare_variable(ref.name)
        return cx.op("read_variable", [], name=ref.name)

    def declare_variable(self, name: str) -> None:
        if name not in self._declared:
            self.gb.variable(name, self.variables[name])
            self._declared.add(name)

    # -- functions for control-flow bodies ------------------------------------------------
    def unique_name(self, base: str) -> str:
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "f"
        if name[0].isdigit():
            name = "f_" + name
        out, i = name, 1
        while out in self._names or out == "main":
            out = f"{name}_{i}"
            i += 1
        self._names.add(out)
        return out

    def body_function(
        self,
        fname: str,
        args: list[TV],
        static: list[bool],
        *,
        boolean_result: bool = False,
        results: list[int] | None = None,
    ) -> tuple[str, list[int]]:
        """A tg function for library function ``fname`` called with ``args``.

        Arguments marked ``static`` (constants, resources) are bound inside the body instead
        of being passed. ``boolean_result``: the function returns its first output as an i1
        scalar (a loop condition); ``results``: which outputs it returns (default all).
        Returns the tg function name and the indices of the dynamic args. Bodies are made
        once per (function, static values, dynamic types, results).
        """
        key = (
            fname,
            boolean_result,
            None if results is None else tuple(results),
            tuple(
                _static_key(a) if s else ("dyn", a.dtype, a.shape)
                for a, s in zip(args, static, strict=True)
            ),
        )
        if key in self._functions:
            return self._functions[key]
        lg = self.library_graph(fname)
        dyn = [i for i, s in enumerate(static) if not s]
        inputs = [(f"arg{i}", args[i].shape, args[i].dtype) for i in dyn]
        tg_name = self.unique_name(fname)
        fb = self.gb.function(tg_name, inputs=inputs)
        cx = FunctionContext(self, fb, f"function '{fname}' of {self.source}")
        bindings: list[TV] = []
        it = iter(fb.arguments)
        for a, s in zip(args, static, strict=True):
            if s:
                bindings.append(a)
                continue
            arg = TV(next(it))
            arg.list_elem = a.list_elem
            bindings.append(arg)
        outs = cx.translate(lg, bindings)
        if results is not None:
            outs = [outs[i] for i in results]
        if boolean_result:
            cond = outs[0]
            if cond.dtype != "i1":
                cond = cx.op("not_equal", [cond, cx.scalar(0, cond.dtype)])
            if cond.rank not in (0, None):
                cond = cx.reshape(cond, [])
            outs = [cond]
        for tv in outs:
            if tv.resource is not None:
                raise ConversionError(f"function '{fname}' returns a resource handle")
        cx.finish_body(outs)
        self._functions[key] = (tg_name, dyn)
        return tg_name, dyn


def _static_key(tv: TV) -> Any:
    if tv.resource is not None:
        return ("res", tv.resource.name)
    if tv.const is not None:
        return ("const", tv.const.dtype.str, tv.const.shape, tv.const.tobytes())
    raise GraphError("only constants and resources can be bound statically")


class FunctionContext:
    """The tg function being built, and the helpers converters use.

    Attributes:
        imp: the import's :class:`GraphImporter`.
        fb: the ``FunctionBuilder``.
        where: the source of the graph being translated (for errors).
        node: the TF node being translated.
        lg: the graph being translated (its nodes by name, for converters that look at how
            an operand was computed).
    """

    def __init__(self, imp: GraphImporter, fb: Any, where: str) -> None:
        self.imp = imp
        self.fb = fb
        self.where = where
        self.node: Any = None
        self.graph: Any = None
        self.lg: LibraryGraph | None = None  # the graph being translated
        self._materialized: dict[int, tuple[TV, Any]] = {}

    # -- translating a graph --------------------------------------------------------------
    def translate(self, lg: LibraryGraph, bindings: list[TV]) -> list[TV]:
        """Translate graph ``lg`` with its inputs bound to ``bindings``; returns its outputs."""
        values: dict[str, list[TV]] = {}
        for name, tv in zip(lg.inputs, bindings, strict=True):
            values[name] = [tv]
        needed = self._needed(lg)
        saved = self.graph, self.node, self.lg
        self.graph, self.lg = lg.graph, lg
        try:
            for node in topological_order(lg.nodes):
                if node.name in values or node.name not in needed:
                    continue
                values[node.name] = self._convert_node(node, values)
            out: list[TV] = []
            for ref in lg.outputs:
                name, idx, _ = split_input(ref)
                out.append(values[name][idx])
            return out
        finally:
            self.graph, self.node, self.lg = saved

    def _needed(self, lg: LibraryGraph) -> set[str]:
        roots = [split_input(r)[0] for r in lg.outputs]
        roots += [n.name for n in lg.nodes if self.imp.has_side_effects(n)]
        needed: set[str] = set()
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name in needed or name not in lg.by_name:
                continue
            needed.add(name)
            for ref in lg.by_name[name].input:
                src, _, ctrl = split_input(ref)
                if not ctrl:
                    stack.append(src)
        return needed

    def _where(self, node: Any) -> str:
        if self.graph is not None:
            try:
                frame = python_frame(self.graph.get_operation_by_name(node.name))
            except (KeyError, ValueError):
                frame = ""
            if frame:
                return frame
        return self.where

    def _convert_node(self, node: Any, values: dict[str, list[TV]]) -> list[TV]:
        ins: list[TV] = []
        for ref in node.input:
            src, idx, ctrl = split_input(ref)
            if ctrl:
                continue
            outs = values.get(src)
            if outs is None or idx >= len(outs):
                raise UnsupportedOpError(
                    node.op, node.name, self._where(node), f"input '{ref}' is missing"
                )
            ins.append(outs[idx])
        entry = TF_OPS.get(node.op)
        if entry is None:
            raise UnsupportedOpError(node.op, node.name, self._where(node))
        self.node = node
        try:
            if tf_complex.involved(node, ins):
                if node.op not in tf_complex.SHAPE_OPS:
                    return tf_complex.convert_complex(self, node, ins)
                ins = [tf_complex.real_part(tv) for tv in ins]  # the same shape
            if not any(tv.resource is not None for tv in ins):
                folded = fold(node, ins)
                if folded is not None:
                    return self._with_lazy(entry.convert, node, ins, folded)
            outs = entry.convert(self, node, ins)
        except UnsupportedOpError:
            raise
        except (ConversionError, GraphError) as exc:
            raise UnsupportedOpError(node.op, node.name, self._where(node), str(exc)) from exc
        return outs

    def _with_lazy(
        self, convert: Callable[..., list[TV]], node: Any, ins: list[TV], folded: list[TV]
    ) -> list[TV]:
        """Folded outputs; partial ones materialise through the converter when an op needs them."""
        cache: list[list[TV]] = []

        def run() -> list[TV]:
            if not cache:
                saved = self.node
                self.node = node
                try:
                    cache.append(convert(self, node, ins))
                except (ConversionError, GraphError) as exc:
                    raise UnsupportedOpError(
                        node.op, node.name, self._where(node), str(exc)
                    ) from exc
                finally:
                    self.node = saved
            return cache[0]

        def thunk(i: int) -> Callable[[], Any]:
            return lambda: self.val(run()[i])

        out: list[TV] = []
        for i, tv in enumerate(folded):
            if tv.partial is not None and tv.const is None:
                lazy = TV(partial=tv.partial, dtype=tv.dtype, shape=tv.shape, thunk=thunk(i))
                lazy.syms = tv.syms
                tv = lazy
            out.append(tv)
        return out

    def finish_body(self, outs: list[TV], names: list[str] | None = None) -> None:
        vals = [self.val(tv) for tv in outs]
        self.fb.returns(vals, names=names) if names is not None else self.fb.returns(vals)

    # -- values -------------------------------------------------------------------------------
    def val(self, tv: TV) -> Any:
        """The tg value of ``tv`` (constants are materialised once per function)."""
        if tv._value is not None:
            return tv._value
        if tv.resource is not None:
            raise ConversionError(f"a resource handle ({tv.resource.name}) used as a tensor")
        key = id(tv)
        hit = self._materialized.get(key)
        if hit is not None:
            return hit[1]
        if tv.const is not None and tv.dtype == "string":  # a weight of str, as the runtime's
            text = [as_text(v) for v in np.asarray(tv.const).reshape(-1).tolist()]
            v = self.fb.constant(np.asarray(text, dtype=object).reshape(tv.const.shape))
        elif tv.const is not None:
            name = tv.name or (
                self.node.name if self.node is not None and tv.const.size > 64 else None
            )
            v = self.fb.constant(tv.const, name=name) if name else self.fb.constant(tv.const)
        elif tv._thunk is not None:
            v = tv._thunk()
        else:
            raise ConversionError("a value without a definition")
        self._materialized[key] = (tv, v)
        return v

    def op(self, op_name: str, operands: Sequence[TV], /, **attrs: Any) -> TV:
        """Emit ``tg.<op_name>`` with one result."""
        loc = self.node.name if self.node is not None else None
        v = self.fb.op(op_name, [self.val(t) for t in operands], loc=loc, **attrs)
        return TV(v)

    def ops(self, op_name: str, operands: Sequence[TV], n: int, /, **attrs: Any) -> list[TV]:
        """Emit ``tg.<op_name>`` with ``n`` results."""
        loc = self.node.name if self.node is not None else None
        vs = self.fb.op(op_name, [self.val(t) for t in operands], n_results=n, loc=loc, **attrs)
        if n == 1 and not isinstance(vs, list):
            vs = [vs]
        return [TV(v) for v in vs]

    def const(self, array: Any, name: str | None = None) -> TV:
        return TV(const=np.asarray(array), name=name)

    def scalar(self, value: float, dtype: str | None) -> TV:
        from pytfrt.compiler.frontends.tf_values import tg_to_np

        return TV(const=np.asarray(value, dtype=tg_to_np(dtype or "f32")))

    def weight_name(self, tv: TV) -> str | None:
        return tv.name

    def ints(self, tv: TV, what: str) -> list[int]:
        """A constant integer operand as a list (ConversionError if it is not constant)."""
        if tv.const is None:
            raise ConversionError(f"{what} must be constant")
        return [int(v) for v in np.asarray(tv.const).reshape(-1)]

    def last_axis(self, tv: TV) -> int:
        if tv.rank is None:
            raise ConversionError("the operand's rank must be known")
        return tv.rank - 1

    def reshape(self, x: TV, dims: Sequence[int | None]) -> TV:
        """``x`` reshaped to ``dims`` (``None``/-1: at most one unknown)."""
        shape = [-1 if d is None or d < 0 else int(d) for d in dims]
        if shape.count(-1) > 1:
            raise ConversionError("a reshape with more than one dynamic dimension")
        if (
            x.shape is not None
            and None not in x.shape
            and -1 not in shape
            and tuple(shape) == x.shape
        ):
            return x
        if x.const is not None and x.const.size <= 4096:
            return TV(const=x.const.reshape(shape))
        return self.op("reshape", [x], shape=shape)

    def transpose(self, x: TV, perm: Sequence[int]) -> TV:
        perm = [int(p) for p in perm]
        if perm == list(range(len(perm))):
            return x
        return self.op("transpose", [x], perm=perm)

    def as_i64(self, tv: TV) -> TV:
        """An integer tensor operand as i64 (shape operands of the dialect are i64)."""
        if tv.const is not None:
            return TV(const=np.asarray(tv.const, dtype=np.int64))
        if tv.dtype == "i64":
            return tv
        return self.op("cast", [tv], to="i64")


# -- graph structure ops ------------------------------------------------------------------


@tf_op(
    "Const",
    tg="`constant`",
    note="inline when small, else a weight named after the node",
    family="tf_graph",
)
def _const(cx: FunctionContext, node: Any, ins: list[TV]) -> list[TV]:
    value = attr(node, "value")
    if value.dtype == object:  # a string: fine as long as no translated op reads it
        return [TV(const=value, dtype="string")]
    return [TV(const=value, name=node.name if value.size > 64 else None)]


@tf_op("NoOp", tg="(none)", note="ordering only", family="tf_graph")
def _noop(cx: FunctionContext, node: Any, ins: list[TV]) -> list[TV]:
    return []


@tf_op(
    "Placeholder",
    tg="function argument",
    note="an unbound placeholder is an error",
    family="tf_graph",
)
def _placeholder(cx: FunctionContext, node: Any, ins: list[TV]) -> list[TV]:
    raise ConversionError("placeholder not bound to an input")


