"""Fused segments of whole-function code (pytfrt.executor.fused_segments) against the unfused
code and NumPy.

Oracles: the same program loaded with ``PYTFRT_FUSE_SEGMENTS=0`` (every kernel its own Python
call) must print the same lines, emit the same diagnostics and return the same values or
errors -- bit for bit, fused kernels compute what the NumPy kernels compute; and an
independent NumPy implementation of the XOR training program.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytfrt.backends.cpu import _ccompile
from pytfrt.executor import load_program
from pytfrt.executor.fused_segments import FusedSegment
from pytfrt.executor.whole_function import FUSE_SWITCH, WholeBEFFunction
from pytfrt.host import DiagnosticCollector, HostContext, ResourceContext
from pytfrt.kernel_libraries import builtin_registry
from pytfrt.mlir import compile_mlir

REPO = Path(__file__).resolve().parents[2]
XOR = REPO / "examples" / "mlp_xor" / "xor_training.mlir"

pytestmark = pytest.mark.timeout(300)


def _run(text: str, name: str, fuse: bool, monkeypatch: pytest.MonkeyPatch, runs: int = 1
         ) -> tuple[list[tuple[str, list[str], list[str]]], list[FusedSegment]]:
    """Run ``name`` ``runs`` times; per run (stdout, diagnostics, results), and the function's
    fused segments."""
    monkeypatch.setenv(FUSE_SWITCH, "1" if fuse else "0")
    diagnostics = DiagnosticCollector()
    host = HostContext("s", builtin_registry(), diagnostic_handler=diagnostics)
    bef = load_program(compile_mlir(text, "test.mlir"), host)
    fn = bef.get_function(name)
    assert isinstance(fn, WholeBEFFunction) and fn.whole_function is not None, fn
    segments = [v for v in fn.whole_function._run.__globals__.values()
                if isinstance(v, FusedSegment)]
    out = []
    for _ in range(runs):
        ctx = host.new_execution_context(ResourceContext())
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            results = fn.execute(ctx, [])
            host.await_values(results)
            host.quiesce()
        shown = [repr(r.get()) if r.is_concrete() else f"error: {r.error.message}"
                 for r in results]
        out.append((stdout.getvalue(), [str(d) for d in diagnostics.diagnostics], shown))
        diagnostics.diagnostics.clear()
    host.shutdown()
    return out, segments


# -- the XOR training program -------------------------------------------------------------------


def _numpy_xor(steps: int) -> tuple[list[str], np.ndarray]:
    """The program's maths in NumPy (float32): the progress lines and the final prediction."""
    f = np.float32
    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], f)
    y = np.array([[0], [1], [1], [0]], f)
    wh = np.array([[0.27, -0.46], [-0.92, -0.97]], f)
    wo = np.array([[0.63], [0.83]], f)
    bh, bo, lr = np.zeros(2, f), np.zeros(1, f), f(8.0)

    def forward() -> tuple[np.ndarray, np.ndarray]:
        h = 1 / (1 + np.exp(-(x @ wh + bh)))
        return h, 1 / (1 + np.exp(-(h @ wo + bo)))

    lines = []
    for step in range(1, steps + 1):
        h, o = forward()
        if step % 200 == 0:
            lines.append(f"step {step}: loss = {float(np.mean((o - y) ** 2)):f}")
        dz_o = (o - o * o) * (o - y)
        dh = dz_o @ wo.T
        wo = wo + f(-2.0) * (h.T @ dz_o)
        bo = bo - dz_o.mean(axis=0) * lr
        dz_h = (h - h * h) * dh
        wh = wh + f(-2.0) * (x.T @ dz_h)
        bh = bh - dz_h.mean(axis=0) * lr
    return lines, forward()[1].reshape(-1)


def test_xor_fused_equals_unfused_and_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    text = XOR.read_text().replace("tfrt.constant.i32 2000", "tfrt.constant.i32 400")
    fused, segments = _run(text, "xor_training", True, monkeypatch, runs=3)
    unfused, none = _run(text, "xor_training", False, monkeypatch)
    assert none == [] and segments
    # the loop body's segment compiled (third step of run 1) and ran
    assert any(s.hits > 2 * 400 for s in segments)
    for run in fused:
        assert run == unfused[0]
    stdout = unfused[0][0]
    lines, prediction = _numpy_xor(400)
    printed = [line for line in stdout.splitlines() if line.startswith("step ")]
    assert [line.split("= ")[0] for line in printed] == [line.split("= ")[0] for line in lines]
    np.testing.assert_allclose([float(line.split("= ")[1]) for line in printed],
                               [float(line.split("= ")[1]) for line in lines], rtol=1e-4)
    values = re.search(r"values = \[(.*)\]", stdout)
    assert values is not None
    np.testing.assert_allclose([float(v) for v in values.group(1).split(",")], prediction,
                               rtol=1e-4)


def test_seed_program_runs_fused_without_numba_or_scipy(tmp_path: Path) -> None:
    """The seed program as run (``bef_executor``, default flags) in a fresh process: its loop
    runs as compiled C (the segment hits), it prints what the unfused run prints, and the
    process never imports Numba or SciPy (the point of compiling segments with the C
    compiler into the on-disk cache)."""
    program = tmp_path / "xor.mlir"
    program.write_text(XOR.read_text().replace("tfrt.constant.i32 2000", "tfrt.constant.i32 60"))
    code = (
        "import sys, io, contextlib\n"
        "from pytfrt.executor import fused_segments\n"
        "from pytfrt.tools import bef_executor\n"
        "made = []\n"
        "init = fused_segments.FusedSegment.__init__\n"
        "def spy(self, *a, **k):\n"
        "    init(self, *a, **k); made.append(self)\n"
        "fused_segments.FusedSegment.__init__ = spy\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    status = bef_executor.main(sys.argv[1:])\n"
        "print(out.getvalue())\n"
        "print('HITS', sum(s.hits for s in made))\n"
        "print('LOADED', sorted(m for m in ('numba', 'scipy', 'llvmlite') if m in sys.modules))\n"
        "sys.exit(status)\n")
    env = {**os.environ, "PYTFRT_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "cache").mkdir(mode=0o700)
    runs = [subprocess.run([sys.executable, "-c", code, str(program)], capture_output=True,
                           text=True, env=env, timeout=240) for _ in range(2)]
    env["PYTFRT_FUSE_SEGMENTS"] = "0"
    ref = subprocess.run([sys.executable, "-c", code, str(program)], capture_output=True,
                         text=True, env=env, timeout=240)
    for run in (*runs, ref):
        assert run.returncode == 0, run.stderr
        assert "LOADED []" in run.stdout, run.stdout
    # cold cache (compiles after two unfused runs) and warm cache (loads the shared object)
    for run in runs:
        assert "HITS 58" in run.stdout, run.stdout
        assert run.stdout.split("HITS")[0] == ref.stdout.split("HITS")[0]
    assert "correct: " in ref.stdout and "HITS 0" in ref.stdout
    assert any(p.suffix == ".so" for p in (tmp_path / "cache" / "graphs").iterdir())


def test_without_a_c_compiler_segments_stay_unfused(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    """No C compiler (``$CC`` names a missing program, empty cache): every run is the unfused
    code, with the same output."""
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("PYTFRT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_ccompile, "COMPILE_AFTER", 0)
    text = XOR.read_text().replace("tfrt.constant.i32 2000", "tfrt.constant.i32 20")
    fused, segments = _run(text, "xor_training", True, monkeypatch)
    unfused, _ = _run(text, "xor_training", False, monkeypatch)
    assert segments and all(s.hits == 0 for s in segments)
    assert any(s.failed for s in segments)
    assert fused == unfused


# -- errors inside a segment ---------------------------------------------------------------------

_ERROR_PROGRAM = """
func.func @main() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 3 : i64]
  %ch1 = tfrt_dht.fill_tensor_with_constant.f32 %a, %ch0 0.5 : f32
  %b = tfrt_dht.create_uninitialized_tensor.f32.2 [SHAPE]
  %ch2 = tfrt_dht.fill_tensor_with_constant.f32 %b, %ch1 FILL : f32
  %c = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 3 : i64]
  %ch3 = tfrt_dht.fill_tensor_with_constant.f32 %c, %ch2 1.0 : f32
  %n = tfrt.constant.i32 4
  %r:4 = tfrt.repeat.i32 %n, %ch3, %a, %b, %c
      : !tfrt.chain, !t.tensor, !t.tensor, !t.tensor {
    %one = tfrt.constant.f32 1.0
    %k1 = "mlp.multiply_inplace.f32"(%a, %c, %ch3)
        : (!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain
    %k2 = "eigen.matmul.f32"(%one, %a, %b, %one, %c, %k1)
        : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
    %k3 = "sigmoid_inplace.f32"(%c, %k2) : (!t.tensor, !tfrt.chain) -> !tfrt.chain
    tfrt.return %k3, %a, %b, %c : !tfrt.chain, !t.tensor, !t.tensor, !t.tensor
  }
  %p = tfrt_dht.print_tensor %c, %r#0
  tfrt.return %p : !tfrt.chain
}
"""


@pytest.mark.parametrize("shape", ["3 : i64, 3 : i64", "2 : i64, 3 : i64"])
def test_error_inside_a_segment_is_the_unfused_error(monkeypatch: pytest.MonkeyPatch,
                                                      shape: str) -> None:
    """[3, 3] is valid (the segment runs fused from its first run); [2, 3] makes the matmul
    fail after the multiply in every iteration: the fused check fails before anything is
    mutated, and the unfused code reports the error exactly as without fusion."""
    monkeypatch.setattr(_ccompile, "COMPILE_AFTER", 0)
    text = _ERROR_PROGRAM.replace("SHAPE", shape).replace("FILL", "2.0")
    fused, segments = _run(text, "main", True, monkeypatch, runs=2)
    unfused, _ = _run(text, "main", False, monkeypatch)
    assert fused[0] == unfused[0] and fused[1] == unfused[0]
    assert len(segments) == 1
    if shape.startswith("3"):
        assert segments[0].hits == 8 and not unfused[0][1]
    else:
        assert segments[0].hits == 0 and len(unfused[0][1]) == 1, unfused


def test_numpy_raising_on_overflow_keeps_the_segment_unfused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``np.errstate(over="raise")`` the sigmoid's ``exp`` overflows with an error: the
    segment (which calls NumPy's ``exp`` back) must not run fused, so the error is the
    unfused one; with the default error state the same program runs fused."""
    monkeypatch.setattr(_ccompile, "COMPILE_AFTER", 0)
    text = _ERROR_PROGRAM.replace("SHAPE", "3 : i64, 3 : i64").replace("FILL", "-100.0")
    with np.errstate(over="raise"):
        fused, segments = _run(text, "main", True, monkeypatch)
        unfused, _ = _run(text, "main", False, monkeypatch)
    assert fused == unfused and "overflow" in " ".join(unfused[0][1])
    assert segments[0].hits == 0
    with np.errstate(over="ignore"):
        fused, segments = _run(text, "main", True, monkeypatch)
        unfused, _ = _run(text, "main", False, monkeypatch)
    assert fused == unfused and not unfused[0][1] and segments[0].hits == 4


# -- random kernel chains --------------------------------------------------------------------

_SHAPES = [(2, 2), (2, 3), (3, 2), (1, 2), (2, 1)]
_LINEAR = [(2,), (1,), (3,)]


_T2 = "(!t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain"
_KERNELS = {
    "mul": '{out} = "mlp.multiply_inplace.f32"({a}, {b}, {ch}) : ' + _T2,
    "sub": '{out} = "tfrt_test.subtract_inplace.f32"({a}, {b}, {ch}) : ' + _T2,
    "sig": '{out} = "sigmoid_inplace.f32"({a}, {ch}) : (!t.tensor, !tfrt.chain) -> !tfrt.chain',
    "sgrad": '{out} = "sigmoid_grad_inplace.f32"({a}, {b}, {ch}) : ' + _T2,
    "tr": '{out} = "tfrt_test.tensor_transpose.f32"({a}, {b}, {ch}) : ' + _T2,
    "mean": '{out} = "tfrt_test.mean_axis_zero.f32"({a}, {b}, {ch}) : ' + _T2,
    "mm": '{out} = "eigen.matmul.f32"(%s, {a}, {b}, %one, {c}, {ch}) : '
          "(f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain",
    "gd": '{out} = "tfrt_test.gradient_descent.f32"({a}, {b}, {c}, {ch}) : '
          "(!t.tensor, !t.tensor, !t.tensor, !tfrt.chain) -> !tfrt.chain",
    # the loss of two tensors, printed by a kernel that sees only scalars (deferred in the
    # fused path)
    "loss": '%l{j} = "mlp.mse_loss.f32"({a}, {b}, {ch}) : '
            "(!t.tensor, !t.tensor, !tfrt.chain) -> f32\n"
            '    {out} = "mlp.print_progress"(%step, %l{j}, {ch}) : '
            "(i32, f32, !tfrt.chain) -> !tfrt.chain",
    # integer kernels (fused too), one dividing by %d, which may be zero
    "ints": '%a{j} = tfrt.add.i32 %step, %step\n'
            '    %q{j}, %m{j} = tfrt.div.i32 %a{j}, %d\n'
            '    %e{j} = tfrt.equal.i32 %m{j}, %step\n'
            '    {out} = "mlp.print_progress"(%q{j}, %s, {ch}) : '
            "(i32, f32, !tfrt.chain) -> !tfrt.chain",
}
"""Kernel templates of the random programs."""


@st.composite
def _programs(draw: Any) -> str:
    """A loop over random tensor kernels on a few tensors of random (often unfit) shapes."""
    shapes = [draw(st.sampled_from(_SHAPES)) for _ in range(3)] + \
        [draw(st.sampled_from(_LINEAR)) for _ in range(2)]
    lines = ["func.func @main() -> !tfrt.chain {", "  %ch = tfrt.new.chain"]
    for i, shp in enumerate(shapes):
        dims = ", ".join(f"{d} : i64" for d in shp)
        vals = ", ".join(f"{draw(st.floats(-2, 2, width=32)):.4f} : f32"
                         for _ in range(int(np.prod(shp))))
        lines.append(f"  %t{i} = tfrt_dht.create_uninitialized_tensor.f32.{len(shp)} [{dims}]")
        lines.append(f"  %i{i} = tfrt_dht.set_tensor_with_constant_values.f32 %t{i}, %ch [{vals}]")
    n = len(shapes)
    ready = ", ".join(f"%i{i}" for i in range(n))
    lines.append(f"  %ready = tfrt.merge.chains {ready} : "
                 + ", ".join(["!tfrt.chain"] * n))
    lines.append("  %n = tfrt.constant.i32 3")
    ts = ", ".join(f"%t{i}" for i in range(n))
    types = ", ".join(["!t.tensor"] * n)
    lines.append(f"  %r:{n + 1} = tfrt.repeat.i32 %n, %ready, {ts} : !tfrt.chain, {types} {{")
    lines.append(f"    %s = tfrt.constant.f32 {draw(st.sampled_from(['1.0', '-0.5', '0.0']))}")
    lines.append("    %one = tfrt.constant.f32 1.0")
    lines.append("    %step = tfrt.constant.i32 7")
    lines.append(f"    %d = tfrt.constant.i32 {draw(st.sampled_from([3, 0, -2]))}")
    chain = "%ready"
    for j, op in enumerate(draw(st.lists(st.sampled_from(sorted(_KERNELS)), min_size=1,
                                         max_size=7))):
        a, b, c = (f"%t{draw(st.integers(0, n - 1))}" for _ in range(3))
        out = f"%k{j}"
        lines.append("    " + _KERNELS[op].format(out=out, a=a, b=b, c=c, ch=chain, j=j))
        chain = out
    lines.append(f"    tfrt.return {chain}, {ts} : !tfrt.chain, {types}")
    lines.append("  }")
    prev = "%r#0"
    for i in range(n):
        lines.append(f"  %p{i} = tfrt_dht.print_tensor %r#{i + 1}, {prev}")
        prev = f"%p{i}"
    lines.append(f"  tfrt.return {prev} : !tfrt.chain")
    lines.append("}")
    return "\n".join(lines) + "\n"


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=_programs())
def test_random_kernel_chains_fused_equal_unfused(monkeypatch: pytest.MonkeyPatch,
                                                  text: str) -> None:
    monkeypatch.setattr(_ccompile, "COMPILE_AFTER", 0)
    fused, _ = _run(text, "main", True, monkeypatch, runs=2)
    unfused, _ = _run(text, "main", False, monkeypatch)
    assert fused[0] == unfused[0], text
    assert fused[1] == unfused[0], text


def test_a_corrupt_cached_segment_is_built_again(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """A shared object in the kernel cache that does not load (here: garbage under the name the
    segment's module would have) is compiled again; the run is fused and prints what the
    unfused run prints."""
    monkeypatch.setenv("PYTFRT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "cc")  # a module name of its own (the name covers $CC)
    monkeypatch.setattr(_ccompile, "COMPILE_AFTER", 0)
    text = XOR.read_text().replace("tfrt.constant.i32 2000", "tfrt.constant.i32 20")
    real_extension = _ccompile.extension
    planted: list[Path] = []

    def plant_then_build(source: str, name: str, *args: Any) -> Any:
        d = _ccompile.cache_dir()
        assert d is not None
        path = d / f"{name}.so"
        if name not in _ccompile._loaded and not path.exists():
            path.write_bytes(b"not an ELF file")
            planted.append(path)
        return real_extension(source, name, *args)

    monkeypatch.setattr(_ccompile, "extension", plant_then_build)
    fused, segments = _run(text, "xor_training", True, monkeypatch)
    unfused, _ = _run(text, "xor_training", False, monkeypatch)
    assert planted and all(p.read_bytes()[:4] == b"\x7fELF" for p in planted)
    assert any(s.hits > 0 for s in segments)
    assert fused == unfused
