"""``-tg-fuse-batch-stats``: a training step's batch statistics in one pass each, and
per-channel vectors no longer broadcast to full tensors.

TensorFlow's graph of a batch-norm layer in training (Keras' ``BatchNormalization``:
``tf.nn.moments``, then the ops of its gradient) reads each activation several times and
materialises per-channel values as activation-sized tensors.  Four rewrites, in order (the
third after the fourth, which may expose more of the second):

1. **Moments.** ``m = reduce_mean(x) {axes, keepdims}``, ``d = squared_difference(x, m)``
   (either order; its other users may only be ``shape`` ops, which then read ``x``: ``d`` has
   ``x``'s shape) and ``v = reduce_mean(d) {same axes, keepdims}`` become
   ``m, v = moments(x) {axes, keepdims}`` (one pass, :mod:`pytfrt.backends.cpu.batch_stats`).
2. **Gradient sums.** ``s = reduce_sum(a) {axes, keepdims}`` and ``t = reduce_sum(mul(a, b))``
   (either order, the ``mul`` used only there, same axes and keepdims, and ``mul(a, b)``
   provably of ``a``'s shape) become ``s, t = sum_and_dot(a, b)``; with ``a =
   relu_grad(dy, y)`` (``dy``, ``y`` of ``a``'s type), ``a, s, t = relu_grad_sums(dy, y, b)``;
   a ``dy = add(p, q)`` used only there, ``p`` and ``q`` of ``y``'s type (a residual block
   input's two gradients), becomes ``relu_grad_sums(p, y, b, q)`` (whose kernel adds them as
   the ``add`` did should their run-time shapes differ).
3. **A second product.** ``g, s, t = relu_grad_sums(dy, y, b[, dy2])`` and ``t2 =
   reduce_sum(mul(g, b2))`` (same axes and keepdims, ``b2`` of ``g``'s shape) become
   ``g, s, t, t2 = relu_grad_sums2(dy, y, b, b2[, dy2])``: two batch norms reading one
   gradient (a residual stage's main branch and projection shortcut), one pass.
4. **Broadcasts.** ``broadcast_to(v, s)`` whose users are fusable elementwise ops
   (:data:`pytfrt.backends.cpu.fused.SCALAR`) is moved below a user whose other operands
   broadcast into ``v`` (``div(broadcast_to(v, s), n)`` -> ``broadcast_to(div(v, n), s)``) and
   dropped at a user whose result has the same shape without it (``add(y, broadcast_to(v,
   shape(y)))`` -> ``add(y, v)``: the fused loop then reads ``v`` as a per-channel row).

"The same shape" is proved by symbolic shapes: every dimension is a size or a symbol that
stands for one run-time size (a function argument's ``?``, carried through elementwise ops,
``shape``/``cast``/``broadcast_to``, reshapes with one ``-1``, reductions, matmuls and NHWC
convolutions); a dimension the rules do not follow gets a new symbol, so equal shapes are
equal at run time.  Ops whose operands must share one shape (``relu_grad`` and the other
activation gradients: their kernels raise otherwise) make their operands' symbols one.  The
pass runs after differentiation and before ``-tg-fuse-elementwise``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import attrs_of, functions, new_op, replace, single_use, ttype

Dim = int | str
Shape = tuple[Dim, ...]
FLOATS = ("f32", "f64")
_SAME_SHAPE = ("relu_grad", "relu6_grad", "sigmoid_grad", "tanh_grad", "gelu_grad")
"""Ops whose operands and result all have one shape (their kernels check it)."""


def _scalar_ops() -> frozenset[str]:
    from pytfrt.backends.cpu.fused import SCALAR

    return frozenset(SCALAR)


class Shapes:
    """Symbolic shapes of a block's values (see the module docstring)."""

    def __init__(self) -> None:
        self.of: dict[SSAValue, Shape | None] = {}
        self.vec: dict[SSAValue, Shape] = {}  # a 1-D integer value holding a shape
        self.alias: dict[str, Dim] = {}  # symbols found equal to another symbol or a size
        self._fresh = (f"s{i}" for i in itertools.count())
        self.elementwise = _scalar_ops()

    def new(self) -> str:
        return next(self._fresh)

    def static(self, v: SSAValue) -> Shape | None:
        t = ttype(v)
        if t.shape is None:
            return None
        return tuple(self.new() if d is None else d for d in t.shape)

    def get(self, v: SSAValue) -> Shape | None:
        if v not in self.of:
            self.of[v] = self.static(v)
        sym = self.of[v]
        return None if sym is None else tuple(self.find(d) for d in sym)

    def find(self, d: Dim) -> Dim:
        while isinstance(d, str) and d in self.alias:
            d = self.alias[d]
        return d

    def unify(self, shapes: Sequence[Shape | None]) -> Shape | None:
        """The one shape of operands that must all have it (the op fails otherwise): their
        symbols are made one."""
        known = [s for s in shapes if s is not None]
        if not known or any(len(s) != len(known[0]) for s in known):
            return None
        out = list(known[0])
        for s in known[1:]:
            for i, d in enumerate(s):
                a, b = self.find(out[i]), self.find(d)
                if a == b:
                    continue
                if isinstance(a, str):
                    self.alias[a] = b
                    out[i] = b
                elif isinstance(b, str):
                    self.alias[b] = a
        return tuple(self.find(d) for d in out)

    def broadcast(self, shapes: Sequence[Shape | None]) -> Shape | None:
        """The symbolic broadcast of ``shapes`` (``None`` if a rank is unknown)."""
        if any(s is None for s in shapes):
            return None
        rank = max((len(s) for s in shapes if s is not None), default=0)
        out: list[Dim] = []
        for i in range(rank):
            dims = {s[len(s) - rank + i] for s in shapes
                    if s is not None and len(s) - rank + i >= 0}
            dims.discard(1)
            ints = {d for d in dims if isinstance(d, int)}
            if not dims:
                out.append(1)
            elif len(ints) == 1:
                out.append(next(iter(ints)))  # a symbol beside a size must be 1 or that size
            elif len(dims) == 1:
                out.append(next(iter(dims)))
            else:
                out.append(self.new())
        return tuple(out)

    def merge(self, v: SSAValue, sym: Shape | None) -> None:
        """Record ``sym`` for ``v``, keeping the static type's sizes where it has them."""
        t = ttype(v)
        if sym is None or t.shape is None or len(sym) != len(t.shape):
            self.of[v] = self.static(v)
            return
        for d, s in zip(sym, t.shape, strict=True):
            if isinstance(d, str) and s is not None:
                self.alias[d] = s  # the static type knows the symbol's size
        self.of[v] = tuple(self.find(d) for d in sym)

    def visit(self, op: Operation) -> None:
        """Record the symbolic shapes of ``op``'s results (operands visited before)."""
        name = op.name[3:] if op.name.startswith("tg.") else op.name
        ins = [self.get(v) for v in op.operands]
        if len(op.results) != 1:
            for r in op.results:
                self.get(r)
            return
        r = op.results[0]
        a = attrs_of(op) if op.name.startswith("tg.") else {}
        sym: Shape | None = None
        if name == "shape" and ins[0] is not None:
            self.vec[r] = ins[0]
        elif name == "cast" and op.operands[0] in self.vec:
            self.vec[r] = self.vec[op.operands[0]]
            sym = ins[0]
        elif name in self.elementwise:
            sym = self.broadcast(ins)
        elif name in _SAME_SHAPE and ins:
            sym = self.unify(ins)
        elif name == "broadcast_to" and op.operands[1] in self.vec:
            sym = self.vec[op.operands[1]]
        elif name == "conv2d_backprop_input" and op.operands[0] in self.vec:
            sym = self.vec[op.operands[0]]
        elif name in ("conv2d", "max_pool2d", "avg_pool2d") and a.get("layout") == "NHWC":
            x = ins[0]
            sym = None if x is None else (x[0], *(self.static(r) or ())[1:])
        elif name.startswith("reduce_") and ins[0] is not None and "axes" in a:
            x = ins[0]
            axes = {ax % len(x) for ax in a["axes"]} if a["axes"] else set(range(len(x)))
            sym = tuple(1 if i in axes else d for i, d in enumerate(x)
                        if a["keepdims"] or i not in axes)
        elif name == "reshape" and ins[0] is not None:
            sym = self._reshape(ins[0], list(a.get("shape") or ()))
        elif name == "matmul" and len(ins) == 2:
            x, w = ins
            if x is not None and w is not None and len(x) == 2 and len(w) == 2:
                sym = (x[1] if a["transpose_a"] else x[0], w[0] if a["transpose_b"] else w[1])
        self.merge(r, None if sym is None else tuple(self.find(d) for d in sym))

    def _reshape(self, x: Shape, target: list[int]) -> Shape | None:
        syms = [d for d in x if isinstance(d, str)]
        if target.count(-1) != 1 or len(syms) != 1 or any(d < -1 for d in target):
            return None
        known = math.prod(d for d in x if isinstance(d, int))
        rest = math.prod(d for d in target if d != -1)
        if known != rest:
            return None
        return tuple(syms[0] if d == -1 else d for d in target)


def _position(block: Block) -> dict[Operation, int]:
    return {op: i for i, op in enumerate(block.ops)}


def _erase(op: Operation) -> None:
    op.detach()
    op.erase()


def _is(v: SSAValue, name: str) -> Operation | None:
    op = v.owner
    return op if isinstance(op, Operation) and op.name == name else None


def _floats(*vs: SSAValue) -> bool:
    return all(ttype(v).dtype in FLOATS for v in vs)


def _key(op: Operation) -> tuple[tuple[int, ...], bool]:
    a = attrs_of(op)
    return tuple(a["axes"]), bool(a["keepdims"])


def _moments(gm: GraphModule, block: Block) -> None:
    for v_op in [op for op in block.ops if op.name == "tg.reduce_mean"]:
        d_op = _is(v_op.operands[0], "tg.squared_difference")
        if d_op is None or v_op.parent is None:
            continue
        for x, m in ((d_op.operands[0], d_op.operands[1]), (d_op.operands[1], d_op.operands[0])):
            m_op = _is(m, "tg.reduce_mean")
            if m_op is not None and m_op.operands[0] is x and _key(m_op) == _key(v_op):
                break
        else:
            continue
        axes, keepdims = _key(m_op)
        rank = len(ttype(x).shape or ())
        if not _floats(x) or not rank or not (keepdims or sorted(
                a % rank for a in axes) == list(range(len(axes)))):
            continue  # without keepdims the mean only broadcasts back over leading axes
        others = [u.operation for u in d_op.results[0].uses if u.operation is not v_op]
        if any(u.name != "tg.shape" for u in others):
            continue
        stats = new_op(gm, "moments", [x], {"axes": list(axes), "keepdims": keepdims},
                       loc=m_op.location)
        block.insert_op_before(stats, m_op)
        for u in others:
            u.operands[0] = x
        replace(v_op, [stats.results[1]])
        _erase(d_op)
        replace(m_op, [stats.results[0]])


def _pair(sums: dict[tuple[SSAValue, tuple[int, ...], bool], Operation], t_op: Operation
          ) -> tuple[Operation, Operation, SSAValue, SSAValue] | None:
    """``(mul, reduce_sum(a), a, b)`` if ``t_op`` is ``reduce_sum(mul(a, b))`` (the ``mul``
    used only there) and ``reduce_sum(a)`` over the same axes is in ``sums``."""
    p_op = _is(t_op.operands[0], "tg.mul")
    if p_op is None or single_use(p_op.results[0]) is not t_op:
        return None
    key = _key(t_op)
    for a, b in ((p_op.operands[0], p_op.operands[1]), (p_op.operands[1], p_op.operands[0])):
        s_op = sums.get((a, *key))
        if s_op is not None and s_op is not t_op:
            return p_op, s_op, a, b
    return None


def _sums(gm: GraphModule, block: Block, shapes: Shapes) -> None:
    where = _position(block)
    sums: dict[tuple[SSAValue, tuple[int, ...], bool], Operation] = {}
    for op in block.ops:
        if op.name == "tg.reduce_sum" and _floats(op.operands[0]):
            sums.setdefault((op.operands[0], *_key(op)), op)
    for t_op in [op for op in block.ops if op.name == "tg.reduce_sum"]:
        found = _pair(sums, t_op) if t_op.parent is not None else None
        if found is None:
            continue
        p_op, s_op, a, b = found
        if (not _floats(a, b) or ttype(a).dtype != ttype(b).dtype
                or shapes.get(p_op.results[0]) != shapes.get(a)):
            continue
        first = min(s_op, p_op, key=where.__getitem__)
        if any(isinstance(v.owner, Operation) and where.get(v.owner, -1) >= where[first]
               for v in (a, b)):
            continue
        axes, keepdims = _key(t_op)
        stats = new_op(gm, "sum_and_dot", [a, b], {"axes": list(axes), "keepdims": keepdims},
                       loc=t_op.location)
        block.insert_op_before(stats, first)
        replace(t_op, [stats.results[1]])
        _erase(p_op)
        replace(s_op, [stats.results[0]])
        del sums[(a, axes, keepdims)]
        _relu_into_sums(gm, block, stats, shapes)
        where = _position(block)


def _relu_into_sums(gm: GraphModule, block: Block, stats: Operation, shapes: Shapes) -> None:
    """``g = relu_grad(dy, y)``; ``sum_and_dot(g, b)`` -> ``relu_grad_sums(dy, y, b)`` (``g``'s
    other users read the new op's first result).  ``g`` may reach the sums through a reshape
    to its own shape; ``dy = broadcast_to(v, shape(y))`` with ``v`` one row per batch item
    (a global average pool's gradient: ``N x 1 x 1 x C``, the sums over ``N, H, W``) is read
    as ``v``, never materialised (the kernel broadcasts any other ``v`` that broadcasts)."""
    a, b = stats.operands
    r_op = _is(a, "tg.relu_grad")
    if r_op is None and (rs := _is(a, "tg.reshape")) is not None:
        inner = rs.operands[0]
        if shapes.get(inner) is not None and shapes.get(inner) == shapes.get(a):
            r_op = _is(inner, "tg.relu_grad")
    if r_op is None:
        return
    dy, y = r_op.operands
    if ttype(y) != ttype(r_op.results[0]):
        return
    attrs = attrs_of(stats)
    extra: list[SSAValue] = []
    if ttype(dy) != ttype(y):
        bt = _is(dy, "tg.broadcast_to")
        if bt is None or not _per_item_of(shapes, bt, y, attrs["axes"]):
            return
        dy = bt.operands[0]
    elif (add := _is(dy, "tg.add")) is not None and single_use(dy) is r_op and all(
            ttype(v) == ttype(y) for v in add.operands):
        dy, extra = add.operands[0], [add.operands[1]]  # a residual block input's two branches
    where = _position(block)
    if isinstance(b.owner, Operation) and where.get(b.owner, len(where)) >= where[r_op]:
        return  # the new op takes relu_grad's place: b must be defined before it
    src = r_op.operands[0].owner
    fused = new_op(gm, "relu_grad_sums", [dy, y, b, *extra],
                   {"axes": list(attrs["axes"]), "keepdims": attrs["keepdims"]},
                   loc=r_op.location)
    block.insert_op_before(fused, r_op)
    replace(stats, fused.results[1:])
    replace(r_op, [fused.results[0]])
    if (isinstance(src, Operation) and src.name in ("tg.broadcast_to", "tg.add")
            and not src.results[0].uses):
        _erase(src)


def _second_dots(gm: GraphModule, block: Block, shapes: Shapes) -> None:
    """``g, s, t = relu_grad_sums(dy, y, b[, dy2])`` and ``t2 = reduce_sum(mul(g, b2))`` (same
    axes and keepdims, the ``mul`` used only there, ``b2`` of ``y``'s type and provably its
    shape, defined before the sums; ``g`` may reach the ``mul`` through a reshape to its own
    shape) -> ``g, s, t, t2 = relu_grad_sums2(dy, y, b, b2[, dy2])``: a second batch norm
    reading the same gradient (a residual stage's projection shortcut) sums its product in
    the same pass instead of materialising it."""
    for r_op in [op for op in block.ops if op.name == "tg.relu_grad_sums"]:
        g = r_op.results[0]
        key = _key(r_op)
        where = _position(block)
        y = r_op.operands[1]
        uses = list(g.uses)
        for use in list(uses):  # g reshaped to its own shape (TF's gradient of a residual add)
            rs = use.operation
            if rs.name == "tg.reshape" and shapes.get(rs.results[0]) == shapes.get(y):
                uses += list(rs.results[0].uses)
        for use in uses:
            p_op = use.operation
            if p_op.name != "tg.mul" or p_op.parent is not block:
                continue
            t_op = single_use(p_op.results[0])
            if t_op is None or t_op.name != "tg.reduce_sum" or _key(t_op) != key:
                continue
            b2 = p_op.operands[1 - use.index]
            if (p_op.operands[0] is p_op.operands[1] or not _floats(b2)
                    or ttype(b2) != ttype(g) or ttype(g) != ttype(y)
                    or shapes.get(b2) != shapes.get(y)
                    or (isinstance(b2.owner, Operation)
                        and where.get(b2.owner, len(where)) >= where[r_op])):
                continue
            dy, _, b, *extra = r_op.operands
            fused = new_op(gm, "relu_grad_sums2", [dy, y, b, b2, *extra], attrs_of(r_op),
                           loc=r_op.location)
            block.insert_op_before(fused, r_op)
            replace(t_op, [fused.results[3]])
            _erase(p_op)
            replace(r_op, list(fused.results[:3]))
            break


def _per_item_of(shapes: Shapes, bt: Operation, y: SSAValue, axes: Sequence[int]) -> bool:
    """Whether ``bt = broadcast_to(v, shape(y))`` broadcasts ``v`` to ``y``'s shape (the
    symbolic shapes say so) with ``v`` of ``y``'s rank, size 1 on axes ``1..k-1`` and ``y``'s
    trailing sizes (one row per batch item, or one row for all) for sums over ``axes`` =
    ``0..k-1``."""
    v = bt.operands[0]
    vs, ys = shapes.get(v), shapes.get(y)
    if (vs is None or ys is None or len(vs) != len(ys) or not _floats(v)
            or shapes.get(bt.results[0]) != ys):
        return False
    k = len(axes)
    if sorted(a % len(ys) for a in axes) != list(range(k)) or not 2 <= k < len(ys):
        return False
    return all(d == 1 for d in vs[1:k]) and vs[k:] == ys[k:]


def _broadcast_users(bt: Operation) -> Iterator[tuple[Operation, int]]:
    for use in list(bt.results[0].uses):
        yield use.operation, use.index


def _broadcasts(gm: GraphModule, block: Block, shapes: Shapes) -> None:
    work = [op for op in block.ops if op.name == "tg.broadcast_to"]
    while work:
        bt = work.pop()
        if bt.parent is None or not _floats(bt.results[0]):
            continue
        v, s = bt.operands
        vs = shapes.get(v)
        for u, i in _broadcast_users(bt):
            name = u.name[3:]
            if (name not in shapes.elementwise or len(u.results) != 1
                    or not _floats(*u.operands, u.results[0])):
                continue
            ins = [shapes.get(w) for w in u.operands]
            rest = [w for j, w in enumerate(ins) if j != i]
            swapped = ins[:i] + [vs] + ins[i + 1:]
            if vs is not None and shapes.broadcast([vs, *rest]) == vs:
                operands = [v if j == i else w for j, w in enumerate(u.operands)]
                inner = new_op(gm, name, operands, attrs_of(u), loc=u.location)
                block.insert_op_before(inner, u)
                shapes.merge(inner.results[0], vs)
                outer = new_op(gm, "broadcast_to", [inner.results[0], s], {}, loc=bt.location)
                block.insert_op_before(outer, u)
                shapes.of[outer.results[0]] = shapes.get(u.results[0])
                replace(u, [outer.results[0]])
                work.append(outer)
            elif shapes.broadcast(swapped) == shapes.get(u.results[0]) is not None:
                u.operands[i] = v
        if not bt.results[0].uses:
            _erase(bt)


def fuse_batch_stats(gm: GraphModule) -> GraphModule:
    """Run the pass in place."""
    for f in functions(gm):
        block = f.body.block
        _moments(gm, block)
        shapes = Shapes()
        for arg in block.args:
            assert isinstance(arg, BlockArgument)
            shapes.get(arg)
        for op in block.ops:
            shapes.visit(op)
        _sums(gm, block, shapes)
        _broadcasts(gm, block, shapes)
        for stats in [op for op in block.ops if op.name == "tg.sum_and_dot"]:
            _relu_into_sums(gm, block, stats, shapes)  # a broadcast_to only now next to it
        _second_dots(gm, block, shapes)
    return gm
