"""``-tg-dnnl-blocked``: runs of NHWC convolutions on small images kept in oneDNN's
channel-blocked layout (``NCHW16c``, oneDNN's ``nChw16c``), with one ``reorder_layout`` where a
run starts and where a value leaves it.

Why: on images of at most :data:`pytfrt.backends.cpu._dnnl_blocked.BLOCKED_MAX_PIXELS` pixels
(ResNet-50's 14x14 and 7x7 stages) oneDNN 3.2's kernels on ``nChw16c`` (``jit_1x1`` /
``jit:avx512_core``) run 2-5% faster than its NHWC ``brgconv`` kernels, and at batch 1 a blocked
convolution splits over the threads into runs of whole 16-channel output blocks written in
place (``docs/benchmarks.md``, ``docs/kernels.md``).  oneDNN has only its reference kernel for a
convolution between NHWC and ``nChw16c``, so a run needs explicit reorders at its edges.

Which convolutions (:func:`_candidate`): ``tg.conv2d`` in ``NHWC``, float32, ``groups = 1``,
explicit pads (not ``SAME``), a constant filter, static H, W and channels, input and output
channels multiples of 16 and input and output images of at most ``BLOCKED_MAX_PIXELS`` pixels
(so a stage's strided entry from a larger image stays NHWC: reordering its large input would
cost more than its output) -- except a *strided entry* (``BLOCKED_STRIDED_ENTRY``): a 1x1
convolution without padding, of strides other than 1, from a larger image reads only every
``sh``-th row and ``sw``-th column, so its input is reordered subsampled (``reorder_layout
{strides = [sh, sw]}``, as many pixels as its output has) and it becomes a blocked 1x1
convolution of stride 1 (ResNet-50's stage-3 shortcut). A candidate with a window larger than
1x1 and an output of fewer than ``BLOCKED_WINDOW_MIN_PIXELS`` pixels (the 7x7 stage's 3x3
layers, where oneDNN's blocked kernel is 8-9% slower than ``brgconv`` on NHWC) is a *bridge*:
it stays NHWC, reading a reorder out of the run and feeding one back into it.
Then, until nothing changes, a candidate
whose result no other candidate (as its input or fused residual, or through a bridge) and no
``global_avg_pool`` reads is dropped (it would only be reordered back); finally every
connected run (bridges connect) of fewer than ``BLOCKED_MIN_CONVS`` blocked convolutions, or
of fewer than ``BLOCKED_MIN_MACS_PER_MOVED`` multiply-adds per element its reorders copy (the
7x7 projections of a mobile net, whose inputs come from depthwise layers), is dropped.  What
remains is rewritten:

* each convolution becomes ``conv2d {layout = "NCHW16c"}`` on blocked ``(N, C/16, H, W, 16)``
  values (filter, bias, activation and residual as they were);
* an NHWC value a blocked convolution reads (input or residual) gets one
  ``reorder_layout {src_layout = "NHWC", dst_layout = "NCHW16c"}`` after its definition,
  shared by all its blocked readers (a strided entry's input one with its ``strides``);
* a blocked result read by anything else gets one ``reorder_layout`` back to NHWC;
* a ``global_avg_pool`` of a blocked result reads it blocked; its ``(N, C/16, 1, 1, 16)`` result
  is reshaped to the NHWC ``(N, 1, 1, C)`` (the same bytes, no copy).

Off with ``PYTFRT_BLOCKED_CONV=0`` (or ``BLOCKED_MAX_PIXELS = 0``), and a no-op without oneDNN.
It runs in the default pipeline after ``-tg-fuse-small-graph``, before ``-tg-plan-buffers``
(whose in-place residual rule then applies to blocked convolutions as to NHWC ones).  Not
thread-safe (one pass at a time per module); raises ``GraphError`` only for a module that is
malformed already.
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue

from pytfrt import config
from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import (
    attrs_of,
    functions,
    new_op,
    producer,
    replace,
    ttype,
)

LAYOUT = "NCHW16c"


def _settings() -> tuple[int, int, int, int, bool] | None:
    """``(max pixels, min convolutions, min pixels of a blocked window, min multiply-adds per
    reordered element, strided entries)``, or ``None`` when the pass is off."""
    from pytfrt.backends.cpu import _dnnl_blocked, _dnnl_conv

    if not config.flag("PYTFRT_BLOCKED_CONV") or not _dnnl_conv.available():
        return None
    if _dnnl_blocked.BLOCKED_MAX_PIXELS <= 0:
        return None
    return (_dnnl_blocked.BLOCKED_MAX_PIXELS, _dnnl_blocked.BLOCKED_MIN_CONVS,
            _dnnl_blocked.BLOCKED_WINDOW_MIN_PIXELS, _dnnl_blocked.BLOCKED_MIN_MACS_PER_MOVED,
            bool(_dnnl_blocked.BLOCKED_STRIDED_ENTRY))


def _image_ok(v: SSAValue, max_pixels: int) -> bool:
    """A float32 NHWC value with static H, W, C, ``C % 16 == 0`` and ``H * W <= max_pixels``."""
    t = ttype(v)
    if t.dtype != "f32" or t.rank != 4 or t.shape is None:
        return False
    _, h, w, c = t.shape
    return (h is not None and w is not None and c is not None and c % 16 == 0
            and h * w <= max_pixels)


def _candidate(op: Operation, max_pixels: int, strided_entry: bool) -> bool:
    if op.name != "tg.conv2d" or len(op.results) != 1:
        return False
    a = attrs_of(op)
    if a["layout"] != "NHWC" or a["groups"] != 1 or a["padding"] == "SAME":
        return False
    if producer(op.operands[1], "tg.constant") is None:
        return False
    if not _image_ok(op.results[0], max_pixels):
        return False
    return _image_ok(op.operands[0], max_pixels) or (
        strided_entry and _entry_strides(op) is not None)


def _entry_strides(op: Operation) -> tuple[int, int] | None:
    """A *strided entry*'s strides: a 1x1 convolution without padding, of strides other than
    ``(1, 1)``, on an image of more than the blocked pixels (the input otherwise a candidate's),
    reads only every ``sh``-th row and ``sw``-th column -- a subsampling reorder of just those
    pixels into the blocked layout, then a 1x1 convolution of stride 1.  ``None`` for any
    other convolution."""
    a, shape = attrs_of(op), ttype(op.operands[1]).shape
    if shape is None or tuple(shape[:2]) != (1, 1) or any(a["pads"]):
        return None
    sh, sw = (int(s) for s in a["strides"])
    if (sh, sw) == (1, 1) or not _image_ok(op.operands[0], 1 << 62):
        return None
    return sh, sw


def _residual(op: Operation) -> SSAValue | None:
    """The fused residual operand of a ``tg.conv2d`` (its last operand), or ``None``."""
    return op.operands[-1] if attrs_of(op)["epilogue_operands"][1] else None


def _bridge(op: Operation, window_min_pixels: int) -> bool:
    """Whether a candidate stays NHWC inside a blocked run: a window larger than 1x1 (read
    from its filter's type) and an output of fewer than ``window_min_pixels`` pixels."""
    shape, out = ttype(op.operands[1]).shape, ttype(op.results[0]).shape
    assert shape is not None and out is not None  # (a candidate's: static)
    oh, ow = out[1] or 0, out[2] or 0
    return (shape[0] != 1 or shape[1] != 1) and oh * ow < window_min_pixels


def _blocked_reads(op: Operation, v: SSAValue, chosen: set[Operation],
                   bridges: set[Operation]) -> bool:
    """Whether ``op``'s use of ``v`` could read it blocked (a bridge: when a chosen
    convolution reads the bridge's result)."""
    if op in chosen:
        return op.operands[0] is v or _residual(op) is v
    if op in bridges:
        return op.operands[0] is v and any(
            _blocked_reads(u.operation, op.results[0], chosen, set())
            for u in op.results[0].uses)
    return op.name == "tg.global_avg_pool" and attrs_of(op)["layout"] == "NHWC"


def _choose(ops: list[Operation], max_pixels: int, min_convs: int, window_min_pixels: int,
            min_macs_per_moved: int, strided_entry: bool) -> set[Operation]:
    """The convolutions to rewrite (see the module docstring)."""
    chosen = {op for op in ops if _candidate(op, max_pixels, strided_entry)}
    bridges = {op for op in chosen if _bridge(op, window_min_pixels)}
    chosen -= bridges
    changed = True
    while changed:
        changed = False
        for op in list(chosen):
            if not any(_blocked_reads(u.operation, op.results[0], chosen, bridges)
                       for u in op.results[0].uses):
                chosen.discard(op)
                changed = True
    parent: dict[Operation, Operation] = {op: op for op in chosen}

    def root(op: Operation) -> Operation:
        while parent[op] is not op:
            parent[op] = parent[parent[op]]
            op = parent[op]
        return op

    for op in chosen:
        for v in (op.operands[0], _residual(op)):
            src = None if v is None else v.owner
            if isinstance(src, Operation) and src in bridges:  # one NHWC window between
                src = src.operands[0].owner
            if isinstance(src, Operation) and src in chosen:
                parent[root(src)] = root(op)
    sizes: dict[Operation, int] = {}
    macs: dict[Operation, int] = {}
    moved: dict[Operation, int] = {}
    """Per run: its convolutions, their multiply-adds per image, and the elements per image
    its reorders copy (values read into it, results read outside it)."""
    entering: set[SSAValue] = set()
    for op in chosen:
        r = root(op)
        sizes[r] = sizes.get(r, 0) + 1
        macs[r] = macs.get(r, 0) + _macs(op)
        for v in (op.operands[0], _residual(op)):
            if v is not None and v.owner not in chosen and v not in entering:
                entering.add(v)
                moved[r] = moved.get(r, 0) + _pixels_x_channels(v, _subsampled(op, v, max_pixels))
        if any(not (u.operation in chosen and u.operation.operands[0] is op.results[0]
                    or u.operation in chosen and _residual(u.operation) is op.results[0]
                    or u.operation.name == "tg.global_avg_pool")
               for u in op.results[0].uses):
            moved[r] = moved.get(r, 0) + _pixels_x_channels(op.results[0])
    return {op for op in chosen if sizes[root(op)] >= min_convs
            and macs[root(op)] >= min_macs_per_moved * moved.get(root(op), 0)}


def _subsampled(op: Operation, v: SSAValue, max_pixels: int) -> tuple[int, int]:
    """The strides with which a chosen convolution ``op`` reads ``v`` blocked: a strided
    entry's for its input (:func:`_entry_strides`), else ``(1, 1)``."""
    if op.operands[0] is not v or _image_ok(v, max_pixels):
        return (1, 1)
    return _entry_strides(op) or (1, 1)


def _pixels_x_channels(v: SSAValue, strides: tuple[int, int] = (1, 1)) -> int:
    """Elements per image of a static NHWC value (subsampled by ``strides``)."""
    shape = ttype(v).shape
    assert shape is not None  # (candidates' values: static)
    _, h, w, c = (d or 0 for d in shape)
    return -(-h // strides[0]) * -(-w // strides[1]) * c


def _macs(op: Operation) -> int:
    """Multiply-adds per image of a candidate convolution."""
    shape = ttype(op.operands[1]).shape
    assert shape is not None
    kh, kw, cin, _ = (d or 0 for d in shape)
    return kh * kw * cin * _pixels_x_channels(op.results[0])


def _insert_after_def(block: Block, v: SSAValue, op: Operation) -> None:
    owner = v.owner
    if isinstance(owner, Operation):
        block.insert_op_after(op, owner)
    else:
        first = block.first_op
        assert first is not None
        block.insert_op_before(op, first)


def _rewrite(gm: GraphModule, block: Block, chosen: set[Operation], max_pixels: int) -> None:
    blocked: dict[SSAValue, SSAValue] = {}
    """An NHWC value -> its blocked form (a rewritten convolution's result or a reorder)."""
    subsampled: dict[tuple[SSAValue, tuple[int, int]], SSAValue] = {}
    """An NHWC value and strides -> its subsampling reorder's result (strided entries)."""
    order = [op for op in block.ops if op in chosen]

    def blocked_of(v: SSAValue, strides: tuple[int, int] = (1, 1)) -> SSAValue:
        if strides != (1, 1):
            if (v, strides) not in subsampled:
                r = new_op(gm, "reorder_layout", [v], {"src_layout": "NHWC",
                                                       "dst_layout": LAYOUT, "strides": strides})
                _insert_after_def(block, v, r)
                subsampled[v, strides] = r.results[0]
            return subsampled[v, strides]
        if v not in blocked:
            r = new_op(gm, "reorder_layout", [v], {"src_layout": "NHWC", "dst_layout": LAYOUT})
            _insert_after_def(block, v, r)
            blocked[v] = r.results[0]
        return blocked[v]

    new_ops: dict[Operation, Operation] = {}
    for op in order:
        a = attrs_of(op)
        attrs = {k: v for k, v in a.items() if k != "padding"}
        attrs["layout"] = LAYOUT
        operands = list(op.operands)
        step = _subsampled(op, operands[0], max_pixels)
        if step != (1, 1):  # the reorder subsamples: a 1x1 convolution of stride 1 on it
            attrs["strides"] = (1, 1)
        operands[0] = blocked_of(operands[0], step)
        if a["epilogue_operands"][1]:
            operands[-1] = blocked_of(operands[-1])
        new = new_op(gm, "conv2d", operands, attrs, op.location)
        block.insert_op_before(new, op)
        blocked[op.results[0]] = new.results[0]
        new_ops[op] = new
    for pool in [op for op in block.ops if op.name == "tg.global_avg_pool"]:
        x = pool.operands[0]
        if not (isinstance(x.owner, Operation) and x.owner in chosen):
            continue
        if attrs_of(pool)["layout"] != "NHWC":
            continue
        c = ttype(x).shape[3]  # type: ignore[index]
        p = new_op(gm, "global_avg_pool", [blocked[x]], {"layout": LAYOUT}, pool.location)
        block.insert_op_before(p, pool)
        flat = new_op(gm, "reshape", [p.results[0]], {"shape": (-1, 1, 1, c)}, pool.location)
        block.insert_op_before(flat, pool)
        replace(pool, [flat.results[0]])
    for op in reversed(order):  # later readers are rewritten and erased first
        new = new_ops[op]
        if op.results[0].uses:  # what else reads it gets it back in NHWC
            back = new_op(gm, "reorder_layout", [new.results[0]],
                          {"src_layout": LAYOUT, "dst_layout": "NHWC"}, op.location)
            block.insert_op_after(back, new)
            replace(op, [back.results[0]])
        else:
            op.detach()
            op.erase()


def dnnl_blocked(gm: GraphModule) -> GraphModule:
    """Run the pass in place; returns ``gm``."""
    settings = _settings()
    if settings is None:
        return gm
    for f in functions(gm):
        block = f.body.block
        chosen = _choose(list(block.ops), *settings)
        if chosen:
            _rewrite(gm, block, chosen, settings[0])
    return gm


__all__ = ["dnnl_blocked"]
