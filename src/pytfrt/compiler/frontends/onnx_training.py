"""ONNX's training optimizers (domain ``ai.onnx.preview.training``) composed from core ops.

``Adagrad``, ``Adam`` and ``Momentum`` (with its ``nesterov`` mode) each update a group of
tensors ``X_1..X_n`` from their gradients ``G_i`` and optimizer states, with a learning rate
``R`` and an update count ``T`` (scalars, known at import or at run time: the ``T > 0``
choices are ``select`` ops).  Every output is an elementwise formula of ONNX's definition
(``onnx/defs/training``), computed in the tensors' element type.  Handlers registered in
:data:`~pytfrt.compiler.frontends.onnx_mapping.ONNX_OPS` on import as
``ai.onnx.preview.training.<op>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytfrt.compiler.frontends.onnx_mapping import OnnxGraphImporter, Out, onnx_op

if TYPE_CHECKING:  # pragma: no cover
    from pytfrt.compiler.builder import Value

DOMAIN = "ai.onnx.preview.training"


class _Math:
    """Elementwise helpers over one element type (scalars become constants of that type)."""

    def __init__(self, ctx: OnnxGraphImporter, like: Value) -> None:
        self.ctx, self.like = ctx, like

    def _v(self, a: Value | float) -> Value:
        return self.ctx.scalar(a, self.like) if isinstance(a, int | float) else a

    def op(self, name: str, *args: Value | float) -> Value:
        return self.ctx.op(name, [self._v(a) for a in args])

    def cast(self, v: Value) -> Value:
        return v if v.dtype == self.like.dtype else self.ctx.op("cast", [v], to=self.like.dtype)


def _groups(ctx: OnnxGraphImporter, node: Any, per: int) -> tuple[Value, Value, list[list[Value]]]:
    """``(R, T, [[X_i, G_i, state_i...] for each i])`` of an optimizer node with ``per``
    tensors per group (X, G and the states)."""
    n_in = len(node.input) - 2
    if n_in <= 0 or n_in % per:
        ctx.unsupported(node, f"{n_in} tensor inputs are not a whole number of groups of {per}")
    n = n_in // per
    tensors = [ctx.input(node, 2 + i) for i in range(n_in)]
    return ctx.input(node, 0), ctx.input(node, 1), [
        [tensors[k * n + i] for k in range(per)] for i in range(n)]


def _regularised(m: _Math, x: Value, g: Value, norm: float) -> Value:
    return m.op("add", m.op("mul", norm, x), g) if norm else g


@onnx_op(f"{DOMAIN}.Adagrad", note="elementwise formulas of ONNX's definition (adjusted rate, "
         "accumulated squared gradient)")
def _adagrad(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    decay, eps = float(a.get("decay_factor", 0.0)), float(a.get("epsilon", 1e-6))
    norm = float(a.get("norm_coefficient", 0.0))
    r, t, groups = _groups(ctx, node, 3)
    xs, hs = [], []
    for x, g, h in groups:
        m = _Math(ctx, x)
        rate = m.op("div", m.cast(r), m.op("add", 1.0, m.op("mul", m.cast(t), decay)))
        gr = _regularised(m, x, g, norm)
        h_new = m.op("add", h, m.op("mul", gr, gr))
        step = m.op("div", m.op("mul", rate, gr), m.op("add", m.op("sqrt", h_new), eps))
        xs.append(m.op("sub", x, step))
        hs.append(h_new)
    return xs + hs


@onnx_op(f"{DOMAIN}.Adam", note="elementwise formulas of ONNX's definition (bias correction "
         "for T > 0 by `select`)")
def _adam(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    alpha, beta = float(a.get("alpha", 0.9)), float(a.get("beta", 0.999))
    eps, norm = float(a.get("epsilon", 1e-6)), float(a.get("norm_coefficient", 0.0))
    post = float(a.get("norm_coefficient_post", 0.0))
    r, t, groups = _groups(ctx, node, 4)
    xs, vs, hs = [], [], []
    for x, g, v, h in groups:
        m = _Math(ctx, x)
        gr = _regularised(m, x, g, norm)
        v_new = m.op("add", m.op("mul", alpha, v), m.op("mul", 1.0 - alpha, gr))
        h_new = m.op("add", m.op("mul", beta, h), m.op("mul", 1.0 - beta, m.op("mul", gr, gr)))
        tf, rf = m.cast(t), m.cast(r)
        bias = m.op("sqrt", m.op("sub", 1.0, m.op("pow", beta, tf)))
        corrected = m.op("div", m.op("mul", rf, bias), m.op("sub", 1.0, m.op("pow", alpha, tf)))
        rate = m.op("select", m.op("greater", tf, 0.0), corrected, rf)
        x_new = m.op("sub", x, m.op("mul", rate, m.op("div", v_new,
                                                       m.op("add", m.op("sqrt", h_new), eps))))
        xs.append(m.op("mul", 1.0 - post, x_new) if post else x_new)
        vs.append(v_new)
        hs.append(h_new)
    return xs + vs + hs


@onnx_op(f"{DOMAIN}.Momentum", note="elementwise formulas of ONNX's definition (standard or "
         "nesterov; the gradient's coefficient 1 at T = 0 by `select`)")
def _momentum(ctx: OnnxGraphImporter, node: Any) -> list[Out]:
    a = ctx.attrs(node)
    alpha, beta = float(a["alpha"]), float(a["beta"])
    norm, mode = float(a.get("norm_coefficient", 0.0)), str(a.get("mode", "standard"))
    if mode not in ("standard", "nesterov"):
        ctx.unsupported(node, f"mode {mode!r}")
    r, t, groups = _groups(ctx, node, 3)
    xs, vs = [], []
    for x, g, v in groups:
        m = _Math(ctx, x)
        gr = _regularised(m, x, g, norm)
        b = m.op("select", m.op("greater", m.cast(t), 0.0), beta, 1.0)
        v_new = m.op("add", m.op("mul", alpha, v), m.op("mul", b, gr))
        direction = v_new if mode == "standard" else m.op("add", gr, m.op("mul", alpha, v_new))
        xs.append(m.op("sub", x, m.op("mul", m.cast(r), direction)))
        vs.append(v_new)
    return xs + vs
