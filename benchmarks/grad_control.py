"""Reverse mode through ``pytfrt.while_loop``: time per gradient vs the trip count.

The function: ``a = x; repeat n times: a = tanh(a * w + x)``; loss ``sum(a)``; the gradient
with respect to ``x`` (a float32 vector of 256), for ``n`` in 10, 100, 1000, 10000.  Variants:

* ``pytfrt while`` -- ``pytfrt.grad`` through ``pytfrt.while_loop`` (the forward loop stacks the
  loop-carried values in chunks, the adjoint loop runs back over them; ``docs/function.md``);
* ``pytfrt while 1 chunk`` -- the same with the stacks grown by one ``concat`` per iteration
  (copying them: quadratic in the trip count), as the while rule stacked before its chunks;
* ``pytfrt unrolled`` -- the same loop as Python ``for`` (unrolled while tracing: n copies of the
  body and of its gradient), n <= 100 only;
* ``jax fori_loop`` -- ``jax.jit(jax.grad(...))`` of ``lax.fori_loop`` (a scan in reverse mode),
  if jax is installed;
* ``pytfrt forward only`` -- the ``while_loop`` without its gradient (``@pytfrt.function``), the
  reference for what the gradient adds.

Every variant is compiled/traced once (excluded); calls are interleaved round-robin and the
median per call is reported with the ratio to JAX and the time per trip (constant when the
cost is linear in the trip count).  Writes ``benchmarks/results/<out>.json`` and ``.png``
(``<out>`` defaults to ``grad_control``).

Usage: ``python benchmarks/grad_control.py [--repeats 15] [--trips 10,100,1000,10000]
[--out grad_control]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
SIZE = 256
TRIPS = (10, 100, 1000, 10000)


def _loop(n: int) -> Callable[[Any, Any], Any]:
    import pytfrt
    from pytfrt import eager

    def f(x: Any, w: Any) -> Any:
        def body(i: Any, a: Any) -> Any:
            return i + 1, eager.tanh(a * w + x)

        return eager.reduce_sum(pytfrt.while_loop(lambda i, a: i < n, body, (0, x))[1])

    return f


def pytfrt_while(n: int) -> Callable[[np.ndarray, np.ndarray], Any]:
    import pytfrt

    return pytfrt.grad(_loop(n))  # type: ignore[no-any-return]


def pytfrt_while_one_chunk(n: int, x: np.ndarray, w: np.ndarray) -> Callable[..., Any]:
    """``pytfrt while`` with the stacks grown by one ``concat`` per iteration (the chunk limit
    set beyond the trip count): the quadratic copy the chunked stacks avoid, as a peer."""
    from pytfrt.compiler import autodiff_control

    g = pytfrt_while(n)
    saved = autodiff_control.CHUNK
    autodiff_control.CHUNK = 2**30
    try:
        g(x, w)  # traced now, with one chunk
    finally:
        autodiff_control.CHUNK = saved
    return g


def pytfrt_forward(n: int) -> Callable[[np.ndarray, np.ndarray], Any]:
    from pytfrt.function import function

    return function(_loop(n))  # type: ignore[no-any-return]


def pytfrt_unrolled(n: int) -> Callable[[np.ndarray, np.ndarray], Any]:
    import pytfrt
    from pytfrt import eager

    def f(x: Any, w: Any) -> Any:
        a = x
        for _ in range(n):
            a = eager.tanh(a * w + x)
        return eager.reduce_sum(a)

    return pytfrt.grad(f)  # type: ignore[no-any-return]


def jax_fori(n: int) -> Callable[[np.ndarray, np.ndarray], Any] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def f(x: Any, w: Any) -> Any:
        return jnp.sum(jax.lax.fori_loop(0, n, lambda i, a: jnp.tanh(a * w + x), x))

    g = jax.jit(jax.grad(f))
    return lambda x, w: np.asarray(g(x, w))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--trips", default=",".join(map(str, TRIPS)),
                    help="comma-separated trip counts")
    ap.add_argument("--out", default="grad_control", help="results file name (no suffix)")
    args = ap.parse_args()
    trips = [int(t) for t in args.trips.split(",")]
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, SIZE).astype(np.float32)
    w = rng.uniform(0.2, 0.8, SIZE).astype(np.float32)
    rows: list[dict[str, Any]] = []
    for n in trips:
        variants: dict[str, Callable[..., Any]] = {
            "pytfrt while": pytfrt_while(n),
            "pytfrt while 1 chunk": pytfrt_while_one_chunk(n, x, w)}
        if n <= 100:
            variants["pytfrt unrolled"] = pytfrt_unrolled(n)
        j = jax_fori(n)
        if j is not None:
            variants["jax fori_loop"] = j
        ref = None
        for name, fn in variants.items():  # compile, and check the gradients agree
            g = np.asarray(fn(x, w))
            if ref is None:
                ref = g
            np.testing.assert_allclose(g, ref, rtol=1e-3, atol=1e-5, err_msg=name)
        variants["pytfrt forward only"] = pytfrt_forward(n)  # the loop without its gradient
        variants["pytfrt forward only"](x, w)
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.repeats):
            for name, fn in variants.items():
                t0 = time.perf_counter()
                fn(x, w)
                times[name].append(time.perf_counter() - t0)
        base = statistics.median(times["jax fori_loop"]) if "jax fori_loop" in times else None
        for name, ts in times.items():
            med = statistics.median(ts)
            rows.append({"trips": n, "variant": name, "median_ms": med * 1e3,
                         "us_per_trip": med * 1e6 / n, "vs_jax": med / base if base else None})
    print(f"{'trips':>6} {'variant':<20} {'median ms':>10} {'us/trip':>8} {'x jax':>7}")
    for r in rows:
        ratio = f"{r['vs_jax']:.1f}" if r["vs_jax"] else "-"
        print(f"{r['trips']:>6} {r['variant']:<20} {r['median_ms']:>10.2f} "
              f"{r['us_per_trip']:>8.1f} {ratio:>7}")
    meta = {"command": f"python benchmarks/grad_control.py --repeats {args.repeats} "
                       f"--trips {args.trips} --out {args.out}",
            "machine": f"{platform.machine()} {os.cpu_count()} cpus",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "size": SIZE}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                          indent=1))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r["variant"] for r in rows):
        pts = [(r["trips"], r["median_ms"]) for r in rows if r["variant"] == name]
        ax.loglog(*zip(*pts, strict=True), marker="o", label=name)
    ax.set_xlabel("trip count")
    ax.set_ylabel("ms per gradient (median)")
    ax.set_title(f"grad through a loop, state f32[{SIZE}]")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{args.out}.png", dpi=120)


if __name__ == "__main__":
    main()
