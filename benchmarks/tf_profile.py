"""TensorFlow's own per-op profile of a train step under ``tf.function``, beside pytfrt's kernels.

Runs one of ``benchmarks/train.py``'s train steps (same model, data and optimizer) under
``tf.function`` inside a ``tf.profiler.experimental`` trace (host tracer level 2: every
executor op), reads the trace's ``XSpace`` (``*.xplane.pb``) and sums per step:

* per TF op type (``_MklNativeConv2DBackpropFilterWithBias``, ``Mul``, ``ReluGrad``...):
  calls, wall time on the executor's threads (``tf_Compute``; two ops running at once on two
  cores each count their whole wall), and the op's *share of the step's wall*: each moment
  with ``k`` ops running is split equally among them, so the shares add up to the time with
  at least one op running -- the figure comparable with pytfrt's kernel wall, whose
  executor runs one kernel at a time (each kernel may use both threads);
* the same grouped into families that line up with pytfrt's kernels (convolution forward /
  backward-data / backward-filter, batch-norm forward / backward, ReLU backward, ...);
* thread overlap: the step's wall, the time with at least one op running, with two or more
  ops running at once (inter-op parallelism), and the intra-op pool's (``tf_numa_*_Eigen``)
  busy regions in thread-ms.

Keras 3's ``BatchNormalization`` is not TF's ``FusedBatchNormV3`` in a train step: its
statistics and their gradients are ``Mean``, ``SquaredDifference``, ``Sub``, ``Mul``,
``BroadcastTo``... (the families "elementwise", "reductions" and "other" hold them).

With ``--pytfrt`` the same step is also compiled by pytfrt and profiled with
:class:`pytfrt.tools.bench.KernelTimers` (wall and CPU per kernel), and the two are printed
family by family. The trace costs TF some time per op (its op wall times are a little larger
than untraced); the step's process CPU and wall are measured untraced first.

Run: ``.venv/bin/python benchmarks/tf_profile.py --model resnet50 --steps 3 --pytfrt``;
writes ``tf_profile.json`` (or ``--name``) into ``benchmarks/results``.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from pytfrt.tools.bench import (  # noqa: E402
    KernelTimers,
    format_table,
    machine_info,
    progress,
    save_results,
)

# (family, TF op type pattern, pytfrt kernel names): the first matching pattern wins.
FAMILIES: list[tuple[str, str, tuple[str, ...]]] = [
    ("conv backward-filter", r"Conv2DBackpropFilter", ("conv2d_backprop_filter",)),
    ("conv backward-data", r"Conv2DBackpropInput", ("conv2d_backprop_input",)),
    ("conv forward", r"Conv2D", ("conv2d", "conv2d.prepare")),
    ("batch norm backward", r"FusedBatchNormGrad", ()),
    ("batch norm forward", r"FusedBatchNorm", ("moments",)),
    ("relu backward", r"ReluGrad", ("relu_grad_sums",)),
    ("bias_add backward", r"BiasAddGrad", ("bias_add_grad",)),
    ("batch-norm statistics", r"^(SquaredDifference|BroadcastTo|RsqrtGrad|Rsqrt)$", ()),
    ("optimizer", r"ResourceApply|AssignVariable|AssignAdd|AssignSub", ()),
    ("pooling", r"Pool", ("max_pool2d", "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad")),
    ("matmul", r"MatMul", ("matmul",)),
    ("elementwise", r"^(_Mkl)?(Add|AddV2|AddN|Mul|Sub|Relu|BiasAdd|Neg|RealDiv|Cast|Square|"
     r"Rsqrt|Sqrt|Maximum|Select|SelectV2)$|Fused.*Elementwise",
     ("fused_elementwise", "fused_graph", "add", "mul", "neg", "div", "cast", "select")),
    ("reductions", r"^(Sum|Mean|Max|Prod)$", ("reduce_sum", "reduce_mean")),
    ("variable reads", r"ReadVariableOp", ()),
]


def family(op_type: str) -> str:
    for name, pattern, _ in FAMILIES:
        if re.search(pattern, op_type):
            return name
    return "other"


def pytfrt_family(kernel: str) -> str:
    for name, _, kernels in FAMILIES:
        if kernel in kernels:
            return name
    return "other"


def _intervals_union(spans: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def analyse(xplane: str | Path, steps: int) -> dict[str, Any]:
    """Per-step figures from one trace file (see the module docstring). Times in ms per step.

    Raises ``ValueError`` if the trace has no host plane or no executor ops (a trace taken at
    a host tracer level below 2).
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(xplane).read_bytes())
    host = next((p for p in space.planes if p.name == "/host:CPU"), None)
    if host is None:
        raise ValueError(f"{xplane}: no /host:CPU plane in the trace")
    meta = host.event_metadata
    ops: list[tuple[int, int, str]] = []  # start, end (ps), op type
    pool: list[tuple[int, int]] = []  # the intra-op pool's busy regions
    step_spans: list[tuple[int, int]] = []
    for line in host.lines:
        base = line.timestamp_ns * 1000
        region_start: int | None = None
        for ev in line.events:
            md = meta[ev.metadata_id]
            start = base + ev.offset_ps
            end = start + ev.duration_ps
            if line.name == "python" and md.name.startswith("EagerLocalExecute: __inference"):
                step_spans.append((start, end))
            elif "Eigen" in line.name:
                if md.name == "ThreadpoolListener::StartRegion":
                    region_start = start
                elif md.name == "ThreadpoolListener::StopRegion" and region_start is not None:
                    pool.append((region_start, start))
                    region_start = None
            elif ":" in md.name and md.display_name and "::" not in md.name:
                ops.append((start, end, md.display_name))
    if not ops:
        raise ValueError(f"{xplane}: no executor ops in the trace (host tracer level < 2?)")
    # Sweep: split time into segments by every op boundary; in each segment the running ops
    # share the wall equally.
    events: list[tuple[int, int, int]] = []  # time, kind (0 op end, 1 op start), op
    for i, (a, b, _) in enumerate(ops):
        events += [(a, 1, i), (b, 0, i)]
    events.sort()
    running: set[int] = set()
    share: dict[int, float] = defaultdict(float)
    at_least: dict[int, int] = defaultdict(int)  # ps with >= k ops running
    prev = events[0][0]
    for t, kind, i in events:
        dt = t - prev
        if dt > 0:
            for k in range(1, len(running) + 1):
                at_least[k] += dt
            for j in running:
                share[j] += dt / len(running)
        prev = t
        if kind == 1:
            running.add(i)
        else:
            running.discard(i)
    per_type: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for i, (a, b, op_type) in enumerate(ops):
        row = per_type[op_type]
        row["calls"] += 1
        row["wall_ms"] += (b - a) * 1e-9
        row["share_ms"] += share[i] * 1e-9
    n = max(steps, 1)
    table: dict[str, dict[str, Any]] = {
        k: {m: v / n for m, v in row.items()} | {"family": family(k)}
        for k, row in sorted(per_type.items(), key=lambda kv: -kv[1]["share_ms"])
    }
    families: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for op_type, row in table.items():
        fam = families[family(op_type)]
        for m in ("calls", "wall_ms", "share_ms"):
            fam[m] += row[m]
    step_wall = sum(b - a for a, b in step_spans[-n:]) * 1e-9 / n if step_spans else None
    return {
        "steps": n,
        "step_wall_ms_traced": step_wall,
        "ops_per_step": len(ops) / n,
        "op_wall_ms": sum(b - a for a, b, _ in ops) * 1e-9 / n,
        "ops_running_ms": {str(k): v * 1e-9 / n for k, v in sorted(at_least.items())},
        "pool_busy_ms": sum(b - a for a, b in pool) * 1e-9 / n,
        "pool_busy_union_ms": _intervals_union(pool) * 1e-9 / n,
        "per_type": table,
        "families": {k: dict(v) for k, v in
                     sorted(families.items(), key=lambda kv: -kv[1]["share_ms"])},
    }


def trace_tf(run: Any, steps: int, logdir: str) -> Path:
    """Run ``run()`` ``steps`` times under a host trace; the path of the ``.xplane.pb``."""
    import tensorflow as tf

    opts = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=2, python_tracer_level=0, device_tracer_level=0)
    tf.profiler.experimental.start(logdir, options=opts)
    try:
        for _ in range(steps):
            run()
    finally:
        tf.profiler.experimental.stop()
    files = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True),
                   key=os.path.getmtime)
    if not files:
        raise RuntimeError(f"the profiler wrote no .xplane.pb under {logdir}")
    return Path(files[-1])


def _cpu_wall(run: Any, steps: int) -> tuple[float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        run()
    return ((time.process_time() - c0) / steps * 1e3, (time.perf_counter() - t0) / steps * 1e3)


def profile(model: str, steps: int, with_pytfrt: bool, quiet: bool) -> dict[str, Any]:
    import train

    batches = {"residual_cnn": 32, "resnet50": 8, "transformer": 16, "mlp": 64}
    timers = None
    if with_pytfrt:  # before the first compile (see KernelTimers.install)
        timers = KernelTimers()
        timers.install()
    import tensorflow as tf

    x, y = train._data(model, batches[model], 224)
    step = train._tf_step(model, 224)
    xt, yt = tf.constant(x), tf.constant(y)
    record: dict[str, Any] = {"model": model, "batch": batches[model]}
    runs: dict[str, Any] = {"tf.function": lambda: step(xt, yt)}
    if timers is not None:
        import pytfrt

        progress(f"{model}: compiling with pytfrt", quiet)
        compiled = pytfrt.compile(step)
        runs["pytfrt"] = lambda: compiled(x, y)
    for run in runs.values():
        for _ in range(3):  # warm-up (TF's first steps still create oneDNN primitives)
            run()
    samples: dict[str, list[tuple[float, float]]] = {p: [] for p in runs}
    for _ in range(2):  # alternating: the machine is shared
        for peer, run in runs.items():
            if timers is not None:
                timers.clear()
            samples[peer].append(_cpu_wall(run, steps))
            if peer == "pytfrt" and timers is not None:
                record["pytfrt"] = timers.report(steps)
    record["untraced"] = {}
    for peer, vals in samples.items():
        cpu, wall = min(vals, key=lambda v: v[1])
        record["untraced"][peer] = {"cpu_ms": cpu, "wall_ms": wall, "cores": cpu / wall}
    progress(f"{model}: tracing tf.function", quiet)
    with tempfile.TemporaryDirectory(prefix="tf_profile_") as logdir:
        record["tf"] = analyse(trace_tf(runs["tf.function"], steps, logdir), steps)
    return record


def report(record: dict[str, Any]) -> str:
    tf_rec = record["tf"]
    lines = [f"{record['model']} b{record['batch']}: untraced per step " + ", ".join(
        f"{p} wall {v['wall_ms']:.0f} ms CPU {v['cpu_ms']:.0f} ms ({v['cores']:.2f} cores)"
        for p, v in record["untraced"].items())]
    running = tf_rec["ops_running_ms"]
    lines.append(
        f"TF traced: step {tf_rec['step_wall_ms_traced'] or 0:.0f} ms, {tf_rec['ops_per_step']:.0f}"
        f" ops, op wall sum {tf_rec['op_wall_ms']:.0f} ms; >=1 op running "
        f"{running.get('1', 0):.0f} ms, >=2 ops {running.get('2', 0):.0f} ms, >=3 "
        f"{running.get('3', 0):.0f} ms; intra-op pool busy {tf_rec['pool_busy_ms']:.0f} ms "
        f"(thread-ms)")
    fams: dict[str, dict[str, float]] = {k: dict(v) for k, v in tf_rec["families"].items()}
    ours: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    if "pytfrt" in record:
        for k, v in record["pytfrt"]["per_op"].items():
            fam = ours[pytfrt_family(k)]
            fam["calls"] += v["calls_per_call"]
            fam["wall_ms"] += v["ms_per_call"]
            fam["cpu_ms"] += v["cpu_ms_per_call"]
    rows = []
    for name in list(fams) + [k for k in ours if k not in fams]:
        t, o = fams.get(name, {}), ours.get(name, {})
        rows.append([name, f"{t.get('calls', 0):.0f}", f"{t.get('wall_ms', 0):.1f}",
                     f"{t.get('share_ms', 0):.1f}", f"{o.get('calls', 0):.0f}",
                     f"{o.get('wall_ms', 0):.1f}", f"{o.get('cpu_ms', 0):.1f}"])
    lines.append(format_table(["family", "TF ops", "TF wall ms", "TF wall share ms",
                               "pytfrt kernels", "pytfrt wall ms", "pytfrt CPU ms"], rows))
    lines.append(format_table(
        ["TF op type", "family", "calls", "wall ms", "wall share ms"],
        [[k, v["family"], f"{v['calls']:.0f}", f"{v['wall_ms']:.2f}", f"{v['share_ms']:.2f}"]
         for k, v in list(tf_rec["per_type"].items())[:30]]))
    return "\n\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50",
                        choices=("residual_cnn", "resnet50", "transformer", "mlp"))
    parser.add_argument("--steps", type=int, default=3, help="steps traced and timed")
    parser.add_argument("--pytfrt", action="store_true",
                        help="also compile with pytfrt and print its kernels beside TF's ops")
    parser.add_argument("--name", default="tf_profile", help="result file stem")
    parser.add_argument("--out", type=Path, default=None, help="results directory")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    rec = profile(args.model, args.steps, args.pytfrt, args.quiet)
    print(report(rec))
    record = {"machine": machine_info(), "load": os.getloadavg(),
              "command": " ".join(["benchmarks/tf_profile.py", *(argv or sys.argv[1:])]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "results": [rec]}
    stem: Any = args.name if args.out is None else args.out / args.name
    save_results(stem, record, None, quiet=args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
