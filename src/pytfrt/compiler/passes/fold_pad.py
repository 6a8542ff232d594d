"""``-tg-fold-pad``: fold a constant zero ``pad`` into the padding of the convolutions (and
max pools) that read it.

Keras' ``ZeroPadding2D`` before a ``VALID`` convolution (ResNet's 7x7 stem) or before a
``VALID`` max pool (ResNet's 3x3/2 pool) makes a padded copy of the activation that the next
op then reads once; the op can pad by itself (``pads`` of ``docs/graph_dialect.md``), and the
convolution kernels do it without a copy (``docs/kernels.md``).  Pattern::

    y = pad(x) {mode = "constant", value = 0, pads}      # spatial dims only, all >= 0
    conv2d(y, w, ...) {pads = p}                         # explicit pads (not "SAME")
        -> conv2d(x, w, ...) {pads = p + pad's spatial pads}

A convolution's zero padding is exactly a zero ``pad``.  A max pool pads with -infinity, which
equals a zero pad only when every value is >= 0 and every window still holds a real element:
the pool folds only if ``x`` is made by an op whose activation is ``relu`` or ``relu6`` (a fused
``conv2d``/``matmul`` epilogue, or ``tg.relu``/``tg.relu6``), its dilations are 1, ``ceil_mode``
is off and every combined pad is smaller than the window.  The pad's pads may be its attribute
or a constant operand.  Users of ``y`` that do not fit keep reading the ``pad``, which is
erased once nothing uses it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation, SSAValue

from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    const_value,
    functions,
    new_op,
    replace,
    ttype,
    users,
)

_NONNEG_ACTIVATIONS = ("relu", "relu6")


def _spatial_pads(gm: GraphModule, pad: Operation, layout: str) -> tuple[int, ...] | None:
    """``(top, bottom, left, right)`` of a zero constant pad of a rank-4 value in ``layout``
    that pads nothing but the spatial dims, else ``None``."""
    a = attrs_of(pad)
    if a["mode"] != "constant" or a["value"] != 0.0:
        return None
    if len(pad.operands) > 1:
        c = const_value(gm, pad.operands[1])
        if c is None:
            return None
        pads: Sequence[int] = [int(v) for v in np.asarray(c).reshape(-1)]
    else:
        pads = list(a["pads"])
    if len(pads) != 8 or min(pads) < 0:
        return None
    h, w = (1, 2) if layout == "NHWC" else (2, 3)
    if any(pads[i] or pads[i + 4] for i in range(4) if i not in (h, w)):
        return None
    return pads[h], pads[h + 4], pads[w], pads[w + 4]


def _nonnegative(v: SSAValue) -> bool:
    """Whether ``v`` is the output of a ReLU-like activation (every element >= 0)."""
    op = v.owner
    if not isinstance(op, Operation):
        return False
    if op.name in ("tg.relu", "tg.relu6"):
        return True
    if op.name in ("tg.conv2d", "tg.matmul"):
        return attrs_of(op)["activation"] in _NONNEG_ACTIVATIONS
    return False


def _foldable(user: Operation, y: SSAValue, x: SSAValue) -> bool:
    if user.operands[0] is not y or any(v is y for v in user.operands[1:]):
        return False
    a = attrs_of(user)
    if a["padding"] == "SAME":
        return False
    if user.name == "tg.conv2d":
        return True
    if user.name != "tg.max_pool2d":
        return False
    return (_nonnegative(x) and not a["ceil_mode"] and tuple(a["dilations"]) == (1, 1))


def _fold_one(gm: GraphModule, pad: Operation) -> bool:
    y, x = pad.results[0], pad.operands[0]
    changed = False
    for user in list(dict.fromkeys(users(y))):
        if user.name not in ("tg.conv2d", "tg.max_pool2d") or not _foldable(user, y, x):
            continue
        a = attrs_of(user)
        extra = _spatial_pads(gm, pad, a["layout"])
        if extra is None:
            continue
        pads = tuple(int(p) + int(e) for p, e in zip(a["pads"], extra, strict=True))
        if user.name == "tg.max_pool2d":
            kh, kw = a["ksize"]
            if max(pads[:2]) >= kh or max(pads[2:]) >= kw:
                continue
        attrs = {k: v for k, v in a.items() if k != "padding"}
        attrs["pads"] = pads
        new = new_op(gm, user.name[3:], [x, *user.operands[1:]], attrs, user.location)
        block = user.parent_block()
        assert block is not None
        block.insert_op_before(new, user)
        replace(user, list(new.results))
        changed = True
    if not list(y.uses):
        pad.detach()
        pad.erase()
    return changed


def fold_pad(gm: GraphModule) -> GraphModule:
    """Run the pass in place; returns ``gm``."""
    for f in functions(gm):
        for op in list(f.body.block.ops):
            if op.name == "tg.pad" and ttype(op.results[0]).rank == 4:
                _fold_one(gm, op)
    return gm


__all__ = ["fold_pad"]
