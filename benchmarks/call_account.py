"""Where one compiled call's time goes: every kernel of every call timed, against ONNX Runtime.

The zoo's ResNet-50 (or another zoo ONNX model) is compiled with every compute function of the
CPU runtime's table wrapped by a recorder (as :class:`pytfrt.tools.bench.KernelTimers` wraps
them, but per kernel *instance* and per call: the ``i``-th kernel of a call is the same layer in
every call, the executor being deterministic).  Each timed call records, per kernel, its wall
(``perf_counter_ns``) and calling-thread CPU time (``thread_time_ns``), and per call the
whole call's wall and thread time, its minor page faults (``getrusage(RUSAGE_THREAD)``) and
whether Python's cyclic GC ran.  An ONNX Runtime session on the same file is called after
every pytfrt call (``--ort-threads``, no spinning), timed the same way.

The report accounts for one call: the kernels' per-call sums by op type, the executor's time
between kernels, before the first and after the last, the timers' own cost (the same calls with
the recorder off), and the difference between the sum of per-kernel medians (what
``conv_profile.py`` adds up) and the median of per-call sums (the tail the medians hide).
``--perf`` also runs ``perf stat`` (page faults, dTLB load misses, cache misses) over a loop of
calls of each runtime in a child process of its own.

Usage: ``PYTFRT_NUM_THREADS=1 chrt -f 10 python benchmarks/call_account.py [--model resnet50]
[--batch 1] [--calls 40] [--ort-threads 1] [--perf]``.  Prints only (figures are recorded in
``docs/benchmarks.md``).  One profile per process; not thread-safe.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import conv_profile  # noqa: E402
import conv_variants  # noqa: E402

_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


class Recorder:
    """Per-kernel-instance events of the calls made while :attr:`on` is set: ``events`` is a
    list of ``(op, wall_start_ns, wall_end_ns, cpu_start_ns, cpu_end_ns)`` appended in call
    order; :meth:`install` must run before the first compile."""

    def __init__(self) -> None:
        self.on = False
        self.events: list[tuple[str, int, int, int, int]] = []
        self.shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def install(self) -> None:
        from pytfrt.backends.cpu.graph_kernels import graph_ops

        table = graph_ops()
        for key, fn in list(table.items()):
            table[key] = self._wrap(key, fn)

    def _wrap(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        wall, cpu, events = time.perf_counter_ns, time.thread_time_ns, self.events

        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            if not self.on:
                return fn(*a, **k)
            c0 = cpu()
            t0 = wall()
            y = None
            try:
                y = fn(*a, **k)
                return y
            finally:
                t1 = wall()
                events.append((key, t0, t1, c0, cpu()))
                self.shapes.append((tuple(getattr(a[0], "shape", ())) if a else (),
                                    tuple(getattr(y, "shape", ()))))

        specialize = getattr(fn, "specialize", None)
        if specialize is not None:  # versions bound to constants (conv plans, dense weights)
            def timed_specialize(*a: Any, **k: Any) -> Any:
                bound = specialize(*a, **k)
                return None if bound is None else self._wrap(key, bound)

            timed.specialize = timed_specialize  # type: ignore[attr-defined]
        return timed


class _Call:
    """One timed call: wall and thread ns, minor faults, GC collections during it."""

    __slots__ = ("wall", "cpu", "faults", "gcs")

    def __init__(self, fn: Callable[[], Any], gc_runs: list[int]) -> None:
        g0 = gc_runs[0]
        f0 = resource.getrusage(_RUSAGE_THREAD).ru_minflt
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        fn()
        self.wall = time.perf_counter_ns() - t0
        self.cpu = time.thread_time_ns() - c0
        self.faults = resource.getrusage(_RUSAGE_THREAD).ru_minflt - f0
        self.gcs = gc_runs[0] - g0


def _ms(ns: float) -> float:
    return ns / 1e6


def _med(v: Sequence[float]) -> float:
    return float(statistics.median(v)) if v else 0.0


def account(args: argparse.Namespace) -> dict[str, Any]:
    import zoo

    rec = Recorder()
    rec.install()
    import pytfrt

    zm = zoo.export(args.model, "/tmp/pytfrt-zoo", small=False, with_torch=False)
    feeds = zm.make_inputs(batch=args.batch)
    model = pytfrt.compile(str(zm.path))
    sess = conv_profile._ort_session(str(zm.path), "/tmp", args.ort_threads)  # profiler on
    ort_feeds = {i.name: v for i, v in zip(sess.get_inputs(), feeds.values(), strict=True)}
    ref = sess.run(None, ort_feeds)[0]
    warm_ort = 1
    for _ in range(3):
        y = model(**feeds)
        sess.run(None, ort_feeds)
        warm_ort += 1
    y = np.asarray(next(iter(y.values())) if isinstance(y, dict) else
                   (y[0] if isinstance(y, (list, tuple)) else y))
    err = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
    gc_runs = [0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_runs[0] += 1

    gc.callbacks.append(on_gc)
    mine: list[_Call] = []
    bare: list[_Call] = []
    ort: list[_Call] = []
    per_call: list[list[tuple[str, int, int, int, int]]] = []
    call_bounds: list[tuple[int, int, int, int]] = []
    run_model = functools.partial(model, **feeds)
    run_ort = functools.partial(sess.run, None, ort_feeds)
    for i in range(args.calls):
        # rotate the order so that no runtime always follows the other
        order = ("rec", "bare", "ort")
        for which in order[i % 3:] + order[:i % 3]:
            if which == "rec":
                rec.events.clear()
                rec.shapes.clear()
                rec.on = True
                c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
                mine.append(_Call(run_model, gc_runs))
                t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
                rec.on = False
                per_call.append(list(rec.events))
                call_bounds.append((t0, t1, c0, c1))
            elif which == "bare":
                bare.append(_Call(run_model, gc_runs))
            else:
                ort.append(_Call(run_ort, gc_runs))
    gc.callbacks.remove(on_gc)
    ort_shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    ort_nodes = _ort_nodes(sess.end_profiling(), warm_ort, args.calls, ort_shapes)
    kinds = [len(c) for c in per_call]
    if len(set(kinds)) != 1:
        raise SystemExit(f"kernel count differs between calls: {sorted(set(kinds))}")
    n_kernels = kinds[0]
    # per kernel instance: thread ns in each call; per call: sums by op, gaps
    inst_cpu = np.array([[e[4] - e[3] for e in c] for c in per_call], dtype=np.float64)
    inst_wall = np.array([[e[2] - e[1] for e in c] for c in per_call], dtype=np.float64)
    ops = [e[0] for e in per_call[0]]
    gaps_wall = []
    for c, (t0, t1, _, _) in zip(per_call, call_bounds, strict=True):
        inside = sum(e[2] - e[1] for e in c)
        gaps_wall.append((t1 - t0) - inside)
    by_op: dict[str, dict[str, float]] = defaultdict(lambda: dict(n=0, cpu=0.0, wall=0.0,
                                                                  cpu_med_sum=0.0))
    med_inst_cpu = np.median(inst_cpu, axis=0)
    for j, op in enumerate(ops):
        d = by_op[op]
        d["n"] += 1
        d["cpu_med_sum"] += med_inst_cpu[j]
    call_cpu_sums = inst_cpu.sum(axis=1)
    for j, op in enumerate(ops):
        by_op[op]["cpu"] += float(np.median(inst_cpu[:, j]))
        by_op[op]["wall"] += float(np.median(inst_wall[:, j]))
    first = [c[0][1] - b[0] for c, b in zip(per_call, call_bounds, strict=True)]
    last = [b[1] - c[-1][2] for c, b in zip(per_call, call_bounds, strict=True)]
    between = [sum(c[k + 1][1] - c[k][2] for k in range(len(c) - 1)) for c in per_call]
    # the tail: per kernel, how much the calls above its median add (mean - median)
    tail = (inst_cpu.mean(axis=0) - med_inst_cpu)
    worst = np.argsort(-tail)[:8]
    # per call, paired: the convolutions' wall-time sum in pytfrt (timed calls) and in ONNX
    # Runtime (its profiler's kernel times), and each whole call's wall time
    conv_cols = [j for j, op in enumerate(ops) if op == "conv2d"]
    my_conv = inst_wall[:, conv_cols].sum(axis=1)
    ort_conv = np.array([sum(d for op, d in c if op == "Conv") for c in ort_nodes])
    ort_all = np.array([sum(d for _, d in c) for c in ort_nodes])
    ort_layers = np.array([[d for op, d in c if op == "Conv"] for c in ort_nodes])
    timed_wall = np.array([c.wall for c in mine], dtype=np.float64)
    ort_wall = np.array([c.wall for c in ort], dtype=np.float64)
    ort_ops: dict[str, float] = defaultdict(float)
    for j, (op, _d) in enumerate(ort_nodes[0]):
        ort_ops[op] += float(np.median([c[j][1] for c in ort_nodes]))
    layers = _paired_layers([rec.shapes[j] for j in conv_cols], inst_wall[:, conv_cols],
                            ort_shapes, ort_layers)
    return dict(
        ort_by_op={k: _ms(v) for k, v in sorted(ort_ops.items(), key=lambda kv: -kv[1])},
        layers=layers,
        conv_wall_sum_ms=_ms(_med(list(my_conv))),
        ort_conv_wall_sum_ms=_ms(_med(list(ort_conv))),
        ort_nodes_wall_sum_ms=_ms(_med(list(ort_all))),
        paired_conv_sum=_med(list(my_conv / ort_conv)),
        paired_timed_call=_med(list(timed_wall / ort_wall)),
        conv_median_sum_ms=_ms(float(np.median(inst_wall[:, conv_cols], axis=0).sum())),
        ort_conv_median_sum_ms=_ms(float(np.median(ort_layers, axis=0).sum())),
        ort_outside_nodes_ms=_ms(_med(list(ort_wall - ort_all))),
        model=args.model, batch=args.batch, calls=args.calls, kernels=n_kernels,
        max_rel_err=err,
        pytfrt_cpu_ms=_ms(_med([c.cpu for c in bare])),
        pytfrt_wall_ms=_ms(_med([c.wall for c in bare])),
        pytfrt_timed_cpu_ms=_ms(_med([c.cpu for c in mine])),
        pytfrt_timed_wall_ms=_ms(_med([c.wall for c in mine])),
        ort_cpu_ms=_ms(_med([c.cpu for c in ort])),
        ort_wall_ms=_ms(_med([c.wall for c in ort])),
        paired_cpu=_med([m.cpu / o.cpu for m, o in zip(bare, ort, strict=True)]),
        paired_wall=_med([m.wall / o.wall for m, o in zip(bare, ort, strict=True)]),
        kernels_cpu_sum_median_ms=_ms(_med(list(call_cpu_sums))),
        kernels_cpu_median_sum_ms=_ms(float(med_inst_cpu.sum())),
        kernels_cpu_mean_ms=_ms(float(call_cpu_sums.mean())),
        outside_kernels_wall_ms=_ms(_med(gaps_wall)),
        before_first_ms=_ms(_med(first)), after_last_ms=_ms(_med(last)),
        between_kernels_ms=_ms(_med(between)),
        faults_pytfrt=_med([c.faults for c in bare]), faults_ort=_med([c.faults for c in ort]),
        gc_runs=sum(c.gcs for c in bare + mine),
        by_op={k: dict(v, cpu_ms=_ms(v["cpu"]), wall_ms=_ms(v["wall"]))
               for k, v in sorted(by_op.items(), key=lambda kv: -kv[1]["cpu"])},
        tail=[dict(index=int(j), op=ops[j], median_us=med_inst_cpu[j] / 1e3,
                   mean_us=float(inst_cpu[:, j].mean()) / 1e3,
                   max_us=float(inst_cpu[:, j].max()) / 1e3) for j in worst],
        per_call_cpu_ms=[_ms(c.cpu) for c in bare],
        per_call_ort_cpu_ms=[_ms(c.cpu) for c in ort],
        per_call_kernel_sum_ms=[_ms(float(s)) for s in call_cpu_sums],
        per_call_kernel_us=(inst_cpu / 1e3).round(1).tolist(),
        per_call_ort_node_us=[[round(d / 1e3, 1) for _, d in c] for c in ort_nodes],
        per_call_timed_wall_ms=[_ms(c.wall) for c in mine],
        per_call_ort_wall_ms=[_ms(c.wall) for c in ort],
    )


def _paired_layers(mine: list[tuple[tuple[int, ...], tuple[int, ...]]], my_wall: np.ndarray,
                   theirs: list[tuple[tuple[int, ...], tuple[int, ...]]],
                   their_wall: np.ndarray) -> list[dict[str, Any]]:
    """pytfrt's convolutions (NHWC shapes) matched to ONNX Runtime's (NCHW) by input and output
    shape, in order of occurrence; per layer the medians and the median per-call ratio."""
    def key(x: tuple[int, ...], y: tuple[int, ...], nchw: bool) -> tuple[int, ...]:
        return (x[2], x[1], y[2], y[1]) if nchw else (x[1], x[3], y[1], y[3])

    pending: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for j, (x, y) in enumerate(theirs):
        pending[key(x, y, True)].append(j)
    rows = []
    for i, (x, y) in enumerate(mine):
        js = pending.get(key(x, y, False))
        if not js:
            continue
        j = js.pop(0)
        rows.append(dict(index=i, h=x[1], cin=x[3], hout=y[1], cout=y[3],
                         us=float(np.median(my_wall[:, i])) / 1e3,
                         ort_us=float(np.median(their_wall[:, j])) / 1e3,
                         paired=float(np.median(my_wall[:, i] / their_wall[:, j])),
                         p25_us=float(np.percentile(my_wall[:, i], 25)) / 1e3,
                         ort_p25_us=float(np.percentile(their_wall[:, j], 25)) / 1e3))
    return rows


Shapes = list[tuple[tuple[int, ...], tuple[int, ...]]]


def _ort_nodes(profile: str, skip: int, calls: int,
               shapes: Shapes) -> list[list[tuple[str, float]]]:
    """ONNX Runtime's profile: per timed run, ``(op type, kernel wall ns)`` of every node in
    order (the first ``skip`` runs are the warm-up ones); ``shapes`` gets the convolutions'
    input and output shapes, in order."""
    import json

    with open(profile) as f:
        events = json.load(f)
    os.remove(profile)
    runs = [e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    out: list[list[tuple[str, float]]] = []
    shapes.clear()
    for r in runs[skip:skip + calls]:
        t0, t1 = r["ts"], r["ts"] + r["dur"]
        mine = [e for e in nodes if t0 <= e["ts"] <= t1]
        out.append([(e["args"].get("op_name", "?"), e["dur"] * 1e3) for e in mine])
        if not shapes:
            for e in mine:
                if e["args"].get("op_name") == "Conv":
                    x = next(iter(e["args"]["input_type_shape"][0].values()))
                    y = next(iter(e["args"]["output_type_shape"][0].values()))
                    shapes.append((tuple(x), tuple(y)))
    return out


def _print(r: dict[str, Any]) -> None:
    print(f"{r['model']} batch {r['batch']}, {r['calls']} calls, {r['kernels']} kernels per call, "
          f"max rel. difference from ONNX Runtime {r['max_rel_err']:.2e}, GC runs {r['gc_runs']}")
    print(f"pytfrt (no timers): thread {r['pytfrt_cpu_ms']:.2f} ms, "
          f"wall {r['pytfrt_wall_ms']:.2f}; "
          f"timed: thread {r['pytfrt_timed_cpu_ms']:.2f}, wall {r['pytfrt_timed_wall_ms']:.2f}")
    print(f"ONNX Runtime: thread {r['ort_cpu_ms']:.2f} ms, wall {r['ort_wall_ms']:.2f}; "
          f"paired pytfrt/ORT thread {r['paired_cpu']:.3f}, wall {r['paired_wall']:.3f}")
    print(f"kernels' thread time: median of per-call sums {r['kernels_cpu_sum_median_ms']:.2f} ms, "
          f"sum of per-kernel medians {r['kernels_cpu_median_sum_ms']:.2f}, mean of sums "
          f"{r['kernels_cpu_mean_ms']:.2f}")
    print(f"outside kernels (wall): {r['outside_kernels_wall_ms']:.3f} ms = before first "
          f"{r['before_first_ms']:.3f} + between {r['between_kernels_ms']:.3f} + after last "
          f"{r['after_last_ms']:.3f}")
    print(f"convolutions, wall, per call: pytfrt median of sums {r['conv_wall_sum_ms']:.2f} ms "
          f"(sum of medians {r['conv_median_sum_ms']:.2f}), "
          f"ONNX Runtime {r['ort_conv_wall_sum_ms']:.2f}"
          f" (sum of medians {r['ort_conv_median_sum_ms']:.2f}); paired conv sums "
          f"{r['paired_conv_sum']:.3f}, paired timed calls {r['paired_timed_call']:.3f}")
    print(f"ONNX Runtime: all nodes {r['ort_nodes_wall_sum_ms']:.2f} ms, outside its nodes "
          f"{r['ort_outside_nodes_ms']:.3f} ms (wall)")
    print(f"minor page faults per call: pytfrt {r['faults_pytfrt']:.0f}, ORT {r['faults_ort']:.0f}")
    print(f"{'op':<28} {'n':>4} {'thread ms':>10} {'wall ms':>9}")
    for op, v in r["by_op"].items():
        print(f"{op:<28} {v['n']:>4} {v['cpu_ms']:>10.3f} {v['wall_ms']:>9.3f}")
    print("ONNX Runtime per op type (sum of per-node medians, wall ms): " + ", ".join(
        f"{k} {v:.3f}" for k, v in r["ort_by_op"].items()))
    groups: dict[tuple[int, ...], list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    for L in r["layers"]:
        g = groups[(L["h"], L["cin"], L["hout"], L["cout"])]
        g[0] += 1
        g[1] += L["us"]
        g[2] += L["ort_us"]
        g[3] += L["p25_us"]
        g[4] += L["ort_p25_us"]
    print("convolutions by shape, wall: sums of per-layer medians and of 25th percentiles, "
          "median per-call ratio")
    print(f"{'conv (h cin -> hout cout)':<28} {'n':>3} {'pytfrt ms':>10} {'ORT ms':>8} "
          f"{'ratio':>6} {'p25 ratio':>9} {'paired':>7}")
    for (h, cin, hout, cout), (n, us, ous, p, op) in sorted(
            groups.items(), key=lambda kv: kv[1][4] - kv[1][3]):
        paired = _med([L["paired"] for L in r["layers"]
                       if (L["h"], L["cin"], L["hout"], L["cout"]) == (h, cin, hout, cout)])
        print(f"{h:>3} {cin:>5} -> {hout:>3} {cout:>5}{'':<9} {n:>3} {us / 1e3:>10.3f} "
              f"{ous / 1e3:>8.3f} {us / ous:>6.3f} {p / op:>9.3f} {paired:>7.3f}")
    p, op = (sum(L[k] for L in r["layers"]) / 1e3 for k in ("p25_us", "ort_p25_us"))
    print(f"sum of per-layer 25th percentiles: pytfrt {p:.2f} ms, ORT {op:.2f} ({p / op:.3f})")
    print(f"matched layers {len(r['layers'])}; median paired layer ratio "
          f"{_med([L['paired'] for L in r['layers']]):.3f}")
    print("kernels with the largest tail (mean - median thread time):")
    for t in r["tail"]:
        print(f"  #{t['index']:<4} {t['op']:<24} median {t['median_us']:8.1f} us, mean "
              f"{t['mean_us']:8.1f}, max {t['max_us']:8.1f}")


def _perf_loop(args: argparse.Namespace) -> None:
    """Child of ``--perf``: ``--loop-calls`` calls of one runtime, after a warm-up."""
    import zoo

    zm = zoo.export(args.model, "/tmp/pytfrt-zoo", small=False, with_torch=False)
    feeds = zm.make_inputs(batch=args.batch)
    if args.perf_child == "pytfrt":
        import pytfrt

        model = pytfrt.compile(str(zm.path))
        fn: Callable[[], Any] = functools.partial(model, **feeds)
    else:
        sess = conv_variants._ort_session(zm.path, args.ort_threads)
        fn = functools.partial(sess.run, None, feeds)
    for _ in range(3):
        fn()
    # perf attaches to the whole process: mark the loop by a file the parent waits for
    Path(args.ready).write_text("1")
    while Path(args.ready).exists():
        time.sleep(0.01)
    for _ in range(args.loop_calls):
        fn()
    Path(args.ready).write_text("2")  # done: the parent stops perf before the process exits
    while Path(args.ready).exists():
        time.sleep(0.01)


def _perf(args: argparse.Namespace) -> None:
    perf = shutil.which("perf") or "/usr/bin/perf"
    for which in ("pytfrt", "onnxruntime"):
        ready = f"/tmp/call_account_ready_{os.getpid()}"
        child = subprocess.Popen([sys.executable, __file__, "--model", args.model, "--batch",
                                  str(args.batch), "--ort-threads", str(args.ort_threads),
                                  "--perf-child", which, "--ready", ready,
                                  "--loop-calls", str(args.loop_calls)])
        while not Path(ready).exists():
            if child.poll() is not None:
                raise SystemExit(f"{which} loop failed")
            time.sleep(0.05)
        stat = subprocess.Popen([perf, "stat", "-e",
                                 "page-faults,dTLB-load-misses,cache-misses,instructions,cycles",
                                 "-p", str(child.pid)], stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        os.remove(ready)
        while not Path(ready).exists():
            if child.poll() is not None:
                raise SystemExit(f"{which} loop failed")
            time.sleep(0.01)
        stat.send_signal(2)
        os.remove(ready)
        child.wait()
        _, err = stat.communicate()
        print(f"--- perf stat, {which}, {args.loop_calls} calls (per call: divide) ---")
        print(err.strip())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--ort-threads", type=int, default=1)
    p.add_argument("--json", help="also write the figures, per call too, to this file")
    p.add_argument("--perf", action="store_true", help="also perf stat a loop of each runtime")
    p.add_argument("--loop-calls", type=int, default=40)
    p.add_argument("--perf-child", choices=("pytfrt", "onnxruntime"), help=argparse.SUPPRESS)
    p.add_argument("--ready", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.perf_child:
        _perf_loop(args)
        return 0
    r = account(args)
    _print(r)
    if args.json:
        import json

        Path(args.json).write_text(json.dumps(r))
    if args.perf:
        _perf(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
