"""A Transformer's dense-layer GEMMs alone: pytfrt's kernels against a oneDNN matmul primitive
threaded by oneDNN and against ONNX Runtime, in GFLOP/s at 1 and 2 threads.

For each shape ``M x K x N`` (default BERT-base at sequence 128: ``128 x 768 x 768``, the merged
query/key/value ``128 x 768 x 2304``, the MLP's ``128 x 768 x 3072`` and ``128 x 3072 x 768``)
the product ``x @ w + bias`` runs through:

* ``sgemm-tiles`` -- :func:`pytfrt.backends.cpu.gemm.matmul` (``dnnl_sgemm`` per column or row
  tile on the helper threads; the weight is packed by ``dnnl_sgemm`` on every call);
* ``packed`` -- :mod:`pytfrt.backends.cpu._dnnl_matmul` (the kernel a compiled model's dense
  layer on a constant weight uses: oneDNN's matmul primitive, the weight reordered once per
  column part, one part per thread on the native spin pool, bias as a post-op);
* ``onednn-omp`` -- the same primitive as one part, threaded by oneDNN's own OpenMP team of
  ``--threads`` threads (the weight packed once);
* ``packed/pN`` (with ``--parts N ...``) -- ``packed`` with the weight split into ``N`` column
  parts instead of one per thread (the helpers claim parts as they finish: a thread that was
  descheduled is made up for by the other);
* ``onnxruntime`` -- a one-node ``Gemm`` model (the weight an initializer, so ONNX Runtime
  pre-packs it), ``intra_op_num_threads`` = threads, spinning off.

Each peer holds ``--copies`` distinct weights and cycles through them, so a weight is as cold
as in a model whose layers each have their own (12 in BERT).  Peers are interleaved, one call
each per round; medians of wall time per call are printed with GFLOP/s (``2 M K N`` / wall)
and process CPU per call.  Each thread count runs in its own process (pytfrt reads
``PYTFRT_NUM_THREADS`` at import).  Results are checked against NumPy (float64) first.

Usage: ``python benchmarks/gemm_shapes.py [--threads 1 2] [--rounds 60] [--copies 6]
[--shapes 128x768x768 ...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SHAPES = ("128x768x768", "128x768x2304", "128x768x3072", "128x3072x768")


def _ort_session(w: np.ndarray, b: np.ndarray, threads: int, path: Path) -> Callable[..., Any]:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    k, n = w.shape
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"])], "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return lambda x: sess.run(None, {"x": x})[0]


def _onednn_omp(w: np.ndarray, b: np.ndarray, threads: int) -> Callable[..., Any] | None:
    """One matmul primitive (weight packed once) run on the calling thread with oneDNN's
    OpenMP team of ``threads`` threads."""
    import ctypes

    from pytfrt.backends.cpu import _blas, _dnnl_matmul

    runner = _dnnl_matmul.make(w, b, "none", 0.0, False)
    if runner is None:
        return None
    runner._cols = [(0, w.shape[1])]  # one part: oneDNN threads it

    def run(x: np.ndarray) -> np.ndarray:
        if not getattr(_blas._local, "pinned", False):
            _blas._local.pinned = True
            ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
        if not runner.ready(x.shape):
            raise RuntimeError("no primitive")
        y = np.empty((x.shape[0], w.shape[1]), np.float32)
        runner.run(x, y)
        return y

    return run


def _child(shapes: list[str], threads: int, rounds: int, copies: int,
           parts: list[int]) -> list[dict[str, Any]]:
    from pytfrt.backends.cpu import _dnnl_matmul, gemm

    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="gemm_shapes_"))
    for spec in shapes:
        m, k, n = (int(d) for d in spec.split("x"))
        x = rng.standard_normal((m, k), dtype=np.float32)
        ws = [(rng.standard_normal((k, n), dtype=np.float32) / np.sqrt(k)).astype(np.float32)
              for _ in range(copies)]
        bs = [rng.standard_normal(n, dtype=np.float32) for _ in range(copies)]
        peers: dict[str, list[Callable[..., Any]]] = {"sgemm-tiles": [], "packed": [],
                                                       "onednn-omp": [], "onnxruntime": []}
        for count in parts:
            peers[f"packed/p{count}"] = []
        for i, (w, b) in enumerate(zip(ws, bs, strict=True)):
            peers["sgemm-tiles"].append(lambda x, w=w, b=b: gemm.matmul(x, w, bias=b))
            r = _dnnl_matmul.make(w, b, "none", 0.0, False)
            assert r is not None and r.ready(x.shape)

            def packed(x: np.ndarray, r: Any = r, n: int = n) -> np.ndarray:
                y = np.empty((x.shape[0], n), np.float32)
                r.run(x, y)
                return y

            peers["packed"].append(packed)
            for count in parts:
                rp = _dnnl_matmul.make(w, b, "none", 0.0, False)
                assert rp is not None
                rp._cols = _dnnl_matmul.column_parts(k, n, count)
                assert rp.ready(x.shape)
                peers[f"packed/p{count}"].append(
                    lambda x, r=rp, n=n: (y := np.empty((x.shape[0], n), np.float32),
                                          r.run(x, y))[0])
            omp = _onednn_omp(w, b, threads)
            if omp is not None:
                peers["onednn-omp"].append(omp)
            peers["onnxruntime"].append(_ort_session(w, b, threads, tmp / f"g{spec}_{i}.onnx"))
        ref = x.astype(np.float64) @ ws[0].astype(np.float64) + bs[0]
        for name, fns in list(peers.items()):
            if not fns:
                del peers[name]
                continue
            got = fns[0](x)
            err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
            if err > 1e-5:
                raise SystemExit(f"{name} {spec}: relative error {err:.1e}")
        wall: dict[str, list[float]] = {p: [] for p in peers}
        cpu: dict[str, list[float]] = {p: [] for p in peers}
        for fns in peers.values():  # warm-up: every copy once
            for f in fns:
                f(x)
        for rnd in range(rounds):
            for name, fns in peers.items():
                f = fns[rnd % len(fns)]
                c0, t0 = time.process_time(), time.perf_counter()
                f(x)
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        flop = 2.0 * m * k * n
        for name in peers:
            med = float(np.median(wall[name]))
            rows.append({"shape": spec, "threads": threads, "peer": name,
                         "median_ms": 1e3 * med, "min_ms": 1e3 * min(wall[name]),
                         "cpu_ms": 1e3 * float(np.median(cpu[name])),
                         "gflops": flop / med / 1e9,
                         "gflops_best": flop / min(wall[name]) / 1e9})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--copies", type=int, default=6, help="distinct weights per peer")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), help="MxKxN")
    parser.add_argument("--parts", type=int, nargs="*", default=[],
                        help="also the packed kernel with this many column parts")
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(_child(args.shapes, args.child, args.rounds, args.copies, args.parts)))
        return 0
    rows: list[dict[str, Any]] = []
    for t in args.threads:
        env = dict(os.environ, PYTFRT_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(t), "--rounds", str(args.rounds),
             "--copies", str(args.copies), "--shapes", *args.shapes,
             "--parts", *map(str, args.parts)],
            env=env, check=True, capture_output=True, text=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
    print(f"{'shape':>14} {'thr':>3} {'peer':>13} {'median ms':>9} {'min ms':>7} {'CPU ms':>7} "
          f"{'GFLOP/s':>8} {'best':>6}")
    for r in rows:
        print(f"{r['shape']:>14} {r['threads']:>3} {r['peer']:>13} {r['median_ms']:9.3f} "
              f"{r['min_ms']:7.3f} {r['cpu_ms']:7.3f} {r['gflops']:8.1f} {r['gflops_best']:6.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
