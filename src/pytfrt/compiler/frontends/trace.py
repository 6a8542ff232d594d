"""The Python tracing front end: a Python function over ``pytfrt.eager`` -> the graph dialect.

``@pytfrt.function`` (:mod:`pytfrt.function`) calls the user's function with
:class:`TracedValue` placeholders instead of arrays.  Every ``pytfrt.eager`` op and every Tensor
operator applied to a placeholder appends one catalogue op to the function being built (through
:class:`~pytfrt.compiler.builder.GraphBuilder`, the only IR-building API) and returns a new
placeholder; Python control flow runs at trace time (it unrolls), and :func:`cond` /
:func:`while_loop` build ``tg.if`` / ``tg.while`` with their bodies as functions of the module.

How eager ops reach the tracer: ``pytfrt.eager`` functions try their fast path (which accepts only
``eager.Tensor``), then the general path checks its arguments for
:class:`pytfrt.eager.TracedBase` instances and hands the op to :meth:`TracedValue._trace_eager`
(see :data:`EAGER_OPS` for the mapping of eager op names to catalogue ops).

Values from an enclosing trace (a control-flow body, or a traced function called inside another)
are *captured*: they become extra arguments of the body function.

Errors raised while tracing (:class:`TraceError`, a ``GraphError``) name the user's
``file:line``.  Not thread-safe per trace: a trace runs on the thread that started it (each thread
has its own stack of active traces).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt import eager
from pytfrt.backends.cpu.op_math import MATH
from pytfrt.compiler.builder import FunctionBuilder, GraphBuilder, GraphModule, Value
from pytfrt.compiler.errors import GraphError
from pytfrt.compiler.types import FLOAT_DTYPES, TType, dtype_name, np_dtype, to_xdsl


class TraceError(GraphError):
    """An error while tracing a Python function (the message names the user's file:line)."""


user_location = eager.call_site
"""``file:line`` of the innermost frame outside the pytfrt package (the user's code)."""


# -- the active traces (per thread) ------------------------------------------------------------

_local = threading.local()


def _stack() -> list[Tracer]:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s  # type: ignore[no-any-return]


def current() -> Tracer | None:
    """The innermost active trace of this thread, or ``None``."""
    s = _stack()
    return s[-1] if s else None


class Tracer:
    """One function being traced: its FunctionBuilder and captures from the enclosing trace.

    Args:
        graph: the module's builder.
        fb: the function.
        parent: the enclosing trace (for control-flow bodies), or ``None``.
        capture_order: for a body's second trace, the captured values' ids in argument order
            (their arguments exist already: see :func:`_body`).
    """

    def __init__(self, graph: GraphBuilder, fb: FunctionBuilder, parent: Tracer | None = None
                 ) -> None:
        self.graph = graph
        self.fb = fb
        self.parent = parent
        self.captures: dict[int, tuple[TracedValue, Value]] = {}
        self.fixed_captures = False

    def __enter__(self) -> Tracer:
        _stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stack().pop()

    def resolve(self, tv: TracedValue) -> Value:
        """The Value of ``tv`` in this function (capturing it from an enclosing trace)."""
        if tv.tracer is self:
            return tv.value
        hit = self.captures.get(id(tv))
        if hit is not None:
            return hit[1]
        if self.parent is None or self.fixed_captures:
            raise TraceError(f"a traced value of another function is used here "
                             f"({user_location()}): return it from that function instead")
        self.parent.resolve(tv)  # make sure every enclosing level captures it too
        fb = self.fb
        arg = fb.block.insert_arg(to_xdsl(tv.value.type), len(fb.block.args))
        value = Value(arg, tv.value.type)
        fb.arguments.append(value)
        fb.input_names.append(f"capture_{len(fb.input_names)}")
        self.captures[id(tv)] = (tv, value)
        return value

    # -- emitting ops -------------------------------------------------------------------------
    def constant(self, value: Any, dtype: Any = None) -> TracedValue:
        """A constant of this function (an inline value or a weight)."""
        arr = np.asarray(value, dtype=dtype) if dtype is not None else eager.as_array(value)
        try:
            return TracedValue(self, self.fb.constant(arr))
        except GraphError as exc:
            raise TraceError(f"{exc} (at {user_location()})") from None

    def value_of(self, x: Any, dtype: str | None = None) -> Value:
        """The Value for an operand: a traced value, or a constant made of ``x``."""
        if isinstance(x, TracedValue):
            return self.resolve(x)
        if isinstance(x, eager.Tensor):
            x = x.numpy()
        _check_operand(x)
        return self.fb.constant(np.asarray(x, dtype=None if dtype is None else np_dtype(dtype)))

    def emit(self, name: str, inputs: Sequence[Any], n_results: int | None = None,
             **attrs: Any) -> Any:
        """Append ``tg.<name>``; returns a TracedValue (or a list of them)."""
        loc = user_location()
        try:
            vals = [self.value_of(x) for x in inputs]
            out = self.fb.op(name, vals, n_results=n_results, loc=loc, **attrs)
        except GraphError as exc:
            if isinstance(exc, TraceError):
                raise
            raise TraceError(f"{exc} (at {loc})") from None
        if isinstance(out, list):
            return [TracedValue(self, v) for v in out]
        return TracedValue(self, out)


def _check_operand(x: Any) -> None:
    if x is None or isinstance(x, (str, bytes, dict, complex)):
        raise TraceError(f"cannot use {type(x).__name__} {x!r} as a tensor (at "
                         f"{user_location()})")


def tracer_for(*values: Any) -> Tracer:
    """The active trace that ``values`` (some TracedValues) belong in: the innermost one."""
    t = current()
    if t is None:
        tv = next(v for v in values if isinstance(v, TracedValue))
        return tv.tracer
    return t


# -- dtype rules ----------------------------------------------------------------------------------


def _dtype_of(x: Any) -> tuple[str, bool]:
    """``(element type name, weak)``: Python scalars are weak (they take the other's type)."""
    if isinstance(x, TracedValue):
        return x.value.dtype, False
    if isinstance(x, bool):
        return "i1", True
    if isinstance(x, int):
        return "i32", True
    if isinstance(x, float):
        return "f32", True
    if isinstance(x, eager.Tensor):
        return dtype_name(x.numpy().dtype), False
    _check_operand(x)
    return dtype_name(np.asarray(x).dtype), False


def binary_dtype(a: Any, b: Any) -> str:
    """The common element type of two operands (``eager.result_dtype``'s rules)."""
    da, wa = _dtype_of(a)
    db, wb = _dtype_of(b)
    try:
        return dtype_name(eager.result_dtype(np_dtype(da), wa, np_dtype(db), wb))
    except TypeError as exc:
        raise TraceError(f"{exc} (at {user_location()})") from None


def _cast_to(t: Tracer, x: Any, dtype: str) -> Any:
    if isinstance(x, TracedValue):
        if x.value.dtype == dtype:
            return x
        return t.emit("cast", [x], to=dtype)
    if isinstance(x, eager.Tensor):
        x = x.numpy()
    _check_operand(x)
    return t.constant(np.asarray(x, dtype=np_dtype(dtype)))


def binary(name: str, a: Any, b: Any) -> TracedValue:
    """``tg.<name>(a, b)`` with both operands promoted to their common type."""
    t = tracer_for(a, b)
    dtype = binary_dtype(a, b)
    if name == "div" and dtype not in FLOAT_DTYPES:
        dtype = "f32" if dtype in ("i1", "i8", "i16", "ui8", "ui16") else "f64"
    return t.emit(name, [_cast_to(t, a, dtype), _cast_to(t, b, dtype)])  # type: ignore[no-any-return]


def unary(name: str, x: Any, **attrs: Any) -> TracedValue:
    """``tg.<name>(x)``."""
    return tracer_for(x).emit(name, [x], **attrs)  # type: ignore[no-any-return]


def _float(x: TracedValue) -> TracedValue:
    if x.value.dtype in FLOAT_DTYPES:
        return x
    return tracer_for(x).emit("cast", [x], to="f32")  # type: ignore[no-any-return]


# -- TracedValue ---------------------------------------------------------------------------------


class TracedValue(eager.TracedBase):
    """A placeholder for a tensor inside a traced function (shape and dtype are static).

    Supports the eager Tensor operators and methods; anything that needs the value itself
    (``bool()``, ``float()``, ``numpy()``) raises :class:`TraceError` -- use :func:`cond` /
    :func:`while_loop` for data-dependent control flow.
    """

    __slots__ = ("tracer", "value")

    def __init__(self, tracer: Tracer, value: Value) -> None:
        self.tracer = tracer
        self.value = value

    @property
    def shape(self) -> tuple[int | None, ...]:
        """The static shape."""
        return tuple(self.value.shape or ())

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype."""
        return np_dtype(self.value.dtype)

    @property
    def ndim(self) -> int:
        """The rank."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.prod([d or 0 for d in self.shape]))

    def __repr__(self) -> str:
        return f"<traced {self.value.type}>"

    # -- operators ------------------------------------------------------------------------------
    def __add__(self, o: Any) -> TracedValue:
        return binary("add", self, o)

    def __radd__(self, o: Any) -> TracedValue:
        return binary("add", o, self)

    def __sub__(self, o: Any) -> TracedValue:
        return binary("sub", self, o)

    def __rsub__(self, o: Any) -> TracedValue:
        return binary("sub", o, self)

    def __mul__(self, o: Any) -> TracedValue:
        return binary("mul", self, o)

    def __rmul__(self, o: Any) -> TracedValue:
        return binary("mul", o, self)

    def __truediv__(self, o: Any) -> TracedValue:
        return binary("div", self, o)

    def __rtruediv__(self, o: Any) -> TracedValue:
        return binary("div", o, self)

    def __floordiv__(self, o: Any) -> TracedValue:
        return binary("floor_div", self, o)

    def __mod__(self, o: Any) -> TracedValue:
        return binary("floor_mod", self, o)

    def __pow__(self, o: Any) -> TracedValue:
        if isinstance(o, (int, float)) and not isinstance(o, bool) and o == 2:
            return unary("square", self)
        return binary("pow", self, o)

    def __rpow__(self, o: Any) -> TracedValue:
        return binary("pow", o, self)

    def __matmul__(self, o: Any) -> TracedValue:
        return matmul(self, o)

    def __rmatmul__(self, o: Any) -> TracedValue:
        return matmul(o, self)

    def __neg__(self) -> TracedValue:
        return unary("neg", self)

    def __pos__(self) -> TracedValue:
        return self

    def __abs__(self) -> TracedValue:
        return unary("abs", self)

    def __lt__(self, o: Any) -> TracedValue:
        return binary("less", self, o)

    def __le__(self, o: Any) -> TracedValue:
        return binary("less_equal", self, o)

    def __gt__(self, o: Any) -> TracedValue:
        return binary("greater", self, o)

    def __ge__(self, o: Any) -> TracedValue:
        return binary("greater_equal", self, o)

    def __eq__(self, o: Any) -> Any:  # type: ignore[override]
        if o is None:  # as eager Tensors (TF2): unequal to None
            return False
        return binary("equal", self, o)

    def __ne__(self, o: Any) -> Any:  # type: ignore[override]
        if o is None:
            return True
        return binary("not_equal", self, o)

    def __hash__(self) -> int:
        """Unhashable, as eager Tensors (``==`` is elementwise): key by :meth:`ref`."""
        raise TypeError("Tensor is unhashable. Instead, use tensor.ref() as the key.")

    def ref(self) -> eager.TensorRef:
        """A hashable reference to this traced value (equal only to references to it)."""
        return eager.TensorRef(self)

    def __and__(self, o: Any) -> TracedValue:
        return binary("logical_and" if self.value.dtype == "i1" else "bitwise_and", self, o)

    def __or__(self, o: Any) -> TracedValue:
        return binary("logical_or" if self.value.dtype == "i1" else "bitwise_or", self, o)

    def __invert__(self) -> TracedValue:
        return unary("logical_not", self)

    def __len__(self) -> int:
        if not self.shape:
            raise TraceError(f"len() of a scalar (at {user_location()})")
        return int(self.shape[0] or 0)

    def __bool__(self) -> bool:
        raise TraceError(f"the truth value of a traced tensor is not known while tracing (at "
                         f"{user_location()}): use pytfrt.cond / pytfrt.while_loop for "
                         "data-dependent control flow")

    def _concrete(self, *_: Any) -> Any:
        raise TraceError(f"the value of a traced tensor is not known while tracing (at "
                         f"{user_location()})")

    __float__ = __int__ = __index__ = numpy = __array__ = _concrete

    @property
    def T(self) -> TracedValue:  # noqa: N802 - NumPy's name
        """The transpose (axes reversed)."""
        return unary("transpose", self, perm=list(range(self.ndim))[::-1])

    def reshape(self, *shape: Any) -> TracedValue:
        """A reshaped view (one ``-1`` allowed)."""
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return unary("reshape", self, shape=[int(d) for d in dims])

    def astype(self, dtype: Any) -> TracedValue:
        """Converted to ``dtype``."""
        return cast(self, dtype)

    def __getitem__(self, key: Any) -> TracedValue:
        return getitem(self, key)

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    def sum(self, axis: Any = None, keepdims: bool = False) -> TracedValue:
        """Sum over ``axis``."""
        return reduce("reduce_sum", self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> TracedValue:
        """Mean over ``axis``."""
        return reduce("reduce_mean", self, axis, keepdims)

    def _trace_eager(self, op_name: str, args: Sequence[Any], attrs: dict[str, Any],
                     num_results: int | None) -> Any:
        """A ``pytfrt.eager`` op called with traced values (see the module docstring)."""
        rule = EAGER_OPS.get(op_name)
        if rule is None:
            if op_name.startswith("tg."):
                return catalogue_op(op_name[3:], args, attrs)
            raise TraceError(f"eager op {op_name} cannot be traced (at {user_location()})")
        return rule(args, attrs)


# -- op helpers shared by the eager mapping and the operators ------------------------------------


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> TracedValue:
    """``tg.matmul`` (NumPy ``matmul``; operands promoted to one type)."""
    t = tracer_for(a, b)
    dtype = binary_dtype(a, b)
    return t.emit("matmul", [_cast_to(t, a, dtype), _cast_to(t, b, dtype)],  # type: ignore[no-any-return]
                  transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))


def _axes(axis: Any) -> list[int]:
    if axis is None:
        return []
    if isinstance(axis, (tuple, list)):
        return [int(a) for a in axis]
    return [int(axis)]


def reduce(name: str, x: Any, axis: Any = None, keepdims: bool = False) -> TracedValue:
    """``tg.reduce_*`` over ``axis`` (all axes for ``None``)."""
    if name == "reduce_mean":
        x = _float(x)
    return unary(name, x, axes=_axes(axis), keepdims=bool(keepdims))


def cast(x: Any, dtype: Any) -> TracedValue:
    """``tg.cast`` to ``dtype`` (a NumPy dtype, pytfrt DType or name)."""
    name = eager.dtype_to_numpy(dtype)
    return _cast_to(tracer_for(x), x, dtype_name(name))  # type: ignore[no-any-return]


def getitem(x: TracedValue, key: Any) -> TracedValue:
    """NumPy basic indexing: ints, slices (any step), ``...`` and ``None``."""
    if not isinstance(key, tuple):
        key = (key,)
    shape = x.shape
    if any(d is None for d in shape):
        raise TraceError(f"indexing needs static shapes (at {user_location()})")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > len(shape):
        raise TraceError(f"too many indices for a rank-{len(shape)} tensor (at "
                         f"{user_location()})")
    dots = [i for i, k in enumerate(key) if k is Ellipsis]  # by identity: == is elementwise
    if dots:
        i = dots[0]
        key = key[:i] + (slice(None),) * (len(shape) - n_real) + key[i + 1:]
    key = key + (slice(None),) * (len(shape) - n_real - 0)
    starts, ends, axes, steps, out_shape = [], [], [], [], []
    axis = 0
    for k in key:
        if axis >= len(shape) and k is not None:
            break
        if k is None:
            out_shape.append(1)
            continue
        d = int(shape[axis])  # type: ignore[arg-type]
        if isinstance(k, TracedValue):
            raise TraceError(f"indexing with a traced tensor is not supported (at "
                             f"{user_location()})")
        if isinstance(k, slice):
            s, e, st = k.indices(d)
            n = len(range(s, e, st))
            if n == 0:  # (``indices`` gives -1 for an empty backward slice: tg.slice's last)
                s = e = 0
            if (s, e, st) != (0, d, 1):
                starts.append(s)
                ends.append(e if (e >= 0 or st > 0) else -d - 1)
                axes.append(axis)
                steps.append(st)
            out_shape.append(n)
        else:
            i = int(k)
            if not -d <= i < d:
                raise TraceError(f"index {i} is out of bounds for axis {axis} with size {d} "
                                 f"(at {user_location()})")
            i %= d
            starts.append(i)
            ends.append(i + 1)
            axes.append(axis)
            steps.append(1)
        axis += 1
    y = x
    if axes:
        y = unary("slice", x, starts=starts, ends=ends, axes=axes, steps=steps)
    if tuple(out_shape) != y.shape:
        y = unary("reshape", y, shape=out_shape)
    return y


def catalogue_op(name: str, args: Sequence[Any], attrs: dict[str, Any]) -> Any:
    """``tg.<name>(*args, **attrs)`` for a ``pytfrt.eager`` function defined by the op
    definitions: an elementwise op's operands are promoted to one type (``select``: the last
    two, its condition made ``i1``); other ops take their operands as given."""
    t = tracer_for(*args)
    m = MATH.get(name)
    if m is None:
        return t.emit(name, list(args), **attrs)
    ops = list(args)
    cond = []
    if m.arity == 3:
        c = as_traced(t, ops.pop(0))
        cond = [c if c.value.dtype == "i1" else binary("not_equal", c, 0)]
    if len(ops) == 2:
        dtype = binary_dtype(*ops)
        ops = [_cast_to(t, a, dtype) for a in ops]
    elif m.domain == "float" and not isinstance(ops[0], TracedValue):
        ops = [as_traced(t, ops[0])]
    return t.emit(name, [*cond, *ops], **attrs)


def _fill_like(args: Sequence[Any], attrs: dict[str, Any]) -> Any:
    x = args[0]
    t = tracer_for(x)
    shape = x.shape
    if any(d is None for d in shape):
        raise TraceError(f"zeros_like/ones_like need a static shape, got {shape} (at "
                         f"{user_location()})")
    dt = x.value.dtype if attrs["dtype"] is None else dtype_name(
        eager.dtype_to_numpy(attrs["dtype"]))
    value = np.asarray(attrs["value"], np_dtype(dt))
    return t.emit("fill", [np.asarray(shape, np.int64), value])


def _attr_axis_list(attrs: dict[str, Any]) -> list[int]:
    return _axes(attrs.get("axis"))


def _eager_binary(name: str) -> Callable[[Sequence[Any], dict[str, Any]], Any]:
    return lambda args, attrs: binary(name, args[0], args[1])


def _eager_unary(name: str) -> Callable[[Sequence[Any], dict[str, Any]], Any]:
    return lambda args, attrs: unary(name, args[0])


def _eager_equal(args: Sequence[Any], attrs: dict[str, Any]) -> Any:
    # eager.equal returns 1/0 in the inputs' type (TFRT's tfrt_test.equal)
    dtype = binary_dtype(args[0], args[1])
    return _cast_to(tracer_for(*args), binary("equal", args[0], args[1]), dtype)


def _eager_broadcast_to(args: Sequence[Any], attrs: dict[str, Any]) -> Any:
    t = tracer_for(args[0])
    return t.emit("broadcast_to", [args[0], np.asarray(list(attrs["shape"]), np.int64)])


def _eager_concat(args: Sequence[Any], attrs: dict[str, Any]) -> Any:
    t = tracer_for(*args)
    dtype = args[0].value.dtype if isinstance(args[0], TracedValue) else binary_dtype(*args[:2])
    return t.emit("concat", [_cast_to(t, a, dtype) for a in args], axis=int(attrs["axis"]))


def _eager_transpose(args: Sequence[Any], attrs: dict[str, Any]) -> Any:
    x = args[0]
    perm = attrs.get("perm")
    if perm is None:
        perm = list(range(x.ndim))[::-1]
    return unary("transpose", x, perm=list(perm))


EAGER_OPS: dict[str, Callable[[Sequence[Any], dict[str, Any]], Any]] = {
    "tfrt_test.add": _eager_binary("add"),
    "tfrt_test.subtract": _eager_binary("sub"),
    "tfrt_test.multiply": _eager_binary("mul"),
    "tfrt_test.divide": _eager_binary("div"),
    "tfrt_test.maximum": _eager_binary("maximum"),
    "tfrt_test.minimum": _eager_binary("minimum"),
    "tfrt_test.pow": _eager_binary("pow"),
    "tfrt_test.equal": _eager_equal,
    "eager.less": _eager_binary("less"),
    "eager.less_equal": _eager_binary("less_equal"),
    "eager.greater": _eager_binary("greater"),
    "eager.greater_equal": _eager_binary("greater_equal"),
    "eager.equal": _eager_binary("equal"),
    "eager.not_equal": _eager_binary("not_equal"),
    "eager.pow": _eager_binary("pow"),
    # TFRT's unary test ops are the elementwise ops of the same name
    **{f"tfrt_test.{n}": _eager_unary(n) for n, m in MATH.items() if m.arity == 1},
    "tfrt_test.matmul": lambda args, attrs: matmul(
        args[0], args[1], attrs.get("transpose_a", False), attrs.get("transpose_b", False)),
    "tfrt_test.reduce_mean": lambda args, attrs: reduce(
        "reduce_mean", args[0], attrs.get("axis"), attrs.get("keepdims", False)),
    "tfrt_test.reduce_sum": lambda args, attrs: reduce(
        "reduce_sum", args[0], attrs.get("axis"), attrs.get("keepdims", False)),
    "tfrt_test.reduce_max": lambda args, attrs: reduce(
        "reduce_max", args[0], attrs.get("axis"), attrs.get("keepdims", False)),
    "tfrt_test.reduce_min": lambda args, attrs: reduce(
        "reduce_min", args[0], attrs.get("axis"), attrs.get("keepdims", False)),
    "tfrt_test.argmax": lambda args, attrs: unary(
        "argmax", args[0], axis=int(attrs.get("axis", 0)), output_type="i32"),
    "tfrt_test.softmax": lambda args, attrs: unary(
        "softmax", args[0], axis=int(attrs.get("axis", -1))),
    "tfrt_test.cast": lambda args, attrs: cast(args[0], attrs["type"]),
    "tfrt_test.reshape": lambda args, attrs: unary(
        "reshape", args[0], shape=list(attrs["shape"])),
    "tfrt_test.transpose": _eager_transpose,
    "tfrt_test.expand_dims": lambda args, attrs: unary(
        "expand_dims", args[0], axis=int(attrs["axis"])),
    "tfrt_test.squeeze": lambda args, attrs: unary(
        "squeeze", args[0], axes=_attr_axis_list(attrs)),
    "tfrt_test.concat": _eager_concat,
    "tfrt_test.broadcast_to": _eager_broadcast_to,
    "eager.fill_like": _fill_like,
}
"""``pytfrt.eager`` op name -> how it is traced (catalogue ops)."""


# -- building a module ---------------------------------------------------------------------------


def new_module(inputs: Sequence[tuple[str, Any, Any]]) -> tuple[GraphBuilder, Tracer]:
    """A GraphBuilder with ``@main`` taking ``inputs`` (name, shape, dtype) and its Tracer."""
    gb = GraphBuilder()
    fb = gb.function("main", inputs)
    return gb, Tracer(gb, fb)


def finish(gb: GraphBuilder, tracer: Tracer, outputs: Sequence[Any]) -> GraphModule:
    """End ``@main`` returning ``outputs`` (TracedValues or constants) and finish the module."""
    vals = [tracer.value_of(o) for o in outputs]
    tracer.fb.returns(vals, structure="tuple")
    return gb.finish()


def as_traced(t: Tracer, x: Any) -> TracedValue:
    """``x`` as a TracedValue of ``t`` (a constant unless it is traced already)."""
    if isinstance(x, TracedValue):
        return x if x.tracer is t else TracedValue(t, t.resolve(x))
    if isinstance(x, eager.Tensor):
        x = x.numpy()
    _check_operand(x)
    return t.constant(x)


_body_count = [0]


def _body(parent: Tracer, prefix: str, arg_types: Sequence[TType],
          fn: Callable[..., Any], captured: Sequence[TracedValue] | None,
          out_types: Sequence[TType] | None = None, pass_captures: bool = False
          ) -> tuple[str, list[TracedValue], int]:
    """Trace ``fn`` into a new function; returns (name, the captured values, number of results).

    With ``captured=None`` the captures are discovered (the function is built, then deleted from
    the module); otherwise ``captured`` become the trailing arguments.
    """
    gb = parent.graph
    _body_count[0] += 1
    name = f"{prefix}_{_body_count[0]}"
    before = set(gb.functions)
    extra = list(captured or ())
    inputs = [(f"arg_{i}", t.shape, t.dtype) for i, t in enumerate(arg_types)]
    inputs += [(f"capture_{i}", c.value.shape, c.value.dtype) for i, c in enumerate(extra)]
    fb = gb.function(name, inputs)
    sub = Tracer(gb, fb, parent)
    n = len(arg_types)
    for c, a in zip(extra, fb.arguments[n:], strict=True):
        sub.captures[id(c)] = (c, a)
    if captured is not None:
        sub.fixed_captures = True
    args = [TracedValue(sub, a) for a in fb.arguments[:len(fb.arguments) if pass_captures else n]]
    with sub:
        out = fn(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    vals = []
    for i, o in enumerate(outs):
        if out_types is not None and not isinstance(o, TracedValue):
            o = sub.constant(np.asarray(o, np_dtype(out_types[i].dtype)))
        v = as_traced(sub, o)
        if out_types is not None and v.value.dtype != out_types[i].dtype:
            v = _cast_to(sub, v, out_types[i].dtype)
        vals.append(v.value)
    if captured is None:
        found = [c for c, _ in sub.captures.values()]
        for fname in set(gb.functions) - before:
            del gb.functions[fname]
        return name, found, len(vals)
    fb.returns(vals, structure="tuple" if len(vals) != 1 else "single")
    return name, extra, len(vals)


def _types(t: Tracer, values: Sequence[TracedValue]) -> list[TType]:
    return [t.resolve(v).type for v in values]


def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any],
         *operands: Any) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (see pytfrt.cond)."""
    t = current()
    if t is None or not (isinstance(pred, TracedValue) or any(
            isinstance(o, TracedValue) for o in operands)):
        if isinstance(pred, TracedValue):
            t = pred.tracer
        else:
            return true_fn(*operands) if bool(np.asarray(pred)) else false_fn(*operands)
    ops = [as_traced(t, o) for o in operands]
    p = as_traced(t, pred)
    if p.value.dtype != "i1":
        p = binary("not_equal", p, 0)
    if p.shape != ():
        raise TraceError(f"pytfrt.cond: the predicate must be a scalar, got shape {p.shape} "
                         f"(at {user_location()})")
    types = _types(t, ops)
    _, cap_t, _ = _body(t, "cond_true", types, true_fn, None)
    _, cap_f, _ = _body(t, "cond_false", types, false_fn, None)
    captured = list({id(c): c for c in cap_t + cap_f}.values())
    tname, _, n = _body(t, "cond_true", types, true_fn, captured)
    fname, _, n2 = _body(t, "cond_false", types, false_fn, captured)
    if n != n2:
        raise TraceError(f"pytfrt.cond: the branches return {n} and {n2} values (at "
                         f"{user_location()})")
    out = t.emit("if", [p, *ops, *captured], n_results=n, then_branch=tname, else_branch=fname)
    return tuple(out) if isinstance(out, list) else out


def while_loop(cond_fn: Callable[..., Any], body_fn: Callable[..., Any],
               loop_vars: Sequence[Any]) -> Any:
    """Run ``body_fn`` while ``cond_fn`` holds (see pytfrt.while_loop)."""
    single = not isinstance(loop_vars, (tuple, list))
    lv = [loop_vars] if single else list(loop_vars)
    t = current()
    if t is None:
        while bool(np.asarray(cond_fn(*lv))):
            out = body_fn(*lv)
            lv = [out] if single else list(out)
        return lv[0] if single else type(loop_vars)(lv)  # type: ignore[call-arg]
    vars_ = [as_traced(t, v) for v in lv]
    types = _types(t, vars_)

    def cond_body(*a: Any) -> Any:
        r = cond_fn(*a)
        r = as_traced(current(), r)  # type: ignore[arg-type]
        if r.value.dtype != "i1":
            r = binary("not_equal", r, 0)
        return r

    def loop_body(*a: Any) -> Any:
        k = len(types)
        out = body_fn(*a[:k])
        out = [out] if single else list(out)
        if len(out) != k:
            raise TraceError(f"pytfrt.while_loop: the body returns {len(out)} values for {k} "
                             f"loop variables (at {user_location()})")
        return [*out, *a[k:]]

    _, cap_c, _ = _body(t, "while_cond", types, cond_body, None)
    _, cap_b, _ = _body(t, "while_body", types, lambda *a: body_fn(*a), None)
    captured = list({id(c): c for c in cap_c + cap_b}.values())
    ctypes = types + _types(t, captured)
    cname, _, _ = _body(t, "while_cond", types, cond_body, captured)
    # the loop variables include the captures, passed through unchanged by the body
    bname, _, _ = _body(t, "while_body", types, loop_body, captured, out_types=ctypes,
                        pass_captures=True)
    out = t.emit("while", [*vars_, *captured], n_results=len(ctypes), cond=cname, body=bname)
    res = (out if isinstance(out, list) else [out])[:len(types)]
    return res[0] if single else type(loop_vars)(res)  # type: ignore[call-arg]
