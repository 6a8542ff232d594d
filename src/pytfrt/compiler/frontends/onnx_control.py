"""ONNX control flow (``If``, ``Loop``, ``Scan``) -> ``tg.if`` / ``tg.while`` / inline bodies.

ONNX bodies are subgraphs that read outer values by name; the graph dialect's bodies are
functions of the module (``docs/graph_dialect.md``, "Control flow").  For each body this module
collects its free names (recursively through nested subgraphs): those known at import time are
visible to the body's importer as constants, the others become explicit function arguments
passed by the ``tg.if`` / ``tg.while`` op.

* ``If`` with a condition known at import time is imported inline (the other branch is
  dropped); otherwise both branches become functions ``@<node>_then`` / ``@<node>_else``.
* ``Loop`` becomes ``tg.while`` over ``(i, max_trip_count, keep_going, carried..., free...)``:
  the condition function computes ``keep_going and i < max_trip_count``, the body function runs
  the ONNX body and increments ``i``.  Carried values keep their rank but get dynamic dims (an
  iteration may change them).  A loop with scan outputs or carried sequences is unrolled
  inline instead (its trip count and condition must be known at import; the backend
  specialises on graph inputs that hold them).
* ``Scan`` (and Scan-8 with its batch axis) is imported unrolled: its body once per iteration,
  inline, each scan input sliced with ``gather`` and each scan output stacked with ``concat``
  (the length must be known at import time, at most ``_SCAN_UNROLL_LIMIT`` iterations).

Handlers registered in :data:`pytfrt.compiler.frontends.onnx_mapping.ONNX_OPS` at import.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from pytfrt.compiler.frontends.onnx_mapping import (
    EMPTY,
    OnnxGraphImporter,
    Out,
    SeqOut,
    onnx_op,
)

if TYPE_CHECKING:  # pragma: no cover
    from pytfrt.compiler.builder import Value


def free_names(graph: Any) -> list[str]:
    """Names ``graph`` reads but does not define (in first-use order, nested bodies included)."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    used: list[str] = []

    def use(name: str) -> None:
        if name and name not in defined and name not in used:
            used.append(name)

    for node in graph.node:
        for n in node.input:
            use(n)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                for n in free_names(sub):
                    use(n)
        defined.update(node.output)
    for o in graph.output:
        use(o.name)
    return used


def _function_name(imp: OnnxGraphImporter, node: Any, tag: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", node.name or node.output[0]).strip("_") or "body"
    name = f"onnx_{base}_{tag}"
    k = 1
    while name in imp.gb.functions:
        k += 1
        name = f"onnx_{base}_{tag}{k}"
    return name


def _scalar_bool(imp: OnnxGraphImporter, v: Any) -> Any:
    if v.dtype != "i1":
        v = imp.op("cast", [v], to="i1")
    if v.shape != ():
        v = imp.op("reshape", [v], shape=[])
    return v


def _runtime_free(imp: OnnxGraphImporter, graphs: list[Any]) -> list[str]:
    names: list[str] = []
    for g in graphs:
        for n in free_names(g):
            if n not in imp.known and n not in names:
                names.append(n)
    return names


@onnx_op("If", note="`if` with `@then`/`@else` functions; a known condition: inlined")
def _if(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    attrs = {a.name: a for a in node.attribute}
    branches = [attrs["then_branch"].g, attrs["else_branch"].g]
    known = imp.known_input(node, 0)
    if known is not None:
        branch = branches[0] if bool(np.asarray(known).reshape(-1)[0]) else branches[1]
        return inline_body(imp, branch, [])
    if any(o.type.HasField("sequence_type") or o.type.HasField("optional_type")
           for b in branches for o in b.output):
        imp.unsupported(node, "sequence or optional results under a condition known only at "
                        "run time", [0])
    free = _runtime_free(imp, branches)
    args = [imp.value(n) for n in free]
    names = []
    for tag, graph in zip(("then", "else"), branches, strict=True):
        fname = _function_name(imp, node, tag)
        fb = imp.gb.function(
            fname, inputs=[(n, v.shape, v.dtype) for n, v in zip(free, args, strict=True)]
        )
        sub = imp.child(graph, fb)
        sub.values.update(zip(free, fb.arguments, strict=True))
        sub.import_body([o.name for o in graph.output])
        names.append(fname)
    cond = _scalar_bool(imp, imp.input(node, 0))
    res = imp.op(
        "if", [cond, *args], then_branch=names[0], else_branch=names[1], n_results=len(node.output)
    )
    return list(res) if isinstance(res, list) else [res]


@onnx_op("Loop", note="`while` over (i, M, cond, carried..., free...); with scan outputs or "
         "carried sequences: unrolled inline (a known trip count and condition)")
def _loop(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    body = next(a.g for a in node.attribute if a.name == "body")
    n_carried = len(node.input) - 2
    unrolled = _loop_unrolled(imp, node, body, n_carried)
    if unrolled is not None:
        return unrolled
    if len(body.output) != 1 + n_carried:
        imp.unsupported(node, "scan outputs (with a trip count known only at run time)", [0])
    if any(node.input[2 + k] in imp.seqs for k in range(n_carried)):
        imp.unsupported(node, "a carried sequence with a trip count known only at run time",
                        [0, 1])
    i0 = imp.constant(np.asarray(0, np.int64))
    if imp.has(node, 0):
        m = imp.input(node, 0)
        m = imp.op("reshape", [imp.op("cast", [m], to="i64") if m.dtype != "i64" else m], shape=[])
    else:
        m = imp.constant(np.asarray(np.iinfo(np.int64).max, np.int64))
    keep = (
        _scalar_bool(imp, imp.input(node, 1))
        if imp.has(node, 1)
        else imp.constant(np.asarray(True))
    )
    carried = [imp.input(node, 2 + k) for k in range(n_carried)]
    free = _runtime_free(imp, [body])
    free_vals = [imp.value(n) for n in free]
    loop_vals = [i0, m, keep, *carried, *free_vals]
    specs: list[tuple[str, Any, str]] = [
        ("i", (), "i64"),
        ("max_trip_count", (), "i64"),
        ("keep_going", (), "i1"),
    ]
    specs += [
        (f"v{k}", None if v.shape is None else (None,) * len(v.shape), v.dtype)
        for k, v in enumerate(carried)
    ]
    specs += [(n, v.shape, v.dtype) for n, v in zip(free, free_vals, strict=True)]

    cname = _function_name(imp, node, "cond")
    cf = imp.gb.function(cname, inputs=specs)
    i, mm, k = cf.arguments[:3]
    cf.returns([cf.op("logical_and", [k, cf.op("less", [i, mm])])])

    bname = _function_name(imp, node, "body")
    bf = imp.gb.function(bname, inputs=specs)
    sub = imp.child(body, bf)
    b_i, b_m, b_k = bf.arguments[:3]
    b_carried = bf.arguments[3 : 3 + n_carried]
    b_free = bf.arguments[3 + n_carried :]
    names = [x.name for x in body.input]
    sub.values[names[0]] = b_i
    sub.values[names[1]] = b_k
    sub.values.update(zip(names[2:], b_carried, strict=True))
    sub.values.update(zip(free, b_free, strict=True))
    sub.import_nodes()
    one = bf.constant(np.asarray(1, np.int64))
    outs = [bf.op("add", [b_i, one]), b_m, _scalar_bool(sub, sub.value(body.output[0].name))]
    for k_, o in enumerate(body.output[1:]):
        v = sub.value(o.name)
        outs.append(v if v.dtype == specs[3 + k_][2] else bf.op("cast", [v], to=specs[3 + k_][2]))
    outs += list(b_free)
    bf.returns(outs)
    res = imp.op("while", loop_vals, cond=cname, body=bname, n_results=len(loop_vals))
    return list(res[3 : 3 + n_carried])


_SCAN_UNROLL_LIMIT = 1024
"""The longest scan (iterations, times the batch of a Scan-8) imported by unrolling."""


def inline_body(imp: OnnxGraphImporter, body: Any, args: list[Out]) -> list[Out]:
    """``body`` (a subgraph) imported inline on ``args`` (one per body input: Values, known
    arrays or sequences); its outputs.  One iteration of an unrolled Scan/Loop/SequenceMap."""
    sub = imp.child(body, imp.f)
    sub.values = dict(imp.values)
    for spec, v in zip(body.input, args, strict=True):
        sub.partial.pop(spec.name, None)
        for table in (sub.known, sub.values, sub.seqs):
            table.pop(spec.name, None)
        if isinstance(v, SeqOut):
            sub.seqs[spec.name] = v
        elif isinstance(v, np.ndarray | np.generic):
            sub.known[spec.name] = np.asarray(v)
        else:
            sub.values[spec.name] = v
    sub.import_nodes()
    return [_result(sub, o.name) for o in body.output]


def _result(sub: OnnxGraphImporter, name: str) -> Out:
    if name in sub.empties:
        return EMPTY
    if name in sub.seqs:
        return sub.seqs[name]
    return sub.known[name] if name in sub.known else sub.value(name)


def _scan_length(imp: OnnxGraphImporter, node: Any, v: Value, axis: int) -> int:
    n = None if v.shape is None else v.shape[axis]
    if n is None:
        imp.unsupported(node, "a scan over a length known only at run time")
    return int(n)


def _take(imp: OnnxGraphImporter, v: Value, axis: int, t: int) -> Value:
    """``v``'s slice ``t`` along ``axis`` (the axis removed)."""
    return imp.op("gather", [v, imp.constant(np.asarray(t, np.int64), "scan_t")], axis=axis)


def _stack(imp: OnnxGraphImporter, parts: list[Out], axis: int) -> Value:
    vals = [imp.op("expand_dims", [p if not isinstance(p, np.ndarray) else imp.constant(p)],
                   axis=axis) for p in parts]
    return vals[0] if len(vals) == 1 else imp.op("concat", vals, axis=axis)


def _run_scan(imp: OnnxGraphImporter, node: Any, body: Any, states: list[Out],
              scans: list[Value], in_axes: list[int], in_rev: list[int],
              out_axes: list[int], out_rev: list[int]) -> list[Out]:
    """The scan unrolled: final states, then the scan outputs stacked along their axes."""
    lengths = {_scan_length(imp, node, v, a) for v, a in zip(scans, in_axes, strict=True)}
    if len(lengths) != 1:
        imp.unsupported(node, f"scan inputs of different lengths {sorted(lengths)}")
    (n,) = lengths
    if n == 0 or n > _SCAN_UNROLL_LIMIT:
        imp.unsupported(node, f"a scan of {n} iterations (imported unrolled: 1 to "
                              f"{_SCAN_UNROLL_LIMIT})")
    n_k = len(body.output) - len(states)
    steps: list[list[Out]] = [[] for _ in range(n_k)]
    for t in range(n):
        slices = [_take(imp, v, a, n - 1 - t if r else t)
                  for v, a, r in zip(scans, in_axes, in_rev, strict=True)]
        outs = inline_body(imp, body, [*states, *slices])
        states = outs[: len(states)]
        for k in range(n_k):
            steps[k].append(outs[len(states) + k])
    results: list[Out] = list(states)
    for k in range(n_k):
        parts = steps[k][::-1] if out_rev[k] else steps[k]
        rank = (len(parts[0].shape) if isinstance(parts[0], np.ndarray)
                else len(_known_rank(imp, node, parts[0])))
        ax = out_axes[k] + rank + 1 if out_axes[k] < 0 else out_axes[k]
        results.append(_stack(imp, parts, ax))
    return results


def _known_rank(imp: OnnxGraphImporter, node: Any, v: Value) -> tuple[Any, ...]:
    if v.shape is None:
        imp.unsupported(node, "a scan output of unknown rank")
    return tuple(v.shape)


@onnx_op("Scan", note="unrolled inline (a static length of at most 1024 iterations)")
def _scan(imp: OnnxGraphImporter, node: Any) -> list[Out]:
    a = imp.attrs(node)
    body = next(x.g for x in node.attribute if x.name == "body")
    m = int(a["num_scan_inputs"])
    if imp.opset < 9:  # Scan-8: input 0 is sequence_lens; axis 0 is a batch axis
        return _scan8(imp, node, body, m, a)
    n_state = len(node.input) - m
    states: list[Out] = [imp.known_input(node, i) if imp.known_input(node, i) is not None
                         else imp.input(node, i) for i in range(n_state)]
    scans = [imp.input(node, n_state + j) for j in range(m)]
    n_k = len(body.output) - n_state
    in_axes = [int(x) for x in a.get("scan_input_axes", [0] * m)]
    in_axes = [x + len(_known_rank(imp, node, v)) if x < 0 else x
               for x, v in zip(in_axes, scans, strict=True)]
    return _run_scan(
        imp, node, body, states, scans, in_axes,
        [int(x) for x in a.get("scan_input_directions", [0] * m)],
        [int(x) for x in a.get("scan_output_axes", [0] * n_k)],
        [int(x) for x in a.get("scan_output_directions", [0] * n_k)],
    )


def _scan8(imp: OnnxGraphImporter, node: Any, body: Any, m: int, a: dict[str, Any]
           ) -> list[Out]:
    n_state = len(node.input) - 1 - m
    states = [imp.input(node, 1 + i) for i in range(n_state)]
    scans = [imp.input(node, 1 + n_state + j) for j in range(m)]
    batch = _scan_length(imp, node, scans[0], 0)
    length = _scan_length(imp, node, scans[0], 1)
    lens = imp.known_input(node, 0)
    if imp.has(node, 0) and (lens is None or np.any(np.asarray(lens) != length)):
        imp.unsupported(node, "sequence_lens other than the full length", [0])
    if batch * length > _SCAN_UNROLL_LIMIT:
        imp.unsupported(node, f"a batched scan of {batch} x {length} iterations")
    n_k = len(body.output) - n_state
    rev = [int(x) for x in a.get("directions", [0] * m)]
    per_batch: list[list[Out]] = []
    for b in range(batch):
        per_batch.append(_run_scan(
            imp, node, body, [_take(imp, s, 0, b) for s in states],
            [_take(imp, v, 0, b) for v in scans], [0] * m, rev, [0] * n_k, [0] * n_k))
    return [_stack(imp, [row[k] for row in per_batch], 0) for k in range(n_state + n_k)]


def _loop_unrolled(imp: OnnxGraphImporter, node: Any, body: Any, n_carried: int
                   ) -> list[Out] | None:
    """``Loop`` imported unrolled, when its trip count is known (at most
    ``_SCAN_UNROLL_LIMIT``) and the body either carries a sequence or has scan outputs;
    the condition must then be known at every iteration.  ``None``: not this case."""
    n_scan = len(body.output) - 1 - n_carried
    carries_seq = any(node.input[2 + k] in imp.seqs for k in range(n_carried))
    m = imp.known_input(node, 0)
    if m is None or not (n_scan or carries_seq):
        return None
    trips = int(np.asarray(m).reshape(-1)[0])
    if trips > _SCAN_UNROLL_LIMIT:
        return None
    cond = imp.known_input(node, 1) if imp.has(node, 1) else np.asarray(True)
    carried: list[Out] = [
        imp.seqs[node.input[2 + k]] if node.input[2 + k] in imp.seqs
        else (imp.known_input(node, 2 + k) if imp.known_input(node, 2 + k) is not None
              else imp.input(node, 2 + k))
        for k in range(n_carried)]
    scans: list[list[Out]] = [[] for _ in range(n_scan)]
    for i in range(trips):
        if cond is None or isinstance(cond, SeqOut) or not isinstance(cond, np.ndarray):
            imp.unsupported(node, "a loop condition known only at run time (unrolling)",
                            [1] if i == 0 else [])
        if not bool(np.asarray(cond).reshape(-1)[0]):
            break
        outs = inline_body(imp, body, [np.asarray(i, np.int64), cond, *carried])
        cond = outs[0]
        carried = outs[1 : 1 + n_carried]
        for k in range(n_scan):
            scans[k].append(outs[1 + n_carried + k])
    results: list[Out] = list(carried)
    for parts in scans:
        if not parts:
            imp.unsupported(node, "scan outputs of a loop that runs no iteration")
        results.append(_stack(imp, parts, 0))
    return results
