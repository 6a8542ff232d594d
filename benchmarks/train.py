"""Training benchmark: one optimizer step, pytfrt against tf.function and PyTorch, same run.

Models (``benchmarks/tf_models.py``; random weights, fixed seeds):

===============  ====================================================================  =========
model            what                                                                  optimizer
===============  ====================================================================  =========
residual_cnn     Conv2D+BatchNorm+ReLU, a residual block, GAP, Dense; 32x32x3, batch 32  SGD 0.9
resnet50         ``keras.applications.ResNet50(weights=None)``, batch 8                  SGD 0.9
transformer      Embedding + one encoder block (MHA, LayerNorm, GELU MLP), seq 16, b 16  Adam
mlp              784-512-512-10, batch 64                                                Adam
===============  ====================================================================  =========

Peers: ``pytfrt`` (``pytfrt.compile`` of the train-step ``tf.function``), ``tf.function``
(the same function run by TensorFlow), ``torch`` (the same architecture in PyTorch eager, same
optimizer; not for ResNet-50 unless torchvision is installed). The peers run interleaved,
repetition by repetition (the machine is shared: ratios are only compared within one run),
with ``OMP_WAIT_POLICY=PASSIVE`` (idle OpenMP threads sleep instead of spinning into the next
peer's time; ``--peers`` drops peers).
Each figure is the median time of one step. Before timing, pytfrt's loss after 3 steps is
checked against TF's.

With ``--profile``, after the timed repetitions: process CPU per step of pytfrt and of
``tf.function`` (the same process, one after the other: the figure that says something on a
loaded machine, where wall time is mostly waiting for a core), and pytfrt's time per kernel
(:class:`pytfrt.tools.bench.KernelTimers`: wall and CPU per op, kernel calls per step; the
timers cost a few microseconds per kernel, the timed repetitions included).

Prints a table; writes ``train.json`` and ``train.png`` into ``benchmarks/results`` (or
``--out``). ``--skip-passes`` leaves passes out of pytfrt's default pipeline (one pass's
before/after in alternating runs). Run: ``.venv/bin/python benchmarks/train.py``
(``--help``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
# The peers share one process and run interleaved: an OpenMP team that spins after its work
# (libgomp's default, torch's) takes both cores from the next peer for its spin time.
# Measured (transformer, load ~11): pytfrt 162 -> 4.9 ms, torch 137 -> 3.0 ms per step.
# Set before anything starts an OpenMP runtime (torch, oneDNN).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from pytfrt.tools.bench import (  # noqa: E402
    KernelTimers,
    format_table,
    machine_info,
    median,
    progress,
    progress_bar,
    pyplot,
    save_results,
)

MODELS = ("residual_cnn", "resnet50", "transformer", "mlp")


def _data(name: str, batch: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if name == "residual_cnn":
        return rng.normal(size=(batch, 32, 32, 3)).astype(np.float32), rng.integers(
            0, 10, batch
        ).astype(np.int32)
    if name == "resnet50":
        return rng.normal(size=(batch, size, size, 3)).astype(np.float32), rng.integers(
            0, 1000, batch
        ).astype(np.int32)
    if name == "transformer":
        return rng.integers(0, 100, (batch, 16)).astype(np.int32), rng.normal(
            size=(batch, 16, 32)
        ).astype(np.float32)
    return rng.normal(size=(batch, 784)).astype(np.float32), rng.integers(0, 10, batch).astype(
        np.int32
    )


def _tf_step(name: str, size: int) -> Any:
    import tensorflow as tf
    import tf_models

    keras = tf.keras
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    labels = tf.TensorSpec((None,), tf.int32)
    if name == "residual_cnn":
        model = tf_models.residual_cnn()
        return tf_models.train_step(model, keras.optimizers.SGD(0.01, momentum=0.9), ce, labels)
    if name == "resnet50":
        model = tf_models.resnet50(size=size)
        return tf_models.train_step(model, keras.optimizers.SGD(0.01, momentum=0.9), ce, labels)
    if name == "transformer":
        model = tf_models.transformer_block()
        return tf_models.train_step(
            model,
            keras.optimizers.Adam(1e-3),
            keras.losses.MeanSquaredError(),
            tf.TensorSpec((None, 16, 32), tf.float32),
        )
    model = tf_models.mlp()
    return tf_models.train_step(model, keras.optimizers.Adam(1e-3), ce, labels)


def _torch_step(name: str) -> Callable[[np.ndarray, np.ndarray], float] | None:
    """The same architecture and optimizer in PyTorch eager (``None`` if not available)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)
    ce = nn.CrossEntropyLoss()

    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()

            def conv_bn(cin: int) -> nn.Sequential:
                return nn.Sequential(
                    nn.Conv2d(cin, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
                )

            self.stem, self.a, self.b = conv_bn(3), conv_bn(16), conv_bn(16)
            self.fc = nn.Linear(16, 10)

        def forward(self, x: Any) -> Any:
            x = torch.relu(self.stem(x))
            y = self.b(torch.relu(self.a(x)))
            return self.fc(torch.relu(x + y).mean(dim=(2, 3)))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(100, 32)
            self.att = nn.MultiheadAttention(32, 4, batch_first=True)
            self.ln1, self.ln2 = nn.LayerNorm(32, eps=1e-5), nn.LayerNorm(32, eps=1e-5)
            self.ff = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))

        def forward(self, ids: Any) -> Any:
            x = self.emb(ids)
            h = self.ln1(x + self.att(x, x, x, need_weights=False)[0])
            return self.ln2(h + self.ff(h))

    if name == "residual_cnn":
        model: nn.Module = Residual().to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        opt: Any = torch.optim.SGD(model.parameters(), 0.01, momentum=0.9)
        loss_fn: Any = ce
    elif name == "transformer":
        model, loss_fn = Block(), nn.MSELoss()
        opt = torch.optim.Adam(model.parameters(), 1e-3)
    elif name == "mlp":
        model = nn.Sequential(
            nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )
        opt, loss_fn = torch.optim.Adam(model.parameters(), 1e-3), ce
    else:
        try:
            import torchvision
        except Exception:  # noqa: BLE001 - absent, or built for another torch (fails at import)
            return None
        model = torchvision.models.resnet50().to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        opt, loss_fn = torch.optim.SGD(model.parameters(), 0.01, momentum=0.9), ce
    model.train()

    def step(x: np.ndarray, y: np.ndarray) -> float:
        xt = torch.from_numpy(x)
        if xt.ndim == 4:  # NHWC data -> NCHW tensor in channels-last memory
            xt = xt.permute(0, 3, 1, 2)
        yt = torch.from_numpy(y).long() if y.dtype.kind == "i" else torch.from_numpy(y)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xt if xt.dtype != torch.int32 else xt.long()), yt)
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step


def _profile(timers: KernelTimers, peers: dict[str, Callable[[], Any]], steps: int
             ) -> dict[str, Any]:
    """Process CPU per step of pytfrt and tf.function, and pytfrt's per-kernel report."""
    cpu: dict[str, float] = {}
    for peer in ("pytfrt", "tf.function"):
        timers.clear()
        c0 = time.process_time()
        for _ in range(steps):
            peers[peer]()
        cpu[peer] = (time.process_time() - c0) / steps * 1e3
        if peer == "pytfrt":
            report = timers.report(steps)
    return {"cpu_ms": cpu, **report}


def bench(name: str, batch: int, size: int, reps: int, steps: int, quiet: bool,
          peer_names: tuple[str, ...] = ("tf.function", "torch"),
          timers: KernelTimers | None = None) -> dict[str, Any]:
    import pytfrt

    x, y = _data(name, batch, size)
    step = _tf_step(name, size)
    progress(f"{name}: compiling the train step", quiet)
    t0 = time.perf_counter()
    compiled = pytfrt.compile(step)
    compile_s = time.perf_counter() - t0
    import tensorflow as tf

    ours = [float(compiled(x, y)) for _ in range(3)]
    xt, yt = tf.constant(x), tf.constant(y)  # TF trains its own variables from the same start
    theirs = [float(step(xt, yt)) for _ in range(3)]
    err = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, theirs, strict=True))
    peers: dict[str, Callable[[], Any]] = {
        "pytfrt": lambda: compiled(x, y),
        "tf.function": lambda: step(xt, yt),
    }
    torch_step = _torch_step(name) if "torch" in peer_names else None
    if torch_step is not None:
        torch_step(x, y)
        peers["torch"] = lambda: torch_step(x, y)
    times: dict[str, list[float]] = {p: [] for p in peers}
    for r in progress_bar(range(reps), name, quiet, unit="rep"):
        for peer, run in peers.items():
            t = time.perf_counter()
            for _ in range(steps):
                run()
            times[peer].append((time.perf_counter() - t) / steps * 1e3)
        progress(
            f"{name}: rep {r + 1}/{reps} "
            + " ".join(f"{p} {v[-1]:.1f} ms" for p, v in times.items()),
            quiet,
        )
    ms = {p: median(v) for p, v in times.items()}
    profile = None
    if timers is not None:
        progress(f"{name}: profiling", quiet)
        profile = _profile(timers, peers, max(steps, 3))
    return {
        "model": name,
        "batch": batch,
        "compile_s": round(compile_s, 2),
        "loss_rel_err_3_steps": err,
        "ms": ms,
        "samples_ms": times,
        "vs_tf_function": ms["pytfrt"] / ms["tf.function"],
        "vs_torch": ms["pytfrt"] / ms["torch"] if "torch" in ms else None,
        "profile": profile,
    }


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    peers = ["pytfrt", "tf.function", "torch"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.25
    for i, peer in enumerate(peers):
        vals = [r["ms"].get(peer, 0.0) / r["ms"]["tf.function"] for r in rows]
        ax.bar([j + i * width for j in range(len(rows))], vals, width, label=peer)
    ax.set_xticks([j + width for j in range(len(rows))])
    ax.set_xticklabels([f"{r['model']} b{r['batch']}" for r in rows])
    ax.axhline(0.8, color="grey", linestyle=":", linewidth=1)
    ax.set_ylabel("step time / tf.function (lower is better)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--steps", type=int, default=5, help="steps per repetition")
    parser.add_argument("--resnet-size", type=int, default=224, help="ResNet-50 image size")
    parser.add_argument("--name", default="train", help="result file stem")
    parser.add_argument("--out", type=Path, default=None, help="results directory")
    parser.add_argument("--peers", default="tf.function,torch",
                        help="peers beside pytfrt (tf.function always runs: the ratios' base)")
    parser.add_argument("--profile", action="store_true",
                        help="also process CPU per step and pytfrt's time per kernel")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--skip-passes", default="",
                        help="comma-separated passes left out of pytfrt's default pipeline "
                        "(a before/after of one pass, e.g. tg-pair-conv-grads)")
    args = parser.parse_args(argv)
    if args.skip_passes:
        from pytfrt.compiler import passes

        skip = set(args.skip_passes.split(","))
        unknown = skip - set(passes.DEFAULT_PIPELINE)
        if unknown:
            parser.error(f"not in the default pipeline: {', '.join(sorted(unknown))}")
        passes.DEFAULT_PIPELINE = tuple(p for p in passes.DEFAULT_PIPELINE if p not in skip)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    timers = None
    if args.profile:  # before the first compile: the kernels are made from the wrapped table
        timers = KernelTimers()
        timers.install()
    batches = {"residual_cnn": 32, "resnet50": 8, "transformer": 16, "mlp": 64}
    rows = []
    for name in args.models.split(","):
        if name not in batches:
            parser.error(f"unknown model {name!r} (choose from {', '.join(MODELS)})")
        rows.append(bench(name, batches[name], args.resnet_size, args.reps, args.steps, args.quiet,
                          tuple(args.peers.split(",")), timers))
    table = [
        [
            f"{r['model']} b{r['batch']}",
            f"{r['ms']['pytfrt']:.1f}",
            f"{r['ms']['tf.function']:.1f}",
            f"{r['ms']['torch']:.1f}" if "torch" in r["ms"] else "-",
            f"{r['vs_tf_function']:.2f}x",
            f"{r['vs_torch']:.2f}x" if r["vs_torch"] is not None else "-",
            f"{r['loss_rel_err_3_steps']:.1e}",
            f"{r['compile_s']:.1f}",
        ]
        for r in rows
    ]
    print(
        format_table(
            [
                "model",
                "pytfrt ms",
                "tf.function ms",
                "torch ms",
                "vs tf.function",
                "vs torch",
                "loss err",
                "compile s",
            ],
            table,
        )
    )
    for r in rows:
        prof = r["profile"]
        if prof is None:
            continue
        cpu = prof["cpu_ms"]
        print(f"\n{r['model']}: process CPU per step pytfrt {cpu['pytfrt']:.1f} ms, tf.function "
              f"{cpu['tf.function']:.1f} ms ({cpu['pytfrt'] / cpu['tf.function']:.2f}x); "
              f"pytfrt kernels {prof['kernels']:.0f} per step, {prof['in_ops_cpu_ms']:.1f} ms "
              "CPU in them")
        print(format_table(
            ["op", "calls", "wall ms", "CPU ms"],
            [[op, f"{v['calls_per_call']:.0f}", f"{v['ms_per_call']:.2f}",
              f"{v['cpu_ms_per_call']:.2f}"] for op, v in list(prof["per_op"].items())[:12]]))
    record = {
        "machine": machine_info(),
        "load": os.getloadavg(),
        "command": " ".join(["benchmarks/train.py", *(argv or sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "resnet_size": args.resnet_size,
        "results": rows,
    }
    stem: Any = args.name if args.out is None else args.out / args.name
    save_results(stem, record, lambda p: _plot(rows, p), quiet=args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
