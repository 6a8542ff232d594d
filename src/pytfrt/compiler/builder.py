"""GraphBuilder: the only API front ends use to create graph-dialect IR.

::

    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 784), "f32")])
    (x,) = fn.arguments
    w = fn.constant(np.ones((784, 10), np.float32), name="dense/kernel")
    y = fn.op("matmul", [x, w])
    fn.returns([y], names=["logits"])
    module = gb.finish()            # -> GraphModule

``fn.op`` checks attributes against the catalogue and infers result types at once (so front
ends see static shapes where they are known); errors are :class:`GraphError` naming the op.
Constants of at most :data:`INLINE_LIMIT` elements are inline ``value = dense<...>``; bigger
ones (and every named one) are weights of the module, referred to by ``weight = "name"``.

Not thread-safe: one builder per thread.  A :class:`GraphModule` is not modified by readers;
passes replace its ``module`` in place (see :mod:`pytfrt.compiler.passes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import builtin as b
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue

from pytfrt.compiler.attrs import to_xattr
from pytfrt.compiler.dialect import op_class
from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.ops import InferContext, get_opdef
from pytfrt.compiler.types import (
    TType,
    check_dtype,
    dtype_name,
    from_xdsl,
    normalize_shape,
    np_dtype,
    to_xdsl,
    ttype_of_array,
)
from pytfrt.signature import STRUCTURES, Signature, TensorSpec

INLINE_LIMIT = 64
"""Constants with at most this many elements (and no name) are inline values."""


class Value:
    """An SSA value of the graph: its type, and for constants its value."""

    __slots__ = ("ssa", "type", "const")

    def __init__(self, ssa: SSAValue, ttype: TType, const: np.ndarray | None = None) -> None:
        self.ssa = ssa
        self.type = ttype
        self.const = const

    @property
    def shape(self) -> tuple[int | None, ...] | None:
        """The shape (``None`` dims are dynamic; ``None`` if the rank is unknown)."""
        return self.type.shape

    @property
    def dtype(self) -> str:
        """The element type name (``f32``, ``i1``, ...)."""
        return self.type.dtype

    @property
    def rank(self) -> int | None:
        """The rank, or ``None`` if unknown."""
        return self.type.rank

    def __repr__(self) -> str:
        return f"Value({self.type})"


@dataclass
class GraphModule:
    """A module of the graph dialect plus its weights and signature.

    Attributes:
        module: the xDSL ``ModuleOp`` (entry function ``@main``).
        weights: weight name -> array (constants with ``weight = "name"``, variables' initial
            values).
        signature: the entry function's inputs/outputs and output structure.
        variables: names of the weights that are variables (state).
        zero_fill: constants whose weight is missing become zeros (for ``.mlir`` files, which
            hold no weights); otherwise a missing weight is an error.
    """

    module: b.ModuleOp
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    signature: Signature = field(default_factory=Signature)
    variables: tuple[str, ...] = ()
    zero_fill: bool = False

    def __str__(self) -> str:
        from pytfrt.mlir.printer import print_module

        return print_module(self.module, generic=False)

    def copy(self) -> GraphModule:
        """A copy that passes can rewrite without changing this one (the weight arrays are
        shared: passes replace weights, never write into them)."""
        return GraphModule(self.module.clone(), dict(self.weights), self.signature,
                           self.variables, self.zero_fill)

    def function(self, name: str = "main") -> FuncOp:
        """The function named ``name``.

        Raises:
            GraphError: if there is none.
        """
        for op in self.module.body.block.ops:
            if isinstance(op, FuncOp) and op.sym_name.data == name:
                return op
        raise GraphError(f"the module has no function @{name}")


class FunctionBuilder:
    """Builds one function of a :class:`GraphBuilder` (see the module docstring)."""

    def __init__(self, graph: GraphBuilder, name: str,
                 inputs: Sequence[tuple[str, Any, Any]]) -> None:
        self.graph = graph
        self.name = name
        self.input_names: list[str] = []
        types: list[TType] = []
        for i, spec in enumerate(inputs):
            if len(spec) != 3:
                raise GraphError(f"@{name}: input {i} must be (name, shape, dtype), got {spec!r}")
            iname, shape, dtype = spec
            types.append(TType(_dtype(dtype), normalize_shape(shape)))
            self.input_names.append(str(iname))
        self.block = Block(arg_types=[to_xdsl(t) for t in types])
        self.arguments = [Value(a, t) for a, t in zip(self.block.args, types, strict=True)]
        self.result_types: list[TType] | None = None
        self.output_names: list[str] = []
        self.structure = "tuple"
        self._op_count = 0

    # -- constants --------------------------------------------------------------------------
    def constant(self, value: Any, name: str | None = None, dtype: Any = None) -> Value:
        """A constant: an inline value if small and unnamed, else a weight named ``name``.

        Args:
            value: an array (or anything ``np.asarray`` accepts).
            name: the weight name (made unique if taken by a different array).
            dtype: convert the value to this element type / NumPy dtype first.

        Raises:
            GraphError: for a dtype the dialect does not have.
        """
        arr = np.asarray(value)
        if dtype is not None:
            arr = arr.astype(np_dtype(_dtype(dtype)))
        ttype = ttype_of_array(arr)
        if name is None and arr.size <= INLINE_LIMIT and ttype.dtype != "string":
            attrs: dict[str, Any] = {"value": to_xattr("dense", arr)}
        else:
            wname = self.graph._add_weight(name or f"const_{len(self.graph.weights)}", arr)
            attrs = {"weight": b.StringAttr(wname)}
        op = op_class("constant").create(result_types=[to_xdsl(ttype)], attributes=attrs)
        self.block.add_op(op)
        return Value(op.results[0], ttype, arr)

    # -- ops ----------------------------------------------------------------------------------
    def op(self, name: str, inputs: Sequence[Value] = (), /, *, n_results: int | None = None,
           loc: str | None = None, **attrs: Any) -> Any:
        """Append op ``tg.<name>``; returns its result Value, or a list if it has several.

        Args:
            name: the op name (``"matmul"`` or ``"tg.matmul"``).
            inputs: operand Values (of this function).
            n_results: the expected result count (checked); a list is returned when given
                and != 1, or when the op has several results.
            loc: source location (TF node name, ONNX node name, ``file:line``).
            attrs: the op's attributes (see the catalogue).

        Raises:
            GraphError: unknown op, bad attribute, bad operand count or types.
        """
        opdef = get_opdef(name)
        if opdef.name == "constant":
            raise GraphError("use FunctionBuilder.constant for tg.constant")
        for i, v in enumerate(inputs):
            if not isinstance(v, Value):
                raise GraphError(f"tg.{opdef.name}: operand {i} is not a Value: {v!r}")
        lo, hi = opdef.operand_range
        if len(inputs) < lo or (hi is not None and len(inputs) > hi):
            want = f"{lo}" if lo == hi else f"{lo} to {'any' if hi is None else hi}"
            raise GraphError(f"tg.{opdef.name}: takes {want} operands, got {len(inputs)}")
        full = opdef.check_attrs(attrs)
        ctx = InferContext(
            opdef.name,
            [v.type for v in inputs],
            full,
            [v.const for v in inputs],
            self.graph._function_types(),
            self.graph.variable_types,
        )
        try:
            results = opdef.infer(ctx)
        except GraphError as exc:
            raise GraphError(f"{exc}{_at(loc)}") from None
        except (TypeError, ValueError, IndexError) as exc:
            raise GraphError(f"tg.{opdef.name}: bad operands or attributes ({exc}){_at(loc)}") \
                from None
        if n_results is not None and n_results != len(results):
            raise GraphError(f"tg.{opdef.name}: has {len(results)} results, {n_results} expected")
        stored = opdef.stored_attrs(full)
        xattrs = {k: to_xattr(opdef.attrs[k].kind, stored[k]) for k in sorted(stored)}
        op = op_class(opdef.name).create(
            operands=[v.ssa for v in inputs],
            result_types=[to_xdsl(t) for t in results],
            attributes=xattrs,
        )
        if loc:
            op.location = b.NameLoc(b.StringAttr(str(loc)), b.UnknownLoc())
        self.block.add_op(op)
        self._op_count += 1
        values = [Value(r, t) for r, t in zip(op.results, results, strict=True)]
        if len(values) == 1 and n_results in (None, 1):
            return values[0]
        return values

    def returns(self, values: Sequence[Value], names: Sequence[str] | None = None,
                structure: str | None = None) -> None:
        """End the function with ``func.return values``.

        Args:
            values: the results.
            names: output names (default ``output_0``, ...).
            structure: ``single``/``tuple``/``list``/``dict`` (how ``CompiledModel`` returns
                them); default ``single`` for one value, else ``tuple``.

        Raises:
            GraphError: if called twice or with a bad argument.
        """
        if self.result_types is not None:
            raise GraphError(f"@{self.name}: returns() was already called")
        values = list(values)
        for i, v in enumerate(values):
            if not isinstance(v, Value):
                raise GraphError(f"@{self.name}: result {i} is not a Value: {v!r}")
        out_names = list(names) if names is not None else [f"output_{i}"
                                                            for i in range(len(values))]
        if len(out_names) != len(values) or len(set(out_names)) != len(out_names):
            raise GraphError(f"@{self.name}: need {len(values)} distinct output names, got "
                             f"{out_names}")
        structure = structure or ("single" if len(values) == 1 else "tuple")
        if structure not in STRUCTURES or (structure == "single" and len(values) != 1):
            raise GraphError(f"@{self.name}: bad output structure {structure!r}")
        self.block.add_op(ReturnOp(*[v.ssa for v in values]))
        self.result_types = [v.type for v in values]
        self.output_names = out_names
        self.structure = structure

    def _finish(self) -> FuncOp:
        if self.result_types is None:
            raise GraphError(f"@{self.name}: the function was not ended with returns()")
        ftype = b.FunctionType.from_lists(
            [a.type for a in self.block.args], [to_xdsl(t) for t in self.result_types]
        )
        func = FuncOp(self.name, ftype, Region(self.block))
        func.attributes["tg.input_names"] = b.ArrayAttr(
            [b.StringAttr(n) for n in self.input_names])
        func.attributes["tg.output_names"] = b.ArrayAttr(
            [b.StringAttr(n) for n in self.output_names])
        if self.name == "main":
            func.attributes["tg.structure"] = b.StringAttr(self.structure)
        return func


class GraphBuilder:
    """Builds a :class:`GraphModule`: its functions, weights and variables."""

    def __init__(self) -> None:
        self.functions: dict[str, FunctionBuilder] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.variable_types: dict[str, TType] = {}
        self._finished = False

    def function(self, name: str, inputs: Iterable[tuple[str, Any, Any]] = ()) -> FunctionBuilder:
        """A new function (``main`` is the entry; others are control-flow bodies).

        Args:
            name: the symbol name.
            inputs: ``(name, shape, dtype)`` per argument; ``None`` dims are dynamic.

        Raises:
            GraphError: if the name is taken or invalid.
        """
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.$-]*", name):
            raise GraphError(f"bad function name {name!r}")
        if name in self.functions:
            raise GraphError(f"function @{name} is already defined")
        fb = FunctionBuilder(self, name, list(inputs))
        self.functions[name] = fb
        return fb

    def variable(self, name: str, initial_value: Any) -> None:
        """Declare a variable (state) with its initial value (a weight of the same name).

        Raises:
            GraphError: if the name is taken.
        """
        if name in self.variable_types:
            raise GraphError(f"variable '{name}' is already declared")
        arr = np.asarray(initial_value)
        if name in self.weights:
            raise GraphError(f"weight name '{name}' is already taken by a constant")
        self.weights[name] = arr
        self.variable_types[name] = ttype_of_array(arr)

    def _add_weight(self, name: str, arr: np.ndarray) -> str:
        base, i = name, 1
        while name in self.weights:
            if self.weights[name] is arr:
                return name
            name = f"{base}_{i}"
            i += 1
        self.weights[name] = arr
        return name

    def _function_types(self) -> dict[str, tuple[list[TType], list[TType]]]:
        out = {}
        for name, fb in self.functions.items():
            if fb.result_types is not None:
                out[name] = ([a.type for a in fb.arguments], list(fb.result_types))
        return out

    def finish(self) -> GraphModule:
        """The module (call once, after every function's ``returns``).

        Raises:
            GraphError: no ``main``, a function not ended, or called twice.
        """
        if self._finished:
            raise GraphError("finish() was already called")
        if "main" not in self.functions:
            raise GraphError("the module has no @main function")
        funcs: list[Operation] = [fb._finish() for fb in self.functions.values()]
        self._finished = True
        module = b.ModuleOp(funcs)
        main = self.functions["main"]
        sig = Signature(
            tuple(TensorSpec(n, np_dtype(a.type.dtype), a.type.shape)
                  for n, a in zip(main.input_names, main.arguments, strict=True)),
            tuple(TensorSpec(n, np_dtype(t.dtype), t.shape)
                  for n, t in zip(main.output_names, main.result_types or [], strict=True)),
            main.structure,
        )
        # the module takes the weights: the builder sits in reference cycles (its functions
        # point back at it), and a copy here would keep every array alive until a collection
        weights, self.weights = self.weights, {}
        return GraphModule(module, weights, sig, tuple(self.variable_types))


def _dtype(d: Any) -> str:
    if isinstance(d, str):
        return check_dtype(d)
    return dtype_name(d)


def _at(loc: str | None) -> str:
    return f" (at {loc})" if loc else ""


def signature_of(module: b.ModuleOp) -> Signature:
    """The signature of a module's ``@main`` from its types and ``tg.*_names`` attributes.

    Raises:
        GraphError: if there is no ``@main``.
    """
    main = GraphModule(module).function("main")
    ins = [from_xdsl(t) for t in main.function_type.inputs.data]
    outs = [from_xdsl(t) for t in main.function_type.outputs.data]
    in_names = _names(main, "tg.input_names", "input", len(ins))
    out_names = _names(main, "tg.output_names", "output", len(outs))
    st = main.attributes.get("tg.structure")
    structure = st.data if isinstance(st, b.StringAttr) else ("single" if len(outs) == 1
                                                               else "tuple")
    return Signature(
        tuple(TensorSpec(n, np_dtype(t.dtype), t.shape) for n, t in zip(in_names, ins,
                                                                        strict=True)),
        tuple(TensorSpec(n, np_dtype(t.dtype), t.shape) for n, t in zip(out_names, outs,
                                                                        strict=True)),
        structure,
    )


def _names(func: FuncOp, key: str, prefix: str, n: int) -> list[str]:
    attr = func.attributes.get(key)
    if isinstance(attr, b.ArrayAttr) and len(attr.data) == n:
        return [e.data for e in attr.data]  # type: ignore[attr-defined]
    return [f"{prefix}_{i}" for i in range(n)]
