"""Keras ``LSTM``/``GRU``/``SimpleRNN`` loops (TF ``While``) replaced by one ``tg.recurrent``.

Under ``tf.function`` a Keras recurrent layer is a ``While`` loop over the time steps whose body
reads step ``t`` of the input sequence (a TensorList), runs the cell and writes the output to
another TensorList (every step for ``return_sequences``, else slot 0).  Run as a ``tg.while``,
each step goes through the executor; :func:`fuse_keras_loop` replaces the whole loop by the
fused op when it can show that the two compute the same thing:

1. *roles* (structure): two counters (``add(arg, 1)``), one input sequence (passed through,
   read with ``gather(seq, t)``, static length ``T``), one output TensorList, and one (GRU,
   SimpleRNN) or two (LSTM) float states; the body's float constants give the cell's kernel
   ``[I, G*H]``, recurrent kernel ``[H, G*H]`` (or two column blocks of it) and bias
   (``[G*H]``, or ``[2, G*H]`` for GRU's ``reset_after``), hence the cell kind (``G`` = 4, 3, 1);
2. *candidates*: Keras' gate orders mapped onto ONNX's (LSTM ``i f c o`` -> ``i o f c``), which
   state is ``h``, GRU's ``reset_after`` (= ``linear_before_reset``) and the activations
   (recurrent: sigmoid, Keras' hard sigmoid, tanh; output: tanh, relu, linear, sigmoid);
3. *proof by running*: the loop (its cond and body, with their own compute functions) and the
   candidate ``tg.recurrent`` are both run on random states and a random sequence of the real
   length, with the loop's real constant operands; the first candidate whose every loop result
   agrees (1e-5 relative) is emitted.

Anything else -- masking (a second sequence read in the body), dropout, a dynamic length, a
training step's accumulators, a custom cell -- keeps the ``tg.while``: correct, one executor
step per time step.  Pure function of the loop; not thread-safe only in that it appends to the
importer's builder (one import per thread).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
from xdsl.dialects.func import ReturnOp

from pytfrt.backends.cpu.recurrent import recurrent as recurrent_kernel
from pytfrt.compiler.frontends.tf_values import TV
from pytfrt.compiler.ops import get_opdef

_REC = (("sigmoid", 0.0, 0.0), ("hardsigmoid", 1 / 6, 0.5), ("hardsigmoid", 0.2, 0.5),
        ("tanh", 0.0, 0.0))
"""Recurrent-activation candidates: (ONNX name, alpha, beta); Keras 3 and Keras 2 hard sigmoid."""
_ACT = (("tanh", 0.0, 0.0), ("relu", 0.0, 0.0), ("affine", 1.0, 0.0), ("sigmoid", 0.0, 0.0))
"""Output-activation candidates (``affine`` 1, 0 is Keras' ``linear``)."""
_KERAS_TO_ONNX = {"lstm": (0, 3, 1, 2), "gru": (0, 1, 2), "rnn": (0,)}
"""Per cell, the Keras gate block feeding each ONNX gate block (LSTM: i f c o -> i o f c)."""
_STEPS_LIMIT = 10_000
"""Longer loops are not run at import time to check a candidate (kept as ``tg.while``)."""


class _NoMatch(Exception):
    """The loop is not a Keras recurrent layer this module recognises."""


def fuse_keras_loop(cx: Any, operands: list[TV], sources: list[TV], cond: str,
                    body: str) -> list[TV] | None:
    """The results of ``tg.while(operands) {cond, body}`` computed by one ``tg.recurrent``,
    or ``None`` if the loop is not a recognised Keras recurrent layer (see the module
    docstring).  ``sources``: the values the operands were made from (their constants and
    static shapes).  Emits into ``cx``'s function only on success."""
    gb = cx.imp.gb
    try:
        roles = _roles(gb.functions[body], sources)
        plan = _prove(gb, gb.functions[cond], gb.functions[body], sources, roles)
    except _NoMatch:
        return None
    return _emit(cx, operands, sources, roles, plan)


# -- 1. roles ---------------------------------------------------------------------------------
class _Roles:
    def __init__(self) -> None:
        self.counters: list[int] = []
        self.seq = -1
        self.lst = -1
        self.states: list[int] = []
        self.hidden = 0
        self.kernels: list[np.ndarray] = []
        self.recs: list[np.ndarray] = []
        self.biases: list[np.ndarray] = []


def _ops(fb: Any) -> list[Any]:
    return list(fb.block.ops)


def _const(gb: Any, op: Any) -> np.ndarray | None:
    from pytfrt.compiler.attrs import from_xattr

    if op.name != "tg.constant":
        return None
    value = op.attributes.get("value")
    if value is not None:
        return np.asarray(from_xattr("dense", value, "tg.constant"))
    w = op.attributes.get("weight")
    arr = gb.weights.get(getattr(w, "data", None))
    return None if arr is None else np.asarray(arr)


def _roles(fb: Any, operands: list[TV]) -> _Roles:
    ops = _ops(fb)
    ret = ops[-1]
    if not isinstance(ret, ReturnOp) or len(ret.operands) != len(operands):
        raise _NoMatch
    args = list(fb.block.args)
    roles = _Roles()
    gathered: set[int] = set()
    for op in ops:
        if op.name == "tg.gather" and op.operands[0] in args and op.operands[1] in args:
            gathered.add(args.index(op.operands[0]))
    for i, (tv, out) in enumerate(zip(operands, ret.operands, strict=True)):
        owner: Any = out.owner
        if out is args[i]:
            if i not in gathered or roles.seq >= 0:
                raise _NoMatch
            roles.seq = i
        elif tv.list_elem is not None:
            if roles.lst >= 0:
                raise _NoMatch
            roles.lst = i
        elif getattr(owner, "name", "") == "tg.add" and args[i] in owner.operands:
            if tv.const is None or np.asarray(tv.const).size != 1:
                raise _NoMatch
            roles.counters.append(i)
        elif tv.dtype in ("f32", "f64") and tv.rank == 2:
            roles.states.append(i)
        else:
            raise _NoMatch
    seq = operands[roles.seq] if roles.seq >= 0 else None
    if (seq is None or roles.lst < 0 or len(roles.counters) != 2
            or len(roles.states) not in (1, 2) or seq.shape is None or len(seq.shape) != 3
            or seq.shape[0] is None or seq.shape[2] is None or operands[roles.lst].const is None
            or not 0 < seq.shape[0] <= _STEPS_LIMIT):
        raise _NoMatch
    hidden: set[Any] = set()
    for i in roles.states:
        shape: Any = operands[i].shape
        if shape is not None:
            hidden.add(shape[-1])
    elem = operands[roles.lst].list_elem or ()
    if elem and elem[-1] is not None:
        hidden.add(elem[-1])
    hidden.discard(None)
    if len(hidden) != 1:
        raise _NoMatch
    h = int(next(iter(hidden)))
    i_size = int(seq.shape[2])
    floats = [c for c in (_const(fb.graph, op) for op in ops)
              if c is not None and c.dtype == _dtype(seq)]
    kernels = [c for c in floats if c.ndim == 2 and c.shape[0] == i_size and c.shape[1] % h == 0]
    recs = [c for c in floats if c.ndim == 2 and c.shape[0] == h and c.shape[1] % h == 0]
    biases = [c for c in floats if c.ndim in (1, 2) and c.shape[-1] % h == 0 and c.size >= h
              and (c.ndim == 1 or c.shape[0] == 2)]
    if not kernels or not recs:
        raise _NoMatch
    roles.hidden, roles.kernels, roles.recs, roles.biases = h, kernels, recs, biases
    return roles


def _dtype(tv: TV) -> np.dtype:
    return np.dtype(np.float64 if tv.dtype == "f64" else np.float32)


# -- 2./3. candidates, proved by running --------------------------------------------------------
def _run(gb: Any, fb: Any, values: list[np.ndarray]) -> list[np.ndarray]:
    """Run a ``tg`` function of the builder on arrays with the ops' compute functions."""
    from pytfrt.backends.cpu.graph_kernels import graph_ops
    from pytfrt.compiler.lowering import op_attrs

    table = graph_ops()
    env: dict[Any, Any] = dict(zip(fb.block.args, values, strict=True))
    for op in fb.block.ops:
        if isinstance(op, ReturnOp):
            return [env[v] for v in op.operands]
        c = _const(gb, op)
        if c is not None:
            env[op.results[0]] = c
            continue
        opdef = get_opdef(op.name)
        fn = table.get(opdef.compute_key or "")
        if fn is None or opdef.stateful:
            raise _NoMatch
        out = fn(*[env[v] for v in op.operands], **op_attrs(op, opdef))
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(op.results):
            raise _NoMatch
        for r, o in zip(op.results, outs, strict=True):
            env[r] = np.asarray(o)
    raise _NoMatch


def _run_loop(gb: Any, cond: Any, body: Any, values: list[np.ndarray],
              limit: int) -> list[np.ndarray]:
    for _ in range(limit + 1):
        (go,) = _run(gb, cond, values)
        if not bool(np.asarray(go).reshape(-1)[0]):
            return values
        values = _run(gb, body, values)
    raise _NoMatch


def _candidates(roles: _Roles) -> Iterator[tuple[dict[str, Any], list[Any], int]]:
    """(attrs, [w, r, b or None], index of h among the states) per candidate."""
    h = roles.hidden
    n_states = len(roles.states)
    # a recurrent kernel may come in two column blocks (GRU without reset_after: [z r] and h)
    recs = list(roles.recs) + [np.concatenate([a, b], axis=1)
                               for a, b in itertools.permutations(roles.recs, 2)]
    for kernel in roles.kernels:
        for rec in recs:
            if kernel is rec or kernel.shape[1] != rec.shape[1]:
                continue
            g = kernel.shape[1] // h
            cell = {(4, 2): "lstm", (3, 1): "gru", (1, 1): "rnn"}.get((g, n_states))
            if cell is None:
                continue
            order = _KERAS_TO_ONNX[cell]

            def onnx_blocks(m: np.ndarray, order: tuple[int, ...] = order) -> np.ndarray:
                blocks = m.reshape(*m.shape[:-1], len(order), h)
                return np.concatenate([blocks[..., k, :] for k in order], axis=-1)

            w = onnx_blocks(kernel).T[None]
            r = onnx_blocks(rec).T[None]
            bias_opts: list[tuple[np.ndarray | None, bool]] = []
            for b in roles.biases:
                if b.shape[-1] != g * h:
                    continue
                if b.ndim == 2:
                    bias_opts.append((onnx_blocks(b).reshape(1, -1), True))
                else:
                    bias_opts.append((np.concatenate([onnx_blocks(b), np.zeros_like(b)])[None],
                                      False))
            if not bias_opts:
                bias_opts = [(None, False), (None, True)] if cell == "gru" else [(None, False)]
            for bias, after in bias_opts:
                for rec_act in _REC:
                    for act in _ACT:
                        names = {"lstm": [rec_act, act, act], "gru": [rec_act, act],
                                 "rnn": [act]}[cell]
                        attrs = {"cell": cell, "hidden_size": h,
                                 "activations": ",".join(n for n, _, _ in names),
                                 "activation_alpha": [a for _, a, _ in names],
                                 "activation_beta": [b for _, _, b in names],
                                 "linear_before_reset": after and cell == "gru",
                                 "has_bias": bias is not None, "has_initial_h": True,
                                 "has_initial_c": cell == "lstm"}
                        for h_index in range(n_states):
                            yield attrs, [w, r, bias], h_index
                    if cell == "rnn":
                        break  # the recurrent activation is not used


def _prove(gb: Any, cond: Any, body: Any, operands: list[TV], roles: _Roles) -> dict[str, Any]:
    seq = operands[roles.seq]
    shape: Any = seq.shape
    steps, batch, i_size = int(shape[0]), shape[1], int(shape[2])
    dt = _dtype(seq)
    lst0 = np.asarray(operands[roles.lst].const)
    if batch is None:
        batch = lst0.shape[1] if lst0.ndim == 3 and lst0.shape[0] > 0 else 2
    h = roles.hidden
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1.5, (steps, batch, i_size)).astype(dt)
    states = [rng.normal(0, 1, (batch, h)).astype(dt) for _ in roles.states]
    values: list[np.ndarray] = []
    for i, tv in enumerate(operands):
        if i == roles.seq:
            values.append(x)
        elif i in roles.states:
            values.append(states[roles.states.index(i)])
        else:
            values.append(np.asarray(tv.const))
    try:
        final = _run_loop(gb, cond, body, values, steps)
    except _NoMatch:
        raise
    except Exception as exc:
        raise _NoMatch from exc
    out = final[roles.lst]
    if out.ndim != 3 or out.shape[0] not in (1, steps) or out.shape[1:] != (batch, h):
        raise _NoMatch
    sequence = out.shape[0] == steps and steps > 1
    attr_defs = get_opdef("recurrent")
    for attrs, (w, r, b), h_index in _candidates(roles):
        ordered = [states[h_index]] + [s for k, s in enumerate(states) if k != h_index]
        extra = ([b] if b is not None else []) + [s[None] for s in ordered]
        full = attr_defs.check_attrs(attrs)
        try:
            res = recurrent_kernel(x, w.astype(dt), r.astype(dt), *[e.astype(dt) for e in extra],
                                   **full)
        except Exception:  # noqa: BLE001 - a candidate that does not fit: try the next
            continue
        want = {roles.lst: res[0][:, 0] if sequence else res[1]}
        state_res = [res[1][0]] + ([res[2][0]] if len(res) > 2 else [])
        for k, i in enumerate([roles.states[h_index]]
                              + [s for j, s in enumerate(roles.states) if j != h_index]):
            want[i] = state_res[k]
        if all(_close(final[i], v) for i, v in want.items()):
            counters = {i: np.asarray(final[i]) for i in roles.counters}
            return {"attrs": attrs, "weights": (w, r, b), "h_index": h_index,
                    "sequence": sequence, "counters": counters}
    raise _NoMatch


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return False
    return bool(np.max(np.abs(a - b), initial=0.0) <= 1e-5 * max(1.0, float(np.max(np.abs(b)))))


# -- emission ---------------------------------------------------------------------------------
def _emit(cx: Any, operands: list[TV], sources: list[TV], roles: _Roles,
          plan: dict[str, Any]) -> list[TV]:
    seq = operands[roles.seq]
    dt = _dtype(sources[roles.seq])
    w, r, b = plan["weights"]
    h_index = plan["h_index"]
    order = [roles.states[h_index]] + [s for j, s in enumerate(roles.states) if j != h_index]
    ins = [seq, cx.const(w.astype(dt), "recurrent/w"), cx.const(r.astype(dt), "recurrent/r")]
    if b is not None:
        ins.append(cx.const(b.astype(dt), "recurrent/b"))
    ins += [cx.op("expand_dims", [operands[i]], axis=0) for i in order]
    attrs = dict(plan["attrs"])
    n = 3 if attrs["cell"] == "lstm" else 2
    outs = cx.ops("recurrent", ins, n, **attrs)
    results: list[TV] = list(operands)
    for i, value in plan["counters"].items():
        results[i] = cx.const(value)
    y = outs[0]
    results[roles.lst] = (cx.op("squeeze", [y], axes=[1]) if plan["sequence"] else outs[1])
    for k, i in enumerate(order):
        results[i] = cx.op("squeeze", [outs[1 + k]], axes=[0])
    return results
