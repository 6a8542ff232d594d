"""Per-call buffer arenas: where planned activation buffers live between calls.

The ``tg.<op>.buf`` kernels (``pytfrt.backends.cpu.graph_kernels``) and a ``CompiledModel``'s
generated call function (``pytfrt.model``) inline :meth:`Arena.run`.
``-tg-plan-buffers`` gives ops a *slot* (shared by values whose lifetimes do not overlap, or
in place with a dying operand for elementwise ops) and a *site* (the op's own number).  At run
time each call of a model takes an :class:`Arena` from the model's pool, so concurrent calls
never share one.  :meth:`Arena.run` calls an op's compute function with ``out=`` the slot's
buffer when the op's input shapes are the ones it saw last time (so its output shape is
known) and the buffer has that shape and dtype; otherwise it computes without ``out`` and keeps
the result as the slot's buffer.  In the steady state (same input shapes) no call allocates a
new result buffer for a planned op.

Kernels make their results with :func:`empty` where vector code reads them: NumPy starts a
large array's data 16 bytes past a 64-byte boundary (glibc's ``mmap`` chunks), so every
AVX-512 load or store of a 16-channel NHWC block crossed two cache lines (one depthwise layer
15-35% slower on one thread than on aligned buffers; MobileNetV3-small's call 1.81 -> 1.71 ms,
docs/benchmarks.md).  :meth:`Arena.keep` takes such an array as a slot buffer (it owns its
memory) although its ``base`` is the over-allocated block.

Thread-safety: an arena is used by one call at a time (the pool hands it out); :func:`empty`
and :func:`owns` may be called from any thread.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

ALIGNMENT = 64
"""Bytes to whose multiple :func:`empty` aligns an array's data (a cache line, a 512-bit
vector)."""
_made: dict[int, weakref.ref[np.ndarray]] = {}
"""``id`` -> the arrays :func:`empty` returned that are still alive."""


def empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """A new uninitialised C-contiguous array of ``shape`` and ``dtype`` whose data starts on
    an :data:`ALIGNMENT`-byte boundary (``np.empty`` over-allocated by that much, then
    offset); :meth:`Arena.keep` keeps it as a slot buffer like a plain ``np.empty``."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    return _aligned(np.empty(nbytes + ALIGNMENT, np.uint8), shape, dt)


def _aligned(raw: np.ndarray, shape: Sequence[int], dt: np.dtype, at: int = 0) -> np.ndarray:
    """The array of ``shape`` over the uint8 block ``raw`` (its ``base``) starting ``at``
    bytes (a multiple of :data:`ALIGNMENT`) past ``raw``'s first aligned byte, recorded as one
    :func:`owns` accepts."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    off = -raw.ctypes.data % ALIGNMENT + at
    a = raw[off:off + nbytes].view(dt).reshape(shape)
    key = id(a)

    def forget(_: object) -> None:
        _made.pop(key, None)

    _made[key] = weakref.ref(a, forget)
    return a


class Recycler:
    """Large result buffers of one kernel, reused once nothing views them any more.

    A model's result belongs to its caller, so a kernel whose result leaves the model (a
    language model's ``[sequence, vocabulary]`` logits, 12.8 MB for GPT-2 at 64 tokens)
    allocates it on every call -- and glibc returns such blocks to the system when they are
    freed, so the next call's first writes fault its pages in again (~4% of GPT-2's LM-head
    product on one thread, docs/benchmarks.md).  :meth:`empty` hands out an
    :func:`empty`-like array over a block it keeps per ``(shape, dtype)``: the same block
    again when every array handed out from it is gone (the block's reference count says so:
    NumPy makes every view's ``base`` the block itself), a new block otherwise (the caller
    still holds the last result).  Arrays smaller than :data:`RECYCLE_MIN_BYTES` are plain
    :func:`empty` ones.  Thread-safe (a lock around the check and the hand-out)."""

    __slots__ = ("_blocks", "_lock", "_min_bytes")

    def __init__(self) -> None:
        self._blocks: dict[tuple[tuple[int, ...], np.dtype], np.ndarray] = {}
        self._lock = threading.Lock()
        self._min_bytes = RECYCLE_MIN_BYTES

    def empty(self, shape: Sequence[int], dtype: Any) -> np.ndarray:
        """An uninitialised aligned C-contiguous array (see the class docstring)."""
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if nbytes < self._min_bytes:
            return empty(shape, dt)
        key = (tuple(shape), dt)
        with self._lock:
            raw = self._blocks.get(key)
            # references when free: the dict's, ``raw``'s and getrefcount's argument
            if raw is None or sys.getrefcount(raw) > 3:
                raw = np.empty(nbytes + ALIGNMENT, np.uint8)
                self._blocks[key] = raw
            return _aligned(raw, shape, dt)


RECYCLE_MIN_BYTES = 1 << 22
"""Smallest result (4 MB) a :class:`Recycler` keeps a block for (read when the recycler is
made: when a model is compiled)."""


def owns(r: np.ndarray) -> bool:
    """Whether ``r`` owns its memory: ``base`` is ``None``, or ``r`` is an array :func:`empty`
    returned (not a view of one, nor of any other array: a kernel writing into such a buffer
    would clobber the array it views)."""
    if r.base is None:
        return True
    ref = _made.get(id(r))
    return ref is not None and ref() is r


class SlotPlan:
    """When each slot of a model's arena holds a live value: ``slot -> [(first, last), ...]``,
    the op positions of ``@main`` from each value's definition to its last use
    (``-tg-plan-buffers``'s ``tg.buffer = [slot, site, first, last]``).  Two slots
    *conflict* when some value of one is alive at an op where some value of the other is (the
    op that reads one and writes the other included); only conflicting slots need distinct
    bytes.  Immutable after construction; thread-safe."""

    __slots__ = ("lives", "_conflicts")

    def __init__(self, lives: dict[int, list[tuple[int, int]]]) -> None:
        self.lives = {s: sorted(v) for s, v in lives.items()}
        self._conflicts: dict[int, frozenset[int]] | None = None

    def conflicts(self) -> dict[int, frozenset[int]]:
        """``slot -> the slots it conflicts with`` (computed once; a benign race computes it
        twice)."""
        if self._conflicts is None:
            spans = sorted((a, b, s) for s, v in self.lives.items() for a, b in v)
            found: dict[int, set[int]] = {s: set() for s in self.lives}
            for i, (_a, b, s) in enumerate(spans):  # spans sorted by start: sweep forwards
                for a2, _b2, s2 in spans[i + 1:]:
                    if a2 > b:
                        break
                    if s2 != s:
                        found[s].add(s2)
                        found[s2].add(s)
            self._conflicts = {s: frozenset(v) for s, v in found.items()}
        return self._conflicts

    def place(self, sizes: dict[int, int]) -> tuple[dict[int, int], int]:
        """``(slot -> byte offset, total bytes)`` for slots of these sizes: largest first, each
        at the lowest :data:`ALIGNMENT`-aligned offset where it overlaps no placed slot it
        conflicts with (the greedy-by-size placement of TensorFlow Lite's arena planner)."""
        conflicts = self.conflicts()
        offsets: dict[int, int] = {}
        placed: list[tuple[int, int, int]] = []  # (start, end, slot)
        for s in sorted(sizes, key=lambda s: (-sizes[s], s)):
            size = -(-sizes[s] // ALIGNMENT) * ALIGNMENT
            others = conflicts.get(s, frozenset())
            off = 0
            for start, end, _t in sorted(p for p in placed if p[2] in others):
                if off + size <= start:
                    break
                off = max(off, end)
            offsets[s] = off
            placed.append((off, off + size, s))
        return offsets, max((end for _s, end, _t in placed), default=0)


class Arena:
    """Slot buffers and, per site, the last (input shapes, output shape, dtype).

    With a :class:`SlotPlan` the slots share one block: :meth:`keep` notes a fresh result's
    shape and dtype for its slot without keeping the result (so a call that keeps holds no
    more memory than its live values), and :meth:`pack`, at the end of such a call, places
    every slot in a new block by the plan -- slots whose values are never alive together
    share bytes -- and makes each slot's buffer a view of it.  The next call with the same
    shapes writes every planned result into the block (MobileNetV3-small's 26 slots: 5.3 MB
    as separate buffers, docs/benchmarks.md has the packed size).  A slot whose sites see
    different shapes in one call, or holds object arrays (strings), is left out of the block
    (its buffer is the last result, as without a plan)."""

    __slots__ = ("slots", "memo", "steady", "plan", "pending", "loose")

    def __init__(self, plan: SlotPlan | None = None) -> None:
        self.slots: dict[int, np.ndarray] = {}
        self.memo: dict[int, tuple[Any, tuple[int, ...], np.dtype]] = {}
        self.plan = plan
        self.pending: dict[int, tuple[tuple[int, ...], np.dtype]] = {}
        """Planned slots given a new shape in this call: packed at its end."""
        self.loose: set[int] = set()
        """Planned slots whose sites disagree on the shape in one call, or that hold object
        arrays: kept as without a plan."""
        self.steady: tuple[Any, ...] | None = None
        """The model inputs' shapes of this arena's last call if it completed without keeping
        a new buffer (every planned kernel found its buffer): a generated call with the same
        input shapes may skip the buffer tests of kernels whose operands' shapes follow from
        the inputs' (``pytfrt.model``'s ``_render_kernel``); ``None`` otherwise."""

    def run(self, slot: int, site: int, fn: Callable[..., Any], arrays: list[Any],
            kwargs: dict[str, Any]) -> Any:
        """``fn(*arrays, **kwargs, out=<slot buffer>)`` when safe, else without ``out``."""
        key = [getattr(a, "shape", None) for a in arrays]
        m = self.memo.get(site)
        if m is not None and m[0] == key:
            buf = self.slots.get(slot)
            if buf is not None and buf.shape == m[1] and buf.dtype == m[2]:
                return fn(*arrays, **kwargs, out=buf)
        r = fn(*arrays, **kwargs)
        self.keep(slot, site, key, r)
        return r

    def keep(self, slot: int, site: int, key: Any, r: Any) -> Any:
        """Remember ``r`` (a fresh result for inputs of shapes ``key``) as ``slot``'s buffer
        (if it is an array the op may write into next time) -- with a plan, its shape and
        dtype, for :meth:`pack`; returns ``r``."""
        if type(r) is np.ndarray and r.flags.c_contiguous and r.flags.writeable and owns(r):
            self.memo[site] = (key, r.shape, r.dtype)
            plan = self.plan
            if plan is None or slot in self.loose or slot not in plan.lives:
                self.slots[slot] = r
                return r
            if r.dtype.hasobject:  # references (strings): not bytes a block can hold
                self.loose.add(slot)
                self.pending.pop(slot, None)
                self.slots[slot] = r
                return r
            seen = self.pending.get(slot)
            if seen is not None and (seen[0] != r.shape or seen[1] != r.dtype):
                self.loose.add(slot)  # two shapes in one call: no place in the block
                del self.pending[slot]
                self.slots[slot] = r
                return r
            self.pending[slot] = (r.shape, r.dtype)
        return r

    def pack(self) -> None:
        """Give every planned slot a buffer in one new block (see the class docstring).  Called
        when a call has finished with :attr:`pending` slots: no value of the call is alive any
        more, and the old buffers are dropped before the block is made (its pages are touched
        only by the next call)."""
        plan = self.plan
        assert plan is not None
        shapes = {s: (b.shape, b.dtype) for s, b in self.slots.items()
                  if s in plan.lives and s not in self.loose}
        shapes.update(self.pending)
        self.pending.clear()
        for s in shapes:
            self.slots.pop(s, None)
        offsets, total = plan.place(
            {s: int(np.prod(shape, dtype=np.int64)) * dt.itemsize
             for s, (shape, dt) in shapes.items()})
        block = np.empty(total + ALIGNMENT, np.uint8)
        for s, (shape, dt) in shapes.items():
            self.slots[s] = _aligned(block, shape, dt, offsets[s])
