"""Importing the serving package loads none of its optional dependencies.

uvicorn, grpc, protobuf, TensorFlow, ONNX Runtime and the compiler are imported by the functions
that need them (``run_server``, the gRPC server, the backends' ``load``); a subprocess imports
every serving module and lists what got loaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytfrt.serving

HEAVY = ("uvicorn", "tensorflow", "onnxruntime", "onnx", "keras", "xdsl", "pytfrt.compiler",
         "grpc", "grpc_tools", "google.protobuf")


def test_serving_modules_import_no_optional_dependency() -> None:
    package = Path(pytfrt.serving.__file__).parent
    modules = sorted(f"pytfrt.serving.{p.stem}" for p in package.glob("*.py")
                     if p.stem != "__init__")
    assert "pytfrt.serving.app" in modules and "pytfrt.serving.tf_backend" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r} + ['pytfrt.tools.serve_cmd', 'pytfrt.tools.bench_serve']:\n"
        "    importlib.import_module(m)\n"
        f"print(sorted(h for h in {HEAVY!r} if h in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
