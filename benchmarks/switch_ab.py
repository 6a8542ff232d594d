"""One ONNX model through pytfrt with two settings of module switches, A and B, and ONNX Runtime,
all in one process with calls alternating: what a change is worth in the whole model.

On a shared machine two zoo runs minutes apart move by 20-40%, more than most changes are
worth.  Here the model is compiled twice -- each copy with its side's switches set while it
compiles (switches read when a model is compiled, e.g. ``_dnnl_matmul.MAX_PART_COLUMNS``) --
and each call sets its side's switches again first (switches read per call, e.g.
``_attention_native.ENABLED``); calls of A, B and ONNX Runtime (``intra_op_num_threads`` =
``PYTFRT_NUM_THREADS``, spinning off) rotate, so all three see the same load.  A switch is
``MODULE.NAME=VALUE`` (a Python literal), as ``benchmarks/models.py --set``.

Prints the outputs' largest error relative to ONNX Runtime's, median and fastest ms of each,
and the ratios B/A and each side against ONNX Runtime.

Usage: ``chrt -f 10 python benchmarks/switch_ab.py MODEL.onnx --input ids --shape 1x128
--a pytfrt.backends.cpu._gelu_native.ENABLED=False --b pytfrt.backends.cpu._gelu_native.ENABLED=True
[--calls 30] [--dtype float32]`` (token ids: int64 in ``[0, 100)``; a float dtype: N(0, 1)
values, e.g. a CNN's image).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _setter(switches: list[str]) -> Callable[[], None]:
    """A function setting these ``MODULE.NAME=VALUE`` switches."""
    parsed = []
    for item in switches:
        target, _, value = item.partition("=")
        module, _, name = target.rpartition(".")
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            raise SystemExit(f"{module} has no switch {name}")
        parsed.append((mod, name, ast.literal_eval(value)))

    def apply() -> None:
        for mod, name, value in parsed:
            setattr(mod, name, value)

    return apply


def run(path: str, input_name: str, shape: tuple[int, ...], a: list[str], b: list[str],
        calls: int, warmup: int = 3, dtype: str = "int64") -> dict[str, Any]:
    """Median and fastest ms per peer (``A``, ``B``, ``onnxruntime``) and the outputs' errors."""
    import onnxruntime as ort

    import pytfrt

    sides = {"A": _setter(a), "B": _setter(b)}
    models = {}
    for side, apply in sides.items():
        apply()
        models[side] = pytfrt.compile(path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(os.environ.get("PYTFRT_NUM_THREADS", "2"))
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {input_name: rng.integers(0, 100, shape).astype(np.int64) if dtype == "int64"
             else rng.standard_normal(shape).astype(dtype)}
    theirs = sess.run(None, feeds)[0]
    fns: dict[str, Callable[[], Any]] = {"onnxruntime": lambda: sess.run(None, feeds)}
    errors = {}
    for side, apply in sides.items():
        def call(apply: Callable[[], None] = apply, model: Any = models[side]) -> Any:
            apply()
            return model(**feeds)

        fns[side] = call
        ours = np.asarray(call())
        errors[side] = float(np.max(np.abs(ours - theirs)) / max(float(np.max(np.abs(theirs))),
                                                                 1e-30))
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    order = list(fns)
    wall: dict[str, list[float]] = {p: [] for p in order}
    for i in range(calls):
        for p in order[i % 3:] + order[:i % 3]:
            t = time.perf_counter()
            fns[p]()
            wall[p].append(time.perf_counter() - t)
    return {"errors": errors,
            "median_ms": {p: 1e3 * float(np.median(w)) for p, w in wall.items()},
            "min_ms": {p: 1e3 * float(np.min(w)) for p, w in wall.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--input", default="ids")
    parser.add_argument("--shape", default="1x128")
    parser.add_argument("--a", nargs="*", default=[], metavar="MODULE.NAME=VALUE")
    parser.add_argument("--b", nargs="*", default=[], metavar="MODULE.NAME=VALUE")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--dtype", default="int64",
                        help="input dtype: int64 (token ids) or a float type (N(0, 1) values)")
    args = parser.parse_args(argv)
    r = run(args.model, args.input, tuple(int(d) for d in args.shape.split("x")), args.a,
            args.b, args.calls, dtype=args.dtype)
    med, low = r["median_ms"], r["min_ms"]
    print(f"outputs within {max(r['errors'].values()):.1e} relative of ONNX Runtime")
    for p in med:
        print(f"{p:>12}: median {med[p]:8.2f} ms, fastest {low[p]:8.2f} ms")
    for num, den in (("B", "A"), ("A", "onnxruntime"), ("B", "onnxruntime")):
        print(f"{num} / {den}: median {med[num] / med[den]:.3f}, fastest "
              f"{low[num] / low[den]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
