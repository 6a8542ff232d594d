"""Fused elementwise kernels: a small program of elementwise ops compiled to one Numba ufunc.

A *program* is JSON: ``{"n": <inputs>, "ops": [[op, [operand ids], {attrs}], ...]}``; ids
``0..n-1`` are the inputs, id ``n + i`` is op ``i``'s result, the last op's result is the
output.  :func:`run` compiles it (once per program and input dtypes, cached) and makes one
pass over the output, no temporaries: a ``nogil`` Numba loop over flat arrays when every input
has the output's shape, one element (scalars hoisted; LLVM vectorises the loop) or the output's
trailing dimensions (a per-channel vector broadcast over an NHWC tensor: the loop then runs
row by row), else a ``numba.vectorize`` ufunc, which broadcasts.  A flat loop over
:data:`PARALLEL_MIN` elements or more is split into shards run on the CPU kernels' helper threads
(:func:`pytfrt.backends.cpu._parallel.parallel_for`; the caller runs shards too).
The scalar formulas are the :mod:`pytfrt.backends.cpu.op_math` records' (float inputs only; Numba
evaluates Python float literals in float64, so results may differ from the unfused ops in the
last bit; float32 programs compute ``erf`` and exact ``gelu`` with the fused epilogue's rational
``erf``, within 7.7e-9 of ``math.erf``, see :data:`FAST_ERF`).  :data:`SCALAR` says which ops
can be fused.

Thread-safety: the cache is filled under a lock; compiled ufuncs are immutable.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pytfrt.backends.cpu import op_math
from pytfrt.backends.cpu._epilogue import _act, _erf, _sigmoid
from pytfrt.backends.cpu._jit import numba
from pytfrt.backends.cpu._parallel import chunks, num_threads, parallel_for
from pytfrt.backends.cpu.op_math import MATH
from pytfrt.backends.cpu.op_table import OpTable
from pytfrt.backends.cpu.ops import OpError
from pytfrt.support.codegen import exec_generated

SCALAR: dict[str, Callable[[list[str], dict[str, Any]], str]] = {
    name: m.scalar for name, m in MATH.items() if m.scalar is not None
}
"""Op name -> ``(argument expressions, attributes) -> scalar expression``: the scalar formulas
of the :mod:`~pytfrt.backends.cpu.op_math` records (the ops that can be fused)."""

FAST_ERF = op_math.FAST_ERF
"""Attribute :func:`scalar_body` adds for float32 programs: ``erf`` and exact ``gelu`` then use
the epilogue's rational ``erf`` (:func:`pytfrt.backends.cpu._epilogue._erf`, within 7.7e-9 of
``math.erf``, below float32 resolution), which LLVM vectorises -- ``math.erf`` is a libm call per
element.  Float64 programs keep ``math.erf``.  Generated code refers to ``math``, ``np``,
``_act``, ``_erf`` and ``_sigmoid``: :data:`NAMESPACE`."""
NAMESPACE: dict[str, Any] = {"math": math, "np": np, "_act": _act, "_erf": _erf,
                             "_sigmoid": _sigmoid}
"""The globals generated scalar code needs (copied per compile)."""

FLAT_OPTIONS: dict[str, Any] = {"nogil": True, "cache": False, "error_model": "numpy"}
"""``numba.njit`` options of the flat loops: the ``numpy`` error model makes ``x / 0`` IEEE's
``inf``/``nan`` (as the unfused ops and the ufunc variant), not a ``ZeroDivisionError``."""

_LOCK = threading.RLock()
_CACHE: dict[tuple[str, tuple[str, ...]], Any] = {}
_FLAT: dict[tuple[str, tuple[str, ...], tuple[int, ...], bool], Any] = {}
_NUMBA_TYPES = {"float32": "float32", "float64": "float64"}


def scalar_body(program: dict[str, Any], args: list[str], prefix: str = "v",
                fast_erf: bool = False) -> tuple[list[str], str]:
    """The statements evaluating ``program`` on the scalar expressions ``args`` (one per
    input): ``(["v0 = ...", ...], name of the result)``; locals are ``<prefix><i>``.
    ``fast_erf`` (float32 results) selects the vectorisable ``erf`` (see :data:`FAST_ERF`).

    Raises:
        OpError: for an op that cannot be fused.
    """
    names = list(args)
    lines = []
    for i, (op, operands, attrs) in enumerate(program["ops"]):
        if op not in SCALAR:
            raise OpError(f"fused_elementwise: op '{op}' cannot be fused")
        if fast_erf:
            attrs = {**attrs, FAST_ERF: True}
        lines.append(f"{prefix}{i} = {SCALAR[op]([names[j] for j in operands], attrs)}")
        names.append(f"{prefix}{i}")
    return lines, names[-1]


def source_of(program: dict[str, Any], fast_erf: bool = False) -> str:
    """The Python source of the scalar function of ``program`` (named ``_kernel``)."""
    names = [f"x{i}" for i in range(int(program["n"]))]
    body, result = scalar_body(program, names, fast_erf=fast_erf)
    lines = [f"def _kernel({', '.join(names)}):", *[f"    {x}" for x in body],
             f"    return {result}"]
    return "\n".join(lines) + "\n"


def compile_program(text: str, dtypes: tuple[str, ...]) -> Any:
    """The ufunc of a program for input dtypes (float32/float64), compiled once and cached.

    Raises:
        OpError: for an unsupported op or dtype.
    """
    key = (text, dtypes)
    fn = _CACHE.get(key)
    if fn is not None:
        return fn
    with _LOCK:
        fn = _CACHE.get(key)
        if fn is not None:
            return fn
        program = json.loads(text)
        for d in dtypes:
            if d not in _NUMBA_TYPES:
                raise OpError(f"fused_elementwise: inputs must be float32/float64, got {d}")
        out = "float64" if "float64" in dtypes else "float32"
        namespace = dict(NAMESPACE)
        source = source_of(program, fast_erf=out == "float32")
        exec_generated(source, "fused_elementwise", namespace)
        sig = f"{out}({', '.join(dtypes)})"
        fn = numba.vectorize([sig], nopython=True)(namespace["_kernel"])
        _CACHE[key] = fn
        return fn


FULL, SCALAR_IN, ROW = 0, 1, 2
"""Kinds of a flat loop's inputs: the output's shape (indexed by the element), one element
(hoisted), or the output's trailing dimensions (a per-channel vector, say: indexed by the
position in the row, the same for every row)."""


def compile_flat(text: str, dtypes: tuple[str, ...], kinds: tuple[int, ...],
                 hoist: bool = True) -> Any:
    """A ``nogil`` Numba loop ``(out, x0, x1, ...)`` over flat contiguous arrays, inputs of
    kind :data:`SCALAR_IN` passed as scalars (hoisted out of the loop): the fast form for the
    common case where every input has the output's shape or one element.  With :data:`ROW`
    inputs (all of one length ``K``, dividing the output's) the loop runs over rows of ``K``
    elements, the row inputs indexed by the position in the row.  Ops that read no
    full-shaped value are evaluated once, not per element (:func:`_hoisted`; ``hoist=False``
    evaluates every op per element).  Cached like :func:`compile_program`."""
    key = (text, dtypes, kinds, hoist)
    fn = _FLAT.get(key)
    if fn is not None:
        return fn
    with _LOCK:
        fn = _FLAT.get(key)
        if fn is not None:
            return fn
        compile_program(text, dtypes)  # validates ops and dtypes
        program = json.loads(text)
        n = int(program["n"])
        params = ", ".join(f"x{i}" for i in range(n))
        lines, result = scalar_body(program, [f"a{i}" for i in range(n)],
                                    fast_erf="float64" not in dtypes)
        body = _hoisted(n, kinds, program, lines, result, hoist)
        src = f"def _flat(out, {params}):\n{body}"
        namespace = dict(NAMESPACE)
        exec_generated(src, "fused_elementwise flat", namespace)
        fn = numba.njit(**FLAT_OPTIONS)(namespace["_flat"])
        _FLAT[key] = fn
        return fn


def _hoisted(n: int, kinds: tuple[int, ...], program: dict[str, Any], lines: list[str],
             result: str, hoist: bool = True) -> str:
    """The body of :func:`compile_flat`'s loop function, ``lines`` (op ``i`` sets ``v<i>``)
    placed by what each op reads: ops of scalars only run once before the loop; ops of
    scalars and row inputs (a batch norm's per-channel coefficients: ``gamma * rsqrt(var +
    eps)``, a mean divided by a count) run once per row position into a ``K``-element array
    before the loop; only the ops that read a full-shaped input, directly or through another
    op, run per element.  The same expressions in the same order: results are bit-identical
    (each hoisted array takes its values' type, through ``np.full``).  Measured on a batch
    norm's input gradient over a 32x32x32x16 activation (three full operands, six
    per-channel or scalar ones): 0.73 -> 0.27 ms."""
    kind = list(kinds)  # per value id: inputs, then ops
    for _, operands, _ in program["ops"]:
        ks = {kind[j] for j in operands}
        kind.append(FULL if FULL in ks else ROW if ROW in ks else SCALAR_IN)
    if kind[-1] != FULL or not hoist:  # a result that reads no full input: nothing to take
        kind[n:] = [FULL] * (len(kind) - n)
    rows = [i for i in range(n) if kinds[i] == ROW]
    ops = [(n + i, line) for i, line in enumerate(lines)]
    pad = "    " if rows else ""
    out = "".join(f"    a{i} = x{i}\n" for i in range(n) if kinds[i] == SCALAR_IN)
    out += "".join(f"    {line}\n" for v, line in ops if kind[v] == SCALAR_IN)
    row_ops = [(v, line) for v, line in ops if kind[v] == ROW]
    used = {j for v, (_, operands, _) in enumerate(program["ops"], n) if kind[v] == FULL
            for j in operands}
    kept = [v for v, _ in row_ops if v in used]
    if rows:
        out += f"    k = x{rows[0]}.shape[0]\n"
    if kept:  # position 0 makes each array (its element type), the others fill it
        read = {j for v, (_, operands, _) in enumerate(program["ops"], n) if kind[v] == ROW
                for j in operands}
        row_loads = [i for i in rows if i in read]
        first = "".join(f"    a{i} = x{i}[0]\n" for i in row_loads)
        first += "".join(f"    {line}\n" for _, line in row_ops)
        first += "".join(f"    p{v} = np.full(k, v{v - n})\n" for v in kept)
        rest = "".join(f"        a{i} = x{i}[c]\n" for i in row_loads)
        rest += "".join(f"        {line}\n" for _, line in row_ops)
        rest += "".join(f"        p{v}[c] = v{v - n}\n" for v in kept)
        out += first + "    for c in range(1, k):\n" + rest
    if rows:
        out += ("    for r in range(out.shape[0] // k):\n"
                "        for c in range(k):\n            i = r * k + c\n")
    else:
        out += "    for i in range(out.shape[0]):\n"
    if program["ops"]:
        used.add(n + len(program["ops"]) - 1)
    else:
        used.update(range(n))
    body = [f"a{i} = x{i}[{'c' if kinds[i] == ROW else 'i'}]" for i in range(n)
            if kinds[i] != SCALAR_IN and i in used]
    body += [f"v{v - n} = p{v}[c]" for v in kept]
    body += [line for v, line in ops if kind[v] == FULL]
    body.append(f"out[i] = {result}")
    return out + "".join(f"{pad}        {x}\n" for x in body)


def _row_length(a: np.ndarray, shape: tuple[int, ...]) -> int:
    """``K`` if ``a`` (C-contiguous) is the output's trailing dimensions broadcast over its
    leading ones (its own leading dimensions all 1, at least one trailing one), else 0."""
    if not a.flags.c_contiguous or a.ndim > len(shape) or a.size <= 1:
        return 0
    dims = (1,) * (len(shape) - a.ndim) + tuple(a.shape)
    k = len(dims)
    while k > 0 and dims[k - 1] == shape[k - 1]:
        k -= 1
    if any(d != 1 for d in dims[:k]) or k == len(dims):
        return 0
    return a.size


_DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}
_PLANS: dict[Any, tuple[Any, tuple[int, ...], tuple[int, ...], Any, Any]] = {}
_PLAN_LIMIT = 4096


def _plan(text: str, arrays: tuple[np.ndarray, ...], out: np.ndarray | None
          ) -> tuple[Any, tuple[int, ...], tuple[int, ...], Any, Any]:
    """``(flat kernel or None, input kinds, shape, result dtype, ufunc or None)`` for inputs of
    these shapes, dtypes and layouts (see :func:`run`)."""
    dtypes = tuple(_DTYPE_NAMES.get(a.dtype) or a.dtype.name for a in arrays)
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    size = 1
    for d in shape:
        size *= d
    flat_ok = size > 1 and (out is None or (out.shape == shape and out.flags.c_contiguous))
    kinds = []
    row = 0
    for a in arrays:
        if a.size == 1 and a.shape != shape:
            kinds.append(SCALAR_IN)
        elif a.shape == shape and a.flags.c_contiguous:
            kinds.append(FULL)
        elif (k := _row_length(a, shape)) and row in (0, k):
            row = k
            kinds.append(ROW)
        else:
            flat_ok = False
            break
    result_dtype = np.float64 if "float64" in dtypes else np.float32
    if flat_ok:
        flat = compile_flat(text, dtypes, tuple(kinds))
        return flat, tuple(kinds), shape, result_dtype, None
    return None, (), shape, result_dtype, compile_program(text, dtypes)


PARALLEL_MIN = 1 << 16
"""Output elements from which a flat loop is split into shards of at least half as many,
run on the CPU kernels' helper threads (the loop releases the GIL)."""


def _sharded(flat: Any, out: np.ndarray, args: list[Any], kinds: tuple[int, ...]) -> None:
    """``flat(out, *args)`` over disjoint ranges of the flat arrays (whole rows when there are
    row inputs), in parallel (each element is still read before it is written, so ``out`` may
    be an input)."""
    k = next((a.shape[0] for a, kind in zip(args, kinds, strict=True) if kind == ROW), 1)
    parts = chunks(out.shape[0] // k, max(1, PARALLEL_MIN // 2 // k))

    def shard(i: int) -> None:
        lo, hi = parts[i][0] * k, parts[i][1] * k
        flat(out[lo:hi], *[a[lo:hi] if kind == FULL else a
                            for a, kind in zip(args, kinds, strict=True)])

    parallel_for(shard, len(parts))


def run(text: str, *arrays: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Evaluate the fused program ``text`` on ``arrays`` (NumPy broadcasting), into ``out``
    if given (which may be one of ``arrays``: each element is read before it is written).

    When every input has the output's shape (C-contiguous), one element or the output's
    trailing dimensions, a flat loop runs (:func:`compile_flat`); otherwise the broadcasting
    ufunc (:func:`compile_program`).  The choice is cached per program and input
    shapes/dtypes/layouts (the per-call path of small tensors is dominated by it otherwise).
    """
    key = (text, None if out is None else (out.shape, out.flags.c_contiguous),
           *[(a.shape, a.dtype, a.flags.c_contiguous) for a in arrays])
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(text, arrays, out)
        if len(_PLANS) >= _PLAN_LIMIT:
            _PLANS.clear()
        _PLANS[key] = plan
    flat, kinds, shape, result_dtype, fn = plan
    if flat is not None:
        res = out if out is not None else np.empty(shape, result_dtype)
        args = [a.reshape(()).item() if kind == SCALAR_IN else a.reshape(-1)
                for a, kind in zip(arrays, kinds, strict=True)]
        r = res.reshape(-1)
        if r.shape[0] >= PARALLEL_MIN and num_threads() > 1:
            _sharded(flat, r, args, kinds)
        else:
            flat(r, *args)
        return res
    res = fn(*arrays) if out is None else fn(*arrays, out=out)
    return res if isinstance(res, np.ndarray) else np.asarray(res)


GRAPH_OPS = OpTable()
"""Op name -> compute function (the fused op's kernel)."""


@GRAPH_OPS.op("fused_elementwise")
def fused_elementwise(*inputs: np.ndarray, program: str,
                      out: np.ndarray | None = None) -> np.ndarray:
    """Run a fused program (see the module docstring) on the inputs."""
    return run(program, *inputs, out=out)
