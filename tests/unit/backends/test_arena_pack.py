"""The arena's packed block (``SlotPlan``, ``Arena.pack``): slots whose values are alive at
the same op never share bytes, slots that are never alive together do, and a compiled model
whose slots are packed computes what NumPy computes across batch sizes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu.arena import ALIGNMENT, Arena, SlotPlan
from pytfrt.compiler import GraphBuilder, GraphModule
from pytfrt.compiler.api import compile_module


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    """Whether two slots' closed lifetime intervals meet (the definition, pair by pair)."""
    return any(x0 <= y1 and y0 <= x1 for x0, x1 in a for y0, y1 in b)


lives_strategy = st.dictionaries(
    st.integers(0, 15),
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6)).map(lambda t: (t[0], t[0] + t[1])),
             min_size=1, max_size=3),
    min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(lives=lives_strategy, data=st.data())
def test_place_never_overlaps_slots_alive_together(lives: dict[int, list[tuple[int, int]]],
                                                   data: st.DataObject) -> None:
    plan = SlotPlan(lives)
    conflicts = plan.conflicts()
    for s in lives:
        assert conflicts[s] == {t for t in lives if t != s and _overlap(lives[s], lives[t])}
    sizes = {s: data.draw(st.integers(1, 5000)) for s in lives}
    offsets, total = plan.place(sizes)
    assert set(offsets) == set(sizes)
    for s, off in offsets.items():
        assert off % ALIGNMENT == 0 and off + sizes[s] <= total
        for t in conflicts[s]:
            assert off + sizes[s] <= offsets[t] or offsets[t] + sizes[t] <= off, (s, t)
    aligned = [-(-n // ALIGNMENT) * ALIGNMENT for n in sizes.values()]
    assert total <= sum(aligned)
    # the block holds at least what is alive at the busiest op
    busiest = max(sum(sizes[s] for s in lives if any(a <= p <= b for a, b in lives[s]))
                  for p in range(40))
    assert total >= busiest


def test_slots_never_alive_together_share_bytes() -> None:
    plan = SlotPlan({0: [(0, 1)], 1: [(1, 2)], 2: [(2, 3)], 3: [(3, 4)]})
    offsets, total = plan.place({0: 1000, 1: 2000, 2: 1000, 3: 2000})
    # largest first, each at the lowest free offset: a chain needs two neighbours' bytes
    assert offsets == {1: 0, 3: 0, 0: 2048, 2: 2048} and total == 3072


def test_keep_with_a_plan_holds_no_result_and_pack_makes_views_of_one_block() -> None:
    arena = Arena(SlotPlan({0: [(0, 1)], 1: [(1, 2)], 2: [(2, 3)]}))
    r0, r1, r2 = np.ones((4, 8), np.float32), np.ones((8,), np.int64), np.ones((16,), np.float32)
    for slot, r in enumerate((r0, r1, r2)):
        assert arena.keep(slot, slot, [(4, 8)], r) is r
    assert arena.slots == {} and set(arena.pending) == {0, 1, 2}
    arena.pack()
    assert arena.pending == {}
    bufs = arena.slots
    assert {s: (b.shape, b.dtype) for s, b in bufs.items()} == {
        0: ((4, 8), np.float32), 1: ((8,), np.int64), 2: ((16,), np.float32)}
    assert len({id(b.base) for b in bufs.values()}) == 1
    assert all(b.ctypes.data % ALIGNMENT == 0 and b.flags.c_contiguous for b in bufs.values())
    # slots 0 and 2 never live together: they may share bytes; 0-1 and 1-2 must not
    for s, t in ((0, 1), (1, 2)):
        a, b = bufs[s], bufs[t]
        assert (a.ctypes.data + a.nbytes <= b.ctypes.data
                or b.ctypes.data + b.nbytes <= a.ctypes.data)


def test_a_slot_whose_sites_disagree_on_the_shape_stays_out_of_the_block() -> None:
    arena = Arena(SlotPlan({0: [(0, 1), (3, 4)], 1: [(1, 2)]}))
    a, b = np.ones((2, 4), np.float32), np.ones((3, 4), np.float32)
    arena.keep(0, 0, [], a)
    arena.keep(1, 1, [], np.ones(5, np.float32))
    arena.keep(0, 2, [], b)  # the same slot, another shape in the same call
    assert arena.loose == {0} and arena.slots[0] is b
    arena.pack()
    assert arena.slots[0] is b and arena.slots[1].shape == (5,)


def test_object_arrays_stay_out_of_the_block() -> None:
    arena = Arena(SlotPlan({0: [(0, 1)], 1: [(1, 2)]}))
    strings = np.array(["a", "bc"], dtype=object)
    arena.keep(0, 0, [], strings)
    arena.keep(1, 1, [], np.ones(3, np.float32))
    arena.pack()
    assert arena.loose == {0} and arena.slots[0] is strings
    assert arena.slots[1].shape == (3,) and arena.slots[1].base is not None


RNG = np.random.default_rng(11)
WS = [RNG.standard_normal(s).astype(np.float32) for s in ((16, 64), (64, 48), (48, 32),
                                                           (32, 24), (24, 8))]


def _chain() -> GraphModule:
    """A chain of matmuls and activations: every intermediate of another width (a slot of its
    own type), each dead two ops later."""
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("x", (None, 16), "f32")])
    (h,) = fn.arguments
    for i, w in enumerate(WS):
        h = fn.op("matmul", [h, fn.constant(w, name=f"w{i}")])
        h = fn.op("tanh" if i % 2 else "relu", [h])
    fn.returns([fn.op("softmax", [h], axis=-1)])
    return gb.finish()


def _chain_ref(x: np.ndarray) -> np.ndarray:
    h = x
    for i, w in enumerate(WS):
        h = h @ w
        h = np.tanh(h) if i % 2 else np.maximum(h, 0)
    e = np.exp(h - h.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_a_compiled_chain_packs_its_slots_and_matches_numpy() -> None:
    model = compile_module(_chain())
    xs = [RNG.standard_normal((n, 16)).astype(np.float32) for n in (3, 3, 3, 7, 7, 3, 1, 3)]
    outs = [model(x) for x in xs]
    for x, got in zip(xs, outs, strict=True):  # earlier results are not overwritten
        np.testing.assert_allclose(got, _chain_ref(x), rtol=1e-5, atol=1e-6)
    (arena,) = model._arenas
    bufs = list(arena.slots.values())
    assert len(bufs) >= 4 and not arena.pending and not arena.loose
    bases = {id(b.base) for b in bufs}
    assert len(bases) == 1  # one block
    block = bufs[0].base.nbytes
    assert block < sum(b.nbytes for b in bufs)  # slots never alive together share bytes
    ids = {s: b.ctypes.data for s, b in arena.slots.items()}
    model(xs[-1])  # the same shapes again: the same buffers
    assert {s: b.ctypes.data for s, b in arena.slots.items()} == ids
    assert arena.steady is not None
