"""docs/architecture.md names a row for every capability folder of the package."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "thalweg_bytewax"


def test_every_package_folder_has_a_row_in_the_capability_map() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = set(re.findall(r"`thalweg_bytewax/([a-z_]+)/`", text))
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert folders - rows == set(), "add a row to docs/architecture.md for each"
    assert rows - folders == set(), "docs/architecture.md names folders the package lacks"
