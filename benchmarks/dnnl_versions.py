"""Two oneDNN libraries compared on ResNet-50's 1x1 convolutions, one thread, alternating processes.

pytfrt loads ``libdnnl.so.3`` through :func:`pytfrt.backends.cpu._blas._find_library` (the
pinned ``onednn-cpu-gomp`` wheel's).  This script runs each measurement in a child process of
its own whose ``_find_library`` is replaced to load ``<dir>/libdnnl.so.3`` from a directory
given on the command line (``pinned``: the installed one), so a newer oneDNN unpacked into
``/tmp`` is compared without touching the package or the virtualenv.  The children alternate
libraries for ``--rounds`` rounds; every child is pinned to one core (``taskset -c 0``) with
``PYTFRT_NUM_THREADS=1`` (a TBB build threads itself: the pin keeps its arena at one thread).

``layers``: ResNet-50's 1x1 convolutions at 28x28, 14x14 and 7x7 (batch 1, NHWC, bias and
ReLU fused; the widening ones also with the in-place residual ``sum``, as the compiled model
runs them) planned with :func:`pytfrt.backends.cpu.conv.plan_conv2d` and called through
:func:`pytfrt.backends.cpu.conv.runner`; per layer the median thread CPU time of ``--calls``
calls (interleaved across layers), oneDNN's implementation name and the output's largest
difference from a NumPy float64 oracle.

``kernels``: the same layers, timed by oneDNN itself (``ONEDNN_VERBOSE`` execution times), in
pytfrt on the pinned library against PyTorch's bundled oneDNN (``torch.ops.mkldnn``
convolutions with the same post-ops, weights prepacked once): a newer oneDNN's convolution
kernels when the newer wheel cannot create a CPU engine (the ``onednn`` 2026.1 wheel is a SYCL
build: ``docs/kernels.md``).

``model``: ``benchmarks/call_account.py`` (the zoo's ResNet-50 at batch 1 against ONNX Runtime
on one thread in the same process) run in the child with the replaced loader.

Usage: ``python benchmarks/dnnl_versions.py layers --lib pinned --lib /tmp/dnnl313/lib
[--rounds 3] [--calls 200]``; ``python benchmarks/dnnl_versions.py model --lib pinned --lib
/tmp/dnnl313/lib [--rounds 2] [--calls 40]``; ``python benchmarks/dnnl_versions.py kernels
[--rounds 6] [--calls 100]``.  ``LD_LIBRARY_PATH`` of a child is prefixed with
its directory (the newer wheel's ``libdnnl.so.3`` needs ``libtbb``, ``libsycl`` etc. beside
it).  ``layers`` and ``kernels`` write ``benchmarks/results/dnnl_versions_<mode>.json``; ``model``
prints only.
Not thread-safe; one measurement at a time.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import runpy
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

LAYERS = [  # (name, H, cin, cout, residual)
    ("28 reduce 512->128", 28, 512, 128, False),
    ("28 widen 128->512 +res", 28, 128, 512, True),
    ("14 reduce 1024->256", 14, 1024, 256, False),
    ("14 widen 256->1024", 14, 256, 1024, False),
    ("14 widen 256->1024 +res", 14, 256, 1024, True),
    ("7 reduce 2048->512", 7, 2048, 512, False),
    ("7 widen 512->2048", 7, 512, 2048, False),
    ("7 widen 512->2048 +res", 7, 512, 2048, True),
]


def _use_library(lib_dir: str) -> None:
    """Make pytfrt load ``<lib_dir>/libdnnl.so.3`` (``pinned``: leave the loader alone)."""
    if lib_dir == "pinned":
        return
    from pytfrt.backends.cpu import _blas

    path = str(Path(lib_dir) / "libdnnl.so.3")
    _blas._find_library = lambda: ctypes.CDLL(path)  # type: ignore[assignment]


def _version() -> str:
    from pytfrt.backends.cpu import _blas

    lib = _blas._find_library()
    if lib is None:
        return "none"

    class _V(ctypes.Structure):
        _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                    ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                    ("gpu_runtime", ctypes.c_uint)]

    lib.dnnl_version.restype = ctypes.POINTER(_V)
    v = lib.dnnl_version().contents
    return f"{v.major}.{v.minor}.{v.patch}"


def _layers_child(args: argparse.Namespace) -> dict[str, Any]:
    from pytfrt.backends.cpu import conv

    rng = np.random.default_rng(0)
    cases: list[dict[str, Any]] = []
    for name, h, cin, cout, res in LAYERS:
        w = (rng.standard_normal((1, 1, cin, cout)) / np.sqrt(cin)).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32) * 0.1
        x = rng.standard_normal((1, h, h, cin)).astype(np.float32)
        r = rng.standard_normal((1, h, h, cout)).astype(np.float32) if res else None
        plan = conv.plan_conv2d(w, layout="NHWC", bias=b, activation="relu")
        fn = conv.runner(plan)
        ref = x.astype(np.float64).reshape(-1, cin) @ w.astype(np.float64).reshape(cin, cout) + b
        if r is not None:
            ref = ref + r.reshape(-1, cout)
        ref = np.maximum(ref, 0).reshape(1, h, h, cout)
        out = np.empty((1, h, h, cout), np.float32)

        def call(fn: Any = fn, x: np.ndarray = x, r: np.ndarray | None = r,
                 out: np.ndarray = out) -> np.ndarray:
            if r is not None:
                out[...] = r  # the residual lives in the output buffer (in-place sum)
                return fn(x, out, out)
            return fn(x, None, out)

        y = call()
        err = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
        impl = plan.dnnl.impl(x.shape, 1 if res else 0) if plan.dnnl is not None else None
        impl = impl or f"built-in {plan.algorithm_for(out.shape)}"
        cases.append({"name": name, "call": call, "err": err, "impl": impl, "t": [], "wall": [],
                      "copy": [], "residual": r, "out": out,
                      "gflop": 2e-9 * h * h * cin * cout})
    for _ in range(5):
        for c in cases:
            c["call"]()
    for _ in range(args.calls):
        for c in cases:
            if c["residual"] is not None:  # time the residual's copy apart, subtract it
                t0 = time.thread_time_ns()
                c["out"][...] = c["residual"]
                c["copy"].append(time.thread_time_ns() - t0)
            t0, w0 = time.thread_time_ns(), time.perf_counter_ns()
            c["call"]()
            c["wall"].append(time.perf_counter_ns() - w0)
            c["t"].append(time.thread_time_ns() - t0)
    rows = []
    for c in cases:
        med = statistics.median(c["t"]) / 1e3
        copy = statistics.median(c["copy"]) / 1e3 if c["copy"] else 0.0
        rows.append({"name": c["name"], "us": med, "copy_us": copy, "impl": c["impl"],
                     "wall_us": statistics.median(c["wall"]) / 1e3,
                     "err": c["err"], "gflops": c["gflop"] / (med * 1e-6)})
    return {"version": _version(), "rows": rows}


def _torch_child(args: argparse.Namespace) -> dict[str, Any]:
    """The same layers through PyTorch's bundled oneDNN (``torch.ops.mkldnn``: the primitives
    PyTorch's compiler fuses, weights prepacked once), one thread."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    calls = []
    for _name, h, cin, cout, res in LAYERS:
        x = torch.randn(1, cin, h, h).to(memory_format=torch.channels_last)
        w = torch.randn(cout, cin, 1, 1) / cin ** 0.5
        b = torch.randn(cout) * 0.1
        wp = torch._C._nn.mkldnn_reorder_conv2d_weight(w.to_mkldnn(), [0, 0], [1, 1], [1, 1], 1,
                                                       list(x.shape))  # type: ignore[call-arg]
        r = torch.randn(1, cout, h, h).to(memory_format=torch.channels_last)
        acc = r.clone()
        ref = torch.relu(torch.nn.functional.conv2d(x, w, b) + (r if res else 0))
        if res:
            def call(x: Any = x, wp: Any = wp, b: Any = b, acc: Any = acc, r: Any = r) -> Any:
                acc.copy_(r)  # in-place sum into the residual's buffer
                torch.ops.mkldnn._convolution_pointwise_.binary(
                    acc, x, wp, b, [0, 0], [1, 1], [1, 1], 1, "add", 1.0, "relu", [], "")
                return acc
        else:
            def call(x: Any = x, wp: Any = wp, b: Any = b, acc: Any = acc, r: Any = r) -> Any:
                return torch.ops.mkldnn._convolution_pointwise(
                    x, wp, b, [0, 0], [1, 1], [1, 1], 1, "relu", [], "")
        with torch.no_grad():
            err = float((call() - ref).abs().max() / ref.abs().max())
        calls.append((call, err))
    with torch.no_grad():
        for _ in range(5 + args.calls):
            for call, _err in calls:
                call()
    return {"version": torch.__config__.show().split("MKL-DNN v")[1].split()[0],
            "errs": [e for _c, e in calls]}


def _verbose_convs(text: str) -> dict[tuple[str, str], list[float]]:
    """``(problem, post-ops) -> [exec ms]`` from ``ONEDNN_VERBOSE`` convolution lines (3.2's and
    3.12's formats), plus ``(problem, "impl:" + post-ops)`` -> implementation."""
    out: dict[tuple[str, str], Any] = {}
    for line in text.splitlines():
        f = line.split(",")
        if not line.startswith("onednn_verbose") or "exec" not in f or "convolution" not in f:
            continue
        i = f.index("convolution")
        post = next((a.split(":", 1)[1] for a in f[i + 4].split() if "post-ops" in a), "")
        out.setdefault((f[-2], post), []).append(float(f[-1]))
        out[(f[-2], "impl:" + post)] = f[i + 1]
    return out


def kernels(args: argparse.Namespace) -> None:
    """oneDNN's own execution times (``ONEDNN_VERBOSE``) of the layers: pytfrt on the pinned
    3.2 against PyTorch's bundled oneDNN, alternating processes."""
    runs = []
    for rnd in range(args.rounds):
        order = ["pinned", "torch"] if rnd % 2 == 0 else ["torch", "pinned"]
        for who in order:
            what = "layers" if who == "pinned" else "torch-layers"
            cmd = ["taskset", "-c", "0", sys.executable, str(Path(__file__).resolve()),
                   "_child", "pinned", what, "--calls", str(args.calls)]
            env = dict(_child_env("pinned"), ONEDNN_VERBOSE="1")
            p = subprocess.run(cmd, env=env, check=True, text=True, stdout=subprocess.PIPE)
            rec = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
            convs = _verbose_convs(p.stdout)
            row = []
            for name, h, cin, cout, res in LAYERS:
                prob = f"mb1_ic{cin}oc{cout}_ih{h}oh{h}kh1sh1dh0ph0_iw{h}ow{h}kw1sw1dw0pw0"
                post = "sum+eltwise_relu" if res else "eltwise_relu"
                ts = convs.get((prob, post), [])[5:]  # the warm-up calls left out
                row.append({"name": name, "us": 1e3 * statistics.median(ts) if ts else None,
                            "n": len(ts), "impl": convs.get((prob, "impl:" + post))})
            runs.append({"who": who, "round": rnd, "version": rec["version"], "rows": row,
                         "errs": rec.get("errs") or [r["err"] for r in rec["rows"]]})
            print(f"round {rnd} {who} oneDNN {rec['version']}: " + "  ".join(
                f"{r['us']:.0f}" if r["us"] else "-" for r in row), flush=True)
    print("\nper layer, oneDNN exec time (ONEDNN_VERBOSE), median over rounds of per-process "
          "medians (us):")
    print(f"{'layer':<26} {'pytfrt 3.2':>11} {'torch':>11}  torch/pytfrt per round  impls")
    summary = []
    for i, (name, *_r) in enumerate(LAYERS):
        a = [r["rows"][i]["us"] for r in runs if r["who"] == "pinned"]
        b = [r["rows"][i]["us"] for r in runs if r["who"] == "torch"]
        if None in a or None in b:
            print(f"{name:<26} missing (no matching verbose line)")
            continue
        impls = {r["who"]: r["rows"][i]["impl"] for r in runs}
        ratios = [y / x for x, y in zip(a, b, strict=False)]
        summary.append({"name": name, "pytfrt_us": statistics.median(a),
                        "torch_us": statistics.median(b), "ratios": ratios, "impls": impls})
        print(f"{name:<26} {statistics.median(a):11.1f} {statistics.median(b):11.1f}  "
              + " ".join(f"{q:.3f}" for q in ratios) + f"  {impls}")
    from pytfrt.tools.bench import machine_info, save_results

    save_results("dnnl_versions_kernels", {"machine": machine_info(), "calls": args.calls,
                                           "runs": runs, "summary": summary},
                 lambda path: _plot([(r["name"], {"pytfrt (oneDNN 3.2)": r["pytfrt_us"],
                                                  "torch's oneDNN": r["torch_us"]})
                                     for r in summary], "oneDNN execution time, us", path))


def _plot(rows: list[tuple[str, dict[str, float]]], ylabel: str, path: Path) -> None:
    """Grouped bars: one group per layer, one bar per library."""
    from pytfrt.tools.bench import pyplot

    plt = pyplot()
    if plt is None or not rows:
        return
    labels = list(rows[0][1])
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(labels)
    for j, label in enumerate(labels):
        ax.bar([i + j * width for i in range(len(rows))], [v[label] for _, v in rows],
               width, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))])
    ax.set_xticklabels([name for name, _ in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title("ResNet-50's 1x1 convolutions at batch 1, one thread")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _child_env(lib_dir: str) -> dict[str, str]:
    env = dict(os.environ, PYTFRT_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if lib_dir != "pinned":
        env["LD_LIBRARY_PATH"] = lib_dir + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    return env


def _run_child(lib_dir: str, argv: list[str], capture: bool) -> str:
    cmd = ["taskset", "-c", "0", sys.executable, str(Path(__file__).resolve()),
           "_child", lib_dir, *argv]
    p = subprocess.run(cmd, env=_child_env(lib_dir), check=True, text=True,
                       stdout=subprocess.PIPE if capture else None)
    return p.stdout if capture else ""


def layers(args: argparse.Namespace) -> None:
    runs: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        libs = args.lib if rnd % 2 == 0 else args.lib[::-1]
        for lib in libs:
            out = _run_child(lib, ["layers", "--calls", str(args.calls)], capture=True)
            rec = json.loads(out.strip().splitlines()[-1])
            rec.update(lib=lib, round=rnd)
            runs.append(rec)
            print(f"round {rnd} {lib} (oneDNN {rec['version']}):")
            for r in rec["rows"]:
                print(f"  {r['name']:<26} {r['us']:8.1f} us (wall {r['wall_us']:8.1f})  "
                      f"{r['gflops']:6.1f} GFLOP/s  "
                      f"err {r['err']:.1e}  {r['impl']}")
    libs = list(dict.fromkeys(r["lib"] for r in runs))
    print("\nper layer, median over rounds of the per-process median thread CPU time (us):")
    hdr = "  ".join(f"{lib[-22:]:>22}" for lib in libs)
    print(f"{'layer':<26} {hdr}  ratio 2nd/1st (per round)")
    summary = []
    for i, (name, *_rest) in enumerate(LAYERS):
        per = {lib: [r["rows"][i]["us"] for r in runs if r["lib"] == lib] for lib in libs}
        meds = [statistics.median(per[lib]) for lib in libs]
        ratios = [b / a for a, b in zip(per[libs[0]], per[libs[-1]], strict=False)]
        summary.append({"name": name, "median_us": dict(zip(libs, meds, strict=True)),
                        "ratios": ratios})
        print(f"{name:<26} " + "  ".join(f"{m:22.1f}" for m in meds) + "  "
              + " ".join(f"{q:.3f}" for q in ratios))
    from pytfrt.tools.bench import machine_info, save_results

    save_results("dnnl_versions_layers", {"machine": machine_info(), "calls": args.calls,
                                          "runs": runs, "summary": summary},
                 lambda path: _plot([(r["name"], r["median_us"]) for r in summary],
                                    "thread CPU per call, us", path))


def model(args: argparse.Namespace) -> None:
    for rnd in range(args.rounds):
        libs = args.lib if rnd % 2 == 0 else args.lib[::-1]
        for lib in libs:
            print(f"=== round {rnd} {lib}", flush=True)
            _run_child(lib, ["model", "--calls", str(args.calls)], capture=False)


def _child(lib_dir: str, argv: list[str]) -> None:
    _use_library(lib_dir)
    if argv[0] in ("layers", "torch-layers"):
        ap = argparse.ArgumentParser()
        ap.add_argument("--calls", type=int, default=200)
        child = _layers_child if argv[0] == "layers" else _torch_child
        rec = child(ap.parse_args(argv[1:]))
        sys.stdout.flush()
        print(json.dumps(rec), flush=True)
        return
    print(f"oneDNN {_version()}", flush=True)
    sys.argv = [str(HERE / "call_account.py"), "--model", "resnet50", "--ort-threads", "1",
                *argv[1:]]
    sys.path.insert(0, str(HERE))
    runpy.run_path(str(HERE / "call_account.py"), run_name="__main__")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "_child":
        _child(sys.argv[2], sys.argv[3:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("layers", "kernels", "model"))
    ap.add_argument("--lib", action="append", default=[],
                    help="'pinned' or a directory holding libdnnl.so.3 (layers, model: give two)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=None)
    args = ap.parse_args()
    if args.what != "kernels" and len(args.lib) != 2:
        ap.error(f"{args.what} compares two libraries: give --lib twice")
    if args.calls is None:
        args.calls = 200 if args.what == "layers" else 40
    {"layers": layers, "kernels": kernels, "model": model}[args.what](args)


if __name__ == "__main__":
    main()
