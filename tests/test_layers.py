"""The dependency direction of the layout holds: core <- connectors, operators <- flows.

import-linter cannot see `connectors/` and `operators/` as `thalweg_bytewax` subpackages
(they are mapped into the namespace at install time), so the layer contract is checked
here over the source files with `ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    package = (
        "thalweg_bytewax." + path.parent.name
        if path.parent.name in ("connectors", "operators")
        else ""
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level and package:
                found.add(package + ("." + node.module if node.module else ""))
            elif node.module:
                found.add(node.module)
    return found


def starts(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


CORE = [
    p
    for p in (ROOT / "thalweg_bytewax").rglob("*.py")
    if "runtime" not in p.parts and p.name != "cli.py"
]
LAYERS = [
    *[
        (p, ("bytewax", "thalweg_bytewax.connectors", "thalweg_bytewax.operators", "flows"))
        for p in CORE
    ],
    *[
        (p, ("thalweg_bytewax.operators", "flows", "thalweg_bytewax.cli"))
        for p in (ROOT / "connectors").glob("*.py")
    ],
    *[
        (p, ("thalweg_bytewax.connectors", "flows", "thalweg_bytewax.cli"))
        for p in (ROOT / "operators").glob("*.py")
    ],
    *[
        (p, ("thalweg_bytewax.connectors", "thalweg_bytewax.operators", "flows"))
        for p in (ROOT / "thalweg_bytewax" / "runtime").glob("*.py")
    ],
]


@pytest.mark.parametrize(
    ("path", "forbidden"), LAYERS, ids=[str(p.relative_to(ROOT)) for p, _ in LAYERS]
)
def test_module_respects_the_layers(path: Path, forbidden: tuple[str, ...]) -> None:
    bad = sorted(m for m in imported_modules(path) if starts(m, forbidden))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}, which its layer must not"
