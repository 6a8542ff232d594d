"""Fused segments: a run of tensor kernels of whole-function code as ONE native call.

Whole-function execution (:mod:`pytfrt.executor.whole_function`, docs/executor.md) turns a
BEF function into straight-line Python code, one guarded call per kernel.  Inside it, a
*segment* -- a maximal run of consecutive kernels (in the executor's order) that all have a
C implementation (:data:`pytfrt.backends.cpu.fusible_kernels.FUSIBLE`), plus chain kernels,
folded constants, ``ts.build_shape``, ``tfrt_dht.create_uninitialized_tensor.f32.R`` and
``tfrt.call`` of a function made only of such kernels -- is also compiled into one
C function (:class:`SegmentBuilder`; the provider writes and compiles the C).  The generated
code then runs, per segment::

    if not E and <every outside tensor is a float32 DenseHostTensor> [and allocator fused_ok]:
        r = segment(arrays..., scalars...)    # None: not compiled yet, or a check failed
    if r is None:
        <the segment's kernels, one by one, exactly as without fusion>

The C function first allocates the segment's new tensors (their shapes are known when the
code is generated), then checks every kernel's shape rule, that the outside arrays are
C-contiguous float32 arrays and that no two of them share memory; only if all hold does it
compute, in the kernels' order.  So it never fails half-way: when anything would go wrong,
nothing was mutated and the unfused code runs and reports the very same error as without
fusion.

What the fused path keeps: results (new tensors become DenseHostTensors only if used after the
segment), the order of side effects (a segment holds no kernel with Python side effects), the
destroy hooks of outside values released inside the segment (run right after it, in order).
What it does not do: account its temporaries with a host allocator (segments that make tensors
run fused only without an allocator or under one whose ``fused_ok`` holds, the leak-checking
one: it never refuses and reports only the balance; the tensors that leave the segment are
accounted with it),
check for cancellation between its
kernels (it is checked before and after the segment, as around one kernel).  The one call back into
NumPy (``exp``, whose float32 results the compiled code could not reproduce bit for bit) could
raise half-way only under ``np.seterr``/``np.errstate`` set to ``raise`` or ``call``: a segment
with it runs unfused while they are.

Compilation: the first :data:`~pytfrt.backends.cpu._ccompile.COMPILE_AFTER` runs of a segment
are unfused, the next compiles it with the machine's C compiler, once per machine (the on-disk
cache of :mod:`pytfrt.backends.cpu._ccompile`, if that directory is owner-only writable:
docs/security.md).  If there is no compiler or it fails, the segment stays unfused.

Thread-safety: a :class:`FusedSegment` compiles under a lock; calls only read it.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytfrt.executor.kernel_info import KernelInfo
from pytfrt.host import extensions

_CREATE_PREFIX = "tfrt_dht.create_uninitialized_tensor.f32."
_BROADCAST_PREFIX = "tfrt_test.broadcast.f32."


class NotFusible(Exception):
    """A kernel (or called function) cannot join the segment."""


@dataclass
class Sym:
    """What a register holds in a segment being built.

    ``kind``: ``n`` a tensor made in the segment (``name``: its C variable), ``s`` a float32
    scalar and ``i`` an integer computed in it (``name``: its C variable), ``c`` a chain, ``h`` a
    shape known now (``value``: the TensorShape), ``k`` a folded constant (``value``).
    """

    kind: str
    name: str = ""
    value: Any = None
    py: str = ""  # the Python expression of an outside value / constant


@dataclass
class SegmentBuilder:
    """Builds one segment's native source while kernels are added (in order)."""

    const: Any  # callable: a value -> the name of a generated-code constant holding it
    ext_tensors: dict[str, str] = field(default_factory=dict)   # python expr -> C arg
    ext_scalars: dict[str, str] = field(default_factory=dict)   # python expr -> C arg
    ext_ints: dict[str, str] = field(default_factory=dict)      # python expr -> C arg
    allocs: list[tuple[str, tuple[int, ...], bool]] = field(default_factory=list)
    # new tensors: (name, dims, zeroed)
    checks: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    scalars: list[tuple[str, str]] = field(default_factory=list)  # computed: (name, kind)
    kernels: int = 0        # kernels with native code
    counter: int = 0
    calls_back: bool = False  # some kernel calls NumPy back (see Fusible.calls_back)

    def clone(self) -> SegmentBuilder:
        """A copy to add a kernel to (kept if the kernel fits)."""
        c = copy.copy(self)
        c.ext_tensors, c.ext_scalars, c.ext_ints = \
            dict(self.ext_tensors), dict(self.ext_scalars), dict(self.ext_ints)
        c.allocs, c.checks, c.calls, c.scalars = \
            list(self.allocs), list(self.checks), list(self.calls), list(self.scalars)
        return c

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -- operands -----------------------------------------------------------------------------

    @staticmethod
    def _outside(table: dict[str, str], py: str, prefix: str) -> str:
        """The C argument of the outside value ``py`` (one per value)."""
        name = table.get(py)
        if name is None:
            name = table[py] = f"{prefix}{len(table)}"
        return name

    def _tensor(self, sym: Sym | None, py: str) -> str:
        if sym is None:
            return self._outside(self.ext_tensors, py, "x")
        if sym.kind == "n":
            return sym.name
        raise NotFusible("not a tensor")

    def _int(self, sym: Sym | None, py: str) -> str:
        if sym is None or (sym.kind == "k" and sym.value.__class__ is int):
            return self._outside(self.ext_ints, py if sym is None else sym.py, "i")
        if sym.kind == "i":
            return sym.name
        raise NotFusible("not an integer")

    def _scalar(self, sym: Sym | None, py: str) -> str:
        if sym is None:
            return self._outside(self.ext_scalars, py, "s")
        if sym.kind == "s":
            return sym.name
        if sym.kind == "k":
            if sym.value.__class__ is not provider().scalar_type():
                raise NotFusible("constant is not an f32")
            return self._scalar(None, sym.py)
        raise NotFusible("not a scalar")

    # -- kernels ------------------------------------------------------------------------------

    def add(self, k: KernelInfo, operands: Sequence[tuple[Sym | None, str]],
            folded: tuple[Any] | None) -> list[Sym]:
        """Add kernel ``k`` (operands: per operand its Sym if made in the segment, else
        ``None``, and its Python expression); returns its results' Syms.

        Raises:
            NotFusible: ``k`` cannot join.
        """
        FUSIBLE = provider().FUSIBLE  # noqa: N806 - the table

        if folded is not None:
            return [Sym("k", value=folded[0], py=self.const(folded[0]))]
        name = k.name
        if name.startswith(_CREATE_PREFIX):
            return [self._create(k)]
        spec = FUSIBLE.get(name)
        if spec is None and name.startswith(_BROADCAST_PREFIX):
            spec = FUSIBLE["tfrt_test.broadcast.f32.2"]
        if spec is None or len(operands) < len(spec.roles) or \
                (k.num_results != 1 and spec.result != "int int"):
            raise NotFusible(name)
        if spec.result == "shape":
            return [self._shape(k)]
        args: list[str] = []
        shapes: list[tuple[int, ...]] = []
        for role, (sym, py) in zip(spec.roles, operands, strict=False):
            if role == "t":
                args.append(self._tensor(sym, py))
            elif role == "s":
                args.append(self._scalar(sym, py))
            elif role == "i":
                args.append(self._int(sym, py))
            elif role == "h":
                if sym is None or sym.kind != "h":
                    raise NotFusible("shape not known")
                shapes.append(tuple(sym.value.dims))
                args.append(repr(tuple(sym.value.dims)))
            else:
                args.append("")
        for i, j in spec.distinct:
            if args[i] == args[j]:
                raise NotFusible("operands must differ")
        if spec.result == "chain" and not spec.call:
            return [Sym("c")]
        out = ""
        results: list[Sym] = []
        if spec.result.startswith(("int", "bool")):
            kinds = spec.result.split()
            names = [self.fresh("r") for _ in kinds]
            if len(names) != k.num_results:
                raise NotFusible(name)
            self.scalars.extend(zip(names, kinds, strict=True))
            results = [Sym("i", r) for r in names]
            out = ", ".join(names)
        elif spec.result == "new":
            (target,) = shapes
            if not target:
                raise NotFusible("empty target shape")
            out = self.fresh("n")
            self.allocs.append((out, target, False))
            self.checks.append(provider().broadcast_check(args[0], target[-1]))
            results = [Sym("n", out)]
        elif spec.result == "f32":
            out = self.fresh("r")
            self.scalars.append((out, "f32"))
            results = [Sym("s", out)]
        else:
            results = [Sym("c")]
        if spec.check:
            self.checks.append(spec.check.format(*args))
        self.calls.append(spec.call.format(*args, out=out, outs=out.split(", ")))
        self.kernels += 1
        self.calls_back = self.calls_back or spec.calls_back
        return results

    def _create(self, k: KernelInfo) -> Sym:
        if not k.attrs:
            raise NotFusible("no shape")
        shape = provider().new_tensor_dims(k.name, k.attrs[0])
        if shape is None:
            raise NotFusible("bad or big shape")
        name = self.fresh("n")
        self.allocs.append((name, tuple(shape), True))
        return Sym("n", name)

    def _shape(self, k: KernelInfo) -> Sym:
        try:
            value = k.fn(k.attrs[0])  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - fails at run time: not fusible
            raise NotFusible("bad shape") from None
        return Sym("h", value=value, py=self.const(value))

    # -- the function ---------------------------------------------------------------------------

    def source(self, outs: Sequence[str]) -> str:
        """The source of the segment function ``_seg(x..., s..., i...)`` returning ``(ok,
        *outs)`` (the provider's ``segment_source``)."""
        return provider().segment_source(  # type: ignore[no-any-return]
            list(self.ext_tensors.values()), list(self.ext_scalars.values()),
            list(self.ext_ints.values()), self.allocs, self.scalars, self.checks, self.calls,
            outs)


def provider() -> Any:
    """The module with the native kernels (``FUSIBLE``, ``segment_source``, ``compile_segment``,
    ``compile_after``...), or ``None``.

    The CPU backend provides it (:data:`pytfrt.host.extensions.FUSED_SEGMENT_KERNELS`) when its
    kernel library is registered (docs/layout.md: the executor does not import backends); it
    is imported on the first call only, so a program with no tensor kernels never loads it.
    ``None`` if no library provided it or it cannot be imported.
    """
    return extensions.get(extensions.FUSED_SEGMENT_KERNELS)


class FusedSegment:
    """One segment's compiled function (see the module docstring).

    Calling it returns the compiled function's tuple ``(True, *results)``, or ``None``: not
    compiled yet (the first ``COMPILE_AFTER`` calls), not compilable for these inputs, or a
    check failed -- then the caller runs the segment unfused.
    """

    def __init__(self, source: str, label: str, calls_back: bool = False) -> None:
        self.source = source
        self.label = label
        self.calls_back = calls_back
        self._quiet = provider().numpy_errors_quiet
        self.calls = 0
        self.hits = 0  # calls that ran fused
        self.failed = False
        self._fn: Any = None
        self._lock = threading.Lock()

    def _compile(self) -> Any:
        with self._lock:
            if self._fn is None and not self.failed:
                try:
                    self._fn = provider().compile_segment(self.source, "_seg")
                except Exception:  # noqa: BLE001 - stays unfused
                    self.failed = True
            return self._fn

    def __call__(self, *args: Any) -> Any:
        fn = self._fn
        if self.calls_back and not self._quiet():
            return None  # NumPy may raise half-way: unfused
        if fn is None:
            if self.failed:
                return None
            self.calls += 1
            if self.calls <= provider().compile_after():
                return None
            fn = self._compile()
            if fn is None:
                return None
        try:
            r = fn(*args)
        except Exception:  # noqa: BLE001 - typing failed for these inputs (before running: the
            # compiled code raises nothing once it runs, see calls_back)
            self.failed = True
            self._fn = None
            return None
        if not r[0]:
            return None
        self.hits += 1
        return r
