"""Whole-region kernels: a small graph of ops compiled to ONE Numba function (``tg.fused_graph``).

``-tg-fuse-small-graph`` (``pytfrt.compiler.passes.small_graph``) replaces a run of ops with
small static shapes -- matmuls, elementwise ops and fused elementwise regions, gradient ops,
reductions, transposes and reshapes -- by one ``tg.fused_graph`` op.  Its kernel is this
module: the region's *program* (JSON, made by the lowering)::

    {"inputs": [["float32", [4, 2]], ...],                 # value ids 0..n-1
     "ops": [["matmul", [0, 1], {attrs}, [["float32", [4, 2]]]], ...],  # ids n, n+1, ...
     "outputs": [5, 9]}

is turned into the Python source of one ``@numba.njit(nogil=True, cache=True)`` function
``_graph(x0, ..., o0, ...)`` with every shape a literal: one loop nest per op (LLVM unrolls
the tiny ones), matmuls as plain loops accumulated in float64 (at these sizes a BLAS call
costs more than the arithmetic), intermediates allocated inside, results written into the
output arrays the caller allocated.  A step of a small network (the XOR MLP's forward,
backward and SGD update: 17 kernels) is then one Python call instead of 17.

The scalar formulas are the fused elementwise kernels' (:data:`pytfrt.backends.cpu.fused.SCALAR`,
:func:`~pytfrt.backends.cpu.fused.scalar_body`) and the fused epilogue's activation
(``_epilogue._act``): a region computes what the unfused ops compute, up to rounding (float64
intermediates, rounded once when stored; the equivalence tests allow 2e-5 relative).

Compilation: a region's first :data:`COMPILE_AFTER` calls run its ops one by one; the next
starts the Numba compile on a background thread and the calls go on op by op until it is done
(a training loop does not pause mid-training).  The source is written to :func:`cache_dir`
under its SHA-256 and imported from
there, so Numba's on-disk cache (keyed by the file) makes later processes load the machine
code instead of compiling (the first compile of the XOR step takes ~1-2 s, a cached load
~0.1 s).  Without a writable cache directory the source is compiled in memory, uncached.
If Numba cannot compile a program (an unsupported layout or type at run time) the region falls
back to calling the ops' own compute functions one by one (:func:`evaluate`), with a warning.

Thread-safety: compiled functions and the caches are filled under a lock and then only read;
a call writes only the arrays it allocates.  Errors: a malformed program raises ``OpError``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytfrt.backends.cpu._ccompile import COMPILE_AFTER
from pytfrt.backends.cpu.fused import SCALAR, scalar_body
from pytfrt.backends.cpu.grad_ops import GRAD_SCALAR
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError
from pytfrt.support.codegen import exec_generated
from pytfrt.support.disk_cache import cache_dir, key_digest

Shape = tuple[int, ...]

REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")
RESHAPES = ("reshape", "expand_dims", "squeeze")
SUPPORTED: frozenset[str] = frozenset(
    {*SCALAR, *GRAD_SCALAR, "fused_elementwise", "matmul", "transpose", *REDUCTIONS,
     *RESHAPES})
"""The ops a ``fused_graph`` program may hold (the pass also checks shapes and dtypes)."""

DTYPES = ("float32", "float64")


# -- code generation --------------------------------------------------------------------------

def _size(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _strides(shape: Sequence[int]) -> list[int]:
    out = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        out[k] = out[k + 1] * shape[k + 1]
    return out


def _index(name: str, idx: Sequence[str]) -> str:
    return f"{name}[{', '.join(idx)}]" if idx else f"{name}[()]"


class _Gen:
    """The source of one program's Numba function (see the module docstring)."""

    def __init__(self, program: dict[str, Any]) -> None:
        self.types: list[tuple[str, Shape]] = []
        self.names: list[str] = []
        self.lines: list[str] = []
        inputs = program["inputs"]
        for i, (dt, shape) in enumerate(inputs):
            self._value(dt, shape)
            self.names.append(f"x{i}")
        outputs = [int(o) for o in program["outputs"]]
        self.out_of = {v: p for p, v in enumerate(outputs)}
        self.program = program
        self.n_inputs = len(inputs)
        self.outputs = outputs

    def _value(self, dt: str, shape: Sequence[int]) -> None:
        if dt not in DTYPES:
            raise OpError(f"fused_graph: values must be float32/float64, got {dt}")
        shp = tuple(int(d) for d in shape)
        if any(d < 1 for d in shp):
            raise OpError(f"fused_graph: static non-empty shapes only, got {list(shp)}")
        self.types.append((dt, shp))

    def emit(self, line: str, depth: int = 0) -> None:
        self.lines.append("    " * (depth + 1) + line)

    def loops(self, shape: Shape, depth: int = 0, var: str = "i") -> int:
        for k, d in enumerate(shape):
            self.emit(f"for {var}{k} in range({d}):", depth + k)
        return depth + len(shape)

    def bcast(self, v: int, out: Shape) -> str:
        """The element of value ``v`` at the loop indices of ``out`` (NumPy broadcasting)."""
        shape = self.types[v][1]
        off = len(out) - len(shape)
        idx = ["0" if d == 1 and out[off + k] != 1 else f"i{off + k}"
               for k, d in enumerate(shape)]
        return _index(self.names[v], idx)

    def source(self) -> str:
        for op, operands, attrs, results in self.program["ops"]:
            if len(results) != 1:
                raise OpError(f"fused_graph: op '{op}' must have one result")
            (dt, shape), = results
            self._value(dt, shape)
            t = len(self.types) - 1
            ids = [int(j) for j in operands]
            if any(not 0 <= j < t for j in ids):
                raise OpError(f"fused_graph: op '{op}' uses an undefined value")
            if t in self.out_of:
                name = f"o{self.out_of[t]}"
            else:
                name = f"t{t}"
                self.emit(f"{name} = np.empty({self.types[t][1]!r}, np.{dt})")
            self.names.append(name)
            gen = _OPS.get(op)
            if gen is None:
                raise OpError(f"fused_graph: op '{op}' is not supported")
            gen(self, name, ids, attrs, self.types[t][1])
        if any(not self.n_inputs <= o < len(self.types) for o in self.outputs):
            raise OpError("fused_graph: an output is not an op result")
        params = [f"x{i}" for i in range(self.n_inputs)]
        params += [f"o{p}" for p in range(len(self.outputs))]
        head = [f"def _graph({', '.join(params)}):"]
        return "\n".join(head + self.lines + ["    return None"]) + "\n"


def _elementwise(g: _Gen, name: str, ids: list[int], formula: Callable[[list[str]], str],
                 shape: Shape) -> None:
    depth = g.loops(shape)
    args = []
    for k, v in enumerate(ids):
        g.emit(f"a{k} = {g.bcast(v, shape)}", depth)
        args.append(f"a{k}")
    g.emit(f"{_index(name, [f'i{k}' for k in range(len(shape))])} = {formula(args)}", depth)


def _gen_scalar(op: str) -> Callable[..., None]:
    def gen(g: _Gen, name: str, ids: list[int], attrs: dict[str, Any], shape: Shape) -> None:
        _elementwise(g, name, ids, lambda a: SCALAR[op](a, attrs), shape)
    return gen


def _gen_grad(op: str) -> Callable[..., None]:
    def gen(g: _Gen, name: str, ids: list[int], attrs: dict[str, Any], shape: Shape) -> None:
        _elementwise(g, name, ids, lambda a: GRAD_SCALAR[op].format(*a), shape)
    return gen


def _gen_fused(g: _Gen, name: str, ids: list[int], attrs: dict[str, Any], shape: Shape) -> None:
    inner = json.loads(attrs["program"])
    depth = g.loops(shape)
    args = []
    for k, v in enumerate(ids):
        g.emit(f"a{k} = {g.bcast(v, shape)}", depth)
        args.append(f"a{k}")
    body, result = scalar_body(inner, args, prefix="e")
    for line in body:
        g.emit(line, depth)
    g.emit(f"{_index(name, [f'i{k}' for k in range(len(shape))])} = {result}", depth)


def _gen_matmul(g: _Gen, name: str, ids: list[int], attrs: dict[str, Any], shape: Shape) -> None:
    from pytfrt.backends.cpu._epilogue import activation_code

    a, b, *extra = ids
    sa, sb = g.types[a][1], g.types[b][1]
    if len(sa) != 2 or len(sb) != 2:
        raise OpError("fused_graph: matmul operands must be 2-D")
    ta, tb = bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b"))
    m, k = (sa[1], sa[0]) if ta else sa
    k2, n = (sb[1], sb[0]) if tb else sb
    if k != k2 or shape != (m, n):
        raise OpError(f"fused_graph: matmul shapes {list(sa)} x {list(sb)} do not match")
    f0, f1 = (list(attrs.get("epilogue_operands") or ()) + [0, 0])[:2] if extra else (0, 0)
    if len(extra) != f0 + f1:
        raise OpError("fused_graph: matmul epilogue operands do not match")
    code = activation_code("matmul", str(attrs.get("activation", "none")))
    alpha = float(attrs.get("alpha", 0.2))
    an, bn = g.names[a], g.names[b]
    g.emit(f"for i in range({m}):")
    g.emit(f"for j in range({n}):", 1)
    g.emit("acc = 0.0", 2)
    g.emit(f"for p in range({k}):", 2)
    av = f"{an}[p, i]" if ta else f"{an}[i, p]"
    bv = f"{bn}[j, p]" if tb else f"{bn}[p, j]"
    g.emit(f"acc += np.float64({av}) * {bv}", 3)
    if f0:
        bias = extra[0]
        if g.types[bias][1] != (n,):
            raise OpError("fused_graph: a matmul bias must have shape [N]")
        g.emit(f"acc += {g.names[bias]}[j]", 2)
    if f1:
        res = extra[f0]
        if g.types[res][1] != (m, n):
            raise OpError("fused_graph: a matmul residual must have the result's shape")
        g.emit(f"acc += {g.names[res]}[i, j]", 2)
    g.emit(f"{name}[i, j] = _act(acc, {code}, {alpha!r})" if code else f"{name}[i, j] = acc", 2)


def _axes(attrs: dict[str, Any], rank: int) -> set[int]:
    axes = [int(x) for x in attrs.get("axes") or ()]
    if not axes:
        return set(range(rank))
    if any(not -rank <= x < rank for x in axes):
        raise OpError(f"fused_graph: reduction axes {axes} out of range for rank {rank}")
    return {x % rank for x in axes}


def _gen_reduce(op: str) -> Callable[..., None]:
    init = {"reduce_sum": "0.0", "reduce_mean": "0.0", "reduce_max": "-math.inf",
            "reduce_min": "math.inf"}[op]

    def gen(g: _Gen, name: str, ids: list[int], attrs: dict[str, Any], shape: Shape) -> None:
        (x,) = ids
        sx = g.types[x][1]
        axes = _axes(attrs, len(sx))
        kept = [k for k in range(len(sx)) if k not in axes]
        if _size(shape) != _size([sx[k] for k in kept]):
            raise OpError("fused_graph: reduction result shape does not match")
        kept_shape = [sx[k] for k in kept]
        strides = _strides(kept_shape)
        flat = " + ".join(f"i{k} * {s}" for k, s in zip(kept, strides, strict=True)) or "0"
        g.emit(f"acc = np.full({_size(shape)}, {init})")
        depth = g.loops(sx)
        g.emit(f"v = {_index(g.names[x], [f'i{k}' for k in range(len(sx))])}", depth)
        if op in ("reduce_sum", "reduce_mean"):
            g.emit(f"acc[{flat}] += v", depth)
        else:
            cmp = ">" if op == "reduce_max" else "<"
            g.emit(f"w = acc[{flat}]", depth)
            g.emit(f"if v {cmp} w or v != v:", depth)
            g.emit(f"acc[{flat}] = v", depth + 1)
        count = _size([sx[k] for k in sorted(axes)])
        scale = f" / {count}.0" if op == "reduce_mean" else ""
        out_strides = _strides(shape)
        depth = g.loops(shape, var="j")
        src = " + ".join(f"j{k} * {s}" for k, s in enumerate(out_strides)) or "0"
        g.emit(f"{_index(name, [f'j{k}' for k in range(len(shape))])} = acc[{src}]{scale}", depth)
    return gen


def _gen_transpose(g: _Gen, name: str, ids: list[int], attrs: dict[str, Any],
                   shape: Shape) -> None:
    (x,) = ids
    perm = [int(p) for p in attrs["perm"]]
    sx = g.types[x][1]
    if sorted(perm) != list(range(len(sx))) or tuple(sx[p] for p in perm) != shape:
        raise OpError(f"fused_graph: bad transpose perm {perm}")
    idx = ["0"] * len(sx)
    for k, p in enumerate(perm):
        idx[p] = f"i{k}"
    depth = g.loops(shape)
    g.emit(f"{_index(name, [f'i{k}' for k in range(len(shape))])} = "
           f"{_index(g.names[x], idx)}", depth)


def _gen_reshape(g: _Gen, name: str, ids: list[int], attrs: dict[str, Any],
                 shape: Shape) -> None:
    (x,) = ids
    sx = g.types[x][1]
    if _size(sx) != _size(shape):
        raise OpError("fused_graph: reshape changes the element count")
    depth = g.loops(shape)
    flat = " + ".join(f"i{k} * {s}" for k, s in enumerate(_strides(shape))) or "0"
    g.emit(f"f = {flat}", depth)
    src = [f"(f // {s}) % {d}" for s, d in zip(_strides(sx), sx, strict=True)]
    g.emit(f"{_index(name, [f'i{k}' for k in range(len(shape))])} = "
           f"{_index(g.names[x], src)}", depth)


_OPS: dict[str, Callable[..., None]] = {
    **{op: _gen_scalar(op) for op in SCALAR},
    **{op: _gen_grad(op) for op in GRAD_SCALAR},
    **{op: _gen_reduce(op) for op in REDUCTIONS},
    **{op: _gen_reshape for op in RESHAPES},
    "fused_elementwise": _gen_fused,
    "matmul": _gen_matmul,
    "transpose": _gen_transpose,
}


def source_of(program: dict[str, Any]) -> str:
    """The Python source of ``program``'s Numba function ``_graph(x0, ..., o0, ...)``.

    Raises:
        OpError: for an unsupported op, dtype or shape.
    """
    return _Gen(program).source()


# -- compilation and calls -------------------------------------------------------------------

_LOCK = threading.Lock()
_KERNELS: dict[str, Any] = {}
_CALLS: dict[str, Callable[..., Any]] = {}
_HEADER = ("# generated by pytfrt.backends.cpu.small_graph: one tg.fused_graph region\n"
           "import math\n\nimport numba\nimport numpy as np\n\n"
           "from pytfrt.backends.cpu._epilogue import _act, _erf, _sigmoid\n\n\n")


_NJIT_OPTIONS: dict[str, Any] = {"nogil": True, "cache": True, "error_model": "numpy"}
"""The ``numpy`` error model: ``x / 0`` is IEEE's ``inf``/``nan``, as in the unfused ops."""


def _load(source: str, imports: str = "", name: str = "_graph",
          options: dict[str, Any] | None = None, prefix: str = "_pytfrt_graph_") -> Any:
    """The Numba dispatcher of the function ``name`` that ``source`` defines: imported from
    :func:`cache_dir` (cached on disk) when possible, else compiled in memory.

    ``imports``: module-level lines the source needs besides :data:`_HEADER`'s (part of the
    cached file, so of its digest); ``options``: the ``numba.njit`` keyword arguments
    (``cache=True`` is what makes the on-disk cache).  Shared with the fused segments of
    whole-function execution (:mod:`pytfrt.executor.fused_segments`)."""
    opts = _NJIT_OPTIONS if options is None else options
    decorator = "@numba.njit(" + ", ".join(f"{k}={v!r}" for k, v in opts.items()) + ")\n"
    text = _HEADER + imports + decorator + source
    digest = key_digest(text)
    d = cache_dir()
    if d is not None:
        path = d / f"g_{digest}.py"
        try:
            if not path.exists() or path.read_text() != text:
                fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
                with os.fdopen(fd, "w") as fh:
                    fh.write(text)
                os.replace(tmp, path)
            modname = f"{prefix}{digest}"
            spec = importlib.util.spec_from_file_location(modname, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules.setdefault(modname, module)
            return getattr(module, name)
        except OSError:
            pass
    import numba

    from pytfrt.backends.cpu.fused import NAMESPACE

    ns: dict[str, Any] = {**NAMESPACE, "np": np, "numba": numba}
    exec_generated(imports + source, f"fused_graph {digest}", ns)
    return numba.njit(**{**opts, "cache": False})(ns[name])


def kernel(text: str) -> Any:
    """The compiled Numba function of the program ``text`` (cached per program).

    Raises:
        OpError: for a malformed or unsupported program.
    """
    fn = _KERNELS.get(text)
    if fn is None:
        with _LOCK:
            fn = _KERNELS.get(text)
            if fn is None:
                try:
                    program = json.loads(text)
                    source = source_of(program)
                except (ValueError, KeyError, TypeError) as exc:
                    raise OpError(f"fused_graph: malformed program: {exc}") from None
                fn = _KERNELS[text] = _load(source)
    return fn


_STEPS: dict[str, tuple[list[tuple[Callable[..., Any], list[int], dict[str, Any]]],
                        list[int]]] = {}


def _steps(text: str) -> tuple[list[tuple[Callable[..., Any], list[int], dict[str, Any]]],
                                list[int]]:
    steps = _STEPS.get(text)
    if steps is None:
        from pytfrt.backends.cpu.graph_kernels import graph_ops

        table = graph_ops()
        program = json.loads(text)
        ops = []
        for op, operands, attrs, _results in program["ops"]:
            if op == "fused_elementwise":
                # its ops one by one too: no Numba compile for a region run op by op
                fn: Callable[..., Any] = _inner(table, json.loads(attrs["program"]))
                kw: dict[str, Any] = {}
            else:
                fn = table[op]
                kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()}
            ops.append((fn, [int(j) for j in operands], kw))
        steps = _STEPS[text] = (ops, [int(o) for o in program["outputs"]])
    return steps


def _inner(table: dict[str, Callable[..., Any]], program: dict[str, Any]
           ) -> Callable[..., np.ndarray]:
    """A ``fused_elementwise`` program as calls of its ops' compute functions."""
    ops = [(table[op], [int(j) for j in operands],
            {k: (tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()})
           for op, operands, attrs in program["ops"]]

    def run(*inputs: np.ndarray) -> np.ndarray:
        values: list[Any] = list(inputs)
        for fn, operands, kw in ops:
            values.append(fn(*[values[j] for j in operands], **kw))
        return values[-1]  # type: ignore[no-any-return]

    return run


def evaluate(text: str, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """The program run op by op with each op's own compute function (the unfused path): a
    region's first calls (:data:`COMPILE_AFTER`), the fallback when Numba cannot compile a
    program, and a reference."""
    ops, outputs = _steps(text)
    values: list[Any] = list(inputs)
    for fn, operands, kw in ops:
        r = fn(*[values[j] for j in operands], **kw)
        values.append(r if type(r) is np.ndarray else np.asarray(r))
    return tuple(values[o] for o in outputs)


_ANNOUNCED: list[bool] = []


def announce_compile(dispatcher: Any) -> None:
    """Say once per process, on a terminal, that Numba is about to compile generated code that
    its on-disk cache does not hold yet (1-3 s of a core, during which the calls run op by op:
    the steps of a training loop are slower for a moment).  Silent when standard error is not
    a terminal (logs, tests), when the code is already cached, and after the first time."""
    if _ANNOUNCED or not sys.stderr.isatty():
        return
    cache = getattr(dispatcher, "_cache", None)
    index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    if index is not None and os.path.exists(index):
        return
    _ANNOUNCED.append(True)
    where = getattr(cache, "_cache_path", None)
    print("pytfrt: compiling generated code with Numba in the background (1-3 s, once"
          + (f"; cached in {where})" if where else ")"), file=sys.stderr, flush=True)


_PENDING: list[threading.Thread] = []
"""Background compiles started and not yet joined (:func:`wait_for_compiles`)."""


def _compile_in_background(k: Any, xs: Sequence[np.ndarray], types: list[Any],
                           ns: dict[str, Any]) -> None:
    """Compile kernel ``k`` for the types of ``xs`` (and the outputs ``types``) on a thread;
    when it is done set ``ns["_warm"]`` (the generated caller's switch), or ``ns["_failed"]``.

    The calls made meanwhile run op by op, so a training loop keeps stepping instead of
    pausing for the compile.  The thread is not a daemon: a process that exits during the
    compile waits for it, which leaves the machine code in the on-disk cache."""
    import numba
    from numba.core.errors import NumbaError

    signature = tuple(numba.typeof(x) for x in xs) + tuple(
        numba.typeof(np.empty(shape, dtype)) for dtype, shape in types)

    def work() -> None:
        try:
            k.compile(signature)
        except NumbaError as exc:
            ns["_failed"] = exc
        except Exception as exc:  # noqa: BLE001 - e.g. an unreadable cache: stay op by op
            ns["_failed"] = NumbaError(f"{type(exc).__name__}: {exc}")
        else:
            ns["_warm"] = True

    thread = threading.Thread(target=work, name="pytfrt-numba-compile")
    with _LOCK:
        _PENDING[:] = [t for t in _PENDING if t.is_alive()]
        _PENDING.append(thread)
    thread.start()


def wait_for_compiles(timeout: float | None = None) -> bool:
    """Wait for the background compiles started so far; ``True`` if none is still running."""
    with _LOCK:
        pending = list(_PENDING)
    for thread in pending:
        thread.join(timeout)
    return not any(t.is_alive() for t in pending)


def caller(text: str) -> Callable[..., Any]:
    """A function ``f(*inputs)`` running the program ``text``: allocates the outputs, calls
    the compiled kernel once, returns the outputs (a tuple of arrays; one array for one output;
    its attribute ``num_arrays`` says how many).

    The first :data:`COMPILE_AFTER` calls run :func:`evaluate`; the next one starts compiling
    the kernel on a background thread (for that call's input types) and, like the calls until
    the compile is done, runs :func:`evaluate` too (:func:`wait_for_compiles` waits for it);
    with ``COMPILE_AFTER <= 0`` the first call compiles.  If Numba cannot compile it, calls of
    those input types keep running :func:`evaluate`, with a ``RuntimeWarning`` saying why.

    Raises:
        OpError: for a malformed or unsupported program (at once).
    """
    fn = _CALLS.get(text)
    if fn is not None:
        return fn
    from numba.core.errors import NumbaError

    k = kernel(text)
    program = json.loads(text)
    n_in = len(program["inputs"])
    types = [program["inputs"][i] if i < n_in else program["ops"][i - n_in][3][0]
             for i in program["outputs"]]
    warned: list[bool] = []
    ns: dict[str, Any] = {"_E": np.empty, "_k": k, "np": np, "_NumbaError": NumbaError,
                          "_warm": COMPILE_AFTER <= 0, "_started": False}
    calls = [0]

    def op_by_op(*xs: np.ndarray) -> Any:
        r = evaluate(text, *xs)
        return r[0] if len(r) == 1 else r

    def cold(*xs: np.ndarray) -> Any:
        calls[0] += 1
        if calls[0] > COMPILE_AFTER and not ns["_started"]:  # (two racing calls: 2 requests)
            ns["_started"] = True  # the fused function runs once compiled
            announce_compile(k)
            _compile_in_background(k, xs, types, ns)
        failed = ns.get("_failed")
        return fallback(failed, *xs) if failed is not None else op_by_op(*xs)

    def fallback(exc: Exception, *xs: np.ndarray) -> Any:
        if not warned:
            warned.append(True)
            warnings.warn(f"fused_graph: Numba could not compile the region ({exc}); running "
                          "its ops one by one", RuntimeWarning, stacklevel=3)
        return op_by_op(*xs)

    ns["_cold"] = cold
    ns["_fallback"] = fallback
    params = ", ".join(f"x{i}" for i in range(n_in))
    allocs = [f"        o{p} = _E({tuple(shape)!r}, np.{dt})"
              for p, (dt, shape) in enumerate(types)]
    outs = ", ".join(f"o{p}" for p in range(len(types)))
    ret = "o0" if len(types) == 1 else f"({outs},)"
    src = "\n".join([f"def _run({params}):", "    if _warm:", *allocs,
                     "        try:", f"            _k({params}, {outs})",
                     "        except _NumbaError as exc:",
                     f"            return _fallback(exc, {params})",
                     f"        return {ret}", f"    return _cold({params})"]) + "\n"
    exec_generated(src, "fused_graph call", ns)
    run = ns["_run"]
    run.num_arrays = len(types)
    with _LOCK:
        return _CALLS.setdefault(text, run)  # type: ignore[no-any-return]


GRAPH_OPS = OpTable()
"""Op name -> compute function: ``fused_graph``, the kernel of a whole-region program
(a module of ``graph_kernels.COMPUTE_MODULES``)."""


@GRAPH_OPS.op("fused_graph")
def fused_graph(*inputs: np.ndarray, program: str) -> Any:
    """Run a whole-region program (:mod:`pytfrt.backends.cpu.small_graph`): one Numba call;
    returns a tuple of the outputs (one array for one output)."""
    return caller(program)(*inputs)


def _specialize_graph(constants: dict[int, Any], program: str) -> Any:
    """``CompiledModel``'s call path binds the region's caller once (no lookup per call)."""
    return caller(program)


fused_graph.specialize = _specialize_graph  # type: ignore[attr-defined]
