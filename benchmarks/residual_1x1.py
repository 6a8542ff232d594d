"""One widening 1x1 convolution with the residual (``relu(conv(x) + bias + r)``, ResNet-50's
last layer of a bottleneck block) run by ONNX Runtime and by pytfrt's two oneDNN forms, with
operands just written, as they are inside a model.

ONNX Runtime runs a two-node graph (a 1x1 convolution producing the residual, then the widening
convolution, the ``Add`` and the ``Relu``), which its NCHWc transformer turns into one fused
``Conv`` reading the residual it just wrote; its profiler's kernel time of that node is the
figure.  pytfrt runs the layer as a compiled model does -- the residual in the output buffer
(the ``sum`` post-op) -- once on NHWC (``conv.plan_conv2d``: ``brgconv_1x1``) and once on
``nChw16c`` (``_dnnl_blocked.BlockedConv``: ``jit_1x1``), each call timed right after both of
its operands were copied into place from one of ``--sets`` distinct inputs (written, not cold).
Outputs are checked against NumPy.

Usage: ``python benchmarks/residual_1x1.py [--batch 1] [--height 56] [--cin 64] [--cout 256]
[--sets 4] [--reps 15]``; for one thread each run it with ``PYTFRT_NUM_THREADS=1`` and
``--ort-threads 1``.  Prints medians in microseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

import numpy as np


def _ort_session(w: np.ndarray, b: np.ndarray, n: int, h: int, threads: int,
                 prefix: str) -> Any:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    cin, cout = w.shape[2], w.shape[3]
    w2 = (np.random.default_rng(1).standard_normal((cout, cout, 1, 1)) * 0.05).astype(np.float32)
    inits = [numpy_helper.from_array(w.transpose(3, 2, 0, 1).copy(), "W"),
             numpy_helper.from_array(b, "B"), numpy_helper.from_array(w2, "W2")]
    nodes = [helper.make_node("Conv", ["r", "W2"], ["r2"], name="residual"),
             helper.make_node("Conv", ["x", "W", "B"], ["c"], name="widen"),
             helper.make_node("Add", ["c", "r2"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "residual_1x1",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, cin, h, h]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [n, cout, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, cout, h, h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.enable_profiling = True
    opts.profile_file_prefix = prefix
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def main(argv: list[str] | None = None) -> int:
    from pytfrt.backends.cpu import _dnnl_blocked as db
    from pytfrt.backends.cpu import conv

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--height", type=int, default=56)
    ap.add_argument("--cin", type=int, default=64)
    ap.add_argument("--cout", type=int, default=256)
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--ort-threads", type=int, default=2)
    a = ap.parse_args(argv)
    n, h, cin, cout = a.batch, a.height, a.cin, a.cout
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((1, 1, cin, cout)) * 0.1).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    xs = [rng.standard_normal((n, h, h, cin)).astype(np.float32) for _ in range(a.sets)]
    rs = [rng.standard_normal((n, h, h, cout)).astype(np.float32) for _ in range(a.sets)]

    with tempfile.TemporaryDirectory() as tmp:
        sess = _ort_session(w, b, n, h, a.ort_threads, os.path.join(tmp, "ort"))
        feeds = [{"x": np.ascontiguousarray(x.transpose(0, 3, 1, 2)),
                  "r": np.ascontiguousarray(r.transpose(0, 3, 1, 2))}
                 for x, r in zip(xs, rs, strict=True)]
        for _ in range(a.reps):
            for f in feeds:
                sess.run(None, f)
        with open(sess.end_profiling()) as fh:
            events = json.load(fh)
    ort_us = [e["dur"] for e in events
              if e.get("cat") == "Node" and e["name"].startswith("c_")
              and e["name"].endswith("_kernel_time")][a.sets:]  # the fused widening node

    nhwc = conv.runner(conv.plan_conv2d(w, layout="NHWC", bias=b, activation="relu"))
    blocked = db.BlockedConv(w, b, strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0),
                             groups=1, activation="relu", alpha=0.0).runner()
    forms = {
        "NHWC": (nhwc, xs, rs, lambda y: y),
        "nChw16c": (blocked, [db.reorder(x, "NHWC", "NCHW16c") for x in xs],
                    [db.reorder(r, "NHWC", "NCHW16c") for r in rs],
                    lambda y: db.reorder(y, "NCHW16c", "NHWC")),
    }
    want = np.maximum(xs[0].reshape(-1, cin) @ w.reshape(cin, cout) + b + rs[0].reshape(-1, cout),
                      0).reshape(rs[0].shape)
    times: dict[str, list[float]] = {k: [] for k in forms}
    bufs = {k: (xi[0].copy(), ri[0].copy()) for k, (_, xi, ri, _) in forms.items()}
    for k, (run, xi, ri, back) in forms.items():
        xb, yb = bufs[k]
        np.copyto(xb, xi[0])
        np.copyto(yb, ri[0])
        run(xb, yb, yb)
        err = float(np.abs(back(yb) - want).max() / np.abs(want).max())
        if err > 1e-5:
            raise SystemExit(f"{k}: relative error {err:.1e} against NumPy")
    for _ in range(a.reps):
        for i in range(a.sets):
            for k, (run, xi, ri, _) in forms.items():
                xb, yb = bufs[k]
                np.copyto(xb, xi[i])  # both operands just written, as ONNX Runtime's are
                np.copyto(yb, ri[i])
                t0 = time.perf_counter()
                run(xb, yb, yb)
                times[k].append(time.perf_counter() - t0)
    print(f"1x1 {n}x{h}x{h} {cin} -> {cout} + residual, relu; medians: ONNX Runtime "
          f"{np.median(ort_us):.0f} us, " + ", ".join(
              f"pytfrt {k} {np.median(v) * 1e6:.0f} us" for k, v in times.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
