"""``-tg-fuse-small-graph``: runs of ops with small static shapes -> one ``tg.fused_graph`` op.

A training step of a small network is a few dozen kernels on tensors of a handful of elements:
each kernel's arithmetic takes well under a microsecond and its Python dispatch a few.  This
pass finds maximal runs of consecutive ops (in program order; ``tg.constant`` ops in between
do not break a run) that the whole-region kernel supports
(:data:`pytfrt.backends.cpu.small_graph.SUPPORTED`: elementwise ops and ``fused_elementwise``
regions, ``matmul`` of 2-D operands with its epilogue, the gradient ops of activations,
``reduce_sum/mean/max/min``, ``transpose``, ``reshape``/``expand_dims``/``squeeze``) on
float32/float64 values whose shapes are all static and small (:data:`MAX_ELEMENTS` elements per
value, :data:`MAX_MATMUL` multiply-adds per matmul: beyond that BLAS and the per-op kernels
win), and moves each run of :data:`MIN_OPS` or more ops into one region::

    %r:2 = "tg.fused_graph"(%x, %w, %b) ({
    ^bb0(%a: tensor<4x2xf32>, %c: tensor<2x2xf32>, %d: tensor<2xf32>):
      %0 = "tg.matmul"(%a, %c) ...
      %1 = "tg.fused_elementwise"(%0, %d) ({...}) ...
      %2 = "tg.reduce_sum"(%1) ...
      "tg.yield"(%1, %2) ...
    }) : (...) -> (tensor<4x2xf32>, tensor<2xf32>)

The region's results are the values used after the run (or returned).  A run of consecutive
ops is always convex (nothing outside it uses one of its results and feeds another of its ops),
so the region can stand where its last op stood.  At lowering the region becomes a JSON
program (:func:`graph_program`) and at run time ONE Numba function
(:mod:`pytfrt.backends.cpu.small_graph`).  Runs after ``-tg-fuse-elementwise`` and before
``-tg-plan-buffers`` in the default pipeline.
"""

from __future__ import annotations

from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation

from pytfrt.compiler.attrs import op_attrs
from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.kernel_programs import DTYPES as _DTYPES
from pytfrt.compiler.kernel_programs import graph_program as graph_program
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.passes.common import functions, make_region, ttype
from pytfrt.compiler.types import TType

MAX_ELEMENTS = 4096
"""The largest value (elements) a region may hold."""
MAX_MATMUL = 1 << 15
"""The largest matmul (``M * N * K`` multiply-adds) a region may hold."""
MIN_OPS = 2
"""The fewest ops worth a region (one op is already one kernel)."""

def _small(t: TType) -> bool:
    if t.dtype not in _DTYPES or t.shape is None or any(d is None for d in t.shape):
        return False
    n = 1
    for d in t.shape:
        n *= d  # type: ignore[operator]
    return 1 <= n <= MAX_ELEMENTS


def eligible(op: Operation) -> bool:
    """Whether ``op`` may be part of a ``fused_graph`` region."""
    from pytfrt.backends.cpu._epilogue import ACTIVATION_CODES
    from pytfrt.backends.cpu.small_graph import SUPPORTED

    if not op.name.startswith("tg.") or op.name[3:] not in SUPPORTED or len(op.results) != 1:
        return False
    types = [ttype(v) for v in [*op.operands, *op.results]]
    if not all(_small(t) for t in types):
        return False
    name = op.name[3:]
    if name in ("reshape", "expand_dims", "squeeze"):
        return len(op.operands) == 1
    if name == "matmul":
        attrs = op_attrs(op, get_opdef(op.name))
        a, b, *extra = [t.shape for t in types[:-1]]
        out = types[-1].shape
        if len(a) != 2 or len(b) != 2 or out is None or len(out) != 2:  # type: ignore[arg-type]
            return False
        m, n = out
        k = a[0] if attrs["transpose_a"] else a[1]  # type: ignore[index]
        f0, f1 = (list(attrs["epilogue_operands"]) + [0, 0])[:2] if extra else (0, 0)
        if len(extra) != f0 + f1 or attrs["activation"] not in ACTIVATION_CODES:
            return False
        if f0 and extra[0] != (n,):
            return False
        if f1 and extra[f0] != (m, n):
            return False
        return m * n * k <= MAX_MATMUL  # type: ignore[operator]
    return True


def _runs(block: Block) -> list[list[Operation]]:
    runs: list[list[Operation]] = []
    cur: list[Operation] = []
    for op in block.ops:
        if op.name == "tg.constant":
            continue
        if eligible(op):
            cur.append(op)
            continue
        if len(cur) >= MIN_OPS:
            runs.append(cur)
        cur = []
    if len(cur) >= MIN_OPS:
        runs.append(cur)
    return runs


def _fuse(run: list[Operation]) -> None:
    members = set(run)
    outputs = [r for op in run for r in op.results
               if any(u.operation not in members for u in r.uses)]
    make_region(run, "fused_graph", outputs)


def fuse_small_graph(gm: GraphModule) -> GraphModule:
    """Run the pass in place (every function; see the module docstring)."""
    for f in functions(gm):
        assert isinstance(f, FuncOp)
        for run in _runs(f.body.block):
            _fuse(run)
    return gm
