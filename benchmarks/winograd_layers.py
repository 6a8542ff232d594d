"""ResNet-50's 3x3 stride-1 layers: oneDNN's direct convolution against the native Winograd.

Per batch size and layer shape (56x56x64, 28x28x128, 14x14x256, 7x7x512; bias and ReLU, pads 1),
``--filters`` different random filters are prepared for each contender and a timed round runs
the layer once with each filter in turn, so that (as inside a model, where every layer's
weights come from memory) the filters and transformed filters are cold: ``dnnl`` is an
``algorithm="dnnl"`` plan through :func:`pytfrt.backends.cpu.conv.runner` (split over the
threads as in a model), ``F4`` / ``F2`` the native Winograd with the tile forced
(:class:`pytfrt.backends.cpu._winograd_native.WinoConv`), ``auto`` with the tile and split the
module picks.  The contenders' rounds alternate (the same machine state for each); the table
gives each one's median milliseconds per layer call and oneDNN's time over it, plus the largest
difference from oneDNN's output relative to its largest magnitude.

With ``--isa avx2`` the native Winograd runs its AVX2 kernels (``_winograd_native.ISA``); run
with ``ONEDNN_MAX_CPU_ISA=AVX2`` in the environment oneDNN is limited to AVX2 too: what an
AVX2-only machine would run.

Usage: ``python benchmarks/winograd_layers.py [--batches 1 8] [--filters 6] [--rounds 25]
[--isa avx2] [--name winograd_layers]``; writes ``benchmarks/results/<name>.json`` and
``.png``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pytfrt.tools.bench import format_table, machine_info, pyplot, save_results

LAYERS = ((56, 64), (28, 128), (14, 256), (7, 512))
"""ResNet-50's 3x3 stride-1 layers: (image size, channels in = out)."""


def _contenders(nb: int, h: int, c: int, filters: int,
                rng: np.random.Generator) -> tuple[dict[str, Callable[[], Any]], dict[str, float]]:
    """The timed rounds of each contender for one layer, and their outputs' errors."""
    from pytfrt.backends.cpu import _winograd_native as wn
    from pytfrt.backends.cpu import conv

    x = rng.standard_normal((nb, h, h, c)).astype(np.float32)
    ws = [(rng.standard_normal((3, 3, c, c)) / (3 * c ** 0.5)).astype(np.float32)
          for _ in range(filters)]
    b = (0.1 * rng.standard_normal(c)).astype(np.float32)
    ys: dict[str, np.ndarray] = {}
    runs = [conv.runner(conv.plan_conv2d(w, layout="NHWC", pads=(1, 1, 1, 1), bias=b,
                                         activation="relu", algorithm="dnnl")) for w in ws]
    y = ys["dnnl"] = np.empty((nb, h, h, c), np.float32)
    rounds: dict[str, Callable[[], Any]] = {
        "dnnl": lambda: [r(x, None, y) for r in runs]}
    for name, tile in (("F4", 4), ("F2", 2), ("auto", None)):
        gos = [wn.WinoConv(w, b, (1, 1, 1, 1), 1, 0.0, tile).launcher(x.shape, y.shape, False)
               for w in ws]
        out = ys[name] = np.empty_like(y)
        rounds[name] = lambda gos=gos, out=out: [go(x, out) for go in gos]
    for run in rounds.values():
        run()
    scale = float(np.max(np.abs(ys["dnnl"]))) or 1.0
    # each contender's output is its last filter's: compare them all with oneDNN's
    errors = {k: float(np.max(np.abs(v - ys["dnnl"]))) / scale for k, v in ys.items()}
    return rounds, errors


def measure(batches: list[int], filters: int, rounds: int) -> list[dict[str, Any]]:
    """One row per (batch, layer): median ms per layer call of each contender, errors."""
    from pytfrt.backends.cpu import _winograd_native as wn

    if not wn.available():
        raise SystemExit("the native Winograd needs a C compiler and an AVX-512F CPU")
    rng = np.random.default_rng(0)
    rows = []
    for nb in batches:
        for h, c in LAYERS:
            fns, errors = _contenders(nb, h, c, filters, rng)
            times: dict[str, list[float]] = {k: [] for k in fns}
            for _ in range(rounds):
                for k, fn in fns.items():
                    t = time.perf_counter()
                    fn()
                    times[k].append((time.perf_counter() - t) * 1e3 / filters)
            ms = {k: float(np.median(v)) for k, v in times.items()}
            rows.append({"batch": nb, "h": h, "c": c, "ms": ms, "errors": errors,
                         "tile_auto": wn.tile_for(nb, h, h)})
            print(f"b{nb} {h}x{h}x{c}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in ms.items()),
                  flush=True)
    return rows


def _plot(rows: list[dict[str, Any]]) -> Callable[[Path], None]:
    def plot(path: Path) -> None:
        plt = pyplot()
        if plt is None:
            return
        names = list(rows[0]["ms"])
        labels = [f"b{r['batch']} {r['h']}x{r['h']}x{r['c']}" for r in rows]
        fig, ax = plt.subplots(figsize=(10, 4))
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            ax.bar([j + i * width for j in range(len(rows))],
                   [r["ms"]["dnnl"] / r["ms"][name] for r in rows], width, label=name)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))], labels, fontsize=8)
        ax.set_ylabel("speed over oneDNN direct (x)")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.legend()
        ax.set_title("ResNet-50 3x3 stride-1 layers, cold filters")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
    return plot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--filters", type=int, default=6,
                        help="different filters cycled per contender (cold weights)")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--isa", choices=["avx2"], default=None,
                        help="the native Winograd's AVX2 kernels (default: the widest)")
    parser.add_argument("--name", default="winograd_layers")
    args = parser.parse_args(argv)
    from pytfrt.backends.cpu import _winograd_native as wn

    wn.ISA = args.isa
    rows = measure(args.batches, args.filters, args.rounds)
    table = []
    for r in rows:
        ms = r["ms"]
        table.append([r["batch"], f"{r['h']}x{r['h']}x{r['c']}",
                      *(f"{ms[k]:.3f}" for k in ms),
                      *(f"{ms['dnnl'] / ms[k]:.2f}x" for k in ms if k != "dnnl"),
                      f"F{r['tile_auto']}", f"{max(r['errors'].values()):.1e}"])
    names = [k for k in rows[0]["ms"] if k != "dnnl"]
    print(format_table(["batch", "layer", "dnnl ms", *(f"{k} ms" for k in names),
                        *(f"dnnl/{k}" for k in names), "auto tile", "max rel err"], table))
    command = "benchmarks/winograd_layers.py " + " ".join(
        ["--batches", *map(str, args.batches), "--filters", str(args.filters), "--rounds",
         str(args.rounds), *(["--isa", args.isa] if args.isa else []), "--name", args.name])
    env = {k: os.environ[k] for k in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA") if k in os.environ}
    save_results(args.name, {"command": command, "environment": env, "machine": machine_info(),
                             "rows": rows}, _plot(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
