"""docs/guide.md, run as written: every code block, in order, in one temporary directory.

``python`` blocks run in one namespace (in this process), ``sh`` blocks in ``bash -e`` with the
venv's tools first on PATH, and a ``text`` block right after a ``sh`` block is that block's
expected output (``...`` matches any text within a line).  The guide's ports 8501 (REST) and
8500 (gRPC) are replaced by free ones.  What the blocks check (outputs against Keras, NumPy and
finite differences) is in the guide itself, as asserts a reader can see.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"
BLOCK = re.compile(r"^```(python|sh|text)\n(.*?)^```$", re.S | re.M)


def blocks() -> list[tuple[str, str, int]]:
    """(language, code, first line number) of every fenced block of the guide."""
    text = GUIDE.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 2)
            for m in BLOCK.finditer(text)]


def _free_ports(n: int) -> list[str]:
    """``n`` distinct free loopback ports (all bound at once, then released)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [str(s.getsockname()[1]) for s in socks]


def _matches(expected: str, actual: str) -> bool:
    """Every expected line matches the actual line at the same place (``...``: any text)."""
    want = expected.strip().splitlines()
    got = actual.strip().splitlines()
    if len(want) != len(got):
        return False
    return all(re.fullmatch(".*".join(re.escape(p) for p in w.split("...")), g.strip())
               for w, g in zip(want, got, strict=True))


def test_blocks_are_found() -> None:
    kinds = [k for k, _, _ in blocks()]
    assert kinds.count("python") >= 8 and kinds.count("sh") >= 2


@pytest.mark.timeout(900)
def test_guide_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    pytest.importorskip("tensorflow")
    pytest.importorskip("onnx")
    pytest.importorskip("uvicorn")
    monkeypatch.chdir(tmp_path)
    rest_port, grpc_port = _free_ports(2)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               TF_CPP_MIN_LOG_LEVEL="2")
    namespace: dict[str, Any] = {"__name__": "guide"}
    last_output: str | None = None
    for kind, code, line in blocks():
        where = f"docs/guide.md:{line}"
        if kind == "python":
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the guide's code
            last_output = None
        elif kind == "sh":
            script = code.replace("8501", rest_port).replace("8500", grpc_port)
            run = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=600)
            log = tmp_path / "server.log"
            assert run.returncode == 0, (
                f"{where} failed ({run.returncode}):\n{run.stdout}\n{run.stderr}"
                + (f"\nserver log:\n{log.read_text()}" if log.exists() else ""))
            last_output = run.stdout
            # pytfrt's commands import TensorFlow without its start-up lines on stderr.
            assert "absl::InitializeLog" not in run.stderr, f"{where}:\n{run.stderr}"
        else:
            assert last_output is not None, f"{where}: a text block must follow a sh block"
            assert _matches(code, last_output), (
                f"{where}: the output differs from the guide\n--- guide\n{code}"
                f"--- actual\n{last_output}")
            last_output = None
