"""``docs/ops.md``'s TensorFlow section is exactly what the TF op mapping table generates.

Regenerate it with ``python -m pytfrt.compiler.frontends.tf_registry`` after changing a converter.
"""

from __future__ import annotations

from pathlib import Path

from pytfrt.compiler.frontends.tf_registry import load_all, ops_markdown

DOC = Path(__file__).resolve().parents[3] / "docs" / "ops.md"


def test_doc_matches_table() -> None:
    text = DOC.read_text()
    section = ops_markdown()
    assert section in text, "docs/ops.md is out of date: regenerate its TensorFlow section"
    for name in load_all():
        assert f"| `{name}` |" in section


def test_table_converters_are_registered_once() -> None:
    table = load_all()
    assert len(table) > 150
    for name, entry in table.items():
        assert entry.name == name and callable(entry.convert) and entry.tg
