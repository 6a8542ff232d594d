"""Stream analysis (docs/executor.md): assigns the scheduling stream of every kernel of a function.

The analysis runs at BEF-writing time (inside ``mlir_to_bef`` in TFRT).  Its result decides
which ready kernels the executor runs inline and which it hands to other tasks, so the exact
stream ids matter for the print order of many tests (docs/executor.md).

Ops of one function body, for this module: the kernels ``0..n-1`` (program order), the return
(:data:`RETURN`) and the virtual root (:data:`ROOT`, the pseudo kernel's place).

* :func:`analyze_streams` computes a :class:`StreamAnalysis` (query API used by
  ``tfrt_opt -tfrt-print-stream``: stream id, stream cost, parent stream, child streams).
* :func:`assign_stream_ids` stores the ids in a Program (``Kernel.stream_id``,
  ``Function.root_stream_id``) and marks it ``streams_assigned``.
* :func:`simulate_order` is the single-threaded model of the executor's ReadyKernelQueue
  (docs/executor.md) over a finalized function; tests use it to check scheduling order.

Pure functions over plain data; no shared state, safe to call from any thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pytfrt.bef.program import Function, Program, ProgramError
from pytfrt.support import tfrt_revision
from pytfrt.support.function_kind import FunctionKind

RETURN = "return"
ROOT = "root"
CHAIN_TYPES = frozenset({"!tfrt.chain", "!hex.chain"})
MERGE_CHAINS = "tfrt.merge.chains"


@dataclass(frozen=True)
class OpStream:
    """Stream facts of one op (what ``-tfrt-print-stream`` prints)."""

    stream_id: int
    stream_cost: int
    parent_stream: int
    child_streams: tuple[int, ...] = ()

    def remark(self) -> str:
        """``stream id: <id>, stream cost: <c>, parent stream: <p>[, child streams: [..]]``."""
        text = (
            f"stream id: {self.stream_id}, stream cost: {self.stream_cost}, "
            f"parent stream: {self.parent_stream}"
        )
        if self.child_streams:
            text += ", child streams: [" + ", ".join(map(str, self.child_streams)) + "]"
        return text


@dataclass
class StreamAnalysis:
    """The result of :func:`analyze_streams` for one function.

    ``kernels[k]`` describes kernel ``k``; ``return_op`` the ``tfrt.return``; ``root`` the
    function itself (the root / pseudo kernel).  ``max_cost`` is the largest cost from root
    (what TFRT logs), ``threshold`` the threshold actually used.
    """

    kernels: list[OpStream]
    return_op: OpStream
    root: OpStream
    max_cost: int
    threshold: int
    cost_from_root_mode: bool

    def op(self, which: int | str) -> OpStream:
        """Facts of kernel index ``which``, or of :data:`RETURN` / :data:`ROOT`."""
        if which == RETURN:
            return self.return_op
        if which == ROOT:
            return self.root
        assert isinstance(which, int)
        return self.kernels[which]


@dataclass
class _Streams:
    """Union-find over streams; a merged stream keeps the id of the stream merged into."""

    ids: list[int] = field(default_factory=list)
    cost: list[int] = field(default_factory=list)
    has_return: list[bool] = field(default_factory=list)
    up: list[int] = field(default_factory=list)
    members: list[list[int]] = field(default_factory=list)

    def new(self, op: int, cost: int, is_return: bool) -> int:
        handle = len(self.ids)
        self.ids.append(handle)
        self.cost.append(cost)
        self.has_return.append(is_return)
        self.up.append(handle)
        self.members.append([op])
        return handle

    def find(self, s: int) -> int:
        root = s
        while self.up[root] != root:
            root = self.up[root]
        while self.up[s] != root:
            self.up[s], s = root, self.up[s]
        return root

    def merge(self, src: int, dst: int) -> None:
        src, dst = self.find(src), self.find(dst)
        if src == dst:
            return
        self.up[src] = dst
        self.cost[dst] += self.cost[src]
        self.has_return[dst] = self.has_return[dst] or self.has_return[src]
        self.members[dst].extend(self.members[src])
        self.members[src] = []


def analyze_streams(fn: Function) -> StreamAnalysis:
    """Run stream analysis (docs/executor.md) on a non-native function.

    Inputs: ``Kernel.cost`` (``_tfrt_cost``; must be > 0 when set), kernel names
    (``tfrt.merge.chains`` costs 1), ``Function.register_types`` (chain operands are not side
    uses), ``Function.cost_threshold``, ``upper_cost_threshold`` (a stream stops growing
    when the next op would take it past this cost; the op starts a new stream) and
    ``merge_inter_dependent_streams``.  Raises
    :class:`ProgramError` for an invalid cost or an undefined operand.
    """
    n = len(fn.kernels)
    ret, root = n, n + 1
    configured = fn.cost_threshold
    upper = fn.upper_cost_threshold
    unit = configured if configured > 0 else 1
    cost = [0] * (n + 2)
    for k, kern in enumerate(fn.kernels):
        if kern.cost is not None:
            if kern.cost <= 0:
                raise ProgramError(f"kernel {k} ({kern.name}) has non-positive cost {kern.cost}")
            cost[k] = kern.cost
        else:
            cost[k] = 1 if kern.name == MERGE_CHAINS else unit
    cost[ret] = cost[root] = 1

    definer: dict[int, int] = {a: root for a in range(fn.num_arguments)}
    for k, kern in enumerate(fn.kernels):
        for r in kern.results:
            definer[r] = k
    types = fn.register_types

    # Forward pass: scheduled parent = the operand definer with the largest cost from root.
    cfr = [0] * (n + 2)
    cfr[root] = 1
    children: list[list[int]] = [[] for _ in range(n + 2)]
    side_uses: list[set[int]] = [set() for _ in range(n + 2)]
    max_cost = 1
    for op in range(n + 1):
        operands = fn.kernels[op].operands if op < n else fn.return_registers
        if not operands:
            parent = root
            cfr[op] = cost[op]
        else:
            parent = -1
            for r in operands:
                if r not in definer:
                    raise ProgramError(f"function '{fn.name}': register {r} is never defined")
                d = definer[r]
                if parent < 0 or cfr[d] > cfr[parent]:
                    parent = d
                if r >= len(types) or types[r] not in CHAIN_TYPES:
                    side_uses[d].add(op)
            side_uses[parent].discard(op)
            cfr[op] = cost[op] + cfr[parent]
        children[parent].append(op)
        max_cost = max(max_cost, cfr[op])
    threshold, cfr_mode = configured, False
    if configured <= 0:
        threshold, cfr_mode = max_cost, True

    # Backward pass: reverse program order, the root last.
    st = _Streams()
    op_stream = [0] * (n + 2)
    parent_op: dict[int, int] = {}
    child_ids: list[list[int]] = [[] for _ in range(n + 2)]

    def scost(s: int | None) -> int:
        return 0 if s is None else st.cost[st.find(s)]

    # The stream holding the return stays with its parent op, so the root's stream holds the
    # return (TFRT's main branch).  TFRT de22adc4 did so only for a return with operands: one
    # without is on no data path, its one-op stream an ordinary child of the root, and the
    # root joined the costliest child stream (docs/executor.md; TFRT's lifetimes.mlir of each
    # revision observes it through the ready order).
    return_has_operands = bool(fn.return_registers) or tfrt_revision.is_main()
    for x in [*range(n, -1, -1), root]:
        if not children[x]:
            op_stream[x] = st.new(x, cost[x], x == ret and return_has_operands)
            continue

        def above(a: int | None, b: int | None, x: int = x) -> bool:
            if cfr_mode:
                return cfr[x] + scost(a) + scost(b) >= threshold
            return scost(a) >= threshold

        child_streams = list(dict.fromkeys(st.find(op_stream[c]) for c in children[x]))
        if fn.merge_inter_dependent_streams:
            _merge_inter_dependent(st, child_streams, side_uses, threshold)
            child_streams = list(dict.fromkeys(st.find(c) for c in child_streams))
        last_merged: int | None = None
        best: int | None = None
        best_cost = 0
        with_return: int | None = None
        for c in child_streams:
            if above(c, None):
                candidate = c
            else:
                if last_merged is None or above(last_merged, c):
                    last_merged = c
                else:
                    st.merge(c, last_merged)
                candidate = st.find(last_merged)
            if best is None or st.cost[candidate] > best_cost:
                best, best_cost = candidate, st.cost[candidate]
            if st.has_return[candidate]:
                with_return = candidate
        target_handle = with_return if with_return is not None else best
        assert target_handle is not None
        target = st.find(target_handle)
        if 0 < upper < st.cost[target] + cost[x]:
            # The stream is full: x starts a new one, parent of every child stream.
            target = st.new(x, cost[x], False)
        else:
            st.cost[target] += cost[x]
            st.members[target].append(x)
        op_stream[x] = target
        if not cfr_mode and last_merged is not None:
            lm = st.find(last_merged)
            if lm != target and st.cost[lm] < threshold:
                st.merge(lm, target)
        target = st.find(target)
        for c in dict.fromkeys(st.find(c) for c in child_streams):
            if c != target:
                parent_op[c] = x
                child_ids[x].append(st.ids[c])

    def facts(op: int) -> OpStream:
        s = st.find(op_stream[op])
        p = parent_op.get(s)
        pid = -1 if p is None else st.ids[st.find(op_stream[p])]
        return OpStream(st.ids[s], st.cost[s], pid, tuple(child_ids[op]))

    return StreamAnalysis(
        kernels=[facts(k) for k in range(n)],
        return_op=facts(ret),
        root=facts(root),
        max_cost=max_cost,
        threshold=threshold,
        cost_from_root_mode=cfr_mode,
    )


def _merge_inter_dependent(
    st: _Streams, child_streams: list[int], side_uses: list[set[int]], threshold: int
) -> None:
    """Merge child streams linked by non-chain side uses while the merged one is cheap."""
    for i, a in enumerate(child_streams):
        for b in child_streams[i + 1 :]:
            ra, rb = st.find(a), st.find(b)
            if ra == rb or st.cost[rb] >= threshold:
                continue
            members_b = set(st.members[rb])
            members_a = set(st.members[ra])
            linked = any(side_uses[m] & members_b for m in members_a) or any(
                side_uses[m] & members_a for m in members_b
            )
            if linked:
                st.merge(rb, ra)


def assign_stream_ids(program: Program) -> Program:
    """Run :func:`analyze_streams` on every non-native function and store the stream ids.

    Sets ``Kernel.stream_id`` and ``Function.root_stream_id`` and marks the program
    ``streams_assigned``.  Returns ``program``.
    """
    for fn in program.functions:
        if fn.kind is FunctionKind.NATIVE:
            continue
        analysis = analyze_streams(fn)
        for kern, facts in zip(fn.kernels, analysis.kernels, strict=True):
            kern.stream_id = facts.stream_id
        fn.root_stream_id = analysis.root.stream_id
    program.streams_assigned = True
    return program


def _partition_tail(items: list[int], keep_front: Callable[[int], bool]) -> int:
    """libstdc++ ``std::partition`` (bidirectional): returns the split point, in place."""
    first, last = 0, len(items)
    while True:
        while True:
            if first == last:
                return first
            if keep_front(items[first]):
                first += 1
            else:
                break
        last -= 1
        while True:
            if first == last:
                return first
            if not keep_front(items[last]):
                last -= 1
            else:
                break
        items[first], items[last] = items[last], items[first]
        first += 1


def _other_stream(streams: list[int], stream: int) -> Callable[[int], bool]:
    return lambda k: streams[k] != stream


def simulate_order(fn: Function) -> list[int]:
    """The order in which the executor runs the kernels of ``fn`` (docs/executor.md).

    Single-threaded work queue, every kernel completes synchronously; tasks enqueued for other
    streams run in FIFO order after the initial call returns.  ``fn`` must be finalized and
    have stream ids.  Returns kernel indices (0-based into ``fn.kernels``).
    """
    pending = [max(1, len(k.operands)) for k in fn.kernels]
    streams = [k.stream_id for k in fn.kernels]
    order: list[int] = []
    tasks: deque[tuple[int, list[int]]] = deque()

    def decrement(users: list[int], stream: int, inline: list[int], outline: list[int]) -> None:
        for u in users:
            pending[u] -= 1
            if pending[u] == 0:
                (inline if streams[u] == stream else outline).append(u)

    def process(stream: int, inline: list[int], outline: list[int]) -> None:
        while True:
            if not inline:
                if not outline:
                    return
                stream = streams[outline[0]]
                cut = _partition_tail(outline, _other_stream(streams, stream))
                inline.extend(outline[cut:])
                del outline[cut:]
            if outline:
                outline.sort(key=lambda k: streams[k])
                start = 0
                for i in range(1, len(outline) + 1):
                    if i == len(outline) or streams[outline[i]] != streams[outline[start]]:
                        tasks.append((streams[outline[start]], outline[start:i]))
                        start = i
                outline.clear()
            k = inline.pop()
            order.append(k)
            for users in fn.used_by[k]:
                decrement(users, stream, inline, outline)

    inline: list[int] = []
    outline: list[int] = []
    for users in fn.pseudo_used_by:
        decrement(users, fn.root_stream_id, inline, outline)
    process(fn.root_stream_id, inline, outline)
    while tasks:
        stream, group = tasks.popleft()
        process(stream, list(group), [])
    return order
