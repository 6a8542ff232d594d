"""The quick start of ``docs/serving.md`` works as written.

The ``sh`` block after ``<!-- example: quickstart -->`` is run with bash -- the same commands,
with the port and the model directory replaced by a free port and a tmp dir, and this Python's
``bin`` directory first on ``PATH`` (for ``python`` and ``pytfrt``).  Its output must be the
output the document shows, and the server must exit with status 0 after the ``kill -TERM``.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "serving.md"


def _blocks() -> tuple[str, str]:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- example: quickstart -->\n```sh\n(.*?)```.*?Output.*?\n```\n(.*?)```",
                      text, re.DOTALL)
    assert match, "docs/serving.md lost its quick-start example"
    return match.group(1), match.group(2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.timeout(600)  # exports a SavedModel, then the server compiles it (TF both times)
def test_quickstart_runs_as_written(tmp_path: Path, tf: Any) -> None:
    script, expected = _blocks()
    if not any(os.access(os.path.join(p, "curl"), os.X_OK)
               for p in os.environ.get("PATH", "").split(os.pathsep)):
        pytest.skip("curl is not installed")
    port, grpc_port = str(_free_port()), str(_free_port())
    script = script.replace("8501", port).replace("8500", grpc_port).replace(
        "/tmp/half_plus_two", str(tmp_path / "hpt"))
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
               XDG_CACHE_HOME=str(tmp_path / "cache"), TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(["bash", "-e", "-c", script + "\necho exit=$?\n"], capture_output=True,
                         text=True, env=env, timeout=300, cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr
    want = expected.replace("8501", port).replace("8500", grpc_port)
    assert out.stdout == want + "exit=0\n", out.stderr
