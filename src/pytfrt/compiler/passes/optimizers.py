"""``-tg-fuse-optimizer``: a Keras optimizer's per-variable update ops become one fused
update of all the variables (``tg.apply_adam``, ``tg.apply_momentum``;
:mod:`pytfrt.backends.cpu.optimizers`).

Keras 3 writes an optimizer step as ordinary graph ops, per variable (TF's ``ResourceApply*``
ops are not used).  Recognised, in one function body:

* **Adam** (``keras.optimizers.Adam``, and the Adam part of ``AdamW``)::

      m0 = read(M); assign_add(M, mul(sub(g, m0), c1))
      v0 = read(V); assign_add(V, mul(sub(s, v0), c2))     # s = square(g), or a given tensor
      assign_sub(W, div(mul(read(M), alpha), add(sqrt(read(V)), eps)))

* **SGD with momentum** (``keras.optimizers.SGD(momentum=...)``, not Nesterov)::

      m0 = read(M); assign(M, sub(mul(m0, mu), mul(g, lr))); assign_add(W, read(M))

(``mul``/``add`` operands in either order; ``c1``, ``c2``, ``eps``, ``mu`` scalar constants;
``alpha``, ``lr`` scalars.)  Updates of one kind whose constants agree and whose ``alpha``
(``lr``) are the same expression -- the same ops on the same constants and variable reads, with
no write to those variables in between -- form a group: one fused op, placed where the last
of them assigned its variable, takes the first one's ``alpha`` and every gradient; the
matched ops and the now unused scalar expressions (including their variable reads) are
removed.

Conditions (otherwise the ops stay as they are): every intermediate value has the one use in
the pattern; the slots ``M``, ``V`` are touched by no other op in the module (the fused kernel
updates them in place); no op reads or writes ``W`` between the update's first op and the
fused op; floating-point variables, gradients of the variable's dtype and rank.  The
arithmetic is the pattern's own, op by op in the variable's dtype, so results are unchanged.
Runs after ``-tg-fuse-batch-stats`` and before ``-tg-fuse-elementwise``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.ops import get_opdef
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    functions,
    new_op,
    producer,
    scalar_const,
    single_use,
    ttype,
)
from pytfrt.compiler.types import np_dtype

FLOATS = ("f32", "f64")
_STATE = ("tg.read_variable", "tg.assign_variable", "tg.assign_add_variable",
          "tg.assign_sub_variable")


@dataclass
class _Update:
    """One variable's matched update."""

    kind: str  # "adam" or "momentum"
    roots: list[Operation]  # the assigns (removed with what only they use)
    ops: list[Operation]  # every matched op
    variable: str
    slots: list[str]
    grad: SSAValue
    square: SSAValue | None  # Adam's ``s`` when it is not ``square(grad)``
    scalar: SSAValue  # alpha / lr
    consts: tuple[float, ...]
    slot_read: Operation = field(default=None)  # type: ignore[assignment]
    key: Any = None
    first: int = 0
    last: int = 0
    reads: set[str] = field(default_factory=set)


def _only(v: SSAValue, name: str, user: Operation) -> Operation | None:
    """The ``name`` op defining ``v``, if ``user`` is its only user."""
    op = producer(v, name)
    return op if op is not None and single_use(v) is user else None


def _tree(v: SSAValue, user: Operation, name: str, lhs: str, rhs: str
          ) -> tuple[Operation, Operation, Operation] | None:
    """``name(lhs(...), rhs(...))`` defining ``v``, each op used only by the next."""
    op = _only(v, name, user)
    if op is None:
        return None
    a, b = _only(op.operands[0], lhs, op), _only(op.operands[1], rhs, op)
    return None if a is None or b is None else (op, a, b)


def _var_read(v: SSAValue, user: Operation) -> tuple[Operation, str] | None:
    op = _only(v, "tg.read_variable", user)
    return None if op is None else (op, attrs_of(op)["name"])


def _pair(gm: GraphModule, op: Operation, want_const: bool
          ) -> Iterator[tuple[SSAValue, SSAValue]]:
    """``op``'s operands as (other, scalar) in both orders (scalar: a constant if
    ``want_const``, else a rank-0 value)."""
    a, b = op.operands
    for x, y in ((a, b), (b, a)):
        t = ttype(y)
        if (want_const and scalar_const(gm, y) is not None) or (
                not want_const and t.shape == () and scalar_const(gm, y) is None):
            yield x, y


def _slot_update(gm: GraphModule, assign: Operation, sub_first: bool
                 ) -> tuple[list[Operation], SSAValue, Operation, float] | None:
    """``assign_add(M, mul(sub(t, read(M)), c))`` -> (ops, t, the read, c)."""
    mul = _only(assign.operands[0], "tg.mul", assign)
    if mul is None:
        return None
    for x, c in _pair(gm, mul, True):
        sub = _only(x, "tg.sub", mul)
        if sub is None:
            continue
        t, r = sub.operands
        read = _var_read(r, sub)
        if read is None or read[1] != attrs_of(assign)["name"]:
            continue
        value = scalar_const(gm, c)
        assert value is not None
        return [assign, mul, sub, read[0]], t, read[0], value
    return None


class _Matcher:
    def __init__(self, gm: GraphModule, block: Block) -> None:
        self.gm = gm
        self.block = block
        self.where = {op: i for i, op in enumerate(block.ops)}
        self.state: dict[str, list[Operation]] = {}
        for f in functions(gm):
            for op in f.walk():
                if op.name in _STATE:
                    self.state.setdefault(attrs_of(op)["name"], []).append(op)

    def _slot_ops(self, name: str, matched: list[Operation]) -> bool:
        """Whether the matched ops are all the state ops of slot ``name``, in program order
        read, assign, read."""
        ops = self.state.get(name, [])
        return (len(ops) == 3 and set(ops) == set(matched)
                and all(op in self.where for op in ops)
                and [op.name for op in sorted(ops, key=self.where.__getitem__)]
                == ["tg.read_variable", matched[1].name, "tg.read_variable"])

    def adam(self, assign: Operation) -> _Update | None:
        tree = _tree(assign.operands[0], assign, "tg.div", "tg.mul", "tg.add")
        if tree is None:
            return None
        div, mul, add = tree
        found = next(((r, a) for x, a in _pair(self.gm, mul, False)
                      if (r := _var_read(x, mul)) is not None), None)
        if found is None:
            return None
        mread, alpha = found
        for x, e in _pair(self.gm, add, True):
            sqrt = _only(x, "tg.sqrt", add)
            vread = None if sqrt is None else _var_read(sqrt.operands[0], sqrt)
            if vread is not None:
                eps = scalar_const(self.gm, e)
                break
        else:
            return None
        assert sqrt is not None and eps is not None
        (m_read, m_name), (v_read, v_name) = mread, vread
        m_assign = self._assign_before(m_name, m_read, "tg.assign_add_variable")
        v_assign = self._assign_before(v_name, v_read, "tg.assign_add_variable")
        if m_assign is None or v_assign is None:
            return None
        mu = _slot_update(self.gm, m_assign, True)
        vu = _slot_update(self.gm, v_assign, True)
        if mu is None or vu is None:
            return None
        m_ops, g, m_read0, c1 = mu
        v_ops, s, v_read0, c2 = vu
        if not (self._slot_ops(m_name, [m_read0, m_assign, m_read])
                and self._slot_ops(v_name, [v_read0, v_assign, v_read])):
            return None
        sq = producer(s, "tg.square")
        square: SSAValue | None = None if sq is not None and sq.operands[0] is g else s
        ops = [assign, div, mul, add, sqrt, m_read, v_read, *m_ops, *v_ops]
        return _Update("adam", [assign, m_assign, v_assign], ops, attrs_of(assign)["name"],
                       [m_name, v_name], g, square, alpha, (c1, c2, eps), m_read0)

    def momentum(self, assign: Operation) -> _Update | None:
        got = _var_read(assign.operands[0], assign)
        if got is None:
            return None
        m_read, m_name = got
        m_assign = self._assign_before(m_name, m_read, "tg.assign_variable")
        if m_assign is None:
            return None
        tree = _tree(m_assign.operands[0], m_assign, "tg.sub", "tg.mul", "tg.mul")
        if tree is None:
            return None
        sub, decay, step = tree
        for x, c in _pair(self.gm, decay, True):
            old = _var_read(x, decay)
            if old is not None and old[1] == m_name:
                mu = scalar_const(self.gm, c)
                break
        else:
            return None
        pairs = list(_pair(self.gm, step, False))
        if len(pairs) != 1:
            return None
        g, lr = pairs[0]
        if not self._slot_ops(m_name, [old[0], m_assign, m_read]):
            return None
        assert mu is not None
        ops = [assign, m_read, m_assign, sub, decay, step, old[0]]
        return _Update("momentum", [assign, m_assign], ops, attrs_of(assign)["name"],
                       [m_name], g, None, lr, (mu,), old[0])

    def _assign_before(self, name: str, read: Operation, kind: str) -> Operation | None:
        ops = [op for op in self.state.get(name, []) if op in self.where
               and self.where[op] < self.where[read]]
        if not ops:
            return None
        last = max(ops, key=self.where.__getitem__)
        return last if last.name == kind else None

    def key(self, v: SSAValue, reads: set[str]) -> Any:
        """A structural key of a scalar expression (equal keys: the same value, given no
        write in between to the variables it reads, collected in ``reads``)."""
        if isinstance(v, BlockArgument):
            return ("arg", v.index)
        op = v.owner
        assert isinstance(op, Operation)
        if op.name == "tg.constant":
            c = const_value(self.gm, v)
            return ("const", None if c is None else (c.dtype.str, c.tobytes()), id(op)
                    if c is None else 0)
        if op.name == "tg.read_variable":
            name = attrs_of(op)["name"]
            reads.add(name)
            return ("read", name)
        if get_opdef(op.name).stateful or op.regions or len(op.results) != 1:
            return ("value", id(v))
        a = attrs_of(op)
        return (op.name, tuple(sorted((k, repr(x)) for k, x in a.items())),
                tuple(self.key(x, reads) for x in op.operands))

    def well_typed(self, u: _Update) -> bool:
        """Floating point, and the gradients of the slots' (the variable's) dtype and rank;
        checked against the variable's initial value too when the module has it."""
        slot = ttype(u.slot_read.results[0])
        dt = slot.dtype
        arr = self.gm.weights.get(u.variable) if u.variable in self.gm.variables else None
        if dt not in FLOATS or (arr is not None and (
                np.asarray(arr).dtype != np.dtype(np_dtype(dt)) or np.ndim(arr) != slot.rank)):
            return False
        vals = [u.grad, u.scalar] + ([u.square] if u.square is not None else [])
        return all(ttype(x).dtype == dt for x in vals) and ttype(u.grad).rank == slot.rank


def _erase_dead(roots: list[Operation]) -> None:
    """Erase ``roots`` (no results used) and, transitively, the producers of their operands
    left without uses that are pure or variable reads."""
    work = list(roots)
    while work:
        op = work.pop()
        if op.parent is None or any(r.uses for r in op.results):
            continue
        if op.name != "tg.read_variable" and op not in roots and (
                op.name.startswith("tg.") and get_opdef(op.name).stateful or op.regions):
            continue
        producers = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        op.detach()
        op.erase()
        work.extend(p for p in producers if p.name.startswith("tg."))


def _writes_between(m: _Matcher, names: set[str], lo: int, hi: int) -> bool:
    return any(op.name != "tg.read_variable" and (op not in m.where or lo <= m.where[op] <= hi)
               for name in names for op in m.state.get(name, []))


def _touched_between(m: _Matcher, u: _Update, hi: int) -> bool:
    for op in m.state.get(u.variable, []):
        if op not in u.ops and op in m.where and u.first <= m.where[op] <= hi:
            return True
    return any(op not in m.where for op in m.state.get(u.variable, []))


def _fuse_block(gm: GraphModule, block: Block) -> None:
    m = _Matcher(gm, block)
    updates: list[_Update] = []
    for op in list(block.ops):
        u = None
        if op.name == "tg.assign_sub_variable":
            u = m.adam(op)
        elif op.name == "tg.assign_add_variable":
            u = m.momentum(op)
        if u is None or not m.well_typed(u):
            continue
        u.key = (u.kind, u.consts, ttype(u.grad).dtype, m.key(u.scalar, u.reads))
        u.first = min(m.where[o] for o in u.ops)
        u.last = m.where[u.roots[0]]
        updates.append(u)
    groups: dict[Any, list[_Update]] = {}
    for u in updates:
        groups.setdefault(u.key, []).append(u)
    for group in groups.values():
        _fuse_group(gm, block, m, group)


def _fuse_group(gm: GraphModule, block: Block, m: _Matcher, group: list[_Update]) -> None:
    last = max(u.last for u in group)
    lo = min(u.first for u in group)
    # no write to what the scalar reads while the group runs; no other touch of a variable
    if _writes_between(m, group[0].reads, lo, last):
        return
    group = [u for u in group if not _touched_between(m, u, last)]
    if not group or len({u.variable for u in group}) != len(group):
        return
    first = group[0]
    names = [u.variable for u in group]
    if any("," in n for u in group for n in [u.variable, *u.slots]):
        return
    grads = [u.grad for u in group]
    extra = [u.square for u in group if u.square is not None]
    n = len(group)
    at = max(group, key=lambda u: u.last).roots[0]
    if first.kind == "adam":
        squares, k = [], 1 + n
        for u in group:
            squares.append(k if u.square is not None else -1)
            k += u.square is not None
        c1, c2, eps = first.consts
        fused = new_op(gm, "apply_adam", [first.scalar, *grads, *extra], {
            "variables": ",".join(names), "moments": ",".join(u.slots[0] for u in group),
            "velocities": ",".join(u.slots[1] for u in group), "one_minus_beta_1": c1,
            "one_minus_beta_2": c2, "epsilon": eps, "squares": squares}, loc=at.location)
    else:
        fused = new_op(gm, "apply_momentum", [first.scalar, *grads], {
            "variables": ",".join(names), "moments": ",".join(u.slots[0] for u in group),
            "momentum": first.consts[0]}, loc=at.location)
    block.insert_op_before(fused, at)
    for u in group:
        _erase_dead(u.roots)


def fuse_optimizer(gm: GraphModule) -> GraphModule:
    """The pass (see the module docstring); in place, returns ``gm``."""
    for f in functions(gm):
        _fuse_block(gm, f.body.block)
    return gm
