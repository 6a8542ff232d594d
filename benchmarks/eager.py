"""Eager benchmark: per-op dispatch time of pytfrt.eager next to NumPy, PyTorch, TF and JAX.

Measured in one run (each figure: the median of several repetitions of a timed loop; the
machine is shared and noisy, so the frameworks are interleaved repetition by repetition):

* per-op dispatch for a 4x2 float32 ``add``, the ``a + b`` operator, ``add`` of a Python float,
  a 4x2 @ 2x2 ``matmul`` and a 4x2 ``sigmoid``, with eager Tensor inputs and with NumPy array
  inputs (and, when the C fast path is built, the same ops on the pure-Python path):
  NumPy's direct call (``np.add``, ``np.matmul``, ``1 / (1 + np.exp(-x))``, and SciPy's
  ``expit`` ufunc when installed), ``pytfrt.eager``, PyTorch eager, TensorFlow eager and JAX
  (dispatch only: no host copy, like the others);
* a 784-512-512-10 MLP forward pass (``relu(x @ W + b)`` twice, then ``softmax``) at batch 1 and
  256, each framework ending with its result on the host as a NumPy array.

Peers that fail to import are skipped with a note.  Prints a table with ratios to NumPy, saves
``benchmarks/results/eager.json`` and ``eager.png``.  Run: ``python benchmarks/eager.py``
(``--quick`` for a smoke run; ``--clock cpu`` times with the process's CPU time -- all its
threads, so asynchronous peers are charged for their worker threads -- instead of the wall
clock, for a machine shared with other jobs).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt import eager as te

RESULTS = Path(__file__).resolve().parent / "results"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


CLOCK: Callable[[], float] = time.perf_counter
"""The clock of :func:`_loop_time` (``--clock``: wall, or the process's CPU time)."""


def _loop_time(fn: Callable[[], Any], number: int) -> float:
    """Seconds per call of ``fn`` over ``number`` calls (GC off)."""
    gc_on = gc.isenabled()
    gc.disable()
    try:
        t0 = CLOCK()
        for _ in range(number):
            fn()
        return (CLOCK() - t0) / number
    finally:
        if gc_on:
            gc.enable()


def measure(cases: dict[str, Callable[[], Any]], number: int, repeats: int) -> dict[str, float]:
    """Median microseconds per call for each case, interleaving the cases per repetition."""
    for fn in cases.values():  # warm up (lazy compilation, caches)
        for _ in range(min(number, 200)):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            samples[name].append(_loop_time(fn, number) * 1e6)
    return {name: statistics.median(v) for name, v in samples.items()}


# -- peers ---------------------------------------------------------------------------------------


def _load_peers() -> tuple[dict[str, Any], list[str]]:
    peers: dict[str, Any] = {}
    notes: list[str] = []
    try:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        peers["torch"] = torch
    except Exception as exc:  # noqa: BLE001 - skipped with a note
        notes.append(f"PyTorch skipped: {exc}")
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf

        peers["tf"] = tf
    except Exception as exc:  # noqa: BLE001
        notes.append(f"TensorFlow skipped: {exc}")
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_platforms", "cpu")
        peers["jax"] = (jax, jnp)
    except Exception as exc:  # noqa: BLE001
        notes.append(f"JAX skipped: {exc}")
    try:
        from scipy.special import expit

        peers["expit"] = expit
    except Exception:  # noqa: BLE001
        notes.append("SciPy not installed: no single-ufunc NumPy sigmoid reference")
    return peers, notes


def per_op_cases(peers: dict[str, Any]) -> dict[str, dict[str, Callable[[], Any]]]:
    """op -> framework -> zero-argument callable dispatching the op once."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 2)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    w = rng.standard_normal((2, 2)).astype(np.float32)
    ta, tb, tw = te.constant(a), te.constant(b), te.constant(w)
    cases: dict[str, dict[str, Callable[[], Any]]] = {
        "add": {"numpy": lambda: np.add(a, b), "pytfrt": lambda: te.add(ta, tb),
                "pytfrt (numpy inputs)": lambda: te.add(a, b)},
        "a + b": {"numpy": lambda: a + b, "pytfrt": lambda: ta + tb},
        "add scalar": {"numpy": lambda: np.add(a, np.float32(2.0)),
                       "pytfrt": lambda: te.add(ta, 2.0),
                       "pytfrt (numpy input)": lambda: te.add(a, 2.0)},
        "matmul": {"numpy": lambda: np.matmul(a, w), "pytfrt": lambda: te.matmul(ta, tw),
                   "pytfrt (numpy inputs)": lambda: te.matmul(a, w)},
        "sigmoid": {
            "numpy": lambda: 1 / (1 + np.exp(-a)),
            "pytfrt": lambda: te.sigmoid(ta),
            "pytfrt (numpy input)": lambda: te.sigmoid(a),
        },
    }
    if te.c_fast_path_enabled():  # the same ops on the pure-Python path, for comparison
        py_add, py_sigmoid = te.add.__wrapped__, te.sigmoid.__wrapped__  # type: ignore[attr-defined]
        cases["add"]["pytfrt (pure Python)"] = lambda: py_add(ta, tb)
        cases["add scalar"]["pytfrt (pure Python)"] = lambda: py_add(ta, 2.0)
        cases["sigmoid"]["pytfrt (pure Python)"] = lambda: py_sigmoid(ta)
    if "expit" in peers:
        expit = peers["expit"]
        cases["sigmoid"]["numpy (expit ufunc)"] = lambda: expit(a)
    if "torch" in peers:
        torch = peers["torch"]
        pa, pb, pw = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(w)
        cases["add"]["torch"] = lambda: torch.add(pa, pb)
        cases["a + b"]["torch"] = lambda: pa + pb
        cases["matmul"]["torch"] = lambda: torch.matmul(pa, pw)
        cases["sigmoid"]["torch"] = lambda: torch.sigmoid(pa)
    if "tf" in peers:
        tf = peers["tf"]
        fa, fb, fw = tf.constant(a), tf.constant(b), tf.constant(w)
        cases["add"]["tensorflow"] = lambda: tf.add(fa, fb)
        cases["a + b"]["tensorflow"] = lambda: fa + fb
        cases["matmul"]["tensorflow"] = lambda: tf.matmul(fa, fw)
        cases["sigmoid"]["tensorflow"] = lambda: tf.sigmoid(fa)
    if "jax" in peers:
        jax, jnp = peers["jax"]
        ja, jb, jw = jnp.asarray(a), jnp.asarray(b), jnp.asarray(w)
        cases["add"]["jax"] = lambda: jnp.add(ja, jb)
        cases["a + b"]["jax"] = lambda: ja + jb
        cases["matmul"]["jax"] = lambda: jnp.matmul(ja, jw)
        cases["sigmoid"]["jax"] = lambda: jax.nn.sigmoid(ja)
    return cases


def mlp_cases(peers: dict[str, Any], batch: int) -> dict[str, Callable[[], Any]]:
    """framework -> one 784-512-512-10 forward pass ending in a host NumPy array."""
    rng = np.random.default_rng(1)
    sizes = (784, 512, 512, 10)
    ws = [(rng.standard_normal((i, o)) * 0.05).astype(np.float32)
          for i, o in zip(sizes, sizes[1:], strict=False)]
    bs = [(rng.standard_normal(o) * 0.05).astype(np.float32) for o in sizes[1:]]
    x = rng.standard_normal((batch, 784)).astype(np.float32)

    def np_softmax(z: np.ndarray) -> np.ndarray:
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def numpy_mlp() -> np.ndarray:
        h = np.maximum(x @ ws[0] + bs[0], 0)
        h = np.maximum(h @ ws[1] + bs[1], 0)
        return np_softmax(h @ ws[2] + bs[2])

    tx = te.constant(x)
    tws = [te.constant(w) for w in ws]
    tbs = [te.constant(b) for b in bs]

    def pytfrt_mlp() -> np.ndarray:
        h = te.relu(te.add(te.matmul(tx, tws[0]), tbs[0]))
        h = te.relu(te.add(te.matmul(h, tws[1]), tbs[1]))
        return te.softmax(te.add(te.matmul(h, tws[2]), tbs[2])).numpy()

    cases: dict[str, Callable[[], Any]] = {"numpy": numpy_mlp, "pytfrt": pytfrt_mlp}
    if "torch" in peers:
        torch = peers["torch"]
        px = torch.from_numpy(x)
        pws = [torch.from_numpy(w) for w in ws]
        pbs = [torch.from_numpy(b) for b in bs]

        def torch_mlp() -> np.ndarray:
            with torch.no_grad():
                h = torch.relu(px @ pws[0] + pbs[0])
                h = torch.relu(h @ pws[1] + pbs[1])
                return torch.softmax(h @ pws[2] + pbs[2], dim=-1).numpy()

        cases["torch"] = torch_mlp
    if "tf" in peers:
        tf = peers["tf"]
        fx = tf.constant(x)
        fws = [tf.constant(w) for w in ws]
        fbs = [tf.constant(b) for b in bs]

        def tf_mlp() -> np.ndarray:
            h = tf.nn.relu(tf.matmul(fx, fws[0]) + fbs[0])
            h = tf.nn.relu(tf.matmul(h, fws[1]) + fbs[1])
            return tf.nn.softmax(tf.matmul(h, fws[2]) + fbs[2]).numpy()

        cases["tensorflow"] = tf_mlp
    if "jax" in peers:
        jax, jnp = peers["jax"]
        jx = jnp.asarray(x)
        jws = [jnp.asarray(w) for w in ws]
        jbs = [jnp.asarray(b) for b in bs]

        def jax_mlp() -> np.ndarray:
            h = jax.nn.relu(jx @ jws[0] + jbs[0])
            h = jax.nn.relu(h @ jws[1] + jbs[1])
            return np.asarray(jax.nn.softmax(h @ jws[2] + jbs[2]))

        cases["jax"] = jax_mlp
    ref = numpy_mlp()
    np.testing.assert_allclose(pytfrt_mlp(), ref, rtol=1e-4, atol=1e-6)
    return cases


def _plot(results: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001 - plotting is optional
        return
    groups = list(results["per_op_us"]) + [f"mlp b={b}" for b in results["mlp_us"]]
    series: dict[str, list[float]] = {}
    rows = list(results["per_op_us"].values()) + list(results["mlp_us"].values())
    for row in rows:
        for fw in row:
            series.setdefault(fw, [])
    for fw in series:
        for row in rows:
            ref = row["numpy"]
            series[fw].append(row.get(fw, float("nan")) / ref)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(series)
    for i, (fw, vals) in enumerate(series.items()):
        ax.bar([g + i * width for g in range(len(groups))], vals, width, label=fw)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], groups)
    ax.set_yscale("log")
    ax.set_ylabel("time / NumPy time (log)")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_title("pytfrt.eager: per-op dispatch and MLP forward, relative to NumPy")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: the process's CPU time (all its threads), which other jobs "
                             "on a shared machine disturb less than the wall clock")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    number, repeats = (2000, 3) if args.quick else (20000, 9)
    peers, notes = _load_peers()
    results: dict[str, Any] = {
        "machine": {"nproc": os.cpu_count(), "cpu": _cpu_model(), "python": sys.version.split()[0],
                    "numpy": np.__version__},
        "c_fast_path": te.c_fast_path_enabled(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/eager.py" + (" --quick" if args.quick else "")
                   + (" --clock cpu" if args.clock == "cpu" else ""),
        "clock": args.clock,
        "notes": notes,
        "per_op_us": {},
        "mlp_us": {},
    }
    for mod in ("torch", "tf", "jax"):
        if mod in peers:
            m = peers[mod][0] if mod == "jax" else peers[mod]
            results["machine"][mod] = m.__version__
    print(f"clock: {args.clock}; per-op dispatch, us/op (ratio to NumPy's direct call); "
          "pytfrt's C fast path: "
          + ("on" if te.c_fast_path_enabled() else "off (not built or PYTFRT_NO_C_EAGER set)"))
    for op, cases in per_op_cases(peers).items():
        res = measure(cases, number, repeats)
        results["per_op_us"][op] = res
        ref = res["numpy"]
        line = ", ".join(f"{fw} {t:.3f} ({t / ref:.2f}x)" for fw, t in res.items())
        print(f"  {op:10s} {line}")
    print("MLP 784-512-512-10 forward, us/pass (ratio to NumPy)")
    for batch, n in ((1, max(number // 20, 100)), (256, max(number // 2000, 5))):
        res = measure(mlp_cases(peers, batch), n, repeats)
        results["mlp_us"][str(batch)] = res
        ref = res["numpy"]
        line = ", ".join(f"{fw} {t:.1f} ({t / ref:.2f}x)" for fw, t in res.items())
        print(f"  batch {batch:3d} {line}")
    for note in notes:
        print("note:", note)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "eager.json").write_text(json.dumps(results, indent=2) + "\n")
    _plot(results, RESULTS / "eager.png")
    print(f"saved {RESULTS / 'eager.json'} and eager.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
