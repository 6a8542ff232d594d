"""Per-conv profile of a compiled model: each convolution timed inside the model vs alone.

Compiles a model (the Keras ResNet50 of ``benchmarks/tf_models.py`` through the TensorFlow
front end, or a zoo ONNX file) with its conv kernels (:func:`pytfrt.backends.cpu.conv.runner`)
wrapped by timers and runs the model; then runs every plan it saw again on its own (same input
shape, residual and ``out=`` buffer) and prints, grouped by conv kind, the medians of wall and
process CPU time in the model and alone, the achieved GFLOP/s and oneDNN's implementation and
part count.  The
difference between "in model" and "alone" is what the model adds around a conv (cold weights,
the call path, thread wake-ups); CPU time is the figure that survives a loaded machine.

Usage: ``python benchmarks/conv_profile.py [--model keras_resnet50|<zoo name>] [--batch 1]
[--calls 15]``; writes ``benchmarks/results/conv_profile_<model>_b<batch>.json``.
"""

from __future__ import annotations

import argparse
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


def _compile(name: str, batch: int) -> tuple[Any, dict[str, np.ndarray]]:
    import pytfrt

    if name == "keras_resnet50":
        model = pytfrt.compile(zoo.keras_resnet50(224))
        x = np.random.default_rng(0).standard_normal((batch, 224, 224, 3)).astype(np.float32)
        return model, {model.signature.inputs[0].name: x}
    zm = zoo.export(name, "/tmp/pytfrt-zoo", small=False, with_torch=False)
    return pytfrt.compile(str(zm.path)), zm.make_inputs(batch=batch)


def _median_ms(v: list[float]) -> float:
    return float(np.median(v)) * 1e3


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pytfrt.backends.cpu import conv as convmod

    wall: dict[int, list[float]] = defaultdict(list)
    cpu: dict[int, list[float]] = defaultdict(list)
    seen: dict[int, tuple[Any, tuple[int, ...], bool]] = {}
    timing = [False]
    orig, orig_runner = convmod.conv2d, convmod.runner

    def timed_runner(plan: Any) -> Any:
        """The model's conv kernels are bound to their plans when it is compiled
        (``conv.runner``): time the bound functions, on the calls of the timed loop."""
        fn = orig_runner(plan)

        def timed(x: np.ndarray, residual: np.ndarray | None = None,
                  out: np.ndarray | None = None) -> np.ndarray:
            if not timing[0]:
                return fn(x, residual, out)
            c0, t0 = time.process_time(), time.perf_counter()
            y = fn(x, residual, out)
            wall[id(plan)].append(time.perf_counter() - t0)
            cpu[id(plan)].append(time.process_time() - c0)
            seen[id(plan)] = (plan, tuple(x.shape), residual is not None)
            return y

        return timed

    convmod.runner = timed_runner  # type: ignore[assignment]
    try:
        model, feeds = _compile(args.model, args.batch)
    finally:
        convmod.runner = orig_runner  # type: ignore[assignment]
    for _ in range(3):
        model(**feeds)
    model_wall: list[float] = []
    model_cpu: list[float] = []
    timing[0] = True
    for _ in range(args.calls):
        c0, t0 = time.process_time(), time.perf_counter()
        model(**feeds)
        model_wall.append(time.perf_counter() - t0)
        model_cpu.append(time.process_time() - c0)
    timing[0] = False
    groups: dict[tuple[Any, ...], dict[str, float]] = {}
    rng = np.random.default_rng(1)
    for k, (plan, xs, res) in seen.items():
        x = rng.standard_normal(xs).astype(np.float32)
        ys = plan.output_shape(xs)
        r = rng.standard_normal(ys).astype(np.float32) if res else None
        out = np.empty(ys, np.float32)
        for _ in range(3):
            orig(plan, x, r, out)
        aw, ac = [], []
        for _ in range(args.calls):
            c0, t0 = time.process_time(), time.perf_counter()
            orig(plan, x, r, out)
            aw.append(time.perf_counter() - t0)
            ac.append(time.process_time() - c0)
        flops = 2.0 * np.prod(ys) * plan.kh * plan.kw * plan.cin // plan.groups
        impl = plan.dnnl.impl(xs, int(res)) if plan.dnnl is not None else None
        parts = plan.dnnl.parts(xs, int(res)) if plan.dnnl is not None else 0
        kind = "dw" if plan.groups == plan.cin and plan.groups > 1 else (
            f"g{plan.groups}" if plan.groups > 1 else "")
        key = (f"{plan.kh}x{plan.kw}/{plan.strides[0]}{kind}", xs[1], plan.cin, plan.cout, res,
               impl or plan.algorithm_for(ys), parts)
        g = groups.setdefault(key, dict(n=0, model_ms=0, model_cpu_ms=0, alone_ms=0,
                                        alone_cpu_ms=0, gflop=0))
        g["n"] += 1
        g["model_ms"] += _median_ms(wall[k])
        g["model_cpu_ms"] += _median_ms(cpu[k])
        g["alone_ms"] += _median_ms(aw)
        g["alone_cpu_ms"] += _median_ms(ac)
        g["gflop"] += flops / 1e9
    rows = sorted(groups.items(), key=lambda kv: -kv[1]["model_cpu_ms"])
    return {
        "command": " ".join(sys.argv),
        "machine": machine_info(),
        "model": args.model,
        "batch": args.batch,
        "model_wall_ms": _median_ms(model_wall),
        "model_cpu_ms": _median_ms(model_cpu),
        "convs": [dict(zip(("kind", "h", "cin", "cout", "residual", "impl", "parts"), k,
                           strict=True), **v) for k, v in rows],
    }


def _print(rec: dict[str, Any]) -> None:
    convs = rec["convs"]
    tot = {f: sum(c[f] for c in convs) for f in ("model_ms", "model_cpu_ms", "alone_ms",
                                                 "alone_cpu_ms", "gflop")}
    print(f"{rec['model']} b{rec['batch']}: model {rec['model_wall_ms']:.2f} ms wall, "
          f"{rec['model_cpu_ms']:.2f} ms CPU per call; convs in the model {tot['model_ms']:.2f} "
          f"ms wall / {tot['model_cpu_ms']:.2f} ms CPU, alone {tot['alone_ms']:.2f} / "
          f"{tot['alone_cpu_ms']:.2f} ms ({tot['gflop']:.2f} GFLOP)")
    rows = [[c["kind"], c["h"], c["cin"], c["cout"], "y" if c["residual"] else "", c["n"],
             f"{c['model_ms']:.2f}", f"{c['model_cpu_ms']:.2f}", f"{c['alone_ms']:.2f}",
             f"{c['alone_cpu_ms']:.2f}", f"{c['gflop'] / max(c['model_cpu_ms'], 1e-9) * 1e3:.0f}",
             c["impl"], c["parts"]] for c in convs]
    print(format_table(["conv", "H", "cin", "cout", "res", "n", "model ms", "model CPU",
                        "alone ms", "alone CPU", "GFLOP/s CPU", "impl", "parts"], rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="keras_resnet50")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=15)
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    rec = run(args)
    _print(rec)
    write_json(Path(args.out) / f"conv_profile_{args.model}_b{args.batch}.json", rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
