"""How the two threads share each split convolution of a compiled model: the fork-join traced.

Compiles a zoo ONNX model (ResNet-50 by default), calls it ``--calls`` times with
:func:`pytfrt.backends.cpu._spin_pool.trace` on (the native fork-join records, per job, when it
was published and, per part, which thread ran it from when to when), and prints per group of
convolutions (kind, input size, channels, residual, how it is split: ``rows``, ``batch``,
``channels`` -- ``copied`` when the parts go through per-thread buffers, ``16c`` for a
convolution on channel-blocked activations) the medians over calls of the summed per-layer
figures, in microseconds:

* ``job``: publish to the end of the job's last part (what the split convolution costs the
  call, less the Python before it);
* ``caller`` / ``helper``: the parts' run times on the calling thread and on the helper;
* ``imbalance``: ``|caller - helper|`` per job (the time one thread waits for the other, or
  runs the other's part);
* ``caller waits`` / ``helper waits``: how long after its last part ended the caller waited
  for the helper's to end (or the helper, idle, for the caller's) -- the join's cost;
* ``lag``: publish to the helper's first part start (0 when the helper was polling);
* ``alone``: share of the jobs where the caller ran every part (the helper asleep or busy).

A whole call's figures follow: the jobs' sum, both threads' part sums and the summed
imbalance, which bounds what any re-balancing of the parts could gain.  With
``--onnxruntime`` an ONNX Runtime session (two threads, no spinning) is called in turn and its
median call printed beside pytfrt's.  Only the C loops trace (with the Numba fallback the
script stops).  Run at ``chrt -f 10`` when no other process runs at real-time priority.

Usage: ``python benchmarks/split_balance.py [--model resnet50] [--batch 1] [--calls 40]
[--onnxruntime] [--set MODULE.NAME=VALUE ...] [--name SUFFIX]``; writes
``benchmarks/results/split_balance_<model>_b<batch><SUFFIX>.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import zoo  # noqa: E402

from pytfrt.tools.bench import format_table, machine_info, write_json  # noqa: E402


def _conv_labels() -> dict[int, str]:
    """The primitive handle of each split convolution's first part -> its group label (every
    :class:`~pytfrt.backends.cpu._dnnl_conv.DnnlConv` alive: NHWC plans and blocked ones)."""
    import gc

    from pytfrt.backends.cpu import _dnnl_conv as dc

    labels: dict[int, str] = {}
    for conv in [o for o in gc.get_objects() if isinstance(o, dc.DnnlConv)]:
        a = conv._attrs
        for (shape, residual), prims in list(conv._prims.items()):
            if not prims or len(prims) < 2:
                continue
            n, _, h, _ = dc._nchw_dims(a["layout"], shape)
            split = ("batch" if n > 1 else "channels" if prims[0].channels is not None
                     else "rows")
            if prims[0].channels is not None and not getattr(prims[0], "in_place", False):
                split += " (copied)"
            blocked = " 16c" if a["layout"] == getattr(dc, "BLOCKED", None) else ""
            label = (f"{a['kh']}x{a['kw']}/{a['strides'][0]} {h:>3} {a['cin']:>4} -> "
                     f"{a['cout']:<4} {'res' if residual else '   '} {split}{blocked}")
            # every split variant's first part (_part_balance) counts for the convolution
            for _, parts in getattr(prims[0], "variants", None) or [(0.5, prims)]:
                labels[int(parts[0].prim.value or 0)] = label
    return labels


def _jobs(records: np.ndarray, helpers: int) -> list[dict[str, Any]]:
    """The trace's records grouped into jobs (a job record, then its parts' records)."""
    jobs: list[dict[str, Any]] = []
    for kind, a, t0, t1 in records.tolist():
        if kind == -1:
            jobs.append(dict(parts=a, publish=t0, prim=t1, caller=[], helper=[]))
        elif jobs:
            jobs[-1]["caller" if kind == helpers else "helper"].append((t0, t1))
    return jobs


def run(args: argparse.Namespace) -> dict[str, Any]:
    import pytfrt
    from pytfrt.backends.cpu import _spin_pool

    zm = zoo.export(args.model, "/tmp/pytfrt-zoo", small=False, with_torch=False)
    model = pytfrt.compile(str(zm.path))
    feeds = zm.make_inputs(batch=args.batch)
    sess = None
    if args.onnxruntime:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(str(zm.path), opts, providers=["CPUExecutionProvider"])
    for _ in range(3):
        model(**feeds)
        if sess is not None:
            sess.run(None, feeds)
    pool = _spin_pool._pool
    if pool is None or _spin_pool.trace(None) is None and _spin_pool._spin_native.module() is None:
        raise SystemExit("no spin pool with the C loops in this process (one thread?)")
    labels = _conv_labels()
    rate = _spin_pool.cycles_per_us()
    buf = np.zeros(1 << 20, np.int64)
    per_group: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    totals: dict[str, list[float]] = defaultdict(list)
    walls: list[float] = []
    ort_walls: list[float] = []
    for _ in range(args.calls):
        _spin_pool.trace(buf)
        t0 = time.perf_counter()
        model(**feeds)
        walls.append(time.perf_counter() - t0)
        records = _spin_pool.trace(None)
        assert records is not None
        call: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for job in _jobs(records, pool.helpers):
            parts = job["caller"] + job["helper"]
            if not parts:
                continue
            end = max(t1 for _, t1 in parts)
            mine = sum(t1 - t0 for t0, t1 in job["caller"]) / rate
            other = sum(t1 - t0 for t0, t1 in job["helper"]) / rate
            g = call[labels.get(job["prim"], "other (not a convolution)")]
            g["layers"] += 1
            g["job"] += (end - job["publish"]) / rate
            g["caller"] += mine
            g["helper"] += other
            g["imbalance"] += abs(mine - other)
            if job["caller"] and job["helper"]:  # who waits for whom at the join
                gap = (max(t1 for _, t1 in job["helper"])
                       - max(t1 for _, t1 in job["caller"])) / rate
                g["caller_waits"] += max(gap, 0.0)
                g["helper_waits"] += max(-gap, 0.0)
            g["lag"] += (min(t0 for t0, _ in job["helper"]) - job["publish"]) / rate \
                if job["helper"] else 0.0
            g["alone"] += not job["helper"]
        for label, g in call.items():
            for k, v in g.items():
                per_group[label][k].append(v)
        for k in ("job", "caller", "helper", "imbalance", "caller_waits", "helper_waits",
                  "alone", "layers"):
            totals[k].append(sum(g[k] for g in call.values()))
        if sess is not None:
            t0 = time.perf_counter()
            sess.run(None, feeds)
            ort_walls.append(time.perf_counter() - t0)
    med = statistics.median
    rows = []
    for label, per in sorted(per_group.items(), key=lambda kv: -med(kv[1]["job"])):
        rows.append(dict(group=label, layers=int(med(per["layers"])), job_us=med(per["job"]),
                         caller_us=med(per["caller"]), helper_us=med(per["helper"]),
                         imbalance_us=med(per["imbalance"]),
                         caller_waits_us=med(per["caller_waits"] or [0.0]),
                         helper_waits_us=med(per["helper_waits"] or [0.0]),
                         lag_us=med(per["lag"]),
                         alone=sum(per["alone"]) / max(sum(per["layers"]), 1)))
    whole = {k: med(v) for k, v in totals.items()}
    return dict(command="benchmarks/split_balance.py " + " ".join(sys.argv[1:]),
                settings=args.set,
                machine=machine_info(), model=args.model, batch=args.batch, calls=args.calls,
                wall_ms=1e3 * med(walls),
                onnxruntime_wall_ms=1e3 * med(ort_walls) if ort_walls else None,
                groups=rows, per_call=whole)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--onnxruntime", action="store_true")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                   help="set a module switch first, as models.py --set (e.g. "
                   "pytfrt.backends.cpu._part_balance.ENABLED=False)")
    p.add_argument("--name", default="", help="result file suffix")
    args = p.parse_args(argv)
    from models import _apply_switches

    _apply_switches(args.set)
    rec = run(args)
    print(format_table(
        ["group", "n", "job us", "caller us", "helper us", "imbalance us", "caller waits",
         "helper waits", "lag us", "alone"],
        [[r["group"], r["layers"], f"{r['job_us']:.0f}", f"{r['caller_us']:.0f}",
          f"{r['helper_us']:.0f}", f"{r['imbalance_us']:.0f}", f"{r['caller_waits_us']:.0f}",
          f"{r['helper_waits_us']:.0f}", f"{r['lag_us']:.1f}", f"{r['alone']:.2f}"]
         for r in rec["groups"]]))
    w = rec["per_call"]
    print(f"\n{args.model} b{args.batch}: call {rec['wall_ms']:.2f} ms"
          + (f" (ONNX Runtime {rec['onnxruntime_wall_ms']:.2f})" if rec["onnxruntime_wall_ms"]
             else "")
          + f"; per call (medians): {w['layers']:.0f} jobs {w['job']:.0f} us, caller's parts "
          f"{w['caller']:.0f}, helper's {w['helper']:.0f}, imbalance {w['imbalance']:.0f}, "
          f"the caller waiting {w['caller_waits']:.0f}, the helper {w['helper_waits']:.0f}, "
          f"jobs the caller ran alone {w['alone']:.0f}")
    write_json(Path(args.out) / f"split_balance_{args.model}_b{args.batch}{args.name}.json", rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
