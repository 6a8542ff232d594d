"""``-tg-conv-nchw-input``: a convolution reads the NCHW image its input transpose copies.

Why: ``-tg-layout-nhwc`` leaves an ONNX CNN with one ``transpose(x, [0, 2, 3, 1])`` at its
input, an NCHW -> NHWC copy of the caller's image (MobileNetV3-small at batch 1: 600 KB, ~0.13
ms of a ~2.4 ms call on one thread), read only by the first convolution.  oneDNN's fast kernel
for that convolution can read the NCHW image itself and write NHWC when the convolution has
exactly 16 output channels (``docs/kernels.md``), so the copy goes: MobileNetV3-small on one
thread 0.95-0.96x the time (``docs/benchmarks.md``).  That kernel runs as one part (a band of
NCHW rows is not dense: oneDNN's reference kernel), so on two threads it measured no faster
than the transpose and the convolution split in two: the pass only rewrites when pytfrt runs
on one thread (``PYTFRT_NUM_THREADS=1``, :func:`pytfrt.backends.cpu._parallel.num_threads`).

What it rewrites: ``y = conv2d {layout = "NHWC"}(transpose(x, [0, 2, 3, 1]), w[, bias])``
with the transpose read by nothing else, a float32 constant filter with 16 output channels,
``groups = 1``, explicit pads (not ``SAME``) and no fused residual becomes
``y = conv2d {layout = "NCHW>NHWC"}(x, w[, bias])`` (same filter, bias and activation; the
result is the same NHWC value); the transpose is erased.  At run time
(:class:`pytfrt.backends.cpu.conv.StemConv`) a shape oneDNN cannot run this way falls back to
the transpose and the NHWC convolution.

Off with ``PYTFRT_CONV_NCHW_INPUT=0``; a no-op without oneDNN or on more than one thread.  It
runs in the default pipeline after ``-tg-fuse-small-graph`` (the epilogue is fused by then),
before ``-tg-dnnl-blocked``.  Not thread-safe (one pass at a time per module).
"""

from __future__ import annotations

from xdsl.ir import Operation

from pytfrt import config
from pytfrt.compiler.builder import GraphModule
from pytfrt.compiler.passes.common import attrs_of, functions, new_op, producer, replace, ttype

LAYOUT = "NCHW>NHWC"
CHANNELS = 16
"""The output channels for which oneDNN reads an NCHW source into NHWC with a fast kernel."""


def _candidate(op: Operation) -> Operation | None:
    """The transpose a convolution can absorb, or ``None``."""
    if op.name != "tg.conv2d" or len(op.results) != 1:
        return None
    a = attrs_of(op)
    if (a["layout"] != "NHWC" or a["groups"] != 1 or a["padding"] == "SAME"
            or a["epilogue_operands"][1]):
        return None
    t = producer(op.operands[0], "tg.transpose")
    if t is None or tuple(attrs_of(t)["perm"]) != (0, 2, 3, 1) or len(list(t.results[0].uses)) != 1:
        return None
    w = ttype(op.operands[1])
    if (producer(op.operands[1], "tg.constant") is None or w.shape is None
            or w.shape[3] != CHANNELS or w.dtype != "f32"):
        return None
    return t


def conv_nchw_input(gm: GraphModule) -> GraphModule:
    """Run the pass in place; returns ``gm``."""
    from pytfrt.backends.cpu import _dnnl_conv, _parallel

    if (not config.flag("PYTFRT_CONV_NCHW_INPUT") or not _dnnl_conv.available()
            or _parallel.num_threads() > 1):
        return gm
    for f in functions(gm):
        block = f.body.block
        for op in list(block.ops):
            t = _candidate(op)
            if t is None:
                continue
            attrs = {k: v for k, v in attrs_of(op).items() if k != "padding"}
            attrs["layout"] = LAYOUT
            new = new_op(gm, "conv2d", [t.operands[0], *op.operands[1:]], attrs, op.location)
            block.insert_op_before(new, op)
            replace(op, [new.results[0]])
            t.detach()
            t.erase()
    return gm
