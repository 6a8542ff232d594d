"""The ``tg.recurrent`` kernel's two loops agree: the compiled (Numba) one against the NumPy one.

The NumPy loop is checked against ONNX Runtime and ONNX's node cases in
``frontends/test_onnx_recurrent.py``; here Hypothesis draws cells, directions, sizes,
activations, clip, peepholes, ``linear_before_reset`` and initial states, and the compiled loop
must give the same ``y``, ``y_h``, ``y_c`` (float32 and float64).  Inputs are never written.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import recurrent as rec
from pytfrt.compiler.ops import get_opdef

pytest.importorskip("numba")


def _run(numba: bool, *args: np.ndarray, **attrs: Any) -> tuple[np.ndarray, ...]:
    saved = rec.NUMBA
    rec.NUMBA = numba
    try:
        return rec.recurrent(*args, **get_opdef("recurrent").check_attrs(attrs))
    finally:
        rec.NUMBA = saved


@settings(max_examples=15, deadline=None)
@given(cell=st.sampled_from(["lstm", "gru", "rnn"]),
       direction=st.sampled_from(["forward", "reverse", "bidirectional"]),
       steps=st.integers(1, 5), batch=st.integers(1, 3), inp=st.integers(1, 4),
       hid=st.integers(1, 5), layout=st.sampled_from([0, 1]),
       acts=st.lists(st.sampled_from(rec.ACTIVATIONS), min_size=3, max_size=3),
       clip=st.sampled_from([0.0, 0.6]), lbr=st.booleans(), extras=st.booleans(),
       f64=st.booleans(), seed=st.integers(0, 2**16))
# A gate column of hidden size 1 is a strided view: NumPy's own negative got it wrong (ops.negative)
@example(cell="lstm", direction="forward", steps=1, batch=2, inp=1, hid=1, layout=0,
         acts=["sigmoid"] * 3, clip=0.0, lbr=False, extras=False, f64=False, seed=0)
def test_compiled_loop_matches_numpy_loop(cell: str, direction: str, steps: int, batch: int,
                                          inp: int, hid: int, layout: int, acts: list[str],
                                          clip: float, lbr: bool, extras: bool, f64: bool,
                                          seed: int) -> None:
    rng = np.random.default_rng(seed)
    dt = np.float64 if f64 else np.float32
    d = 2 if direction == "bidirectional" else 1
    g = rec.GATES[cell]
    nf = rec.CELL_FUNCTIONS[cell]

    def f(*shape: int) -> np.ndarray:
        return rng.uniform(-1, 1, shape).astype(dt)

    x = f(steps, batch, inp) if layout == 0 else f(batch, steps, inp)
    state = (d, batch, hid) if layout == 0 else (batch, d, hid)
    ops = [x, f(d, g * hid, inp), f(d, g * hid, hid), f(d, 2 * g * hid)]
    attrs: dict[str, Any] = {"cell": cell, "direction": direction, "hidden_size": hid,
                             "layout": layout, "activations": ",".join(acts[:nf]),
                             "activation_alpha": [0.7] * nf, "activation_beta": [0.2] * nf,
                             "clip": clip, "has_bias": True}
    if extras:
        ops.append(f(*state))
        attrs["has_initial_h"] = True
        if cell == "lstm":
            ops += [f(*state), f(d, 3 * hid)]
            attrs.update(has_initial_c=True, has_peepholes=True)
    if cell == "gru":
        attrs["linear_before_reset"] = lbr
    copies = [o.copy() for o in ops]
    want = _run(False, *ops, **attrs)
    got = _run(True, *ops, **attrs)
    assert all(np.array_equal(a, b) for a, b in zip(ops, copies, strict=True))
    assert len(got) == len(want) == (3 if cell == "lstm" else 2)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype == dt and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_sequence_lens_out_of_range_is_an_error() -> None:
    x = np.zeros((3, 2, 1), np.float32)
    w, r = np.zeros((1, 1, 1), np.float32), np.zeros((1, 1, 1), np.float32)
    with pytest.raises(rec.OpError, match="sequence_lens"):
        _run(True, x, w, r, np.array([4, 1], np.int32), cell="rnn", hidden_size=1,
             has_sequence_lens=True)
