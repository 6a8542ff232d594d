"""XOR training throughput: the MLIR program through pytfrt vs NumPy and PyTorch, in one run.

Variants (all the same 2-2-1 sigmoid MLP, full batch of 4, MSE, plain SGD, float32):

* ``pytfrt s`` / ``pytfrt mstd:2`` -- ``examples/mlp_xor/xor_training.mlir`` compiled once, then
  the ``xor_training`` function executed (load and compile time excluded); per step ~55 kernels
  in three function invocations (the loop body, ``tfrt.call @mlp_forward``, a ``tfrt.if`` branch).
  The function qualifies for whole-function execution (docs/executor.md): on ``s`` it runs as
  generated straight-line code whose kernels form one fused segment per step (one C call;
  the ``tfrt.if`` that prints stays Python code); on ``mstd:2``
  its several streams keep the dataflow executor.
* ``pytfrt s unfused`` -- whole-function execution with fused segments off
  (``PYTFRT_FUSE_SEGMENTS=0``): one Python call per kernel, the before of the fused segments.
* ``pytfrt s dataflow`` -- the same on ``s`` with whole-function execution off
  (``load_program(..., whole_function=False)``, i.e. ``PYTFRT_WHOLE_FUNCTION=0``): the before.
* ``pytfrt python`` -- ``examples/mlp_xor/xor_training.py``: the step written in Python with
  ``@pytfrt.function`` + ``pytfrt.value_and_grad``, compiled once, called once per step from a
  Python loop (the per-call path of a compiled function).
* ``pytfrt python per-kernel`` -- the same, compiled without ``-tg-fuse-small-graph``: one
  Python call per kernel (17), the call path before the whole-region Numba kernel.
* ``numpy loop`` -- a hand-written NumPy loop of the same maths.
* ``jax jit`` -- the same step with ``jax.value_and_grad`` under ``jax.jit``, called once per
  step (if jax is installed).
* ``torch eager`` -- PyTorch eager with autograd (``loss.backward()`` + in-place updates), if
  torch is installed (``pip install torch==2.13.0``).

Also times, in fresh processes, the Python step's trace + compile, its first two calls (op by
op) and its third (the Numba compile of the whole-region kernel with a cold cache directory,
its load with a warm one).

**The process as run** (``--process-only`` runs just this part, with the NumPy loop): the seed
experiment exactly as its file says to run it, ``bef_executor examples/mlp_xor/xor_training.mlir``
with default flags (the leak-checking allocator, the ``s`` queue; 2000 steps), in fresh
processes, against ``bef_executor`` on a trivial ``.mlir`` (``benchmarks/startup.py``'s program).
The steps/s of the process is ``2000 / (T(xor) - T(trivial))``, in wall time and in CPU time
(user + system of the child, from ``wait4``; the figure that holds on a loaded machine),
compared with the NumPy loop's steps/s from the same run.  One run with an empty cache
directory first (``cold``: the C compiler builds the segment), then ``--repeats`` with it
filled (``warm``: the process loads the compiled segment from disk).  The same program on the
NumPy path (``PYTFRT_NUMPY_FREE=0``: the process imports NumPy, docs/host.md) runs interleaved
with them, as the before, and must print the same text.
Prints a table (steps/s, us/step, ratio to the NumPy loop), writes
``benchmarks/results/xor.json`` and ``benchmarks/results/xor.png``.

Usage: ``python benchmarks/xor.py [--steps 2000] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "examples" / "mlp_xor" / "xor_training.mlir"


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (``platform.processor()`` is often empty)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


RESULTS = REPO / "benchmarks" / "results"

X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
Y = np.array([[0], [1], [1], [0]], np.float32)
WH = np.array([[0.27, -0.46], [-0.92, -0.97]], np.float32)
WO = np.array([[0.63], [0.83]], np.float32)


def pytfrt_runner(queue: str, steps: int, whole: bool = True,
                  fuse: bool = True) -> Callable[[], float]:
    """Compile the program once; the returned callable runs it and returns the seconds taken.

    ``whole``: whole-function execution on (the default) or off (the dataflow executor);
    ``fuse``: its fused segments on (the default) or off (``PYTFRT_FUSE_SEGMENTS=0``)."""
    from pytfrt.executor import load_program
    from pytfrt.executor.whole_function import FUSE_SWITCH
    from pytfrt.host import HostContext, ResourceContext
    from pytfrt.kernel_libraries import builtin_registry
    from pytfrt.mlir import compile_mlir

    text = PROGRAM.read_text().replace(
        "%steps = tfrt.constant.i32 2000", f"%steps = tfrt.constant.i32 {steps}"
    )
    host = HostContext(queue, builtin_registry())
    saved = os.environ.get(FUSE_SWITCH)
    os.environ[FUSE_SWITCH] = "1" if fuse else "0"  # read when the program is loaded
    try:
        bef = load_program(compile_mlir(text, str(PROGRAM)), host, whole_function=whole)
    finally:
        if saved is None:
            del os.environ[FUSE_SWITCH]
        else:
            os.environ[FUSE_SWITCH] = saved
    fn = bef.get_function("xor_training")
    assert fn is not None

    def run() -> float:
        ctx = host.new_execution_context(ResourceContext())
        with contextlib.redirect_stdout(io.StringIO()):
            start = time.perf_counter()
            results = fn.execute(ctx, [])
            host.await_values(results)
            host.quiesce()
            elapsed = time.perf_counter() - start
        assert not results[0].is_error(), results[0]
        return elapsed

    return run


def numpy_runner(steps: int) -> Callable[[], float]:
    """The same training as a NumPy loop."""

    def sigmoid(x: np.ndarray) -> np.ndarray:
        return np.float32(1) / (np.float32(1) + np.exp(-x))

    def run() -> float:
        wh, wo = WH.copy(), WO.copy()
        bh, bo = np.zeros(2, np.float32), np.zeros(1, np.float32)
        lr = np.float32(8.0)
        start = time.perf_counter()
        for _ in range(steps):
            h = sigmoid(X @ wh + bh)
            o = sigmoid(h @ wo + bo)
            dz_o = (o - Y) * o * (np.float32(1) - o)
            dh = dz_o @ wo.T
            wo -= lr / 4 * (h.T @ dz_o)
            bo -= lr * dz_o.mean(axis=0)
            dz_h = dh * h * (np.float32(1) - h)
            wh -= lr / 4 * (X.T @ dz_h)
            bh -= lr * dz_h.mean(axis=0)
        return time.perf_counter() - start

    return run


def _xor_example() -> Any:
    import sys

    sys.path.insert(0, str(PROGRAM.parent))
    try:
        import xor_training
    finally:
        sys.path.pop(0)
    return xor_training


def _step_loop(step: Callable[..., Any], init: tuple, steps: int) -> Callable[[], float]:
    """A runner calling ``params = step(params, X, Y)[1]`` ``steps`` times from ``init``."""

    def run() -> float:
        params = init
        start = time.perf_counter()
        for _ in range(steps):
            _, params = step(params, X, Y)
        return time.perf_counter() - start

    return run


def pytfrt_python_runner(steps: int) -> Callable[[], float]:
    """``examples/mlp_xor/xor_training.py``'s compiled train step, called ``steps`` times."""
    xt = _xor_example()
    for _ in range(3):  # trace and compile outside the timing (the region compiles on call 3)
        xt.train_step(xt.INITIAL_PARAMS, X, Y)
    from pytfrt.backends.cpu import small_graph

    small_graph.wait_for_compiles()  # (in the background)
    return _step_loop(xt.train_step, xt.INITIAL_PARAMS, steps)


def pytfrt_per_kernel_runner(steps: int) -> Callable[[], float]:
    """The same compiled step without ``-tg-fuse-small-graph`` (one call per kernel: the call
    path before the whole-region kernel), for a before/after in one run."""
    import pytfrt
    from pytfrt.compiler import passes

    xt = _xor_example()
    step = pytfrt.function(xt.train_step.fn)
    saved = passes.DEFAULT_PIPELINE
    passes.DEFAULT_PIPELINE = tuple(p for p in saved if p != "tg-fuse-small-graph")
    try:
        step(xt.INITIAL_PARAMS, X, Y)  # trace and compile without the pass
    finally:
        passes.DEFAULT_PIPELINE = saved
    return _step_loop(step, xt.INITIAL_PARAMS, steps)


COMPILE_PROBE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.perf_counter()
import numpy as np
import xor_training as xt
t1 = time.perf_counter()
xt.train_step.compiled(xt.INITIAL_PARAMS, xt.X, xt.Y)
t2 = time.perf_counter()
xt.train_step(xt.INITIAL_PARAMS, xt.X, xt.Y)
xt.train_step(xt.INITIAL_PARAMS, xt.X, xt.Y)
t3 = time.perf_counter()
xt.train_step(xt.INITIAL_PARAMS, xt.X, xt.Y)  # the region's Numba function compiles now
from pytfrt.backends.cpu import small_graph
small_graph.wait_for_compiles()  # (in the background: the call above did not wait)
xt.train_step(xt.INITIAL_PARAMS, xt.X, xt.Y)
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "trace_compile_s": t2 - t1,
                  "two_op_by_op_calls_s": t3 - t2, "numba_call_s": t4 - t3}))
"""


def compile_times() -> list[dict[str, Any]]:
    """Trace + passes + lowering, and the first call (the Numba compile of the whole-region
    kernel, or its load from Numba's on-disk cache) of ``xor_training.py``'s step, each in a
    fresh process: a cold cache directory, then the same directory again (warm)."""
    import subprocess
    import sys
    import tempfile

    out = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PYTFRT_CACHE_DIR=cache)
        for label in ("cold cache", "warm cache"):
            res = subprocess.run([sys.executable, "-c", COMPILE_PROBE, str(PROGRAM.parent)],
                                 env=env, capture_output=True, text=True, check=True)
            out.append({"cache": label, **json.loads(res.stdout.strip().splitlines()[-1])})
    return out


def jax_step() -> Callable[..., Any] | None:
    """The XOR step (``examples/mlp_xor/xor_training.py``'s maths: forward, MSE,
    ``jax.value_and_grad``, SGD with rate 4 on the MSE gradient) under ``jax.jit``: ``step(params,
    x, y) -> (loss, params)``; None if jax is missing.  Also the tests' JAX oracle."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def mse(params: tuple, x: Any, y: Any) -> Any:
        wh, bh, wo, bo = params
        h = jax.nn.sigmoid(x @ wh + bh)
        o = jax.nn.sigmoid(h @ wo + bo)
        return jnp.mean((o - y) ** 2)

    @jax.jit
    def step(params: tuple, x: Any, y: Any) -> Any:
        loss, grads = jax.value_and_grad(mse)(params, x, y)
        return loss, tuple(p - 4.0 * g for p, g in zip(params, grads, strict=True))

    return step  # type: ignore[no-any-return]


def jax_runner(steps: int) -> Callable[[], float] | None:
    """The same step with jax.value_and_grad under jax.jit (None if jax is missing)."""
    step = jax_step()
    if step is None:
        return None
    import jax.numpy as jnp

    init = (jnp.asarray(WH), jnp.zeros(2, jnp.float32), jnp.asarray(WO),
            jnp.zeros(1, jnp.float32))
    x, y = jnp.asarray(X), jnp.asarray(Y)
    step(init, x, y)[0].block_until_ready()

    def run() -> float:
        params = init
        start = time.perf_counter()
        for _ in range(steps):
            loss, params = step(params, x, y)
        loss.block_until_ready()
        return time.perf_counter() - start

    return run


def torch_runner(steps: int) -> Callable[[], float] | None:
    """The same training in PyTorch eager with autograd (None if torch is missing)."""
    try:
        import torch
    except ImportError:
        return None
    # One intra-op thread: the tensors are tiny, and idle OpenMP workers spinning after each op
    # would steal the CPU from the variants interleaved with this one on a 2-core machine.
    torch.set_num_threads(1)

    def run() -> float:
        x, y = torch.from_numpy(X), torch.from_numpy(Y)
        wh = torch.tensor(WH, requires_grad=True)
        wo = torch.tensor(WO, requires_grad=True)
        bh = torch.zeros(2, requires_grad=True)
        bo = torch.zeros(1, requires_grad=True)
        # With loss = sum((o - y)^2) every gradient is 2 * (the batch sum the others use), and
        # the others' updates (lr/4 * sum for weights, lr * mean for biases, lr = 8) are also
        # 2 * sum: so a plain `p -= p.grad` is the same update.
        start = time.perf_counter()
        for _ in range(steps):
            h = torch.sigmoid(x @ wh + bh)
            o = torch.sigmoid(h @ wo + bo)
            loss = ((o - y) ** 2).sum()
            loss.backward()
            with torch.no_grad():
                for p in (wh, wo, bh, bo):
                    assert p.grad is not None
                    p -= p.grad
                    p.grad.zero_()
        return time.perf_counter() - start

    return run


PROGRAM_STEPS = 2000  # the step count written in xor_training.mlir


def process_as_run(repeats: int, numpy_steps_per_s: float,
                   numpy_cpu_steps_per_s: float) -> dict[str, Any]:
    """The seed experiment as run, in fresh processes (see the module docstring)."""
    import tempfile

    from startup import ENV, TRIVIAL, timed, tool

    with tempfile.TemporaryDirectory() as tmp:
        trivial = Path(tmp) / "trivial.mlir"
        trivial.write_text(TRIVIAL)
        cache = Path(tmp) / "cache"
        cache.mkdir(mode=0o700)
        env = dict(ENV, PYTFRT_CACHE_DIR=str(cache), NUMBA_CACHE_DIR=str(cache))
        xor_cmd = [*tool("bef_executor"), str(PROGRAM)]
        triv_cmd = [*tool("bef_executor"), str(trivial)]
        timed(triv_cmd, env)  # .pyc files
        cold_wall, cold_cpu, out = timed(xor_cmd, env)
        assert "correct: 4/4" in out, out
        # the same program on the NumPy path (PYTFRT_NUMPY_FREE=0), interleaved: the before
        numpy_env = dict(env, PYTFRT_NUMPY_FREE="0")
        timed(xor_cmd, numpy_env)
        runs: dict[str, list[tuple[float, float]]] = {"xor": [], "trivial": [], "numpy_path": []}
        for _ in range(repeats):
            runs["trivial"].append(timed(triv_cmd, env)[:2])
            wall, cpu, out = timed(xor_cmd, env)
            assert "correct: 4/4" in out, out
            runs["xor"].append((wall, cpu))
            wall, cpu, numpy_out = timed(xor_cmd, numpy_env)
            assert numpy_out == out, (numpy_out, out)  # the same text either way
            runs["numpy_path"].append((wall, cpu))

    def med(name: str, i: int) -> float:
        return statistics.median(r[i] for r in runs[name])

    res: dict[str, Any] = {
        "command": "bef_executor examples/mlp_xor/xor_training.mlir",
        "steps": PROGRAM_STEPS, "repeats": repeats,
        "cold_cache": {"wall_s": cold_wall, "cpu_s": cold_cpu},
        "numpy_loop_steps_per_s": numpy_steps_per_s,
        "numpy_loop_cpu_steps_per_s": numpy_cpu_steps_per_s,
    }
    for label, i, numpy_rate in (("wall", 0, numpy_steps_per_s),
                                 ("cpu", 1, numpy_cpu_steps_per_s)):
        xor_s, triv_s = med("xor", i), med("trivial", i)
        rate = PROGRAM_STEPS / max(xor_s - triv_s, 1e-9)
        res[label] = {"xor_s": xor_s, "trivial_s": triv_s, "minus_startup_s": xor_s - triv_s,
                      "steps_per_s": rate, "ratio_vs_numpy": rate / numpy_rate}
        np_s = med("numpy_path", i)
        np_rate = PROGRAM_STEPS / max(np_s - triv_s, 1e-9)
        res[label]["numpy_path"] = {"xor_s": np_s, "minus_startup_s": np_s - triv_s,
                                    "steps_per_s": np_rate, "ratio_vs_numpy": np_rate / numpy_rate}
    return res


def print_process(res: dict[str, Any]) -> None:
    print(f"the process as run: {res['command']} (default flags, {res['steps']} steps), "
          f"median of {res['repeats']} fresh processes, warm kernel cache")
    print(f"{'':<6}{'xor s':>9}{'trivial s':>11}{'difference s':>14}{'steps/s':>10}"
          f"{'x numpy loop':>14}")
    for label in ("wall", "cpu"):
        r = res[label]
        print(f"{label:<6}{r['xor_s']:>9.3f}{r['trivial_s']:>11.3f}{r['minus_startup_s']:>14.3f}"
              f"{r['steps_per_s']:>10.0f}{r['ratio_vs_numpy']:>14.3f}")
    for label in ("wall", "cpu"):
        r = res[label]["numpy_path"]
        print(f"{label:<6}{r['xor_s']:>9.3f}{'':>11}{r['minus_startup_s']:>14.3f}"
              f"{r['steps_per_s']:>10.0f}{r['ratio_vs_numpy']:>14.3f}  the NumPy path "
              "(PYTFRT_NUMPY_FREE=0)")
    print(f"cold kernel cache (first run): {res['cold_cache']['wall_s']:.2f} s wall, "
          f"{res['cold_cache']['cpu_s']:.2f} s CPU; NumPy loop "
          f"{res['numpy_loop_steps_per_s']:.0f} steps/s wall, "
          f"{res['numpy_loop_cpu_steps_per_s']:.0f} per CPU second (each ratio compares like "
          "with like)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--process-only", action="store_true",
                        help="only the process as run (and the NumPy loop it is compared with)")
    args = parser.parse_args()

    if args.process_only:
        numpy_run = numpy_runner(args.steps)
        numpy_run()
        walls, cpus = [], []
        for _ in range(args.repeats):
            c0 = time.thread_time()
            walls.append(numpy_run())
            cpus.append(time.thread_time() - c0)
        res = process_as_run(args.repeats, args.steps / statistics.median(walls),
                             args.steps / statistics.median(cpus))
        print_process(res)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "xor_process.json").write_text(json.dumps(
            {"meta": {"cpu": cpu_model(), "nproc": os.cpu_count(),
                      "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"),
                      "loadavg": os.getloadavg()}, **res}, indent=2) + "\n")
        print(f"wrote {RESULTS / 'xor_process.json'}")
        return

    variants: dict[str, Callable[[], float]] = {
        "numpy loop": numpy_runner(args.steps),
        "pytfrt s": pytfrt_runner("s", args.steps),
        "pytfrt mstd:2": pytfrt_runner("mstd:2", args.steps),
        "pytfrt s unfused": pytfrt_runner("s", args.steps, fuse=False),
        "pytfrt s dataflow": pytfrt_runner("s", args.steps, whole=False),
        "pytfrt python": pytfrt_python_runner(args.steps),
        "pytfrt python per-kernel": pytfrt_per_kernel_runner(args.steps),
    }
    torch_run = torch_runner(args.steps)
    if torch_run is not None:
        variants["torch eager"] = torch_run
    else:
        print("note: torch not installed, skipping the PyTorch variant")
    jax_run = jax_runner(args.steps)
    if jax_run is not None:
        variants["jax jit"] = jax_run
    else:
        print("note: jax not installed, skipping the JAX variant")

    # Interleave the variants inside every repetition, so machine load hits them alike.
    for run in variants.values():
        run()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, run in variants.items():
            c0 = time.thread_time()
            times[name].append(run())
            cpu[name].append(time.thread_time() - c0)
    rows = []
    for name in variants:
        median = statistics.median(times[name])
        rows.append(
            {
                "variant": name,
                "seconds": median,
                "best_seconds": min(times[name]),
                "us_per_step": median / args.steps * 1e6,
                "steps_per_s": args.steps / median,
                # the calling thread's CPU time: not inflated by time spent descheduled on a
                # loaded machine (which favours short runs); undercounts variants that work on
                # other threads (mstd:2, JAX)
                "cpu_us_per_step": statistics.median(cpu[name]) / args.steps * 1e6,
            }
        )
    base = next(r for r in rows if r["variant"] == "numpy loop")["us_per_step"]
    torch_row = next((r for r in rows if r["variant"] == "torch eager"), None)
    print(f"XOR training, {args.steps} steps, median of {args.repeats} (interleaved)")
    cpu_base = next(r for r in rows if r["variant"] == "numpy loop")["cpu_us_per_step"]
    print(f"{'variant':<26}{'steps/s':>12}{'us/step':>12}{'x numpy':>10}{'x torch':>10}"
          f"{'cpu us':>10}{'cpu x np':>10}")
    for r in rows:
        r["ratio_vs_numpy"] = r["us_per_step"] / base
        r["cpu_ratio_vs_numpy"] = r["cpu_us_per_step"] / cpu_base
        if torch_row is not None:
            r["ratio_vs_torch"] = r["us_per_step"] / torch_row["us_per_step"]
        print(
            f"{r['variant']:<26}{r['steps_per_s']:>12.0f}{r['us_per_step']:>12.1f}"
            f"{r['ratio_vs_numpy']:>10.2f}{r.get('ratio_vs_torch', float('nan')):>10.2f}"
            f"{r['cpu_us_per_step']:>10.1f}{r['cpu_ratio_vs_numpy']:>10.2f}"
        )

    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {
        "steps": args.steps,
        "repeats": args.repeats,
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }
    compiles = compile_times()
    print("xor_training.py step, fresh process: trace+compile / calls 1-2 (op by op) / "
          "call 3 (Numba compile or cache load)")
    for c in compiles:
        print(f"  {c['cache']:<12}{c['trace_compile_s']:>8.2f} s"
              f"{c['two_op_by_op_calls_s']:>8.3f} s{c['numba_call_s']:>8.3f} s")
    process = process_as_run(args.repeats, 1e6 / base, 1e6 / cpu_base)
    print_process(process)
    (RESULTS / "xor.json").write_text(json.dumps({"meta": meta, "rows": rows,
                                                  "compile": compiles, "process": process},
                                                 indent=2))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.barh([r["variant"] for r in rows], [r["us_per_step"] for r in rows])
    ax.set_xscale("log")
    ax.set_xlabel("microseconds per training step (log)")
    ax.set_title("XOR MLP training step")
    fig.tight_layout()
    fig.savefig(RESULTS / "xor.png", dpi=120)


if __name__ == "__main__":
    main()
