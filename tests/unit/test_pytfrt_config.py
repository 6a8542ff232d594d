"""``pytfrt.config``: one table of the ``PYTFRT_*`` switches, the only reader of them.

Checks that every ``PYTFRT_*`` name in ``src/`` is a switch of the table, that no module but
``pytfrt/config.py`` reads one from ``os.environ``, that ``docs/config.md`` lists exactly the
table's switches, and how values parse (defaults, the accepted spellings, errors), against the
switches' documented meaning.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytfrt import config

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "pytfrt"
NAME = re.compile(r"\bPYTFRT_[A-Z][A-Z0-9_]*\b")
READ = re.compile(r"(environ\.get\(|environ\[|getenv\()\s*[\"']PYTFRT_")


def _sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_switch_named_in_the_source_is_in_the_table() -> None:
    named = {m for p in _sources() if p.name != "config.py" for m in NAME.findall(p.read_text())}
    assert named - set(config.SWITCHES) == set()
    assert set(config.SWITCHES) - named == set()  # no stale entry


def test_only_the_config_module_reads_the_environment_for_a_switch() -> None:
    readers = [f"{p.relative_to(ROOT)}:{n}" for p in _sources() if p.name != "config.py"
               for n, line in enumerate(p.read_text().splitlines(), 1) if READ.search(line)]
    assert readers == []


def test_the_checker_sees_a_planted_read(tmp_path: Path) -> None:
    assert READ.search('x = os.environ.get("PYTFRT_GEMM", "")')
    assert READ.search("os.environ['PYTFRT_CONV']")
    assert not READ.search('config.choice("PYTFRT_GEMM")')


def test_docs_list_exactly_the_switches() -> None:
    doc = (ROOT / "docs" / "config.md").read_text()
    rows = set(re.findall(r"^\| `(PYTFRT_[A-Z0-9_]+)` \|", doc, re.M))
    assert rows == set(config.SWITCHES)


@pytest.mark.parametrize(("raw", "want"), [
    (None, True), ("", True), ("1", True), ("on", True), ("Yes", True), (" TRUE ", True),
    ("0", False), ("off", False), ("no", False), ("False", False),
])
def test_flags(monkeypatch: pytest.MonkeyPatch, raw: str | None, want: bool) -> None:
    if raw is None:
        monkeypatch.delenv("PYTFRT_FUSE_SEGMENTS", raising=False)
    else:
        monkeypatch.setenv("PYTFRT_FUSE_SEGMENTS", raw)
    assert config.flag("PYTFRT_FUSE_SEGMENTS") is want


def test_defaults_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in config.SWITCHES:
        monkeypatch.delenv(name, raising=False)
    assert config.flag("PYTFRT_WHOLE_FUNCTION") is True
    assert config.flag("PYTFRT_NO_C_EAGER") is False
    assert config.integer("PYTFRT_NUM_THREADS") is None
    assert config.integer("PYTFRT_JSON_SPLIT_BYTES") == 256 * 1024
    assert config.choice("PYTFRT_GEMM") == "onednn"
    assert config.text("PYTFRT_CACHE_DIR") is None


def test_values_parse_and_bad_values_name_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTFRT_NUM_THREADS", "3")
    assert config.integer("PYTFRT_NUM_THREADS") == 3
    monkeypatch.setenv("PYTFRT_GEMM", "NumPy")
    assert config.choice("PYTFRT_GEMM") == "numpy"
    monkeypatch.setenv("PYTFRT_CACHE_DIR", " /tmp/x ")
    assert config.text("PYTFRT_CACHE_DIR") == "/tmp/x"
    for name, raw, accepts in [
        ("PYTFRT_FUSE_SEGMENTS", "maybe", "1/0, true/false"),
        ("PYTFRT_NUM_THREADS", "0", "positive integer"),
        ("PYTFRT_NUM_THREADS", "two", "positive integer"),
        ("PYTFRT_CONV", "mkl", "onednn, builtin"),
    ]:
        monkeypatch.setenv(name, raw)
        with pytest.raises(config.ConfigError, match=f"{name}={raw!r}: expected .*{accepts}"):
            getattr(config, {"flag": "flag", "int": "integer", "choice": "choice"}[
                config.SWITCHES[name].kind])(name)


def test_unknown_switch_or_wrong_kind_is_a_programming_error() -> None:
    with pytest.raises(KeyError, match="PYTFRT_NOPE is not a pytfrt switch"):
        config.flag("PYTFRT_NOPE")
    with pytest.raises(TypeError, match="choice switch, not flag"):
        config.flag("PYTFRT_GEMM")


def test_the_fuse_switch_reaches_the_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytfrt.executor import whole_function

    monkeypatch.setenv("PYTFRT_WHOLE_FUNCTION", "off")
    assert whole_function.enabled_by_default() is False
    monkeypatch.setenv("PYTFRT_WHOLE_FUNCTION", "yes")
    assert whole_function.enabled_by_default() is True
    monkeypatch.setenv("PYTFRT_FUSE_SEGMENTS", "false")
    assert whole_function.fuse_by_default() is False
