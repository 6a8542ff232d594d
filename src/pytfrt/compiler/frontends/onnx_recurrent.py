"""ONNX ``LSTM``, ``GRU`` and ``RNN`` -> ``tg.recurrent`` (one op over the whole sequence).

The catalogue op has ONNX's semantics (:mod:`pytfrt.compiler.ops.recurrent`), so the mapping
passes the inputs through and normalises the attributes: activation names lower-cased, one
``activation_alpha``/``activation_beta`` value per activation (ONNX consumes the listed values in
order, only by the activations that take them; the others get ONNX's defaults), a missing
``hidden_size`` read from ``R``'s shape.  Outputs the model does not use are still computed (the
kernel makes them anyway).  Registered in ``onnx_mapping.ONNX_OPS`` on import.
"""

from __future__ import annotations

from typing import Any

from pytfrt.backends.cpu.recurrent import (
    ALPHA_DEFAULTS,
    BETA_DEFAULTS,
    DEFAULT_ACTIVATIONS,
    activation_names,
)
from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter, Out, onnx_op

_INPUTS = {"lstm": ("has_bias", "has_sequence_lens", "has_initial_h", "has_initial_c",
                    "has_peepholes"),
           "gru": ("has_bias", "has_sequence_lens", "has_initial_h"),
           "rnn": ("has_bias", "has_sequence_lens", "has_initial_h")}
"""Per cell, the presence flag of ONNX inputs 3, 4, ... (the catalogue's operand order)."""


def _activations(ctx: OnnxGraphImporter, node: Any, cell: str, dirs: int,
                 a: dict[str, Any]) -> dict[str, Any]:
    given = [n.decode() if isinstance(n, bytes) else str(n) for n in a.get("activations", [])]
    try:
        names = activation_names(cell, given, dirs)
    except ValueError as exc:
        ctx.unsupported(node, str(exc))
    alphas = list(a.get("activation_alpha", []))
    betas = list(a.get("activation_beta", []))
    out_a, out_b = [], []
    for name in names:
        out_a.append(float(alphas.pop(0)) if name in ALPHA_DEFAULTS and alphas
                     else ALPHA_DEFAULTS.get(name, 0.0))
        out_b.append(float(betas.pop(0)) if name in BETA_DEFAULTS and betas
                     else BETA_DEFAULTS.get(name, 0.0))
    if names == list(DEFAULT_ACTIVATIONS[cell]) * dirs:
        return {}
    return {"activations": ",".join(names), "activation_alpha": out_a,
            "activation_beta": out_b}


def _recurrent(cell: str) -> Any:
    def handler(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
        a = ctx.attrs(node)
        direction = str(a.get("direction", "forward"))
        if direction not in ("forward", "reverse", "bidirectional"):
            ctx.unsupported(node, f"direction {direction!r}")
        dirs = 2 if direction == "bidirectional" else 1
        r = ctx.input(node, 2)
        hidden = a.get("hidden_size")
        if hidden is None:
            if r.shape is None or r.shape[-1] is None:
                ctx.unsupported(node, "no hidden_size and R's shape is unknown")
            hidden = r.shape[-1]
        attrs: dict[str, Any] = {"cell": cell, "direction": direction,
                                 "hidden_size": int(hidden), "layout": int(a.get("layout", 0))}
        attrs.update(_activations(ctx, node, cell, dirs, a))
        if a.get("clip") is not None:
            attrs["clip"] = float(a["clip"])
        if cell == "gru":
            attrs["linear_before_reset"] = bool(a.get("linear_before_reset", 0))
        if cell == "lstm":
            attrs["input_forget"] = bool(a.get("input_forget", 0))
        operands = [ctx.input(node, 0), ctx.input(node, 1), r]
        for k, flag in enumerate(_INPUTS[cell]):
            present = ctx.has(node, 3 + k)
            attrs[flag] = present
            if present:
                operands.append(ctx.input(node, 3 + k))
        outs = ctx.op("recurrent", operands, n_results=3 if cell == "lstm" else 2, **attrs)
        return list(outs)

    return handler


_NOTE = ("`recurrent {cell = %s}` (one kernel over the sequence; every direction, layout, "
         "optional input and output%s)")
onnx_op("LSTM", note=_NOTE % ("lstm", ", peepholes, clip, input_forget"))(_recurrent("lstm"))
onnx_op("GRU", note=_NOTE % ("gru", ", linear_before_reset both ways, clip"))(_recurrent("gru"))
onnx_op("RNN", note=_NOTE % ("rnn", ", clip"))(_recurrent("rnn"))
