"""Catalogue family: recurrent nets as one op over the whole sequence (``tg.recurrent``).

``recurrent(x, w, r, [b], [sequence_lens], [initial_h], [initial_c], [p]) {cell, direction,
hidden_size, ...}`` runs an LSTM, GRU or simple RNN over every time step in one kernel
(:mod:`pytfrt.backends.cpu.recurrent`): the input projection of all steps is one GEMM, then
the recurrence loops over time without going back to the executor.  Its semantics are ONNX's
``LSTM``/``GRU``/``RNN`` operators (a superset of Keras' ``LSTM``/``GRU``/``SimpleRNN``, which
the TF front end maps onto it):

* ``cell``: ``lstm`` (gates ``i, o, f, c``: 4 blocks of ``hidden_size``), ``gru`` (``z, r, h``: 3)
  or ``rnn`` (1);
* ``w`` ``[D, G*H, I]``, ``r`` ``[D, G*H, H]``, ``b`` ``[D, 2*G*H]`` (input then recurrent
  biases), ``p`` ``[D, 3*H]`` (LSTM peepholes ``i, o, f``), ``sequence_lens`` ``[B]`` (int32),
  ``initial_h``/``initial_c`` ``[D, B, H]`` (``layout`` 1: ``[B, D, H]``); which optional operands
  are present is said by the ``has_*`` attributes, in that operand order;
* ``x`` ``[T, B, I]`` (``layout`` 1: ``[B, T, I]``); results ``y`` ``[T, D, B, H]`` (``layout``
  1: ``[B, T, D, H]``), ``y_h`` ``[D, B, H]`` (``[B, D, H]``) and, for ``lstm`` only, ``y_c``
  (same shape); ``D`` is 2 for ``direction = bidirectional``, else 1;
* ``activations``: comma-separated lower-case ONNX activation names, one per cell function
  (``f, g, h`` for LSTM, ``f, g`` for GRU, ``f`` for RNN) and direction; empty = ONNX's defaults
  (``sigmoid, tanh, tanh``); ``activation_alpha``/``activation_beta``: one value per listed
  activation (the front end fills in the defaults); ``clip`` > 0 clips the pre-activations to
  ``[-clip, clip]``; ``linear_before_reset`` (GRU) applies the reset gate after the recurrent
  product (Keras ``reset_after``); ``input_forget`` (LSTM) couples the forget gate to ``1 - i``.

With ``sequence_lens``, steps past a sequence's length leave its state unchanged and write
zeros to ``y``; a reverse direction starts at the sequence's last valid step; an empty
sequence's ``y_h``/``y_c`` are zeros (as ONNX Runtime).  Filled at
import, then read only.
"""

from __future__ import annotations

from pytfrt.backends.cpu.recurrent import GATES, activation_names
from pytfrt.compiler.ops.base import AttrSpec, InferContext, define
from pytfrt.compiler.types import FLOAT_DTYPES, INT_DTYPES, TType

CELLS = GATES
"""Cell kind -> number of gate blocks in ``w``/``r``."""

OPTIONAL = ("has_bias", "has_sequence_lens", "has_initial_h", "has_initial_c", "has_peepholes")
"""The presence flags of the optional operands, in operand order."""


def _shape3(t: TType) -> tuple[int | None, int | None, int | None] | None:
    if t.shape is None:
        return None
    if len(t.shape) != 3:
        raise ValueError(f"expected rank 3, got {t}")
    return t.shape[0], t.shape[1], t.shape[2]


def _recurrent(ctx: InferContext) -> list[TType]:
    a = ctx.attrs
    cell = a["cell"]
    g, h = CELLS[cell], a["hidden_size"]
    d = 2 if a["direction"] == "bidirectional" else 1
    if h <= 0:
        raise ctx.error(f"hidden_size must be positive, got {h}")
    if a["layout"] not in (0, 1):
        raise ctx.error(f"layout must be 0 or 1, got {a['layout']}")
    if cell != "lstm" and (a["has_initial_c"] or a["has_peepholes"] or a["input_forget"]):
        raise ctx.error(f"initial_c, peepholes and input_forget are LSTM-only, cell is {cell}")
    want = 3 + sum(int(a[k]) for k in OPTIONAL)
    if len(ctx.inputs) != want:
        raise ctx.error(f"takes {want} operands with its has_* flags, got {len(ctx.inputs)}")
    try:
        names = activation_names(cell, a["activations"], d)
    except ValueError as exc:
        raise ctx.error(str(exc)) from None
    for k in ("activation_alpha", "activation_beta"):
        if a[k] and len(a[k]) != len(names):
            raise ctx.error(f"{k} needs one value per activation ({len(names)}), got {len(a[k])}")
    x, w, r = ctx.inputs[:3]
    if x.dtype not in FLOAT_DTYPES or w.dtype != x.dtype or r.dtype != x.dtype:
        raise ctx.error(f"x, w and r must share a floating-point type, got {x}, {w}, {r}")
    try:
        xs = _shape3(x)
        ws = _shape3(w)
        rs = _shape3(r)
    except ValueError as exc:
        raise ctx.error(f"x, w and r: {exc}") from None
    if ws is not None and ws[0] not in (None, d) or ws is not None and ws[1] not in (None, g * h):
        raise ctx.error(f"w must be [{d}, {g * h}, input_size], got {w}")
    if rs is not None and (rs[0] not in (None, d) or rs[1] not in (None, g * h)
                           or rs[2] not in (None, h)):
        raise ctx.error(f"r must be [{d}, {g * h}, {h}], got {r}")
    if xs is not None and ws is not None and None not in (xs[2], ws[2]) and xs[2] != ws[2]:
        raise ctx.error(f"x's input size {xs[2]} differs from w's {ws[2]}")
    i = 3
    expect: list[tuple[str, tuple[int | None, ...]]] = []
    shape: tuple[int | None, ...]
    t_dim, b_dim = (None, None) if xs is None else (
        (xs[0], xs[1]) if a["layout"] == 0 else (xs[1], xs[0]))
    state = (d, b_dim, h) if a["layout"] == 0 else (b_dim, d, h)
    for flag, what, shape in (("has_bias", "b", (d, 2 * g * h)),
                              ("has_sequence_lens", "sequence_lens", (b_dim,)),
                              ("has_initial_h", "initial_h", state),
                              ("has_initial_c", "initial_c", state),
                              ("has_peepholes", "p", (d, 3 * h))):
        if a[flag]:
            expect.append((what, shape))
    for what, shape in expect:
        t = ctx.inputs[i]
        i += 1
        if what == "sequence_lens":
            if t.dtype not in INT_DTYPES:
                raise ctx.error(f"sequence_lens must be integers, got {t}")
        elif t.dtype != x.dtype:
            raise ctx.error(f"{what} must be {x.dtype}, got {t}")
        if t.shape is not None and (len(t.shape) != len(shape) or any(
                u is not None and v is not None and u != v for u, v in zip(t.shape, shape,
                                                                            strict=False))):
            dims = ", ".join("?" if v is None else str(v) for v in shape)
            raise ctx.error(f"{what} must be [{dims}], got {t}")
    y = (t_dim, d, b_dim, h) if a["layout"] == 0 else (b_dim, t_dim, d, h)
    outs = [TType(x.dtype, y), TType(x.dtype, state)]
    if cell == "lstm":
        outs.append(TType(x.dtype, state))
    return outs


define(
    "recurrent",
    ("x", "w", "r", "extra*"),
    _recurrent,
    {
        "cell": AttrSpec("str", choices=tuple(CELLS)),
        "direction": AttrSpec("str", "forward", choices=("forward", "reverse", "bidirectional")),
        "hidden_size": AttrSpec("int"),
        "layout": AttrSpec("int", 0),
        "activations": AttrSpec("str", ""),
        "activation_alpha": AttrSpec("floats", ()),
        "activation_beta": AttrSpec("floats", ()),
        "clip": AttrSpec("float", 0.0),
        "linear_before_reset": AttrSpec("bool", False),
        "input_forget": AttrSpec("bool", False),
        **{k: AttrSpec("bool", False) for k in OPTIONAL},
    },
    family="recurrent",
    num_results=None,
    doc="LSTM / GRU / RNN over a whole sequence (ONNX semantics)",
    no_grad="imported from ONNX/Keras inference graphs only (a traced program's loops are "
            "tg.while, which has its rule)",
)
