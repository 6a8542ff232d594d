"""The ``:predict`` JSON on its own: the body parser (C and Numba kernels, one pass and pieces in
parallel, and ``json.loads``) and the response writer (C ``dumps_float32`` and ``json.dumps``).

Parses the ResNet-50 request body of ``benchmarks/serve.py`` (``{"instances": [1x224x224x3
float32 as json.dumps writes it]}``, 3.2 MB) in one process, the variants interleaved call by
call: ``pytfrt.serving.fast_json`` as the server runs it (pieces on the calling thread and the
CPU kernels' pool, with the kernel the server uses), the one-pass scan with each kernel, and the
general path (``json.loads`` + ``np.asarray`` + ``astype(float32)``, fewer repeats); then
writes a 1x1000 float32 answer both ways.  Per variant: median and minimum wall time and the
calling thread's CPU time, in ms.  Writes ``TAG.json`` into ``--out``.  Usage::

    .venv/bin/python benchmarks/serve_parse.py --repeats 40 --tag serve_parse
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from pytfrt.serving import fast_json  # noqa: E402
from pytfrt.tools.bench import format_table, machine_info, write_json  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--tag", default="serve_parse")
    args = parser.parse_args(argv)
    x = np.random.default_rng(0).standard_normal((1, 224, 224, 3)).astype(np.float32)
    body = json.dumps({"instances": x.tolist()}).encode()
    fast_json.warm_up()
    scan = fast_json._scan()
    numba_scan = fast_json._compile()
    buf = np.frombuffer(body, np.uint8)
    start = body.index(b"[")
    answer = np.random.default_rng(1).random((1, 1000), dtype=np.float32)

    def general() -> Any:
        return np.asarray(json.loads(body)["instances"]).astype(np.float32)

    def pieces() -> Any:
        parsed = fast_json.parse_float32_tensor(body)
        assert parsed is not None
        return parsed[1]

    def one_pass(kernel: Any) -> Callable[[], Any]:
        def run() -> Any:
            parsed = fast_json._whole(kernel, buf, start)
            assert parsed is not None
            return parsed[0]
        return run

    variants: dict[str, tuple[Callable[[], Any], int]] = {
        f"pieces in parallel ({fast_json.kernel_name()})": (pieces, 1),
        f"one pass ({fast_json.kernel_name()})": (one_pass(scan), 1),
        "one pass (numba)": (one_pass(numba_scan), 1),
        "json.loads": (general, 8),
    }
    for fn, _ in variants.values():  # each gives the array itself
        assert np.array_equal(fn(), x)
    writers: dict[str, tuple[Callable[[], Any], int]] = {
        "answer: dumps_float32": (lambda: fast_json.dumps_float32(answer), 1),
        "answer: json.dumps": (lambda: json.dumps(answer.tolist(), separators=(",", ":"))
                               .encode(), 1),
    }
    if fast_json.dumps_float32(answer) is not None:
        assert writers["answer: dumps_float32"][0]() == writers["answer: json.dumps"][0]()
        variants.update(writers)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for i in range(args.repeats):
        for name, (fn, every) in variants.items():
            if i % every:
                continue
            wall, cpu = time.perf_counter(), time.thread_time()
            fn()
            times[name].append((time.perf_counter() - wall, time.thread_time() - cpu))
    rows, results = [], {}
    for name, samples in times.items():
        a = np.array(samples) * 1e3
        results[name] = {"median_ms": round(float(np.median(a[:, 0])), 3),
                         "min_ms": round(float(a[:, 0].min()), 3),
                         "caller_cpu_ms": round(float(np.median(a[:, 1])), 3),
                         "calls": len(samples)}
        rows.append([name, f"{results[name]['median_ms']:.2f}", f"{results[name]['min_ms']:.2f}",
                     f"{results[name]['caller_cpu_ms']:.2f}", len(samples)])
    print(format_table(["variant", "median ms", "min ms", "calling thread CPU ms", "calls"],
                       rows))
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.tag}.json", {
        "benchmark": "serve_parse", "command": " ".join(["benchmarks/serve_parse.py",
                                                         *(argv or sys.argv[1:])]),
        "machine": machine_info(), "body_bytes": len(body), "results": results,
        "load_average_at_end": [round(v, 2) for v in os.getloadavg()]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
