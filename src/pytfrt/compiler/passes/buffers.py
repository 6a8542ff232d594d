"""``-tg-plan-buffers``: liveness-based buffer reuse for ``@main``'s intermediate values.

Every op whose compute function can write into an ``out`` buffer (the runtime table's
functions with an ``out`` parameter) and whose result is an intermediate value gets the
attribute ``tg.buffer = [slot, site, first, last]``: ``site`` numbers the op, ``slot`` names
the arena buffer it writes, and ``[first, last]`` is its result's lifetime in op positions of
``@main`` (its own position to its last use, views included).  The arena places the slots of
one call in one block by these lifetimes (:meth:`pytfrt.backends.cpu.arena.Arena.pack`: slots
whose values are never alive at the same op share bytes).  A linear scan over ``@main`` in
program order hands out slots:

* a value's lifetime ends at its last use -- extended through every op that may return a view
  of its operand (ops without an ``out`` buffer: ``reshape``, ``slice``, ...), so a buffer is
  never reused while a view of it is alive;
* values that reach ``func.return`` (also through such views) get no slot: results belong to
  the caller;
* a slot is reused by a later value of the same type once its value is dead; an elementwise
  op (``add``, ``relu``, ``fused_elementwise``, ...) or a ``squeeze_excite`` may take the slot
  of an operand whose lifetime ends at that op (in place).  Ops that read an operand after
  writing (conv, matmul, pooling, norms) never write into an operand's slot -- except a
  convolution's fused residual (``epilogue_operands``), which each output element reads once,
  just before writing it: a ``conv2d`` or ``qconv2d`` may take its dying residual's slot (not
  when the residual is also its input ``x``).  oneDNN then adds the residual with its ``sum``
  post-op where it lies, instead of reading it from a second buffer (or, int8, copying it into
  the result first): one activation-sized buffer less in the cache per residual block
  (``docs/compiler.md``, "Where the time goes per model").

The lowering turns annotated ops into ``tg.<op>.buf`` kernels that take the call's arena
(``pytfrt.backends.cpu.arena``).  Functions with control flow are left alone.
"""

from __future__ import annotations

from xdsl.dialects import builtin as b
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.lowering import BUFFER_ATTR, CONTROL
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.passes.common import is_tg, ttype

# Ops whose kernels read each element before writing it (safe in place): elementwise ops, and
# squeeze-excite (it reads the whole input for the channel means before the scale writes):
# in place its scale reads and writes lines already in cache, and the block needs no second
# activation buffer (EfficientNet-B0 at batch 1 3-7% faster per call, docs/benchmarks.md).
IN_PLACE = frozenset({"tg.fused_elementwise", "tg.add", "tg.sub", "tg.mul", "tg.maximum",
                      "tg.minimum", "tg.relu", "tg.neg", "tg.abs", "tg.exp", "tg.tanh",
                      "tg.sqrt", "tg.square", "tg.log", "tg.expm1", "tg.log1p", "tg.sin",
                      "tg.cos", "tg.tan", "tg.atan2", "tg.bitwise_and", "tg.bitwise_or",
                      "tg.squeeze_excite"})


def buffered_ops() -> frozenset[str]:
    """The ``tg.*`` op names whose compute function takes ``out``."""
    from pytfrt.backends.cpu.graph_kernels import accepts_out, graph_ops

    out = set()
    for name, fn in graph_ops().items():
        if accepts_out(fn) and not name.endswith(".prepare"):
            out.add(f"tg.{name}")
    return frozenset(out)


def _conv_residual(op: Operation) -> SSAValue | None:
    """The fused residual operand of a ``tg.conv2d`` / ``tg.qconv2d`` (its last operand), or
    ``None``."""
    flags = op.attributes.get("epilogue_operands")
    if not isinstance(flags, b.ArrayAttr) or len(flags.data) != 2:
        return None
    has_residual = flags.data[1]
    if not isinstance(has_residual, b.IntegerAttr) or not has_residual.value.data:
        return None
    return op.operands[-1]


def plan_buffers(gm: GraphModule) -> GraphModule:
    """Run the pass in place (on ``@main``)."""
    main = gm.function("main")
    ops = [op for op in main.body.block.ops if not isinstance(op, ReturnOp)]
    if any(op.name in CONTROL for op in ops):
        return gm
    capable = buffered_ops()
    planned = {op for op in ops if op.name in capable and len(op.results) == 1
               and not get_opdef(op.name).stateful}
    index = {op: i for i, op in enumerate(ops)}
    ret = main.body.block.last_op
    assert isinstance(ret, ReturnOp)
    end = len(ops)
    # lifetimes, extended through ops that may alias their operands
    last: dict[SSAValue, int] = {}
    for op in reversed(ops):
        for r in op.results:
            uses = [index.get(u.operation, end) for u in r.uses]
            t = max(uses, default=index[op])
            last[r] = max(t, last.get(r, t))
        if op not in planned:
            for v in op.operands:
                ext = max((last.get(r, index[op]) for r in op.results), default=index[op])
                last[v] = max(last.get(v, ext), ext)
    escaping: set[SSAValue] = set()
    todo = list(ret.operands)
    while todo:
        v = todo.pop()
        if v in escaping:
            continue
        escaping.add(v)
        owner = v.owner
        if isinstance(owner, Operation) and owner not in planned:
            todo.extend(owner.operands)
    free: dict[object, list[int]] = {}
    slot_of: dict[SSAValue, int] = {}
    n_slots = 0
    site = 0
    for i, op in enumerate(ops):
        if op.name.startswith("tg.") and BUFFER_ATTR in op.attributes:
            del op.attributes[BUFFER_ATTR]
        dying = [v for v in dict.fromkeys(op.operands) if last.get(v) == i and v in slot_of]
        if op in planned and op.results[0] not in escaping and is_tg(op):
            r = op.results[0]
            key = (str(ttype(r)),)
            slot = None
            if op.name in IN_PLACE:
                for v in dying:
                    if str(ttype(v)) == key[0]:
                        slot = slot_of.pop(v)
                        dying.remove(v)
                        break
            elif op.name in ("tg.conv2d", "tg.qconv2d"):
                res = _conv_residual(op)
                if (res is not None and res in dying and res is not op.operands[0]
                        and str(ttype(res)) == key[0]):
                    slot = slot_of.pop(res)
                    dying.remove(res)
            if slot is None:
                pool = free.get(key)
                if pool:
                    slot = pool.pop()
                else:
                    slot, n_slots = n_slots, n_slots + 1
            slot_of[r] = slot
            plan = (slot, site, i, max(last.get(r, i), i))
            op.attributes[BUFFER_ATTR] = b.ArrayAttr([b.IntegerAttr(x, b.i64) for x in plan])
            site += 1
        for v in dying:
            s = slot_of.pop(v)
            free.setdefault((str(ttype(v)),), []).append(s)
        for r in op.results:  # produced and never used
            if r in slot_of and last.get(r) == i:
                free.setdefault((str(ttype(r)),), []).append(slot_of.pop(r))
    return gm
