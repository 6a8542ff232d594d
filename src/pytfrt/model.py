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

import ctypes
import functools
import keyword
import mmap
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt import config
from pytfrt.backends.cpu.arena import Arena, SlotPlan
from pytfrt.bef.program import Program
from pytfrt.executor.loader import load_program
from pytfrt.executor.sync_executor import SyncBEFFunction, static_call, unpack_results
from pytfrt.host.async_value import AsyncValue, make_available
from pytfrt.host.execution_context import ExecutionContext, RequestContext, ResourceContext
from pytfrt.host.heap import keep_freed_memory
from pytfrt.host.host_context import HostContext
from pytfrt.host.kernel_frame import result_list
from pytfrt.signature import Signature, TensorSpec
from pytfrt.support.codegen import exec_generated
from pytfrt.support.errors import PytfrtError
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import dtype_from_numpy
from pytfrt.tensor.string_host_tensor import StringHostTensor

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
    :data:`pytfrt.signature.CASTINGS`) an array of another numeric dtype is converted unless a
    float would become an integer (float64 -> float32, ints and bools -> floats, ints -> ints);
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


def _output_checker(index: int, spec: TensorSpec) -> Callable[[Any], np.ndarray]:
    """A function that checks output ``index`` against its signature entry (dtype, rank,
    static dims) and returns it as an ndarray; a mismatch means the program does not compute
    what its signature promises (a damaged or hostile program).

    Raises (from the returned function):
        ModelError: naming the output, what it got and what the signature says.
    """
    want = np.dtype(spec.dtype)
    shape = spec.shape

    def check(x: Any) -> np.ndarray:
        if type(x) is not np.ndarray:
            x = np.asarray(_unwrap(x))
        ok = x.dtype == want and (shape is None or (x.ndim == len(shape) and all(
            d is None or d == n for d, n in zip(shape, x.shape, strict=True))))
        if not ok:
            raise ModelError(f"output {index} ('{spec.name[:80]}') is {x.dtype}"
                             f"{list(x.shape)}, the signature says {want}{_fmt(shape)}: the "
                             "program does not compute what its signature promises")
        return x

    return check


def _render_output_checks(specs: Sequence[TensorSpec], outs: list[str], ns: dict[str, Any]
                          ) -> list[str]:
    """Lines of the generated call function that check its outputs (``outs``: expressions)
    against the signature: an inline quick test (type, dtype identity, rank, static dims),
    and :func:`_output_checker` only when it fails."""
    lines = []
    for j, (o, spec) in enumerate(zip(outs, specs, strict=True)):
        ns[f"_odt{j}"] = np.dtype(spec.dtype)
        ns[f"_oc{j}"] = _output_checker(j, spec)
        t = o
        if not o.startswith("r"):  # a resource constant: checked through a local
            t = outs[j] = f"_o{j}_"
            lines.append(f"{t} = {o}")
        quick = [f"{t}.__class__ is not _nd", f"{t}.dtype is not _odt{j}"]
        if spec.shape is not None:
            quick.append(f"{t}.ndim != {len(spec.shape)}")
            quick += [f"{t}.shape[{i}] != {d}" for i, d in enumerate(spec.shape)
                      if d is not None]
        lines += [f"if {' or '.join(quick)}:", f"    {t} = _oc{j}({t})"]
    return lines


def _one_dict(args: tuple[Any, ...]) -> bool:
    """Whether a call's positional arguments are one dict of inputs by name."""
    return len(args) == 1 and type(args[0]) is dict


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
    return value.array if type(value) in (DenseHostTensor, StringHostTensor) else value


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
    function (variables, glue) are called on DenseHostTensors with their binding plan
    rendered once, as the sync executor does (``sync_executor.static_call``), or through
    their registry entry when it cannot be static (a KernelFrame parameter).
    The first kernel exception stops the call and is raised as :class:`ModelError` with its
    message, as the sync executor reports it (``pytfrt.executor.sync_executor``).  The BEF
    program is unchanged: ``@main`` stays an ordinary ``tfrt.sync`` function.
    """
    from pytfrt.backends.cpu.graph_kernels import to_tensor

    ns: dict[str, Any] = {
        "_nd": np.ndarray, "_err": _model_error, "_arr": _as_array, "_arrs": _as_arrays,
        "_T": to_tensor, "_U": _unwrap, "_Arena": Arena, "_pool": model._arenas,
        "_ctx": model._ctx, "_lock": model._lock, "_count": model._count_error,
        "_rl": result_list,
    }
    n_res = model._num_resources
    arena_reg = model._arena_index
    resources = {r: _unwrap(v) for r, v in enumerate(model._resources)}
    uses: dict[int, int] = {}  # per resource register, the operands and results naming it

    def ref(r: int) -> str:
        if r in resources:
            ns[f"_R{r}"] = resources[r]
            uses[r] = uses.get(r, 0) + 1
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
    releasable: list[tuple[Any, int, int]] = []
    certified = set(inputs)  # registers whose shapes follow from the inputs' (see _render_kernel)
    steady = arena_reg >= 0 and bool(inputs)
    if steady:  # the whole-call steady state: see _render_kernel
        body += ["K = False", f"Q = ({''.join(f'r{r}.shape, ' for r in inputs)})",
                 "D = A.steady != Q", "A.steady = None"]
    lives: dict[int, list[tuple[int, int]]] = {}  # the arena's SlotPlan, from the kernels
    for i, (k, release) in enumerate(zip(info.kernels[1:], info.release_after, strict=True)):
        body += _render_kernel(i, k, ref, register_types, resources, ns, releasable, lives,
                               certified if steady else None)
        body += [f"r{r} = None" for r in release]
    # slots given new shapes share one block from the next call on (Arena.pack)
    if steady:
        body += ["if not K:", "    A.steady = Q"]
        if lives:
            body += ["elif A.pending:", "    A.pack()"]
    elif lives:
        body += ["if A.pending:", "    A.pack()"]
    ns["_plan"] = SlotPlan(lives) if lives else None
    outs = [ref(r) for r in info.result_registers]
    body += _render_output_checks(model.signature.outputs, outs, ns)
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
                  f"{indent}    A = _Arena(_plan)", f"{indent}S = A.slots", f"{indent}M = A.memo"]
    lines.append(f"{indent}try:")
    lines += [f"{indent}    {x}" for x in body]
    lines += [f"{indent}except Exception as exc:", f"{indent}    raise _err(exc) from None"]
    if arena_reg >= 0:
        lines += [f"{indent}finally:", f"{indent}    _pool.append(A)"]
    source = "\n".join(lines) + "\n"
    exec_generated(source, "CompiledModel call", ns)
    _release_consumed(model, ns, resources, uses, releasable)
    return source, ns["_call"]


def _release_consumed(model: CompiledModel, ns: dict[str, Any], resources: dict[int, Any],
                      uses: dict[int, int], releasable: list[tuple[Any, int, int]]) -> None:
    """Drop the model's copies of constants that only specialised kernels read and that those
    kernels hold in a prepared form of their own (a dense layer's packed weight).

    ``releasable`` lists ``(fn, j, r)``: kernel function ``fn`` (with ``fn.release``) reads
    resource register ``r`` as operand ``j``.  A resource every use of which is such an operand
    is offered to each ``fn.release(j)``, which returns a function rebuilding the array (or
    ``None``: it keeps reading the operand, and the model keeps the array).  Once all agree, the
    call passes ``None`` for it, the model's resource slot is emptied, and a weight that is the
    same array becomes a :class:`_PreparedWeight` (``save`` rebuilds it).
    """
    by_register: dict[int, list[tuple[Any, int]]] = {}
    for fn, j, r in releasable:
        by_register.setdefault(r, []).append((fn, j))
    for r, users in by_register.items():
        if uses.get(r, 0) != len(users):
            continue
        restores = [fn.release(j) for fn, j in users]
        if any(f is None for f in restores):
            continue  # pragma: no cover - a runner that could not pack: the array stays
        array = resources.pop(r)
        ns[f"_R{r}"] = None
        model._resources[r] = None
        kept: list[Any] = [_PreparedWeight(restores[0], w.shape, w.dtype) if w is array else w
                           for w in model._weights]
        model._weights = kept
        size = getattr(array, "nbytes", 0)
        pages = _file_pages(array)
        del array
        if pages is not None:
            _drop_pages(*pages)  # the weights file's pages it was read from
        elif size >= TRIM_BYTES:
            trim_heap()  # before the next weight is packed beside it


TRIM_BYTES = 1 << 20
"""A released weight at least this large is handed back to the system at once
(:func:`trim_heap`)."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        fn = ctypes.CDLL(None).malloc_trim  # glibc
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    return fn  # type: ignore[no-any-return]


def trim_heap() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``; a no-op
    elsewhere).  glibc serves an allocation of the size of one it recently unmapped from its
    heap, and freed heap memory stays resident: without this, the plain copy of each weight a
    kernel packs into memory of its own (outside the heap) would stay counted in the process's
    RSS while the next weight is packed, and the compile would peak at two copies of the
    weights.  Thread-safe (glibc locks its arenas)."""
    fn = _malloc_trim()
    if fn is not None:
        fn(0)


_FILE_MAPS: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()
"""The read-only maps of weights files made by :func:`load` (their pages can always be
dropped: they are read again from the file if touched)."""


def _drain(items: list[Any]) -> Iterator[Any]:
    """The items of ``items`` in order, each removed from the list as it is taken."""
    items.reverse()
    while items:
        yield items.pop()


def _file_pages(array: Any) -> tuple[mmap.mmap, int, int] | None:
    """``(map, offset, size)`` of ``array`` in a weights file mapped by :func:`load`, or
    ``None`` when it is not a view of one."""
    base = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    if not isinstance(base, mmap.mmap) or base not in _FILE_MAPS:
        return None
    start = np.frombuffer(base, np.uint8, 1).ctypes.data
    return base, int(array.ctypes.data) - start, int(array.nbytes)


def _drop_pages(m: mmap.mmap, offset: int, size: int) -> None:
    """Unmap from this process the whole pages of ``[offset, offset + size)`` of the file map
    ``m`` (``MADV_DONTNEED``: they leave its RSS; a later read faults them in again from the
    file, so this is safe whatever else lies on them)."""
    page = mmap.PAGESIZE
    a, b = -(-offset // page) * page, (offset + size) // page * page
    if b > a and hasattr(mmap, "MADV_DONTNEED"):
        try:
            m.madvise(mmap.MADV_DONTNEED, a, b - a)
        except (OSError, ValueError):
            pass  # advice only


OWN_PAGES_BYTES = 1 << 20
"""Weights at least this large get anonymous mappings of their own (:func:`own_pages`)."""


def own_pages(array: np.ndarray) -> np.ndarray:
    """``array`` copied into an anonymous memory mapping of its own (same dtype, shape and
    writeability), if it is at least :data:`OWN_PAGES_BYTES`; else ``array`` itself.

    A weight that a kernel later replaces by a prepared copy of its own (a convolution's
    oneDNN filter, made at the first call) then gives its pages back to the system the moment
    it is dropped; from the C heap they would stay resident beside the prepared copies, and the
    first call would peak at two copies of those weights.  ``pytfrt.compile`` moves each weight
    of a module it built (one at a time, the heap trimmed as it goes).  Thread-safe."""
    if array.nbytes < OWN_PAGES_BYTES or array.dtype.hasobject:
        return array
    m = mmap.mmap(-1, array.nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    out = np.frombuffer(m, array.dtype, array.size).reshape(array.shape)
    np.copyto(out, array, casting="no")
    out.flags.writeable = array.flags.writeable
    return out


def _render_kernel(i: int, k: Any, ref: Callable[[int], str], register_types: Sequence[str],
                   resources: dict[int, Any], ns: dict[str, Any],
                   releasable: list[tuple[Any, int, int]],
                   lives: dict[int, list[tuple[int, int]]],
                   certified: set[int] | None = None) -> list[str]:
    """The lines of one kernel of :func:`_render_call`.

    A kernel with a planned buffer tests, before writing into it, that its operands have the
    shapes of the last time it wrote there and that the buffer has its output shape
    (:meth:`Arena.run`, inlined).  With ``certified`` (the call has an arena and inputs) a
    buffered kernel whose shape-carrying operands are all *certified* -- the model's inputs
    and the results of such kernels, the set this function extends -- skips that test while
    the call's ``D`` is false: ``D`` starts false only when the arena's last call completed
    with the same input shapes and kept no new buffer (``A.steady``), and becomes true at the
    first buffer kept in this call.  Until then every certified operand has the shape it had
    in that call (a buffered kernel's result shape follows from its operands' shapes: the
    buffer test relies on that already) and every slot holds the buffer that call used.  A
    kernel reading a result of any other kernel (a view, a kernel without a planned buffer,
    one not made from a compute function) always tests, and a kept buffer sets ``D`` and
    ``K`` (the call is not steady).  A planned buffer's lifetime (``tg.buffer``'s ``first``
    and ``last``) is added to ``lives``, the arena's :class:`SlotPlan`."""
    ck = getattr(k.fn, "__pytfrt_compute__", None)
    targets = ", ".join(f"r{r}" for r in k.results)
    if ck is None or len(ck.attrs) != len(k.attrs):
        # not a compute kernel: through the registry entry, tensors as DenseHostTensors
        ns[f"_a{i}"] = k.attrs
        ns[f"_k{i}"] = k

        def operand(r: int) -> str:
            return f"_T({ref(r)})" if register_types[r].startswith("tensor<") else ref(r)

        # its binding plan rendered once (as the sync executor does), or the generic binding
        call = static_call(k, i, register_types, operand, "_ctx")
        if call is not None:
            ns[f"_f{i}"] = k.fn
            lines = unpack_results(call, k, i, targets)
        else:
            ns[f"_cs{i}"] = k.entry.call_sync
            values = ", ".join(operand(r) for r in k.operands)
            call = f"_cs{i}([{values}], _a{i}, _k{i}.funcs, _ctx, {k.num_results})"
            lines = [f"{targets}, = {call}" if k.results else call]
        if not k.results:
            return lines
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
    elif hasattr(fn, "release"):  # it may hold its constants in a prepared form of its own
        releasable += [(fn, j, r) for j, r in enumerate(operands) if r in resources]
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
    slot, site = buffer[0], buffer[1]  # [slot, site, first, last] (or [slot, site]: older BEF)
    if len(buffer) == 4:
        lives.setdefault(slot, []).append((buffer[2], buffer[3]))
    # the buffer fits if the op sees the input shapes of last time (resources never change)
    shaped = [r for j, r in enumerate(operands) if r not in resources and j not in ck.opaque]
    key = [f"{ref(r)}.shape" for r in shaped]
    test = [
        f"k = ({''.join(x + ', ' for x in key)})",
        f"m = M.get({site})",
        f"b = S.get({slot})",
        "if m is not None and b is not None and m[0] == k and b.shape == m[1]:",
        f"    r{t} = {invoke('b')}",
        "else:",
        f"    r{t} = A.keep({slot}, {site}, k, _arr({invoke(None)}))",
    ]
    if certified is None:
        return test
    test.append("    D = K = True")
    if not all(r in certified for r in shaped):
        return test
    certified.add(t)
    return ["if D:", *(f"    {x}" for x in test), "else:", f"    r{t} = {invoke(f'S[{slot}]')}"]


class CompiledModel:
    """A compiled model (see the module docstring).

    Args:
        program: the lowered program (``@tg_init``, ``@main``).
        weights: ``@tg_init``'s arguments, in order (arrays; not copied); an iterator is
            consumed, so a caller passing one holds no reference to the arrays and those the
            kernels keep in a prepared form of their own are freed as they are prepared.
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

    def __init__(self, program: Program, weights: Iterable[np.ndarray], signature: Signature,
                 num_resources: int, weight_names: Sequence[str] = (),
                 variables: Sequence[str] = (), host: HostContext | str | None = None) -> None:
        self.program = program
        self.signature = signature
        self._weights = list(weights)
        self.weight_names = list(weight_names) or [f"w{i}" for i in range(len(self._weights))]
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
        if self._variables:  # a train step: its freed tensors are reused next step
            keep_freed_memory()
        # planned activation buffers: one arena per concurrent call, from a pool
        main_args = program.get(MAIN).argument_types
        self._arena_index = num_resources if (
            len(main_args) > num_resources and main_args[num_resources] == ARENA_TYPE) else -1
        self._arenas: list[Arena] = []
        # what pytfrt.compile compiled: (obj, input_signature, signature); pytfrt.quantize
        # compiles it again.  None for a loaded model.
        self.source: tuple[Any, Any, str | None] | None = None
        # the call function: @main as straight-line Python when it is a sync function
        self.call_source = ""
        self._call: Callable[[tuple[Any, ...]], Any] = self._call_via_executor
        if isinstance(main, SyncBEFFunction):
            self.call_source, self._call = _render_call(
                self, main.info, program.get(MAIN).register_types)

    def _run_init(self, init: Any, num_resources: int) -> list[Any]:
        args = [make_available(StringHostTensor(w) if w.dtype == object
                               else DenseHostTensor(dtype_from_numpy(w.dtype), w))
                for w in self._weights]  # (a string constant is an object-array weight)
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
        if not kwargs and _one_dict(args):
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
        if kwargs:
            args = self._bind_named(args, kwargs)
        try:
            return self._call(args)
        except InputError:
            # model({"a": ..., "b": ...}) as Keras takes it: bound by name only once the
            # positional check has failed, so the hot path pays nothing for it.
            if _one_dict(args) and all(type(k) is str for k in args[0]):
                return self(**args[0])
            raise
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
            return ModelError(f"the inputs have different batch sizes ({sizes}): every "
                              f"input's first dimension must be the same (the kernel: {exc})")
        return exc

    def _call_via_executor(self, args: tuple[Any, ...]) -> Any:
        """A call of an async ``@main`` (one with control flow) on the BEF executor."""
        arrays = self._checked(args)
        values = [make_available(v) for v in self._resources]
        from pytfrt.backends.cpu.graph_kernels import to_tensor  # strings: StringHostTensor

        values += [make_available(to_tensor(x)) for x in arrays]
        if self._lock is not None:
            with self._lock:
                out = self._await(self._main.execute(self._ctx, values))
                # the outputs can be ready before the variable writes that follow them in
                # program order (@main returns no chain): finish those before returning
                self.host.quiesce()
                return self._pack(out)
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
        if kwargs or _one_dict(args):
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
        if plan is not None:
            pages = _file_pages(w)
            if pages is not None:  # its pages of the weights file go when the plan drops it
                weakref.finalize(w, _drop_pages, *pages)
        out.append(w if plan is None else _PreparedWeight(plan.filter, w.shape, w.dtype))
    return out


class _Missing:
    pass


_MISSING = _Missing()


def _packer(signature: Signature) -> Callable[[list[Any]], Any]:
    """The outputs of an executor call, checked (:func:`_output_checker`) and in the
    signature's structure."""
    checks = [_output_checker(i, s) for i, s in enumerate(signature.outputs)]
    structure = signature.structure
    if structure == "single":
        (check,) = checks
        return lambda out: check(out[0])
    if structure == "list":
        return lambda out: [c(o) for c, o in zip(checks, out, strict=True)]
    if structure == "dict":
        names = [s.name for s in signature.outputs]
        return lambda out: {n: c(o) for n, c, o in zip(names, checks, out, strict=True)}
    return lambda out: tuple(c(o) for c, o in zip(checks, out, strict=True))


FORMAT = "pytfrt.compiled_model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PROGRAM_FILE = "model.bef"
WEIGHTS_FILE = "weights.btf"

# Caps on what load() reads (docs/security.md): a saved model is untrusted input.
MAX_MANIFEST_BYTES = 16 << 20
"""The largest ``manifest.json`` :func:`load` reads."""
MAX_PROGRAM_BYTES = 1 << 28
"""The largest BEF program :func:`load` reads (256 MiB; it is read into memory, and the
weights are in the weights file)."""
MAX_WEIGHTS_BYTES = 1 << 40
"""The largest weights file :func:`load` maps (it is memory-mapped, not read)."""
BTF_SLACK = 64
"""Bytes per tensor a weights file may hold beyond its header and data (alignment)."""
MAX_WEIGHTS = 1 << 20
"""The most weight tensors a manifest may list."""
MAX_NAME_CHARS = 255
"""The longest file name a manifest may give."""

# BTF stores these dtypes' bits in an unsigned type of the same size (the manifest keeps the
# real dtype).
_BTF_STORAGE = {"float16": np.uint16, "bfloat16": np.uint16, "bool": np.uint8}
_FILE_FIELDS = (("program", PROGRAM_FILE), ("weights_file", WEIGHTS_FILE))


def save_model(model: CompiledModel, path: str | os.PathLike[str]) -> None:
    """Write ``model`` to the directory ``path`` (created if missing); variables are saved
    with their current values.

    Files: ``model.bef`` (the program, an ordinary BEF file), ``weights.btf`` (``@tg_init``'s
    arguments, in order, TFRT's BTF format) and ``manifest.json`` (format and version,
    signature, weight names and dtypes, resource count, variables, and the SHA-256 of the
    other two files under ``sha256``, which :func:`load` verifies).

    Raises:
        ModelError: if a file cannot be written.
    """
    import hashlib
    import json

    from pytfrt.bef.writer import write_bef
    from pytfrt.tensor.btf import encode_btf

    d = Path(path)
    stored = []
    entries = []
    current = model.variables
    for name, w in zip(model.weight_names, model._weights, strict=True):
        w = current.get(name, w)
        arr = np.asarray(w, order="C")  # not ascontiguousarray: it makes a scalar 1-D
        storage = _BTF_STORAGE.get(arr.dtype.name)
        stored.append(arr.view(storage) if storage is not None else arr)
        entries.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape)})
    program = write_bef(model.program)
    weights = encode_btf(stored)
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "program": PROGRAM_FILE,
        "weights_file": WEIGHTS_FILE,
        "signature": model.signature.to_json(),
        "weights": entries,
        "num_resources": model._num_resources,
        "variables": list(model._variables),
        "sha256": {"program": hashlib.sha256(program).hexdigest(),
                   "weights_file": hashlib.sha256(weights).hexdigest()},
    }
    try:
        d.mkdir(parents=True, exist_ok=True)
        (d / PROGRAM_FILE).write_bytes(program)
        (d / WEIGHTS_FILE).write_bytes(weights)
        (d / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    except OSError as exc:
        raise ModelError(f"cannot save the model to '{d}': {exc.strerror or exc}") from None


def _quote(name: str) -> str:
    """``name`` quoted for an error message, cut to 80 characters."""
    return repr(name if len(name) <= 80 else name[:80] + "...")


def _member_name(manifest: dict[str, Any], field: str, default: str) -> str:
    """The file name in manifest field ``field``: a plain name of a file in the model
    directory (no directories, no ``..``, no NUL or control characters).

    Raises:
        ModelError: naming the field.
    """
    name = manifest.get(field, default)
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
        raise ModelError(f"{MANIFEST}: field '{field}' must be a file name of 1 to "
                         f"{MAX_NAME_CHARS} characters")
    if name in (".", "..") or any(c in name for c in "/\\") or not name.isprintable():
        raise ModelError(f"{MANIFEST}: field '{field}' ({_quote(name)}) must name a file in the "
                         "model directory itself (no directories, '..', or control characters)")
    return name


class _ModelDir:
    """The model directory, open: its members are opened relative to it, one name at a time,
    without following symbolic links and without blocking (a FIFO never hangs a load)."""

    def __init__(self, d: Path) -> None:
        self.path = d
        self.fd: int | None = None
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
        if os.open in os.supports_dir_fd:
            try:
                self.fd = os.open(d, flags)
            except (FileNotFoundError, NotADirectoryError):
                raise ModelError(f"'{d}' is not a saved model directory (no such directory)"
                                 ) from None
            except OSError as exc:
                raise ModelError(f"'{d}' cannot be opened: {exc.strerror or exc}") from None
        elif not d.is_dir():
            raise ModelError(f"'{d}' is not a saved model directory (no such directory)")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def open(self, name: str, field: str, cap: int, limit: str = "the limit") -> tuple[int, int]:
        """A descriptor of the regular file ``name`` and its size (at most ``cap``).

        Raises:
            ModelError: naming ``field``: missing, a link, not a regular file, too large.
        """
        import stat

        what = f"{field} ({_quote(name)})"
        where: Any = name if self.fd is not None else self.path / name
        try:
            st = os.stat(where, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            raise ModelError(f"{what}: no such file in the model directory") from None
        except OSError as exc:
            raise ModelError(f"{what} cannot be read: {exc.strerror or exc}") from None
        if stat.S_ISLNK(st.st_mode):
            raise ModelError(f"{what} is a symbolic link: a model's files must be regular "
                             "files in its directory")
        if not stat.S_ISREG(st.st_mode):
            raise ModelError(f"{what} is not a regular file")
        flags = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        try:
            fd = os.open(where, flags, dir_fd=self.fd)
        except OSError as exc:
            raise ModelError(f"{what} cannot be opened: {exc.strerror or exc}") from None
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
            os.close(fd)
            raise ModelError(f"{what} changed while it was being opened")
        if now.st_size > cap:
            os.close(fd)
            raise ModelError(f"{what} is {now.st_size} bytes, more than {limit} of {cap} "
                             "(docs/security.md)")
        return fd, now.st_size

    def read(self, name: str, field: str, cap: int) -> bytes:
        """The bytes of ``name`` (:meth:`open`'s checks; exactly its ``fstat`` size)."""
        fd, size = self.open(name, field, cap)
        with os.fdopen(fd, "rb", buffering=0) as fh:
            data = fh.read(size)
        if data is None or len(data) != size:
            raise ModelError(f"{field} ({_quote(name)}) changed while it was being read")
        return data

    def map(self, name: str, field: str, cap: int, digest: str | None = None,
            limit: str = "the limit") -> Any:
        """A read-only memory map of ``name`` (``b""`` when empty).  With ``digest``, the
        file's SHA-256 must be it: hashed with ``read`` calls before the file is mapped (no
        page of it is touched in this process's memory)."""
        import hashlib
        import mmap

        fd, size = self.open(name, field, cap, limit)
        try:
            if digest is not None:
                h = hashlib.sha256()
                left = size
                while left > 0:
                    chunk = os.read(fd, min(left, 1 << 20))
                    if not chunk:
                        break
                    h.update(chunk)
                    left -= len(chunk)
                _check_digest(h, field, name, digest)
            return mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
        except (OSError, ValueError) as exc:
            raise ModelError(f"{field} ({_quote(name)}) cannot be mapped: {exc}") from None
        finally:
            os.close(fd)


def map_btf(buf: Any, label: str = WEIGHTS_FILE) -> list[np.ndarray]:
    """The dense tensors of the BTF bytes ``buf`` (a memory map or ``bytes``) as read-only
    arrays over it (no copy when the data is aligned for its dtype; a copy otherwise).

    Every count, offset and size is checked against ``len(buf)`` with exact integers.

    Raises:
        ModelError: for a truncated or malformed file (the message starts with ``label``).
    """
    import struct

    from pytfrt.tensor.btf import BTF_DTYPES, LAYOUT_ROW_MAJOR

    size = len(buf)

    def bad(what: str) -> ModelError:
        return ModelError(f"{label} is not a valid BTF weights file: {what}")

    if size < 8:
        raise bad("no tensor count")
    (count,) = struct.unpack_from("<Q", buf, 0)
    if count > MAX_WEIGHTS or 8 + 8 * count > size:
        raise bad("truncated offset table")
    out = []
    for i in range(count):
        (off,) = struct.unpack_from("<Q", buf, 8 + 8 * i)
        if off + 16 > size:
            raise bad(f"tensor {i} header out of range")
        rank, code, layout = struct.unpack_from("<QBB6x", buf, off)
        if layout != LAYOUT_ROW_MAJOR or code >= len(BTF_DTYPES) or rank > 32:
            raise bad(f"tensor {i} has an unsupported header")
        if off + 16 + 8 * rank > size:
            raise bad(f"tensor {i} header out of range")
        dims = struct.unpack_from(f"<{rank}Q", buf, off + 16)
        pos = off + 16 + 8 * rank
        native = np.dtype(BTF_DTYPES[code].np_dtype)
        dtype = native.newbyteorder("<")
        n = 1
        for dim in dims:
            n *= dim  # Python ints: no overflow
        if pos + n * dtype.itemsize > size:
            raise bad(f"tensor {i} data out of range")
        arr = np.frombuffer(buf, dtype, n, pos).reshape(dims)
        # NumPy's own dtype object, not the little-endian copy ``newbyteorder`` made (kernels'
        # fast paths test ``a.dtype is float32``): a view on little-endian machines, no copy.
        arr = arr.view(native) if dtype == native else arr.astype(native)
        if pos % dtype.itemsize:
            arr = arr.copy()
        out.append(arr)
    return out


def _read_manifest(md: _ModelDir) -> dict[str, Any]:
    """The parsed manifest, its format and version checked."""
    import json

    try:
        os.stat(MANIFEST if md.fd is not None else md.path / MANIFEST, dir_fd=md.fd,
                follow_symlinks=False)
    except FileNotFoundError:
        raise ModelError(f"'{md.path}' is not a saved model directory (no {MANIFEST})") from None
    except OSError:
        pass  # reported by read()
    data = md.read(MANIFEST, MANIFEST, MAX_MANIFEST_BYTES)
    try:
        manifest = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ModelError(f"{MANIFEST} is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelError(f"{MANIFEST} is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ModelError(f"'{md.path}' is not a pytfrt saved model ({MANIFEST} has no format "
                         f"'{FORMAT}')")
    version = manifest.get("version")
    if version != FORMAT_VERSION:
        shown = repr(version) if isinstance(version, int | float | str | None) else "?"
        raise ModelError(f"'{md.path}' has format version {shown[:40]}; this pytfrt reads "
                         f"version {FORMAT_VERSION}")
    return manifest


class _Weight:
    """One validated entry of the manifest's ``weights`` list."""

    __slots__ = ("name", "dtype", "shape", "nbytes")

    def __init__(self, i: int, entry: Any) -> None:
        from pytfrt.signature import parse_dtype, parse_shape

        where = f"{MANIFEST}: field 'weights' entry {i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ModelError(f"{where} must be an object with a string 'name'")
        self.name: str = entry["name"]
        try:
            self.dtype = parse_dtype(entry.get("dtype"))
            self.shape = parse_shape(entry.get("shape"), f"weight {_quote(self.name)}",
                                     dynamic=False)
        except ValueError as exc:
            raise ModelError(f"{where}: {exc}") from None
        n = 1
        for d in self.shape:
            n *= d
        self.nbytes = n * self.dtype.itemsize


def _manifest_fields(manifest: dict[str, Any]) -> tuple[Signature, list[_Weight], int, list[str]]:
    """The signature, weight entries, resource count and variables of the manifest.

    Raises:
        ModelError: naming the malformed field.
    """
    try:
        signature = Signature.from_json(manifest.get("signature"))
    except ValueError as exc:
        raise ModelError(f"{MANIFEST}: field 'signature': {exc}") from None
    entries = manifest.get("weights")
    if not isinstance(entries, list) or len(entries) > MAX_WEIGHTS:
        raise ModelError(f"{MANIFEST}: field 'weights' must be a list of at most {MAX_WEIGHTS}")
    weights = [_Weight(i, e) for i, e in enumerate(entries)]
    num_resources = manifest.get("num_resources")
    if type(num_resources) is not int or num_resources < 0:
        raise ModelError(f"{MANIFEST}: field 'num_resources' must be a non-negative integer")
    variables = manifest.get("variables", [])
    if not isinstance(variables, list) or not all(isinstance(v, str) for v in variables):
        raise ModelError(f"{MANIFEST}: field 'variables' must be a list of names")
    return signature, weights, num_resources, variables


def _hashes(manifest: dict[str, Any]) -> dict[str, str] | None:
    """The manifest's ``sha256`` table (``None``: a model saved before hashes were written)."""
    table = manifest.get("sha256")
    if table is None:
        return None
    if not isinstance(table, dict) or not all(
            isinstance(table.get(f), str) and len(table[f]) == 64 for f, _ in _FILE_FIELDS):
        raise ModelError(f"{MANIFEST}: field 'sha256' must map 'program' and 'weights_file' to "
                         "SHA-256 hex digests")
    return table


def _check_digest(h: Any, field: str, name: str, digest: str) -> None:
    """Raise if the hash object ``h`` does not have the hex ``digest``."""
    if h.hexdigest() != digest.lower():
        raise ModelError(f"{field} ({_quote(name)}) does not match its SHA-256 in {MANIFEST}: "
                         "the file is damaged or was changed after the model was saved")


def check_program(program: Program, signature: Signature, num_resources: int,
                  num_weights: int, variables: Sequence[str]) -> None:
    """Check that a loaded program fits its manifest: ``@tg_init`` takes the weights,
    ``@main`` takes the resources, the arena (if any) and the signature's inputs and returns
    its outputs, every variable is one ``@tg_init`` creates, and every attribute of a ``tg``
    kernel is within its declared range (:mod:`pytfrt.bef.validation`).

    Raises:
        ModelError: naming what does not fit.
    """
    from pytfrt.bef.validation import check_attributes

    funcs = {f.name: f for f in program.functions}
    init, main = funcs.get(INIT), funcs.get(MAIN)
    if init is None or main is None:
        raise ModelError("the program has no @tg_init or @main function")
    if len(init.argument_types) != num_weights:
        raise ModelError(f"@tg_init takes {len(init.argument_types)} weights, {MANIFEST} "
                         f"lists {num_weights}")
    if num_resources > len(init.result_types):
        raise ModelError(f"{MANIFEST}: field 'num_resources' is {num_resources}, @tg_init "
                         f"returns {len(init.result_types)} values")
    args = main.argument_types
    arena = 1 if len(args) > num_resources and args[num_resources] == ARENA_TYPE else 0
    if len(args) != num_resources + arena + len(signature.inputs):
        raise ModelError(f"@main takes {len(args) - num_resources - arena} inputs after "
                         f"{num_resources} resources, the signature lists "
                         f"{len(signature.inputs)}")
    if len(main.result_types) != len(signature.outputs):
        raise ModelError(f"@main returns {len(main.result_types)} values, the signature lists "
                         f"{len(signature.outputs)} outputs")
    known = {getattr(dict(k.attributes).get("name"), "value", None) for k in init.kernels
             if k.name == "tg.create_variable"}
    for v in variables:
        if v not in known:
            raise ModelError(f"{MANIFEST}: field 'variables' names {_quote(v)}, which the "
                             "program does not create")
    try:
        check_attributes(program)
    except PytfrtError as exc:
        raise ModelError(f"program: {exc}") from None


def load(path: str | os.PathLike[str], host: HostContext | str | None = None, *,
         verify: bool = True) -> CompiledModel:
    """Load a model saved with :meth:`CompiledModel.save` (weights memory-mapped, not copied).

    The directory is untrusted input (docs/security.md): the manifest's file names must name
    regular files in the directory itself (no links, FIFOs or devices, nothing outside it),
    sizes are capped (:data:`MAX_MANIFEST_BYTES`, :data:`MAX_PROGRAM_BYTES`,
    :data:`MAX_WEIGHTS_BYTES`), every field is validated, the program must fit the manifest
    (:func:`check_program`) and outputs are checked against the signature on every call.

    ``host``: the HostContext the model runs on (its work queue runs ``call_async``), a
    work-queue type string such as ``"mstd:1"`` for a new one (:func:`create_host`), or
    ``None`` for :func:`default_host`.  ``verify``: check the files against the SHA-256
    digests the manifest holds (``False`` skips hashing; a model saved by a pytfrt that wrote
    no digests loads unverified either way).

    Raises:
        ValueError: ``host`` is a string that is not a work-queue type.
        ModelError: if ``path`` is not a saved model directory, is of another format or
            version, or a file is missing, damaged or does not fit the manifest (the message
            names the manifest field, never a path outside the model directory).
    """
    from pytfrt.bef.reader import read_bef

    md = _ModelDir(Path(path))
    try:
        manifest = _read_manifest(md)
        signature, entries, num_resources, variables = _manifest_fields(manifest)
        program_name = _member_name(manifest, "program", PROGRAM_FILE)
        weights_name = _member_name(manifest, "weights_file", WEIGHTS_FILE)
        hashes = _hashes(manifest) if verify else None
        data = md.read(program_name, "program", MAX_PROGRAM_BYTES)
        if hashes is not None:
            import hashlib

            _check_digest(hashlib.sha256(data), "program", program_name, hashes["program"])
        # a BTF file holds the listed tensors and little else: a larger file (a sparse size
        # bomb) is refused before it is hashed or mapped
        need = 8 + sum(8 + 16 + 8 * len(e.shape) + BTF_SLACK + e.nbytes for e in entries)
        buf = md.map(weights_name, "weights_file", min(MAX_WEIGHTS_BYTES, need),
                     None if hashes is None else hashes["weights_file"],
                     "what the manifest's weights need" if need < MAX_WEIGHTS_BYTES
                     else "the limit")
    finally:
        md.close()
    try:
        program = read_bef(data)
    except PytfrtError as exc:
        raise ModelError(f"program ({_quote(program_name)}) is not a valid BEF file: {exc}"
                         ) from None
    del data
    label = f"weights_file ({_quote(weights_name)})"
    if isinstance(buf, mmap.mmap):
        _FILE_MAPS.add(buf)  # weights packed into kernels' own memory drop their pages
    stored = map_btf(buf, label) if entries else []
    if len(stored) != len(entries):
        raise ModelError(f"{label} holds {len(stored)} tensors, {MANIFEST} lists "
                         f"{len(entries)}")
    weights = []
    for e, arr in zip(entries, stored, strict=True):
        if arr.dtype.itemsize != e.dtype.itemsize:
            raise ModelError(f"weight {_quote(e.name)} is {arr.dtype} in {label}, {MANIFEST} "
                             f"says {e.dtype}")
        if arr.dtype != e.dtype:
            arr = arr.view(e.dtype)
        if arr.shape != e.shape:
            raise ModelError(f"weight {_quote(e.name)} has shape {list(arr.shape)} in {label}, "
                             f"{MANIFEST} says {list(e.shape)}")
        weights.append(arr)
    stored.clear()
    if weights:
        del arr  # (bound: the loop ran)
    check_program(program, signature, num_resources, len(weights), variables)
    host = resolve_host(host)
    try:  # the model holds the only references: a packed weight's pages go as it is packed
        return CompiledModel(program, _drain(weights), signature, num_resources,
                             [e.name for e in entries], variables, host)
    except (ModelError, InputError):
        raise
    except (PytfrtError, ArithmeticError, LookupError, TypeError, ValueError, MemoryError,
            AttributeError) as exc:
        # a program that passed validation but still cannot be prepared (e.g. constants a
        # kernel refuses): the model's error, not a traceback
        raise ModelError(f"the model cannot be prepared: {type(exc).__name__}: "
                         f"{str(exc)[:300]}") from None
