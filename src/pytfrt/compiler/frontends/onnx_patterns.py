"""ONNX graph patterns the front end imports as one catalogue op.

:func:`fuse_patterns` applies them all: :func:`fuse_silu` and :func:`fuse_gelu`.

ONNX has no SiLU before opset 24: exporters write ``Mul(x, Sigmoid(x))``, which
:func:`fuse_silu` imports as ``tg.silu`` (an activation the pipeline fuses into a convolution).

Exporters before opset 20 write GELU as arithmetic around ``Erf``::

    y = Mul(Mul(x, Add(Erf(Div(x, sqrt(2))), 1)), 0.5)      # PyTorch's nn.GELU()

(the ``Div`` may be a ``Mul`` by ``1/sqrt(2)``, the ``0.5`` may multiply ``x`` first, and
operands of ``Add``/``Mul`` come in either order), and its tanh approximation (GPT-2's
``gelu_new``, PyTorch's ``nn.GELU(approximate="tanh")``) as::

    y = Mul(Mul(0.5, x), Add(1, Tanh(Mul(sqrt(2/pi), Add(x, Mul(0.044715, Pow(x, 3)))))))

with the same freedoms (and the cube also as ``Mul(x, Mul(x, x))``, as PyTorch writes it).
:func:`fuse_gelu` replaces each such chain by one ``Gelu`` node (the opset-20 op,
``approximate = "none"`` or ``"tanh"``), which the mapping imports as
``tg.gelu`` -- one op the pass pipeline can fuse into the preceding ``matmul``'s epilogue,
instead of five elementwise ops.  A chain is replaced only when its intermediate values have no
other consumer and are not graph outputs, and its constants match to 1e-6.

Internally the fused nodes are ``Gelu`` (the opset-20 op) and ``pytfrt.Silu`` (a private name,
never written to a file), both mapped in ``onnx_mapping``.

Pure function of the graph; the input graph is not modified.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np


def _constants(graph: Any) -> dict[str, float]:
    """Scalar (single-element) float constants of the graph: initializers and Constant nodes."""
    from pytfrt.compiler.frontends.onnx_proto import to_array

    out: dict[str, float] = {}
    for t in graph.initializer:
        if len(t.dims) <= 1 and np.prod(t.dims, dtype=np.int64) == 1:
            out[t.name] = float(to_array(t).reshape(-1)[0])
    for n in graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            a = to_array(n.attribute[0].t)
            if a.size == 1 and a.dtype.kind == "f":
                out[n.output[0]] = float(a.reshape(-1)[0])
    return out


def fuse_patterns(graph: Any) -> list[Any]:
    """``graph``'s nodes with every pattern of this module replaced by its one node."""
    return fuse_gelu(graph, fuse_silu(graph, list(graph.node)))


def _uses(graph: Any, nodes: list[Any]) -> Counter[str]:
    uses = Counter(i for n in nodes for i in n.input)
    uses.update(o.name for o in graph.output)  # a graph output counts as a consumer
    return uses


def fuse_silu(graph: Any, nodes: list[Any]) -> list[Any]:
    """``nodes`` with each ``Mul(x, Sigmoid(x))`` (sigmoid used only there) as one SiLU node."""
    from pytfrt.compiler.frontends.onnx_proto import make_node

    producer = {o: i for i, n in enumerate(nodes) for o in n.output}
    uses = _uses(graph, nodes)
    out: list[Any] = []
    dropped: set[int] = set()
    for n in nodes:
        if n.op_type == "Mul" and len(n.input) == 2:
            for k in (0, 1):
                si = producer.get(n.input[k])
                if (
                    si is not None
                    and nodes[si].op_type == "Sigmoid"
                    and nodes[si].input[0] == n.input[1 - k]
                    and uses[n.input[k]] == 1
                ):
                    dropped.add(si)
                    n = make_node(
                        "Silu",
                        [n.input[1 - k]],
                        list(n.output),
                        name=f"{n.name or n.output[0]}:silu",
                        domain="pytfrt",
                    )
                    break
        out.append(n)
    return [n for i, n in enumerate(out) if i not in dropped]


def fuse_gelu(graph: Any, nodes: list[Any] | None = None) -> list[Any]:
    """``nodes`` (default: ``graph``'s) with every erf- or tanh-GELU chain replaced by one
    ``Gelu``."""
    from pytfrt.compiler.frontends.onnx_proto import make_node

    nodes = list(graph.node) if nodes is None else list(nodes)
    consts = _constants(graph)
    producer = {o: i for i, n in enumerate(nodes) for o in n.output}
    uses = _uses(graph, nodes)
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for name in n.input:
            consumers.setdefault(name, []).append(i)

    def is_const(name: str, value: float) -> bool:
        v = consts.get(name)
        return v is not None and math.isclose(v, value, rel_tol=1e-6)

    def other(node: Any, name: str) -> str | None:
        ins = list(node.input)
        if len(ins) != 2 or name not in ins:
            return None
        return ins[1] if ins[0] == name else ins[0]

    def sole_consumer(name: str, op_type: str) -> int | None:
        c = consumers.get(name, [])
        if uses[name] != 1 or len(c) != 1 or nodes[c[0]].op_type != op_type:
            return None
        return c[0]

    def sole_producer(name: str, op_type: str) -> int | None:
        pi = producer.get(name)
        if pi is None or uses[name] != 1 or nodes[pi].op_type != op_type:
            return None
        return pi

    def erf_head(erf: Any) -> tuple[str, list[int]] | None:
        """``erf(x / sqrt(2))``: (x, the chain's node indices before the Erf)."""
        pi = producer.get(erf.input[0])
        if pi is None or uses[erf.input[0]] != 1:
            return None
        scale = nodes[pi]
        if scale.op_type == "Div" and is_const(scale.input[1], math.sqrt(2.0)):
            return scale.input[0], [pi]
        if scale.op_type == "Mul":
            c = [n for n in scale.input if is_const(n, 1 / math.sqrt(2.0))]
            if c and other(scale, c[0]) is not None:
                return other(scale, c[0]) or "", [pi]
        return None

    def tanh_head(tanh: Any) -> tuple[str, list[int]] | None:
        """``tanh(sqrt(2/pi) * (x + 0.044715 * x**3))``: (x, the chain before the Tanh)."""
        si = sole_producer(tanh.input[0], "Mul")
        if si is None:
            return None
        c = [n for n in nodes[si].input if is_const(n, math.sqrt(2.0 / math.pi))]
        inner = other(nodes[si], c[0]) if c else None
        ai = sole_producer(inner or "", "Add")
        if ai is None:
            return None
        for x in nodes[ai].input:
            cube_term = other(nodes[ai], x) or ""
            ci = sole_producer(cube_term, "Mul")
            if ci is None:
                continue
            k = [n for n in nodes[ci].input if is_const(n, 0.044715)]
            cube = cube_of(x, other(nodes[ci], k[0]) or "") if k else None
            if cube is not None:
                return x, [*cube, ci, ai, si]
        return None

    def cube_of(x: str, name: str) -> list[int] | None:
        """The nodes computing ``name = x ** 3``: ``Pow(x, 3)`` or ``Mul(x, Mul(x, x))``."""
        pi = sole_producer(name, "Pow")
        if pi is not None:
            ok = nodes[pi].input[0] == x and is_const(nodes[pi].input[1], 3.0)
            return [pi] if ok else None
        mi = sole_producer(name, "Mul")
        sq = sole_producer(other(nodes[mi], x) or "", "Mul") if mi is not None else None
        if mi is not None and sq is not None and list(nodes[sq].input) == [x, x]:
            return [sq, mi]
        return None

    removed: set[int] = set()
    replacement: dict[int, Any] = {}
    for ei, erf in enumerate(nodes):
        if erf.op_type not in ("Erf", "Tanh") or ei in removed:
            continue
        head = erf_head(erf) if erf.op_type == "Erf" else tanh_head(erf)
        if head is None or removed.intersection(head[1]):
            continue
        x, before = head
        ai = sole_consumer(erf.output[0], "Add")
        if ai is None or not is_const(other(nodes[ai], erf.output[0]) or "", 1.0):
            continue
        one_plus = nodes[ai].output[0]
        mi = sole_consumer(one_plus, "Mul")
        if mi is None:
            continue
        partner = other(nodes[mi], one_plus)
        chain = [*before, ei, ai, mi]
        out_node: int
        if partner == x:  # (x * (1 + erf)) * 0.5
            hi = sole_consumer(nodes[mi].output[0], "Mul")
            if hi is None or not is_const(other(nodes[hi], nodes[mi].output[0]) or "", 0.5):
                continue
            out_node = hi
            chain.append(hi)
        else:  # (0.5 * x) * (1 + erf)
            hp = producer.get(partner or "")
            if hp is None or nodes[hp].op_type != "Mul" or uses[partner or ""] != 1:
                continue
            half = nodes[hp]
            if not (other(half, x) is not None and is_const(other(half, x) or "", 0.5)):
                continue
            out_node = mi
            chain.append(hp)
        name = nodes[out_node].name or nodes[out_node].output[0]
        gelu = make_node(
            "Gelu", [x], [nodes[out_node].output[0]], name=f"{name}:gelu",
            approximate="none" if erf.op_type == "Erf" else "tanh",
        )
        removed.update(chain)
        replacement[max(chain)] = gelu
    if not replacement:
        return nodes
    out = []
    for i, n in enumerate(nodes):
        if i in replacement:
            out.append(replacement[i])
        elif i not in removed:
            out.append(n)
    return out
