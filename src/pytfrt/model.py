"""CompiledModel: a compiled graph you call with NumPy arrays, save, and load back.

::

    model = pytfrt.compile(source)          # pytfrt.compiler.api.compile
    y = model(x)                            # or model(x=x); structure as the source returns
    model.save("dir")                       # dir/model.bef, dir/weights.btf, dir/manifest.json
    m2 = pytfrt.load("dir")                 # no TensorFlow, ONNX or xDSL needed

A model is a BEF program with ``@tg_init`` (weights -> resources, run once at construction)
and ``@main`` (resources + inputs -> outputs), see ``pytfrt.compiler.lowering``.  Everything a
call needs is prepared at construction: a sync ``@main`` is translated into one straight-line
Python function (``CompiledModel.call_source``) that checks each input's dtype and shape,
calls the ``tg.*`` kernels' compute functions on ndarrays in program order with the resources
as constants and the planned buffers of a pooled arena, and returns the outputs in the
source's structure; an ``@main`` with control flow runs on the BEF executor.

Thread-safety: calls may run concurrently from any number of threads (each has its own
registers; kernels do not share mutable state).  Errors: a bad input raises
:class:`InputError` (a ``ValueError``) naming the input; a kernel failure raises
:class:`ModelError` with the kernel's message.

This module never imports xDSL, TensorFlow or ONNX.
"""

from __future__ import annotations

import keyword
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt import config
from pytfrt.backends.cpu.arena import Arena
from pytfrt.bef.program import Program
from pytfrt.executor.loader import load_program
from pytfrt.executor.sync_executor import SyncBEFFunction
from pytfrt.host.async_value import AsyncValue, make_available
from pytfrt.host.execution_context import ExecutionContext, RequestContext, ResourceContext
from pytfrt.host.host_context import HostContext
from pytfrt.signature import Signature, TensorSpec
from pytfrt.support.errors import PytfrtError
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import dtype_from_numpy

__all__ = ["CompiledModel", "InputError", "ModelError", "Signature", "TensorSpec", "load"]

INIT = "tg_init"
MAIN = "main"
ARENA_TYPE = "!tg.arena"


class InputError(PytfrtError, ValueError):
    """A call got the wrong number, name, dtype or shape of inputs."""


class ModelError(PytfrtError, RuntimeError):
    """Running the model failed (a kernel error; the message is the kernel's)."""


_HOST_LOCK = threading.Lock()
_HOST: HostContext | None = None


def create_host(work_queue_type: str) -> HostContext:
    """A new HostContext for models: a ``work_queue_type`` work queue (TFRT's type strings:
    ``s``, ``mstd``, ``mstd:N``, ``mstd:N,M``) and the built-in kernels.

    Pass it as ``host=`` to :func:`load` / ``pytfrt.compile`` (several models may share one);
    it owns its threads until ``shutdown()``.

    Raises:
        ValueError: if ``work_queue_type`` is not one of the accepted forms.
    """
    from pytfrt.kernel_libraries import builtin_registry

    return HostContext(work_queue_type, registry=builtin_registry())


def default_host() -> HostContext:
    """The process-wide HostContext models run on when no ``host=`` is given (created on first
    use, never shut down).

    Its work queue is ``mstd:N`` with N = the CPU count; the environment variable
    ``PYTFRT_MODEL_QUEUE``, if set when the host is created, overrides the queue type (a
    fallback: prefer an explicit ``host=`` / :func:`create_host`).  ``call_async`` runs calls
    there.
    """
    global _HOST
    with _HOST_LOCK:
        if _HOST is None:
            spec = config.text("PYTFRT_MODEL_QUEUE") or f"mstd:{max(os.cpu_count() or 1, 1)}"
            _HOST = create_host(spec)
        return _HOST


def resolve_host(host: HostContext | str | None) -> HostContext:
    """The HostContext a model runs on: ``host`` itself, a new one for a work-queue type
    string (:func:`create_host`), or :func:`default_host` for ``None``.

    Raises:
        ValueError: a string that is not a work-queue type.
    """
    if host is None:
        return default_host()
    if isinstance(host, str):
        return create_host(host)
    return host


def _input_checker(index: int, spec: TensorSpec, casting: str = "exact"
                   ) -> Callable[[Any], np.ndarray]:
    """A function that checks one input and returns it as an ndarray (no copy for a matching
    ndarray; other array-likes are converted).  With ``casting == "cast"`` (the Keras rule,
    :data:`pytfrt.signature.CASTINGS`) an array of another numeric dtype is converted when no
    fraction is lost (float64 -> float32, ints and bools -> floats, narrower ints -> wider);
    with ``"exact"`` it is refused with the conversion to write.

    Raises (from the returned function):
        InputError: the input cannot be converted, or has the wrong dtype or shape.
    """
    want = np.dtype(spec.dtype)
    shape = spec.shape
    rank = None if shape is None else len(shape)
    static = () if shape is None else tuple((i, d) for i, d in enumerate(shape) if d is not None)
    label = f"input {index} ('{spec.name}')"

    def check(x: Any) -> np.ndarray:
        if type(x) is not np.ndarray:
            if isinstance(x, np.ndarray):
                x = np.asarray(x)
            else:
                try:
                    x = np.asarray(x, dtype=want)
                except (TypeError, ValueError) as exc:
                    raise InputError(f"{label}: cannot convert to {want}: {exc}") from None
        if x.dtype != want:
            x = _convert_dtype(x, want, casting, label)
        if rank is not None:
            if x.ndim != rank:
                raise InputError(f"{label} must have shape {_fmt(shape)}, got {list(x.shape)}")
            for i, d in static:
                if x.shape[i] != d:
                    raise InputError(
                        f"{label} must have shape {_fmt(shape)}, got {list(x.shape)}"
                    )
        return x

    return check


def _convert_dtype(x: np.ndarray, want: np.dtype, casting: str, label: str) -> np.ndarray:
    """``x`` as ``want`` under the model's casting rule (see :func:`_input_checker`)."""
    numeric = "biuf"
    if (casting == "cast" and x.dtype.kind in numeric and want.kind in numeric
            and (want.kind == "f" or np.can_cast(x.dtype, want, "same_kind"))):
        return x.astype(want)
    hint = f": pass x.astype(np.{want.name})" if x.dtype.kind in numeric else ""
    rule = " (this model takes exact input dtypes, as ONNX Runtime does)" if (
        casting == "exact" and x.dtype.kind in numeric) else ""
    raise InputError(f"{label} must have dtype {want}, got {x.dtype}{rule}{hint}")


def _fmt(shape: Sequence[int | None] | None) -> str:
    if shape is None:
        return "<any>"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _model_error(exc: Exception) -> ModelError:
    """The model's error for a kernel exception (its message, as the sync executor's)."""
    if isinstance(exc, ModelError):
        return exc
    return ModelError(str(exc) or type(exc).__name__)


def _as_array(value: Any) -> np.ndarray:
    """A compute result as an ndarray (a NumPy scalar or a 1-tuple is converted)."""
    if type(value) is np.ndarray:
        return value
    if type(value) is tuple and len(value) == 1:
        value = value[0]
    return value if type(value) is np.ndarray else np.asarray(value)


def _as_arrays(value: Any, n: int) -> tuple[np.ndarray, ...]:
    """The ``n`` results of a multi-result compute function, as ndarrays."""
    if type(value) is not tuple or len(value) != n:
        raise ModelError(f"a kernel returned {type(value).__name__}, expected {n} results")
    return tuple(v if type(v) is np.ndarray else np.asarray(v) for v in value)


def _unwrap(value: Any) -> Any:
    return value.array if type(value) is DenseHostTensor else value


def _render_call(model: CompiledModel, info: Any, register_types: Sequence[str]
                 ) -> tuple[str, Callable[[tuple[Any, ...]], Any]]:
    """Translate the sync ``@main`` into one straight-line Python function ``call(args)``.

    The function checks the inputs (dtype, rank, static dims: :func:`_input_checker` runs only
    when the quick test fails), takes an arena from the model's pool, calls the compute
    functions of the ``tg.*`` kernels directly on ndarrays (registers hold arrays, resources
    are constants of the function: no DenseHostTensor wrapping, no argument list), inlines the
    arena's buffer reuse (:meth:`Arena.run`), releases each local after its last use, and
    returns the outputs in the signature's structure.  A compute function with a ``specialize``
    attribute is asked once for a version bound to its attributes and constant operands
    (``fn.specialize(constants, **attrs)`` -> a function of the operands and ``out``, or
    ``None``; e.g. the dense-layer ``matmul``).  Kernels not made from a compute
    function (variables, glue) are called through their registry entry on DenseHostTensors.
    The first kernel exception stops the call and is raised as :class:`ModelError` with its
    message, as the sync executor reports it (``pytfrt.executor.sync_executor``).  The BEF
    program is unchanged: ``@main`` stays an ordinary ``tfrt.sync`` function.
    """
    from pytfrt.backends.cpu.graph_kernels import to_tensor

    ns: dict[str, Any] = {
        "_nd": np.ndarray, "_err": _model_error, "_arr": _as_array, "_arrs": _as_arrays,
        "_T": to_tensor, "_U": _unwrap, "_Arena": Arena, "_pool": model._arenas,
        "_ctx": model._ctx, "_lock": model._lock, "_count": model._count_error,
    }
    n_res = model._num_resources
    arena_reg = model._arena_index
    resources = {r: _unwrap(v) for r, v in enumerate(model._resources)}

    def ref(r: int) -> str:
        if r in resources:
            ns[f"_R{r}"] = resources[r]
            return f"_R{r}"
        return "A" if r == arena_reg else f"r{r}"

    specs = model.signature.inputs
    first_input = n_res + (1 if arena_reg >= 0 else 0)
    inputs = list(range(first_input, info.num_arguments))
    head: list[str] = [f"if len(args) != {len(specs)}:", "    raise _count(len(args))"]
    if inputs:
        head.append(f"{''.join(f'r{r}, ' for r in inputs)}= args")
    for i, (r, spec) in enumerate(zip(inputs, specs, strict=True)):
        ns[f"_dt{i}"] = np.dtype(spec.dtype)
        ns[f"_in{i}"] = model._checks[i]
        quick = [f"type(r{r}) is not _nd", f"r{r}.dtype is not _dt{i}"]
        if spec.shape is not None:
            quick.append(f"r{r}.ndim != {len(spec.shape)}")
            quick += [f"r{r}.shape[{j}] != {d}" for j, d in enumerate(spec.shape) if d is not None]
        head += [f"if {' or '.join(quick)}:", f"    r{r} = _in{i}(r{r})"]
    body: list[str] = []
    for i, (k, release) in enumerate(zip(info.kernels[1:], info.release_after, strict=True)):
        body += _render_kernel(i, k, ref, register_types, resources, ns)
        body += [f"r{r} = None" for r in release]
    outs = [ref(r) for r in info.result_registers]
    structure = model.signature.structure
    if structure == "single":
        ret = outs[0]
    elif structure == "list":
        ret = f"[{', '.join(outs)}]"
    elif structure == "dict":
        for j, s in enumerate(model.signature.outputs):
            ns[f"_o{j}"] = s.name
        ret = "{" + ", ".join(f"_o{j}: {o}" for j, o in enumerate(outs)) + "}"
    else:
        ret = f"({''.join(o + ', ' for o in outs)})"
    body.append(f"return {ret}")
    lines = ["def _call(args):"] + [f"    {x}" for x in head]
    indent = "    "
    if model._lock is not None:
        lines.append("    with _lock:")
        indent += "    "
    if arena_reg >= 0:
        lines += [f"{indent}try:", f"{indent}    A = _pool.pop()", f"{indent}except IndexError:",
                  f"{indent}    A = _Arena()", f"{indent}S = A.slots", f"{indent}M = A.memo"]
    lines.append(f"{indent}try:")
    lines += [f"{indent}    {x}" for x in body]
    lines += [f"{indent}except Exception as exc:", f"{indent}    raise _err(exc) from None"]
    if arena_reg >= 0:
        lines += [f"{indent}finally:", f"{indent}    _pool.append(A)"]
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<CompiledModel call>", "exec"), ns)  # noqa: S102 - from the program
    return source, ns["_call"]


def _render_kernel(i: int, k: Any, ref: Callable[[int], str], register_types: Sequence[str],
                   resources: dict[int, Any], ns: dict[str, Any]) -> list[str]:
    """The lines of one kernel of :func:`_render_call`."""
    ck = getattr(k.fn, "__pytfrt_compute__", None)
    targets = ", ".join(f"r{r}" for r in k.results)
    if ck is None or len(ck.attrs) != len(k.attrs):
        # not a compute kernel: through the registry entry, tensors as DenseHostTensors
        ns[f"_cs{i}"] = k.entry.call_sync
        ns[f"_a{i}"] = k.attrs
        ns[f"_k{i}"] = k
        values = ", ".join(f"_T({ref(r)})" if register_types[r].startswith("tensor<")
                           else ref(r) for r in k.operands)
        call = f"_cs{i}([{values}], _a{i}, _k{i}.funcs, _ctx, {k.num_results})"
        if not k.results:
            return [call]
        lines = [f"{targets}, = {call}"]
        lines += [f"r{r} = _U(r{r})" for r in k.results
                  if register_types[r].startswith("tensor<")]
        return lines
    attrs = dict(zip(ck.attrs, k.attrs, strict=True))
    operands = list(k.operands[1:] if ck.buffered else k.operands)
    buffer = attrs.pop("buffer", None)
    kw = []
    # a compute function may specialise itself for its attributes and constant operands
    specialize = getattr(ck.fn, "specialize", None)
    fn = specialize({j: resources[r] for j, r in enumerate(operands) if r in resources},
                    **attrs) if specialize is not None else None
    if fn is None:
        fn = ck.fn
        for j, (name, value) in enumerate(sorted(attrs.items())):
            ns[f"_v{i}_{j}"] = value
            kw.append(f"**{{{name!r}: _v{i}_{j}}}" if keyword.iskeyword(name)
                      else f"{name}=_v{i}_{j}")
    ns[f"_c{i}"] = fn
    args = [ref(r) for r in operands]

    def invoke(out: str | None) -> str:
        return f"_c{i}({', '.join(args + kw + ([f'out={out}'] if out else []))})"

    # a specialised function may promise its results are ndarrays (``fn.num_arrays``)
    exact = getattr(fn, "num_arrays", None) == len(k.results)
    if len(k.results) != 1:
        if not k.results:
            return [invoke(None)]
        if exact:
            return [f"{targets}, = {invoke(None)}"]
        return [f"{targets}, = _arrs({invoke(None)}, {len(k.results)})"]
    (t,) = k.results
    fix = [] if ck.opaque_result or exact else [f"if r{t}.__class__ is not _nd:",
                                                f"    r{t} = _arr(r{t})"]
    if buffer is None:
        return [f"r{t} = {invoke(None)}", *fix]
    slot, site = buffer
    # the buffer fits if the op sees the input shapes of last time (resources never change)
    key = [f"{ref(r)}.shape" for j, r in enumerate(operands)
           if r not in resources and j not in ck.opaque]
    return [
        f"k = ({''.join(x + ', ' for x in key)})",
        f"m = M.get({site})",
        f"b = S.get({slot})",
        "if m is not None and b is not None and m[0] == k and b.shape == m[1]:",
        f"    r{t} = {invoke('b')}",
        "else:",
        f"    r{t} = A.keep({slot}, {site}, k, _arr({invoke(None)}))",
    ]


class CompiledModel:
    """A compiled model (see the module docstring).

    Args:
        program: the lowered program (``@tg_init``, ``@main``).
        weights: ``@tg_init``'s arguments, in order (arrays; not copied).
        signature: the model's signature.
        num_resources: the number of leading ``@main`` arguments produced by ``@tg_init``.
        weight_names: the names of ``weights`` (for ``save``).
        variables: names of the model's variables (state).
        host: the HostContext to run on, or a work-queue type string for a new one of its own
            (:func:`resolve_host`; default :func:`default_host`).

    Raises:
        ModelError: if the program cannot be loaded or ``@tg_init`` fails.
        ValueError: ``host`` is a string that is not a work-queue type.
    """

    def __init__(self, program: Program, weights: Sequence[np.ndarray], signature: Signature,
                 num_resources: int, weight_names: Sequence[str] = (),
                 variables: Sequence[str] = (), host: HostContext | str | None = None) -> None:
        self.program = program
        self.signature = signature
        self.weight_names = list(weight_names) or [f"w{i}" for i in range(len(weights))]
        self._weights = list(weights)
        self._variables = list(variables)
        self.host = resolve_host(host)
        try:
            bef = load_program(program, self.host)
        except PytfrtError as exc:
            raise ModelError(f"cannot load the model program: {exc}") from None
        init = bef.get_function(INIT)
        main = bef.get_function(MAIN)
        if init is None or main is None:
            raise ModelError("the program has no @tg_init or @main function")
        self._resource_context = ResourceContext()
        self._ctx = ExecutionContext(RequestContext(self.host, self._resource_context))
        self._num_resources = num_resources
        self._resources = self._run_init(init, num_resources)
        self._weights = _release_prepared(self._weights, self._resources)
        self._main = main
        self._checks = [_input_checker(i, s, signature.casting)
                        for i, s in enumerate(signature.inputs)]
        self._n_inputs = len(self._checks)
        self._input_index = {s.name: i for i, s in enumerate(signature.inputs)}
        self._pack = _packer(signature)
        # calls that update variables run one at a time, in the order they take the lock
        self._lock: threading.Lock | None = threading.Lock() if self._variables else None
        # planned activation buffers: one arena per concurrent call, from a pool
        main_args = program.get(MAIN).argument_types
        self._arena_index = num_resources if (
            len(main_args) > num_resources and main_args[num_resources] == ARENA_TYPE) else -1
        self._arenas: list[Arena] = []
        # the call function: @main as straight-line Python when it is a sync function
        self.call_source = ""
        self._call: Callable[[tuple[Any, ...]], Any] = self._call_via_executor
        if isinstance(main, SyncBEFFunction):
            self.call_source, self._call = _render_call(
                self, main.info, program.get(MAIN).register_types)

    def _run_init(self, init: Any, num_resources: int) -> list[Any]:
        args = [make_available(DenseHostTensor(dtype_from_numpy(w.dtype), w))
                for w in self._weights]
        results = init.execute(self._ctx, args)
        self.host.await_values(results)
        out = []
        for r in results:
            if r.is_error():
                raise ModelError(f"model initialisation failed: {r.error.message}")
            out.append(r.get())
        if len(out) < num_resources:
            raise ModelError(f"@tg_init returned {len(out)} values, expected at least "
                             f"{num_resources} resources")
        return out[:num_resources]

    # -- calling ------------------------------------------------------------------------------
    def _count_error(self, n: int) -> InputError:
        names = ", ".join(s.name for s in self.signature.inputs)
        return InputError(f"the model takes {self._n_inputs} inputs ({names}), got {n}: pass "
                          "them in that order, by name (model(**inputs)) or as one dict")

    def _checked(self, args: tuple[Any, ...]) -> tuple[np.ndarray, ...]:
        if len(args) != self._n_inputs:
            raise self._count_error(len(args))
        return tuple(check(x) for check, x in zip(self._checks, args, strict=True))

    def _bind_named(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        if not kwargs and len(args) == 1 and type(args[0]) is dict:
            kwargs = args[0]  # model({"a": ..., "b": ...}) as Keras takes it
            args = ()
        slots: list[Any] = list(args) + [_MISSING] * (self._n_inputs - len(args))
        if len(args) > self._n_inputs:
            raise InputError(f"the model takes {self._n_inputs} inputs, got {len(args)} "
                             "positional ones")
        for name, value in kwargs.items():
            i = self._input_index.get(name)
            if i is None:
                known = ", ".join(self._input_index)
                raise InputError(f"unknown input name '{name}' (inputs: {known})")
            if slots[i] is not _MISSING:
                raise InputError(f"input '{name}' is given twice")
            slots[i] = value
        missing = [s.name for s, v in zip(self.signature.inputs, slots, strict=True)
                   if v is _MISSING]
        if missing:
            raise InputError(f"missing inputs: {', '.join(missing)}")
        return tuple(slots)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the model on NumPy arrays; returns the outputs in the source's structure.

        Raises:
            InputError: wrong input count, name, dtype or shape.
            ModelError: a kernel failed.
        """
        if kwargs or (len(args) == 1 and type(args[0]) is dict and self._n_inputs > 0):
            args = self._bind_named(args, kwargs)
        try:
            return self._call(args)
        except ModelError as exc:
            raise self._explain(args, exc) from None

    def _explain(self, args: tuple[Any, ...], exc: ModelError) -> ModelError:
        """``exc``, with the likely cause named when the inputs disagree on their batch size
        (a kernel's own message, such as a concatenation's, names no input)."""
        specs = self.signature.inputs
        batched = [(s.name, a.shape[0]) for s, a in zip(specs, args, strict=False)
                   if s.shape and s.shape[0] is None and getattr(a, "ndim", 0) >= 1]
        if len({n for _, n in batched}) > 1:
            sizes = ", ".join(f"'{name}' has {n}" for name, n in batched)
            return ModelError(f"{exc} -- the inputs have different batch sizes ({sizes}); "
                              "every input's first dimension must be the same")
        return exc

    def _call_via_executor(self, args: tuple[Any, ...]) -> Any:
        """A call of an async ``@main`` (one with control flow) on the BEF executor."""
        arrays = self._checked(args)
        values = [make_available(v) for v in self._resources]
        values += [make_available(DenseHostTensor(dtype_from_numpy(x.dtype), x)) for x in arrays]
        if self._lock is not None:
            with self._lock:
                return self._pack(self._await(self._main.execute(self._ctx, values)))
        return self._pack(self._await(self._main.execute(self._ctx, values)))

    def _await(self, results: list[AsyncValue[Any]]) -> list[Any]:
        self.host.await_values(results)
        out = []
        for r in results:
            if r.is_error():
                raise ModelError(r.error.message)
            out.append(r.get())
        return out

    def call_async(self, *args: Any, **kwargs: Any) -> AsyncValue[Any]:
        """Run the model on the host's work queue; returns an AsyncValue of the outputs.

        Input errors are raised at once (:class:`InputError`); a kernel failure makes the
        AsyncValue an error.
        """
        if kwargs:
            args = self._bind_named(args, kwargs)
        arrays = self._checked(args)
        return self.host.enqueue_work(lambda: self._call(arrays))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save to the directory ``path``: ``model.bef``, ``weights.btf``, ``manifest.json``.

        Raises:
            ModelError: if a file cannot be written.
        """
        save_model(self, path)

    # -- introspection --------------------------------------------------------------------------
    @property
    def variables(self) -> dict[str, np.ndarray]:
        """The model's variables (copies of their current values), by name."""
        if not self._variables:
            return {}
        from pytfrt.backends.cpu.graph_state import variable_values

        return variable_values(self._ctx, self._variables)

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {np.dtype(s.dtype)}{_fmt(s.shape)}"
                        for s in self.signature.inputs)
        return f"<CompiledModel ({ins}) -> {len(self.signature.outputs)} outputs>"


class _PreparedWeight:
    """A weight that only a prepared plan uses (a conv filter): the plan holds the one prepared
    copy and gives the original back on demand (``np.asarray``, e.g. by ``save``)."""

    def __init__(self, restore: Callable[[], np.ndarray], shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        self._restore, self.shape, self.dtype = restore, shape, dtype

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self._restore()
        return a if dtype is None else a.astype(dtype)


def _release_prepared(weights: list[Any], resources: list[Any]) -> list[Any]:
    """``weights`` with each array that a plan among ``resources`` was prepared from (the plan
    has ``source``, a weak reference to it, and ``filter()``, which rebuilds it) and that no
    other resource holds replaced by a :class:`_PreparedWeight`, so the model keeps one copy."""
    held = {id(r.array) for r in resources if isinstance(r, DenseHostTensor)}
    plans: dict[int, Any] = {}
    for r in resources:
        ref = getattr(r, "source", None)
        src = ref() if callable(ref) else None
        if src is not None and callable(getattr(r, "filter", None)):
            plans[id(src)] = r
    out: list[Any] = []
    for w in weights:
        plan = None if id(w) in held else plans.get(id(w))
        out.append(w if plan is None else _PreparedWeight(plan.filter, w.shape, w.dtype))
    return out


class _Missing:
    pass


_MISSING = _Missing()


def _packer(signature: Signature) -> Callable[[list[Any]], Any]:
    structure = signature.structure
    if structure == "single":
        return lambda out: out[0].array
    if structure == "list":
        return lambda out: [o.array for o in out]
    if structure == "dict":
        names = [s.name for s in signature.outputs]
        return lambda out: {n: o.array for n, o in zip(names, out, strict=True)}
    return lambda out: tuple(o.array for o in out)


FORMAT = "pytfrt.compiled_model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PROGRAM_FILE = "model.bef"
WEIGHTS_FILE = "weights.btf"

# BTF stores these dtypes' bits in an unsigned type of the same size (the manifest keeps the
# real dtype).
_BTF_STORAGE = {"float16": np.uint16, "bfloat16": np.uint16, "bool": np.uint8}


def save_model(model: CompiledModel, path: str | os.PathLike[str]) -> None:
    """Write ``model`` to the directory ``path`` (created if missing); variables are saved
    with their current values.

    Files: ``model.bef`` (the program, an ordinary BEF file), ``weights.btf`` (``@tg_init``'s
    arguments, in order, TFRT's BTF format) and ``manifest.json`` (format and version,
    signature, weight names and dtypes, resource count, variables).

    Raises:
        ModelError: if a file cannot be written.
    """
    import json

    from pytfrt.bef.writer import write_bef
    from pytfrt.tensor.btf import encode_btf

    d = Path(path)
    stored = []
    entries = []
    current = model.variables
    for name, w in zip(model.weight_names, model._weights, strict=True):
        w = current.get(name, w)
        arr = np.ascontiguousarray(w)
        storage = _BTF_STORAGE.get(arr.dtype.name)
        stored.append(arr.view(storage) if storage is not None else arr)
        entries.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape)})
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "program": PROGRAM_FILE,
        "weights_file": WEIGHTS_FILE,
        "signature": model.signature.to_json(),
        "weights": entries,
        "num_resources": model._num_resources,
        "variables": list(model._variables),
    }
    try:
        d.mkdir(parents=True, exist_ok=True)
        (d / PROGRAM_FILE).write_bytes(write_bef(model.program))
        (d / WEIGHTS_FILE).write_bytes(encode_btf(stored))
        (d / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    except OSError as exc:
        raise ModelError(f"cannot save the model to '{d}': {exc.strerror or exc}") from None


def map_btf(path: Path) -> list[np.ndarray]:
    """The dense tensors of a BTF file as read-only arrays over a memory map of it (no copy
    when the data is aligned for its dtype; a copy otherwise).

    Raises:
        ModelError: for a truncated or malformed file.
    """
    import mmap
    import struct

    from pytfrt.tensor.btf import BTF_DTYPES, LAYOUT_ROW_MAJOR

    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        buf: Any = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def bad(what: str) -> ModelError:
        return ModelError(f"'{path}' is not a valid BTF weights file: {what}")

    if size < 8:
        raise bad("no tensor count")
    (count,) = struct.unpack_from("<Q", buf, 0)
    if 8 + 8 * count > size:
        raise bad("truncated offset table")
    out = []
    for i in range(count):
        (off,) = struct.unpack_from("<Q", buf, 8 + 8 * i)
        if off + 16 > size:
            raise bad(f"tensor {i} header out of range")
        rank, code, layout = struct.unpack_from("<QBB6x", buf, off)
        if layout != LAYOUT_ROW_MAJOR or code >= len(BTF_DTYPES) or rank > 32:
            raise bad(f"tensor {i} has an unsupported header")
        dims = struct.unpack_from(f"<{rank}Q", buf, off + 16)
        pos = off + 16 + 8 * rank
        dtype = np.dtype(BTF_DTYPES[code].np_dtype).newbyteorder("<")
        n = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if pos + n * dtype.itemsize > size:
            raise bad(f"tensor {i} data out of range")
        arr = np.frombuffer(buf, dtype, n, pos).reshape(dims)
        if pos % dtype.itemsize:
            arr = arr.copy()
        out.append(arr)
    return out


def load(path: str | os.PathLike[str], host: HostContext | str | None = None) -> CompiledModel:
    """Load a model saved with :meth:`CompiledModel.save` (weights memory-mapped, not copied).

    ``host``: the HostContext the model runs on (its work queue runs ``call_async``), a
    work-queue type string such as ``"mstd:1"`` for a new one (:func:`create_host`), or
    ``None`` for :func:`default_host`.

    Raises:
        ValueError: ``host`` is a string that is not a work-queue type.
        ModelError: if ``path`` is not a saved model directory, is of another format or
            version, or a file is missing or damaged (the message says which).
    """
    import json

    from pytfrt.bef.reader import read_bef

    d = Path(path)
    if not d.is_dir():
        raise ModelError(f"'{d}' is not a saved model directory (no such directory)")
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except FileNotFoundError:
        raise ModelError(f"'{d}' is not a saved model directory (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise ModelError(f"'{d / MANIFEST}' cannot be read: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ModelError(f"'{d}' is not a pytfrt saved model ({MANIFEST} has no format "
                         f"'{FORMAT}')")
    if manifest.get("version") != FORMAT_VERSION:
        raise ModelError(f"'{d}' has format version {manifest.get('version')!r}; this pytfrt "
                         f"reads version {FORMAT_VERSION}")
    try:
        signature = Signature.from_json(manifest["signature"])
        entries = list(manifest["weights"])
        num_resources = int(manifest["num_resources"])
        variables = [str(v) for v in manifest.get("variables", [])]
        program_file = d / str(manifest.get("program", PROGRAM_FILE))
        weights_file = d / str(manifest.get("weights_file", WEIGHTS_FILE))
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"'{d / MANIFEST}' is malformed: {exc}") from None
    try:
        program = read_bef(program_file.read_bytes())
    except OSError as exc:
        raise ModelError(f"cannot read '{program_file}': {exc.strerror or exc}") from None
    except PytfrtError as exc:
        raise ModelError(f"'{program_file}' is not a valid BEF file: {exc}") from None
    try:
        stored = map_btf(weights_file) if entries else []
    except OSError as exc:
        raise ModelError(f"cannot read '{weights_file}': {exc.strerror or exc}") from None
    if len(stored) != len(entries):
        raise ModelError(f"'{weights_file}' holds {len(stored)} tensors, the manifest lists "
                         f"{len(entries)}")
    weights = []
    for e, arr in zip(entries, stored, strict=True):
        try:
            want = np.dtype(_dtype_by_name(str(e["dtype"])))
            shape = tuple(int(x) for x in e["shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"'{d / MANIFEST}': bad weight entry {e!r}: {exc}") from None
        if arr.dtype != want:
            arr = arr.view(want)
        if arr.shape != shape:
            raise ModelError(f"weight '{e.get('name')}' has shape {list(arr.shape)} in "
                             f"'{weights_file}', the manifest says {list(shape)}")
        weights.append(arr)
    return CompiledModel(program, weights, signature, num_resources,
                         [str(e["name"]) for e in entries], variables, host)


def _dtype_by_name(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)
