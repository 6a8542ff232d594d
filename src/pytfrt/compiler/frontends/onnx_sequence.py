"""ONNX sequence operators, imported with every sequence's length known at import time.

A sequence is a :class:`~pytfrt.compiler.frontends.onnx_mapping.SeqOut` while the graph is
imported (a list of ``tg`` Values or known arrays); the compiled graph only holds tensors.
So ``SequenceConstruct``/``Insert``/``Erase``/``At``/``Length``/``Empty``,
``SplitToSequence``, ``ConcatFromSequence`` and ``SequenceMap`` (its body imported once per
element) are list operations at import, and positions and split sizes must be known then
(graph inputs holding them are specialised on by the backend).  Sequence graph inputs and
outputs are flattened into one argument / result per element (``name#k``): the backend
specialises on an input sequence's length and regroups the outputs.

Handlers registered in :data:`~pytfrt.compiler.frontends.onnx_mapping.ONNX_OPS` on import.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytfrt.compiler.frontends.onnx_mapping import (
    EMPTY,
    OnnxGraphImporter,
    Out,
    SeqOut,
    _dims,
    onnx_op,
)


def _tensor(imp: OnnxGraphImporter, node: Any, i: int) -> Out:
    k = imp.known_input(node, i)
    return k if k is not None else imp.input(node, i)


def _position(imp: OnnxGraphImporter, node: Any, i: int, n: int, insert: bool) -> int:
    """Input ``i`` as a position in a sequence of ``n`` (default: the end)."""
    if not imp.has(node, i):
        return n if insert else n - 1
    p = int(np.asarray(imp.const_input(node, i, "position")).reshape(-1)[0])
    p = p + n if p < 0 else p
    if not 0 <= p <= (n if insert else n - 1):
        imp.unsupported(node, f"position {p} out of range for a sequence of {n}")
    return p


@onnx_op("SequenceConstruct", note="a sequence known at import (a list of its elements)")
def _construct(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    return [SeqOut(_tensor(imp, node, i) for i in range(len(node.input)))]


@onnx_op("SequenceEmpty", note="an empty sequence")
def _empty(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    return [SeqOut()]


@onnx_op("SequenceInsert", note="list insert (a known position)")
def _insert(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    seq = SeqOut(imp.sequence(node, 0))
    seq.insert(_position(imp, node, 2, len(seq), True), _tensor(imp, node, 1))
    return [seq]


@onnx_op("SequenceErase", note="list erase (a known position)")
def _erase(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    seq = SeqOut(imp.sequence(node, 0))
    del seq[_position(imp, node, 1, len(seq), False)]
    return [seq]


@onnx_op("SequenceAt", note="the element at a known position")
def _at(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    seq = imp.sequence(node, 0)
    return [seq[_position(imp, node, 1, len(seq), False)]]


@onnx_op("SequenceLength", note="a known length")
def _length(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    return [np.asarray(len(imp.sequence(node, 0)), np.int64)]


@onnx_op("SplitToSequence", note="`slice`s along `axis` (known split sizes)")
def _split_to_sequence(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    a = imp.attrs(node)
    x = imp.input(node, 0)
    dims = _dims(imp, x)
    axis = int(a.get("axis", 0))
    axis = axis + len(dims) if axis < 0 else axis
    n = dims[axis]
    if n is None:
        imp.unsupported(node, "splitting an axis of a size known only at run time")
    if imp.has(node, 1):
        split = np.asarray(imp.const_input(node, 1, "split")).astype(np.int64)
        if split.ndim == 0:
            step = int(split)
            sizes = [min(step, n - s) for s in range(0, n, step)]
        else:
            sizes = [int(v) for v in split.reshape(-1)]
        keep = True
    else:
        sizes = [1] * n
        keep = bool(a.get("keepdims", 1))
    if sum(sizes) != n:
        imp.unsupported(node, f"split sizes {sizes} do not add up to {n}")
    out = SeqOut()
    start = 0
    for size in sizes:
        part = imp.op("slice", [x], starts=[start], ends=[start + size], axes=[axis],
                      steps=[1])
        out.append(part if keep else imp.op("squeeze", [part], axes=[axis]))
        start += size
    return [out]


@onnx_op("ConcatFromSequence", note="`concat` (or `expand_dims` + `concat` for new_axis)")
def _concat_from_sequence(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    a = imp.attrs(node)
    seq = imp.sequence(node, 0)
    if not seq:
        imp.unsupported(node, "an empty sequence")
    vals = [imp.element(e) for e in seq]
    rank = len(_dims(imp, vals[0])) + int(bool(a.get("new_axis", 0)))
    axis = int(a["axis"])
    axis = axis + rank if axis < 0 else axis
    if a.get("new_axis", 0):
        vals = [imp.op("expand_dims", [v], axis=axis) for v in vals]
    return [vals[0] if len(vals) == 1 else imp.op("concat", vals, axis=axis)]


@onnx_op("SequenceMap", note="the body imported once per element (a known length)")
def _sequence_map(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    from pytfrt.compiler.frontends.onnx_control import inline_body

    body = next(x.g for x in node.attribute if x.name == "body")
    ins: list[Any] = []
    lengths = set()
    for i, name in enumerate(node.input):
        if name in imp.seqs:
            ins.append(imp.seqs[name])
            lengths.add(len(imp.seqs[name]))
        else:
            ins.append(_tensor(imp, node, i))
    if len(lengths) != 1:
        imp.unsupported(node, "input sequences of different lengths")
    (n,) = lengths
    outs = [SeqOut() for _ in body.output]
    for k in range(n):
        args = [x[k] if isinstance(x, SeqOut) else x for x in ins]
        for o, r in zip(outs, inline_body(imp, body, args), strict=True):
            o.append(r)
    return list(outs)


def _present(imp: OnnxGraphImporter, node: Any) -> Out:
    """Input 0 of an optional op: a tensor or sequence that is there (the element of an empty
    optional is an error)."""
    if not imp.has(node, 0):
        imp.unsupported(node, "the element of an empty optional")
    name = node.input[0]
    return SeqOut(imp.seqs[name]) if name in imp.seqs else _tensor(imp, node, 0)


@onnx_op("Optional", "OptionalGetElement",
         note="forwarded: a present optional is its value; an empty one is known empty")
def _optional(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    if node.op_type == "Optional" and not imp.has(node, 0):
        return [EMPTY]
    return [_present(imp, node)]


@onnx_op("OptionalHasElement", note="known: true for a value, false without an input")
def _optional_has(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    if not imp.has(node, 0):  # no input: the empty optional
        return [np.asarray(False)]
    _present(imp, node)
    return [np.asarray(True)]
