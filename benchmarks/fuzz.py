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
  another cancels some requests; each result must be its request's answer or ``Cancelled``;
* ``model``   -- hostile saved-model directories (``pytfrt.load``): a small conv + dense model
  (about 2 MB of weights) saved, then damaged -- bytes flipped and files truncated in
  ``model.bef``, ``weights.btf`` and ``manifest.json``, manifest fields replaced or removed
  (huge and negative dims and counts, bad dtypes, paths out of the directory, NUL bytes, deep
  nesting), files replaced by symbolic links (``/dev/zero``, ``/etc/passwd``, each other),
  FIFOs, directories and sparse multi-GiB size bombs.  Each mutant must load and give the
  original output exactly, or fail with ``ModelError``/``InputError``; each case's peak RSS
  above the RSS before it (the kernel's high-water mark, reset per case through
  ``/proc/self/clear_refs``) is compared with the model's size.  Loading
  verifies the SHA-256 digests by default; ``--model-verify both`` also runs every mutant with
  ``verify=False`` (reported separately: without digests a changed weight byte legitimately
  changes the answer, so "wrong" there counts answers that differ, not bugs).

Run: ``.venv/bin/python benchmarks/fuzz.py [--seconds 60] [--seed 1] [--categories ...]
[--model-mutants 700]`` (seconds per category; the model category runs a number of mutants).
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


# -- hostile saved models ------------------------------------------------------------------------

MODEL_FILES = ("model.bef", "weights.btf", "manifest.json")
BAD_VALUES: list[Any] = [
    None, True, -1, 0, 2**31, 2**63, -(2**63), 2**80, 1.5, float("nan"), "", "a\0b", "../model.bef",
    "/etc/passwd", "sub/model.bef", "O", "V3", "U1", "<U5", ">f4", "float128", "datetime64",
    "bfloat16", "bool", [], {}, [2**40, 2**40, 2**40], [-1], [[[[[]]]]], ["x"] * 1000,
    {"name": "x", "dtype": "<f4", "shape": [None]},
]


def seed_model(root: Path) -> tuple[Path, Any, Any, int]:
    """Compile and save the seed model; its directory, input, output and size in bytes."""
    import numpy as np

    from pytfrt.compiler import GraphBuilder
    from pytfrt.compiler.api import compile_module

    rng = np.random.default_rng(5)
    gb = GraphBuilder()
    fn = gb.function("main", inputs=[("image", (None, 8, 8, 3), "f32")])
    (x,) = fn.arguments
    w = rng.standard_normal((3, 3, 3, 8)).astype(np.float32)
    h = fn.op("conv2d", [x, fn.constant(w, name="conv/w")], layout="NHWC", pads=[0, 1, 0, 1],
              strides=[1, 1])
    h = fn.op("reduce_mean", [fn.op("relu", [h])], axes=[1, 2])
    h = fn.op("matmul", [h, fn.constant(rng.standard_normal((8, 512)).astype(np.float32),
                                        name="d1/w")])
    big = rng.standard_normal((512, 1024)).astype(np.float32)
    y = fn.op("matmul", [fn.op("relu", [h]), fn.constant(big, name="d2/w")])
    fn.returns([fn.op("softmax", [y], axis=-1)], names=["probs"])
    model = compile_module(gb.finish())
    d = root / "seed"
    model.save(d)
    xin = rng.standard_normal((3, 8, 8, 3)).astype(np.float32)
    size = sum((d / f).stat().st_size for f in MODEL_FILES)
    return d, xin, np.asarray(model(xin)), size


def _json_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if len(prefix) > 8:  # not into a deeply nested value a mutation made
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            out += _json_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _json_paths(v, (*prefix, i))
    return out


def mutate_model(rng: random.Random, seed: Path, d: Path) -> str:
    """Copy ``seed`` to ``d`` and damage it one way; returns the mutation's description."""
    import shutil

    shutil.copytree(seed, d)
    kind = rng.choices(["flip", "truncate", "manifest", "symlink", "fifo", "special", "bomb"],
                       [30, 10, 30, 8, 5, 4, 5])[0]
    name = rng.choice(MODEL_FILES)
    path = d / name
    if kind == "flip":
        data = bytearray(path.read_bytes())
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= rng.randrange(1, 256)
        path.write_bytes(bytes(data))
        return f"flip {name}"
    if kind == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[:rng.randrange(len(data))])
        return f"truncate {name}"
    if kind == "manifest":
        m = json.loads((d / "manifest.json").read_text())
        for _ in range(rng.randint(1, 2)):
            target = rng.choice(_json_paths(m)[1:])
            parent = m
            for key in target[:-1]:
                parent = parent[key]
            if rng.random() < 0.8:
                value = rng.choice(BAD_VALUES)
                if rng.random() < 0.05:
                    value = [value]
                    for _ in range(rng.choice([100, 5000, 100_000])):
                        value = [value]
                parent[target[-1]] = value
            elif isinstance(parent, dict):
                del parent[target[-1]]
            else:
                parent.pop(target[-1])
        try:
            text = json.dumps(m)
        except RecursionError:
            text = "[" * 100_000 + "]" * 100_000
        (d / "manifest.json").write_text(text)
        return "manifest"
    if kind == "symlink":
        target = rng.choice(["/dev/zero", "/etc/passwd", "/nonexistent", "/tmp", *MODEL_FILES])
        path.unlink()
        os.symlink(target, path)
        return f"symlink {name} -> {target}"
    if kind == "fifo":
        path.unlink()
        os.mkfifo(path)
        return f"fifo {name}"
    if kind == "special":
        path.unlink()
        path.mkdir()
        return f"directory {name}"
    # size bombs: a sparse multi-GiB file, or weights claiming huge dims
    if rng.random() < 0.5:
        with open(path, "r+b") as fh:
            fh.truncate(rng.choice([2**31, 2**33, 2**40 + 1]))
        return f"sparse {name}"
    import struct

    data = bytearray((d / "weights.btf").read_bytes())
    (count,) = struct.unpack_from("<Q", data, 0)
    i = rng.randrange(count)
    (off,) = struct.unpack_from("<Q", data, 8 + 8 * i)
    (rank,) = struct.unpack_from("<Q", data, off)
    if rank:
        struct.pack_into("<Q", data, off + 16, rng.choice([2**32, 2**40, 2**62, 2**64 - 1]))
    (d / "weights.btf").write_bytes(bytes(data))
    return "huge dims"


def model_verdict(d: Path, xin: Any, expected: Any, verify: bool) -> tuple[str, str]:
    """(verdict, detail) of loading ``d`` and calling it on ``xin``."""
    import numpy as np

    import pytfrt
    from pytfrt.model import InputError, ModelError

    signal.alarm(CASE_SECONDS)
    try:
        try:
            model = pytfrt.load(d, verify=verify)
            y = model(xin)
        except (ModelError, InputError):
            return "clean error", ""
        values = list(y.values()) if isinstance(y, dict) else (
            list(y) if isinstance(y, tuple | list) else [y])
        same = len(values) == 1 and np.array_equal(np.asarray(values[0]), expected)
        return ("ok" if same else "wrong"), ""
    except Hang:
        return "hang", ""
    except BaseException as exc:  # noqa: BLE001 - what the campaign looks for
        return "traceback", f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        signal.alarm(0)


def _memory() -> tuple[int, int]:
    """(current RSS, peak RSS since the last :func:`_reset_peak`) in bytes (Linux)."""
    values = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                values[line[:5]] = int(line.split()[1]) * 1024
    return values.get("VmRSS", 0), values.get("VmHWM", 0)


def _reset_peak() -> None:
    """Reset the kernel's peak-RSS mark of this process (``/proc/self/clear_refs``, Linux)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def model_campaign(count: int, rng: random.Random, verify_modes: list[bool],
                   examples: dict[str, list[str]]) -> dict[str, Any]:
    """Run ``count`` mutants per verify mode; counts per mode, and RSS figures."""
    import gc
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="pytfrt-fuzz-model-"))
    try:
        seed, xin, expected, size = seed_model(root)
        model_verdict(seed, xin, expected, True)  # warm-up: imports, the host, caches
        gc.collect()
        _reset_peak()
        base, _ = _memory()
        _, clean_peak = _memory()
        model_verdict(seed, xin, expected, True)
        gc.collect()
        clean_peak = _memory()[1] - base  # what loading and calling the intact model costs
        out: dict[str, Any] = {"model_bytes": size, "clean_load_peak_bytes": clean_peak}
        worst = (0, "")
        for verify in verify_modes:
            counts: Counter[str] = Counter()
            kinds: Counter[str] = Counter()
            key = "model" if verify else "model_noverify"
            for i in range(count):
                d = root / f"m{i}"
                what = mutate_model(rng, seed, d)
                kinds[what.split()[0]] += 1
                gc.collect()
                _reset_peak()
                before, _ = _memory()
                verdict, detail = model_verdict(d, xin, expected, verify)
                gc.collect()
                grew = _memory()[1] - before
                if grew > worst[0]:
                    worst = (grew, what)
                counts[verdict] += 1
                if verdict in ("traceback", "hang") or (verdict == "wrong" and verify):
                    if len(examples.setdefault(key, [])) < 8:
                        examples[key].append(f"{verdict}: {what} {detail}")
                shutil.rmtree(d, ignore_errors=True)
            out[key] = {"counts": dict(counts), "mutations": dict(kinds)}
        out["case_peak_bytes"], out["case_peak_mutation"] = worst
        out["case_peak_vs_model"] = worst[0] / size
        out["rss_drift_bytes"] = _memory()[0] - base
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
    parser.add_argument("--categories", default="mlir,bef,runtime,concurrency,model",
                        help="comma-separated subset of mlir,bef,runtime,concurrency,model")
    parser.add_argument("--model-mutants", type=int, default=700,
                        help="hostile saved models per verify mode")
    parser.add_argument("--model-verify", choices=("on", "both"), default="both",
                        help="load with digests verified only, or also with verify=False")
    parser.add_argument("--out", default="fuzz.json", help="results file in benchmarks/results")
    args = parser.parse_args()
    chosen = set(args.categories.split(","))
    signal.signal(signal.SIGALRM, _alarm)
    rng = random.Random(args.seed)
    seeds = corpus() if chosen & {"mlir", "bef"} else []
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
    makers: dict[str, Callable[[random.Random], Case]] = {
        "mlir": lambda r: mlir_case(r, seeds), "bef": lambda r: bef_case(r, befs),
        "runtime": runtime_case, "concurrency": concurrency_case,
    }
    table = {name: campaign(name, make, args.seconds, rng, examples)
             for name, make in makers.items() if name in chosen}
    model_info: dict[str, Any] = {}
    if "model" in chosen:
        modes = [True] if args.model_verify == "on" else [True, False]
        model_info = model_campaign(args.model_mutants, rng, modes, examples)
        for key in ("model", "model_noverify"):
            if key in model_info:
                table[key] = Counter(model_info[key]["counts"])
    columns = ("ok", "clean error", "traceback", "hang", "wrong")
    print(f"seeds: {len(seeds)} MLIR programs, {len(befs)} BEF files; "
          f"{args.seconds:g} s per category, seed {args.seed}")
    print(f"{'category':12} {'tried':>6} " + " ".join(f"{c:>11}" for c in columns))
    for name, counts in table.items():
        print(f"{name:12} {sum(counts.values()):6} "
              + " ".join(f"{counts.get(c, 0):11}" for c in columns))
    if model_info:
        mib = 2**20
        print(f"model: {model_info['model_bytes'] / mib:.2f} MiB; the intact model's load and "
              f"call raise peak RSS by {model_info['clean_load_peak_bytes'] / mib:.2f} MiB; "
              f"the worst mutant by {model_info['case_peak_bytes'] / mib:.2f} MiB "
              f"({model_info['case_peak_vs_model']:.2f}x the model's size: "
              f"{model_info['case_peak_mutation']}); RSS drift over the campaign "
              f"{model_info['rss_drift_bytes'] / mib:.1f} MiB")
    for name, found in examples.items():
        for line in found:
            print(f"{name}: {line}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps({
        "seconds_per_category": args.seconds, "seed": args.seed, "seeds": len(seeds),
        "date": time.strftime("%Y-%m-%d"), "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "counts": {k: dict(v) for k, v in table.items()}, "examples": examples,
        "model": model_info,
    }, indent=2))


if __name__ == "__main__":
    main()
