"""What a run imports: a program that needs no Numba never loads it (nor NumPy).

``bef_executor`` on a trivial program (``tfrt.*`` kernels only), as a ``.bef`` and as a
``.mlir``, in a fresh interpreter: the module set afterwards must not contain Numba, llvmlite or
NumPy.  A program with tensor kernels does load the fused-segment kernels (the CPU backend
provides them through :mod:`pytfrt.host.extensions` when its library is registered), which are
C compiled by the machine's compiler, so it loads neither Numba nor llvmlite, nor ``ml_dtypes``
(bfloat16 only) nor ``hashlib``; the one here also loads NumPy: its kernels are all NumPy-free
ones, but its ``eigen.matmul.f32`` multiplies a tensor by itself, which the NumPy-free C kernel
declines (operands sharing memory), so the NumPy kernel runs it (docs/host.md;
``tests/unit/test_numpy_free.py`` checks a program that stays NumPy-free).
Timings are measured by ``benchmarks/startup.py``, never asserted here.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytfrt.host import extensions
from pytfrt.host.registry import KernelRegistry
from pytfrt.kernel_libraries import BUILTIN_LIBRARIES

TRIVIAL = (Path(__file__).resolve().parents[2] / "examples" / "trivial" / "trivial.mlir"
           ).read_text()
TENSORS = """\
func.func @main() {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.f32 1.0
  %a = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch1 = tfrt_dht.fill_tensor_with_constant.f32 %a, %ch0 2.0 : f32
  %c = tfrt_dht.create_uninitialized_tensor.f32.2 [2 : i64, 2 : i64]
  %ch2 = tfrt_dht.fill_tensor_with_constant.f32 %c, %ch0 0.0 : f32
  %ch3 = tfrt.merge.chains %ch1, %ch2
  %ch4 = "eigen.matmul.f32"(%one, %a, %a, %one, %c, %ch3)
      : (f32, !t.tensor, !t.tensor, f32, !t.tensor, !tfrt.chain) -> !tfrt.chain
  %ch5 = tfrt_dht.print_tensor %c, %ch4
  tfrt.return
}
"""
BF16 = """\
func.func @main() {
  %ch0 = tfrt.new.chain
  %a = tfrt_dht.create_uninitialized_tensor.bf16.1 [2 : i64]
  %ch1 = tfrt_dht.fill_tensor_with_constant.bf16 %a, %ch0 1.5 : bf16
  %ch2 = tfrt_dht.print_tensor %a, %ch1
  tfrt.return
}
"""
HEAVY = ("numba", "llvmlite", "numpy", "ml_dtypes", "hashlib")
"""Modules a run imports only when its program needs them: ``ml_dtypes`` only for bf16, and
``hashlib`` (which loads OpenSSL) never on the way to a cached fused segment."""


def _run(path: Path) -> tuple[str, list[str]]:
    code = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from pytfrt.tools import bef_executor
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = bef_executor.main([{str(path)!r}])
        loaded = sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})
        if "pytfrt.backends.cpu.fusible_kernels" in sys.modules:
            loaded.append("fusible_kernels")
        print(json.dumps([status, out.getvalue(), loaded]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    status, out, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert status == 0, proc.stderr
    return out, loaded


@pytest.fixture(scope="module")
def trivial(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("startup")
    mlir = d / "trivial.mlir"
    mlir.write_text(TRIVIAL)
    bef = d / "trivial.bef"
    from pytfrt.tools import tfrt_translate

    assert tfrt_translate.main(["--mlir-to-bef", str(mlir), "-o", str(bef)]) == 0
    return {"mlir": mlir, "bef": bef}


@pytest.mark.parametrize("kind", ["bef", "mlir"])
def test_a_trivial_program_loads_no_numba_and_no_numpy(trivial: dict[str, Path],
                                                       kind: str) -> None:
    out, loaded = _run(trivial[kind])
    assert "int32 = 42" in out
    assert loaded == []


def test_a_program_with_tensor_kernels_gets_the_fused_segment_kernels(tmp_path: Path) -> None:
    path = tmp_path / "tensors.mlir"
    path.write_text(TENSORS)
    out, loaded = _run(path)
    assert "values = [8.000000e+00, 8.000000e+00, 8.000000e+00, 8.000000e+00]" in out
    assert loaded == ["numpy", "fusible_kernels"]


def test_a_bf16_program_gets_ml_dtypes(tmp_path: Path) -> None:
    path = tmp_path / "bf16.mlir"
    path.write_text(BF16)
    out, loaded = _run(path)
    assert "dtype = bf16" in out
    assert "ml_dtypes" in loaded


def test_extensions_load_once_on_first_use_and_absent_on_import_error() -> None:
    calls: list[int] = []

    def loader() -> object:
        calls.append(1)
        return "kernels"

    name = "test_extension_ok"
    assert extensions.get(name) is None  # nobody provided it
    extensions.provide(name, loader)
    assert calls == []  # providing loads nothing
    assert extensions.get(name) == "kernels"
    assert extensions.get(name) == "kernels"
    assert calls == [1]

    def missing() -> object:
        raise ImportError("no numba")

    extensions.provide("test_extension_missing", missing)
    assert extensions.get("test_extension_missing") is None


@pytest.mark.parametrize("module_name,prefixes", BUILTIN_LIBRARIES,
                         ids=[m for m, _ in BUILTIN_LIBRARIES])
def test_each_builtin_library_defines_only_names_its_prefixes_cover(
        module_name: str, prefixes: tuple[str, ...]) -> None:
    # The lazy registry loads a library when a name with one of its prefixes is looked up:
    # a name outside them would be found only after every library was loaded.
    pytest.importorskip(module_name)
    registry = KernelRegistry()
    registry.add_module(importlib.import_module(module_name))
    stray = [n for n in registry.names() if not n.startswith(prefixes)]
    assert stray == []
