"""Adversarial campaign: bad MLIR, bad BEF, runtime faults and concurrency against pytfrt.

Every case is classified as

* ``ok``          -- accepted and (where there is an oracle) the right answer;
* ``clean error`` -- refused or failed with pytfrt's own error (``MlirError``, ``BefError``,
  ``LoadError``, an error value in the results);
* ``traceback``   -- any other exception escaped (a bug);
* ``hang``        -- no answer within the per-case watchdog (a bug);
* ``wrong``       -- an answer that differs from the oracle (a bug).

Categories:

* ``mlir``    -- valid programs from ``tests/lit`` and ``examples`` mutated (bytes flipped,
  deleted, duplicated, truncated, tricky tokens spliced in), compiled with the front end;
* ``bef``     -- the same programs compiled to BEF (except N-Queens, whose run time grows
  exponentially with a constant a mutation may raise, and the programs calling
  ``tfrt_test.usleep``, which sleeps as long as a constant says), bytes mutated, read (and, if
  accepted, run with a deadline: a run may fail, but must not escape or hang);
* ``runtime`` -- generated programs mixing arithmetic with misbehaving kernels (stuck, helper
  thread dies, ``MemoryError``, wrong result type) on every queue type, with a deadline;
  the oracle is the arithmetic computed in Python;
* ``concurrency`` -- one host, several threads executing and awaiting the same function while
  another cancels some requests; each result must be its request's answer or ``Cancelled``.

Run: ``.venv/bin/python benchmarks/fuzz.py [--seconds 60] [--seed 1]`` (seconds per category).
Prints a table, writes ``benchmarks/results/fuzz.json``; recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "robustness"))

from robust_harness import MISBEHAVING, QUEUES, run_mlir  # noqa: E402

from pytfrt.bef.format import BefError  # noqa: E402
from pytfrt.bef.reader import read_bef  # noqa: E402
from pytfrt.bef.writer import write_bef  # noqa: E402
from pytfrt.executor import LoadError, load_program  # noqa: E402
from pytfrt.host import DiagnosticCollector, HostContext  # noqa: E402
from pytfrt.kernel_libraries import builtin_registry  # noqa: E402
from pytfrt.mlir import MlirError, compile_mlir  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
CASE_SECONDS = 20  # the watchdog: a case taking longer is a hang
TOKENS = ['"', "\\", "%", "@", "^bb0", "{", "}", "(", ")", "<", ">", "->", ":", "0x7FC00000",
          "99999999999999999999", "1e999", "\ufeff", "$", "\0", "// ", "tfrt.call", "!tfrt.chain",
          "i1", "f32", "[", "]", "#loc", "loc(", "func.func", "tfrt.return"]


class Hang(Exception):
    """Raised by the watchdog."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise Hang


def classify(case: Callable[[], str]) -> str:
    """Run one case under the watchdog; its own verdict, or traceback/hang."""
    signal.alarm(CASE_SECONDS)
    try:
        return case()
    except Hang:
        return "hang"
    except (MlirError, BefError, LoadError):
        return "clean error"
    except Exception:  # noqa: BLE001 - this is what the campaign looks for
        return "traceback"
    finally:
        signal.alarm(0)


def corpus() -> list[str]:
    """Valid MLIR programs that compile (the seeds of the mutations)."""
    texts = []
    for path in sorted([*ROOT.glob("tests/lit/**/*.mlir"), *ROOT.glob("examples/**/*.mlir")]):
        text = path.read_text(errors="replace")
        if len(text) > 20_000:
            continue
        try:
            compile_mlir(text, path.name)
        except Exception:  # noqa: BLE001 - only seeds that compile
            continue
        texts.append(text)
    return texts


def mutate_text(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(len(text) + 1)
        op = rng.randrange(5)
        if op == 0:
            text = text[:pos] + text[pos + rng.randint(1, 8):]
        elif op == 1:
            text = text[:pos] + rng.choice(TOKENS) + text[pos:]
        elif op == 2:
            text = text[:pos]
        elif op == 3:
            j = rng.randrange(len(text) + 1)
            text = text[:pos] + text[min(pos, j):max(pos, j)] + text[pos:]
        else:
            text = text[:pos] + chr(rng.randrange(32, 127)) + text[pos + 1:]
    return text


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        pos = rng.randrange(len(buf) + 1)
        op = rng.randrange(4)
        if op == 0 and pos < len(buf):
            buf[pos] = rng.randrange(256)
        elif op == 1:
            del buf[pos:pos + rng.randint(1, 16)]
        elif op == 2:
            buf[pos:pos] = bytes(rng.choice([0, 0x7F, 0xFF, 0x80])
                                 for _ in range(rng.randint(1, 9)))
        else:
            buf = buf[:pos]
    return bytes(buf)


def run_program(program: Any, queue: str) -> str:
    """Load and run every zero-argument function with a deadline; errors are fine."""
    with HostContext(queue, builtin_registry(entry_points=False), DiagnosticCollector()) as host:
        bef = load_program(program, host)
        for fn in bef.functions:
            if fn.num_arguments or not fn.name or fn.kind.name != "BEF":
                continue
            ctx = host.new_execution_context()
            ctx.request_context.set_deadline(2.0)
            results = fn.execute(ctx, [])
            if not host.await_values(results, timeout=10):
                return "hang"
            ctx.request_context.close()
        if not host.quiesce(5):
            return "hang"
    return "ok"


# -- categories ----------------------------------------------------------------------------------


Case = tuple[Callable[[], str], bytes]
"""A case and its input (saved under ``benchmarks/results/fuzz_failures/`` if it fails)."""


def mlir_case(rng: random.Random, seeds: list[str]) -> Case:
    text = mutate_text(rng, rng.choice(seeds))

    def case() -> str:
        compile_mlir(text, "fuzz.mlir")
        return "ok"

    return case, text.encode("utf-8", "surrogatepass")


def bef_case(rng: random.Random, befs: list[bytes]) -> Case:
    data = mutate_bytes(rng, rng.choice(befs))
    queue = rng.choice(QUEUES)

    def case() -> str:
        program = read_bef(data)
        return run_program(program, queue)

    return case, data


def runtime_case(rng: random.Random) -> Case:
    """``main`` sums n constants through a chain of adds with misbehaving kernels spliced in."""
    n = rng.randint(1, 12)
    values = [rng.randint(-1000, 1000) for _ in range(n)]
    bad = {rng.randrange(n) for _ in range(rng.randint(0, 2))}
    faults = {i: rng.choice(["robust.never.i32", "robust.dies.i32", "robust.oom.i32",
                             "robust.wrong_type.i32"]) for i in bad}
    lines = ["func.func @main() -> i32 {", "  %acc0 = tfrt.constant.i32 0"]
    for i, v in enumerate(values):
        lines.append(f"  %c{i} = tfrt.constant.i32 {v}")
        src = f"%c{i}"
        if i in faults:
            lines.append(f'  %f{i} = "{faults[i]}"(%c{i}) : (i32) -> i32')
            src = f"%f{i}"
        lines.append(f"  %acc{i + 1} = tfrt.add.i32 %acc{i}, {src}")
    lines += [f"  tfrt.return %acc{n} : i32", "}"]
    text = "\n".join(lines)
    queue = rng.choice(QUEUES)

    def case() -> str:
        run = run_mlir(text, queue, extra_kernels=MISBEHAVING, timeout=1.0)
        (result,) = run.results
        if not faults:
            return "ok" if result == sum(values) else "wrong"
        failed = isinstance(result, str) and result.startswith("<<error")
        return "clean error" if failed else "wrong"

    return case, f"queue {queue}\n{text}".encode()


def concurrency_case(rng: random.Random) -> Case:
    queue = rng.choice(QUEUES)
    threads_n = rng.randint(2, 6)
    text = """
func.func @main(%x: i32) -> i32 {
  %one = tfrt.constant.i32 1
  %a = "tfrt_test.async_add.i32"(%x, %one) : (i32, i32) -> i32
  %b = tfrt.add.i32 %a, %x
  tfrt.return %b : i32
}
"""
    program = compile_mlir(text, "conc.mlir")
    from pytfrt.bef.streams import assign_stream_ids
    from pytfrt.host import make_available

    assign_stream_ids(program)

    def case() -> str:
        outcomes: list[str] = []
        with HostContext(queue, builtin_registry(entry_points=False),
                         DiagnosticCollector()) as host:
            fn = load_program(program, host).get_function("main")
            assert fn is not None

            def worker(t: int) -> None:
                try:
                    for i in range(20):
                        x = t * 1000 + i
                        ctx = host.new_execution_context()
                        if rng.random() < 0.2:
                            threading.Timer(rng.random() * 0.002,
                                            ctx.request_context.cancel).start()
                        (r,) = fn.execute(ctx, [make_available(x)])
                        if not host.await_values([r], timeout=10):
                            outcomes.append("hang")
                            return
                        ok = (r.is_concrete() and r.get() == 2 * x + 1) or (
                            r.is_error() and r.error.message == "Cancelled")
                        outcomes.append("ok" if ok else "wrong")
                except Exception:  # noqa: BLE001 - classified
                    traceback.print_exc()
                    outcomes.append("traceback")

            threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(CASE_SECONDS)
            if any(th.is_alive() for th in threads):
                return "hang"
        for verdict in ("traceback", "hang", "wrong"):
            if verdict in outcomes:
                return verdict
        return "ok"

    return case, f"queue {queue}, {threads_n} threads".encode()


def campaign(name: str, make: Callable[[random.Random], Case], seconds: float,
             rng: random.Random, examples: dict[str, list[str]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    end = time.monotonic() + seconds
    failures = RESULTS / "fuzz_failures"
    while time.monotonic() < end:
        case, payload = make(rng)
        verdict = classify(case)
        counts[verdict] += 1
        if verdict in ("traceback", "hang", "wrong") and len(examples[name]) < 5:
            failures.mkdir(parents=True, exist_ok=True)
            path = failures / f"{name}-{len(examples[name])}.{verdict}"
            path.write_bytes(payload)
            examples[name].append(f"{verdict}: input saved as {path.relative_to(ROOT)}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="per category")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    rng = random.Random(args.seed)
    seeds = corpus()
    befs = []
    for text in seeds:
        if "nqueen" in text:  # its cost grows exponentially with a constant: not a hang
            continue
        if "tfrt_test.usleep" in text:  # sleeps as long as a constant says: not a hang
            continue
        try:
            befs.append(write_bef(compile_mlir(text, "seed.mlir")))
        except Exception:  # noqa: BLE001 - only seeds the writer takes
            continue
    examples: dict[str, list[str]] = {k: [] for k in ("mlir", "bef", "runtime", "concurrency")}
    table = {
        "mlir": campaign("mlir", lambda r: mlir_case(r, seeds), args.seconds, rng, examples),
        "bef": campaign("bef", lambda r: bef_case(r, befs), args.seconds, rng, examples),
        "runtime": campaign("runtime", runtime_case, args.seconds, rng, examples),
        "concurrency": campaign("concurrency", concurrency_case, args.seconds, rng, examples),
    }
    columns = ("ok", "clean error", "traceback", "hang", "wrong")
    print(f"seeds: {len(seeds)} MLIR programs, {len(befs)} BEF files; "
          f"{args.seconds:g} s per category, seed {args.seed}")
    print(f"{'category':12} {'tried':>6} " + " ".join(f"{c:>11}" for c in columns))
    for name, counts in table.items():
        print(f"{name:12} {sum(counts.values()):6} "
              + " ".join(f"{counts.get(c, 0):11}" for c in columns))
    for name, found in examples.items():
        for line in found:
            print(f"{name}: {line}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fuzz.json").write_text(json.dumps({
        "seconds_per_category": args.seconds, "seed": args.seed, "seeds": len(seeds),
        "date": time.strftime("%Y-%m-%d"), "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "counts": {k: dict(v) for k, v in table.items()}, "examples": examples,
    }, indent=2))


if __name__ == "__main__":
    main()
