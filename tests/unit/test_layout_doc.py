"""docs/layout.md and the layering test's table must agree.

The "may import" column of every row naming one package with a list of packages is compared
with ``ALLOWED`` in ``tests/unit/test_layering.py`` (``support`` may be left implicit in the
document).  Rows whose column is prose ("the runtime layers", "everything") are not compared.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_ROW = re.compile(r"^\|\s*`([a-z_.]+)`\s*\|.*\|\s*([^|]+?)\s*\|\s*$")


def _allowed() -> dict[str, set[str]]:
    import test_layering  # tests/unit is on the path (pytest's rootdir insertion)

    return test_layering.ALLOWED


def _doc_rows(layers: set[str]) -> dict[str, set[str]]:
    rows: dict[str, set[str]] = {}
    for line in (ROOT / "docs" / "layout.md").read_text().splitlines():
        m = _ROW.match(line)
        if m is None:
            continue
        layer = m.group(1).split(".")[0]
        column = m.group(2).strip()
        if column == "stdlib":
            rows[layer] = set()
            continue
        names = [n.strip().strip("`") for n in column.split(",")]
        if all(n in layers for n in names):  # a list of packages, not prose
            rows[layer] = set(names)
    return rows


def test_layout_doc_matches_layering_table() -> None:
    allowed = _allowed()
    rows = _doc_rows(set(allowed) | {"support"})
    assert len(rows) >= 8, "the table of docs/layout.md was not found"
    mismatches = {
        layer: (sorted(doc), sorted(allowed[layer] - {"support"}))
        for layer, doc in rows.items()
        if layer in allowed and doc - {"support"} != allowed[layer] - {"support"}
    }
    assert not mismatches, (
        "docs/layout.md disagrees with tests/unit/test_layering.py "
        f"(layer: (document, test)): {mismatches}"
    )
