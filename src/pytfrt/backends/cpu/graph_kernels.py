"""The ``tg.*`` runtime kernels: one sync kernel per graph-dialect op, made from its compute
function.

The lowering (``pytfrt.compiler.lowering``) emits one kernel ``tg.<op>`` per op, with the
op's operands and *all* its attributes (name-sorted, as BEF orders them).  This module turns
each compute function of :data:`GRAPH_OPS` -- operands positional, attributes keyword-only,
NumPy in and out -- into a kernel on :class:`~pytfrt.tensor.DenseHostTensor` values whose
parameters the ``@kernel`` binding rules map statically (plain arguments, then ``Attr``
parameters in name order), so the sync executor calls it directly::

    def tg_softmax(x, axis: Attr[Any]):
        return _wrap(_f(x.array, axis=axis))

Kernels take and return DenseHostTensors so ``tg`` programs interoperate with the other
tensor kernels (``tfrt_dht.*``) and print in ``bef_executor``; the math is the compute layer's,
shared with constant folding.  Compute functions may mark operands that are not tensors
(``fn.opaque_operands``, e.g. a prepared conv plan) and results that are not arrays
(``fn.opaque_result``).

The runtime table :data:`GRAPH_OPS` is the union of the ``GRAPH_OPS`` dicts of
:data:`COMPUTE_MODULES` (missing modules are skipped), built on first use under a lock.
With ``PYTFRT_READONLY_OPERANDS`` on (``docs/config.md``) every compute function of the table is
wrapped by :func:`readonly_operands`: a kernel that writes an operand in place raises NumPy's
"read-only" error instead of silently changing a caller's input or a model's weights.
Kernels are sync (``tfrt.sync`` functions); they also run in async functions.  Thread-safe.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import inspect
import keyword
import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from pytfrt import config
from pytfrt.host.registry import Attr, KernelRegistry
from pytfrt.support.codegen import exec_generated
from pytfrt.tensor.dense_host_tensor import DenseHostTensor
from pytfrt.tensor.dtype import dtype_from_numpy
from pytfrt.tensor.string_host_tensor import StringHostTensor

COMPUTE_MODULES: tuple[str, ...] = (
    "pytfrt.backends.cpu.array_ops",
    "pytfrt.backends.cpu.data_ops",
    "pytfrt.backends.cpu.graph_nn",
    "pytfrt.backends.cpu.fused",
    "pytfrt.backends.cpu.small_graph",
    "pytfrt.backends.cpu.grad_ops",
    "pytfrt.backends.cpu.onnx_ops",
    "pytfrt.backends.cpu.recurrent",
    "pytfrt.backends.cpu.onnx_kernels",
    "pytfrt.backends.cpu.onnx_nd",
    "pytfrt.backends.cpu.onnx_text",
    "pytfrt.backends.cpu.quant",
    "pytfrt.backends.cpu.quant_dynamic",
    "pytfrt.backends.cpu.squeeze_excite",
    "pytfrt.backends.cpu.attention",
    "pytfrt.backends.cpu.shape_plan",
    "pytfrt.backends.cpu.batch_stats",
    "pytfrt.backends.cpu.volume",
    "pytfrt.backends.cpu.image_ops",
    "pytfrt.backends.cpu.strings",
    "pytfrt.backends.cpu.dynamic_slice",
)
"""Modules whose ``GRAPH_OPS`` dict (op name -> compute function) make the runtime table."""

_LOCK = threading.Lock()
_TABLE: dict[str, Callable[..., Any]] | None = None


def graph_ops() -> dict[str, Callable[..., Any]]:
    """The runtime table: op name (without ``tg.``) -> compute function (built once)."""
    global _TABLE
    with _LOCK:
        if _TABLE is None:
            table: dict[str, Callable[..., Any]] = {}
            for name in COMPUTE_MODULES:
                try:
                    module = importlib.import_module(name)
                except ModuleNotFoundError as exc:
                    if exc.name != name:
                        raise
                    continue
                table.update(getattr(module, "GRAPH_OPS", {}))
            if config.flag("PYTFRT_READONLY_OPERANDS"):
                table = {name: readonly_operands(fn, name) for name, fn in table.items()}
                reached_dir = config.text("PYTFRT_READONLY_REACHED")
                if reached_dir:
                    atexit.register(write_reached_kernels, reached_dir)
            _TABLE = table
        return _TABLE


_REACHED: set[str] = set()


def reached_kernels() -> frozenset[str]:
    """The table's kernels this process has called on read-only operands so far.

    Recorded only with ``PYTFRT_READONLY_OPERANDS`` on (the wrappers record their name).
    """
    return frozenset(_REACHED)


def write_reached_kernels(directory: str) -> None:
    """Write :func:`reached_kernels`, one name per line, to ``<directory>/<pid>.txt``.

    Registered at exit when ``PYTFRT_READONLY_REACHED`` names a directory, so that processes the
    test suite starts (``bef_executor``, the CLI, servers) report what they ran as well.  A
    missing directory is skipped silently: the suite that made it may be gone.
    """
    path = os.path.join(directory, f"{os.getpid()}.txt")
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(f"{name}\n" for name in sorted(_REACHED)))
    except OSError:
        pass


def readonly_operands(fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
    """``fn`` called on read-only views of its positional array operands.

    Writing an operand then raises NumPy's ``ValueError`` ("... is read-only").  The ``out``
    buffer (a keyword) stays writable.  A result that is a view of a writable operand is made
    writable again (its users may own it, as without the check).  ``functools.wraps`` keeps
    ``fn``'s signature and attributes (``opaque_operands``, ``opaque_result``), so kernels made
    from the wrapper bind as kernels made from ``fn``.  Idempotent; thread-safe as ``fn`` is.

    Functions whose result is not a tensor (``fn.opaque_result``: a prepared plan, e.g.
    ``conv2d.prepare``) are returned unwrapped: a plan may keep its operand (a weight) by
    identity, so that the model can release the original once the plan holds its own copy.

    With ``name`` (the table key), each call records it for :func:`reached_kernels`.  A
    ``fn.specialize`` (a version bound to the model's constants, see ``CompiledModel``) is
    wrapped too: what it returns runs on read-only operands and records ``name`` as well.
    """
    if getattr(fn, "__pytfrt_readonly__", False) or getattr(fn, "opaque_result", False):
        return fn

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if name is not None:
            _REACHED.add(name)
        frozen = []
        views = []
        for a in args:
            if type(a) is np.ndarray and a.flags.writeable:
                frozen.append(a)
                a = a.view()
                a.flags.writeable = False
            views.append(a)
        result = fn(*views, **kwargs)
        if frozen:
            for r in result if type(result) is tuple else (result,):
                if type(r) is np.ndarray and not r.flags.writeable and r.base is not None \
                        and any(np.may_share_memory(r, a) for a in frozen):
                    r.flags.writeable = True
        return result

    specialize = getattr(fn, "specialize", None)
    if specialize is not None:
        # the compiled model's call path binds a kernel to its constants: the bound version
        # runs on read-only operands (and is recorded) as the general one does
        def readonly_specialize(*a: Any, **k: Any) -> Any:
            bound = specialize(*a, **k)
            return None if bound is None else readonly_operands(bound, name)

        wrapped.specialize = readonly_specialize  # type: ignore[attr-defined]
    wrapped.__pytfrt_readonly__ = True  # type: ignore[attr-defined]
    return wrapped


_DTYPES: dict[np.dtype, Any] = {}
_ATTR: Any = Attr[Any]  # type: ignore[misc]


def to_tensor(value: Any) -> DenseHostTensor | StringHostTensor:
    """Wrap a compute result (an ndarray or NumPy scalar) as a DenseHostTensor, no copy (an
    object array of strings: a StringHostTensor)."""
    if type(value) is not np.ndarray:
        value = np.asarray(value)
    if value.dtype == object:
        return StringHostTensor(value)
    dt = _DTYPES.get(value.dtype)
    if dt is None:
        dt = _DTYPES[value.dtype] = dtype_from_numpy(value.dtype)
    return DenseHostTensor(dt, value)


def _wrap(value: Any) -> Any:
    if type(value) is np.ndarray:  # the common case, inline
        dt = _DTYPES.get(value.dtype)
        if dt is not None:
            return DenseHostTensor(dt, value)
        return to_tensor(value)
    if type(value) is tuple:
        if len(value) == 1:  # one result: the executor stores a returned tuple as is
            return to_tensor(value[0])
        return tuple(to_tensor(v) for v in value)
    return to_tensor(value)


def _unwrap(value: Any) -> Any:
    return value.array if type(value) in (DenseHostTensor, StringHostTensor) else value


class ComputeKernel(NamedTuple):
    """What a kernel made by :func:`make_kernel` calls (its ``__pytfrt_compute__``), so a
    caller holding arrays can call the compute function directly (``pytfrt.model`` does).

    Attributes:
        fn: the compute function.
        attrs: the kernel's attribute names in BEF (name) order, ``buffer`` included for a
            ``.buf`` kernel: the i-th kernel attribute value is the compute function's keyword
            ``attrs[i]``.
        buffered: a ``tg.<op>.buf`` kernel (first operand: the arena).
        opaque: indices of compute operands that are not tensors (e.g. a conv plan).
        opaque_result: the result is not a tensor (e.g. ``conv2d.prepare``'s plan).
    """

    fn: Callable[..., Any]
    attrs: tuple[str, ...]
    buffered: bool
    opaque: frozenset[int]
    opaque_result: bool


def make_kernel(op: str, fn: Callable[..., Any], buffered: bool = False) -> Callable[..., Any]:
    """The kernel of op ``op`` for compute function ``fn`` (see the module docstring).

    With ``buffered`` (for ``fn`` with an ``out`` parameter): the ``tg.<op>.buf`` kernel, which
    takes a :class:`~pytfrt.backends.cpu.arena.Arena` as its first operand and the attribute
    ``buffer = [slot, site, first, last]`` (or ``[slot, site]``), and runs ``fn`` through
    ``Arena.run``.

    Raises:
        TypeError: if ``fn`` has ``**kwargs``.
    """
    sig = inspect.signature(fn)
    fixed: list[str] = []
    variadic = False
    attrs: list[str] = []
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            variadic = True
        elif p.kind is p.KEYWORD_ONLY:
            if p.name != "out":
                attrs.append(p.name)
        elif p.kind is p.VAR_KEYWORD:
            raise TypeError(f"compute function of tg.{op} must not take **kwargs")
        else:
            fixed.append(p.name)
    opaque: frozenset[int] = getattr(fn, "opaque_operands", frozenset())
    all_attrs = sorted([*attrs, "buffer"] if buffered else attrs)
    params = [f"p_{a}" for a in all_attrs]
    general = variadic or any(p.default is not p.empty for p in sig.parameters.values()
                              if p.kind is p.POSITIONAL_OR_KEYWORD)
    if general:
        head = ", ".join([*params, *(["arena"] if buffered else []), "*args"])
        arrays = "[_u(a) for a in args]" if opaque else "[a.array for a in args]"
    else:
        names = [f"a{i}" for i in range(len(fixed))]
        head = ", ".join([*(["arena"] if buffered else []), *names, *params])
        arrays = "[" + ", ".join(n if i in opaque else f"{n}.array"
                                 for i, n in enumerate(names)) + "]"
    wrap = "" if getattr(fn, "opaque_result", False) else "_wrap"
    kname = "tg_" + op.replace(".", "_") + ("_buf" if buffered else "")
    call_kw = ", ".join(f"**{{{a!r}: p_{a}}}" if keyword.iskeyword(a) else f"{a}=p_{a}"
                        for a in sorted(attrs))
    if buffered:
        # Arena.run inlined (one Python call less per kernel; see pytfrt.backends.cpu.arena).
        # A slot is shared only by values of one type, so a buffer of the right shape also has
        # the right dtype.
        shape = "getattr(x, 'shape', None)" if opaque else "x.shape"
        out_kw = ", ".join(x for x in (call_kw, "out=buf") if x)
        plain_kw = f", {call_kw}" if call_kw else ""
        body = (
            f"arrays = {arrays}\n"
            f"    slot, site = p_buffer[0], p_buffer[1]\n"
            f"    key = [{shape} for x in arrays]\n"
            f"    m = arena.memo.get(site)\n"
            f"    if m is not None and m[0] == key:\n"
            f"        buf = arena.slots.get(slot)\n"
            f"        if buf is not None and buf.shape == m[1]:\n"
            f"            return {wrap}(_f(*arrays, {out_kw}))\n"
            f"    r = _f(*arrays{plain_kw})\n"
            f"    arena.keep(slot, site, key, r)\n"
            f"    return {wrap}(r)"
        )
    else:
        star = f"*{arrays}" if general else arrays[1:-1]
        joined = ", ".join(x for x in (star, call_kw) if x)
        body = f"return {wrap}(_f({joined}))"
    source = f"def {kname}({head}):\n    {body}\n"
    namespace: dict[str, Any] = {"_f": fn, "_wrap": _wrap, "_u": _unwrap}
    exec_generated(source, f"tg.{op} kernel", namespace)
    kern = namespace[kname]
    kern.__annotations__ = {p: _ATTR for p in params}
    kern.__doc__ = f"Kernel tg.{op}{'.buf' if buffered else ''}: calls {fn.__module__}." \
        f"{fn.__qualname__}."
    kern.__pytfrt_source__ = source
    kern.__pytfrt_compute__ = ComputeKernel(fn, tuple(all_attrs), buffered, opaque,
                                              bool(getattr(fn, "opaque_result", False)))
    return kern  # type: ignore[no-any-return]


def accepts_out(fn: Callable[..., Any]) -> bool:
    """Whether a compute function can write its result into an ``out`` buffer."""
    p = inspect.signature(fn).parameters.get("out")
    return p is not None and p.kind is p.KEYWORD_ONLY


def register(registry: KernelRegistry) -> None:
    """Register ``tg.<op>`` for every op of the runtime table (sync kernels), and the
    variable and control-flow glue kernels of :mod:`pytfrt.backends.cpu.graph_state`, the
    fused optimizer updates (:mod:`pytfrt.backends.cpu.optimizers`) and ``tg.print``
    (:mod:`pytfrt.backends.cpu.strings`)."""
    from pytfrt.backends.cpu.graph_state import KERNELS
    from pytfrt.backends.cpu.optimizers import KERNELS as OPTIMIZER_KERNELS
    from pytfrt.backends.cpu.strings import KERNELS as STRING_KERNELS

    for op, fn in graph_ops().items():
        registry.add_sync_kernel(f"tg.{op}", make_kernel(op, fn))
        if accepts_out(fn):
            registry.add_sync_kernel(f"tg.{op}.buf", make_kernel(op, fn, buffered=True))
    registry.add(*KERNELS, *OPTIMIZER_KERNELS, *STRING_KERNELS)
