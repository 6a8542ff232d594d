"""Peak memory benchmark: the zoo's ONNX files loaded and run by pytfrt, ONNX Runtime and
OpenVINO, each in a fresh process.

For each zoo model (``benchmarks/zoo.py``, its cached exports: ResNet-50, MobileNetV3-small,
EfficientNet-B0, BERT-base at sequence 128, GPT-2 small at sequence 64) and each runtime, a
child process imports only that runtime (and NumPy), records its RSS (the *baseline*: the
interpreter with the runtime imported), then takes the path a user takes -- ``pytfrt.compile``
of the ``.onnx`` file, ``onnxruntime.InferenceSession`` on it, OpenVINO's ``read_model`` +
``compile_model`` -- and makes ``--calls`` calls at batch 1.  Reported per child:

* ``peak``: the process's high-water mark, ``VmHWM`` of ``/proc/self/status`` (and, as a
  cross-check, ``ru_maxrss`` of the child from ``wait4``);
* ``peak_load``: the high-water mark right after loading/compiling (before any call);
* ``baseline`` and ``final`` RSS, and ``peak - baseline`` (what the model cost);
* ``load_s`` and ``first_call_s`` (the first call's time: one-off work such as a kernel's
  compile lands there), and whether the child imported Numba.

``pytfrt-saved`` is the deployment path: ``pytfrt.load`` of the model compiled and saved
(``CompiledModel.save``) by another process first, so no compiler is imported.

The ratio column is pytfrt's peak over ONNX Runtime's (the goal: at most 1.25).  Every
runtime's outputs are checked against ONNX Runtime's (relative error, max over outputs).
Prints a table, writes ``memory.json`` and ``memory.png`` into ``--out``.  The runtimes run
one after the other, so the figures do not depend on the machine's load (only the page
cache does: the file is read once first).

Run: ``.venv/bin/python benchmarks/memory.py`` (``--help``; ``--small`` for a smoke run on the
zoo's small configurations).  Not thread-safe (children write into a temporary directory).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

RUNTIMES = ("pytfrt", "pytfrt-saved", "onnxruntime", "openvino")
DEFAULT_MODELS = ("resnet50", "mobilenet_v3_small", "efficientnet_b0", "bert", "gpt2")
GOAL = 1.25
"""pytfrt's peak may be at most this many times ONNX Runtime's."""
TOLERANCE = 1e-4
MB = 1 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options."""
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--runtimes", nargs="+", default=list(RUNTIMES), choices=RUNTIMES)
    parser.add_argument("--calls", type=int, default=3, help="calls after loading")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="intra-op threads of every runtime (default: the CPU count)")
    parser.add_argument("--small", action="store_true",
                        help="the zoo's small configurations (a smoke run)")
    parser.add_argument("--zoo-dir", default=os.environ.get("PYTFRT_ZOO_DIR", "/tmp/pytfrt-zoo"))
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--name", default="memory", help="result file stem")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--child", nargs=4, metavar=("RUNTIME", "MODEL", "FEEDS", "OUTPUTS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--save", nargs=2, metavar=("MODEL", "DIR"), help=argparse.SUPPRESS)


# -- the child: one runtime, one model ----------------------------------------------------------


def _status() -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of this process, in bytes."""
    out = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0]) * 1024
    return out


def _load(runtime: str, path: str, feeds: dict[str, np.ndarray], threads: int) -> Any:
    """A function ``feeds -> list of outputs`` for ``path`` in ``runtime`` (loaded now)."""
    if runtime.startswith("pytfrt"):
        import pytfrt

        model = pytfrt.compile(path) if runtime == "pytfrt" else pytfrt.load(path)

        def call_pytfrt(f: dict[str, np.ndarray]) -> list[np.ndarray]:
            out = model(**f)
            return list(out.values()) if isinstance(out, dict) else (
                list(out) if isinstance(out, tuple | list) else [out])

        return call_pytfrt
    if runtime == "onnxruntime":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        return lambda f: list(sess.run(None, f))
    import openvino as ov

    core = ov.Core()
    ov_model = core.read_model(path)
    ov_model.reshape({n: ov.PartialShape(list(v.shape)) for n, v in feeds.items()})
    req = core.compile_model(ov_model, "CPU", {
        "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": "f32"}).create_infer_request()
    del ov_model

    def call_openvino(f: dict[str, np.ndarray]) -> list[np.ndarray]:
        req.infer(f)
        return [np.array(t.data, copy=True) for t in req.output_tensors]

    return call_openvino


def child(runtime: str, path: str, feeds_path: str, outputs_path: str, calls: int,
          threads: int) -> dict[str, Any]:
    """In a fresh process: import ``runtime``, load ``path``, make ``calls`` calls on the
    feeds in ``feeds_path`` (``.npz``); save the last outputs to ``outputs_path``."""
    import importlib

    importlib.import_module(runtime.split("-")[0])
    base = _status()["VmRSS"]
    with np.load(feeds_path) as data:
        feeds = {k: data[k] for k in data.files}
    t0 = time.perf_counter()
    fn = _load(runtime, path, feeds, threads)
    load_s = time.perf_counter() - t0
    loaded = _status()
    outs: list[np.ndarray] = []
    first_s = None
    for _ in range(calls):
        t0 = time.perf_counter()
        outs = fn(feeds)
        first_s = time.perf_counter() - t0 if first_s is None else first_s
    np.savez(outputs_path, *outs)
    end = _status()
    return {"baseline": base, "rss_loaded": loaded["VmRSS"], "peak_load": loaded["VmHWM"],
            "final": end["VmRSS"], "peak": end["VmHWM"], "load_s": load_s,
            "first_call_s": first_s, "numba": "numba" in sys.modules}


# -- the parent ---------------------------------------------------------------------------------


def _run_child(args: argparse.Namespace, runtime: str, path: Path, feeds: Path,
               outputs: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--threads", str(args.threads),
           "--calls", str(args.calls), "--child", runtime, str(path), str(feeds), str(outputs)]
    from models import THREAD_VARS  # benchmarks/models.py: what fixes each library's threads

    env = {**os.environ, **dict.fromkeys(THREAD_VARS, str(args.threads))}
    log = outputs.with_suffix(".log")
    with open(log, "w+", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own ru_maxrss
        proc.returncode = os.waitstatus_to_exitcode(status)
        fh.seek(0)
        text = fh.read().strip()
    if proc.returncode != 0 or not text:
        return {"error": text[-2000:] or f"exit status {proc.returncode}"}
    rec: dict[str, Any] = json.loads(text.splitlines()[-1])
    rec["ru_maxrss"] = usage.ru_maxrss * 1024
    return rec


def _measure(args: argparse.Namespace, zm: Any, tmp: Path) -> dict[str, Any]:
    from zoo import relative_error

    from pytfrt.tools.bench import progress

    feeds = zm.make_inputs(batch=1)
    feeds_path = tmp / f"{zm.name}-feeds.npz"
    np.savez(feeds_path, **feeds)
    zm.path.read_bytes()  # the page cache holds the file for every runtime alike
    row: dict[str, Any] = {"model": zm.name, "file_bytes": zm.path.stat().st_size,
                           "runtimes": {}}
    outputs: dict[str, list[np.ndarray]] = {}
    for runtime in args.runtimes:
        progress(f"{zm.name}: {runtime}", args.quiet)
        out_path = tmp / f"{zm.name}-{runtime}.npz"
        path = zm.path
        if runtime == "pytfrt-saved":  # compiled and saved by a process of its own first
            path = tmp / f"{zm.name}-saved"
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--save",
                            str(zm.path), str(path)], check=True, capture_output=True)
        rec = _run_child(args, runtime, path, feeds_path, out_path)
        if "error" not in rec:
            with np.load(out_path) as data:
                outputs[runtime] = [data[k] for k in data.files]
        row["runtimes"][runtime] = rec
    want = outputs.get("onnxruntime")
    for runtime, got in outputs.items():
        if want is not None and runtime != "onnxruntime":
            err = max(relative_error(g, w) for g, w in zip(got, want, strict=True))
            row["runtimes"][runtime]["max_rel_err"] = err
    ours = row["runtimes"].get("pytfrt", {}).get("peak")
    theirs = row["runtimes"].get("onnxruntime", {}).get("peak")
    row["ratio"] = ours / theirs if ours and theirs else None
    return row


def _mb(value: Any) -> str:
    return "-" if value is None else f"{value / MB:.0f}"


def _print(record: dict[str, Any]) -> None:
    from pytfrt.tools.bench import format_table

    rows = []
    for r in record["rows"]:
        for runtime, rec in r["runtimes"].items():
            if "error" in rec:
                rows.append([r["model"], runtime, "error", "", "", "", "", "", "", "", ""])
                continue
            err, first = rec.get("max_rel_err"), rec.get("first_call_s")
            rows.append([r["model"], runtime, _mb(rec["baseline"]), _mb(rec["peak_load"]),
                         _mb(rec["peak"]), _mb(rec["peak"] - rec["baseline"]),
                         _mb(rec["final"]), f"{rec['load_s']:.1f}",
                         "-" if first is None else f"{first:.2f}",
                         "yes" if rec.get("numba") else "no",
                         "-" if err is None else f"{err:.1e}"])
    print(format_table(["model", "runtime", "baseline MB", "peak after load MB", "peak MB",
                        "peak - baseline MB", "final MB", "load s", "first call s", "Numba",
                        "rel err vs ORT"], rows))
    print()
    print(format_table(
        ["model", "pytfrt peak / ORT peak", f"goal <= {GOAL}"],
        [[r["model"], "-" if r["ratio"] is None else f"{r['ratio']:.2f}x",
          "-" if r["ratio"] is None else ("met" if r["ratio"] <= GOAL else "NOT met")]
         for r in record["rows"]]))


def _plot(record: dict[str, Any], path: Path) -> None:
    from pytfrt.tools.bench import pyplot

    plt = pyplot()
    rows = record["rows"]
    if plt is None or not rows:
        return
    runtimes = [rt for rt in RUNTIMES if any(rt in r["runtimes"] for r in rows)]
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(rows)), 4.5))
    width = 0.8 / max(1, len(runtimes))
    x = np.arange(len(rows))
    for i, rt in enumerate(runtimes):
        recs = [r["runtimes"].get(rt, {}) for r in rows]
        peak = [rec.get("peak", np.nan) / MB for rec in recs]
        base = [rec.get("baseline", np.nan) / MB for rec in recs]
        pos = x + (i - len(runtimes) / 2 + 0.5) * width
        ax.bar(pos, peak, width, label=f"{rt} peak")
        ax.bar(pos, base, width, color="black", alpha=0.25,
               label="baseline (runtime imported)" if i == 0 else None)
    goal = [GOAL * r["runtimes"].get("onnxruntime", {}).get("peak", np.nan) / MB for r in rows]
    ax.scatter(x, goal, marker="_", s=900, color="red", label=f"goal: ORT x {GOAL}", zorder=3)
    ax.set_xticks(x)
    ax.set_xticklabels([r["model"] for r in rows], fontsize=8)
    ax.set_ylabel("peak RSS (VmHWM), MB")
    ax.set_title(f"peak memory, load + {record['calls']} calls at batch 1 "
                 f"({record['machine']['nproc']} cores)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; 1 if a runtime failed or disagrees with ONNX Runtime."""
    if args.save:
        import pytfrt

        pytfrt.compile(args.save[0]).save(args.save[1])
        return 0
    if args.child:
        runtime, path, feeds, outputs = args.child
        print(json.dumps(child(runtime, path, feeds, outputs, args.calls, args.threads)))
        return 0
    import zoo  # benchmarks/zoo.py

    from pytfrt.tools.bench import machine_info, progress, save_results

    load_start = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="pytfrt-memory-") as tmp:
        for name in args.models:
            try:
                zm = zoo.export(name, args.zoo_dir, small=args.small, with_torch=False)
            except RuntimeError as exc:
                progress(f"{name}: skipped ({exc})", args.quiet)
                continue
            rows.append(_measure(args, zm, Path(tmp)))
    record = {"machine": machine_info(), "load_avg_start": load_start,
              "load_avg_end": os.getloadavg(), "calls": args.calls,
              "threads": args.threads, "small": args.small, "goal": GOAL, "rows": rows}
    _print(record)
    save_results(args.name, record, lambda p: _plot(record, p), results_dir=Path(args.out),
                 quiet=args.quiet)
    bad = [(r["model"], rt) for r in rows for rt, rec in r["runtimes"].items()
           if "error" in rec or rec.get("max_rel_err", 0.0) > TOLERANCE]
    for model, rt in bad:
        print(f"{model} / {rt}: failed or disagrees with ONNX Runtime", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(_parser)
    raise SystemExit(run(_parser.parse_args()))
