"""Per-kernel cost of the XOR training program's kernels at its tensor sizes (4x2, 2x2, 4x1).

Calls each kernel that ``examples/mlp_xor/xor_training.mlir`` runs per step exactly as the
generated whole-function code does (the registered Python function, its operands, a real
execution context) ``--calls`` times and reports the median over ``--repeats`` of the
nanoseconds per call, next to a bare NumPy reference of the same maths (the floor a Python
kernel cannot beat).  Writes ``benchmarks/results/xor_kernels.json`` (and ``.png``).

Usage: ``python benchmarks/xor_kernels.py [--calls 100000] [--repeats 5] [--tag after]``
(``--tag`` names the run in the JSON, so a before and an after run can sit side by side).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def cases() -> list[tuple[str, int, Callable[[], Any], Callable[[], Any]]]:
    """``(kernel, calls per XOR step, kernel call, NumPy reference)`` for each XOR kernel."""
    from pytfrt.host import HostContext, ResourceContext
    from pytfrt.kernel_libraries import builtin_registry
    from pytfrt.tensor.dense_host_tensor import DenseHostTensor
    from pytfrt.tensor.shape import TensorShape

    reg = builtin_registry()
    host = HostContext("s", reg)
    ctx = host.new_execution_context(ResourceContext())

    def k(name: str) -> Callable[..., Any]:
        return reg.get(name).fn

    def t(a: Any) -> DenseHostTensor:
        return DenseHostTensor.from_numpy(np.asarray(a, np.float32))

    f32 = np.float32
    x = t([[0, 0], [0, 1], [1, 0], [1, 1]])
    y = t([[0], [1], [1], [0]])
    wh, bh = t([[0.27, -0.46], [-0.92, -0.97]]), t([0, 0])
    lr = t([8])
    h, o, dh, g = t(np.full((4, 2), 0.5)), t(np.full((4, 1), 0.5)), t(np.zeros((4, 2))), t(
        np.zeros((4, 1)))
    ht, gb = t(np.zeros((2, 4))), t(np.zeros(2))
    shape42 = TensorShape((4, 2))
    xa, wha, ha, ga, oa, ya = x.array, wh.array, h.array, g.array, o.array, y.array
    wot = t([[0.63, 0.83]])
    wota = wot.array
    lra, bha, gba = lr.array, bh.array.copy(), gb.array

    matmul, create = k("eigen.matmul.f32"), k("tfrt_dht.create_uninitialized_tensor.f32.2")
    broadcast, sig = k("tfrt_test.broadcast.f32.2"), k("sigmoid_inplace.f32")
    sgrad, mul = k("sigmoid_grad_inplace.f32"), k("mlp.multiply_inplace.f32")
    mse, flatten = k("mlp.mse_loss.f32"), k("tfrt_test.flatten.f32")
    sub, transpose = k("tfrt_test.subtract_inplace.f32"), k("tfrt_test.tensor_transpose.f32")
    mean0, gd = k("tfrt_test.mean_axis_zero.f32"), k("tfrt_test.gradient_descent.f32")
    zeros_h = np.zeros((4, 2), f32)
    one, zero = 1.0, 0.0
    dims = (4, 2)

    def sig_kernel() -> None:
        sig(h)
        h.array[...] = 0.5

    def sig_ref() -> None:
        np.negative(ha, out=ha)
        np.exp(ha, out=ha)
        ha.__iadd__(f32(1))
        np.reciprocal(ha, out=ha)
        ha[...] = 0.5

    return [
        ("eigen.matmul.f32 (beta 1)", 3, lambda: matmul(one, x, wh, one, h),
         lambda: ha.__iadd__(xa @ wha)),
        ("eigen.matmul.f32 (beta 0)", 1, lambda: matmul(one, g, wot, zero, dh),
         lambda: np.matmul(ga, wota, out=dh.array)),
        ("tfrt_dht.create_uninitialized_tensor.f32.2", 8, lambda: create(dims, ctx),
         lambda: np.zeros(dims, f32)),
        ("tfrt_test.broadcast.f32.2", 2, lambda: broadcast(bh, shape42, ctx),
         lambda: np.broadcast_to(bha, (4, 2)).copy()),
        ("sigmoid_inplace.f32 (+ a reset)", 2, sig_kernel, sig_ref),
        ("sigmoid_grad_inplace.f32", 2, lambda: sgrad(h, dh),
         lambda: np.subtract(ha, ha * ha, out=dh.array)),
        ("mlp.multiply_inplace.f32", 2, lambda: mul(h, dh),
         lambda: np.multiply(ha, dh.array, out=dh.array)),
        ("mlp.mse_loss.f32", 1, lambda: mse(o, y),
         lambda: float(np.mean((oa - ya) ** 2, dtype=f32))),
        ("tfrt_test.flatten.f32", 1, lambda: flatten(o, g), lambda: np.copyto(ga, oa)),
        ("tfrt_test.subtract_inplace.f32", 1, lambda: sub(y, g),
         lambda: np.subtract(ga, ya, out=ga)),
        ("tfrt_test.tensor_transpose.f32", 2, lambda: transpose(h, ht),
         lambda: np.copyto(ht.array, ha.T)),
        ("tfrt_test.mean_axis_zero.f32", 2, lambda: mean0(dh, gb),
         lambda: np.mean(dh.array, axis=0, out=gba)),
        ("tfrt_test.gradient_descent.f32", 2, lambda: gd(gb, lr, bh),
         lambda: bha.__isub__(gba * lra[0])),
        ("(np.zeros((4, 2)) alone)", 0, lambda: zeros_h.copy(), lambda: np.zeros(dims, f32)),
    ]


def time_ns(fn: Callable[[], Any], calls: int) -> float:
    """Nanoseconds per call of ``fn`` over ``calls`` calls."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tag", default="run")
    args = parser.parse_args()

    rows = []
    total_k = total_r = 0.0
    print(f"{'kernel':45s} {'per step':>8s} {'kernel ns':>10s} {'numpy ns':>9s} {'ratio':>6s}")
    for name, per_step, kernel_call, reference in cases():
        kernel_call(), reference()
        ks, rs = [], []
        for _ in range(args.repeats):  # interleaved: the machine is shared
            ks.append(time_ns(kernel_call, args.calls))
            rs.append(time_ns(reference, args.calls))
        kn, rn = statistics.median(ks), statistics.median(rs)
        total_k += per_step * kn
        total_r += per_step * rn
        rows.append({"kernel": name, "per_step": per_step, "kernel_ns": kn, "numpy_ns": rn})
        print(f"{name:45s} {per_step:8d} {kn:10.0f} {rn:9.0f} {kn / rn:6.2f}")
    print(f"{'per XOR step (sum of calls x cost)':45s} {'':8s} {total_k:10.0f} {total_r:9.0f} "
          f"{total_k / total_r:6.2f}")

    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "xor_kernels.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[args.tag] = {
        "command": f"python benchmarks/xor_kernels.py --calls {args.calls} "
                   f"--repeats {args.repeats} --tag {args.tag}",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
        "rows": rows,
        "per_step_kernel_ns": total_k,
        "per_step_numpy_ns": total_r,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    _plot(data)


def _plot(data: dict[str, Any]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    tags = list(data)
    names = [r["kernel"] for r in data[tags[0]]["rows"]]
    fig, ax = plt.subplots(figsize=(10, 6))
    width = 0.8 / (len(tags) + 1)
    ys = np.arange(len(names))
    for i, tag in enumerate(tags):
        by = {r["kernel"]: r["kernel_ns"] for r in data[tag]["rows"]}
        ax.barh(ys + i * width, [by.get(n, 0) / 1000 for n in names], width, label=tag)
    ref = {r["kernel"]: r["numpy_ns"] for r in data[tags[-1]]["rows"]}
    ax.barh(ys + len(tags) * width, [ref.get(n, 0) / 1000 for n in names], width, label="numpy")
    ax.set_yticks(ys + width * len(tags) / 2, names, fontsize=7)
    ax.set_xlabel("us per call")
    ax.set_title("XOR kernels at 4x2 sizes")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "xor_kernels.png", dpi=100)


if __name__ == "__main__":
    main()
