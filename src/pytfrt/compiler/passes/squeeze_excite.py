"""``-tg-fuse-squeeze-excite``: a squeeze-and-excitation block into one ``tg.squeeze_excite``.

The pattern (after ``-tg-fuse-epilogue``, in either layout)::

    p = global_avg_pool(x)                                  # [N, 1, 1, C]
        -- or reduce_mean over H, W (keepdims, or then a reshape to [N, 1, 1, C])
    h = conv2d(p, w1, b1) {1x1, activation = act}           # [N, 1, 1, R]
    g = conv2d(h, w2, b2) {1x1, activation = sigmoid}       # [N, 1, 1, C]
        -- or conv2d(h, w2, b2) then hard_sigmoid {alpha, beta}
        -- or conv2d(h, w2, b2) then relu6(g + 3) / 6 (or * (1 / 6): Keras' MobileNetV3)
    y = mul(x, g)                                           # (either operand order)

becomes ``y = squeeze_excite(x, W1, B1, W2, B2) {activation = act, gate, gate_alpha,
gate_beta}`` with the filters as ``[C, R]`` / ``[R, C]`` matrices (absent biases as zeros).
The convolutions must be 1x1, stride 1, undilated, unpadded, ungrouped, with constant filters
(and biases) and no residual; ``p``, ``h``, ``g`` (and the ``hard_sigmoid``) must have no other
user; the result must have ``x``'s type, float32 or float64.  The matched ops are erased.
MobileNetV3 (hard-sigmoid gate) and EfficientNet (sigmoid gate, SiLU inside) exported from
torch have this shape; the op runs the block in one kernel
(:mod:`pytfrt.backends.cpu.squeeze_excite`) instead of five dispatches.  Runs after
differentiation (inference pipelines only), like the other fusion passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    functions,
    make_constant,
    new_op,
    replace,
    single_use,
    ttype,
)
from pytfrt.compiler.passes.epilogue import hard_sigmoid_chain
from pytfrt.compiler.types import np_dtype

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _fc(gm: GraphModule, conv: Operation, layout: str,
        dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, dict[str, Any]] | None:
    """``(matrix [in, out], bias [out], attrs)`` of a 1x1 conv that is a fully connected layer
    on a 1x1 image, or ``None``."""
    if conv.name != "tg.conv2d":
        return None
    a = attrs_of(conv)
    if (a["layout"] != layout or tuple(a["strides"]) != (1, 1) or tuple(a["dilations"]) != (1, 1)
            or tuple(a["pads"]) != (0, 0, 0, 0) or a["groups"] != 1
            or a["epilogue_operands"][1]):
        return None
    w = const_value(gm, conv.operands[1])
    if w is None or w.ndim != 4 or w.dtype != dtype:
        return None
    if layout == "NHWC":  # HWIO
        if w.shape[:2] != (1, 1):
            return None
        mat = w.reshape(w.shape[2], w.shape[3])
    else:  # OIHW
        if w.shape[2:] != (1, 1):
            return None
        mat = w.reshape(w.shape[0], w.shape[1]).T
    bias = np.zeros(mat.shape[1], dtype)
    if a["epilogue_operands"][0]:
        b = const_value(gm, conv.operands[2])
        if b is None or b.dtype != dtype or b.size != mat.shape[1]:
            return None
        bias = b.reshape(-1)
    return np.ascontiguousarray(mat), np.ascontiguousarray(bias), a


def _squeeze(pool: Operation) -> tuple[str, list[Operation]] | None:
    """``(layout, ops from the input to the pooled [N, 1, 1, C] / [N, C, 1, 1] value, last
    first)`` of a spatial mean: ``global_avg_pool``, or ``reduce_mean`` over H and W with
    ``keepdims`` or followed by a ``reshape`` to ``[N, 1, 1, C]`` (TensorFlow's graph of
    Keras' ``GlobalAveragePooling2D``), or ``None``."""
    if pool.name == "tg.global_avg_pool":
        return attrs_of(pool)["layout"], [pool]
    xt = ttype(pool.operands[0])
    if pool.name != "tg.reduce_mean" or xt.rank != 4:
        return None
    a = attrs_of(pool)
    axes = tuple(sorted(int(ax) % 4 for ax in a["axes"]))
    layouts: dict[tuple[int, ...], str] = {(1, 2): "NHWC", (2, 3): "NCHW"}
    layout = layouts.get(axes)
    if layout is None:
        return None
    if a["keepdims"]:
        return layout, [pool]
    rs = single_use(pool.results[0])
    if layout != "NHWC" or rs is None or rs.name != "tg.reshape" or len(rs.operands) != 1:
        return None
    shape = ttype(rs.results[0]).shape
    if (shape is None or len(shape) != 4 or xt.shape is None
            or tuple(shape[1:]) != (1, 1, xt.shape[3])):
        return None
    return layout, [rs, pool]


def _match(gm: GraphModule, pool: Operation) -> tuple[Operation, list[Operation], SSAValue,
                                                      dict[str, Any], list[np.ndarray]] | None:
    """``(mul, ops to erase, x, attrs, [W1, B1, W2, B2])`` of the block whose spatial mean
    starts at ``pool``."""
    x = pool.operands[0]
    xt = ttype(x)
    squeeze = _squeeze(pool)
    if squeeze is None or xt.dtype is None or np_dtype(xt.dtype) not in _FLOATS:
        return None
    dtype = np_dtype(xt.dtype)
    layout, pooled = squeeze
    p = pooled[0].results[0]
    c1 = single_use(p)
    fc1 = None if c1 is None else _fc(gm, c1, layout, dtype)
    if c1 is None or fc1 is None or c1.operands[0] is not p:
        return None
    c2 = single_use(c1.results[0])
    fc2 = None if c2 is None else _fc(gm, c2, layout, dtype)
    if c2 is None or fc2 is None or c2.operands[0] is not c1.results[0]:
        return None
    w1, b1, a1 = fc1
    w2, b2, a2 = fc2
    if w1.shape[1] != w2.shape[0] or w2.shape[1] != w1.shape[0]:
        return None
    attrs: dict[str, Any] = {"layout": layout, "activation": a1["activation"],
                             "alpha": float(a1["alpha"])}
    gate_op = c2
    erase = [c2, c1, *pooled]
    if a2["activation"] == "sigmoid":
        attrs["gate"] = "sigmoid"
    elif a2["activation"] == "none":
        hs = single_use(c2.results[0])
        chain = None if hs is None else hard_sigmoid_chain(gm, hs, c2.results[0])
        if chain is not None:  # relu6(g + 3) / 6: Keras' MobileNetV3
            attrs.update(gate="hard_sigmoid", gate_alpha=1.0 / 6.0, gate_beta=0.5)
            gate_op = chain[2]
            erase[:0] = reversed(chain)
        elif hs is not None and hs.name == "tg.hard_sigmoid":
            ha = attrs_of(hs)
            attrs.update(gate="hard_sigmoid", gate_alpha=float(ha["alpha"]),
                         gate_beta=float(ha["beta"]))
            gate_op = hs
            erase.insert(0, hs)
        else:
            return None
    else:
        return None
    mul = single_use(gate_op.results[0])
    if mul is None or mul.name != "tg.mul" or len(mul.operands) != 2:
        return None
    g = gate_op.results[0]
    if not ({mul.operands[0], mul.operands[1]} == {x, g} and x is not g):
        return None
    if ttype(mul.results[0]) != xt:
        return None
    return mul, erase, x, attrs, [w1, b1, w2, b2]


def fuse_squeeze_excite(gm: GraphModule) -> GraphModule:
    """Run the pass in place."""
    for f in functions(gm):
        for pool in list(f.body.block.ops):
            if pool.name not in ("tg.global_avg_pool", "tg.reduce_mean") or pool.parent is None:
                continue
            found = _match(gm, pool)
            if found is None:
                continue
            mul, erase, x, attrs, arrays = found
            block = mul.parent_block()
            assert block is not None
            consts = [make_constant(gm, a, "se") for a in arrays]
            for c in consts:
                block.insert_op_before(c, mul)
            se = new_op(gm, "squeeze_excite", [x] + [c.results[0] for c in consts], attrs,
                        mul.location)
            block.insert_op_before(se, mul)
            replace(mul, [se.results[0]])
            for op in erase:
                op.detach()
                op.erase()
    return gm
