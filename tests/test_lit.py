"""Run the lit suite (tests/lit) from pytest, one pytest test per lit file.

lit runs once per session (in parallel, from the repository root so that paths in programs
resolve as in TFRT) on the lit files whose tests this session selected (all of them in a full
run; ``pytest tests/test_lit.py -k compiler/cli`` runs lit on that one file); each parametrized
test then reports its file's result and lit's output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LIT_DIR = REPO / "tests" / "lit"


def _lit_files() -> list[str]:
    files = []
    for path in sorted(LIT_DIR.rglob("*")):
        if path.suffix in (".mlir", ".test") and "Inputs" not in path.parts:
            files.append(str(path.relative_to(LIT_DIR)))
    return files


@pytest.fixture(scope="session")
def lit_results(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bool, str]]:
    xml = tmp_path_factory.mktemp("lit") / "lit.xml"
    selected = sorted({item.callspec.params["lit_file"] for item in request.session.items
                       if item.originalname == "test_lit" and hasattr(item, "callspec")})
    targets = ([str(LIT_DIR / f) for f in selected]
               if selected and len(selected) < len(_lit_files()) else [str(LIT_DIR)])
    bin_dir = Path(sys.executable).parent
    lit = bin_dir / "lit"
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    jobs = str(max(2, os.cpu_count() or 2))
    subprocess.run(
        [str(lit), "-q", "-j", jobs, f"--xunit-xml-output={xml}", *targets],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1400,
    )
    results: dict[str, tuple[bool, str]] = {}
    if not xml.exists():
        return results
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name", "")
        classname = case.get("classname", "")
        # lit writes classname "pytfrt.<dir with dots>" and name "<file>"
        rel_dir = classname.split(".", 1)[1].replace(".", "/") if "." in classname else ""
        rel = f"{rel_dir}/{name}" if rel_dir else name
        failure = case.find("failure")
        skipped = case.find("skipped")
        ok = failure is None
        text = failure.text or "" if failure is not None else ""
        if skipped is not None:
            text = "skipped: " + (skipped.get("message") or "")
        results[rel] = (ok, text)
    return results


# The first test also runs the session fixture (the whole lit suite): allow for it.
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("lit_file", _lit_files())
def test_lit(lit_file: str, lit_results: dict[str, tuple[bool, str]]) -> None:
    if lit_file not in lit_results:
        # names with dots in directories are ambiguous in xunit output: match on suffix
        matches = [k for k in lit_results if k.endswith(Path(lit_file).name)]
        assert matches, f"lit did not report {lit_file}"
        key = next(
            (k for k in matches if k.replace("/", ".") == lit_file.replace("/", ".")), matches[0]
        )
    else:
        key = lit_file
    ok, text = lit_results[key]
    if text.startswith("skipped: "):
        pytest.skip(text)
    assert ok, f"lit test {lit_file} failed:\n{text}"
