"""``pytfrt.function``, ``grad``, ``value_and_grad``, ``cond``, ``switch_case``, ``while_loop``:
Python, compiled.

::

    @pytfrt.function
    def step(params, x, y):
        loss, grads = pytfrt.value_and_grad(loss_fn)(params, x, y)
        return loss, [p - 0.1 * g for p, g in zip(params, grads)]

    loss, params = step(params, x, y)     # traced + compiled on the first call, then cached

A :class:`Function` traces the Python function over ``pytfrt.eager`` ops and Tensor operators
into the graph dialect (:mod:`pytfrt.compiler.frontends.trace`), runs the default passes and
lowers it to BEF (:class:`pytfrt.model.CompiledModel`).  It re-traces per *input signature*:
the pytree structure of the arguments, every array's shape and dtype, and every other leaf's
Python value (Python scalars, strings, ``None`` are baked into the program).  Arguments and
results are pytrees: nested tuples, lists and dicts (keys sorted) of arrays, ``eager.Tensor``s
and Python values.  See ``docs/function.md``.

Thread-safety: a Function may be called from several threads; tracing is serialised by a lock,
calls of a compiled program run concurrently (``CompiledModel``'s contract).  Errors at trace
time are :class:`~pytfrt.compiler.frontends.trace.TraceError` naming the user's ``file:line``;
bad inputs to a compiled call raise ``pytfrt.model.InputError``.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt import eager
from pytfrt.support.codegen import exec_generated
from pytfrt.support.tree import LEAF as _LEAF
from pytfrt.support.tree import tree_flatten, tree_unflatten

__all__ = ["Function", "cond", "function", "grad", "switch_case", "tree_flatten",
           "tree_unflatten", "value_and_grad", "while_loop"]


def _is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic, eager.Tensor))


def _flatten_keyed(x: Any, leaves: list[Any], keys: list[Any]) -> Any:
    """:func:`tree_flatten` plus the cache key parts of each leaf, in one pass (the per-call
    path): an array's shape and dtype, a Python value itself.  Eager Tensors become arrays.
    ``keys[0]`` is set to True when a leaf is a traced value."""
    t = type(x)
    if t is np.ndarray:
        leaves.append(x)
        keys.append(x.shape)
        keys.append(x.dtype)
        return _LEAF
    if t is tuple or t is list:
        return (t, tuple([_flatten_keyed(e, leaves, keys) for e in x]))
    if t is dict:
        ks = sorted(x)
        return (dict, tuple(ks), tuple([_flatten_keyed(x[k], leaves, keys) for k in ks]))
    if x is None:
        return None
    if isinstance(x, eager.Tensor | np.generic):
        return _flatten_keyed(np.asarray(x.numpy() if isinstance(x, eager.Tensor) else x),
                              leaves, keys)
    if isinstance(x, eager.TracedBase):
        leaves.append(x)
        keys[0] = True
        keys.append(id(x))
        return _LEAF
    try:
        hash(x)
    except TypeError:
        raise TypeError(f"pytfrt.function: cannot use an argument of type {type(x).__name__} "
                        "(arrays, Python scalars and tuples/lists/dicts of them)") from None
    leaves.append(x)
    keys.append((type(x), x))
    return _LEAF


def _as_array(x: Any) -> np.ndarray:
    if type(x) is np.ndarray:
        return x
    if isinstance(x, eager.Tensor):
        return x.numpy()
    return np.asarray(x)


def _is_traced(x: Any) -> bool:
    return isinstance(x, eager.TracedBase)


# -- Function -------------------------------------------------------------------------------------


_MISS = object()
"""What a guarded fast call returns when the arguments do not fit its entry."""


def _render_fast(tree: Any, leaves: list[Any], entry: _Entry) -> Callable[..., Any] | None:
    """A guarded call ``fast(args, kwargs)`` for one cache entry: it checks that the arguments
    have the entry's pytree structure (tuples, lists, ``None``) and array leaves of its shapes
    and dtypes, calls the model's call function on the leaves and builds the result tree
    directly -- no generic flatten, cache key or unflatten.  Returns :data:`_MISS` when the
    arguments do not fit (the general path then runs).  ``None`` when the entry has keyword
    arguments, dicts or non-array leaves in its arguments, or a model not returning a flat
    tuple (those keep the general path)."""
    model = entry.model
    if (model is None or not entry.all_inputs or model.signature.structure != "tuple"
            or tree[0] is not tuple or tree[1][1] != (dict, (), ())):
        return None
    ns: dict[str, Any] = {"_MISS": _MISS, "_nd": np.ndarray, "_call": model._call}
    lines = ["def _fast(args, kwargs):"]
    names: list[str] = []
    counter = [0]

    def guard(d: Any, expr: str) -> bool:
        if d is None:
            lines.append(f"    if {expr} is not None: return _MISS")
            return True
        if d is _LEAF:
            i = len(names)
            x = leaves[i]
            if type(x) is not np.ndarray:
                return False
            name = f"l{i}"
            names.append(name)
            ns[f"_s{i}"], ns[f"_d{i}"] = x.shape, x.dtype
            lines.append(f"    {name} = {expr}")
            lines.append(f"    if type({name}) is not _nd or {name}.shape != _s{i} or "
                         f"{name}.dtype is not _d{i}: return _MISS")
            return True
        if d[0] is dict:
            return False
        node = f"n{counter[0]}"
        counter[0] += 1
        lines.append(f"    {node} = {expr}")
        lines.append(f"    if type({node}) is not {d[0].__name__} or len({node}) != {len(d[1])}:"
                     " return _MISS")
        return all(guard(c, f"{node}[{j}]") for j, c in enumerate(d[1]))

    (argdef, _kw) = tree[1]
    lines.append("    if kwargs: return _MISS")
    if not guard(argdef, "args"):
        return None
    outs = iter(range(len(entry.out_static)))
    static = iter(entry.out_static)

    def build(d: Any) -> str:
        if d is None:
            return "None"
        if d is _LEAF:
            j = next(outs)
            s = next(static)
            if s is None:
                return f"o[{sum(1 for t in entry.out_static[:j] if t is None)}]"
            ns[f"_st{j}"] = s[0]
            return f"_st{j}"
        if d[0] is dict:
            keys = []
            for k in d[1]:
                ns[f"_k{len(ns)}"] = k
                keys.append(f"_k{len(ns) - 1}")
            items = [f"{k}: {build(c)}" for k, c in zip(keys, d[2], strict=True)]
            return "{" + ", ".join(items) + "}"
        inner = "".join(f"{build(c)}, " for c in d[1])
        return f"({inner})" if d[0] is tuple else f"[{inner}]"

    lines.append(f"    o = _call(({''.join(n + ', ' for n in names)}))")
    lines.append(f"    return {build(entry.out_tree)}")
    exec_generated("\n".join(lines) + "\n", "pytfrt.function call", ns)
    return ns["_fast"]  # type: ignore[no-any-return]


class _Entry:
    __slots__ = ("model", "positions", "out_tree", "out_static", "mlir", "all_inputs",
                 "all_outputs", "fast")

    def __init__(self, model: Any, positions: list[int], out_tree: Any,
                 out_static: list[Any], mlir: str) -> None:
        self.model = model          # CompiledModel or None (no tensor outputs)
        self.positions = positions  # leaf indices that are program inputs
        self.out_tree = out_tree
        self.out_static = out_static  # per output leaf: None (from the program) or the value
        self.mlir = mlir
        self.all_inputs = False  # every leaf is a program input (set by Function._build)
        self.all_outputs = all(s is None for s in out_static)
        self.fast: Callable[..., Any] | None = None  # the guarded call (set by Function._trace)


class Function:
    """A traced-and-compiled Python function (see the module docstring).

    Args:
        fn: the Python function.
        optimize: run the default graph passes.
    """

    def __init__(self, fn: Callable[..., Any], optimize: bool = True) -> None:
        self.fn = fn
        self.optimize = optimize
        self._cache: dict[Any, _Entry] = {}
        self._lock = threading.Lock()
        # the guarded call of the entry used last (see _render_fast): a monomorphic call site
        self._fast: Callable[..., Any] | None = None
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    def _signature(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                   ) -> tuple[list[Any], Any, Any]:
        leaves: list[Any] = []
        keys: list[Any] = [False]
        tree = _flatten_keyed((args, kwargs), leaves, keys)
        return leaves, tree, (tree, tuple(keys))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the compiled program for these arguments (tracing it on a new signature)."""
        fast = self._fast
        if fast is not None:
            out = fast(args, kwargs)
            if out is not _MISS:
                return out
        leaves: list[Any] = []
        keys: list[Any] = [False]  # keys[0]: a leaf is traced (set by _flatten_keyed)
        tree = _flatten_keyed((args, kwargs), leaves, keys)
        if keys[0]:
            return self.fn(*args, **kwargs)  # called inside another trace: inline it
        key = (tree, tuple(keys))
        entry = self._cache.get(key)
        if entry is None:
            entry = self._trace(leaves, tree, key)
        if entry.fast is not None:
            self._fast = entry.fast
        model = entry.model
        if model is None:
            return tree_unflatten(entry.out_tree, [s[0] for s in entry.out_static])  # type: ignore[index]
        outs = model(*leaves) if entry.all_inputs else model(
            *[leaves[i] for i in entry.positions])
        if not entry.all_outputs:
            it = iter(outs)
            outs = [next(it) if s is None else s[0] for s in entry.out_static]
        return tree_unflatten(entry.out_tree, outs)

    def get_mlir(self, *args: Any, **kwargs: Any) -> str:
        """The traced program (graph dialect, before the passes) for these arguments."""
        leaves, tree, key = self._signature(args, kwargs)
        entry = self._cache.get(key) or self._trace(leaves, tree, key)
        return entry.mlir

    def compiled(self, *args: Any, **kwargs: Any) -> Any:
        """The :class:`~pytfrt.model.CompiledModel` for these arguments' signature.

        Its inputs are the arguments' array leaves in pytree order and its outputs the result's
        array leaves, flat (a tuple): for ``f(*arrays)`` returning ``(loss, *grads)`` it is what
        ``pytfrt.distributed.DataParallel`` and ``Cluster.load`` take.

        Raises:
            ValueError: if the function has no tensor results.
        """
        leaves, tree, key = self._signature(args, kwargs)
        entry = self._cache.get(key) or self._trace(leaves, tree, key)
        if entry.model is None:
            raise ValueError("the function returns no tensors: there is no program")
        return entry.model

    def _trace(self, leaves: list[Any], tree: Any, key: Any) -> _Entry:
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None:
                return entry
            entry = self._build(leaves, tree)
            entry.fast = _render_fast(tree, leaves, entry)
            self._cache[key] = entry
            return entry

    def _build(self, leaves: list[Any], tree: Any) -> _Entry:
        from pytfrt.compiler.api import compile_module
        from pytfrt.compiler.frontends import trace

        positions = [i for i, x in enumerate(leaves) if _is_array(x)]
        inputs = []
        for i in positions:
            a = _as_array(leaves[i])
            inputs.append((f"arg{i}", a.shape, a.dtype))
        gb, tracer = trace.new_module(inputs)
        traced = list(leaves)
        for i, v in zip(positions, tracer.fb.arguments, strict=True):
            traced[i] = trace.TracedValue(tracer, v)
        call_args, call_kwargs = tree_unflatten(tree, traced)
        with tracer:
            result = self.fn(*call_args, **call_kwargs)
        out_leaves, out_tree = tree_flatten(result)
        outputs: list[Any] = []
        static: list[tuple[Any] | None] = []
        for o in out_leaves:
            if _is_traced(o) or _is_array(o):
                outputs.append(o)
                static.append(None)
            else:
                static.append((o,))
        if not outputs:
            tracer.fb.returns([], structure="list")
            return _Entry(None, positions, out_tree, static, str(gb.finish()))
        gm = trace.finish(gb, tracer, outputs)
        mlir = str(gm)
        model = compile_module(gm, optimize=self.optimize)
        entry = _Entry(model, positions, out_tree, static, mlir)
        entry.all_inputs = positions == list(range(len(leaves)))
        return entry

    def __repr__(self) -> str:
        return f"<pytfrt.function {getattr(self.fn, '__qualname__', self.fn)!r}>"


def function(fn: Callable[..., Any] | None = None, *, optimize: bool = True) -> Any:
    """Decorator: trace ``fn`` into the graph dialect and run it compiled (a :class:`Function`).

    Usable as ``@pytfrt.function`` or ``@pytfrt.function(optimize=False)``.
    """
    if fn is None:
        return lambda f: function(f, optimize=optimize)
    return Function(fn, optimize)


# -- automatic differentiation ---------------------------------------------------------------


def value_and_grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable[..., Any]:
    """``fn``'s value and its gradient with respect to the arguments ``argnums`` (JAX's contract).

    ``fn`` must return a floating-point scalar (or ``(scalar, aux)`` with ``has_aux``).  The
    gradient has the structure of the differentiated argument (a pytree of arrays), or a tuple
    of those when ``argnums`` is a tuple.  Called on concrete arrays it traces, compiles and
    caches the whole computation (forward and backward) as one program; inside
    ``@pytfrt.function`` it adds the backward ops to the traced program.  Implemented by
    reverse-mode differentiation on the graph dialect (:mod:`pytfrt.compiler.autodiff`).

    Raises:
        TypeError: bad ``argnums`` or a non-scalar / non-float result.
        pytfrt.compiler.autodiff.AutodiffError: an op on the path has no gradient rule (or a
            second-order gradient through ``while_loop``).
    """
    multi = isinstance(argnums, (tuple, list))
    nums = tuple(int(a) for a in argnums) if multi else (int(argnums),)  # type: ignore[arg-type,union-attr]

    def traced(*args: Any, **kwargs: Any) -> Any:
        from pytfrt.compiler import autodiff_control

        return autodiff_control.value_and_grad_traced(fn, args, kwargs, nums, multi, has_aux)

    compiled = function(traced)

    @functools.wraps(fn)
    def vg(*args: Any, **kwargs: Any) -> Any:
        for n in nums:
            if not -len(args) <= n < len(args):
                raise TypeError(f"value_and_grad: argnums {n} is out of range for "
                                f"{len(args)} positional arguments")
        leaves, _ = tree_flatten((args, kwargs))
        if any(_is_traced(x) for x in leaves):
            return traced(*args, **kwargs)
        # differentiated Python scalars become float32 arrays (inputs, not constants)
        args = tuple(_to_arrays(a) if i in nums or i - len(args) in nums else a
                     for i, a in enumerate(args))
        return compiled(*args, **kwargs)

    return vg


def _to_arrays(tree: Any) -> Any:
    leaves, td = tree_flatten(tree)
    out = []
    for x in leaves:
        if isinstance(x, float):
            x = np.float32(x)
        elif isinstance(x, (int, bool)):
            raise TypeError(f"grad requires floating-point inputs, got {type(x).__name__} {x!r}")
        out.append(x)
    return tree_unflatten(td, out)


def grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of ``fn`` (see :func:`value_and_grad`); returns ``(grads, aux)`` with aux."""
    vg = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def g(*args: Any, **kwargs: Any) -> Any:
        value, grads = vg(*args, **kwargs)
        if has_aux:
            return grads, value[1]
        return grads

    return g


# -- control flow -------------------------------------------------------------------------------


def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any],
         *operands: Any) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``.

    Inside a traced function with a traced ``pred`` this builds ``tg.if`` (lowered to
    ``tfrt.if``): both branches are traced, must return the same number of values of the same
    dtypes, and may use values of the enclosing function (captured).  Otherwise it is a Python
    ``if``.  Differentiable by :func:`grad` (JAX's ``lax.cond`` contract: both branches are
    differentiated, the taken one runs; see :mod:`pytfrt.compiler.autodiff_control`).
    """
    from pytfrt.compiler.frontends import trace

    return trace.cond(pred, true_fn, false_fn, *operands)


def switch_case(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """``branches[index](*operands)``; an index out of ``[0, len(branches))`` (negative
    included) runs the last branch, as TF's ``tf.switch_case`` without ``default``.

    Inside a traced function with a traced ``index`` (an integer scalar) this builds ``tg.case``
    (lowered to ``tfrt.case``): every branch is traced, all must return the same number of
    values of the same dtypes, and may use values of the enclosing function (captured).
    Otherwise (an index known at trace time) it is a Python call of the selected branch.
    Differentiable by :func:`grad` (the gradient is a ``tg.case`` on the same index; see
    :mod:`pytfrt.compiler.autodiff_control`).

    Raises:
        TypeError: no branches, or a non-integer index.
        pytfrt.compiler.frontends.trace.TraceError: a non-scalar index, or branches returning
            different numbers of values.
    """
    from pytfrt.compiler.frontends import trace

    fns = list(branches)
    if not fns or not all(callable(f) for f in fns):
        raise TypeError("switch_case: branches must be a non-empty sequence of callables")
    if not isinstance(index, trace.TracedValue):  # known now: run the branch
        i = np.asarray(index)
        if i.dtype.kind not in "iu" or i.size != 1:
            raise TypeError(f"switch_case: the index must be one integer, got {index!r}")
        k = int(i.reshape(()))
        return fns[k if 0 <= k < len(fns) else -1](*operands)
    t = index.tracer
    ops = [trace.as_traced(t, o) for o in operands]
    idx = trace.as_traced(t, index)
    if idx.value.dtype not in ("i32", "i64"):
        raise TypeError(f"switch_case: the index must be an i32/i64 scalar, got "
                        f"{idx.value.type} (at {trace.user_location()})")
    if idx.shape != ():
        raise trace.TraceError(f"pytfrt.switch_case: the index must be a scalar, got shape "
                               f"{idx.shape} (at {trace.user_location()})")
    types_ = trace._types(t, ops)
    found = [trace._body(t, "case_branch", types_, f, None)[1] for f in fns]
    captured = list({id(c): c for cap in found for c in cap}.values())
    names, counts = [], set()
    for f in fns:
        name, _, n = trace._body(t, "case_branch", types_, f, captured)
        names.append(name)
        counts.add(n)
    if len(counts) != 1:
        raise trace.TraceError(f"pytfrt.switch_case: the branches return different numbers of "
                               f"values ({sorted(counts)}) (at {trace.user_location()})")
    out = t.emit("case", [idx, *ops, *captured], n_results=counts.pop(), branches=names)
    return tuple(out) if isinstance(out, list) else out


def while_loop(cond_fn: Callable[..., Any], body_fn: Callable[..., Any],
               loop_vars: Any) -> Any:
    """``while cond_fn(*vars): vars = body_fn(*vars)``; returns the final ``vars``.

    ``loop_vars`` is a tuple/list of tensors (or one tensor).  Inside a traced function this
    builds ``tg.while`` (lowered to ``tfrt.while``): the body must return values of the loop
    variables' dtypes.  Otherwise it is a Python loop.  Differentiable by :func:`grad` in
    reverse mode, for any trip count (TF's method: the loop-carried values of every iteration
    are stacked, an adjoint loop runs back over them; see
    :mod:`pytfrt.compiler.autodiff_control`); loop variables must keep static shapes.
    """
    from pytfrt.compiler.frontends import trace

    return trace.while_loop(cond_fn, body_fn, loop_vars)


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`function`.

    Importing ``pytfrt.function`` makes the module an attribute of the ``pytfrt`` package under
    the name ``function``, shadowing the lazily exported decorator; so the module itself is the
    decorator: ``@pytfrt.function`` and ``pytfrt.function(optimize=False)`` call
    :func:`function`.
    """

    def __call__(self, fn: Callable[..., Any] | None = None, *, optimize: bool = True) -> Any:
        return function(fn, optimize=optimize)


sys.modules[__name__].__class__ = _CallableModule
